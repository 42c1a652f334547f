r"""A certified lower bound on a fixed-weight minimum **without the Hessian**.

For fixed client weights :math:`\lambda\ge0` the certificate of
:class:`~drflmodel.problems.dro.WeightedMinMax` needs a lower bound on

.. math::

    g^\star=\min_\theta g(\theta),\qquad g(\theta)=\sum_i\lambda_if_i(\theta)
    =\sum_j w_j\,\ell(W^\top x_j,y_j)+\frac{\mu}2\sum_c\omega_c\|W_{c\cdot}\|^2,
    \qquad w_j=\frac{\lambda_{c(j)}}{N_{c(j)}},\ \ \mu=\ell_2\textstyle\sum_i\lambda_i ,

valid at **any** point :math:`\hat\theta=(\hat W,\hat b)`, from values and gradients only (memory
:math:`O(NK+P)`; :mod:`drflmodel.matrix_free`).

**Every coordinate penalized** (:math:`\omega=\mathbf 1`): :math:`g` is :math:`\mu`-strongly convex, so

.. math:: g^\star\ \ge\ g(\hat\theta)-\frac{\|\nabla g(\hat\theta)\|^2}{2\mu} .

**An unpenalized intercept** (:math:`\omega=0` on the constant column, whose :math:`K` coefficients
are :math:`b`): :math:`g` is not strongly convex in :math:`b`. Minimize over :math:`b` exactly instead.
With :math:`\tilde s_j=\hat W^\top\tilde x_j` the scores without the intercept,

.. math::

    h(W)=\min_{b\in\mathbb R^K}g(W,b),\qquad
    \varphi(b)=\sum_jw_j\,\ell(\tilde s_j+b,y_j)\ \ (\text{so } h(\hat W)=\min_b\varphi+\text{ridge}(\hat W)).

:math:`g-\frac\mu2\|W\|^2` is jointly convex, hence so is its partial minimum
:math:`h-\frac\mu2\|W\|^2`: **h keeps the modulus** :math:`\mu` in :math:`W`, and
:math:`g^\star=\min_Wh\ge h(\hat W)-\|\nabla h(\hat W)\|^2/(2\mu)` with
:math:`\nabla h(\hat W)=\nabla_Wg(\hat W,b^\star)` (Danskin), :math:`b^\star\in\arg\min\varphi`. Both
pieces are bounded rigorously:

1. :math:`\varphi` is a :math:`K`-dimensional problem that costs no pass over :math:`X` (the scores
   only shift). A few Newton steps give :math:`\bar b`; the generalized self-concordance bound of
   :mod:`.fixed_weight_bound` (F. Bach 2010, "Self-concordant analysis for logistic regression", Electronic
   Journal of Statistics 4, Prop. 1; the score direction of a change :math:`\Delta b` is
   :math:`\Delta b` itself, so the constant is the loss's :math:`M`) gives, when
   :math:`r\,\psi(Mr)\,\lambda_{\min}(\nabla^2\varphi(\bar b))>\|\nabla\varphi(\bar b)\|`,

   .. math::

       \min\varphi\ \ge\ \varphi(\bar b)-\frac{\nabla\varphi^\top(\nabla^2\varphi)^{-1}\nabla\varphi}{4\,\psi(Mr)}
       \quad\text{and}\quad \|b^\star-\bar b\|\le r

   (every point below :math:`\varphi(\bar b)` lies in the ball of radius :math:`r`). For the softmax the
   common shift of the intercepts is invariant: everything is taken on :math:`\mathbf 1^\perp`.
2. :math:`\nabla_s\ell` is :math:`\beta`-Lipschitz in the scores (``loss.smoothness``) and a change of
   :math:`b` shifts every score by it, so
   :math:`\|\nabla_Wg(\hat W,b^\star)-\nabla_Wg(\hat W,\bar b)\|_F\le\beta\,r\sum_jw_j\|\tilde x_j\|`.

Hence

.. math::

    g^\star\ \ge\ \Big[\varphi(\bar b)-\tfrac{q}{4\psi(Mr)}\Big]+\text{ridge}(\hat W)
      -\frac{\big(\|\nabla_Wg(\hat W,\bar b)\|+\beta r\sum_jw_j\|\tilde x_j\|\big)^2}{2\mu} .

It needs no Hessian in :math:`W` (one more backward pass for :math:`\nabla_Wg(\hat W,\bar b)`) and tends
to :math:`g^\star` as :math:`\hat\theta\to\theta^\star`. Losses without a self-concordance constant
(smooth hinge, Huber) need every coordinate penalized.

**Floating point.** The computed sums are lowered by an allowance of the textbook form
:math:`\gamma_m=m\varepsilon/(1-m\varepsilon)`, :math:`m=N+d+16`, times the magnitudes summed
(N. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1 and §3.5): for the value
:math:`\gamma_m\sum_jw_j(|\ell_j|+\|\nabla\ell_j\|\,\|x_j\|\|W\|_F+\|s_j\|_1)` (the sum, the scores'
inner products and the cancellation inside :math:`\log\sum e^{s}-s_y`) and for the gradient norm
:math:`\gamma_m\sum_jw_j\|x_j\|(\|\nabla\ell_j\|+\beta\|x_j\|\|W\|_F)` (the product :math:`X^\top R`
and the effect of the scores' error on :math:`\nabla\ell`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...losses import Multinomial
from ...matrix_free import RowPoint
from .fixed_weight_bound import concordance_radius

__all__ = ["FixedWeightBound", "hessian_free_bound", "hessian_free_bound_applies", "hessian_free_structure_refusal"]

#: Newton steps on the K intercepts before the bound is taken
INTERCEPT_NEWTON_STEPS = 30


@dataclass
class FixedWeightBound:
    """A certified lower ``bound`` on :math:`\\min_\\theta\\sum_i\\lambda_if_i` (module docstring);
    ``value`` is :math:`g(\\hat\\theta)`, ``gradient_bound`` the upper bound on
    :math:`\\|\\nabla h\\|` (or :math:`\\|\\nabla g\\|`) used, ``kind`` how it was obtained."""

    bound: float
    value: float
    gradient_bound: float
    kind: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"bound": self.bound, "value": self.value, "gradient_bound": self.gradient_bound,
                "kind": self.kind, **self.details}


def _gamma(m: int) -> float:
    u = np.finfo(float).eps
    return m * u / (1.0 - m * u)


def hessian_free_bound_applies(objectives) -> str | None:
    """``None`` when :func:`hessian_free_bound` can certify for these
    (:class:`~drflmodel.matrix_free.MatrixFreeObjectives`-compatible) objectives, else the reason."""
    if objectives.l2 <= 0:
        return "l2 = 0: the fixed-weight objective is not strongly convex in any coordinate"
    omega = objectives.penalty_diagonal.reshape(objectives.n_outputs, -1)[0] / objectives.l2
    free = np.flatnonzero(omega == 0)
    if free.size == 0:
        return None
    if free.size > 1 or objectives.layout.intercept_column != int(free[0]):
        return "more than the intercept column is unpenalized"
    if objectives.loss.self_concordance is None:
        return (f"the loss {objectives.loss.name!r} has no self-concordance constant, so the intercept's "
                f"partial minimum cannot be bounded; penalize the intercept (penalize_intercept=True)")
    return None


def hessian_free_structure_refusal(structure) -> str | None:
    """:func:`hessian_free_bound_applies` from a problem's
    :class:`~drflmodel.problems.engine.structure.Structure` alone (the route's ``applies``): the
    ridge must cover every feature column but, at most, one (``structure.unpenalized`` lists
    feature columns: the intercept, unpenalized in each of the :math:`K` class blocks), and then the
    loss must be self-concordant. (Which column it is, the route checks on the objectives.)"""
    if structure.l2 <= 0:
        return "l2 = 0: the fixed-weight objective is not strongly convex in any coordinate"
    free = tuple(structure.unpenalized)
    if not free:
        return None
    if len(free) > 1:
        return "more than the intercept column is unpenalized"
    if not structure.self_concordant:
        return (f"the loss {structure.loss!r} has no self-concordance constant, so the intercept's "
                f"partial minimum cannot be bounded; penalize the intercept (penalize_intercept=True)")
    return None


def hessian_free_bound(objectives, lam, point, weighted_gradient=None, target=None) -> FixedWeightBound:
    """The certified lower bound of the module docstring at ``point`` (a
    :class:`~drflmodel.matrix_free.RowPoint` of ``objectives``) for the weights ``lam``;
    ``weighted_gradient`` is :math:`\\nabla g(\\hat\\theta)` when already known. With an
    unpenalized intercept the bound is first taken at the point's own intercepts (no pass over
    :math:`X`); only when it stays below ``target`` (default: always) are the intercepts polished
    by Newton's method and the bound taken again (one more backward pass); the larger is returned."""
    lam = np.asarray(lam, float)
    ob = objectives
    g_value = float(lam @ point.values)
    weight_sum = float(lam.sum())
    mu = ob.l2 * weight_sum
    reason = hessian_free_bound_applies(ob)
    if reason is not None or mu <= 0:
        return FixedWeightBound(float("-inf"), g_value, float("inf"), "none",
                                {"reason": reason or "all weights are zero"})
    j0 = ob.layout.intercept_column
    omega = ob.penalty_diagonal.reshape(ob.n_outputs, -1)[0]
    if np.all(omega > 0):
        grad = point.weighted_gradient(lam) if weighted_gradient is None else weighted_gradient
        val_err, grad_err = _allowances(ob, lam, point)
        gnorm = float(np.linalg.norm(grad)) + grad_err
        bound = g_value - val_err - gnorm * gnorm / (2.0 * mu)
        return FixedWeightBound(bound, g_value, gnorm, "strong-convexity (Hessian-free)",
                                {"modulus": mu, "value_allowance": val_err, "gradient_allowance": grad_err})
    grad = point.weighted_gradient(lam) if weighted_gradient is None else weighted_gradient
    return _intercept_bound(ob, lam, point, j0, mu, g_value, grad, target)


