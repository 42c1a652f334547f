"""drflmodel vs dsp-cvxpy (disciplined saddle programming) on CVaR / logistic FederatedDRO (issue 13 item 5).

dsp-cvxpy 0.4.2 needs cvxpy < 1.7, so it runs in its own environment; the two halves exchange one
``.npz`` file:

1. in drflmodel's environment, ``python benchmarks/bench_dsp.py export bench_dsp.npz`` writes the
   instances (20 clients x {50, 500, 5000} x 20 features, ``synthetic_classification``, CVaR
   alpha = 0.2, ``l2 = 1e-3``) and drflmodel's certified answers (SQP route and conic route:
   value, bounds, status, seconds);
2. in an environment with dsp (``python -m venv .venv-dsp && .venv-dsp/bin/pip install
   dsp-cvxpy==0.4.2 "cvxpy<1.7" clarabel``), ``.venv-dsp/bin/python benchmarks/bench_dsp.py dsp
   bench_dsp.npz`` builds ``MinimizeMaximize(saddle_inner(f(theta), lambda))`` with lambda in the
   CVaR set, solves it with Clarabel and prints a table against drflmodel's numbers (dsp's value
   is judged against drflmodel's certified interval [L, U]).

Only numpy, cvxpy and dsp are imported in step 2. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SIZES, N_CLIENTS, DIM, ALPHA, L2 = (50, 500, 5000), 20, 20, 0.2, 1e-3


def export(path: str, sizes) -> None:
    import drflmodel as dm

    out = {"sizes": np.array(sizes)}
    for samples in sizes:
        fed = dm.datasets.synthetic_classification(n_clients=N_CLIENTS, dim=DIM, samples=samples, seed=0)
        for k, c in enumerate(fed.clients):
            out[f"X_{samples}_{k}"], out[f"y_{samples}_{k}"] = c.X, c.y
        for method in ("newton", "conic"):
            t0 = time.perf_counter()
            sol = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(N_CLIENTS, ALPHA), l2=L2).solve(method=method)
            out[f"{method}_{samples}"] = np.array([sol.value, sol.lower_bound, sol.upper_bound,
                                                   time.perf_counter() - t0, sol.status == "optimal"])
    np.savez_compressed(path, **out)
    print(f"wrote {path}")


def run_dsp(path: str) -> None:
    import cvxpy as cp
    import dsp

    data = np.load(path)
    print(f"dsp-cvxpy with cvxpy {cp.__version__}")
    print("| N | dsp (s) | dsp status | dsp value | drflmodel certified [L, U] | dsp inside? | "
          "drflmodel SQP (s) | drflmodel conic (s) |\n|---|---|---|---|---|---|---|---|")
    for samples in data["sizes"]:
        theta, lam = cp.Variable(DIM), cp.Variable(N_CLIENTS, nonneg=True)
        f = []
        for k in range(N_CLIENTS):
            X, y = data[f"X_{samples}_{k}"], data[f"y_{samples}_{k}"]
            f.append(cp.sum(cp.logistic(-cp.multiply(y, X @ theta))) / len(y) + 0.5 * L2 * cp.sum_squares(theta))
        obj = dsp.MinimizeMaximize(dsp.saddle_inner(cp.hstack(f), lam))
        cons = [cp.sum(lam) == 1, lam <= 1.0 / (ALPHA * N_CLIENTS)]
        prob = dsp.SaddlePointProblem(obj, cons, minimization_vars=[theta], maximization_vars=[lam])
        t0 = time.perf_counter()
        try:
            prob.solve(solver="CLARABEL")
            status, value = prob.status, prob.value
        except Exception as exc:                       # report whatever dsp raises
            status, value = f"error: {type(exc).__name__}: {str(exc)[:60]}", float("nan")
        seconds = time.perf_counter() - t0
        v, L, U, t_new = data[f"newton_{samples}"][:4]
        t_conic = data[f"conic_{samples}"][3]
        inside = value is not None and np.isfinite(value) and L - 1e-9 <= value <= U + 1e-9
        print(f"| {samples * N_CLIENTS:,} | {seconds:.2f} | {status} | {value:.10g} | [{L:.10g}, {U:.10g}] | "
              f"{'yes' if inside else 'no (off by %.1e)' % (value - U if value > U else L - value)} | "
              f"{t_new:.2f} | {t_conic:.2f} |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("export", "dsp"))
    parser.add_argument("path")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), help="rows per client")
    args = parser.parse_args()
    export(args.path, args.sizes) if args.step == "export" else run_dsp(args.path)
