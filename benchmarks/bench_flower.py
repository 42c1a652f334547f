"""Benchmark (issue 11 item 7): Scaff-PD on Flower versus drflmodel's simulator, at 10 and 100
clients -- start-up time and per-round time, as ratios measured in one run -- and the
equivalence of every ported algorithm (max |Δθ|, |Δλ| against the simulator's trace).

Instance: ``synthetic_regression`` (n clients x 50 samples x 10 features), squared loss,
``l2 = 0.1``, chi-square penalty (rho = 0.1), ``ScaffPD(local_steps=10)`` with its SC-SC schedule,
exact gradients, seed 0. Engines, run alternately in the same process (median of ``--repeats``):

* ``simulator`` -- ``ScaffPD(...).run(problem)``;
* ``flower-ray`` -- :func:`drflmodel.flower.run` with ``engine="ray"``: Flower's simulation
  engine (``run_simulation``, Ray backend, 1 CPU per client actor, i.e. 2 actors here);
* ``flower-inprocess`` -- the same Flower apps on drflmodel's in-process ``LocalGrid``.

Per round = median of ``Trace.round_time`` after round 1; start-up = time from the call to the end
of round 1 minus one such round (on Ray the ServerApp starts at once and its first round waits
while Ray and the client actors start, so the start-up shows up inside round 1; for the
millisecond start-ups of the other engines the ratio is mostly noise); teardown = from the end of
the last round to the return (Ray shutdown). Ratios are Flower / simulator.

Run: ``python benchmarks/bench_flower.py [--rounds R] [--repeats K] [--clients 10 100]
[--skip-equivalence] [--skip-timing]`` (a few minutes). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.solvers import DRFA, FairVFL, FedAvg, FedBCD, RFedFair, ScaffPD, ScaffPDIA


def _problem(n: int):
    fed = dm.datasets.synthetic_regression(n_clients=n, dim=10, samples=50, seed=0)
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(n, 0.1), l2=0.1)


def _timed(run) -> dict:
    """``run(callback)`` -> trace; returns start-up, per-round and teardown seconds."""
    marks = {}

    def callback(res):
        if res.round == 1:
            marks["first_round_end"] = time.perf_counter()

    t0 = time.perf_counter()
    trace = run(callback)
    t_end = time.perf_counter()
    per_round = float(np.median(trace.round_time[1:]))
    last_end = marks["first_round_end"] + float(np.sum(trace.round_time[1:]))
    return {"startup": max(0.0, marks["first_round_end"] - t0 - per_round), "round": per_round,
            "teardown": max(0.0, t_end - last_end), "trace": trace}


def timing(sizes, rounds: int, repeats: int) -> list[dict]:
    rows = []
    for n in sizes:
        prob = _problem(n)
        solver = ScaffPD(rounds=rounds, local_steps=10)
        runs = {
            "simulator": lambda cb: solver.run(prob, seed=0, callback=cb),
            "flower-ray": lambda cb: dmf.run(prob, solver, seed=0, engine="ray", callback=cb),
            "flower-inprocess": lambda cb: dmf.run(prob, solver, seed=0, engine="inprocess", callback=cb),
        }
        got = {k: [] for k in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                got[name].append(_timed(run))
        base = got["simulator"]
        for name, results in got.items():
            row = {"clients": n, "engine": name,
                   **{k: float(np.median([r[k] for r in results])) for k in ("startup", "round", "teardown")},
                   "max_diff": max(max(dmf.compare_traces(b["trace"], r["trace"])["theta"],
                                       dmf.compare_traces(b["trace"], r["trace"])["weights"])
                                   for b, r in zip(base, results))}
            row["startup_ratio"] = row["startup"] / float(np.median([b["startup"] for b in base]))
            row["round_ratio"] = row["round"] / float(np.median([b["round"] for b in base]))
            rows.append(row)
            print(f"{n:>7}  {name:<17}{row['startup']:>11.4f}{1e3 * row['round']:>13.2f}"
                  f"{row['teardown']:>11.2f}{row['startup_ratio']:>12.1f}x{row['round_ratio']:>11.1f}x"
                  f"{row['max_diff']:>12.1e}", flush=True)
    return rows


def equivalence(engine: str) -> list[dict]:
    """Every ported algorithm, exact and minibatch (rFedFair: full and sampled participation; the
    vertical FairVFL / FedBCD), against the simulator: the largest |Δθ| and |Δλ| over rounds and
    coordinates, and whether the per-round message and float counts are equal."""
    fed = dm.datasets.synthetic_regression(n_clients=4, dim=5, samples=[20, 30, 40, 50], seed=1,
                                           heterogeneity=1.0)
    sq = dm.losses.Squared()
    dro = dm.FederatedDRO(fed, sq, weights=dm.sets.ChiSquare(4, 0.1), l2=0.1)
    cvar = dm.FederatedDRO(fed, sq, weights=dm.sets.CVaR(4, 0.5), l2=0.1)
    erm = dm.FederatedDRO(fed, sq, weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)
    rel = dm.RelativeFairness(fed, sq, A=dm.sets.CVaR(4, 0.4), B=dm.sets.CVaR(4, 0.4), phi=0.1, l2=0.1)
    cfed = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60],
                                                heterogeneity=1.0, seed=0)
    fafl = dm.FairnessAwareFL(cfed, dm.losses.Logistic(), alpha=0.5)
    vf = dm.datasets.synthetic_vertical(n_samples=120, dim=6, n_parties=4, group_shift=1.5, seed=0)
    deo = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=0.1)
    R = 25 if engine == "inprocess" else 4
    ia = dict(schedule="constant", step_size=0.05, dual_step=0.05, local_steps=4)
    cases = []
    for batch, label in ((None, "exact"), (6, "minibatch")):
        cases += [("ScaffPD", label, dro, ScaffPD(rounds=R, local_steps=4, batch_size=batch)),
                  ("ScaffPDIA", label, rel, ScaffPDIA(rounds=R, batch_size=batch, **ia)),
                  ("DRFA", label, cvar, DRFA(rounds=R, local_steps=4, batch_size=batch)),
                  ("FedAvg", label, erm, FedAvg(rounds=R, local_steps=4, batch_size=batch))]
    cases += [("RFedFair", "exact, full", fafl, RFedFair(mu=0.5, rounds=R, local_steps=5)),
              ("RFedFair", "exact, K=3 sampled", fafl,
               RFedFair(mu=0.5, rounds=R, local_steps=5, participation="partial", clients_per_round=3)),
              ("FairVFL", "exact (vertical)", deo, FairVFL(rounds=R, preset="lagrangian", local_steps=2)),
              ("FedBCD", "exact (vertical)", deo, FedBCD(rounds=R, local_steps=2))]
    runs = [dmf.FlowerRun(prob, solver, seed=7) for _, _, prob, solver in cases]
    # the simulator needs the same number of clients per session: all problems here have 4
    dmf.run_many(runs, engine=engine)
    rows = []
    for (name, label, prob, solver), run in zip(cases, runs):
        gaps = dmf.compare_traces(solver.run(prob, seed=7), run.trace)
        rows.append({"algorithm": name, "gradients": label, "rounds": R, **gaps})
        w = "-" if gaps["weights"] is None else f"{gaps['weights']:.1e}"
        print(f"  {name:<10}{label:<20}{R:>4}{gaps['theta']:>12.1e}{w:>12}"
              f"{'yes' if gaps['communication'] else 'NO':>8}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--skip-equivalence", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.ERROR)

    ok = True
    if not args.skip_equivalence:
        for engine in ("inprocess", "ray"):
            print(f"equivalence with the simulator, engine {engine} (max over rounds and coordinates)")
            print(f"  {'algorithm':<10}{'gradients':<20}{'R':>4}{'|dtheta|':>12}{'|dlambda|':>12}{'counts':>8}")
            rows = equivalence(engine)
            ok &= all(r["theta"] <= 1e-10 and (r["weights"] is None or r["weights"] <= 1e-10)
                      and r["communication"] for r in rows)
        print()
    if args.skip_timing:
        return 0 if ok else 1
    print(f"Scaff-PD timing, {args.rounds} rounds x {args.repeats} repeats (median), J = 10")
    print(f"{'clients':>7}  {'engine':<17}{'start-up s':>11}{'ms / round':>13}{'teardown s':>11}"
          f"{'start-up /sim':>13}{'round /sim':>12}{'max |diff|':>12}")
    rows = timing(args.clients, args.rounds, args.repeats)
    ok &= all(r["max_diff"] <= 1e-10 for r in rows)
    if not ok:
        print("FAIL: a Flower run differs from the simulator by more than 1e-10")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
