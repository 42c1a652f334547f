"""Every route of every family survives a machine where Clarabel fails.

Clarabel is made to raise (CVXPY's interface and the native one, :mod:`tests.clarabel_faults`),
as it did on a fresh install for the bundle route's projection (``SolverError: Solver 'CLARABEL'
failed`` escaped from ``prob.solve(method="bundle")``). Each route, forced by ``method=``, must
then either certify through another installed solver -- the same answer as with Clarabel -- or end
with a named drflmodel failure (status ``"failed"`` and ``info["reason"]``): never a raw solver
error, never a bound that is not one.
"""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.losses import Hinge, Logistic, Squared
from drflmodel._solver_sequence import installed_solvers
from drflmodel.sets import CVaR, ChiSquare, LpBall, Simplex
from tests.clarabel_faults import fail_clarabel

pytestmark = pytest.mark.skipif(not {"CLARABEL", "ECOS", "SCS"} <= set(installed_solvers()),
                                reason="needs Clarabel, ECOS and SCS")


def _cls(n_clients=3, dim=3, samples=40, seed=0):
    return dm.datasets.synthetic_classification(n_clients=n_clients, dim=dim, samples=samples, seed=seed)


def _reg(n_clients=3, dim=2, samples=30, seed=0):
    return dm.datasets.synthetic_regression(n_clients=n_clients, dim=dim, samples=samples, noise=0.1, seed=seed)


def _vertical(seed=0, n=60):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, 3)), np.ones((n, 1))])
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    g = (rng.random(n) < 0.5).astype(int)
    X[:, 1] += 1.5 * g
    y[np.flatnonzero(g == 0)[:2]] = 1.0
    y[np.flatnonzero(g == 1)[:2]] = 1.0
    return dm.VerticalFederation([X[:, :2], X[:, 2:]], y, g, active=[0])


# (id, factory of a fresh problem, method, solve keywords); each route forced on an instance it applies to
CASES = [
    # an l2 ball: the weight step is a CVXPY model (box-simplex sets and the chi-square ball step in numpy)
    ("dro-sqp", lambda: dm.FederatedDRO(_cls(), Logistic(), LpBall(np.full(3, 1 / 3), 0.2), l2=0.05), "sqp", {}),
    ("dro-hessian_sqp", lambda: dm.FederatedDRO(_cls(), Logistic(), CVaR(3, 0.5), l2=0.05), "hessian_sqp", {}),
    ("dro-conic", lambda: dm.FederatedDRO(_cls(), Logistic(), ChiSquare(3, 0.3), l2=0.05), "conic", {}),
    ("dro-active_set", lambda: dm.FederatedDRO(_cls(), Hinge(), Simplex(3), l2=0.05), "active_set", {}),
    ("dro-level_bundle", lambda: dm.FederatedDRO(_reg(), dm.losses.EpsilonInsensitive(0.1), ChiSquare(3, 0.3), l2=0.05),
     "level_bundle", {"max_steps": 150}),
    ("fafl-sqp", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "sqp", {}),
    ("fafl-hessian_sqp", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "hessian_sqp", {}),
    ("fafl-conic", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "conic", {}),
    ("fafl-active_set", lambda: dm.FairnessAwareFL(_cls(), Hinge(), 0.6, l2=0.05), "active_set", {}),
    ("fafl-level_bundle", lambda: dm.FairnessAwareFL(_cls(), Hinge(), 0.6, l2=0.05), "level_bundle", {"max_steps": 150}),
    ("fafl-smoothed", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "smoothed", {"mu": 0.1}),
    ("wasserstein-trust_region_sqp", lambda: dm.WassersteinDRFL(_cls(samples=30), Logistic(), radius=0.05, kappa=1.0,
                                                      norm=1, weights=Simplex(3), l2=0.01), "trust_region_sqp", {}),
    # the smooth worst case (kappa = inf, l2 transport; theta away from 0, where eps ||theta|| has a kink):
    # L-BFGS at fixed weights, a weight step over Q
    ("wasserstein-hessian_free", lambda: dm.WassersteinDRFL(_cls(dim=10, samples=30), Logistic(), radius=0.05,
                                                            kappa=np.inf, norm=2, weights=Simplex(3), l2=0.1),
     "hessian_free", {}),
    ("wasserstein-conic", lambda: dm.WassersteinDRFL(_cls(samples=30), Hinge(), radius=0.05, kappa=1.0, norm=2,
                                                     weights=Simplex(3)), "conic", {}),
    ("relative-FederatedDRO", lambda: dm.RelativeFairness(_reg(), Squared(), Simplex(3), Simplex(3), phi=0.0),
     "FederatedDRO", {}),
    ("relative-R1", lambda: dm.RelativeFairness(_reg(), Squared(), Simplex(3), Simplex(3), phi=0.1, l2=0.1),
     "R1", {}),
    ("relative-R3", lambda: dm.RelativeFairness(_reg(), Squared(), Simplex(3), Simplex(3), phi=0.1, l2=0.1),
     "R3", {}),
    ("relative-R2", lambda: dm.RelativeFairness(_reg(), Squared(), Simplex(3), Simplex(3), phi=0.1, l2=0.1),
     "R2", {"n_starts": 1}),
    ("relative-local", lambda: dm.RelativeFairness(_cls(), Logistic(), Simplex(3), Simplex(3), phi=0.1, l2=0.1),
     "local", {"n_starts": 1}),
    ("deo-newton", lambda: dm.DEOConstrained(_vertical(), Logistic(), 0.05, fairness_loss="linear", l2=0.05),
     "newton", {}),
    ("deo-convex", lambda: dm.DEOConstrained(_vertical(), Logistic(), 0.05, fairness_loss="linear", l2=0.05),
     "convex", {}),
    ("deo-sdp", lambda: dm.DEOConstrained(_vertical(), Squared(), 0.1, fairness_loss="squared", l2=0.3), "sdp", {}),
    ("deo-dc", lambda: dm.DEOConstrained(_vertical(), Hinge(), 0.05, fairness_loss="same", l2=0.05, n_starts=1),
     "dc", {}),
    ("deo-penalty_local", lambda: dm.DEOConstrained(_vertical(), Squared(), 1e-3, fairness_loss="same", l2=0.05,
                                                    penalty_c=10.0, n_starts=1), "penalty_local", {}),
    # the Hessian-free route's quasi-Newton SQP solves the n-variable weight step with the solver sequence
    ("dro-hessian_free", lambda: dm.FederatedDRO(_cls(), Logistic(), CVaR(3, 0.5), l2=0.05), "hessian_free", {}),
    ("dro-block_newton", lambda: dm.FederatedDRO(_cls(), Logistic(), CVaR(3, 0.5), l2=0.05), "block_newton", {}),
    ("fafl-block_newton", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "block_newton", {}),
    ("fafl-hessian_free", lambda: dm.FairnessAwareFL(_cls(), Logistic(), 0.6, l2=0.05), "hessian_free",
     {"algorithm": "sqp"}),
]


