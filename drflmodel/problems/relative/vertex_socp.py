r"""The R1 vertex SOCP handed to Clarabel directly (its native interface, no CVXPY compilation).

R1 (:func:`drflmodel.problems.relative.quadratic.build_r1`) is :math:`\min_{z,t}t` subject to one convex
quadratic per vertex point :math:`\lambda_v` of :math:`\Lambda_\varphi(A,B)`,

.. math::

    \|L_v^\top z-w_v\|^2-2q_{\perp,v}^\top z+c'_v\ \le\ t ,\qquad \theta=Sz ,

(:math:`S` the preconditioner, :math:`SP(\lambda_v)S=L_vL_v^\top`, the square completed as in
``build_r1``). With :math:`\tau_v=t+2q_{\perp,v}^\top z-c'_v`, each constraint is the rotated cone
:math:`\|u\|^2\le\tau` written as the second-order cone :math:`\|(2u,\tau-1)\|\le\tau+1`; the box,
if any, is :math:`l\le Sz\le u`. The matrices are assembled in numpy for Clarabel's form
:math:`Ax+s=b`, :math:`s\in\mathcal K` (:math:`x=(z,t)`) -- with hundreds of vertices this replaces
CVXPY's canonicalization of hundreds of quadratic forms, which dominated the R1 route's time.

Only a few vertex constraints are active at the optimum, so the SOCP is solved over an active set
of vertices (:func:`solve_vertex_socp`), checking every vertex's value in numpy after each solve.

The multiplier of vertex :math:`v` is :math:`\mu_v=y_{v,0}+y_{v,1}` (Clarabel's dual :math:`y`;
stationarity in :math:`t` gives :math:`\sum_v\mu_v=1`), the weights of the route's weak-duality
certificate :math:`\bar\lambda=\sum_v\mu_v\lambda_v`, which is unchanged.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import quadratic as qd
from ..._solver_sequence import SOLVER_OPTIONS

__all__ = ["solve_vertex_socp"]


def _vertex_cones(Q, r, c, lambdas, S):
    r"""Rows ``(A, b)`` of every vertex's cone (module docstring) in the variables ``(z, t)``, stacked
    ``(V, d + 2, d + 1)`` and ``(V, d + 2)``. One batched eigen-decomposition of the
    :math:`SP(\lambda_v)S`; eigenvalues within round-off of 0 are dropped from :math:`L_v` (their
    rows are zero) as :func:`~drflmodel.problems.relative.quadratic.psd_factor` does, and a clearly negative
    one raises :class:`~drflmodel.errors.NotConvexError` there."""
    lambdas = np.atleast_2d(lambdas)
    V, d = lambdas.shape[0], r.shape[1]
    P = np.einsum("vi,ijk->vjk", lambdas, Q)
    P = S @ (0.5 * (P + P.transpose(0, 2, 1))) @ S
    q = (lambdas @ r) @ S                                   # S q_v (S symmetric)
    c0 = lambdas @ c
    w, U = np.linalg.eigh(P)
    scale = np.maximum(1.0, np.abs(w).max(axis=1))
    bad = np.flatnonzero(w[:, 0] < -1e-9 * scale)
    if bad.size:                                            # the shared refusal, with its message
        qd.psd_factor(P[bad[0]])
    keep = w > 1e-9 * scale[:, None]
    coords = np.einsum("vjk,vj->vk", U, q)                  # q in the eigenbasis
    root = np.sqrt(np.where(keep, w, 1.0))
    shift = np.where(keep, coords / root, 0.0)              # w_v with L_v w_v = projection of q_v
    L_t = np.where(keep[:, :, None], root[:, :, None] * U.transpose(0, 2, 1), 0.0)   # L_v^T rows
    q_perp = np.einsum("vjk,vk->vj", U, np.where(keep, 0.0, coords))
    small = np.linalg.norm(q_perp, axis=1) <= 1e-14 * np.maximum(1.0, np.linalg.norm(q, axis=1))
    q_perp[small] = 0.0
    c_prime = c0 - np.sum(shift * shift, axis=1)
    A = np.zeros((V, d + 2, d + 1))
    A[:, 0, :d] = A[:, 1, :d] = -2.0 * q_perp
    A[:, 0, d] = A[:, 1, d] = -1.0
    A[:, 2:, :d] = -2.0 * L_t
    b = np.concatenate([(1.0 - c_prime)[:, None], (-1.0 - c_prime)[:, None], -2.0 * shift], axis=1)
    return A, b


def _clarabel_socp(A_rows, b_v, idx, S, box, settings):
    """One Clarabel solve of R1 over the vertex cones ``idx`` (``A_rows``: every cone's rows, CSR):
    ``(z, t, mu, status, iterations)`` (``z`` is ``None`` without a solution)."""
    import clarabel

    n_cones, d = idx.size, S.shape[0]
    rows = (idx[:, None] * (d + 2) + np.arange(d + 2)).reshape(-1)
    blocks, rhs = [A_rows[rows]], [b_v[idx].reshape(-1)]
    cones = [clarabel.SecondOrderConeT(d + 2)] * n_cones
    if box is not None:
        lower, upper = box
        blocks += [sp.csr_matrix(np.hstack([S, np.zeros((d, 1))])), sp.csr_matrix(np.hstack([-S, np.zeros((d, 1))]))]
        rhs += [upper, -lower]
        cones.append(clarabel.NonnegativeConeT(2 * d))
    q_obj = np.zeros(d + 1)
    q_obj[d] = 1.0
    options = clarabel.DefaultSettings()
    options.verbose = False
    for key, value in {**SOLVER_OPTIONS["CLARABEL"], **(settings or {})}.items():
        setattr(options, key, value)
    solver = clarabel.DefaultSolver(sp.csc_matrix((d + 1, d + 1)), q_obj, sp.vstack(blocks, format="csc"),
                                    np.concatenate(rhs), cones, options)
    out = solver.solve()
    x, y = np.asarray(out.x, float), np.asarray(out.z, float)
    if x.size != d + 1 or not np.all(np.isfinite(x)):
        return None, float("nan"), None, str(out.status), int(out.iterations)
    starts = (d + 2) * np.arange(n_cones)
    return x[:d], float(x[d]), np.maximum(y[starts] + y[starts + 1], 0.0), str(out.status), int(out.iterations)


def solve_vertex_socp(Q, r, c, lambdas, box=None, settings: dict | None = None, max_rounds: int = 50):
    r"""Solve R1 with Clarabel's native interface, over an **active set of vertices**: only a few
    vertex constraints are active at the optimum, and every vertex's value
    :math:`\lambda_v^\top f(\theta)` is cheap in numpy (from the :math:`n` client values). Start
    from the :math:`2(d+2)` vertices with the largest values at the minimizer of the mean vertex's
    quadratic; after each solve add the (up to :math:`d+2`) most violated vertices
    (:math:`\lambda_v^\top f(\theta)>t` beyond round-off) until none is. Dropping constraints
    only relaxes R1, so the multipliers of the last solve remain a valid certificate's weights.

    Returns ``(theta, mu, value, status, iterations)`` with ``mu`` over all vertices (zero off the
    active set); ``theta``/``mu`` are ``None`` when Clarabel returns no solution."""
    lambdas = np.atleast_2d(lambdas)
    V, d = lambdas.shape[0], r.shape[1]
    S = qd.preconditioner(Q)
    A_v, b_v = _vertex_cones(Q, r, c, lambdas, S)
    A_rows = sp.csr_matrix(A_v.reshape(-1, d + 1))

    def vertex_values(theta):
        f = np.einsum("j,ijk,k->i", theta, Q, theta) - 2.0 * r @ theta + c
        return lambdas @ f

    P, q, _ = qd.aggregate(Q, r, c, lambdas.mean(axis=0))
    start = np.linalg.lstsq(P, q, rcond=None)[0]
    if box is not None:
        start = np.clip(start, *box)
    active = np.zeros(V, bool)
    active[np.argsort(-vertex_values(start))[:min(V, 2 * (d + 2))]] = True
    iterations, status = 0, "not solved"
    for _ in range(max_rounds):
        idx = np.flatnonzero(active)
        z, t, mu_active, status, it = _clarabel_socp(A_rows, b_v, idx, S, box, settings)
        iterations += it
        if z is None:
            return None, None, float("nan"), status, iterations
        theta = S @ z
        values = vertex_values(theta)
        violated = (~active) & (values > t + 1e-10 * max(1.0, abs(t)))
        if not violated.any():
            break
        worst = np.flatnonzero(violated)[np.argsort(-values[violated])][: d + 2]
        active[worst] = True
    mu = np.zeros(V)
    mu[idx] = mu_active
    return theta, mu, t, status, iterations
