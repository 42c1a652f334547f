"""Grading a Flower run privately: the oracle and every round's objective from secure sums only.

``drflmodel.flower.graded(server_app, oracle=problem, private=True)`` grades a Flower app (here
FedAvg, Flower's Message-API strategy, with drflmodel's gradient-step ``ClientApp``) against the
**private** certified oracle: every answer the grader uses is a sum over all clients through Flower's
SecAgg+ (``SecAggPlusWorkflow`` / ``secaggplus_mod`` on an in-process grid, one supernode per
client), never one client's value, gradient or loss. At each round's model the grader asks one
secure sum (the clients' weighted values for ERM; their tilted terms for the KL penalty) and the
distance to the oracle's model needs nothing from the clients. ``app.trace.info["private_grading"]``
says what the grading revealed.

Breast cancer over 4 sites, logistic loss, ERM (and, in the full run, the KL penalty with
tau = 0.5). The example holds the rows (a simulation), so it also prints each round's exact
objective beside the one measured from secure sums: they agree within the carried quantization
error. ``--quick`` takes the oracle from ``private_solve`` (the same SecAgg+ arithmetic, simulated:
the same certificate bit for bit) and runs 5 rounds; the full run certifies the oracle through
Flower's SecAgg+ itself. The app's own messages (FedAvg's models, the clients' ``train_loss``) are
the app's; the grading adds only secure sums.

Run ``python examples/flower_private_grading.py [--quick] [--out DIR]``; the guarantee and its limits
are in docs/tutorials/private-certificate.md.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

import drflmodel as dm


def problems(quick: bool):
    """(name, problem) pairs: ERM always, the KL penalty in the full run."""
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    yield "ERM", dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0),
                                 l2=0.01)
    if not quick:
        yield "KL penalty tau=0.5", dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.KLPenalty(4, 0.5),
                                                    l2=0.01)


def fedavg_app(dim: int, rounds: int):
    """The Flower app being graded: FedAvg over every supernode, from the zero model."""
    from flwr.app import ArrayRecord
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg

    app = ServerApp()

    @app.main()
    def main(grid, context):
        FedAvg(min_available_nodes=4, min_train_nodes=4).start(grid=grid, initial_arrays=ArrayRecord([np.zeros(dim)]),
                                                               num_rounds=rounds)

    return app


def grade_privately(problem, rounds: int, quick: bool):
    """Run the app on an in-process grid, graded privately; returns the grading ``ServerApp``."""
    from flwr.app import Context, RecordDict

    from drflmodel import flower as dmf
    from drflmodel.client_oracle import private_solve
    from drflmodel.flower.client import strategy_client_app
    from drflmodel.flower.grid import LocalGrid

    oracle = private_solve(problem) if quick else None          # quick: the simulated SecAgg+ arithmetic
    server = dmf.graded(fedavg_app(problem.dim, rounds), oracle=problem, solution=oracle, private=True,
                        progress=False)
    client = strategy_client_app(problem, step_size=0.5, local_steps=10)
    with LocalGrid(client, problem.n_clients) as grid:
        server(grid, Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    return server


def figure(rows: list[dict], path) -> None:
    """Each round's objective minus the oracle's value: measured from secure sums (dots) and exact
    from the rows (line), against the oracle's certified gap."""
    from drflmodel.plots import panels, save_figure

    fig, axes = panels(len(rows), width=5.0, height=4.0)
    for ax, row in zip(axes, rows):
        r = np.arange(len(row["measured"]))
        ax.semilogy(r, np.asarray(row["exact"]) - row["oracle"], "-", label="exact (rows; simulation only)")
        ax.semilogy(r, np.asarray(row["measured"]) - row["oracle"], "o", label="from one secure sum per round")
        ax.axhline(row["gap"], ls=":", c="gray", label="oracle's certified gap")
        ax.set_xlabel("FedAvg round")
        ax.set_ylabel("objective - oracle value")
        ax.set_title(row["case"], fontsize="small")
        ax.legend(fontsize="x-small")
    save_figure(fig, path, "FedAvg graded privately: the grader sees sums over all clients only")


def main(quick: bool = False, verbose: bool = True, out=None) -> list[dict]:
    """Grade the run for each problem; return one record per problem."""
    logging.getLogger("flwr").setLevel(logging.WARNING)
    rounds = 5 if quick else 12
    rows = []
    for name, prob in problems(quick):
        t0 = time.perf_counter()
        server = grade_privately(prob, rounds, quick)
        seconds = time.perf_counter() - t0
        sol, trace = server.solution, server.trace
        reveals = trace.info["private_grading"]
        measured = [float(v) for v in trace.iterates["objective"]]
        exact = [prob.objective(theta) for theta in trace.theta]
        rows.append({"case": name, "problem": prob, "oracle": sol.value, "lower": sol.lower_bound,
                     "upper": sol.upper_bound, "gap": sol.upper_bound - sol.lower_bound, "status": sol.status,
                     "measured": measured, "exact": exact, "reveals": reveals, "seconds": seconds,
                     "report": server.report})
        if verbose:
            print(f"{name}: private oracle [{sol.lower_bound:.10f}, {sol.upper_bound:.10f}] ({sol.status}, "
                  f"{reveals['oracle_secure_sums']} secure sums); graded {reveals['graded_models']} models with "
                  f"{reveals['grading_secure_sums']} SecAgg+ rounds in {seconds:.1f} s")
            print(f"{'round':>5s} {'objective (secure sum)':>23s} {'exact (rows)':>14s} {'difference':>11s}")
            for r, (m, e) in enumerate(zip(measured, exact)):
                print(f"{r:5d} {m:23.12f} {e:14.12f} {m - e:11.2e}")
            worst = max(abs(m - e) for m, e in zip(measured, exact))
            print(f"largest |difference| {worst:.1e} <= carried quantization error "
                  f"{reveals['quantization_error_max']:.1e} + rounding: {worst <= reveals['quantization_error_max'] + 1e-12}")
            print("what the grading revealed:", reveals["per_round"])
            print(server.report.summary().splitlines()[0])
    if out is not None:
        from pathlib import Path

        Path(out).mkdir(parents=True, exist_ok=True)
        figure(rows, Path(out) / "flower_private_grading.png")
        print(f"figure: {Path(out) / 'flower_private_grading.png'}")
    return rows


if __name__ == "__main__":
    np.seterr(all="ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="ERM only, 5 rounds, the oracle from the simulated channel")
    ap.add_argument("--out", help="directory for the figure (PNG; needs matplotlib)")
    args = ap.parse_args()
    main(quick=args.quick, out=args.out)
