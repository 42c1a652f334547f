r"""Solve routes: the ways an oracle can be solved, one small object each.

Modelled on CVXPY's reductions (``Reduction.accepts`` / ``apply`` / ``invert``, chained by
``SolvingChain``): a :class:`Route` knows **when it applies** -- from the problem's structure
summary (:class:`~.structure.Structure`, computed once), never from the problem's internals --
**which client queries it needs** (:mod:`.queries`), and **how to produce a certified**
:class:`~drflmodel.solution.Solution`. ``Problem.routes()`` lists a family's
routes in order of preference; ``Problem.solve(method="auto")`` takes the first that applies (and,
for a route that may fall back, the next one when its answer does not certify), while
``solve(method=<name>)`` forces one. ``solution.info["method"]`` records the route that answered.

Every route returns a *certified* answer: an upper bound from the
exact objective at the returned :math:`\theta` and an independent lower bound; the status is
derived from the two, never copied from a solver.

The contract (stable; families and helpers code against it):

``Route.name``
    The value of ``solve(method=...)`` and of ``info["method"]`` (e.g. ``"conic"``: the
    engine's own; the others are the families').
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
``Route.needs``
    The client query kinds the route reads (a frozenset of :data:`~.queries.QUERY_KINDS`;
    default ``{"rows"}``: the route reads the rows themselves). :func:`dispatch` runs a route only
    when its needs are available: everything for a problem holding its rows, what the clients
    answer for a federated server (:mod:`drflmodel.client_oracle`).
``Route.applies(structure) -> str | None``
    ``None`` when the route can solve a problem of this :class:`~.structure.Structure`;
    otherwise a one-line reason (shown to the user when the route is forced with ``method=`` and
    does not apply).
``Route.solve(problem, request) -> Solution``
    Solve and certify. ``request`` is a :class:`SolveRequest` (the user's choices, options
    validated and completed with the route's defaults).

Extensions (optional; the defaults keep the contract above):

``Route.passes_solver_options``
    ``True`` for a route that hands every keyword it does not list in ``options`` to its conic
    solver (``solve(solver="SCS", eps_abs=1e-8)``). Those are validated against the solver's
    documented settings (:func:`drflmodel._solver_sequence.check_solver_options`) and arrive in
    ``request.solver_options``; a route option of the same name wins.
``Route.auto_skip(structure) -> str | None``
    Why ``method="auto"`` passes over a route that applies (``None``: it may take it). For a route
    that can be forced but is not the preferred answer to every problem it applies to.
``Route.refusal(problem, reason) -> Exception``
    The error raised when the route is forced but does not apply (default
    :class:`~drflmodel.errors.InvalidParameterError`).
``Route.memory(structure) -> int | None``
    The bytes the route would allocate beyond the data for a problem of this structure (``None``:
    no estimate). A route whose ``applies`` calls :meth:`Route.fits` is refused, by name and before
    allocating, when the estimate does not fit (:mod:`.memory`).
``Route.cost(structure) -> float | None``
    The route's estimated seconds to a certified answer (a model calibrated by measurements:
    :mod:`.cost`; ``None``: no estimate).
``Route.auto_options(structure) -> dict``
    Option defaults ``method="auto"`` gives the route (the user's options win; default: none). Auto
    asks every route for the gap the user asked (``structure.gap_tol``), no finer: a route whose own
    default stops closer to the optimum (a ``tol`` below ``gap_tol``) is told to stop at ``gap_tol``,
    and a caller that needs a closer answer asks for it with ``gap_tol``.

**Selection** (:func:`dispatch`, the analogue of CVXPY's chain construction, the one chooser of
the centralized and the federated solve alike): ``method="auto"`` keeps the routes whose needs are
available, that apply, that ``auto_skip`` does not pass over, that use a solver if one is named,
and that accept every given option. When every one of them declares a :meth:`~Route.cost` they are
ordered by it (the cheapest first; ties keep the family's order), else the family's order stands.
The estimates are those of the asked gap (``structure.gap_tol``). It solves with the first, and
with the next only after a ``may_fall_back`` route's non-optimal answer (a stalled gap); each
attempt is recorded in ``info["route_attempts"]`` and ``info["route_choice"]["fell_back"]``. A
forced ``may_fall_back`` route run with its default options whose gap stalls (status
``"optimal_within_gap"``: certified, not within ``gap_tol``) falls back the same way unless
``fallback=False``; a forced route that fails, or that the user capped with an option, is returned
as it is.

**Caches.** A route keeps what it reuses between solves (compiled step models, a sweep's warm
start) in ``problem.cache(route_name)``, a dict the problem clears with its structure.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from ..._validation import check_bool, check_int, check_real
from ...errors import InvalidParameterError, MemoryLimitError
from .queries import QUERY_KINDS, ROWS, why_not

__all__ = ["Route", "SolveRequest", "dispatch", "method_name"]


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
        with a warning), and when a forced ``may_fall_back`` route's gap stalls
        (``"optimal_within_gap"``), the routes ``auto`` would try (``info["route_attempts"]``) --
        ``True``, the default -- or return the honest answer (``False``).
    options : the route's options, validated and completed with its defaults.
    solver_options : settings for the first conic solver tried (routes with
        ``passes_solver_options``), validated against that solver's documented settings.
    """

    solver: str | None = None
    gap_tol: float = 1e-6
    seed: Any = 0
    verbose: bool = False
    fallback: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)
    solver_options: Mapping[str, Any] = field(default_factory=dict)


