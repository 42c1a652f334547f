r"""Federated distributionally robust optimization over client weights (Scaff-PD family).

The Scaff-PD paper's problem (1.1) (Yu, Karimireddy, Ma and Jordan 2023, §1.1 and Appendix B):

.. math::

    \min_{\theta\in\mathbb R^d}\ \max_{\lambda\in\Lambda}\ \sum_{i=1}^n \lambda_i f_i(\theta) - \psi(\lambda),
    \qquad f_i(\theta) = \tfrac1{N_i}\sum_j L(z_{ij}) + \tfrac{\ell_2}2\|\theta\|^2 ,

for every weight set of :mod:`drflmodel.sets` inside the nonnegative orthant: AFL (``Simplex``),
``CVaR``, the :math:`\chi^2` penalty (``ChiSquare``, (B.2), through its exact dual), ``LpBall``
:math:`\cap` simplex, ``HCVaR`` and ``QFFL`` (with a corrected :math:`\psi`, see :class:`~drflmodel.sets.QFFL`).

**Reduction to a convex problem (the epigraph form).** With :math:`\sigma_\Lambda(t)=
\max_{\lambda\in\Lambda}\lambda^\top t-\psi(\lambda)` (the set's ``support_expr``, convex and
nondecreasing because :math:`\Lambda\subset\mathbb R^n_{\ge0}`),

.. math::

    \min_{\theta, t}\ \sigma_\Lambda(t) \quad\text{s.t.}\quad t_i \ge f_i(\theta)\ (i=1..n).

By DCP duality the multipliers of the epigraph constraints are a worst-case weight vector
:math:`\lambda^\star\in\partial\sigma_\Lambda(t^\star)`.

**Certificate (the three-way check of disciplined saddle programming).**

* saddle solve: the CVXPY problem above (value :math:`v_{\rm saddle}`);
* fix :math:`\theta^\star`, maximize over :math:`\lambda`: :math:`U=\max_{\lambda\in\Lambda}
  \lambda^\top f(\theta^\star)-\psi(\lambda)` evaluated **in numpy** by ``weights.worst_case``
  (= :meth:`FederatedDRO.objective`);
* fix :math:`\lambda^\star` (the multipliers, projected onto :math:`\Lambda` so the bound is valid),
  minimize over :math:`\theta`: :math:`L=\min_\theta\sum_i\lambda^\star_i f_i(\theta)-\psi(\lambda^\star)`,
  a separate convex problem compiled once with :math:`\lambda` as a CVXPY ``Parameter``.

Weak duality gives :math:`L\le\min_\theta\max_\lambda F\le U`. Where
:math:`\mu_\lambda=\sum_i\lambda^\star_i\mu_i>0` (strong convexity of the fixed-weight objective,
e.g. ``l2 > 0``), the lower bound is made solver-independent:
:math:`\min_\theta g\ge g(\hat\theta)-\|\nabla g(\hat\theta)\|^2/(2\mu_\lambda)` evaluated in numpy at
the fixed-weight solver's :math:`\hat\theta` (valid for any subgradient).
"""

from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np
from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it

from ...errors import InvalidParameterError, NotConvexError
from ...solution import Solution, status_from_gap
from ...sets import WeightSet, feasible_weights
from ..._rounding import lower_difference
from ..engine.problem import Problem
from ..._solver_sequence import OK_STATUSES, SolverSequence, solver_order
from .fixed_weight_bound import certified_lower_bound, weighted_newton_bound
from .route_costs import STALL_FACTOR

__all__ = ["FederatedDRO", "WeightedMinMax"]

CERTIFICATE = "fixed-weight minimization at dual weights"

#: sweepable parameter name -> attribute of the weight set holding its ``cp.Parameter``
_SET_PARAMETERS = {"alpha": "cap_param", "rho": "rho_param", "radius": "radius_param"}


_HESSIAN_FREE_ROUTE = []



