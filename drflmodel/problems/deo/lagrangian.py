r"""The Lagrangian of the DEO-constrained problem and the bounds it certifies (fair-VFL
paper, (6), (8), (9), (12), (13)).

With multipliers :math:`\lambda=(\lambda_1,\lambda_2)\ge0` for (5a) :math:`D_f-\varepsilon\le0`
and (5b) :math:`-D_f-\varepsilon\le0`, :math:`\rho=\lambda_1-\lambda_2`,

.. math:: f(\theta,\lambda) = L(\theta) + \lambda_1(D_f(\theta)-\varepsilon) - \lambda_2(D_f(\theta)+\varepsilon)
          - \tfrac c2\|\lambda\|^2 .

For any :math:`\lambda` such that :math:`f(\cdot,\lambda)` is :math:`\mu`-strongly convex
(:meth:`Lagrangian.lagrangian_convexity`) and any :math:`\hat\theta`,
:math:`\min_{\rm feasible}L\ge f(\hat\theta,\lambda)-\|\nabla_\theta f(\hat\theta,\lambda)\|^2/(2\mu)`
(:meth:`Lagrangian.lagrangian_bound`), evaluated in numpy: every DEO certificate is of this kind.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ...losses import Squared

__all__ = ["Lagrangian"]


class Lagrangian:
    """The Lagrangian toolkit of :class:`~.problem.DEOConstrained` (a mixin: it reads the data,
    the losses and ``eps_deo``); also the server's quantities :math:`\\nu` and
    :math:`\\nabla_\\lambda\\tilde f` of Algorithm 1."""

    def penalty_coefficient(self) -> float:
        """:math:`c` of the penalty form :math:`P_c` (0 for the constrained problem (4))."""
        return 0.0 if self.penalty_c is None else self.penalty_c

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nu_i = \partial f/\partial z_i = \frac1n\partial_z l(z_i,y_i) + \rho\,
        (\frac{\mathbb 1[i\in\mathcal N^a]}{|\mathcal N^a|} - \frac{\mathbb 1[i\in\mathcal N^b]}{|\mathcal N^b|})
        \partial_z l_f(z_i,y_i)`, :math:`\rho = \lambda_1 - \lambda_2` (paper (12))."""
        z = self._scores(scores)
        lam = np.asarray(lam, float)
        rho = float(lam[0] - lam[1])
        return self.loss.derivative(z, self.y) / self.n + rho * self.group_weights * self.fair.derivative(z, self.y)

    def dual_gradient(self, scores, lam=(0.0, 0.0), c: float = 0.0) -> np.ndarray:
        r""":math:`\nabla_\lambda \tilde f = (D - \varepsilon - c\lambda_1,\ -D - \varepsilon - c\lambda_2)` (paper (8))."""
        D = self.fairness_gap_from_scores(scores)
        lam = np.asarray(lam, float)
        return np.array([D - self.eps_deo, -D - self.eps_deo]) - c * lam

    def lagrangian(self, theta, lam, c: float | None = None) -> float:
        r""":math:`f(\theta, \lambda) - \frac c2\|\lambda\|^2` (paper (6); :math:`c` defaults to ``penalty_c`` or 0)."""
        c = self.penalty_coefficient() if c is None else c
        lam = np.asarray(lam, float)
        D = self.fairness_gap(theta)
        return (self.loss_value(theta) + lam[0] * (D - self.eps_deo) - lam[1] * (D + self.eps_deo)
                - 0.5 * c * float(lam @ lam))

    def lagrangian_gradient(self, theta, lam) -> np.ndarray:
        r""":math:`\nabla_\theta f(\theta,\lambda) = X^\top\nu + \ell_2\theta` (paper (9))."""
        t = self._theta(theta)
        return self.X.T @ self.nu(self.X @ t, lam) + self.l2 * t

    def lagrangian_convexity(self, lam) -> float:
        r"""A lower bound :math:`\mu` on the strong-convexity modulus of :math:`f(\cdot, \lambda)`
        (``-inf`` if convexity cannot be established; see the module docstring)."""
        lam = np.asarray(lam, float)
        rho = float(lam[0] - lam[1])
        if self.is_affine:
            return self.l2
        if isinstance(self.fair, Squared):
            H = self.l2 * np.eye(self.dim) + 2.0 * rho * self.quadratic.A
            if isinstance(self.loss, Squared):
                H = H + 2.0 * self.X.T @ self.X / self.n
            return float(np.linalg.eigvalsh(0.5 * (H + H.T))[0])
        # l_f = l: every weight w_i(rho) of (12) must be non-negative
        if -self.n_a / self.n - 1e-15 <= rho <= self.n_b / self.n + 1e-15:
            return self.l2
        return -np.inf

    def lagrangian_bound(self, theta_hat, lam, c: float | None = None) -> float:
        r"""Valid lower bound :math:`f(\hat\theta,\lambda) - \|\nabla_\theta f\|^2/(2\mu)` (``-inf``
        unless :math:`f(\cdot,\lambda)` is :math:`\mu`-strongly convex with :math:`\mu>0`)."""
        lam = np.maximum(np.asarray(lam, float), 0.0)
        mu = self.lagrangian_convexity(lam)
        if not mu > 0:
            return -np.inf
        g = self.lagrangian_gradient(theta_hat, lam)
        return self.lagrangian(theta_hat, lam, c) - float(g @ g) / (2.0 * mu)

    def polished_bound(self, theta_hat, lam, c=None) -> float:
        """:meth:`lagrangian_bound` at ``theta_hat`` and at a Newton-polished minimizer of
        :math:`f(\\cdot,\\lambda)` (twice-differentiable losses; the bound holds at any point)."""
        best = self.lagrangian_bound(theta_hat, lam, c)
        if not np.isfinite(best):
            return best
        try:
            self.loss.ddphi(np.zeros(1))
            self.fair.ddphi(np.zeros(1))
        except NotImplementedError:
            return best
        lam = np.maximum(np.asarray(lam, float), 0.0)
        rho = float(lam[0] - lam[1])

        def hess(t):
            z = self.X @ t
            w = self.loss.second_derivative(z, self.y) / self.n + rho * self.group_weights * self.fair.second_derivative(z, self.y)
            return (self.X * w[:, None]).T @ self.X + self.l2 * np.eye(self.dim)

        try:
            res = minimize(lambda t: self.lagrangian(t, lam, c), np.asarray(theta_hat, float),
                           jac=lambda t: self.lagrangian_gradient(t, lam), hess=hess,
                           method="trust-exact", options={"gtol": 1e-13, "maxiter": 50})
            best = max(best, self.lagrangian_bound(res.x, lam, c))
        except (ValueError, np.linalg.LinAlgError, ArithmeticError):  # pragma: no cover
            pass
        return best

    def kkt_residuals(self, theta, lam) -> dict:
        r"""KKT residuals of (4) at :math:`(\theta, \lambda)` (the fields of the local routes' reports); for
        :math:`P_c` the stationarity of :math:`P_c` and the consistency of :math:`\lambda_c`."""
        lam = np.asarray(lam, float)
        D = self.fairness_gap(theta)
        g = self.lagrangian_gradient(theta, lam)
        out = {"stationarity": float(np.linalg.norm(g)),
               "primal_violation": max(abs(D) - self.eps_deo, 0.0),
               "dual_feasibility": float(max(-lam.min(), 0.0)),
               "D": D}
        if self.penalty_c is None:
            out["complementarity"] = float(abs(lam[0] * (D - self.eps_deo)) + abs(lam[1] * (D + self.eps_deo)))
        else:
            out["multiplier_consistency"] = float(np.abs(lam - self.penalty_multipliers(theta)).max())
        # (13) at the solution with eta = beta = 1: (grad_theta f, lambda - [lambda + grad_lambda f]_+)
        gl = self.dual_gradient(self.X @ self._theta(theta), lam, c=self.penalty_coefficient())
        gap_lam = lam - np.maximum(lam + gl, 0.0)
        out["stationarity_gap_13"] = float(np.sqrt(g @ g + gap_lam @ gap_lam))
        return out
