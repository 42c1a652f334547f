"""The Flower Datasets bridge: ``Federation.from_partitions`` and ``dmf.FlowerDatasets`` give exactly
the rows Flower Datasets' own partitioners give (checked against ``load_partition`` called directly),
Flower's scikit-learn quickstart (examples/flower_sklearn) is graded through the bridge with its own
data loading on an offline copy of its data set, and that graded run is quiet (< 40 lines on stderr,
in a fresh process as a user runs it)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import flower as dmf

from .conftest import IRIS_FEATURES, write_offline_iris

flwr_datasets = pytest.importorskip("flwr_datasets")
datasets = pytest.importorskip("datasets")
pd = pytest.importorskip("pandas")
from flwr_datasets import FederatedDataset  # noqa: E402
from flwr_datasets.partitioner import DirichletPartitioner, IidPartitioner  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower_sklearn"
QUICKSTART_FEATURES = ["petal_length", "petal_width", "sepal_length", "sepal_width"]     # the app's order


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                         "label": rng.choice(["low", "mid", "high"], size=n, p=[0.5, 0.3, 0.2])})


def _dirichlet(table):
    partitioner = DirichletPartitioner(num_partitions=4, partition_by="label", alpha=0.5, min_partition_size=5,
                                       seed=42)
    partitioner.dataset = datasets.Dataset.from_pandas(table)
    return partitioner


def test_from_partitions_holds_exactly_each_partitions_rows():
    """A Dirichlet partitioner over a local table (Flower Datasets' way with local data): client i holds
    the rows of load_partition(i) of an identical, independently built partitioner, in its order."""
    table = _table()
    fed = dm.Federation.from_partitions(_dirichlet(table), target="label")
    reference = _dirichlet(table)
    assert fed.task == "multiclass" and fed.classes == ["high", "low", "mid"]
    assert fed.names == [f"partition-{i}" for i in range(4)] and fed.table_info["partitioner"] == "DirichletPartitioner"
    assert fed.sizes.sum() == len(table)
    for i, client in enumerate(fed.clients):
        part = reference.load_partition(i).to_pandas()
        np.testing.assert_array_equal(client.X, part[["x1", "x2"]].to_numpy())
        np.testing.assert_array_equal(client.y, [fed.classes.index(v) for v in part["label"]])


def test_a_federated_dataset_split_and_the_rows_an_app_trains_on(offline_iris):
    fds = FederatedDataset(dataset="hitorilabs/iris", partitioners={"train": IidPartitioner(num_partitions=3)})
    whole = dm.Federation.from_partitions(fds, target="species", task="multiclass")
    head = dm.Federation.from_partitions(fds, target="species", take=0.8, task="multiclass")
    split = dm.Federation.from_partitions(
        fds, target="species", task="multiclass", take=lambda p: p.train_test_split(test_size=0.2, seed=42)["train"])
    assert whole.sizes.tolist() == [50, 50, 50] and head.sizes.tolist() == [40, 40, 40]
    assert split.sizes.tolist() == [40, 40, 40]
    for i in range(3):
        part = fds.load_partition(i, "train").to_pandas()
        np.testing.assert_array_equal(head.clients[i].X, part[IRIS_FEATURES].to_numpy()[:40])
        np.testing.assert_array_equal(whole.clients[i].y, part["species"].to_numpy())
        assert not np.array_equal(split.clients[i].X, head.clients[i].X)     # another 80%
    assert head.table_info["take"] == 0.8 and head.table_info["split"] == "train"


def test_flower_datasets_rows_are_the_quickstarts_own_rows(offline_iris, monkeypatch):
    """dmf.FlowerDatasets gives each supernode the (X, y) the app's own load_data trains on."""
    monkeypatch.syspath_prepend(str(APP))
    for name in [m for m in sys.modules if m.startswith("sklearnexample")]:
        del sys.modules[name]
    from sklearnexample import task

    rows = dmf.FlowerDatasets("hitorilabs/iris", IidPartitioner, target="species", features=task.FEATURES, take=0.8)
    for i in range(3):
        X, y = rows.rows(i, 3)
        X_train, y_train, X_test, _ = task.load_data(i, 3)
        np.testing.assert_array_equal(X, X_train)
        np.testing.assert_array_equal(y, y_train)
        assert len(X) + len(X_test) == 50
    fed = rows.federation(3, task="multiclass")
    np.testing.assert_array_equal(fed.clients[2].X, task.load_data(2, 3)[0])
    for name in [m for m in sys.modules if m.startswith("sklearnexample")]:
        del sys.modules[name]


def test_what_the_bridge_refuses(offline_iris):
    with pytest.raises(dm.InvalidParameterError, match="FederatedDataset or Partitioner"):
        dm.Federation.from_partitions(object(), target="y")
    fds = FederatedDataset(dataset="hitorilabs/iris", partitioners={"train": IidPartitioner(num_partitions=3)})
    with pytest.raises(dm.InvalidParameterError, match=r"split must be one of the partitioned splits \['train'\]"):
        dm.Federation.from_partitions(fds, target="species", split="test")
    with pytest.raises(dm.InvalidParameterError, match="take must be"):
        dmf.FlowerDatasets("hitorilabs/iris", IidPartitioner, target="species", take=1.5)
    with pytest.raises(dm.InvalidDataError, match="partition 0 has no rows"):
        dm.Federation.from_partitions(fds, target="species", take=lambda p: p.select([]))


def test_the_graded_quickstart_through_the_bridge_is_quiet_and_certified(tmp_path, monkeypatch):
    """Flower's scikit-learn quickstart, graded through the bridge (graded.py), run in process with
    ``dmf.run_app`` in a fresh interpreter as a user would: the federated oracle is certified and
    equals the centralized one on the rows the app's own load_data gives; nothing at INFO level
    reaches stderr (435 lines before Flower's per-round log was quieted, then 29 drflmodel lines:
    one per round; the returned app holds the oracle and the verdict)."""
    env = {**os.environ, **write_offline_iris(tmp_path), "PYTHONPATH": str(ROOT)}
    script = ("from drflmodel import flower as dmf\n"
              f"app = dmf.run_app({str(APP)!r}, 3, run_config={{'trace-out': 'fedavg.npz'}})\n"
              "print(app.solution.upper_bound, app.solution.status)\n"
              "print(app.report.summary())\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr.splitlines()
    assert not any("INFO" in line for line in err), proc.stderr                      # Flower's and ours
    assert not any("[drflmodel] round" in line or "[ROUND" in line for line in err), proc.stderr
    upper, status = proc.stdout.splitlines()[3].split()      # after the final model's three rows
    assert status == "optimal"
    assert "FedAvg vs dro (25 rounds" in proc.stdout
    # the oracle's optimum is the centralized certified one on the app's own training rows
    for key, value in write_offline_iris(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(APP))
    for name in [m for m in sys.modules if m.startswith("sklearnexample")]:
        del sys.modules[name]
    from sklearnexample import task

    parts = [task.load_data(i, 3) for i in range(3)]
    for name in [m for m in sys.modules if m.startswith("sklearnexample")]:
        del sys.modules[name]
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    clients = np.repeat([0, 1, 2], [len(p[1]) for p in parts])
    central = dm.from_sklearn(task.create_log_reg_and_instantiate_parameters("l2"), X, y, clients=clients)
    sol = central.problem.solve()
    assert abs(float(upper) - sol.upper_bound) <= 1e-8 * abs(sol.upper_bound)
    assert (tmp_path / "fedavg.npz").is_file()


def test_many_partitions_keep_their_order():
    """From 11 partitions on the names are zero-padded, so client i is still partition i."""
    table = _table(n=240)
    partitioner = IidPartitioner(num_partitions=12)
    partitioner.dataset = datasets.Dataset.from_pandas(table)
    fed = dm.Federation.from_partitions(partitioner, target="label")
    assert fed.names == [f"partition-{i:02d}" for i in range(12)]
    for i, client in enumerate(fed.clients):
        np.testing.assert_array_equal(client.X, partitioner.load_partition(i).to_pandas()[["x1", "x2"]].to_numpy())
