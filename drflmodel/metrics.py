r"""Fairness and inequality indices, DEO / DFP / DFN and accuracy (pure numpy, solver-free).

Every function here is a closed form (sorting, cumulative sums, a greedy pass); none calls an
optimization solver, so the oracles, the solvers, the verifier and the tests can all use the same
numbers (one source of truth per formula).

Conventions (stated once, repeated in each docstring)
-----------------------------------------------------
* ``f`` is a vector of per-client **losses** unless a function says otherwise: larger is worse.
* **Fractional convention** (relative-fairness paper, Example 1): the mean of the top
  :math:`\alpha`-fraction of ``n`` values is the value of the LP
  :math:`\max\{a^\top f: a\in\Delta^{n-1},\ a_i\le 1/(\alpha n)\}`; with
  :math:`f_{(1)}\ge f_{(2)}\ge\dots` and :math:`k=\lfloor\alpha n\rfloor`,

  .. math:: \mathrm{cvar\_top}(f,\alpha)=\frac{1}{\alpha n}\Big(\sum_{j\le k}f_{(j)}
            +(\alpha n-k)\,f_{(k+1)}\Big).

  It is continuous in :math:`\alpha` and equals the plain mean of the top :math:`\alpha n`
  values when :math:`\alpha n` is an integer. All ratio indices (:func:`relative_unfairness`,
  :func:`ratio_20_20`, :func:`palma`) use it.
* **Integer convention** (the papers' tables: "worst 10 %" / "worst 20 %" of clients): the plain
  mean of the :math:`k=\max(1,\lfloor \text{frac}\cdot n\rfloor)` worst / best values; offered by
  :func:`worst_fraction_mean` / :func:`best_fraction_mean` with ``integer=True`` for reproducing
  the papers' tables ("worst 20 % of clients"). The floor is taken with a relative tolerance of
  ``1e-9`` so that e.g. ``0.29 * 100`` counts as 29, not 28.
* **Ratios and zeros.** Ratio indices need nonnegative losses (relative-fairness paper, §2:
  :math:`f_i\ge0`); a negative entry raises :class:`~drflmodel.errors.InvalidDataError`. A zero
  denominator with a positive numerator gives ``inf``; ``0/0`` raises ``InvalidDataError``.
  Indices normalized by the mean (:func:`atkinson_inf`, :func:`gini`, :func:`lorenz`) raise
  ``InvalidDataError`` when every entry is zero.
* **Predictions from scores**: :math:`\hat y=+1` if the score is
  :math:`\ge0`, else :math:`-1` -- **a score of exactly 0 is predicted +1**.
* Classification metrics take ``(y_true, y_pred, ...)`` in this order (as scikit-learn), with
  labels in :math:`\{-1,+1\}` and :math:`+1` the favourable label.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._validation import as_finite_array, check_probability_vector, check_real
from .errors import InvalidDataError, InvalidParameterError

__all__ = [
    "cvar_top", "cvar_bottom", "worst_fraction_mean", "best_fraction_mean",
    "relative_unfairness", "ratio_20_20", "palma", "atkinson_inf", "gini", "lorenz", "Lorenz",
    "skewness", "hcvar", "summary_indices", "distribution_summary",
    "predict_sign", "accuracy", "group_accuracy", "per_group_accuracy", "per_client_accuracy",
    "predict_class", "class_accuracy", "client_accuracies",
    "false_positive_rate", "false_negative_rate", "dfp", "dfn", "deo_01", "deo_surrogate",
]

_FLOOR_RTOL = 1e-9


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------
def _vector(f, name: str = "f", nonnegative: bool = False) -> np.ndarray:
    """A nonempty 1-D finite float vector (optionally with entries >= 0)."""
    arr = as_finite_array(f, name, ndim=1)
    if arr.size == 0:
        raise InvalidDataError(f"{name} must be nonempty; got an empty vector")
    if nonnegative and np.any(arr < 0):
        raise InvalidDataError(
            f"{name} must be nonnegative (losses, f_i >= 0) for this ratio index; "
            f"got min {arr.min():.6g}")
    return arr


def _fraction(value, name: str) -> float:
    return check_real(value, name, low=0.0, high=1.0, low_open=True)


def _int_count(frac: float, n: int) -> int:
    """:math:`\\max(1,\\lfloor \\text{frac}\\cdot n\\rfloor)` with a relative tolerance on the floor."""
    x = frac * n
    return max(1, min(n, int(math.floor(x * (1.0 + _FLOOR_RTOL)))))


def _scaled(f: np.ndarray) -> np.ndarray:
    """``f / max(f)`` for the scale-invariant ratio indices (a subnormal or huge ``f`` would
    underflow or overflow the means; the ratio is unchanged by the scaling)."""
    top = float(np.max(f))
    return f / top if top > 0 else f


def _ratio(num: float, den: float, what: str) -> float:
    if den > 0:
        return float(num / den)
    if num > 0:
        return math.inf
    raise InvalidDataError(f"{what} is 0/0 (numerator and denominator are both zero): undefined")


# ---------------------------------------------------------------------------------------------
# fraction means
# ---------------------------------------------------------------------------------------------
def cvar_top(f, alpha) -> float:
    r"""Exact fractional mean of the top :math:`\alpha`-fraction (CVaR / superquantile).

    .. math:: \mathrm{cvar\_top}(f,\alpha)=\max_{a\in\Delta_\alpha}a^\top f
       =\frac{1}{\alpha n}\Big(\sum_{j\le k}f_{(j)}+(\alpha n-k)f_{(k+1)}\Big),
       \quad k=\lfloor\alpha n\rfloor,

    with :math:`f_{(1)}\ge f_{(2)}\ge\dots` and
    :math:`\Delta_\alpha=\{a\in\Delta^{n-1}: a_i\le 1/(\alpha n)\}` (relative-fairness paper,
    Example 1; fractional convention). Equivalently :math:`\min_\eta\ \eta+\frac1{\alpha n}\sum_i(f_i-\eta)_+`.
    ``alpha = 1/n`` gives :math:`\max_if_i`; ``alpha = 1`` gives the mean.

    Parameters
    ----------
    f : 1-D finite array (any sign).
    alpha : fraction in (0, 1].
    """
    return _cvar_top(_vector(f), _fraction(alpha, "alpha"))


def _cvar_top(f: np.ndarray, alpha: float) -> float:
    """:func:`cvar_top` on validated input."""
    n = f.size
    s = np.sort(f)[::-1]
    an = alpha * n
    k = min(int(math.floor(an)), n)
    # weights 1/(alpha n) on the top k and (alpha n - k)/(alpha n) on the next: scaling each
    # weight (<= 1) rather than the values keeps a subnormal loss from underflowing to 0
    # (e.g. f = [5e-324], alpha = 0.2: 0.2 * 5e-324 == 0, but 1.0 * 5e-324 does not)
    total = float(s[:k].sum()) / an
    if k < n:
        total += ((an - k) / an) * float(s[k])
    return total


def cvar_bottom(f, beta) -> float:
    r"""Exact fractional mean of the bottom :math:`\beta`-fraction: :math:`\min_{b\in\Delta_\beta}b^\top f`.

    .. math:: \mathrm{cvar\_bottom}(f,\beta)=-\mathrm{cvar\_top}(-f,\beta)

    (relative-fairness paper, Example 1 and Definition 1: the denominator :math:`F_{B,\min}` of
    :math:`\mathfrak R_{A,B}` for :math:`B=\Delta_\beta`; fractional convention).
    """
    return -_cvar_top(-_vector(f), _fraction(beta, "beta"))


def worst_fraction_mean(f, frac, *, higher_is_better: bool = False, integer: bool = False) -> float:
    r"""Mean of the worst ``frac``-fraction of the values.

    By default the values are **losses** (``higher_is_better=False``), so "worst" means largest and
    the result is :func:`cvar_top` (fractional convention). For
    accuracies pass ``higher_is_better=True`` ("worst" = smallest, :func:`cvar_bottom`).

    ``integer=True`` switches to the integer convention of the papers' tables ("worst 10 %" in
    the FAFL paper, "worst-20%" in the Scaff-PD paper): the plain mean of the
    :math:`k=\max(1,\lfloor\text{frac}\cdot n\rfloor)` worst values.
    """
    f = _vector(f)
    frac = _fraction(frac, "frac")
    worst_is_large = not bool(higher_is_better)
    if integer:
        k = _int_count(frac, f.size)
        s = np.sort(f)
        part = s[-k:] if worst_is_large else s[:k]
        return float(part.mean())
    return _cvar_top(f, frac) if worst_is_large else -_cvar_top(-f, frac)


def best_fraction_mean(f, frac, *, higher_is_better: bool = False, integer: bool = False) -> float:
    r"""Mean of the best ``frac``-fraction of the values (the mirror of :func:`worst_fraction_mean`).

    Losses by default ("best" = smallest, :func:`cvar_bottom`, fractional convention);
    ``higher_is_better=True`` for accuracies. ``integer=True``: plain mean of the
    :math:`\max(1,\lfloor\text{frac}\cdot n\rfloor)` best values (the papers' tables).
    """
    return worst_fraction_mean(f, frac, higher_is_better=not bool(higher_is_better), integer=integer)


# ---------------------------------------------------------------------------------------------
# relative unfairness and classical inequality indices
# ---------------------------------------------------------------------------------------------
def _extreme(f: np.ndarray, S, name: str, maximize: bool) -> float:
    """max_{a in S} a^T f (maximize) or min_{b in S} b^T f, for a CVaR level or a WeightSet."""
    if not hasattr(S, "worst_case"):
        level = _fraction(S, name)
        return cvar_top(f, level) if maximize else cvar_bottom(f, level)
    from . import sets as _sets  # lazy: sets imports cvxpy

    if not isinstance(S, _sets.WeightSet):
        raise InvalidParameterError(
            f"{name} must be a CVaR level in (0, 1] or a drflmodel.sets.WeightSet; "
            f"got {type(S).__name__}")
    if S.n != f.size:
        raise InvalidParameterError(f"{name} is a set for n = {S.n} clients but f has length {f.size}")
    if not getattr(S, "nonnegative", True):
        raise InvalidParameterError(
            f"{name} must be a subset of the simplex (R_{{A,B}} needs A, B in Delta^(n-1), "
            f"relative-fairness paper, Definition 1); {type(S).__name__} allows negative weights")
    g = f if maximize else -f
    value, lam = S.worst_case(g)
    lam = np.asarray(lam, dtype=float)
    plain = float(lam @ g)
    if abs(plain - value) > 1e-9 * max(1.0, abs(value)):
        raise InvalidParameterError(
            f"{name} carries a penalty psi (worst_case value {value:.6g} != lam^T f = {plain:.6g}); "
            "R_{A,B} is defined for plain sets A, B in the simplex (relative-fairness paper, Definition 1)")
    return float(value) if maximize else -float(value)


def relative_unfairness(f, A, B) -> float:
    r"""Relative unfairness index :math:`\mathfrak R_{A,B}(f)` (relative-fairness paper, Definition 1, eq. (3)).

    .. math:: \mathfrak R_{A,B}(f)=\frac{\max_{a\in A}a^\top f}{\min_{b\in B}b^\top f}.

    ``A`` and ``B`` are each either a CVaR level in (0, 1] -- meaning the capped simplex
    :math:`\Delta_\alpha`, evaluated exactly by :func:`cvar_top` / :func:`cvar_bottom`
    (fractional convention) -- or a :class:`drflmodel.sets.WeightSet` inside the simplex without a
    penalty: then :math:`\max_A=A.\mathrm{worst\_case}(f)[0]` and
    :math:`\min_B=-B.\mathrm{worst\_case}(-f)[0]`. So ``relative_unfairness(f, 0.2, 0.2)`` is the
    20:20 index and ``relative_unfairness(f, 1/n, 1/n)`` is :math:`\max_if_i/\min_if_i`.

    ``f`` must be nonnegative (losses). A zero denominator with a positive numerator returns
    ``inf``; ``0/0`` raises :class:`~drflmodel.errors.InvalidDataError`. Sets with negative weights
    or a penalty :math:`\psi` raise :class:`~drflmodel.errors.InvalidParameterError`.
    """
    f = _scaled(_vector(f, nonnegative=True))
    num = _extreme(f, A, "A", maximize=True)
    den = _extreme(f, B, "B", maximize=False)
    return _ratio(num, den, "relative_unfairness")


def ratio_20_20(f) -> float:
    r"""20:20 index on losses: :math:`\mathfrak R_{\Delta_{0.2},\Delta_{0.2}}(f)` (relative-fairness
    paper, §3.1 and Appendix B): mean of the top 20 % over mean of the bottom 20 %, fractional
    convention (exact when 0.2 n is an integer). Always >= 1; ``inf`` if the bottom mean is 0."""
    return relative_unfairness(f, 0.2, 0.2)


def palma(f) -> float:
    r"""Palma index on losses as a **share ratio**: the share of the top 10 % over the share of the
    bottom 40 %,

    .. math:: \mathrm{Palma}(f)=\frac{0.1n\cdot\mathrm{cvar\_top}(f,0.1)}{0.4n\cdot
       \mathrm{cvar\_bottom}(f,0.4)}=\tfrac14\,\mathfrak R_{\Delta_{0.1},\Delta_{0.4}}(f)

    (relative-fairness paper, §3.1 and Appendix B; fractional convention)."""
    return 0.25 * relative_unfairness(f, 0.1, 0.4)


def atkinson_inf(f) -> float:
    r"""Atkinson index with infinite inequality aversion on losses:
    :math:`1-\min_if_i/\bar f` with :math:`\bar f=\frac1n\sum_if_i`, which equals
    :math:`1-1/\mathfrak R_{\{\mathbf 1/n\},\Delta^{n-1}}(f)` (relative-fairness paper,
    §3.1 and Appendix B). Lies in [0, 1] (1 iff some loss is 0); needs nonnegative ``f`` with a
    positive mean (``InvalidDataError`` otherwise)."""
    f = _scaled(_vector(f, nonnegative=True))
    mean = float(f.mean())
    if mean <= 0:
        raise InvalidDataError("f is identically zero: atkinson_inf = 1 - min/mean is 0/0 (undefined)")
    # (mean - min)/mean computed as mean(f - min)/mean: exactly >= 0, no cancellation at equality
    return float(np.mean(f - f.min())) / mean


def gini(f) -> float:
    r"""Gini coefficient (relative-fairness paper, §7 and Figure 4; its printed formula integrates the
    transformed curve :math:`\ell(x)-x/2` and is off by 1/2, so the standard definition is used).

    .. math:: G=\frac{\sum_i\sum_j|u_i-u_j|}{2n^2\bar u}
             =\frac{2\sum_k k\,u_{(k)}}{n\sum_iu_i}-\frac{n+1}{n}
             =1-2\int_0^1\ell(x)\,dx,

    with :math:`u_{(1)}\le\dots\le u_{(n)}` (ascending sort) and :math:`\ell` the Lorenz curve
    (trapezoid rule on its points is exact). Computed by the sorted form in
    :math:`O(n\log n)`. ``G`` lies in :math:`[0, 1-1/n]`; needs nonnegative values with a positive
    sum (``InvalidDataError`` otherwise). The paper's printed :math:`1-2\int\ell'` is wrong by +0.5.
    """
    u = _vector(f, nonnegative=True)
    total = float(u.sum())
    if total <= 0:
        raise InvalidDataError("f is identically zero: the Gini coefficient is 0/0 (undefined)")
    n = u.size
    s = np.sort(u)
    # sum_k (2k - n - 1) u_(k) / (n sum u): the sorted form above with the constant folded in
    # (sum_k (2k - n - 1) = 0, so u_(k) may be shifted by u_(1): equal values give exactly 0)
    w = 2.0 * np.arange(1, n + 1, dtype=float) - n - 1.0
    return float(w @ (s - s[0]) / (n * total))


class Lorenz(NamedTuple):
    r"""Points of the Lorenz curve: ``x`` = 0, 1/n, ..., 1; ``ell`` = cumulative share held by the
    bottom ``x`` fraction; ``ell_prime`` = :math:`\ell(x)-x/2` (the transformed curve plotted in
    the relative-fairness paper's Figure 4; for plotting only)."""

    x: np.ndarray
    ell: np.ndarray
    ell_prime: np.ndarray

    def to_dict(self) -> dict:
        return {"x": self.x.tolist(), "ell": self.ell.tolist(), "ell_prime": self.ell_prime.tolist()}


def lorenz(f) -> Lorenz:
    r"""Lorenz curve of nonnegative values (relative-fairness paper, §7 and Figure 4).

    .. math:: x_k=k/n,\qquad \ell(x_k)=\frac{\sum_{j\le k}u_{(j)}}{\sum_ju_j}\ (\text{ascending sort}),
              \qquad \ell'(x_k)=\ell(x_k)-x_k/2,\quad k=0,\dots,n.

    Returns a :class:`Lorenz` named tuple ``(x, ell, ell_prime)`` of length ``n + 1``.
    ``gini(f) == 1 - 2 * trapezoid(ell, x)``.
    """
    u = _vector(f, nonnegative=True)
    total = float(u.sum())
    if total <= 0:
        raise InvalidDataError("f is identically zero: the Lorenz curve (shares of the total) is undefined")
    n = u.size
    x = np.arange(n + 1, dtype=float) / n
    ell = np.concatenate(([0.0], np.cumsum(np.sort(u)) / total))
    ell[-1] = 1.0
    return Lorenz(x, ell, ell - x / 2.0)


def skewness(lam) -> float:
    r"""Skewness of a weight vector (relative-fairness paper, §6):
    :math:`\mathfrak s(\lambda)=n\sum_i|\lambda_i-1/n|^2+1=n\|\lambda\|_2^2` for
    :math:`\sum_i\lambda_i=1` (negative entries allowed, as in integrated sets). ``lam`` must sum
    to one within 1e-9 (``InvalidParameterError`` otherwise)."""
    lam = as_finite_array(lam, "lam", ndim=1)
    if lam.size == 0:
        raise InvalidDataError("lam must be nonempty; got an empty vector")
    if abs(float(lam.sum()) - 1.0) > 1e-9:
        raise InvalidParameterError(f"lam must sum to 1 (weights); got sum {float(lam.sum()):.12g}")
    return float(lam.size * (lam @ lam))


def hcvar(f, p, alpha, *, return_weights: bool = False):
    r"""FAFL objective / HCVaR of a loss vector, solver-free (FAFL paper, Lemma 1).

    .. math:: f_\alpha=\max\{\lambda^\top f:\lambda\in\Delta^{n-1},\ \lambda_i\le p_i/\alpha_i\}
             =\inf_\eta\Big\{\eta+\sum_i\frac{p_i}{\alpha_i}(f_i-\eta)_+\Big\}.

    Greedy: sort clients by :math:`f_i` decreasingly, give each :math:`\lambda_i=\min(c_i,
    \text{remaining mass})` with :math:`c_i=\min(1,p_i/\alpha_i)` until the mass reaches 1. The
    value is :math:`\sum_i\lambda_if_i`, and :math:`\eta^\star` (a minimizer of the variational
    form) is the loss of the client at which the mass is exhausted. HCVaR is defined by the
    variational form (2) of the FAFL paper's Lemma 1 (its conditional-expectation form differs
    when losses tie), so ties are handled exactly.

    Parameters
    ----------
    f : 1-D finite array of client losses (any sign).
    p : client proportions, a probability vector of the same length.
    alpha : scalar or vector of levels in (0, 1]. The paper's domain is :math:`[p_i,1]`; levels below
        :math:`p_i` are accepted because the cap :math:`p_i/\alpha_i\ge1` is then vacuous and the
        value equals that at :math:`\alpha_i=p_i`.
    return_weights : also return the maximizing :math:`\lambda`.

    Returns
    -------
    ``(value, eta)`` or ``(value, eta, lam)``.
    """
    f = _vector(f)
    n = f.size
    p = check_probability_vector(p, "p", n=n)
    a = np.asarray(alpha, dtype=float)
    if a.ndim == 0:
        _fraction(float(a), "alpha")
        a = np.full(n, float(a))
    else:
        a = as_finite_array(alpha, "alpha", ndim=1)
        if a.shape[0] != n:
            raise InvalidParameterError(f"alpha must be a scalar or have length {n}; got length {a.shape[0]}")
        if np.any(a <= 0) or np.any(a > 1):
            raise InvalidParameterError(f"alpha entries must lie in (0, 1]; got min {a.min():.6g}, max {a.max():.6g}")
    caps = np.minimum(1.0, p / a)
    order = np.argsort(-f, kind="stable")
    c_sorted = caps[order]
    before = np.concatenate(([0.0], np.cumsum(c_sorted)[:-1]))
    lam_sorted = np.minimum(c_sorted, np.maximum(0.0, 1.0 - before))
    last = int(np.flatnonzero(lam_sorted > 0)[-1])
    eta = float(f[order[last]])
    lam = np.empty(n)
    lam[order] = lam_sorted
    value = float(lam @ f)
    return (value, eta, lam) if return_weights else (value, eta)


def summary_indices(f) -> dict:
    r"""The inequality indices of a nonnegative loss vector, as a dict:

    * ``"relative_max_min"``: :math:`\mathfrak R_{\Delta^{n-1},\Delta^{n-1}}(f)=\max_if_i/\min_if_i`;
    * ``"ratio_20_20"``, ``"palma"``, ``"atkinson_inf"``, ``"gini"`` (see those functions).

    Ratio entries may be ``inf`` (a zero loss). Raises ``InvalidDataError`` for an all-zero ``f``.
    """
    f = _vector(f, nonnegative=True)
    mx, mn = float(f.max()), float(f.min())
    return {
        "relative_max_min": _ratio(mx, mn, "relative_max_min"),
        "ratio_20_20": ratio_20_20(f),
        "palma": palma(f),
        "atkinson_inf": atkinson_inf(f),
        "gini": gini(f),
    }


def distribution_summary(values, frac: float = 0.2, *, higher_is_better: bool = True,
                         integer: bool = True) -> dict:
    r"""Average / worst-fraction / best-fraction / population variance of per-client values, the
    table metrics of the papers (FAFL paper, Tables 2 and 4; Scaff-PD paper, Table 1;
    relative-fairness paper, Table 1). Defaults suit accuracies (``higher_is_better=True``) with the
    integer convention :math:`k=\max(1,\lfloor\text{frac}\cdot n\rfloor)`; the average is the
    unweighted mean over clients and the variance is the population variance."""
    v = _vector(values, "values")
    return {
        "average": float(v.mean()),
        "worst": worst_fraction_mean(v, frac, higher_is_better=higher_is_better, integer=integer),
        "best": best_fraction_mean(v, frac, higher_is_better=higher_is_better, integer=integer),
        "variance": float(v.var()),
    }


# ---------------------------------------------------------------------------------------------
# classification: accuracy, DFP / DFN, DEO (fair-VFL paper, Definition 1 and §5)
# ---------------------------------------------------------------------------------------------
def predict_sign(scores) -> np.ndarray:
    r""":math:`\hat y_i=+1` if :math:`z_i\ge0`, else :math:`-1` (**ties, z = 0, go to +1**)."""
    z = _vector(scores, "scores")
    return np.where(z >= 0, 1.0, -1.0)


def _labels(y, name: str, n: int | None = None) -> np.ndarray:
    y = _vector(y, name)
    if n is not None and y.size != n:
        raise InvalidDataError(f"{name} must have length {n}; got {y.size}")
    bad = ~np.isin(y, (-1.0, 1.0))
    if bad.any():
        raise InvalidDataError(f"{name} must contain labels in {{-1, +1}}; found {np.unique(y[bad])[:5].tolist()}")
    return y


def _mask(m, name: str, n: int) -> np.ndarray:
    arr = np.asarray(m)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidDataError(f"{name} must be a 1-D boolean mask of length {n}; got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.all(np.isin(arr, (0, 1))):
            raise InvalidDataError(f"{name} must be a boolean mask (True/False or 0/1)")
        arr = arr.astype(bool)
    return arr


def _pair(y_true, y_pred):
    y_true = _labels(y_true, "y_true")
    y_pred = _labels(y_pred, "y_pred", n=y_true.size)
    return y_true, y_pred


def _groups(in_a, in_b, n: int):
    a = _mask(in_a, "in_a", n)
    b = _mask(in_b, "in_b", n)
    if np.any(a & b):
        raise InvalidDataError("in_a and in_b overlap: a row cannot belong to both protected groups")
    return a, b


def _rate(num_mask: np.ndarray, den_mask: np.ndarray, what: str) -> float:
    d = int(den_mask.sum())
    if d == 0:
        raise InvalidDataError(f"{what} is undefined: no rows in its denominator")
    return float((num_mask & den_mask).sum() / d)


def accuracy(y_true, y_pred) -> float:
    r""":math:`\mathrm{ACC}=\frac1{|\mathcal T|}\sum_i\mathbb 1[\hat y_i=y_i]` (fair-VFL paper, §5);
    labels in {-1, +1}."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(y_true == y_pred))


def group_accuracy(y_true, y_pred, mask) -> float:
    """Accuracy on the rows selected by the boolean ``mask`` (raises if the mask is empty)."""
    y_true, y_pred = _pair(y_true, y_pred)
    m = _mask(mask, "mask", y_true.size)
    return _rate(y_true == y_pred, m, "group_accuracy (mask selects no rows)")


def per_group_accuracy(y_true, y_pred, in_a, in_b) -> tuple[float, float]:
    """``(accuracy on group a, accuracy on group b)`` for disjoint boolean masks."""
    y_true, y_pred = _pair(y_true, y_pred)
    a, b = _groups(in_a, in_b, y_true.size)
    ok = y_true == y_pred
    return _rate(ok, a, "accuracy of group a"), _rate(ok, b, "accuracy of group b")


def per_client_accuracy(ys_true, ys_pred) -> np.ndarray:
    """Vector of per-client accuracies from two sequences of label vectors (one pair per client);
    average them unweighted for the papers' "average accuracy" (Scaff-PD paper, Table 1)."""
    if len(ys_true) != len(ys_pred):
        raise InvalidDataError(f"ys_true and ys_pred must list the same number of clients; "
                               f"got {len(ys_true)} and {len(ys_pred)}")
    if len(ys_true) == 0:
        raise InvalidDataError("ys_true must list at least one client")
    return np.array([accuracy(t, p) for t, p in zip(ys_true, ys_pred)])


def predict_class(scores) -> np.ndarray:
    """Multi-class prediction: the index of the largest score in each row of ``scores``
    (shape ``(N, K)``); ties go to the lowest index (``numpy.argmax``, as scikit-learn)."""
    S = as_finite_array(scores, "scores", ndim=2)
    return np.argmax(S, axis=1).astype(float)


def _class_labels(y, name: str, n: int | None = None) -> np.ndarray:
    y = _vector(y, name)
    if n is not None and y.size != n:
        raise InvalidDataError(f"{name} must have length {n}; got {y.size}")
    bad = (y < 0) | (y != np.round(y))
    if bad.any():
        raise InvalidDataError(f"{name} must contain class indices 0, 1, ...; found {np.unique(y[bad])[:5].tolist()}")
    return y


def class_accuracy(y_true, y_pred) -> float:
    """Fraction of rows whose predicted class index equals the true one (multi-class accuracy)."""
    y_true = _class_labels(y_true, "y_true")
    y_pred = _class_labels(y_pred, "y_pred", n=y_true.size)
    return float(np.mean(y_true == y_pred))


def client_accuracies(federation, theta) -> np.ndarray:
    """Per-client accuracy of the linear model :math:`\\theta` (layout of :mod:`drflmodel.layout`)
    on each client's own rows: the sign of :math:`x^\\top\\theta` for binary classification, the
    largest of the :math:`K` scores :math:`W^\\top x` for ``task="multiclass"``. The papers' "average
    accuracy" is the unweighted mean, "worst-20% accuracy" :func:`worst_fraction_mean` with
    ``higher_is_better=True``."""
    if federation.task == "classification":
        return np.array([accuracy(c.y, predict_sign(c.X @ np.asarray(theta, float))) for c in federation.clients])
    if federation.task != "multiclass":
        raise InvalidParameterError(f"client_accuracies needs a classification federation; got task {federation.task!r}")
    from .layout import ParameterLayout

    W = ParameterLayout(federation.dim, federation.n_classes).matrix(theta)
    return np.array([class_accuracy(c.y, predict_class(c.X @ W)) for c in federation.clients])


def false_positive_rate(y_true, y_pred, mask=None) -> float:
    r""":math:`\mathrm{FPR}=|\{y=-1,\hat y=+1\}|/|\{y=-1\}|` on the rows of ``mask`` (all rows if None)."""
    y_true, y_pred = _pair(y_true, y_pred)
    m = np.ones(y_true.size, bool) if mask is None else _mask(mask, "mask", y_true.size)
    return _rate(y_pred == 1, m & (y_true == -1), "false_positive_rate (no negative rows)")


def false_negative_rate(y_true, y_pred, mask=None) -> float:
    r""":math:`\mathrm{FNR}=|\{y=+1,\hat y=-1\}|/|\{y=+1\}|` on the rows of ``mask`` (all rows if None)."""
    y_true, y_pred = _pair(y_true, y_pred)
    m = np.ones(y_true.size, bool) if mask is None else _mask(mask, "mask", y_true.size)
    return _rate(y_pred == -1, m & (y_true == 1), "false_negative_rate (no positive rows)")


def dfp(y_true, y_pred, in_a, in_b) -> float:
    r""":math:`\mathrm{DFP}=|\mathrm{FPR}_a-\mathrm{FPR}_b|` (fair-VFL paper, §5, defined there in words), with
    :math:`\mathrm{FPR}_s=|\{s_i=s,y_i=-1,\hat y_i=+1\}|/|\{s_i=s,y_i=-1\}|`. Raises
    ``InvalidDataError`` if a group has no negative rows."""
    y_true, y_pred = _pair(y_true, y_pred)
    a, b = _groups(in_a, in_b, y_true.size)
    fp = y_pred == 1
    neg = y_true == -1
    return abs(_rate(fp, a & neg, "FPR of group a (no y = -1 rows in group a)")
               - _rate(fp, b & neg, "FPR of group b (no y = -1 rows in group b)"))


def dfn(y_true, y_pred, in_a, in_b) -> float:
    r""":math:`\mathrm{DFN}=|\mathrm{FNR}_a-\mathrm{FNR}_b|` (fair-VFL paper, §5, defined there in words), with
    :math:`\mathrm{FNR}_s=|\{s_i=s,y_i=+1,\hat y_i=-1\}|/|\{s_i=s,y_i=+1\}|`. This is the
    equal-opportunity (true-positive-rate) gap, i.e. :func:`deo_01`. Raises ``InvalidDataError``
    if a group has no positive rows."""
    y_true, y_pred = _pair(y_true, y_pred)
    a, b = _groups(in_a, in_b, y_true.size)
    fn = y_pred == -1
    pos = y_true == 1
    return abs(_rate(fn, a & pos, "FNR of group a (no y = +1 rows in group a)")
               - _rate(fn, b & pos, "FNR of group b (no y = +1 rows in group b)"))


def deo_01(y_true, y_pred, in_a, in_b) -> float:
    r"""0-1 version of DEO (fair-VFL paper, Definition 1, with the 0-1 loss):

    .. math:: \Big|\frac1{|\mathcal N^a|}\sum_{i\in\mathcal N^a}\mathbb 1[\hat y_i\ne y_i]
              -\frac1{|\mathcal N^b|}\sum_{i\in\mathcal N^b}\mathbb 1[\hat y_i\ne y_i]\Big|
              =|\mathrm{FNR}_a-\mathrm{FNR}_b|=|\mathrm{TPR}_a-\mathrm{TPR}_b|,

    with :math:`\mathcal N^s=\{i: s_i=s,\ y_i=+1\}` (favourable label +1). Equal to
    :func:`dfn`. Raises ``InvalidDataError`` if :math:`\mathcal N^a` or :math:`\mathcal N^b` is empty."""
    y_true, y_pred = _pair(y_true, y_pred)
    a, b = _groups(in_a, in_b, y_true.size)
    err = y_pred != y_true
    pos = y_true == 1
    return abs(_rate(err, a & pos, "deo_01: N_a (group a with y = +1) is empty")
               - _rate(err, b & pos, "deo_01: N_b (group b with y = +1) is empty"))


def deo_surrogate(losses, N_a, N_b, *, signed: bool = False) -> float:
    r"""DEO with a surrogate loss (fair-VFL paper, Definition 1, eq. (2)):

    .. math:: \mathrm{DEO}=|\hat l^a-\hat l^b|,\qquad
              \hat l^s=\frac1{|\mathcal N^s|}\sum_{i\in\mathcal N^s}l_i,

    where ``losses`` are the per-sample losses :math:`l(X_i^\top\theta,y_i)` (no regularizer) and
    ``N_a``, ``N_b`` are boolean masks of :math:`\mathcal N^a,\mathcal N^b` (protected group and
    favourable label; ``VerticalFederation.N_a/.N_b``). ``signed=True`` returns
    :math:`D=\hat l^a-\hat l^b` (eq. (5)). Empty or overlapping masks raise ``InvalidDataError``."""
    l = _vector(losses, "losses")
    a = _mask(N_a, "N_a", l.size)
    b = _mask(N_b, "N_b", l.size)
    if not a.any():
        raise InvalidDataError("N_a is empty: the group-a mean loss is undefined")
    if not b.any():
        raise InvalidDataError("N_b is empty: the group-b mean loss is undefined")
    if np.any(a & b):
        raise InvalidDataError("N_a and N_b overlap: a row cannot belong to both protected groups")
    d = float(l[a].mean() - l[b].mean())
    return d if signed else abs(d)
