r"""A certified route for non-smooth losses that needs only values and subgradients: the level
bundle method (``solve(method="level_bundle")``, formerly ``"bundle"``; the client-weight
min-max family).

Problem (:class:`~drflmodel.problems.minmax.dro.WeightedMinMax`): :math:`\min_\theta\Phi(\theta)`,
:math:`\Phi(\theta)=\sigma_\Lambda(f(\theta))`, :math:`f_i=h_i+r`, with the data term :math:`h_i`
convex (any loss of the catalogue: hinge, pinball, :math:`\varepsilon`-insensitive, ...) and the
ridge :math:`r(\theta)=\frac12\sum_jp_j\theta_j^2` (:math:`p` = ``penalty_diagonal``) known exactly.
The method touches the data only through :math:`h_i(\theta_k)` and a subgradient
:math:`g_{ik}\in\partial h_i(\theta_k)` (``objectives.evaluate(theta, hessian=False)``), one query
of every client per step -- so it runs unchanged on a federated server (:mod:`drflmodel.client_oracle`).

**Model.** Each answer gives a cut :math:`h_i(\theta)\ge a_{ik}+g_{ik}^\top\theta` (lowered by a
floating-point allowance), and :math:`\check\Phi(\theta)=\sigma_\Lambda(\check f(\theta))` with
:math:`\check f_i=\max_k(a_{ik}+g_{ik}^\top\theta)+r(\theta)\le f_i` is a lower model
(:math:`\sigma_\Lambda` is nondecreasing since :math:`\Lambda\ge0`).

**Lower bound, rigorous (evaluated in numpy, not read from a solver).** For any
:math:`\lambda\in\Lambda` and convex combinations :math:`\mu_{i\cdot}` of each client's cuts,

.. math::

    \min_\theta\Phi\ \ge\ \min_\theta\ \sum_i\lambda_i\Big(\sum_k\mu_{ik}(a_{ik}+g_{ik}^\top\theta)\Big)
      +\Big(\sum_i\lambda_i\Big)r(\theta)-\psi(\lambda)
    \ =\ \bar a-\sum_j\frac{c_j^2}{2sp_j}-\psi(\lambda),

with :math:`\bar a=\sum_{ik}\lambda_i\mu_{ik}a_{ik}`, :math:`c=\sum_{ik}\lambda_i\mu_{ik}g_{ik}`,
:math:`s=\sum_i\lambda_i` (weak duality; every :math:`p_j>0`). The multipliers come from the
model's minimization (the duals :math:`\nu_{ik}` of the cuts: :math:`\lambda_i=\sum_k\nu_{ik}`,
projected onto :math:`\Lambda`, :math:`\mu_{ik}=\nu_{ik}/\lambda_i`); whatever the solver's
accuracy, the bound is valid. **Upper bound** :math:`U=\min_k\Phi(\theta_k)` from the exact values.

**Step** (C. Lemaréchal, A. Nemirovskii, Yu. Nesterov 1995, "New variants of bundle methods",
Mathematical Programming 69): with the best bound :math:`L_k` and :math:`U_k`, the level
:math:`\ell=L_k+\alpha(U_k-L_k)` and the next point is the projection of the best point onto
:math:`\{\theta:\check\Phi(\theta)\le\ell\}`. Both small problems are compiled once (DPP: a fixed
number of cut slots per client; a full client replaces its oldest inactive cut). The gap closes
at the method's :math:`O(1/\epsilon^2)` worst-case rate; when the step budget ends first the
answer is ``optimal_within_gap`` with its true gap.

Applies when every coordinate is penalized (:math:`\ell_2>0`, intercept penalized): the bound
above is :math:`-\infty` along an unpenalized direction.
"""

from __future__ import annotations

import time

from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
import numpy as np

from ...sets import feasible_weights
from ...solution import Solution, relative_gap, status_from_gap
from ..._solver_sequence import default_solver, failure_reason, solve_with_fallback
from ..engine.queries import GRADIENTS, VALUES
from ..engine.route import Route
from .lagrangian_sqp import FREE_DIRECTION_ON_A_SERVER
from ..engine.plan import PlanExhausted

