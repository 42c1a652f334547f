"""A real client: logistic regression trained by a JAX client (float32 arrays, jax.grad, full-batch or
minibatch SGD) under Flower's own FedProx, FedAvg and FedAdam strategies with sampled clients, recorded
by drflmodel's Recorder and graded by dm.landing.conformance. A correct client is never "elsewhere";
a client that ignores mu, or runs another step than the one it is sent, is named."""

import numpy as np
import pytest

import drflmodel as dm

pytest.importorskip("flwr")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp.strategy import FedAdagrad, FedAdam, FedAvg, FedAvgM, FedProx, FedYogi  # noqa: E402

from drflmodel import flower as dmf  # noqa: E402

from .test_flower_float32_client import L2, J, problem  # noqa: E402,F401  (the numpy float32 client's problem)


def _loss(w, w_t, X, y, mu):
    """The client's objective in JAX: mean logistic loss + (l2/2)||w||^2 + (mu/2)||w - w_t||^2 (FedProx)."""
    return (jnp.mean(jnp.logaddexp(0.0, -y * (X @ w))) + 0.5 * L2 * jnp.dot(w, w)
            + 0.5 * mu * jnp.sum((w - w_t) ** 2))


_grad = jax.jit(jax.grad(_loss))


def _train(X, y, received, mu, lr, steps, batch, seed):
    """``steps`` SGD steps in float32 from the received model (batch ``None``: full batch; else fresh
    minibatches drawn with replacement by JAX's PRNG)."""
    X, y = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    w_t = jnp.asarray(received, jnp.float32)
    w, key = w_t, jax.random.PRNGKey(seed)
    for _ in range(steps):
        if batch is None:
            g = _grad(w, w_t, X, y, mu)
        else:
            key, sub = jax.random.split(key)
            rows = jax.random.randint(sub, (batch,), 0, X.shape[0])
            g = _grad(w, w_t, X[rows], y[rows], mu)
        w = w - jnp.float32(lr) * g
    return np.asarray(w)


def _app(prob, faulty=None, bug=None):
    clients = prob.federation.clients
    app = ClientApp()

    @app.train()
    def fit(msg: Message, context: Context) -> Message:
        i = int(context.node_config["partition-id"])
        config = msg.content["config"]
        received = msg.content["arrays"].to_numpy_ndarrays()[0]
        mu = float(config["proximal-mu"]) if "proximal-mu" in config else 0.0
        lr = float(config["lr"])
        batch = int(config["batch-size"]) if "batch-size" in config else None
        if i == faulty and bug == "mu ignored":
            mu = 0.0
        elif i == faulty and bug == "lr fixed":              # keeps the first round's step
            lr = float(config["lr0"])
        elif i == faulty and bug == "lr halved":
            lr = 0.5 * lr
        w = _train(clients[i].X, clients[i].y, received, mu, lr, int(config["local-steps"]), batch,
                   seed=1000 * i + int(config.get("server-round", 0)))
        assert w.dtype == np.float32
        metrics = MetricRecord({"num-examples": int(clients[i].X.shape[0]), "partition-id": i})
        return Message(RecordDict({"arrays": ArrayRecord([w]), "metrics": metrics}), reply_to=msg)

    return app


def _run(prob, strategy, rounds, config, faulty=None, bug=None):
    rec = dmf.Recorder(prob)
    strategy = rec.watch(strategy)
    with dmf.LocalGrid(_app(prob, faulty, bug), prob.n_clients) as grid:
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(prob.dim, np.float32)]), num_rounds=rounds,
                       evaluate_fn=rec, train_config=ConfigRecord(config))
    return rec.trace()


def _lr(prob, mu=0.0):
    return 0.5 / float(np.max(prob.objectives.smoothness()) + mu)