def _allowances(ob, lam, point) -> tuple[float, float]:
    """``(value allowance, gradient-norm allowance)`` of the module docstring at ``point``, from
    the clients' mean magnitudes (:meth:`~drflmodel.matrix_free.RowPoint.allowance_terms`)."""
    weights = np.asarray(lam, float)
    loss_size, xr, x2, score_size = weights @ point.allowance_terms()
    gamma = _gamma(int(np.sum(ob.sizes)) + ob.n_features + 16)
    wnorm = float(np.linalg.norm(point.theta))
    beta = ob.loss.smoothness
    value = gamma * (loss_size + xr * wnorm + score_size + float(weights.sum()) * point.penalty)
    ridge = float(weights.sum()) * np.linalg.norm(ob.penalty_diagonal * point.theta)
    grad = gamma * (xr + beta * wnorm * x2 + ridge)
    return float(value), float(grad)


class _InterceptProblem:
    """:math:`\\varphi(b)=\\sum_jw_j\\ell(\\tilde s_j+b,y_j)=\\sum_i\\lambda_i\\varphi_i(b)` (module
    docstring) from the clients' per-client means: values alone for the line search, and the
    gradient and Hessian (:math:`K\\times K`, deflated along the invariant :math:`\\mathbf 1` for the
    softmax) at the accepted points. In process no pass over :math:`X` is needed (the scores only
    shift)."""

    def __init__(self, ob, lam, idx):
        self.ob, self.lam, self.idx = ob, np.asarray(lam, float), idx
        self.K = idx.size
        self.softmax = isinstance(ob.loss, Multinomial)

    def project(self, v):
        return v - v.mean() if self.softmax else v

    def value(self, point, b) -> float:
        return float(self.lam @ point.intercept_values(self.idx, b))

    def derivatives(self, point):
        """``(value, gradient, Hessian)`` of :math:`\\varphi` at a point's own intercepts."""
        values, grads, hess = point.intercept_terms(self.idx)
        value = float(self.lam @ values)
        grad = self.project(self.lam @ grads)
        H = np.tensordot(self.lam, hess, axes=(0, 0))
        if self.softmax:
            H = H + np.full((self.K, self.K), float(np.abs(H).max()) / self.K)   # deflate 1 (invariant)
        return value, grad, H


