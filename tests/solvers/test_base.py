"""The common solver machinery: Trace, callbacks, seeding, client runtime and communication
accounting (drflmodel.solvers._base). Uses a toy solver on the base Problem so that these tests
depend only on the core files."""

import json

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.problems.engine.problem import Problem
from drflmodel.solvers._base import ClientRuntime, RoundResult, Solver, Trace, check_step


def _federation(n=4, d=3, m=20, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((m + i, d)) for i in range(n)]
    ys = [X @ rng.standard_normal(d) for X in Xs]
    return dm.Federation.from_arrays(Xs, ys)


class ToyGD(Solver):
    """Federated gradient descent on sum_i p_i f_i: broadcast model, upload gradients, aggregate."""

    record = ("grad_norm",)
    expected_rate = "linear"

    def __init__(self, rounds=10, step_size=0.1, batch_size=None):
        super().__init__(rounds=rounds, step_size=step_size, batch_size=batch_size)

    def _validate(self):
        self.step = check_step(self.params["step_size"], "step_size")

    def _initialize(self, problem, runtime, theta0):
        return {"theta": theta0, "weights": problem.federation.proportions.copy()}

    def _round(self, r, state, runtime):
        x = runtime.broadcast("model", state["theta"])
        G = runtime.upload(gradients=runtime.gradients(x))
        g = runtime.aggregate(state["weights"], G)
        state.update(theta=x - self.step * g, grad_norm=np.linalg.norm(g))
        return state


@pytest.fixture
def problem():
    return Problem(_federation(), dm.losses.Squared(), l2=0.1)


def test_toy_solver_matches_direct_gradient_descent(problem):
    tr = ToyGD(rounds=15, step_size=0.05).run(problem)
    # independent: plain loop over client views
    p = problem.federation.proportions
    x = np.zeros(problem.dim)
    for _ in range(15):
        g = sum(p[i] * problem.client_view(i).gradient(x) for i in range(problem.n_clients))
        x = x - 0.05 * g
    assert np.allclose(tr.theta[-1], x, atol=1e-12)
    assert tr.theta.shape == (16, problem.dim) and tr.weights.shape == (16, problem.n_clients)
    assert tr.iterates["grad_norm"].shape == (15,)
    assert tr.rounds == 15 and tr.times.shape == (16,) and tr.times[0] == 0.0
    assert np.all(tr.round_time >= 0)


def test_communication_counts(problem):
    n, d = problem.n_clients, problem.dim
    tr = ToyGD(rounds=3).run(problem)
    assert tr.messages_down.tolist() == [n] * 3 and tr.floats_down.tolist() == [n * d] * 3
    assert tr.messages_up.tolist() == [n] * 3 and tr.floats_up.tolist() == [n * d] * 3
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "model", "messages": n, "floats": n * d},
        {"direction": "up", "name": "gradients", "messages": n, "floats": n * d}]
    assert tr.total_communication()["floats_up"] == 3 * n * d


def test_aggregate_refuses_uncounted_arrays(problem):
    rt = ClientRuntime(problem, np.random.default_rng(0))
    rt.begin_round()
    G = rt.gradients(np.zeros(problem.dim))
    with pytest.raises(RuntimeError, match="upload"):
        rt.aggregate(np.ones(problem.n_clients), G)
    Gu = rt.upload(g=G)
    assert np.allclose(rt.aggregate(np.ones(problem.n_clients), Gu), G.sum(0))
    with pytest.raises(ValueError):
        Gu[0, 0] = 1.0           # uploaded arrays are read-only
    rt.end_round()
    rt.begin_round()
    with pytest.raises(RuntimeError):   # uploads expire with the round
        rt.aggregate(np.ones(problem.n_clients), Gu)


def test_upload_several_arrays_is_one_message(problem):
    rt = ClientRuntime(problem, np.random.default_rng(0))
    rt.begin_round()
    L, C = rt.upload(losses=np.zeros(problem.n_clients), controls=np.zeros((problem.n_clients, problem.dim)))
    row = rt.end_round()
    assert row["messages_up"] == problem.n_clients
    assert row["floats_up"] == problem.n_clients * (1 + problem.dim)


