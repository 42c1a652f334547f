"""Benchmark of the Wasserstein DRFL oracle (issue 4): build and solve times per solver, objective
agreement between solvers, and growth of the solve time with the number of samples.

Part A: logistic and hinge, 10 clients x 1,000 samples x 20 features, l1 and l2 transport,
Q = LpBall(q̂ = N_s/N, θ = 0.1, p = 2), ρ = 0.05, κ = 1; Clarabel, ECOS and SCS (documented
tolerances of ``drflmodel._solver_sequence.SOLVER_OPTIONS``). For each run: build time (CVXPY
problem construction), compile time (``get_problem_data``: canonicalization to the solver's conic
form), wall time of the following ``cp.Problem.solve`` (reuses the cached compilation), the
solver's own time, the certified bounds (U = exact numpy objective at the returned w; L = the rigorous numpy
Lagrangian bound of ``problems/_wasserstein_bound.py`` where it closes the gap, else the conic dual
objective -- both printed, relative to U, with the bound's time) and |U - U_Clarabel|.

Part B: solve time vs total samples (1,000 / 10,000 / 50,000, 10 clients, 20 features) for
logistic and hinge with l1 transport (the 10,000 point is Part A's l1 run). Caps (to finish in
< 10 min on a shared 2-core machine): Clarabel runs every size; ECOS and SCS up to 10,000; every
SCS run is limited to ``SCS_TIME_LIMIT`` seconds of wall time (its status says if it stopped).

Part C: the fast certified route (``solve(method="newton")``, trust-region SQP,
``problems/_wasserstein_sqp.py``) against the conic route (``solve(method="conic")``), both full
certified solves including the model build, in the same process: logistic, smooth hinge and hinge with
l1 transport at 1,000 / 10,000 / 50,000 samples (newton: median of 3; conic: median of 3 up to
10,000, one run at 50,000), with |U_newton - U_conic|, both certified gaps, the newton time split
and its iterations.

Run:  python benchmarks/bench_wasserstein.py [--quick] [--part A|B|C] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import cvxpy as cp
import numpy as np

import drflmodel as dm
from drflmodel.losses import Hinge, Logistic
from drflmodel._solver_sequence import SOLVER_OPTIONS
from drflmodel.problems.wasserstein import WassersteinDRFL
from drflmodel.sets import LpBall

warnings.filterwarnings("ignore")


#: wall-clock cap per SCS run, in seconds (SCS needs many iterations to reach 1e-7 on exp cones)
SCS_TIME_LIMIT = 60


def make_federation(n_clients: int, per_client: int, dim: int, seed: int = 0):
    """Logistic-model labels with a client-specific shift of the true parameter."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=dim)
    Xs, ys = [], []
    for s in range(n_clients):
        X = rng.normal(size=(per_client, dim)) / np.sqrt(dim)
        w = base + 0.5 * rng.normal(size=dim)
        p = 1 / (1 + np.exp(-3 * X @ w))
        ys.append(np.where(rng.uniform(size=per_client) < p, 1.0, -1.0))
        Xs.append(X)
    return dm.Federation.from_arrays(Xs, ys, task="classification")


def run_one(fed, loss, norm, solver):
    prob = WassersteinDRFL(fed, loss, radius=0.05, kappa=1.0, norm=norm,
                           weights=LpBall(fed.proportions, 0.1, 2))
    t0 = time.perf_counter()
    cpp = prob.build()
    t_build = time.perf_counter() - t0
    opts = dict(SOLVER_OPTIONS[solver])
    if solver == "SCS":
        opts["time_limit_secs"] = SCS_TIME_LIMIT      # cap (first-order; reported if reached)
    t0 = time.perf_counter()
    cpp.get_problem_data(solver)                      # CVXPY compilation (cached for the solve)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        cpp.solve(solver=solver, **opts)
    except cp.error.SolverError as exc:
        return {"solver": solver, "error": str(exc)[:120], "build_s": t_build, "compile_s": t_compile}
    t_solve = time.perf_counter() - t0
    own = cpp.solver_stats.solve_time
    out = {"solver": solver, "build_s": t_build, "compile_s": t_compile, "solve_wall_s": t_solve,
           "solver_time_s": own, "status": cpp.status}
    if cpp.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        sol = prob.certify_solved(solver)
        out.update(U=sol.upper_bound, L=sol.lower_bound, rel_gap=sol.relative_gap,
                   certified=bool(sol.relative_gap <= 1e-6),
                   L_conic_dual=sol.info.get("dual_objective"), L_rigorous=sol.info.get("rigorous_lower_bound"),
                   lower_bound_method=sol.info.get("lower_bound_method"),
                   bound_s=sol.info.get("rigorous_bound_time"))
    return out


def part_a(quick=False):
    rows = []
    per = 200 if quick else 1000
    fed = make_federation(10, per, 20, seed=1)
    for loss in (Logistic(), Hinge()):
        for norm in (1, 2):
            ref = None
            for solver in ("CLARABEL", "ECOS", "SCS"):
                r = run_one(fed, loss, norm, solver)
                r.update(loss=loss.name, norm=norm, samples=fed.sizes.sum())
                if solver == "CLARABEL":
                    ref = r.get("U")
                if ref is not None and "U" in r:
                    r["dU_vs_clarabel"] = abs(r["U"] - ref)
                rows.append(r)
                print(_fmt(r), flush=True)
    return rows


