r"""The server's checks of one client's answers: every answer is tested before the server uses it,
alone and against the same client's earlier answers. One function per check; each returns ``None``
(passed) or a :class:`Violation` naming the check and the numbers.

What a client answers are data terms of its own rows (:math:`h_i`: mean loss, gradient, Hessian,
Hessian-vector products; for the squared loss the statistics :math:`X_i^\top X_i`,
:math:`X_i^\top y_i`, :math:`y_i^\top y_i`). What any honest answer must satisfy:

**Alone** -- finite numbers of the expected shape; the loss's range (every catalogue loss is
nonnegative, so :math:`h_i\ge0`; a classification loss has the same value :math:`\ell(0)` for every
label at score 0, so :math:`h_i(0)=\ell(0)` exactly); a Hessian or a Hessian-vector product is PSD
(convex loss); a gradient no longer than :math:`\mathrm{Lip}(\ell)R_i` and a Hessian no larger than
:math:`\mathrm{smooth}(\ell)R_i^2` (with :math:`R_i=\max_j\|x_{ij}\|` when the client declared it);
the statistics form the Gram matrix of :math:`[X_i\ y_i]`, which is PSD
(:math:`y^\top y\ge0`, :math:`X^\top X\succeq0`, :math:`\|X^\top y\|^2\le y^\top y\,\lambda_{\max}(X^\top X)`
follow), with :math:`(X^\top X)_{00}=N_i` on an intercept column.

**Against the client's other answers** -- the same point gives the same value; *first-order
convexity* on every (value, gradient) pair,
:math:`h(\theta_b)\ge h(\theta_a)+\nabla h(\theta_a)^\top(\theta_b-\theta_a)`; monotone gradients,
:math:`d^\top(\nabla h(\theta_b)-\nabla h(\theta_a))\ge0` with :math:`d=\theta_b-\theta_a`; and the
curvature agrees with gradient differences: with :math:`\varphi(t)=d^\top\nabla^2h(\theta_a+td)d`,
:math:`d^\top(\nabla h(\theta_b)-\nabla h(\theta_a))=\int_0^1\varphi`, and a loss that is
generalized self-concordant with constant :math:`M` (F. Bach, "Self-concordant analysis for
logistic regression", Electron. J. Statist. 4, 2010) has :math:`|\varphi'|\le MR\|d\|\varphi`, so
with :math:`c=MR\|d\|`

.. math:: \varphi(0)\frac{1-e^{-c}}{c}\le d^\top(\nabla h(\theta_b)-\nabla h(\theta_a))\le\varphi(0)\frac{e^{c}-1}{c}

(and the same with :math:`\varphi(1)`); :math:`M=0` (squared loss) makes it an equality. Two
Hessian-vector products at one point satisfy :math:`u^\top(Hv)=v^\top(Hu)`, one next to the
Hessian at that point equals :math:`Hv`, and one next to gradients at two points satisfies
:math:`(d^\top Hv)^2\le d^\top Hd\,v^\top Hv` with :math:`d^\top Hd` bounded by the gradient
difference as above (:func:`hvp_matches_gradients`).

**Tolerances** are rounding, never looseness: a quantity computed from answers of size :math:`s`
may err by :data:`ROUNDING` :math:`\times\,\epsilon\,s` (:math:`\epsilon` the machine epsilon), the
scale :math:`s` being written next to each check. A lying but *consistent* client -- one that
answers, every time, for some other convex function (other data, scaled data) -- passes every
check: the certificate then holds for the functions the clients answered for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Violation", "ROUNDING", "finite", "shape", "value_range", "value_at_zero", "value_lipschitz",
           "gradient_length",
           "hessian_psd", "hessian_size", "hvp_psd", "statistics_gram", "same_value",
           "first_order_convexity", "monotone_gradients", "curvature_matches_gradients", "hvp_symmetry",
           "hvp_matches_hessian", "hvp_matches_gradients", "bound_terms", "AnswerRecord"]

EPS = float(np.finfo(float).eps)
#: a check fails only beyond this many machine epsilons times the scale of the quantities involved
ROUNDING = 1e4


@dataclass
class Violation:
    """A failed check: ``check`` (its name), ``detail`` (the numbers in words), ``numbers``."""

    check: str
    detail: str
    numbers: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"

    def to_dict(self) -> dict:
        return {"check": self.check, "detail": self.detail,
                "numbers": {k: (float(v) if np.ndim(v) == 0 else np.asarray(v, float).tolist())
                            for k, v in self.numbers.items()}}


def _tol(scale: float) -> float:
    return ROUNDING * EPS * max(float(scale), np.finfo(float).tiny)


# ------------------------------------------------------------------ one answer
def finite(name: str, array) -> Violation | None:
    """Every entry a finite real number (no NaN, no inf, no text)."""
    a = np.asarray(array)
    if a.dtype.kind not in "fiu":
        return Violation("type", f"{name} is not numeric (dtype {a.dtype})")
    bad = ~np.isfinite(a.astype(float))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        return Violation("finite", f"{name} has {int(bad.sum())} non-finite entr{'y' if bad.sum() == 1 else 'ies'} "
                                   f"(first {float(a.reshape(-1)[k])} at {k})", {"count": int(bad.sum())})
    return None


def shape(name: str, array, size: int) -> Violation | None:
    """``size`` numbers, no more, no fewer."""
    n = int(np.size(array))
    if n != size:
        return Violation("shape", f"{name} has {n} entries; expected {size}", {"got": n, "expected": size})
    return None


def value_range(value: float, minimum: float = 0.0) -> Violation | None:
    """A mean loss at or above the loss's minimum (0 for every catalogue loss)."""
    if value < minimum - _tol(abs(minimum) + abs(value)):
        return Violation("loss range", f"mean loss {value:.6g} is below the loss's minimum {minimum:g}",
                         {"value": value, "minimum": minimum})
    return None


