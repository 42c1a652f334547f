r"""The Hessian-free certified route of the client-weight min-max family
(``solve(method="hessian_free")``): steps from values, gradients and Hessian-vector products only,
memory :math:`O(NK+Pm)` -- never a :math:`P\times P` array -- for linear heads with
:math:`P=10^4`-:math:`10^5` parameters (the Scaff-PD paper's Table 1 trains a softmax head on
512 ResNet-18 features of CIFAR-100: :math:`P=51{,}300`).

Problem (:class:`~drflmodel.problems.dro.WeightedMinMax`: ``FederatedDRO`` with every weight set,
``FairnessAwareFL``, and ERM as a fixed weight set):
:math:`\min_\theta\Phi(\theta)`, :math:`\Phi(\theta)=\sigma_\Lambda(f(\theta))`,
:math:`\sigma_\Lambda(t)=\max_{\lambda\in\Lambda}\lambda^\top t-\psi(\lambda)`.

**A smooth composition.** With a centre :math:`c\in\Lambda` and :math:`\tau\ge0`,

.. math::

    \sigma_\tau(t)=\max_{\lambda\in\Lambda}\ \lambda^\top t-\psi(\lambda)-\tfrac\tau2\|\lambda-c\|^2,
    \qquad \lambda_\tau(t)=\mathrm{prox}_{\psi/\tau,\Lambda}\big(c+t/\tau\big),

is differentiable with :math:`\nabla\sigma_\tau=\lambda_\tau` (Danskin), so
:math:`\Phi_\tau=\sigma_\tau\circ f` has the gradient :math:`\sum_i\lambda_{\tau,i}\nabla f_i` -- one
backward pass over the rows with row weights :math:`\lambda_{\tau,c(j)}/N_{c(j)}`
(:mod:`drflmodel.matrix_free`), whatever :math:`n`. Where :math:`\sigma_\Lambda` is already smooth
-- the :math:`\chi^2` penalty with :math:`\rho>0` (its :math:`\psi` is :math:`\rho n`-strongly convex:
:math:`\nabla\sigma` is :math:`1/(\rho n)`-Lipschitz), q-FFL (:math:`\sigma(t)=\sum_i(t_i)_+^{q+1}/(q+1)`)
-- and for a fixed weight set (one client, ERM, ``HCVaR`` at level 1: :math:`\Lambda=\{\bar\lambda\}`),
:math:`\tau=0` and :math:`\Phi_0=\Phi`. The polyhedral sets (simplex, CVaR, HCVaR, :math:`\ell_1`/
:math:`\ell_\infty` balls) take :math:`\tau>0` and a continuation :math:`\tau\to0`:
:math:`\Phi-\frac\tau2\max_\Lambda\|\lambda-c\|^2\le\Phi_\tau\le\Phi`.

**Steps** (:mod:`.hessian_free_steps`). For a smooth or fixed :math:`\sigma_\Lambda`, L-BFGS on
:math:`\Phi_0=\Phi` (one forward and one backward pass per evaluation, memory :math:`O(Pm)`). For
the polyhedral sets a quasi-Newton SQP: the :math:`n`-variable weight problem of the SQP step with
the Lagrangian Hessian replaced by a limited-memory BFGS approximation, so each step costs one pass
forward and one backward (``algorithm="auto"``). Measured on 20 clients (``benchmarks/
bench_certified.py --scale``): L-BFGS with the smoothing continuation above needed 200-1,100
evaluations for CVaR where the quasi-Newton SQP needs 11-16; for the smooth :math:`\chi^2` set
L-BFGS is faster on small problems (no weight problem to solve per step) and the SQP on large ones
(:data:`SQP_MIN_SIZE`). Both are available through ``algorithm``.

**Preconditioned** (``precondition=True``, the default): both step algorithms run in the variables
:math:`z=D^{-1}\theta` with the Jacobi estimate :math:`D^{-2}_{(c,k)}=\beta\,\overline{x_k^2}+\ell_2\omega_k`
(:func:`diagonal_scaling`: :math:`\beta` the loss's smoothness, :math:`\overline{x_k^2}` the mean
squared column, a sum over the rows -- on a federated server the clients' column statistics, asked
once), so columns in different units (:math:`10^{-3}` next to :math:`10^3`) cost about the iterations
of standardized ones; the certificate is computed at :math:`\theta=Dz` in the original variables.

**Certificate, at every iterate, independent of the steps.** :math:`U=\Phi(\theta)` exactly
(``weights.worst_case``, numpy); :math:`\hat\lambda=\lambda_\tau(f(\theta))\in\Lambda`; :math:`L=`
the Hessian-free lower bound on :math:`\min_\theta\sum_i\hat\lambda_if_i` of
:mod:`.hessian_free_bound` (strong convexity of the ridge at fixed weights, and the intercepts'
exact partial minimum when they are unpenalized) minus :math:`\psi(\hat\lambda)`. Weak duality:
:math:`L\le\min\Phi\le U`. Its gradient is the one L-BFGS already holds
(:math:`\nabla\Phi_\tau=\sum_i\hat\lambda_i\nabla f_i`), so checking it costs no pass; the route stops
at the first iterate whose certificate closes within ``gap_tol``. The bound's own work (the
intercepts' polish, one more backward pass) is attempted only where :func:`optimistic_gap` leaves half
the gap still to reach (:class:`~.hessian_free_steps.Certifier`); when, never how, it is computed.

**float32 rows** (held in process). The steps evaluate float32 products
(:meth:`~drflmodel.matrix_free.MatrixFreeObjectives.steps_view`, about twice as fast); their rounding
error bound is far above the gap (:mod:`drflmodel._float32_products`), so no certificate is taken from
them: each is predicted from the float32 point and, when the prediction closes, recomputed in
float64 arithmetic at the same :math:`\theta` and :math:`\hat\lambda` (:func:`evaluation_certificate`).
Steps whose float32 rounding stalls them hand over to float64 steps (``info["step_precision"]``).
"""

