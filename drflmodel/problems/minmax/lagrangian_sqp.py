r"""A fast certified route for every width and every :math:`K`: SQP with the Lagrangian Hessian
(``solve(method="sqp")``; the client-weight min-max family, multi-class included).

Problem (:class:`~drflmodel.problems.minmax.dro.WeightedMinMax`): :math:`\min_\theta\Phi(\theta)`,
:math:`\Phi(\theta)=\sigma_\Lambda(f(\theta))`, :math:`\sigma_\Lambda(t)=\max_{\lambda\in\Lambda}\lambda^\top t-\psi(\lambda)`.

**Step.** At :math:`\theta_k` with client values :math:`f`, gradients :math:`G=[\nabla f_i]^\top`
(:math:`n\times P`) and the Hessian of the Lagrangian :math:`H=\sum_i\lambda^{(k)}_i\nabla^2f_i(\theta_k)`
at the current weights, the quadratic model

.. math::

    m_k=\min_\Delta\ \sigma_\Lambda(f+G\Delta)+\tfrac12\Delta^\top H\Delta
       =\max_{\lambda\in\Lambda}\ \lambda^\top f-\tfrac12\lambda^\top GH^{-1}G^\top\lambda-\psi(\lambda)

is solved in its **dual** form, a problem in the :math:`n` client weights only (the :math:`n\times n`
matrix :math:`S=GH^{-1}G^\top` is formed in numpy from one Cholesky factor of :math:`H`), with the
set's own constraints and :math:`\psi` (``constraints``/``psi_expr`` of :mod:`drflmodel.sets`),
compiled once (DPP). Then :math:`\Delta=-H^{-1}G^\top\lambda^{(k+1)}` and an Armijo line search on the
exact :math:`\Phi` with the predicted decrease :math:`\Phi(\theta_k)-m_k\ge0`. This is the classical
SQP step (the Hessian of the Lagrangian in the objective, linearized constraints) of the epigraph
form :math:`\min\sigma_\Lambda(t)` s.t. :math:`t\ge f(\theta)`; with exact weights it converges
quadratically. Unlike :mod:`.hessian_sqp` (one :math:`P\times P` cone per client in the step problem) the
step problem has :math:`n` variables whatever :math:`P=Kd` and :math:`N`, and each step costs one
fused pass over the data (values, gradients and the weighted Hessian,
:meth:`~drflmodel.objectives.ClientObjectives.evaluate`) plus :math:`O(P^3)` dense algebra in numpy.
Invariant directions of the layout (softmax with unpenalized features) are deflated as in
:mod:`.fixed_weight_bound`.

The weight step runs in numpy for a fixed set, a box-simplex set (simplex, CVaR, HCVaR) and the
:math:`\chi^2` set (:mod:`.box_simplex_step`); the CVXPY model above serves the other sets.

**Many rows.** From :data:`WARM_START_ROWS` rows the route first runs on a seeded 5% subsample of
every client's rows, then takes its first full step with the exact values and gradients and the
subsample's weighted Hessian (a pass without the Hessian); the later steps use the exact Hessian
of each pass (or, for a fixed weight set, a recent one: below), and every certificate uses the exact one.

**Lazy Hessian.** For a fixed weight set (ERM: the SQP is Newton's method on
:math:`g=\sum_i\bar\lambda_if_i`) on rows held in process, where a Hessian pass costs much more
than a pass without it (:data:`LAZY_MIN_WORK`, :data:`LAZY_MAX_OUTPUTS`), a step whose predicted decrease is small
(:data:`LAZY_DECREMENT`: the local phase, where the Hessian changes little between steps) lets the
next point skip the Hessian and step with this one's (its Cholesky factor included), for at most
:data:`LAZY_MAX_AGE` steps (Shamanskii's variant of Newton's method; the Armijo search on the exact
:math:`\Phi` is unchanged, and a shortened step gets a fresh Hessian). Such a point never enters a
bound: once its step predicts a decrease near the gap that would end the run (:data:`LAZY_GATE`),
the exact Hessian at it is computed (one pass) and the decrement test and the certificate below use
that one.

**Certificate (unchanged, independent of the steps).** :meth:`~drflmodel.problems.minmax.dro.WeightedMinMax.certify_at`:
:math:`U=\Phi(\theta)` in numpy; :math:`L=\min_\theta\sum_i\lambda_if_i-\psi(\lambda)` at the step's
weights, by Newton's method and the strong-convexity or self-concordance bound of :mod:`.fixed_weight_bound`.

For a fixed weight set the certificate is attempted only once the Newton decrement
:math:`\tfrac12\nabla g^\top\tilde H^{-1}\nabla g` (the step model's predicted decrease at the
point) is within four times the gap that would end the run (``tol``, or ``gap_tol`` once a certificate
is held): both bounds of :mod:`.fixed_weight_bound` leave a gap of
at least that much (the strong-convexity one :math:`\|\nabla g\|^2/(2\mu)` with :math:`\mu\le\lambda_{\min}(\tilde H)`,
the self-concordance one :math:`\nabla g^\top\tilde H^{-1}\nabla g/(4\psi)` with :math:`\psi\le\frac12`), so an
earlier attempt cannot close and only costs a bound; the bound itself is unchanged.

**What the method needs of the clients** (the client-oracle interface the federated solve uses):
per step, each client's value :math:`f_i(\theta)`, gradient :math:`\nabla f_i(\theta)` and its share
:math:`\lambda_i\nabla^2f_i(\theta)` of the weighted Hessian (or Hessian-vector products).
"""

