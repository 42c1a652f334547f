r"""A fast certified route for the convex DEO problems (linear fairness loss, smooth objective loss):
Newton's method in numpy with the constraint handled exactly (``solve(method="newton")``).

With the linear fairness loss, :math:`D(\theta)=a^\top\theta` is linear (:math:`a=\nabla D=
-\frac12(u_a-u_b)`) and the feasible set of problem (4) is the slab :math:`|a^\top\theta|\le\varepsilon`.
For a twice-differentiable loss and :math:`\ell_2>0` the objective :math:`L` is strongly convex, so:

* if the unconstrained minimizer lies in the slab, it is the solution (multipliers 0);
* otherwise the solution lies on the face :math:`a^\top\theta=s\varepsilon` on the side
  :math:`s=\mathrm{sign}(a^\top\theta_{\rm unc})` the unconstrained minimizer violates (a convex
  function minimized over a slab that excludes its unconstrained minimizer attains the minimum on
  the boundary between them), found by equality-constrained Newton steps from the projection onto
  that face: :math:`\Delta=-H^{-1}g+\nu H^{-1}a`, :math:`\nu=a^\top H^{-1}g/a^\top H^{-1}a`, so
  :math:`a^\top\Delta=0`; the multiplier is :math:`\rho=-a^\top\nabla L/\|a\|^2`
  (:math:`\lambda_1=\rho_+`, :math:`\lambda_2=\rho_-`).

Problem :math:`P_c` (``penalty_c``) is unconstrained and :math:`C^1`:
:math:`L+\frac1{2c}(|a^\top\theta|-\varepsilon)_+^2`, minimized by Newton's method with its generalized
Hessian :math:`\nabla^2L+\frac1c[|a^\top\theta|>\varepsilon]\,aa^\top` (semismooth Newton).

Each step is one pass over the rows (scores, gradient, the :math:`d\times d` Hessian :math:`X^\top
\mathrm{diag}(w)X`) and a :math:`d\times d` solve; no conic model is built.

**Certificate** (unchanged): the problem's Lagrangian bound
:math:`f(\hat\theta,\lambda)-\|\nabla_\theta f(\hat\theta,\lambda)\|^2/(2\ell_2)` at the Newton
multipliers (problem (4)) or at the penalty multipliers :math:`\lambda_c` (:math:`P_c`), evaluated in
numpy (:mod:`.lagrangian`) and lowered by a floating-point allowance for its sums over the rows
(:func:`_rounding_allowance`); the upper bound is :math:`L` at the point projected exactly onto the
slab.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ...solution import status_from_gap
from ..engine.steps import check_step_options
from .routes import DEORoute

__all__ = ["NewtonRoute"]


class NewtonRoute(DEORoute):
    """Newton's method with the DEO constraint handled exactly (module docstring). Options:
    ``max_steps`` (Newton steps per stage, default 50) and ``tol`` (the Newton decrement, relative
    to the objective, at which a stage stops; default 1e-15)."""

    name = "newton"
    classes = ("affine_fair", "penalty_c_affine")
    options = {"max_steps": 50, "tol": 1e-15}
    uses_solver = False
    passes_solver_options = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        reason = super().applies(structure)
        if reason is not None:
            return reason
        if not structure.twice_differentiable:
            return (f"the loss {structure.loss!r} is not twice differentiable (Newton's method needs its "
                    f"curvature); method='convex' solves it")
        if structure.l2 <= 0:
            return ("it needs l2 > 0: its certificate is the strong-convexity Lagrangian bound "
                    "(with l2 = 0, method='convex' falls back on the solver's value and says so)")
        return None

    def complete_options(self, given) -> dict:
        return check_step_options(super().complete_options(given))

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        a = problem.fairness_gap_gradient(np.zeros(problem.dim))          # D(theta) = a^T theta
        model = _Objective(problem, a)
        steps = []
        theta, k = _newton(model, np.zeros(problem.dim), None, opts)
        steps.append(k)
        if problem.penalty_c is None:
            lam = np.zeros(2)                                 # the unconstrained minimizer is feasible
            D, eps = float(a @ theta), problem.eps_deo
            if abs(D) > eps:                                  # the solution lies on the violated face
                theta = theta - (D - np.sign(D) * eps) / float(a @ a) * a
                theta, k = _newton(model, theta, a, opts)
                steps.append(k)
                theta = problem.project_to_slab(theta)
                rho = -float(a @ model.gradient(theta)) / float(a @ a)      # grad L + rho a = 0
                lam = np.array([max(rho, 0.0), max(-rho, 0.0)])
            lb_method = "lagrangian_at_newton_multipliers"
        else:
            lam = problem.penalty_multipliers(theta)
            lb_method = "lagrangian_at_penalty_multipliers"
        allowance = _rounding_allowance(problem, theta, lam)
        lb = problem.lagrangian_bound(theta, lam) - allowance
        ub = problem.objective(theta)
        status = status_from_gap(lb, ub, request.gap_tol)
        info = {"solver": "numpy-newton", "newton_steps": steps, "data_passes": model.passes,
                "bound_allowance": allowance, "route_time": time.perf_counter() - started}
        return problem.make_solution(theta, lam, lb, lb_method, status, "lagrangian_dual_bound", info)


def _rounding_allowance(problem, theta, lam) -> float:
    r"""A floating-point allowance for the Lagrangian bound's sums over the :math:`n` rows:
    :math:`\gamma_n=n\varepsilon/(1-n\varepsilon)` times the magnitudes summed -- the mean loss (its
    terms are nonnegative) and :math:`|\rho|\sum_i|w^D_i|\,|l_f(z_i)|` -- plus :math:`16\varepsilon`
    of the ridge term (the textbook error bound of a sum of :math:`n` terms in any order)."""
    eps = np.finfo(float).eps
    gamma = problem.n * eps / (1.0 - problem.n * eps)
    z = problem.X @ theta
    fair = float(np.abs(problem.group_weights) @ np.abs(problem.fair.value(z, problem.y)))
    return gamma * (problem.data_loss_from_scores(z) + abs(float(lam[0] - lam[1])) * fair
                    + float(np.sum(lam)) * problem.eps_deo) + 16.0 * eps * 0.5 * problem.l2 * float(theta @ theta)


class _Objective:
    """:math:`L` (and the penalty of :math:`P_c`) with its gradient and (generalized) Hessian, one
    pass over the rows per evaluation."""

    def __init__(self, problem, a):
        self.p, self.a = problem, a
        self.passes = 0

    def value(self, theta) -> float:
        self.passes += 1
        v = self.p.loss_value(theta)
        if self.p.penalty_c is not None:
            excess = max(abs(float(self.a @ theta)) - self.p.eps_deo, 0.0)
            v += excess * excess / (2.0 * self.p.penalty_c)
        return v

    def gradient(self, theta) -> np.ndarray:
        return self.derivatives(theta, hessian=False)[1]

    def derivatives(self, theta, hessian: bool = True):
        """``(value, gradient, Hessian or None)`` from one pass."""
        self.passes += 1
        p = self.p
        z = p.X @ theta
        value = float(np.mean(p.loss.value(z, p.y))) + 0.5 * p.l2 * float(theta @ theta)
        g = p.X.T @ (p.loss.derivative(z, p.y) / p.n) + p.l2 * theta
        H = None
        if hessian:
            w = p.loss.second_derivative(z, p.y) / p.n
            H = (p.X * w[:, None]).T @ p.X
            H[np.diag_indices_from(H)] += p.l2
        if p.penalty_c is not None:
            D = float(self.a @ theta)
            excess = max(abs(D) - p.eps_deo, 0.0)
            value += excess * excess / (2.0 * p.penalty_c)
            g = g + (excess * np.sign(D) / p.penalty_c) * self.a
            if hessian and excess > 0:
                H = H + np.outer(self.a, self.a) / p.penalty_c
        return value, g, H


def _newton(model: _Objective, theta, a, opts):
    """Damped Newton from ``theta``; with ``a`` the steps keep :math:`a^\\top\\theta` fixed (the
    equality-constrained Newton step of the module docstring). Stops when half the Newton decrement
    is below ``tol`` relative to the objective. Returns ``(theta, steps)``."""
    value, g, H = model.derivatives(theta)
    k = 0
    for k in range(1, opts["max_steps"] + 1):
        factor = cho_factor(H)
        step = -cho_solve(factor, g)
        if a is not None:
            Ha = cho_solve(factor, a)
            step = step + (float(a @ -step) / float(a @ Ha)) * Ha      # a^T step = 0
            step = step - (float(a @ step) / float(a @ a)) * a         # rounding
        decrement = -float(g @ step)
        if decrement <= 2.0 * opts["tol"] * max(1.0, abs(value)):
            break
        t = 1.0
        while True:                                   # Armijo backtracking on the exact objective
            candidate = theta + t * step
            new = model.value(candidate)
            if new <= value - 1e-4 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        if not new < value:
            break                                     # no decrease left (round-off level)
        theta = candidate
        value, g, H = model.derivatives(theta)
    return theta, k