from __future__ import annotations

import time

import numpy as np

from ...matrix_free import MatrixFreeObjectives
from ...sets import WeightSet, LpBall, feasible_weights
from ...solution import relative_gap, status_from_gap
from .hessian_free_bound import hessian_free_bound, hessian_free_bound_applies, hessian_free_structure_refusal
from .hessian_free_steps import Certifier, Evaluation, LBFGSRun, QuasiNewtonSQPRun
from ..engine.plan import PlanExhausted
from ..engine.memory import (dense_route_bytes, dense_route_refusal, format_bytes, matrix_free_route_bytes,
                             memory_reason)
from ..engine.queries import GRADIENTS, HESSIAN_VECTOR_PRODUCTS, VALUES
from ..engine.route import Route
from ..engine.steps import cached, keep_warm_start, warm_start

__all__ = ["HessianFreeRoute", "SmoothedSupport", "diagonal_scaling", "fixed_weights_of", "optimistic_gap",
           "smooth_support"]


def fixed_weights_of(W: WeightSet) -> np.ndarray | None:
    """The one point of :math:`\\Lambda` when the weight set is a single point (one client; a
    box-capped simplex whose caps sum to 1, e.g. ``HCVaR`` at level 1), else ``None``
    (:meth:`~drflmodel.sets.WeightSet.single_point`)."""
    return W.single_point()


def smooth_support(W: WeightSet) -> bool:
    """Whether :math:`\\sigma_\\Lambda` is differentiable (no smoothing needed): :math:`\\chi^2` with
    :math:`\\rho>0`, q-FFL (:meth:`~drflmodel.sets.WeightSet.support_is_smooth`)."""
    return W.support_is_smooth()


