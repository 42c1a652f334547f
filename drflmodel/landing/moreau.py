r"""FedProx with exact local solves: the minimizer of the clients' Moreau envelopes, certified.

With exact local minimization (Li et al. 2020, "Federated optimization in heterogeneous
networks", Algorithm 2 with :math:`\gamma=0`) a FedProx round is
:math:`\theta^+=\sum_ip_i\operatorname{prox}_{f_i/\mu}(\theta)`. Since the Moreau envelope
:math:`M_i(\theta)=\min_uf_i(u)+\frac\mu2\|u-\theta\|^2` has gradient
:math:`\nabla M_i(\theta)=\mu(\theta-\operatorname{prox}_{f_i/\mu}(\theta))` (Moreau 1965; Bauschke &
Combettes, "Convex analysis and monotone operator theory", Prop. 12.30), a fixed point is exactly a
minimizer of the convex function :math:`\sum_ip_iM_i` -- the backward-backward reading of FedProx in
Malekmohammadi, Shaloudegi, Hu & Yu, "An operator splitting view of federated learning" (2021);
Pathak & Wainwright, "FedSplit" (NeurIPS 2020) show that it is not the minimizer of
:math:`\sum_ip_if_i` in general. Equivalently, it is the :math:`\theta`-part of the joint convex
problem

.. math::

    \min_{\theta,u_1,\dots,u_n}\;F(\theta,u)=\sum_ip_i\Big[f_i(u_i)+\frac\mu2\|u_i-\theta\|^2\Big].

**Certificate** (numpy, no solver's word taken). If :math:`f_i` is :math:`m_i`-strongly convex,
:math:`F` is :math:`\kappa`-strongly convex in the norm
:math:`\|(\delta\theta,\delta u)\|^2=\|\delta\theta\|^2+\sum_ip_i\|\delta u_i\|^2` with
:math:`\kappa=\min_i\lambda_{\min}\begin{pmatrix}m_i+\mu&-\mu\\-\mu&\mu\end{pmatrix}
=\min_i\tfrac12\big(m_i+2\mu-\sqrt{m_i^2+4\mu^2}\big)` (:math:`F-\frac\kappa2\|\cdot\|^2` is a sum
of convex terms). At any point :math:`\hat x` with gradient :math:`g`, whose dual norm is
:math:`\|g\|_*^2=\|g_\theta\|^2+\sum_i\|g_{u_i}\|^2/p_i`,

.. math::

    F(\hat x)-\frac{\|g\|_*^2}{2\kappa}\;\le\;\min F\;\le\;F(\hat x),\qquad
    \|\hat\theta-\theta^\star\|\le\frac{\|g\|_*}{\kappa}.

The point is found by Newton's method on :math:`F` with a backtracking line search. The Newton
system is solved exactly by eliminating the :math:`u_i` when the clients' Hessians fit
(:math:`nP^2\le` ``DIRECT_MAX_ENTRIES``): with :math:`A_i=\nabla^2f_i(u_i)+\mu I`,

.. math::

    \Big(\mu I-\mu^2\sum_ip_iA_i^{-1}\Big)\delta\theta=-g_\theta-\mu\sum_iA_i^{-1}g_{u_i},\qquad
    \delta u_i=A_i^{-1}\big(\mu\,\delta\theta-g_{u_i}/p_i\big);

otherwise by conjugate gradients on Hessian-vector products (vectorized across clients).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.sparse.linalg import LinearOperator, cg

__all__ = ["joint_value", "joint_gradient", "strong_convexity_modulus", "moreau_certificate",
           "solve_moreau_fixed_point", "DIRECT_MAX_ENTRIES"]

#: the largest n P^2 (entries of the clients' Hessians) for which the Newton system is solved directly
DIRECT_MAX_ENTRIES = 5e7


def joint_value(objectives, weights, mu, theta, U) -> float:
    r""":math:`F(\theta,u)` of the module docstring (``U`` of shape ``(n, P)``)."""
    p = np.asarray(weights, float)
    return float(p @ (objectives.values(U) + 0.5 * mu * np.sum((U - theta[None, :]) ** 2, axis=1)))


def joint_gradient(objectives, weights, mu, theta, U):
    r"""``(g_theta, g_U)``: :math:`\mu(\theta-\sum_ip_iu_i)` (for :math:`\sum_ip_i=1`) and
    :math:`p_i(\nabla f_i(u_i)+\mu(u_i-\theta))`."""
    p = np.asarray(weights, float)
    g_theta = mu * (np.sum(p) * theta - p @ U)
    g_U = p[:, None] * (objectives.gradients(U) + mu * (U - theta[None, :]))
    return g_theta, g_U


def strong_convexity_modulus(strong_convexity, mu: float, weights) -> float:
    r""":math:`\kappa=\min_{i:p_i>0}\tfrac12(m_i+2\mu-\sqrt{m_i^2+4\mu^2})` (module docstring)."""
    m = np.asarray(strong_convexity, float)[np.asarray(weights, float) > 0]
    return float(np.min(0.5 * (m + 2.0 * mu - np.sqrt(m * m + 4.0 * mu * mu))))


def moreau_certificate(objectives, weights, mu, theta, U, kappa: float) -> dict:
    """``{"upper", "lower", "radius", "dual_norm"}`` at ``(theta, U)`` (module docstring); the lower
    bound and radius are ``-inf`` / ``inf`` when ``kappa`` is 0."""
    p = np.asarray(weights, float)
    g_theta, g_U = joint_gradient(objectives, weights, mu, theta, U)
    keep = p > 0
    dual_sq = float(g_theta @ g_theta + np.sum(np.sum(g_U[keep] ** 2, axis=1) / p[keep]))
    upper = joint_value(objectives, weights, mu, theta, U)
    if kappa <= 0:
        return {"upper": upper, "lower": -np.inf, "radius": np.inf, "dual_norm": float(np.sqrt(dual_sq))}
    return {"upper": upper, "lower": upper - dual_sq / (2.0 * kappa),
            "radius": float(np.sqrt(dual_sq)) / kappa, "dual_norm": float(np.sqrt(dual_sq))}


def _direct_newton_step(objectives, p, mu, U, g_theta, g_U):
    """The exact Newton step by eliminating the local models (module docstring); clients with
    :math:`p_i=0` do not enter :math:`F` and keep their point."""
    n, P = U.shape
    eye = np.eye(P)
    S = mu * float(np.sum(p)) * eye
    rhs = -g_theta.copy()
    factors = {}
    for i in np.flatnonzero(p > 0):
        H = objectives.restricted(int(i)).weighted_hessian(U[i], np.ones(1))
        c = cho_factor(0.5 * (H + H.T) + mu * eye)
        factors[i] = c
        S -= mu * mu * p[i] * cho_solve(c, eye)
        rhs -= mu * cho_solve(c, g_U[i])
    d_theta = np.linalg.solve(0.5 * (S + S.T), rhs)
    d_U = np.zeros_like(U)
    for i, c in factors.items():
        d_U[i] = cho_solve(c, mu * d_theta - g_U[i] / p[i])
    return d_theta, d_U


def solve_moreau_fixed_point(objectives, weights, mu: float, theta0=None, tol: float = 1e-13,
                             max_newton: int = 100) -> dict:
    r"""Minimize :math:`F` by Newton's method (module docstring). Returns ``{"theta", "U", "dual_norm",
    "newton_steps", "cg_iterations"}``; stops when :math:`\|g\|_*\le` ``tol`` :math:`\max(1,\|\theta\|)`
    or no step decreases :math:`F`."""
    p = np.asarray(weights, float)
    n, P = objectives.n, objectives.dim
    theta = np.zeros(P) if theta0 is None else np.array(theta0, float)
    U = np.array(np.broadcast_to(theta, (n, P)))
    L = np.asarray(objectives.smoothness(), float)
    m = np.asarray(objectives.strong_convexity(), float)
    # diagonal preconditioner: the theta block's mu, each u_i block's p_i (mu + mid curvature)
    scale_U = np.where(p > 0, p * (mu + 0.5 * (L + m)), 1.0)
    size = (n + 1) * P

    def split(z):
        return z[:P], z[P:].reshape(n, P)

    def dual_norm(g_theta, g_U):
        keep = p > 0
        return float(np.sqrt(g_theta @ g_theta + np.sum(np.sum(g_U[keep] ** 2, axis=1) / p[keep])))

    newton = cg_its = 0
    direct = n * P * P <= DIRECT_MAX_ENTRIES and hasattr(objectives, "restricted")
    g_theta, g_U = joint_gradient(objectives, p, mu, theta, U)
    F = joint_value(objectives, p, mu, theta, U)
    while newton < max_newton:
        gn = dual_norm(g_theta, g_U)
        if gn <= tol * max(1.0, float(np.linalg.norm(theta))):
            break
        th0, U0 = theta, U

        def hessp(z, th0=th0, U0=U0):
            d_theta, d_U = split(z)
            h_theta = mu * (np.sum(p) * d_theta - p @ d_U)
            HV = objectives.hessian_vector_products(U0, d_U)
            h_U = p[:, None] * (HV + mu * (d_U - d_theta[None, :]))
            return np.concatenate([h_theta, h_U.ravel()])

        def precond(z):
            d_theta, d_U = split(z)
            return np.concatenate([d_theta / mu, (d_U / scale_U[:, None]).ravel()])

        counter = {"k": 0}

        def count(_):
            counter["k"] += 1

        g = np.concatenate([g_theta, g_U.ravel()])
        if direct:
            d_theta, d_U = _direct_newton_step(objectives, p, mu, U, g_theta, g_U)
            step = np.concatenate([d_theta, d_U.ravel()])
        else:
            H = LinearOperator((size, size), matvec=hessp, dtype=float)
            M = LinearOperator((size, size), matvec=precond, dtype=float)
            step, _ = cg(H, -g, rtol=1e-10, atol=0.0, maxiter=10 * size, M=M, callback=count)
            cg_its += counter["k"]
            d_theta, d_U = split(step)
        newton += 1
        slope = float(g @ step)
        if not slope < 0:                     # not a descent direction: the gradient instead
            d_theta, d_U, slope = -g_theta, -g_U, -float(g @ g)
        t, accepted = 1.0, False
        for _ in range(40):
            th_new, U_new = theta + t * d_theta, U + t * d_U
            F_new = joint_value(objectives, p, mu, th_new, U_new)
            if np.isfinite(F_new) and F_new <= F + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # no decrease measurable in F: accept the full step if it shrinks the gradient (at the
            # floating-point floor of F, the gradient is still informative)
            th_new, U_new = theta + d_theta, U + d_U
            g2 = joint_gradient(objectives, p, mu, th_new, U_new)
            if dual_norm(*g2) < gn:
                theta, U, (g_theta, g_U) = th_new, U_new, g2
                F = joint_value(objectives, p, mu, theta, U)
                continue
            break
        theta, U, F = th_new, U_new, F_new
        g_theta, g_U = joint_gradient(objectives, p, mu, theta, U)
    return {"theta": theta, "U": U, "dual_norm": dual_norm(g_theta, g_U), "newton_steps": newton,
            "cg_iterations": cg_its}
