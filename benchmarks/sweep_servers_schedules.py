"""Randomized runs of server optimizers and decaying local steps, graded by ``dm.landing.conformance``.

Correct runs: FedAvgM / FedAdam / FedYogi / FedAdagrad (Flower 1.41's update formulas, random
hyperparameters) on FedAvg's clients, and FedAvg / FedProx with a decaying local step (step decay or
eta_0 / (1 + r / tau)); logistic or softmax, 2-30 clients, J in {1, 5, 20}; models rounded to float64,
float32 or bfloat16; every client or 20-50 % recorded per round; client models recorded. Planted bugs:
one client (or all) runs half the step it is sent ("lr halved"), or keeps the first step of the schedule
("schedule ignored"). Reports the verdicts, how often the per-round certificate from the client updates
(landing.servers) holds, and the bugs caught with and without the recorded client models::

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/sweep_servers_schedules.py --runs 200 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from drflmodel.landing import conformance
from drflmodel.landing.contraction import local_iterates

import sweep_landing_runs  # noqa: E402  (benchmarks/: its problems and its rounding to float32 / bfloat16)

SERVERS = ("FedAvgM", "FedAdam", "FedYogi", "FedAdagrad")


def make_problem(rng, n):
    return sweep_landing_runs.make_problem(rng, str(rng.choice(["logistic", "softmax"])), n)


def cast(x, dtype):
    return np.asarray(sweep_landing_runs._cast(x, dtype), float)


def simulate(prob, p, etas, J, mu, dtype, server, hyper, subsets, bug, faulty):
    n, P = prob.n_clients, prob.dim
    theta, m, v = np.zeros(P), np.zeros(P), np.zeros(P)
    thetas, models = [theta], [np.full((n, P), np.nan)]
    for r, eta in enumerate(etas):
        U = local_iterates(prob.objectives, theta, J, eta, mu)
        if bug is not None:
            wrong = local_iterates(prob.objectives, theta, J, 0.5 * eta if bug == "lr halved" else etas[0], mu)
            U[faulty] = wrong[faulty]
        U = cast(U, dtype)
        S = np.arange(n) if subsets is None else subsets[r]
        w = p[S] / p[S].sum()
        delta = cast(w @ U[S], dtype) - theta
        if server == "plain":
            theta = theta + delta
        elif server == "FedAvgM":
            m = delta if r == 0 else hyper["beta"] * m + delta
            theta = theta + hyper["eta"] * m
        else:
            m = hyper["beta_1"] * m + (1 - hyper["beta_1"]) * delta
            if server == "FedAdam":
                v = hyper["beta_2"] * v + (1 - hyper["beta_2"]) * delta ** 2
                step = hyper["eta"] * np.sqrt(1 - hyper["beta_2"] ** (r + 2)) / (1 - hyper["beta_1"] ** (r + 2))
            elif server == "FedYogi":
                v, step = v - (1 - hyper["beta_2"]) * delta ** 2 * np.sign(v - delta ** 2), hyper["eta"]
            else:
                v, step = v + delta ** 2, hyper["eta"]
            theta = theta + step * m / (np.sqrt(v) + hyper["tau"])
        theta = cast(theta, dtype)
        row = np.full((n, P), np.nan)
        row[S] = U[S]
        thetas.append(theta)
        models.append(row)
    return np.array(thetas), np.array(models)


def one_run(rng, rounds, bug=None):
    n = int(rng.integers(2, 31))
    prob, p = make_problem(rng, n)
    J = int(rng.choice([1, 5, 20]))
    L = float(np.max(prob.objectives.smoothness()))
    dtype = str(rng.choice(["float64", "float32", "bfloat16"]))
    kind = str(rng.choice(SERVERS + ("schedule",)))
    if bug == "schedule ignored":
        kind = "schedule"
    mu = float(rng.choice([0.0, 0.1, 1.0])) if kind == "schedule" else 0.0
    eta0 = float(rng.choice([0.3, 1.0])) / ((L + mu) * (1 if J == 1 else np.sqrt(J)))
    server, hyper, etas = kind, {}, [eta0] * rounds
    if kind == "schedule":
        server = "plain"
        if rng.random() < 0.5:
            cut = sorted(rng.choice(np.arange(10, rounds - 10), size=2, replace=False))
            etas = [eta0 * 0.5 ** int(np.searchsorted(cut, r, side="right")) for r in range(rounds)]
        else:
            tau = float(rng.choice([20.0, 50.0, 200.0]))
            etas = [eta0 / (1 + r / tau) for r in range(1, rounds + 1)]
    elif kind == "FedAvgM":
        hyper = {"beta": float(rng.choice([0.0, 0.5, 0.9])), "eta": float(rng.choice([0.5, 1.0]))}
        if hyper["beta"] == 0.9:
            hyper["eta"] = 0.5
    else:
        hyper = {"eta": float(rng.choice([0.01, 0.05, 0.1])), "beta_1": 0.9, "beta_2": 0.99,
                 "tau": float(rng.choice([1e-3, 1e-2]))}
    subsets = None
    if rng.random() < 0.4:
        k = max(1, int(round(rng.uniform(0.2, 0.5) * n)))
        subsets = [np.sort(rng.choice(n, size=k, replace=False)) for _ in range(rounds)]
    faulty = np.arange(n) if rng.random() < 0.5 else np.array([int(rng.integers(n))])
    T, M = simulate(prob, p, etas, J, mu, dtype, server, hyper, subsets, bug, faulty)
    sol = prob.solve()
    name = "FedProx" if kind == "schedule" and mu > 0 else ("FedAvg" if kind == "schedule" else kind)
    kw = dict(local_steps=J, step_size=etas if kind == "schedule" else eta0, solution=sol,
              participation=subsets, precision=dtype)
    if name == "FedProx":
        kw["mu"] = mu
    if name == "FedAvgM":               # its pseudo-gradients are recovered from the models (landing.servers)
        kw.update(server_momentum=hyper["beta"], global_step=hyper["eta"])
    if not np.all(np.isfinite(T)):
        return {"kind": kind, "dtype": dtype, "verdict": "diverged"}
    with_clients = conformance(T, prob, name, client_models=M, **kw)
    alone = conformance(T, prob, name, **kw)
    cert = with_clients.extra.get("server_certificate")
    cert_ok = None
    if cert is not None:
        d = np.array([row["dist_fixed_point"] for row in with_clients.rows])[cert["rounds"]]
        cert_ok = bool(np.all(d <= np.array(cert["bound"]) * (1 + 1e-9)))
    cert_alone = alone.extra.get("server_certificate")
    if cert_alone is not None:
        d = np.array([row["dist_fixed_point"] for row in alone.rows])[cert_alone["rounds"]]
        cert_ok = bool(cert_ok is not False and np.all(d <= np.array(cert_alone["bound"]) * (1 + 1e-9)))
    return {"kind": kind, "dtype": dtype, "sampled": subsets is not None, "verdict": with_clients.verdict,
            "evidence": with_clients.evidence, "alone": alone.verdict, "alone_evidence": alone.evidence,
            "named": len(with_clients.extra.get("faulty_clients", []) or []), "cert_ok": cert_ok}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--bug-runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    table = collections.Counter()
    false = cert_broken = 0
    for _ in range(args.runs):
        row = one_run(rng, args.rounds)
        table[(row["kind"], row["dtype"], row["verdict"])] += 1
        false += row["verdict"] == "elsewhere" or row.get("alone") == "elsewhere"
        cert_broken += row.get("cert_ok") is False
    print(f"{args.runs} correct runs ({time.perf_counter() - t0:.0f} s): false 'elsewhere' {false}, "
          f"per-round certificate broken {cert_broken}")
    print("| run | dtype | landed | not landed | observed | elsewhere |\n|---|---|---|---|---|---|")
    for kind in SERVERS + ("schedule",):
        for dtype in ("float64", "float32", "bfloat16"):
            c = [table[(kind, dtype, v)] for v in ("landed", "not_landed", "observed", "elsewhere")]
            if sum(c):
                print(f"| {kind} | {dtype} | " + " | ".join(map(str, c)) + " |")
    for bug in ("lr halved", "schedule ignored"):
        rows = [one_run(rng, args.rounds, bug) for _ in range(args.bug_runs)]
        rows = [r for r in rows if r["verdict"] != "diverged"]
        if bug == "lr halved":
            fedavgm = [r for r in rows if r["kind"] == "FedAvgM"]
            print(f"bug 'lr halved' under FedAvgM: {len(fedavgm)} runs, proved from the models alone "
                  f"{sum(r['alone'] == 'elsewhere' and r['alone_evidence'] == 'proved' for r in fedavgm)}")
        caught = sum(r["verdict"] == "elsewhere" and r["evidence"] == "proved" for r in rows)
        alone = sum(r["alone"] == "elsewhere" and r["alone_evidence"] == "proved" for r in rows)
        named = sum(r["named"] > 0 for r in rows)
        print(f"bug {bug!r}: {len(rows)} runs; proved elsewhere {caught} with the client models ({named} with the client "
              f"named), {alone} from the models alone")
        for dtype in ("float64", "float32", "bfloat16"):
            sub = [r for r in rows if r["dtype"] == dtype]
            print(f"    {dtype}: {len(sub)} runs, proved {sum(r['verdict'] == 'elsewhere' and r['evidence'] == 'proved' for r in sub)}"
                  f", named {sum(r['named'] > 0 for r in sub)}, from the models alone "
                  f"{sum(r['alone'] == 'elsewhere' and r['alone_evidence'] == 'proved' for r in sub)}")


if __name__ == "__main__":
    main()