class Route:
    """One way to solve and certify a problem (see the module docstring for the contract)."""

    name: ClassVar[str] = ""
    #: earlier names ``solve(method=...)`` still accepts for this route (``info["method"]`` is the name)
    aliases: ClassVar[tuple] = ()
    options: ClassVar[Mapping[str, Any]] = {}
    needs: ClassVar[frozenset] = frozenset({ROWS})
    uses_solver: ClassVar[bool] = True
    may_fall_back: ClassVar[bool] = False
    passes_solver_options: ClassVar[bool] = False
    #: on a federated server, the fewest answers of each kind (budget name of the client's query policy ->
    #: answers per client) the route needs for its first step; a fallback to it is not started when the
    #: run has left less (:meth:`budget_refusal`)
    start_needs: ClassVar[Mapping[str, int]] = {}

    def applies(self, structure) -> str | None:
        """``None`` if this route can solve a problem of this structure, else a one-line reason."""
        return None

    def auto_skip(self, structure) -> str | None:
        """Why ``method="auto"`` passes over this route although it applies (``None``: it may not)."""
        return None

    def missing(self, available) -> str | None:
        """Why this route cannot run on the query kinds ``available`` (``None``: its needs are met)."""
        lacking = [k for k in QUERY_KINDS if k in self.needs and k not in available]
        if not lacking:
            return None
        explain = getattr(available, "why_not", why_not)
        return (f"method {self.name!r} needs the clients' {' and '.join(k.replace('_', ' ') for k in lacking)}: "
                + "; ".join(explain(k) for k in lacking))

    def choice(self, structure) -> str | None:
        """Why ``method="auto"`` takes this route for ``structure`` (recorded in
        ``info["route_choice"]``; default ``None``: it is the first route that applies)."""
        return None

    def refusal(self, problem, reason: str) -> Exception:
        """The error for ``solve(method=self.name)`` when the route does not apply (a
        :class:`~drflmodel.errors.MemoryLimitError` when the reason is a memory estimate,
        :class:`~.memory.MemoryReason`)."""
        from .memory import MemoryReason

        if isinstance(reason, MemoryReason):
            return reason.error(self.name)
        return InvalidParameterError(f"method {self.name!r} does not apply to this problem: {reason}")

    def solve(self, problem, request: SolveRequest):
        """Solve ``problem`` and return a certified :class:`~drflmodel.solution.Solution`."""
        raise NotImplementedError

    def budget_refusal(self, problem) -> str | None:
        """Why the route cannot start on ``problem``'s federated server (``None``: it can, or the rows are
        held here): what the default client policy's budgets left in this run
        (:func:`~.plan.left_on`) is below :attr:`start_needs` -- ``auto`` then does not fall back to it
        (its plan, lowered to what is left, would be refused at its first query)."""
        channel = getattr(getattr(problem, "objectives", None), "channel", None)
        if channel is None or not self.start_needs:
            return None
        from .plan import left_on

        left = left_on(channel)
        short = {k: int(left.get(k, 0)) for k, n in self.start_needs.items() if int(left.get(k, 0)) < n}
        if not short:
            return None
        return (f"the {self.name!r} route was not started: the default client policy's budgets left in this run "
                f"admit {', '.join(f'{v} {k}' for k, v in short.items())} per client, fewer than its first step "
                f"needs ({', '.join(f'{self.start_needs[k]} {k}' for k in short)})")

    # ---- memory and cost (what ``auto`` weighs) ----------------------------------------------
    #: what the route's memory estimate counts (named in a refusal; ``{P}``: the parameters)
    allocates: ClassVar[str] = "its working arrays"

    def memory(self, structure) -> int | None:
        """Bytes the route allocates beyond the data for a problem of ``structure`` (``None``: no
        estimate)."""
        return None

    def cost(self, structure) -> float | None:
        """Estimated seconds to a certified answer for a problem of ``structure`` (``None``: no
        estimate; see :mod:`.cost`)."""
        return None

    def auto_options(self, structure) -> dict:
        """Option defaults ``method="auto"`` gives this route (the user's options win; default:
        none)."""
        return {}

    def instead(self, structure) -> str:
        """What to do when the route does not fit in memory (the end of its refusal): the first other
        route of the problem that offers itself (:meth:`offer`), else that nothing fits."""
        for route in structure.routes:
            if route.name != self.name:
                offer = route.offer(structure)
                if offer:
                    return offer
        return "no route of this problem fits: use fewer parameters or rows, or a machine with more memory"

    def offer(self, structure) -> str | None:
        """What this route offers when another does not fit in memory (``"method='x' needs ..."``),
        or ``None`` (default)."""
        return None

    def fits(self, structure):
        """``None`` when :meth:`memory` fits in the memory available (or there is no estimate), else
        the :class:`~.memory.MemoryReason` naming the estimate, the memory available and
        :meth:`instead` (for :meth:`applies`)."""
        from .memory import route_refusal

        return route_refusal(self, structure)

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

    # ---- solver options (routes with passes_solver_options) ---------------------------------
    def first_solver(self, problem) -> str | None:
        """The solver this route tries first when none is named (its settings are the valid
        solver options)."""
        from ..._solver_sequence import default_solver

        return default_solver()

    def accepted_options(self, problem, solver: str | None) -> set[str]:
        """Every keyword this route accepts: its ``options`` and, if it passes solver options,
        the documented settings of ``solver`` (or of :meth:`first_solver`)."""
        names = set(self.options)
        if self.passes_solver_options:
            from ..._solver_sequence import solver_settings

            names |= solver_settings(solver or self.first_solver(problem)) or set()
        return names

    def request(self, problem, given: Mapping[str, Any], **choices) -> SolveRequest:
        """The :class:`SolveRequest` for ``given`` keywords: route options completed with their
        defaults, the rest validated as solver options."""
        own = {k: v for k, v in given.items() if k in self.options}
        rest = {k: v for k, v in given.items() if k not in self.options}
        if rest and self.passes_solver_options:
            from ..._solver_sequence import check_solver_options

            try:
                rest = check_solver_options(choices.get("solver") or self.first_solver(problem), rest,
                                            route_options=self.options)
            except InvalidParameterError as exc:
                raise InvalidParameterError(f"method {self.name!r}: {exc}") from None
        elif rest:
            self.complete_options(rest)   # raises, listing the valid options
        return SolveRequest(options=self.complete_options(own), solver_options=rest, **choices)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


