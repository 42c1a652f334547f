"""Shared fixtures of the Flower tests: small problems of every ported family, and the check that
no Flower or Ray process outlives a test."""

import logging
import os
import time

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.flower._hygiene import network_hygiene
from drflmodel.flower._net import descendants

N = 4
_FLOWER_NAMES = ("ray::", "raylet", "gcs_server", "flower-", "flwr", "dashboard", "log_monitor")


@pytest.fixture(scope="session", autouse=True)
def _hygiene():
    """FLWR_TELEMETRY_ENABLED=0, RAY_USAGE_STATS_ENABLED=0, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0;
    and, when the Flower tests end, no Flower or Ray process of theirs is left."""
    network_hygiene()
    yield
    assert_no_flower_processes()


def flower_processes() -> list[str]:
    """Live (non-zombie) Flower/Ray processes below this test process."""
    out = []
    for pid in descendants(os.getpid()) - {os.getpid()}:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z" and any(k in cmd for k in _FLOWER_NAMES):
            out.append(f"{pid}: {cmd[:120]}")
    return out


def assert_no_flower_processes(wait: float = 10.0) -> None:
    deadline = time.monotonic() + wait
    while (left := flower_processes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"Flower/Ray processes left running: {left}"


@pytest.fixture(scope="session")
def fed():
    return dm.datasets.synthetic_regression(n_clients=N, dim=5, samples=[20, 30, 40, 50], seed=1,
                                            heterogeneity=1.0)


@pytest.fixture(scope="session")
def dro(fed):
    """Scaff-PD's family: chi^2-penalized weights (SC-SC schedule, linear rate)."""
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(N, 0.1), l2=0.1)


@pytest.fixture(scope="session")
def cvar(fed):
    """DRFA's min-max problem over a CVaR set."""
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(N, 0.5), l2=0.1)


@pytest.fixture(scope="session")
def erm(fed):
    """Weighted ERM (weights p_i = N_i / N): FedAvg's objective."""
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=0.1)


@pytest.fixture(scope="session")
def relative(fed):
    """Scaff-PD-IA's family: the integrated set with negative weights."""
    return dm.RelativeFairness(fed, dm.losses.Squared(), A=dm.sets.CVaR(N, 0.4), B=dm.sets.CVaR(N, 0.4),
                               phi=0.1, l2=0.1)


@pytest.fixture(scope="session")
def fafl():
    """rFedFair's family (logistic, HCVaR with alpha = 0.5)."""
    cfed = dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[30, 40, 50, 60],
                                                heterogeneity=1.0, seed=0)
    return dm.FairnessAwareFL(cfed, dm.losses.Logistic(), alpha=0.5)


@pytest.fixture(scope="session")
def vertical():
    """Fair vertical FL: 4 parties (party 0 active), logistic loss, linear DEO constraint."""
    vf = dm.datasets.synthetic_vertical(n_samples=120, dim=6, n_parties=N, group_shift=1.5, seed=0)
    return dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=0.1)


@pytest.fixture(scope="session")
def dro_solution(dro):
    sol = dro.solve()
    assert sol.status == "optimal"
    return sol


@pytest.fixture(scope="session")
def erm_solution(erm):
    sol = erm.solve()
    assert sol.status == "optimal"
    return sol


def rounds_differ(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a.theta) - np.asarray(b.theta))))


# ------------------------------------------------------------------------------ Flower Datasets offline
def write_offline_iris(folder) -> dict:
    """The offline stand-in of ``hitorilabs/iris`` (examples/flower_sklearn/offline_iris.py)."""
    import importlib.util
    from pathlib import Path

    pytest.importorskip("datasets")
    path = Path(__file__).resolve().parents[2] / "examples" / "flower_sklearn" / "offline_iris.py"
    spec = importlib.util.spec_from_file_location("offline_iris", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_offline_iris(folder)


IRIS_FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


@pytest.fixture()
def offline_iris(tmp_path, monkeypatch):
    """The working directory holds the offline ``hitorilabs/iris`` (:func:`write_offline_iris`) and
    Hugging Face is offline, its cache in ``tmp_path``."""
    pytest.importorskip("flwr_datasets")
    env = write_offline_iris(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-home" / "datasets")
    monkeypatch.chdir(tmp_path)
    datasets.disable_progress_bars()
    return tmp_path


@pytest.fixture
def flower_logs_at_warning():
    """Flower's logger at WARNING for one test, its level restored after."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)