class SmoothedSupport:
    """:math:`\\sigma_\\tau` and :math:`\\lambda_\\tau` of the module docstring for a weight set."""

    def __init__(self, W: WeightSet, tau: float = 0.0):
        self.W = W
        self.fixed = fixed_weights_of(W)
        self.tau = 0.0 if (self.fixed is not None or smooth_support(W)) else float(tau)
        if self.tau > 0:
            start = W.center if isinstance(W, LpBall) else np.full(W.n, 1.0 / W.n)
            self.center = np.asarray(W.project(start), float)
        else:
            self.center = None

    @property
    def needs_smoothing(self) -> bool:
        return self.fixed is None and not smooth_support(self.W)

    def __call__(self, t: np.ndarray) -> tuple[float, np.ndarray]:
        """``(sigma_tau(t), lambda_tau(t))``."""
        if self.fixed is not None:
            lam = self.fixed
            return float(lam @ t) - float(self.W.psi(lam)), lam
        if self.tau == 0.0:
            value, lam = self.W.worst_case(t)[:2]
            return float(value), np.asarray(lam, float)
        # a shift along 1 leaves the prox of a set inside {sum = 1} unchanged and avoids the
        # cancellation of huge entries when tau is small; the result is projected once more so it
        # lies in the set to round-off
        shift = float(np.max(t)) if self.W.in_simplex else 0.0
        lam = np.asarray(self.W.prox(self.center + (t - shift) / self.tau, 1.0 / self.tau), float)
        if self.W.in_simplex:
            lam = np.asarray(self.W.project(lam), float)
        diff = lam - self.center
        return float(lam @ t) - float(self.W.psi(lam)) - 0.5 * self.tau * float(diff @ diff), lam


