"""dmf.graded / dmf.answering: a Flower app (examples/flower_sklearn, Flower's scikit-learn quickstart,
its data loaded with Flower Datasets from an offline copy of hitorilabs/iris) graded without editing it,
live, against the federated oracle computed on the same supernodes from the same partitions
(dmf.FlowerDatasets). Independent references: the centralized oracle of dm.from_sklearn on the pooled
training rows the app's own load_data returns, and FedAvg's first round recomputed with scikit-learn
directly."""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, Context, MetricRecord, RecordDict
from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import Bulyan, FedAvg, FedMedian, FedTrimmedAvg, Krum, MultiKrum

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.flower.client import strategy_client_app
from drflmodel.flower.grid import LocalGrid

pytest.importorskip("sklearn")
APP = Path(__file__).resolve().parents[2] / "examples" / "flower_sklearn"
CONFIG = {"num-server-rounds": 6, "penalty": "l2", "min-nodes": 3, "trace-out": "fedavg.npz"}


@pytest.fixture(autouse=True)
def _quiet(flower_logs_at_warning):
    """Flower's logs at WARNING in every test of this file (the conftest's fixture)."""


@pytest.fixture()
def quickstart(monkeypatch, offline_iris):
    """The example app's modules, imported fresh (graded.py registers handlers on the app objects),
    in a working directory holding the offline hitorilabs/iris."""
    monkeypatch.syspath_prepend(str(APP))
    for name in [m for m in sys.modules if m == "graded" or m.startswith("sklearnexample")]:
        del sys.modules[name]
    yield importlib.import_module("graded"), importlib.import_module("sklearnexample.task")
    for name in [m for m in sys.modules if m == "graded" or m.startswith("sklearnexample")]:
        del sys.modules[name]


def _serve(server, client, n, config):
    with LocalGrid(client, n, run_config=config) as grid:
        server(grid, Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(),
                             run_config=config))


def _pooled(task, n):
    """The training rows the app's own load_data gives each partition (X_train, y_train, ...)."""
    parts = [task.load_data(i, n) for i in range(n)]
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    clients = np.concatenate([np.full(len(p[1]), i) for i, p in enumerate(parts)])
    return parts, X, y, clients


def _model(task):
    return task.create_log_reg_and_instantiate_parameters("l2")


def test_the_sklearn_quickstart_is_graded_live_against_the_federated_oracle(quickstart, monkeypatch):
    graded, task = quickstart
    # SAGA draws its samples from numpy's global generator unless seeded: seed each client's epoch so
    # that round 1 can be recomputed below (the only change to the app, and not to what it computes)
    client_module = sys.modules["sklearnexample.client_app"]
    seeded = lambda penalty: _model(task).set_params(random_state=0)      # noqa: E731
    monkeypatch.setattr(client_module, "create_log_reg_and_instantiate_parameters", seeded)
    _serve(graded.server, graded.client, 3, CONFIG)
    app = graded.server
    sol, rep, trace = app.solution, app.report, app.trace
    # the federated oracle is the centralized one of the pooled training rows
    parts, X, y, clients = _pooled(task, 3)
    central = dm.from_sklearn(_model(task), X, y, clients=clients).problem.solve(method="sqp")
    assert sol.status == central.status == "optimal"
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-8 * abs(central.upper_bound)
    assert abs(sol.lower_bound - central.lower_bound) <= 1e-8 * abs(central.upper_bound)
    # every round recorded (0..R), its objective measured from the clients' values
    assert len(rep.rows) == CONFIG["num-server-rounds"] + 1 and trace.theta.shape == (7, 15)
    assert np.allclose(trace.theta[0], 0.0)
    prob, pmap = dm.from_sklearn(_model(task), X, y, clients=clients)
    for row, theta in zip(rep.rows, trace.theta):
        assert np.isclose(row["objective"], prob.objective(theta), rtol=1e-12)
    # round 1 = FedAvg of the three one-step fits from zero, recomputed with scikit-learn itself
    fits = []
    for Xtr, ytr, _, _ in parts:
        model = seeded("l2")
        with pytest.warns(Warning):
            model.fit(Xtr, ytr)
        fits.append((len(ytr), pmap.to_theta(task.get_model_params(model))))
    first = sum(n * t for n, t in fits) / sum(n for n, _ in fits)
    np.testing.assert_allclose(trace.theta[1], first, atol=1e-12)
    # participation: every client every round; the per-round value queries are in the ledger
    assert trace.info["partial_participation"] == []
    assert trace.info["federated_ledger"]["queries"]["values"]["exchanges"] >= CONFIG["num-server-rounds"] + 1
    # the saved trace grades offline (clients gone) to the same rows
    offline = dmf.grade("fedavg.npz")
    assert [r["objective"] for r in offline.rows] == [r["objective"] for r in rep.rows]
    assert [r["dist_theta"] for r in offline.rows] == pytest.approx([r["dist_theta"] for r in rep.rows], abs=1e-12)
    assert offline.passed is False and "exceeds tol" in offline.reasons[0]      # 6 rounds of one-step fits