__all__ = ["LevelBundleRoute", "CERTIFICATE", "bundle_model_bytes"]

CERTIFICATE = "cutting-plane Lagrangian bound (level bundle)"
_EPS = np.finfo(float).eps


class _Model:
    """The cutting-plane model's two problems, compiled once: its minimization (for the duals)
    and the projection onto a level set."""

    def __init__(self, weight_set, n: int, P: int, slots: int, penalty_diagonal: np.ndarray, solver: str):
        self.n, self.P, self.m = n, P, slots
        self.A = cp.Parameter(n * slots, name="cut_offsets")
        self.G = cp.Parameter((n * slots, P), name="cut_slopes")
        self.level = cp.Parameter(name="level")
        self.center = cp.Parameter(P, name="center")
        rows = np.repeat(np.arange(n), slots)
        sqrt_p = np.sqrt(penalty_diagonal)

        def parts():
            theta, t, q = cp.Variable(P), cp.Variable(n), cp.Variable()
            support = weight_set.support_expr(t)
            support, extra = support if isinstance(support, tuple) else (support, [])
            cuts = t[rows] >= self.A + self.G @ theta + q
            return theta, support, [cuts, q >= 0.5 * cp.sum_squares(cp.multiply(sqrt_p, theta)), *extra]

        self.theta, support, cons = parts()
        self.cuts = cons[0]
        self.minimize = cp.Problem(cp.Minimize(support), cons)
        self.theta_p, support_p, cons_p = parts()
        self.project = cp.Problem(cp.Minimize(cp.sum_squares(self.theta_p - self.center)),
                                  [*cons_p, support_p <= self.level])
        self.solver = solver

    def set_cuts(self, A: np.ndarray, G: np.ndarray) -> None:
        self.A.value = A.reshape(-1)
        self.G.value = G.reshape(-1, self.P)

    def solve_min(self):
        """``(theta, cut duals)`` of the model's minimization: the compiled solver first, then the
        other installed ones; :class:`ArithmeticError` when none answers."""
        attempts = []
        if solve_with_fallback(self.minimize, first=self.solver, attempts=attempts) is None:
            raise ArithmeticError(f"cutting-plane model: {failure_reason(attempts)}")
        nu = np.maximum(np.asarray(self.cuts.dual_value, float).reshape(self.n, self.m), 0.0)
        return np.asarray(self.theta.value, float), nu

    def solve_projection(self, center: np.ndarray, level: float):
        """The projection of ``center`` onto the level set (the compiled solver first, then the
        others), or ``None`` when no solver answers (the route then steps to the model's minimizer)."""
        self.center.value, self.level.value = center, level
        if solve_with_fallback(self.project, first=self.solver) is None:
            return None
        return np.asarray(self.theta_p.value, float)


def _state_plan(obj, max_steps: int):
    """On a federated server (objectives with ``announce``), the route's plan stated to the clients with
    its first query: one value-and-gradient evaluation at :math:`\theta=0` and one per step, so
    ``1 + max_steps`` evaluations, lowered to what the default policy has left in this run
    (:func:`~drflmodel.problems.engine.plan.left_on`: a route ``auto`` or a forced route's fallback runs
    after another); ``None`` in process."""
    if not callable(getattr(obj, "announce", None)):
        return None
    from ..engine.plan import QueryPlan, left_on

    plan = QueryPlan("level_bundle", {"evaluations": 1 + int(max_steps)},
                     derivation=f"one evaluation at theta = 0 and one per step, {int(max_steps)} steps; lowered to "
                                "the default policy's budget left in this run").within(left_on(obj.channel))
    obj.announce(plan)
    return plan


def bundle_model_bytes(n: int, P: int, cuts: int = 40) -> int:
    r"""Peak bytes of the route's two compiled CVXPY problems (:class:`_Model`): CVXPY's parametrized
    canonicalization of the :math:`nm\times P` slope parameter times :math:`\theta` grows as
    :math:`nmP^2` -- measured 32-51 bytes per :math:`nmP^2` over :math:`n\in\{2,4,8\}`,
    :math:`P\in\{100,\dots,800\}`, :math:`m=40` (peak resident size after compiling and solving both
    problems, with about 220 MB of CVXPY and solvers): :math:`36\,nmP^2+2.5\cdot10^8`. At
    :math:`P=2{,}717` a run asked 13 GiB."""
    return int(36 * int(n) * int(cuts) * int(P) ** 2 + 2.5e8)