#: routes that call no conic solver on these instances (their steps and bounds are numpy)
NUMPY_ONLY = {"newton"}
#: cases whose weight step is numpy (CVaR and FAFL's HCVaR are box-simplex sets:
#: problems/minmax/box_simplex_step.py)
NUMPY_CASES = {"fafl-sqp", "fafl-hessian_free", "dro-hessian_free", "dro-block_newton", "fafl-block_newton"}


def _solve(make, method, kwargs):
    problem = make()
    if method == "smoothed":
        return problem.solve_smoothed(**kwargs)
    return problem.solve(method=method, **kwargs)


def test_every_route_of_every_family_is_listed():
    """A route added to a family must be added here (so that it is tested without Clarabel)."""
    listed = {case[0] for case in CASES}
    families = {"dro": CASES[0][1](), "fafl": CASES[5][1](), "wasserstein": CASES[11][1](),
                "relative": CASES[14][1](), "deo": CASES[19][1]()}
    for family, problem in families.items():
        for route in problem.routes():
            assert f"{family}-{route.name}" in listed, (family, route.name)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_route_certifies_through_another_solver_or_fails_by_name(case, monkeypatch):
    name, make, method, kwargs = case
    reference = _solve(make, method, kwargs)                 # with Clarabel
    calls = fail_clarabel(monkeypatch)
    sol = _solve(make, method, kwargs)                       # no raw solver error may escape
    assert sol.info["method"] == method or method == "smoothed"
    assert sol.status in ("optimal", "optimal_within_gap", "local", "failed"), sol.status
    if sol.status == "failed":
        assert isinstance(sol.info.get("reason"), str) and sol.info["reason"], sol.info
        assert sol.theta is None or np.all(np.isfinite(sol.theta))
        return
    # a certificate: an upper bound from the exact objective at theta, a lower bound below it
    assert sol.theta is not None and np.all(np.isfinite(sol.theta))
    assert sol.lower_bound <= sol.upper_bound + 1e-9 * max(1.0, abs(sol.upper_bound))
    if sol.status == "optimal":
        assert reference.status == "optimal", (name, reference.status)
        # the same certified optimum as with Clarabel (both gaps closed to gap_tol = 1e-6)
        tol = 2e-6 * max(1.0, abs(reference.value))
        assert abs(sol.value - reference.value) <= tol, (name, sol.value, reference.value)
        assert sol.lower_bound <= reference.upper_bound + tol and reference.lower_bound <= sol.upper_bound + tol
    for attempt in sol.info.get("attempts", []):          # no record claims that Clarabel answered
        if isinstance(attempt, dict) and str(attempt.get("solver", "")).startswith("CLARABEL"):
            assert "error" in attempt or "error" in str(attempt.get("solver_status", "")), attempt
    assert calls["failed"] > 0 or method in NUMPY_ONLY or name in NUMPY_CASES


def test_the_bundle_route_of_the_fresh_install_failure_falls_back(monkeypatch):
    """The instance that failed on a fresh install (tests/problems/test_bundle.py, loss3-chi2-3):
    the projection's Clarabel error now moves on to ECOS and the certificate holds."""
    fed = dm.datasets.synthetic_regression(n_clients=4, dim=3, samples=30, noise=0.1, seed=3)
    calls = fail_clarabel(monkeypatch)
    sol = dm.FederatedDRO(fed, dm.losses.EpsilonInsensitive(0.1), ChiSquare(4, 0.3), l2=0.05).solve(
        method="bundle", tol=1e-9)
    assert calls["failed"] > 0
    assert sol.status in ("optimal", "optimal_within_gap") and sol.lower_bound <= sol.upper_bound
    assert sol.info["step_solver"] == "CLARABEL"            # the model was compiled for Clarabel
