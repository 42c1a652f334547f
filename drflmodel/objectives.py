r"""Client objectives, vectorized across clients:

.. math::

    f_i(\theta) = \frac1{N_i}\sum_{j=1}^{N_i}\ell\big(W^\top x_{ij}, y_{ij}\big)
                  + \frac{\ell_2}2\sum_{j=1}^d\omega_j\|W_{j\cdot}\|^2 ,

with :math:`W\in\mathbb R^{d\times K}` the parameter matrix in the layout of
:mod:`drflmodel.layout` (:math:`\theta=\mathrm{vec}` class-major; :math:`K=1` for scalar-score
losses) and :math:`\omega\in\{0,1\}^d` the **penalty weights**: 1 everywhere, except 0 on the
intercept column when a problem is built with ``penalize_intercept=False`` (scikit-learn's
convention: the intercept is not regularized). "Intercept unpenalized" is therefore data, not a
branch: every formula below reads :math:`\omega`.

One object, :class:`ClientObjectives`, evaluates every client's value, gradient and Hessian at a
shared :math:`\theta` (shape ``(P,)``, :math:`P=Kd`) or at per-client iterates (shape ``(n, P)``, as
in local steps), using the zero-padded stacked arrays of :class:`~drflmodel.data.Federation`.
The losses act on score blocks of shape ``(..., K)`` (:mod:`drflmodel.losses`), so the same code
serves every :math:`K`. Each client's row of a result reads only that client's data. The same
object gives the CVXPY expressions of the oracles, so the numpy and CVXPY sides share one
definition.
"""

from __future__ import annotations

import numpy as np

from . import _float64_products as fp
from ._lazy import LazyModule
from ._validation import check_int, check_real
from .data import Federation, StackedData
from .errors import InvalidDataError, InvalidParameterError
from .layout import ParameterLayout
from .losses import Loss

__all__ = ["ClientObjectives", "check_loss_matches", "minibatch_indices", "squared_loss_factors",
           "penalty_weights"]

cp = LazyModule("cvxpy")                  # imported at the first CVXPY expression, not at import


