r"""Conic solvers: their names and documented settings, and the solver sequence every CVXPY solve
of the package goes through.

* :func:`check_solver` / :func:`check_solver_options` -- ``solve(solver=..., **options)`` is
  validated before anything runs: an unknown or uninstalled solver, a setting the solver does
  not document, or a value of the wrong type (``max_iters="ten"``) raises
  :class:`~drflmodel.errors.InvalidParameterError` naming the setting and what it takes.
  Settings and their types are read from the solver itself where it exposes them (the attributes
  of ``clarabel.DefaultSettings()``) and otherwise from its documentation (SCS 3 "Settings", the
  ECOS Python interface); other solvers take no options from drflmodel.
* :class:`SolverSequence` -- the one loop over solvers: the user's solver first, then the
  documented order; the documented tolerances of :data:`SOLVER_OPTIONS` for each, the user's
  options on the first. **When the user names a solver and it fails** (an error, a status that is
  not optimal, or -- for a certified route -- an answer the route does not accept), the default
  ``fallback=True`` issues a :class:`~drflmodel.errors.SolverFallbackWarning` and tries the others;
  ``fallback=False`` stops there, so the route returns that solver's own (honest) answer, typically
  ``"failed"`` or ``"optimal_within_gap"``. Either way the user's attempt is recorded in
  ``info["attempts"]`` with ``"requested": True`` (and ``"fallback": True`` when the others ran).

The default route of every family, :class:`~drflmodel.problems.engine.conic.ConicRoute`, runs
``Problem.build()`` through the sequence.

Solver tolerances: Clarabel and ECOS run with absolute/relative gap
and feasibility tolerances of 1e-9; SCS (first-order, the last resort and for comparisons) with
``eps_abs = eps_rel = 1e-7`` and up to 200,000 iterations.
"""

from __future__ import annotations

import functools
import numbers
import os
import sys
import time
import warnings

from ._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
import numpy as np

from .errors import InvalidParameterError, SolverFallbackWarning

__all__ = ["SOLVER_OPTIONS", "SOLVER_DEFAULTS", "DEFAULT_ORDER", "SDP_ORDER", "OK_STATUSES", "INFEASIBLE_STATUSES", "SOLVE_ERRORS",
           "installed_solvers", "solver_order", "has_semidefinite_cones", "check_solver", "solver_settings",
           "solver_setting_types", "check_solver_options", "default_solver", "SolverSequence",
           "solve_with_fallback", "solve_or_raise", "failure_reason"]

#: the documented tolerances per solver
SOLVER_OPTIONS = {
    "CLARABEL": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9, "max_iter": 500},
    "ECOS": {"abstol": 1e-9, "reltol": 1e-9, "feastol": 1e-9, "max_iters": 500},
    "SCS": {"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iters": 200_000},
    "OSQP": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iter": 200_000, "polish": True},
    "HIGHS": {},
}

#: settings documented by solvers that do not expose them programmatically, with their types
#: (``verbose`` is ``solve``'s own argument; ``warm_start`` is CVXPY's): SCS 3 "Settings"; ECOS's
#: Python interface. ``None``: a value drflmodel does not check (SCS's ``linear_solver`` enum).
_DOCUMENTED_SETTINGS = {
    "SCS": {"max_iters": int, "eps_abs": float, "eps_rel": float, "eps_infeas": float, "alpha": float,
            "rho_x": float, "scale": float, "normalize": bool, "adaptive_scale": bool,
            "acceleration_lookback": int, "acceleration_interval": int, "time_limit_secs": float,
            "write_data_filename": str, "log_csv_filename": str, "use_indirect": bool,
            "linear_solver": None},
    "ECOS": {"max_iters": int, "abstol": float, "reltol": float, "feastol": float, "abstol_inacc": float,
             "reltol_inacc": float, "feastol_inacc": float, "nitref": int},
}
_TYPE_WORDS = {int: "an integer", float: "a real number", bool: "True or False", str: "a string",
               list: "a list"}

