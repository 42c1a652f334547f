"""Client sampling on Flower: DRFA's and Stochastic-AFL's sampled participation (the papers'
estimators, drawn by the server from its generator) and the minibatch variants reproduce the
simulator's trace for the same seed -- theta, lambda and the recorded samples to 1e-10 -- with the
same message and float counts; only the sampled clients receive messages."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.solvers import DRFA, RFedFair, StochasticAFL

N = 5


@pytest.fixture(scope="module")
def cvar():
    fed = dm.datasets.synthetic_regression(n_clients=N, dim=4, samples=[20, 30, 40, 50, 25], seed=1,
                                           heterogeneity=1.0)
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(N, 0.5), l2=0.1)


@pytest.fixture(scope="module")
def fafl():
    cfed = dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[30, 40, 50, 60, 35],
                                                heterogeneity=1.0, seed=0)
    return dm.FairnessAwareFL(cfed, dm.losses.Logistic(), alpha=0.5)


CASES = {
    "DRFA m=2": lambda: DRFA(rounds=12, local_steps=3, clients_per_round=2),
    "DRFA m=3, minibatch": lambda: DRFA(rounds=12, local_steps=3, clients_per_round=3, batch_size=4),
    "Stochastic-AFL full": lambda: StochasticAFL(rounds=12),
    "Stochastic-AFL full, minibatch": lambda: StochasticAFL(rounds=12, batch_size=5),
    "Stochastic-AFL m=3": lambda: StochasticAFL(rounds=12, clients_per_round=3),
    "Stochastic-AFL m=2, minibatch": lambda: StochasticAFL(rounds=12, clients_per_round=2, batch_size=5),
}


@pytest.mark.parametrize("label", list(CASES))
def test_sampled_min_max_baselines_reproduce_the_simulator(cvar, label):
    solver = CASES[label]()
    sim = solver.run(cvar, seed=7)
    flower = dmf.run(cvar, solver, seed=7)
    gaps = dmf.compare_traces(sim, flower)
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["iterates"] <= 1e-10, gaps
    assert gaps["communication"] and gaps["comm_schedule"], gaps
    if solver.clients_per_round is not None:
        # only the sampled clients took part, as recorded by the simulator
        for r, p in enumerate(flower.info["participation"]):
            drawn = set(np.flatnonzero(sim.iterates["sampled"][r])) | set(np.flatnonzero(sim.iterates["loss_clients"][r]))
            assert set(p["participants"]) == drawn, (r, p)
        assert flower.info["partial_participation"]


@pytest.mark.parametrize("participation", ["full", "partial"])
def test_minibatch_rfedfair_reproduces_the_simulator(fafl, participation):
    kw = {"participation": "partial", "clients_per_round": 3} if participation == "partial" else {}
    solver = RFedFair(mu=0.5, rounds=12, local_steps=3, batch_size=6, **kw)
    gaps = dmf.compare_traces(solver.run(fafl, seed=3), dmf.run(fafl, solver, seed=3))
    assert gaps["theta"] <= 1e-10 and gaps["iterates"] <= 1e-10 and gaps["communication"], gaps


def test_sampling_needs_weights_in_the_simplex_on_flower_too(cvar):
    qffl = dm.FederatedDRO(cvar.federation, dm.losses.Squared(), weights=dm.sets.QFFL(N, 1.0), l2=0.1)
    with pytest.raises(dm.InvalidParameterError, match="inside the simplex"):
        dmf.run(qffl, StochasticAFL(rounds=2, clients_per_round=2), seed=0)
