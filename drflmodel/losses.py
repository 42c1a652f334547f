"""The loss catalogue: one class per loss, written once and used everywhere.

A loss acts on the **score** :math:`u = x^\\top\\theta` of a linear model through its
*argument* :math:`z`:

* regression: :math:`z = u - y` and the sample loss is :math:`L(z)`;
* classification (:math:`y \\in \\{-1, +1\\}`): :math:`z = y\\,u` and the sample loss is :math:`L(z)`.

The six losses of the DRFL paper (Bai, Wong, Qiao and Ho 2025, §3):

============================  =============================================================
``Huber(eps)``                :math:`z^2/2` if :math:`|z|\\le\\epsilon`, else :math:`\\epsilon(|z|-\\epsilon/2)`
``EpsilonInsensitive(eps)``   :math:`\\max\\{0, |z|-\\epsilon\\}` (SVR)
``Pinball(tau)``              :math:`\\max\\{-\\tau z, (1-\\tau) z\\}` (quantile regression)
``Hinge()``                   :math:`\\max\\{0, 1-z\\}`
``SmoothHinge()``             :math:`1/2 - z` (z <= 0), :math:`(1-z)^2/2` (0 < z < 1), 0 (z >= 1)
``Logistic()``                :math:`\\log(1 + e^{-z})`
============================  =============================================================

plus ``Squared()``, :math:`L(z) = z^2` **without a factor 1/2**: this is the scaling of the
Scaff-PD synthetic experiment (Scaff-PD paper, §C.1,
:math:`f_i=\\frac1{m_i}\\sum_j(\\langle a_i^j,x\\rangle-y_i^j)^2`) and of the relative-fairness
penguins study (relative-fairness paper, §4.3, up to the per-client sum vs mean).

Every loss provides a vectorized numpy value and (sub)derivative in the score, a CVXPY expression
(convex, DCP, to be used as an objective term or in epigraph form ``L(.) <= t``; never in an
equality), Lipschitz and smoothness constants in the score, whether it is quadratic, and its task.

**Score blocks (every K).** A model with :math:`K` outputs has a parameter matrix
:math:`W\\in\\mathbb R^{d\\times K}` and scores :math:`s = W^\\top x\\in\\mathbb R^K`
(:mod:`drflmodel.layout`). Every loss acts on a block of scores of shape ``(..., K)`` through
:meth:`Loss.block_value`, :meth:`Loss.block_gradient`, :meth:`Loss.block_curvature` (the
per-sample :math:`K\\times K` Hessian in the scores), :meth:`Loss.block_hvp` and
:meth:`Loss.block_expr`; the scalar losses above are the case :math:`K=1`, and
:class:`Multinomial` (softmax cross-entropy, labels are class indices
:math:`0,\\dots,K-1`) the case :math:`K\\ge2`. The client objectives
(:class:`~drflmodel.objectives.ClientObjectives`) are written once on these blocks.

``self_concordance`` is the constant :math:`M` of the *generalized self-concordance* of
F. Bach (2010), "Self-concordant analysis for logistic regression", Electronic Journal of
Statistics 4: :math:`|D^3\\ell(s)[u,u,v]|\\le M\\|v\\|_2\\,D^2\\ell(s)[u,u]` for all score
directions :math:`u, v` (``None`` when no such bound holds). It makes the numpy lower bound of
:mod:`drflmodel.problems.minmax.fixed_weight_bound` rigorous where the objective is not strongly convex (an
unpenalized intercept).
"""

from __future__ import annotations

import numpy as np

from ._lazy import LazyModule
from ._validation import check_real

cp = LazyModule("cvxpy")                  # CVXPY and SciPy are imported on first use, not at import
_special = LazyModule("scipy.special")

__all__ = [
    "Loss",
    "Squared",
    "Huber",
    "EpsilonInsensitive",
    "Pinball",
    "Hinge",
    "SmoothHinge",
    "Logistic",
    "Multinomial",
    "get",
    "ALL_LOSSES",
]