#: CVXPY statuses of a solved problem (an inaccurate answer is recorded; the certificate decides);
#: the values of ``cp.OPTIMAL`` and ``cp.OPTIMAL_INACCURATE``, written out so that reading them does
#: not import CVXPY
OK_STATUSES = ("optimal", "optimal_inaccurate")
#: CVXPY statuses of a solver's infeasibility certificate (``cp.INFEASIBLE``, ``cp.INFEASIBLE_INACCURATE``)
INFEASIBLE_STATUSES = ("infeasible", "infeasible_inaccurate")
#: ``tolerances`` of a :class:`SolverSequence` that runs Clarabel and ECOS at their own default
#: tolerances (1e-8) instead of :data:`SOLVER_OPTIONS` (SCS keeps its documented ones: its own
#: default, 1e-4, is too loose) -- for small problems whose answer is only a point to check
SOLVER_DEFAULTS = {"CLARABEL": {}, "ECOS": {}}
#: the documented order of the open conic solvers (the first installed one is the default)
DEFAULT_ORDER = ("CLARABEL", "ECOS", "SCS")
#: the documented order for problems with semidefinite cones (ECOS has none)
SDP_ORDER = ("CLARABEL", "SCS")
#: the errors a solve may raise that mean "this solver gave no answer" (the next one is tried),
#: besides CVXPY's ``SolverError`` (:func:`solve_errors`)
SOLVE_ERRORS = (ValueError, ArithmeticError)


def solve_errors() -> tuple:
    """:data:`SOLVE_ERRORS` and CVXPY's ``SolverError`` (read when a solve runs: CVXPY is then
    imported anyway)."""
    return (cp.error.SolverError, *SOLVE_ERRORS)


@functools.lru_cache(maxsize=1)
def _installed() -> tuple[str, ...]:
    return tuple(cp.installed_solvers())


def installed_solvers() -> list[str]:
    """The CVXPY solvers available in this environment (asked of CVXPY once per process: the
    answer costs ~3 ms and cannot change while the process runs)."""
    return list(_installed())


def has_semidefinite_cones(prob: cp.Problem) -> bool:
    """Whether ``prob`` has a PSD constraint or a PSD / NSD variable (ECOS cannot take it)."""
    return (any(isinstance(c, cp.constraints.PSD) for c in prob.constraints)
            or any(v.attributes.get("PSD") or v.attributes.get("NSD") for v in prob.variables()))


def solver_order(prob: cp.Problem | None = None, *, semidefinite: bool | None = None) -> list[str]:
    """The installed solvers of the documented order (:data:`DEFAULT_ORDER`, or
    :data:`SDP_ORDER` when ``prob`` has semidefinite cones or ``semidefinite=True``)."""
    if semidefinite is None:
        semidefinite = prob is not None and has_semidefinite_cones(prob)
    installed = set(_installed())
    return [s for s in (SDP_ORDER if semidefinite else DEFAULT_ORDER) if s in installed]


def default_solver() -> str | None:
    """The first installed solver of the documented order (Clarabel where installed)."""
    order = solver_order()
    return order[0] if order else None


def check_solver(solver) -> str | None:
    """``solver`` upper-cased, or ``None``; an unknown or uninstalled name raises
    :class:`InvalidParameterError` listing CVXPY's solver names and the installed ones."""
    if solver is None:
        return None
    installed = ", ".join(installed_solvers())
    if not isinstance(solver, str):
        raise InvalidParameterError(f"solver must be a CVXPY solver name or None; got {solver!r} "
                                    f"(installed: {installed})")
    name = solver.upper()
    known = list(cp.settings.SOLVERS)
    if name not in known:
        raise InvalidParameterError(f"unknown solver {solver!r}; valid names: {', '.join(known)}; "
                                    f"installed: {installed}")
    if name not in _installed():
        raise InvalidParameterError(f"solver {name!r} is not installed; installed solvers: {installed}")
    return name


def solver_setting_types(solver: str | None) -> dict | None:
    """``{setting: type}`` for the settings ``solver`` documents (``None`` if drflmodel cannot
    check them; a type ``None``: any value). Clarabel's types are those of its defaults."""
    types = _setting_types(solver)
    return None if types is None else dict(types)


@functools.lru_cache(maxsize=None)
def _setting_types(solver: str | None):
    if solver == "CLARABEL":
        import clarabel

        s = clarabel.DefaultSettings()
        return {a: type(getattr(s, a)) for a in dir(s)
                if not a.startswith("_") and not callable(getattr(s, a)) and a != "verbose"}
    return _DOCUMENTED_SETTINGS.get(solver)


def solver_settings(solver: str | None) -> frozenset | None:
    """The settings ``solver`` documents (``None`` if drflmodel cannot check them)."""
    types = solver_setting_types(solver)
    return None if types is None else frozenset(types)