def _hessian_free_route():
    """The Hessian-free route with the family's cost and memory estimates (defined on first use:
    its module loads the matrix-free objectives)."""
    if not _HESSIAN_FREE_ROUTE:
        from .hessian_free import HESSIAN_FREE_MIN_DIM, SQP_MIN_SIZE, HessianFreeRoute
        from .lagrangian_sqp import LagrangianSQPRoute, conic_is_compressed
        from .route_costs import hessian_free_iterations, hessian_free_memory, hessian_free_seconds
        from ..engine.memory import format_bytes

        class RankedHessianFreeRoute(HessianFreeRoute):
            """:class:`~.hessian_free.HessianFreeRoute` ranked by its estimated seconds where the rows
            are held (:mod:`.route_costs`); on a federated server its own size rule stands."""

            def auto_skip(self, structure):
                if structure.rows_local:
                    return conic_is_compressed(structure, self.name)
                return super().auto_skip(structure)

            def choice(self, structure):
                if not structure.rows_local:
                    return super().choice(structure)
                refused = LagrangianSQPRoute().fits(structure)
                return None if refused is None else f"the dense routes do not fit in memory: {refused}"

            def cost(self, structure):
                return hessian_free_seconds(structure, SQP_MIN_SIZE)

            def memory(self, structure):
                return hessian_free_memory(structure)

            def offer(self, structure):
                if not structure.smooth:
                    return None
                return (f"method='hessian_free' needs no P x P array (about "
                        f"{format_bytes(hessian_free_memory(structure))}: values, gradients and Hessian-vector "
                        f"products)")

            def solve(self, problem, request):
                """With a ``tol`` far below ``gap_tol`` (the user's ``tol=``): the route's stall rule
                (a gap within ``gap_tol`` that stops halving) is applied at ``100 tol`` instead, so the
                run goes on towards ``tol`` (on digits it stopped at 4e-7 with ``gap_tol = 1e-6`` and
                certifies 3e-9 with ``1e-8``); the status is the user's ``gap_tol``'s."""
                asked = request.options.get("tol")
                if asked is None or request.gap_tol <= STALL_FACTOR * asked:
                    return super().solve(problem, request)
                sol = super().solve(problem, dataclasses.replace(request, gap_tol=STALL_FACTOR * asked))
                if sol.status in ("optimal", "optimal_within_gap"):
                    sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, request.gap_tol)
                sol.info["gap_tol"] = request.gap_tol
                return sol

            def auto_options(self, structure):
                """No ``tol``: the route stops at the asked ``gap_tol``; below
                :data:`~.hessian_free.HESSIAN_FREE_MIN_DIM` parameters its iterations are capped at 4x
                the cost model's estimate at that gap (:func:`~.route_costs.hessian_free_iterations`),
                so a run that does not converge falls back to the next ranked route."""
                if structure.dim >= HESSIAN_FREE_MIN_DIM:
                    return {}
                return {"max_iterations": int(4 * hessian_free_iterations(structure))}

        _HESSIAN_FREE_ROUTE.append(RankedHessianFreeRoute)
    return _HESSIAN_FREE_ROUTE[0]()