class Loss:
    """Base class. Subclasses implement :meth:`phi`, :meth:`dphi` and :meth:`phi_expr`.

    Attributes
    ----------
    task : ``"regression"`` or ``"classification"``.
    lipschitz : Lipschitz constant of :math:`L` (``inf`` if not globally Lipschitz).
    smoothness : Lipschitz constant of :math:`L'` (``inf`` if :math:`L` is not differentiable).
    is_quadratic : whether :math:`L` is a quadratic function of :math:`z`.
    piecewise_linear : whether :math:`L` is a max of affine functions (LP-representable).
    """

    task: str = "regression"
    lipschitz: float = np.inf
    smoothness: float = np.inf
    is_quadratic: bool = False
    piecewise_linear: bool = False
    name: str = "loss"
    #: generalized self-concordance constant M (module docstring); ``None`` if no such bound holds
    self_concordance: float | None = None

    # ---- the scalar function of the argument z -------------------------------------------
    def phi(self, z: np.ndarray) -> np.ndarray:
        """:math:`L(z)`, elementwise."""
        raise NotImplementedError

    def dphi(self, z: np.ndarray) -> np.ndarray:
        """A (sub)derivative :math:`L'(z)`, elementwise (the right derivative at kinks)."""
        raise NotImplementedError

    def ddphi(self, z: np.ndarray) -> np.ndarray:
        """:math:`L''(z)` where it exists; raises ``NotImplementedError`` for non-smooth losses."""
        raise NotImplementedError(f"{self.name} has no second derivative")

    def phi_expr(self, z):
        """CVXPY expression of :math:`L(z)` for an affine expression ``z`` (convex, DCP)."""
        raise NotImplementedError

    # ---- in the score u = x'theta ----------------------------------------------------------
    def argument(self, scores, y):
        """:math:`z = u - y` (regression) or :math:`z = y u` (classification)."""
        if self.task == "regression":
            return scores - y
        return y * scores

    def value(self, scores, y) -> np.ndarray:
        """Sample losses :math:`L(z(u, y))`."""
        return self.phi(self.argument(np.asarray(scores, float), np.asarray(y, float)))

    def derivative(self, scores, y) -> np.ndarray:
        """:math:`\\partial L / \\partial u` (chain rule: :math:`L'(z)` or :math:`y L'(z)`)."""
        scores, y = np.asarray(scores, float), np.asarray(y, float)
        d = self.dphi(self.argument(scores, y))
        return d if self.task == "regression" else y * d

    def second_derivative(self, scores, y) -> np.ndarray:
        """:math:`\\partial^2 L / \\partial u^2 = L''(z)` (since :math:`y^2 = 1`)."""
        return self.ddphi(self.argument(np.asarray(scores, float), np.asarray(y, float)))

    def expr(self, scores, y):
        """CVXPY expression of the sample losses for an affine expression of the scores."""
        y = np.asarray(y, float)
        z = scores - y if self.task == "regression" else cp.multiply(y, scores)
        return self.phi_expr(z)

    # ---- score blocks (..., K); the scalar losses are K = 1 --------------------------------
    def block_value(self, S, y) -> np.ndarray:
        """Sample losses for a score block ``S`` of shape ``(..., 1)``; returns ``(...)``."""
        return self.value(_single_score(S, self), y)

    def block_gradient(self, S, y) -> np.ndarray:
        """:math:`\\nabla_s\\ell`, shape ``(..., 1)``."""
        return self.derivative(_single_score(S, self), y)[..., None]

    def block_curvature(self, S, y) -> np.ndarray:
        """:math:`\\nabla^2_s\\ell`, shape ``(..., 1, 1)`` (smooth losses only)."""
        return self.second_derivative(_single_score(S, self), y)[..., None, None]

    def block_curvature_factors(self, S, y):
        """``(a, b)`` with :math:`\\nabla^2_s\\ell=\\mathrm{diag}(a)-bb^\\top` per sample (shapes
        ``(..., K)``; ``b`` is ``None`` when zero): the Hessian in :math:`O(K)` memory per sample."""
        return self.second_derivative(_single_score(S, self), y)[..., None], None

    def block_hvp(self, S, y, V) -> np.ndarray:
        """:math:`\\nabla^2_s\\ell\\,v` for a block of score directions ``V`` (shape of ``S``)."""
        return self.second_derivative(_single_score(S, self), y)[..., None] * np.asarray(V, float)

    def block_expr(self, S, y):
        """CVXPY expression of the sample losses for an affine ``(N, 1)`` score expression."""
        return self.expr(S[:, 0], y)

    # ---- bookkeeping ---------------------------------------------------------------------
    def params(self) -> dict:
        """The loss's parameters (for ``to_dict`` and configs)."""
        return {}

    def to_dict(self) -> dict:
        return {"name": self.name, "task": self.task, **self.params()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.params() == other.params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.params().items()))))