# ==============================================================================================
# selection and dispatch (Problem.solve)
# ==============================================================================================
def _check_seed(seed):
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return seed
    return check_int(seed, "seed", low=0)


def _describe(routes) -> str:
    return ", ".join(repr(r.name) for r in routes)


def method_name(routes, method):
    """``method`` as a route's name: a route's earlier name (``Route.aliases``) becomes its name;
    anything else is returned unchanged (``"auto"``, a name, or what ``dispatch`` refuses)."""
    return next((r.name for r in routes if isinstance(method, str) and method in r.aliases), method)


def _forced(problem, structure, available, routes, method: str, solver) -> list:
    route = next(r for r in routes if r.name == method)
    lacking = route.missing(available)
    if lacking is not None:
        runnable = [r.name for r in routes if r.missing(available) is None and r.applies(structure) is None]
        raise InvalidParameterError(f"{lacking}; the methods that run on what is available here: "
                                    f"{', '.join(map(repr, runnable)) or 'none'}")
    reason = route.applies(structure)
    if reason is not None:
        raise route.refusal(problem, reason)
    if solver is not None and not route.uses_solver:
        raise InvalidParameterError(
            f"method {method!r} does not use a conic solver, so solver={solver!r} has no meaning for "
            f"it; leave solver=None or choose a method that uses one")
    return [route]


