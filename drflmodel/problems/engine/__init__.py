r"""The solve engine shared by every formulation family.

* :mod:`.route` -- the route contract (:class:`~.route.Route`, :class:`~.route.SolveRequest`)
  and :func:`~.route.dispatch`, the one chooser of a route;
* :mod:`.structure` -- :class:`~.structure.Structure`, the summary of a problem the routes decide
  on (computed once per problem);
* :mod:`.queries` -- the client query kinds a route may need (``Route.needs``);
* :mod:`drflmodel._solver_sequence` (below the engine, so the weight sets use it too) -- conic
  solver names and settings, and :class:`~drflmodel._solver_sequence.SolverSequence`, the one loop
  over solvers (with fallback) every CVXPY solve of the package goes through;
* :mod:`.conic` -- :class:`~.conic.ConicRoute`, the default route of every family;
* :mod:`.steps` -- what the routes iterating on step problems share (option checks, the warm
  start, the recovery of a failed step problem);
* :mod:`.memory` -- the refusal, by name and before allocating, of what would not fit in memory
  (each route's own estimate, ``Route.memory``);
* :mod:`.cost` -- the calibrated blocks of the routes' cost estimates (``Route.cost``), by which
  ``method="auto"`` ranks them;
* :mod:`.problem` -- the problem base classes (:class:`~.problem.ProblemBase`, the horizontal
  :class:`~.problem.Problem`, :class:`~.problem.VerticalProblem`, :class:`~.problem.ClientView`).

Submodules are imported on first use (the engine's small modules do not pull in CVXPY).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Route": "route", "SolveRequest": "route", "dispatch": "route",
    "SolverSequence": "drflmodel._solver_sequence", "SOLVER_OPTIONS": "drflmodel._solver_sequence",
    "installed_solvers": "drflmodel._solver_sequence",
    "ConicRoute": "conic",
    "Structure": "structure", "Available": "queries", "check_memory": "memory",
    "ProblemBase": "problem", "Problem": "problem", "VerticalProblem": "problem", "ClientView": "problem",
}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        module = _LAZY[name]
        return getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