def test_grading_at_the_end_asks_every_rounds_values_in_one_exchange(quickstart):
    graded, task = quickstart
    server = dmf.graded(graded.server_app.app, estimator=_model(task), live=False, progress=False)
    # the supernodes' default policy answers one point per value query: grading every round at the
    # end asks num-server-rounds + 1 at once, so the clients allow that many
    from drflmodel.client_oracle import QueryPolicy

    fresh = importlib.reload(graded.client_app)        # the app's ClientApp before graded.py added handlers
    client = dmf.answering(fresh.app, estimator=graded.model, rows=graded.rows, classes=task.UNIQUE_LABELS,
                           policy=QueryPolicy(points_per_values=CONFIG["num-server-rounds"] + 1))
    _serve(server, client, 3, CONFIG)
    live_values = server.trace.info["federated_ledger"]["queries"]["values"]["exchanges"]
    oracle_values = server.solution.info["federated"]["queries"].get("values", {"exchanges": 0})["exchanges"]
    assert live_values == oracle_values + 1
    parts, X, y, clients = _pooled(task, 3)
    prob, _ = dm.from_sklearn(_model(task), X, y, clients=clients)
    for row, theta in zip(server.report.rows, server.trace.theta):
        assert np.isclose(row["objective"], prob.objective(theta), rtol=1e-12)


def test_the_apps_own_evaluate_fn_is_composed(erm):
    """A main() that passes its own evaluate_fn: Flower's result holds both metric records."""
    results = []
    app = ServerApp()

    @app.main()
    def main(grid, context):
        strategy = FedAvg(min_available_nodes=4, min_train_nodes=4, min_evaluate_nodes=4)
        results.append(strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(erm.dim)]), num_rounds=3,
                                      evaluate_fn=lambda r, arrays: MetricRecord({"mine": float(r)})))

    client = dmf.answering(strategy_client_app(erm, step_size=0.05), erm)
    server = dmf.graded(app, oracle=lambda fed: dm.FederatedDRO(fed, erm.loss, erm.weights, l2=erm.l2), progress=False)
    _serve(server, client, 4, {})
    metrics = results[0].evaluate_metrics_serverapp
    assert set(metrics) == {0, 1, 2, 3}
    assert metrics[3]["mine"] == 3.0 and "rel_gap" in metrics[3] and "dist_theta" in metrics[3]
    assert server.solution.info["federated"]["transport"] == "flower"


def test_grading_against_a_centralized_solution(erm, erm_solution):
    app = ServerApp()

    @app.main()
    def main(grid, context):
        FedAvg(min_available_nodes=4, min_train_nodes=4).start(
            grid=grid, initial_arrays=ArrayRecord([np.zeros(erm.dim)]), num_rounds=4)

    server = dmf.graded(app, oracle=erm, solution=erm_solution, progress=False)
    _serve(server, strategy_client_app(erm, step_size=0.05), 4, {})
    assert server.solution is erm_solution and len(server.report.rows) == 5
    assert "federated" not in server.solution.info


