"""The algorithm variants of issue 14 are reachable from a TOML ``[solver] options`` table: the
option reaches the solver (``params``), the run equals the same solver built in Python, it
differs from the default run (the option took effect), and ``drflmodel verify`` runs it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drflmodel import solvers
from drflmodel._config import ConfigError, build_problem, build_solver, load_config
from drflmodel.cli import main
from drflmodel.errors import InvalidParameterError

def _toml(source, data_options, loss, family, problem_options, weights=None):
    """The [data], [loss] and [problem] tables of a configuration."""
    text = (f'[data]\nsource = "{source}"\noptions = {data_options}\n\n[loss]\nname = "{loss}"\n\n'
            f'[problem]\nfamily = "{family}"\noptions = {problem_options}\n')
    return text + (f"weights = {weights}\n" if weights else "")


DRO = _toml("synthetic_regression", "{ n_clients = 4, dim = 3, samples = 20, seed = 0 }", "squared",
            "dro", "{ l2 = 0.1 }", weights='{ name = "simplex" }')
FAFL = _toml("synthetic_classification", "{ n_clients = 4, dim = 3, samples = 30, seed = 0 }", "logistic",
             "fafl", "{ alpha = 0.5 }")
WASSERSTEIN = _toml("synthetic_classification", "{ n_clients = 3, dim = 2, samples = 12, seed = 0 }", "hinge",
                    "wasserstein", "{ radius = 0.05, kappa = 0.5, norm = 1 }",
                    weights='{ name = "lp_ball", center = "uniform", radius = 0.15, p = 2 }')
DEO = _toml("synthetic_vertical", "{ n_samples = 100, dim = 4, n_parties = 3, seed = 0 }", "logistic",
            "deo", '{ eps = 0.05, fairness_loss = "linear", l2 = 0.1 }')

# (base config, solver, its options in TOML, the variant option and its value)
VARIANTS = [
    (FAFL, "RFedFair", "{ mu = 0.5, rounds = 5, local_steps = 2, step_size = 0.05, batch_size = 4 }",
     "batch_size", 4),
    (DRO, "StochasticAFL", "{ rounds = 10, clients_per_round = 2 }", "clients_per_round", 2),
    (DRO, "DRFA", "{ rounds = 10, local_steps = 2, clients_per_round = 2 }", "clients_per_round", 2),
    (WASSERSTEIN, "ADLPMM", '{ rounds = 3, proximal = "tight", sample_size = 6 }', "sample_size", 6),
    (DEO, "FairVFL", '{ rounds = 10, preset = "paper", passive_steps = 3 }', "passive_steps", 3),
]


def _config(tmp_path, base, name, options, seed=3, extra=""):
    path = tmp_path / "cfg.toml"
    path.write_text(base + f'\n[solver]\nname = "{name}"\noptions = {options}\nseed = {seed}\n{extra}')
    return path


@pytest.mark.parametrize("base, name, options, key, value", VARIANTS, ids=[v[1] for v in VARIANTS])
def test_variant_option_round_trips(tmp_path, base, name, options, key, value):
    cfg = load_config(_config(tmp_path, base, name, options), need_solver=True)
    problem, solver = build_problem(cfg), build_solver(cfg)
    assert type(solver).__name__ == name and solver.params[key] == value
    trace = solver.run(problem, seed=cfg["solver"]["seed"])
    assert trace.params[key] == value and json.loads(trace.to_json())["params"][key] == value
    kwargs = dict(cfg["solver"]["options"])
    same = getattr(solvers, name)(**kwargs).run(problem, seed=3)
    assert np.array_equal(trace.theta, same.theta)
    kwargs.pop(key)
    default = getattr(solvers, name)(**kwargs).run(problem, seed=3)
    assert not np.array_equal(trace.theta, default.theta)


def test_variant_through_the_verify_command(tmp_path):
    path = _config(tmp_path, DRO, "StochasticAFL", '{ rounds = 400, decay = "constant", clients_per_round = 2 }',
                   extra="tol = 0.05\n")
    out = tmp_path / "report.json"
    assert main(["verify", str(path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["config"]["solver"]["options"]["clients_per_round"] == 2
    assert report["report"]["solver"] == "StochasticAFL" and report["report"]["passed"]


def test_bad_variant_values_are_one_line_errors(tmp_path, capsys):
    path = _config(tmp_path, DRO, "DRFA", "{ rounds = 5, clients_per_round = 0 }")
    with pytest.raises(InvalidParameterError, match="clients_per_round"):
        build_solver(load_config(path, need_solver=True))
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("drflmodel: error: 'solver.options.clients_per_round': clients_per_round") and err.count("\n") == 1
    path = _config(tmp_path, DRO, "FedAvg", "{ rounds = 5, clients_per_round = 2 }")
    with pytest.raises(ConfigError, match="unknown key 'solver.options.clients_per_round' for name = \"FedAvg\" \\(allowed: "):
        build_solver(load_config(path, need_solver=True))
