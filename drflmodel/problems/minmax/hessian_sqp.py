r"""SQP with exact client Hessians for the client-weight min-max problems
(``solve(method="hessian_sqp")``, formerly ``"newton"``, taken only when forced: ``method="auto"`` takes the Lagrangian-Hessian SQP, :mod:`.lagrangian_sqp`,
then the conic route -- on 1,150 random large instances of ``benchmarks/sweep_fast_route_fallback.py
--newton-in-auto`` the ``sqp`` route certified every one, so this route never ran after it and no
certificate is lost without it. It stays as an independent second fast route).

Problem (:class:`~drflmodel.problems.minmax.dro.WeightedMinMax`: ``FederatedDRO`` with every nonnegative
weight set, and the FAFL dual): :math:`\min_\theta\Phi(\theta)`, :math:`\Phi(\theta)=\sigma_\Lambda(f(\theta))`,
:math:`\sigma_\Lambda(t)=\max_{\lambda\in\Lambda}\lambda^\top t-\psi(\lambda)` convex and nondecreasing,
:math:`f_i(\theta)=\frac1{N_i}\sum_jL(z_{ij})+\frac{\ell_2}2\|\theta\|^2`.

**Why it is fast.** The data enter only through the :math:`n` client values, gradients and
Hessians; the model below has :math:`d+n` variables whatever :math:`N`, so each step costs one
:math:`O(Nd^2)` pass in numpy plus a conic solve of a problem of fixed size, compiled **once** with
CVXPY parameters (DPP) and re-solved at every step.

**Step (sequential quadratic programming on the epigraph form).** At :math:`\theta_k`, with
:math:`c_i=f_i(\theta_k)`, :math:`g_i=\nabla f_i(\theta_k)` and :math:`H_i=\nabla^2f_i(\theta_k)=R_i^\top R_i`
(Cholesky; positive definite because the route requires :math:`\mu_i>0`, e.g. :math:`\ell_2>0`),

.. math::

    \min_{\Delta,t}\ \sigma_\Lambda(t)\quad\text{s.t.}\quad t_i\ \ge\ c_i+g_i^\top\Delta+\tfrac12\|R_i\Delta\|^2 ,

with :math:`\sigma_\Lambda` the set's own ``support_expr`` (so every set of the conic route works).
Its optimal value :math:`m_k\le\Phi(\theta_k)`; Armijo backtracking on the exact :math:`\Phi` along
:math:`\Delta` with the predicted decrease :math:`\Phi(\theta_k)-m_k`. Near the solution the model is
second-order exact and the steps converge quadratically.

**Certificate (unchanged, independent of the steps).** The multipliers of the model's epigraph
constraints are the candidate weights :math:`\lambda`; the Solution comes from
:meth:`~drflmodel.problems.minmax.dro.WeightedMinMax.certify_at`: :math:`U=\Phi(\theta)` in numpy and
:math:`L=\min_\theta\sum_i\lambda_if_i(\theta)-\psi(\lambda)` with :math:`\lambda` made feasible, by
Newton's method and the strong-convexity bound (:mod:`.fixed_weight_bound`). The route stops when
:math:`U-L\le` ``tol`` :math:`\cdot\max(1,|U|)`, or when the point no longer moves; if the gap is
not within ``gap_tol`` then (or after ``max_steps`` steps), ``method="auto"`` falls back to the next
route and records the attempt in ``info["route_attempts"]``.

**Recovery.** A step problem a solver cannot solve (Clarabel's ``NumericalError`` was seen on
badly scaled clients) is retried with the next installed solver (:func:`~drflmodel.problems.engine.steps.step_solvers`), then
inside a shrinking trust region :math:`\|\Delta\|_\infty\le r` (:data:`~drflmodel.problems.engine.steps.RECOVERY_RADII`, a second
compiled model); only when none answers does the route give up, listing every failure
(:func:`~drflmodel.problems.engine.steps.recovered_step`, shared with the Wasserstein route).
"""

from __future__ import annotations

import time

from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
import numpy as np

from ... import _float64_products as fp

from ...solution import relative_gap
from ..._solver_sequence import default_solver, solve_or_raise
from ..engine.queries import ROWS
from ..engine.route import Route
from ..engine.steps import cached, check_step_options, recovered_step, warm_start
from .fixed_weight_bound import weighted_newton_bound
from .lagrangian_sqp import finish_answer

