r"""The matrix-free certified route of Wasserstein DRFL for smooth worst cases
(``solve(method="hessian_free")``): values and gradients only, memory :math:`O(NK+SP)` -- no
:math:`P\times P` array and no conic model of the rows -- so it scales past the dense routes
(the conic model holds every row's coefficients, the ``trust_region_sqp`` route one :math:`d\times d`
factor per client).

**When the worst case is smooth.** On unbounded support with labels that cannot move
(:math:`\kappa=\infty`; a finite label cost adds the flip branch, a max over two losses per
sample) and the :math:`\ell_2` transport norm (a polyhedral dual norm has kinks), each client's
worst case is, by the DRFL paper's Proposition 4.2 with the Lipschitz form (:mod:`.omega`),

.. math:: z_s(w)=\frac1{N_s}\sum_iL(x_i^\top w,y_i)+\rho_s\,\mathrm{Lip}\,\|w_{\mathcal M}\|_2

(:math:`\mathcal M` the moved columns): a smooth loss plus a norm, convex, differentiable
wherever :math:`w_{\mathcal M}\ne0`. Scalar-score losses only (the softmax loss's pairwise
:math:`\max_{j<k}\|w_k-w_j\|_*` has kinks where two pairs tie).

**Certificate** (rigorous to rounding, numpy). With the ridge :math:`r=\frac{\ell_2}2\|w\|^2` on
every coordinate, :math:`G_q(w)=\sum_sq_sz_s(w)+r(w)` is :math:`\ell_2`-strongly convex, so for any
:math:`q\in\mathcal Q` (weak min-max duality) and any point :math:`w`,

.. math:: p^\star\ \ge\ \min_vG_q(v)\ \ge\ G_q(w)-\frac{\|\nabla G_q(w)\|^2}{2\ell_2}
   = q^\top z(w)+r(w)-\frac{\|\sum_sq_s\nabla z_s(w)+\ell_2w\|^2}{2\ell_2}\quad(-\psi(q)\text{ for a penalized set}),

and :math:`U=\sigma_{\mathcal Q}(z(w))+r(w)`. The route takes the :math:`q\in\mathcal Q` that
maximizes this bound at the current :math:`w` (an :math:`S`-variable concave QP with the clients'
gradients' Gram matrix) and evaluates the bound in numpy at that :math:`q` projected onto
:math:`\mathcal Q`.

**Steps.** Alternate: minimize :math:`G_q` by L-BFGS (scipy; smooth and strongly convex, warm
started), then update :math:`q`. At :math:`w=\arg\min G_q` the bound is :math:`D(q)=\min G_q`, the
concave dual, with gradient :math:`z(w)` and curvature :math:`-J(\nabla^2G_q)^{-1}J^\top` (:math:`J` the
clients' gradients; :math:`S` conjugate-gradient solves with Hessian-vector products): the next
:math:`q` maximizes that quadratic model over :math:`\mathcal Q` (a Newton step on :math:`D`), or,
when the last one did not increase :math:`D`, the bound's own maximizer (a majorization step:
:math:`J(\nabla^2G_q)^{-1}J^\top\preceq JJ^\top/\ell_2`). The route stops when the gap closes to
``gap_tol`` or after ``max_rounds``; the best certificate is returned.

**At** :math:`w=0` (a radius large enough that no model beats the constant one), :math:`z_s` is not
differentiable and the bound above, with the norm's subgradient 0, stays open. The bound holds with
any subgradient :math:`g\in\partial G_q(w)`; at :math:`w=0` the norm's subdifferential is the ball
:math:`\{\mathrm{Lip}\,\rho^\top q\,u:\|u\|_2\le1\}`, so the smallest subgradient has norm
:math:`(\|J_0^\top q\|-\mathrm{Lip}\,\rho^\top q)_+` (:math:`J_0` the clients' data gradients at 0) and

.. math:: p^\star\ \ge\ q^\top z(0)-\psi(q)-\frac{(\|J_0^\top q\|_2-\mathrm{Lip}\,\rho^\top q)_+^2}{2\ell_2},

concave in :math:`q` (the square of the positive part of a convex function). The route first
maximizes it over :math:`\mathcal Q` and evaluates it in numpy: when it meets :math:`U=\sigma_{\mathcal Q}(z(0))`
within ``gap_tol``, :math:`0` is certified optimal at once (at a saddle point :math:`(0,q^\star)` the
condition :math:`0\in\partial G_{q^\star}(0)`, i.e. :math:`\|J_0^\top q^\star\|_2\le\mathrm{Lip}\,\rho^\top q^\star`,
makes the bound exact), and otherwise the iterations above run.
"""