def value_at_zero(value: float, expected: float) -> Violation | None:
    """At :math:`\\theta=0` every score is 0, and a classification loss takes one value there for every
    label: the mean loss is that value exactly (log 2 for the logistic loss, log K for softmax, 1 for
    the hinge)."""
    if abs(value - expected) > _tol(abs(expected)):
        return Violation("value at theta = 0", f"mean loss {value:.17g} at theta = 0; every row's loss is "
                                               f"{expected:.17g} there", {"value": value, "expected": expected})
    return None


def value_lipschitz(theta_a, value_a: float, theta_b, value_b: float, lipschitz: float,
                    row_norm: float | None) -> Violation | None:
    r""":math:`|h(\theta_b)-h(\theta_a)|\le\mathrm{Lip}(\ell)\max_j\|x_j\|\,\|\theta_b-\theta_a\|` (a
    Lipschitz loss: every score moves by at most :math:`\|x_j\|\|d\|`); catches a huge value asked
    without its gradient."""
    if row_norm is None or not np.isfinite(lipschitz):
        return None
    nd = float(np.linalg.norm(np.asarray(theta_b, float) - np.asarray(theta_a, float)))
    jump, cap = abs(value_b - value_a), lipschitz * row_norm * nd
    if jump > cap + _tol(abs(value_a) + abs(value_b) + cap):
        return Violation("Lipschitz values", f"|h(theta_b) - h(theta_a)| = {jump:.6g} exceeds Lip(loss) max_j ||x_j|| "
                                             f"||theta_b - theta_a|| = {cap:.6g}", {"jump": jump, "bound": cap})
    return None


def gradient_length(gradient, lipschitz: float, row_norm: float | None) -> Violation | None:
    """:math:`\\|\\nabla h\\|\\le\\mathrm{Lip}(\\ell)\\max_j\\|x_j\\|` (a Lipschitz loss and a declared row norm)."""
    if row_norm is None or not np.isfinite(lipschitz):
        return None
    g, cap = float(np.linalg.norm(gradient)), lipschitz * row_norm
    if g > cap + _tol(cap):
        return Violation("gradient length", f"||gradient|| = {g:.6g} exceeds Lip(loss) max_j ||x_j|| = {cap:.6g}",
                         {"norm": g, "bound": cap})
    return None


def _psd_defect(M) -> tuple[float, float] | None:
    r"""``(smallest eigenvalue, largest)`` of the symmetric ``M`` scaled to unit diagonal,
    :math:`D^{-1/2}MD^{-1/2}`, when it is not PSD beyond rounding; ``None`` when it is PSD.

    The scaling keeps a small column from hiding behind a large one: PSD is invariant under it, and
    the rounding of an entry :math:`M_{jk}` (a sum over rows) is relative to
    :math:`\sqrt{M_{jj}M_{kk}}`, so the scaled matrix has entries of size at most 1 and rounding of
    :data:`ROUNDING` epsilons times its dimension. A negative diagonal entry (a sum of squares or of
    nonnegative curvatures) is a defect outright."""
    M = 0.5 * (np.asarray(M, float) + np.asarray(M, float).T)
    diag = np.diag(M)
    if np.any(diag < 0):
        k = int(np.argmin(diag))
        return float(diag[k]), float(diag.max())
    d = np.sqrt(np.where(diag > 0, diag, 1.0))
    ev = np.linalg.eigvalsh(M / np.outer(d, d))
    return (float(ev[0]), float(ev[-1])) if ev[0] < -_tol(1.0) * M.shape[0] else None