__all__ = ["NewtonSQPRoute", "SQPModel", "client_hessian_factors", "step_model", "start_point"]

class SQPModel:
    """The step problem of the module docstring, compiled once per (problem structure)."""

    def __init__(self, problem, solver: str, trust_region: bool = False):
        n, d = problem.n_clients, problem.dim
        self.delta = cp.Variable(d, name="delta")
        self.t = cp.Variable(n, name="t_model")
        self.c = cp.Parameter(n, name="c")
        self.G = cp.Parameter((n, d), name="G")
        self.R = [cp.Parameter((d, d), name=f"R{i}") for i in range(n)]
        quad = cp.hstack([cp.sum_squares(R @ self.delta) for R in self.R])
        support, cons = problem.support_expression(self.t)
        self.epigraph = self.t >= self.c + self.G @ self.delta + 0.5 * quad
        self.radius = cp.Parameter(nonneg=True, name="radius") if trust_region else None
        if trust_region:       # the recovery model: the step confined to ||delta||_inf <= radius
            cons = [*cons, cp.norm(self.delta, "inf") <= self.radius]
        self.problem = cp.Problem(cp.Minimize(support), [self.epigraph, *cons])
        self.problem.get_problem_data(solver)        # compile now (DPP: once), not in the first step

    def step(self, values, grads, chol_factors, solver: str, radius: float | None = None):
        """``(delta, model value, multipliers)`` at the given client values/gradients/factors
        (and trust-region ``radius``, for the recovery model)."""
        self.c.value, self.G.value = values, grads
        for R, Ri in zip(self.R, chol_factors):
            R.value = Ri
        if self.radius is not None:
            self.radius.value = radius
        solve_or_raise(self.problem, solver, "step problem")
        return (np.asarray(self.delta.value, float), float(self.problem.value),
                np.asarray(self.epigraph.dual_value, float).reshape(-1))


def step_model(problem, solver: str, trust_region: bool = False) -> SQPModel:
    """The step problem (with a trust region: the recovery of a failed step), compiled once per
    weight set and solver and kept in the route's cache on the problem."""
    name = "newton-region" if trust_region else "newton"
    return cached(problem, name, (problem.weight_set, solver), lambda: SQPModel(problem, solver, trust_region))


def start_point(problem) -> np.ndarray:
    r"""Start of the SQP route: the previous answer of a sweep if any, else the minimizer of
    :math:`\sum_i\lambda^0_if_i` with :math:`\lambda^0` the worst-case weights at
    :math:`\theta=0` (a point of :math:`\Lambda`), by Newton's method."""
    previous = warm_start(problem)
    if previous is not None:
        return previous
    zero = np.zeros(problem.dim)
    lam0 = np.asarray(problem.weight_set.worst_case(problem.objectives.values(zero))[1], float)
    mu = float(lam0 @ problem.objectives.strong_convexity())
    return weighted_newton_bound(problem.objectives, lam0, zero, mu, rtol=1e-8).theta


def client_hessian_factors(objectives, theta) -> np.ndarray:
    r"""Upper Cholesky factors :math:`R_i` (:math:`H_i=R_i^\top R_i`) of every client's Hessian,
    ``(n, d, d)``, from one batched BLAS product :math:`X_i^\top\mathrm{diag}(w_i)X_i`."""
    rows = objectives.stacked_as_stored            # the rows: this route needs ROWS (float32 kept)
    X, y, mask, sizes = rows.X, rows.y, rows.mask, rows.sizes
    if X.dtype == np.float64:
        w = mask * objectives.loss.second_derivative(X @ theta, y) / sizes[:, None]
        H = np.matmul(np.swapaxes(X, 1, 2), X * w[:, :, None])
    else:                                          # float32 rows: products in float64, client by client
        scores = np.stack([fp.times(Xi, theta) for Xi in X])
        w = mask * objectives.loss.second_derivative(scores, y) / sizes[:, None]
        H = np.stack([fp.weighted_gram(Xi, wi) for Xi, wi in zip(X, w)])
    H = H + objectives.l2 * np.eye(X.shape[-1])
    return np.swapaxes(np.linalg.cholesky(H), 1, 2)