class HessianFreeRoute(Route):
    r"""The Hessian-free route (module docstring). Options: ``max_iterations`` (iterations over all
    stages, default 2000), ``memory`` (quasi-Newton pairs kept, default 10) and ``algorithm``
    (``"auto"``: L-BFGS for a fixed weight set and for a smooth :math:`\sigma_\Lambda` below
    :data:`SQP_MIN_SIZE` rows x parameters, the quasi-Newton SQP otherwise;
    ``"lbfgs"``: L-BFGS with the smoothing continuation for every set; ``"sqp"``: the quasi-Newton
    SQP for every set) and ``tol`` (the relative gap at which it stops; default ``None``: the first
    iterate certified within ``gap_tol``; a smaller value goes on, down to the floor the bound's
    floating-point allowance sets, about :math:`10^{-16}N` relative) and ``precondition`` (default
    ``True``: the diagonal scaling of :func:`diagonal_scaling`; ``False``: the steps in
    :math:`\theta` itself) and ``plan`` (a federated server only: the
    :class:`~drflmodel.problems.engine.plan.QueryPlan` stated to the clients before the first query; default
    :func:`~drflmodel.problems.minmax.route_plans.hessian_free_plan`, the default policy's budgets -- the route
    stops at the plan's first limit with its best certificate, ``info["plan"]``)."""

    name = "hessian_free"
    options = {"max_iterations": 2000, "memory": 10, "algorithm": "auto", "tol": None, "precondition": True,
               "plan": None}
    #: values and gradients, and the bound's per-client means (the Hessian-vector-product kind): in
    #: process computed from the rows (:class:`~drflmodel.matrix_free.MatrixFreeObjectives`, one pass
    #: per evaluation), on a federated server answered by the clients (``evaluate`` and
    #: ``bound_terms``: :mod:`drflmodel.client_oracle.remote_points`)
    needs = frozenset({VALUES, GRADIENTS, HESSIAN_VECTOR_PRODUCTS})
    uses_solver = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        if not structure.smooth:
            return (f"the loss {structure.loss!r} is not smooth (the route needs gradients and "
                    f"Hessian-vector products); the conic or bundle route applies")
        reason = hessian_free_structure_refusal(structure)
        if reason is not None:
            return f"its certificate needs strong convexity from the ridge: {reason}"
        if not structure.rows_local:          # a federated server: O(nP) floats, the rows stay with the clients
            if structure.quadratic and structure.n_outputs == 1:
                return ("a quadratic loss on a federated server is solved from the clients' sufficient "
                        "statistics, asked once (method='sqp')")
            return None
        return memory_reason(matrix_free_route_bytes(structure), "the matrix-free objectives",
                             "no route of this problem fits: use fewer rows or parameters, or a machine with "
                             "more memory")

    def auto_skip(self, structure) -> str | None:
        if self.choice(structure) is not None:
            return None
        return (f"P = {structure.dim} < {HESSIAN_FREE_MIN_DIM} parameters and the dense P x P matrices fit in "
                f"memory: on a federated server the block_newton and sqp routes certify there in fewer exchanges; "
                f"force with method='hessian_free'")

    def choice(self, structure) -> str | None:
        """Why ``method="auto"`` takes this route (recorded in ``info["route_choice"]``), or ``None``
        when it leaves the problem to the dense routes: from :data:`HESSIAN_FREE_MIN_DIM`
        parameters, or when the dense ``sqp`` route's :math:`P\\times P` matrices would not fit in
        memory."""
        if structure.dim >= HESSIAN_FREE_MIN_DIM:
            return (f"P = {structure.dim} >= {HESSIAN_FREE_MIN_DIM} parameters: Hessian-free (about "
                    f"{format_bytes(matrix_free_route_bytes(structure))}; the dense sqp route would need about "
                    f"{format_bytes(dense_route_bytes(structure, 'sqp'))} and O(N P^2) flops per step)")
        refused = dense_route_refusal(structure, "sqp")
        if refused is not None:
            return f"the dense routes do not fit in memory: {refused}"
        return None

    def certificate(self, problem, mf, W, ev, gap_tol, force=False, tol=None):
        """The certificate at an evaluation (:func:`evaluation_certificate`; a subclass may attempt it less often)."""
        return evaluation_certificate(problem, mf, W, ev, gap_tol, force, tol)

    def complete_options(self, given) -> dict:
        from ..._validation import check_choice, check_int, check_real

        opts = super().complete_options(given)
        opts["max_iterations"] = check_int(opts["max_iterations"], "max_iterations", low=1)
        opts["memory"] = check_int(opts["memory"], "memory", low=1)
        opts["algorithm"] = check_choice(opts["algorithm"], "algorithm", ("auto", "lbfgs", "sqp"))
        if opts["tol"] is not None:
            opts["tol"] = check_real(opts["tol"], "tol", low=0.0, low_open=True)
        if not isinstance(opts["precondition"], (bool, np.bool_)):
            from ...errors import InvalidParameterError

            raise InvalidParameterError(f"precondition must be True or False; got {opts['precondition']!r}")
        return opts

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        reason = hessian_free_bound_applies(problem.objectives)
        if reason is not None:
            raise self.refusal(problem, f"its certificate needs strong convexity from the ridge: {reason}")
        mf = _matrix_free(problem)
        W = problem.weight_set
        theta = _start(problem)
        # a subclass that schedules its own attempts (the block route) keeps them
        own = type(self).certificate is HessianFreeRoute.certificate
        certifier = Certifier(lambda ev, force: self.certificate(problem, mf, W, ev, request.gap_tol, force,
                                                                 opts["tol"]), request.gap_tol, opts["tol"],
                              optimistic=(lambda ev: optimistic_gap(problem, W, ev)) if own else None)
        support = SmoothedSupport(W)
        smooth = not support.needs_smoothing
        algorithm = opts["algorithm"] if opts["algorithm"] != "auto" else _algorithm(support, mf)
        plan = _announce(mf, opts["plan"])
        try:
            return self._run(problem, request, mf, W, theta, certifier, algorithm, smooth, plan, started)
        except PlanExhausted as exc:               # the server's own limit: the best certificate met, if any
            plan.final = True                      # the reserve: one last certificate at the last point
            try:
                if certifier.last is not None:
                    certifier.check(certifier.last, {}, force=True)
            except PlanExhausted:
                pass
            if certifier.best is None:
                failed = problem.failed_solution([{"method": self.name, "plan": plan.to_dict(), "reason": str(exc)}])
                failed.info["plan"] = {**plan.to_dict(), "exhausted": str(exc)}
                return failed
            sol = self._finish(problem, request, mf, certifier, [], 0, algorithm, [], None, started, started)
            sol.info["plan"] = {**plan.to_dict(), "exhausted": str(exc)}
            return sol

    def _run(self, problem, request, mf, W, theta, certifier, algorithm, smooth, plan, started):
        opts = request.options
        scaling = diagonal_scaling(mf) if opts["precondition"] else None
        setup = time.perf_counter() - started
        history, evaluations, stages, precisions = [], 0, [], []
        for steps in _step_objectives(mf):            # float32 steps first for float32 rows, then float64
            precisions.append("float64" if steps is mf else "float32")
            left = opts["max_iterations"] - len(history)
            theta, run_history, run_evaluations, stages = self._steps(problem, steps, W, theta, certifier, algorithm,
                                                                      smooth, scaling, opts["memory"], left)
            history += run_history
            evaluations += run_evaluations
            if certifier.closed or len(history) >= opts["max_iterations"]:
                break
        if certifier.best is None:
            return problem.failed_solution([{"method": self.name, "history": history[-20:]}])
        sol = self._finish(problem, request, mf, certifier, history, evaluations, algorithm, stages, scaling,
                           started, started + setup)
        sol.info["step_precision"] = precisions
        if plan is not None:
            sol.info["plan"] = plan.to_dict()
        return sol

    def _steps(self, problem, mf, W, theta, certifier, algorithm, smooth, scaling, memory, max_iterations):
        """One run of the step algorithm on ``mf`` (the objectives or their float32
        :meth:`~drflmodel.matrix_free.MatrixFreeObjectives.steps_view`) from ``theta``: ``(theta,
        history, evaluations, smoothing stages)``."""
        if algorithm == "sqp":
            run = QuasiNewtonSQPRun(mf, W, certifier, memory, weight_model(problem), scaling=scaling)
            theta = run.minimize(theta, max_iterations)
            if certifier.best is None:                  # no step certified: the worst-case weights at the end
                certifier.check(Evaluation.of_support(mf, SmoothedSupport(W), theta), {}, force=True)
            return theta, run.history, run.evaluations, []
        history, evaluations, stages = [], 0, _tau_schedule(W, mf, theta) if not smooth else [0.0]
        for tau in stages:
            support = SmoothedSupport(W, tau)
            run = LBFGSRun(mf, support, certifier, memory,
                           stage_done=None if support.tau == 0 else _stage_done(problem, W), scaling=scaling)
            theta = run.minimize(theta, max_iterations - len(history))
            history += run.history
            evaluations += run.evaluations
            if certifier.closed or len(history) >= max_iterations or run.stalled:   # stalled: float64 steps next
                break
        return theta, history, evaluations, stages

    def _finish(self, problem, request, mf, certifier, history, evaluations, algorithm, stages, scaling,
                started, setup_done):
        t0 = time.perf_counter()
        sol = _solution(problem, mf, certifier.best[1])
        certificate = certifier.seconds + time.perf_counter() - t0
        sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, request.gap_tol)
        keep_warm_start(problem, sol.theta)
        total = time.perf_counter() - started
        setup = setup_done - started
        sol.info.update({"iterations": len(history), "evaluations": evaluations, "history": history,
                         "gap_tol": request.gap_tol, "algorithm": algorithm, "smoothing": stages,
                         "preconditioned": scaling is not None,
                         "certificate_attempts": certifier.attempts, "certificate_skipped": certifier.skipped,
                         "time_split": {"setup": setup, "certificate": certificate,
                                        "iterations": total - setup - certificate, "total": total}})
        return sol