from __future__ import annotations

import time

import cvxpy as cp
import numpy as np
from scipy.optimize import minimize

from ...sets import WeightSet
from ...solution import Solution, relative_gap, status_from_gap
from ..engine.route import Route
from ..._solver_sequence import solve_with_fallback

__all__ = ["WassersteinHessianFreeRoute", "SMALL_P"]

#: below this many parameters ``method="auto"`` leaves the problem to the dense routes
SMALL_P = 1000


class _ClientTerms:
    r""":math:`z_s(w)` and :math:`\nabla z_s(w)` of every client (module docstring), one pass over the rows."""

    def __init__(self, problem):
        model = problem.model
        self.loss, self.lip = problem.loss, model.lip
        self.moved = None if model.moved is None else np.asarray(model.moved, dtype=int)
        self.rows = [(c.X, c.y) for c in problem.federation.clients]
        self.radius = np.asarray(problem.radius, float)

    def hvp_operator(self, w, q, l2: float):
        r""":math:`v\mapsto\nabla^2G_q(w)v` (rows once per call of the operator; no :math:`P\times P` array)."""
        curv = [q[s] * self.loss.second_derivative(X @ w, y) / X.shape[0] for s, (X, y) in enumerate(self.rows)]
        wm = w if self.moved is None else w[self.moved]
        nrm = float(np.linalg.norm(wm))
        c_norm = float(self.lip * (q @ self.radius)) / nrm if nrm > 0 else 0.0
        unit = wm / nrm if nrm > 0 else wm

        def apply(v):
            out = l2 * v
            for (X, _), cs in zip(self.rows, curv):
                out = out + X.T @ (cs * (X @ v))
            if c_norm:
                vm = v if self.moved is None else v[self.moved]
                extra = c_norm * (vm - unit * float(unit @ vm))
                if self.moved is None:
                    out = out + extra
                else:
                    out[self.moved] += extra
            return out

        return apply

    def __call__(self, w) -> tuple[np.ndarray, np.ndarray]:
        S, P = len(self.rows), w.size
        z, G = np.empty(S), np.empty((S, P))
        wm = w if self.moved is None else w[self.moved]
        nrm = float(np.linalg.norm(wm))
        unit = np.zeros(P)
        if nrm > 0:
            if self.moved is None:
                unit = w / nrm
            else:
                unit[self.moved] = wm / nrm
        for s, (X, y) in enumerate(self.rows):
            u = X @ w
            z[s] = float(np.mean(self.loss.value(u, y))) + self.radius[s] * self.lip * nrm
            G[s] = X.T @ self.loss.derivative(u, y) / X.shape[0] + self.radius[s] * self.lip * unit
        return z, G


def bound_at(problem, z, G, w, q) -> float:
    """The lower bound of the module docstring at ``w`` with weights ``q`` (which must lie in Q)."""
    l2 = problem.l2
    grad = G.T @ q + l2 * w
    psi = problem.weights.psi(q) if isinstance(problem.weights, WeightSet) else 0.0
    return float(q @ z) - float(psi) + 0.5 * l2 * float(w @ w) - float(grad @ grad) / (2.0 * l2)


def _maximize_over_Q(problem, objective, fallback) -> np.ndarray:
    r"""The maximizer over :math:`\mathcal Q` of the concave ``objective(q)`` (minus the set's
    penalty :math:`\psi`), projected onto :math:`\mathcal Q`; ``fallback`` if no solver answers."""
    W = problem.weights
    q = cp.Variable(problem.n_clients)
    obj = objective(q)
    psi = getattr(W, "psi_expr", None)
    expr = psi(q) if psi is not None else None
    if expr is not None and not (isinstance(expr, (int, float)) and expr == 0):
        obj = obj - expr
    prob = cp.Problem(cp.Maximize(obj), list(W.constraints(q)))
    if solve_with_fallback(prob) is None or q.value is None:
        return fallback
    return np.asarray(W.project(np.asarray(q.value, float)), float)


