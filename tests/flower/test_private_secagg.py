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