def test_what_graded_refuses(erm):
    from flwr.server import ServerAppComponents, ServerConfig

    legacy = ServerApp(server_fn=lambda ctx: ServerAppComponents(config=ServerConfig(num_rounds=1)))
    with pytest.raises(dm.InvalidParameterError, match="server_fn"):
        dmf.graded(legacy, oracle=erm)
    app = ServerApp()

    @app.main()
    def main(grid, context):
        pass                                                   # starts no strategy

    with pytest.raises(dm.InvalidParameterError, match="exactly one of oracle"):
        dmf.graded(app)
    server = dmf.graded(app, oracle=erm, solution=erm.solve(), progress=False)
    with pytest.raises(dm.InvalidParameterError, match="started no Message-API strategy"):
        _serve(server, strategy_client_app(erm, step_size=0.05), 4, {})


def _one_strategy_app(strategy, dim, rounds=3):
    app = ServerApp()

    @app.main()
    def main(grid, context):
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(dim)]), num_rounds=rounds)

    return app


@pytest.mark.parametrize("make, name", [
    (lambda: FedMedian(min_available_nodes=4, min_train_nodes=4), "FedMedian"),
    (lambda: Krum(min_available_nodes=4, min_train_nodes=4, num_malicious_nodes=1), "Krum"),
    (lambda: MultiKrum(min_available_nodes=4, min_train_nodes=4, num_malicious_nodes=1, num_nodes_to_select=2),
     "MultiKrum"),
    (lambda: FedTrimmedAvg(min_available_nodes=4, min_train_nodes=4, beta=0.25), "FedTrimmedAvg"),
    (lambda: Bulyan(min_available_nodes=4, min_train_nodes=4), "Bulyan")])
def test_robust_aggregators_are_refused_by_name(erm, erm_solution, make, name):
    """A robust aggregator minimizes no objective the oracle computes: refused when it starts, or
    recorded with robust_aggregators="warn" and a caveat on the verdict."""
    server = dmf.graded(_one_strategy_app(make(), erm.dim), oracle=erm, solution=erm_solution, progress=False)
    with pytest.raises(dm.InvalidParameterError, match=rf"graded\(\) does not grade {name}: {name} .*minimizes no "
                                                       r"weighted sum of the clients' objectives"):
        _serve(server, strategy_client_app(erm, step_size=0.05), 4, {})


def test_a_robust_aggregator_recorded_on_request_carries_its_caveat(erm, erm_solution, tmp_path):
    strategy = FedMedian(min_available_nodes=4, min_train_nodes=4)
    server = dmf.graded(_one_strategy_app(strategy, erm.dim), oracle=erm, solution=erm_solution, progress=False,
                        robust_aggregators="warn", trace_out=str(tmp_path / "median.npz"))
    _serve(server, strategy_client_app(erm, step_size=0.05), 4, {})
    caveat = server.report.summary().splitlines()[1]
    assert caveat.startswith("  caveat: FedMedian takes the coordinate-wise median of the client models (Yin, Chen")
    assert "caveat: FedMedian" in dmf.grade(tmp_path / "median.npz").summary()      # offline too
    # a weighted-mean strategy, and a trimmed mean that trims nothing, carry none
    assert dmf.graded(_one_strategy_app(FedAvg(), erm.dim), oracle=erm) is not None
    from drflmodel.flower.app_grading import unmatched_objective
    assert unmatched_objective(FedAvg()) is None and unmatched_objective(FedTrimmedAvg(beta=0.0)) is None
    with pytest.raises(dm.InvalidParameterError, match="robust_aggregators must be one of"):
        dmf.graded(_one_strategy_app(FedAvg(), erm.dim), oracle=erm, robust_aggregators="ignore")