def newton_weights(problem, z, M, q) -> np.ndarray:
    r"""The maximizer over :math:`\mathcal Q` of the dual's quadratic model
    :math:`z^\top q'-\frac12(q'-q)^\top M(q'-q)` (:math:`M=J(\nabla^2G_q)^{-1}J^\top`, the dual's
    curvature at :math:`w(q)`), projected onto :math:`\mathcal Q`."""
    M = 0.5 * (M + M.T) + 1e-12 * np.trace(M) * np.eye(M.shape[0])
    return _maximize_over_Q(problem, lambda qv: qv @ z - 0.5 * cp.quad_form(qv - q, cp.psd_wrap(M)), q)


def dual_curvature(terms, w, q, l2, G) -> np.ndarray:
    r""":math:`M=J(\nabla^2G_q(w))^{-1}J^\top` (``J`` = the clients' gradients ``G``, rows) by
    conjugate gradients on Hessian-vector products."""
    from scipy.sparse.linalg import LinearOperator, cg

    P = w.size
    H = LinearOperator((P, P), matvec=terms.hvp_operator(w, q, l2), dtype=float)
    cols = []
    for g in G:
        x, _ = cg(H, g, rtol=1e-10, maxiter=500)
        cols.append(x)
    return G @ np.array(cols).T


def zero_bound(problem, terms, z, G0, q) -> float:
    r"""The lower bound at :math:`w=0` with the smallest subgradient of the norm (module docstring),
    at weights ``q`` (which must lie in Q); ``G0`` the clients' data gradients at 0."""
    psi = problem.weights.psi(q) if isinstance(problem.weights, WeightSet) else 0.0
    excess = max(float(np.linalg.norm(G0.T @ q)) - float(terms.lip * (terms.radius @ q)), 0.0)
    return float(q @ z) - float(psi) - excess ** 2 / (2.0 * problem.l2)


def zero_certificate(problem, terms) -> tuple[float, float, np.ndarray, np.ndarray]:
    r"""``(L, U, q, z)`` at :math:`w=0`: :func:`zero_bound` at the :math:`q\in\mathcal Q` maximizing it
    (projected onto :math:`\mathcal Q`) and :math:`U=\sigma_{\mathcal Q}(z(0))`."""
    w = np.zeros(problem.dim)
    z, G0 = terms(w)                                   # at 0 the norm's part of G is 0: data gradients
    U = problem.outer(z)[0]
    l2, lip, rho = problem.l2, float(terms.lip), terms.radius
    if problem.weight_kind == "fixed":
        q = np.asarray(problem.weights, float).copy()
    else:
        q = _maximize_over_Q(problem, lambda qv: qv @ z - cp.square(cp.pos(cp.norm(G0.T @ qv, 2) - lip * (rho @ qv)))
                             / (2.0 * l2), np.asarray(problem.outer(z)[1], float))
    return zero_bound(problem, terms, z, G0, q), U, q, z


def best_weights(problem, z, G, w) -> np.ndarray:
    r"""The :math:`q\in\mathcal Q` maximizing :func:`bound_at` (a concave QP in :math:`S` variables),
    projected onto :math:`\mathcal Q`; the fixed weights when there is no weight set."""
    if problem.weight_kind == "fixed":
        return np.asarray(problem.weights, float).copy()
    l2 = problem.l2
    return _maximize_over_Q(problem, lambda q: q @ z - cp.sum_squares(G.T @ q + l2 * w) / (2.0 * l2),
                            np.asarray(problem.outer(z)[1], float))


