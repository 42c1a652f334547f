r"""A rigorous lower bound for Wasserstein DRFL with the softmax loss, evaluated in numpy (the
K-class counterpart of :mod:`.lagrangian_bound`; unbounded support).

**Derivation.** Fix :math:`q\in\mathcal Q` (weak min-max duality: :math:`p^\star\ge\min_WF_q(W)`,
:math:`F_q=\sum_sq_sz_s+r`) and the point :math:`\hat W`. For a robust client (:math:`\rho_s>0`),
:math:`z_s(W)=\min_{\lambda_s\ge\Lambda_s(W)}\rho_s\lambda_s+\frac1{N_s}\sum_i\max_k\big(\ell_{ik}(W)-\kappa\lambda_s[k\ne y_i]\big)`
(:mod:`.multiclass`). For any :math:`\mu_i` in the simplex over the labels,
:math:`\max_k(\cdot)\ge\sum_k\mu_{ik}(\cdot)`, and every :math:`\ell_{ik}` lies above its tangent at
:math:`\hat W`, whose gradient is :math:`(p_i-e_k)x_i^\top` (:math:`p_i` the softmax at :math:`\hat W`).
The constants of the tangents add up to :math:`C=\sum_iw_i(\log\sum_ke^{\hat s_{ik}}-p_i^\top\hat s_i)`
whatever :math:`\mu` (:math:`w_i=q_s/N_s`), and

.. math:: F_q(W)\ \ge\ C+\langle G(\mu),W\rangle+\sum_sc_s(\mu)\Lambda_s(W)+r(W),\qquad
   G(\mu)=\sum_iw_i(p_i-\mu_i)x_i^\top,\quad c_s=q_s\big(\rho_s-\kappa\bar\beta_s(\mu)\big)\ge0

(:math:`\bar\beta_s` the client's mean relabelled mass; :math:`c_s<0` would send :math:`\lambda_s\to\infty`).
Split :math:`G=(G-\sum_gH_g)+\sum_gH_g` with :math:`H_g=\sum_pD_p^\top h_{gp}` a flow over the class
pairs of group :math:`g` (the clients sharing one :math:`\Lambda_g`; all of them when
:math:`\kappa<\infty`). Since :math:`\langle H_g,W\rangle\ge-\Lambda_{g*}(H_g)\Lambda_g(W)` with
:math:`\Lambda_{g*}(H_g)\le\sum_p\|h_{gp}\|` (:math:`\|\cdot\|` the transport norm, dual to the
:math:`\|\cdot\|_*` of :math:`\Lambda`: :math:`\langle h,D_pW\rangle\ge-\|h\|\,\|D_pW\|_*`), every minimizer has
:math:`\Lambda_g(W^\star)\le R_g=F_q(\hat W)/\sum_{s\in g}q_s\rho_s` (losses are nonnegative), and
the model is invariant to class shifts (so :math:`W` may be taken centred and :math:`G` centred),

.. math:: p^\star\ \ge\ L=C-\sum_{p_j>0}\frac{(G-H)_j^2}{2p_j}-\sum_gR_g\max\Big(0,\ \sum_p\|h_{gp}\|-c_g\Big),

with :math:`(G-H)_j=0` wherever the ridge weight :math:`p_j` is 0. The multipliers are fixed where
:math:`\hat W` decides them (one near-active label) and chosen for the others, with the flows, by a
small convex problem; then :math:`L` is recomputed in numpy from scratch (the flows' residual on the
unpenalized coordinates is absorbed by a star of pairs), so its validity does not rest on that
problem's accuracy.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
from scipy.special import logsumexp, softmax

from ...sets import project_simplex
from ..._solver_sequence import solve_with_fallback
from .multiclass import class_pairs, class_rows

__all__ = ["softmax_lagrangian_bound"]

#: a label is near-active for a sample if its value is within this (relative) tolerance of the max
NEAR_ACTIVE = 1e-6


def _groups(problem, y, cid):
    """``[(clients, labels)]``: the clients sharing one pair set (all robust clients when labels may
    move; by the labels each holds when :math:`\\kappa=\\infty`)."""
    robust = np.flatnonzero(problem.radius > 0)
    if problem.model.flips:
        return [(robust, None)] if robust.size else []
    out = {}
    for s in robust:
        out.setdefault(tuple(np.unique(y[cid == s]).tolist()), []).append(int(s))
    return [(np.array(v), k) for k, v in out.items()]


def softmax_lagrangian_bound(problem, w, q) -> tuple[float, dict]:
    """``(L, info)`` of the module docstring at the point ``w`` with client weights ``q`` (in Q)."""
    model = problem.model
    if model.support.bounded:
        return float("-inf"), {"reason": "bounded support: not covered"}
    if model.moved is not None:
        return float("-inf"), {"reason": "a free intercept (its stationarity must hold exactly): not covered"}
    if getattr(problem, "shared_multiplier", False):
        return float("-inf"), {"reason": "WAFL's one shared multiplier: not covered (per-client balls only)"}
    K, d = model.n_outputs, model.n_features
    fed = problem.federation
    X, y, cid = fed.pooled()
    y = y.astype(int)
    N = X.shape[0]
    q = np.asarray(q, float)
    wi = q[cid] / fed.sizes[cid]
    rho = np.asarray(problem.radius, float)
    robust_i = rho[cid] > 0
    Wr = class_rows(model, w)
    S = X @ Wr.T
    lse = logsumexp(S, axis=1)
    P = softmax(S, axis=1)
    C = float(np.sum(wi * (lse - np.sum(P * S, axis=1))))
    z_hat, lam_hat = problem.worst_case_losses(w)
    F_hat = float(q @ z_hat) + problem.penalty(w)
    # which labels each sample may take, their values at (W^, lambda^), the near-active ones
    other = np.ones((N, K), bool)
    other[np.arange(N), y] = False
    allowed = ~other | (robust_i[:, None] & model.flips)
    lam_i = np.where(robust_i, np.nan_to_num(lam_hat[cid]), 0.0)
    kappa = model.kappa if model.flips else 0.0
    values = np.where(allowed, (lse[:, None] - S) - kappa * lam_i[:, None] * other, -np.inf)
    top = values.max(axis=1)
    near = allowed & (values >= top[:, None] - NEAR_ACTIVE * (1.0 + np.abs(top[:, None])))
    free = np.flatnonzero(near.sum(axis=1) > 1)
    mu = np.zeros((N, K))
    mu[np.arange(N), np.argmax(values, axis=1)] = 1.0
    groups = _groups(problem, y, cid)
    moved = np.arange(d) if model.moved is None else np.asarray(model.moved, dtype=int)
    pd = np.asarray(problem.objectives.penalty_diagonal, float).reshape(K, d)
    R = []
    for clients, _ in groups:
        mass = float(np.sum(q[clients] * rho[clients]))
        R.append(F_hat / mass if mass > 0 else np.inf)
    mu, flows, status = _choose(problem, X, y, cid, wi, P, mu, near, free, groups, R, moved, pd, other)
    L, parts = _evaluate(problem, X, cid, wi, P, C, mu, flows, groups, R, moved, pd, other, y)
    return L, {"lower_bound_method": "numpy Lagrangian bound of the softmax loss (rigorous to rounding)",
               "free_samples": int(free.size), "multiplier_problem": status, "R": R, **parts}


def _centre(G):
    return G - G.mean(axis=0, keepdims=True)


def _choose(problem, X, y, cid, wi, P, mu0, near, free, groups, R, moved, pd, other):
    """Multipliers of the near-active samples and the flows, by a small convex problem."""
    K, d = P.shape[1], X.shape[1]
    if not groups and not free.size:
        return mu0, [], "nothing to choose"
    rho, q_kappa = np.asarray(problem.radius, float), problem.model.kappa if problem.model.flips else 0.0
    fixed = np.setdiff1d(np.arange(X.shape[0]), free)
    G0 = ((P[fixed] - mu0[fixed]) * wi[fixed, None]).T @ X[fixed]           # (K, d)
    cons = []
    if free.size:
        M = cp.Variable((free.size, K))
        cons += [M >= 0, cp.sum(M, axis=1) == 1, cp.multiply(M, (~near[free]).astype(float)) == 0]
        G = G0 + ((P[free] * wi[free, None]).T @ X[free]) - cp.multiply(M, np.repeat(wi[free, None], K, 1)).T @ X[free]
    else:
        M, G = None, G0
    G = G - np.ones((K, 1)) @ cp.sum(G, axis=0, keepdims=True) / K if isinstance(G, cp.Expression) else _centre(G)
    H = 0
    flows, terms = [], 0
    norm = problem.model.norm       # the flows are paid in the transport norm, the dual of Lambda's norms
    for g, (clients, labels) in enumerate(groups):
        pairs = class_pairs(K, labels)
        h = cp.Variable((len(pairs), moved.size))
        flows.append((pairs, h))
        D = np.zeros((K, len(pairs)))
        for r, (j, k) in enumerate(pairs):
            D[k, r], D[j, r] = 1.0, -1.0
        Hg = D @ h                                                     # (K, |moved|)
        H = H + _embed(Hg, moved, d)
        # c_g(mu) = sum_s q_s (rho_s - kappa * mean relabelled mass)
        c_g = 0
        for s in clients:
            rows_s = np.flatnonzero(cid == s)
            mass = float(np.sum(mu0[np.intersect1d(rows_s, fixed)] * other[np.intersect1d(rows_s, fixed)]))
            if M is not None:
                loc = np.flatnonzero(np.isin(free, rows_s))
                if loc.size:
                    mass = mass + cp.sum(cp.multiply(M[loc], other[free[loc]].astype(float)))
            c_s = wi[rows_s[0]] * (rho[s] * rows_s.size - q_kappa * mass)        # q_s (rho_s - kappa beta_s)
            if isinstance(c_s, cp.Expression):
                cons.append(c_s >= 0)
            elif c_s < 0:
                return mu0, [(p_, np.zeros(h_.shape)) for p_, h_ in flows], f"client {s}: rho_s < kappa * relabelled mass"
            c_g = c_g + c_s
        cost = cp.sum(cp.norm(h, norm, axis=1)) if np.isfinite(norm) else cp.sum(cp.max(cp.abs(h), axis=1))
        if np.isfinite(R[g]):
            t = cp.Variable(nonneg=True)
            cons.append(t >= cost - c_g)
            terms = terms + R[g] * t
        else:
            cons.append(h == 0)
    resid = G - H
    pen = pd > 0
    obj = terms
    if pen.any():
        obj = obj + cp.sum(cp.multiply(1.0 / (2.0 * np.where(pen, pd, 1.0)) * pen, cp.square(resid)))
    if (~pen).any():
        cons.append(cp.multiply((~pen).astype(float), resid) == 0)
    prob = cp.Problem(cp.Minimize(obj), cons)
    if solve_with_fallback(prob) is None:
        return mu0, [(pairs, np.zeros(h.shape)) for pairs, h in flows], "no solver answered (uniform start kept)"
    mu = mu0.copy()
    if M is not None:
        for r, i in enumerate(free):
            vals = np.where(near[i], np.asarray(M.value[r], float), 0.0)
            idx = np.flatnonzero(near[i])
            mu[i] = 0.0
            mu[i, idx] = project_simplex(vals[idx])
    return mu, [(pairs, np.asarray(h.value, float)) for pairs, h in flows], prob.status


def _embed(Hg, moved, d):
    """A (K, |moved|) block as (K, d), zero on the columns the transport does not move."""
    if moved.size == d:
        return Hg
    E = np.zeros((moved.size, d))
    E[np.arange(moved.size), moved] = 1.0
    return Hg @ E


def _evaluate(problem, X, cid, wi, P, C, mu, flows, groups, R, moved, pd, other, y):
    """:math:`L` in numpy from the multipliers and flows (module docstring)."""
    K, d = P.shape[1], X.shape[1]
    rho = np.asarray(problem.radius, float)
    kappa = problem.model.kappa if problem.model.flips else 0.0
    mu = mu.copy()
    if kappa > 0:             # c_s >= 0 exactly: move relabelled mass back to the own label where needed
        own = ~other
        for clients, _ in groups:
            for s in clients:
                rows = np.flatnonzero(cid == s)
                mass = float(np.sum(mu[rows] * other[rows]))
                allowed_mass = rho[s] * rows.size / kappa
                if mass > allowed_mass and mass > 0:
                    keep = max(0.0, allowed_mass / mass * (1.0 - 1e-12))
                    moved_mass = (mu[rows] * other[rows]).sum(axis=1) * (1.0 - keep)
                    mu[rows] = np.where(other[rows], mu[rows] * keep, mu[rows])
                    mu[rows] += own[rows] * moved_mass[:, None]
    G = _centre(((P - mu) * wi[:, None]).T @ X)
    costs, flows = [], [(pairs, h.copy()) for pairs, h in flows]
    c = []
    for clients, _ in groups:
        c.append(sum(float(np.sum(wi[cid == s])) * rho[s]
                     - kappa * float(np.sum(wi[cid == s, None] * mu[cid == s] * other[cid == s])) for s in clients))
    # a group's flow beyond its budget c_g is scaled back to it (its R_g may be huge: a client of
    # almost no weight); what that leaves of G on the unpenalized coordinates goes, with the rest of
    # the residual there, into a star of pairs of the group with the smallest R (so that G - H
    # vanishes there); on the penalized coordinates the ridge pays for the residual
    for g, (pairs, h) in enumerate(flows):
        cost = float(np.sum(np.linalg.norm(h, problem.model.norm, axis=1))) if h.size else 0.0
        if cost > max(c[g], 0.0):
            h *= max(c[g], 0.0) / cost * (1.0 - 1e-12)
    H = np.zeros((K, d))
    for pairs, h in flows:
        for r, (j, k) in enumerate(pairs):
            H[k, moved] += h[r]
            H[j, moved] -= h[r]
    free_cols = pd <= 0
    E = np.where(free_cols, G - H, 0.0)
    if np.any(E != 0):
        finite = [i for i in range(len(groups)) if np.isfinite(R[i])]
        g = min(finite, key=lambda i: R[i]) if finite else None
        if g is None or np.any(E[:, np.setdiff1d(np.arange(d), moved)] != 0):
            return float("-inf"), {"reason": "the stationarity residual on an untransported, unpenalized column"}
        pairs, h = flows[g]
        labels = groups[g][1]
        hub = 0 if labels is None else int(labels[0])
        index = {p: r for r, p in enumerate(pairs)}
        for k in range(K):
            if k == hub:
                continue
            p, sign = ((hub, k), 1.0) if hub < k else ((k, hub), -1.0)
            h[index[p]] += sign * E[k, moved]
        H = np.zeros((K, d))
        for pairs_, h_ in flows:
            for r, (j, k) in enumerate(pairs_):
                H[k, moved] += h_[r]
                H[j, moved] -= h_[r]
    resid = G - H
    ridge = float(np.sum(np.where(pd > 0, resid ** 2 / (2.0 * np.where(pd > 0, pd, 1.0)), 0.0)))
    total = C - ridge
    for g, ((clients, _), (pairs, h)) in enumerate(zip(groups, flows)):
        c_g = 0.0
        for s in clients:
            rows = cid == s
            c_s = float(np.sum(wi[rows])) * rho[s] - kappa * float(np.sum(wi[rows, None] * mu[rows] * other[rows]))
            if c_s < 0:
                return float("-inf"), {"reason": f"client {s}: rho_s - kappa * relabelled mass < 0"}
            c_g += c_s
        cost = float(np.sum(np.linalg.norm(h, problem.model.norm, axis=1))) if h.size else 0.0
        costs.append(cost)
        excess = max(0.0, cost - c_g)
        if excess > 0:
            if not np.isfinite(R[g]):
                return float("-inf"), {"reason": "a group with no robust weight carries a flow"}
            total -= R[g] * excess
    return float(total), {"C": C, "ridge_term": ridge, "flow_costs": costs}