def test_local_sgd_rows_use_only_own_data(problem):
    """Row i of the batched local steps equals client i's own loop on client_view(i)."""
    rt = ClientRuntime(problem, np.random.default_rng(0))
    n, d = problem.n_clients, problem.dim
    corr = np.arange(n * d, dtype=float).reshape(n, d) / 10
    x0 = np.linspace(-1, 1, d)
    U, snap = rt.local_sgd(x0, 4, 0.03, correction=corr, snapshot=2)
    for i in range(n):
        v = problem.client_view(i)
        u = x0.copy()
        for j in range(4):
            u = u - 0.03 * (v.gradient(u) + corr[i])
            if j == 1:
                assert np.allclose(snap[i], u, atol=1e-12)
        assert np.allclose(U[i], u, atol=1e-12)


def test_minibatch_runs_are_seeded(problem):
    a = ToyGD(rounds=5, batch_size=3).run(problem, seed=7)
    b = ToyGD(rounds=5, batch_size=3).run(problem, seed=7)
    c = ToyGD(rounds=5, batch_size=3).run(problem, seed=8)
    assert np.array_equal(a.theta, b.theta)
    assert not np.allclose(a.theta, c.theta)


def test_callback_receives_results_and_stops(problem):
    seen = []

    def cb(res):
        assert isinstance(res, RoundResult)
        seen.append((res.round, res["theta"].copy(), res.messages_up))
        if res.round == 4:
            raise StopIteration

    tr = ToyGD(rounds=50).run(problem, callback=cb)
    assert [s[0] for s in seen] == [1, 2, 3, 4]
    assert tr.rounds == 4 and tr.info["stopped_by_callback"] is True
    assert np.array_equal(seen[-1][1], tr.theta[-1])
    assert tr.messages_up.shape == (4,)


def test_callback_with_verifier_interface(problem):
    """drflmodel.verification.Verifier is a callback: it stops once the error meets tol."""
    from drflmodel.solution import Solution
    x_star = ToyGD(rounds=3000, step_size=0.1).run(problem).theta[-1]
    sol = Solution(theta=x_star, weights=None, client_losses=None, value=0.0, lower_bound=0.0,
                   upper_bound=0.0, status="optimal", certificate="test")
    ver = dm.Verifier(sol, tol=1e-4, error_metric="dist_theta", problem=problem)
    tr = ToyGD(rounds=3000, step_size=0.1).run(problem, callback=ver)
    assert tr.info["stopped_by_callback"] and ver.stopped_at == tr.rounds
    assert np.linalg.norm(tr.theta[-1] - x_star) <= 1e-4 < np.linalg.norm(tr.theta[-2] - x_star)


def test_trace_roundtrip_npz_and_json(problem, tmp_path):
    tr = ToyGD(rounds=6).run(problem, seed=3)
    path = tmp_path / "trace.npz"
    tr.save(path)
    back = Trace.load(path)
    for k in ("theta", "weights", "messages_up", "floats_up", "messages_down", "floats_down", "round_time"):
        assert np.array_equal(getattr(back, k), getattr(tr, k)), k
    assert np.array_equal(back.iterates["grad_norm"], tr.iterates["grad_norm"])
    assert back.solver == "ToyGD" and back.params == tr.params and back.expected_rate == "linear"
    assert back.info["seed"] == 3
    d = json.loads(json.dumps(tr.to_dict()))
    again = Trace.from_dict(d)
    assert np.allclose(again.theta, tr.theta, rtol=0, atol=0)
    assert np.array_equal(again.floats_up, tr.floats_up)
    assert again.info["comm_schedule"] == tr.info["comm_schedule"]


def test_trace_objective_values(problem):
    problem.objective = lambda th: float(np.mean(problem.client_losses(th)))
    tr = ToyGD(rounds=3).run(problem)
    vals = tr.objective_values()
    assert vals.shape == (4,) and vals[-1] < vals[0]