class WeightedMinMax(Problem):
    r"""Shared machinery of :math:`\min_\theta\max_{\lambda\in\Lambda}\lambda^\top f(\theta)-\psi(\lambda)`
    problems with :math:`\Lambda\subset\mathbb R^n_{\ge0}` (FederatedDRO, FairnessAwareFL).

    Subclasses provide :meth:`_support` (the convex support expression of :math:`t` in this
    problem's own CVXPY model), the weight set :math:`\Lambda` as ``weights`` (:attr:`weight_set`
    is what the routes read) and :meth:`objective`. What the routes read of the family is public:
    :attr:`weight_set`, :meth:`support_expression`, :meth:`certify_at`, :meth:`answer_duals`,
    :meth:`fixed_weight_minimum`; their own state lives in their caches (``problem.cache(name)``).
    """

    certificate_name = CERTIFICATE
    supports_multiclass = True

    def __init__(self, federation, loss, l2: float = 0.0, penalize_intercept: bool = True):
        super().__init__(federation, loss, l2, penalize_intercept)
        self._fixed = None          # (problem, theta, lam) of the fixed-weight minimization
        self._theta = None
        self._t = None
        self._epigraph = None
        self._support_value = None

    # ------------------------------------------------------------------ to override
    @property
    def weight_set(self) -> WeightSet:
        """The weight set :math:`\\Lambda` (the family's ``weights``)."""
        return self.weights

    def _support(self, t: cp.Variable):
        """``(expression, constraints)`` of :math:`\\sigma_\\Lambda(t)`."""
        raise NotImplementedError

    def _extra_duals(self) -> dict:
        return {}

    def support_expression(self, t):
        r"""``(expression, constraints)`` of :math:`\sigma_\Lambda(t)` for a *separate* model (a
        route's step problem): the set's ``support_expr``, sharing its DPP parameters, and no side
        effect on this problem's own CVXPY model."""
        expr = self.weight_set.support_expr(t)
        return expr if isinstance(expr, tuple) else (expr, [])

    def answer_duals(self, lam_raw, theta, step_model=None) -> dict:
        """The ``duals`` of a route's answer at ``theta`` with raw weights ``lam_raw``
        (family-specific; default: the raw multipliers). ``step_model``: the route's step problem
        at its last step, whose auxiliary variables some families report."""
        return {"epigraph": lam_raw}

    # ------------------------------------------------------------------ routes
    def routes(self):
        """``[BlockNewtonRoute, HessianFreeRoute, LagrangianSQPRoute, NewtonSQPRoute, ActiveSetRoute,
        ConicRoute, LevelBundleRoute]``. Where the rows are held, ``method="auto"`` takes the route of least
        estimated seconds among those that apply (:mod:`.route_costs`; measured: the Hessian-free
        route for a fixed or smooth weight set from about 10k x 50, the dense ``sqp`` route below
        it and for a polyhedral set up to a few hundred parameters, the conic route only where
        neither applies), each falling back to the next when it cannot certify ``"optimal"``. The
        conic route stays the independent reference (``method="conic"``). On a federated server
        (no rows), for a smooth loss: the ``block_newton`` route from P = 5 (answers of
        (q + 1) P + 1 <= 4 P floats, :mod:`.block_newton`; auto leaves it aside where the rows are
        held), else ``sqp``. A
        piecewise-linear loss with every coordinate penalized takes the active set (no cost model:
        the order stands). The dense ``hessian_sqp`` route is taken only when forced (the
        Lagrangian-Hessian ``sqp`` supersedes it); the bundle route (values and subgradients only:
        the route of a federated server for non-smooth losses, :mod:`drflmodel.client_oracle`)
        only when forced where the rows are held."""
        from .active_set import ActiveSetRoute
        from .level_bundle import LevelBundleRoute
        from ..engine.conic import ConicRoute
        from .lagrangian_sqp import LagrangianSQPRoute
        from .hessian_sqp import NewtonSQPRoute
        from .block_newton import BlockNewtonRoute

        return [BlockNewtonRoute(), _hessian_free_route(), LagrangianSQPRoute(), NewtonSQPRoute(), ActiveSetRoute(), ConicRoute(),
                LevelBundleRoute()]

    def structure_fields(self) -> dict:
        """The kind of the weight set (:func:`~.route_costs.weights_kind`), whether its weight step
        runs in numpy (:func:`~.box_simplex_step.has_numpy_step`) and the size of the conic model
        (:func:`~.route_costs.conic_model_bytes`), which the routes' cost and memory estimates read."""
        from .box_simplex_step import has_numpy_step
        from .route_costs import conic_model_bytes, weights_kind

        return {"weights": weights_kind(self.weight_set), "numpy_weight_step": has_numpy_step(self.weight_set),
                "conic_bytes": conic_model_bytes(int(np.asarray(self.federation.sizes).sum()), self.dim)}

    # ------------------------------------------------------------------ CVXPY
    def _build(self) -> cp.Problem:
        n, d = self.n_clients, self.dim
        self._theta = cp.Variable(d, name="theta")
        self._t = cp.Variable(n, name="t")
        f = cp.hstack(self.objectives.expressions(self._theta))
        self._epigraph = self._t >= f
        support, cons = self._support(self._t)
        self._support_value = support
        return cp.Problem(cp.Minimize(support), [self._epigraph, *cons])

    def fixed_weight_problem(self):
        r"""``(problem, theta, lam)``: :math:`\min_\theta\sum_i\lambda_i f_i(\theta)` with
        :math:`\lambda` a nonnegative ``cp.Parameter`` (compiled once, re-solved per :math:`\lambda`)."""
        if self._fixed is None:
            theta = cp.Variable(self.dim, name="theta_fixed")
            lam = cp.Parameter(self.n_clients, nonneg=True, name="lambda_fixed")
            f = cp.hstack(self.objectives.expressions(theta))
            self._fixed = (cp.Problem(cp.Minimize(lam @ f)), theta, lam)
        return self._fixed

    def fixed_weight_minimum(self, lam, solver: str | None = None, theta0=None) -> dict:
        r"""Solve :math:`\min_\theta\sum_i\lambda_i f_i(\theta)` for a fixed :math:`\lambda\ge0`.

        Smooth loss with :math:`\mu=\sum_i\lambda_i\mu_i>0` or a self-concordant loss (logistic,
        softmax, squared: an unpenalized intercept is fine): Newton's method in numpy from
        ``theta0`` (:mod:`.fixed_weight_bound`, solver ``"numpy-newton"``), whose certified bound is the
        value; if it does not converge to ``1e-13`` relative, and in every other case, the compiled
        conic problem (Clarabel -> ECOS -> SCS, ``solver`` first), closed by the same numpy bound
        at the solver's point where it applies.

        Returns a dict with ``value`` (the certified lower value: the numpy strong-convexity
        bound where available, else the solver's optimal value), ``solver_value``,
        ``numpy_bound`` (or ``None``), ``theta``, ``solver`` and ``iterations`` (Newton).
        """
        lam = np.asarray(lam, float)
        if lam.shape != (self.n_clients,) or np.any(lam < 0) or not np.all(np.isfinite(lam)):
            raise InvalidParameterError(f"lam must be a nonnegative vector of length {self.n_clients}")
        mu = float(lam @ self.objectives.strong_convexity())
        # a federated server's objectives hold no rows (drflmodel.client_oracle): no conic fallback,
        # the Newton bound is returned as it stands (valid, possibly loose)
        rows = getattr(self.objectives, "holds_rows", True)
        if self._numpy_bound_applies(mu):
            start = np.zeros(self.dim) if theta0 is None else np.asarray(theta0, float)
            newton = weighted_newton_bound(self.objectives, lam, start, mu)
            if newton.converged or not rows:
                return {"value": newton.bound, "solver_value": newton.value, "numpy_bound": newton.bound,
                        "theta": newton.theta, "solver": "numpy-newton",
                        "status": "optimal" if newton.converged else "not converged",
                        "iterations": newton.iterations, "bound_kind": newton.kind}
        if not rows:
            return {"value": float("-inf"), "solver_value": float("-inf"), "numpy_bound": None,
                    "theta": None, "solver": None, "status": "no numpy bound applies and the rows are remote"}
        prob, theta, lam_par = self.fixed_weight_problem()
        lam_par.value = lam
        first = solver.upper() if solver is not None and solver.upper() in solver_order(prob) else None
        seq = SolverSequence(first=first, prob=prob, record_value=False)
        for name in seq:
            if seq.run(prob, name) is None:
                continue
            if prob.status in OK_STATUSES:
                th = self.identifiable(np.asarray(theta.value, float))
                out = {"solver_value": float(prob.value), "theta": th, "solver": name,
                       "status": prob.status}
                out["numpy_bound"] = self._strong_convexity_bound(lam, th)
                out["value"] = out["numpy_bound"] if out["numpy_bound"] is not None else out["solver_value"]
                # an inaccurate answer is still fine when the numpy bound (valid whatever the
                # solver's accuracy) is tight; otherwise try the next solver
                tight = (out["numpy_bound"] is not None and out["solver_value"] - out["numpy_bound"]
                         <= 1e-9 * max(1.0, abs(out["solver_value"])))
                if prob.status == cp.OPTIMAL or tight or name == seq.order[-1]:
                    return out
        return {"value": float("-inf"), "solver_value": float("-inf"), "numpy_bound": None,
                "theta": None, "solver": None, "status": seq.failure()}

    def _numpy_bound_applies(self, mu: float) -> bool:
        """Whether :func:`.fixed_weight_bound.certified_lower_bound` can certify the fixed-weight minimum:
        a smooth loss, and strong convexity or a self-concordant loss."""
        return bool(np.isfinite(self.loss.smoothness) and (mu > 0 or self.loss.self_concordance is not None))

    def _strong_convexity_bound(self, lam: np.ndarray, theta: np.ndarray):
        r"""The certified numpy bound of :mod:`.fixed_weight_bound` at a solver's :math:`\hat\theta`
        (strong convexity :math:`g(\hat\theta)-\|\nabla g\|^2/(2\mu)` or self-concordance);
        ``None`` when neither applies or the loss is not smooth (valid there too with a
        subgradient, but loose at kinks: the solver's value is used)."""
        mu = float(lam @ self.objectives.strong_convexity())
        if not self._numpy_bound_applies(mu):
            return None
        values, grads, _ = self.objectives.evaluate(theta, lam, hessian=False)
        bound, _kind = certified_lower_bound(self.objectives, lam, theta, float(lam @ values), lam @ grads, mu)
        return bound if np.isfinite(bound) else None

    # ------------------------------------------------------------------ certificate
    def _raw_dual_weights(self) -> np.ndarray:
        return np.asarray(self._epigraph.dual_value, float).reshape(-1)

    def certify_solved(self, solver: str) -> Solution:
        theta = self.identifiable(np.asarray(self._theta.value, float))
        return self.certify_at(theta, self._raw_dual_weights(), solver, float(self.build().value),
                                {"epigraph": self._raw_dual_weights(), **self._extra_duals()})

    def certify_at(self, theta, lam_raw, solver: str, saddle_value: float, duals: dict,
                   fixed: dict | None = None, evaluated=None) -> Solution:
        r"""The certified :class:`Solution` at :math:`\theta` with candidate weights ``lam_raw``
        (any route's): :math:`U` = the exact objective at :math:`\theta` (numpy), :math:`L` = the
        fixed-weight minimum at ``lam_raw`` made feasible, minus :math:`\psi` (module docstring).
        ``saddle_value`` is the route's own optimal value (reported, not trusted).

        A route that already holds a certified fixed-weight bound for exactly these (feasible)
        weights passes it as ``fixed`` (the dict of :meth:`fixed_weight_minimum`), and the client
        values and gradients at :math:`\theta` as ``evaluated = (values, gradients)``, so no data
        pass is repeated.

        Every certificate made here covers the whole federation, so it is a valid interval whatever
        happens next: the one with the smallest gap is kept (:meth:`best_certificate`; the
        federated solve returns it when a client fault interrupts the route, and calls
        :meth:`forget_certificates` before it starts)."""
        W = self.weight_set
        losses, grads = evaluated if evaluated is not None else (self.client_losses(theta), None)
        U, lam_wc = W.worst_case(losses)
        lam, projected = feasible_weights(W, lam_raw)
        psi = float(W.psi(lam))
        t0 = time.perf_counter()
        if fixed is None or projected:
            fixed = self.fixed_weight_minimum(lam, theta0=theta)   # numpy Newton, else the conic problem
        t_fixed = time.perf_counter() - t0
        L = lower_difference(fixed["value"], psi)   # rounded down: L never above v - psi
        grad_at_opt = lam @ (self.objectives.gradients(theta) if grads is None else grads)
        info = {
            "solver": solver,
            "saddle_value": saddle_value,
            "max_at_theta": float(U),                      # fix θ*, maximize over λ (numpy)
            "min_at_lambda": float(L),                     # fix λ*, minimize over θ
            "lower_bound_kind": lower_bound_kind(fixed),
            "fixed_weight_solver": fixed["solver"],
            "fixed_weight_solver_value": fixed["solver_value"] - psi,
            "fixed_weight_time": t_fixed,
            "certificate_time": t_fixed,
            # saddle residuals
            "stationarity_residual": float(np.linalg.norm(grad_at_opt)),   # ||Σ λ*_i ∇f_i(θ*)||
            "dual_feasibility_residual": float(np.linalg.norm(lam - lam_raw)),
            "dual_weights_projected": projected,
            "dual_optimality_residual": float(U - (lam @ losses - psi)),   # U − F(θ*, λ*) >= 0
            "primal_optimality_residual": float((lam @ losses - psi) - L),  # F(θ*, λ*) − L >= 0
            "worst_case_weights_numpy": lam_wc,
            "weights_distance_to_numpy": float(np.abs(lam - lam_wc).max()),
            "theta_fixed_weight_distance": (float(np.linalg.norm(fixed["theta"] - theta))
                                            if fixed["theta"] is not None else None),
        }
        sol = Solution(theta=theta, weights=lam, client_losses=losses, value=float(U),
                       lower_bound=float(L), upper_bound=float(U), status="optimal",
                       certificate=self.certificate_name, duals=duals, info=info)
        kept = self.cache("certificates")
        if "best" not in kept or sol.relative_gap < kept["best"].relative_gap:
            kept["best"] = copy.copy(sol)
        return sol

    def best_certificate(self) -> Solution | None:
        """A copy of the certificate with the smallest gap that :meth:`certify_point` made since
        :meth:`forget_certificates` (or since a parameter changed the structure), or ``None``. Each
        covers the whole federation, so it stays a valid interval when a later step fails: the
        federated solve returns it after a client stops answering."""
        best = self.cache("certificates").get("best")
        return None if best is None else copy.copy(best)

    def forget_certificates(self) -> None:
        """Drop the record of :meth:`best_certificate` (a new solve starts)."""
        self.cache("certificates").clear()


