"""Tests of the `drflmodel` command: help, config validation (one-line errors), solve/verify."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from drflmodel._config import ConfigError, load_config
from drflmodel.cli import build_parser, main

GOOD = """
[data]
source = "synthetic_regression"
options = { n_clients = 3, dim = 3, samples = 20, seed = 0 }

[loss]
name = "squared"

[problem]
family = "dro"
options = { l2 = 0.1 }
weights = { name = "simplex" }
"""


def _write(tmp_path, text, name="cfg.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("command", [[], ["tour"], ["solve"], ["verify"]])
def test_help_for_every_command(command, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(command + ["--help"])
    assert exc.value.code == 0
    assert "usage: drflmodel" in capsys.readouterr().out


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('name = "squared"', 'name = "squared"\ncolor = "red"'), "unknown key 'loss.color'"),
    (GOOD.replace('family = "dro"', "family = 3"), "'problem.family' must be a string"),
    (GOOD.replace('family = "dro"', 'family = "gan"'), "'problem.family' must be one of"),
    (GOOD.replace("[loss]\nname = \"squared\"", ""), "missing table [loss]"),
    (GOOD + "\n[extra]\nx = 1\n", "unknown table [extra]"),
    (GOOD.replace('source = "synthetic_regression"', 'source = "npz"\npath = "nowhere.npz"'),
     "'data.path': file not found"),
    (GOOD.replace('source = "synthetic_regression"', 'source = "npz"'), "missing key 'data.path'"),
    (GOOD.replace("options = { l2 = 0.1 }", "options = 0.1"), "'problem.options' must be a table"),
    ("this is = not toml [", "not valid TOML"),
])
def test_bad_configs_give_one_line_errors(tmp_path, text, message):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_config_file(tmp_path, capsys):
    code = main(["solve", str(tmp_path / "absent.toml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("drflmodel: error: config file not found")
    assert err.count("\n") == 1


def test_verify_needs_solver_table(tmp_path):
    with pytest.raises(ConfigError, match=r"missing table \[solver\]"):
        load_config(_write(tmp_path, GOOD), need_solver=True)


def test_npz_source_is_read(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {f"X{k}": rng.normal(size=(6, 2)) for k in range(2)}
    arrays.update({f"y{k}": rng.normal(size=6) for k in range(2)})
    np.savez(tmp_path / "clients.npz", **arrays)
    cfg = load_config(_write(tmp_path, GOOD.replace(
        'source = "synthetic_regression"\noptions = { n_clients = 3, dim = 3, samples = 20, seed = 0 }',
        'source = "npz"\npath = "clients.npz"')))
    from drflmodel._config import _federation
    fed = _federation(cfg["data"])
    assert fed.n_clients == 2 and fed.dim == 2
    np.testing.assert_array_equal(fed.clients[1].X, arrays["X1"])


def test_console_script_module_runs():
    out = subprocess.run([sys.executable, "-m", "drflmodel.cli", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "tour" in out.stdout


# ------------------------------------------------------------------ newcomer frictions (issue 25)
def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"drflmodel {version('drflmodel')}"


VERIFY = GOOD.replace('weights = { name = "simplex" }', 'weights = { name = "chi_square", rho = 0.5 }') + """
[solver]
name = "ScaffPD"
options = { rounds = 800, local_steps = 5 }
tol = 1e-8
"""


def test_verify_prints_the_verdict_and_writes_the_json_to_a_file(tmp_path, monkeypatch, capsys):
    cfg = _write(tmp_path, VERIFY, "dro.toml")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["verify", str(cfg)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("optimal:") and "PASSED: ScaffPD vs dro" in out
    # the report goes next to the configuration, not into the working directory (issue 43)
    assert "theory: linear, factor" in out and out.rstrip().endswith(f"wrote {tmp_path / 'dro.verify.json'}")
    assert len(out) < 5000 and err == "" and not (work / "dro.verify.json").exists()
    report = json.loads((tmp_path / "dro.verify.json").read_text())["report"]
    assert report["passed"] and report["diagnosis"]["theory"]["kind"] == "linear"
    # --json: the JSON alone on standard output, the verdict on standard error
    assert main(["verify", str(cfg), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["report"]["passed"] and "PASSED" in err


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('rho = 0.5', 'rho = "0.5"'), "'problem.weights.rho': rho must be a real number"),
    (lambda t: t.replace('rho = 0.5', 'rho = -1.0'), "'problem.weights.rho': rho must lie in"),
    (lambda t: t.replace("l2 = 0.1", "l2 = -1"), "'problem.options.l2': l2 must lie in"),
    (lambda t: t.replace("rounds = 800", 'rounds = "x"'), "'solver.options.rounds': rounds must be an integer"),
    (lambda t: t.replace("n_clients = 3", "n_clients = 0"), "'data.options.n_clients': n_clients must"),
    (lambda t: t.replace("tol = 1e-8", 'tol = 1e-8\nverdict = "fast"'), "'solver.verdict' must be one of tol, rate"),
    (lambda t: t.replace("tol = 1e-8", "tol = 1e-8\nrate_margin = 1.5"), "'solver.rate_margin' must lie in [0, 1)"),
    (lambda t: t.replace("tol = 1e-8", 'tol = 1e-8\nexpected_rate = "fast"'), "'solver.expected_rate' must be one of"),
    (lambda t: t.replace("tol = 1e-8", "tol = -1e-8"), "'solver.tol' must be positive"),
    # issue 43: TOML keys, not Python's keyword-argument text
    (lambda t: t.replace("l2 = 0.1", "l2 = 0.1, lam = 1"),
     "unknown key 'problem.options.lam' for family = \"dro\" (allowed: l2, penalize_intercept)"),
    (lambda t: t.replace('family = "dro"', 'family = "fafl"').replace(
        'weights = { name = "chi_square", rho = 0.5 }', ""),
     "missing key 'problem.options.alpha' (required by family = \"fafl\")"),
    (lambda t: t.replace("rho = 0.5", "rho = 0.5, eta = 1"),
     "unknown key 'problem.weights.eta' for name = \"chi_square\" (allowed: name, rho)"),
    (lambda t: t.replace(", rho = 0.5", ""), "missing key 'problem.weights.rho' (required by name = \"chi_square\")"),
    (lambda t: t.replace("local_steps = 5", "local_step = 5"), "unknown key 'solver.options.local_step' for name = \"ScaffPD\""),
    (lambda t: t.replace("seed = 0 }", "seed = 0, clients = 2 }"), "unknown key 'data.options.clients' for source ="),
    (lambda t: t.replace("[problem]", '[solve]\nmethod = "newtn"\n\n[problem]'),
     "'solve.method' must be one of auto, block_newton, hessian_free, sqp, hessian_sqp, active_set, conic, level_bundle (the routes of "
     "family = \"dro\"); got 'newtn'"),
    (lambda t: t.replace("[problem]", "[solve]\ngap_tol = 0\n\n[problem]"), "'solve.gap_tol' must be a positive number"),
    (lambda t: t.replace("[problem]", '[solve]\nsolver = "nope"\n\n[problem]'), "'solve.solver': unknown solver 'nope'"),
    (lambda t: t.replace("[problem]", '[solve]\nmethod = "sqp"\noptions = { steps = 3 }\n\n[problem]'),
     "'solve.options': unknown option(s) 'steps' for method 'sqp'; valid options: max_steps, tol"),
    (lambda t: t.replace('family = "dro"', 'family = "dro"\nA = { name = "simplex" }'),
     "'problem.A' is not used with family = \"dro\" (its weight-set keys are weights)"),
])
def test_argument_errors_name_the_toml_key(tmp_path, capsys, edit, message):
    cfg = _write(tmp_path, edit(VERIFY))
    assert main(["verify", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("drflmodel: error: ") and message in err and err.count("\n") == 1, err


def test_the_solve_table_and_its_flags_choose_the_route(tmp_path, capsys):
    """[solve] method/gap_tol reach Problem.solve; --method and --gap-tol override them, and an error
    about a flag names the flag. The forced routes agree with each other (independent certificates)."""
    table = GOOD.replace("[problem]", '[solve]\nmethod = "conic"\ngap_tol = 1e-7\n\n[problem]')
    cfg = _write(tmp_path, table)
    out = tmp_path / "conic.json"
    assert main(["solve", str(cfg), "--out", str(out)]) == 0
    conic = json.loads(out.read_text())["solution"]
    assert conic["info"]["method"] == "conic" and conic["status"] == "optimal"
    assert main(["solve", str(cfg), "--method", "sqp", "--gap-tol", "1e-9", "--out", str(out)]) == 0
    sqp = json.loads(out.read_text())["solution"]
    assert sqp["info"]["method"] == "sqp" and sqp["status"] == "optimal"
    assert sqp["upper_bound"] - sqp["lower_bound"] <= 1e-9 * max(1.0, abs(sqp["upper_bound"]))
    assert abs(sqp["value"] - conic["value"]) <= 1e-6 * max(1.0, abs(conic["value"]))
    capsys.readouterr()
    assert main(["solve", str(cfg), "--method", "simplex"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("drflmodel: error: '--method' (solve.method) must be one of auto, ") and "got 'simplex'" in err
    assert main(["solve", str(cfg), "--gap-tol", "-1"]) == 2
    assert "'--gap-tol' (solve.gap_tol) must be a positive number; got -1.0" in capsys.readouterr().err