def _typed_setting(solver: str, name: str, value, kind):
    """``value`` as the setting's type (numpy scalars become Python ones), or
    :class:`InvalidParameterError` naming the setting and the type it needs."""
    if kind is None:
        return value
    ok = {bool: isinstance(value, (bool, np.bool_)),
          int: isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)),
          float: isinstance(value, (numbers.Real, np.floating, np.integer))
          and not isinstance(value, (bool, np.bool_)),
          str: isinstance(value, str),
          list: isinstance(value, (list, tuple))}.get(kind, isinstance(value, kind))
    if not ok:
        raise InvalidParameterError(
            f"solver option {name!r} of {solver} must be {_TYPE_WORDS.get(kind, kind.__name__)}; "
            f"got {value!r} ({type(value).__name__})")
    if kind is float and not np.isfinite(float(value)) and name not in ("time_limit", "time_limit_secs"):
        raise InvalidParameterError(f"solver option {name!r} of {solver} must be finite; got {value!r}")
    return list(value) if kind is list else kind(value)


def check_solver_options(solver: str | None, options, route_options=()) -> dict:
    """``options`` if every key is a documented setting of ``solver`` and every value has that
    setting's type (checked here, before any solver runs), else :class:`InvalidParameterError`
    naming the setting and listing the valid ones (and ``route_options``)."""
    options = dict(options)
    if not options:
        return options
    types = solver_setting_types(solver)
    own = f"; the method's own options: {', '.join(sorted(route_options))}" if route_options else ""
    if types is None:
        checked = ", ".join(["CLARABEL", *_DOCUMENTED_SETTINGS])
        raise InvalidParameterError(
            f"option(s) {', '.join(map(repr, sorted(options)))}: drflmodel checks solver settings for "
            f"{checked} only, and passes none to {solver!r}{own}")
    unknown = sorted(set(options) - set(types))
    if unknown:
        raise InvalidParameterError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for solver {solver!r}; its settings: "
            f"{', '.join(sorted(types))}{own}")
    return {name: _typed_setting(solver, name, value, types[name]) for name, value in options.items()}


class SolverSequence:
    """The one loop over solvers: the solvers to try for one solve, in order, with the records of
    every attempt. Every CVXPY solve of the package goes through one (a route's main problem and
    its internal subproblems alike), so every solve falls back to the other installed solvers.

    Iterating yields solver names: the user's requested solver first (alone if
    ``fallback=False``), else ``first`` (a route's own choice, no warning), then the documented
    order. Moving past a requested solver warns (:class:`SolverFallbackWarning`) and marks its
    record. :meth:`run` solves a ``cp.Problem`` with one of them and records the attempt;
    :meth:`first_optimal` runs them in turn until one reports an optimal status.

    Parameters
    ----------
    request : the :class:`~drflmodel.problems.engine.route.SolveRequest` (its ``solver``,
        ``fallback``, ``verbose`` and ``solver_options``), or ``None`` for a route's internal
        subproblem (no user solver, no user options).
    default_order : the solvers after the first; default :func:`solver_order` of ``prob``.
    prob : the problem whose cones decide the default order.
    first : a solver to try first that the user did not name (e.g. the one a step model was
        compiled for); falling back from it does not warn.
    tolerances : per-solver options that replace :data:`SOLVER_OPTIONS` for those solvers
        (a subproblem solved tighter than the documented tolerances).
    record_value : add CVXPY's optimal value to each record.
    quiet : which solver warnings to silence while solving -- ``"inaccurate"`` (CVXPY's "Solution
        may be inaccurate": the status is recorded and the certificate decides) or ``"user"``
        (every ``UserWarning`` raised inside the solve).
    """

    def __init__(self, request=None, default_order=None, *, prob: cp.Problem | None = None,
                 first: str | None = None, tolerances: dict | None = None, record_value: bool = True,
                 quiet: str = "inaccurate"):
        self.requested = getattr(request, "solver", None)
        self.fallback = getattr(request, "fallback", True)
        self.verbose = getattr(request, "verbose", False)
        self.user_options = dict(getattr(request, "solver_options", None) or {})
        self.tolerances = dict(tolerances or {})
        self.record_value = record_value
        self.quiet = quiet
        order = list(solver_order(prob) if default_order is None else default_order)
        lead = self.requested or first
        if lead is not None:
            order = [lead] + ([s for s in order if s != lead] if self.fallback or not self.requested else [])
        self.order = order
        self.attempts: list[dict] = []
        self.record: dict | None = None

    def __iter__(self):
        for k, name in enumerate(self.order):
            if k == 1 and self.requested is not None:
                self._fall_back()
            yield name

    def _fall_back(self) -> None:
        first = next((a for a in self.attempts if a.get("requested")), None)
        if first is None:
            return
        first["fallback"] = True
        if "error" in first:
            why = f"error: {first['error']}"
        elif "status" in first:
            why = f"certified status {first['status']!r}, relative gap {first.get('relative_gap', float('nan')):.2e}"
        else:
            why = f"solver status {first.get('cvxpy_status')!r}"
        warnings.warn(
            f"solver {first['solver']!r} (requested) gave no certified answer ({why}); trying "
            f"{', '.join(self.order[1:])} (solve(fallback=False) returns its own answer instead)",
            SolverFallbackWarning, stacklevel=_caller_level())

    def options_for(self, name: str) -> dict:
        """The documented tolerances of ``name`` (or this sequence's ``tolerances`` for it), and the
        user's options if it is the user's requested solver or the first tried."""
        first = name == self.order[0]
        base = self.tolerances.get(name, SOLVER_OPTIONS.get(name, {}))
        return {**base, **(self.user_options if first else {})}

    def run(self, prob: cp.Problem, name: str) -> dict | None:
        """Solve ``prob`` with ``name``; append and return the record (``None`` on a solver error,
        recorded with its message)."""
        t0 = time.perf_counter()
        requested = self.requested is not None and name == self.order[0] and not self.attempts
        try:
            with warnings.catch_warnings():
                if self.quiet == "user":
                    warnings.simplefilter("ignore", UserWarning)
                else:
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                prob.solve(solver=name, verbose=self.verbose, **self.options_for(name))
        except solve_errors() as exc:
            self.record = {"solver": name, "error": str(exc)[:200]}
            self._append(self.record, requested)
            return None
        self.record = {"solver": name, "cvxpy_status": prob.status, "time": time.perf_counter() - t0}
        if self.record_value:
            self.record["cvxpy_value"] = prob.value
        self._append(self.record, requested)
        return self.record

    def _append(self, record: dict, requested: bool) -> None:
        if requested:
            record["requested"] = True
        self.attempts.append(record)

    def first_optimal(self, prob: cp.Problem) -> str | None:
        """Solve ``prob`` with the first solver that reports an optimal status (its name, or
        ``None``) -- for subproblems whose answer the route checks itself."""
        for name in self:
            if self.run(prob, name) is not None and prob.status in OK_STATUSES:
                return name
        return None

    def failure(self) -> str:
        """One line saying why no solver answered (each attempt's error or status)."""
        return failure_reason(self.attempts)