class Squared(Loss):
    """:math:`L(z) = z^2` (no factor 1/2; see the module docstring). Regression."""

    name = "squared"
    task = "regression"
    lipschitz = np.inf
    smoothness = 2.0
    is_quadratic = True
    self_concordance = 0.0          # a quadratic: its third derivative vanishes

    def phi(self, z):
        return np.square(z)

    def dphi(self, z):
        return 2.0 * np.asarray(z, float)

    def ddphi(self, z):
        return np.full_like(np.asarray(z, float), 2.0)

    def phi_expr(self, z):
        return cp.square(z)


class Huber(Loss):
    """Huber regression (DRFL paper, §3): :math:`z^2/2` if :math:`|z|\\le\\epsilon`,
    :math:`\\epsilon(|z|-\\epsilon/2)` otherwise; :math:`\\epsilon > 0` (the paper's §3 says
    :math:`\\epsilon>0`, its Appendix B.1 :math:`\\epsilon\\ge0`)."""

    name = "huber"
    task = "regression"

    def __init__(self, eps: float = 1.0):
        self.eps = check_real(eps, "eps", low=0.0, low_open=True)
        self.lipschitz = self.eps
        self.smoothness = 1.0

    def params(self):
        return {"eps": self.eps}

    def phi(self, z):
        a = np.abs(z)
        return np.where(a <= self.eps, 0.5 * np.square(z), self.eps * (a - 0.5 * self.eps))

    def dphi(self, z):
        return np.clip(np.asarray(z, float), -self.eps, self.eps)

    def ddphi(self, z):
        return (np.abs(z) < self.eps).astype(float)

    def phi_expr(self, z):
        # cp.huber(u, M) = u^2 (|u| <= M), 2M|u| - M^2 otherwise; hence the factor 1/2.
        return 0.5 * cp.huber(z, M=self.eps)


class EpsilonInsensitive(Loss):
    """Support vector regression loss :math:`\\max\\{0, |z| - \\epsilon\\}`, :math:`\\epsilon\\ge 0`."""

    name = "epsilon_insensitive"
    task = "regression"
    lipschitz = 1.0
    piecewise_linear = True

    def __init__(self, eps: float = 0.1):
        self.eps = check_real(eps, "eps", low=0.0)

    def params(self):
        return {"eps": self.eps}

    def phi(self, z):
        return np.maximum(0.0, np.abs(z) - self.eps)

    def dphi(self, z):
        z = np.asarray(z, float)
        # right derivative at the kinks (+1 at z = eps, 0 at z = -eps), as the base class documents
        return np.where(z >= self.eps, 1.0, np.where(z < -self.eps, -1.0, 0.0))

    def phi_expr(self, z):
        return cp.pos(cp.abs(z) - self.eps)

    def pieces(self):
        """Affine pieces :math:`(a_j, b_j)` with :math:`L(z)=\\max_j(a_j z + b_j)`."""
        return [(1.0, -self.eps), (-1.0, -self.eps), (0.0, 0.0)]


class Pinball(Loss):
    """Quantile (pinball) loss :math:`\\max\\{-\\tau z, (1-\\tau) z\\}`, :math:`\\tau\\in[0,1]`,
    with :math:`z = u - y` (the DRFL paper calls the level :math:`\\epsilon`)."""

    name = "pinball"
    task = "regression"
    piecewise_linear = True

    def __init__(self, tau: float = 0.5):
        self.tau = check_real(tau, "tau", low=0.0, high=1.0)
        self.lipschitz = max(self.tau, 1.0 - self.tau)

    def params(self):
        return {"tau": self.tau}

    def phi(self, z):
        return np.maximum(-self.tau * np.asarray(z, float), (1.0 - self.tau) * np.asarray(z, float))

    def dphi(self, z):
        return np.where(np.asarray(z, float) >= 0, 1.0 - self.tau, -self.tau)

    def phi_expr(self, z):
        return cp.maximum(-self.tau * z, (1.0 - self.tau) * z)

    def pieces(self):
        return [(-self.tau, 0.0), (1.0 - self.tau, 0.0)]