def _intercept_bound(ob, lam, point, j0, mu, g_value, gradient, target) -> FixedWeightBound:
    """The unpenalized-intercept case of the module docstring: at the point's intercepts, then, if
    that is not enough for ``target``, at Newton-polished ones; the larger is returned. The bound at
    the point's own intercepts is first taken without the floating-point allowances (an upper
    estimate of it: they only lower it), and completed only where it can matter -- when it reaches
    ``target`` or when the polished bound does not exceed it -- so the answer is the one the
    complete bounds give."""
    K, d = ob.n_outputs, ob.n_features
    idx = j0 + d * np.arange(K)                      # the intercepts in the class-major layout
    problem = _InterceptProblem(ob, lam, idx)
    feature_norm = float(np.asarray(lam, float) @ ob.feature_norm_means(j0))
    at_own = problem.derivatives(point)               # phi's derivatives, shared with the polish's start

    def at_own_intercepts():
        return _bound_at_intercepts(ob, lam, mu, g_value, problem, point, gradient, feature_norm, 0, at_own)

    first = estimate = None
    if target is None:
        first = at_own_intercepts()
    else:
        estimate = _bound_at_intercepts(ob, lam, mu, g_value, problem, point, gradient, feature_norm, 0, at_own,
                                        allowances=False)
        if estimate.bound >= target:                  # else below target even without the allowances
            first = at_own_intercepts()
            if first.bound >= target:
                return first
    b, bpoint = point.theta[idx].copy(), point
    value, grad, H = at_own
    in_process = isinstance(point, RowPoint)
    steps = 0
    for steps in range(1, INTERCEPT_NEWTON_STEPS + 1):  # damped Newton, K dimensions
        try:
            step = -problem.project(np.linalg.solve(H, grad))
        except np.linalg.LinAlgError:
            break
        decrement = -float(grad @ step)
        if not decrement > 1e-15 * max(1.0, abs(value)):  # at the round-off of the value: done
            break
        for _ in range(20):                           # Armijo backtracking on values alone
            candidate = None
            if in_process:                            # the shifted row pass gives phi's value too (the
                candidate = ob.shifted(bpoint, idx, b + step)   # penalty is the same: omega = 0 on b)
                accepted = float(problem.lam @ candidate.values) <= (float(problem.lam @ bpoint.values)
                                                                     - 1e-4 * decrement)
            else:                                     # a federated server: the values query alone
                accepted = problem.value(bpoint, b + step) <= value - 1e-4 * decrement
            if accepted:
                break
            step, decrement = 0.5 * step, 0.5 * decrement
        else:
            break
        b = b + step
        bpoint = candidate if candidate is not None else ob.shifted(bpoint, idx, b)
        value, grad, H = problem.derivatives(bpoint)
    if bpoint is point:
        return first if first is not None else at_own_intercepts()
    polished = _bound_at_intercepts(ob, lam, mu, g_value, problem, bpoint, bpoint.weighted_gradient(lam),
                                    feature_norm, steps, (value, grad, H))
    if polished.bound > (first if first is not None else estimate).bound:
        return polished
    first = first if first is not None else at_own_intercepts()
    return polished if polished.bound > first.bound else first