class WassersteinHessianFreeRoute(Route):
    """The matrix-free route (module docstring). Option: ``max_rounds`` (weight updates, default
    60); it stops when the certificate's relative gap reaches the request's ``gap_tol``."""

    name = "hessian_free"
    options = {"max_rounds": 60}
    uses_solver = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        facts = structure.facts
        if facts.get("shared_multiplier"):
            return "WAFL shares one multiplier across clients; the conic route applies"
        if facts.get("support_bounded"):
            return "bounded (polyhedral) support: the conic route applies"
        if not structure.smooth:
            return f"the loss {structure.loss!r} is not smooth; the 'trust_region_sqp' and conic routes apply"
        if structure.n_outputs > 1:
            return ("the softmax loss's pairwise dual norm max_{j<k} ||w_k - w_j||_* has kinks where pairs tie; "
                    "the conic route applies")
        if facts.get("labels_move"):
            return ("a finite label cost kappa: the label-flip branch makes each client's worst case non-smooth; "
                    "use kappa=inf or the 'trust_region_sqp'/conic routes")
        if facts.get("transport_norm") != 2.0:
            return "the l1/linf transport norm has a polyhedral (non-smooth) dual norm; use norm=2 or the conic route"
        if not structure.ridge_covers_all:
            return "its certificate is the ridge's strong convexity: it needs l2 > 0 on every coordinate"
        return None

    def auto_skip(self, structure) -> str | None:
        if structure.dim < SMALL_P:
            return f"P = {structure.dim} < {SMALL_P}: the dense routes are faster there"
        return None

    def complete_options(self, given) -> dict:
        from ..._validation import check_int

        opts = dict(super().complete_options(given))
        opts["max_rounds"] = check_int(opts["max_rounds"], "max_rounds", low=1)
        return opts

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        tol = request.gap_tol
        terms = _ClientTerms(problem)
        l2 = problem.l2
        if terms.moved is None:                         # is 0 optimal? (module docstring, "At w = 0")
            L0, U0, q0, z0 = zero_certificate(problem, terms)
            if relative_gap(L0, U0) <= tol:
                return self._solution(problem, np.zeros(problem.dim), q0, z0, L0, U0, request, started,
                                      {"lower_bound_method": "0 is optimal: the smallest subgradient of the norm at 0 "
                                                             "(numpy; rigorous to rounding)", "rounds": 0,
                                       "history": [], "evaluations": 1, "zero_optimal": True})
        w = np.zeros(problem.dim)
        z, G = terms(w)
        q = best_weights(problem, z, G, w)
        best, history, evaluations, last_dual = None, [], 0, float("-inf")
        for k in range(1, opts["max_rounds"] + 1):
            def fun(v, q=q):
                zv, Gv = terms(v)
                return float(q @ zv) + 0.5 * l2 * float(v @ v), Gv.T @ q + l2 * v

            res = minimize(fun, w, jac=True, method="L-BFGS-B",
                           options={"maxiter": 2000, "ftol": 0.0, "gtol": 1e-12, "maxcor": 20})
            evaluations += int(res.nfev)
            w = np.asarray(res.x, float)
            z, G = terms(w)
            U = problem.outer(z)[0] + 0.5 * l2 * float(w @ w)
            q_new = best_weights(problem, z, G, w)
            L = max(bound_at(problem, z, G, w, q_new), bound_at(problem, z, G, w, q))
            gap = relative_gap(L, U)
            history.append({"round": k, "lower_bound": L, "upper_bound": U, "relative_gap": gap,
                            "lbfgs_evaluations": int(res.nfev)})
            if best is None or gap < best[0]:
                best = (gap, L, U, w.copy(), q_new.copy(), z.copy())
            if gap <= tol or problem.weight_kind == "fixed":
                break
            # the next weights: a Newton step on the dual D(q) = min_w G_q(w) while it increases D
            # (its value at w(q) is the bound there), else the majorization step q_new
            dual = bound_at(problem, z, G, w, q)
            if k == 1 or dual > last_dual:
                q = newton_weights(problem, z, dual_curvature(terms, w, q, l2, G), q)
            else:
                q = q_new
            last_dual = dual
        gap, L, U, w, q, z = best
        return self._solution(problem, w, q, z, L, U, request, started,
                              {"lower_bound_method": "G_q(w) - ||grad G_q(w)||^2 / (2 l2), q in Q (rigorous to rounding)",
                               "rounds": len(history), "history": history, "evaluations": evaluations})

    @staticmethod
    def _solution(problem, w, q, z, L, U, request, started, info) -> Solution:
        _, lam = problem.worst_case_losses(w)
        return Solution(theta=w, weights=q, client_losses=z, value=U, lower_bound=L, upper_bound=U,
                        status=status_from_gap(L, U, request.gap_tol),
                        certificate="ridge strong convexity at fixed weights (numpy; matrix-free)",
                        duals={"lambda": lam},
                        info={**info, "time": time.perf_counter() - started, "weights_kind": problem.weight_kind,
                              "support": problem.support.kind})