class Hinge(Loss):
    """SVM hinge loss :math:`\\max\\{0, 1 - z\\}` with :math:`z = y u`."""

    name = "hinge"
    task = "classification"
    lipschitz = 1.0
    piecewise_linear = True

    def phi(self, z):
        return np.maximum(0.0, 1.0 - np.asarray(z, float))

    def dphi(self, z):
        return np.where(np.asarray(z, float) < 1.0, -1.0, 0.0)

    def phi_expr(self, z):
        return cp.pos(1 - z)

    def pieces(self):
        return [(-1.0, 1.0), (0.0, 0.0)]


class SmoothHinge(Loss):
    """Smooth hinge: :math:`1/2 - z` (z <= 0), :math:`(1-z)^2/2` (0 < z < 1), 0 otherwise."""

    name = "smooth_hinge"
    task = "classification"
    lipschitz = 1.0
    smoothness = 1.0

    def phi(self, z):
        z = np.asarray(z, float)
        return np.where(z <= 0, 0.5 - z, np.where(z < 1, 0.5 * np.square(1 - z), 0.0))

    def dphi(self, z):
        z = np.asarray(z, float)
        return np.where(z <= 0, -1.0, np.where(z < 1, z - 1.0, 0.0))

    def ddphi(self, z):
        z = np.asarray(z, float)
        return ((z > 0) & (z < 1)).astype(float)

    def phi_expr(self, z):
        return 0.5 * cp.huber(cp.pos(1 - z), 1)


class Logistic(Loss):
    """Logistic loss :math:`\\log(1 + e^{-z})` with :math:`z = y u`."""

    name = "logistic"
    task = "classification"
    lipschitz = 1.0
    smoothness = 0.25
    #: :math:`|L^{(3)}(z)|=L^{(2)}(z)\,|1-2\sigma(z)|\le L^{(2)}(z)` (Bach 2010, Lemma 1)
    self_concordance = 1.0

    def phi(self, z):
        return np.logaddexp(0.0, -np.asarray(z, float))

    def dphi(self, z):
        return -_special.expit(-np.asarray(z, float))

    def ddphi(self, z):
        s = _special.expit(np.asarray(z, float))
        return s * (1.0 - s)

    def phi_expr(self, z):
        return cp.logistic(-z)


