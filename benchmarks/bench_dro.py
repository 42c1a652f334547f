"""Benchmark of the FederatedDRO oracle (issue 3): compile time, solve time per solver, and the
speed-up of a 10-point DPP parameter sweep versus rebuilding the problem at every point.

Instances: 20 clients x 500 samples x 20 features, squared loss (``synthetic_regression``,
Scaff-PD recipe) and logistic loss (``synthetic_classification``), each with a CVaR set (sweep
``alpha``) and a chi-square penalty (sweep ``rho``); ``l2 = 1e-3``.

* compile: the first ``get_problem_data`` of the built ``cp.Problem`` for Clarabel (DPP
  canonicalization), plus the Python time to build the expressions;
* solve: ``prob.solve(solver=...)`` on the compiled problem, wall time and solver-reported time,
  for Clarabel, ECOS and SCS with the documented tolerances of ``SOLVER_OPTIONS``;
* raw sweep: 10 Clarabel re-solves of the compiled saddle problem after ``set_parameter``
  versus 10 x (build + compile + solve) of a new one -- the compile savings alone;
* certified sweep: 10 certified solves (``FederatedDRO.sweep``, one compiled saddle problem and one compiled
  fixed-weight problem reused throughout) versus 10 fresh ``FederatedDRO(...).solve()`` calls
  (everything rebuilt and recompiled); ratio = rebuild time / DPP time, in the same process.

Run: ``python benchmarks/bench_dro.py [--quick] [--no-scs]``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import cvxpy as cp
import numpy as np

import drflmodel as dm
from drflmodel.losses import Logistic, Squared
from drflmodel._solver_sequence import SOLVER_OPTIONS
from drflmodel.sets import CVaR, ChiSquare

warnings.filterwarnings("ignore", message="Solution may be inaccurate")


def instances(n_clients=20, samples=500, dim=20):
    reg = dm.datasets.synthetic_regression(n_clients=n_clients, dim=dim, samples=samples, noise=0.1, seed=0)
    clf = dm.datasets.synthetic_classification(n_clients=n_clients, dim=dim, samples=samples, seed=0)
    n = n_clients
    sweeps = {
        "cvar": (lambda: CVaR(n, 0.5), "alpha", list(np.linspace(1.0 / n, 1.0, 10))),
        "chi2": (lambda: ChiSquare(n, 1.0), "rho", list(np.geomspace(0.05, 50.0, 10))),
    }
    for loss_name, fed, loss in (("squared", reg, Squared()), ("logistic", clf, Logistic())):
        for set_name, (make_set, param, values) in sweeps.items():
            yield f"{set_name}/{loss_name}", fed, loss, make_set, param, values


def _raw_solve(cp_prob):
    """Clarabel, falling back to ECOS if Clarabel fails (same rule on both sweep paths)."""
    for s in ("CLARABEL", "ECOS"):
        try:
            cp_prob.solve(solver=s, **SOLVER_OPTIONS[s])
            return (cp_prob.value, s)
        except cp.error.SolverError:
            continue
    return (np.nan, None)


def bench_one(label, fed, loss, make_set, param, values, solvers, l2=1e-3, skip_certified_sweep=False):
    row = {"instance": label}
    t0 = time.perf_counter()
    prob = dm.FederatedDRO(fed, loss, make_set(), l2=l2)
    cp_prob = prob.build()
    row["build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cp_prob.get_problem_data("CLARABEL")
    row["compile_s"] = time.perf_counter() - t0
    row["dpp"] = cp_prob.is_dpp()
    for s in solvers:
        t0 = time.perf_counter()
        cp_prob.solve(solver=s, **SOLVER_OPTIONS[s])
        row[f"{s}_s"] = time.perf_counter() - t0
        row[f"{s}_solver_s"] = cp_prob.solver_stats.solve_time
        row[f"{s}_status"] = cp_prob.status
        row[f"{s}_value"] = cp_prob.value
    # certified solve (saddle + fixed-weight certificate) once, for the gap
    sol = prob.solve()
    row["certified_gap"] = sol.relative_gap
    row["status"] = sol.status
    # raw sweep (saddle problem only, Clarabel, no certificate): isolates the compile savings
    t0 = time.perf_counter()
    raw_dpp = []
    for v in values:
        prob.set_parameter(param, v)
        raw_dpp.append(_raw_solve(cp_prob))
    row["raw_dpp_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw_new = []
    for v in values:
        W = make_set()
        getattr(W, f"set_{param}")(v)
        raw_new.append(_raw_solve(dm.FederatedDRO(fed, loss, W, l2=l2).build()))
    row["raw_rebuild_s"] = time.perf_counter() - t0
    row["raw_speedup"] = row["raw_rebuild_s"] / row["raw_dpp_s"]
    row["raw_max_value_diff"] = float(np.max(np.abs(np.array([v for v, _ in raw_dpp])
                                                      - np.array([v for v, _ in raw_new]))))
    row["raw_fallbacks"] = sum(s != "CLARABEL" for _, s in raw_dpp + raw_new)
    if skip_certified_sweep:
        return row
    # certified sweep with DPP (same compiled problems) vs rebuilding everything at each point
    prob_dpp = dm.FederatedDRO(fed, loss, make_set(), l2=l2)
    prob_dpp.solve()                          # warm: compile saddle + fixed-weight problems once
    t0 = time.perf_counter()
    sols = prob_dpp.sweep(param, values)
    row["sweep_dpp_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh = []
    for v in values:
        W = make_set()
        getattr(W, f"set_{param}")(v)
        fresh.append(dm.FederatedDRO(fed, loss, W, l2=l2).solve())
    row["sweep_rebuild_s"] = time.perf_counter() - t0
    row["sweep_speedup"] = row["sweep_rebuild_s"] / row["sweep_dpp_s"]
    row["sweep_max_value_diff"] = max(abs(a.value - b.value) for a, b in zip(sols, fresh))
    row["sweep_all_optimal"] = all(s.status == "optimal" for s in sols + fresh)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 clients x 100 samples x 5 features")
    ap.add_argument("--no-scs", action="store_true", help="skip SCS (slow at eps 1e-7)")
    ap.add_argument("--skip-certified-sweep", action="store_true",
                    help="only the raw (uncertified, Clarabel) sweep comparison")
    args = ap.parse_args(argv)
    size = dict(n_clients=5, samples=100, dim=5) if args.quick else dict(n_clients=20, samples=500, dim=20)
    solvers = ["CLARABEL", "ECOS"] + ([] if args.no_scs else ["SCS"])
    print(f"FederatedDRO benchmark: {size}, l2=1e-3, solvers={solvers}", flush=True)
    rows = []
    for label, fed, loss, make_set, param, values in instances(**size):
        row = bench_one(label, fed, loss, make_set, param, values, solvers,
                        skip_certified_sweep=args.skip_certified_sweep)
        rows.append(row)
        print(f"  done {label}: " + ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k != "instance"),
            flush=True)
    cert = not args.skip_certified_sweep
    head = (f"{'instance':<16}{'build s':>9}{'compile s':>10}"
            + "".join(f"{s[:8] + ' s':>12}" for s in solvers)
            + f"{'gap':>10}{'raw DPP s':>11}{'rebuild s':>11}{'speed-up':>10}"
            + (f"{'cert DPP s':>12}{'rebuild s':>11}{'speed-up':>10}" if cert else ""))
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['instance']:<16}{r['build_s']:>9.2f}{r['compile_s']:>10.2f}"
              + "".join(f"{r[f'{s}_s']:>12.2f}" for s in solvers)
              + f"{r['certified_gap']:>10.1e}{r['raw_dpp_s']:>11.2f}{r['raw_rebuild_s']:>11.2f}{r['raw_speedup']:>10.2f}"
              + (f"{r['sweep_dpp_s']:>12.2f}{r['sweep_rebuild_s']:>11.2f}{r['sweep_speedup']:>10.2f}" if cert else ""))
    print("\nsolver statuses / solver-reported times; sweep value agreement (DPP vs rebuilt):")
    for r in rows:
        print(f"  {r['instance']:<16}" + "  ".join(
            f"{s}: {r[f'{s}_status']} ({r[f'{s}_solver_s']:.2f} s)" for s in solvers)
            + f"  certified: {r['status']}; raw max |dv| {r['raw_max_value_diff']:.1e}"
            + f" (ECOS fallbacks: {r['raw_fallbacks']}/20)"
            + (f"; certified max |dv| {r['sweep_max_value_diff']:.1e}, all optimal: {r['sweep_all_optimal']}"
               if cert else ""))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