def _bound_at_intercepts(ob, lam, mu, g_value, problem, bpoint, gradient, feature_norm, steps,
                         derivatives, allowances: bool = True) -> FixedWeightBound:
    """The bound of the module docstring with :math:`\\bar b` the intercepts of ``bpoint``,
    ``gradient`` :math:`=\\nabla g(\\hat W,\\bar b)`, ``feature_norm``
    :math:`=\\sum_jw_j\\|\\tilde x_j\\|` and ``derivatives`` :math:`\\varphi`'s value, gradient and
    Hessian at :math:`\\bar b` (:meth:`_InterceptProblem.derivatives` at ``bpoint``). ``allowances=False``
    leaves the floating-point allowances out: not a bound, an upper estimate of it (they only lower it)."""
    K = ob.n_outputs
    value, grad, H = derivatives
    ridge = float(np.sum(lam)) * bpoint.penalty        # the penalty has omega = 0 on the intercept
    # the self-concordance bound on min phi and the radius around b_bar
    M = ob.loss.self_concordance
    try:
        eigs = np.linalg.eigvalsh(H)
    except np.linalg.LinAlgError:
        eigs = np.array([0.0])
    lam_min = float(eigs[0] - K * np.finfo(float).eps * max(abs(eigs[-1]), 1.0))
    gnorm_b = float(np.linalg.norm(grad))
    found = concordance_radius(M, gnorm_b / lam_min) if lam_min > 0 else None
    if found is None:
        return FixedWeightBound(float("-inf"), g_value, float("inf"), "none",
                                {"reason": "the intercepts' partial minimum could not be bounded (its Hessian is "
                                           "singular or the point is too far from the optimum)",
                                 "intercept_newton_steps": steps})
    radius, psi = found
    q = float(grad @ np.linalg.solve(H, grad)) if gnorm_b > 0 else 0.0
    phi_lower = value - q / (4.0 * psi)
    grad_w = np.array(gradient, float)
    grad_w[problem.idx] = 0.0                          # the intercept entries are phi's gradient
    shift_error = ob.loss.smoothness * radius * feature_norm
    val_err, grad_err = _allowances(ob, lam, bpoint) if allowances else (0.0, 0.0)
    gnorm = float(np.linalg.norm(grad_w)) + shift_error + grad_err
    bound = phi_lower + ridge - val_err - gnorm * gnorm / (2.0 * mu)
    return FixedWeightBound(bound, g_value, gnorm,
                            "strong-convexity in W + intercepts' partial minimum (self-concordance)",
                            {"modulus": mu, "intercept_radius": radius, "intercept_newton_steps": steps,
                             "intercept_decrement": q, "value_allowance": val_err, "gradient_allowance": grad_err,
                             "intercept_shift_error": shift_error, "polished_value": value + ridge})
