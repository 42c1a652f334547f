"""Squared-loss DEO: the Shor SDP of a two-sided quadratic constraint.

With the squared loss :math:`l(u, y) = (u - y)^2` in the objective and in the constraint, problem (4)
of the paper is the quadratically constrained quadratic program

.. math::

    \\min_\\theta\\ q_0(\\theta) = \\theta^\\top A_0\\theta - 2c_0^\\top\\theta + k_0
    \\quad\\text{s.t.}\\quad -\\varepsilon \\le D(\\theta) = \\theta^\\top A\\theta - 2d^\\top\\theta \\le \\varepsilon,

with :math:`A_0 = X^\\top X/n + (\\ell_2/2) I \\succ 0`, :math:`c_0 = X^\\top y/n`, :math:`k_0 = \\|y\\|^2/n`,
:math:`A = \\Sigma_a - \\Sigma_b` (indefinite in general) and :math:`d = u_a - u_b`. Its Shor relaxation

.. math::

    \\min_{Y}\\ \\langle A_0, \\Theta\\rangle - 2c_0^\\top\\theta + k_0 \\quad\\text{s.t.}\\quad
    Y = \\begin{pmatrix}\\Theta & \\theta\\\\ \\theta^\\top & 1\\end{pmatrix} \\succeq 0,\\quad
    \\langle A, \\Theta\\rangle - 2d^\\top\\theta \\le \\varepsilon\\ (\\lambda_1),\\quad
    -\\langle A, \\Theta\\rangle + 2d^\\top\\theta \\le \\varepsilon\\ (\\lambda_2)

is exact (one two-sided quadratic constraint with a strictly convex objective: Barvinok–Pataki). The fairness-row duals are the KKT multipliers :math:`(\\lambda_1, \\lambda_2)` of (5a)/(5b)
in the paper's scaling because the objective is :math:`L` itself (not a multiple).

Extraction and certificate:

1. rank one (:math:`\\lambda_2(Y)/\\lambda_1(Y) \\le` ``rank_tol``): :math:`\\theta = Y_{1:m, m+1}`;
2. otherwise, with :math:`\\rho = \\lambda_1 - \\lambda_2`, :math:`M = A_0 + \\rho A`, :math:`b = c_0 + \\rho d`:
   if :math:`M \\succ 0`, :math:`\\theta = M^{-1} b`;
3. the trust-region **hard case** (:math:`M` singular): :math:`\\theta = M^+ b + \\tau v` with
   :math:`v \\in \\ker M` and :math:`\\tau` a root of :math:`D(M^+b + \\tau v) = \\operatorname{sign}(\\rho)\\,\\varepsilon`.

The global-optimality certificate (S-lemma type) is computed by the caller in numpy: for any
:math:`\\lambda \\ge 0` with :math:`M \\succ 0` the dual function
:math:`g(\\lambda) = k_0 - b^\\top M^{-1} b - \\varepsilon(\\lambda_1 + \\lambda_2)` is a lower bound
(weak duality); :func:`dual_function` evaluates it and, if :math:`M` is only semidefinite (hard
case), evaluates it at :math:`(1-\\delta)\\lambda` (still a valid bound; :math:`M(0) = A_0 \\succ 0`).

:class:`SDPRoute` is the route ``"sdp"`` of :class:`~.problem.DEOConstrained`: it solves the SDP,
extracts and polishes :math:`\\theta`, pulls it back to feasibility and certifies it with the dual
function.
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp
import scipy.linalg as sla

from ...solution import status_from_gap
from .routes import DEORoute, smaller_gap, solver_sequence

_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)

__all__ = ["QuadraticDEO", "build_shor_sdp", "extract_theta", "dual_function", "polish_active", "definite_interval",
           "SDPRoute"]


class QuadraticDEO:
    """The data :math:`(A_0, c_0, k_0, A, d)` of the squared-loss DEO QCQP (see module doc)."""

    def __init__(self, A0, c0, k0, A, d):
        self.A0 = np.asarray(A0, float)
        self.c0 = np.asarray(c0, float)
        self.k0 = float(k0)
        self.A = np.asarray(A, float)
        self.d = np.asarray(d, float)

    @classmethod
    def from_data(cls, X, y, l2, N_a, N_b) -> "QuadraticDEO":
        """From the design ``X``, labels ``y``, ridge ``l2`` and the masks of
        :math:`\\mathcal N^a, \\mathcal N^b` (objective :math:`\\frac1n\\|X\\theta-y\\|^2 + \\frac{\\ell_2}2\\|\\theta\\|^2`)."""
        n, m = X.shape
        A0 = X.T @ X / n + 0.5 * l2 * np.eye(m)
        Xa, Xb = X[N_a], X[N_b]
        A = Xa.T @ Xa / Xa.shape[0] - Xb.T @ Xb / Xb.shape[0]
        d = Xa.mean(axis=0) - Xb.mean(axis=0)
        return cls(A0, X.T @ y / n, float(y @ y) / n, 0.5 * (A + A.T), d)

    @property
    def dim(self) -> int:
        return self.c0.shape[0]

    def q0(self, theta) -> float:
        theta = np.asarray(theta, float)
        return float(theta @ self.A0 @ theta - 2 * self.c0 @ theta + self.k0)

    def D(self, theta) -> float:
        theta = np.asarray(theta, float)
        return float(theta @ self.A @ theta - 2 * self.d @ theta)

    def lagrangian_matrix(self, rho: float):
        """:math:`(M, b) = (A_0 + \\rho A,\\ c_0 + \\rho d)`."""
        return self.A0 + rho * self.A, self.c0 + rho * self.d


def build_shor_sdp(q: QuadraticDEO, eps: cp.Parameter):
    """The Shor SDP; returns ``(problem, Y, (con_a, con_b))`` with the (5a)/(5b) rows."""
    m = q.dim
    Y = cp.Variable((m + 1, m + 1), symmetric=True)
    Theta, theta = Y[:m, :m], Y[:m, m]
    D = cp.trace(q.A @ Theta) - 2 * q.d @ theta
    con_a = D - eps <= 0
    con_b = -D - eps <= 0
    obj = cp.trace(q.A0 @ Theta) - 2 * q.c0 @ theta + q.k0
    prob = cp.Problem(cp.Minimize(obj), [Y >> 0, Y[m, m] == 1, con_a, con_b])
    return prob, Y, (con_a, con_b)


def extract_theta(q: QuadraticDEO, Y: np.ndarray, lam, eps: float, rank_tol: float = 1e-6):
    """Recover :math:`\\theta` from the SDP solution (module doc, steps 1-3).

    Returns ``(theta, info)``; ``info["method"]`` is ``"rank_one"``, ``"stationary"`` or
    ``"hard_case"`` and ``info["rank_ratio"]`` is :math:`\\lambda_2(Y)/\\lambda_1(Y)`.
    """
    m = q.dim
    Y = 0.5 * (Y + Y.T)
    ev = np.linalg.eigvalsh(Y)
    ratio = float(max(ev[-2], 0.0) / ev[-1]) if m >= 1 and ev[-1] > 0 else float("inf")
    info = {"rank_ratio": ratio, "eigenvalues_top": ev[-3:][::-1].tolist()}
    if ratio <= rank_tol:
        info["method"] = "rank_one"
        return Y[:m, m].copy(), info
    rho = float(lam[0] - lam[1])
    M, b = q.lagrangian_matrix(rho)
    w, V = np.linalg.eigh(M)
    info["lambda_min_M"] = float(w[0])
    scale = max(1.0, float(abs(w[-1])))
    if w[0] > 1e-9 * scale:
        info["method"] = "stationary"
        return np.linalg.solve(M, b), info
    # hard case: M is singular at the optimal multiplier
    keep = w > 1e-9 * scale
    theta0 = V[:, keep] @ ((V[:, keep].T @ b) / w[keep])
    v = V[:, 0]
    target = np.sign(rho) * eps if rho != 0 else 0.0
    # D(theta0 + tau v) = a tau^2 + 2 beta tau + D(theta0)
    a = float(v @ q.A @ v)
    beta = float(v @ q.A @ theta0 - q.d @ v)
    c = q.D(theta0) - target
    if abs(a) > 1e-14:
        disc = beta * beta - a * c
        if disc < 0:
            disc = 0.0
        roots = [(-beta + s * np.sqrt(disc)) / a for s in (1.0, -1.0)]
    elif abs(beta) > 1e-14:
        roots = [-c / (2 * beta)]
    else:
        roots = [0.0]
    cands = [theta0 + t * v for t in roots]
    theta = min(cands, key=lambda t: (abs(abs(q.D(t)) - eps) if abs(q.D(t)) > eps else 0.0, q.q0(t)))
    info.update(method="hard_case", tau=[float(t) for t in roots], kernel_dim=int((~keep).sum()))
    return theta, info


def definite_interval(q: QuadraticDEO) -> tuple[float, float]:
    r"""The open interval of :math:`\rho` where :math:`M(\rho) = A_0 + \rho A \succ 0`: with the
    generalized eigenvalues :math:`\mu_i` of :math:`(A, A_0)` (:math:`A_0 \succ 0`),
    :math:`M(\rho)\succ0 \iff 1 + \rho\mu_i > 0` for every *i*."""
    mu = sla.eigh(q.A, q.A0, eigvals_only=True)
    lo = -1.0 / mu.max() if mu.max() > 0 else -np.inf
    hi = -1.0 / mu.min() if mu.min() < 0 else np.inf
    return float(lo), float(hi)


def polish_active(q: QuadraticDEO, rho: float, eps: float, rel: float = 1e-3):
    r"""Refine an active multiplier by the secular equation of the trust-region method.

    With :math:`\theta(\rho) = M(\rho)^{-1}b(\rho)` (stationary for every :math:`\rho` with
    :math:`M(\rho)\succ0`), solve :math:`D(\theta(\rho)) = \operatorname{sign}(\rho)\varepsilon` for
    :math:`\rho` near the SDP's value by Brent's method, on brackets kept inside the interval
    where :math:`M(\rho)\succ0` (:func:`definite_interval`; near the hard case the root lies within
    1e-4 of its end), widening to the whole side of that interval. The result satisfies
    stationarity, complementarity and the active constraint to round-off. Returns
    ``(theta, rho)`` or ``None`` when no sign change is found.
    """
    from scipy.optimize import brentq

    if rho == 0.0:
        return None
    target = np.sign(rho) * eps
    pd_lo, pd_hi = definite_interval(q)

    def theta_of(r):
        M, b = q.lagrangian_matrix(r)
        c, low = sla.cho_factor(M)
        return sla.cho_solve((c, low), b)

    def phi(r):
        return q.D(theta_of(r)) - target

    def inside(r):
        margin = 1e-13 * max(1.0, abs(r))
        return min(max(r, pd_lo + margin), pd_hi - margin)

    brackets = [(rho * (1 - r), rho * (1 + r)) for r in (rel, 10 * rel, 100 * rel)]
    side = pd_hi if rho > 0 else pd_lo
    if np.isfinite(side):
        brackets.append((rho, side))            # the whole way to the end of the definite interval
    for a, b in brackets:
        lo, hi = sorted((inside(a), inside(b)))
        if not lo < hi:
            continue
        try:
            flo, fhi = phi(lo), phi(hi)
        except np.linalg.LinAlgError:
            continue
        if flo * fhi <= 0:
            root = brentq(phi, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=200)
            return theta_of(_feasible_side(phi, root, lo, hi, rho)), float(root)
    return None


def _feasible_side(phi, root, lo, hi, rho) -> float:
    r"""A multiplier within round-off of ``root`` whose point satisfies the constraint
    (:math:`\operatorname{sign}(\rho)\,\phi \le 0`): Brent's answer may sit a hair on the
    infeasible side, where the upper bound would undercut the optimum by :math:`\rho\times` the
    violation; bisect towards the bracket end that is feasible."""
    def feasible(r):
        return np.sign(rho) * phi(r) <= 0

    if feasible(root):
        return root
    good = lo if feasible(lo) else hi
    bad = root
    for _ in range(200):
        mid = 0.5 * (good + bad)
        if mid in (good, bad):
            break
        good, bad = (mid, bad) if feasible(mid) else (good, mid)
    return good


def dual_function(q: QuadraticDEO, lam, eps: float, shrink=(0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2)):
    """A valid lower bound on the QCQP value from the dual function at :math:`(1-\\delta)\\lambda`.

    For every :math:`\\lambda \\ge 0` with :math:`M = A_0 + \\rho A \\succ 0` (checked by a Cholesky
    factorization), :math:`g(\\lambda) = k_0 - b^\\top M^{-1}b - \\varepsilon(\\lambda_1+\\lambda_2)`
    bounds the QCQP from below (weak duality). Returns ``(bound, delta, lam_used)``; ``-inf`` if no
    shrink factor gives a positive definite :math:`M`.
    """
    lam = np.maximum(np.asarray(lam, float), 0.0)
    best = (-np.inf, None, None)
    for delta in shrink:
        lt = (1.0 - delta) * lam
        M, b = q.lagrangian_matrix(float(lt[0] - lt[1]))
        try:
            c, low = sla.cho_factor(M)
        except np.linalg.LinAlgError:
            continue
        g = q.k0 - float(b @ sla.cho_solve((c, low), b)) - eps * float(lt.sum())
        if g > best[0]:
            best = (g, delta, lt)
    return best


class SDPRoute(DEORoute):
    """Squared loss in the objective and the constraint: the exact Shor SDP (module docstring)."""

    name = "sdp"
    classes = ("squared_fair_qcqp",)

    def solve(self, problem, request):
        prob = problem.build()
        q = problem.quadratic
        eps = problem.eps_deo
        seq = solver_sequence(problem, request)
        best = None
        for name in seq:
            if seq.run(prob, name) is None or prob.status not in _OK:
                continue
            lam = np.maximum(np.array([problem.deo_constraints[0].dual_value, problem.deo_constraints[1].dual_value], float).ravel(), 0.0)
            theta, ext = extract_theta(q, np.asarray(problem.lifted_variable.value, float), lam, eps, problem.rank_tol)
            ext["polished"] = False
            rho_sdp = float(lam[0] - lam[1])
            if abs(rho_sdp) <= 1e-7:
                # inactive constraint: the unconstrained minimizer A0^{-1} c0, if feasible (c1)
                th_u = np.linalg.solve(q.A0, q.c0)
                if problem.constraint_violation(th_u) <= problem.feasibility_tol:
                    theta, lam = th_u, np.zeros(2)
                    ext["polished"] = "unconstrained"
            elif ext["method"] != "hard_case":
                pol = polish_active(q, rho_sdp, eps)
                # compare the two as feasible points, an exactly feasible one first: the extracted
                # point may violate the constraint within feasibility_tol and look better than the
                # optimum (the polished one satisfies it to round-off)
                def rank(t):
                    t = problem.shrink_to_feasible(t)[0]
                    return problem.constraint_violation(t) > 1e-12, problem.objective(t)   # round-off

                if pol is not None and rank(pol[0]) <= rank(theta):
                    theta, rho = pol
                    lam = np.array([max(rho, 0.0), max(-rho, 0.0)])
                    ext["polished"] = True
                    ext["rho_sdp"] = rho_sdp
            theta, alpha = problem.shrink_to_feasible(theta)
            lb, delta, lam_used = dual_function(q, lam, eps)
            M, _ = q.lagrangian_matrix(float(lam[0] - lam[1]))
            lmin = float(np.linalg.eigvalsh(M)[0])
            info = {"solver": name, "attempts": seq.attempts, "sdp_value": float(prob.value),
                    "extraction": ext, "rank_ratio": ext["rank_ratio"], "shrink_alpha": alpha,
                    "s_lemma": {"lambda_min(A0 + rho A)": lmin, "dual_shrink_delta": delta,
                                "holds": bool(lmin >= -1e-9 * max(1.0, abs(np.linalg.eigvalsh(M)[-1])))}}
            ub = problem.objective(theta)
            status = status_from_gap(lb, ub, request.gap_tol)
            sol = problem.make_solution(theta, lam, lb, "s_lemma_dual_function", status,
                                         "s_lemma" + ("" if ext["method"] == "rank_one" else f"+{ext['method']}"),
                                         info)
            if best is None or smaller_gap(sol, best):
                best = sol
            if status == "optimal":
                break
        return best if best is not None else problem.failed_solution(seq.attempts, seq.failure())
