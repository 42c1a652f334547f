"""A real client: numpy clients computing in float32 (what a PyTorch client ships; torch is not in the
test extra, so the client is numpy float32), trained by Flower's own FedProx / FedAvg strategies with
sampled clients, recorded by drflmodel's Recorder and graded (issue 38). A correct run is never
"elsewhere"; a client that ignores mu is named."""

import numpy as np
import pytest

import drflmodel as dm

pytest.importorskip("flwr")
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg, FedProx  # noqa: E402

from drflmodel import flower as dmf  # noqa: E402

L2, J = 0.1, 5


@pytest.fixture(scope="module")
def problem():
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=[40, 60, 50, 70], heterogeneity=1.5,
                                               add_intercept=True, seed=3)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=L2)
    return prob, prob.solve()


def _train32(X, y, received, mu, lr, steps, batch, rng):
    """Local steps in float32 on the logistic loss + (l2/2)||w||^2 + (mu/2)||w - w_t||^2."""
    X, y = X.astype(np.float32), y.astype(np.float32)
    w_t = received.astype(np.float32)
    w = w_t.copy()
    lr, mu, l2 = np.float32(lr), np.float32(mu), np.float32(L2)
    for _ in range(steps):
        rows = np.arange(len(y)) if batch is None else rng.integers(len(y), size=batch)
        z = X[rows] @ w
        g = X[rows].T @ (-y[rows] / (np.float32(1) + np.exp(y[rows] * z))) / np.float32(len(rows)) + l2 * w
        w = w - lr * (g + mu * (w - w_t))
    return w


def _app(prob, faulty=None):
    clients = prob.federation.clients
    app = ClientApp()

    @app.train()
    def fit(msg: Message, context: Context) -> Message:
        i = int(context.node_config["partition-id"])
        config = msg.content["config"]
        received = msg.content["arrays"].to_numpy_ndarrays()[0]
        mu = float(config["proximal-mu"]) if "proximal-mu" in config else 0.0
        batch = int(config["batch-size"]) if "batch-size" in config else None
        rng = np.random.default_rng([i, int(config.get("server-round", 0))])
        w = _train32(clients[i].X, clients[i].y, received, 0.0 if i == faulty else mu, float(config["lr"]),
                     int(config["local-steps"]), batch, rng)
        metrics = MetricRecord({"num-examples": int(clients[i].X.shape[0]), "partition-id": i})
        return Message(RecordDict({"arrays": ArrayRecord([w]), "metrics": metrics}), reply_to=msg)

    return app


def _run(prob, strategy, rounds, config, faulty=None):
    rec = dmf.Recorder(prob)
    strategy = rec.watch(strategy)
    with dmf.LocalGrid(_app(prob, faulty), prob.n_clients) as grid:
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(prob.dim, np.float32)]), num_rounds=rounds,
                       evaluate_fn=rec, train_config=ConfigRecord(config))
    return rec.trace()


def test_float32_sampled_clients_under_flowers_fedprox_and_a_faulty_client_named(problem):
    prob, sol = problem
    n = prob.n_clients
    lr = 0.5 / float(np.max(prob.objectives.smoothness()) + 1.0)
    config = {"lr": lr, "local-steps": J}
    tr = _run(prob, FedProx(proximal_mu=1.0, fraction_train=0.5, min_available_nodes=n, min_train_nodes=2,
                            fraction_evaluate=0.0), 40, config)
    assert tr.info["dtypes"] == ["float32"] and tr.info["partial_participation"]
    rep = dm.landing.conformance(tr, prob, solution=sol)
    assert rep.verdict in ("landed", "not_landed"), rep.text
    assert rep.extra["precision"] == "float32" and rep.extra["sampled_rounds"] > 0
    assert rep.extra["faulty_clients"] == []            # each float32 update matches its own local steps
    bad = _run(prob, FedProx(proximal_mu=1.0, min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0),
               3, config, faulty=2)
    rep = dm.landing.conformance(bad, prob, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved"
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [2]
    assert "client 2 is not running FedProx" in rep.text and "ignore mu" in rep.text


@pytest.mark.slow
def test_float32_minibatch_clients_under_flowers_fedavg(problem):
    prob, sol = problem
    n = prob.n_clients
    lr = 0.5 / float(np.max(prob.objectives.smoothness()))
    tr = _run(prob, FedAvg(fraction_train=0.5, min_available_nodes=n, min_train_nodes=2, fraction_evaluate=0.0),
              60, {"lr": lr, "local-steps": J, "batch-size": 8})
    rep = dm.landing.conformance(tr, prob, "FedAvg", solution=sol)
    assert rep.config["batch_size"] == 8 and rep.verdict in ("landed", "not_landed"), rep.text
    assert "noise region" in rep.text or rep.verdict == "not_landed"


def test_the_recorder_keeps_client_models_within_its_budget(problem, monkeypatch):
    import drflmodel.flower.recorder as recorder

    prob, sol = problem
    n = prob.n_clients
    monkeypatch.setattr(recorder, "CLIENT_MODELS_MAX_FLOATS", 3 * n * prob.dim)     # rounds 0-2 fit
    lr = 0.5 / float(np.max(prob.objectives.smoothness()) + 1.0)
    tr = _run(prob, FedProx(proximal_mu=1.0, min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0),
              4, {"lr": lr, "local-steps": J}, faulty=1)
    assert tr.iterates["client_models"].shape == (3, n, prob.dim)
    assert "later rounds not kept" in tr.info["client_models"]
    rep = dm.landing.conformance(tr, prob, solution=sol)
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [1]