from __future__ import annotations

import time

from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
import numpy as np

from ...sets import feasible_weights
from ...solution import relative_gap, status_from_gap
from ..._solver_sequence import default_solver, failure_reason, solve_with_fallback
from .fixed_weight_bound import _Deflated, certified_lower_bound
from ..engine.queries import GRADIENTS, HESSIANS, VALUES
from ..engine.route import Route
from ..engine.steps import cached, check_step_options, keep_warm_start, warm_start
from ..engine.plan import PlanExhausted

__all__ = ["LagrangianSQPRoute", "WeightStepModel", "FixedWeightStep", "weight_step_model", "finish_answer"]

#: rows from which the route warm-starts on a 5% subsample (below, the subsample saves nothing)
WARM_START_ROWS = 100_000

#: from this many parameters ``auto`` prefers the SQP route to the QR-compressed conic model for the
#: squared loss (bench_certified, 20 clients, single BLAS thread: the conic model's time grows like the
#: cube of the cone dimension -- 10k x 50: conic 0.15-0.17 s, sqp 0.14-0.18 s; 2k x 100: 0.9-1.3 s vs
#: 0.15-0.7 s; 10k x 200: 3.5-5.8 s vs 1.05-1.09 s)
QUADRATIC_MIN_PARAMETERS = 100

#: the weight step is a problem in n variables: solve it to near machine precision (the accuracy of
#: its weights is the accuracy of the certificate's lower bound)
_STEP_TOLERANCES = {"CLARABEL": {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-13, "tol_feas": 1e-13,
                                 "tol_ktratio": 1e-10, "max_iter": 500}}


#: the lazy Hessian (module docstring): a fixed weight set on rows held in process whose Hessian pass
#: is dear -- padded rows x P^2 at least :data:`LAZY_MIN_WORK` (about 60 us of BLAS, the price of a
#: step without the Hessian; 1k x 50: 8 Hessian passes in 8 steps -> 6 in 10) ...
LAZY_HESSIAN = True
LAZY_MIN_WORK = 1e6
#: ... with at most this many class scores (a softmax pass costs about what its Hessian adds: at
#: 1k x 20 x 3 classes, 9 steps with 6 Hessian passes measured 2 % slower than 7 with 7) ...
LAZY_MAX_OUTPUTS = 1
#: ... reuses a Hessian once the step's predicted decrease is at most this fraction of the value
#: (the local phase, where the Hessian changes little from step to step) ...
LAZY_DECREMENT = 1e-2
#: ... for at most this many steps after the point it was computed at ...
LAZY_MAX_AGE = 2
#: ... and computes the exact one (for the decrement test and the bound) once the step with the
#: reused Hessian predicts a decrease within this many times the gap that would end the run
LAZY_GATE = 4.0


