"""The loss catalogue: one class per loss, written once and used everywhere (DESIGN.md §4.4).

A loss acts on the **score** :math:`u = x^\\top\\theta` of a linear model through its
*argument* :math:`z`:

* regression: :math:`z = u - y` and the sample loss is :math:`L(z)`;
* classification (:math:`y \\in \\{-1, +1\\}`): :math:`z = y\\,u` and the sample loss is :math:`L(z)`.

The six losses of the DRFL paper are transcribed from spec drfl-admm §1 (paper §3):

============================  =============================================================
``Huber(eps)``                :math:`z^2/2` if :math:`|z|\\le\\epsilon`, else :math:`\\epsilon(|z|-\\epsilon/2)`
``EpsilonInsensitive(eps)``   :math:`\\max\\{0, |z|-\\epsilon\\}` (SVR)
``Pinball(tau)``              :math:`\\max\\{-\\tau z, (1-\\tau) z\\}` (quantile regression)
``Hinge()``                   :math:`\\max\\{0, 1-z\\}`
``SmoothHinge()``             :math:`1/2 - z` (z <= 0), :math:`(1-z)^2/2` (0 < z < 1), 0 (z >= 1)
``Logistic()``                :math:`\\log(1 + e^{-z})`
============================  =============================================================

plus ``Squared()``, :math:`L(z) = z^2` **without a factor 1/2**: this is the scaling of the
Scaff-PD synthetic experiment (spec scaffpd §5, :math:`f_i=\\frac1{m_i}\\sum_j(\\langle a_i^j,x\\rangle-y_i^j)^2`)
and of the relative-fairness penguins study (spec relative-fairness §6, up to the per-client
sum vs mean).

Every loss provides a vectorized numpy value and (sub)derivative in the score, a CVXPY expression
(convex, DCP, to be used as an objective term or in epigraph form ``L(.) <= t``; never in an
equality), Lipschitz and smoothness constants in the score, whether it is quadratic, and its task.
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp
from scipy.special import expit

from ._validation import check_real

__all__ = [
    "Loss",
    "Squared",
    "Huber",
    "EpsilonInsensitive",
    "Pinball",
    "Hinge",
    "SmoothHinge",
    "Logistic",
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

    def phi(self, z):
        return np.square(z)

    def dphi(self, z):
        return 2.0 * np.asarray(z, float)

    def ddphi(self, z):
        return np.full_like(np.asarray(z, float), 2.0)

    def phi_expr(self, z):
        return cp.square(z)


class Huber(Loss):
    """Huber regression (spec drfl-admm §1): :math:`z^2/2` if :math:`|z|\\le\\epsilon`,
    :math:`\\epsilon(|z|-\\epsilon/2)` otherwise; :math:`\\epsilon > 0` (errata item 14)."""

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
    with :math:`z = u - y` (spec drfl-admm §1 calls the level :math:`\\epsilon`)."""

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

    def phi(self, z):
        return np.logaddexp(0.0, -np.asarray(z, float))

    def dphi(self, z):
        return -expit(-np.asarray(z, float))

    def ddphi(self, z):
        s = expit(np.asarray(z, float))
        return s * (1.0 - s)

    def phi_expr(self, z):
        return cp.logistic(-z)


ALL_LOSSES = {
    "squared": Squared,
    "huber": Huber,
    "epsilon_insensitive": EpsilonInsensitive,
    "pinball": Pinball,
    "hinge": Hinge,
    "smooth_hinge": SmoothHinge,
    "logistic": Logistic,
}


def get(name: str, **params) -> Loss:
    """Build a loss from its name (as in configs), e.g. ``get("huber", eps=0.5)``."""
    from .errors import InvalidParameterError

    if name not in ALL_LOSSES:
        raise InvalidParameterError(f"loss must be one of {sorted(ALL_LOSSES)}; got {name!r}")
    return ALL_LOSSES[name](**params)
