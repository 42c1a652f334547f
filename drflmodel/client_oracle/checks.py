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

**Allowances are rounding, derived, never looseness.** A client's answer is a mean over its
:math:`N_i` rows of terms computed from scores :math:`s_j=W^\top x_j` (inner products of length
:math:`d`); the server's check adds inner products of length :math:`P=Kd`. With the unit roundoff
:math:`u=\epsilon/2` and :math:`\gamma_m=mu/(1-mu)` (N. Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., §3.1), a computed sum of :math:`m` terms errs by at most :math:`\gamma_m` times
the sum of the terms' magnitudes -- not times the result, which cancellation can make arbitrarily
smaller. Every check therefore compares with an allowance :math:`\gamma_m\times` *the magnitudes
summed* (:class:`Magnitudes`), :math:`m=N_i+P+` :data:`EXTRA_TERMS` (the loss's elementary functions,
each within a few ulps, as in the Hessian-free certificate's :math:`\gamma_{N+d+16}`). The magnitudes
come from what the server knows of the client: its declared row norm :math:`R\ge\|x_j\|` and the
loss's constants :math:`\mathrm{Lip}` and :math:`\beta` (smoothness), so that with
:math:`G=\mathrm{Lip}` (or :math:`\sqrt{2\beta h}` for a non-Lipschitz loss: a :math:`\beta`-smooth
nonnegative loss has :math:`\|\nabla_s\ell\|^2\le2\beta\ell`, and Jensen over the rows):

* a value :math:`h` errs by at most :math:`\gamma_m(|h|+GR\|\theta\|)` (each score by
  :math:`\gamma_d\|x_j\|\|W\|_F`, moving :math:`\ell_j` by :math:`\|\nabla_s\ell_j\|` times that);
* a gradient by at most :math:`\gamma_m(GR+\beta R^2\|\theta\|)` in norm;
* a Hessian (or :math:`Hv/\|v\|`) by at most :math:`\gamma_m\,c\,R^2` in 2-norm: it is
  :math:`\frac1N\sum_jx_jx_j^\top\otimes C_j` computed as sums of nonnegative parts
  (:math:`C_j=\ell''_j\le\beta`, :math:`c=\beta`) or, for the softmax, as
  :math:`A-Z^\top Z` with :math:`\mathrm{tr}A=\frac1N\sum_j\|x_j\|^2` and
  :math:`\mathrm{tr}Z^\top Z\le\mathrm{tr}A` (:math:`\sum_kp_k=1`, :math:`p_k^2\le p_k`), so
  :math:`\|\delta H\|_2\le\|\delta H\|_F\le\gamma_m(\mathrm{tr}A+\mathrm{tr}Z^\top Z)\le2\gamma_mR^2`
  (:math:`c=4\beta=2`). For a scalar-score loss the computed trace bounds it as well
  (:math:`\|\delta H\|_2\le\gamma_m\mathrm{tr}H`: no cancellation), with no row norm needed.

The Hessian-free route's ``bound_terms`` answer carries its own magnitudes (the means of
:math:`|\ell_j|`, :math:`\|x_j\|\|\nabla\ell_j\|`, :math:`\|x_j\|^2`, :math:`\|s_j\|_1`), so its checks
need no row norm. Where a magnitude is unknown -- no row norm declared (the server asks it only for a
self-concordance bound) -- the score magnitudes are invisible to the server and the allowance falls
back to :data:`ROUNDING` :math:`\epsilon` times the scale visible in the answers (written next to each
check): a measured multiple, not a derived one; :data:`FALLBACKS` counts how often it decided.

A lying but *consistent* client -- one that answers, every time, for some other convex function
(other data, scaled data) -- passes every check: the certificate then holds for the functions the
clients answered for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Violation", "ROUNDING", "Magnitudes", "gamma", "EXTRA_TERMS", "mean_squared_norm_at_zero", "finite", "shape", "value_range", "value_at_zero", "value_lipschitz",
           "gradient_length",
           "hessian_psd", "hessian_size", "hvp_psd", "statistics_gram", "same_value",
           "first_order_convexity", "monotone_gradients", "curvature_matches_gradients", "hvp_symmetry",
           "hvp_matches_hessian", "hvp_matches_gradients", "bound_terms", "AnswerRecord"]

EPS = float(np.finfo(float).eps)
#: unit roundoff of IEEE double precision
UNIT_ROUNDOFF = EPS / 2
#: operations of an answer beyond the lengths of its sums (the loss's exp, log, log1p, sqrt and the
#: mean's division, a few ulps each; the Hessian-free certificate's gamma_{N+d+16} uses the same 16)
EXTRA_TERMS = 16
#: the fallback when a magnitude is unknown (no row norm declared): this many machine epsilons times
#: the scale visible in the answers (module docstring; measured, not derived)
ROUNDING = 1e4
#: how many decisions took the fallback (by check name): a record for the sweep, not a switch
FALLBACKS: dict = {}
#: the allowance of each check's latest comparison ("derived" or "fallback"): a violation says which
_DECIDED: dict = {}


def gamma(m: float) -> float:
    r""":math:`\gamma_m=mu/(1-mu)`, the relative error bound of a sum of :math:`m` terms (Higham §3.1)."""
    mu = float(m) * UNIT_ROUNDOFF
    return mu / (1.0 - mu) if mu < 0.5 else math.inf