def test_jax_client_under_flowers_fedprox_sampled_lands_and_a_client_ignoring_mu_is_named(problem):
    prob, sol = problem
    n = prob.n_clients
    config = {"lr": _lr(prob, 1.0), "local-steps": J}
    tr = _run(prob, FedProx(proximal_mu=1.0, fraction_train=0.5, min_available_nodes=n, min_train_nodes=2,
                            fraction_evaluate=0.0), 60, config)
    assert tr.info["dtypes"] == ["float32"] and tr.info["partial_participation"]
    assert tr.info["strategy_settings"]["fraction_train"] == 0.5 and tr.info["strategy_settings"]["proximal_mu"] == 1.0
    rep = dm.landing.conformance(tr, prob, solution=sol)
    assert rep.verdict == "landed", rep.text                   # within the sampling region
    assert rep.extra["precision"] == "float32" and rep.extra["sampled_rounds"] > 0
    assert rep.extra["faulty_clients"] == []                  # each JAX float32 update = its own local steps
    bad = _run(prob, FedProx(proximal_mu=1.0, min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0),
               3, config, faulty=2, bug="mu ignored")
    rep = dm.landing.conformance(bad, prob, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved"
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [2]
    assert "client 2 is not running FedProx" in rep.text and "ignore mu" in rep.text


_SERVERS = {"FedAdam": lambda **kw: FedAdam(eta=0.05, beta_1=0.9, beta_2=0.99, tau=1e-3, **kw),
            "FedYogi": lambda **kw: FedYogi(eta=0.05, tau=1e-3, **kw),
            "FedAdagrad": lambda **kw: FedAdagrad(eta=0.05, tau=1e-3, **kw),
            "FedAvgM": lambda **kw: FedAvgM(server_learning_rate=1.0, server_momentum=0.5, **kw)}


@pytest.mark.parametrize("name", sorted(_SERVERS))
def test_jax_client_under_flowers_server_optimizers_is_certified_per_round(problem, name):
    prob, sol = problem
    n = prob.n_clients
    lr = _lr(prob)
    config = {"lr": lr, "lr0": lr, "local-steps": J}
    tr = _run(prob, _SERVERS[name](min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0), 40, config)
    if name == "FedAdam":
        assert {k: tr.info["strategy_settings"][k] for k in ("eta", "beta_1", "tau")} == {"eta": 0.05, "beta_1": 0.9,
                                                                                          "tau": 1e-3}
    rep = dm.landing.conformance(tr, prob, name, solution=sol)
    assert rep.verdict in ("landed", "not_landed"), rep.text
    cert = rep.extra["server_certificate"]
    assert len(cert["rounds"]) == 40
    # every bound holds: the recorded client updates certify the distance of each round's model
    d = np.array([row["dist_fixed_point"] for row in rep.rows])
    assert np.all(d[cert["rounds"]] <= np.array(cert["bound"]))
    # one client halves the step it is sent: named, whatever the server optimizer does with the updates
    bad = _run(prob, _SERVERS[name](min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0), 4, config,
               faulty=1, bug="lr halved")
    rep = dm.landing.conformance(bad, prob, name, solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved"
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [1] and f"client 1 is not running {name}" in rep.text


class _DecayingFedAvg(FedAvg):
    """FedAvg sending the local step eta_0 / (1 + r / 10) in round r (a per-round schedule)."""

    def configure_train(self, server_round, arrays, config, grid):
        config["lr"] = float(config["lr0"]) / (1.0 + server_round / 10.0)
        return super().configure_train(server_round, arrays, config, grid)


def test_jax_client_with_a_decaying_learning_rate_is_graded_against_its_schedule(problem):
    prob, sol = problem
    n = prob.n_clients
    lr0 = _lr(prob)
    config = {"lr": lr0, "lr0": lr0, "local-steps": J}
    tr = _run(prob, _DecayingFedAvg(min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0), 30, config)
    sent = [row["train_config"]["lr"] for row in tr.info["participation"]]
    assert np.allclose(sent, [lr0 / (1 + r / 10) for r in range(1, 31)])
    rep = dm.landing.conformance(tr, prob, "FedAvg", solution=sol)
    assert rep.verdict in ("landed", "not_landed"), rep.text
    assert rep.extra["schedule"]["distinct"] == 30 and rep.extra["faulty_clients"] == []
    assert rep.config["step_size"] == pytest.approx(sent[-1])
    bad = _run(prob, _DecayingFedAvg(min_available_nodes=n, min_train_nodes=n, fraction_evaluate=0.0), 30, config,
               faulty=3, bug="lr fixed")
    rep = dm.landing.conformance(bad, prob, "FedAvg", solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved"
    assert [f["client"] for f in rep.extra["faulty_clients"]] == [3]
    bad.iterates.pop("client_models")           # without per-client records: the schedule's per-round bound
    rep = dm.landing.conformance(bad, prob, "FedAvg", solution=sol)
    assert rep.verdict == "elsewhere" and rep.evidence == "proved" and "exceeds the bound" in rep.text, rep.text


def test_jax_minibatch_client_under_flowers_fedavg_sampled(problem):
    prob, sol = problem
    n = prob.n_clients
    tr = _run(prob, FedAvg(fraction_train=0.5, min_available_nodes=n, min_train_nodes=2, fraction_evaluate=0.0),
              60, {"lr": _lr(prob), "local-steps": J, "batch-size": 8})
    rep = dm.landing.conformance(tr, prob, "FedAvg", solution=sol, batch_sampling="fresh")
    assert rep.config["batch_size"] == 8 and rep.verdict in ("landed", "not_landed"), rep.text