@pytest.mark.parametrize("kwargs, match", [
    ({"rounds": 0}, "rounds"), ({"rounds": -3}, "rounds"), ({"rounds": 2.5}, "rounds"),
    ({"step_size": 0.0}, "step_size"), ({"step_size": -1.0}, "step_size"),
    ({"step_size": float("nan")}, "step_size"), ({"batch_size": 0}, None)])
def test_bad_hyperparameters(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        if "batch_size" in kwargs:
            from drflmodel.solvers._base import check_batch_size
            check_batch_size(kwargs["batch_size"])
        else:
            ToyGD(**kwargs)


def test_bad_run_arguments(problem):
    with pytest.raises(InvalidParameterError, match="seed"):
        ToyGD().run(problem, seed=-1)
    with pytest.raises(InvalidParameterError, match="callback"):
        ToyGD().run(problem, callback=3)
    with pytest.raises(InvalidDataError, match="theta0"):
        ToyGD().run(problem, theta0=np.zeros(problem.dim + 1))
    with pytest.raises(InvalidDataError, match="theta0"):
        ToyGD().run(problem, theta0=np.full(problem.dim, np.nan))


def test_wrong_problem_family(problem):
    class NeedsDRO(ToyGD):
        problem_types = ("drflmodel.problems.minmax.dro:FederatedDRO",)

    with pytest.raises(InvalidParameterError, match="FederatedDRO"):
        NeedsDRO().run(problem)


def test_scatter_and_partial_participation_counts(problem):
    rt = ClientRuntime(problem, np.random.default_rng(0))
    n, d = problem.n_clients, problem.dim
    rt.begin_round()
    rows = rt.scatter("personal", np.ones((n, d + 1)))
    assert rows.shape == (n, d + 1)
    rt.broadcast("model", np.zeros(d), receivers=2)
    up = rt.upload(senders=[0, 2], update=np.ones((2, d)))
    assert np.allclose(rt.aggregate(np.array([0.5, 0.5]), up), np.ones(d))
    with pytest.raises(ValueError):
        rt.scatter("bad", np.ones((n + 1, d)))
    with pytest.raises(ValueError):
        rt.upload(senders=[0, 2], update=np.ones((3, d)))
    row = rt.end_round()
    assert row["messages_down"] == n + 2 and row["floats_down"] == n * (d + 1) + 2 * d
    assert row["messages_up"] == 2 and row["floats_up"] == 2 * d
    assert rt.view(1).index == 1 and rt.view(1).size == problem.client_view(1).size


def test_client_generators_are_per_client_streams_computable_from_seed_and_index():
    """Client i's generator depends only on (seed, i): a client on another engine (a Flower
    ClientApp holding partition i) rebuilds it alone and draws the simulator's rows."""
    from drflmodel.solvers import client_generators

    gens = client_generators(11, 4)
    alone = np.random.default_rng(np.random.SeedSequence(11, spawn_key=(2,)))
    assert np.array_equal(gens[2].random(5), alone.random(5))
    # independent of the server's stream and of each other
    server = np.random.default_rng(11).random(5)
    draws = [g.random(5) for g in client_generators(11, 4)]
    assert all(not np.allclose(server, d) for d in draws)
    assert not np.allclose(draws[0], draws[1])


def test_vectorized_minibatch_gradients_equal_each_clients_own_draws():
    """The simulator's batched minibatch gradients (one generator per client) equal what each
    client computes alone from its ClientView with its own generator, row for row."""
    from drflmodel.solvers import client_generators

    prob = Problem(_federation(n=4, d=3), dm.losses.Squared(), l2=0.1)
    theta = np.array([0.3, -1.0, 0.5])
    batched = prob.objectives.minibatch_gradients(theta, 7, client_generators(3, 4))
    gens = client_generators(3, 4)
    alone = np.array([prob.client_view(i).minibatch_gradient(theta, 7, seed=gens[i]) for i in range(4)])
    assert np.allclose(batched, alone, rtol=1e-13, atol=1e-13)