#: from this many parameters ``method="auto"`` takes the Hessian-free route before the dense ``sqp``
#: route (which builds and factors the P x P weighted Hessian, O(N P^2) per step: ERM took 12.9 s at
#: P = 2,010 and 258 s at P = 5,130 by the dense route, against 0.9 s and 3.0 s Hessian-free in
#: ``benchmarks/bench_certified.py --scale``). Below it the Hessian-free route is often faster too
#: (one BLAS thread, medians of 3, 4-20 clients: chi^2 at P = 5-650 0.1-0.4x the sqp route's time,
#: ERM 10k x 50 0.016 s vs 0.11 s; CVaR from about 3e5 rows x parameters): where the rows are held
#: ``auto`` ranks the two by their estimated seconds at the asked gap (:mod:`.route_costs`); on a
#: federated server it leaves this size to the ``block_newton`` and ``sqp`` routes
HESSIAN_FREE_MIN_DIM = 1000

#: from this many rows x parameters (one pass: ~2 N P flops) ``algorithm="auto"`` takes the
#: quasi-Newton SQP for a smooth varying set too: its weight problem (~10-20 ms) is then cheap next to
#: a pass, and it needs fewer passes (chi^2, 20 clients: 15 vs 24 iterations at 50k x 512 x 10, 18 vs 34
#: at 50k x 512 x 100, 23 s vs 50 s); below, L-BFGS is faster (10k x 50: 13 iterations, no weight problem)
SQP_MIN_SIZE = 100_000_000


