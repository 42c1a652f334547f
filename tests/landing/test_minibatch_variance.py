"""The variance form of the minibatch radius (landing/minibatch.py): its row moments hold for the
logistic row gradients computed by hand, it is tighter than the worst-case form, and correct
batch-1 runs stay within it of their own full-batch run (the independent route: the full-batch
run itself, round by round)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.landing import conformance
from drflmodel.landing.minibatch import _radius, martingale_radius, per_sample_gradient_bounds, row_moments

J, ETA, R = 5, 0.1, 80


def _problem():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[40, 60, 50], heterogeneity=1.0,
                                               add_intercept=True, seed=5)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)


def test_the_row_moments_bound_the_logistic_row_gradients_at_any_model():
    prob = _problem()
    sigma2, gbar = row_moments(prob)
    rng = np.random.default_rng(0)
    for c, s2, g in zip(prob.federation.clients, sigma2, gbar):
        for scale in (0.1, 1.0, 10.0):
            theta = rng.normal(size=c.X.shape[1]) * scale
            z = c.y * (c.X @ theta)                                  # y in {-1, +1}
            grads = -(c.y / (1.0 + np.exp(z)))[:, None] * c.X         # d/dtheta log(1 + exp(-y x.theta))
            assert np.mean(np.sum(grads ** 2, axis=1)) <= s2
            assert np.max(np.linalg.norm(grads - grads.mean(axis=0), axis=1)) <= g


def test_correct_batch_one_runs_stay_within_the_variance_radius_which_is_tighter():
    prob = _problem()
    sol = prob.solve()
    exact = np.asarray(dm.solvers.FedAvg(rounds=R, local_steps=J, step_size=ETA).run(prob).theta)
    rho = None
    ratios = []
    for seed in range(6):
        tr = dm.solvers.FedAvg(rounds=R, local_steps=J, step_size=ETA, batch_size=1).run(prob, seed=seed)
        rep = conformance(tr, prob, "FedAvg", local_steps=J, step_size=ETA, solution=sol)
        assert rep.verdict != "elsewhere", rep.text
        rho = rep.extra["noise_rho"]
        ratios.append(np.max(np.linalg.norm(np.asarray(tr.theta) - exact, axis=1)) / rho)
    assert 0 < max(ratios) < 1
    fp = rep.fixed_point
    L, m = np.asarray(fp.info["smoothness"]), np.asarray(fp.info["strong_convexity"])
    a = np.maximum(np.abs(1 - ETA * m), np.abs(1 - ETA * L))
    args = (prob, fp, 1, per_sample_gradient_bounds(prob), a, ["all"] * R, np.zeros(R), 1e-3, 1.0, "examples")
    worst = _radius(*args, "worst", None)
    variance = _radius(*args, "variance", row_moments(prob))
    assert variance < worst and rho == pytest.approx(variance, rel=1e-6)    # rho adds the float64 rounding
    assert martingale_radius(prob, fp, 1, ["all"] * R, np.zeros(R), 1e-3) == variance
