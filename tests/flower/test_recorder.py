"""Recorder: Flower's own strategies (FedAvg, FedProx, QFedAvg, FedAdam) graded by the oracle of
the objective they claim to minimize. Independent references: gradient descent on the weighted
ERM computed by hand from client_view, and Flower's own final model (Result.arrays)."""

import gc
import logging

import numpy as np
import pytest
from flwr.app import ArrayRecord
from flwr.serverapp.strategy import FedAdam, FedAvg, FedProx, QFedAvg

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.errors import InvalidParameterError
from drflmodel.flower.client import strategy_client_app
from drflmodel.flower.grid import LocalGrid


@pytest.fixture(autouse=True)
def _quiet_flower():
    """Flower's logs at WARNING; and the test process's heap frozen for the garbage collector:
    Flower's ``ArrayRecord.to_numpy_ndarrays(keep_input=False)`` calls ``gc.collect()`` for every
    reply (QFedAvg: five per round), which costs ~0.06 s each in a test process holding many
    objects (a fresh process pays ~1 ms)."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    gc.freeze()
    yield
    gc.unfreeze()
    logger.setLevel(level)


def _lr(problem):
    return 1.0 / float(np.max(problem.objectives.smoothness()))


def _start(problem, strategy, recorder, rounds, local_steps=1, lr=None, app=None):
    n = problem.n_clients
    app = app or strategy_client_app(problem, step_size=lr or _lr(problem), local_steps=local_steps)
    with LocalGrid(app, n) as grid:
        return strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(problem.dim)]),
                              num_rounds=rounds, evaluate_fn=recorder)


def _full(cls, n, **kw):
    return cls(min_available_nodes=n, min_train_nodes=n, min_evaluate_nodes=n, **kw)


def test_fedavg_one_local_step_is_gradient_descent_on_weighted_erm(erm, erm_solution):
    n, eta = erm.n_clients, _lr(erm)
    rec = dmf.Recorder(erm, erm_solution)
    result = _start(erm, rec.watch(_full(FedAvg, n)), rec, rounds=150)
    tr = rec.trace()
    # independent reference: theta <- theta - eta * sum_i p_i grad f_i(theta), by hand
    p, views = erm.federation.proportions, [erm.client_view(i) for i in range(n)]
    theta, ref = np.zeros(erm.dim), [np.zeros(erm.dim)]
    for _ in range(150):
        theta = theta - eta * sum(p[i] * views[i].gradient(theta) for i in range(n))
        ref.append(theta)
    assert np.abs(tr.theta - np.array(ref)).max() <= 1e-12
    report = rec.report(tol=1e-8)
    assert report.passed, report.summary()
    # live errors: Flower stored what the recorder returned each round
    live = result.evaluate_metrics_serverapp
    assert sorted(live) == list(range(151))
    assert live[150]["dist_theta"] == pytest.approx(report.rows[-1]["dist_theta"], rel=1e-12)
    # who took part, and what crossed (d floats each way per client)
    assert tr.info["partial_participation"] == []
    assert all(row["participants"] == [0, 1, 2, 3] for row in tr.info["participation"])
    assert (tr.messages_up == n).all() and (tr.floats_down == n * erm.dim).all()
    assert tr.solver == "FedAvg" and tr.expected_rate is None


def test_local_steps_make_fedavg_converge_elsewhere(erm, erm_solution):
    """Client drift: with J = 10 local steps FedAvg stops moving at a point whose distance to the
    weighted-ERM optimum is orders of magnitude above its round-to-round change."""
    rec = dmf.Recorder(erm, erm_solution)
    _start(erm, _full(FedAvg, erm.n_clients), rec, rounds=150, local_steps=10, lr=_lr(erm) / 10)
    tr = rec.trace()
    step = np.linalg.norm(tr.theta[-1] - tr.theta[-2])
    dist = np.linalg.norm(tr.theta[-1] - erm_solution.theta)
    assert step < 1e-9 and dist > 1e-3
    assert not rec.report(tol=1e-8).passed


def test_fedprox_and_fedadam_are_recorded_as_flower_ran_them(erm, erm_solution):
    for strategy in (_full(FedProx, erm.n_clients, proximal_mu=0.5),
                     _full(FedAdam, erm.n_clients, eta=0.05)):
        rec = dmf.Recorder(erm, erm_solution)
        result = _start(erm, rec.watch(strategy), rec, rounds=20, local_steps=3, lr=_lr(erm) / 3)
        tr = rec.trace()
        final = np.concatenate([a.ravel() for a in result.arrays.to_numpy_ndarrays()])
        assert np.array_equal(tr.theta[-1], final) and tr.rounds == 20
        assert tr.solver == type(strategy).__name__
        report = rec.report()
        assert report.rows[-1]["dist_theta"] < report.rows[0]["dist_theta"]


def test_fedprox_proximal_term_reaches_the_clients(erm):
    """FedProx sends proximal-mu; a huge mu keeps every local model at the global one."""
    rec = dmf.Recorder(erm)
    _start(erm, _full(FedProx, erm.n_clients, proximal_mu=1e9), rec, rounds=2, local_steps=5,
           lr=1e-10)
    assert np.abs(rec.trace().theta).max() < 1e-8


def test_qfedavg_graded_against_the_qffl_oracle(fed):
    """q-FedAvg (J = 1, client step 1/L) against FederatedDRO with the QFFL set: Flower's step rule
    with F_i^q weights converges to the q-FFL optimum (up to its +1e-10 in F_i)."""
    q = 1.0
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.QFFL(fed.n_clients, q), l2=0.1)
    sol = prob.solve()
    assert sol.status == "optimal"
    rec = dmf.Recorder(prob, sol)
    lr = _lr(prob)
    _start(prob, rec.watch(_full(QFedAvg, fed.n_clients, client_learning_rate=lr, q=q)), rec, rounds=100)
    report = rec.report(tol=1e-6, error_metric="rel_gap")
    assert report.passed, report.summary()


def test_partial_participation_is_reported_not_a_crash(erm, erm_solution):
    """FedAvg sampling half the clients: every round lists its 2 participants, verify grades the
    run and reports the partial participation; a client that raises is recorded with its reason."""
    rec = dmf.Recorder(erm, erm_solution)
    _start(erm, rec.watch(FedAvg(fraction_train=0.5, min_train_nodes=2, min_available_nodes=4,
                                 fraction_evaluate=0.5, min_evaluate_nodes=2)), rec, rounds=6)
    tr = rec.trace()
    assert tr.info["partial_participation"] == [1, 2, 3, 4, 5, 6]
    assert all(len(row["participants"]) == 2 for row in tr.info["participation"])
    report = dm.verify(tr, erm_solution)
    assert report.extra["partial_participation"] == [1, 2, 3, 4, 5, 6]

    app = strategy_client_app(erm, step_size=_lr(erm))
    calls = []

    def flaky(msg, context):                  # client 3 fails on its second training message
        if context.node_config["partition-id"] == 3:
            calls.append(msg.metadata.message_type)
            if calls.count("train") == 2 and msg.metadata.message_type == "train":
                raise RuntimeError("out of memory")
        return app(msg, context)

    rec = dmf.Recorder(erm, erm_solution)
    _start(erm, rec.watch(_full(FedAvg, 4, fraction_evaluate=0.0)), rec, rounds=3, app=flaky)
    row = rec.trace().info["participation"][1]
    assert row["participants"] == [0, 1, 2] and len(row["missing"]) == 1
    assert "out of memory" in next(iter(row["missing"].values()))
    assert rec.trace().info["partial_participation"] == [2]


def test_recorder_errors(erm):
    rec = dmf.Recorder(erm)
    with pytest.raises(InvalidParameterError, match="nothing recorded yet"):
        rec.trace()
    rec(0, ArrayRecord([np.zeros(erm.dim)]))
    rec(2, ArrayRecord([np.zeros(erm.dim)]))
    with pytest.raises(InvalidParameterError, match=r"no global model recorded for round\(s\) \[1\]"):
        rec.trace()
    with pytest.raises(InvalidParameterError, match="needs a certified solution"):
        rec.report()
