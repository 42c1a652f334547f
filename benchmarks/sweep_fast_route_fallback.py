"""How often does ``solve()`` (``method="auto"``) pay for the conic route after its fast route?

On large random instances -- N*d >= 50,000, where ``auto`` tries the fast route first -- of
FederatedDRO (logistic, smooth hinge, Huber; chi-square, CVaR, simplex, l2-ball and HCVaR weight
sets), the FAFL dual (logistic) and Wasserstein DRFL (logistic, smooth hinge, hinge, Huber,
pinball, epsilon-insensitive; transport norms 1, 2, inf; kappa finite or not), with random client
counts and sizes, feature scales, label noise and ridge, solve with ``auto`` and record which
route answered. A *fallback* is an instance where a fast route answered without certifying
(``info["route_attempts"]``) and the next route ran; a *conic fallback* one where auto ended up
paying for the conic route (FederatedDRO and FAFL try two fast routes, ``sqp`` then ``newton``).

Prints every fallback (the first route's status and relative gap, and who answered) and, per
family, the number of instances, the fallback rates, the certified fraction of the final answers
and the median time.
Run: ``python benchmarks/sweep_fast_route_fallback.py [--instances 300] [--seed 0]``
(~10-20 minutes for 300 on two cores).

``--newton-in-auto`` answers whether the dense ``newton`` route (one Hessian factor per client)
still earns its place in ``auto`` after ``sqp``: on the min-max instances only, it runs ``sqp``
and, where ``sqp`` does not certify, both continuations -- ``newton`` then ``conic`` (the chain
``auto`` used to take) and ``conic`` alone (today's ``auto``) -- interleaved in one process, and
counts the certificates each chain ends with and its time.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
import warnings

import numpy as np

import drflmodel as dm

SMOOTH = {"logistic": dm.losses.Logistic(), "smooth_hinge": dm.losses.SmoothHinge(), "huber": dm.losses.Huber(0.5)}
WASSERSTEIN = {**SMOOTH, "hinge": dm.losses.Hinge(), "pinball": dm.losses.Pinball(0.3),
               "epsilon_insensitive": dm.losses.EpsilonInsensitive(0.2)}


def federation(rng, task: str):
    """Random clients: 3-10 of them, N*d between 50,000 and 150,000, uneven sizes, feature
    scales 0.1-10 per column, shifted client means, label noise."""
    n_clients = int(rng.integers(3, 11))
    d = int(rng.integers(5, 21))
    total = int(rng.uniform(50_000, 150_000) / d)
    shares = rng.dirichlet(np.full(n_clients, 2.0))
    sizes = np.maximum((shares * total).astype(int), 20)
    scale = 10 ** rng.uniform(-1, 1, d)
    w = rng.standard_normal(d) / scale
    Xs, ys = [], []
    for m in sizes:
        X = (rng.standard_normal((m, d)) + rng.normal(0, 0.5, d)) * scale
        z = X @ w + rng.uniform(0.1, 2.0) * rng.standard_normal(m)
        Xs.append(X)
        ys.append(np.where(z > 0, 1.0, -1.0) if task == "classification" else z)
    return dm.Federation.from_arrays(Xs, ys, task=task)


def weight_set(rng, fed):
    n = fed.n_clients
    kind = rng.choice(["chi2", "cvar", "simplex", "lp2", "hcvar"])
    return {"chi2": lambda: dm.sets.ChiSquare(n, float(rng.choice([1e-3, 0.1, 1.0]))),
            "cvar": lambda: dm.sets.CVaR(n, float(rng.uniform(1 / n, 1))),
            "simplex": lambda: dm.sets.Simplex(n),
            "lp2": lambda: dm.sets.LpBall(fed.proportions, float(rng.choice([0.01, 0.1])), 2),
            "hcvar": lambda: dm.sets.HCVaR(fed.proportions, float(rng.uniform(fed.proportions.max(), 1)))}[kind]()


def draw(rng):
    """``(family label, problem)`` of a random large instance (module docstring)."""
    family = rng.choice(["dro", "dro", "fafl", "wasserstein", "wasserstein"])
    l2 = float(rng.choice([1e-4, 1e-3, 1e-2, 1e-1]))
    if family == "dro":
        name = str(rng.choice(list(SMOOTH)))
        loss = SMOOTH[name]
        fed = federation(rng, loss.task)
        return f"FederatedDRO/{name}", dm.FederatedDRO(fed, loss, weight_set(rng, fed), l2=l2)
    if family == "fafl":
        fed = federation(rng, "classification")
        alpha = float(rng.uniform(fed.proportions.max(), 1.0))
        return "FairnessAwareFL/logistic", dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=alpha, l2=l2)
    name = str(rng.choice(list(WASSERSTEIN)))
    loss = WASSERSTEIN[name]
    fed = federation(rng, loss.task)
    radius = rng.choice([0.0, 0.01, 0.1], size=fed.n_clients) if rng.random() < 0.3 else float(rng.choice([0.01, 0.1, 0.3]))
    weights = fed.proportions if rng.random() < 0.5 else dm.sets.LpBall(fed.proportions, 0.1, 2)
    return f"WassersteinDRFL/{name}", dm.WassersteinDRFL(
        fed, loss, radius=radius, kappa=float(rng.choice([0.5, 1.0, np.inf])), norm=rng.choice([1, 2, np.inf]),
        weights=weights, l2=float(rng.choice([0.0, l2])))


def _timed(problem, method):
    t0 = time.perf_counter()
    sol = problem.solve(method=method)
    return sol, time.perf_counter() - t0


def newton_in_auto(args, rng):
    """The ``--newton-in-auto`` comparison (module docstring)."""
    counts = {"instances": 0, "sqp certified": 0, "with newton certified": 0, "without newton certified": 0}
    times = {"with newton": [], "without newton": []}
    lost, started = [], time.perf_counter()
    while counts["instances"] < args.instances:
        label, problem = draw(rng)
        if label.startswith("WassersteinDRFL"):
            continue                      # its 'newton' is the trust-region SQP, another route
        counts["instances"] += 1
        sol, t_sqp = _timed(problem, "sqp")
        if sol.status == "optimal":
            counts["sqp certified"] += 1
            counts["with newton certified"] += 1
            counts["without newton certified"] += 1
            times["with newton"].append(t_sqp)
            times["without newton"].append(t_sqp)
            continue
        newton_applies = next(r for r in problem.routes() if r.name == "hessian_sqp").applies(problem.structure) is None
        order = ["newton", "conic"] if counts["instances"] % 2 else ["conic", "newton"]      # interleaved
        runs = {m: _timed(problem, m) for m in order if m != "newton" or newton_applies}
        conic, t_conic = runs["conic"]
        newton, t_newton = runs.get("newton", (None, 0.0))
        with_newton_ok = newton is not None and newton.status == "optimal"
        counts["with newton certified"] += with_newton_ok or conic.status == "optimal"
        counts["without newton certified"] += conic.status == "optimal"
        times["with newton"].append(t_sqp + t_newton + (0.0 if with_newton_ok else t_conic))
        times["without newton"].append(t_sqp + t_conic)
        print(f"sqp {sol.status} (gap {sol.relative_gap:.1e}) on {label} N*P={problem.structure.size}: "
              f"newton {newton.status if newton is not None else 'does not apply'} ({t_newton:.1f} s), "
              f"conic {conic.status} ({t_conic:.1f} s)")
        if with_newton_ok and conic.status != "optimal":
            lost.append(label)
    print(f"\n{counts} ({time.perf_counter() - started:.0f} s, seed {args.seed})")
    for chain, ts in times.items():
        print(f"{chain:>15}: total {sum(ts):.1f} s, median {statistics.median(ts):.2f} s")
    print(f"certificates lost without newton: {len(lost)} {lost}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--newton-in-auto", action="store_true", help="compare auto with and without 'newton'")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    if args.newton_in_auto:
        return newton_in_auto(args, rng)
    rows = collections.defaultdict(lambda: {"count": 0, "fast": 0, "fallback": 0, "conic": 0, "certified": 0,
                                            "times": []})
    started = time.perf_counter()
    for k in range(args.instances):
        label, problem = draw(rng)
        family = label.split("/")[0]
        t0 = time.perf_counter()
        sol = problem.solve()
        elapsed = time.perf_counter() - t0
        row = rows[family]
        row["count"] += 1
        row["times"].append(elapsed)
        row["certified"] += sol.status == "optimal"
        attempts = sol.info.get("route_attempts", [])
        if attempts:
            row["fallback"] += 1
            row["conic"] += sol.info["method"] == "conic"
            first = attempts[0]
            print(f"fallback: instance {k} {label} N={int(np.sum(problem.federation.sizes))} d={problem.dim} "
                  f"{problem!r:.90}: {first['method']} {first['status']} gap {first['relative_gap']:.2e} "
                  f"-> {sol.info['method']} {sol.status} ({elapsed:.1f} s)")
        elif sol.info.get("method") != "conic":
            row["fast"] += 1
    print(f"\n{'family':<18} {'n':>4} {'first route certified':>22} {'fallbacks':>10} {'to conic':>9} "
          f"{'conic rate':>11} {'final optimal':>14} {'median s':>9}")
    total = fallbacks = conic = 0
    for family, r in sorted(rows.items()):
        total += r["count"]
        fallbacks += r["fallback"]
        conic += r["conic"]
        print(f"{family:<18} {r['count']:>4} {r['fast']:>22} {r['fallback']:>10} {r['conic']:>9} "
              f"{r['conic'] / r['count']:>11.1%} {r['certified'] / r['count']:>14.1%} "
              f"{statistics.median(r['times']):>9.2f}")
    print(f"\n{total} instances (seed {args.seed}): {fallbacks} fallbacks ({fallbacks / max(total, 1):.2%}), "
          f"{conic} to the conic route ({conic / max(total, 1):.2%}); {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