@dataclass(frozen=True)
class Magnitudes:
    """What the server knows of one client's sums (module docstring): ``rows`` :math:`N_i`, ``dim``
    :math:`P`, ``outputs`` :math:`K`, the declared ``row_norm`` :math:`R` (``None``: not declared)
    and the loss's ``lipschitz`` and ``smoothness`` in the score."""

    rows: int = 1
    dim: int = 1
    outputs: int = 1
    row_norm: float | None = None
    lipschitz: float = math.inf
    smoothness: float = math.inf
    mean_squared_norm: float | None = None

    @property
    def _norms(self) -> tuple[float, float] | None:
        r"""``(r1, r2)`` with :math:`\frac1N\sum_j\|x_j\|\le r_1` and :math:`\frac1N\sum_j\|x_j\|^2\le r_2`:
        from the mean squared norm :math:`q` when known (:math:`\sqrt q`, :math:`q`; Jensen), else from
        the row norm (:math:`R`, :math:`R^2`); ``None`` when neither is known."""
        if self.mean_squared_norm is not None:
            q = max(float(self.mean_squared_norm), 0.0)
            if self.row_norm is not None:
                return min(math.sqrt(q), self.row_norm), min(q, self.row_norm ** 2)
            return math.sqrt(q), q
        if self.row_norm is not None:
            return float(self.row_norm), float(self.row_norm) ** 2
        return None

    @property
    def gamma(self) -> float:
        r""":math:`\gamma_m`, :math:`m=N_i+P+` :data:`EXTRA_TERMS`."""
        return gamma(int(self.rows) + int(self.dim) + EXTRA_TERMS)

    def _slope(self, value: float) -> float | None:
        r""":math:`G\ge\frac1N\sum_j\|\nabla_s\ell_j\|`: Lip, or :math:`\sqrt{2\beta h}`."""
        if np.isfinite(self.lipschitz):
            return float(self.lipschitz)
        if np.isfinite(self.smoothness):
            return math.sqrt(2.0 * self.smoothness * max(float(value), 0.0))
        return None

    def value_error(self, value: float, theta_norm: float) -> float | None:
        r""":math:`\gamma_m(|h|+GR\|\theta\|)` (``None`` without :math:`R`; :math:`R` may be replaced by the
        root mean squared norm: :math:`\frac1N\sum_j\|\nabla\ell_j\|\|x_j\|\le G\sqrt q` by Cauchy-Schwarz)."""
        G, norms = self._slope(value), self._norms
        if norms is None or G is None:
            return None
        return self.gamma * (abs(value) + G * norms[0] * theta_norm)

    def gradient_error(self, value: float, theta_norm: float) -> float | None:
        r""":math:`\gamma_m(GR+\beta R^2\|\theta\|)` (``None`` without :math:`R` or :math:`\beta`)."""
        G, norms = self._slope(value), self._norms
        if norms is None or G is None:
            return None
        if not np.isfinite(self.smoothness):       # a piecewise-linear loss: its derivative is exact between
            return self.gamma * G * norms[0]         # kinks (a score's rounding only picks another subgradient)
        return self.gamma * (G * norms[0] + self.smoothness * norms[1] * theta_norm)

    @property
    def curvature(self) -> float:
        """:math:`c`: :math:`\beta` for a scalar score, :math:`4\beta` for the softmax (module docstring)."""
        return float(self.smoothness) * (1.0 if self.outputs == 1 else 4.0)

    def hessian_error(self) -> float | None:
        r""":math:`\gamma_m\,c\,R^2` (or :math:`c` times the mean squared norm), a bound on the 2-norm of
        a computed Hessian's error."""
        norms = self._norms
        if norms is None or not np.isfinite(self.smoothness):
            return None
        return self.gamma * self.curvature * norms[1]


def mean_squared_norm_at_zero(hessian, outputs: int) -> float | None:
    r"""The mean squared row norm :math:`\frac1N\sum_j\|x_j\|^2` read off a softmax Hessian at
    :math:`\theta=0` (every row's probabilities are exactly :math:`1/K` there, so
    :math:`\nabla^2h(0)=\frac1N\sum_jx_jx_j^\top\otimes(I/K-\mathbf 1\mathbf 1^\top/K^2)` and
    :math:`\mathrm{tr}\nabla^2h(0)=\frac{K-1}K\frac1N\sum_j\|x_j\|^2`); raised by :math:`\gamma_{P+16}`
    for the trace's own rounding. The magnitude a softmax Hessian's check needs when the client
    declared no row norm (``None`` for a scalar score)."""
    K = int(outputs)
    if K < 2:
        return None
    H = np.asarray(hessian, float)
    return float(np.trace(H)) * K / (K - 1) * (1.0 + gamma(H.shape[0] + EXTRA_TERMS))


def row_norm_covers_mean(row_norm: float, hessian, outputs: int) -> Violation | None:
    r"""The declared row norm against a softmax Hessian at :math:`	heta=0`: the largest row norm is at
    least the root mean square, :math:`R^2\ge q`, with :math:`q` read off the trace
    (:func:`mean_squared_norm_at_zero`; lowered by :math:`\gamma_{P+16}` for the trace's rounding, and
    :math:`R^2` raised by :math:`\gamma_{P+16}` for the client's own). A smaller declared :math:`R` would
    make the self-concordance bounds that read it unsound. ``None`` for a scalar score."""
    K = int(outputs)
    if K < 2:
        return None
    H = np.asarray(hessian, float)
    g = gamma(H.shape[0] + EXTRA_TERMS)
    q_low = float(np.trace(H)) * K / (K - 1) * (1.0 - g)
    R2 = float(row_norm) ** 2 * (1.0 + 2.0 * g)
    if q_low > R2:
        return Violation("row norm", f"declared max_j ||x_j||^2 = {float(row_norm) ** 2:.17g} is below the mean "
                                     f"squared row norm {q_low:.17g} its Hessian at theta = 0 implies",
                         {"row_norm": float(row_norm), "mean_squared_norm": q_low})
    return None