def _why_not(route, structure, available) -> str | None:
    """Why ``method="auto"`` cannot take ``route`` here (needs, applies, auto_skip), or ``None``."""
    return route.missing(available) or route.applies(structure) or route.auto_skip(structure)


def _why_not_each(routes, structure, available) -> dict:
    """``{name: reason or None}``: :func:`_why_not` of each route (one dispatch asks it once per route)."""
    return {r.name: _why_not(r, structure, available) for r in routes}


def estimated_costs(routes, structure, available=None, reasons=None) -> dict:
    """``{name: seconds or None}``: :meth:`Route.cost` of each route that ``method="auto"`` could
    take (needs available, applies, not skipped; ``reasons``: :func:`_why_not_each`, when the caller
    has it)."""
    available = structure.queries if available is None else available
    reasons = _why_not_each(routes, structure, available) if reasons is None else reasons
    return {r.name: r.cost(structure) for r in routes if reasons[r.name] is None}


def by_cost(routes, structure, available, costs=None) -> list:
    """``routes`` ordered for ``method="auto"``: by :meth:`Route.cost` (cheapest first, ties in the
    family's order) when every route auto could take declares one, else in the family's order
    (``costs``: :func:`estimated_costs` of ``routes``, when the caller has them)."""
    routes = list(routes)
    costs = estimated_costs(routes, structure, available) if costs is None else costs
    if not costs or any(c is None for c in costs.values()):
        return routes
    rank = {name: k for k, name in enumerate(sorted(costs, key=lambda name: costs[name]))}
    return sorted(routes, key=lambda r: rank.get(r.name, len(rank)))


def _route_choice(first, structure, available, routes, costs=None, reasons=None) -> dict:
    """Why ``method="auto"`` took ``first`` (the first route it tried; a fallback to the next is
    listed in ``info["route_attempts"]``): the route's own reason (:meth:`Route.choice`), the
    estimated seconds of each route it could take (:meth:`Route.cost`) and why each route ranked
    before it was passed over."""
    reasons = _why_not_each(routes, structure, available) if reasons is None else reasons
    costs = estimated_costs(routes, structure, available, reasons) if costs is None else costs
    ranked = by_cost(routes, structure, available, costs)
    passed = {}
    for r in ranked:
        if r is first:
            break
        passed[r.name] = reasons[r.name] or "an option or solver it does not take"
    why = first.choice(structure)
    if why is None:
        why = ("the cheapest route that applies (estimated seconds in 'estimated_seconds')"
               if costs and all(c is not None for c in costs.values()) else "the first route that applies")
    out = {"method": first.name, "why": why, "passed_over": passed}
    if any(c is not None for c in costs.values()):
        out["estimated_seconds"] = {name: c for name, c in costs.items() if c is not None}
    return out


