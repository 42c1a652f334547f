r"""The non-convex DEO cases: local search with honest bounds.

* :class:`DCRoute` (``"dc"``) -- :math:`l_f = l` convex but not affine, so the constraint
  :math:`|D_f|\le\varepsilon` is a difference of convex functions. The procedure:
  (c1) the unconstrained minimum (a lower bound, optimal if feasible), (c3) the convex penalty lower
  bound, the convex--concave procedure (CCP, optionally warm-started by SLSQP) from several feasible
  starts, and the Lagrangian-convexity certificate (c2) at the best KKT point.
* :class:`PenaltyLocalRoute` (``"penalty_local"``) -- :math:`P_c` with a non-affine fairness
  loss: L-BFGS-B from several starts, certified by (c2) when it applies.

Random starts draw from ``default_rng(seed)`` (``solve(seed=...)``, default: the problem's
``seed``). Convex subproblems run through the shared solver sequence (the user's ``solver`` first).
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp
from scipy.optimize import minimize

from ...solution import status_from_gap
from .dual import piecewise_dual_bound
from .routes import DEORoute, solve_subproblem

__all__ = ["DCRoute", "PenaltyLocalRoute"]


def unconstrained(problem, request, record):
    """:math:`\\theta_u = \\arg\\min L` and a valid lower bound on :math:`\\min L` (cached:
    independent of :math:`\\varepsilon`, so an :math:`\\varepsilon` sweep computes it once per
    solver choice)."""
    key = (request.solver, request.fallback, repr(sorted(request.solver_options.items())))
    cache = problem.cache("unconstrained")
    if key in cache:
        return cache[key]
    theta = cp.Variable(problem.dim)
    prob = cp.Problem(cp.Minimize(problem.loss_expression(theta)))
    used = solve_subproblem(problem, prob, request, record)
    if used is None:
        return None, -np.inf
    th = np.asarray(theta.value, float)
    lb = problem.polished_bound(th, np.zeros(2), c=0.0)
    if problem.loss.piecewise_linear:     # the exact dual bound (the subgradient one is loose at kinks)
        lb = max(lb, piecewise_dual_bound(problem, th, np.zeros(2), problem.loss_value(th),
                                          lambda qp: solve_subproblem(problem, qp, request),
                                          multipliers=False).bound)
    if not np.isfinite(lb):
        lb = float(prob.value)
    cache[key] = (th, lb)
    return th, lb


def penalty_bound(problem, request, record):
    r"""(c3): :math:`\min_\theta \max\{L, L + w_1(D-\varepsilon), L - w_2(D+\varepsilon)\}` with
    :math:`w_1 = |\mathcal N^b|/n`, :math:`w_2 = |\mathcal N^a|/n` (needs :math:`l_f = l`).
    Returns ``(theta_pen, lower_bound, lam)``: the bound is the Lagrangian bound at the
    multipliers read from the epigraph duals (a point of the box), checked in numpy."""
    if problem.fair is not problem.loss:
        return None, -np.inf, None
    w1, w2 = problem.n_b / problem.n, problem.n_a / problem.n
    eps = problem.eps_deo
    theta = cp.Variable(problem.dim)
    t = cp.Variable()
    base = np.full(problem.n, 1.0 / problem.n)
    cons = [t >= problem.weighted_expression(theta, base, np.zeros(problem.n)),
            t >= problem.weighted_expression(theta, base + w1 * problem.group_weights, np.zeros(problem.n), -w1 * eps),
            t >= problem.weighted_expression(theta, base - w2 * problem.group_weights, np.zeros(problem.n), -w2 * eps)]
    prob = cp.Problem(cp.Minimize(t), cons)
    used = solve_subproblem(problem, prob, request, record)
    if used is None:
        return None, -np.inf, None
    th = np.asarray(theta.value, float)
    beta = np.maximum(np.array([float(c.dual_value) for c in cons]), 0.0)
    beta = beta / beta.sum() if beta.sum() > 0 else np.array([1.0, 0.0, 0.0])
    lam = np.array([beta[1] * w1, beta[2] * w2])
    return th, problem.polished_bound(th, lam, c=0.0), lam


def ccp(problem, theta0, request):
    """Convex-concave procedure from the feasible ``theta0``."""
    prob = problem.build()
    th = np.asarray(theta0, float)
    values = [problem.loss_value(th)]
    lam = np.zeros(2)
    it = 0
    for it in range(1, problem.max_ccp_iter + 1):
        z = problem.X @ th
        for s, other in (("a", problem.N_a), ("b", problem.N_b)):
            Xs = problem.X[other]
            v = problem.fair.value(z[other], problem.y[other])
            g = Xs.T @ problem.fair.derivative(z[other], problem.y[other]) / Xs.shape[0]
            problem.linearization[s][0].value = g
            problem.linearization[s][1].value = float(v.mean() - g @ th)
        if solve_subproblem(problem, prob, request) is None:
            break
        new = np.asarray(problem.theta_variable.value, float)
        lam = np.maximum(np.array([problem.deo_constraints[0].dual_value, problem.deo_constraints[1].dual_value], float).ravel(), 0.0)
        values.append(problem.loss_value(new))
        step = np.linalg.norm(new - th)
        th = new
        if values[-2] - values[-1] <= problem.ccp_tol * max(1.0, abs(values[-1])) and step <= 1e-6 * max(1.0, np.linalg.norm(th)):
            break
    return th, lam, {"iterations": it, "values": [values[0], values[-1]]}


def slsqp(problem, theta0):
    """SciPy SLSQP on (4) from ``theta0`` (smooth losses only), pulled back to feasibility;
    ``None`` if unavailable or worse than the start. Used to warm-start the CCP, which
    then certifies feasibility/monotonicity and yields the multipliers."""
    try:
        problem.loss.ddphi(np.zeros(1))
        problem.fair.ddphi(np.zeros(1))
    except NotImplementedError:
        return None
    eps = problem.eps_deo
    cons = [{"type": "ineq", "fun": lambda t: eps - problem.fairness_gap(t),
             "jac": lambda t: -problem.fairness_gap_gradient(t)},
            {"type": "ineq", "fun": lambda t: eps + problem.fairness_gap(t),
             "jac": lambda t: problem.fairness_gap_gradient(t)}]
    try:
        res = minimize(problem.loss_value, np.asarray(theta0, float), jac=problem.loss_gradient,
                       method="SLSQP", constraints=cons, options={"ftol": 1e-12, "maxiter": 500})
    except (ValueError, ArithmeticError, np.linalg.LinAlgError):  # pragma: no cover
        return None
    th, _ = problem.shrink_to_feasible(res.x)
    if problem.loss_value(th) > problem.loss_value(theta0):
        return None
    return th


def feasible_starts(problem, theta_u, theta_pen, seed):
    """Feasible starts of the CCP: 0, the scaled unconstrained and penalty solutions, and
    ``problem.n_starts`` seeded random directions scaled to feasibility."""
    rng = np.random.default_rng(seed)
    margin = 1e-3 * problem.eps_deo
    starts = [("zero", np.zeros(problem.dim))]
    if theta_u is not None:
        starts.append(("scaled_unconstrained", problem.shrink_to_feasible(theta_u, margin)[0]))
    if theta_pen is not None:
        starts.append(("scaled_penalty", problem.shrink_to_feasible(theta_pen, margin)[0]))
    scale = np.linalg.norm(theta_u) if theta_u is not None else 1.0
    for j in range(problem.n_starts):
        v = rng.standard_normal(problem.dim)
        v *= scale / max(np.linalg.norm(v), 1e-300)
        starts.append((f"random{j}", problem.shrink_to_feasible(v, margin)[0]))
    return starts


def local_status(lb: float, ub: float, gap_tol: float, lb_method: str) -> tuple[str, str]:
    """``(status, certificate)`` of a non-convex route from its bounds: ``"optimal"`` with the
    bound that closed the gap (whichever it is), else an honest ``"local"`` (never
    ``"optimal_within_gap"``: the point is only known to be stationary)."""
    if status_from_gap(lb, ub, gap_tol) == "optimal":
        return "optimal", lb_method
    return "local", "none"


def certify_local(problem, theta, lam, lb_global):
    """Lagrangian-convexity certificate (c2) at a KKT point; returns (lb, method)."""
    lb_c2 = problem.polished_bound(theta, lam)
    if np.isfinite(lb_c2) and lb_c2 > lb_global:
        return lb_c2, "lagrangian_convex"
    return lb_global, None


class DCRoute(DEORoute):
    """The DC case: fairness loss = a convex non-affine objective loss. Steps (c1)--(c3),
    the CCP from several feasible starts, and the Lagrangian-convexity certificate (c2); an honest
    ``"local"`` answer when no certificate closes the gap."""

    name = "dc"
    classes = ("dc_deo",)

    def solve(self, problem, request):
        gap_tol = request.gap_tol
        record = []
        # 1. unconstrained test (c1)
        theta_u, lb_u = unconstrained(problem, request, record)
        if theta_u is None:
            return problem.failed_solution(record)
        info = {"attempts": record, "lb_unconstrained": lb_u}
        if problem.constraint_violation(theta_u) <= problem.feasibility_tol:
            ub = problem.objective(theta_u)
            return problem.make_solution(theta_u, np.zeros(2), lb_u, "unconstrained_minimum",
                                          status_from_gap(lb_u, ub, gap_tol), "unconstrained_feasible", info)
        # 2. penalty lower bound (c3)
        theta_pen, lb_pen, lam_pen = penalty_bound(problem, request, record)
        info["lb_penalty"] = lb_pen
        lb, lb_method = (lb_pen, "penalty_c3") if lb_pen > lb_u else (lb_u, "unconstrained_minimum")
        if theta_pen is not None and problem.constraint_violation(theta_pen) <= problem.feasibility_tol:
            ub = problem.objective(theta_pen)
            st = status_from_gap(lb, ub, gap_tol)
            if st == "optimal":
                return problem.make_solution(theta_pen, lam_pen, lb, lb_method, st, "penalty_bound_attained",
                                              info)
        # 3. CCP from several feasible starts
        runs = []
        for name, start in feasible_starts(problem, theta_u, theta_pen, request.seed):
            pre = slsqp(problem, start) if problem.local_solver == "slsqp+ccp" else None
            th, lam, rec = ccp(problem, start if pre is None else pre, request)
            th, _ = problem.shrink_to_feasible(th)
            runs.append({"start": name, "theta": th, "lam": lam, "value": problem.objective(th),
                         "slsqp_presolve": pre is not None, **rec})
        runs = [r for r in runs if np.isfinite(r["value"])]
        if not runs:
            return problem.failed_solution(record)
        best = min(runs, key=lambda r: r["value"])
        info["local_search"] = {"n_starts": len(runs),
                                "values": [float(r["value"]) for r in runs],
                                "starts": [r["start"] for r in runs],
                                "iterations": [r["iterations"] for r in runs],
                                "spread": float(max(r["value"] for r in runs) - best["value"])}
        # 4. certificate (c2)
        lb2, cert = certify_local(problem, best["theta"], best["lam"], lb)
        if cert is not None:
            lb, lb_method = lb2, cert
        ub = problem.objective(best["theta"])
        # 5. the status from the bounds: optimal with whichever bound closed the gap, else local
        st, cert = local_status(lb, ub, gap_tol, lb_method)
        return problem.make_solution(best["theta"], best["lam"], lb, lb_method, st, cert, info)


class PenaltyLocalRoute(DEORoute):
    r"""Problem :math:`P_c` with a non-affine fairness loss: L-BFGS-B from several starts;
    ``"optimal"`` only with the Lagrangian-convexity certificate (c2) at :math:`\lambda_c`."""

    name = "penalty_local"
    classes = ("penalty_c_nonconvex",)

    def solve(self, problem, request):
        gap_tol = request.gap_tol
        record = []
        theta_u, lb_u = unconstrained(problem, request, record)
        if theta_u is None:
            return problem.failed_solution(record)
        rng = np.random.default_rng(request.seed)
        scale = max(np.linalg.norm(theta_u), 1.0) / np.sqrt(problem.dim)
        starts = [np.zeros(problem.dim), theta_u] + [rng.standard_normal(problem.dim) * scale
                                                     for _ in range(problem.n_starts)]
        c = problem.penalty_c

        def grad(t):
            D = problem.fairness_gap(t)
            v = max(abs(D) - problem.eps_deo, 0.0)
            return problem.loss_gradient(t) + (np.sign(D) * v / c) * problem.fairness_gap_gradient(t)

        runs = []
        for x0 in starts:
            res = minimize(problem.objective, x0, jac=grad, method="L-BFGS-B",
                           options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
            runs.append(res.x)
        vals = [problem.objective(t) for t in runs]
        theta = runs[int(np.argmin(vals))]
        lam = problem.penalty_multipliers(theta)
        lb_c2 = problem.polished_bound(theta, lam)
        info = {"attempts": record, "lb_unconstrained": lb_u,
                "local_search": {"n_starts": len(runs), "values": vals, "spread": float(max(vals) - min(vals))}}
        # min L <= min P_c (the penalty is >= 0): lb_u bounds P_c too, and closes the gap when the
        # unconstrained minimum is fair enough to pay no penalty
        lb, lb_method = (lb_c2, "lagrangian_convex") if lb_c2 > lb_u else (lb_u, "unconstrained_minimum")
        st, cert = local_status(lb, problem.objective(theta), gap_tol, lb_method)
        return problem.make_solution(theta, lam, lb, lb_method, st, cert, info)