def _norm(v) -> float:
    r""":math:`\|v\|_2` of a vector (``np.linalg.norm``'s own formula, without its overhead: these
    run once per kept answer for every new one)."""
    v = np.asarray(v, float).reshape(-1)
    return math.sqrt(float(np.dot(v, v)))


def _two_values(magnitudes: Magnitudes | None, value_a: float, theta_a, value_b: float, theta_b) -> float | None:
    """The sum of two values' errors (:meth:`Magnitudes.value_error`), ``None`` if unknown."""
    if magnitudes is None or theta_a is None or theta_b is None:
        return None
    ea = magnitudes.value_error(value_a, _norm(theta_a))
    eb = magnitudes.value_error(value_b, _norm(theta_b))
    return None if ea is None or eb is None else ea + eb


def _two_gradients(magnitudes: Magnitudes | None, theta_a, theta_b, values: tuple | None = None) -> float | None:
    """The sum of two gradients' errors in norm (:meth:`Magnitudes.gradient_error`), ``None`` if unknown."""
    if magnitudes is None:
        return None
    va, vb = values if values is not None else (0.0, 0.0)
    if values is None and not np.isfinite(magnitudes.lipschitz):
        return None                                 # a non-Lipschitz loss's slope needs the values
    ea = magnitudes.gradient_error(va, _norm(theta_a))
    eb = magnitudes.gradient_error(vb, _norm(theta_b))
    return None if ea is None or eb is None else ea + eb


def _allow(check: str, derived: float | None, visible_scale: float, server_terms: int = 1) -> float:
    r"""The allowance of one comparison: the derived client error ``derived`` plus the server's own
    rounding :math:`\gamma_{P+16}` on the visible scale; without ``derived``, the fallback
    :data:`ROUNDING` :math:`\epsilon` times the visible scale (counted in :data:`FALLBACKS`)."""
    if derived is None:
        FALLBACKS[check] = FALLBACKS.get(check, 0) + 1
        _DECIDED[check] = "fallback"
        return _tol(visible_scale)
    _DECIDED[check] = "derived"
    return float(derived) + gamma(server_terms + EXTRA_TERMS) * max(float(visible_scale), np.finfo(float).tiny)


@dataclass
class Violation:
    """A failed check: ``check`` (its name), ``detail`` (the numbers in words), ``numbers``."""

    check: str
    detail: str
    numbers: dict = field(default_factory=dict)

    def __post_init__(self):
        # a rejection decided on the fallback allowance may be the server's own limit: say so
        if _DECIDED.pop(self.check, None) == "fallback":
            self.detail += (" [decided on the fallback allowance (ROUNDING eps x the scale visible in the answers): "
                            "the client's magnitudes were unknown (no row norm declared), so this may be the "
                            "server's own limit rather than a wrong answer]")
            self.numbers = {**self.numbers, "fallback_allowance": 1.0}

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


def value_range(value: float, minimum: float = 0.0, magnitudes: Magnitudes | None = None,
                theta=None) -> Violation | None:
    """A mean loss at or above the loss's minimum (0 for every catalogue loss); allowance the value's
    error :meth:`Magnitudes.value_error` at ``theta``."""
    derived = None if magnitudes is None or theta is None else magnitudes.value_error(
        value, float(np.linalg.norm(theta)))
    if value < minimum - _allow("loss range", derived, abs(minimum) + abs(value)):
        return Violation("loss range", f"mean loss {value:.6g} is below the loss's minimum {minimum:g}",
                         {"value": value, "minimum": minimum})
    return None


def value_at_zero(value: float, expected: float, magnitudes: Magnitudes | None = None) -> Violation | None:
    r"""At :math:`\theta=0` every score is 0, and a classification loss takes one value there for every
    label: the mean loss is that value exactly (log 2 for the logistic loss, log K for softmax, 1 for
    the hinge). At :math:`\theta=0` every row's loss is computed from exact zero scores: the mean of
    :math:`N_i` equal terms errs by :math:`\gamma_m|\ell(0)|`."""
    if abs(value - expected) > _allow("value at theta = 0", None if magnitudes is None else
                                      magnitudes.gamma * abs(expected), abs(expected)):
        return Violation("value at theta = 0", f"mean loss {value:.17g} at theta = 0; every row's loss is "
                                               f"{expected:.17g} there", {"value": value, "expected": expected})
    return None


def value_lipschitz(theta_a, value_a: float, theta_b, value_b: float, lipschitz: float,
                    row_norm: float | None, magnitudes: Magnitudes | None = None) -> Violation | None:
    r""":math:`|h(\theta_b)-h(\theta_a)|\le\mathrm{Lip}(\ell)\max_j\|x_j\|\,\|\theta_b-\theta_a\|` (a
    Lipschitz loss: every score moves by at most :math:`\|x_j\|\|d\|`); catches a huge value asked
    without its gradient."""
    if row_norm is None or not np.isfinite(lipschitz):
        return None
    nd = float(np.linalg.norm(np.asarray(theta_b, float) - np.asarray(theta_a, float)))
    jump, cap = abs(value_b - value_a), lipschitz * row_norm * nd
    derived = _two_values(magnitudes, value_a, theta_a, value_b, theta_b)
    if jump > cap + _allow("Lipschitz values", derived, abs(value_a) + abs(value_b) + cap):
        return Violation("Lipschitz values", f"|h(theta_b) - h(theta_a)| = {jump:.6g} exceeds Lip(loss) max_j ||x_j|| "
                                             f"||theta_b - theta_a|| = {cap:.6g}", {"jump": jump, "bound": cap})
    return None


