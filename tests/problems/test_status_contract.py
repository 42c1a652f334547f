"""The status of every answer is derived from its bounds (DESIGN.md §4.1): every route of every
family, forced with ``solve(method=...)`` on small instances -- including the degenerate ones an
audit found (a non-convex route whose bounds close, piecewise-linear losses, an optimum at
theta = 0) -- must return a status that agrees with its certificate:

* ``"optimal"``             iff the relative gap is within ``gap_tol`` (a rounding-level negative gap
                            counts as closed) -- in particular a closed gap is never ``"local"``;
* ``"optimal_within_gap"``  a finite gap above ``gap_tol``, L <= U;
* ``"local"``               a finite lower bound below U by more than ``gap_tol`` (non-convex cases);
* ``"failed"``              no finite pair of bounds, or L above U beyond round-off.

The gap is recomputed here from ``lower_bound`` and ``upper_bound`` (not read from the solution),
and ``upper_bound`` is checked against the problem's exact objective at ``theta``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.losses import Hinge, Logistic, Pinball, Squared
from drflmodel.problems.deo import DEOConstrained

GAP_TOL = 1e-6


def _cls(seed=0, n_clients=3, samples=25, dim=3):
    return dm.datasets.synthetic_classification(n_clients=n_clients, dim=dim, samples=samples, seed=seed)


def _reg(seed=0, n_clients=3, samples=25, dim=3):
    return dm.datasets.synthetic_regression(n_clients=n_clients, dim=dim, samples=samples, seed=seed)


def _vertical(seed=0, n=60, mirrored=False):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, 3)), np.ones((n, 1))])
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    if mirrored:                  # each row in both groups: D = 0 everywhere, every eps feasible
        X, y, g = np.vstack([X, X]), np.concatenate([y, y]), np.repeat([0, 1], n)
    else:
        g = (rng.random(n) < 0.5).astype(int)
        X[:, 1] += 1.5 * g
        y[np.flatnonzero(g == 0)[:2]] = 1.0
        y[np.flatnonzero(g == 1)[:2]] = 1.0
    return dm.VerticalFederation([X[:, :2], X[:, 2:]], y, g, active=[0])


def _zero_optimum():
    """Hinge loss, a large Wasserstein radius and no ridge: the optimum is theta = 0 (value 1)."""
    fed = _cls(seed=3)
    return dm.WassersteinDRFL(fed, Hinge(), radius=0.3, kappa=1.0, norm=2, weights=fed.proportions)


#: (instance id, builder); every route of each instance that applies is forced in turn
INSTANCES = {
    "dro-chi2-logistic": lambda: dm.FederatedDRO(_cls(), Logistic(), dm.sets.ChiSquare(3, 1.0), l2=0.1),
    "dro-cvar-squared-l2=0": lambda: dm.FederatedDRO(_reg(), Squared(), dm.sets.CVaR(3, 0.5), l2=0.0),
    "fafl-logistic": lambda: dm.FairnessAwareFL(_cls(seed=1), Logistic(), alpha=0.8, l2=0.05),
    "wasserstein-logistic-ball": lambda: dm.WassersteinDRFL(
        _cls(seed=2), Logistic(), radius=0.1, kappa=1.0, norm=2,
        weights=dm.sets.LpBall(np.full(3, 1 / 3), 0.1, 2), l2=1e-3),
    "wasserstein-pinball-inf": lambda: dm.WassersteinDRFL(_reg(seed=2), Pinball(0.3), radius=0.05, kappa=np.inf,
                                                          norm=np.inf, weights=dm.sets.Simplex(3)),
    "wasserstein-hinge-theta0": _zero_optimum,
    "relative-squared": lambda: dm.RelativeFairness(_reg(seed=4), Squared(), A=dm.sets.Simplex(3),
                                                    B=dm.sets.Simplex(3), phi=0.2, l2=0.1),
    "relative-squared-phi0": lambda: dm.RelativeFairness(_reg(seed=4), Squared(), A=dm.sets.CVaR(3, 0.5),
                                                         B=dm.sets.Simplex(3), phi=0.0, l2=0.1),
    "relative-huber-local": lambda: dm.RelativeFairness(_reg(seed=5), dm.losses.Huber(1.0), A=dm.sets.Simplex(3),
                                                        B=dm.sets.Simplex(3), phi=0.3, l2=0.1),
    "deo-linear-hinge": lambda: DEOConstrained(_vertical(), Hinge(), 0.01, l2=1e-3),
    "deo-linear-logistic-Pc": lambda: DEOConstrained(_vertical(), Logistic(), 0.01, l2=1e-2, penalty_c=0.1),
    "deo-squared-sdp": lambda: DEOConstrained(_vertical(seed=1), Squared(), 1e-3, fairness_loss="squared", l2=0.1),
    "deo-same-logistic-dc": lambda: DEOConstrained(_vertical(seed=2), Logistic(), 0.01, fairness_loss="same",
                                                   l2=0.02, n_starts=1),
    "deo-same-hinge-dc-feasible": lambda: DEOConstrained(_vertical(mirrored=True), Hinge(), 1e-3,
                                                         fairness_loss="same", l2=1e-2, n_starts=0),
    "deo-same-squared-Pc-feasible": lambda: DEOConstrained(_vertical(mirrored=True), Squared(), 1e-3,
                                                           fairness_loss="same", l2=0.05, penalty_c=10.0),
    "deo-same-logistic-Pc": lambda: DEOConstrained(_vertical(seed=3), Logistic(), 1e-3, fairness_loss="same",
                                                   l2=0.02, penalty_c=0.01, n_starts=1),
}


def _cases():
    for name, build in INSTANCES.items():
        problem = build()
        for route in problem.routes():
            if route.applies(problem.structure) is None:
                yield pytest.param(name, route.name, id=f"{name}-{route.name}")


def check_status_agrees_with_bounds(sol, problem, gap_tol=GAP_TOL):
    L, U = sol.lower_bound, sol.upper_bound
    finite = L is not None and U is not None and np.isfinite(L) and np.isfinite(U)
    gap = (U - L) / max(1.0, abs(U)) if finite else np.inf
    closed = finite and -max(gap_tol, 1e-6) <= gap <= gap_tol
    if sol.theta is not None and np.isfinite(U):            # U is the exact objective at theta
        assert U == pytest.approx(problem.objective(sol.theta), rel=1e-9, abs=1e-12)
    if sol.status == "optimal":
        assert closed, f"'optimal' with relative gap {gap:.3e}"
        assert sol.certificate and sol.certificate != "none"
    elif sol.status == "optimal_within_gap":
        assert finite and gap > gap_tol, f"'optimal_within_gap' with relative gap {gap:.3e}"
    elif sol.status == "local":
        assert finite and gap > gap_tol, f"'local' although the bounds close (relative gap {gap:.3e})"
    elif sol.status == "failed":
        assert not finite or gap < -max(gap_tol, 1e-6)
    else:
        assert sol.status == "infeasible"
    return gap


@pytest.mark.parametrize("name, method", list(_cases()))
def test_every_route_derives_its_status_from_its_bounds(name, method):
    problem = INSTANCES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = problem.solve(method=method, gap_tol=GAP_TOL)
    assert sol.info["method"] == method
    check_status_agrees_with_bounds(sol, problem)


@pytest.mark.parametrize("name, method, status, certificate", [
    ("deo-same-squared-Pc-feasible", "penalty_local", "optimal", "unconstrained_minimum"),
    ("deo-same-hinge-dc-feasible", "dc", "optimal", "unconstrained_feasible"),
    ("deo-linear-hinge", "convex", "optimal", "piecewise_linear_dual"),
    ("wasserstein-hinge-theta0", "trust_region_sqp", "optimal", None),
])
def test_the_audits_cases_are_certified(name, method, status, certificate):
    """The cases that ended 'local' with a closed gap, or 'optimal_within_gap' although convex."""
    problem = INSTANCES[name]()
    sol = problem.solve(method=method)
    assert sol.status == status, sol.summary()
    if certificate is not None:
        assert sol.certificate == certificate
    if name == "wasserstein-hinge-theta0":
        assert np.abs(sol.theta).max() <= 1e-6 and sol.value == pytest.approx(1.0, abs=1e-9)


def test_the_checker_catches_a_mislabelled_status():
    """The contract check itself can fail: a closed gap labelled 'local' is caught."""
    problem = INSTANCES["deo-same-squared-Pc-feasible"]()
    sol = problem.solve()
    sol.status, sol.certificate = "local", "none"
    with pytest.raises(AssertionError, match="although the bounds close"):
        check_status_agrees_with_bounds(sol, problem)
