"""Audit of Wasserstein DRFL's certificates on random instances (issue 13 item 3).

For every instance of the grid -- six losses (logistic, smooth hinge, hinge; Huber,
epsilon-insensitive, pinball) x transport norms {1, 2, inf} x kappa in {0.5, inf} x {DRFL with
an l2-ball Q, WAFL} x 3 seeds, 4 clients x 60 samples x 5 features, per-client radii -- solve with
the conic route and, where it applies (DRFL), with the fast route (``method="newton"``), and check
what a certificate promises:

* each route's bound is below its own upper bound and below the *other* route's upper bound
  (an independent primal value), to rounding (1e-12 relative);
* the status is ``optimal`` (relative gap <= 1e-6) and the lower-bound method is the rigorous numpy
  bound;
* the two routes' values agree to 1e-8 relative.

Prints one line per failed check and a summary (counts, the range of the certified gaps, the
largest L - U_other). Run: ``python benchmarks/audit_wasserstein.py [--seeds 3]``; about 2-4 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np

import drflmodel as dm
from drflmodel.problems.wasserstein import WassersteinDRFL

LOSSES = {"logistic": dm.losses.Logistic(), "smooth_hinge": dm.losses.SmoothHinge(), "hinge": dm.losses.Hinge(),
          "huber": dm.losses.Huber(0.5), "epsilon_insensitive": dm.losses.EpsilonInsensitive(0.2),
          "pinball": dm.losses.Pinball(0.3)}
RADIUS = np.array([0.05, 0.1, 0.0, 0.02])


def instance(loss, norm, kappa, family, seed):
    make = (dm.datasets.synthetic_classification if loss.task == "classification"
            else dm.datasets.synthetic_regression)
    fed = make(n_clients=4, dim=5, samples=60, seed=seed)
    if family == "WAFL":
        return WassersteinDRFL.wafl(fed, loss, radius=0.05, kappa=kappa, norm=norm)
    return WassersteinDRFL(fed, loss, radius=RADIUS, kappa=kappa, norm=norm,
                           weights=dm.sets.LpBall(fed.proportions, 0.1, 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    gaps, over, problems, count = [], [], [], 0
    for (name, loss), norm, kappa, family, seed in itertools.product(
            LOSSES.items(), [1, 2, np.inf], [0.5, np.inf], ["DRFL", "WAFL"], range(args.seeds)):
        label = f"{name} norm={norm} kappa={kappa} {family} seed={seed}"
        sols = {"conic": instance(loss, norm, kappa, family, seed).solve(method="conic")}
        if family == "DRFL":
            sols["newton"] = instance(loss, norm, kappa, family, seed).solve(method="newton")
        count += 1
        U_min = min(s.upper_bound for s in sols.values())
        for route, s in sols.items():
            scale = max(1.0, abs(s.upper_bound))
            gaps.append(s.relative_gap)
            over.append((s.lower_bound - U_min) / scale)
            if s.lower_bound > U_min + 1e-12 * scale:
                problems.append(f"{label} {route}: L {s.lower_bound!r} above U {U_min!r}")
            if s.status != "optimal":
                problems.append(f"{label} {route}: status {s.status} (gap {s.relative_gap:.2e})")
            if not s.info.get("lower_bound_method", "").startswith("numpy"):
                problems.append(f"{label} {route}: lower bound by {s.info.get('lower_bound_method')}")
        if len(sols) == 2:
            diff = abs(sols["conic"].value - sols["newton"].value) / max(1.0, abs(sols["conic"].value))
            if diff > 1e-8:
                problems.append(f"{label}: routes differ by {diff:.2e}")
    for line in problems:
        print("FAILED", line)
    print(f"{count} instances, {len(gaps)} certified solves, {len(problems)} failed checks; "
          f"relative gaps {min(gaps):.1e}..{max(gaps):.1e}; max (L - min U)/max(1,|U|) = {max(over):.1e}; "
          f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
