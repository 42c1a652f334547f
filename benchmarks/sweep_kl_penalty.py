"""The KL penalty (tilted risk) on every route against the independent L-BFGS-B reference of
tests/test_kl_penalty_exact.py, over a wider range of tau than the tests: per (classes, tau), the
largest |U - reference| and relative gap over the routes, the largest pairwise |U_a - U_b|, the
largest excess of a lower bound over the exact optimum (the lower end of its 50-digit decimal
interval, tests' ``_exact_tilted_optimum``; > 0 would be a wrong certificate), the float reference
minus the exact optimum, and the seconds per route.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/sweep_kl_penalty.py
"""

import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drflmodel as dm  # noqa: E402
from tests.test_kl_penalty_exact import (ROUTES, _exact_tilted_optimum, _problem, _solve,  # noqa: E402
                                         _tilted_reference)


def main(taus=(0.001, 0.01, 0.1, 1.0, 10.0, 100.0), classes=(2, 3)):
    print("| K | tau | ref slack | ref - exact | max abs(U - ref) | max rel gap | max abs(U_a - U_b) "
          "| max (L - exact) | statuses | max s/route |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for K in classes:
        for tau in taus:
            fed, prob = _problem(K, lambda n: dm.sets.KLPenalty(n, tau))
            ref, slack = _tilted_reference(fed, K, tau)     # the optimum is in [ref - slack, ref] (float)
            low, high = _exact_tilted_optimum(fed, K, tau)  # the optimum is in [low, high], width < 1e-40
            sols, seconds = {}, {}
            for route in ROUTES:
                t = time.perf_counter()
                sols[route] = _solve(prob, route)
                seconds[route] = time.perf_counter() - t
            U = [s.upper_bound for s in sols.values()]
            statuses = sorted({s.status for s in sols.values()})
            print(f"| {K} | {tau:g} | {slack:.0e} | {float(Decimal(ref) - high):.1e} | "
                  f"{max(abs(u - ref) for u in U):.1e} | "
                  f"{max(s.relative_gap for s in sols.values()):.1e} | {max(U) - min(U):.1e} | "
                  f"{max(float(Decimal(s.lower_bound) - low) for s in sols.values()):.1e} | {','.join(statuses)} | "
                  f"{max(seconds.values()):.2f} |")


if __name__ == "__main__":
    main()