def gradient_length(gradient, lipschitz: float, row_norm: float | None, magnitudes: Magnitudes | None = None,
                    theta=None, value: float | None = None) -> Violation | None:
    """:math:`\\|\\nabla h\\|\\le\\mathrm{Lip}(\\ell)\\max_j\\|x_j\\|` (a Lipschitz loss and a declared row norm);
    allowance the gradient's error :meth:`Magnitudes.gradient_error`."""
    if row_norm is None or not np.isfinite(lipschitz):
        return None
    g, cap = float(np.linalg.norm(gradient)), lipschitz * row_norm
    derived = None if magnitudes is None or theta is None else magnitudes.gradient_error(
        0.0 if value is None else value, float(np.linalg.norm(theta)))
    if g > cap + _allow("gradient length", derived, cap):
        return Violation("gradient length", f"||gradient|| = {g:.6g} exceeds Lip(loss) max_j ||x_j|| = {cap:.6g}",
                         {"norm": g, "bound": cap})
    return None


def _psd_defect(M, magnitudes: Magnitudes | None = None, cancellation: bool = False,
                name: str = "Hessian PSD") -> tuple[float, float] | None:
    r"""``(smallest eigenvalue, largest)`` of the symmetric ``M`` when it is not PSD beyond rounding
    (scaled to unit diagonal, or unscaled when the test is absolute); ``None`` when it is PSD.

    * ``cancellation=False`` -- ``M`` is a sum over rows of nonnegative multiples of
      :math:`x_jx_j^\top` (a scalar-score loss's Hessian, a Gram matrix): an entry errs by at most
      :math:`\gamma_m\sum_j c_j|x_{jk}x_{jl}|\le\gamma_m\sqrt{M_{kk}M_{ll}}` (Cauchy-Schwarz, and the
      diagonal sums have no cancellation), so :math:`D^{-1/2}MD^{-1/2}` errs by at most
      :math:`\gamma_m` per entry and :math:`\gamma_mP` in 2-norm, and a diagonal entry by
      :math:`\gamma_mM_{kk}` (a negative one beyond that is a defect outright). The scaling keeps a
      small column from hiding behind a large one.
    * ``cancellation=True`` (the softmax: :math:`A-Z^\top Z`) -- a diagonal entry can cancel to
      nothing (:math:`p(1-p)` of a saturated class), so the unit-diagonal scaling magnifies rounding
      without bound; the test is then absolute, :math:`\lambda_{\min}(M)\ge-\|\delta M\|_2` with
      :meth:`Magnitudes.hessian_error` (:math:`2\gamma_mR^2`), after the scaled test (a pass there is a
      pass).

    Plus the eigensolver's own backward error, :math:`\gamma_{P+16}` times the matrix's 2-norm.
    Without the magnitudes: the scaled test with the fallback :data:`ROUNDING`."""
    M = 0.5 * (np.asarray(M, float) + np.asarray(M, float).T)
    P = M.shape[0]
    unknown = magnitudes is None or (cancellation and magnitudes.hessian_error() is None)
    g = None if unknown else magnitudes.gamma
    eig = gamma(P + EXTRA_TERMS)
    diag = np.diag(M)
    scale = float(np.max(np.abs(diag))) if P else 0.0
    if g is None:
        FALLBACKS[name] = FALLBACKS.get(name, 0) + 1
        _DECIDED[name] = "fallback"
        diag_floor, scaled_tol = -np.zeros_like(diag), _tol(1.0) * P
    else:
        _DECIDED[name] = "derived"
        diag_floor, scaled_tol = -(g + eig) * np.abs(diag), (g + eig) * P
    bad_diag = diag < diag_floor
    if not bad_diag.any():
        d = np.sqrt(np.where(diag > 0, diag, 1.0))
        S = M / np.outer(d, d)
        if _cholesky_passes(S, scaled_tol):
            return None
        ev = np.linalg.eigvalsh(S)
        if ev[0] >= -scaled_tol:
            return None
        scaled = (float(ev[0]), float(ev[-1]))
    else:
        k = int(np.argmin(diag - diag_floor))
        scaled = (float(diag[k]), float(diag.max()))
    if cancellation and not unknown:
        error = magnitudes.hessian_error()
        ev = np.linalg.eigvalsh(M)
        if ev[0] >= -(error + eig * max(abs(float(ev[0])), abs(float(ev[-1])), scale)):
            return None
        return float(ev[0]), float(ev[-1])
    return scaled


def _cholesky_passes(S: np.ndarray, tol: float) -> bool:
    r"""A sufficient test of :math:`\lambda_{\min}(S)\ge-\mathrm{tol}` for a symmetric ``S`` with unit-size
    diagonal, a third of an eigendecomposition's work: the Cholesky factorization of
    :math:`S+\frac{\mathrm{tol}}4I` succeeds. In floating point it succeeds only if
    :math:`S+\frac{\mathrm{tol}}4I+\delta S` is positive definite with
    :math:`|\delta S|\le\gamma_{P+1}|R^\top||R|` (Higham, Theorem 10.3), whose 2-norm is at most
    :math:`\gamma_{P+1}\sum_k\|r_k\|^2\lesssim\gamma_{P+1}P\max_k(S_{kk}+\mathrm{tol}/4)` (Cauchy-Schwarz), so
    :math:`\lambda_{\min}(S)\ge-\mathrm{tol}` whenever that error is below :math:`\frac34\mathrm{tol}` --
    which is checked, else the test says nothing (``False``: the caller decides on the eigenvalues)."""
    P = S.shape[0]
    if not P:
        return True
    top = float(np.max(np.diag(S))) + 0.25 * tol
    if 1.01 * gamma(P + 1) * P * top > 0.75 * tol:
        return False
    try:
        np.linalg.cholesky(S + 0.25 * tol * np.eye(P))
    except np.linalg.LinAlgError:
        return False
    return True


