r"""What the routes that iterate on step problems share (the families' SQP, trust-region and
Newton routes): the check of the options they share, the warm-start slot, and the recovery of a
step problem a solver cannot solve (the next installed solver, then a shrinking trust region).
When ``method="auto"`` takes such a route is the route's own (``Route.cost``, ``Route.auto_skip``).
"""

from __future__ import annotations

from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it

from ..._solver_sequence import SolverSequence

__all__ = ["RECOVERY_RADII", "cached", "warm_start", "keep_warm_start", "step_solvers", "recovered_step",
           "check_step_options"]

#: trust-region radii of the recovery, relative to max(1, |theta|_inf): each is tried with every
#: step solver before the route declares the step failed
RECOVERY_RADII = (1.0, 1e-1, 1e-2, 1e-3)


def step_solvers(first: str) -> list[str]:
    """``first`` and then the other installed solvers of the documented order (the order of a
    :class:`~.solvers.SolverSequence` that tries ``first`` first)."""
    return SolverSequence(first=first).order


def recovered_step(step, first: str, scale: float, record: dict):
    """Solve a step problem, recovering from a failed solve (Clarabel's NumericalError was seen on
    badly scaled clients): ``step(solver, radius)`` with ``first``, then every other installed
    solver, then each of them inside a shrinking trust region (:data:`RECOVERY_RADII` times
    ``scale``). Returns the first answer; ``record`` gets the failures and what answered. Raises
    :class:`ArithmeticError` listing every failure when none answers."""
    errors = []
    for radius in (None, *(r * scale for r in RECOVERY_RADII)):
        for solver in step_solvers(first):
            try:
                out = step(solver, radius)
            except (ArithmeticError, cp.error.SolverError, ValueError) as exc:
                errors.append(f"{solver}{'' if radius is None else f' (radius {radius:.2g})'}: {str(exc)[:80]}")
                continue
            if errors:
                record["recovered"] = {"solver": solver, "radius": radius, "failures": errors}
            return out
    raise ArithmeticError("every step solve failed: " + "; ".join(errors))


def check_step_options(opts: dict) -> dict:
    """``opts`` with ``max_steps`` checked as an integer >= 1 and ``tol`` as a real > 0 (the
    options every step-based route shares); raises :class:`~drflmodel.errors.InvalidParameterError`."""
    from ..._validation import check_int, check_real

    steps, tol = opts["max_steps"], opts["tol"]
    if not (type(steps) is int and steps >= 1):          # a plain valid int (the default) is kept as is
        opts["max_steps"] = check_int(steps, "max_steps", low=1)
    if not (type(tol) is float and 0.0 < tol < float("inf")):
        opts["tol"] = check_real(tol, "tol", low=0.0, low_open=True)
    return opts


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or (isinstance(a, (str, int, float, bool)) and type(a) is type(b) and a == b)


def cached(problem, name: str, key, build):
    """``build()``, kept in the route cache ``problem.cache(name)`` and rebuilt when ``key``
    changes (a tuple compared item by item: objects by identity -- e.g. the weight set a step model
    was compiled for -- and strings or numbers by value). The problem clears the cache with its
    structure."""
    cache = problem.cache(name)
    if "key" not in cache or not _same(cache["key"], key):
        cache["key"], cache["value"] = key, build()
    return cache["value"]


def warm_start(problem):
    """The last certified point of a fast route on this problem (a sweep's previous answer), or
    ``None``: the one warm-start slot every step-based route of a problem shares."""
    theta = problem.cache("warm_start").get("theta")
    return None if theta is None or theta.shape != (problem.dim,) else theta.copy()


def keep_warm_start(problem, theta) -> None:
    """Keep ``theta`` as the warm start of the next fast solve of ``problem``."""
    problem.cache("warm_start")["theta"] = theta.copy()
