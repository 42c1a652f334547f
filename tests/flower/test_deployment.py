"""The real deployment (examples/flower_app): separate processes on 127.0.0.1 -- flower-superlink,
one flower-supernode per client, flwr run -- always stopped, also when a test fails.

Default suite (fast): the Flower App configuration passes Flower's own validator and its apps run
on the in-process grid; a SuperLink with two supernodes starts on loopback only and stops without
leaving a process. Slow (``-m slow``): 3 rounds of Scaff-PD across processes, verified against the
oracle and equal to the simulator.

Waits end on events -- the SuperLink accepting connections, every process listening, a process
exiting, the run returning -- never on a guess of how long a loaded machine needs. Each wait also
has a hang guard (:data:`HANG_GUARD`, 10 minutes) that only stops a test that would otherwise
never end."""

import importlib
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.cli.config_utils import load_and_validate

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel._config import build_problem, build_solver, load_config
from drflmodel.flower._net import listening_sockets
from drflmodel.flower.deploy import LocalDeployment
from drflmodel.flower.grid import LocalGrid
from drflmodel.solvers import Trace

from .conftest import assert_no_flower_processes

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
#: seconds after which a wait is a hang, not slowness (the waits below end on events)
HANG_GUARD = 600.0


@pytest.fixture(scope="module")
def app_modules():
    sys.path.insert(0, str(APP))
    try:
        yield (importlib.import_module("drflmodel_app.server_app"),
               importlib.import_module("drflmodel_app.client_app"))
    finally:
        sys.path.remove(str(APP))
        for name in [m for m in sys.modules if m.split(".")[0] == "drflmodel_app"]:
            del sys.modules[name]


def _simulated(path=APP / "problem.toml"):
    cfg = load_config(path, need_solver=True)
    problem = build_problem(cfg)
    return problem, build_solver(cfg).run(problem, seed=cfg["solver"]["seed"])


def test_the_flower_app_is_valid_and_its_apps_run(app_modules, tmp_path):
    config, warnings = load_and_validate(APP / "pyproject.toml", check_module=False)
    assert warnings == [], warnings
    run_config = dict(config["tool"]["flwr"]["app"]["config"])
    assert run_config["problem-config"] == "problem.toml"
    server, client = app_modules
    out = tmp_path / "trace.npz"
    with LocalGrid(client.app, 3, run_config=run_config) as grid:
        context = Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(),
                          run_config={**run_config, "trace-out": str(out)})
        server.app(grid, context)
    problem, sim = _simulated()
    flw = Trace.load(out)
    gaps = dmf.compare_traces(sim, flw)
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["communication"], gaps


def test_a_local_deployment_listens_on_loopback_only_and_stops(tmp_path):
    dep = LocalDeployment(2, workdir=tmp_path, start_timeout=HANG_GUARD)
    try:
        dep.start()
        deadline = time.monotonic() + HANG_GUARD
        sockets = []
        # the supernodes' own listeners come up after start: wait for all three processes to
        # listen, or for one of them to exit (a failure to report), whichever happens first
        while len({s["pid"] for s in sockets}) < 3 and time.monotonic() < deadline:
            if any(proc.poll() is not None for proc in dep.processes):
                break
            time.sleep(0.2)
            sockets = listening_sockets(dep.pids())
        exited = [proc.args[0] for proc in dep.processes if proc.poll() is not None]
        assert not exited, (exited, dep.log("superlink"), dep.log("supernode0"))
        assert len({s["pid"] for s in sockets}) >= 3, (sockets, dep.log("supernode0"))
        assert all(s["loopback"] for s in sockets), sockets
    finally:
        dep.stop()
    assert dep.pids() == set()
    assert_no_flower_processes()


@pytest.mark.slow
def test_scaffpd_across_processes_verified_against_the_oracle(tmp_path):
    """3 rounds of Scaff-PD on flower-superlink + 2 flower-supernode + flwr run (the example app with
    its problem on 2 clients). Slow: about 40 s on 2 idle cores, several minutes on a loaded
    machine, because Flower 1.41's supernode polls the SuperLink every 3 s when idle and starts a
    new ClientApp process (Python, Flower, CVXPY imports) for every message; the test waits for the
    run to end, with the 10-minute hang guard as its only bound."""
    problem_toml = tmp_path / "problem.toml"
    problem_toml.write_text((APP / "problem.toml").read_text().replace("n_clients = 3", "n_clients = 2"))
    out = tmp_path / "trace.npz"
    dep = LocalDeployment(2, workdir=tmp_path, start_timeout=HANG_GUARD)
    sockets = []
    try:
        dep.start()
        result = dep.run(APP, {"problem-config": str(problem_toml), "trace-out": str(out)}, timeout=HANG_GUARD)
        sockets = listening_sockets(dep.pids())
        assert result.returncode == 0, dep.log("flwr-run")
    finally:
        dep.stop()
    assert dep.pids() == set()
    assert_no_flower_processes()
    assert sockets and all(s["loopback"] for s in sockets), sockets
    problem, sim = _simulated(problem_toml)
    flw = Trace.load(out)
    assert flw.rounds == 3 and flw.solver == "ScaffPD" and problem.n_clients == 2
    gaps = dmf.compare_traces(sim, flw)
    assert gaps["theta"] <= 1e-10 and gaps["weights"] <= 1e-10 and gaps["communication"], gaps
    # graded by the certified oracle: every round moves strictly closer to theta*
    report = dm.verify(flw, problem.solve(), problem=problem)
    dist = [row["dist_theta"] for row in report.rows]
    assert np.all(np.diff(dist) < 0), dist


def test_a_lying_client_leaves_the_run_recorded_and_not_graded(app_modules, tmp_path, monkeypatch):
    """Client 0 of the Flower App (squared loss) answers y'y = -1e6: the federated oracle fails naming it, the solver still
    runs, and the trace and the JSON report say NOT GRADED with the fault (no verdict on an oracle that lied)."""
    import json

    from drflmodel.client_oracle import Site

    honest = Site.answer

    def answer(self, query, arrays=None, options=None):
        out = honest(self, query, arrays, options)
        if "yy" in out and self.name == first:
            out = {**out, "yy": np.array([-1e6])}
        return out

    problem, sim = _simulated()
    first = problem.federation.clients[0].name
    monkeypatch.setattr(Site, "answer", answer)
    config, _ = load_and_validate(APP / "pyproject.toml", check_module=False)
    run_config = dict(config["tool"]["flwr"]["app"]["config"])
    server, client = app_modules
    out, report_out = tmp_path / "trace.npz", tmp_path / "report.json"
    with LocalGrid(client.app, 3, run_config=run_config) as grid:
        context = Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(),
                          run_config={**run_config, "trace-out": str(out), "report-out": str(report_out)})
        server.app(grid, context)
    flw = Trace.load(out)
    assert dmf.compare_traces(sim, flw)["theta"] <= 1e-10               # the run itself is unchanged
    fault = flw.info["oracle_fault"]
    assert (fault["partition"], fault["query"], fault["kind"], fault["check"]) == (0, "statistics", "rejected",
                                                                                    "statistics")
    report = json.loads(report_out.read_text())
    assert report["graded"] is False and report["passed"] is False
    assert report["reasons"][0].startswith("no certified oracle: client 0 failed")
    assert dmf.grade(out).summary().startswith("NOT GRADED: ")
