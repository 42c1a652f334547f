"""The ported algorithms on Flower's own simulation engine (Ray): one Flower session (one Ray
start-up, ~8 s) runs one algorithm of each family -- Scaff-PD (DRO, minibatch), Scaff-PD-IA
(relative fairness), rFedFair (FAFL), fair VFL (vertical, one supernode per party) -- plus DRFA
and FedAvg, each equal to its simulator run.
While the session is live, every socket the run's processes listen on is listed: all are on the
loopback interface. Afterwards no Flower or Ray process is left."""

import os

import numpy as np
import pytest

from drflmodel import flower as dmf
from drflmodel.errors import InvalidParameterError
from drflmodel.flower._net import descendants, is_loopback, listening_sockets
from drflmodel.solvers import DRFA, FairVFL, FedAvg, RFedFair, ScaffPD, ScaffPDIA

from .conftest import assert_no_flower_processes

ROUNDS = 3


@pytest.fixture(scope="module")
def session(dro, relative, fafl, cvar, erm, vertical):
    sockets = []

    def list_sockets(res):
        if res.round == 1:
            sockets.extend(listening_sockets(descendants(os.getpid())))

    runs = {
        "dro": dmf.FlowerRun(dro, ScaffPD(rounds=ROUNDS, local_steps=3, batch_size=5), seed=4,
                             callback=list_sockets),
        "relative": dmf.FlowerRun(relative, ScaffPDIA(rounds=ROUNDS, schedule="constant", step_size=0.05,
                                                      dual_step=0.05, local_steps=3), seed=4),
        "fafl": dmf.FlowerRun(fafl, RFedFair(mu=0.5, rounds=ROUNDS, local_steps=3), seed=4),
        "drfa": dmf.FlowerRun(cvar, DRFA(rounds=ROUNDS, local_steps=3, batch_size=5), seed=4),
        "fedavg": dmf.FlowerRun(erm, FedAvg(rounds=ROUNDS, local_steps=3), seed=4),
        "vertical": dmf.FlowerRun(vertical, FairVFL(rounds=ROUNDS, preset="lagrangian", local_steps=2), seed=4),
    }
    for run in runs.values():
        # the session ends when the last round's replies arrive (an event); an exchange that takes
        # 10 minutes is a hang, not load (Ray's start alone takes ~8 s idle, a minute or more loaded)
        run.options["timeout"] = 600.0
    try:
        dmf.run_many(list(runs.values()), engine="ray")
    finally:
        assert_no_flower_processes()
    return runs, sockets


@pytest.mark.parametrize("family", ["dro", "relative", "fafl", "drfa", "fedavg", "vertical"])
def test_ray_engine_reproduces_the_simulator(session, family):
    runs, _ = session
    run = runs[family]
    sim = run.solver.run(run.problem, seed=run.seed)
    gaps = dmf.compare_traces(sim, run.trace)
    assert gaps["theta"] <= 1e-10 and (gaps["weights"] is None or gaps["weights"] <= 1e-10), gaps
    assert gaps["iterates"] <= 1e-10 and gaps["communication"], gaps
    assert gaps["comm_schedule"] or family == "vertical", gaps      # vertical: same totals, other order
    assert run.trace.info["partial_participation"] == [] and run.trace.rounds == ROUNDS
    assert np.all(run.trace.round_time > 0)


def test_loopback_check():
    assert all(map(is_loopback, ["127.0.0.1", "::1", "::ffff:127.0.0.1", "127.0.0.2"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.5", "::ffff:10.0.0.5"]))


def test_every_listener_of_a_live_ray_run_is_on_loopback(session):
    _, sockets = session
    names = {s["name"] for s in sockets}
    assert sockets and any(n.startswith(("gcs_server", "raylet")) for n in names), sockets
    outside = [s for s in sockets if not s["loopback"]]
    assert not outside, f"listening beyond 127.0.0.1: {outside}"


@pytest.mark.slow
def test_ray_engine_refuses_the_wrong_number_of_supernodes(dro):
    """The ServerApp's error (raised before any round) comes out of Flower's simulation engine."""
    with pytest.raises(InvalidParameterError, match="5 Flower supernodes are connected but the federation has 4 clients"):
        dmf.run(dro, ScaffPD(rounds=2), engine="ray", num_supernodes=5)
    assert_no_flower_processes()
