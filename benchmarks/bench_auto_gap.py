"""What ``method="auto"`` costs at the gap the user asks, against the policy it replaced (a hidden
1e-10 gap asked of the Hessian-free and ``sqp`` routes below P = 1,000), interleaved in one process.

"before" is that policy emulated in this process: ``auto`` gives the Hessian-free route
``tol=1e-10`` (its iterations capped at 4 x (15 + P/11)) and the ``sqp`` route its own default
``tol`` (1e-10), and prices the Hessian-free route at the 1e-10 count; "after" is the package as it
is. For each ``shape:kind`` (``bench_grid.py``'s problems) every repeat times, in turn, before and
after at the default ``gap_tol`` and at ``gap_tol=1e-8``: construction and ``solve()``, CPU time
(``time.process_time``, robust to a shared machine's load), medians over the repeats (one warm-up
round dropped). Prints the route, the iterations and the certified gap of each.

Run: ``cd benchmarks; OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench_auto_gap.py
--cases 1kx50:erm,10kx50x10:erm,1kx15:chi2 [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench_grid import _pooled, grid_federation, grid_problem
from drflmodel.problems.minmax import dro, lagrangian_sqp, route_costs

BEFORE_TOL = 1e-10


def _before_iterations(structure) -> float:
    return 15.0 + structure.dim / 11.0 if structure.dim < 1000 else 40.0


def _before_options(self, structure) -> dict:
    return {} if structure.dim >= 1000 else {"tol": BEFORE_TOL, "max_iterations": int(4 * _before_iterations(structure))}


class Policy:
    """Switch the routes' ``auto`` options and the Hessian-free count between before and after."""

    def __init__(self):
        self.free = type(dro._hessian_free_route())
        self.sqp = lagrangian_sqp.LagrangianSQPRoute
        self.after = (self.free.auto_options, self.sqp.auto_options, route_costs.hessian_free_iterations)

    def set(self, before: bool) -> None:
        if before:
            self.free.auto_options, self.sqp.auto_options = _before_options, lambda self, structure: {}
            route_costs.hessian_free_iterations = _before_iterations
        else:
            self.free.auto_options, self.sqp.auto_options, route_costs.hessian_free_iterations = self.after


def run_case(shape: str, kind: str, repeats: int, policy: Policy) -> list[str]:
    fed = grid_federation(shape)
    pooled = _pooled(fed)
    modes = [("before", True, {}), ("after", False, {}), ("before", True, {"gap_tol": 1e-8}),
             ("after", False, {"gap_tol": 1e-8})]
    seconds = {i: [] for i in range(len(modes))}
    last = {}
    try:
        for r in range(repeats + 1):
            for i, (_, before, opts) in enumerate(modes):
                policy.set(before)
                t = time.process_time()
                sol = grid_problem(fed, kind, pooled).solve(**opts)
                if r:
                    seconds[i].append(time.process_time() - t)
                last[i] = sol
    finally:
        policy.set(False)
    lines = []
    for i, (name, _, opts) in enumerate(modes):
        sol = last[i]
        lines.append(f"{shape} {kind} {name:6s} gap_tol={opts.get('gap_tol', 1e-6):.0e} "
                     f"{np.median(seconds[i]) * 1e3:8.2f} ms CPU  {sol.info['method']:12s} "
                     f"it={sol.info.get('iterations')} status={sol.status} gap={sol.relative_gap:.1e}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="1kx50:erm,10kx50:erm,10kx50x10:erm,digits:erm,1kx15:chi2,10kx50:chi2",
                    help="comma-separated shape:kind (bench_grid.py's shapes; kinds erm, chi2, cvar, afl)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats (medians)")
    args = ap.parse_args()
    policy = Policy()
    for case in args.cases.split(","):
        shape, kind = case.split(":")
        for line in run_case(shape, kind, args.repeats, policy):
            print(line, flush=True)


if __name__ == "__main__":
    main()