def hessian_psd(H) -> Violation | None:
    """A convex loss's Hessian is positive semidefinite (checked scaled to unit diagonal)."""
    defect = _psd_defect(H)
    if defect is not None:
        return Violation("Hessian PSD", f"not positive semidefinite: smallest eigenvalue {defect[0]:.6g} of the "
                                        f"Hessian scaled to unit diagonal", {"min_eigenvalue": defect[0]})
    return None


def hessian_size(H, smoothness: float, row_norm: float | None) -> Violation | None:
    """:math:`\\lambda_{\\max}(\\nabla^2h)\\le\\mathrm{smooth}(\\ell)\\max_j\\|x_j\\|^2`."""
    if row_norm is None or not np.isfinite(smoothness):
        return None
    top, cap = float(np.linalg.eigvalsh(np.asarray(H, float))[-1]), smoothness * row_norm**2
    if top > cap + _tol(cap) * max(1, np.shape(H)[0]):
        return Violation("Hessian size", f"largest eigenvalue {top:.6g} exceeds smooth(loss) max_j ||x_j||^2 = {cap:.6g}",
                         {"max_eigenvalue": top, "bound": cap})
    return None


def hvp_psd(direction, product) -> Violation | None:
    """:math:`v^\\top Hv\\ge0`."""
    v, hv = np.asarray(direction, float), np.asarray(product, float)
    q = float(v @ hv)
    if q < -_tol(float(np.linalg.norm(v) * np.linalg.norm(hv))) * max(1, v.size):
        return Violation("Hessian-vector product PSD", f"v'Hv = {q:.6g} < 0", {"vHv": q})
    return None


def statistics_gram(gram, moment, yy: float, rows: int | None = None,
                    intercept_column: int | None = None) -> Violation | None:
    """The squared loss's statistics are the Gram matrix of :math:`[X\\ y]`: PSD (hence
    :math:`y^\\top y\\ge0`, :math:`X^\\top X\\succeq0` and :math:`\\|X^\\top y\\|^2\\le y^\\top y\\,\\lambda_{\\max}(X^\\top X)`),
    with :math:`N` on the diagonal of an all-one (intercept) column."""
    G, b = np.asarray(gram, float), np.asarray(moment, float).reshape(-1)
    if yy < 0:
        return Violation("statistics", f"y'y = {yy:.6g} < 0", {"yy": yy})
    if intercept_column is not None and rows is not None and abs(G[intercept_column, intercept_column] - rows) > _tol(rows):
        return Violation("statistics", f"the intercept column's X'X entry is {G[intercept_column, intercept_column]:.10g}, "
                                       f"not the declared {rows} rows", {"entry": float(G[intercept_column, intercept_column]),
                                                                         "rows": rows})
    defect = _psd_defect(np.block([[G, b[:, None]], [b[None, :], np.array([[yy]])]]))
    if defect is not None:
        return Violation("statistics", f"[X'X, X'y; y'X, y'y] is not PSD (smallest eigenvalue {defect[0]:.6g} scaled "
                                       "to unit diagonal): no rows X, y have these statistics",
                         {"min_eigenvalue": defect[0]})
    return None


# ------------------------------------------------------------------ against earlier answers
def same_value(theta, a: float, b: float) -> Violation | None:
    """The same point, the same value (a deterministic client)."""
    if abs(a - b) > _tol(abs(a) + abs(b)):
        return Violation("same point, same value", f"two values at the same theta: {a:.17g} and {b:.17g}",
                         {"first": a, "second": b})
    return None