def _algorithm(support, mf) -> str:
    """``"lbfgs"`` for a fixed weight set, and for a smooth one below :data:`SQP_MIN_SIZE`;
    ``"sqp"`` otherwise."""
    if support.fixed is not None:
        return "lbfgs"
    if support.needs_smoothing or mf.n_rows * mf.dim >= SQP_MIN_SIZE:
        return "sqp"
    return "lbfgs"


def _matrix_free(problem):
    """The problem's matrix-free objectives (built once per problem and loss, kept in the route's
    cache): over its rows (:class:`~drflmodel.matrix_free.MatrixFreeObjectives`), or, on a
    federated server, the objectives' own ``matrix_free()`` (the clients answer values, gradients
    and the bound's per-client means: :mod:`drflmodel.client_oracle.remote_points`)."""
    objectives = problem.objectives
    remote = getattr(objectives, "matrix_free", None)
    build = remote if remote is not None else (lambda: MatrixFreeObjectives(objectives))
    return cached(problem, "hessian_free", (objectives, objectives.loss), build)


def diagonal_scaling(mf) -> np.ndarray | None:
    r"""The diagonal preconditioner :math:`D` of the steps (module docstring):
    :math:`\delta_{(c,k)}=(\beta\,\overline{x_k^2}+\ell_2\omega_k)^{-1/2}` for class :math:`c` and
    column :math:`k`, with :math:`\overline{x_k^2}=\frac1N\sum_jx_{jk}^2` (the clients' column
    statistics summed: :meth:`~drflmodel.matrix_free.MatrixFreeObjectives.column_second_moments`) and
    :math:`\beta` the loss's smoothness. :math:`\beta\overline{x_k^2}` bounds the diagonal of the data
    term's Hessian (:math:`\ell''\le\beta`), so :math:`D^{-2}` is its Jacobi estimate. A column that
    is zero on every row and carries no ridge gets :math:`\delta=1`. ``None`` when the column
    statistics are not available (a federated client that does not send them): the steps run
    unscaled."""
    moments = getattr(mf, "column_second_moments", None)
    per_client = moments() if moments is not None else None
    if per_client is None:
        return None
    sizes = np.asarray(mf.sizes, float)
    column = sizes @ np.asarray(per_client, float) / sizes.sum()              # (d,)
    beta = float(mf.loss.smoothness)
    diagonal = beta * np.tile(column, mf.n_outputs) + mf.penalty_diagonal
    diagonal = np.where(diagonal > 0, diagonal, 1.0)
    return 1.0 / np.sqrt(diagonal)


def _announce(mf, plan):
    """On a federated server (matrix-free objectives with ``announce``), the route's plan stated to the
    clients before its first query (``plan``: a :class:`~drflmodel.problems.engine.plan.QueryPlan`, or
    ``None`` for :func:`~drflmodel.problems.minmax.route_plans.hessian_free_plan` lowered to what the default
    policy has left in this run, :func:`~drflmodel.problems.engine.plan.left_on`); ``None`` in process."""
    announce = getattr(mf, "announce", None)
    if announce is None:
        return None
    from ..engine.plan import QueryPlan, left_on
    from .route_plans import hessian_free_plan

    if plan is None:
        plan = hessian_free_plan().within(left_on(mf.oracle.channel))
    elif not isinstance(plan, QueryPlan):
        from ...errors import InvalidParameterError

        raise InvalidParameterError(f"plan must be a drflmodel.problems.engine.plan.QueryPlan or None; got "
                                    f"{type(plan).__name__}")
    plan.used = {}
    announce(plan)
    return plan


