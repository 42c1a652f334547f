"""The KL penalty (tilted risk) on every route against the independent L-BFGS-B reference of
tests/test_kl_penalty_exact.py, over a wider range of tau than the tests: per (classes, tau), the
largest |U - reference| and relative gap over the routes, the largest pairwise |U_a - U_b|, the
largest excess of a lower bound over the reference (> 0 would be a wrong certificate) and the
seconds per route.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/sweep_kl_penalty.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drflmodel as dm  # noqa: E402
from tests.test_kl_penalty_exact import ROUTES, _problem, _solve, _tilted_reference  # noqa: E402


def main(taus=(0.001, 0.01, 0.1, 1.0, 10.0, 100.0)):
    print("| K | tau | ref slack | max abs(U - ref) | max rel gap | max abs(U_a - U_b) | max (L - ref) | statuses "
          "| max s/route |")
    print("|---|---|---|---|---|---|---|---|---|")
    for K in (2, 3):
        for tau in taus:
            fed, prob = _problem(K, lambda n: dm.sets.KLPenalty(n, tau))
            ref, slack = _tilted_reference(fed, K, tau)     # the optimum is in [ref - slack, ref]
            sols, seconds = {}, {}
            for route in ROUTES:
                t = time.perf_counter()
                sols[route] = _solve(prob, route)
                seconds[route] = time.perf_counter() - t
            U = [s.upper_bound for s in sols.values()]
            statuses = sorted({s.status for s in sols.values()})
            print(f"| {K} | {tau:g} | {slack:.0e} | {max(abs(u - ref) for u in U):.1e} | "
                  f"{max(s.relative_gap for s in sols.values()):.1e} | {max(U) - min(U):.1e} | "
                  f"{max(s.lower_bound - ref for s in sols.values()):.1e} | {','.join(statuses)} | "
                  f"{max(seconds.values()):.2f} |")


if __name__ == "__main__":
    main()
