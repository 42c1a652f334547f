"""Flower benchmarks, each part a ratio or a difference measured in the same run:

* ``equivalence`` -- every ported algorithm (sampled DRFA / Stochastic-AFL and the minibatch
  variants included) against the simulator's trace (max |Δθ|, |Δλ|, equal message counts);
* ``timing`` -- Scaff-PD on Flower versus the simulator at 10 and 100 clients: start-up and
  per-round time, as ratios;
* ``oracle`` -- the federated certified solve (in-process grid) against the centralized one for
  every supported family: agreement of both bounds, exchanges, times;
* ``inprocess`` -- the in-process grid's own overhead: the share of a Scaff-PD round spent in its
  protobuf wire (``grid._wire``), default (encode + copy) and ``decode=True``;
* ``client`` -- drflmodel's share of a deployed client's message: Flower 1.41 starts a process
  per message; fresh interpreters importing Flower's client stack (its floor) versus the example
  app's client answering one message (now, and the previous path that built the oracle);
* ``deployment`` -- across processes (``LocalDeployment``: a SuperLink, 3 supernodes,
  ``flwr run``): seconds per message exchange with an empty ClientApp (Flower's floor) versus
  drflmodel's ClientApp answering the client-oracle queries, the same server loop for both.

Scaff-PD timing details:

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

Run: ``python benchmarks/bench_flower.py [--part equivalence timing oracle inprocess client deployment]
[--rounds R] [--repeats K] [--clients 10 100] [--exchanges E]`` (default: every part; a few minutes,
the deployment part several more). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.solvers import DRFA, FairVFL, FedAvg, FedBCD, RFedFair, ScaffPD, ScaffPDIA, StochasticAFL

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "examples" / "flower_app"


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
              ("RFedFair", "minibatch, K=3 sampled", fafl,
               RFedFair(mu=0.5, rounds=R, local_steps=5, participation="partial", clients_per_round=3,
                        batch_size=6)),
              ("DRFA", "exact, m=2 sampled", cvar, DRFA(rounds=R, local_steps=4, clients_per_round=2)),
              ("DRFA", "minibatch, m=3 sampled", cvar,
               DRFA(rounds=R, local_steps=4, clients_per_round=3, batch_size=6)),
              ("StochasticAFL", "exact, full", cvar, StochasticAFL(rounds=R)),
              ("StochasticAFL", "minibatch, m=3 sampled", cvar,
               StochasticAFL(rounds=R, clients_per_round=3, batch_size=6)),
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
        print(f"  {name:<14}{label:<24}{R:>4}{gaps['theta']:>12.1e}{w:>12}"
              f"{'yes' if gaps['communication'] else 'NO':>8}", flush=True)
    return rows


# ---------------------------------------------------------------------------------- oracle
def oracle_agreement() -> list[dict]:
    """The federated certified solve on the in-process grid against the centralized solve with the
    same route, for every supported family."""
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60],
                                               heterogeneity=1.0, seed=0)
    reg = dm.datasets.synthetic_regression(n_clients=4, dim=5, samples=[20, 30, 40, 50], seed=1,
                                           heterogeneity=1.0)
    digits = dm.datasets.digits(n_clients=5, seed=0)
    lg, p = dm.losses.Logistic(), fed.proportions
    cases = [
        ("AFL / logistic", dm.FederatedDRO(fed, lg, dm.sets.Simplex(4), l2=0.01), "sqp"),
        ("CVaR / logistic", dm.FederatedDRO(fed, lg, dm.sets.CVaR(4, 0.5), l2=0.01), "sqp"),
        ("chi2 / logistic", dm.FederatedDRO(fed, lg, dm.sets.ChiSquare(4, 0.1), l2=0.01), "sqp"),
        ("l2 ball / logistic", dm.FederatedDRO(fed, lg, dm.sets.LpBall(p, 0.1, 2), l2=0.01), "sqp"),
        ("HCVaR / logistic", dm.FederatedDRO(fed, lg, dm.sets.HCVaR(p, 0.6), l2=0.01), "sqp"),
        ("q-FFL / logistic", dm.FederatedDRO(fed, lg, dm.sets.QFFL(4, 1.0), l2=0.01), "sqp"),
        ("FAFL / logistic", dm.FairnessAwareFL(fed, lg, alpha=0.5, l2=0.01), "sqp"),
        ("chi2 / squared (stats)", dm.FederatedDRO(reg, dm.losses.Squared(), dm.sets.ChiSquare(4, 0.1), l2=0.1),
         "sqp"),
        ("CVaR / softmax digits", dm.FederatedDRO(digits, dm.losses.Multinomial(), dm.sets.CVaR(5, 0.5), l2=1e-3,
                                                  penalize_intercept=False), "sqp"),
        ("CVaR / hinge (bundle)", dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(4, 0.5), l2=0.1), "bundle"),
        ("FAFL / pinball (bundle)", dm.FairnessAwareFL(reg, dm.losses.Pinball(0.3), alpha=0.5, l2=0.05),
         "bundle"),
    ]
    print(f"  {'family / loss':<24}{'P':>5}{'status':>9}{'|dL|/|U|':>11}{'|dU|/|U|':>11}{'gap':>10}"
          f"{'exchanges':>11}{'central s':>11}{'federated s':>13}")
    rows = []
    for label, prob, method in cases:
        tol = {"tol": 1e-9} if method == "bundle" else {}
        t0 = time.perf_counter()
        central = prob.solve(method=method, **tol)
        t1 = time.perf_counter()
        fed_sol = dmf.certified_solve(prob, **tol)
        t2 = time.perf_counter()
        scale = max(1.0, abs(central.upper_bound))
        row = {"case": label, "P": prob.dim, "status": fed_sol.status,
               "dL": abs(fed_sol.lower_bound - central.lower_bound) / scale,
               "dU": abs(fed_sol.upper_bound - central.upper_bound) / scale, "gap": fed_sol.relative_gap,
               "exchanges": fed_sol.info["federated"]["exchanges"], "central_s": t1 - t0, "federated_s": t2 - t1,
               "reveals": fed_sol.info["federated"]["reveals"]}
        rows.append(row)
        print(f"  {label:<24}{prob.dim:>5}{row['status']:>9}{row['dL']:>11.1e}{row['dU']:>11.1e}"
              f"{row['gap']:>10.1e}{row['exchanges']:>11}{row['central_s']:>11.2f}{row['federated_s']:>13.2f}",
              flush=True)
    for label, k in (("CVaR / logistic", 1), ("CVaR / softmax digits", 8), ("chi2 / squared (stats)", 7)):
        print(f"\n  what one client revealed ({label}):")
        for r in rows[k]["reveals"]:
            print(f"    {r['quantity']:<34}{r['floats']:>8} floats x {r['max_answers_per_client']:>3} answers")
    return rows


# ---------------------------------------------------------------------------------- in-process wire
def inprocess_overhead(sizes, rounds: int, repeats: int) -> list[dict]:
    """Share of a Scaff-PD round on the in-process grid spent in its wire (encode + copy by default,
    encode + decode with ``decode=True``), measured by timing every ``_wire`` call; the two modes
    alternate ``repeats`` times (medians)."""
    from drflmodel.flower import grid as G

    original, spent = G._wire, [0.0]

    def timed(message, decode=False):
        t = time.perf_counter()
        out = original(message, decode)
        spent[0] += time.perf_counter() - t
        return out

    G._wire = timed
    rows = []
    try:
        for n in sizes:
            prob = _problem(n)
            solver = ScaffPD(rounds=rounds, local_steps=10)
            got = {False: [], True: []}
            for _ in range(repeats):
                for decode in (False, True):
                    run = dmf.FlowerRun(prob, solver, seed=0)
                    with G.LocalGrid(run.client_app, n, decode=decode) as grid:
                        spent[0] = 0.0
                        trace = run.serve(grid)
                    total = float(np.sum(trace.round_time))
                    got[decode].append((total / rounds, spent[0] / total))
            sim = float(np.median([np.median(solver.run(prob, seed=0).round_time) for _ in range(repeats)]))
            for decode, label in ((False, "encode + copy (default)"), (True, "encode + decode")):
                per_round = float(np.median([g[0] for g in got[decode]]))
                share = float(np.median([g[1] for g in got[decode]]))
                rows.append({"clients": n, "wire": label, "round_ms": 1e3 * per_round, "wire_share": share,
                             "simulator_ms": 1e3 * sim})
                print(f"  {n:>7}  {label:<25}{1e3 * per_round:>12.1f}{100 * share:>13.0f}%{1e3 * sim:>14.2f}",
                      flush=True)
    finally:
        G._wire = original
    return rows


# ---------------------------------------------------------------------------------- client process
_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
import flwr.clientapp, flwr.app                        # Flower's client stack: its floor
t1 = time.perf_counter()
{work}
print(json.dumps({{"flower": t1 - t0, "drflmodel": spent}}))
"""
_NOW = """
sys.path.insert(0, {app!r})
t_import = time.perf_counter()
from drflmodel_app.client_app import app                # drflmodel: the app module
t_import = time.perf_counter() - t_import
import numpy as np                                      # the apparatus (not timed): a message as
from flwr.app import Message                            # Flower's runtime would hand it over
from drflmodel.flower.grid import LocalGrid, _wire
from drflmodel.flower._records import down_content
with LocalGrid(app, 3, run_config={{"problem-config": "problem.toml"}}) as grid:
    node = next(iter(grid.get_node_ids()))
    content = down_content({{{arg!r}: np.zeros(5)}}, {{"run": {run!r}, "seed": 0, "n-clients": 3,
                                                     "options": "{{}}", "batch-size": 0}})
    message = _wire(Message(content, node, {op!r}))
    t_handle = time.perf_counter()
    reply = app(message, grid.contexts[node])           # drflmodel: build the site, answer
    t_handle = time.perf_counter() - t_handle
assert not reply.has_error(), reply.error
spent = t_import + t_handle
"""
_BEFORE = """
import numpy as np
t_before = time.perf_counter()
from drflmodel._config import build_problem, load_config
from drflmodel.flower import client
problem = build_problem(load_config({toml!r}))
view = problem.client_view(0)
view.gradient(np.zeros(problem.dim)); view.value(np.zeros(problem.dim))
spent = time.perf_counter() - t_before
"""


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(APP))
    return json.loads(out.stdout.strip().splitlines()[-1])


