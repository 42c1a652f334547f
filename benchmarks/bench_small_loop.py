"""Small problems in a loop: construction and a certified ``solve()`` per call against scikit-learn's
``LogisticRegression().fit`` per call (issue 41), interleaved call by call in one process.

For each shape (rows x features, one client: ERM; and the chi-square ball over 4 clients) it runs
``--calls`` rounds; each round times, in turn, ``FederatedDRO(...).solve()`` (``method="auto"``, as a
user calls it), ``LogisticRegression().fit`` (scikit-learn's defaults: lbfgs, ``tol=1e-4``, ``C=1``: a
different objective, the per-call cost a user compares with), ``LogisticRegression(C=1/(l2 N),
tol=1e-8)`` with lbfgs and newton-cholesky (the same objective at a matched accuracy), and for the
chi-square row SciPy's L-BFGS-B on its smooth dual (``_scale_baselines.chi2_dual_lbfgs``) and the
``sqp`` route forced (its weight step in numpy). Medians
over the rounds are robust to a shared machine's load spikes, which a median of 3-5 dominates at
the millisecond scale. Prints the medians and the ratios to ``LogisticRegression().fit``.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_small_loop.py [--calls 200]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import drflmodel as dm
from _scale_baselines import chi2_dual_lbfgs

L2, RHO = 1e-3, 0.1
SHAPES = ((240, 14), (2_000, 19))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(N: int, d: int, calls: int) -> list[tuple[str, str, float, float]]:
    from sklearn.linear_model import LogisticRegression

    pooled = dm.datasets.gaussian_mixture(N, d, 2, n_clients=1, alpha=0.5, seed=0)
    fed = dm.datasets.gaussian_mixture(N, d, 2, n_clients=4, alpha=5.0, seed=0)
    X, y, _ = pooled.pooled()
    Xs = X[:, :-1]
    routes = {}

    def ours(data, W, method="auto"):
        sol = dm.FederatedDRO(data, dm.losses.Logistic(), W, l2=L2, penalize_intercept=False).solve(method=method)
        assert sol.status == "optimal", sol.status
        if method == "auto":
            routes[type(W).__name__] = sol.info["method"]

    jobs = {
        "erm: prob.solve()": lambda: ours(pooled, dm.sets.Simplex(1)),
        "LogisticRegression().fit": lambda: LogisticRegression().fit(Xs, y),
        "lbfgs tol=1e-8, same C": lambda: LogisticRegression(C=1 / (L2 * N), tol=1e-8, max_iter=10_000).fit(Xs, y),
        "newton-cholesky tol=1e-8, same C": lambda: LogisticRegression(
            C=1 / (L2 * N), tol=1e-8, solver="newton-cholesky", max_iter=10_000).fit(Xs, y),
        "chi2: prob.solve()": lambda: ours(fed, dm.sets.ChiSquare(4, RHO)),
        "chi2: solve(method='sqp')": lambda: ours(fed, dm.sets.ChiSquare(4, RHO), "sqp"),
        "chi2: L-BFGS-B dual": lambda: chi2_dual_lbfgs(fed, L2, RHO),
    }
    for job in jobs.values():           # imports and first calls, untimed
        job()
    times = {name: [] for name in jobs}
    for _ in range(calls):
        for name, job in jobs.items():
            times[name].append(_timed(job))
    base = float(np.median(times["LogisticRegression().fit"]))
    out = []
    for name in jobs:
        route = (routes["Simplex"] if name.startswith("erm") else routes["ChiSquare"] if name.startswith("chi2: prob")
                 else "sqp" if "method='sqp'" in name else "")
        out.append((name, route, float(np.median(times[name])), float(np.median(times[name])) / base))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    print("| shape | call | route | median ms | / LogisticRegression().fit |\n|---|---|---|---|---|")
    for N, d in SHAPES:
        for name, route, seconds, ratio in run(N, d, args.calls):
            print(f"| {N:,} x {d + 1} | {name} | {route} | {1e3 * seconds:.2f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
