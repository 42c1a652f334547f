r"""The exact dual bound of the convex DEO problem with a piecewise-linear loss (hinge, pinball,
:math:`\epsilon`-insensitive), evaluated in numpy at a feasible dual point.

Why: the Lagrangian bound of :mod:`.lagrangian`, :math:`f(\hat\theta,\lambda)-\|g\|^2/(2\mu)` with
a subgradient :math:`g`, is loose at a kink (a support vector's subgradient is not the one that
makes the Lagrangian stationary); with :math:`\mu=\ell_2=10^{-3}` it left gaps of 4--80%.

**The bound.** Write the loss of sample *i* in its score :math:`u=x_i^\top\theta` as the max of
its affine pieces, :math:`l_i(u)=\max_j(a_{ij}u+b_{ij})` (``Loss.pieces()``; :math:`a_{ij}=a_jy_i`,
:math:`b_{ij}=b_j` in classification, :math:`a_{ij}=a_j`, :math:`b_{ij}=b_j-a_jy_i` in regression).
For weights :math:`\alpha_i` in the simplex over the pieces, :math:`l_i(u)\ge s_iu+o_i` with
:math:`s_i=\sum_j\alpha_{ij}a_{ij}`, :math:`o_i=\sum_j\alpha_{ij}b_{ij}`. With the linear fairness
loss :math:`D(\theta)=g_D^\top\theta` is linear (:math:`D(0)=0`), and for :math:`\lambda\ge0`,
:math:`\rho=\lambda_1-\lambda_2`, weak duality for problem (4) of Liu et al., *Achieving Model
Fairness in Vertical Federated Learning* (and, with :math:`c>0`, for the quadratic-penalty problem
:math:`P_c`, since :math:`(|D|-\varepsilon)_+^2/(2c)\ge\lambda_1(D-\varepsilon)-\lambda_2(D+\varepsilon)-\tfrac c2\|\lambda\|^2`) gives

.. math::

    p^\star\ \ge\ g(\alpha,\lambda)=\frac1n\sum_io_i-\frac{\|v\|^2}{2\ell_2}-\varepsilon(\lambda_1+\lambda_2)
    -\frac c2\|\lambda\|^2,\qquad v=\frac1nX^\top s+\rho\,g_D ,

the minimum over :math:`\theta` of the affine minorant plus the ridge, attained at
:math:`\theta(\alpha,\lambda)=-v/\ell_2`. :math:`g` is valid at **any** :math:`\alpha` in the simplices
and any :math:`\lambda\ge0` -- no residual, no solver tolerance enters it -- and its maximum equals
:math:`p^\star` (strong duality: a convex problem with linear constraints).

**The dual point.** At the solver's :math:`\hat\theta` every sample whose best piece beats the
runner-up by more than :math:`|a_{ij}-a_{i,\rm top}|\,\|x_i\|\,R` keeps its active piece
(:math:`\alpha_i` a vertex) as long as :math:`\|\hat\theta-\theta^\star\|\le R`; only the others (the
support vectors, at a kink) and :math:`\lambda` are chosen by a small concave QP. :math:`R` starts
small and is then set from the bound itself -- strong convexity gives
:math:`\|\hat\theta-\theta^\star\|^2\le2(U-L)/\ell_2` -- so the second QP provably contains an optimal dual
point; the solution is projected onto the simplices and :math:`\lambda\ge0` and :math:`g` recomputed
in numpy. The dual also yields the primal point :math:`\theta(\alpha,\lambda)`, which the route may
prefer when it is feasible and better.
"""

from __future__ import annotations

from typing import NamedTuple

import cvxpy as cp
import numpy as np

__all__ = ["PiecewiseDual", "piecewise_dual_bound", "score_pieces"]

#: first guess of ||theta_hat - theta*|| relative to max(1, ||theta_hat||) (then set from the bound)
_R0 = 1e-7
#: largest number of samples left free in the QP (the full dual beyond it would cost as much as
#: the primal solve); above it the bound keeps the smaller free set
_MAX_FREE = 20_000


class PiecewiseDual(NamedTuple):
    """The dual bound and the point that produced it."""

    bound: float               # g(alpha, lam), -inf if not available
    alpha: np.ndarray | None   # (n, K) piece weights (rows in the simplex)
    lam: np.ndarray            # (2,) multipliers >= 0
    theta: np.ndarray | None   # theta(alpha, lam) = -v / l2, the dual's primal point
    n_free: int                # samples whose weights the QP chose
    rounds: int                # QP solves


def score_pieces(loss, y) -> tuple[np.ndarray, np.ndarray]:
    r"""``(A, B)`` of shape (n, K): :math:`l(u_i, y_i)=\max_j(A_{ij}u_i+B_{ij})` (module docstring)."""
    a, b = (np.asarray(v, float) for v in zip(*loss.pieces()))
    y = np.asarray(y, float)[:, None]
    if loss.task == "classification":
        return a[None, :] * y, np.broadcast_to(b[None, :], (y.shape[0], a.size)).copy()
    return np.broadcast_to(a[None, :], (y.shape[0], a.size)).copy(), b[None, :] - a[None, :] * y


def dual_value(problem, A, B, alpha, lam, c: float) -> tuple[float, np.ndarray]:
    """``(g(alpha, lam), theta(alpha, lam))`` in numpy, after projecting ``alpha`` onto the
    simplices and ``lam`` onto the nonnegative orthant (module docstring)."""
    alpha = _project_rows(alpha)
    lam = np.maximum(np.asarray(lam, float), 0.0)
    n = problem.n
    s = np.sum(alpha * A, axis=1)
    v = problem.X.T @ s / n
    if lam.any():                                  # D is linear: D(theta) = gD' theta
        v = v + (lam[0] - lam[1]) * problem.fairness_gap_gradient(np.zeros(problem.dim))
    value = (float(np.sum(alpha * B)) / n - float(v @ v) / (2.0 * problem.l2)
             - problem.eps_deo * float(lam.sum()) - 0.5 * c * float(lam @ lam))
    return value, -v / problem.l2