def client_share(repeats: int) -> list[dict]:
    """Seconds a deployed client process spends in drflmodel for one message (fresh interpreters,
    median of ``repeats``), next to Flower's own client imports (its floor, paid whatever the app):
    the example app's client answering one message, and the previous path that built the whole
    oracle per message."""
    cases = [
        ("oracle query (values)", _NOW.format(app=str(APP), arg="theta", run="oracle", op="query.drflmodel_values")),
        ("Scaff-PD step (losses+controls)", _NOW.format(app=str(APP), arg="model", run="run",
                                                         op="train.losses_controls")),
        ("before: build the oracle per message", _BEFORE.format(toml=str(APP / "problem.toml"))),
    ]
    rows = []
    for label, work in cases:
        got = [_fresh(_PROCESS.format(work=work)) for _ in range(repeats)]
        flower = float(np.median([g["flower"] for g in got]))
        ours = float(np.median([g["drflmodel"] for g in got]))
        rows.append({"message": label, "flower_s": flower, "drflmodel_s": ours})
        print(f"  {label:<38}{flower:>12.2f}{ours:>14.2f}", flush=True)
    return rows


# ---------------------------------------------------------------------------------- deployment
_BENCH_SERVER = """
import json, time
from pathlib import Path
import numpy as np
from flwr.serverapp import ServerApp
from drflmodel.flower.oracle import FlowerChannel

app = ServerApp()


@app.main()
def main(grid, context):
    rc = context.run_config
    t0 = time.perf_counter()
    channel = FlowerChannel(grid, int(rc["clients"]), timeout=600.0, poll_interval=float(rc["poll-interval"]))
    times = {"connect": time.perf_counter() - t0}
    t = time.perf_counter()
    channel.ask("describe")
    times["setup"] = time.perf_counter() - t
    times["exchanges"] = []
    for k in range(int(rc["exchanges"])):
        t = time.perf_counter()
        channel.ask("values", {"theta": np.full(int(rc["dim"]), 0.1 * k)})
        times["exchanges"].append(time.perf_counter() - t)
    Path(str(rc["out"])).write_text(json.dumps(times))
"""
_BENCH_CLIENT = """
from pathlib import Path
import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()
_ours = []


def _answer(msg, context, value):
    if context.run_config["mode"] == "drflmodel":          # drflmodel's ClientApp, built in this process
        if not _ours:
            from drflmodel.flower.deploy import config_client_app
            _ours.append(config_client_app(Path(__file__).resolve().parent.parent))
        return _ours[0](msg, context)
    arrays = {} if value is None else {"value": Array(np.array(value, float))}
    return Message(RecordDict({"payload": ArrayRecord(arrays),
                               "metrics": MetricRecord({"partition-id": int(context.node_config["partition-id"])})}),
                   reply_to=msg)


@app.query("drflmodel_describe")
def describe(msg, context):
    return _answer(msg, context, None)


@app.query("drflmodel_values")
def values(msg, context):
    return _answer(msg, context, [0.0])
"""
_BENCH_TOML = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "drflmodel-bench-app"
version = "1.0.0"
dependencies = []

