"""A private certificate: the server certifies the optimum from secure sums over the clients only.

The federated certified solve (``drflmodel.client_oracle.federated_solve``) asks each client for its
own values, gradients and bound terms: enough, for a small client, to recover its rows. Private
mode (``drflmodel.client_oracle.private_solve``, or ``drflmodel.flower.certified_solve(problem,
private=True)`` over Flower's SecAgg+) asks only for **sums over all clients** -- each one what
Flower's secure aggregation hands a server -- and carries the quantization error of those sums into
the lower and upper bounds. This example prints the two certificates side by side on breast cancer
split over 4 sites (ERM, the χ² set with rho = 0.5, CVaR at alpha = 0.5; the full run adds digits
over 20 clients with a softmax loss, and one run through Flower's real SecAgg+): both intervals
contain the same optimum, and the last columns say what each server saw -- per-client answers, or
sums, none of whose entries holds fewer than 2 clients' terms (the guard; the sums it withheld are
counted). CVaR and χ² are run with ``reveal_loss_distribution=True``: their dual's sums tell the
server the unlabeled distribution of the client losses near the dual's level (the docs page says
exactly what); ERM reveals no client's loss.

Run ``python examples/private_certificate.py [--quick] [--out DIR]``; the guarantee and its limits
are in docs/tutorials/private-certificate.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, federated_solve, private_solve


def cases(quick: bool):
    """(name, problem) pairs: breast cancer (4 sites) always, digits (20 clients, softmax) in the full run."""
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    p = bc.sizes / bc.sizes.sum()
    yield "breast cancer ERM", dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(p, 1.0), l2=0.01)
    yield "breast cancer chi2 0.5", dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.ChiSquare(4, 0.5), l2=0.01)
    yield "breast cancer CVaR 0.5", dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    if not quick:
        dg = dm.datasets.digits(n_clients=20, seed=0)
        q = dg.sizes / dg.sizes.sum()
        yield "digits ERM softmax", dm.FederatedDRO(dg, dm.losses.Multinomial(), weights=dm.sets.HCVaR(q, 1.0), l2=0.01)
        yield "digits chi2 0.5 softmax", dm.FederatedDRO(dg, dm.losses.Multinomial(), weights=dm.sets.ChiSquare(20, 0.5), l2=0.01)
        yield "digits CVaR 0.5 softmax", dm.FederatedDRO(dg, dm.losses.Multinomial(), weights=dm.sets.CVaR(20, 0.5), l2=0.01)


def figure(rows: list[dict], path) -> None:
    """Left: each certificate's relative gap (private beside non-private). Right: what a client
    uploads (kB), per-client answers against masked sums."""
    from drflmodel.plots import panels, save_figure

    names = [r["case"] for r in rows]
    x = np.arange(len(rows))
    fig, (left, right) = panels(2, width=6, height=4.2)
    for ax, key, label in ((left, "rel_gap", "relative gap (U - L) / |U|"), (right, "kB", "kB a client uploads")):
        ax.bar(x - 0.2, [r["np"][key] for r in rows], 0.4, label="per-client answers")
        ax.bar(x + 0.2, [r["private"][key] for r in rows], 0.4, label="secure sums (private)")
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize="x-small")
        ax.legend(fontsize="x-small")
    left.set_title("both certificates close; the private one carries the quantization", fontsize="small")
    right.set_title("SecAgg+ key and share traffic not counted", fontsize="small")
    save_figure(fig, path, "A private certificate from secure sums against the federated certified solve")


def _row(sol, seconds, kb):
    return {"lower": sol.lower_bound, "upper": sol.upper_bound, "status": sol.status,
            "rel_gap": max((sol.upper_bound - sol.lower_bound) / abs(sol.upper_bound), 1e-17), "seconds": seconds,
            "kB": kb}


def main(quick: bool = False, verbose: bool = True, out=None, flower: bool | None = None) -> list[dict]:
    """Solve each case both ways; return one record per case (``flower``: also the first case
    through Flower's SecAgg+ on the in-process grid; default: in the full run only)."""
    rows = []
    if verbose:
        print(f"{'case':24s} | {'non-private L':>14s} {'U':>14s} {'status':>18s} {'kB':>7s} | "
              f"{'private L':>14s} {'U':>14s} {'status':>18s} {'kB':>7s} {'sums':>5s} {'withheld':>8s}")
    for name, prob in cases(quick):
        channel = LocalChannel.from_problem(prob)
        t0 = time.perf_counter()
        ref = federated_solve(prob, channel)
        t_np = time.perf_counter() - t0
        np_kb = 8 * sum(row["floats_per_client"] for row in channel.ledger.table()) / 1e3
        t0 = time.perf_counter()
        sol = private_solve(prob, reveal_loss_distribution=True)      # needed by CVaR / chi2 only
        t_p = time.perf_counter() - t0
        info = sol.info["private"]
        row = {"case": name, "np": _row(ref, t_np, np_kb), "private": _row(sol, t_p, info["bytes_per_client"] / 1e3),
               "secure_sums": info["secure_sums"], "isolating_sums": info["isolating_sums"],
               "withheld_sums": info["withheld_sums"],
               "route": info["route"], "problem": prob}
        rows.append(row)
        if verbose:
            a, b = row["np"], row["private"]
            print(f"{name:24s} | {a['lower']:14.10f} {a['upper']:14.10f} {a['status']:>18s} {a['kB']:7.1f} | "
                  f"{b['lower']:14.10f} {b['upper']:14.10f} {b['status']:>18s} {b['kB']:7.1f} "
                  f"{row['secure_sums']:5d} {row['withheld_sums']:8d}")
    if verbose:
        both = all(r["private"]["lower"] <= r["np"]["upper"] and r["np"]["lower"] <= r["private"]["upper"]
                   for r in rows)
        print(f"every private interval meets the non-private one (the same optimum inside both): {both}")
        print("non-private: the server saw each client's own values, gradients and bound terms; private: "
              "only sums over all 4 (or 20) clients with at least 2 clients' terms in every entry, N, the "
              "count of clients that would clip, per entry the count of clients with a nonzero term, and "
              "(CVaR/chi2, opted in) the unlabeled distribution of the client losses near the dual's eta")
    if flower if flower is not None else not quick:
        from drflmodel.flower import certified_solve

        prob = rows[0]["problem"]
        t0 = time.perf_counter()
        sec = certified_solve(prob, private=True)
        seconds = time.perf_counter() - t0
        same = sec.lower_bound == rows[0]["private"]["lower"] and sec.upper_bound == rows[0]["private"]["upper"]
        rows[0]["flower"] = {"lower": sec.lower_bound, "upper": sec.upper_bound, "seconds": seconds, "same": same}
        if verbose:
            print(f"{rows[0]['case']} through Flower's SecAgg+ (in-process grid): {sec.info['private']['secure_sums']} "
                  f"rounds in {seconds:.1f} s, the same certificate bit for bit: {same}")
    if out is not None:
        from pathlib import Path

        Path(out).mkdir(parents=True, exist_ok=True)
        figure(rows, Path(out) / "private_certificate.png")
        print(f"figure: {Path(out) / 'private_certificate.png'}")
    return rows


if __name__ == "__main__":
    np.seterr(all="ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="breast cancer only, no Flower run (a few seconds)")
    ap.add_argument("--out", help="directory for the figure (PNG; needs matplotlib)")
    args = ap.parse_args()
    main(quick=args.quick, out=args.out)