def first_order_convexity(theta_a, value_a, gradient_a, theta_b, value_b) -> Violation | None:
    """:math:`h(\\theta_b)\\ge h(\\theta_a)+\\nabla h(\\theta_a)^\\top(\\theta_b-\\theta_a)`; the scale is
    :math:`|h_a|+|h_b|+\\|\\nabla h_a\\|\\|d\\|`."""
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    g = np.asarray(gradient_a, float)
    lin = float(g @ d)
    gap = value_b - value_a - lin
    scale = abs(value_a) + abs(value_b) + float(np.linalg.norm(g) * np.linalg.norm(d))
    if gap < -_tol(scale):
        return Violation("first-order convexity",
                         f"h(theta_b) = {value_b:.10g} < h(theta_a) + g_a'(theta_b - theta_a) = {value_a + lin:.10g} "
                         f"(violation {-gap:.3g}, ||d|| = {np.linalg.norm(d):.3g})",
                         {"violation": -gap, "scale": scale})
    return None


def monotone_gradients(theta_a, gradient_a, theta_b, gradient_b) -> Violation | None:
    """:math:`(\\theta_b-\\theta_a)^\\top(\\nabla h(\\theta_b)-\\nabla h(\\theta_a))\\ge0`."""
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    ga, gb = np.asarray(gradient_a, float), np.asarray(gradient_b, float)
    inner = float(d @ (gb - ga))
    scale = float(np.linalg.norm(d) * (np.linalg.norm(ga) + np.linalg.norm(gb)))
    if inner < -_tol(scale):
        return Violation("monotone gradients", f"d'(g_b - g_a) = {inner:.6g} < 0", {"inner": inner, "scale": scale})
    return None


def _integral_range(phi: float, c: float) -> tuple[float, float]:
    """:math:`[\\varphi(1-e^{-c})/c,\\ \\varphi(e^c-1)/c]` (:math:`[\\varphi,\\varphi]` at :math:`c=0`)."""
    if c <= 1e-12:
        return phi, phi
    if c > 700:
        return phi * (-math.expm1(-c)) / c, math.inf
    return phi * (-math.expm1(-c)) / c, phi * math.expm1(c) / c


def _spectral_norm_bounds(H: np.ndarray) -> tuple[float, float]:
    """Bounds on :math:`\\|H\\|_2` of a symmetric :math:`P\\times P` matrix without an
    eigendecomposition: :math:`\\max(\\max_j|H_{jj}|,\\ \\|H\\|_F/\\sqrt P)\\le\\|H\\|_2\\le\\|H\\|_F`."""
    if not H.size:
        return 0.0, 0.0
    fro = float(np.linalg.norm(H))
    return max(float(np.max(np.abs(np.diag(H)))), fro / math.sqrt(H.shape[0])), fro


def curvature_matches_gradients(theta_a, gradient_a, hessian_a, theta_b, gradient_b,
                                self_concordance: float | None, row_norm: float | None) -> Violation | None:
    """:math:`d^\\top(\\nabla h(\\theta_b)-\\nabla h(\\theta_a))` inside the range the Hessian at
    :math:`\\theta_a` allows (module docstring); needs the loss's generalized self-concordance
    constant and the row norm (``None``: not checked), an equality for the squared loss.

    The rounding allowance grows with :math:`\\|H\\|_2`; the decision is taken with cheap bounds on it
    (:func:`_spectral_norm_bounds`) and the exact norm is computed only when they disagree, so the
    verdict is the one the exact norm gives."""
    if self_concordance is None or (row_norm is None and self_concordance != 0):
        return None
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    H = np.asarray(hessian_a, float)
    ga, gb = np.asarray(gradient_a, float), np.asarray(gradient_b, float)
    phi = float(d @ H @ d)
    inner = float(d @ (gb - ga))
    c = self_concordance * (row_norm or 0.0) * float(np.linalg.norm(d))
    lo, hi = _integral_range(phi, c)
    nd = float(np.linalg.norm(d))

    def outside(norm_H: float) -> bool:
        scale = nd * (np.linalg.norm(ga) + np.linalg.norm(gb)) + nd * nd * norm_H * d.size
        return inner < lo - _tol(scale) or inner > hi + _tol(scale)

    low_norm, high_norm = _spectral_norm_bounds(H)
    if not outside(low_norm):                 # inside with the smaller allowance: inside with the exact one
        return None
    if outside(high_norm) or outside(float(np.linalg.norm(H, 2))):
        return Violation("curvature vs gradients",
                         f"d'(g_b - g_a) = {inner:.10g}, but the Hessian gives d'Hd = {phi:.10g} and allows "
                         f"[{lo:.10g}, {hi:.10g}] (c = M R ||d|| = {c:.3g})",
                         {"inner": inner, "dHd": phi, "low": lo, "high": hi})
    return None