#: up to this many clients the weight step is compiled once with :math:`f` and :math:`U` as CVXPY
#: parameters (DPP); above it, CVXPY's parameter tensors grow like :math:`n^3` (a q-FFL step on 200
#: clients took 0.5 GB and 4 s in ECOS's DPP path, 1,000 clients were killed at 23 GB), so the
#: problem is built from constants at every step, with :math:`U` cut to the rank of :math:`S`
#: (memory :math:`O(n\,\mathrm{rank}\,S)`)
DPP_MAX_CLIENTS = 64


class WeightStepModel:
    r""":math:`\max_{\lambda\in\Lambda}\lambda^\top f-\frac12\|U\lambda\|^2-\psi(\lambda)` with
    :math:`U^\top U=S`: compiled once per weight set with parameters :math:`f`, :math:`U` up to
    :data:`DPP_MAX_CLIENTS` clients, built from constants at every step above."""

    def __init__(self, weight_set, solver: str):
        n = weight_set.n
        self.weight_set = weight_set
        self.solver = solver
        self.lam = cp.Variable(n, name="lambda_step")
        self.parametric = n <= DPP_MAX_CLIENTS
        if self.parametric:
            self.f = cp.Parameter(n, name="f")
            self.U = cp.Parameter((n, n), name="U")
            self.problem = self._problem(self.f, self.U)
            self.problem.get_problem_data(solver)     # compile now (DPP: once)

    def _problem(self, f, U) -> cp.Problem:
        W = self.weight_set
        objective = f @ self.lam - 0.5 * cp.sum_squares(U @ self.lam) - W.psi_expr(self.lam)
        return cp.Problem(cp.Maximize(objective), list(W.constraints(self.lam)))

    def solve(self, f: np.ndarray, S: np.ndarray):
        """``(lambda, model value)`` for values ``f`` and curvature ``S`` (PSD, ``n x n``): the
        compiled solver first, then the other installed ones (a failed step is retried, not fatal)."""
        ev, V = np.linalg.eigh(0.5 * (S + S.T))
        U = np.sqrt(np.maximum(ev, 0.0))[:, None] * V.T
        if self.parametric:
            self.f.value, self.U.value = f, U
        else:
            keep = ev > 1e-14 * max(float(ev[-1]), 1e-300)       # the rank of S: the rest adds nothing
            self.problem = self._problem(np.asarray(f, float), U[keep] if keep.any() else U[-1:])
        attempts = []
        if solve_with_fallback(self.problem, first=self.solver, tolerances=_STEP_TOLERANCES,
                               attempts=attempts) is None or self.lam.value is None:
            raise ArithmeticError(f"weight step problem: {failure_reason(attempts)}")
        return np.asarray(self.lam.value, float), float(self.problem.value)


class FixedWeightStep:
    r"""The weight step of a fixed weight set :math:`\Lambda=\{\bar\lambda\}` (one client, ERM,
    ``HCVaR`` at level 1: :meth:`~drflmodel.sets.WeightSet.single_point`): its answer is
    :math:`\bar\lambda` and the model value
    :math:`\bar\lambda^\top f-\frac12\bar\lambda^\top S\bar\lambda-\psi(\bar\lambda)`, in numpy -- no
    CVXPY problem is compiled or solved (the SQP is then Newton's method on
    :math:`\sum_i\bar\lambda_if_i`)."""

    solver = "numpy"

    def __init__(self, weight_set, point: np.ndarray):
        self.weight_set = weight_set
        self.lam = np.asarray(point, float)
        self.psi = float(weight_set.psi(self.lam))
        #: the step's weights as a point of the set (:func:`~drflmodel.sets.feasible_weights` of
        #: ``lam``), computed once: every step answers the same point
        self.feasible = feasible_weights(weight_set, self.lam)[0]

    def solve(self, f: np.ndarray, S: np.ndarray):
        lam = self.lam
        return lam.copy(), float(lam @ f) - 0.5 * float(lam @ S @ lam) - self.psi


