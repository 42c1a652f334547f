"""The sqp route's seeded subsample warm start (problems/minmax/lagrangian_sqp.py): from
``WARM_START_ROWS`` rows it runs the SQP on a 5% subsample, then takes the first full step with
the exact values and gradients (a pass without the Hessian) and the subsample's Hessian; every
certificate uses the exact Hessian. Checked against the same route without the warm start and the
independent Hessian-free route: the certified intervals meet and the answer is ``optimal``."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.objectives import ClientObjectives
from drflmodel.problems.minmax import lagrangian_sqp

ROWS = 8_000


def _problem(kind):
    fed = dm.datasets.gaussian_mixture(ROWS, 6, 2, n_clients=5, alpha=0.5, seed=2)
    if kind == "erm":
        X, y, _ = fed.pooled()
        return dm.FederatedDRO(dm.Federation.from_arrays([X], [y], task=fed.task), dm.losses.Logistic(),
                               dm.sets.Simplex(1), l2=1e-3, penalize_intercept=False)
    W = dm.sets.ChiSquare(5, 0.1) if kind == "chi2" else dm.sets.CVaR(5, 0.4)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=1e-3, penalize_intercept=False)


@pytest.mark.parametrize("kind", ["erm", "chi2", "cvar"])
def test_the_subsample_warm_start_steps_with_its_hessian_and_certifies_with_the_exact_one(monkeypatch, kind):
    calls = []
    evaluate = ClientObjectives.evaluate

    def spy(self, theta, lam=None, hessian=True):
        calls.append((self.padded_rows, hessian))
        return evaluate(self, theta, lam, hessian)

    monkeypatch.setattr(ClientObjectives, "evaluate", spy)
    certify, exact = lagrangian_sqp.LagrangianSQPRoute._certify, []

    def certify_spy(problem, point):
        exact.append(point.exact_hessian)
        return certify(problem, point)

    monkeypatch.setattr(lagrangian_sqp.LagrangianSQPRoute, "_certify", staticmethod(certify_spy))
    monkeypatch.setattr(lagrangian_sqp, "WARM_START_ROWS", ROWS // 2)
    monkeypatch.setattr(lagrangian_sqp, "LAZY_MIN_WORK", 0.0)     # ERM: the lazy Hessian after the warm start
    prob = _problem(kind)
    warm = prob.solve(method="sqp")
    rows = prob.objectives.padded_rows
    full = [hessian for padded, hessian in calls if padded == rows]
    assert calls[0][0] < rows                                      # the subsample ran first
    # one full pass without the Hessian first; after it, only the lazy-Hessian steps of a fixed set skip it
    reused = sum(h.get("next_hessian") == "reused" for h in warm.info["history"])
    assert full[0] is False and full.count(False) == 1 + reused
    assert (reused > 0) == (kind == "erm")
    assert exact and all(exact)                                    # every certificate with the exact Hessian
    monkeypatch.setattr(lagrangian_sqp, "WARM_START_ROWS", 10 * ROWS)
    cold = _problem(kind).solve(method="sqp")
    ref = _problem(kind).solve(method="hessian_free", tol=1e-9)
    for sol in (warm, cold, ref):
        assert sol.status == "optimal"
    assert warm.relative_gap <= 1e-9
    for other in (cold, ref):           # valid certificates of one optimum: the intervals meet
        assert warm.lower_bound <= other.upper_bound + 1e-13 and other.lower_bound <= warm.upper_bound + 1e-13
    assert np.abs(warm.weights - cold.weights).max() <= 1e-4


def test_a_certificate_at_the_first_full_point_recomputes_the_exact_hessian(monkeypatch):
    """``max_steps=1``: the route certifies the point the subsample left, whose Hessian is the
    subsample's: it makes the exact one first (the bound is then valid: it meets the reference)."""
    monkeypatch.setattr(lagrangian_sqp, "WARM_START_ROWS", ROWS // 2)
    certify, exact = lagrangian_sqp.LagrangianSQPRoute._certify, []

    def certify_spy(problem, point):
        exact.append(point.exact_hessian)
        return certify(problem, point)

    monkeypatch.setattr(lagrangian_sqp.LagrangianSQPRoute, "_certify", staticmethod(certify_spy))
    sol = _problem("cvar").solve(method="sqp", max_steps=1)
    ref = _problem("cvar").solve(method="hessian_free", tol=1e-9)
    assert exact == [True]
    assert sol.lower_bound <= ref.upper_bound + 1e-13 and ref.lower_bound <= sol.upper_bound + 1e-13
