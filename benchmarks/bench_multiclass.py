"""Certified multi-class (softmax) oracles (issue 21 item 3), in one process, against

* the **plain model**: the same min-max problem written by hand in CVXPY (``log_sum_exp`` of each
  row's scores minus the label's score; chi-square through its one-scalar dual
  :math:`\\nu+\\rho/2+\\frac1{2n\\rho}\\sum_i(f_i-\\nu)_+^2`, CVaR through
  :math:`\\eta+\\frac1{\\alpha n}\\sum_i(f_i-\\eta)_+`), no parameters, no certificate, Clarabel with
  CVXPY's defaults then ECOS, as a user would -- run in a subprocess with a time limit (reported as
  "> limit" when it does not finish);
* **scikit-learn's** ``LogisticRegression(solver="lbfgs")`` on the pooled data (one client, equal
  weights, the same ``C``: ``l2 = 1/(C N)``, unpenalized intercept), for the plain ERM objective.

Instances: scikit-learn's digits split over 20 clients by a Dirichlet label skew (alpha = 0.1;
1,797 rows, 64 pixels + intercept, 10 classes: 650 parameters); a synthetic softmax federation of
100,000 rows x 50 features (49 + intercept) x 10 classes over 20 clients (500 parameters).
``l2 = 1e-3`` with the intercept unpenalized. Columns: certified time (``solve()``, the route
``auto`` picks), status, relative gap, route, the plain model's time and the ratio.

Run: ``python benchmarks/bench_multiclass.py [--quick] [--plain-limit 600]``. ``--quick``: digits
only. Set ``OPENBLAS_NUM_THREADS=1`` on a shared machine (many small BLAS calls oversubscribe).
Not collected by pytest.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import warnings

import cvxpy as cp
import numpy as np

import drflmodel as dm
from _plain import solve_as_a_user

warnings.filterwarnings("ignore", message="Solution may be inaccurate")
L2, RHO, ALPHA = 1e-3, 0.1, 0.2


def digits():
    return dm.datasets.digits(n_clients=20, alpha=0.1, seed=0)


def large():
    return dm.datasets.synthetic_multiclass(n_clients=20, dim=49, n_classes=10, samples=5000, noise=2.0, seed=0)


def weight_set(name, n):
    return {"chi2": dm.sets.ChiSquare(n, RHO), "cvar": dm.sets.CVaR(n, ALPHA), "simplex": dm.sets.Simplex(n)}[name]


def plain_value(fed, set_name: str) -> tuple[float, str]:
    """The hand-written model of the module docstring; ``(value, what ran)``."""
    K, d = fed.n_classes, fed.dim
    W, s = cp.Variable((d, K)), cp.Variable()
    omega = np.ones(d)
    omega[fed.intercept_column] = 0.0
    f = []
    for c in fed.clients:
        Y = np.eye(K)[c.y.astype(int)]
        S = c.X @ W
        f.append(cp.sum(cp.log_sum_exp(S, axis=1) - cp.sum(cp.multiply(Y, S), axis=1)) / c.size
                 + 0.5 * L2 * cp.sum_squares(cp.multiply(np.sqrt(omega)[:, None], W)))
    f = cp.hstack(f)
    n = fed.n_clients
    if set_name == "chi2":
        objective = s + RHO / 2 + cp.sum_squares(cp.pos(f - s)) / (2 * n * RHO)
    elif set_name == "cvar":
        objective = s + cp.sum(cp.pos(f - s)) / (ALPHA * n)
    else:
        objective = cp.max(f)
    prob = cp.Problem(cp.Minimize(objective))
    return solve_as_a_user(prob)


def _plain_worker(which, set_name, queue):
    fed = digits() if which == "digits" else large()
    t0 = time.perf_counter()
    value, used = plain_value(fed, set_name)
    queue.put((value, time.perf_counter() - t0, used))


def plain_timed(which: str, set_name: str, limit: float):
    """``(value, seconds, what ran)`` of the plain model in a subprocess, or ``(nan, limit, "> limit")``."""
    queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(target=_plain_worker, args=(which, set_name, queue))
    t0 = time.perf_counter()
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return float("nan"), limit, f"not finished in {limit:.0f} s"
    value, seconds, used = queue.get()
    return value, seconds, used


def certified(fed, set_name: str, family: str = "dro", method: str = "auto"):
    t0 = time.perf_counter()
    if family == "fafl":
        prob = dm.FairnessAwareFL(fed, dm.losses.Multinomial(), alpha=0.5, l2=L2, penalize_intercept=False)
    else:
        prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), weight_set(set_name, fed.n_clients), l2=L2,
                               penalize_intercept=False)
    sol = prob.solve(method=method)
    return prob, sol, time.perf_counter() - t0


def sklearn_row(fed):
    """One client, equal weights: drflmodel's certified ERM vs scikit-learn's lbfgs on the same objective."""
    from sklearn.linear_model import LogisticRegression

    X, y, _ = fed.pooled()
    N = len(y)
    C = 1.0 / (L2 * N)
    one = dm.Federation.from_groups(X, y, np.zeros(N), task="multiclass")
    t0 = time.perf_counter()
    prob = dm.FederatedDRO(one, dm.losses.Multinomial(), dm.sets.Simplex(1), l2=L2, penalize_intercept=False)
    sol = prob.solve(method="sqp")
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    keep = [j for j in range(fed.dim) if j != fed.intercept_column]
    model = LogisticRegression(C=C, solver="lbfgs", max_iter=10_000, tol=1e-10).fit(X[:, keep], y.astype(int))
    t_sk = time.perf_counter() - t0
    sk_value = prob.objective(prob.layout.from_sklearn(model.coef_, model.intercept_))
    return {"ours": t_ours, "sklearn": t_sk, "U": sol.upper_bound, "L": sol.lower_bound, "status": sol.status,
            "sklearn_value": sk_value, "rel_diff": (sk_value - sol.upper_bound) / abs(sol.upper_bound)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="digits only")
    ap.add_argument("--plain-limit", type=float, default=600.0, help="seconds before the plain model is stopped")
    args = ap.parse_args()
    print("| instance | N x P | certified (s) | route | status | gap | plain model (s) | certified / plain |")
    print("|---|---|---|---|---|---|---|---|")
    cases = [("digits", digits(), s) for s in ("chi2", "cvar", "simplex")]
    if not args.quick:
        cases += [("100k x 50 x 10", large(), s) for s in ("chi2", "cvar")]
    for label, fed, set_name in cases:
        prob, sol, t = certified(fed, set_name)
        which = "digits" if label == "digits" else "large"
        v_p, t_p, used = plain_timed(which, set_name, args.plain_limit)
        ratio = t / t_p
        bound = "<" if used.startswith("not finished") else ""
        agree = "" if not np.isfinite(v_p) else f", plain value {v_p - sol.upper_bound:+.1e} vs U"
        print(f"| {label} {set_name} | {sum(fed.sizes)} x {prob.dim} | {t:.2f} | {sol.info['method']} | "
              f"{sol.status} | {sol.relative_gap:.0e} | {'>' if bound else ''}{t_p:.1f} ({used}{agree}) | "
              f"{bound}{ratio:.3f} |", flush=True)
    prob, sol, t = certified(digits(), "", family="fafl")
    print(f"| digits FAFL alpha=0.5 | {sum(prob.federation.sizes)} x {prob.dim} | {t:.2f} | {sol.info['method']} | "
          f"{sol.status} | {sol.relative_gap:.0e} | | |")
    print()
    for label, fed in [("digits", digits())] + ([] if args.quick else [("100k x 50 x 10", large())]):
        r = sklearn_row(fed)
        print(f"{label}, one client, equal weights, C = 1/(l2 N): drflmodel {r['status']} in {r['ours']:.2f} s "
              f"[L, U] = [{r['L']:.12g}, {r['U']:.12g}]; scikit-learn lbfgs {r['sklearn']:.2f} s, its objective "
              f"{r['sklearn_value']:.12g} ({r['rel_diff']:+.1e} relative to U)")


if __name__ == "__main__":
    main()
