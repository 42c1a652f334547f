"""Per-loss Wasserstein constraint sets :math:`\\Omega_s` of the DRFL paper (Proposition 4.2, Appendix B).

For a fixed model :math:`w` and client :math:`s`, Proposition 4.2 gives

.. math::
    \\sup_{W(\\mathbb P_s,\\hat{\\mathbb P}_s)\\le\\rho_s}\\mathbb E^{\\mathbb P_s}[L]
    = \\min_{\\lambda_s\\ge 0}\\ \\rho_s\\lambda_s + \\frac1{N_s}\\sum_i g_i(w,\\lambda_s),\\qquad
    g_i(w,\\lambda) = \\sup_{\\xi\\in\\Xi} L(w;\\xi) - \\lambda\\, d(\\xi,\\hat\\xi_i),

and :math:`(\\lambda_s,\\alpha_s,w)\\in\\Omega_s \\iff g_i(w,\\lambda_s)\\le\\alpha_{si}\\ \\forall i`.
Two exact representations of :math:`g_i\\le\\alpha_i` are implemented (both vectorized over the
samples of any number of clients):

* **Lipschitz form** (unbounded support :math:`\\Xi=\\mathbb R^{n+1}` resp. :math:`\\mathcal X=\\mathbb R^n`;
  Corollaries B.1, B.5, B.6, and B.2–B.4 without support constraints, :math:`r=0`). Every one of the six
  losses is Lipschitz in its argument with constant :math:`\\mathrm{Lip}` equal to its asymptotic
  slope, so :math:`g_i = L(\\hat\\xi_i)` if :math:`\\lambda\\ge\\mathrm{Lip}\\cdot N_*(\\text{direction})`
  and :math:`+\\infty` otherwise. Regression: :math:`N_*(w,-1)=\\max\\{\\|w\\|_*,1/\\kappa\\}` (the
  dual of the transport cost's norm :math:`\\|u\\|+\\kappa|v|`, which the paper leaves undefined;
  :math:`\\kappa=\\infty\\Rightarrow\\|w\\|_*`). Classification: :math:`\\|w\\|_*\\le\\lambda` and
  the label-flip branch :math:`L(-\\hat y\\,u)-\\kappa\\lambda\\le\\alpha` (dropped for :math:`\\kappa=\\infty`). Constraints: ``alpha >= L(sample)``, ``alpha >= L(flipped) - kappa*lam``,
  ``lam >= Lip * N_*``. (The paper's lifted forms with :math:`\\mu` / :math:`\\phi,\\pi` are exactly
  these epigraphs of the loss.) For the logistic loss the identity
  :math:`\\log(1+e^{z})=\\log(1+e^{-z})+z` turns the flip branch into
  :math:`t+\\hat y u-\\kappa\\lambda\\le\\alpha` with one exponential-cone epigraph
  :math:`t\\ge L(\\hat y u)` per sample (half the exponential cones of a direct transcription).
* **Polyhedral form** for the piecewise-linear losses (SVR, pinball, hinge) on
  :math:`\\Xi=\\{C\\xi\\le d\\}` (Corollaries B.2–B.4, Propositions 6.3/6.4, in one general form):
  for every piece :math:`L=\\max_j(a_j z+b_j)` and branch there is :math:`\\phi\\ge0` with
  :math:`a^\\top\\hat\\xi_i+b_j+\\phi^\\top(d-C\\hat\\xi_i)\\le\\alpha_i` and
  :math:`N_*(a-C^\\top\\phi)\\le\\lambda`; constant pieces give :math:`b_j\\le\\alpha_i`.

Here :math:`\\xi=(x,y)\\in\\mathbb R^{n+1}` in regression (so :math:`C=[C_1\\ c_2]`) and
:math:`\\xi=x` in classification. The transport cost is :math:`\\|x-\\hat x\\|+\\kappa|y-\\hat y|`
(regression) or :math:`\\|x-\\hat x\\|+\\kappa\\mathbb 1[y\\ne\\hat y]` (classification) with
feature norm :math:`\\ell_1`, :math:`\\ell_2` or :math:`\\ell_\\infty`.

The numpy side (:func:`worst_case_unbounded`) evaluates the client worst case exactly: for the
Lipschitz form :math:`h(\\lambda)=\\rho\\lambda+\\sum_i c_i\\max\\{L_i,\\tilde L_i-\\kappa\\lambda\\}` is
convex piecewise linear on :math:`[\\lambda_{\\min},\\infty)`, so its minimum is attained at
:math:`\\lambda_{\\min}` or at a breakpoint :math:`(\\tilde L_i-L_i)/\\kappa` (sorting, O(N log N)).
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from scipy.optimize import linprog

from ..._validation import as_finite_array
from ...errors import InvalidDataError, InvalidParameterError, NotConvexError
from ...losses import EpsilonInsensitive, Hinge, Huber, Logistic, Loss, Multinomial, Pinball, SmoothHinge

__all__ = ["SUPPORTED_LOSSES", "Support", "TransportModel", "make_support", "check_norm",
           "dual_exponent", "omega_constraints", "empirical_constraints", "lambda_min",
           "worst_case_unbounded", "min_piecewise", "own_and_flipped"]

#: the six losses of the DRFL paper (§3) and their K-class extension, the softmax loss
#: (:mod:`.multiclass`); Squared is not covered by the paper
SUPPORTED_LOSSES = (Huber, EpsilonInsensitive, Pinball, Hinge, SmoothHinge, Logistic, Multinomial)
_SUPPORTED_NAMES = "Huber, EpsilonInsensitive, Pinball, Hinge, SmoothHinge, Logistic, Multinomial"
_PL_NAMES = "EpsilonInsensitive, Pinball, Hinge"


def check_norm(norm) -> float:
    """The transport feature norm: 1, 2 or inf (also ``"l1"``, ``"l2"``, ``"linf"``/``"inf"``)."""
    aliases = {"l1": 1.0, "l2": 2.0, "linf": np.inf, "inf": np.inf}
    if isinstance(norm, str):
        if norm.lower() in aliases:
            return aliases[norm.lower()]
    elif isinstance(norm, (int, float, np.integer, np.floating)) and not isinstance(norm, bool):
        v = float(norm)                  # numbers only: float(b"1") would also give 1.0
        if v in (1.0, 2.0, np.inf):
            return v
    raise InvalidParameterError(f"norm must be one of 1, 2, inf (the feature norm of the transport "
                                f"cost); got {norm!r}")


def dual_exponent(p: float) -> float:
    """:math:`p_*` with :math:`1/p+1/p_*=1` (``p >= 1``)."""
    if p == 1:
        return np.inf
    if np.isinf(p):
        return 1.0
    return p / (p - 1.0)


@dataclass(frozen=True)
class Support:
    """The support :math:`\\Xi` (regression: of :math:`(x,y)`) or :math:`\\mathcal X` (classification).

    ``kind`` is ``"none"`` (unbounded), ``"box"`` (:math:`[-1,1]^n`), ``"unit_box"``
    (:math:`[0,1]^n`) or ``"polyhedral"``; ``C``/``d`` describe :math:`\\{C\\xi\\le d\\}` in
    :math:`\\xi`-space (``n+1`` columns in regression, the last one for the label).
    """

    kind: str
    C: np.ndarray | None = None
    d: np.ndarray | None = None

    @property
    def bounded(self) -> bool:
        return self.kind != "none"

    def to_dict(self) -> dict:
        out = {"kind": self.kind}
        if self.kind == "polyhedral":
            out.update(C=self.C.tolist(), d=self.d.tolist())
        return out


def make_support(support, task: str, n: int) -> Support:
    """Validate ``support`` (None, ``"box"``, ``"unit_box"`` or ``(C, d)``) and run the Slater check.

    For regression a box constrains the features only (labels stay unbounded); a polyhedral
    ``C`` may have ``n`` columns (features only) or ``n + 1`` (features and label).
    """
    if support is None or (isinstance(support, str) and support.lower() in ("none", "unbounded")):
        return Support("none")
    extra = 1 if task == "regression" else 0
    if isinstance(support, str):
        kind = support.lower()
        if kind not in ("box", "unit_box"):
            raise InvalidParameterError(
                f"support must be None, 'box' ([-1,1]^n), 'unit_box' ([0,1]^n) or a pair (C, d); "
                f"got {support!r}")
        C = np.vstack([np.eye(n), -np.eye(n)])
        d = np.concatenate([np.ones(n), np.ones(n) if kind == "box" else np.zeros(n)])
        if extra:
            C = np.hstack([C, np.zeros((2 * n, 1))])
        return Support(kind, C, d)
    try:
        C, d = support
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "support must be None, 'box', 'unit_box' or a pair (C, d) describing {C xi <= d}; "
            f"got {type(support).__name__}") from None
    C = np.atleast_2d(as_finite_array(C, "support C"))
    d = as_finite_array(d, "support d", ndim=1)
    if C.ndim != 2 or C.shape[0] != d.shape[0]:
        raise InvalidParameterError(f"support C must have shape (r, {n + extra}) matching d of length r; "
                                    f"got C {C.shape}, d {d.shape}")
    if C.shape[1] == n and extra:
        C = np.hstack([C, np.zeros((C.shape[0], 1))])
    if C.shape[1] != n + extra:
        cols = f"{n} (features) or {n + 1} (features and label)" if extra else f"{n}"
        raise InvalidParameterError(f"support C must have {cols} columns; got {C.shape[1]}")
    # Slater check (the supports (14)/(15) of the DRFL paper): maximize t s.t. C xi + t e <= d, t <= 1.
    m = C.shape[1]
    res = linprog(np.r_[np.zeros(m), -1.0], A_ub=np.hstack([C, np.ones((C.shape[0], 1))]), b_ub=d,
                  bounds=[(None, None)] * m + [(None, 1.0)], method="highs")
    if res.status != 0 or -res.fun <= 1e-9:
        slack = "empty" if res.status == 2 else f"max slack {(-res.fun if res.status == 0 else float('nan')):.3g}"
        raise InvalidParameterError(
            f"support {{C xi <= d}} has no Slater point (a point with C xi < d strictly; {slack}); "
            "the reformulation of Corollaries B.2-B.4 needs one")
    return Support("polyhedral", C, d)


@dataclass(frozen=True)
class TransportModel:
    """Loss, transport cost (feature norm, label cost :math:`\\kappa`) and support of one DRFL problem.

    ``n_features`` is :math:`d` (the intercept column included), ``n_outputs`` :math:`K` (1 for the
    scalar-score losses, the number of classes for :class:`~drflmodel.losses.Multinomial`) and
    ``moved`` the feature columns the adversary may move (``None``: every column). With
    ``penalize_intercept=False`` the intercept column is not moved: it is the constant 1 of every
    sample, not a feature, so its coordinate of the transport is fixed (support :math:`\\{x_0=1\\}`)
    and the dual norms of the Lipschitz form read the other columns only (:func:`lambda_min`)."""

    loss: Loss
    norm: float
    kappa: float
    support: Support
    n_features: int = 0
    n_outputs: int = 1
    moved: tuple | None = None

    @property
    def task(self) -> str:
        return self.loss.task

    @property
    def multiclass(self) -> bool:
        return self.task == "multiclass"

    @property
    def dual(self) -> float:
        """Exponent of the dual feature norm :math:`\\|\\cdot\\|_*`."""
        return dual_exponent(self.norm)

    @property
    def flips(self) -> bool:
        """Whether labels may flip (classification with finite :math:`\\kappa`)."""
        return self.task in ("classification", "multiclass") and np.isfinite(self.kappa)

    @property
    def lip(self) -> float:
        """The loss's Lipschitz constant in its argument (= its asymptotic slope); 1 for the softmax
        loss, whose constant in :math:`x` is the pairwise norm :math:`\\Lambda(W)` itself (:mod:`.multiclass`)."""
        return 1.0 if self.multiclass else float(self.loss.lipschitz)

    def moved_columns(self, w):
        """The moved coordinates of a scalar-score model ``w`` (numpy or CVXPY)."""
        return w if self.moved is None else w[np.asarray(self.moved, dtype=int)]

    @staticmethod
    def check_loss(loss) -> None:
        if not isinstance(loss, SUPPORTED_LOSSES):
            raise InvalidParameterError(
                f"loss must be one of the DRFL paper's losses or the softmax loss ({_SUPPORTED_NAMES}); got "
                f"{loss!r}. The squared loss is not Lipschitz, so its Wasserstein worst case is not covered by "
                "Prop. 4.2's reformulation in the paper")

    @staticmethod
    def validate(loss, norm, kappa, support, n, n_outputs: int = 1, moved=None) -> "TransportModel":
        TransportModel.check_loss(loss)
        norm = check_norm(norm)
        task = "classification" if loss.task == "multiclass" else loss.task
        sup = make_support(support, task, n)
        if sup.bounded and not loss.piecewise_linear:
            raise NotConvexError(
                f"{type(loss).__name__} on a bounded support {sup.kind!r}: the inner worst case "
                "sup_xi L - lambda d is the maximization of a convex function over a polytope, "
                "which the DRFL paper does not reformulate. Supported alternatives: "
                f"support=None with {type(loss).__name__}, or a piecewise-linear loss "
                f"({_PL_NAMES}) with a bounded support")
        if sup.bounded and moved is not None:
            raise InvalidParameterError(
                "penalize_intercept=False (an intercept column the transport does not move) is implemented "
                f"on unbounded support only; got support={sup.kind!r}. Use support=None, or "
                "penalize_intercept=True (the intercept column is then an ordinary, transported feature)")
        return TransportModel(loss, norm, float(kappa), sup, int(n), int(n_outputs),
                              None if moved is None else tuple(int(j) for j in moved))

    # ---------------------------------------------------------------- numpy helpers
    def slack(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """:math:`d - C\\hat\\xi_i` per sample (rows), shape ``(N, r)``."""
        S = self.support
        xi = np.hstack([X, y[:, None]]) if self.task == "regression" else X
        return S.d[None, :] - xi @ S.C.T

    def check_samples(self, X: np.ndarray, y: np.ndarray, name: str) -> None:
        """Samples outside the stated support are an error (the reformulation assumes them inside)."""
        if not self.support.bounded:
            return
        sl = self.slack(X, y)
        tol = 1e-9 * (1.0 + np.abs(self.support.d))[None, :]
        bad = np.any(sl < -tol, axis=1)
        if bad.any():
            raise InvalidDataError(
                f"{int(bad.sum())} sample(s) of {name} lie outside the support "
                f"{self.support.kind!r} (first row index {int(np.flatnonzero(bad)[0])}); the "
                "reformulation assumes every training sample lies in the support. "
                "Use support=None or bring the data into the support explicitly")


def _rownorm_le(M, lam_i, dual: float) -> list:
    """Constraints :math:`\\|M_{i,:}\\|_*\\le\\lambda_i` for every row of the affine expression ``M``."""
    N, n = M.shape
    if np.isinf(dual):
        return [cp.abs(M) <= cp.reshape(lam_i, (N, 1), order="C") @ np.ones((1, n))]
    if dual == 1:
        return [cp.sum(cp.abs(M), axis=1) <= lam_i]
    return [cp.norm(M, 2, axis=1) <= lam_i]


def _norm(w, p):
    return cp.norm(w, p) if isinstance(w, cp.Expression) else float(np.linalg.norm(np.asarray(w, float), p))


def lambda_min(model: TransportModel, w, labels=None) -> float:
    """Smallest :math:`\\lambda` with a finite sup on unbounded support (numpy):
    :math:`\\mathrm{Lip}\\cdot N_*(w,-1)` (regression) or :math:`\\mathrm{Lip}\\|w\\|_*` (classification),
    the norms over the moved columns; the pairwise :math:`\\Lambda(W)` for the softmax loss
    (:func:`.multiclass.pairwise_lipschitz`; ``labels``: the labels present, read when
    :math:`\\kappa=\\infty`)."""
    if model.multiclass:
        from .multiclass import pairwise_lipschitz

        return pairwise_lipschitz(model, w, labels)
    dn = float(np.linalg.norm(model.moved_columns(np.asarray(w, float)), model.dual))
    if model.task == "regression" and np.isfinite(model.kappa):
        dn = max(dn, 1.0 / model.kappa)
    return model.lip * dn


def empirical_constraints(model: TransportModel, w, alpha, X, y) -> list:
    """:math:`L(\\hat\\xi_i)\\le\\alpha_i` — the dedicated epigraph for :math:`\\rho_s=0` (the DRFL paper's (17)/(20); its duality
    argument needs :math:`\\rho_s>0`)."""
    if X.shape[0] == 0:
        return []
    if model.multiclass:
        from .multiclass import score_expr

        return [model.loss.block_expr(score_expr(model, X, w), y) <= alpha]
    return [model.loss.expr(X @ w, y) <= alpha]


def omega_constraints(model: TransportModel, w, lam, alpha, X, y, cid, clients) -> list:
    """Constraints :math:`(\\lambda_s,\\alpha_s,w)\\in\\Omega_s` for the samples ``X, y``.

    Parameters
    ----------
    w : CVXPY expression (or numpy vector) of the model, shape ``(P,)`` (:math:`P=Kd`, class-major).
    lam : CVXPY expression (or numpy vector) of the multipliers, indexed by client.
    alpha : CVXPY expression of shape ``(N,)``, one epigraph variable per sample.
    X, y : the samples (rows), ``cid`` their client indices into ``lam``.
    clients : the distinct client indices present (for the per-client norm constraints).
    """
    N = X.shape[0]
    if N == 0:
        return []
    if model.multiclass:
        from .multiclass import omega_constraints_softmax

        return omega_constraints_softmax(model, w, lam, alpha, X, y, cid, clients)
    lam_i = lam[cid]
    extra = []
    if isinstance(w, cp.Expression) and not w.is_constant():
        # the scores enter several constraints (flip branch, pieces): one copy u = X w keeps
        # the dense block X in the KKT system once (measured ~1.5x faster with Clarabel)
        u = cp.Variable(N)
        extra = [u == X @ w]
    else:
        u = X @ np.asarray(w.value if isinstance(w, cp.Expression) else w, float)
    if not model.support.bounded:
        return extra + _lipschitz_form(model, w, u, lam, lam_i, alpha, X, y, clients)
    return extra + _polyhedral_form(model, w, u, lam_i, alpha, X, y)


def _lipschitz_form(model, w, u, lam, lam_i, alpha, X, y, clients) -> list:
    loss = model.loss
    if model.flips and isinstance(loss, Logistic):
        # log(1+e^{z}) = log(1+e^{-z}) + z: the flipped branch is the sample's loss plus the
        # affine term z = y u, so one exponential-cone epigraph t per sample serves both
        # branches: alpha >= t, alpha >= t + y u - kappa lam, t >= L(y u).
        t = cp.Variable(X.shape[0])
        return [loss.expr(u, y) <= t, t <= alpha,
                t + cp.multiply(y, u) - model.kappa * lam_i <= alpha] + _lip_norm(model, w, lam, clients)
    cons = [loss.expr(u, y) <= alpha]
    if model.flips:
        cons.append(loss.expr(u, -y) - model.kappa * lam_i <= alpha)
    return cons + _lip_norm(model, w, lam, clients)


def _lip_norm(model, w, lam, clients) -> list:
    """:math:`\\lambda_s\\ge\\mathrm{Lip}\\cdot N_*` for every listed client (norms over the moved columns)."""
    cons = []
    lam_c = lam[np.asarray(clients)]
    cons.append(model.lip * _norm(model.moved_columns(w), model.dual) <= lam_c)
    if model.task == "regression" and np.isfinite(model.kappa):
        cons.append(lam_c >= model.lip / model.kappa)
    return cons


def _polyhedral_form(model, w, u, lam_i, alpha, X, y) -> list:
    # Sign constraints are written as constraints, not as ``nonneg=True`` variable attributes:
    # CVXPY 1.9 rejects a solver's slightly negative value (-1e-12) for an attributed variable.
    S = model.support
    N, n = X.shape
    slack = model.slack(X, y)                      # (N, r), >= 0 on the support
    r = slack.shape[1]
    C1 = S.C[:, :n]
    c2 = S.C[:, n] if model.task == "regression" else None
    w_row = cp.reshape(w, (1, n), order="C") if isinstance(w, cp.Expression) else np.asarray(w, float)[None, :]
    cons = []
    branches = [1.0, -1.0] if model.flips else [1.0]
    for a, b in model.loss.pieces():
        a, b = float(a), float(b)
        if a == 0.0:
            cons.append(b <= alpha)
            continue
        for f in branches:
            Phi = cp.Variable((N, r))              # explicit sign constraint (see note below)
            cons.append(Phi >= 0)
            if model.task == "regression":
                coef = np.full(N, a)                 # x-part a*w, label part -a
                value = a * (u - y) + b
            else:
                coef = a * f * y                     # z = f*yhat*w'x on the branch
                value = cp.multiply(coef, u) + b
            if f < 0:
                value = value - model.kappa * lam_i
            cons.append(value + cp.sum(cp.multiply(Phi, slack), axis=1) <= alpha)
            M = coef[:, None] @ w_row - Phi @ C1
            cons += _rownorm_le(M, lam_i, model.dual)
            if model.task == "regression" and np.isfinite(model.kappa):
                cons.append(cp.abs(-a - Phi @ c2) <= model.kappa * lam_i)
    return cons


# -------------------------------------------------------------------- numpy worst case
def min_piecewise(rho: float, c: np.ndarray, L: np.ndarray, Lt: np.ndarray, kappa: float,
                  lam_lo: float) -> tuple[float, float]:
    """Exact :math:`\\min_{\\lambda\\ge\\lambda_{lo}}\\ \\rho\\lambda+\\sum_i c_i\\max\\{L_i,\\tilde L_i-\\kappa\\lambda\\}`.

    Convex piecewise linear in :math:`\\lambda` (``c >= 0``, ``rho >= 0``): the minimum is attained
    at ``lam_lo`` or at a breakpoint :math:`\\delta_i/\\kappa`, :math:`\\delta=\\tilde L-L`. Returns
    ``(value, lam_star)``; vectorized (sorting), no loop over samples.
    """
    base = float(c @ L)
    delta = Lt - L
    cand = delta / kappa
    cand = np.concatenate([[lam_lo], cand[cand > lam_lo]])
    order = np.argsort(-delta)
    ds, cs = delta[order], c[order]
    P0 = np.concatenate([[0.0], np.cumsum(cs)])
    P1 = np.concatenate([[0.0], np.cumsum(cs * ds)])
    # number of delta strictly above kappa*lam for each candidate (ds is descending)
    k = np.searchsorted(-ds, -kappa * cand, side="left")
    excess = P1[k] - kappa * cand * P0[k]
    vals = rho * cand + base + excess
    j = int(np.argmin(vals))
    return float(vals[j]), float(cand[j])


def own_and_flipped(model: TransportModel, w, X, y) -> tuple[np.ndarray, np.ndarray | None]:
    """Per sample the loss at its own label :math:`L_i` and the worst relabelled one
    :math:`\\tilde L_i=\\max_{y'\\ne y_i}\\ell(x_i,y')` (``None`` when labels cannot move):
    :math:`L(-y_iu_i)` in binary classification, :math:`\\log\\sum_ke^{s_k}-\\min_{k\\ne y_i}s_k` for
    the softmax loss (:mod:`.multiclass`)."""
    if model.multiclass:
        from .multiclass import softmax_own_and_flipped

        return softmax_own_and_flipped(model, w, X, y)
    u = X @ np.asarray(w, float)
    L = model.loss.value(u, y)
    return L, (model.loss.value(u, -y) if model.flips else None)


def worst_case_unbounded(model: TransportModel, w, X, y, rho: float, weights=None) -> tuple[float, float]:
    """Exact client worst case :math:`\\sup_{W\\le\\rho}\\mathbb E[L]` on unbounded support, and
    the minimizing :math:`\\lambda` (numpy; Prop. 4.2 with the Lipschitz form).

    ``weights`` (default :math:`1/N`) are the sample masses :math:`c_i` (WAFL uses
    :math:`\\hat q_s/N_s`). For ``rho == 0`` the value is the empirical mean and ``lam`` is ``nan``.
    """
    w = np.asarray(w, float)
    c = np.full(X.shape[0], 1.0 / X.shape[0]) if weights is None else np.asarray(weights, float)
    L, Lt = own_and_flipped(model, w, X, y)
    if rho == 0:
        return float(c @ L), float("nan")
    lo = lambda_min(model, w, labels=np.unique(y) if model.multiclass else None)
    if Lt is None:
        return float(rho * lo + c @ L), lo
    return min_piecewise(rho, c, L, Lt, model.kappa, lo)
