"""False alarms and coverage of issue 32's checks, on honest runs (no timing is measured).

* ``bound``: honest Scaff-PD runs (synthetic regression, the clinics table, synthetic binary and
  multi-class data; squared, Huber, logistic, smooth hinge, softmax; CVaR, simplex, chi-square; J in
  ``--local-steps``; ridge in ``--l2``; 800 rounds) checked against the theorem's explicit bound
  every round (drflmodel._bounds): prints every run whose bound or potential check fails (a false
  alarm), and the largest error/bound ratio.
* ``answers``: honest federated certified solves through ``CheckedChannel`` (synthetic regression,
  binary and multi-class data, features unit or scaled 10^-3..10^3; squared, Huber, logistic, smooth
  hinge, hinge, softmax; CVaR, simplex, chi-square): prints every rejected honest answer or changed
  status, and the largest difference of theta against the unchecked solve.
* ``queries``: what a certified solve asks of one client (value queries and their points, gradients,
  Hessians, Hessian-vector products, statistics), the measurement behind ``QueryPolicy``'s defaults.

Run: ``python benchmarks/sweep_trust.py bound --seeds 0 3 --local-steps 1 5 --l2 0.01 0.1``,
``python benchmarks/sweep_trust.py answers --seeds 0 12``, ``python benchmarks/sweep_trust.py queries``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drflmodel as dm  # noqa: E402
from drflmodel._bounds import theorem_bound  # noqa: E402
from drflmodel.client_oracle import CheckedChannel, LocalChannel, Site, federated_solve  # noqa: E402


def _weights(name, n):
    return {"cvar": dm.sets.CVaR(n, 0.5), "afl": dm.sets.Simplex(n), "chi2": dm.sets.ChiSquare(n, 0.05)}[name]


def bound(seeds, local_steps, l2s):
    from tests._tables import clinics_table

    runs = alarms = 0
    worst = 0.0
    for seed in range(*seeds):
        feds = [("regression", dm.datasets.synthetic_regression(n_clients=4, dim=6, samples=60, seed=seed),
                 [dm.losses.Squared(), dm.losses.Huber(1.0)]),
                ("clinics", dm.Federation.from_dataframe(clinics_table(seed), target="outcome", client="site",
                                                         features=["age", "bmi", "smoker"], add_intercept=True,
                                                         standardize=True), [dm.losses.Logistic(), dm.losses.SmoothHinge()]),
                ("binary", dm.datasets.synthetic_classification(n_clients=5, dim=5, samples=50, seed=seed),
                 [dm.losses.Logistic(), dm.losses.SmoothHinge()]),
                ("multi-class", dm.datasets.synthetic_multiclass(n_clients=3, dim=4, n_classes=3, samples=60, seed=seed),
                 [dm.losses.Multinomial()])]
        for (name, fed, losses), w, J, l2 in itertools.product(feds, ["cvar", "afl", "chi2"], local_steps, l2s):
            for loss in losses:
                prob = dm.FederatedDRO(fed, loss, weights=_weights(w, fed.n_clients), l2=l2)
                sol = prob.solve()
                if sol.status != "optimal":
                    continue
                b = theorem_bound(dm.solvers.ScaffPD(rounds=800, local_steps=J).run(prob, seed=0), prob, sol)
                runs += 1
                if not b.applies:
                    print("not covered:", name, loss, w, b.why_not)
                    continue
                worst = max(worst, b.worst()[0])
                if not b.holds:
                    alarms += 1
                    print("FALSE ALARM", seed, name, loss, w, J, l2, b.text())
    print(f"{runs} honest Scaff-PD runs, {alarms} false alarms, largest error/bound ratio {worst:.3g}")


def answers(seeds):
    runs = alarms = 0
    gap = 0.0
    for seed in range(*seeds):
        rng = np.random.default_rng(seed)
        for kind, scaled in itertools.product(["regression", "binary", "multi-class"], [False, True]):
            if kind == "regression":
                fed, losses = (dm.datasets.synthetic_regression(n_clients=4, dim=5, samples=40, seed=seed),
                               [dm.losses.Squared(), dm.losses.Huber(1.0)])
            elif kind == "binary":
                fed, losses = (dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=40, seed=seed),
                               [dm.losses.Logistic(), dm.losses.SmoothHinge(), dm.losses.Hinge()])
            else:
                fed, losses = (dm.datasets.synthetic_multiclass(n_clients=3, dim=4, n_classes=3, samples=50, seed=seed),
                               [dm.losses.Multinomial()])
            if scaled:
                s = 10.0 ** rng.uniform(-3, 3, size=fed.dim)
                fed = dm.Federation.from_arrays([c.X * s for c in fed.clients], [c.y for c in fed.clients], task=fed.task)
            for loss, w in itertools.product(losses, ["cvar", "afl", "chi2"]):
                prob = dm.FederatedDRO(fed, loss, weights=_weights(w, fed.n_clients), l2=0.01)
                plain = federated_solve(prob, LocalChannel.from_problem(prob), check_answers=False)
                channel = CheckedChannel(LocalChannel.from_problem(prob))
                sol = federated_solve(prob, channel)
                runs += 1
                if channel.rejections or sol.status != plain.status:
                    alarms += 1
                    print("FALSE ALARM", seed, kind, scaled, loss, w, plain.status, sol.status, channel.rejections[:1])
                elif sol.theta is not None:
                    gap = max(gap, float(np.max(np.abs(sol.theta - plain.theta))))
    print(f"{runs} honest federated solves, {alarms} false alarms, largest |theta - unchecked theta| {gap:.2g}")


class _Counting(LocalChannel):
    """Counts what client 0 is asked: queries by kind, and the most points in one value query."""

    def __init__(self, sites, dim):
        super().__init__(sites)
        self.count, self.points, self.dim = Counter(), 0, dim

    def _send(self, query, contents):
        if 0 in contents:
            arrays, options = contents[0]
            kind = "hessian" if query == "evaluate" and options.get("hessian") else query
            self.count[kind] += 1
            if query == "values":
                self.points = max(self.points, int(np.size(arrays["theta"])) // self.dim)
        return super()._send(query, contents)


def queries():
    worst, points = Counter(), 0
    for seed, (kind, loss), w in itertools.product(
            range(3), [("binary", dm.losses.Logistic()), ("binary", dm.losses.SmoothHinge()), ("binary", dm.losses.Hinge()),
                       ("regression", dm.losses.Squared()), ("regression", dm.losses.Huber(1.0)),
                       ("multi-class", dm.losses.Multinomial())], ["cvar", "afl", "chi2"]):
        fed = {"binary": lambda: dm.datasets.breast_cancer(n_clients=4, seed=seed),
               "regression": lambda: dm.datasets.diabetes(n_clients=4, seed=seed),
               "multi-class": lambda: dm.datasets.synthetic_multiclass(n_clients=4, dim=6, n_classes=4, samples=80,
                                                                       seed=seed)}[kind]()
        prob = dm.FederatedDRO(fed, loss, weights=_weights(w, fed.n_clients), l2=0.01)
        channel = _Counting([Site.from_problem(prob, i) for i in range(fed.n_clients)], prob.dim)
        sol = federated_solve(prob, channel)
        worst.update({k: max(worst[k], v) - worst[k] for k, v in channel.count.items()})
        points = max(points, channel.points)
        print(type(loss).__name__, w, seed, sol.status, dict(channel.count))
    print(f"most asked of one client in one solve: {dict(worst)}; most points in one value query: {points}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["bound", "answers", "queries"])
    parser.add_argument("--seeds", type=int, nargs=2, default=[0, 3])
    parser.add_argument("--local-steps", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--l2", type=float, nargs="+", default=[0.01, 0.1])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    if args.what == "bound":
        bound(args.seeds, args.local_steps, args.l2)
    elif args.what == "answers":
        answers(args.seeds)
    else:
        queries()
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