def minibatch_indices(rng: np.random.Generator, size: int, batch_size: int) -> np.ndarray:
    """The one minibatch rule of drflmodel: ``batch_size`` row indices of a client with ``size``
    rows, drawn uniformly **with replacement** by ``rng.integers(0, size, batch_size)``.

    Every minibatch gradient (the vectorized simulator, :class:`~drflmodel.problems.engine.problem.ClientView`,
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
        hint = ""
        if federation.task == "multiclass" or loss.task == "multiclass":
            hint = (" (multi-class data need losses.Multinomial(); binary data with labels in {-1, +1} a "
                    "binary loss such as Logistic())")
        raise InvalidParameterError(
            f"loss {loss!r} is a {loss.task} loss but the federation's task is {federation.task!r}{hint}")


def penalty_weights(federation: Federation, penalize_intercept) -> np.ndarray:
    r"""The ridge weights :math:`\omega\in\{0,1\}^d` over the features: all ones, with a 0 on the
    intercept column (``federation.intercept_column``) when ``penalize_intercept`` is ``False``."""
    if not isinstance(penalize_intercept, (bool, np.bool_)):
        raise InvalidParameterError(f"penalize_intercept must be True or False; got {penalize_intercept!r}")
    weights = np.ones(federation.dim)
    if not penalize_intercept:
        j = federation.intercept_column
        if j is None:
            raise InvalidParameterError(
                "penalize_intercept=False needs an intercept column (a feature equal to 1 in every row); "
                "the data have none: add it with add_intercept=True or drflmodel.datasets.add_intercept")
        weights[j] = 0.0
    return weights


def _check_dense_hessians(dim: int, count: int) -> None:
    """Refuse, before allocating, ``count`` dense ``dim x dim`` Hessians (and the factor a solve
    takes of them) that would not fit in memory."""
    from ._memory import check_memory, dense_hessian_bytes

    check_memory(dense_hessian_bytes(dim, count + 1),
                 f"{count} dense {dim} x {dim} Hessian{'s' if count > 1 else ''} and a factor",
                 instead="the matrix-free objectives (drflmodel.matrix_free) and solve(method='hessian_free') need no "
                 "P x P array")


#: :func:`_weighted_gram` takes BLAS ``syrk`` from this many rows x columns² (1,000 x 16: 4 % faster than
#: the general product; 240 x 15: even)
SYRK_MIN_WORK = 100_000


def _weighted_gram(X: np.ndarray, c: np.ndarray) -> np.ndarray:
    r""":math:`X^\top\mathrm{diag}(c)X`. With :math:`c\ge0` (a convex loss's curvature) as
    :math:`Y^\top Y`, :math:`Y=\mathrm{diag}(\sqrt c)X`: numpy hands a product of a matrix with its
    own transpose to BLAS ``syrk`` (one triangle, half the multiplications of the general product,
    exactly symmetric); a negative weight, or a product too small for it to pay (fewer than
    :data:`SYRK_MIN_WORK` rows x columns², where the weights' check costs what it saves), takes the
    general product."""
    if X.shape[0] * X.shape[1] ** 2 >= SYRK_MIN_WORK and c.min() >= 0.0:
        Y = X * np.sqrt(c)[:, None]
        return Y.T @ Y
    return X.T @ (X * c[:, None])


def _pair_weights(a, b, k: int, l: int):
    """The weight of the :math:`(k, l)` Hessian block for curvature factors ``diag(a) - b b^T``."""
    c = -(b[..., k] * b[..., l]) if b is not None else 0.0
    return c + a[..., k] if k == l else c


class ClientObjectives:
    """All clients' objectives :math:`f_i`, vectorized (module docstring).

    Parameters
    ----------
    federation : :class:`~drflmodel.data.Federation`.
    loss : :class:`~drflmodel.losses.Loss` whose task matches the federation.
    l2 : ridge weight :math:`\\ell_2 \\ge 0`.
    penalize_intercept : ``False`` leaves the intercept column unpenalized (:func:`penalty_weights`).

    Attributes ``layout`` (:class:`~drflmodel.layout.ParameterLayout`), ``n_outputs`` (:math:`K`),
    ``penalty_weights`` (:math:`\\omega`, length :math:`d`) and ``penalty_diagonal``
    (:math:`\\ell_2\\omega` tiled over the classes, length :math:`P`).
    """

    def __init__(self, federation: Federation, loss: Loss, l2: float = 0.0, penalize_intercept: bool = True):
        check_loss_matches(federation, loss)
        self.federation = federation
        self.loss = loss
        self.l2 = check_real(l2, "l2", low=0.0)
        self.penalty_weights = penalty_weights(federation, penalize_intercept)
        self.penalize_intercept = bool(penalize_intercept)
        K = federation.n_classes if loss.task == "multiclass" else 1
        self.n_outputs = int(K)
        try:
            intercept = federation.intercept_column
        except InvalidDataError:
            intercept = None                  # ambiguous; only an error when it must be found
        free = np.arange(federation.dim) if self.l2 == 0 else np.flatnonzero(self.penalty_weights == 0)
        self.layout = ParameterLayout(federation.dim, K, intercept, free)
        self.penalty_diagonal = self.l2 * np.tile(self.penalty_weights, K)
        st = federation.stacked
        self._X, self._y, self._mask = st.X, st.y, st.mask
        self._sizes = st.sizes.astype(float)

    @property
    def n(self) -> int:
        return self._X.shape[0]

    @property
    def n_features(self) -> int:
        """:math:`d`."""
        return self._X.shape[2]

    @property
    def dim(self) -> int:
        """:math:`P=Kd`, the length of :math:`\\theta`."""
        return self.n_features * self.n_outputs

    @property
    def stacked(self) -> StackedData:
        """The rows held here, as the routes that need rows read them (their ``needs`` include
        :data:`~drflmodel.problems.engine.queries.ROWS`; a federated server's objectives hold none):
        the zero-padded stacked arrays ``X`` ``(n, m, d)``, ``y`` ``(n, m)``, ``mask`` ``(n, m)``
        (1 on a row, 0 on padding) and ``sizes`` :math:`N_i` ``(n,)`` as floats. Read-only views of
        the federation's :attr:`~drflmodel.data.Federation.stacked` (or of this subsample's rows);
        float32 features as their float64 copy (exact; the routes reading them compute in float64)."""
        views = []
        for a in (fp.as_float64(self._X), self._y, self._mask, self._sizes):
            v = a.view()
            v.setflags(write=False)
            views.append(v)
        return StackedData(*views)

    @property
    def stacked_as_stored(self) -> StackedData:
        """:attr:`stacked` with the features as stored: float32 features stay float32 (no float64
        copy); the routes reading them compute their products in float64
        (:mod:`drflmodel._float64_products`)."""
        views = []
        for a in (self._X, self._y, self._mask, self._sizes):
            v = a.view()
            v.setflags(write=False)
            views.append(v)
        return StackedData(*views)

    @property
    def padded_rows(self) -> int:
        """Rows of the stacked, zero-padded arrays: :math:`n\\,m_{\\max}` (padding included)."""
        return int(self._X.shape[0] * self._X.shape[1])

    @property
    def data_bytes(self) -> int:
        """Bytes of the rows held here (the stacked, padded ``X``, ``y`` and mask arrays)."""
        return int(self._X.nbytes + self._y.nbytes + self._mask.nbytes)

    def restricted(self, i: int) -> "ClientObjectives":
        """The objective of client *i* alone (a copy holding only that client's own rows; its
        results have one row). Used by :class:`~drflmodel.problems.engine.problem.ClientView`."""
        import copy

        client = self.federation.clients[i]
        one = copy.copy(self)
        one._X, one._y = client.X[None], client.y[None]
        one._mask, one._sizes = np.ones((1, client.size)), np.array([float(client.size)])
        one.federation = None                 # nothing else of the federation is reachable
        one._forget_data_constants()
        return one

    # ------------------------------------------------------------------ helpers
    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.shape == (self.dim,) or theta.shape == (self.n, self.dim):
            return theta
        raise InvalidDataError(
            f"theta must have shape ({self.dim},) or ({self.n}, {self.dim}); got {theta.shape}"
            + (f" (class-major: {self.n_outputs} classes x {self.n_features} features)" if self.n_outputs > 1 else ""))

    def score_blocks(self, theta) -> np.ndarray:
        """Scores :math:`s_{ij}=W_i^\\top x_{ij}`, shape ``(n, m_max, K)`` (zero on padding)."""
        theta = self._theta(theta)
        W = self.layout.matrix(theta)                         # (d, K) or (n, d, K)
        n, m, d = self._X.shape
        if theta.ndim == 1:                                   # one 2-D product (BLAS), not a 3-D one
            return fp.times(self._X.reshape(n * m, d), W).reshape(n, m, self.n_outputs)
        if self._X.dtype != np.float64:                       # float32 rows: client by client, in float64
            return np.stack([fp.times(Xi, Wi) for Xi, Wi in zip(self._X, W)])
        return np.matmul(self._X, W)

    def scores(self, theta) -> np.ndarray:
        """Scores, shape ``(n, m_max)`` for :math:`K=1` and ``(n, m_max, K)`` otherwise."""
        S = self.score_blocks(theta)
        return S[..., 0] if self.n_outputs == 1 else S

    def _mean(self, per_sample: np.ndarray) -> np.ndarray:
        return (self._mask * per_sample).sum(axis=1) / self._sizes

    def penalty(self, theta) -> np.ndarray:
        """:math:`\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2` (per row of ``theta``)."""
        theta = np.asarray(theta, float)
        return 0.5 * np.sum(self.penalty_diagonal * theta * theta, axis=-1)

    def _row_weights(self, block: np.ndarray) -> np.ndarray:
        """``mask / N_i`` broadcast against a per-sample block of shape ``(n, m, ...)``."""
        w = self._mask / self._sizes[:, None]
        return w.reshape(w.shape + (1,) * (block.ndim - 2))

    def _gradient_from_blocks(self, D: np.ndarray, theta: np.ndarray, X=None) -> np.ndarray:
        """Row *i*: :math:`\\mathrm{vec}(X_i^\\top D_i)` (class-major) plus the ridge gradient."""
        X = self._X if X is None else X
        if X.dtype != np.float64:                             # float32 rows: accumulated in float64
            grads = np.stack([fp.t_times(Xi, Di).T for Xi, Di in zip(X, D)]).reshape(X.shape[0], self.dim)
        else:
            grads = np.matmul(np.swapaxes(D, 1, 2), X).reshape(X.shape[0], self.dim)   # (n, K, d) -> (n, P)
        return grads + self.penalty_diagonal * (theta if theta.ndim == 2 else theta[None, :])

    # ------------------------------------------------------------------ numpy
    def values(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta_1), \\dots, f_n(\\theta_n))`; ``theta`` shared ``(P,)`` or per client ``(n, P)``."""
        theta = self._theta(theta)
        return self._mean(self.loss.block_value(self.score_blocks(theta), self._y)) + self.penalty(theta)

    def gradients(self, theta) -> np.ndarray:
        """Row *i* is :math:`\\nabla f_i(\\theta_i)`, shape ``(n, P)``."""
        theta = self._theta(theta)
        G = self.loss.block_gradient(self.score_blocks(theta), self._y)
        return self._gradient_from_blocks(G * self._row_weights(G), theta)

    def hessians(self, theta) -> np.ndarray:
        """Row *i* is :math:`\\nabla^2 f_i(\\theta_i)`, shape ``(n, P, P)`` (smooth losses only)."""
        theta = self._theta(theta)
        _check_dense_hessians(self.dim, self.n)
        a, b = self.loss.block_curvature_factors(self.score_blocks(theta), self._y)
        w = self._mask / self._sizes[:, None]
        d, K = self.n_features, self.n_outputs
        H = np.zeros((self.n, self.dim, self.dim))
        for k in range(K):
            for l in range(k, K):
                pair = w * _pair_weights(a, b, k, l)
                if self._X.dtype == np.float64:
                    block = np.matmul(np.swapaxes(self._X, 1, 2), self._X * pair[:, :, None])
                else:                       # float32 rows: client by client, chunks cast to float64
                    block = np.stack([fp.weighted_gram(Xi, pi) for Xi, pi in zip(self._X, pair)])
                H[:, k * d:(k + 1) * d, l * d:(l + 1) * d] = block
                if l != k:
                    H[:, l * d:(l + 1) * d, k * d:(k + 1) * d] = np.swapaxes(block, 1, 2)
        idx = np.arange(self.dim)
        H[:, idx, idx] += self.penalty_diagonal
        return H

    def evaluate(self, theta, lam=None, hessian: bool = True):
        r"""One fused pass over the data at a shared :math:`\theta`: ``(values (n,), gradients
        (n, P), H)`` with :math:`H=\sum_i\lambda_i\nabla^2f_i(\theta)` (``lam`` default: all ones),
        or ``None`` when ``hessian=False``. The scores are computed once; the Hessian is
        assembled in :math:`K(K+1)/2` BLAS products over all rows (:math:`O(NK^2d^2)`)."""
        theta = self._theta(theta)
        if theta.ndim != 1:
            raise InvalidDataError("evaluate needs a shared theta of shape (P,)")
        S = self.score_blocks(theta)
        values = self._mean(self.loss.block_value(S, self._y)) + self.penalty(theta)
        G = self.loss.block_gradient(S, self._y)
        grads = self._gradient_from_blocks(G * self._row_weights(G), theta)
        if not hessian:
            return values, grads, None
        lam = np.ones(self.n) if lam is None else np.asarray(lam, float)
        return values, grads, self._weighted_hessian_from_scores(S, lam)

    def weighted_hessian(self, theta, lam) -> np.ndarray:
        """:math:`\\sum_i\\lambda_i\\nabla^2f_i(\\theta)` at a shared ``theta`` (shape ``(P, P)``)."""
        theta = self._theta(theta)
        return self._weighted_hessian_from_scores(self.score_blocks(theta), np.asarray(lam, float))

    def _weighted_hessian_from_scores(self, S, lam, chunk: int = 8192) -> np.ndarray:
        r""":math:`\sum_i\lambda_i\nabla^2f_i` from the scores. With per-sample curvature
        :math:`\mathrm{diag}(a_j)-b_jb_j^\top` and row weights :math:`w_j=\lambda_i/N_i`:
        :math:`H=\sum_k e_ke_k^\top\otimes X^\top\mathrm{diag}(wa_k)X-Z^\top Z` with
        :math:`Z_j=\sqrt{w_j}\,b_j\otimes x_j` -- :math:`K` products of size :math:`d` and one of size
        :math:`Kd` per chunk of rows (large BLAS calls, rows in chunks to bound the memory)."""
        _check_dense_hessians(self.dim, 1)
        a, b = self.loss.block_curvature_factors(S, self._y)
        n, m, d = self._X.shape
        K = self.n_outputs
        w = (self._mask * (lam / self._sizes)[:, None]).reshape(-1)
        a = a.reshape(n * m, K)
        b = None if b is None else b.reshape(n * m, K)
        # padding, zero weights and (K = 1) rows without curvature -- the affine parts of a
        # piecewise-quadratic loss -- contribute nothing: skipped
        rows = np.flatnonzero(w if b is not None else w * (a[:, 0] != 0))
        X2 = self._X.reshape(n * m, d)
        every = rows.size == n * m                            # no row skipped: chunks are slices (views), not copies
        H = np.zeros((self.dim, self.dim))
        for start in range(0, rows.size, chunk):
            r = slice(start, start + chunk) if every else rows[start:start + chunk]
            Xr, wr = fp.as_float64(X2[r]), w[r]                # a float32 chunk cast: exact
            for k in range(K):
                H[k * d:(k + 1) * d, k * d:(k + 1) * d] += _weighted_gram(Xr, wr * a[r, k])
            if b is not None:
                Z = (Xr[:, None, :] * (b[r] * np.sqrt(wr)[:, None])[:, :, None]).reshape(Xr.shape[0], K * d)
                H -= Z.T @ Z
        H.flat[::self.dim + 1] += float(np.sum(lam)) * self.penalty_diagonal        # the diagonal, in place
        return H

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        """Row *i*: :math:`\\nabla^2f_i(\\theta)\\,v_i` for directions ``V`` of shape ``(n, P)`` or
        ``(P,)`` (matrix-free: two passes over the client's rows)."""
        theta = self._theta(theta)
        V = np.broadcast_to(np.asarray(V, float), (self.n, self.dim))
        S = self.score_blocks(theta)
        M = self.layout.matrix(V)
        if self._X.dtype != np.float64:                       # float32 rows: client by client, in float64
            dS = np.stack([fp.times(Xi, Mi) for Xi, Mi in zip(self._X, M)])
        else:
            dS = np.matmul(self._X, M)                        # score change (n, m, K)
        HV = self.loss.block_hvp(S, self._y, dS)
        out = self._gradient_from_blocks(HV * self._row_weights(HV), V)   # X_i^T (w HV_i) + ridge * v_i
        return out

    def minibatch_gradients(self, theta, batch_size: int, rng) -> np.ndarray:
        """Unbiased minibatch gradients: client *i* samples ``batch_size`` of its own rows
        uniformly with replacement (:func:`minibatch_indices`). Returns shape ``(n, P)``.

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
        Xb, yb = fp.as_float64(self._X[rows, idx]), self._y[rows, idx]
        W = self.layout.matrix(theta if theta.ndim == 2 else np.broadcast_to(theta, (self.n, self.dim)))
        G = self.loss.block_gradient(np.matmul(Xb, W), yb) / batch_size
        return self._gradient_from_blocks(G, theta, X=Xb)

    # ------------------------------------------------------------------ constants
    def smoothness(self) -> np.ndarray:
        """Per-client smoothness :math:`L_i=\\beta_\\ell\\,\\lambda_{\\max}(X_i^\\top X_i/N_i)+\\ell_2\\max_j\\omega_j`
        (:math:`\\beta_\\ell` the loss's smoothness in the score vector)."""
        return self.loss.smoothness * self._gram_extreme_eigs()[:, 1] + float(self.penalty_diagonal.max())

    def strong_convexity(self) -> np.ndarray:
        """Per-client strong-convexity modulus of :math:`f_i` on the identifiable parameters (the
        quotient by the invariant directions of :mod:`drflmodel.layout`): for quadratic losses
        :math:`\\lambda_{\\min}(\\beta_\\ell X_i^\\top X_i/N_i+\\ell_2\\,\\mathrm{diag}\\,\\omega)`, otherwise
        :math:`\\ell_2\\min_j\\omega_j` (0 when the intercept is unpenalized)."""
        if self.loss.is_quadratic:
            if getattr(self, "_quadratic_moduli", None) is None:
                ridge = np.diag(self.l2 * self.penalty_weights)
                lowest = [np.linalg.eigvalsh(self.loss.smoothness * G + ridge)[0] for G in self._client_grams()]
                self._quadratic_moduli = np.maximum(np.array(lowest, float), 0.0)
            return self._quadratic_moduli.copy()
        return np.full(self.n, float(self.penalty_diagonal.min()))

    def max_row_norms(self) -> np.ndarray:
        """:math:`\\max_j\\|x_{ij}\\|_2` per client (the data's scale in the self-concordance bound;
        computed once)."""
        if getattr(self, "_row_norms", None) is None:
            self._row_norms = np.sqrt(np.max(fp.row_squared_norms(self._X), axis=1))
        return self._row_norms

    def subsample(self, fraction: float, minimum: int, seed=0) -> "ClientObjectives":
        """The same objectives on a uniform subsample of every client's rows (without replacement,
        seeded): :math:`\\max(\\lceil\\text{fraction}\\,N_i\\rceil, \\min(N_i, \\text{minimum}))` rows
        of client *i*. A cheap model of the full problem, used to warm-start the fast routes."""
        import copy

        rng = np.random.default_rng(seed)
        sizes = self._sizes.astype(int)
        keep = [int(min(s, max(np.ceil(fraction * s), minimum))) for s in sizes]
        m = max(keep)
        X = np.zeros((self.n, m, self.n_features))
        y = np.zeros((self.n, m))
        mask = np.zeros((self.n, m))
        for i, (s, k) in enumerate(zip(sizes, keep)):
            rows = np.sort(rng.choice(s, size=k, replace=False))
            X[i, :k], y[i, :k], mask[i, :k] = self._X[i, rows], self._y[i, rows], 1.0
        sub = copy.copy(self)
        sub._X, sub._y, sub._mask, sub._sizes = X, y, mask, np.asarray(keep, float)
        sub._forget_data_constants()
        sub.federation = None
        return sub

    def _client_grams(self):
        """:math:`X_i^\\top X_i/N_i`, client by client (one BLAS product each, no ``(n, d, d)`` array;
        padded rows are zero and add nothing)."""
        from ._memory import check_memory, dense_hessian_bytes

        d = self.n_features
        check_memory(dense_hessian_bytes(d, 3), f"a client's {d} x {d} Gram matrix and its eigendecomposition",
                     instead="its extreme eigenvalues are needed only by the quadratic loss's moduli and the "
                     "smoothness constants; penalize every coordinate (the ridge's modulus needs no Gram matrix)")
        for X, size in zip(self._X, self._sizes):
            yield fp.gram(X) / size

    def _gram_extreme_eigs(self) -> np.ndarray:
        """``(n, 2)``: the smallest (clipped at 0) and largest eigenvalue of each client's
        :math:`X_i^\\top X_i/N_i` (computed once)."""
        if getattr(self, "_gram_eigs", None) is None:
            ev = [np.linalg.eigvalsh(G)[[0, -1]] for G in self._client_grams()]
            self._gram_eigs = np.array([[max(float(lo), 0.0), float(hi)] for lo, hi in ev])
        return self._gram_eigs.copy()

    def _forget_data_constants(self) -> None:
        """Drop the constants computed once from the rows (after the rows change in a copy)."""
        self._row_norms = self._gram_eigs = self._quadratic_moduli = None

    def quadratic_forms(self):
        """For the squared loss: ``(Q, r, c)`` with :math:`f_i(\\theta)=\\theta^\\top Q_i\\theta - 2r_i^\\top\\theta + c_i`.

        Shapes ``(n, d, d)``, ``(n, d)``, ``(n,)``. Raises for non-quadratic losses.
        """
        if not self.loss.is_quadratic:
            raise InvalidParameterError(f"quadratic_forms needs a quadratic loss; got {self.loss!r}")
        m = self._sizes
        Q = np.stack(list(self._client_grams())) + 0.5 * np.diag(self.penalty_diagonal)[None]
        r = np.einsum("imd,im->id", self._X, self._y, dtype=np.float64) / m[:, None]
        c = np.einsum("im,im->i", self._y, self._y) / m
        return Q, r, c

    # ------------------------------------------------------------------ CVXPY
    def penalty_expr(self, theta: cp.Expression):
        """CVXPY :math:`\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2` (``None`` when :math:`\\ell_2=0`)."""
        if self.l2 == 0:
            return None
        if np.all(self.penalty_weights == 1):
            return 0.5 * self.l2 * cp.sum_squares(theta)
        return 0.5 * cp.sum_squares(cp.multiply(np.sqrt(self.penalty_diagonal), theta))

    def score_expr(self, X: np.ndarray, theta: cp.Expression):
        """CVXPY scores of the rows ``X``: ``X @ theta`` (:math:`K=1`) or ``X @ W`` of shape ``(N, K)``."""
        if self.n_outputs == 1:
            return X @ theta
        return X @ cp.reshape(theta, (self.n_features, self.n_outputs), order="F")

    def expressions(self, theta: cp.Expression) -> list:
        r"""CVXPY expressions of :math:`f_i(\theta)` (convex, DCP), one per client.

        For the squared loss the data term is written through the thin QR factorization
        :math:`X_i=Q_iR_i` (:func:`squared_loss_factors`):
        :math:`\|X_i\theta-y_i\|^2=\|R_i\theta-Q_i^\top y_i\|^2+\|y_i-Q_iQ_i^\top y_i\|^2` (exact:
        :math:`y_i-Q_iQ_i^\top y_i` is orthogonal to the range of :math:`X_i`), one second-order
        cone of dimension :math:`\min(N_i,d)+2` per client instead of :math:`N_i` cones, so the
        conic model's size does not grow with the number of rows. The softmax loss is
        ``log_sum_exp`` of each row's :math:`K` scores minus the label's score."""
        out = []
        penalty = self.penalty_expr(theta)
        for c in self.federation.clients:
            if self.loss.is_quadratic:
                R, qty, residual = squared_loss_factors(c.X, c.y)
                scale = 1.0 / np.sqrt(c.size)            # the cone's data of the size of X's rows
                e = cp.sum_squares((scale * R) @ theta - scale * qty) + residual / c.size
            elif self.n_outputs == 1:
                e = cp.sum(self.loss.expr(c.X @ theta, c.y)) / c.size
            else:
                e = cp.sum(self.loss.block_expr(self.score_expr(c.X, theta), c.y)) / c.size
            out.append(e if penalty is None else e + penalty)
        return out
