"""Sweep: landing verdicts on the runs people train -- never a false proof, bugs caught (issue 38).

Randomized *correct* runs of FedAvg / FedProx / FedAvgM / FedAdam (logistic or softmax, 2-50
clients, J in {1, 5, 20}, float64 / float32 / bfloat16-rounded models, every client or 10-50 %
sampled per round, full-batch or minibatch local steps with batch 1, 8 or 64) graded by
:func:`drflmodel.landing.conformance`; a false verdict is "elsewhere" on a correct run (a false
"proved" is the worst kind). Then *planted client bugs* (full participation, float64 and float32)
graded with the per-client models recorded: the share reported "elsewhere", proved, and with the
faulty client named. Sampled correct runs average their subsets by examples or uniformly and declare
it (``aggregation=``) or not (graded for any convex weighting; their rounds are replayed,
``landing.replay``). ``--noisy-bug-runs``: planted bugs under recorded sampling (the run declaring
Flower's weighting by examples) and under minibatch noise, each with the distance of the bug's own
noiseless landing point from the claimed point against the region a correct run is graded with,
the share of runs beyond it, the detection rate among those and overall, and the round of the
detection. Finally the time to grade a 1,000-round, 50-client recorded run.

The runs are built here, independently of the verdict's bounds: the exact round map
(``landing.contraction.local_iterates``, the solvers' local steps) in float64, each client's model
rounded to the run's format (float32, or float32 then bfloat16) and averaged in that format over the
round's clients with weights proportional to their examples (Flower's weighting); minibatch runs are
the simulator's (``dm.solvers.FedAvg / FedProx(batch_size=B)``, full participation, float64).
Clients computing end to end in float32 err by about ``u ||theta||`` per round (measured, see
landing/arithmetic.py), less than the cast modelled here plus the allowance.

Run: ``python benchmarks/sweep_landing_runs.py [--runs N] [--bug-runs M] [--rounds R] [--seed S]``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter, defaultdict

import numpy as np

import drflmodel as dm
from drflmodel.landing import conformance
from drflmodel.landing.arithmetic import bfloat16_round
from drflmodel.landing.contraction import local_iterates

DTYPES = ("float64", "float32", "bfloat16")
BUGS = ("proximal term unsquared", "proximal term zero (mu ignored)", "update not weighted by examples",
        "learning rate ignored", "one client's loss for all", "optimizer state not reset")


def make_problem(rng, kind: str, n: int):
    dim = int(rng.integers(3, 7))
    samples = [int(s) for s in rng.integers(15, 60, size=n)]
    seed = int(rng.integers(1_000_000))
    if kind == "logistic":
        fed = dm.datasets.synthetic_classification(n_clients=n, dim=dim, samples=samples, heterogeneity=1.5,
                                                   add_intercept=True, seed=seed)
        loss = dm.losses.Logistic()
    else:
        fed = dm.datasets.synthetic_multiclass(n_clients=n, dim=dim, n_classes=3, samples=samples, seed=seed)
        loss = dm.losses.Multinomial()
    prob = dm.FederatedDRO(fed, loss, weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=float(rng.choice([0.05, 0.1])))
    return prob, np.asarray(fed.proportions, float)


def _cast(x, dtype):
    if dtype == "float64":
        return np.asarray(x, float)
    x32 = np.asarray(x, np.float32)
    return bfloat16_round(x32) if dtype == "bfloat16" else x32


def simulate(prob, p, rounds, J, eta, mu, dtype, subsets=None, bug=None, server="plain", aggregation="examples"):
    """``(thetas (R+1, P), client_models (R+1, n, P))`` of a run (module docstring), with ``bug``;
    ``server``: ``"plain"`` (FedAvg / FedProx), ``"FedAvgM"`` (momentum 0.5, server step 1) or
    ``"FedAdam"`` (Reddi et al. 2021, Algorithm 2: beta1 0.9, beta2 0.99, tau 1e-3, server step 0.05)
    on the pseudo-gradient theta - average(client models); ``aggregation``: a round's clients
    weighted by their examples (renormalized, Flower) or ``"uniform"`` (FedProx's Algorithm 2)."""
    obj, n, P = prob.objectives, prob.n_clients, prob.dim
    theta = np.zeros(P)
    thetas, models = [theta], [np.full((n, P), np.nan)]
    momentum = np.zeros((n, P))
    m1, m2 = np.zeros(P), np.zeros(P)
    for r in range(rounds):
        U = _local_models(obj, theta, J, eta, mu, bug, momentum)
        U = np.asarray(_cast(U, dtype), float)
        S = np.arange(n) if subsets is None else subsets[r]
        uniform = bug == "update not weighted by examples" or aggregation == "uniform"
        w = np.full(S.size, 1.0 / S.size) if uniform else p[S] / p[S].sum()
        if dtype == "float64":
            avg = w @ U[S]
        else:
            avg = np.asarray(_cast(w.astype(np.float32) @ U[S].astype(np.float32), dtype), float)
        if server == "FedAvgM":
            m1 = 0.5 * m1 + (theta - avg)
            avg = theta - m1
        elif server == "FedAdam":
            delta = theta - avg
            m1 = 0.9 * m1 + 0.1 * delta
            m2 = 0.99 * m2 + 0.01 * delta ** 2
            avg = theta - 0.05 * m1 / (np.sqrt(m2) + 1e-3)
        theta = avg if server == "plain" else np.asarray(_cast(avg, dtype), float)
        row = np.full((n, P), np.nan)
        row[S] = U[S]
        thetas.append(theta)
        models.append(row)
    return np.array(thetas), np.array(models)


def sampled_minibatch_run(rng, rounds):
    """A correct FedProx / FedAvg run with 20-50 % of the clients a round (recorded) *and* fresh
    minibatch local steps (each client its own stream, with replacement), graded with
    ``batch_sampling="fresh"``; and its largest gap to the full-batch run with the same subsets
    over the cross-round radius rho (a correct run exceeds 1 with probability <= delta)."""
    n = int(rng.integers(4, 31))
    prob, p = make_problem(rng, str(rng.choice(["logistic", "softmax"])), n)
    obj = prob.objectives
    mu = float(rng.choice([0.0, 0.1, 1.0]))
    J, B = int(rng.choice([1, 5, 20])), int(rng.choice([1, 8, 64]))
    L = float(np.max(obj.smoothness()))
    eta = float(rng.choice([0.3, 1.0])) / ((L + mu) * (1 if J == 1 else np.sqrt(J)))
    m = max(2, int(round(rng.uniform(0.2, 0.5) * n)))
    subsets = [np.sort(rng.choice(n, m, replace=False)) for _ in range(rounds)]
    gens = [np.random.default_rng(int(rng.integers(1 << 30))) for _ in range(n)]
    noisy, exact = [np.zeros(prob.dim)], [np.zeros(prob.dim)]
    for S in subsets:
        w = p[S] / p[S].sum()
        U = np.array(np.broadcast_to(noisy[-1], (n, prob.dim)))
        for _ in range(J):
            U = U - eta * (obj.minibatch_gradients(U, B, gens) + mu * (U - noisy[-1][None, :]))
        noisy.append(w @ U[S])
        exact.append(w @ local_iterates(obj, exact[-1], J, eta, mu)[S])
    kw = dict(local_steps=J, step_size=eta, solution=prob.solve(), **({"mu": mu} if mu else {}))
    rep = conformance(np.array(noisy), prob, "FedProx" if mu else "FedAvg", participation=subsets, batch_size=B,
                      batch_sampling="fresh", aggregation="examples", **kw)
    gap = float(np.max(np.linalg.norm(np.array(noisy) - np.array(exact), axis=1)))
    rho = rep.extra.get("noise_rho")
    return {"verdict": rep.verdict, "evidence": rep.evidence, "gap_over_rho": gap / rho if rho else None}


def _local_models(obj, theta, J, eta, mu, bug, momentum):
    if bug in (None, "update not weighted by examples"):
        return local_iterates(obj, theta, J, eta, mu)
    if bug == "proximal term zero (mu ignored)":
        return local_iterates(obj, theta, J, eta, 0.0)
    if bug == "learning rate ignored":
        return local_iterates(obj, theta, J, 0.5 * eta, mu)        # the client's own default lr
    U = np.array(np.broadcast_to(theta, (obj.n, theta.size)))
    for _ in range(J):
        G = obj.gradients(U)
        if bug == "one client's loss for all":
            G = _client0_gradients(obj, U)
        if bug == "proximal term unsquared":
            D = U - theta[None, :]
            norms = np.linalg.norm(D, axis=1, keepdims=True)
            prox = 0.5 * mu * np.divide(D, norms, out=np.zeros_like(D), where=norms > 0)
        else:
            prox = mu * (U - theta[None, :])
        step = G + prox
        if bug == "optimizer state not reset":
            momentum *= 0.5
            momentum += step
            step = momentum.copy()
        U = U - eta * step
    return U


def _client0_gradients(obj, U):
    """Every client's gradient of client 0's loss at its own model."""
    out = np.empty_like(U)
    for i in range(U.shape[0]):
        out[i] = obj.gradients(np.broadcast_to(U[i], U.shape))[0]
    return out


def _round_of(text: str) -> int | None:
    m = re.search(r"round (\d+)|after (\d+) rounds", text)
    return None if m is None else int(next(g for g in m.groups() if g is not None))


def correct_run(rng, rounds):
    """One randomized correct run and its verdict."""
    kind = str(rng.choice(["logistic", "softmax"]))
    n = int(rng.integers(2, 51))
    prob, p = make_problem(rng, kind, n)
    strategy = str(rng.choice(["FedAvg", "FedProx", "FedProx", "FedAvgM", "FedAdam"]))
    mu = float(rng.choice([0.1, 1.0])) if strategy == "FedProx" else 0.0
    J = int(rng.choice([1, 5, 20]))
    L = float(np.max(prob.objectives.smoothness()))
    eta = float(rng.choice([0.3, 1.0])) / ((L + mu) * (1 if J == 1 else np.sqrt(J)))
    batch = str(rng.choice(["full", "full", "1", "8", "64"])) if strategy in ("FedAvg", "FedProx") else "full"
    dtype = str(rng.choice(DTYPES))
    sampled = bool(rng.random() < 0.5)
    sol = prob.solve()
    kw = dict(local_steps=J, step_size=eta, solution=sol, **({"mu": mu} if strategy == "FedProx" else {}))
    extra = {}
    if batch != "full":
        B = int(batch)
        solver = (dm.solvers.FedProx(rounds=rounds, mu=mu, local_steps=J, step_size=eta, batch_size=B)
                  if strategy == "FedProx" else dm.solvers.FedAvg(rounds=rounds, local_steps=J, step_size=eta,
                                                                   batch_size=B))
        tr = solver.run(prob, seed=int(rng.integers(1000)))
        rep = conformance(tr, prob, strategy, **kw)
        dtype, sampled = "float64", False
        if rep.extra.get("noise_rho"):            # the cross-round radius against the full-batch run itself
            exact = (dm.solvers.FedProx(rounds=rounds, mu=mu, local_steps=J, step_size=eta) if strategy == "FedProx"
                     else dm.solvers.FedAvg(rounds=rounds, local_steps=J, step_size=eta)).run(prob)
            gap = float(np.max(np.linalg.norm(np.asarray(tr.theta) - np.asarray(exact.theta), axis=1)))
            extra["gap_over_rho"] = gap / rep.extra["noise_rho"]
    else:
        subsets = None
        if sampled:
            m = max(1, int(round(rng.uniform(0.1, 0.5) * n)))
            subsets = [np.sort(rng.choice(n, m, replace=False)) for _ in range(rounds)]
        server = strategy if strategy in ("FedAvgM", "FedAdam") else "plain"
        aggregation = str(rng.choice(["examples", "uniform"])) if sampled else "examples"
        declared = aggregation if rng.random() < 0.5 else None        # declared, or graded for any weighting
        T, models = simulate(prob, p, rounds, J, eta, mu, dtype, subsets, server=server, aggregation=aggregation)
        rep = conformance(T, prob, strategy, participation=subsets if sampled else "all", client_models=models,
                          aggregation=declared if sampled else None, **kw)
        extra["aggregation"] = declared
        extra["replayed"] = rep.extra.get("rounds_replayed", 0)
        extra["replay_ratio"] = rep.extra.get("replay_max_ratio")
    return {"kind": kind, "n": n, "strategy": strategy, "J": J, "dtype": dtype, "sampled": sampled,
            "batch": batch, "verdict": rep.verdict, "evidence": rep.evidence, "text": rep.text, **extra}


def _bug_setup(rng, n_low, kind=None):
    """A random problem for a planted-bug run, graded as FedProx with mu = 1, J in {5, 20}."""
    kind = str(rng.choice(["logistic", "softmax"])) if kind is None else kind
    n = int(rng.integers(n_low, 21))
    prob, p = make_problem(rng, kind, n)
    J, mu = int(rng.choice([5, 20])), 1.0
    L = float(np.max(prob.objectives.smoothness()))
    return prob, p, n, J, mu, 1.0 / ((L + mu) * np.sqrt(J))


def bug_run(rng, bug, rounds):
    prob, p, n, J, mu, eta = _bug_setup(rng, 2)
    dtype = str(rng.choice(["float64", "float32"]))
    sol = prob.solve()
    T, models = simulate(prob, p, rounds, J, eta, mu, dtype, bug=bug)
    kw = dict(local_steps=J, step_size=eta, mu=mu, solution=sol)
    run_only = conformance(T, prob, "FedProx", participation="all", **kw)
    named = conformance(T, prob, "FedProx", participation="all", client_models=models, **kw)
    # does the bug move the landing point beyond the run's rounding region? (the bug's own limit)
    moved = run_only.rows[-1]["dist_fixed_point"] > 10 * max(run_only.extra.get("landing_region", 0.0),
                                                             run_only.tol * max(1.0, np.linalg.norm(sol.theta)))
    return {"bug": bug, "dtype": dtype, "moved": bool(moved), "verdict": run_only.verdict,
            "evidence": run_only.evidence, "round": _round_of(run_only.text) if run_only.evidence == "proved" else None,
            "named": bool(named.extra.get("faulty_clients"))}


def noisy_bug_run(rng, bug, rounds):
    """A planted bug under sampled clients (20-50 % a round, recorded, float64 or float32, the run
    declaring Flower's weighting by examples) or minibatch local steps (the simulator, batch 1/8/64,
    fresh batches): graded as FedProx with mu = 1. Under minibatch the bug is run by the simulator:
    "proximal term zero" is FedAvg graded as FedProx, "learning rate ignored" is FedProx with half
    the step size. ``beyond``: the bug's own noiseless landing point (full participation, float64, full
    batch) is farther from the claimed point than the region a correct run is graded against."""
    # client 0 alone may lack a class of a softmax problem: that bug runs on logistic problems
    prob, p, n, J, mu, eta = _bug_setup(rng, 4, "logistic" if bug == "minibatch: one client's loss for all" else None)
    sol = prob.solve()
    kw = dict(local_steps=J, step_size=eta, mu=mu, solution=sol)
    if bug.startswith("minibatch"):
        B = int(rng.choice([1, 8, 64]))
        run_on = prob
        if "mu ignored" in bug:
            solver = dm.solvers.FedAvg(rounds=rounds, local_steps=J, step_size=eta, batch_size=B)
            own = dm.landing.fixed_point(prob, "FedAvg", local_steps=J, step_size=eta).theta
        elif "one client's loss" in bug:          # every client trains on client 0's rows
            fed = prob.federation
            run_on = dm.FederatedDRO(dm.data.Federation([fed.clients[0]] * n, task=fed.task), prob.loss,
                                     weights=dm.sets.HCVaR(p, 1.0), l2=prob.l2)
            solver = dm.solvers.FedProx(rounds=rounds, mu=mu, local_steps=J, step_size=eta, batch_size=B)
            own = dm.landing.fixed_point(run_on, "FedProx", local_steps=J, step_size=eta, mu=mu).theta
        else:
            solver = dm.solvers.FedProx(rounds=rounds, mu=mu, local_steps=J, step_size=0.5 * eta, batch_size=B)
            own = dm.landing.fixed_point(prob, "FedProx", local_steps=J, step_size=0.5 * eta, mu=mu).theta
        rep = conformance(solver.run(run_on, seed=int(rng.integers(1000))).theta, prob, "FedProx", batch_size=B,
                          batch_sampling="fresh", participation="all", **kw)
        dtype = "float64"
    else:
        m = max(2, int(round(rng.uniform(0.2, 0.5) * n)))
        subsets = [np.sort(rng.choice(n, m, replace=False)) for _ in range(rounds)]
        dtype = str(rng.choice(["float64", "float32"]))
        name = bug.replace("sampled: ", "")
        T, _ = simulate(prob, p, rounds, J, eta, mu, dtype, subsets, bug=name)
        rep = conformance(T, prob, "FedProx", participation=subsets, aggregation="examples", **kw)
        own = simulate(prob, p, rounds, J, eta, mu, "float64", None, bug=name)[0][-1]
    region = float(rep.extra.get("landing_region", np.nan))
    shift = float(np.linalg.norm(own - rep.fixed_point.theta))
    return {"bug": bug, "dtype": dtype, "beyond": bool(shift > region), "shift": shift, "region": region,
            "verdict": rep.verdict, "evidence": rep.evidence, "distance": rep.rows[-1]["dist_fixed_point"],
            "round": _round_of(rep.text) if rep.verdict == "elsewhere" else None}


NOISY_BUGS = tuple("sampled: " + b for b in BUGS) + ("minibatch: proximal term zero (mu ignored)",
                                                     "minibatch: learning rate ignored",
                                                     "minibatch: one client's loss for all")


def timing(seed=0):
    rng = np.random.default_rng(seed)
    prob, p = make_problem(rng, "logistic", 50)
    sol = prob.solve()
    L = float(np.max(prob.objectives.smoothness()))
    J, mu = 5, 1.0
    eta = 1.0 / ((L + mu) * np.sqrt(J))
    T, models = simulate(prob, p, 1000, J, eta, mu, "float32")
    t0 = time.perf_counter()
    rep = conformance(T, prob, "FedProx", local_steps=J, step_size=eta, mu=mu, solution=sol, client_models=models)
    return time.perf_counter() - t0, rep.verdict


def _print_counts(columns, table) -> None:
    """A Markdown table of verdict counts per key."""
    verdicts = ("landed", "not_landed", "observed", "elsewhere")
    print("\n| " + " | ".join(columns + ["runs"] + [v.replace("_", " ") for v in verdicts]) + " |")
    print("|" + "---|" * (len(columns) + 1 + len(verdicts)))
    for key in sorted(table):
        c = table[key]
        print("| " + " | ".join([str(k) for k in key] + [str(sum(c.values()))] + [str(c[v]) for v in verdicts]) + " |")


def main(runs=300, bug_runs=20, seed=0, rounds=300, quiet=False, noisy_bug_runs=0,
         sampled_minibatch_runs=0):
    rng = np.random.default_rng(seed)
    results = [correct_run(rng, rounds) for _ in range(runs)]
    table, by_strategy = defaultdict(Counter), defaultdict(Counter)
    for r in results:
        key = (r["dtype"], "sampled" if r["sampled"] else "all", r["batch"])
        table[key][r["verdict"]] += 1
        by_strategy[r["strategy"]][r["verdict"]] += 1
    false_elsewhere = [r for r in results if r["verdict"] == "elsewhere"]
    false_proved = [r for r in false_elsewhere if r["evidence"] == "proved"]
    both = [sampled_minibatch_run(rng, rounds) for _ in range(sampled_minibatch_runs)]
    bugs = [bug_run(rng, bug, rounds) for bug in BUGS for _ in range(bug_runs)]
    noisy = [noisy_bug_run(rng, bug, rounds) for bug in NOISY_BUGS for _ in range(noisy_bug_runs)]
    out = {"correct": results, "false_elsewhere": len(false_elsewhere), "false_proved": len(false_proved),
           "table": {k: dict(v) for k, v in table.items()}, "bugs": bugs,
           "noisy_bugs": noisy,
           "sampled_minibatch": both}
    if not quiet:
        print(f"{runs} correct runs ({rounds} rounds each): false 'elsewhere' {len(false_elsewhere)}, "
              f"false 'proved' {len(false_proved)}")
        _print_counts(["dtype", "participation", "batch"], table)
        _print_counts(["strategy"], {(k,): v for k, v in by_strategy.items()})
        print("\n| planted bug | runs | moved beyond the region | elsewhere | proved | client named "
              "| median round of the proof |")
        print("|---|---|---|---|---|---|---|")
        for bug in BUGS:
            rs = [b for b in bugs if b["bug"] == bug]
            mv = [b for b in rs if b["moved"]]
            rounds_ = [b["round"] for b in mv if b["round"] is not None]
            print(f"| {bug} | {len(rs)} | {len(mv)} | {sum(b['verdict'] == 'elsewhere' for b in mv)}/{len(mv)} | "
                  f"{sum(b['evidence'] == 'proved' for b in mv)}/{len(mv)} | {sum(b['named'] for b in rs)}/{len(rs)} | "
                  f"{int(np.median(rounds_)) if rounds_ else '-'} |")
        if noisy:
            print("\n| planted bug (sampled / minibatch) | runs | its point beyond the region | elsewhere (of those) "
                  "| elsewhere (all runs) | median shift / region | median round detected |")
            print("|---|---|---|---|---|---|---|")
            for bug in NOISY_BUGS:
                rs = [b for b in noisy if b["bug"] == bug]
                bey = [b for b in rs if b["beyond"]]
                ratio = [b["shift"] / b["region"] for b in rs if b["region"] > 0]
                found = [b["round"] for b in rs if b["round"] is not None]
                print(f"| {bug} | {len(rs)} | {len(bey)} | {sum(b['verdict'] == 'elsewhere' for b in bey)}/{len(bey)} | "
                      f"{sum(b['verdict'] == 'elsewhere' for b in rs)}/{len(rs)} | "
                      f"{np.median(ratio) if ratio else float('nan'):.3g} | "
                      f"{int(np.median(found)) if found else '-'} |")
        replayed = [(r["dtype"], r["replay_ratio"]) for r in results if r.get("replayed")]
        if replayed:
            print(f"\n{len(replayed)} sampled full-batch runs replayed round by round; largest residual / rounding "
                  "allowance per precision: " + ", ".join(
                      f"{d} {max(x for k, x in replayed if k == d):.3g}" for d in DTYPES if any(k == d for k, _ in replayed)))
        ratios = [r["gap_over_rho"] for r in results if "gap_over_rho" in r]
        if ratios:
            print(f"\nminibatch runs: max over rounds of |theta_r - full-batch run| / rho: median {np.median(ratios):.3g}, "
                  f"max {np.max(ratios):.3g} over {len(ratios)} runs (a correct run exceeds 1 w.p. <= 1e-3)")
        if both:
            ratios = [b["gap_over_rho"] for b in both if b["gap_over_rho"] is not None]
            print(f"\n{len(both)} correct runs with sampled clients and minibatch steps: verdicts "
                  f"{dict(Counter(b['verdict'] for b in both))}; gap / rho median "
                  f"{np.median(ratios) if ratios else float('nan'):.3g}, max {max(ratios, default=float('nan')):.3g} "
                  f"({len(ratios)} runs with a cross-round radius)")
        for r in false_elsewhere[:5]:
            print("FALSE:", r)
        seconds, verdict = timing(seed)
        out["timing"] = seconds
        print(f"\nconformance of a 1,000-round, 50-client float32 run with per-client models: {seconds:.2f} s "
              f"({verdict})")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--bug-runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sampled-minibatch-runs", type=int, default=0, help="correct runs with both")
    ap.add_argument("--noisy-bug-runs", type=int, default=0, help="planted bugs under sampling / minibatch, each")
    a = ap.parse_args()
    main(runs=a.runs, bug_runs=a.bug_runs, seed=a.seed, rounds=a.rounds, noisy_bug_runs=a.noisy_bug_runs,
         sampled_minibatch_runs=a.sampled_minibatch_runs)