def _project_rows(alpha) -> np.ndarray:
    """Each row onto the simplex by clipping and rescaling (any simplex point gives a valid bound)."""
    alpha = np.maximum(np.asarray(alpha, float), 0.0)
    total = alpha.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    alpha[empty] = 1.0 / alpha.shape[1]
    total[empty] = 1.0
    return alpha / total


def _free_samples(A, P, xnorm, radius) -> np.ndarray:
    """Samples whose active piece may change within ``radius`` of the point (module docstring)."""
    top = np.argmax(P, axis=1)
    rows = np.arange(P.shape[0])
    gap = P[rows, top][:, None] - P                                   # >= 0, 0 at the top piece
    reach = np.abs(A - A[rows, top][:, None]) * (xnorm * radius)[:, None]
    close = (gap <= reach + 1e-12 * (1.0 + np.abs(P[rows, top]))[:, None])
    close[rows, top] = False
    return close.any(axis=1)


def _solve_qp(problem, A, B, alpha_fixed, free, lam0, c, solve,
              multipliers: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Maximize g over the free samples' weights and (``multipliers``) lambda, the others fixed;
    ``None`` if no solver answered."""
    n, K = A.shape
    keep = ~free
    v = problem.X[keep].T @ np.sum(alpha_fixed[keep] * A[keep], axis=1) / n
    linear = float(np.sum(alpha_fixed[keep] * B[keep])) / n
    lam = None
    if multipliers:
        lam = cp.Variable(2, nonneg=True)
        v = v + (lam[0] - lam[1]) * problem.fairness_gap_gradient(np.zeros(problem.dim))
        linear = linear - problem.eps_deo * cp.sum(lam)
        lam.value = np.maximum(lam0, 0.0)
    if free.any():
        alpha = cp.Variable((int(free.sum()), K), nonneg=True)
        Af, Bf = A[free], B[free]
        v = v + problem.X[free].T @ cp.sum(cp.multiply(alpha, Af), axis=1) / n
        linear = linear + cp.sum(cp.multiply(alpha, Bf)) / n
        cons = [cp.sum(alpha, axis=1) == 1]
    else:
        alpha, cons = None, []
    objective = linear - cp.sum_squares(v) / (2.0 * problem.l2)
    if c > 0 and multipliers:
        objective = objective - 0.5 * c * cp.sum_squares(lam)
    qp = cp.Problem(cp.Maximize(objective), cons)
    if alpha is not None:
        alpha.value = alpha_fixed[free]
    if solve(qp) is None:
        return None
    out = alpha_fixed.copy()
    if alpha is not None:
        out[free] = alpha.value
    return out, (np.zeros(2) if lam is None else np.asarray(lam.value, float))


def piecewise_dual_bound(problem, theta_hat, lam_hat, upper: float, solve, c: float = 0.0,
                         multipliers: bool = True) -> PiecewiseDual:
    r"""The dual bound :math:`g` (module docstring) made tight near ``theta_hat``: the active
    pieces fixed where the point decides them, the rest and :math:`\lambda` by a concave QP
    (``solve(cp.Problem) -> solver name or None``); ``upper`` is the objective at ``theta_hat``
    (it sets the radius of the second round). Needs ``problem.l2 > 0`` and a linear :math:`D`;
    with ``multipliers=False`` :math:`\lambda=0`: the bound on the *unconstrained* minimum of
    :math:`L` (any fairness loss)."""
    usable = problem.l2 > 0 and getattr(problem.loss, "piecewise_linear", False)
    if not usable or (multipliers and not problem.is_affine):
        return PiecewiseDual(-np.inf, None, np.zeros(2), None, 0, 0)
    A, B = score_pieces(problem.loss, problem.y)
    theta_hat = np.asarray(theta_hat, float)
    u = problem.X @ theta_hat
    P = A * u[:, None] + B
    alpha = np.zeros_like(A)
    alpha[np.arange(A.shape[0]), np.argmax(P, axis=1)] = 1.0
    lam = np.maximum(np.asarray(lam_hat, float), 0.0) if multipliers else np.zeros(2)
    value, theta = dual_value(problem, A, B, alpha, lam, c)
    best = PiecewiseDual(value, alpha, lam, theta, 0, 0)
    xnorm = np.linalg.norm(problem.X, axis=1)
    radius = _R0 * max(1.0, float(np.linalg.norm(theta_hat)))
    free_before = None
    for rounds in (1, 2, 3):
        free = _free_samples(A, P, xnorm, radius)
        if free.sum() > _MAX_FREE:
            break
        if free_before is not None and np.array_equal(free, free_before):
            break
        solved = _solve_qp(problem, A, B, alpha, free, lam, c, solve, multipliers)
        free_before = free
        if solved is None:
            break
        value, theta = dual_value(problem, A, B, solved[0], solved[1], c)
        if value > best.bound:
            best = PiecewiseDual(value, _project_rows(solved[0]), np.maximum(solved[1], 0.0), theta,
                                 int(free.sum()), rounds)
        gap = max(upper - best.bound, 0.0)
        radius = max(radius, np.sqrt(2.0 * gap / problem.l2))       # ||theta_hat - theta*|| <= radius
    return best
