"""The per-call shortcuts of the ``sqp`` route (problems/minmax/lagrangian_sqp.py, fixed_weight_bound.py,
sets.py): each keeps the answer and its certificate, checked against an independent computation.

- ERM (a fixed weight set): the certificate is attempted once, where it closes; its interval holds
  SciPy's L-BFGS-B minimum of the same objective at 1e-10;
- ``_Deflated.solve`` (LAPACK ``potrs`` directly) equals ``scipy.linalg.cho_solve`` bit for bit and
  refuses non-finite input as it does;
- the simplex's scalar-cap ``contains`` agrees with the elementwise test on the broadcast caps;
- a fixed set's step weights are ``feasible_weights`` of its point, a fresh array each time."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import cho_solve
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel.problems.minmax.fixed_weight_bound import _Deflated
from drflmodel.problems.minmax.lagrangian_sqp import FixedWeightStep
from drflmodel.sets import feasible_weights

L2 = 1e-3


def _erm(N=240, d=14, seed=0):
    pooled = dm.datasets.gaussian_mixture(N, d, 2, n_clients=1, alpha=0.5, seed=seed)
    return dm.FederatedDRO(pooled, dm.losses.Logistic(), dm.sets.Simplex(1), l2=L2, penalize_intercept=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_erm_certifies_once_and_its_interval_holds_lbfgs_minimum(seed):
    prob = _erm(seed=seed)
    sol = prob.solve(method="sqp")
    assert sol.status == "optimal"
    attempts = [h for h in sol.info["history"] if "relative_gap" in h]
    assert len(attempts) == 1                         # attempted where it closes, not a step earlier
    assert attempts[0]["relative_gap"] <= 1e-10
    # an independent minimum: L-BFGS-B on the exact objective (no gradient of ours), from zero
    ref = minimize(prob.objective, np.zeros(prob.dim), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
    slack = 1e-9 * max(1.0, abs(ref.fun))              # the reference's own accuracy
    assert sol.lower_bound <= ref.fun + 1e-15
    assert ref.fun <= sol.upper_bound + slack
    assert sol.upper_bound - ref.fun <= slack


def test_erm_answer_weights_are_fresh_arrays():
    prob = _erm()
    first = prob.solve(method="sqp")
    first.weights[0] = 7.0                            # the caller's copy: the route's cache unchanged
    second = _erm().solve(method="sqp")
    np.testing.assert_array_equal(second.weights, [1.0])


@pytest.mark.parametrize("W", [dm.sets.Simplex(1), dm.sets.HCVaR(np.full(3, 1 / 3), 1.0)])
def test_fixed_weight_step_point_is_feasible_weights_of_the_point(W):
    point = W.single_point()
    step = FixedWeightStep(W, point)
    np.testing.assert_array_equal(step.feasible, feasible_weights(W, point)[0])
    assert W.contains(step.feasible, tol=0.0) or abs(step.feasible.sum() - 1) <= 1e-15


def test_deflated_solve_equals_cho_solve_and_refuses_nan():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(9, 9))
    D = _Deflated(A @ A.T + np.eye(9), np.zeros((9, 0)))
    for v in (rng.normal(size=9), rng.normal(size=(9, 4)), rng.normal(size=(4, 9)).T):
        np.testing.assert_array_equal(D.solve(v), cho_solve((D.chol, True), v))
    bad = np.ones(9)
    bad[2] = np.nan
    with pytest.raises(ValueError):
        cho_solve((D.chol, True), bad)
    with pytest.raises(ValueError):
        D.solve(bad)


@pytest.mark.parametrize("lam", [[0.2, 0.3, 0.5], [0.0, 0.0, 1.0], [-1e-9, 0.5, 0.5 + 1e-9], [-1e-7, 0.5, 0.5],
                                 [0.5, 0.5, 1e-7], [np.nan, 0.5, 0.5], [1.0 + 1e-7, 0.0, -1e-7], [0.5, 0.5]])
def test_simplex_contains_agrees_with_the_elementwise_test(lam):
    W = dm.sets.Simplex(3)
    lam = np.asarray(lam, float)
    lo, up = W.box_bounds()
    tol = 1e-8
    expected = lam.shape == (3,) and bool(np.all(lam >= lo - tol) and np.all(lam <= up + tol)
                                          and abs(lam.sum() - 1) <= tol)
    assert W.contains(lam, tol=tol) is expected