def solve_or_raise(prob: cp.Problem, solver: str, what: str = "subproblem", tolerances: dict | None = None) -> None:
    """Solve ``prob`` with ``solver`` alone (one :meth:`SolverSequence.run`, the documented
    tolerances); raise :class:`ArithmeticError` naming ``what`` and the error or status when it
    gives no optimal answer -- one try of a recovery loop that chooses the next solver itself
    (:func:`~drflmodel.problems.engine.steps.recovered_step`)."""
    seq = SolverSequence(None, [solver], tolerances=tolerances, record_value=False)
    if seq.run(prob, solver) is None or prob.status not in OK_STATUSES:
        raise ArithmeticError(f"{what}: {seq.failure()}")


def failure_reason(attempts) -> str:
    """``"no solver gave an optimal answer: CLARABEL: <error>; ECOS: <status>"`` from the records
    of a :class:`SolverSequence` (or ``"no solver was tried"``)."""
    solvers, routes = [], []
    for a in attempts:
        if "solver" in a:
            solvers.append(f"{a['solver']}: {a.get('error') or a.get('status') or a.get('cvxpy_status')}")
        elif "history" in a:        # a route's own iterations (its steps)
            errors = [h["error"] for h in a["history"] if "error" in h]
            routes.append(f"method {a.get('method')!r} stopped after {len(a['history'])} step(s)"
                          + (f": {errors[-1]}" if errors else ""))
    if solvers:
        return "no solver gave an optimal answer: " + "; ".join(solvers)
    if routes:
        return "; ".join(routes)
    return "no solver was tried (none of the documented solvers is installed)"


def solve_with_fallback(prob: cp.Problem, *, first: str | None = None, request=None, order=None,
                        tolerances: dict | None = None, attempts: list | None = None) -> str | None:
    """Solve a route's internal subproblem ``prob`` with the first solver of a
    :class:`SolverSequence` that reports an optimal status; return its name, or ``None`` when
    none did (never a raw solver error). The records are appended to ``attempts``."""
    seq = SolverSequence(request, order, prob=prob, first=first, tolerances=tolerances, record_value=False)
    used = seq.first_optimal(prob)
    if attempts is not None:
        attempts.extend(seq.attempts)
    return used


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _caller_level() -> int:
    """``stacklevel`` of the first frame outside drflmodel (the user's ``solve`` call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
