r"""The fixed point of :math:`J` local (proximal) gradient steps, certified by Banach's theorem.

One round of FedAvg (McMahan et al. 2017) with :math:`J` full-gradient local steps of size
:math:`\eta`, or of FedProx (Li et al. 2020, "Federated optimization in heterogeneous networks",
Algorithm 2) with the same inexact local solver and proximal weight :math:`\mu`, maps the server
model :math:`\theta` to

.. math::

    T(\theta)=\sum_ip_i\,u_{i,J}(\theta),\qquad
    u_{i,j}=u_{i,j-1}-\eta\big(\nabla f_i(u_{i,j-1})+\mu(u_{i,j-1}-\theta)\big),\quad u_{i,0}=\theta,

(:math:`\mu=0` is FedAvg). A server step :math:`\theta^+=\theta-\eta_g(\theta-T(\theta))` has the
same fixed points for every :math:`\eta_g>0`: the strategy lands on a solution of
:math:`T(\theta)=\theta`, in general not the minimizer of :math:`\sum_ip_if_i` (client drift).
This "fixed point of an average of local operators" is the object of Malinovsky, Kovalev,
Gasanov, Condat & Richtárik, "From local SGD to local fixed-point methods for federated learning"
(ICML 2020); Charles & Konečný, "Convergence and accuracy trade-offs in federated learning and
meta-learning" (AISTATS 2021) characterize it exactly for quadratic losses, and Pathak &
Wainwright, "FedSplit" (NeurIPS 2020) show it differs from the optimum already for least squares.

**Certificate.** If every :math:`f_i` is :math:`m_i`-strongly convex with an :math:`L_i`-Lipschitz
gradient, the map :math:`u\mapsto u-\eta(\nabla f_i(u)+\mu u)` is a contraction with factor
:math:`a_i=\max(|1-\eta(m_i+\mu)|,|1-\eta(L_i+\mu)|)` (a gradient step on an
:math:`(m_i+\mu)`-strongly convex, :math:`(L_i+\mu)`-smooth function), so two starting models give
local iterates with :math:`\|\delta u_j\|\le a_i\|\delta u_{j-1}\|+\eta\mu\|\delta\theta\|`, hence

.. math::

    \|u_{i,J}(\theta)-u_{i,J}(\theta')\|\le q_i\|\theta-\theta'\|,\qquad
    q_i=a_i^J+\eta\mu\frac{1-a_i^J}{1-a_i},

and :math:`T` is a contraction with :math:`q=\sum_ip_iq_i` when :math:`q<1` (for FedProx with
:math:`\eta\le2/(L_i+m_i+2\mu)`: :math:`q_i=1-(1-a_i^J)\,m_i/(m_i+\mu)`). Then the fixed point
:math:`\theta^\star` is unique and Banach's a-posteriori bound holds for any :math:`\hat\theta`:

.. math:: \|\hat\theta-\theta^\star\|\le\frac{\|T(\hat\theta)-\hat\theta\|}{1-q}.

The residual is evaluated in floating point; an allowance of :math:`16J\varepsilon(1+\|\hat\theta\|)`
for its rounding is added (an allowance, not interval arithmetic).

**Computation.** Newton's method on :math:`T(\theta)-\theta=0` with Jacobian-vector products
propagated through the local steps (:math:`\delta u_j=\delta u_{j-1}-\eta(\nabla^2f_i(u_{j-1})\delta
u_{j-1}+\mu(\delta u_{j-1}-\delta\theta))`, Hessian-vector products only), the linear systems solved
by GMRES; a step that does not reduce the residual is replaced by :math:`\theta\leftarrow T(\theta)`,
which contracts, so the iteration converges from any start. For :math:`P\le` ``PRECONDITION_MAX_DIM``
GMRES is preconditioned by the Jacobian the clients would have if they all shared the averaged Hessian
:math:`\bar H=\sum_ip_i\nabla^2f_i(\theta)`: in its eigenbasis
:math:`I-J_T\approx I-a^J-\eta\mu\frac{1-a^J}{1-a}`, :math:`a=1-\eta(\lambda+\mu)` (exact for
identical quadratic clients); without it GMRES needs about the condition number of :math:`\bar H`
iterations.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, gmres

from ..solvers.baselines import proximal_local_steps

__all__ = ["local_iterates", "local_trajectory", "local_iterates_jvp", "average_map", "contraction_factors",
           "shared_hessian_preconditioner", "solve_local_steps_fixed_point", "ROUNDING_ALLOWANCE",
           "PRECONDITION_MAX_DIM"]

#: the floating-point allowance added to a residual, per local step and unit of ``1 + ||theta||``
ROUNDING_ALLOWANCE = 16.0 * np.finfo(float).eps
#: the largest model size for which GMRES is preconditioned through a dense averaged Hessian
PRECONDITION_MAX_DIM = 3000


def local_iterates(objectives, theta, steps: int, eta: float, mu: float = 0.0) -> np.ndarray:
    r"""Every client's :math:`u_{i,J}(\theta)` (shape ``(n, P)``): :math:`J` steps
    :math:`u\leftarrow u-\eta(\nabla f_i(u)+\mu(u-\theta))` from :math:`u=\theta` -- the local
    solver of drflmodel's FedAvg / FedProx itself (:func:`~drflmodel.solvers.baselines.proximal_local_steps`),
    so the fixed point is that of the arithmetic the solvers run."""
    return proximal_local_steps(objectives, np.asarray(theta, float), steps, eta, mu)


def local_trajectory(objectives, theta, steps: int, eta: float, mu: float = 0.0) -> list:
    r"""The local iterates :math:`u_{i,0},\dots,u_{i,J}` of every client (a list of ``J + 1`` arrays
    of shape ``(n, P)``), to differentiate through them without recomputing their gradients."""
    theta = np.asarray(theta, float)
    U = np.array(np.broadcast_to(theta, (objectives.n, theta.size)))
    out = [U]
    for _ in range(steps):
        U = U - eta * (objectives.gradients(U) + mu * (U - theta[None, :]))
        out.append(U)
    return out


def local_iterates_jvp(objectives, theta, v, steps: int, eta: float, mu: float = 0.0, trajectory=None):
    r"""``(U, dU)``: the local iterates and their derivative along the server direction ``v``
    (module docstring), both of shape ``(n, P)``; ``trajectory`` (:func:`local_trajectory` at
    ``theta``) saves the gradients."""
    theta, v = np.asarray(theta, float), np.asarray(v, float)
    n = objectives.n
    traj = trajectory if trajectory is not None else local_trajectory(objectives, theta, steps, eta, mu)
    dU = np.array(np.broadcast_to(v, (n, v.size)))
    for U in traj[:steps]:
        dU = dU - eta * (objectives.hessian_vector_products(U, dU) + mu * (dU - v[None, :]))
    return traj[steps], dU


def average_map(objectives, weights, theta, steps: int, eta: float, mu: float = 0.0) -> np.ndarray:
    r""":math:`T(\theta)=\sum_ip_iu_{i,J}(\theta)`."""
    return np.asarray(weights, float) @ local_iterates(objectives, theta, steps, eta, mu)


def contraction_factors(smoothness, strong_convexity, steps: int, eta: float, mu: float = 0.0) -> np.ndarray:
    r"""Per-client Lipschitz constants :math:`q_i` of :math:`\theta\mapsto u_{i,J}(\theta)` (module
    docstring); ``inf`` where the local step does not contract (:math:`a_i\ge1`)."""
    L = np.asarray(smoothness, float)
    m = np.asarray(strong_convexity, float)
    a = np.maximum(np.abs(1.0 - eta * (m + mu)), np.abs(1.0 - eta * (L + mu)))
    q = np.full(a.shape, np.inf)
    ok = a < 1.0
    aJ = a[ok] ** steps
    q[ok] = aJ + (eta * mu * (1.0 - aJ) / (1.0 - a[ok]) if mu > 0 else 0.0)
    return q


def shared_hessian_preconditioner(objectives, weights, theta, steps: int, eta: float, mu: float = 0.0):
    r"""An approximate inverse of :math:`I-J_T(\theta)` (module docstring), or ``None`` when the
    objectives give no dense Hessian or :math:`P>` ``PRECONDITION_MAX_DIM``."""
    P = objectives.dim
    if P > PRECONDITION_MAX_DIM or not hasattr(objectives, "weighted_hessian"):
        return None
    H = objectives.weighted_hessian(theta, np.asarray(weights, float))
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    a = 1.0 - eta * (lam + mu)
    aJ = a ** steps
    one_minus_a = eta * (lam + mu)
    series = np.where(np.abs(one_minus_a) > 1e-12, (1.0 - aJ) / np.where(one_minus_a == 0, 1.0, one_minus_a),
                      float(steps))
    m = 1.0 - aJ - eta * mu * series
    m = np.where(np.abs(m) < 1e-14, 1e-14, m)
    return LinearOperator((P, P), matvec=lambda r: V @ ((V.T @ r) / m), dtype=float)


#: trajectories of at most this many floats ((J + 1) n P) are kept between Jacobian-vector products
_TRAJECTORY_MAX_FLOATS = 25_000_000


def _residual(objectives, weights, theta, steps, eta, mu, keep: bool):
    """``(T(theta) - theta, trajectory or None)``."""
    traj = local_trajectory(objectives, theta, steps, eta, mu)
    r = np.asarray(weights, float) @ traj[-1] - theta
    return r, (traj if keep else None)


def solve_local_steps_fixed_point(objectives, weights, steps: int, eta: float, mu: float = 0.0,
                                  theta0=None, tol: float = 1e-15, max_newton: int = 60) -> dict:
    r"""A solution of :math:`T(\theta)=\theta` (module docstring): inexact Newton-GMRES with the exact
    Jacobian-vector products (relative accuracy :math:`\min(10^{-2},\|r\|^{1/2})`, so the steps turn
    quadratic near the point) and a backtracking line search on :math:`\|T(\theta)-\theta\|` (the
    Newton direction decreases it), safeguarded by the contracting step :math:`\theta\leftarrow T(\theta)`.

    Returns ``{"theta", "residual" (the norm of T(theta) - theta), "newton_steps",
    "fixed_point_steps", "gmres_iterations"}``; stops when the residual is at most
    ``tol * max(1, ||theta||)`` or stops decreasing.
    """
    p = np.asarray(weights, float)
    P = objectives.dim
    keep = (steps + 1) * objectives.n * P <= _TRAJECTORY_MAX_FLOATS
    theta = np.zeros(P) if theta0 is None else np.array(theta0, float)
    r, traj = _residual(objectives, p, theta, steps, eta, mu, keep)
    nr = float(np.linalg.norm(r))
    newton = fixed = gmres_its = 0
    stalled = failed = 0
    while nr > tol * max(1.0, float(np.linalg.norm(theta))) and newton < max_newton:
        base, base_traj = theta.copy(), traj

        def matvec(v, base=base, base_traj=base_traj):            # (I - J_T) v
            _, dU = local_iterates_jvp(objectives, base, v, steps, eta, mu, trajectory=base_traj)
            return v - p @ dU

        counter = {"k": 0}

        def count(_):
            counter["k"] += 1

        A = LinearOperator((P, P), matvec=matvec, dtype=float)
        M = shared_hessian_preconditioner(objectives, p, theta, steps, eta, mu)
        forcing = max(1e-12, min(1e-2, float(np.sqrt(nr / max(1.0, float(np.linalg.norm(theta)))))))
        delta, _ = gmres(A, r, rtol=forcing, atol=0.0, restart=min(P, 60), maxiter=3 if M is not None else 20,
                         M=M, callback=count, callback_type="pr_norm")
        gmres_its += counter["k"]
        newton += 1
        step, accepted = 1.0, False
        for _ in range(30):                     # backtracking on the residual's norm (a descent direction)
            cand = theta + step * delta
            rc, tc = _residual(objectives, p, cand, steps, eta, mu, keep)
            nc = float(np.linalg.norm(rc))
            if np.isfinite(nc) and nc < (1.0 - 1e-4 * step) * nr:
                accepted = True
                break
            step *= 0.5
        if accepted:
            stalled = stalled + 1 if (step == 1.0 and nc > 0.5 * nr) else 0
            theta, r, nr, traj = cand, rc, nc, tc
        else:                                   # the contracting step instead
            theta = theta + r
            r, traj = _residual(objectives, p, theta, steps, eta, mu, keep)
            fixed += 1
            failed += 1
            nr = float(np.linalg.norm(r))
        if stalled >= 3 or failed >= 5 or not np.isfinite(nr):   # at the floating-point floor, or stuck
            break
    return {"theta": theta, "residual": nr, "newton_steps": newton, "fixed_point_steps": fixed,
            "gmres_iterations": gmres_its}
