"""The largest linear heads published in this field, float32 features: ``prob.solve()`` for the four
weight-set kinds (ERM as fixed weights, the chi^2 ball, CVaR, AFL's simplex) against scikit-learn's
lbfgs for ERM on the same rows (the ratio printed on every line), one process, one BLAS thread, with
the peak memory of the solve beyond the data (tracemalloc) against the route's estimate.

* ``tinyimagenet``: 100,000 x 512 features, 200 classes (P = 102,600), 20 Dirichlet(0.5) clients --
  the shape of the Scaff-PD paper's TinyImageNet head (synthetic features: the real ones cannot be
  downloaded here);
* ``fedpft``: 50,000 x 2,048 features, 100 classes (P = 204,900), 50 Dirichlet(0.1) clients -- the
  shape of Flower's FedPFT baseline (ResNet-50 features).

scikit-learn runs first, at ``tol=1e-8`` with at most ``--sklearn-max-iter`` iterations (its time and
iterations are printed as reached: on a loaded machine it may not converge within the cap, which the
output says). Each line is printed as it finishes (``nohup ... > log``).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_largest_heads.py --shapes tinyimagenet,fedpft

``--n-rows`` takes fewer rows of the same shape (a quick run; the output says so). ``--federated``
solves each row on Flower's in-process grid instead (``drflmodel.flower.certified_solve(problem,
engine="inprocess")``: one supernode per client, the clients answer from float32 rows in float64
arithmetic) and prints the route, exchanges and the largest answer instead of the ratios.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import drflmodel as dm

SHAPES = {"tinyimagenet": (100_000, 512, 200, 20, 0.5), "fedpft": (50_000, 2_048, 100, 50, 0.1)}
L2, RHO, CVAR_ALPHA = 1e-3, 0.1, 0.3
KINDS = ("erm", "chi2", "cvar", "afl")


def weight_set(kind: str, fed):
    """The weight set of a row: ERM (fixed proportional weights), chi^2 ball, CVaR, AFL's simplex."""
    n = fed.n_clients
    return {"erm": lambda: dm.sets.HCVaR(fed.proportions, 1.0), "chi2": lambda: dm.sets.ChiSquare(n, RHO),
            "cvar": lambda: dm.sets.CVaR(n, CVAR_ALPHA), "afl": lambda: dm.sets.Simplex(n)}[kind]()


def federation(shape: str, n_rows: int | None = None):
    N, d, K, n, alpha = SHAPES[shape]
    N = N if n_rows is None else n_rows
    fed = dm.datasets.gaussian_mixture(N, d, K, n_clients=n, alpha=alpha, seed=0)
    return dm.Federation.from_arrays([c.X.astype(np.float32) for c in fed.clients], [c.y for c in fed.clients],
                                     task=fed.task, classes=fed.classes)


def solve(prob, label: str, shape: str, reference: float | None) -> dict:
    from drflmodel.problems.minmax.route_costs import hessian_free_memory

    estimate = hessian_free_memory(prob.structure)
    tracemalloc.start()
    t0 = time.perf_counter()
    sol = prob.solve()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    ratio = f"{seconds / reference:.2f}" if reference else ""
    print(f"| {shape} | {label} | {sol.info['method']} | {sol.status} | {sol.relative_gap:.1e} | {seconds:.1f} | {ratio} | "
          f"{sol.info.get('evaluations', '')} | {'/'.join(sol.info.get('step_precision', []))} | "
          f"{peak / 2**20:,.0f} | {estimate / 2**20:,.0f} |", flush=True)
    return {"sol": sol, "seconds": seconds}


def sklearn_lbfgs(fed, max_iter: int):
    from sklearn.linear_model import LogisticRegression

    X = np.concatenate([c.features for c in fed.clients])
    y = np.concatenate([c.y for c in fed.clients]).astype(int)
    j = fed.intercept_column
    keep = [c for c in range(X.shape[1]) if c != j]
    X = np.ascontiguousarray(X[:, keep])
    tracemalloc.start()
    t0 = time.perf_counter()
    model = LogisticRegression(C=1.0 / (L2 * len(y)), solver="lbfgs", tol=1e-8, max_iter=max_iter)
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return model, seconds, int(np.max(model.n_iter_)), peak


