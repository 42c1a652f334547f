"""The numpy fixed-weight lower bound (problems/_newton.py, issue 13 item 1): it is a valid lower
bound (below scipy's minimum and the conic solver's), tight (within 1e-10 of both), and the
certificate uses it wherever the loss is smooth and the weighted objective strongly convex."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel.problems.minmax.fixed_weight_bound import weighted_newton_bound


def _scipy_minimum(prob, lam):
    obj = prob.objectives

    def g(th):
        return float(lam @ obj.values(th)), lam @ obj.gradients(th)

    r = minimize(g, np.zeros(prob.dim), jac=True, method="L-BFGS-B",
                 options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 10_000})
    return r.fun


CASES = [
    ("logistic", dm.losses.Logistic(), 1e-3),
    ("squared", dm.losses.Squared(), 1e-3),
    ("squared-no-ridge", dm.losses.Squared(), 0.0),      # strongly convex through the Gram matrix
    ("huber", dm.losses.Huber(1.0), 1e-2),
    ("smooth-hinge", dm.losses.SmoothHinge(), 1e-2),
]


def _problem(loss, l2, seed, scale=None):
    if loss.task == "classification":
        fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=[30, 50, 8, 40], seed=seed)
    else:
        fed = dm.datasets.synthetic_regression(n_clients=4, dim=5, samples=[30, 50, 8, 40], seed=seed)
    if scale is not None:
        fed = dm.Federation.from_arrays([c.X * scale for c in fed.clients], [c.y for c in fed.clients],
                                        task=fed.task)
    return dm.FederatedDRO(fed, loss, dm.sets.CVaR(4, 0.5), l2=l2)


@pytest.mark.parametrize("name, loss, l2", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newton_bound_is_valid_and_tight(name, loss, l2, seed):
    prob = _problem(loss, l2, seed)
    lam = np.random.default_rng(seed).dirichlet(np.ones(4))
    mu = float(lam @ prob.objectives.strong_convexity())
    assert mu > 0
    res = weighted_newton_bound(prob.objectives, lam, np.zeros(prob.dim), mu)
    ref = _scipy_minimum(prob, lam)
    scale = max(1.0, abs(ref))
    assert res.converged
    assert res.bound <= ref + 1e-12 * scale               # a lower bound on scipy's (upper) value
    assert ref - res.bound <= 1e-10 * scale               # and tight
    assert res.bound <= res.value


def test_newton_bound_on_badly_scaled_features():
    scale = np.array([1e3, 1.0, 1e-3, 1.0, 10.0])
    prob = _problem(dm.losses.Logistic(), 1e-3, 0, scale=scale)
    lam = np.full(4, 0.25)
    mu = float(lam @ prob.objectives.strong_convexity())
    res = weighted_newton_bound(prob.objectives, lam, np.zeros(prob.dim), mu)
    conic = prob.fixed_weight_problem()
    conic[2].value = lam
    conic[0].solve(solver="CLARABEL")
    assert res.converged
    assert res.bound <= conic[0].value + 1e-8 * max(1.0, abs(conic[0].value))
    assert conic[0].value - res.bound <= 1e-7 * max(1.0, abs(conic[0].value))


def test_bound_is_valid_at_any_point_even_unconverged():
    prob = _problem(dm.losses.Logistic(), 1e-2, 3)
    lam = np.full(4, 0.25)
    mu = float(lam @ prob.objectives.strong_convexity())
    res = weighted_newton_bound(prob.objectives, lam, np.full(prob.dim, 5.0), mu, max_iter=0)
    assert not res.converged and res.iterations == 0
    assert res.bound <= _scipy_minimum(prob, lam)


@pytest.mark.parametrize("weights", [dm.sets.ChiSquare(4, 0.2), dm.sets.CVaR(4, 0.5), dm.sets.Simplex(4)],
                         ids=["chi2", "cvar", "simplex"])
def test_certificate_uses_newton_and_agrees_with_the_conic_fixed_weight_problem(weights):
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=60, seed=4)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights, l2=1e-3)
    sol = prob.solve(method="sqp")        # the route whose certificate is the Newton bound (auto may rank another first)
    assert sol.status == "optimal"
    assert sol.info["fixed_weight_solver"] == "numpy-newton"
    assert sol.info["lower_bound_kind"] in ("numpy Newton + strong-convexity bound", "numpy Newton + self-concordance bound")
    assert sol.info["certificate_time"] >= 0.0
    conic_prob, _, lam_par = prob.fixed_weight_problem()
    lam_par.value = sol.weights
    conic_prob.solve(solver="CLARABEL")
    conic_L = conic_prob.value - float(prob.weights.psi(sol.weights))
    assert sol.lower_bound == pytest.approx(conic_L, abs=1e-7 * max(1.0, abs(conic_L)))
    assert sol.lower_bound <= sol.upper_bound + 1e-12 * max(1.0, abs(sol.upper_bound))


def test_nonsmooth_or_zero_ridge_keeps_the_conic_fixed_weight_problem():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=4, samples=40, seed=5)
    hinge = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(3, 0.5), l2=1e-3).solve()
    assert hinge.info["fixed_weight_solver"] != "numpy-newton"
    huber_no_ridge = dm.FederatedDRO(dm.datasets.synthetic_regression(n_clients=3, dim=4, samples=40, seed=5),
                                     dm.losses.Huber(0.5), dm.sets.CVaR(3, 0.5), l2=0.0).solve()
    assert huber_no_ridge.info["fixed_weight_solver"] != "numpy-newton"


def test_logistic_without_ridge_is_certified_by_the_self_concordance_bound():
    """l2 = 0: no strong convexity, but the logistic loss is self-concordant (Bach 2010), so the numpy
    bound still certifies; it must agree with the conic fixed-weight minimum and lie below it."""
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=4, samples=40, seed=5)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.0)
    sol = prob.solve()
    assert sol.status == "optimal"
    assert sol.info["lower_bound_kind"] == "numpy Newton + self-concordance bound"
    conic_prob, _, lam_par = prob.fixed_weight_problem()
    lam_par.value = sol.weights
    conic_prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    conic_L = conic_prob.value - float(prob.weights.psi(sol.weights))
    assert sol.lower_bound <= conic_L + 1e-9 * max(1.0, abs(conic_L))
    assert conic_L - sol.lower_bound <= 1e-7 * max(1.0, abs(conic_L))


def test_fafl_smoothed_certificate_uses_newton():
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=4, samples=50, seed=6)
    prob = dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.5, l2=1e-3)
    sol = prob.solve_smoothed(mu=1e-3)
    assert sol.info["lower_bound_kind"] in ("numpy Newton + strong-convexity bound", "numpy Newton + self-concordance bound")
    assert sol.lower_bound <= sol.upper_bound