def weight_step_model(problem, solver: str | None = None):
    """The weight step problem of ``problem``'s weight set, built once per weight set (kept in the
    route's cache on the problem): for a fixed weight set the numpy :class:`FixedWeightStep`; for a
    box-simplex set (simplex, CVaR, HCVaR) or the :math:`\\chi^2` set of at most
    :data:`~.box_simplex_step.NUMPY_STEP_MAX_CLIENTS` clients the numpy active-set
    step of :func:`~.box_simplex_step.numpy_weight_step` (CVXPY is not imported); else the CVXPY
    :class:`WeightStepModel` compiled for ``solver`` (``None``: the default solver)."""
    from . import box_simplex_step

    W = problem.weight_set
    point = W.single_point()
    if point is not None:
        return cached(problem, "sqp", (W, "fixed"), lambda: FixedWeightStep(W, point))
    if box_simplex_step.has_numpy_step(W):
        conic = lambda: WeightStepModel(W, solver or default_solver())      # noqa: E731
        return cached(problem, "sqp", (W, "numpy"), lambda: box_simplex_step.numpy_weight_step(W, conic))
    solver = solver or default_solver()
    return cached(problem, "sqp", (W, solver), lambda: WeightStepModel(W, solver))


def finish_answer(problem, method: str, best, history: list, request, timing: dict, started: float,
                  solver: str, step_model=None):
    """The answer of an SQP route of the min-max family: the best certified Solution with the duals
    of its weights (:meth:`~.dro.WeightedMinMax.answer_duals`), the status its gap gives and the
    iterations' record -- or the named failure when no step certified (``best is None``). The point
    is kept as the warm start of the next solve (a sweep)."""
    if best is None:
        return problem.failed_solution([{"method": method, "history": history}])
    best.duals = problem.answer_duals(best.duals["epigraph"], best.theta, step_model=step_model)
    best.status = status_from_gap(best.lower_bound, best.upper_bound, request.gap_tol)
    keep_warm_start(problem, best.theta)
    best.info.update({"iterations": len(history), "history": history, "gap_tol": request.gap_tol,
                      "time_split": {**timing, "total": time.perf_counter() - started},
                      "step_solver": solver})
    return best


#: what a federated server (no rows, so no conic route) can do when the objective has a free direction
FREE_DIRECTION_ON_A_SERVER = (
    "a federated server holds no row, so the conic route is not open to it: penalize every coordinate "
    "(l2 > 0 and penalize_intercept=True), or use a self-concordant loss (Logistic, Softmax, Squared), or "
    "certify where the rows are (method='conic' on the pooled problem)")


def conic_is_compressed(structure, route: str) -> str | None:
    """Why ``method="auto"`` leaves a quadratic loss with few parameters to the conic route (its
    model is QR-compressed: one (P+2)-cone per client, whatever N, and it answers the conic duals:
    the set's auxiliary variables), or ``None``."""
    if structure.quadratic and structure.dim < QUADRATIC_MIN_PARAMETERS and structure.rows_local:
        return (f"quadratic loss with P = {structure.dim} < {QUADRATIC_MIN_PARAMETERS} parameters: the conic "
                f"model is QR-compressed (one (P+2)-cone per client, whatever N) and as fast; force with "
                f"method={route!r}")
    return None


def _cvxpy_errors() -> tuple:
    """CVXPY's ``SolverError`` when CVXPY has been imported (a numpy step cannot raise it)."""
    import sys

    return (sys.modules["cvxpy"].error.SolverError,) if "cvxpy" in sys.modules else ()