def _candidates(problem, structure, available, routes, solver, options, costs=None, reasons=None) -> list:
    """The routes ``method="auto"`` uses, in order: the first whose needs are available, that
    applies, is not skipped, uses a solver if one is named and accepts every option -- and, after a
    ``may_fall_back`` route, the next such route (see the module docstring; ``costs`` and
    ``reasons``: :func:`estimated_costs` and :func:`_why_not_each` of ``routes``, when the caller has them)."""
    reasons = _why_not_each(routes, structure, available) if reasons is None else reasons
    costs = estimated_costs(routes, structure, available, reasons) if costs is None else costs
    applicable, fitting = [], []
    for r in by_cost(routes, structure, available, costs):
        if reasons[r.name] is not None:
            continue
        applicable.append(r)
        if solver is not None and not r.uses_solver:
            continue
        if options and not set(options) <= r.accepted_options(problem, solver):
            continue
        fitting.append(r)
        if not r.may_fall_back:
            break
    if fitting:
        return fitting
    if not applicable:
        why = {r.name: reasons[r.name] for r in routes}
        reasons = "; ".join(f"{name}: {reason}" for name, reason in why.items())
        from .memory import MemoryReason

        memory = [reason for reason in why.values() if isinstance(reason, MemoryReason)]
        if memory:            # a route that would apply but does not fit: the memory error, by name
            smallest = min(memory, key=lambda reason: reason.needed)
            raise MemoryLimitError(f"no method applies to this problem within the memory available ({reasons})",
                                   what="every route", needed=smallest.needed, available=smallest.available)
        raise InvalidParameterError(f"no method applies to this problem ({reasons})")
    pool = applicable
    if solver is not None:
        pool = [r for r in pool if r.uses_solver]
        if not pool:
            raise InvalidParameterError(
                f"solver={solver!r}: none of the methods that apply here ({_describe(applicable)}) "
                f"uses a conic solver; leave solver=None")
    if len(pool) == 1:
        pool[0].request(problem, options, solver=solver)   # raises the route's own, precise error
    accepted = {r.name: r.accepted_options(problem, solver) for r in pool}
    listing = "; ".join(f"method {name!r}: {', '.join(sorted(names)) or 'none'}" for name, names in accepted.items())
    unknown = sorted(set(options) - set().union(*accepted.values()))
    what = (f"unknown option(s) {', '.join(map(repr, unknown))}" if unknown else
            f"no single method accepts all of {', '.join(map(repr, sorted(options)))}")
    raise InvalidParameterError(f"{what}; valid options ({listing})")


def _fallbacks(problem, structure, available, routes, forced, solver) -> list:
    """The routes a forced ``may_fall_back`` route falls back to when its answer does not certify
    ``"optimal"`` (``fallback=True``): the routes ``method="auto"`` would try, without ``forced``
    and without route options (the forced route's options are its own)."""
    others = [r for r in routes if r is not forced]
    try:
        return _candidates(problem, structure, available, others, solver, {})
    except (InvalidParameterError, MemoryLimitError):
        return []


def _not_started(route, problem, sol) -> bool:
    """Whether the fallback to ``route`` is left out because the run's budgets cannot run it
    (:meth:`Route.budget_refusal`); the reason goes in ``sol.info["fallback_not_started"]``."""
    why = route.budget_refusal(problem)
    if why is not None:
        sol.info["fallback_not_started"] = {"method": route.name, "why": why}
    return why is not None