class Multinomial(Loss):
    r"""Softmax cross-entropy (multinomial logistic loss) over :math:`K\ge2` classes:

    .. math::

        \ell(s, y) = \log\sum_{k=1}^K e^{s_k} - s_y ,\qquad s = W^\top x\in\mathbb R^K,

    with the label :math:`y\in\{0,\dots,K-1\}` a **class index** (the data helpers map any labels
    to indices and keep the originals as ``federation.classes``, like scikit-learn's ``classes_``).
    :math:`\nabla_s\ell=p-e_y` and :math:`\nabla^2_s\ell=\mathrm{diag}(p)-pp^\top` with
    :math:`p=\mathrm{softmax}(s)`.

    Constants in the score vector: Lipschitz :math:`\|p-e_y\|_2\le\sqrt2`; smoothness
    :math:`\lambda_{\max}(\mathrm{diag}(p)-pp^\top)\le\frac12` (D. Böhning 1992, "Multinomial
    logistic regression algorithm", Annals of the Institute of Statistical Mathematics 44);
    generalized self-concordance :math:`M=\sqrt2`: :math:`D^3\ell[u,u,v]=\mathbb E_p[(u-\bar u)^2
    (v-\bar v)]` (a third cumulant of the scores), so :math:`|D^3\ell[u,u,v]|\le(\max_kv_k-
    \min_kv_k)\,D^2\ell[u,u]\le\sqrt2\|v\|_2\,D^2\ell[u,u]`.

    With :math:`K=2` it is the binary :class:`Logistic` loss of the score difference,
    :math:`\ell(s,y)=\log(1+e^{-\tilde y(s_1-s_0)})` with :math:`\tilde y=2y-1`. The loss is
    invariant to a common shift of the scores, so the parameter is identified only up to a common
    shift of the class columns in every unpenalized coordinate
    (:meth:`drflmodel.layout.ParameterLayout.identifiable`).
    """

    name = "multinomial"
    task = "multiclass"
    lipschitz = float(np.sqrt(2.0))
    smoothness = 0.5
    self_concordance = float(np.sqrt(2.0))

    # the scalar protocol does not apply: a softmax needs the whole score vector
    def phi(self, z):
        raise NotImplementedError("Multinomial acts on score blocks (N, K): use block_value")

    def value(self, scores, y) -> np.ndarray:
        return self.block_value(scores, y)

    def derivative(self, scores, y) -> np.ndarray:
        return self.block_gradient(scores, y)

    def second_derivative(self, scores, y) -> np.ndarray:
        return self.block_curvature(scores, y)

    def expr(self, scores, y):
        return self.block_expr(scores, y)

    @staticmethod
    def probabilities(S) -> np.ndarray:
        """:math:`\\mathrm{softmax}(s)` along the last axis (stable)."""
        S = np.asarray(S, float)
        E = np.exp(S - S.max(axis=-1, keepdims=True))
        return E / E.sum(axis=-1, keepdims=True)

    @staticmethod
    def _index(y) -> np.ndarray:
        return np.asarray(y).astype(np.intp)[..., None]

    def block_value(self, S, y) -> np.ndarray:
        S = np.asarray(S, float)
        top = S.max(axis=-1, keepdims=True)          # log-sum-exp shifted by the maximum, as scipy's
        lse = np.log(np.exp(S - top).sum(axis=-1)) + top[..., 0]     # (without its array-API overhead)
        return lse - np.take_along_axis(S, self._index(y), axis=-1)[..., 0]

    def block_gradient(self, S, y) -> np.ndarray:
        G = self.probabilities(S)
        idx = self._index(y)
        np.put_along_axis(G, idx, np.take_along_axis(G, idx, axis=-1) - 1.0, axis=-1)
        return G

    def block_curvature(self, S, y) -> np.ndarray:
        P = self.probabilities(S)
        C = -P[..., :, None] * P[..., None, :]
        k = np.arange(P.shape[-1])
        C[..., k, k] += P
        return C

    def block_curvature_factors(self, S, y):
        P = self.probabilities(S)
        return P, P

    def block_hvp(self, S, y, V) -> np.ndarray:
        P = self.probabilities(S)
        V = np.asarray(V, float)
        return P * (V - np.sum(P * V, axis=-1, keepdims=True))

    def block_expr(self, S, y):
        y = np.asarray(y).astype(np.intp)
        onehot = np.zeros((y.size, S.shape[1]))
        onehot[np.arange(y.size), y] = 1.0
        return cp.log_sum_exp(S, axis=1) - cp.sum(cp.multiply(onehot, S), axis=1)


def _single_score(S, loss) -> np.ndarray:
    """The scores of a ``(..., 1)`` block as ``(...)`` (scalar losses have one output)."""
    S = np.asarray(S, float)
    if S.shape[-1:] != (1,):
        raise ValueError(f"{loss!r} has one score per sample; got a score block of shape {S.shape}")
    return S[..., 0]


ALL_LOSSES = {
    "squared": Squared,
    "huber": Huber,
    "epsilon_insensitive": EpsilonInsensitive,
    "pinball": Pinball,
    "hinge": Hinge,
    "smooth_hinge": SmoothHinge,
    "logistic": Logistic,
    "multinomial": Multinomial,
}


def get(name: str, **params) -> Loss:
    """Build a loss from its name (as in configs), e.g. ``get("huber", eps=0.5)``."""
    from .errors import InvalidParameterError

    if name not in ALL_LOSSES:
        raise InvalidParameterError(f"loss must be one of {sorted(ALL_LOSSES)}; got {name!r}")
    return ALL_LOSSES[name](**params)