class NewtonSQPRoute(Route):
    """SQP with exact client Hessians and the numpy certificate (module docstring). Options:
    ``max_steps`` (SQP steps, default 50) and ``tol`` (the relative certificate gap at which it stops,
    default 1e-10; it also stops once the gap is within ``gap_tol`` and the model predicts no
    further decrease -- the floor set by the step solver's accuracy, about 1e-10)."""

    name = "hessian_sqp"
    aliases = ("newton",)      # its name until 2026-12-06
    options = {"max_steps": 50, "tol": 1e-10}
    needs = frozenset({ROWS})          # the per-client Hessian factors come from the rows
    uses_solver = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        if structure.n_outputs > 1:
            return ("the step problem carries one dense (Kd x Kd) Hessian factor per client; for a "
                    "multi-class model use method='sqp' (the Lagrangian-Hessian SQP)")
        if not structure.smooth:
            return (f"the loss {structure.loss!r} is not smooth (the route needs client Hessians); "
                    f"the conic route applies")
        if not structure.strongly_convex:
            return ("some client objective is not strongly convex (l2 = 0 and a non-quadratic loss or a "
                    "singular Gram matrix); the route needs positive definite client Hessians: set l2 > 0 "
                    "or use method='conic'")
        return self.fits(structure)

    allocates = "dense {P} x {P} matrices"

    def memory(self, structure) -> int:
        """:func:`~.route_costs.newton_bytes`."""
        from .route_costs import newton_bytes

        return newton_bytes(structure)

    def auto_skip(self, structure) -> str | None:
        return ("method='sqp' (the Lagrangian-Hessian SQP) supersedes it in auto: it certified every instance "
                "of benchmarks/sweep_fast_route_fallback.py --newton-in-auto (1,150), so this route never ran after "
                "it; force it with method='hessian_sqp'")

    def complete_options(self, given) -> dict:
        return check_step_options(super().complete_options(given))

    def solve(self, problem, request):
        started = time.perf_counter()
        opts, timing = request.options, {"model": 0.0, "numpy": 0.0, "step_solve": 0.0, "certificate": 0.0}
        solver = default_solver()
        t0 = time.perf_counter()
        model = step_model(problem, solver)
        timing["model"] += time.perf_counter() - t0
        obj, W = problem.objectives, problem.weight_set

        def phi(theta):
            return float(W.worst_case(obj.values(theta))[0])

        theta = start_point(problem)
        value, best, history = phi(theta), None, []
        for k in range(1, opts["max_steps"] + 1):
            t0 = time.perf_counter()
            values, grads = obj.values(theta), obj.gradients(theta)
            factors = client_hessian_factors(obj, theta)
            timing["numpy"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            record = {"iteration": k}

            def solve_step(step_solver, radius):
                if radius is None:
                    return model.step(values, grads, factors, step_solver)
                return step_model(problem, solver, trust_region=True).step(values, grads, factors, step_solver,
                                                                           radius)

            try:
                delta, m_value, lam_raw = recovered_step(solve_step, solver, max(1.0, float(np.abs(theta).max())),
                                                         record)
            except ArithmeticError as exc:
                history.append({**record, "error": str(exc)[:400]})
                break
            timing["step_solve"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            predicted, step = max(value - m_value, 0.0), 1.0
            while True:                                   # Armijo on the exact objective
                cand_value = phi(theta + step * delta)
                if cand_value <= value - 1e-4 * step * predicted or step < 1e-10:
                    break
                step *= 0.5
            if cand_value <= value:
                theta, value = theta + step * delta, cand_value
            timing["numpy"] += time.perf_counter() - t0
            record.update(value=value, model_value=m_value, step=step)
            history.append(record)
            stalled = predicted <= 1e-12 * max(1.0, abs(value)) or step < 1e-10
            if predicted > 100 * max(opts["tol"], request.gap_tol) * max(1.0, abs(value)) and not stalled \
                    and k < opts["max_steps"]:
                continue              # far from the solution: certify later (it costs a Newton solve)
            t0 = time.perf_counter()
            sol = problem.certify_at(theta, lam_raw, "numpy-sqp", m_value, {"epigraph": lam_raw})
            timing["certificate"] += time.perf_counter() - t0
            record["relative_gap"] = gap = relative_gap(sol.lower_bound, sol.upper_bound)
            if best is None or gap < relative_gap(best.lower_bound, best.upper_bound):
                best = sol
            if gap <= opts["tol"] or (gap <= request.gap_tol and stalled):
                break                 # closed, or certified and the model sees no decrease left
            if stalled:               # theta no longer moves: every further step would repeat this one
                record["stalled"] = True
                break
        return finish_answer(problem, self.name, best, history, request, timing, started, solver, step_model=model)