def part_b(part_a_rows, quick=False):
    """Growth with the number of samples. The 10,000-sample point is Part A's l1 run (same
    federation), so it is not solved twice."""
    rows = []
    per_a = 200 if quick else 1000
    sizes = [1000, 10000] if quick else [1000, 10000, 50000]
    caps = {"CLARABEL": 50000, "ECOS": 10000, "SCS": 10000}
    for total in sizes:
        if total == 10 * per_a:
            reused = [dict(r, reused_from_part_a=True) for r in part_a_rows if r["norm"] == 1]
            rows += reused
            for r in reused:
                print(_fmt(r) + "  (Part A run)", flush=True)
            continue
        fed = make_federation(10, total // 10, 20, seed=1)
        for loss in (Logistic(), Hinge()):
            for solver in ("CLARABEL", "ECOS", "SCS"):
                if total > caps[solver]:
                    continue
                r = run_one(fed, loss, 1, solver)
                r.update(loss=loss.name, norm=1, samples=total)
                rows.append(r)
                print(_fmt(r), flush=True)
    return rows


def part_c(quick=False):
    from drflmodel.losses import Hinge, SmoothHinge

    rows = []
    sizes = [1000, 10000] if quick else [1000, 10000, 50000]
    for total in sizes:
        fed = make_federation(10, total // 10, 20, seed=1)
        for loss in (Logistic(), SmoothHinge(), Hinge()):
            def make():
                return WassersteinDRFL(fed, loss, radius=0.05, kappa=1.0, norm=1,
                                       weights=LpBall(fed.proportions, 0.1, 2))
            runs = {}
            for method, reps in (("newton", 3), ("conic", 3 if total <= 10000 else 1)):
                times, sol = [], None
                for _ in range(reps):
                    t0 = time.perf_counter()
                    sol = make().solve(method=method)
                    times.append(time.perf_counter() - t0)
                runs[method] = (float(np.median(times)), sol)
            (tn, sn), (tc, sc) = runs["newton"], runs["conic"]
            r = {"loss": loss.name, "samples": total, "newton_s": tn, "conic_s": tc, "ratio": tn / tc,
                 "newton_status": sn.status, "conic_status": sc.status, "newton_gap": sn.relative_gap,
                 "conic_gap": sc.relative_gap, "dU": abs(sn.value - sc.value) / max(1.0, abs(sc.value)),
                 "newton_method": sn.info["method"], "iterations": sn.info.get("iterations"),
                 "time_split": sn.info.get("time_split")}
            rows.append(r)
            split = " ".join(f"{k} {v:.2f}" for k, v in (r["time_split"] or {}).items())
            print(f"{loss.name:12s} N={total:6d} newton {tn:6.2f}s ({r['newton_status']}, gap {r['newton_gap']:.1e}, "
                  f"{r['iterations']} steps; {split}) conic {tc:6.2f}s ({r['conic_status']}, gap {r['conic_gap']:.1e}) "
                  f"newton/conic {r['ratio']:.3f} |dU|/max(1,|U|) {r['dU']:.1e}", flush=True)
    return rows


def _fmt(r):
    if "error" in r:
        return f"{r.get('loss')} l{r.get('norm')} N={r.get('samples')} {r['solver']}: ERROR {r['error']}"
    s = (f"{r['loss']:9s} l{r['norm']} N={r['samples']:6d} {r['solver']:9s} build {r['build_s']:5.2f}s "
         f"compile {r['compile_s']:5.2f}s "
         f"solve(wall) {r['solve_wall_s']:7.2f}s solver {r['solver_time_s'] or float('nan'):7.2f}s "
         f"status {r['status']}")
    if "U" in r:
        s += f" U={r['U']:.9f} relgap={r['rel_gap']:.1e}"
        if r.get("L_conic_dual") is not None:
            s += (f" [L used: {r['lower_bound_method'].split(' (')[0]}; conic dual - U = "
                  f"{(r['L_conic_dual'] - r['U']) / max(1.0, abs(r['U'])):+.1e} rel; rigorous - U = "
                  f"{(r['L_rigorous'] - r['U']) / max(1.0, abs(r['U'])):+.1e} rel, {r['bound_s']:.2f}s]")
    if "dU_vs_clarabel" in r:
        s += f" |dU|={r['dU_vs_clarabel']:.1e}"
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    ap.add_argument("--part", choices=["A", "B", "C"], action="append",
                    help="run only these parts (B needs A's 10,000-sample runs; default: all)")
    args = ap.parse_args()
    parts = set(args.part or ["A", "B", "C"])
    t0 = time.perf_counter()
    out = {}
    if parts & {"A", "B"}:
        print("== Part A: 10 clients x 1,000 samples x 20 features ==")
        out["part_a"] = part_a(args.quick)
    if "B" in parts:
        print("== Part B: solve time vs total samples (l1 transport) ==")
        out["part_b"] = part_b(out["part_a"], args.quick)
    if "C" in parts:
        print("== Part C: fast route (newton) vs conic route, certified, l1 transport ==")
        out["part_c"] = part_c(args.quick)
    print(f"total wall time {time.perf_counter() - t0:.1f}s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dm.solution.jsonable(out), fh, indent=1)


if __name__ == "__main__":
    main()
