"""The one solver sequence: every CVXPY solve of the package goes through
:class:`drflmodel._solver_sequence.SolverSequence`, the solver order is written once, and
CVXPY is asked for its installed solvers once per process."""

from __future__ import annotations

import ast
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel import _solver_sequence as solvers
from drflmodel.problems.engine.route import SolveRequest
from drflmodel._solver_sequence import SolverSequence, failure_reason, solve_with_fallback, solver_order
from drflmodel.errors import SolverFallbackWarning
from tests.clarabel_faults import fail_clarabel

PACKAGE = Path(dm.__file__).parent
HOME = PACKAGE / "_solver_sequence.py"
#: calls ``x.solve(solver=...)`` that are drflmodel problems' own solve (the engine's dispatch), not CVXPY's
DRFLMODEL_SOLVES = {("problems/relative/routes.py", "dro")}


def _calls(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _receiver(func: ast.Attribute) -> str:
    value = func.value
    parts = []
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if isinstance(value, ast.Name):
        parts.append(value.id)
    return ".".join(reversed(parts))


def test_no_module_solves_a_cvxpy_problem_outside_the_sequence():
    """``prob.solve(solver=...)`` appears only in the solver-sequence module."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        for call in _calls(path):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if (name == "solve" and isinstance(func, ast.Attribute) and any(k.arg == "solver" for k in call.keywords)
                    and (rel, _receiver(func)) not in DRFLMODEL_SOLVES):
                offenders.append(f"{rel}:{call.lineno} {_receiver(func)}.solve(solver=...)")
    assert not offenders, offenders


def test_the_solver_order_is_written_once():
    """No module but the engine's solvers module lists the documented order (a literal holding two
    or more of CLARABEL, ECOS, SCS)."""
    offenders = []
    order = {"CLARABEL", "ECOS", "SCS"}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List)):
                names = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if len(names & order) >= 2:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders


def test_cvxpy_is_asked_for_its_solvers_once_per_process(monkeypatch):
    asked = {"n": 0}
    real = cp.installed_solvers

    def counting():
        asked["n"] += 1
        return real()

    monkeypatch.setattr(cp, "installed_solvers", counting)
    solvers._installed.cache_clear()
    try:
        fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=30, seed=0)
        for method in ("conic", "sqp", "bundle"):
            prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1)
            assert prob.solve(method=method, solver=None).status in ("optimal", "optimal_within_gap")
        dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1).solve(solver="ECOS")
        assert asked["n"] == 1
    finally:
        solvers._installed.cache_clear()


def test_the_order_follows_the_cones_and_the_installed_solvers():
    x = cp.Variable(2)
    socp = cp.Problem(cp.Minimize(cp.norm(x - 1)), [x >= 0])
    X = cp.Variable((2, 2), PSD=True)
    sdp = cp.Problem(cp.Minimize(cp.trace(X)), [X[0, 0] >= 1])
    installed = set(cp.installed_solvers())
    assert solver_order(socp) == [s for s in ("CLARABEL", "ECOS", "SCS") if s in installed]
    assert solver_order(sdp) == [s for s in ("CLARABEL", "SCS") if s in installed]


def test_a_sequence_tries_the_next_solver_and_names_every_failure(monkeypatch):
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - np.array([1.0, 2.0]))), [x >= 0])
    fail_clarabel(monkeypatch)
    attempts = []
    used = solve_with_fallback(prob, attempts=attempts)
    assert used == "ECOS" and np.allclose(x.value, [1.0, 2.0], atol=1e-6)
    assert attempts[0]["solver"] == "CLARABEL" and "injected" in attempts[0]["error"]
    assert "CLARABEL: Solver 'CLARABEL' failed (injected)" in failure_reason(attempts[:1])


def test_a_route_s_own_first_solver_falls_back_without_a_warning(monkeypatch):
    x = cp.Variable(1)
    prob = cp.Problem(cp.Minimize(cp.square(x[0] - 3)))
    fail_clarabel(monkeypatch)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverFallbackWarning)
        seq = SolverSequence(first="CLARABEL", prob=prob)
        assert seq.first_optimal(prob) == "ECOS"
    # a solver the user named warns when the sequence moves past it
    seq = SolverSequence(SolveRequest(solver="CLARABEL"), prob=prob)
    with pytest.warns(SolverFallbackWarning, match="requested"):
        assert seq.first_optimal(prob) == "ECOS"
    assert seq.attempts[0]["requested"] and seq.attempts[0]["fallback"]
    # fallback=False: the requested solver alone, and an honest failure
    seq = SolverSequence(SolveRequest(solver="CLARABEL", fallback=False), prob=prob)
    assert seq.first_optimal(prob) is None and seq.order == ["CLARABEL"]
    assert "injected" in seq.failure()


def test_a_failed_conic_solve_says_why(monkeypatch):
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=30, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1)
    fail_clarabel(monkeypatch)
    sol = prob.solve(method="conic", solver="CLARABEL", fallback=False)
    assert sol.status == "failed"
    assert sol.info["reason"].startswith("no solver gave an optimal answer: CLARABEL:")