def test_a_supernode_joining_after_the_oracle_is_refused(erm):
    """The oracle covered the supernodes connected when the app started; one more joined before the
    strategy trained: the run is not graded against an oracle of part of the federation."""
    from flwr.app import Context as FlowerContext

    app = ServerApp()

    @app.main()
    def main(grid, context):
        grid.contexts[99] = FlowerContext(run_id=grid.run.run_id, node_id=99, node_config={"partition-id": 2},
                                          state=RecordDict(), run_config={})
        FedAvg(min_available_nodes=4, min_train_nodes=4).start(
            grid=grid, initial_arrays=ArrayRecord([np.zeros(erm.dim)]), num_rounds=1)

    three = dm.FederatedDRO(erm.federation.subset([0, 1, 2]), erm.loss, dm.sets.Simplex(3), l2=erm.l2)
    client = dmf.answering(strategy_client_app(three, step_size=0.05), three)
    server = dmf.graded(app, oracle=lambda fed: dm.FederatedDRO(fed, erm.loss, dm.sets.Simplex(fed.n_clients),
                                                                l2=erm.l2), progress=False)
    with LocalGrid(client, 3) as grid:
        with pytest.raises(dm.InvalidParameterError, match="oracle covers 3 supernodes but 4 are connected"):
            server(grid, Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(),
                                 run_config={}))


def test_the_recorder_refuses_layouts_it_would_have_to_guess(erm, erm_solution):
    rec = dmf.Recorder(erm, erm_solution)
    d = erm.dim
    with pytest.raises(dm.InvalidDataError, match="exactly one 1-D array of P = 5"):
        rec(0, ArrayRecord([np.zeros(d - 1), np.zeros(1)]))           # [coef_, intercept_] concatenated
    with pytest.raises(dm.InvalidDataError, match="one model per client or one 4-class model"):
        rec(0, ArrayRecord([np.zeros((4, d))]))
    iris = dm.datasets.iris(n_clients=3)
    X, y, site = iris.pooled()
    from sklearn.linear_model import LogisticRegression

    prob, pmap = dm.from_sklearn(LogisticRegression(), X[:, 1:], y.astype(int), clients=site)
    rec = dmf.Recorder(prob, None, parameters=pmap)
    with pytest.raises(dm.InvalidDataError, match=r"round 2: coef_ has shape \(4, 3\)"):
        rec(2, ArrayRecord([np.zeros((4, 3)), np.zeros(3)]))
    rec(0, ArrayRecord([np.ones((3, 4)), np.zeros(3)]))                # three classes x four features
    assert rec.thetas[0].shape == (15,)


def test_a_lying_client_is_reported_and_the_run_graded_for_what_needs_no_oracle(erm, tmp_path):
    """Client 1 answers y'y = -1e6 (no rows have that): the federated oracle fails naming it; the app still
    runs, its trace is saved with the fault, and the report says NOT GRADED, why, and what it checked
    without an oracle -- online and offline alike."""
    from drflmodel.client_oracle import Site
    from tests._lying import Lying, edit

    sites = [Site.from_problem(erm, i) for i in range(4)]
    sites[1] = Lying(sites[1], edit("yy", lambda v: -1e6 + 0 * v))
    client = dmf.answering(strategy_client_app(erm, step_size=0.05),
                           lambda context: sites[int(context.node_config["partition-id"])])
    server = dmf.graded(_one_strategy_app(FedAvg(min_available_nodes=4, min_train_nodes=4), erm.dim),
                        oracle=lambda fed: dm.FederatedDRO(fed, erm.loss, erm.weights, l2=erm.l2), progress=False,
                        trace_out=str(tmp_path / "run.npz"))
    _serve(server, client, 4, {})
    fault = server.solution.info["fault"]
    assert server.solution.status == "failed" and server.solution.theta is None
    assert (fault["partition"], fault["query"], fault["kind"], fault["check"]) == (1, "statistics", "rejected",
                                                                                    "statistics")
    assert fault["numbers"]["yy"] == -1e6
    report = server.report
    lines = report.summary().splitlines()
    assert not report.passed and lines[0].startswith("NOT GRADED: ")
    assert ("3 rounds recorded; every model finite; the faulty client (partition 1) took part in training in "
            "3 round(s)") in lines[0]
    assert lines[-1].startswith("  reason: no certified oracle: client 1 failed the 'statistics' query")
    assert "y'y = -1e+06 < 0" in lines[-1]
    assert dmf.grade(tmp_path / "run.npz").summary() == report.summary()          # offline: the same
