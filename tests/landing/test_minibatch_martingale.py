"""Minibatch runs graded against the cross-round martingale radius (landing/minibatch.py): a correct
run stays within it of the full-batch run, and a planted bug the per-step region missed is caught."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.landing import conformance
from drflmodel.landing.minibatch import martingale_radius, noise_bounds

ETA, J, B = 0.02, 5, 1024


@pytest.fixture(scope="module")
def big():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=3000, heterogeneity=1.0,
                                               add_intercept=True, seed=2)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.05)
    return fed, prob, prob.solve()


def _per_step_region(prob, fp, rounds):
    """The first round's region: every client's worst-case deviation, union bound per step."""
    s, _ = noise_bounds(prob, fp, B, rounds, 1e-3, "fresh")
    return float(np.asarray(fp.config["weights"]) @ s) / (1.0 - fp.contraction)


def test_a_correct_minibatch_run_stays_within_rho_of_the_full_batch_run(big):
    _, prob, sol = big
    R = 300
    noisy = dm.solvers.FedAvg(rounds=R, local_steps=J, step_size=ETA, batch_size=B).run(prob, seed=3)
    exact = dm.solvers.FedAvg(rounds=R, local_steps=J, step_size=ETA).run(prob)
    rep = conformance(noisy, prob, "FedAvg", local_steps=J, step_size=ETA, solution=sol)
    rho = rep.extra["noise_rho"]
    assert rep.verdict == "landed" and "noise region" in rep.text
    # the independent route: the full-batch run itself, round by round
    gap = np.max(np.linalg.norm(np.asarray(noisy.theta) - np.asarray(exact.theta), axis=1))
    assert 0 < gap <= rho
    assert rep.extra["noise_region"] < _per_step_region(prob, rep.fixed_point, R) / 10   # >10x tighter
    assert martingale_radius(prob, rep.fixed_point, B, ["all"] * R, np.zeros(R), 1e-3) == pytest.approx(rho)


def test_flipped_labels_under_minibatch_noise_are_caught_where_the_per_step_region_missed_them(big):
    fed, prob, sol = big
    flipped = dm.data.Federation([dm.data.Client(c.X, (-c.y if np.min(c.y) < 0 else 1 - c.y)) for c in fed.clients],
                                 task=fed.task)
    bad = dm.FederatedDRO(flipped, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.05)
    R = 600
    tr = dm.solvers.FedAvg(rounds=R, local_steps=J, step_size=ETA, batch_size=B).run(bad, seed=3)
    rep = conformance(tr, prob, "FedAvg", local_steps=J, step_size=ETA, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and "cross-round" in rep.text
    assert rep.rows[-1]["dist_fixed_point"] < _per_step_region(prob, rep.fixed_point, R)     # the old region missed it