def hessian_psd(H, magnitudes: Magnitudes | None = None) -> Violation | None:
    """A convex loss's Hessian is positive semidefinite, up to its rounding (:func:`_psd_defect`: a
    scalar-score loss's Hessian has no cancellation; the softmax's is checked absolutely)."""
    multi = magnitudes is not None and magnitudes.outputs > 1
    defect = _psd_defect(H, magnitudes, cancellation=multi)
    if defect is not None:
        return Violation("Hessian PSD", f"not positive semidefinite: smallest eigenvalue {defect[0]:.6g} of the "
                                        f"Hessian{'' if multi and magnitudes.row_norm is not None else ' scaled to unit diagonal'}",
                         {"min_eigenvalue": defect[0]})
    return None


def hessian_size(H, smoothness: float, row_norm: float | None,
                 magnitudes: Magnitudes | None = None) -> Violation | None:
    """:math:`\\lambda_{\\max}(\\nabla^2h)\\le\\mathrm{smooth}(\\ell)\\max_j\\|x_j\\|^2`; allowance
    :meth:`Magnitudes.hessian_error` plus the eigensolver's :math:`\\gamma_{P+16}\\|H\\|_2`."""
    if row_norm is None or not np.isfinite(smoothness):
        return None
    H = np.asarray(H, float)
    cap = smoothness * row_norm**2
    P = max(1, np.shape(H)[0])
    derived = None if magnitudes is None else magnitudes.hessian_error()
    # lambda_max <= ||H||_F: a pass without eigenvalues, with the allowance on the cap's scale alone (no
    # larger than the eigenvalue test's, so it passes nothing that test rejects)
    if derived is not None and float(np.linalg.norm(H)) <= cap + _allow("Hessian size", derived, cap, P):
        return None
    top = float(np.linalg.eigvalsh(H)[-1])
    if top > cap + _allow("Hessian size", derived, max(cap, abs(top)) * (1 if derived is not None else P), P):
        return Violation("Hessian size", f"largest eigenvalue {top:.6g} exceeds smooth(loss) max_j ||x_j||^2 = {cap:.6g}",
                         {"max_eigenvalue": top, "bound": cap})
    return None


def hvp_psd(direction, product, magnitudes: Magnitudes | None = None) -> Violation | None:
    """:math:`v^\\top Hv\\ge0`; allowance :math:`\\|v\\|^2` times :meth:`Magnitudes.hessian_error` (the
    product errs by at most :math:`\\|\\delta H\\|_2\\|v\\|`) plus the server's :math:`\\gamma_{P+16}\\|v\\|\\|Hv\\|`."""
    v, hv = np.asarray(direction, float), np.asarray(product, float)
    q = float(v @ hv)
    nv, nhv = float(np.linalg.norm(v)), float(np.linalg.norm(hv))
    error = None if magnitudes is None else magnitudes.hessian_error()
    derived = None if error is None else error * nv * nv
    if q < -_allow("Hessian-vector product PSD", derived, nv * nhv * (1 if derived is not None else max(1, v.size)),
                   v.size):
        return Violation("Hessian-vector product PSD", f"v'Hv = {q:.6g} < 0", {"vHv": q})
    return None


def statistics_gram(gram, moment, yy: float, rows: int | None = None,
                    intercept_column: int | None = None, magnitudes: Magnitudes | None = None) -> Violation | None:
    """The squared loss's statistics are the Gram matrix of :math:`[X\\ y]`: PSD (hence
    :math:`y^\\top y\\ge0`, :math:`X^\\top X\\succeq0` and :math:`\\|X^\\top y\\|^2\\le y^\\top y\\,\\lambda_{\\max}(X^\\top X)`),
    with :math:`N` on the diagonal of an all-one (intercept) column (a sum of :math:`N` exact ones:
    exact below :math:`2^{53}`). The Gram matrix is a sum of nonnegative outer products: the scaled PSD
    test of :func:`_psd_defect` with :math:`\\gamma_m`, :math:`m=N_i+d+16`."""
    G, b = np.asarray(gram, float), np.asarray(moment, float).reshape(-1)
    if yy < 0:
        return Violation("statistics", f"y'y = {yy:.6g} < 0", {"yy": yy})
    if intercept_column is not None and rows is not None and abs(G[intercept_column, intercept_column] - rows) > _tol(rows):
        return Violation("statistics", f"the intercept column's X'X entry is {G[intercept_column, intercept_column]:.10g}, "
                                       f"not the declared {rows} rows", {"entry": float(G[intercept_column, intercept_column]),
                                                                         "rows": rows})
    if magnitudes is None and rows is not None:
        magnitudes = Magnitudes(rows=int(rows), dim=G.shape[0] + 1)
    defect = _psd_defect(np.block([[G, b[:, None]], [b[None, :], np.array([[yy]])]]), magnitudes,
                         name="statistics")
    if defect is not None:
        return Violation("statistics", f"[X'X, X'y; y'X, y'y] is not PSD (smallest eigenvalue {defect[0]:.6g} scaled "
                                       "to unit diagonal): no rows X, y have these statistics",
                         {"min_eigenvalue": defect[0]})
    return None


