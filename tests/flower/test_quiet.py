"""Quiet by default: drflmodel's Flower entry points keep Flower's per-round INFO log off standard
error unless the user configured Flower's logger (or passes ``verbose=True``); Flower's warnings and
drflmodel's own lines always show. The graded quickstart's line count is in test_flower_datasets.py."""

import logging

import numpy as np
import pytest
from flwr.app import ArrayRecord
from flwr.common.logger import log
from flwr.serverapp.strategy import FedAvg

import drflmodel as dm
from drflmodel import flower as dmf
from drflmodel.errors import InvalidParameterError
from drflmodel.flower._logs import flower_logs, user_configured


def _fedavg_run(dro, verbose=None, rounds=3):
    erm = dm.FederatedDRO(dro.federation, dm.losses.Squared(), weights=dm.sets.HCVaR(dro.federation.proportions, 1.0),
                          l2=0.1)
    client = dmf.strategy_client_app(erm, step_size=0.05, local_steps=1)
    with dmf.LocalGrid(client, erm.n_clients, verbose=verbose) as grid:
        FedAvg(min_available_nodes=erm.n_clients, min_train_nodes=erm.n_clients, fraction_evaluate=0.0).start(
            grid=grid, initial_arrays=ArrayRecord([np.zeros(erm.dim)]), num_rounds=rounds)


class _Lines(logging.Handler):
    """What reaches the handlers of Flower's logger (its console handler writes to the standard error
    the test process had when Flower was imported, which pytest's capture does not see)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def take(self) -> str:
        out, self.lines = "\n".join(self.lines), []
        return out


@pytest.fixture()
def flower_defaults():
    """Flower's logger as Flower leaves it at import (DEBUG; console handler INFO), restored after;
    ``.seen`` collects what passes it."""
    logger = logging.getLogger("flwr")
    level, filters = logger.level, list(logger.filters)
    logger.setLevel(logging.DEBUG)
    assert not user_configured(logger)
    logger.seen = _Lines()
    logger.addHandler(logger.seen)
    yield logger
    logger.removeHandler(logger.seen)
    logger.setLevel(level)
    assert logger.filters == filters          # every entry point removed its filter


def test_a_flower_run_on_the_local_grid_is_quiet_by_default(dro, flower_defaults):
    _fedavg_run(dro)
    quiet = flower_defaults.seen.take()
    _fedavg_run(dro, verbose=True)
    loud = flower_defaults.seen.take()
    assert "[ROUND 1/3]" in loud and len(loud.splitlines()) >= 20, loud
    assert "[ROUND" not in quiet and len(quiet.splitlines()) <= 2, quiet


def test_warnings_and_drflmodels_lines_pass_the_filter(flower_defaults):
    with flower_logs():
        log(logging.INFO, "Flower's round line")
        log(logging.INFO, "[drflmodel] round 1: dist_theta=1")
        log(logging.WARNING, "a Flower warning")
    err = flower_defaults.seen.take()
    assert "Flower's round line" not in err
    assert "[drflmodel] round 1" in err and "a Flower warning" in err


def test_a_user_configured_logger_is_left_alone(dro, flower_defaults):
    flower_defaults.setLevel(logging.INFO)                 # the user's choice: see Flower's INFO lines
    assert user_configured(flower_defaults)
    _fedavg_run(dro)
    assert "[ROUND 1/3]" in flower_defaults.seen.take()
    _fedavg_run(dro, verbose=False)                        # ... unless told to be quiet
    assert "[ROUND" not in flower_defaults.seen.take()


def test_run_and_certified_solve_are_quiet(dro, flower_defaults):
    dmf.run(dro, dm.solvers.ScaffPD(rounds=3, local_steps=2), seed=0)
    sol = dmf.certified_solve(dro)
    assert sol.status == "optimal"
    assert flower_defaults.seen.take() == ""


def test_verbose_must_be_a_boolean_or_none():
    with pytest.raises(InvalidParameterError, match="verbose"):
        with flower_logs(verbose="yes"):
            pass
