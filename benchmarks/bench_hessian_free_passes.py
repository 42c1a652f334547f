"""The Hessian-free route's own cost on ERM: ``solve(method="hessian_free", gap_tol=g)`` (the route's
``tol`` is then ``g``) against the ERM baselines of ``bench_grid.py`` (scikit-learn's lbfgs,
newton-cg, newton-cholesky at ``tol=1e-8`` and SciPy's L-BFGS-B, ``_scale_baselines``), with the
data passes each certified solve made.

**Passes** are counted by wrapping the product helpers the matrix-free objectives call
(``drflmodel._float64_products`` and ``drflmodel._float32_products``: ``times`` is a forward pass
:math:`XW`, ``t_times`` a backward pass :math:`X^\\top R`) on blocks of more than 500 rows; the route's
``info`` gives its iterations, evaluations and certificate attempts.

**Timing.** Each repeat times, in turn in this one process, the certified solve at each ``--gaps``
value (building ``FederatedDRO(...)`` and ``solve()``) and each baseline; the ratios are of medians,
certified / the fastest baseline. Set ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``. To compare two
trees, run this script with each on ``PYTHONPATH`` in turn (alternating) and compare the ratios.

Run: ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_hessian_free_passes.py
--shapes 10kx50,2kx100,10kx50x10,5kx30x5 --gaps 1e-6,1e-8 --repeats 5``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import drflmodel._float32_products as fp32
import drflmodel._float64_products as fp64
from bench_certified import _pooled
from bench_grid import baselines_once, grid_federation, grid_problem

#: passes counted per product helper in the current solve
PASSES: dict = {}


def _counting(module, name: str) -> None:
    product = getattr(module, name)
    key = ("forward" if name == "times" else "backward") + ("32" if module is fp32 else "")

    def counted(X, *args, **kwargs):
        if X.shape[0] > 500:
            PASSES[key] = PASSES.get(key, 0) + 1
        return product(X, *args, **kwargs)

    setattr(module, name, counted)


for _module in (fp64, fp32):
    _counting(_module, "times")
    _counting(_module, "t_times")


def certified(fed, pooled, gap: float):
    """``(seconds, solution, passes)`` of one certified ERM solve as a user calls it."""
    PASSES.clear()
    t0 = time.perf_counter()
    prob = grid_problem(fed, "erm", pooled)
    sol = prob.solve(method="hessian_free", gap_tol=gap)
    return time.perf_counter() - t0, sol, dict(PASSES)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="10kx50,2kx100,10kx50x10,5kx30x5")
    ap.add_argument("--gaps", default="1e-6,1e-8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--newton-cg-max", type=float, default=2e7, help="largest N x P newton-cg runs on")
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    print("| shape | gap | hessian_free ms | fastest baseline (ms) | ratio | it / ev / cert. attempts | passes fwd+bwd | status |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        fed = grid_federation(shape)
        pooled = _pooled(fed)
        times = {g: [] for g in gaps}
        base: dict = {}
        last = {}
        for _ in range(args.repeats):
            for g in gaps:
                seconds, sol, passes = certified(fed, pooled, g)
                times[g].append(seconds)
                last[g] = (sol, passes)
            prob = grid_problem(fed, "erm", pooled)
            for name, (seconds, _) in baselines_once(fed, "erm", prob, pooled, 0.0, args.newton_cg_max).items():
                base.setdefault(name, []).append(seconds)
        name, fastest = min(((k, float(np.median(v))) for k, v in base.items()), key=lambda kv: kv[1])
        for g in gaps:
            sol, passes = last[g]
            info = sol.info
            mine = float(np.median(times[g]))
            fwd = passes.get("forward", 0) + passes.get("forward32", 0)
            bwd = passes.get("backward", 0) + passes.get("backward32", 0)
            print(f"| {shape} | {g:g} | {1e3 * mine:.2f} | {name} ({1e3 * fastest:.2f}) | {mine / fastest:.2f} | "
                  f"{info['iterations']} / {info['evaluations']} / {info['certificate_attempts']} | {fwd}+{bwd} | "
                  f"{sol.status} |", flush=True)


if __name__ == "__main__":
    main()
