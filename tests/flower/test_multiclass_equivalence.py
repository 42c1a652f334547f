"""Multi-class (softmax) problems on Flower, and the ports added with FedProx, SCAFFOLD and
q-FedAvg: every ported horizontal algorithm reproduces the simulator's trace from the same seed --
theta (class-major, P = K d floats per model) and lambda every round to 1e-10, every recorded
iterate, the per-round message and float counts, the first round's named ledger and the gradient
evaluations -- with exact gradients and with minibatches drawn by each client from its own
generator; and a Flower run on a multi-class problem is graded by ``dm.verify`` against the
certified softmax optimum."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.errors import InvalidParameterError
from drflmodel.solvers import (DRFA, FedAvg, FedProx, QFedAvg, RFedFair, Scaffold, ScaffPD,
                               ScaffPDIA, StochasticAFL)

TOL = 1e-10
N, K = 4, 3
R = 12


@pytest.fixture(scope="module")
def mc_fed():
    return dm.datasets.synthetic_multiclass(n_clients=N, dim=3, n_classes=K, samples=[20, 25, 30, 35], seed=1)


def _dro(fed, weights, **kw):
    return dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=weights, **{"l2": 0.1, **kw})


@pytest.fixture(scope="module")
def mc_problems(mc_fed):
    p = mc_fed.proportions
    return {
        "chi2": _dro(mc_fed, dm.sets.ChiSquare(N, 0.5)),
        "cvar": _dro(mc_fed, dm.sets.CVaR(N, 0.5)),
        "erm": _dro(mc_fed, dm.sets.HCVaR(p, 1.0)),
        "erm-free-intercept": _dro(mc_fed, dm.sets.HCVaR(p, 1.0), penalize_intercept=False),
        "qffl": _dro(mc_fed, dm.sets.QFFL(N, 1.0)),
        "fafl": dm.FairnessAwareFL(mc_fed, dm.losses.Multinomial(), alpha=0.5, l2=0.1),
        "relative": dm.RelativeFairness(mc_fed, dm.losses.Multinomial(), A=dm.sets.CVaR(N, 0.5),
                                        B=dm.sets.CVaR(N, 0.5), phi=0.1, l2=0.1),
    }


MC_CASES = {
    "ScaffPD": ("chi2", lambda b: ScaffPD(rounds=R, local_steps=3, batch_size=b)),
    "ScaffPD-constant-free-intercept": ("erm-free-intercept", lambda b: ScaffPD(
        rounds=R, local_steps=3, schedule="constant", step_size=0.5, dual_step=0.5, batch_size=b)),
    "ScaffPDIA": ("relative", lambda b: ScaffPDIA(rounds=R, schedule="constant", step_size=0.05,
                                                  dual_step=0.05, local_steps=3, batch_size=b)),
    "DRFA": ("cvar", lambda b: DRFA(rounds=R, local_steps=3, batch_size=b)),
    "FedAvg": ("erm", lambda b: FedAvg(rounds=R, local_steps=3, batch_size=b)),
    "FedProx": ("erm", lambda b: FedProx(rounds=R, mu=0.5, local_steps=3, batch_size=b)),
    "Scaffold": ("erm-free-intercept", lambda b: Scaffold(rounds=R, local_steps=3, batch_size=b)),
    "QFedAvg": ("qffl", lambda b: QFedAvg(rounds=R, local_steps=2, batch_size=b)),
    "RFedFair": ("fafl", lambda b: RFedFair(mu=0.5, rounds=R, local_steps=3, step_size=0.1, batch_size=b)),
    "StochasticAFL": ("chi2", lambda b: StochasticAFL(rounds=R, batch_size=b)),
}

#: the ports added with this file, on the scalar-score problems of conftest.py
SCALAR_CASES = {
    "FedProx": ("erm", lambda b: FedProx(rounds=R, mu=0.5, local_steps=4, batch_size=b)),
    "Scaffold": ("erm", lambda b: Scaffold(rounds=R, local_steps=4, batch_size=b)),
}


def _check_equal(sim, flw):
    gaps = dmf.compare_traces(sim, flw)
    assert gaps["theta"] <= TOL, gaps
    assert gaps["weights"] is None or gaps["weights"] <= TOL, gaps
    assert gaps["iterates"] <= TOL, gaps
    assert gaps["communication"] and gaps["comm_schedule"], (sim.info["comm_schedule"], flw.info["comm_schedule"])
    assert sim.info["gradient_evaluations"] == flw.info["gradient_evaluations"]
    assert flw.info["engine"] == "flower" and flw.info["failed_rounds"] == []
    assert flw.expected_rate == sim.expected_rate and flw.solver == sim.solver
    assert np.all(np.isfinite(flw.theta)) and np.abs(flw.theta[-1] - flw.theta[0]).max() > 1e-3


def _run(problem, make, batch):
    solver = make(batch)
    sim, flw = solver.run(problem, seed=5), dmf.run(problem, solver, seed=5)
    _check_equal(sim, flw)
    if batch is not None:    # the minibatches are real: the run differs from the exact one
        assert np.abs(make(None).run(problem, seed=5).theta[-1] - flw.theta[-1]).max() > 1e-6
    return sim, flw


@pytest.mark.parametrize("batch", [None, 5], ids=["exact", "minibatch"])
@pytest.mark.parametrize("case", sorted(MC_CASES))
def test_multiclass_run_reproduces_the_simulator(mc_problems, case, batch):
    key, make = MC_CASES[case]
    problem = mc_problems[key]
    assert problem.dim == K * problem.objectives.n_features
    sim, flw = _run(problem, make, batch)
    assert flw.theta.shape == (R + 1, problem.dim)


@pytest.mark.parametrize("batch", [None, 6], ids=["exact", "minibatch"])
@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
def test_new_ports_reproduce_the_simulator(request, case, batch):
    fixture, make = SCALAR_CASES[case]
    _run(request.getfixturevalue(fixture), make, batch)


def test_qfedavg_port_reproduces_the_simulator(fed):
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.QFFL(fed.n_clients, 2.0), l2=0.1)
    for batch in (None, 6):
        _run(prob, lambda b: QFedAvg(rounds=R, local_steps=3, batch_size=b), batch)


def test_scaffold_option_two_is_refused_on_flower(erm):
    with pytest.raises(InvalidParameterError, match="control='local'"):
        dmf.run(erm, Scaffold(rounds=2, control="local"), seed=0)


def test_multiclass_flower_run_verifies_against_the_oracle(mc_problems):
    """SCAFFOLD on Flower, free intercept (scikit-learn's convention), graded in the identifiable
    parametrization: squared distance below 1e-8."""
    prob = mc_problems["erm-free-intercept"]
    sol = prob.solve()
    assert sol.status == "optimal"
    tr = dmf.run(prob, Scaffold(rounds=180, local_steps=5), seed=0)
    report = dm.verify(tr, sol, tol=1e-8)
    assert report.passed, report.summary()
