"""Certified FederatedDRO at scale (issue 13): the SQP route and the conic route against the plain
uncertified CVXPY model of the same problem, written by hand, in one process.

Instances: ``synthetic_classification`` (logistic) and ``synthetic_regression`` (squared loss,
Scaff-PD recipe) with 20 clients x {50, 500, 5000} rows x 20 features (1k / 10k / 100k samples),
``l2 = 1e-3``, weight sets chi-square (rho = 0.1) and CVaR (alpha = 0.2); a 1M-sample row
(20 x 50,000) for the SQP route alone.

Columns:

* ``fast``: ``FederatedDRO(...).solve(method="newton")`` end to end (build, SQP steps, numpy
  certificate), median of the repeats, with its split (``model`` = compiling the step problem,
  ``numpy`` = client values/gradients/Hessians and line searches, ``step`` = the step problem's
  solves, ``cert`` = the certificate's Newton solves);
* ``conic``: ``solve(method="conic")`` end to end (build + compile + Clarabel on the epigraph
  model + the numpy certificate), split into saddle and certificate;
* ``plain``: the problem written directly in CVXPY without parameters or certificate -- for
  chi-square the dual in one scalar nu, :math:`\\min_{\\theta,\\nu}\\ \\nu+\\rho/2+\\frac1{2n\\rho}
  \\sum_i(f_i(\\theta)-\\nu)_+^2`; for CVaR :math:`\\min_{\\theta,\\eta}\\ \\eta+\\frac1{\\alpha n}\\sum_i
  (f_i(\\theta)-\\eta)_+` -- solved by Clarabel with CVXPY's default settings;
* ratios fast/plain and conic/plain (same process), the value agreement, the certified gap, the
  peak of numpy allocations of the SQP route (``tracemalloc``, a separate untimed run; the conic
  solvers allocate outside Python and are not counted), and the log-log slope of the SQP route's
  time over the sizes (the fitted scaling exponent).

Run: ``python benchmarks/bench_fast.py [--quick] [--repeats 3] [--no-million]``. Not collected by
pytest. ``--quick``: 1k and 10k samples only.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
import warnings

import cvxpy as cp
import numpy as np

import drflmodel as dm
from _plain import solve_as_a_user

warnings.filterwarnings("ignore", message="Solution may be inaccurate")

L2, RHO, ALPHA, N_CLIENTS, DIM = 1e-3, 0.1, 0.2, 20, 20


def federation(loss_name: str, samples: int):
    if loss_name == "logistic":
        return dm.datasets.synthetic_classification(n_clients=N_CLIENTS, dim=DIM, samples=samples, seed=0)
    return dm.datasets.synthetic_regression(n_clients=N_CLIENTS, dim=DIM, samples=samples, noise=0.1, seed=0)


def weight_set(set_name: str):
    return dm.sets.ChiSquare(N_CLIENTS, RHO) if set_name == "chi2" else dm.sets.CVaR(N_CLIENTS, ALPHA)


def loss_of(loss_name: str):
    return dm.losses.Logistic() if loss_name == "logistic" else dm.losses.Squared()


def plain_model(fed, loss_name: str, set_name: str):
    """The hand-written uncertified model of the module docstring, by Clarabel, then ECOS and SCS if
    it fails; returns ``(value, seconds, what ran)``."""
    t0 = time.perf_counter()
    theta, s = cp.Variable(fed.dim), cp.Variable()
    f = []
    for c in fed.clients:
        z = c.X @ theta
        data = (cp.sum(cp.logistic(-cp.multiply(c.y, z))) if loss_name == "logistic"
                else cp.sum_squares(z - c.y)) / c.size
        f.append(data + 0.5 * L2 * cp.sum_squares(theta))
    f = cp.hstack(f)
    n = fed.n_clients
    if set_name == "chi2":
        objective = s + RHO / 2 + cp.sum_squares(cp.pos(f - s)) / (2 * n * RHO)
    else:
        objective = s + cp.sum(cp.pos(f - s)) / (ALPHA * n)
    prob = cp.Problem(cp.Minimize(objective))
    value, used = solve_as_a_user(prob, ("CLARABEL", "ECOS", "SCS"))     # what a user would try next, time included
    return value, time.perf_counter() - t0, used


def certified(fed, loss_name: str, set_name: str, method: str):
    t0 = time.perf_counter()
    sol = dm.FederatedDRO(fed, loss_of(loss_name), weight_set(set_name), l2=L2).solve(method=method)
    return sol, time.perf_counter() - t0


def fast_peak_mib(fed, loss_name: str, set_name: str) -> float:
    tracemalloc.start()
    certified(fed, loss_name, set_name, "newton")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def run(sizes, repeats: int, million: bool):
    rows, slopes = [], {}
    for loss_name in ("logistic", "squared"):
        for set_name in ("chi2", "cvar"):
            fast_times = []
            for samples in sizes:
                fed = federation(loss_name, samples)
                reps = repeats if samples * N_CLIENTS <= 10_000 else 1
                fast = [certified(fed, loss_name, set_name, "newton") for _ in range(repeats)]
                conic = [certified(fed, loss_name, set_name, "conic") for _ in range(reps)]
                plain = [plain_model(fed, loss_name, set_name) for _ in range(reps)]
                sol_f, t_f = fast[-1][0], statistics.median(t for _, t in fast)
                sol_c, t_c = conic[-1][0], statistics.median(t for _, t in conic)
                v_p, t_p = plain[-1][0], statistics.median(p[1] for p in plain)
                split = sol_f.info["time_split"]
                rows.append({
                    "instance": f"{set_name}/{loss_name}", "N": samples * N_CLIENTS, "fast_s": t_f,
                    "fast_split": (split["model"], split["numpy"], split["step_solve"], split["certificate"]),
                    "fast_iters": sol_f.info["iterations"], "fast_status": sol_f.status,
                    "fast_gap": sol_f.relative_gap, "conic_s": t_c, "conic_cert_s": sol_c.info["certificate_time"],
                    "conic_status": sol_c.status, "conic_gap": sol_c.relative_gap, "plain_s": t_p,
                    "value_diff_fast_conic": abs(sol_f.value - sol_c.value) / max(1.0, abs(sol_c.value)),
                    "value_diff_fast_plain": abs(sol_f.value - v_p) / max(1.0, abs(v_p)),
                    "plain_solvers": plain[-1][2], "peak_mib": fast_peak_mib(fed, loss_name, set_name),
                    "repeats": (repeats, reps)})
                fast_times.append(t_f)
                print(_format(rows[-1]), flush=True)
            slopes[f"{set_name}/{loss_name}"] = float(np.polyfit(np.log([s * N_CLIENTS for s in sizes]),
                                                                 np.log(fast_times), 1)[0])
    print("\nfitted scaling exponent of the SQP route (log-log slope of time over N):",
          ", ".join(f"{k} {v:.2f}" for k, v in slopes.items()))
    if million:
        print("\n1M samples (20 x 50,000 x 20), SQP route only:")
        for loss_name in ("logistic", "squared"):
            for set_name in ("chi2", "cvar"):
                fed = federation(loss_name, 50_000)
                sol, t = certified(fed, loss_name, set_name, "newton")
                peak = fast_peak_mib(fed, loss_name, set_name)
                split = sol.info["time_split"]
                print(f"| {set_name}/{loss_name} | 1,000,000 | {t:.2f} s | {sol.status} | gap {sol.relative_gap:.1e} | "
                      f"{sol.info['iterations']} steps | numpy {split['numpy']:.2f} s, step {split['step_solve']:.2f} s, "
                      f"cert {split['certificate']:.2f} s | peak numpy {peak:.0f} MiB |", flush=True)
    return rows, slopes


def sweep_rows(sizes, repeats: int):
    """A 10-point CVaR alpha sweep (logistic): one problem re-solved after ``set_parameter`` (the
    step problem compiled once, each point warm-started from the previous answer) versus a fresh
    ``FederatedDRO`` per point; median of the repeats, same process."""
    alphas = list(np.linspace(0.1, 1.0, 10))
    print("\n| sweep (10 alphas, CVaR/logistic, SQP route) | N | sweep (s) | rebuild (s) | rebuild/sweep | all optimal |")
    print("|---|---|---|---|---|---|")
    for samples in sizes:
        fed = federation("logistic", samples)
        t_sweep, t_rebuild, ok = [], [], True
        for _ in range(repeats):
            t0 = time.perf_counter()
            prob = dm.FederatedDRO(fed, loss_of("logistic"), dm.sets.CVaR(N_CLIENTS, alphas[0]), l2=L2)
            res = prob.sweep("alpha", alphas, method="newton", progress=False)
            t_sweep.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh = [dm.FederatedDRO(fed, loss_of("logistic"), dm.sets.CVaR(N_CLIENTS, a), l2=L2).solve(method="newton")
                     for a in alphas]
            t_rebuild.append(time.perf_counter() - t0)
            ok &= all(s.status == "optimal" for s in list(res) + fresh)
            ok &= all(abs(a.value - b.value) <= 1e-8 * max(1.0, abs(b.value)) for a, b in zip(res, fresh))
        ts, tr = statistics.median(t_sweep), statistics.median(t_rebuild)
        print(f"| | {samples * N_CLIENTS:,} | {ts:.2f} | {tr:.2f} | {tr / ts:.2f} | {ok} |", flush=True)


HEADER = ("| instance | N | fast (s) | split model/numpy/step/cert (s) | steps | fast gap | conic (s) | "
          "conic cert (s) | plain (s) | fast/plain | conic/plain | value diff fast-conic | fast-plain | "
          "peak MiB | plain model's solvers |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _format(r) -> str:
    m, nu, st, ce = r["fast_split"]
    return (f"| {r['instance']} | {r['N']:,} | {r['fast_s']:.3f} | {m:.2f}/{nu:.2f}/{st:.2f}/{ce:.2f} | "
            f"{r['fast_iters']} | {r['fast_gap']:.1e} | {r['conic_s']:.2f} | {r['conic_cert_s']:.3f} | "
            f"{r['plain_s']:.2f} | {r['fast_s'] / r['plain_s']:.3f} | {r['conic_s'] / r['plain_s']:.2f} | "
            f"{r['value_diff_fast_conic']:.1e} | {r['value_diff_fast_plain']:.1e} | {r['peak_mib']:.0f} | "
            f"{r['plain_solvers']} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k samples only")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (median); 1 for the conic and "
                        "plain models at 100k")
    parser.add_argument("--no-million", action="store_true", help="skip the 1M-sample rows")
    args = parser.parse_args()
    sizes = (50, 500) if args.quick else (50, 500, 5000)
    print(HEADER)
    run(sizes, args.repeats, million=not (args.quick or args.no_million))
    sweep_rows(sizes[1:], args.repeats)