def weight_model(problem):
    """The weight problem of the quasi-Newton SQP (once per weight set; the ``sqp`` route's model,
    shared): numpy for a fixed or box-simplex set, so CVXPY is imported only for the others."""
    from .lagrangian_sqp import weight_step_model

    return weight_step_model(problem)


def _start(problem) -> np.ndarray:
    """A sweep's previous answer (any fast route's), else :math:`\\theta=0`."""
    previous = warm_start(problem)
    return previous if previous is not None else np.zeros(problem.dim)


def _tau_schedule(W, mf, theta) -> list[float]:
    """The smoothing levels of a polyhedral set: from 1% of the objective's scale down by 10x
    to :math:`10^{-12}` of it (the route stops at the first level whose certificate closes)."""
    scale = max(1.0, abs(float(W.worst_case(mf.values(theta))[0])))
    return [scale * 10.0 ** (-k) for k in range(2, 13)]


def _stage_done(problem, W):
    r"""A smoothing stage ends once its own optimization error (the strong-convexity estimate
    :math:`\|\nabla\Phi_\tau\|^2/(2\mu)`) is a tenth of the smoothing gap :math:`\Phi-\Phi_\tau`."""
    def done(ev) -> bool:
        mu = problem.objectives.l2 * float(np.sum(ev.lam))
        smoothing_gap = float(W.worst_case(ev.values)[0]) - ev.smoothed
        return float(ev.gradient @ ev.gradient) / (2.0 * mu) <= 0.1 * smoothing_gap
    return done


def optimistic_gap(problem, W, ev: Evaluation) -> float:
    r"""The cheap estimate of the relative gap a certificate at ``ev`` can reach, with no pass over the
    rows: :math:`U=\Phi(\theta)` against :math:`\lambda^\top f-\psi(\lambda)-\|\nabla g\|^2/(2\mu)`
    for the evaluation's weights and its whole gradient (the intercepts' entries too; the
    strong-convexity bound if every coordinate had the modulus :math:`\mu`). It decides only when the
    certificate is attempted (:class:`~.hessian_free_steps.Certifier`), never the bound."""
    lam = ev.lam
    mu = problem.objectives.l2 * float(np.sum(lam))
    if mu <= 0:
        return float("inf")
    U = float(W.worst_case(ev.values)[0]) if ev.upper is None else float(ev.upper)
    gradient = ev.gradient
    return relative_gap(float(lam @ ev.values) - float(W.psi(lam)) - float(gradient @ gradient) / (2.0 * mu), U)


def evaluation_certificate(problem, mf, W, ev: Evaluation, gap_tol: float, force: bool = False,
                 tol: float | None = None) -> dict | None:
    r"""The certificate at an evaluation: :math:`U=\Phi(\theta)`, :math:`\hat\lambda` = the
    evaluation's weights made feasible, :math:`L` = the Hessian-free fixed-weight bound minus
    :math:`\psi(\hat\lambda)`. Unless ``force``, a cheap necessary test runs first (the
    strong-convexity term of the penalized coordinates alone must leave room for the gap; ``None``
    when it does not), so the bound's extra work (the intercepts' partial minimum) is done only
    near the end.

    **float32 steps.** An evaluation from float32 products (``ev.point.exact`` false:
    :meth:`~drflmodel.matrix_free.MatrixFreeObjectives.steps_view`) is never certified itself: its
    rounding error is not bounded tightly enough (:mod:`drflmodel._float32_products`). The whole
    certificate is first predicted from it (no float64 pass); only when the prediction closes
    within ``tol`` (or ``force``) are the values, the weighted gradient and the bound recomputed
    at the same :math:`\theta` and weights in float64 arithmetic (one pass forward, one back, one
    more for the intercepts' polish), and that certificate is returned -- rigorous as for float64
    rows (a float32 feature is a float64 number)."""
    if not getattr(ev.point, "exact", True):
        return _float32_screened_certificate(problem, mf, W, ev, gap_tol, force, tol)
    return _certificate_at(problem, mf, W, ev, gap_tol, force, tol)


