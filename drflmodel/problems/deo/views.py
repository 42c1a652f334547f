r"""What each participant of the vertical federation may compute (fair-VFL paper, Algorithm 1):
:class:`PartyView` (party *k*: its block :math:`X^k`, :math:`\theta_k`; active parties also the
labels, groups and loss) and :class:`ServerView` (the server: aggregated scores, labels, groups).
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_int
from ...errors import InvalidDataError, InvalidParameterError

__all__ = ["PartyView", "ServerView"]


class PartyView:
    r"""What party *k* of the vertical federation can compute (fair-VFL paper, Definition 2 and Algorithm 1).

    Every party holds its block :math:`X^k` and :math:`\theta_k`: it computes its partial scores
    :math:`p^k = X^k\theta_k` (sent to the server) and, given the server's per-sample message
    :math:`\nu = \partial f/\partial z` (paper (12), generalized to :math:`l_f \ne l`), its block
    gradient :math:`\nabla_k f = (X^k)^\top\nu + \ell_2\theta_k`. **Active** parties also hold the
    labels, the groups and the loss, so they can form :math:`\nu` themselves from the aggregated
    scores :math:`z` and :math:`\lambda` (:meth:`nu`, :meth:`local_gradient`), and take local steps
    on the "inconsistent read" :math:`z + X^k(\theta_k - \theta_k^{(t)})` (:meth:`local_scores`;
    the paper's Algorithm 2 asks an active party for scores it cannot see between messages). Calling a label-dependent method on a passive party raises
    :class:`~drflmodel.errors.InvalidParameterError`.
    """

    def __init__(self, problem: "DEOConstrained", k: int):
        vf = problem.federation
        self.index = check_int(k, "k", 0, vf.n_parties - 1)
        self.is_active = self.index in vf.active
        self.block = vf.block_slices[self.index]
        self._X = vf.blocks[self.index]
        self._problem = problem
        self.l2 = problem.l2

    @property
    def dim(self) -> int:
        return self._X.shape[1]

    @property
    def n_samples(self) -> int:
        return self._X.shape[0]

    def partial_scores(self, theta_k) -> np.ndarray:
        r""":math:`p^k = X^k\theta_k` (what the party sends to the server)."""
        return self._X @ self._block(theta_k)

    def regularizer(self, theta_k) -> float:
        r""":math:`h_k(\theta_k) = \frac{\ell_2}2\|\theta_k\|^2`."""
        t = self._block(theta_k)
        return 0.5 * self.l2 * float(t @ t)

    def block_gradient(self, nu, theta_k) -> np.ndarray:
        r""":math:`\nabla_k f = (X^k)^\top\nu + \ell_2\theta_k` from the server's message :math:`\nu`."""
        nu = np.asarray(nu, float)
        if nu.shape != (self.n_samples,):
            raise InvalidDataError(f"nu must have shape ({self.n_samples},); got {nu.shape}")
        return self._X.T @ nu + self.l2 * self._block(theta_k)

    # ---- active parties only -------------------------------------------------------------
    def _require_active(self, what: str) -> None:
        if not self.is_active:
            raise InvalidParameterError(
                f"party {self.index} is passive: it holds no labels, groups or loss, so it cannot "
                f"compute {what}; use block_gradient(nu, theta_k) with the "
                "server's message nu")

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nu = \partial f/\partial z` at the aggregated scores (paper (12); active only)."""
        self._require_active("nu")
        return self._problem.nu(scores, lam)

    def local_gradient(self, scores, theta_k, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nabla_k f(\theta, \lambda)` from the aggregated scores (paper (9); active only)."""
        self._require_active("local_gradient")
        return self.block_gradient(self._problem.nu(scores, lam), theta_k)

    def local_scores(self, scores, theta_k_new, theta_k_old) -> np.ndarray:
        r""":math:`z + X^k(\theta_k^{\rm new} - \theta_k^{\rm old})` (the inconsistent read)."""
        self._require_active("local_scores")
        return np.asarray(scores, float) + self._X @ (self._block(theta_k_new) - self._block(theta_k_old))

    def loss_value(self, scores) -> float:
        r""":math:`\frac1n\sum_i l(z_i, y_i)` (no regularizer; active only)."""
        self._require_active("loss_value")
        return self._problem.data_loss_from_scores(scores)

    def _block(self, theta_k) -> np.ndarray:
        t = np.asarray(theta_k, float)
        if t.shape != (self.dim,):
            raise InvalidDataError(f"theta_k of party {self.index} must have shape ({self.dim},); got {t.shape}")
        return t

    def __repr__(self) -> str:
        return f"PartyView(k={self.index}, {'active' if self.is_active else 'passive'}, dim={self.dim})"


class ServerView:
    r"""What the (trusted) server computes from the aggregated scores :math:`z` (fair-VFL paper,
    Algorithm 1): it holds :math:`\{y_i, s_i\}` and, in the paper, the loss. It never sees a
    party's block :math:`X^k` or :math:`\theta_k`.

    * :meth:`fairness_gap` -- :math:`D_f(z)`;
    * :meth:`dual_gradient` -- :math:`\nabla_\lambda\tilde f` of (8);
    * :meth:`nu` -- the message :math:`\nu = \partial f/\partial z` of (12) sent to passive parties;
    * :meth:`loss_value` -- :math:`\frac1n\sum_i l(z_i, y_i)` (no regularizer).
    """

    def __init__(self, problem: "DEOConstrained"):
        self._problem = problem
        self.n_samples = problem.n

    @property
    def eps(self) -> float:
        """The current tolerance on :math:`|D_f|` (DEO convention)."""
        return self._problem.eps_deo

    def fairness_gap(self, scores) -> float:
        return self._problem.fairness_gap_from_scores(scores)

    def dual_gradient(self, scores, lam=(0.0, 0.0), c: float = 0.0) -> np.ndarray:
        return self._problem.dual_gradient(scores, lam, c)

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        return self._problem.nu(scores, lam)

    def loss_value(self, scores) -> float:
        return self._problem.data_loss_from_scores(scores)
