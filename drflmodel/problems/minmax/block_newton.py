r"""The communication-efficient certified route of a federated server (``solve(method="block_newton")``;
the client-weight min-max family): each exchange asks every client for its value, its gradient and
its Hessian-vector products along :math:`q` directions the server chose (:math:`(q+1)P+1` floats,
:math:`q=2` by default: at most :math:`4P`), and steps by the SQP of :mod:`.block_newton_steps`.

**Why.** The dense ``sqp`` route certifies in few exchanges but uploads a Hessian triangle per client
and step (:math:`P(P+1)/2` floats: 211,575 on digits, :math:`P=650`); the ``hessian_free`` route
uploads :math:`P+1` floats but needs an L-BFGS iteration per exchange (83 exchanges on digits at
``gap_tol = 1e-6``). With :math:`q` exact products per exchange the server's quasi-Newton model
gains :math:`q+1` curvature pairs per exchange instead of one.

**Certificate** (unchanged): the Hessian-free route's, at every iterate
(:func:`~.hessian_free.evaluation_certificate`: :math:`U=\Phi(\theta)`, :math:`L` the Hessian-free
fixed-weight bound at the step's weights minus :math:`\psi`), so the answer's :math:`[L,U]` is as
rigorous as that route's; the products only shape the steps.

**Query plan** (:mod:`drflmodel.problems.engine.plan`): at most ``max_iterations`` evaluations (each
with :math:`q` products) plus the certificate's bound terms and the intercepts' polish, stated to
the clients before the first query (:func:`block_newton_plan`).

Where the rows are held, ``method="auto"`` leaves this route aside (in process each product costs
two passes over the rows, so the ``hessian_free`` route is faster). On a federated server auto takes
it first for a smooth loss from :math:`P=5` (below, a Hessian triangle is at most :math:`4P` floats
and the dense ``sqp`` route uploads fewer in all: :func:`~.route_costs.federated_floats`; measured
with at most as many exchanges as the ``hessian_free`` route down to 0.019 rows per parameter:
:data:`~.route_costs.FEDERATED_FEW_ROWS_PER_PARAMETER`), and asks it for the user's ``gap_tol`` (as
every route: no finer gap is asked on the user's behalf).

**Bound terms on the evaluations.** Where :math:`(q+1)P+1` plus the bound terms
(:func:`bound_terms_floats`: :math:`6+K+K(K+1)/2` floats with an intercept) fit in :math:`4P`
(:func:`bound_terms_fit`), every evaluation asks them too (checked against the same answer's value
and gradient): the plan and the column statistics go with the first evaluation, a certificate attempt
costs no exchange of its own, the intercepts' polish one instead of three, and the steps use the
intercepts' exact Hessian (:mod:`.block_newton_steps`).

Measured (``benchmarks/bench_federated_scale.py``, ``LocalChannel``, ``gap_tol = 1e-6``): digits
(:math:`P=650`, 20 clients) 38 / 36 exchanges for ERM / :math:`\chi^2` at ``gap_tol`` (53 / 51 at the
1e-10 auto used to ask), the ``hessian_free`` route 83, ``sqp`` 11-12 with 211,575-float Hessian triangles.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...sets import feasible_weights
from ...solution import relative_gap
from ..engine.memory import format_bytes
from .block_newton_steps import BlockNewtonRun
from .hessian_free import HessianFreeRoute

__all__ = ["BlockNewtonRoute", "block_newton_plan", "default_memory", "ATTEMPT_FRACTION", "bound_terms_fit",
           "bound_terms_floats"]

#: a certificate is attempted once the optimistic gap from the whole gradient is this fraction of the
#: gap asked (measured on digits: 0.5 and 0.25 both 52 exchanges, 1.0 54, the Hessian-free route's
#: own test 61)
ATTEMPT_FRACTION = 0.5


#: curvature pairs kept by default, and the bytes they may take (two P-vectors each): measured on digits,
#: 150 pairs 39 / 36 evaluations (ERM / chi^2, gap 1e-6) and 53 at 1e-10, against 42 / 41 and 73 with 45
MEMORY_PAIRS, MEMORY_BYTES = 150, 2 ** 28


def default_memory(dim: int) -> int:
    """:data:`MEMORY_PAIRS`, fewer when the pairs would take more than :data:`MEMORY_BYTES` (at least 10)."""
    return int(max(10, min(MEMORY_PAIRS, MEMORY_BYTES // (16 * max(int(dim), 1)))))


def block_newton_plan(evaluations: int, directions: int, bound_terms: int = 1000, values: int = 1500):
    """The route's :class:`~drflmodel.problems.engine.plan.QueryPlan`: ``evaluations`` evaluations (steps,
    line search and the intercepts' polish; a reserve of 31 for the last certificate), each with
    ``directions`` Hessian-vector products, ``bound_terms`` bound-term answers and ``values`` one-point
    value queries."""
    from ..engine.plan import QueryPlan

    limits = {"evaluations": evaluations, "hvps": evaluations * directions, "bound_terms": bound_terms,
              "values": values}
    reserve = {"evaluations": min(31, evaluations // 4), "bound_terms": min(32, bound_terms // 4),
               "values": min(120, values // 4)}
    return QueryPlan("block_newton", limits, reserve=reserve,
                     derivation=(f"at most {evaluations} evaluations (value, gradient and {directions} Hessian-vector "
                                 f"products each: steps, line search and the intercepts' polish), {bound_terms} "
                                 f"bound-term answers, {values} one-point value queries; the route stops at the "
                                 f"first limit reached with its best certificate"))


def bound_terms_floats(n_outputs: int, intercept: bool) -> int:
    r"""Floats of a client's bound terms (:meth:`~drflmodel.client_oracle.site.Site.bound_terms` without the
    column statistics): 4 magnitudes, and with an intercept column the mean :math:`\|\tilde x\|` and the
    intercepts' value, gradient and Hessian triangle (:math:`2+K+K(K+1)/2`)."""
    K = int(n_outputs)
    return 4 + (2 + K + K * (K + 1) // 2 if intercept else 0)


def bound_terms_fit(mf, directions: int) -> bool:
    r"""Whether an evaluation with ``directions`` products and the bound terms stays within :math:`4P`
    floats per answer: :math:`(q+1)P+1+` :func:`bound_terms_floats` :math:`\le4P`. Then the route asks
    the bound terms with every evaluation (:class:`~drflmodel.client_oracle.remote_points.RemoteMatrixFree`'s
    ``ride``): a certificate attempt costs no exchange of its own, the intercepts' polish one instead of three."""
    P = int(mf.dim)
    extra = bound_terms_floats(mf.n_outputs, mf.layout.intercept_column is not None)
    return (int(directions) + 1) * P + 1 + extra <= 4 * P


def _remote_matrix_free(problem):
    """On a federated server, the matrix-free objectives the Hessian-free route's solve will read (its
    cache entry: the same object, built now if needed), else ``None``."""
    from ..engine.steps import cached

    objectives = problem.objectives
    remote = getattr(objectives, "matrix_free", None)
    if remote is None:
        return None
    return cached(problem, "hessian_free", (objectives, objectives.loss), remote)


def _dense_is_cheaper(structure) -> str | None:
    """On a federated server: why auto leaves the route to the dense ``sqp`` route -- when its answers
    (a Hessian triangle with the value and gradient) are at most 4P floats (P <= 4)
    and it uploads fewer floats in all (:func:`~.route_costs.federated_floats`) -- else ``None``."""
    from .route_costs import federated_floats

    est = federated_floats(structure)
    dense, mine = est["sqp"], est["block_newton"]
    if dense["largest"] <= 4 * int(structure.dim) and dense["total"] < mine["total"]:
        return (f"P = {structure.dim}: the dense sqp route's answers are at most 4P floats and it uploads fewer in all "
                f"(about {dense['total']:,} floats per client against {mine['total']:,})")
    return None


class BlockNewtonRoute(HessianFreeRoute):
    r"""The route of the module docstring. Options: ``directions`` (:math:`q`, the Hessian-vector
    products per exchange, default 2; 0 gives the same recursion on secant pairs alone),
    ``memory`` (curvature pairs kept, default :func:`default_memory`), ``max_iterations`` (default 300), ``tol``,
    ``precondition`` and ``plan`` as for ``hessian_free`` (default plan: :func:`block_newton_plan`)."""

    name = "block_newton"
    options = {"max_iterations": 300, "memory": None, "directions": 2, "tol": None, "precondition": True,
               "plan": None}

    def auto_skip(self, structure) -> str | None:
        if structure.rows_local:
            return ("the rows are held here: each Hessian-vector product costs two passes over them, so the "
                    "hessian_free route is faster; force with method='block_newton'")
        from .hessian_free import HESSIAN_FREE_MIN_DIM
        from .route_costs import federated_fewer_exchanges

        return _dense_is_cheaper(structure) or federated_fewer_exchanges(structure, HESSIAN_FREE_MIN_DIM)

    def choice(self, structure) -> str | None:
        from .route_costs import federated_floats

        if structure.rows_local:
            return None
        est = federated_floats(structure)
        listed = "; ".join(f"{name} about {e['exchanges']} exchanges, {e['largest']:,} floats per answer, "
                           f"{format_bytes(8 * e['total'])} per client" for name, e in est.items())
        return (f"a federated server: the fewest floats uploaded per client with answers of at most 4P floats "
                f"(estimates: {listed})")

    def offer(self, structure):
        return None

    def cost(self, structure):
        return None

    def certificate(self, problem, mf, W, ev, gap_tol, force=False, tol=None):
        """The Hessian-free certificate (:func:`~.hessian_free.evaluation_certificate`), attempted only where it is
        likely to close: each attempt costs the clients an exchange for the bound terms and more for the
        intercepts' polish, so the cheap necessary test is made stricter -- the whole gradient (the
        intercepts' entries too) must leave :data:`ATTEMPT_FRACTION` of the gap. A skipped attempt
        costs one more step at most (the steps converge linearly); the bound itself is unchanged.
        Measured on digits (ERM, 20 clients): 52 exchanges instead of 61."""
        from .hessian_free import evaluation_certificate

        if not force:
            U = float(W.worst_case(ev.values)[0])
            lam, projected = feasible_weights(W, ev.lam)
            mu = problem.objectives.l2 * float(lam.sum())
            gradient = ev.gradient if not projected else ev.point.weighted_gradient(lam)
            if mu <= 0:
                return None
            optimistic = float(lam @ ev.values) - float(W.psi(lam)) - float(gradient @ gradient) / (2.0 * mu)
            if relative_gap(optimistic, U) > ATTEMPT_FRACTION * min(gap_tol, tol or gap_tol):
                return None
        return evaluation_certificate(problem, mf, W, ev, gap_tol, True, tol)

    def complete_options(self, given) -> dict:
        from ..._validation import check_int, check_real

        opts = super(HessianFreeRoute, self).complete_options(given)
        opts["max_iterations"] = check_int(opts["max_iterations"], "max_iterations", low=1)
        if opts["memory"] is not None:
            opts["memory"] = check_int(opts["memory"], "memory", low=1)
        opts["directions"] = check_int(opts["directions"], "directions", low=0, high=3)
        if opts["tol"] is not None:
            opts["tol"] = check_real(opts["tol"], "tol", low=0.0, low_open=True)
        if not isinstance(opts["precondition"], (bool, np.bool_)):
            from ...errors import InvalidParameterError

            raise InvalidParameterError(f"precondition must be True or False; got {opts['precondition']!r}")
        opts["algorithm"] = "sqp"            # read by the Hessian-free route's solve; the steps are this route's
        return opts

    def solve(self, problem, request):
        """With a ``tol`` far below ``gap_tol``, the stall rule (a gap within ``gap_tol`` that stops
        halving) is applied at ``100 tol`` (as the ranked Hessian-free route does); the status is
        the user's ``gap_tol``'s."""
        opts = dict(request.options)
        if opts.get("plan") is None and getattr(problem.objectives, "matrix_free", None) is not None:
            from ..engine.plan import left_on      # lowered to what this run left (a fallback's too)

            opts["plan"] = block_newton_plan(opts["max_iterations"] + 31, opts["directions"]).within(
                left_on(getattr(problem.objectives, "channel", None)))
        mf = _remote_matrix_free(problem)
        riding = mf is not None and hasattr(mf, "ride") and bound_terms_fit(mf, opts["directions"])
        if riding:                          # the bound terms with every evaluation (room left in the 4P floats)
            mf.ride = True
        try:
            return self._solve(problem, request, opts)
        finally:
            if riding:
                mf.ride = False

    def _solve(self, problem, request, opts):
        from ...solution import status_from_gap
        from .route_costs import STALL_FACTOR

        asked = opts.get("tol")
        if asked is None or request.gap_tol <= STALL_FACTOR * asked:
            return super().solve(problem, dataclasses.replace(request, options=opts))
        sol = super().solve(problem, dataclasses.replace(request, options=opts, gap_tol=STALL_FACTOR * asked))
        if sol.status in ("optimal", "optimal_within_gap"):
            sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, request.gap_tol)
        sol.info["gap_tol"] = request.gap_tol
        return sol

    def _run(self, problem, request, mf, W, theta, certifier, algorithm, smooth, plan, started):
        import time

        from .hessian_free import weight_model, diagonal_scaling
        from .hessian_free_steps import Evaluation
        from .hessian_free import SmoothedSupport

        opts = request.options
        scaling = diagonal_scaling(mf) if opts["precondition"] else None
        setup = time.perf_counter() - started
        memory = default_memory(mf.dim) if opts["memory"] is None else opts["memory"]
        run = BlockNewtonRun(mf, W, certifier, opts["directions"], memory, weight_model(problem), scaling=scaling)
        run.minimize(theta, opts["max_iterations"])
        if certifier.best is None and certifier.last is not None:
            certifier.check(certifier.last, {}, force=True)
        if certifier.best is None:
            certifier.check(Evaluation.of_support(mf, SmoothedSupport(W), theta), {}, force=True)
        if certifier.best is None:
            return problem.failed_solution([{"method": self.name, "history": run.history[-20:]}])
        sol = self._finish(problem, request, mf, certifier, run.history, run.evaluations, "block_newton", [],
                           scaling, started, started + setup)
        sol.info["directions"] = opts["directions"]
        sol.info["hessian_vector_products"] = run.products
        if plan is not None:
            sol.info["plan"] = plan.to_dict()
        return sol

