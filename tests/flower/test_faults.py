"""Bad input and faults on Flower: wrong number of supernodes or partitions (clear errors before any
round), a client that raises or does not reply (the run goes on as Flower does and the trace says
who took part), solvers or options that are not ported, and the Flower messages themselves."""

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.errors import InvalidParameterError
from drflmodel.flower.client import client_app
from drflmodel.flower.grid import LocalGrid
from drflmodel.flower.server import run_on_grid
from drflmodel.solvers import ADLPMM, DRFA, ScaffPD


# ------------------------------------------------------------------ supernodes vs clients
@pytest.mark.parametrize("nodes", [3, 5])
def test_number_of_supernodes_must_equal_clients(dro, nodes):
    calls = []
    app = client_app(dro)
    with LocalGrid(lambda m, c: calls.append(m) or app(m, c), nodes) as grid:
        with pytest.raises(InvalidParameterError, match=r"one supernode per client") as err:
            run_on_grid(grid, dro, ScaffPD(rounds=3), connect_timeout=0.05)
    assert str(dro.n_clients) in str(err.value)
    assert calls == []                       # raised before any message was sent


def test_partition_ids_are_checked(dro):
    app = client_app(dro)
    n = dro.n_clients
    bad = [{"partition-id": i, "num-partitions": n} for i in (0, 1, 2, 2)]
    with LocalGrid(app, n, node_configs=bad) as grid:
        with pytest.raises(InvalidParameterError, match="both hold partition-id 2"):
            run_on_grid(grid, dro, ScaffPD(rounds=3))
    out_of_range = [{"partition-id": i, "num-partitions": n} for i in (0, 1, 2, 9)]
    with LocalGrid(app, n, node_configs=out_of_range) as grid:
        with pytest.raises(InvalidParameterError, match=r"partition-id'\] = 9 must lie in \[0, 3\]"):
            run_on_grid(grid, dro, ScaffPD(rounds=3))
    wrong_total = [{"partition-id": i, "num-partitions": 7} for i in range(n)]
    with LocalGrid(app, n, node_configs=wrong_total) as grid:
        with pytest.raises(InvalidParameterError, match="num-partitions'\\] = 7 but the federation has 4"):
            run_on_grid(grid, dro, ScaffPD(rounds=3))
    missing = [{} for _ in range(n)]
    with LocalGrid(app, n, node_configs=missing) as grid:
        with pytest.raises(InvalidParameterError, match="--node-config 'partition-id=I num-partitions=4'"):
            run_on_grid(grid, dro, ScaffPD(rounds=3))


# ------------------------------------------------------------------ failing clients
def _failing(app: ClientApp, partition: int, rounds: set, op_prefix: str = "train."):
    """``app`` whose client ``partition`` raises in the given rounds (message group id)."""
    def call(msg: Message, context: Context):
        if (context.node_config["partition-id"] == partition and msg.metadata.group_id in rounds
                and msg.metadata.message_type.startswith(op_prefix)):
            raise RuntimeError("disk full")
        return app(msg, context)
    return call


def test_a_failing_client_is_recorded_and_the_run_goes_on(dro, dro_solution):
    solver = ScaffPD(rounds=8, local_steps=3)
    app = _failing(client_app(dro), partition=1, rounds={"3", "4"})
    with LocalGrid(app, dro.n_clients) as grid:
        tr = run_on_grid(grid, dro, solver, seed=0)
    part = tr.info["participation"]
    assert tr.info["partial_participation"] == tr.info["failed_rounds"] == [3, 4]
    assert part[2]["participants"] == [0, 2, 3] and "disk full" in part[2]["missing"][1]
    assert part[4]["participants"] == [0, 1, 2, 3] and part[4]["missing"] == {}
    assert tr.expected_rate is None                     # no theorem covers a partial round
    assert tr.messages_up[2] < tr.messages_up[0] and tr.rounds == 8
    assert np.all(np.isfinite(tr.theta)) and np.all(np.isfinite(tr.weights))
    # rounds 1-2 are the simulator's; the failure changes the run from round 3 on
    sim = solver.run(dro, seed=0)
    assert np.abs(sim.theta[:3] - tr.theta[:3]).max() <= 1e-12
    assert np.abs(sim.theta[3] - tr.theta[3]).max() > 1e-8
    # verify grades it and reports the partial participation instead of crashing
    report = dm.verify(tr, dro_solution, tol=1e-6)
    assert report.extra["partial_participation"] == [3, 4]
    assert "partial participation" in report.summary()


def test_the_partial_round_uses_the_participants_with_flowers_rule(fed):
    """With client 2 failing in round 2 of FedAvg (J = 1, exact), the server's step is
    sum_{i != 2} p_i g_i scaled to the full mass, computed here by hand from client_view."""
    erm = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)
    solver = dm.solvers.FedAvg(rounds=2, local_steps=1, step_size=0.05)
    app = _failing(client_app(erm), partition=2, rounds={"2"})
    with LocalGrid(app, erm.n_clients) as grid:
        tr = run_on_grid(grid, erm, solver)
    p, views = fed.proportions, [erm.client_view(i) for i in range(erm.n_clients)]
    theta1 = -0.05 * sum(p[i] * views[i].gradient(np.zeros(erm.dim)) for i in range(erm.n_clients))
    keep = [0, 1, 3]
    theta2 = theta1 - 0.05 * sum(p[i] * views[i].gradient(theta1) for i in keep) / p[keep].sum()
    assert np.allclose(tr.theta[1:], [theta1, theta2], rtol=0, atol=1e-14)