def federated(prob, label: str, shape: str, method: str = "auto") -> None:
    """One row on Flower's in-process grid: route, status, exchanges, largest answer (floats)."""
    from drflmodel.flower.oracle import certified_solve

    t0 = time.perf_counter()
    sol = certified_solve(prob, engine="inprocess", method=method)
    seconds = time.perf_counter() - t0
    info = sol.info["federated"]
    print(f"| {shape} | {label} | {info['method']} | {sol.status} | {sol.relative_gap:.1e} | {info['exchanges']} | "
          f"{info['largest_answer_floats']:,} ({info['largest_answer_floats'] / prob.dim:.2f} P) | "
          f"{len(info.get('rejections', []))} | {seconds:.0f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="tinyimagenet,fedpft")
    ap.add_argument("--rows", default=",".join(KINDS))
    ap.add_argument("--n-rows", type=int, default=None, help="fewer rows of the same shape (a quick run)")
    ap.add_argument("--sklearn-max-iter", type=int, default=300)
    ap.add_argument("--federated", action="store_true", help="Flower's in-process grid (module docstring)")
    ap.add_argument("--method", default="auto", help="--federated: the route (default auto)")
    args = ap.parse_args()
    if args.federated:
        print("| shape | row | route | status | gap | exchanges | largest answer (floats) | rejected answers | seconds |")
        print("|---|---|---|---|---|---|---|---|---|", flush=True)
        for shape in args.shapes.split(","):
            fed = federation(shape, args.n_rows)
            print(f"<!-- {shape}: {int(fed.sizes.sum()):,} rows{' (--n-rows: reduced)' if args.n_rows else ''} -->",
                  flush=True)
            for row in args.rows.split(","):
                federated(dm.FederatedDRO(fed, dm.losses.Multinomial(), weight_set(row, fed), l2=L2,
                                          penalize_intercept=False), row, shape, args.method)
        return
    print("| shape | row | route | status | gap | seconds | / sklearn lbfgs ERM | evaluations | step precision | "
          "peak beyond the data (MiB) | estimate (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for shape in args.shapes.split(","):
        t0 = time.perf_counter()
        fed = federation(shape, args.n_rows)
        print(f"<!-- {shape}: {int(fed.sizes.sum()):,} rows{' (--n-rows: reduced)' if args.n_rows else ''}, data "
              f"{sum(c.features.nbytes for c in fed.clients) / 2**20:,.0f} MiB float32, "
              f"built in {time.perf_counter() - t0:.0f} s -->", flush=True)
        model, reference, iterations, sk_peak = sklearn_lbfgs(fed, args.sklearn_max_iter)
        print(f"<!-- {shape}: scikit-learn lbfgs tol 1e-8: {reference:.1f} s, {iterations} iterations"
              f"{' (the cap: not converged)' if iterations >= args.sklearn_max_iter else ''}, peak "
              f"{sk_peak / 2**20:,.0f} MiB (its float32 copy of X without the intercept column included) -->",
              flush=True)
        loss = dm.losses.Multinomial()
        for row in args.rows.split(","):
            prob = dm.FederatedDRO(fed, loss, weight_set(row, fed), l2=L2, penalize_intercept=False)
            sol = solve(prob, row, shape, reference)["sol"]
            if row == "erm":
                theta = prob.layout.from_sklearn(model.coef_, model.intercept_)
                value = prob.objective(theta)
                inside = sol.lower_bound <= value
                print(f"<!-- {shape}: scikit-learn's objective {value:.10g} {'>=' if inside else '<'} "
                      f"L = {sol.lower_bound:.10g} (U = {sol.upper_bound:.10g}) -->", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
