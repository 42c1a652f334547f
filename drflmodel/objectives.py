"""Client objectives :math:`f_i(\\theta) = \\frac1{N_i}\\sum_{j} L(z_{ij}) + \\frac{\\ell_2}{2}\\|\\theta\\|^2`,
vectorized across clients (DESIGN.md §4.5).

One object, :class:`ClientObjectives`, evaluates every client's value, gradient and Hessian at a
shared :math:`\\theta` (shape ``(d,)``) or at per-client iterates (shape ``(n, d)``, as in local
steps), using the zero-padded stacked arrays of :class:`~drflmodel.data.Federation`. Each client's
row of the result reads only that client's data. The same object gives the CVXPY expressions of
the oracles, so the numpy and CVXPY sides share one definition.
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp

from ._validation import check_int, check_real
from .data import Federation
from .errors import InvalidDataError, InvalidParameterError
from .losses import Loss

__all__ = ["ClientObjectives", "check_loss_matches", "minibatch_indices", "squared_loss_factors"]


def minibatch_indices(rng: np.random.Generator, size: int, batch_size: int) -> np.ndarray:
    """The one minibatch rule of drflmodel: ``batch_size`` row indices of a client with ``size``
    rows, drawn uniformly **with replacement** by ``rng.integers(0, size, batch_size)``.

    Every minibatch gradient (the vectorized simulator, :class:`~drflmodel.problems._base.ClientView`,
    a Flower client) draws through this function from the client's own generator, so the same
    generator gives the same rows on every engine.
    """
    return rng.integers(0, size, size=batch_size)


def squared_loss_factors(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    r"""``(R, Q^T y, ||y - Q Q^T y||^2)`` of the thin QR factorization :math:`X=QR` (numpy/LAPACK),
    so that :math:`\|X\theta-y\|^2=\|R\theta-Q^\top y\|^2+\|y-QQ^\top y\|^2` for every
    :math:`\theta`. The residual is computed from the projection itself (not as
    :math:`\|y\|^2-\|Q^\top y\|^2`, which cancels)."""
    Q, R = np.linalg.qr(np.asarray(X, float), mode="reduced")
    qty = Q.T @ y
    return R, qty, float(np.sum(np.square(y - Q @ qty)))


def check_loss_matches(federation: Federation, loss: Loss) -> None:
    """Raise :class:`InvalidParameterError` if the loss's task differs from the data's task."""
    if not isinstance(loss, Loss):
        raise InvalidParameterError(f"loss must be a drflmodel.losses.Loss; got {type(loss).__name__}")
    if loss.task != federation.task:
        raise InvalidParameterError(
            f"loss {loss!r} is a {loss.task} loss but the federation's task is {federation.task!r}")


class ClientObjectives:
    """All clients' objectives :math:`f_i`, vectorized.

    Parameters
    ----------
    federation : :class:`~drflmodel.data.Federation`.
    loss : :class:`~drflmodel.losses.Loss` whose task matches the federation.
    l2 : ridge weight :math:`\\ell_2 \\ge 0` in :math:`\\frac{\\ell_2}{2}\\|\\theta\\|^2`.
    """

    def __init__(self, federation: Federation, loss: Loss, l2: float = 0.0):
        check_loss_matches(federation, loss)
        self.federation = federation
        self.loss = loss
        self.l2 = check_real(l2, "l2", low=0.0)
        st = federation.stacked
        self._X, self._y, self._mask = st.X, st.y, st.mask
        self._sizes = st.sizes.astype(float)

    @property
    def n(self) -> int:
        return self.federation.n_clients

    @property
    def dim(self) -> int:
        return self.federation.dim

    # ------------------------------------------------------------------ helpers
    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.shape == (self.dim,):
            return theta
        if theta.shape == (self.n, self.dim):
            return theta
        raise InvalidDataError(
            f"theta must have shape ({self.dim},) or ({self.n}, {self.dim}); got {theta.shape}")

    def scores(self, theta) -> np.ndarray:
        """Scores :math:`u_{ij} = x_{ij}^\\top\\theta_i`, shape ``(n, m_max)`` (zero on padding)."""
        theta = self._theta(theta)
        if theta.ndim == 1:
            return self._X @ theta
        return np.matmul(self._X, theta[:, :, None])[:, :, 0]

    def _mean(self, per_sample: np.ndarray) -> np.ndarray:
        return (self._mask * per_sample).sum(axis=1) / self._sizes

    # ------------------------------------------------------------------ numpy
    def values(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta_1), \\dots, f_n(\\theta_n))`; ``theta`` shared ``(d,)`` or per client ``(n, d)``."""
        theta = self._theta(theta)
        data = self._mean(self.loss.value(self.scores(theta), self._y))
        reg = 0.5 * self.l2 * (np.sum(theta**2, axis=-1) if theta.ndim == 2 else theta @ theta)
        return data + reg

    def gradients(self, theta) -> np.ndarray:
        """Row *i* is :math:`\\nabla f_i(\\theta_i)`, shape ``(n, d)``."""
        theta = self._theta(theta)
        w = self._mask * self.loss.derivative(self.scores(theta), self._y) / self._sizes[:, None]
        grads = np.matmul(w[:, None, :], self._X)[:, 0, :]     # BLAS batched (10x einsum's speed)
        return grads + self.l2 * (theta if theta.ndim == 2 else theta[None, :])

    def hessians(self, theta) -> np.ndarray:
        """Row *i* is :math:`\\nabla^2 f_i(\\theta_i)`, shape ``(n, d, d)`` (smooth losses only)."""
        theta = self._theta(theta)
        w = self._mask * self.loss.second_derivative(self.scores(theta), self._y) / self._sizes[:, None]
        H = np.einsum("im,imd,ime->ide", w, self._X, self._X)
        return H + self.l2 * np.eye(self.dim)[None]

    def minibatch_gradients(self, theta, batch_size: int, rng) -> np.ndarray:
        """Unbiased minibatch gradients: client *i* samples ``batch_size`` of its own rows
        uniformly with replacement (:func:`minibatch_indices`). Returns shape ``(n, d)``.

        ``rng`` is either a sequence of ``n`` ``numpy.random.Generator`` s -- client *i* draws from
        ``rng[i]``, its own stream, as in a real federation (the solvers pass
        :func:`drflmodel.solvers.client_generators`) -- or one generator (or a seed for
        ``numpy.random.default_rng``) from which clients ``0, ..., n-1`` draw in turn."""
        theta = self._theta(theta)
        batch_size = check_int(batch_size, "batch_size", low=1)
        if isinstance(rng, (list, tuple)):
            if len(rng) != self.n:
                raise InvalidParameterError(
                    f"rng must be one generator or a sequence of {self.n} (one per client); got {len(rng)}")
            gens = rng
        else:
            gens = [np.random.default_rng(rng)] * self.n
        sizes = self._sizes.astype(int)
        idx = np.stack([minibatch_indices(g, int(s), batch_size) for g, s in zip(gens, sizes)])
        rows = np.arange(self.n)[:, None]
        Xb, yb = self._X[rows, idx], self._y[rows, idx]
        u = np.einsum("ibd,id->ib", Xb, theta if theta.ndim == 2 else np.broadcast_to(theta, (self.n, self.dim)))
        w = self.loss.derivative(u, yb) / batch_size
        grads = np.einsum("ib,ibd->id", w, Xb)
        return grads + self.l2 * (theta if theta.ndim == 2 else theta[None, :])

    # ------------------------------------------------------------------ constants
    def smoothness(self) -> np.ndarray:
        """Per-client smoothness :math:`L_i = \\beta_L\\,\\lambda_{\\max}(X_i^\\top X_i/N_i) + \\ell_2`."""
        return self.loss.smoothness * self._gram_extreme_eigs()[:, 1] + self.l2

    def strong_convexity(self) -> np.ndarray:
        """Per-client strong convexity modulus for quadratic losses (:math:`\\ell_2` otherwise)."""
        if self.loss.is_quadratic:
            return self.loss.smoothness * self._gram_extreme_eigs()[:, 0] + self.l2
        return np.full(self.n, self.l2)

    def _gram_extreme_eigs(self) -> np.ndarray:
        G = np.einsum("imd,ime->ide", self._X, self._X) / self._sizes[:, None, None]
        ev = np.linalg.eigvalsh(G)
        return np.stack([np.maximum(ev[:, 0], 0.0), ev[:, -1]], axis=1)

    def quadratic_forms(self):
        """For the squared loss: ``(Q, r, c)`` with :math:`f_i(\\theta)=\\theta^\\top Q_i\\theta - 2r_i^\\top\\theta + c_i`.

        Shapes ``(n, d, d)``, ``(n, d)``, ``(n,)``. Raises for non-quadratic losses.
        """
        if not self.loss.is_quadratic:
            raise InvalidParameterError(f"quadratic_forms needs a quadratic loss; got {self.loss!r}")
        m = self._sizes
        Q = np.einsum("imd,ime->ide", self._X, self._X) / m[:, None, None] + 0.5 * self.l2 * np.eye(self.dim)
        r = np.einsum("imd,im->id", self._X, self._y) / m[:, None]
        c = np.einsum("im,im->i", self._y, self._y) / m
        return Q, r, c

    # ------------------------------------------------------------------ CVXPY
    def expressions(self, theta: cp.Expression) -> list:
        r"""CVXPY expressions of :math:`f_i(\theta)` (convex, DCP), one per client.

        For the squared loss the data term is written through the thin QR factorization
        :math:`X_i=Q_iR_i` (:func:`squared_loss_factors`):
        :math:`\|X_i\theta-y_i\|^2=\|R_i\theta-Q_i^\top y_i\|^2+\|y_i-Q_iQ_i^\top y_i\|^2` (exact:
        :math:`y_i-Q_iQ_i^\top y_i` is orthogonal to the range of :math:`X_i`), one second-order
        cone of dimension :math:`\min(N_i,d)+2` per client instead of :math:`N_i` cones, so the
        conic model's size does not grow with the number of rows."""
        out = []
        for c in self.federation.clients:
            if self.loss.is_quadratic:
                R, qty, residual = squared_loss_factors(c.X, c.y)
                scale = 1.0 / np.sqrt(c.size)            # the cone's data of the size of X's rows
                e = cp.sum_squares((scale * R) @ theta - scale * qty) + residual / c.size
            else:
                e = cp.sum(self.loss.expr(c.X @ theta, c.y)) / c.size
            if self.l2 > 0:
                e = e + 0.5 * self.l2 * cp.sum_squares(theta)
            out.append(e)
        return out