def test_a_client_failing_before_it_is_identified_stops_the_run(dro):
    """The first message identifies the nodes (their replies carry the partition ids); a client
    failing on it cannot be attributed, so the run stops with its reason before any update."""
    app = _failing(client_app(dro), partition=3, rounds={"1"})
    with LocalGrid(app, dro.n_clients) as grid:
        with pytest.raises(InvalidParameterError, match="failed before the run started: .*disk full"):
            run_on_grid(grid, dro, ScaffPD(rounds=3))


class _SilentGrid(LocalGrid):
    """A grid whose node for ``partition`` never replies in round ``group``."""

    def __init__(self, *a, partition, group, **kw):
        super().__init__(*a, **kw)
        self.silent = next(n for n, c in self.contexts.items() if c.node_config["partition-id"] == partition)
        self.group, self.dropped = group, set()

    def push_messages(self, messages):
        messages = list(messages)
        ids = super().push_messages(messages)
        for m, i in zip(messages, ids):
            if m.metadata.dst_node_id == self.silent and m.metadata.group_id == self.group:
                self.dropped.add(i)
        return ids

    def pull_messages(self, message_ids):
        return super().pull_messages([m for m in message_ids if m not in self.dropped])


def test_a_client_that_does_not_reply_times_out(cvar):
    # LocalGrid answers every pushed message before push_messages returns, so the three replies
    # are there at the first pull whatever the machine's load; only the silent node waits 0.05 s
    with _SilentGrid(client_app(cvar), cvar.n_clients, partition=0, group="2") as grid:
        tr = run_on_grid(grid, cvar, DRFA(rounds=3, local_steps=2), timeout=0.05, poll_interval=0.01)
    assert tr.info["partial_participation"] == [2]
    assert tr.info["participation"][1]["missing"] == {0: "no reply within 0.05 s"}
    assert np.all(np.isfinite(tr.weights)) and cvar.weights.contains(tr.weights[-1], tol=1e-8)


# ------------------------------------------------------------------ what is not ported
def test_unported_solver_and_options_are_refused(dro):
    with pytest.raises(InvalidParameterError, match="ADLPMM is not ported to Flower; ported: DRFA, FairVFL"):
        dmf.FlowerRun(dro, ADLPMM(rounds=3))
    with pytest.raises(InvalidParameterError, match="control_variates=False"):
        dmf.FlowerRun(dro, ScaffPD(rounds=3, control_variates=False))
    with pytest.raises(InvalidParameterError, match="seed must be an integer"):
        dmf.run(dro, ScaffPD(rounds=2), seed=None)
    with pytest.raises(InvalidParameterError, match="runs on RelativeFairness"):
        dmf.FlowerRun(dro, dm.solvers.ScaffPDIA(rounds=2))
    with pytest.raises(InvalidParameterError, match="engine"):
        dmf.run(dro, ScaffPD(rounds=2), engine="grpc")


def test_a_solver_option_unknown_to_the_port_is_refused(dro):
    """A future solver option (e.g. added on the simulator) is not silently ignored on Flower."""
    solver = DRFA(rounds=2)
    solver.params["future_option"] = 2
    with pytest.raises(InvalidParameterError, match="does not implement the option.*future_option=2"):
        dmf.FlowerRun(dro, solver)


# ------------------------------------------------------------------ the in-process grid
def test_local_grid_sets_and_restores_flowers_task_identity(dro):
    """LocalGrid relies on flwr.supercore.task_identity (a Flower 1.41 internal; pinned)."""
    before = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    with LocalGrid(client_app(dro), dro.n_clients) as grid:
        assert TaskIdentity.run_id == grid.run.run_id and TaskIdentity.node_id == 1
        node = next(iter(grid.get_node_ids()))
        msg = Message(RecordDict({"config": ConfigRecord({"run": "x", "seed": 0, "n-clients": 4})}),
                      node, "query.nope")
        (reply,) = grid.send_and_receive([msg])
        assert reply.has_error() and "No query function registered with name 'nope'" in reply.error.reason
    assert (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id) == before


def test_messages_cross_the_local_grid_serialized(dro):
    """What a client receives is a deserialized copy (Flower's protobuf), not the server's object."""
    seen = {}

    def app(msg, context):
        seen["array"] = msg.content["payload"]["model"]
        return client_app(dro)(msg, context)

    x = np.linspace(-1, 1, dro.dim)
    record = ArrayRecord({"model": __import__("flwr.app", fromlist=["Array"]).Array(x)})
    with LocalGrid(app, dro.n_clients) as grid:
        node = next(iter(grid.get_node_ids()))
        cfg = ConfigRecord({"run": "r", "seed": 0, "n-clients": dro.n_clients, "batch-size": 0})
        (reply,) = grid.send_and_receive([Message(RecordDict({"payload": record, "config": cfg}), node,
                                                  "train.losses_controls")])
    assert seen["array"] is not record["model"] and np.array_equal(seen["array"].numpy(), x)
    i = grid.contexts[node].node_config["partition-id"]
    got = reply.content["payload"]
    assert np.isclose(got["losses"].numpy()[0], dro.client_view(i).value(x), rtol=0, atol=0)
    assert np.array_equal(got["controls"].numpy(), dro.client_view(i).gradient(x))