def hvp_symmetry(u, Hu, v, Hv) -> Violation | None:
    """Two Hessian-vector products at one point: :math:`u^\\top(Hv)=v^\\top(Hu)`."""
    u, Hu, v, Hv = (np.asarray(a, float) for a in (u, Hu, v, Hv))
    a, b = float(u @ Hv), float(v @ Hu)
    scale = float(np.linalg.norm(u) * np.linalg.norm(Hv) + np.linalg.norm(v) * np.linalg.norm(Hu)) * max(1, u.size)
    if abs(a - b) > _tol(scale):
        return Violation("Hessian-vector symmetry", f"u'(Hv) = {a:.10g} but v'(Hu) = {b:.10g}", {"uHv": a, "vHu": b})
    return None


def hvp_matches_gradients(theta_a, direction, product, gradient_a, theta_b, gradient_b,
                          self_concordance: float | None, row_norm: float | None) -> Violation | None:
    r"""A Hessian-vector product :math:`Hv` at :math:`\theta_a` against the gradient difference to
    :math:`\theta_b` (:math:`d=\theta_b-\theta_a`). Generalized self-concordance bounds
    :math:`d^\top Hd\le\bar\varphi=d^\top(\nabla h(\theta_b)-\nabla h(\theta_a))\,c/(1-e^{-c})`
    (module docstring; :math:`c=MR\|d\|`, an equality at :math:`c=0`), and :math:`H\succeq0` gives
    Cauchy-Schwarz, :math:`(d^\top Hv)^2\le d^\top Hd\;v^\top Hv\le\bar\varphi\,v^\top Hv`. A
    direction along :math:`d` (:math:`v=\alpha d`) gives :math:`d^\top Hd=d^\top Hv/\alpha` itself,
    checked on both sides as in :func:`curvature_matches_gradients`. Needs the loss's constant and
    the row norm (``None``: not checked)."""
    if self_concordance is None or (row_norm is None and self_concordance != 0):
        return None
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    v, Hv = np.asarray(direction, float), np.asarray(product, float)
    ga, gb = np.asarray(gradient_a, float), np.asarray(gradient_b, float)
    nd, nv, nHv = float(np.linalg.norm(d)), float(np.linalg.norm(v)), float(np.linalg.norm(Hv))
    if nd == 0.0 or nv == 0.0:
        return None
    inner = float(d @ (gb - ga))
    c = self_concordance * (row_norm or 0.0) * nd
    room = 1.0 if c <= 1e-12 else c / -math.expm1(-c)             # phi(0) <= inner * c / (1 - e^-c)
    inner_tol = _tol(nd * (np.linalg.norm(ga) + np.linalg.norm(gb)))
    dHv, vHv = float(d @ Hv), float(v @ Hv)
    dHv_tol, vHv_tol = _tol(nd * nHv * d.size), _tol(nv * nHv * v.size)
    alpha = float(v @ d) / (nd * nd)
    if np.linalg.norm(v - alpha * d) <= 1e-12 * nv:              # v along d: d'Hd from the product itself
        phi = dHv / alpha
        lo, hi = _integral_range(phi, c)
        slack = inner_tol + abs(dHv_tol / alpha) * max(1.0, room)
        if inner < lo - slack or inner > hi + slack:
            return Violation("Hessian-vector product vs gradients",
                             f"d'(g_b - g_a) = {inner:.10g}, but the product along d gives d'Hd = {phi:.10g} and "
                             f"allows [{lo:.10g}, {hi:.10g}] (c = M R ||d|| = {c:.3g})",
                             {"inner": inner, "dHd": phi, "low": lo, "high": hi})
        return None
    bound = max(inner + inner_tol, 0.0) * room * max(vHv + vHv_tol, 0.0)
    if abs(dHv) - dHv_tol > math.sqrt(bound):
        return Violation("Hessian-vector product vs gradients",
                         f"|d'(Hv)| = {abs(dHv):.10g} exceeds sqrt(d'(g_b - g_a) c/(1 - e^-c) v'Hv) = "
                         f"{math.sqrt(bound):.10g} (Cauchy-Schwarz; c = M R ||d|| = {c:.3g})",
                         {"dHv": dHv, "inner": inner, "vHv": vHv, "bound": math.sqrt(bound)})
    return None


