"""Random sweep of the convex DEO problems: how often is the answer certified ``optimal``?

Every instance draws its data (rows 40-400, 2-8 features in 2-3 parties, an optional intercept
column, feature scale 0.1-10, group imbalance and shift, label noise) and its problem: a loss of
the catalogue (hinge, logistic, smooth hinge, squared, Huber, pinball, epsilon-insensitive), the
linear fairness loss (convex: problem (4) of Liu et al., *Achieving Model Fairness in Vertical
Federated Learning*, or its quadratic-penalty problem P_c), eps, penalty_c and l2 > 0; one
instance in six is the squared/squared QCQP (exact through its SDP relaxation). Each is solved
with ``solve()`` (gap_tol 1e-6) and checked: status ``optimal``, L <= U to rounding.

Prints one line per instance that is not certified and a table per (loss, problem class): the
number of instances, the certified fraction, the largest certified relative gap and the mean time.
Run: ``python benchmarks/sweep_deo_certificates.py [--instances 300] [--seed 0] [--max-rows 400]``
(300 instances: 10-15 s).
"""

from __future__ import annotations

import argparse
import collections
import time
import warnings

import numpy as np

import drflmodel as dm
from drflmodel.problems.deo import DEOConstrained

LOSSES = {"hinge": dm.losses.Hinge(), "logistic": dm.losses.Logistic(), "smooth_hinge": dm.losses.SmoothHinge(),
          "squared": dm.losses.Squared(), "huber": dm.losses.Huber(0.5), "pinball": dm.losses.Pinball(0.3),
          "epsilon_insensitive": dm.losses.EpsilonInsensitive(0.1)}


def draw_instance(rng, max_rows: int = 400):
    """A random vertical federation and DEO problem (module docstring)."""
    n = int(rng.integers(40, max_rows + 1))
    m = int(rng.integers(2, 9))
    share_a = rng.uniform(0.2, 0.8)
    g = (rng.random(n) > share_a).astype(int)
    X = rng.standard_normal((n, m)) * 10 ** rng.uniform(-1, 1) + rng.uniform(0, 3) * g[:, None] * rng.standard_normal(m)
    w = rng.standard_normal(m)
    y = np.where(X @ w / np.sqrt(m) + rng.uniform(0.1, 2) * rng.standard_normal(n) * X.std() > 0, 1.0, -1.0)
    if rng.random() < 0.5:
        X = np.hstack([X, np.ones((n, 1))])
    for s in (0, 1):                     # every group needs favourable-label rows
        if not np.any((g == s) & (y == 1)):
            y[np.flatnonzero(g == s)[0]] = 1.0
    cuts = np.sort(rng.choice(np.arange(1, X.shape[1]), size=min(int(rng.integers(1, 3)), X.shape[1] - 1),
                              replace=False))
    blocks = np.split(X, cuts, axis=1)
    vf = dm.VerticalFederation(blocks, y, g, active=[0])
    quadratic = rng.random() < 1 / 6
    name = "squared" if quadratic else str(rng.choice(list(LOSSES)))
    options = {"eps": float(rng.choice([0.0, 1e-3, 1e-2, 0.05, 0.2])),
               "l2": float(rng.choice([1e-4, 1e-3, 1e-2, 0.1])),
               "fairness_loss": "squared" if quadratic else "linear",
               "penalty_c": None if quadratic or rng.random() < 0.5 else float(rng.choice([0.01, 0.1, 1.0]))}
    return name, DEOConstrained(vf, LOSSES[name], **options), options


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-rows", type=int, default=400)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    rows = collections.defaultdict(lambda: {"count": 0, "certified": 0, "max_gap": 0.0, "time": 0.0})
    invalid = 0
    started = time.perf_counter()
    for k in range(args.instances):
        name, problem, options = draw_instance(rng, args.max_rows)
        t0 = time.perf_counter()
        sol = problem.solve()
        elapsed = time.perf_counter() - t0
        row = rows[(name, problem.problem_class)]
        row["count"] += 1
        row["time"] += elapsed
        if sol.lower_bound > sol.upper_bound + 1e-9 * max(1.0, abs(sol.upper_bound)):
            invalid += 1
            print(f"L > U: instance {k} {name} {options}: {sol.summary()}")
        if sol.status == "optimal":
            row["certified"] += 1
            row["max_gap"] = max(row["max_gap"], sol.relative_gap)
        else:
            print(f"not certified: instance {k} {name} {options} n={problem.n} m={problem.dim}: {sol.summary()}")
    total = sum(r["count"] for r in rows.values())
    certified = sum(r["certified"] for r in rows.values())
    print(f"\n{'loss':<20} {'problem class':<18} {'n':>4} {'certified':>10} {'max rel.gap':>12} {'mean s':>7}")
    for (name, cls), r in sorted(rows.items()):
        print(f"{name:<20} {cls:<18} {r['count']:>4} {r['certified'] / r['count']:>10.1%} "
              f"{r['max_gap']:>12.1e} {r['time'] / r['count']:>7.3f}")
    print(f"\n{total} instances (seed {args.seed}), {certified} certified optimal at gap_tol 1e-6 "
          f"({certified / total:.1%}), {invalid} with L > U; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