class LagrangianSQPRoute(Route):
    """SQP with the Lagrangian Hessian and the numpy certificate (module docstring). Options:
    ``max_steps`` (default 50) and ``tol`` (the relative certificate gap at which it stops, default
    1e-10, ``gap_tol`` under ``method="auto"``; it also stops once the gap is within ``gap_tol`` and
    the model predicts no further decrease)."""

    name = "sqp"
    options = {"max_steps": 50, "tol": 1e-10}
    #: one fused pass per step: client values, gradients and the weighted Hessian (a federated
    #: server asks them of the clients, or computes them from a quadratic loss's statistics)
    needs = frozenset({VALUES, GRADIENTS, HESSIANS})
    uses_solver = False
    may_fall_back = True
    #: the start's Hessian evaluation and one step's two (:func:`~.route_plans.sqp_plan`)
    start_needs = {"hessians": 3, "evaluations": 3, "values": 2}

    def applies(self, structure) -> str | None:
        if not structure.smooth:
            return (f"the loss {structure.loss!r} is not smooth (the route needs client Hessians); "
                    f"the conic route applies")
        if not (structure.strongly_convex or structure.self_concordant):
            why = ("the weighted objective is neither strongly convex (l2 = 0 or an unpenalized intercept) "
                   "nor self-concordant, so the numpy certificate cannot close; ")
            if structure.rows_local:
                return why + "use method='conic'"
            return why + FREE_DIRECTION_ON_A_SERVER
        return self.fits(structure)

    allocates = "dense {P} x {P} matrices"

    def memory(self, structure) -> int:
        """:func:`~.route_costs.sqp_bytes`."""
        from .route_costs import sqp_bytes

        return sqp_bytes(structure)

    def cost(self, structure) -> float | None:
        """:func:`~.route_costs.sqp_seconds` (``None`` on a federated server)."""
        from .route_costs import sqp_seconds

        return sqp_seconds(structure, WARM_START_ROWS)

    def auto_skip(self, structure) -> str | None:
        return conic_is_compressed(structure, self.name)

    def auto_options(self, structure) -> dict:
        """``tol``: the asked ``gap_tol`` (``method="auto"`` stops once the user's gap is certified;
        forced, the route goes on to its own 1e-10), unless that is 0."""
        return {"tol": float(structure.gap_tol)} if structure.gap_tol > 0 else {}

    def complete_options(self, given) -> dict:
        return check_step_options(super().complete_options(given))

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        timing = {"model": 0.0, "warm_start": 0.0, "numpy": 0.0, "step_solve": 0.0, "certificate": 0.0}
        # a fixed, box-simplex or chi-square weight set steps in numpy (FixedWeightStep, BoxSimplexStep,
        # ChiSquareStep): no conic solver, CVXPY not imported
        t0 = time.perf_counter()
        model = weight_step_model(problem)
        solver = model.solver
        timing["model"] += time.perf_counter() - t0
        obj, W = problem.objectives, problem.weight_set
        fixed = isinstance(model, FixedWeightStep)
        structure = problem.structure
        lazy = (LAZY_HESSIAN and fixed and structure.rows_local and structure.n_outputs <= LAZY_MAX_OUTPUTS
                and structure.padded_rows * float(structure.dim) ** 2 >= LAZY_MIN_WORK)

        plan = _state_plan(obj, opts["max_steps"])          # a federated server: stated to the clients
        best, history = None, []
        try:
            t0 = time.perf_counter()
            theta, lam, sub_hessian = self._start(problem, model, request)
            timing["warm_start"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            if sub_hessian is None:
                point = _Point(obj, W, theta, lam)                        # the one data pass of the step
            else:       # after a subsample warm start: exact values and gradients, the subsample's Hessian
                values, grads, _ = obj.evaluate(theta, lam, hessian=False)
                point = _Point(obj, W, theta, lam, (values, grads, sub_hessian), exact_hessian=False)
            timing["numpy"] += time.perf_counter() - t0
            predicted, step, ridge = np.inf, 1.0, 0.0
            for k in range(1, opts["max_steps"] + 1):
                record = {"iteration": k, "value": point.value}
                history.append(record)
                if point.D.chol is None:              # no certificate here; a damped step may still move
                    record["error"] = "Hessian not positive definite"
                    ridge = max(10.0 * ridge, 1e-6 * point.scale)
                # certificate at (theta, lam) from this same pass, once the steps are small
                stalled = predicted <= 1e-12 * max(1.0, abs(point.value)) or step < 1e-10
                closing = max(opts["tol"], request.gap_tol) * max(1.0, abs(point.value))
                attempt = point.D.chol is not None and (predicted <= 100 * closing or stalled or k == opts["max_steps"])
                pending = None
                if attempt and lazy and not point.exact_hessian and ridge == 0.0 and not stalled \
                        and k < opts["max_steps"]:
                    # a reused Hessian: the step with it first; the exact Hessian (for the decrement test
                    # and the bound) only once that step's decrement is near the target
                    target = closing if best is not None else opts["tol"] * max(1.0, abs(point.value))
                    pending = point.step(model)
                    attempt = point.value - pending[2] <= LAZY_GATE * target
                if attempt and not point.exact_hessian:     # the tests below and the bound need the exact H
                    pending = None
                    t0 = time.perf_counter()
                    point = point.exact()
                    timing["numpy"] += time.perf_counter() - t0
                if attempt and fixed and ridge == 0.0 and point.exact_hessian and not stalled and k < opts["max_steps"]:
                    # a fixed set: the certificate's gap is at least this point's Newton decrement
                    # (module docstring), so it cannot close while that exceeds the target: step on
                    # before any certificate only one within tol ends the loop (a first one is an improvement)
                    target = closing if best is not None else opts["tol"] * max(1.0, abs(point.value))
                    pending = point.step(model)
                    attempt = point.value - pending[2] <= 4.0 * target
                if attempt:
                    t0 = time.perf_counter()
                    sol = self._certify(problem, point)
                    timing["certificate"] += time.perf_counter() - t0
                    record["relative_gap"] = gap = relative_gap(sol.lower_bound, sol.upper_bound)
                    improved = best is None or gap < 0.5 * relative_gap(best.lower_bound, best.upper_bound)
                    if best is None or gap < relative_gap(best.lower_bound, best.upper_bound):
                        best = sol
                    if gap <= opts["tol"] or (gap <= request.gap_tol and (stalled or not improved)) \
                            or k == opts["max_steps"]:
                        break             # closed, or certified and no longer improving
                t0 = time.perf_counter()
                try:
                    lam_new, delta, m_value = pending if pending is not None else point.step(model, ridge)
                except (ArithmeticError, *_cvxpy_errors()) as exc:
                    record["error"] = str(exc)[:200]
                    if ridge >= point.scale:
                        break
                    ridge = max(100.0 * ridge, 1e-6 * point.scale)    # damp the model and try again
                    continue
                timing["step_solve"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                predicted = max(point.value - m_value, 0.0)
                # the lazy Hessian (module docstring): the next point steps with this point's Hessian
                reused = (lazy and point.age < LAZY_MAX_AGE and ridge == 0.0
                          and predicted <= LAZY_DECREMENT * max(1.0, abs(point.value)))
                point, step = point.advance(delta, lam_new, predicted, lazy=reused)
                if not point.exact_hessian and reused:
                    record["next_hessian"] = "reused"
                # Levenberg-Marquardt damping of the step model: raised after short steps (the quadratic
                # model was poor, e.g. a curvature that vanishes on most samples), lowered after full ones
                ridge = (max(10.0 * ridge, 1e-6 * point.scale) if step < 0.25
                         else (0.0 if ridge < 1e-12 * point.scale else ridge / 10.0) if step == 1.0 else ridge)
                record.update(model_value=m_value, step=step, ridge=ridge)
                timing["numpy"] += time.perf_counter() - t0
        except PlanExhausted as exc:              # the server's own limit, stated up front: the best so far
            history.append({"iteration": len(history) + 1, "plan_exhausted": str(exc)})
        stops = [h["plan_exhausted"] for h in history if "plan_exhausted" in h]
        if best is None:
            _release(obj, plan)
            failed = problem.failed_solution([{"method": self.name, "history": history}])
            if plan is not None:
                failed.info["plan"] = {**plan.to_dict(), **({"exhausted": stops[-1]} if stops else {})}
            return failed
        if relative_gap(best.lower_bound, best.upper_bound) > request.gap_tol:
            t0 = time.perf_counter()                     # last resort: polish the bound by Newton steps
            try:                                         # its Newton steps count against the plan too
                polished = problem.certify_at(best.theta, best.weights, "numpy-sqp", best.info["saddle_value"],
                                              {"epigraph": best.weights})
                if relative_gap(polished.lower_bound, polished.upper_bound) < relative_gap(best.lower_bound,
                                                                                          best.upper_bound):
                    best = polished
            except PlanExhausted as exc:
                history.append({"polish": "stopped", "plan_exhausted": str(exc)})
            timing["certificate"] += time.perf_counter() - t0
        _release(obj, plan)
        sol = finish_answer(problem, self.name, best, history, request, timing, started, solver)
        if plan is not None:
            stops = [h["plan_exhausted"] for h in history if "plan_exhausted" in h]
            sol.info["plan"] = {**plan.to_dict(), **({"exhausted": stops[-1]} if stops else {})}
        return sol

    def _start(self, problem, model, request):
        """``(theta, lambda, H)`` to start from: a sweep's previous answer; else, for many rows, the SQP
        run on a seeded 5% subsample of every client's rows (a few cheap passes that leave the full
        problem a step or two from its solution), with the subsample's weighted Hessian ``H`` at that
        point (the first full step takes it with the exact values and gradients: a pass without the
        Hessian; every certificate is computed with the exact Hessian); else :math:`\\theta=0` with
        its worst-case weights (``H`` is ``None`` in those two cases)."""
        obj, W = problem.objectives, problem.weight_set
        previous = warm_start(problem)
        theta = previous if previous is not None else np.zeros(problem.dim)
        structure = problem.structure
        if previous is None and structure.rows_local and structure.rows >= WARM_START_ROWS:
            sub = obj.subsample(0.05, minimum=4 * problem.dim, seed=request.seed if isinstance(request.seed, int) else 0)
            point = _Point(sub, W, theta, feasible_weights(W, np.asarray(W.worst_case(sub.values(theta))[1]))[0])
            for _ in range(30):
                if point.D.chol is None:
                    break
                try:
                    lam_new, delta, m_value = point.step(model)
                except ArithmeticError:
                    break                             # a warm start only: the full problem goes on
                predicted = max(point.value - m_value, 0.0)
                point, step = point.advance(delta, lam_new, predicted)
                if predicted <= 1e-8 * max(1.0, abs(point.value)) or step < 1e-10:
                    break
            # the subsample's Hessian at the point it ends at, for the weights the full problem starts with
            return point.theta, point.lam, (point.H if point.D.chol is not None else None)
        if isinstance(model, FixedWeightStep):          # the set's one point: no pass for its weights
            return theta, model.feasible.copy(), None
        return theta, feasible_weights(W, np.asarray(W.worst_case(obj.values(theta))[1], float))[0], None

    @staticmethod
    def _certify(problem, point):
        """The certified Solution at ``(theta, lam)`` from one pass's values, gradients and
        (deflated) weighted Hessian: :math:`U=\\Phi(\\theta)`, :math:`L` = the numpy bound of
        :mod:`.fixed_weight_bound` for :math:`\\sum_i\\lambda_if_i` at :math:`\\theta` minus :math:`\\psi(\\lambda)`."""
        obj, lam = problem.objectives, point.lam
        mu = float(lam @ obj.strong_convexity())
        g = float(lam @ point.values)
        bound, kind = certified_lower_bound(obj, lam, point.theta, g, lam @ point.grads, mu, point.D)
        fixed = {"value": bound, "solver_value": g, "numpy_bound": bound, "theta": point.theta,
                 "solver": "numpy-newton", "status": "optimal", "iterations": 0, "bound_kind": kind}
        return problem.certify_at(point.theta, lam, "numpy-sqp", point.value, {"epigraph": lam},
                                  fixed=fixed, evaluated=(point.values, point.grads))


def _state_plan(obj, max_steps: int):
    """On a federated server (objectives with ``announce``), the route's
    :func:`~drflmodel.problems.minmax.route_plans.sqp_plan` from ``max_steps``, lowered to what the default
    policy has left in this run, stated to the clients with the route's first query; ``None`` in
    process."""
    if not callable(getattr(obj, "announce", None)):
        return None
    from ..engine.plan import left_on
    from .route_plans import sqp_plan

    plan = sqp_plan(max_steps, left_on(obj.channel))
    obj.announce(plan)
    return plan


def _release(obj, plan) -> None:
    """The route is done: its plan no longer counts the server's queries (a route ``auto`` runs next
    states its own)."""
    if plan is not None:
        obj.announce(None)


class _Point:
    """An SQP iterate with everything one fused pass gives at it: client values and gradients,
    :math:`\\Phi`, and the weighted Hessian at the iterate's weights (deflated, factorized)."""

    def __init__(self, obj, W, theta, lam, evaluated=None, value=None, exact_hessian: bool = True,
                 curvature_of=None):
        """``evaluated``: ``(values, gradients, H)`` of a pass at ``theta`` (default: one fused pass
        here). ``curvature_of``: an earlier point of the same fixed weights whose Hessian and its
        factor this point's steps reuse (a lazy Hessian; ``evaluated`` then gives the values and
        gradients only)."""
        self.obj, self.W, self.theta, self.lam = obj, W, theta, lam
        # False: H is the subsample's or an earlier point's (steps only, never a certificate)
        self.exact_hessian = exact_hessian and curvature_of is None
        if curvature_of is not None:
            self.values, self.grads = evaluated[0], evaluated[1]
            self.H, self.scale, self.D = curvature_of.H, curvature_of.scale, curvature_of.D
            self.age = curvature_of.age + 1
        else:
            self.values, self.grads, self.H = evaluated if evaluated is not None else obj.evaluate(theta, lam)
            self.scale = max(float(np.abs(self.H).max()), 1e-300)
            self.D = _Deflated(self.H, obj.layout.invariant_basis(), self.scale)
        self.value = float(W.worst_case(self.values)[0]) if value is None else value
        if curvature_of is None:
            self.age = 0 if self.exact_hessian else LAZY_MAX_AGE   # a subsample's Hessian is not reused

    def exact(self) -> "_Point":
        """This point with the exact weighted Hessian at it: one Hessian pass, the values and
        gradients kept (the certificate and the Newton-decrement test need the exact Hessian)."""
        if self.exact_hessian:
            return self
        H = self.obj.weighted_hessian(self.theta, self.lam)
        return _Point(self.obj, self.W, self.theta, self.lam, (self.values, self.grads, H), self.value)

    def step(self, model, ridge: float = 0.0):
        """The weight step ``(lambda_new, delta, model value)``, with the Hessian damped by
        ``ridge * I`` in the step model only (the certificate always uses the exact Hessian)."""
        D = self.D if ridge == 0.0 else _Deflated(self.H + ridge * np.eye(self.H.shape[0]),
                                                   self.obj.layout.invariant_basis())
        if D.chol is None:
            raise ArithmeticError("Hessian not positive definite")
        basis = D.basis
        G = self.grads if basis.shape[1] == 0 else self.grads - (self.grads @ basis) @ basis.T   # (n, P)
        M = D.solve(G.T)                                               # H^{-1} G^T, (P, n)
        lam_new, m_value = model.solve(self.values, G @ M)
        # a fixed set: its one point, made feasible once (FixedWeightStep.feasible)
        lam_next = model.feasible.copy() if isinstance(model, FixedWeightStep) else feasible_weights(self.W, lam_new)[0]
        return lam_next, -D.project(M @ lam_new), m_value

    def advance(self, delta, lam_new, predicted, lazy: bool = False):
        """Armijo on the exact :math:`\\Phi` along ``delta``: the full step is evaluated in one fused
        pass (values, gradients and the Hessian at ``lam_new``), which is the next iterate when
        accepted; shorter steps are tried on values alone. ``lazy`` (fixed weights only): the full
        step's pass skips the Hessian and, when accepted, the next iterate steps with this point's
        Hessian (a shorter step gets a fresh one). Returns ``(next point, step)``."""
        full = theta_new = self.theta + delta
        evaluated = self.obj.evaluate(full, lam_new, hessian=not lazy)
        value = float(self.W.worst_case(evaluated[0])[0])
        step = 1.0
        while value > self.value - 1e-4 * step * predicted and step >= 1e-10:
            step *= 0.5
            theta_new = self.theta + step * delta
            value = float(self.W.worst_case(self.obj.values(theta_new))[0])
            evaluated = None
        if value > self.value:                    # no decrease: keep the point, take the new weights
            theta_new, evaluated = self.theta, None
        # the full step's pass already gave Phi there (evaluated is None otherwise: recomputed)
        if evaluated is not None and lazy:
            return _Point(self.obj, self.W, theta_new, lam_new, evaluated, value, curvature_of=self), step
        return _Point(self.obj, self.W, theta_new, lam_new, evaluated, value if evaluated is not None else None), step
