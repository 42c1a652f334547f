"""The README's quickstart code and configuration example must work as printed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_shows_the_two_commands_and_ci_runs_the_test_command():
    bash = "\n".join(_blocks("bash"))
    assert 'python -m pip install -e ".[data,plot]" && drflmodel tour' in bash
    test_cmd = 'python -m pip install -e ".[test]" && python -m pytest -q'
    assert test_cmd in bash
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_cmd in ci.splitlines()


def test_quickstart_runs_and_verifies(capsys):
    (code,) = _blocks("python")
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("optimal:")
    assert "PASSED" in out


def test_readme_multiclass_block_certifies_in_scikit_learns_layout(capsys):
    """The multi-class block runs as printed: both problems certified, scikit-learn's shapes, and the
    unpenalized-intercept optimum is checked here against scipy on the same objective."""
    pytest.importorskip("palmerpenguins")
    from scipy.optimize import minimize

    (code,) = _blocks("python multiclass")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("optimal:") and out[1].startswith("PASSED")
    coef, intercept = scope["coef"], scope["intercept"]
    assert coef.shape == (3, 4) and intercept.shape == (3,)
    prob, sol = scope["prob"], scope["sol"]
    ref = minimize(lambda t: prob.objective(t), np.zeros(prob.dim), method="BFGS", options={"gtol": 1e-10})
    assert sol.lower_bound <= ref.fun + 1e-9 and sol.upper_bound <= ref.fun + 1e-9


def test_readme_config_example_solves_and_verifies(tmp_path):
    from drflmodel._config import build_problem, build_solver, load_config
    from drflmodel.verification import verify

    (toml,) = _blocks("toml")
    cfg_path = tmp_path / "readme.toml"
    cfg_path.write_text(toml)
    cfg = load_config(cfg_path, need_solver=True)
    prob = build_problem(cfg)
    sol = prob.solve()
    assert sol.status == "optimal"
    report = verify(build_solver(cfg).run(prob, seed=0), sol, tol=cfg["solver"]["tol"])
    assert report.passed, report.reasons