[tool.setuptools]
packages = ["benchapp"]

[tool.flwr.app]
publisher = "drflmodel"

[tool.flwr.app.components]
serverapp = "benchapp.server_app:app"
clientapp = "benchapp.client_app:app"

[tool.flwr.app.config]
mode = "floor"
clients = 3
dim = 5
exchanges = 3
out = ""
poll-interval = 0.1
problem-config = "problem.toml"
"""


def deployment(exchanges: int) -> list[dict]:
    """Seconds per message exchange across processes: Flower's floor (an empty ClientApp) versus
    drflmodel's ClientApp answering client-oracle value queries; the same server loop, the runs
    alternating (floor, drflmodel, floor, drflmodel) on one deployment."""
    from drflmodel.flower.deploy import LocalDeployment

    rows = []
    with tempfile.TemporaryDirectory(prefix="drflmodel-bench-") as tmp:
        app = Path(tmp) / "app"
        (app / "benchapp").mkdir(parents=True)
        (app / "pyproject.toml").write_text(_BENCH_TOML)
        (app / "problem.toml").write_text((APP / "problem.toml").read_text())
        (app / "benchapp" / "__init__.py").write_text("")
        (app / "benchapp" / "server_app.py").write_text(_BENCH_SERVER)
        (app / "benchapp" / "client_app.py").write_text(_BENCH_CLIENT)
        with LocalDeployment(3, workdir=Path(tmp) / "deployment") as dep:
            for mode in ("floor", "drflmodel", "floor", "drflmodel"):
                out = Path(tmp) / f"{mode}-{len(rows)}.json"
                t0 = time.perf_counter()
                result = dep.run(app, {"mode": mode, "exchanges": exchanges, "out": str(out)}, timeout=1200)
                if result.returncode != 0 or not out.exists():
                    raise RuntimeError(f"flwr run ({mode}) failed:\n{dep.log('flwr-run')[-3000:]}")
                times = json.loads(out.read_text())
                rows.append({"mode": mode, "run_s": time.perf_counter() - t0, **times})
                print(f"  {mode:<11}{times['setup']:>10.2f}{np.median(times['exchanges']):>16.2f}"
                      f"{np.min(times['exchanges']):>10.2f}{np.max(times['exchanges']):>10.2f}"
                      f"{rows[-1]['run_s']:>10.1f}", flush=True)
    per = {m: [t for r in rows if r["mode"] == m for t in r["exchanges"]] for m in ("floor", "drflmodel")}
    for mode, ex in per.items():
        print(f"  {mode}: median {np.median(ex):.2f} s per exchange over {len(ex)} exchanges")
    print(f"  drflmodel's share of a message exchange: "
          f"{np.median(per['drflmodel']) - np.median(per['floor']):+.2f} s (difference of the medians)")
    return rows


PARTS = ("equivalence", "timing", "oracle", "inprocess", "client", "deployment")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--exchanges", type=int, default=3)
    args = ap.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.ERROR)

    ok = True
    if "equivalence" in args.part:
        for engine in ("inprocess", "ray"):
            print(f"equivalence with the simulator, engine {engine} (max over rounds and coordinates)")
            print(f"  {'algorithm':<14}{'gradients':<24}{'R':>4}{'|dtheta|':>12}{'|dlambda|':>12}{'counts':>8}")
            rows = equivalence(engine)
            ok &= all(r["theta"] <= 1e-10 and (r["weights"] is None or r["weights"] <= 1e-10)
                      and r["communication"] for r in rows)
        print()
    if "timing" in args.part:
        print(f"Scaff-PD timing, {args.rounds} rounds x {args.repeats} repeats (median), J = 10")
        print(f"{'clients':>7}  {'engine':<17}{'start-up s':>11}{'ms / round':>13}{'teardown s':>11}"
              f"{'start-up /sim':>13}{'round /sim':>12}{'max |diff|':>12}")
        rows = timing(args.clients, args.rounds, args.repeats)
        ok &= all(r["max_diff"] <= 1e-10 for r in rows)
        print()
    if "oracle" in args.part:
        print("federated certified solve (in-process Flower grid) vs the centralized solve, same route")
        rows = oracle_agreement()
        ok &= all(r["dL"] <= 1e-8 and r["dU"] <= 1e-8 and r["status"] == "optimal" for r in rows)
        print()
    if "inprocess" in args.part:
        print(f"in-process grid: share of a Scaff-PD round in the wire, {args.rounds} rounds x {args.repeats}")
        print(f"  {'clients':>7}  {'wire':<25}{'ms / round':>12}{'wire share':>14}{'simulator ms':>14}")
        rows = inprocess_overhead(args.clients, args.rounds, args.repeats)
        ok &= all(r["wire_share"] <= 0.2 for r in rows if r["wire"].startswith("encode + copy"))
        print()
    if "client" in args.part:
        print(f"a deployed client's message: seconds in a fresh process (median of {2 * args.repeats + 1})")
        print(f"  {'message':<38}{'Flower floor':>12}{'drflmodel':>14}")
        rows = client_share(2 * args.repeats + 1)
        ok &= all(r["drflmodel_s"] <= 0.5 for r in rows if not r["message"].startswith("before"))
        print()
    if "deployment" in args.part:
        print(f"across processes (SuperLink + 3 supernodes + flwr run), {args.exchanges} value exchanges per run")
        print(f"  {'mode':<11}{'setup s':>10}{'median exch. s':>16}{'min':>10}{'max':>10}{'run s':>10}")
        deployment(args.exchanges)
    if not ok:
        print("FAIL: a check above is outside its bound")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