def _float32_screened_certificate(problem, mf, W, ev, gap_tol, force, tol):
    """The float64 certificate at a float32 evaluation's point, when its float32 prediction closes
    (:func:`evaluation_certificate`)."""
    if not force:
        predicted = _certificate_at(problem, mf, W, ev, gap_tol, False, tol)
        if predicted is None or relative_gap(predicted["lower"], predicted["upper"]) > min(gap_tol, tol or gap_tol):
            return None
    lam = feasible_weights(W, ev.lam)[0]
    point = mf.at(ev.theta)                             # float64 arithmetic: the certified pass
    exact = Evaluation(ev.theta, point, lam, point.weighted_gradient(lam), ev.smoothed)
    return _certificate_at(problem, mf, W, exact, gap_tol, True, tol)


def _certificate_at(problem, mf, W, ev: Evaluation, gap_tol: float, force: bool, tol: float | None) -> dict | None:
    """The certificate of :func:`evaluation_certificate` at ``ev`` as it is (exact or not)."""
    U = float(W.worst_case(ev.values)[0])
    lam, projected = feasible_weights(W, ev.lam)
    psi = float(W.psi(lam))
    mu = problem.objectives.l2 * float(lam.sum())
    if mu <= 0:
        return None
    gradient = ev.gradient if not projected else ev.point.weighted_gradient(lam)
    if not force:
        penalized = mf.penalty_diagonal > 0
        optimistic = float(lam @ ev.values) - psi - float(gradient[penalized] @ gradient[penalized]) / (2.0 * mu)
        if relative_gap(optimistic, U) > gap_tol:
            return None
    target = U - min(gap_tol, tol or gap_tol) * max(1.0, abs(U)) + psi
    bound = hessian_free_bound(mf, lam, ev.point, weighted_gradient=gradient, target=target)
    return {"lower": bound.bound - psi, "upper": U, "bound": bound, "lam": lam, "evaluation": ev,
            "floor": _allowance_floor(bound, U)}


def _allowance_floor(bound, U: float) -> float | None:
    r"""The relative gap the bound's floating-point allowances alone leave (``None`` without them):
    :math:`(a_v+a_g^2/(2\mu))/\max(1,|U|)` with :math:`a_v`, :math:`a_g` the value and gradient-norm
    allowances (:mod:`.hessian_free_bound`; they lower :math:`L` by at least this much). Nearby
    iterates have about the same allowances, so no later certificate goes much below it: the
    :class:`~.hessian_free_steps.Certifier` stops there when ``tol`` lies below it."""
    d = bound.details
    if "value_allowance" not in d or "gradient_allowance" not in d or not d.get("modulus"):
        return None
    return (d["value_allowance"] + d["gradient_allowance"] ** 2 / (2.0 * d["modulus"])) / max(1.0, abs(U))


def _step_objectives(mf) -> list:
    """The objectives the steps evaluate, in turn: for float32 rows held here, first their float32
    view (:meth:`~drflmodel.matrix_free.MatrixFreeObjectives.steps_view`), then -- only if those
    steps end without a closed certificate (their rounding stalls them) -- the float64 objectives
    from where they stopped; otherwise the objectives alone."""
    view = getattr(mf, "steps_view", None)
    fast = view() if view is not None else mf
    return [mf] if fast is mf else [fast, mf]


def _solution(problem, mf, cert):
    """The certified :class:`~drflmodel.solution.Solution` (through ``certify_at``, with the
    Hessian-free bound as the fixed-weight minimum)."""
    ev, lam, bound = cert["evaluation"], cert["lam"], cert["bound"]
    fixed = {"value": bound.bound, "solver_value": bound.value, "numpy_bound": bound.bound,
             "theta": ev.theta, "solver": "numpy-dual", "status": "optimal", "iterations": 0,
             "bound_kind": f"Hessian-free {bound.kind}"}
    sol = problem.certify_at(problem.identifiable(ev.theta), lam, "numpy-hessian-free", ev.smoothed,
                             {"epigraph": lam}, fixed=fixed, evaluated=(ev.values, ev.point.gradients()))
    sol.duals = problem.answer_duals(lam, sol.theta)
    sol.info["hessian_free_bound"] = bound.to_dict()
    return sol
