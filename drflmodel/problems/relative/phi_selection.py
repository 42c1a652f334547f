r"""The choice of :math:`\varphi` by the relative-fairness paper's rule (8) (§5.3), in a numerically
stable form: :func:`select_phi` and its result :class:`PhiSelection`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ...errors import InvalidDataError, InvalidParameterError, NotConvexError
from ...solution import Solution, jsonable
from .problem import RelativeFairness

__all__ = ["PhiSelection", "select_phi"]


@dataclass
class PhiSelection:
    r"""Result of :func:`select_phi`: :math:`\varphi` and the quantities of the paper's rule (8),
    :math:`\mathfrak a=a_0^{\star\top}f(\theta_0^\star)`, :math:`\mathfrak b=b_0^{\star\top}f(\theta_0^\star)`,
    :math:`\mathfrak c=g^\top H^{-1}g`."""

    phi: float
    raw_phi: float
    clipped: bool
    a: float
    b: float
    c: float
    theta0: np.ndarray
    a0: np.ndarray
    b0: np.ndarray

    def __float__(self) -> float:
        return float(self.phi)

    def to_dict(self) -> dict:
        return jsonable(self.__dict__)


def select_phi(federation, loss, A, B, l2: float = 0.0, solution: Solution | None = None) -> PhiSelection:
    r"""The :math:`\varphi`-selection rule of the relative-fairness paper (§5.3, eq. (8)), in a stable form.

    The printed formula :math:`\varphi=(\sqrt{\mathfrak b^2+1.5\,\mathfrak a\mathfrak c}-\mathfrak b)/(1.5\,\mathfrak c)`
    is rewritten without the cancellation (equal in exact arithmetic; its limit
    :math:`\mathfrak a/(2\mathfrak b)` as :math:`\mathfrak c\to0` is finite):

    1. Solve the :math:`\varphi=0` problem (federated DRO over :math:`A`; or pass ``solution``):
       :math:`\theta_0^\star`, :math:`a_0^\star` (its worst-case weights),
       :math:`b_0^\star\in\operatorname{argmin}_{b\in B}b^\top f(\theta_0^\star)`.
    2. :math:`H=\sum_ia^\star_{0,i}\nabla^2f_i(\theta_0^\star)`, :math:`g=\sum_ib^\star_{0,i}\nabla f_i(\theta_0^\star)`,
       :math:`\mathfrak c=g^\top H^{-1}g` (by solving :math:`Hv=g`, Cholesky).
    3. :math:`\varphi=\mathfrak a/(\mathfrak b+\sqrt{\mathfrak b^2+1.5\,\mathfrak a\mathfrak c})`,
       clipped to :math:`[0,1-10^{-6}]` (the formula can exceed 1).

    Raises :class:`~drflmodel.errors.NotConvexError` if :math:`H` is not positive definite (then
    :math:`\mathfrak c` is undefined or negative) and :class:`InvalidParameterError` for losses
    without a Hessian.
    """
    if not np.isfinite(loss.smoothness):
        raise InvalidParameterError(f"select_phi needs a twice-differentiable loss (Hessians); got {loss!r}")
    prob = RelativeFairness(federation, loss, A, B, phi=0.0, l2=l2)
    sol = prob.solve() if solution is None else solution
    if sol.theta is None:
        raise InvalidDataError(f"the phi = 0 problem could not be solved (status {sol.status})")
    theta0 = np.asarray(sol.theta, float)
    f0 = prob.client_losses(theta0)
    a0 = np.asarray(sol.weights, float) if sol.weights is not None else prob.A.worst_case(f0)[1]
    b0 = np.asarray(prob.B.worst_case(-f0)[1], float)
    H = np.einsum("i,ijk->jk", a0, prob.objectives.hessians(theta0))
    g = b0 @ prob.objectives.gradients(theta0)
    H = 0.5 * (H + H.T)
    ev = np.linalg.eigvalsh(H)
    try:
        if ev[0] <= 1e-12 * max(1.0, abs(ev[-1])):
            raise np.linalg.LinAlgError(f"smallest eigenvalue {ev[0]:.3g}")
        cho = scipy.linalg.cho_factor(H)
    except np.linalg.LinAlgError as exc:
        raise NotConvexError("select_phi: H = sum_i a0_i Hess f_i(theta0) is not positive definite, so "
                             "c = g^T H^{-1} g is undefined; add l2 > 0") from exc
    c = float(g @ scipy.linalg.cho_solve(cho, g))
    a_ = float(a0 @ f0)
    b_ = float(b0 @ f0)
    disc = b_ * b_ + 1.5 * a_ * c
    if c < 0 or disc < 0 or b_ + math.sqrt(max(disc, 0.0)) <= 0:
        raise NotConvexError(f"select_phi: c = {c:.3g}, b = {b_:.3g} give no valid phi")
    raw = a_ / (b_ + math.sqrt(disc))
    phi = min(max(raw, 0.0), 1.0 - 1e-6)
    return PhiSelection(phi=phi, raw_phi=raw, clipped=bool(phi != raw), a=a_, b=b_, c=c, theta0=theta0,
                        a0=a0, b0=b0)