def lower_bound_kind(fixed: dict) -> str:
    """How the fixed-weight lower value of :meth:`WeightedMinMax.fixed_weight_minimum` was obtained."""
    if fixed["solver"] == "numpy-newton":
        return f"numpy Newton + {fixed.get('bound_kind', 'strong-convexity')} bound"
    if fixed["solver"] == "numpy-dual":
        return f"numpy {fixed['bound_kind']} bound"
    if fixed["numpy_bound"] is not None:
        return "numpy strong-convexity bound"
    return f"{fixed['solver']} optimal value"


class FederatedDRO(WeightedMinMax):
    r"""Federated DRO over client weights: :math:`\min_\theta\max_{\lambda\in\Lambda}\sum_i\lambda_if_i(\theta)-\psi(\lambda)`.

    Parameters
    ----------
    federation : :class:`~drflmodel.data.Federation`.
    loss : :class:`~drflmodel.losses.Loss` whose task matches the federation.
    weights : a :class:`~drflmodel.sets.WeightSet` of size ``federation.n_clients`` inside the
        nonnegative orthant (``Simplex``, ``CVaR``, ``ChiSquare``, ``LpBall``, ``HCVaR``, ``QFFL``).
        Sets with negative weights (``Integrated`` with :math:`\varphi>0`) raise
        :class:`~drflmodel.errors.NotConvexError`: use :class:`~drflmodel.problems.relative.RelativeFairness`.
    l2 : ridge weight :math:`\ell_2\ge0`.
    penalize_intercept : ``False`` leaves the intercept column out of the ridge term
        (scikit-learn's convention; needs an intercept column, see
        :attr:`drflmodel.data.Federation.intercept_column`).

    The loss may be the softmax :class:`~drflmodel.losses.Multinomial` on ``task="multiclass"``
    data: :math:`\theta` is then :math:`W\in\mathbb R^{d\times K}` in the class-major layout of
    :mod:`drflmodel.layout`, reported in its identifiable (centred) representative.

    The solution's ``weights`` are :math:`\lambda^\star` (epigraph multipliers projected onto
    :math:`\Lambda`), ``duals["epigraph"]`` the raw multipliers, ``duals["aux"]`` the auxiliary
    variables of the set's support expression and ``duals["eta"]`` the :math:`\eta^\star` of
    CVaR / HCVaR / :math:`\chi^2` in the convention of the sets' dual forms
    (:math:`\lambda^\star_i=\frac1N(1+(f_i-\eta^\star)/\rho)_+` for :math:`\chi^2`).
    Sweepable parameters are the set's (``alpha``, ``rho``, ``radius``, ...): see :meth:`set_parameter`.
    """

    family = "dro"

    def __init__(self, federation, loss, weights, l2: float = 0.0, penalize_intercept: bool = True):
        super().__init__(federation, loss, l2, penalize_intercept)
        if not isinstance(weights, WeightSet):
            raise InvalidParameterError(
                f"weights must be a drflmodel.sets.WeightSet; got {type(weights).__name__}")
        if weights.n != self.n_clients:
            raise InvalidParameterError(
                f"weights has size n={weights.n} but the federation has {self.n_clients} clients; "
                f"the weight set's size must equal the number of clients")
        if not weights.nonnegative:
            raise NotConvexError(
                f"{weights!r} allows negative client weights, so min-max over it is not convex in "
                f"general (the DRO objective is not a nonnegative combination of convex losses); "
                f"use drflmodel.RelativeFairness, which tests the exact convexity condition and "
                f"certifies the non-convex case")
        self.weights = weights

    def _support(self, t):
        expr = self.weights.support_expr(t)
        cons = []
        if isinstance(expr, tuple):  # a set may return (expression, constraints)
            expr, cons = expr
        in_problem = {p.id for p in expr.parameters()}
        self._parameters = {nm: getattr(self.weights, attr) for nm, attr in _SET_PARAMETERS.items()
                            if getattr(getattr(self.weights, attr, None), "id", None) in in_problem}
        return expr, list(cons)

    def _extra_duals(self) -> dict:
        return self._support_duals(self._support_value, self._t)

    def answer_duals(self, lam_raw, theta, step_model=None) -> dict:
        """The step problem's auxiliary variables (at the last step); ``eta`` recomputed exactly
        at ``theta`` by the set's greedy ``worst_case`` where it has one (Simplex, CVaR, HCVaR)."""
        duals = {"epigraph": lam_raw}
        if step_model is not None:            # the SQP step problem's auxiliaries, where it has them
            duals.update(self._support_duals(step_model.problem.objective.expr, step_model.t))
        try:
            duals["eta"] = float(self.weights.worst_case(self.client_losses(theta), return_eta=True)[2])
        except TypeError:
            pass
        return duals

    def _support_duals(self, support, t) -> dict:
        """``aux`` (the support expression's auxiliary variables) and ``eta`` (the dual forms' convention)."""
        aux = {}
        for v in support.variables():
            if v.id != t.id and v.value is not None:
                val = np.asarray(v.value, float)
                # a scalar stays a float; a vector (one entry per client, also with one client) a vector
                aux[v.name()] = float(val) if val.ndim == 0 else val.reshape(-1)
        out = {"aux": aux} if aux else {}
        etas = [k for k in aux if k.endswith("_eta")]
        if len(etas) == 1:
            # η* in the dual forms' convention: CVaR/HCVaR as is; χ² after
            # undoing the set's shift η = η' + ρ
            out["eta"] = aux[etas[0]] + (self.weights.rho if etas[0] == "chi2_eta" else 0.0)
        return out

    def objective(self, theta) -> float:
        r""":math:`\max_{\lambda\in\Lambda}\lambda^\top f(\theta)-\psi(\lambda)` in numpy (``weights.worst_case``)."""
        return float(self.weights.worst_case(self.client_losses(theta))[0])

    def set_parameter(self, name: str, value) -> None:
        """Change a parameter of the weight set (validated by the set).

        Parameters with a ``set_<name>`` method on the set (``alpha`` of CVaR/HCVaR, ``rho`` of
        ChiSquare, ``radius`` of LpBall) update the set's ``cp.Parameter`` in place, so the next
        solve reuses the compiled problem (DPP) -- unless the structure of the support expression
        changes (``rho`` crossing 0 for ChiSquare), which triggers a rebuild. Any other constructor
        parameter of the set (e.g. ``q`` of QFFL) builds a new set of the same type and rebuilds.
        """
        W = self.weights
        if callable(getattr(W, f"set_{name}", None)):
            before = self._structure_key()
            getattr(W, f"set_{name}")(value)
            if before != self._structure_key():
                self.invalidate_structure()        # the support expression changes form
            if self._cp_problem is not None and (before != self._structure_key()
                                                 or not self._cp_problem.parameters()):
                self._cp_problem = None
            return
        params = W.params()
        if name in params and name != "n":
            new = type(W)(**{**params, name: value})
            self.weights = new
            self._cp_problem = None
            self.invalidate_structure()            # a new set: the routes' compiled models are stale
            return
        raise InvalidParameterError(
            f"{type(W).__name__} has no parameter {name!r}; available: "
            f"{sorted(k for k in params if k != 'n')}")

    def on_federation(self, federation) -> "FederatedDRO":
        """The same problem (loss, weight set, ridge) on ``federation`` -- e.g. a federated server's
        declared federation (:mod:`drflmodel.client_oracle`)."""
        return FederatedDRO(federation, self.loss, weights=self.weights, l2=self.l2,
                            penalize_intercept=self.penalize_intercept)

    def _structure_key(self):
        """What decides the shape of the support expression besides DPP parameters."""
        rho = getattr(self.weights, "rho", None)
        return (type(self.weights).__name__, None if rho is None else rho == 0)

    def __repr__(self) -> str:
        return (f"FederatedDRO(n_clients={self.n_clients}, dim={self.dim}, loss={self.loss!r}, "
                f"weights={self.weights!r}, l2={self.l2})")
