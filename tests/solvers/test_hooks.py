"""The public per-round hooks of solvers.Solver (start, check_problem, minibatch_size, the solvers'
server steps, RoundLog.info): the API both engines (the simulator and the Flower port) run on.
A third engine written against them reproduces ``Solver.run``; the expected values come from
independent loops over client views, not from the hooks."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.solvers import DRFA, RFedFair, RoundLog, Solver, StochasticAFL

N = 4


@pytest.fixture(scope="module")
def cvar():
    fed = dm.datasets.synthetic_regression(n_clients=N, dim=3, samples=[12, 15, 18, 21], seed=2,
                                           heterogeneity=1.0)
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(N, 0.5), l2=0.1)


def _views(problem):
    return [problem.client_view(i) for i in range(problem.n_clients)]


def test_start_validates_like_run_and_builds_the_initial_state(cvar):
    solver = StochasticAFL(rounds=3, step_size=0.1)
    runtime, state = solver.start(cvar, seed=4)
    assert runtime.rng.random() == np.random.default_rng(4).random()      # the server's generator
    assert np.array_equal(state["theta"], np.zeros(cvar.dim)) and state["g0"] == 0.1
    theta0 = np.arange(cvar.dim, dtype=float)
    _, state = solver.start(cvar, seed=4, theta0=theta0)
    assert np.array_equal(state["theta"], theta0) and state["theta"] is not theta0
    with pytest.raises(InvalidDataError, match="theta0 must have shape"):
        solver.start(cvar, theta0=np.zeros(cvar.dim + 1))
    with pytest.raises(InvalidParameterError, match="seed"):
        solver.start(cvar, seed=-1)
    with pytest.raises(InvalidParameterError, match="FederatedDRO"):
        solver.check_problem(dm.FairnessAwareFL(cvar.federation, dm.losses.Squared(), alpha=0.5))
    assert StochasticAFL(batch_size=3).minibatch_size() == 3 and StochasticAFL().minibatch_size() is None


def test_a_third_engine_on_the_public_hooks_reproduces_run(cvar):
    """Stochastic-AFL with exact client answers computed one client at a time (no runtime), the
    server step taken by the public hook: the same iterates as ``run`` to rounding."""
    solver = StochasticAFL(rounds=6, step_size=0.2, dual_step=0.3)
    ref = solver.run(cvar, seed=1)
    views = _views(cvar)
    solver.check_problem(cvar)
    _, state = solver.start(cvar, seed=1)
    for r in range(solver.rounds):
        x = state["theta"]
        v = np.array([w.value(x) for w in views])
        g = sum(lam * w.gradient(x) for lam, w in zip(state["weights"], views))
        state = solver.server_step(r, state, x, g, v)
        assert np.allclose(state["theta"], ref.theta[r + 1], rtol=0, atol=1e-12)
        assert np.allclose(state["weights"], ref.weights[r + 1], rtol=0, atol=1e-12)
    assert np.allclose(state["theta_avg"], ref.iterates["theta_avg"][-1], rtol=0, atol=1e-12)


def test_drfa_server_step_is_the_papers_dual_step(cvar):
    """DRFA.server_step: lambda+ = prox(lambda + gamma J v), theta_avg the running mean (checked
    against the weight set's own projection: CVaR has no penalty, so prox = projection)."""
    solver = DRFA(rounds=2, local_steps=3, step_size=0.05, dual_step=0.1)
    _, state = solver.start(cvar, seed=0)
    lam0, v, x1 = state["weights"].copy(), np.array([1.0, 3.0, 2.0, 0.5]), np.ones(cvar.dim)
    state = solver.server_step(0, state, x1, v)
    assert np.allclose(state["weights"], cvar.weights.project(lam0 + 0.3 * v), atol=1e-12)
    state = solver.server_step(1, state, 3 * x1, v)
    assert np.allclose(state["theta_avg"], 2 * x1) and np.array_equal(state["theta"], 3 * x1)


def test_rfedfair_sample_clients_draws_from_the_given_generator(cvar):
    fafl = dm.FairnessAwareFL(dm.datasets.synthetic_classification(n_clients=N, dim=2, samples=[10] * N,
                                                                   seed=0), dm.losses.Logistic(), alpha=0.5)
    solver = RFedFair(mu=0.5, rounds=2, participation="partial", clients_per_round=3)
    _, state = solver.start(fafl, seed=0)
    w1, members, mult = solver.sample_clients(state, N, np.random.default_rng(9))
    expect = np.random.default_rng(9).choice(N, size=3, p=state["p"])
    assert np.array_equal(mult, np.bincount(expect, minlength=N))
    assert np.array_equal(members, np.flatnonzero(mult)) and np.allclose(w1, mult / 3)
    wf, mf, _ = RFedFair(mu=0.5, rounds=2).sample_clients(state, N, np.random.default_rng(9))
    assert np.array_equal(wf, state["p"]) and np.array_equal(mf, np.arange(N))


def test_round_log_info_is_the_runs_info(cvar):
    tr = StochasticAFL(rounds=2).run(cvar, seed=3)
    log = RoundLog({"theta": np.zeros(1)})
    common = log.info(3, cvar, 7)
    assert set(common) <= set(tr.info) and common["seed"] == tr.info["seed"] == 3
    assert common["problem"] == tr.info["problem"] and common["rounds_run"] == 0


@pytest.mark.parametrize("old,new", [("_check_problem", "check_problem"), ("_batch_size", "minibatch_size")])
def test_a_subclass_with_an_old_private_hook_is_refused(old, new):
    with pytest.raises(TypeError, match=f"rename it {new}"):
        type("Old", (Solver,), {old: lambda self, *a: None})
