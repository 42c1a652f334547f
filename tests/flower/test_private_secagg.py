"""Private mode's secure sums through Flower's real SecAgg+ (issue 40) on the in-process grid: the
same certificate as the simulated channel, and a client dropping out mid-protocol either leaves a
sum over the others (threshold met, when allowed) or fails naming the node."""

import math

import numpy as np
import pytest

pytest.importorskip("flwr")

import drflmodel as dm  # noqa: E402
from drflmodel.client_oracle.private import private_fixed_weight_solve  # noqa: E402
from drflmodel.errors import InvalidParameterError  # noqa: E402
from flwr.app import Context, RecordDict  # noqa: E402
from drflmodel.flower.grid import LocalGrid  # noqa: E402
from drflmodel.flower import certified_solve  # noqa: E402
from drflmodel.flower.secure import FlowerSecAggChannel, secure_sum_client_app  # noqa: E402


def _channel(grid, **options):
    ctx = Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config={})
    return FlowerSecAggChannel(clients=sorted(grid.get_node_ids()), grid=grid, context=ctx, num_shares=3,
                               reconstruction_threshold=2, **options)


def test_the_certificate_through_flowers_secagg_equals_the_simulated_one():
    fed = dm.datasets.breast_cancer(n_clients=4, seed=0)
    p = fed.sizes / fed.sizes.sum()
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(p, 1.0), l2=0.01)
    with pytest.raises(InvalidParameterError, match="in-process grid"):
        certified_solve(prob, engine="ray", private=True)
    # the public entry point: drflmodel.flower.certified_solve(problem, private=True), one SecAgg+ round a sum
    cert = certified_solve(prob, private=True, num_shares=3, reconstruction_threshold=2)
    simulated = private_fixed_weight_solve(prob)
    assert cert.status == "optimal" and cert.info["private"]["transport"] == "FlowerSecAggChannel"
    assert cert.info["private"]["secure_sums"] == simulated.secure_sums
    # the grid values pass Flower's quantization exactly, so both channels see the same sums
    assert cert.upper_bound == simulated.upper_bound and cert.lower_bound == simulated.lower_bound


class _Vector:
    """A client answering a fixed vector; ``drop_at`` (1-based call number) raises there (a dropout)."""

    def __init__(self, vector, drop_at=None):
        self.vector, self.drop_at, self.calls = np.asarray(vector, float), drop_at, 0

    def contribution(self, query, **params):
        self.calls += 1
        if self.calls == self.drop_at:
            raise RuntimeError("the client went away")
        return self.vector


def test_a_dropout_completes_over_the_others_or_fails_naming_the_node():
    vectors = [np.array([1.0, -2.0, 0.5]) * (i + 1) for i in range(4)]
    clients = [_Vector(v, drop_at=1 if i == 2 else None) for i, v in enumerate(vectors)]
    with LocalGrid(secure_sum_client_app(clients), 4) as grid:
        ch = _channel(grid, require_all=False, stages=1)
        s = ch.sum("x")
        assert s.n_clients == 3
        others = [math.fsum(v[j] for i, v in enumerate(vectors) if i != 2) for j in range(3)]
        assert np.all(np.abs(s.value - others) <= s.error)
    clients = [_Vector(v, drop_at=1 if i == 2 else None) for i, v in enumerate(vectors)]
    with LocalGrid(secure_sum_client_app(clients), 4) as grid:
        ch = _channel(grid)
        node = next(n for n, c in grid.contexts.items() if c.node_config["partition-id"] == 2)
        with pytest.raises(InvalidParameterError, match=rf"node\(s\) \[{node}\] dropped out of the secure sum of 'x'"):
            ch.sum("x")



def _arrays(message):
    """Every numeric array in a message the server pulled (array records, and numbers or
    serialized arrays in config records, as SecAgg+ sends its masked vectors)."""
    from flwr.common import bytes_to_ndarray

    if message.has_error():
        return []
    out = [np.asarray(a.numpy(), float).ravel() for rec in message.content.array_records.values()
           for a in rec.values()]
    for rec in message.content.config_records.values():
        for value in rec.values():
            values = value if isinstance(value, list) else [value]
            numbers = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if numbers and len(numbers) == len(values):
                out.append(np.asarray(numbers, float))
            for x in values:
                if isinstance(x, bytes):
                    try:
                        out.append(np.asarray(bytes_to_ndarray(x), float).ravel())
                    except Exception:  # noqa: BLE001 - keys and ciphertexts are not arrays
                        pass
    return out


def _holds(arrays, vector):
    return any(a.size == vector.size and np.allclose(a, vector, rtol=1e-9, atol=1e-12) for a in arrays)


