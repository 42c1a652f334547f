"""Make Clarabel fail, as a machine where it raises ``SolverError("Solver 'CLARABEL' failed")`` would.

``fail_clarabel(monkeypatch)`` replaces CVXPY's Clarabel interface (``CLARABEL.solve_via_data``)
and the native ``clarabel.DefaultSolver`` with versions that raise: every Clarabel call fails, or
(``times``) only that many calls after the first ``skip`` ones. Returns a dict counting the calls
that failed and those that went through.
"""

from __future__ import annotations

import clarabel
import cvxpy as cp
from cvxpy.reductions.solvers.conic_solvers.clarabel_conif import CLARABEL


def fail_clarabel(monkeypatch, times: int | None = None, skip: int = 0, native: bool = True) -> dict:
    calls = {"failed": 0, "passed": 0}
    original, native_solver = CLARABEL.solve_via_data, clarabel.DefaultSolver

    def failing() -> bool:
        if calls["passed"] < skip or (times is not None and calls["failed"] >= times):
            return False
        calls["failed"] += 1
        return True

    def solve_via_data(self, *args, **kwargs):
        if failing():
            raise cp.error.SolverError("Solver 'CLARABEL' failed (injected)")
        calls["passed"] += 1
        with monkeypatch.context() as inner:         # CVXPY's interface builds the native solver
            inner.setattr(clarabel, "DefaultSolver", native_solver)
            return original(self, *args, **kwargs)

    def refuse(*args, **kwargs):
        if failing():
            raise RuntimeError("Clarabel failed (injected)")
        calls["passed"] += 1
        return native_solver(*args, **kwargs)

    monkeypatch.setattr(CLARABEL, "solve_via_data", solve_via_data)
    if native:
        monkeypatch.setattr(clarabel, "DefaultSolver", refuse)
    return calls
