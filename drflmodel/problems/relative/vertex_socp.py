r"""The R1 vertex SOCP handed to Clarabel directly (its native interface, no CVXPY compilation).

R1 (:func:`drflmodel.problems._quadratic.build_r1`) is :math:`\min_{z,t}t` subject to one convex
quadratic per vertex point :math:`\lambda_v` of :math:`\Lambda_\varphi(A,B)`,

.. math::

    \|L_v^\top z-w_v\|^2-2q_{\perp,v}^\top z+c'_v\ \le\ t ,\qquad \theta=Sz ,

(:math:`S` the preconditioner, :math:`SP(\lambda_v)S=L_vL_v^\top`, the square completed as in
``build_r1``). With :math:`\tau_v=t+2q_{\perp,v}^\top z-c'_v`, each constraint is the rotated cone
:math:`\|u\|^2\le\tau` written as the second-order cone :math:`\|(2u,\tau-1)\|\le\tau+1`; the box,
if any, is :math:`l\le Sz\le u`. The matrices are assembled in numpy for Clarabel's form
:math:`Ax+s=b`, :math:`s\in\mathcal K` (:math:`x=(z,t)`) -- with hundreds of vertices this replaces
CVXPY's canonicalization of hundreds of quadratic forms, which dominated the R1 route's time.

The multiplier of vertex :math:`v` is :math:`\mu_v=y_{v,0}+y_{v,1}` (Clarabel's dual :math:`y`;
stationarity in :math:`t` gives :math:`\sum_v\mu_v=1`), the weights of the route's weak-duality
certificate :math:`\bar\lambda=\sum_v\mu_v\lambda_v`, which is unchanged.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _quadratic as qd
from .._conic import SOLVER_OPTIONS

__all__ = ["solve_vertex_socp"]


def _vertex_cones(Q, r, c, lambdas, S):
    r"""Rows ``(A, b)`` of every vertex's cone (module docstring) in the variables ``(z, t)``, stacked
    ``(V, d + 2, d + 1)`` and ``(V, d + 2)``. One batched eigen-decomposition of the
    :math:`SP(\lambda_v)S`; eigenvalues within round-off of 0 are dropped from :math:`L_v` (their
    rows are zero) as :func:`~drflmodel.problems._quadratic.psd_factor` does, and a clearly negative
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


def solve_vertex_socp(Q, r, c, lambdas, box=None, settings: dict | None = None):
    """Solve R1 with Clarabel's native interface. Returns ``(theta, mu, value, status, iterations)``:
    the point :math:`\\theta=Sz`, the vertex multipliers, the optimal value and Clarabel's status
    name (``theta``/``mu`` are ``None`` when Clarabel returns no solution)."""
    import clarabel

    d = r.shape[1]
    S = qd.preconditioner(Q)
    A_v, b_v = _vertex_cones(Q, r, c, lambdas, S)
    n_cones = A_v.shape[0]
    blocks, rhs = [A_v.reshape(-1, d + 1)], [b_v.reshape(-1)]
    cones = [clarabel.SecondOrderConeT(d + 2)] * n_cones
    if box is not None:
        lower, upper = box
        blocks += [np.hstack([S, np.zeros((d, 1))]), np.hstack([-S, np.zeros((d, 1))])]
        rhs += [upper, -lower]
        cones.append(clarabel.NonnegativeConeT(2 * d))
    A = sp.csc_matrix(np.vstack(blocks))
    b = np.concatenate(rhs)
    q_obj = np.zeros(d + 1)
    q_obj[d] = 1.0
    options = clarabel.DefaultSettings()
    options.verbose = False
    for key, value in {**SOLVER_OPTIONS["CLARABEL"], **(settings or {})}.items():
        setattr(options, key, value)
    solver = clarabel.DefaultSolver(sp.csc_matrix((d + 1, d + 1)), q_obj, A, b, cones, options)
    out = solver.solve()
    status = str(out.status)
    x, y = np.asarray(out.x, float), np.asarray(out.z, float)
    if x.size != d + 1 or not np.all(np.isfinite(x)):
        return None, None, float("nan"), status, int(out.iterations)
    starts = (d + 2) * np.arange(n_cones)
    mu = np.maximum(y[starts] + y[starts + 1], 0.0)
    return S @ x[:d], mu, float(x[d]), status, int(out.iterations)
