"""Minibatch local steps: the per-sample gradient bound from the rows, checked against drflmodel's
own minibatch gradients, and the noise region's verdicts (issue 38)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.landing import conformance
from drflmodel.landing.minibatch import noise_bounds, per_sample_gradient_bounds


def test_per_sample_gradients_deviate_from_the_mean_by_at_most_the_bound(logistic):
    prob, _ = logistic
    G = per_sample_gradient_bounds(prob)
    rng = np.random.default_rng(0)
    worst = np.zeros(prob.n_clients)
    for _ in range(200):                               # one-row batches at random models, far and near
        theta = rng.normal(scale=float(rng.choice([0.1, 3.0, 30.0])), size=prob.dim)
        single = prob.objectives.minibatch_gradients(theta, 1, rng)
        full = prob.objectives.gradients(np.broadcast_to(theta, (prob.n_clients, prob.dim)))
        worst = np.maximum(worst, np.linalg.norm(single - full, axis=1))
    assert np.all(worst <= G) and np.all(worst > 0.2 * G)     # holds, and is not vacuous
    reg = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)
    squared = dm.FederatedDRO(reg, dm.losses.Squared(), weights=dm.sets.HCVaR(reg.proportions, 1.0), l2=0.1)
    assert per_sample_gradient_bounds(squared) is None        # no bound for every model: "observed"


def test_a_correct_minibatch_run_lands_in_its_noise_region(logistic):
    prob, sol = logistic
    tr = dm.solvers.FedProx(rounds=150, mu=1.0, local_steps=5, batch_size=8).run(prob, seed=3)
    rep = conformance(tr, prob, solution=sol)
    assert rep.verdict == "landed" and "noise region" in rep.text and "probability >= 1 - 0.001" in rep.text
    assert rep.extra["noise_region"] > rep.rows[-1]["dist_fixed_point"]
    worst = conformance(tr, prob, solution=sol, batch_sampling="epoch")
    assert worst.extra["noise_region"] >= rep.extra["noise_region"] and "probability 1" in worst.text
    assert rep.to_dict()["extra"]["batch_size"] == 8


def test_the_noise_bound_shrinks_with_the_batch_and_vanishes_for_a_full_epoch(logistic):
    prob, _ = logistic
    fp = dm.fixed_point(prob, "FedProx", local_steps=5, mu=1.0, step_size=0.1)
    s_small, _ = noise_bounds(prob, fp, 4, 100, 1e-3, "fresh")
    s_large, _ = noise_bounds(prob, fp, 4096, 100, 1e-3, "fresh")
    assert np.all(s_large < s_small)
    s_epoch, how = noise_bounds(prob, fp, 10_000, 100, 1e-3, "epoch")   # every row: the full gradient
    assert np.all(s_epoch == 0) and "probability 1" in how
    with pytest.raises(dm.errors.InvalidParameterError, match="batch_sampling"):
        noise_bounds(prob, fp, 4, 100, 1e-3, "shuffle")
    with pytest.raises(dm.errors.InvalidParameterError, match="delta"):
        noise_bounds(prob, fp, 4, 100, 1.5, "fresh")