def dispatch(problem, routes, *, solver=None, gap_tol=1e-6, method="auto", seed=None, verbose=False,
             fallback=True, options=None, available=None):
    """Validate the user's choices, select the route(s) and solve (``Problem.solve``'s body, and the
    federated solve's: :func:`drflmodel.client_oracle.federated_solve`).

    ``available``: the client query kinds the routes may use (:mod:`.queries`; an
    :class:`~.queries.Available` says why the others are missing); default: those of
    ``problem.structure`` (every kind where the rows are held). Raises
    :class:`~drflmodel.errors.InvalidParameterError` for an unknown solver, method or option
    (listing the valid ones) or a forced route whose needs are not available, and the route's
    :meth:`Route.refusal` for a forced route that does not apply. ``info["method"]`` names the
    route that answered; ``info["route_attempts"]`` lists routes that answered first without
    certifying (``may_fall_back``).
    """
    from ..._solver_sequence import check_solver

    started = time.perf_counter()
    options = dict(options or {})
    routes = list(routes)
    names = [r.name for r in routes]
    method = method_name(routes, method)
    if not isinstance(method, str) or (method != "auto" and method not in names):
        raise InvalidParameterError(
            f"unknown method {method!r} for {type(problem).__name__}; valid methods: 'auto', "
            f"{_describe(routes)}")
    solver = check_solver(solver)
    choices = dict(solver=solver, gap_tol=check_real(gap_tol, "gap_tol", low=0.0),
                   seed=_check_seed(getattr(problem, "seed", 0) if seed is None else seed),
                   verbose=check_bool(verbose, "verbose"), fallback=check_bool(fallback, "fallback"))
    structure = problem.structure
    if structure.gap_tol != choices["gap_tol"]:        # the routes are priced and asked at the user's gap
        structure = dataclasses.replace(structure, gap_tol=choices["gap_tol"])
    available = structure.queries if available is None else available
    costs = reasons = None
    if method == "auto":
        reasons = _why_not_each(routes, structure, available)       # once: the ranking and its record
        costs = estimated_costs(routes, structure, available, reasons)
        chosen = _candidates(problem, structure, available, routes, solver, options, costs, reasons)
    else:
        chosen = _forced(problem, structure, available, routes, method, solver)
    def make(r):
        return r.request(problem, {**r.auto_options(structure), **options} if method == "auto" else options,
                         **choices)

    # validated before solving: every route's request when the user gave options (a later route may
    # refuse them), else the first one's (a later route's, built from its own defaults, when it runs)
    requests = [make(r) if k == 0 or options else None for k, r in enumerate(chosen)]
    route_attempts = []
    k = 0
    while True:
        if requests[k] is None:
            requests[k] = make(chosen[k])
        route, request = chosen[k], requests[k]
        sol = route.solve(problem, request)
        if not route.may_fall_back or sol.status == "optimal":
            break
        if (k + 1 == len(chosen) and method != "auto" and choices["fallback"] and not route_attempts
                and not options and sol.status == "optimal_within_gap"):
            # a stalled gap of a route run with its defaults (a failure, or a run the user capped with
            # an option, is returned as it is)
            more = _fallbacks(problem, structure, available, routes, route, solver)
            chosen += more
            requests += [r.request(problem, r.auto_options(structure), **choices) for r in more]
        if k + 1 == len(chosen) or _not_started(chosen[k + 1], problem, sol):
            break
        route_attempts.append({"method": route.name, "status": sol.status, "relative_gap": sol.relative_gap})
        k += 1
    sol.info["method"] = route.name
    if method == "auto":
        sol.info["route_choice"] = _route_choice(chosen[0], structure, available, routes, costs, reasons)
    elif route_attempts:
        sol.info["route_choice"] = {"method": method, "why": f"forced with method={method!r}", "passed_over": {}}
    if route_attempts:
        first = route_attempts[0]
        why = f"the first route's certificate did not close within gap_tol (status {first['status']!r})"
        sol.info["route_choice"]["fell_back"] = {"from": [a["method"] for a in route_attempts], "to": route.name,
                                                 "why": why}
        sol.info["route_attempts"] = route_attempts
    sol.problem = problem
    problem.annotate(sol, request, started)
    return sol