# ------------------------------------------------------------------ against earlier answers
def same_value(theta, a: float, b: float, magnitudes: Magnitudes | None = None) -> Violation | None:
    """The same point, the same value: two honest computations of one mean loss (possibly by two code
    paths, e.g. the ``evaluate`` and ``bound_terms`` answers) differ by at most twice
    :meth:`Magnitudes.value_error`."""
    derived = None if theta is None else _two_values(magnitudes, a, theta, b, theta)
    if abs(a - b) > _allow("same point, same value", derived, abs(a) + abs(b)):
        return Violation("same point, same value", f"two values at the same theta: {a:.17g} and {b:.17g}",
                         {"first": a, "second": b})
    return None


def first_order_convexity(theta_a, value_a, gradient_a, theta_b, value_b,
                          magnitudes: Magnitudes | None = None) -> Violation | None:
    """:math:`h(\\theta_b)\\ge h(\\theta_a)+\\nabla h(\\theta_a)^\\top(\\theta_b-\\theta_a)`; allowance the two
    values' errors and the gradient's times :math:`\\|d\\|` (:class:`Magnitudes`), plus the server's
    :math:`\\gamma_{P+16}` on the visible scale :math:`|h_a|+|h_b|+\\|\\nabla h_a\\|\\|d\\|`."""
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    g = np.asarray(gradient_a, float)
    lin = float(g @ d)
    gap = value_b - value_a - lin
    nd = float(np.linalg.norm(d))
    scale = abs(value_a) + abs(value_b) + float(np.linalg.norm(g)) * nd
    derived = _two_values(magnitudes, value_a, theta_a, value_b, theta_b)
    ge = None if magnitudes is None else magnitudes.gradient_error(value_a, float(np.linalg.norm(theta_a)))
    derived = None if derived is None or ge is None else derived + ge * nd
    if gap < -_allow("first-order convexity", derived, scale, d.size):
        return Violation("first-order convexity",
                         f"h(theta_b) = {value_b:.10g} < h(theta_a) + g_a'(theta_b - theta_a) = {value_a + lin:.10g} "
                         f"(violation {-gap:.3g}, ||d|| = {np.linalg.norm(d):.3g})",
                         {"violation": -gap, "scale": scale})
    return None


def monotone_gradients(theta_a, gradient_a, theta_b, gradient_b, magnitudes: Magnitudes | None = None,
                       values: tuple | None = None) -> Violation | None:
    """:math:`(\\theta_b-\\theta_a)^\\top(\\nabla h(\\theta_b)-\\nabla h(\\theta_a))\\ge0`; allowance
    :math:`\\|d\\|` times the two gradients' errors (``values``: the two mean losses, for a
    non-Lipschitz loss's slope)."""
    d = np.asarray(theta_b, float) - np.asarray(theta_a, float)
    ga, gb = np.asarray(gradient_a, float), np.asarray(gradient_b, float)
    inner = float(d @ (gb - ga))
    scale = float(np.linalg.norm(d) * (np.linalg.norm(ga) + np.linalg.norm(gb)))
    derived = _two_gradients(magnitudes, theta_a, theta_b, values)
    derived = None if derived is None else derived * float(np.linalg.norm(d))
    if inner < -_allow("monotone gradients", derived, scale, d.size):
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
                                self_concordance: float | None, row_norm: float | None,
                                magnitudes: Magnitudes | None = None, values: tuple | None = None) -> Violation | None:
    """:math:`d^\\top(\\nabla h(\\theta_b)-\\nabla h(\\theta_a))` inside the range the Hessian at
    :math:`\\theta_a` allows (module docstring); needs the loss's generalized self-concordance
    constant and the row norm (``None``: not checked), an equality for the squared loss.

    The rounding allowance grows with :math:`\\|H\\|_2`; the decision is taken with cheap bounds on it
    (:func:`_spectral_norm_bounds`) and the exact norm is computed only when they disagree, so the
    verdict is the one the exact norm gives. With :class:`Magnitudes` the allowance is derived instead:
    :math:`\\|d\\|` times the two gradients' errors, plus :math:`\\|d\\|^2` times the Hessian's
    (:meth:`Magnitudes.hessian_error`) stretched by the range's factor :math:`(e^c-1)/c`."""
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

    grads = _two_gradients(magnitudes, theta_a, theta_b, values)
    herr = None if magnitudes is None else magnitudes.hessian_error()
    if grads is not None and herr is not None:
        # d'Hd errs by ||d||^2 herr (and the server's product); the range [lo, hi] stretches that error
        # by at most max(1, (e^c - 1)/c); an infinite hi (c > 700) bounds nothing above
        stretch = 1.0 if c <= 1e-12 else (max(1.0, math.expm1(c) / c) if c <= 700 else math.inf)
        phi_err = nd * nd * herr + gamma(d.size + EXTRA_TERMS) * abs(phi)
        inner_err = nd * grads + gamma(d.size + EXTRA_TERMS) * nd * float(np.linalg.norm(ga) + np.linalg.norm(gb))
        low_ok = inner >= lo - (inner_err + phi_err)
        high_ok = (not np.isfinite(hi)) or not np.isfinite(stretch) or inner <= hi + inner_err + phi_err * stretch
        if low_ok and high_ok:
            return None
        return Violation("curvature vs gradients",
                         f"d'(g_b - g_a) = {inner:.10g}, but the Hessian gives d'Hd = {phi:.10g} and allows "
                         f"[{lo:.10g}, {hi:.10g}] (c = M R ||d|| = {c:.3g})",
                         {"inner": inner, "dHd": phi, "low": lo, "high": hi})
    FALLBACKS["curvature vs gradients"] = FALLBACKS.get("curvature vs gradients", 0) + 1
    _DECIDED["curvature vs gradients"] = "fallback"
    low_norm, high_norm = _spectral_norm_bounds(H)
    if not outside(low_norm):                 # inside with the smaller allowance: inside with the exact one
        return None
    if outside(high_norm) or outside(float(np.linalg.norm(H, 2))):
        return Violation("curvature vs gradients",
                         f"d'(g_b - g_a) = {inner:.10g}, but the Hessian gives d'Hd = {phi:.10g} and allows "
                         f"[{lo:.10g}, {hi:.10g}] (c = M R ||d|| = {c:.3g})",
                         {"inner": inner, "dHd": phi, "low": lo, "high": hi})
    return None


