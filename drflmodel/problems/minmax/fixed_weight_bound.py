r"""The fixed-weight lower bound in numpy: Newton's method on a weighted objective, closed by a
certified bound.

For fixed weights :math:`\lambda\ge0` the certificate of :class:`~drflmodel.problems.minmax.dro.WeightedMinMax`
needs a certified lower bound on

.. math::

    g^\star=\inf_\theta g(\theta),\qquad g(\theta)=\sum_i\lambda_i f_i(\theta),\quad
    f_i(\theta)=\tfrac1{N_i}\textstyle\sum_j \ell(W^\top x_{ij},y_{ij})+\tfrac{\ell_2}2\sum_j\omega_j\|W_{j\cdot}\|^2 .

:math:`g` is constant along the invariant directions :math:`\mathcal N` of the layout (a common shift
of the class scores on unpenalized features, :mod:`drflmodel.layout`), so everything below works on
the complement :math:`\mathcal N^\perp` (gradients projected, the Hessian deflated by
:math:`\kappa P_{\mathcal N}`). Two bounds are valid **at any point** :math:`\hat\theta`; the
certificate takes the larger:

1. *Strong convexity* (:math:`\mu=\sum_i\lambda_i\mu_i>0`, e.g. :math:`\ell_2>0` on every feature):
   :math:`g^\star\ge g(\hat\theta)-\|\nabla g(\hat\theta)\|^2/(2\mu)`.
2. *Generalized self-concordance* (losses with ``self_concordance`` :math:`M`: logistic, softmax,
   squared; F. Bach 2010, "Self-concordant analysis for logistic regression", Electronic Journal of
   Statistics 4, Prop. 1). Along :math:`\hat\theta+t\Delta` each sample's loss :math:`h` satisfies
   :math:`|h'''|\le R\,h''` with :math:`R=M\|\Delta\|\max_j\|x_j\|=:c\|\Delta\|`, hence
   :math:`h''(t)\ge h''(0)e^{-Rt}` and, for :math:`\|\Delta\|\le r`,

   .. math::

       g(\hat\theta+\Delta)\ \ge\ g(\hat\theta)+\nabla g^\top\Delta+\psi(cr)\,\Delta^\top H\Delta,
       \qquad \psi(R)=\frac{e^{-R}+R-1}{R^2}\le\tfrac12 ,

   with :math:`H=\nabla^2g(\hat\theta)` (the ridge part is exactly quadratic, and
   :math:`\tfrac12\ge\psi`). If :math:`r\,\psi(cr)\,\lambda_{\min}(H)>\|\nabla g\|` the model is
   positive on the sphere :math:`\|\Delta\|=r`, so by convexity every point below
   :math:`g(\hat\theta)` lies inside the ball, and

   .. math:: g^\star\ \ge\ g(\hat\theta)-\frac{\nabla g^\top H^{-1}\nabla g}{4\,\psi(cr)} .

   It needs no strong convexity -- only a positive definite Hessian at :math:`\hat\theta` on
   :math:`\mathcal N^\perp` -- so it certifies an **unpenalized intercept**, and tends to the Newton
   decrement :math:`\frac12\nabla g^\top H^{-1}\nabla g` as :math:`\hat\theta\to\theta^\star`. For the
   squared loss (:math:`M=0`) it is the exact minimum of the quadratic.

Newton's method only makes the bounds tight: damped steps :math:`\Delta=-H^{-1}\nabla g` (on
:math:`\mathcal N^\perp`) with :math:`H` assembled in :math:`K(K+1)/2` BLAS products over all rows,
Armijo backtracking, started from the saddle point's :math:`\theta^\star` (already stationary for
:math:`\lambda^\star`, so one or two steps suffice).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

__all__ = ["NewtonBound", "weighted_newton_bound", "certified_lower_bound", "concordance_factor",
           "concordance_radius"]


@dataclass
class NewtonBound:
    """Result of :func:`weighted_newton_bound`: ``bound`` ≤ :math:`g^\\star` ≤ ``value``."""

    theta: np.ndarray
    value: float            # g(theta)
    bound: float            # a certified lower bound on inf g (module docstring)
    grad_norm: float
    iterations: int
    converged: bool
    kind: str = "strong-convexity"


def concordance_factor(c: float, rho: float) -> float | None:
    r""":math:`\psi(cr)` for the smallest :math:`r` with :math:`r\,\psi(cr)>\rho` (module docstring),
    or ``None`` when no radius works (:math:`c\rho\ge1`: the point is too far from the optimum)."""
    found = concordance_radius(c, rho)
    return None if found is None else found[1]


def concordance_radius(c: float, rho: float) -> tuple[float, float] | None:
    r"""``(r, psi(c r))`` for the smallest radius :math:`r` with :math:`r\,\psi(cr)>\rho`
    (slightly enlarged), or ``None`` when no radius works (:math:`c\rho\ge1`). Every point where
    the function is below its value at the centre lies within distance :math:`r` of it (module
    docstring), in particular the minimizer."""
    if rho <= 0:
        return 0.0, 0.5
    if c <= 0:
        return 2.0 * rho * (1.0 + 1e-9), 0.5
    if c * rho >= 1.0 - 1e-9:
        return None

    def excess(r):                                  # r psi(c r) - rho, increasing in r
        R = c * r
        return (np.expm1(-R) + R) / (c * R) - rho if R > 1e-8 else r * (0.5 - R / 6.0) - rho

    hi = 2.0 * rho
    while excess(hi) <= 0:
        hi *= 2.0
    r = brentq(excess, 0.0, hi, xtol=1e-300, rtol=1e-12) * (1.0 + 1e-9)
    R = c * r
    return float(r), float((np.expm1(-R) + R) / (R * R)) if R > 1e-8 else 0.5 - R / 6.0


def cholesky_lower(H: np.ndarray) -> np.ndarray | None:
    """The lower Cholesky factor of ``H`` (``numpy.linalg.cholesky``'s, bit for bit: LAPACK
    ``potrf`` on the lower triangle, called directly without numpy's per-call wrapping), or
    ``None`` when ``H`` is not positive definite."""
    from scipy.linalg.lapack import dpotrf

    L, info = dpotrf(H, lower=1, clean=1)
    return L if info == 0 else None


class _Deflated:
    """The weighted Hessian on :math:`\\mathcal N^\\perp`: :math:`\\tilde H=H+\\kappa P_{\\mathcal N}`."""

    def __init__(self, H: np.ndarray, basis: np.ndarray, scale: float | None = None):
        """``scale``: :math:`\\kappa=\\max(\\max_{jk}|H_{jk}|, 10^{-300})` when the caller holds it."""
        self.basis = basis
        if basis.shape[1] == 0:
            self.H = H
        else:
            scale = max(float(np.abs(H).max()), 1e-300) if scale is None else scale
            self.H = H + scale * (basis @ basis.T)
        self._finite = None                 # the factor's finiteness, checked on the first solve
        self.chol = cholesky_lower(self.H)

    def project(self, v: np.ndarray) -> np.ndarray:
        return v if self.basis.shape[1] == 0 else v - self.basis @ (self.basis.T @ v)

    def solve(self, v: np.ndarray) -> np.ndarray:
        """:math:`\tilde H^{-1}v` from the Cholesky factor: LAPACK ``potrs``, as
        ``scipy.linalg.cho_solve`` calls it, without that wrapper's per-call array checks (the
        factor is checked finite once; a non-finite ``v`` raises the same ``ValueError``)."""
        from scipy.linalg.lapack import dpotrs

        if self._finite is None:
            self._finite = bool(np.isfinite(self.chol).all())
        v = np.asarray(v, float)
        if not (self._finite and np.isfinite(v).all()):
            raise ValueError("array must not contain infs or NaNs")
        x, info = dpotrs(self.chol, v, lower=1)
        if info != 0:
            raise ValueError(f"illegal value in {-info}th argument of internal potrs")
        return x

    def min_eigenvalue(self) -> float:
        """A safe :math:`\\lambda_{\\min}` of :math:`\\tilde H` (shrunk by the eigen-solver's
        round-off, :math:`P\\varepsilon\\|H\\|`)."""
        ev = np.linalg.eigvalsh(self.H)
        return float(ev[0] - self.H.shape[0] * np.finfo(float).eps * max(abs(ev[-1]), 1.0))


def _rounded_down(value: float, decrement: float) -> float:
    """``value - decrement`` lowered by a floating-point error allowance (:math:`16\\varepsilon`
    times the magnitudes involved): far from the optimum the difference of two large numbers can
    round above the true minimum."""
    return value - decrement - 16.0 * np.finfo(float).eps * (abs(value) + abs(decrement))


def certified_lower_bound(objectives, lam, theta, value: float, grad: np.ndarray, mu: float,
                          hessian=None) -> tuple[float, str]:
    """The larger of the module docstring's two bounds at ``theta`` (``value`` = g(theta),
    ``grad`` = its gradient, ``hessian`` = its Hessian or a :class:`_Deflated` one); returns
    ``(bound, kind)``, ``(-inf, "none")`` when neither applies."""
    best, kind = float("-inf"), "none"
    layout = objectives.layout
    basis = layout.invariant_basis()
    grad = grad if basis.shape[1] == 0 else grad - basis @ (basis.T @ grad)
    gnorm2 = float(grad @ grad)
    if mu > 0:
        best, kind = _rounded_down(value, gnorm2 / (2.0 * mu)), "strong-convexity"
    M = objectives.loss.self_concordance
    if M is not None:
        if hessian is None:
            hessian = objectives.weighted_hessian(theta, lam)
        D = hessian if isinstance(hessian, _Deflated) else _Deflated(hessian, basis)
        if D.chol is not None:
            lam_min = D.min_eigenvalue()
            if lam_min > 0:
                active = np.asarray(lam) > 0
                # M = 0 (a quadratic loss): c = 0 whatever the norms, which are then not asked
                c = float(M * np.max(objectives.max_row_norms()[active])) if active.any() and M != 0 else 0.0
                factor = concordance_factor(c, np.sqrt(gnorm2) / lam_min)
                if factor is not None:
                    q = float(grad @ D.solve(grad))
                    bound = _rounded_down(value, q / (4.0 * factor))
                    if bound > best:
                        best, kind = bound, "self-concordance"
    return best, kind


def weighted_newton_bound(objectives, lam, theta0, mu: float, rtol: float = 1e-13,
                          max_iter: int = 50) -> NewtonBound:
    """Minimize :math:`g=\\sum_i\\lambda_i f_i` from ``theta0`` by damped Newton (on
    :math:`\\mathcal N^\\perp`) until the certified gap ``value - bound`` is at most
    ``rtol * max(1, |g|)`` (or ``max_iter`` steps, or no further decrease); returns the last
    (lowest) iterate and the largest certified bound met on the way.

    ``mu`` must be a valid strong-convexity modulus of :math:`g` (0 if none is known: the
    self-concordance bound then certifies, for losses that have one)."""
    lam = np.asarray(lam, float)
    theta = objectives.layout.identifiable(np.array(theta0, float))
    basis = objectives.layout.invariant_basis()

    def evaluate(th):
        values, grads, H = objectives.evaluate(th, lam)
        return float(lam @ values), lam @ grads, _Deflated(H, basis)

    g, grad, D = evaluate(theta)
    bound, kind = certified_lower_bound(objectives, lam, theta, g, grad, mu, D)
    it = 0
    while it < max_iter and g - bound > rtol * max(1.0, abs(g)):
        it += 1
        direction = D.project(grad)
        if D.chol is not None:
            step = -D.project(D.solve(direction))
        elif mu > 0:
            step = -direction / mu
        else:
            break
        slope, t = float(direction @ step), 1.0
        while True:                      # Armijo backtracking on the exact objective
            cand = theta + t * step
            g_new = float(lam @ objectives.values(cand))
            if g_new <= g + 1e-4 * t * slope:
                break
            t *= 0.5
            if t < 1e-12:
                break
        if not g_new <= g:
            break                         # no descent left (round-off level)
        theta = cand                      # g decreases: the last iterate is the best point
        g, grad, D = evaluate(theta)
        new_bound, new_kind = certified_lower_bound(objectives, lam, theta, g, grad, mu, D)
        if new_bound > bound:             # every bound is valid: keep the largest
            bound, kind = new_bound, new_kind
    return NewtonBound(theta=theta, value=g, bound=bound, grad_norm=float(np.linalg.norm(grad)),
                       iterations=it, converged=g - bound <= rtol * max(1.0, abs(g)), kind=kind)