def lagrangian_bound(weight_set, A, G, nu, penalty_diagonal) -> tuple[float, np.ndarray]:
    """The module docstring's bound from cut duals ``nu`` (shape ``(n, m)``); returns
    ``(bound, lambda)`` with :math:`\\lambda\\in\\Lambda`."""
    raw = nu.sum(axis=1)
    lam, _ = feasible_weights(weight_set, raw)
    mu = np.where(raw[:, None] > 0, nu / np.where(raw > 0, raw, 1.0)[:, None], 0.0)
    mu[raw <= 0, -1] = 1.0                                  # any convex combination is valid
    w = lam[:, None] * mu                                   # (n, m)
    a_bar = float(np.sum(w * A))
    c = np.einsum("im,imp->p", w, G)
    s = float(lam.sum())
    psi = float(weight_set.psi(lam))
    if s <= 0:
        bound = a_bar - psi if not np.any(c) else float("-inf")
    else:
        bound = a_bar - float(np.sum(c * c / (2.0 * s * penalty_diagonal))) - psi
    slack = 16.0 * _EPS * (float(np.sum(np.abs(w * A))) + abs(bound) + psi)
    return bound - slack, lam


class LevelBundleRoute(Route):
    """The level bundle method with its numpy certificate (module docstring). Options:
    ``max_steps`` (steps = queries of the clients' values and subgradients; default 300),
    ``tol`` (relative gap at which it stops; default: ``gap_tol``), ``level`` (:math:`\\alpha`,
    default 0.3) and ``cuts`` (cut slots per client, default 40)."""

    name = "level_bundle"
    aliases = ("bundle",)      # its name until 2026-12-06
    options = {"max_steps": 300, "tol": None, "level": 0.3, "cuts": 40}
    needs = frozenset({VALUES, GRADIENTS})     # one query of every client's value and subgradient per step
    uses_solver = False
    may_fall_back = False

    def applies(self, structure) -> str | None:
        if not structure.ridge_covers_all:
            return ("the bundle bound needs every coordinate penalized (l2 > 0 and penalize_intercept=True): "
                    "along an unpenalized direction the cutting-plane model is unbounded below"
                    + ("" if structure.rows_local else "; " + FREE_DIRECTION_ON_A_SERVER))
        return self.fits(structure)

    allocates = "a compiled CVXPY cutting-plane model with {P}-wide cut slopes"

    def memory(self, structure) -> int:
        """:func:`bundle_model_bytes` with the default number of cut slots."""
        return bundle_model_bytes(int(structure.n_clients), int(structure.dim), self.options["cuts"])

    def auto_skip(self, structure) -> str | None:
        if structure.rows_local:
            return ("the conic route is exact on the rows; the bundle route needs only values and subgradients "
                    "(the route of a federated server); force it with method='level_bundle'")
        return None

    def complete_options(self, given) -> dict:
        from ..._validation import check_int, check_real

        opts = super().complete_options(given)
        opts["max_steps"] = check_int(opts["max_steps"], "max_steps", low=1)
        opts["cuts"] = check_int(opts["cuts"], "cuts", low=2)
        opts["level"] = check_real(opts["level"], "level", low=0.0, high=1.0, low_open=True, high_open=True)
        if opts["tol"] is not None:
            opts["tol"] = check_real(opts["tol"], "tol", low=0.0)
        return opts

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        tol = request.gap_tol if opts["tol"] is None else opts["tol"]
        obj, W = problem.objectives, problem.weight_set
        n, P, m = problem.n_clients, problem.dim, opts["cuts"]
        pd = np.asarray(obj.penalty_diagonal, float)
        solver = default_solver()
        model = _Model(W, n, P, m, pd, solver)
        A, G = np.zeros((n, m)), np.zeros((n, m, P))
        age = np.full((n, m), -1)                   # step that added the cut (-1: empty slot)

        def add_cuts(theta, values, grads, k, nu=None):
            """Cuts on the data terms at theta (values and gradients of f_i minus the ridge)."""
            h = values - 0.5 * float(np.sum(pd * theta * theta))
            g = grads - pd * theta
            a = h - g @ theta
            a -= 16.0 * _EPS * (np.abs(h) + np.abs(g) @ np.abs(theta))
            for i in range(n):
                free = np.flatnonzero(age[i] < 0)
                if free.size:
                    slot = int(free[0])
                else:
                    inactive = np.flatnonzero(nu[i] <= 1e-12 * max(float(nu[i].max()), 1e-300)) if nu is not None \
                        else np.arange(m)
                    pool = inactive if inactive.size else np.arange(m)
                    slot = int(pool[np.argmin(age[i][pool])])
                A[i, slot], G[i, slot], age[i, slot] = a[i], g[i], k
                empty = age[i] < 0                   # duplicates fill the empty slots (harmless)
                A[i, empty], G[i, empty] = a[i], g[i]

        def phi(values):
            return float(W.worst_case(values)[0])

        plan = _state_plan(obj, opts["max_steps"])        # a federated server: stated with the first query
        theta = np.zeros(P)
        L, lam_best, nu_raw, history, queries = float("-inf"), None, None, [], 1
        try:
            values, grads, _ = obj.evaluate(theta, hessian=False)
        except PlanExhausted as exc:
            obj.announce(None)
            failed = problem.failed_solution([{"method": self.name, "plan_exhausted": str(exc)}])
            failed.info["plan"] = {**plan.to_dict(), "exhausted": str(exc)}
            return failed
        best_theta, U, best_values = theta, phi(values), values
        add_cuts(theta, values, grads, 0)
        for k in range(1, opts["max_steps"] + 1):
            model.set_cuts(A, G)
            try:
                theta_model, nu = model.solve_min()
            except (ArithmeticError, cp.error.SolverError) as exc:
                history.append({"step": k, "error": str(exc)[:200]})
                break
            bound, lam = lagrangian_bound(W, A, G, nu, pd)
            if bound > L:
                L, lam_best, nu_raw = bound, lam, nu.sum(axis=1)
            gap = relative_gap(L, U)
            history.append({"step": k, "lower": L, "upper": U, "relative_gap": gap})
            if gap <= tol:
                break
            level = L + opts["level"] * (U - L)
            nxt = model.solve_projection(best_theta, level)
            theta = theta_model if nxt is None else nxt
            try:
                values, grads, _ = obj.evaluate(theta, hessian=False)
            except PlanExhausted as exc:         # the server's own limit, stated up front: the best bound so far
                history.append({"step": k, "plan_exhausted": str(exc)})
                break
            queries += 1
            value = phi(values)
            if value < U:
                best_theta, U, best_values = theta, value, values
            add_cuts(theta, values, grads, k, nu)
        if plan is not None:
            obj.announce(None)
        if lam_best is None:
            return problem.failed_solution([{"method": self.name, "history": history}])
        theta = problem.identifiable(best_theta)
        duals = problem.answer_duals(nu_raw, theta)
        info = {"solver": "numpy-bundle", "step_solver": solver, "iterations": len(history),
                "value_queries": queries, "history": history, "gap_tol": request.gap_tol, "tol": tol,
                "lower_bound_kind": "cutting-plane Lagrangian (numpy, from the model's duals)",
                "time_split": {"total": time.perf_counter() - started}}
        sol = Solution(theta=theta, weights=lam_best, client_losses=best_values, value=U, lower_bound=L,
                       upper_bound=U, status="optimal", certificate=CERTIFICATE, duals=duals, info=info)
        sol.status = status_from_gap(L, U, request.gap_tol)
        if plan is not None:
            stops = [h["plan_exhausted"] for h in history if "plan_exhausted" in h]
            sol.info["plan"] = {**plan.to_dict(), **({"exhausted": stops[-1]} if stops else {})}
        return sol