def test_every_message_the_server_pulls_under_secagg_holds_no_clients_answer():
    """Private sums through Flower's SecAgg+ (the guard on): the ERM value/gradient, the bound terms and a
    CVaR dual sum. Every message the server pulls from the grid is searched for each client's own
    vector -- its term, its grid-rounded answer and Flower's quantized integers of it: none is there
    (the masked vectors are uniform modulo 2^32). Planting one client's answer in a message is found."""
    from drflmodel.client_oracle.private import private_clients
    from drflmodel.client_oracle.private.secure_sum import flower_quantize

    fed = dm.datasets.breast_cancer(n_clients=4, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    clients = private_clients(prob)
    pulled, sent = [], []
    with LocalGrid(secure_sum_client_app(clients), 4) as grid:
        plain_pull = grid.pull_messages

        def pull(ids):
            replies = plain_pull(ids)
            pulled.extend(arr for m in replies for arr in _arrays(m))
            return replies

        grid.pull_messages = pull
        ch = _channel(grid, min_contributors=2)
        theta = np.random.default_rng(0).normal(size=31) * 0.1
        N = int(np.rint(ch.sum("size").value[0]))
        ch.sum("value_gradient", weights=("size", N), theta=theta)
        ch.sum("bound_terms", weights=("size", N), theta=theta)
        losses = [float(c._at(theta).values[0] - c._at(theta).penalty) for c in clients]
        eta = float(np.mean(sorted(losses)[1:3]))                 # two clients above, two below
        s = ch.sum("cvar_gradient", theta=theta, eta=eta, t=1e-2, scale=np.r_[np.ones(4), 25.0, 1.0, 1e-11, 1e-11,
                                                                               np.ones(31)])
        assert s.n_clients == 4
    params = [("size", {}), ("value_gradient", dict(weights=("size", N), theta=theta)),
              ("bound_terms", dict(weights=("size", N), theta=theta)),
              ("cvar_gradient", dict(theta=theta, eta=eta, t=1e-2))]
    for client in clients:
        for query, kw in params:
            raw = np.asarray(client.contribution(query, **kw), float)
            sent.append(raw)
            if raw.size > 1:
                sent.append(np.append(raw, 0.0))
            grid_values = np.append(np.rint((np.clip(raw, -8, 8) + 8) / (16 / 2 ** 22)) * (16 / 2 ** 22) - 8, 0.0)
            sent.append(grid_values)
            sent.append(flower_quantize(grid_values, 8.0, 2 ** 22, np.random.RandomState(0)).astype(float))
    assert sum(a.size == 33 for a in pulled) >= 4 * 2          # the masked [value, gradient, clip flag] were read
    for vector in sent:
        assert not _holds(pulled, vector)
    assert _holds(pulled + [sent[5]], sent[5])                 # the search finds a planted answer


def test_a_dropout_between_the_guards_count_and_the_values_fails_by_name():
    """With the guard, a client answering the count round and gone at the values round: SecAgg+
    completes over the other three, but the count no longer describes that sum, so it fails by name
    (even with require_all=False)."""
    vectors = [np.array([1.0, -2.0, 0.5]) * (i + 1) for i in range(4)]
    clients = [_Vector(v, drop_at=2 if i == 1 else None) for i, v in enumerate(vectors)]
    with LocalGrid(secure_sum_client_app(clients), 4) as grid:
        ch = _channel(grid, require_all=False, stages=1, min_contributors=2)
        with pytest.raises(InvalidParameterError, match=r"4 clients answered the guard's count and 3 the values"):
            ch.sum("x")


@pytest.mark.slow
def test_fafl_with_unequal_caps_through_flowers_secagg_equals_the_simulated_one():
    """FAFL at alpha 0.6 on breast cancer's 4 sites of unequal sizes (per-client caps p_i/alpha): the
    clients built by route_clients carry their cap ratios onto the grid (~1,200 SecAgg+ rounds, ~1 min)."""
    from drflmodel.client_oracle.private import private_solve

    prob = dm.FairnessAwareFL(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(), alpha=0.6, l2=0.01)
    cert = certified_solve(prob, private=True, num_shares=3, reconstruction_threshold=2, reveal_loss_distribution=True)
    simulated = private_solve(prob, reveal_loss_distribution=True)
    assert cert.status == "optimal" and cert.info["private"]["route"] == "hcvar"
    assert cert.info["private"]["transport"] == "FlowerSecAggChannel"
    assert cert.info["private"]["secure_sums"] == simulated.info["private"]["secure_sums"]
    assert cert.upper_bound == simulated.upper_bound and cert.lower_bound == simulated.lower_bound
