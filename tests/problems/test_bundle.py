"""The level bundle route (method='bundle'): values and subgradients only, a lower bound evaluated in
numpy from any multipliers. References: the conic route's certified interval on the same problem,
and random multipliers (every one must give a bound below the optimum)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.problems.minmax.level_bundle import lagrangian_bound


@pytest.mark.parametrize("loss, weights, seed", [
    (dm.losses.Hinge(), "cvar", 0), (dm.losses.Hinge(), "chi2", 1),
    (dm.losses.Pinball(0.3), "simplex", 2), (dm.losses.EpsilonInsensitive(0.1), "chi2", 3),
    (dm.losses.Hinge(), "fafl", 4),
])
def test_bundle_interval_is_consistent_with_the_conic_certificate(loss, weights, seed):
    n = 4
    if loss.task == "classification":
        fed = dm.datasets.synthetic_classification(n_clients=n, dim=4, samples=[25, 35, 30, 40], seed=seed)
    else:
        fed = dm.datasets.synthetic_regression(n_clients=n, dim=4, samples=[25, 35, 30, 40], seed=seed)
    W = {"cvar": dm.sets.CVaR(n, 0.5), "chi2": dm.sets.ChiSquare(n, 0.2), "simplex": dm.sets.Simplex(n)}
    prob = (dm.FairnessAwareFL(fed, loss, alpha=0.5, l2=0.05) if weights == "fafl"
            else dm.FederatedDRO(fed, loss, W[weights], l2=0.05))
    conic = prob.solve(method="conic")
    bundle = prob.solve(method="bundle", tol=1e-9)
    assert conic.status == "optimal" and bundle.status == "optimal"
    assert bundle.relative_gap <= 1e-9
    scale = max(1.0, abs(conic.upper_bound))
    assert bundle.lower_bound <= conic.upper_bound + 1e-12 * scale        # L below every upper bound
    assert conic.lower_bound <= bundle.upper_bound + 1e-12 * scale
    assert bundle.upper_bound == pytest.approx(prob.objective(bundle.theta), rel=1e-14)


def test_a_step_budget_too_small_ends_optimal_within_gap_with_the_true_gap():
    fed = dm.datasets.synthetic_classification(n_clients=5, dim=6, samples=[40, 50, 30, 60, 45], seed=3)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(5, 0.4), l2=0.01)
    short = prob.solve(method="bundle", max_steps=3)
    conic = prob.solve(method="conic")
    assert short.status == "optimal_within_gap" and np.isfinite(short.relative_gap) and short.relative_gap > 1e-6
    assert short.lower_bound <= conic.upper_bound + 1e-12 and conic.lower_bound <= short.upper_bound


def test_any_multipliers_give_a_valid_bound():
    """The bound of the module docstring from random cut multipliers, on cuts from random points, is
    never above the certified optimum (weak duality does not need optimal multipliers)."""
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[20, 30, 25], seed=5)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.ChiSquare(3, 0.3), l2=0.1)
    U = prob.solve(method="conic").upper_bound
    obj, pd = prob.objectives, prob.objectives.penalty_diagonal
    rng = np.random.default_rng(0)
    points = rng.normal(size=(6, 3))
    A, G = np.zeros((3, 6)), np.zeros((3, 6, 3))
    for k, th in enumerate(points):
        values, grads, _ = obj.evaluate(th, hessian=False)
        h, g = values - 0.5 * np.sum(pd * th * th), grads - pd * th
        A[:, k], G[:, k] = h - g @ th, g
    for _ in range(50):
        nu = rng.exponential(size=(3, 6)) * rng.integers(0, 2, size=(3, 6))
        bound, lam = lagrangian_bound(prob.weights, A, G, nu, pd)
        assert bound <= U + 1e-12 and prob.weights.contains(lam, tol=1e-9)


def test_the_bundle_route_needs_every_coordinate_penalized():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[20, 30, 25], seed=5, add_intercept=True)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(3, 0.5), l2=0.1, penalize_intercept=False)
    with pytest.raises(dm.InvalidParameterError, match="every coordinate penalized"):
        prob.solve(method="bundle")
    assert prob.solve().info["method"] == "conic"           # auto never takes the bundle route
