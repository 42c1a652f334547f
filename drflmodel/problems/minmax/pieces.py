r"""Piecewise-linear losses as data: their affine pieces, kinks, Moreau envelope, and the exact
Lagrangian lower bound of a weighted objective built from per-sample piece multipliers.

A piecewise-linear loss of the catalogue (hinge, pinball, :math:`\varepsilon`-insensitive) is
:math:`L(z)=\max_k(a_kz+b_k)` in its argument :math:`z` (:mod:`drflmodel.losses`), and the argument
is affine in the score :math:`u=x^\top\theta`: :math:`z=s\,u+r` with :math:`(s,r)=(y,0)` in
classification and :math:`(1,-y)` in regression. Hence, for per-sample weights
:math:`\mu_{j\cdot}` in the simplex over the pieces,

.. math::

    L(z_j)\ \ge\ \sum_k\mu_{jk}(a_kz_j+b_k)=\bar a_j s_j\,x_j^\top\theta+\bar a_jr_j+\bar b_j ,
    \qquad \bar a_j=\textstyle\sum_k\mu_{jk}a_k,\ \bar b_j=\sum_k\mu_{jk}b_k ,

with equality when :math:`\mu_{j\cdot}` sits on pieces active at :math:`z_j`.

**The Lagrangian bound.** With client objectives
:math:`f_i=\frac1{N_i}\sum_jL(z_{ij})+\frac12\sum_pd_p\theta_p^2` (:math:`d` the penalty diagonal
:math:`\ell_2\omega`), weights :math:`\lambda\in\Lambda` and any such :math:`\mu`, weak min-max
duality gives

.. math::

    \min_\theta\max_{\lambda'\in\Lambda}\lambda'^\top f(\theta)-\psi(\lambda')
    \ \ge\ \min_\theta\ C+G^\top\theta+\tfrac S2\textstyle\sum_pd_p\theta_p^2-\psi(\lambda)
    \ =\ C-\sum_p\frac{G_p^2}{2Sd_p}-\psi(\lambda),

:math:`C=\sum_i\frac{\lambda_i}{N_i}\sum_j(\bar a_jr_j+\bar b_j)`, :math:`G=\sum_i\frac{\lambda_i}{N_i}
\sum_j\bar a_js_jx_j`, :math:`S=\sum_i\lambda_i`, valid when every :math:`d_p>0`.
:func:`piecewise_dual_bound` evaluates it in numpy for any multipliers, whatever produced them,
lowered by a floating-point allowance; at optimal multipliers it is the optimal value (it is the
Lagrangian dual of the epigraph form).

**The Moreau envelope** :math:`L_\mu(z)=\min_vL(v)+\frac{(z-v)^2}{2\mu}` (:class:`MoreauEnvelope`) is
a smooth minorant, :math:`L-\frac\mu2\max_ka_k^2\le L_\mu\le L`, quadratic with curvature
:math:`1/\mu` on the band :math:`z\in[c_k+\mu a_k,\ c_k+\mu a_{k+1}]` of each kink :math:`c_k` and
affine (slope :math:`a_k`, value :math:`a_kz+b_k-\frac\mu2a_k^2`) between the bands.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import _float64_products as fp

from ...errors import InvalidParameterError
from ...losses import Loss

__all__ = ["Pieces", "MoreauEnvelope", "SampleTable", "piecewise_dual_bound"]

_EPS = np.finfo(float).eps


@dataclass(frozen=True)
class Pieces:
    """The affine pieces of a convex piecewise-linear loss that are active somewhere, by
    increasing slope: :math:`L(z)=\\max_k(a_kz+b_k)`, piece :math:`k` active on
    :math:`[c_{k-1},c_k]` (``kinks`` :math:`c`, one fewer than the pieces)."""

    slopes: np.ndarray
    intercepts: np.ndarray
    kinks: np.ndarray

    @classmethod
    def of(cls, loss: Loss) -> "Pieces":
        """The pieces of ``loss`` (its ``pieces()``, reduced to the upper envelope)."""
        if not getattr(loss, "piecewise_linear", False):
            raise InvalidParameterError(f"the loss {loss!r} is not piecewise linear")
        lines = sorted(set((float(a), float(b)) for a, b in loss.pieces()))
        hull: list[tuple[float, float]] = []
        for a, b in lines:                          # increasing slope: upper envelope of lines
            if hull and hull[-1][0] == a:           # same slope: the larger intercept wins
                hull.pop()
            while len(hull) >= 2:
                (a1, b1), (a2, b2) = hull[-2], hull[-1]
                # the middle line is never strictly on top if its crossing with the new line is
                # left of (or at) its crossing with the previous one
                if (b2 - b) * (a2 - a1) <= (b1 - b2) * (a - a2):
                    hull.pop()
                else:
                    break
            hull.append((a, b))
        a = np.array([h[0] for h in hull])
        b = np.array([h[1] for h in hull])
        kinks = (b[:-1] - b[1:]) / (a[1:] - a[:-1])
        return cls(a, b, kinks)

    @property
    def count(self) -> int:
        return self.slopes.size

    def active(self, z: np.ndarray) -> np.ndarray:
        """The index of the piece active at each ``z`` (the right one at a kink)."""
        return np.searchsorted(self.kinks, z, side="right")

    def values(self, z: np.ndarray) -> np.ndarray:
        """Every piece at every ``z``: shape ``(pieces, len(z))``."""
        return self.slopes[:, None] * z[None, :] + self.intercepts[:, None]

    def kink_distance(self, z: np.ndarray) -> np.ndarray:
        """:math:`\\min_k|z-c_k|` (``inf`` for a single piece)."""
        if self.kinks.size == 0:
            return np.full(z.shape, np.inf)
        return np.min(np.abs(z[..., None] - self.kinks), axis=-1)


class MoreauEnvelope(Loss):
    """The Moreau envelope :math:`L_\\mu` of a piecewise-linear loss (module docstring): a smooth
    loss (``smoothness`` :math:`1/\\mu`) with the task and Lipschitz constant of ``loss``.

    Its derivative is :math:`L_\\mu'(z)=a_0+\\sum_k\\mathrm{clip}((z-c_k)/\\mu-a_k,\\ 0,\\ a_{k+1}-a_k)`
    (the bands do not overlap), the proximal point :math:`v=z-\\mu L_\\mu'(z)` and the value
    :math:`L(v)+\\frac\\mu2L_\\mu'(z)^2`."""

    piecewise_linear = False
    self_concordance = None

    def __init__(self, loss: Loss, mu: float):
        self.base = loss
        self.base_pieces = Pieces.of(loss)
        self.mu = float(mu)
        self.task = loss.task
        self.lipschitz = loss.lipschitz
        self.smoothness = 1.0 / self.mu
        self.name = f"moreau({loss.name})"

    def params(self):
        return {"loss": self.base.to_dict(), "mu": self.mu}

    def dphi(self, z):
        z = np.asarray(z, float)
        a, c = self.base_pieces.slopes, self.base_pieces.kinks
        out = np.full(z.shape, a[0])
        for k in range(c.size):
            out += np.clip((z - c[k]) / self.mu - a[k], 0.0, a[k + 1] - a[k])
        return out

    def phi(self, z):
        z = np.asarray(z, float)
        slope = self.dphi(z)
        return self.base.phi(z - self.mu * slope) + 0.5 * self.mu * slope * slope

    def ddphi(self, z):
        z = np.asarray(z, float)
        a, c = self.base_pieces.slopes, self.base_pieces.kinks
        inside = np.zeros(z.shape, bool)
        for k in range(c.size):
            inside |= (z > c[k] + self.mu * a[k]) & (z < c[k] + self.mu * a[k + 1])
        return inside / self.mu


class SampleTable:
    """The rows of a :class:`~drflmodel.objectives.ClientObjectives` as flat arrays, for
    per-sample piece bookkeeping: row :math:`j` of the stacked ``(n * m_max, d)`` view, its client,
    weight :math:`1/N_i` (0 on padding), and the affine map :math:`z=s\\,u+r` from score to argument."""

    def __init__(self, objectives):
        rows = objectives.stacked_as_stored        # float32 features stay float32 (products in float64)
        n, m, d = rows.X.shape
        self.objectives = objectives
        self._stacked_X = rows.X
        self.shape = (n, m)
        self.X = rows.X.reshape(n * m, d)
        self.valid = rows.mask.reshape(-1) > 0
        self.weight = (rows.mask / rows.sizes[:, None]).reshape(-1)
        self.client = np.repeat(np.arange(n), m)
        y = rows.y.reshape(-1)
        if objectives.loss.task == "classification":
            self.sign, self.offset = y, np.zeros_like(y)
        else:
            self.sign, self.offset = np.ones_like(y), -y
        self.rows = int(self.valid.sum())

    def arguments(self, theta) -> np.ndarray:
        """:math:`z_j=s_j\\,x_j^\\top\\theta+r_j` for every row (padding included)."""
        return self.sign * fp.times(self.X, np.asarray(theta, float)) + self.offset

    def client_sums(self, per_row: np.ndarray) -> np.ndarray:
        """:math:`\\sum_{j\\in i}v_j` per client (``per_row`` zero on padding), shape ``(n,)``."""
        return per_row.reshape(self.shape).sum(axis=1)

    def client_gradients(self, per_row: np.ndarray, absolute: bool = False) -> np.ndarray:
        """:math:`\\sum_{j\\in i}v_jx_j` per client, shape ``(n, d)`` (one batched product);
        ``absolute``: :math:`\\sum_{j\\in i}v_j|x_j|` instead (for error bounds)."""
        n, m = self.shape
        Xs = np.abs(self._stacked_X) if absolute else self._stacked_X
        if Xs.dtype != np.float64:                 # float32 rows: client by client, in float64
            return np.stack([fp.t_times(Xi, vi) for Xi, vi in zip(Xs, per_row.reshape(n, m))])
        return np.matmul(per_row.reshape(n, 1, m), Xs).reshape(n, Xs.shape[2])


def piecewise_dual_bound(table: SampleTable, weight_set, lam: np.ndarray, slope: np.ndarray,
                         intercept: np.ndarray) -> dict:
    r"""The module docstring's Lagrangian bound for weights ``lam`` (a point of the weight set) and
    per-row mixed pieces :math:`(\bar a_j,\bar b_j)` = (``slope``, ``intercept``), each a convex
    combination of the loss's pieces (the caller's responsibility).

    The rows are summed into one affine minorant per client, :math:`a_i+g_i^\top\theta\le` the data
    term of :math:`f_i`, and the bound over :math:`\theta` is the cutting-plane bound of
    :func:`drflmodel.problems.minmax.level_bundle.lagrangian_bound` with one cut per client (the same formula:
    one source for it). The row sums add a floating-point allowance: :math:`\gamma_N=N\varepsilon/
    (1-N\varepsilon)` times the magnitudes of the sums (the textbook error bound of a sum of
    :math:`N` terms in any order), carried through the quadratic term.

    Returns ``{"bound", "value", "theta", "allowance"}``: the certified bound on the min-max value
    (after :math:`\psi(\lambda)` and the allowance), the certified fixed-weight minimum (the bound
    plus :math:`\psi`), the minimizer :math:`\theta=-G/(Sd)` of the minorant and the row sums'
    allowance. Every :math:`d_p` must be positive (along an unpenalized coordinate the minorant is
    unbounded below: ``-inf``)."""
    from .level_bundle import lagrangian_bound

    d_pen = table.objectives.penalty_diagonal
    lam = np.asarray(lam, float)
    psi = float(weight_set.psi(lam))
    if np.any(d_pen <= 0):
        return {"bound": float("-inf"), "value": float("-inf"), "theta": None, "allowance": 0.0}
    coef = table.weight * slope * table.sign                         # on x_j
    const = table.weight * (slope * table.offset + intercept)
    a, g = table.client_sums(const), table.client_gradients(coef)    # one cut per client
    bound, lam = lagrangian_bound(weight_set, a[:, None], g[:, None, :], lam[:, None], d_pen)
    S = float(lam.sum())
    if S <= 0:
        return {"bound": bound, "value": bound + psi, "theta": np.zeros(g.shape[1]), "allowance": 0.0}
    gamma = max(table.rows, 2) * _EPS / (1.0 - max(table.rows, 2) * _EPS)
    G = lam @ g
    G_err = gamma * (lam @ table.client_gradients(np.abs(coef), absolute=True))    # |fl(G) - G|
    quad_err = float(np.sum(((np.abs(G) + G_err) ** 2 - G * G) / (2.0 * S * d_pen)))
    allowance = gamma * float(lam @ table.client_sums(np.abs(const))) + quad_err
    return {"bound": bound - allowance, "value": bound - allowance + psi, "theta": -G / (S * d_pen),
            "allowance": allowance}