def bound_terms(answer: dict, outputs: int, smoothness: float, value: float | None = None,
                intercept_gradient=None) -> Violation | None:
    """The Hessian-free bound's per-client means (the ``bound_terms`` answer). Alone: the shapes
    (4 magnitudes; with the intercepts 1 + K + K(K+1)/2 more and the mean :math:`\\|\\tilde x\\|`),
    magnitudes :math:`\\ge0`, :math:`\\overline{\\|x\\|^2}\\ge\\overline{\\|\\tilde x\\|}^2` (Jensen, and
    :math:`\\|x\\|\\ge\\|\\tilde x\\|`), the intercepts' Hessian PSD and at most
    :math:`\\mathrm{smooth}(\\ell)` (the intercept feature is 1: it is the mean of the scores'
    curvature). Against the client's ``evaluate`` answer at the same point (when known): the
    intercepts' value is the value, the mean :math:`|\\ell|` at least the value, and the intercepts'
    gradient the gradient's intercept entries."""
    K = int(outputs)
    allowance = np.asarray(answer.get("allowance", []), float).reshape(-1)
    bad = shape("allowance", allowance, 4)
    if bad:
        return bad
    if np.any(allowance < 0):
        return Violation("bound magnitudes", f"negative mean magnitudes {allowance.tolist()}", {"allowance": allowance})
    if value is not None and allowance[0] < value - _tol(abs(value)):
        return Violation("bound magnitudes", f"mean |loss| {allowance[0]:.6g} below the mean loss {value:.6g}",
                         {"mean_abs_loss": allowance[0], "value": value})
    if "intercept_hessian" not in answer:
        return None
    b_value = np.asarray(answer.get("intercept_value", []), float).reshape(-1)
    b_grad = np.asarray(answer.get("intercept_gradient", []), float).reshape(-1)
    b_hess = np.asarray(answer["intercept_hessian"], float).reshape(-1)
    norm = np.asarray(answer.get("feature_norm", []), float).reshape(-1)
    bad = (shape("intercept_value", b_value, 1) or shape("intercept_gradient", b_grad, K)
           or shape("intercept_hessian (upper triangle)", b_hess, K * (K + 1) // 2) or shape("feature_norm", norm, 1))
    if bad:
        return bad
    if norm[0] < 0 or norm[0] ** 2 > allowance[2] + _tol(allowance[2]):
        return Violation("bound magnitudes", f"mean ||x~|| = {norm[0]:.6g} but mean ||x||^2 = {allowance[2]:.6g}",
                         {"feature_norm": norm[0], "mean_squared_norm": allowance[2]})
    H = np.zeros((K, K))
    H[np.triu_indices(K)] = b_hess
    H = H + np.triu(H, 1).T
    bad = hessian_psd(H) or hessian_size(H, smoothness, 1.0)
    if bad:
        return bad
    if value is not None:
        bad = same_value(None, value, float(b_value[0]))
        if bad:
            return bad
    if intercept_gradient is not None:
        g = np.asarray(intercept_gradient, float).reshape(-1)
        if float(np.max(np.abs(g - b_grad))) > _tol(float(np.abs(g).max()) + 1.0):
            return Violation("bound gradient", "the intercepts' gradient differs from the gradient's intercept entries "
                                               "at the same theta", {"gradient": g, "intercept_gradient": b_grad})
    return None


def hvp_matches_hessian(H, v, Hv) -> Violation | None:
    """A Hessian-vector product next to the Hessian at the same point: :math:`Hv` itself."""
    H, v, Hv = np.asarray(H, float), np.asarray(v, float), np.asarray(Hv, float)
    ref = H @ v
    err = float(np.linalg.norm(ref - Hv))
    scale = float(np.linalg.norm(H, 2) * np.linalg.norm(v)) * max(1, v.size)
    if err > _tol(scale):
        return Violation("Hessian-vector product vs Hessian", f"||Hv - hvp|| = {err:.6g} (||Hv|| = {np.linalg.norm(ref):.6g})",
                         {"error": err})
    return None


# ------------------------------------------------------------------ one client's memory
@dataclass
class AnswerRecord:
    """What one client answered at one point: ``value`` (``None`` if not asked), ``gradient``,
    ``hessian`` (full matrix) and ``hvps`` (``[(direction, product), ...]``)."""

    theta: np.ndarray
    value: float | None = None
    gradient: np.ndarray | None = None
    hessian: np.ndarray | None = None
    hvps: list = field(default_factory=list)
