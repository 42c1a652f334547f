r"""Solve routes: the ways an oracle can be solved, one small object each (issue 15, issue 13).

Modelled on CVXPY's reductions (``Reduction.accepts`` / ``apply`` / ``invert``, chained by
``SolvingChain``): a :class:`Route` knows **when it applies** to a problem and **how to produce a
certified** :class:`~drflmodel.solution.Solution` for it. ``Problem.routes()`` lists a family's
routes in order of preference; ``Problem.solve(method="auto")`` takes the first that applies (and,
for a route that may fall back, the next one when its answer does not certify), while
``solve(method=<name>)`` forces one. ``solution.info["method"]`` records the route that answered.

Every route returns a *certified* answer in the sense of DESIGN.md §4.1: an upper bound from the
exact objective at the returned :math:`\theta` and an independent lower bound; the status is
derived from the two, never copied from a solver.

The contract (stable; families and helpers code against it):

``Route.name``
    The value of ``solve(method=...)`` and of ``info["method"]`` (e.g. ``"conic"``, ``"newton"``,
    ``"R1"``, ``"sdp"``, ``"local"``).
``Route.options``
    The route's own keyword options and their defaults (``{"n_starts": 3, ...}``). ``solve``
    rejects any option the chosen route does not list, naming the valid ones.
``Route.uses_solver``
    Whether ``solve(solver=...)`` (a CVXPY solver name) means something to this route. A route
    that does not call a conic solver (a numpy Newton method) sets ``False``; naming a solver then
    selects among the routes that use one.
``Route.may_fall_back``
    ``True`` for a route that is only *tried* first (a fast structure-exploiting method): when its
    answer is not ``"optimal"``, ``method="auto"`` goes on to the next applicable route and records
    the attempt in ``info["route_attempts"]``.
``Route.applies(problem) -> str | None``
    ``None`` when the route can solve ``problem``; otherwise a one-line reason (shown to the user
    when the route is forced with ``method=`` and does not apply).
``Route.solve(problem, request) -> Solution``
    Solve and certify. ``request`` is a :class:`SolveRequest` (the user's choices, options
    validated and completed with the route's defaults).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from ..errors import InvalidParameterError

__all__ = ["Route", "SolveRequest"]


@dataclass(frozen=True)
class SolveRequest:
    """What the user asked of ``Problem.solve`` (validated), handed to :meth:`Route.solve`.

    Attributes
    ----------
    solver : a CVXPY solver name to try first (upper case), or ``None`` for the route's default.
    gap_tol : relative certificate gap below which the status is ``"optimal"``.
    seed : seed of every random choice of the route (multi-start points, ...).
    verbose : pass solver output through.
    fallback : when the named ``solver`` fails, try the others (recorded in ``info["attempts"]``,
        with a warning) -- ``True``, the default -- or return the honest failure (``False``).
    options : the route's options, validated and completed with its defaults.
    """

    solver: str | None = None
    gap_tol: float = 1e-6
    seed: int = 0
    verbose: bool = False
    fallback: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)


class Route:
    """One way to solve and certify a problem (see the module docstring for the contract)."""

    name: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}
    uses_solver: ClassVar[bool] = True
    may_fall_back: ClassVar[bool] = False

    def applies(self, problem) -> str | None:
        """``None`` if this route can solve ``problem``, else a one-line reason why not."""
        return None

    def solve(self, problem, request: SolveRequest):
        """Solve ``problem`` and return a certified :class:`~drflmodel.solution.Solution`."""
        raise NotImplementedError

    def complete_options(self, given: Mapping[str, Any]) -> dict:
        """The route's defaults updated with ``given``; an unknown option raises
        :class:`~drflmodel.errors.InvalidParameterError` listing the valid ones."""
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            valid = ", ".join(sorted(self.options)) or "none"
            raise InvalidParameterError(
                f"unknown option(s) {', '.join(map(repr, unknown))} for method {self.name!r}; "
                f"valid options: {valid}")
        return {**self.options, **given}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