def hvp_symmetry(u, Hu, v, Hv, magnitudes: Magnitudes | None = None) -> Violation | None:
    """Two Hessian-vector products at one point: :math:`u^\\top(Hv)=v^\\top(Hu)`; allowance
    :math:`2\\|u\\|\\|v\\|` times :meth:`Magnitudes.hessian_error` plus the server's inner products."""
    u, Hu, v, Hv = (np.asarray(a, float) for a in (u, Hu, v, Hv))
    a, b = float(u @ Hv), float(v @ Hu)
    visible = float(np.linalg.norm(u) * np.linalg.norm(Hv) + np.linalg.norm(v) * np.linalg.norm(Hu))
    error = None if magnitudes is None else magnitudes.hessian_error()
    derived = None if error is None else 2.0 * error * float(np.linalg.norm(u) * np.linalg.norm(v))
    if abs(a - b) > _allow("Hessian-vector symmetry", derived, visible * (1 if derived is not None else max(1, u.size)),
                           u.size):
        return Violation("Hessian-vector symmetry", f"u'(Hv) = {a:.10g} but v'(Hu) = {b:.10g}", {"uHv": a, "vHu": b})
    return None


def hvp_matches_gradients(theta_a, direction, product, gradient_a, theta_b, gradient_b,
                          self_concordance: float | None, row_norm: float | None,
                          magnitudes: Magnitudes | None = None, values: tuple | None = None) -> Violation | None:
    r"""A Hessian-vector product :math:`Hv` at :math:`\theta_a` against the gradient difference to
    :math:`\theta_b` (:math:`d=\theta_b-\theta_a`). Generalized self-concordance bounds
    :math:`d^\top Hd\le\bar\varphi=d^\top(\nabla h(\theta_b)-\nabla h(\theta_a))\,c/(1-e^{-c})`
    (module docstring; :math:`c=MR\|d\|`, an equality at :math:`c=0`), and :math:`H\succeq0` gives
    Cauchy-Schwarz, :math:`(d^\top Hv)^2\le d^\top Hd\;v^\top Hv\le\bar\varphi\,v^\top Hv`. A
    direction along :math:`d` (:math:`v=\alpha d`) gives :math:`d^\top Hd=d^\top Hv/\alpha` itself,
    checked on both sides as in :func:`curvature_matches_gradients`. Needs the loss's constant and
    the row norm (``None``: not checked). Allowances: with :class:`Magnitudes`, :math:`\\|d\\|` times the
    gradients' errors for :math:`d^\\top(\\nabla h_b-\\nabla h_a)` and :meth:`Magnitudes.hessian_error`
    times :math:`\\|d\\|\\|v\\|` and :math:`\\|v\\|^2` for :math:`d^\\top Hv` and :math:`v^\\top Hv`, each plus the
    server's :math:`\\gamma_{P+16}` on its visible scale."""
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
    check = "Hessian-vector product vs gradients"
    grads = _two_gradients(magnitudes, theta_a, theta_b, values)
    herr = None if magnitudes is None else magnitudes.hessian_error()
    derived = grads is not None and herr is not None
    inner_tol = _allow(check, None if not derived else nd * grads,
                       float(nd * (np.linalg.norm(ga) + np.linalg.norm(gb))), d.size)
    dHv, vHv = float(d @ Hv), float(v @ Hv)
    dHv_tol = _allow(check, None if not derived else herr * nd * nv, nd * nHv * (1 if derived else d.size), d.size)
    vHv_tol = _allow(check, None if not derived else herr * nv * nv, nv * nHv * (1 if derived else v.size), v.size)
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
                intercept_gradient=None, theta=None, rows: int | None = None,
                features: int | None = None) -> Violation | None:
    r"""The Hessian-free bound's per-client means (the ``bound_terms`` answer). Alone: the shapes
    (4 magnitudes; with the intercepts 1 + K + K(K+1)/2 more and the mean :math:`\|\tilde x\|`; the
    optional ``column_squares``, :math:`d` means of :math:`x_{jk}^2`), magnitudes :math:`\ge0`,
    :math:`\overline{\|x\|^2}\ge\overline{\|\tilde x\|}^2` (Jensen, and :math:`\|x\|\ge\|\tilde x\|`),
    :math:`\sum_k\overline{x_k^2}=\overline{\|x\|^2}`, the intercepts' Hessian PSD and at most
    :math:`\mathrm{smooth}(\ell)` (the intercept feature is 1: it is the mean of the scores'
    curvature). Against the client's ``evaluate`` answer at the same point (when known): the
    intercepts' value is the value, the mean :math:`|\ell|` at least the value, and the intercepts'
    gradient the gradient's intercept entries.

    **Allowances from the answer's own magnitudes** (the certificate's, :mod:`~drflmodel.problems.
    minmax.hessian_free_bound`): with :math:`a=` ``allowance`` (means of :math:`|\ell_j|`,
    :math:`\|x_j\|\|\nabla\ell_j\|`, :math:`\|x_j\|^2`, :math:`\|s_j\|_1`) and :math:`m=N_i+d+16`, a
    mean loss computed by either code path errs by at most :math:`\gamma_m(a_0+a_1\|\theta\|+a_3)` (the
    sum, the scores' inner products, the cancellation inside :math:`\log\sum e^{s}-s_y` of a nearly
    separable row), the intercepts' gradient by :math:`\gamma_m(a_1+\beta a_2\|\theta\|)`, a
    squared-norm mean by :math:`\gamma_ma_2` and the intercepts' Hessian
    (:math:`\frac1N\sum_jC_j`, :math:`A-Z^\top Z` for the softmax with traces :math:`\le1` each) by
    :math:`2\gamma_m\beta'` in 2-norm (:math:`\beta'=\beta` for a scalar score, 1 for the softmax)."""
    K = int(outputs)
    allowance = np.asarray(answer.get("allowance", []), float).reshape(-1)
    bad = shape("allowance", allowance, 4)
    if bad:
        return bad
    if np.any(allowance < 0):
        return Violation("bound magnitudes", f"negative mean magnitudes {allowance.tolist()}", {"allowance": allowance})
    tn = None if theta is None else float(np.linalg.norm(np.asarray(theta, float)))
    g = None if rows is None else gamma(int(rows) + int(features or 0) + EXTRA_TERMS)
    known = g is not None and tn is not None
    value_err = g * (allowance[0] + allowance[1] * tn + allowance[3]) if known else None
    if value is not None and allowance[0] < value - _allow("bound magnitudes", None if value_err is None
                                                          else 2.0 * value_err, abs(value)):
        return Violation("bound magnitudes", f"mean |loss| {allowance[0]:.17g} below the mean loss {value:.17g}",
                         {"mean_abs_loss": allowance[0], "value": value})
    if "column_squares" in answer:
        cols = np.asarray(answer["column_squares"], float).reshape(-1)
        bad = shape("column_squares", cols, features) if features is not None else None
        if bad:
            return bad
        total = float(cols.sum())
        if np.any(cols < 0) or abs(total - allowance[2]) > _allow(
                "bound magnitudes", None if g is None else 2.0 * g * allowance[2], allowance[2], cols.size):
            return Violation("bound magnitudes", f"the column means of x_k^2 sum to {total:.17g}, but the mean "
                                                 f"||x||^2 is {allowance[2]:.17g}",
                             {"column_sum": total, "mean_squared_norm": allowance[2]})
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
    if norm[0] < 0 or norm[0] ** 2 > allowance[2] + _allow("bound magnitudes", None if g is None else 2.0 * g * allowance[2],
                                                          allowance[2]):
        return Violation("bound magnitudes", f"mean ||x~|| = {norm[0]:.6g} but mean ||x||^2 = {allowance[2]:.6g}",
                         {"feature_norm": norm[0], "mean_squared_norm": allowance[2]})
    H = np.zeros((K, K))
    H[np.triu_indices(K)] = b_hess
    H = H + np.triu(H, 1).T
    # the intercepts' curvature: a "row norm" of 1 (the intercept feature), over the client's rows
    mags = None if rows is None else Magnitudes(rows=int(rows), dim=K, outputs=K, row_norm=1.0,
                                                smoothness=float(smoothness))
    bad = hessian_psd(H, mags) or hessian_size(H, smoothness, 1.0, mags)
    if bad:
        return bad
    if value is not None:
        if abs(value - float(b_value[0])) > _allow("same point, same value", None if value_err is None else 2.0 * value_err,
                                                   abs(value) + abs(float(b_value[0]))):
            return Violation("same point, same value", f"two values at the same theta: {value:.17g} and "
                                                       f"{float(b_value[0]):.17g}", {"first": value, "second": float(b_value[0])})
    if intercept_gradient is not None:
        gi = np.asarray(intercept_gradient, float).reshape(-1)
        grad_err = (g * (allowance[1] + (smoothness if np.isfinite(smoothness) else 0.0) * allowance[2] * tn)
                    if known else None)
        if float(np.max(np.abs(gi - b_grad))) > _allow("bound gradient", None if grad_err is None else 2.0 * grad_err,
                                                       float(np.abs(gi).max()) + 1.0):
            return Violation("bound gradient", "the intercepts' gradient differs from the gradient's intercept entries "
                                               "at the same theta", {"gradient": gi, "intercept_gradient": b_grad})
    return None


def hvp_matches_hessian(H, v, Hv, magnitudes: Magnitudes | None = None) -> Violation | None:
    """A Hessian-vector product next to the Hessian at the same point: :math:`Hv` itself; both err by
    at most :meth:`Magnitudes.hessian_error` :math:`\\|v\\|`, plus the server's product
    :math:`\\gamma_{P+16}\\|H\\|_F\\|v\\|`."""
    H, v, Hv = np.asarray(H, float), np.asarray(v, float), np.asarray(Hv, float)
    ref = H @ v
    err = float(np.linalg.norm(ref - Hv))
    error = None if magnitudes is None else magnitudes.hessian_error()
    nv = float(np.linalg.norm(v))
    derived = None if error is None else 2.0 * error * nv
    scale = (float(np.linalg.norm(H)) * nv if derived is not None
             else float(np.linalg.norm(H, 2) * nv) * max(1, v.size))
    if err > _allow("Hessian-vector product vs Hessian", derived, scale, v.size):
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
