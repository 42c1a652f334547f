r"""Matrix-free client objectives: values, gradients and Hessian-vector products without a
:math:`P\times P` array.

The objectives are those of :mod:`drflmodel.objectives`,

.. math::

    f_i(\theta)=\frac1{N_i}\sum_{j\in\mathcal C_i}\ell(W^\top x_j, y_j)
               +\frac{\ell_2}2\sum_{c}\omega_c\|W_{c\cdot}\|^2 ,\qquad
    \nabla^2 f_i(\theta)\,v=\frac1{N_i}\sum_{j\in\mathcal C_i}x_j\otimes
        \big(\nabla^2_s\ell(s_j)\,V^\top x_j\big)+\ell_2\,\omega\odot v ,

with :math:`W\in\mathbb R^{d\times K}`, :math:`s_j=W^\top x_j` and :math:`v=\mathrm{vec}(V)` in the
class-major layout of :mod:`drflmodel.layout`. A weighted sum :math:`\sum_i\lambda_if_i` is a sum
over the rows with row weights :math:`w_j=\lambda_{c(j)}/N_{c(j)}`, so its gradient and its
Hessian-vector product cost one product with :math:`X` (:math:`N\times d` by :math:`d\times K`) and
one with :math:`X^\top` -- "two passes" -- whatever :math:`n`.

**Memory** :math:`O(NK+Pn)`: the rows once, compact (no padding), a few :math:`N\times K` blocks of
scores and their loss derivatives, and :math:`n` gradients. The per-sample curvature
:math:`\nabla^2_s\ell` is never formed: it acts on a block of score directions
(:math:`\mathrm{diag}(p)-pp^\top` for the softmax, a scalar :math:`\ell''` otherwise).

:class:`MatrixFreeObjectives` holds the rows; :meth:`MatrixFreeObjectives.at` evaluates everything
that one forward pass gives at a point (a :class:`RowPoint`: values, and on demand the gradients and
Hessian-vector products at that point, each one more pass). The smooth losses of
:mod:`drflmodel.losses` are supported: logistic and softmax (with a fused, numerically stable
kernel), smooth hinge, Huber, squared (through the loss's own derivatives; the second derivative
of a piecewise-quadratic loss is its almost-everywhere value).
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _float32_products as fp32
from . import _float64_products as fp

from .errors import InvalidDataError, InvalidParameterError
from .losses import Logistic, Multinomial

__all__ = ["Float32Steps", "MatrixFreeObjectives", "RowPoint", "matrix_free_bytes"]


def matrix_free_bytes(n_rows: int, n_features: int, n_outputs: int, n_clients: int, feature_bytes: int = 8) -> int:
    """Bytes :class:`MatrixFreeObjectives` allocates: the compact rows (``feature_bytes`` per
    feature: 4 for float32 rows, which stay float32) and labels, five :math:`N\\times K` blocks
    (scores, loss derivatives, curvature, a direction and its image) and the :math:`n` client
    gradients (a few copies of :math:`P` floats each); for float32 rows also a chunk of rows cast to
    float64 (:data:`drflmodel._float64_products.CHUNK_BYTES`) and 4.5 :math:`N\\times K` blocks of
    the float64 points a certificate is taken at (the float32 steps' points stay alive; measured with
    tracemalloc: peak / estimate 0.80-1.11 from 20k x 256 x 50 to 100k x 512 x 200)."""
    P = n_features * n_outputs
    total = feature_bytes * n_rows * n_features + 8 * (2 * n_rows + 5 * n_rows * n_outputs + 4 * n_clients * P)
    if feature_bytes < 8:      # float32 rows: a chunk cast to float64, the float64 points certified (4.5 blocks)
        total += min(fp.CHUNK_BYTES, 8 * n_rows * n_features) + 36 * n_rows * n_outputs
    return total


class _PointQueries:
    """Values, gradients and Hessian-vector products through ``self.at`` (one point each)."""

    def values(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta),\\dots,f_n(\\theta))` (one pass)."""
        return self.at(theta).values

    def gradients(self, theta) -> np.ndarray:
        """Row *i*: :math:`\\nabla f_i(\\theta)`, shape ``(n, P)`` (two passes)."""
        return self.at(theta).gradients()

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        """Row *i*: :math:`\\nabla^2f_i(\\theta)\\,v_i` for ``V`` of shape ``(n, P)`` or ``(P,)``."""
        return self.at(theta).client_hvps(V)


class MatrixFreeObjectives(_PointQueries):
    """The client objectives of a :class:`~drflmodel.objectives.ClientObjectives`, matrix-free
    (module docstring).

    Parameters
    ----------
    objectives : :class:`~drflmodel.objectives.ClientObjectives` (its loss must be smooth).

    Raises :class:`~drflmodel.errors.InvalidParameterError` for a non-smooth loss and, before
    allocating, when the memory estimate (:func:`matrix_free_bytes`) exceeds the memory available.
    """

    def __init__(self, objectives):
        loss = objectives.loss
        if not np.isfinite(loss.smoothness):
            raise InvalidParameterError(
                f"the loss {loss.name!r} is not smooth: Hessian-vector products need a smooth loss "
                f"(logistic, multinomial, smooth_hinge, huber, squared)")
        self.loss = loss
        self.layout = objectives.layout
        self.l2 = objectives.l2
        self.penalty_diagonal = objectives.penalty_diagonal
        self.n_outputs = objectives.n_outputs
        sizes = np.asarray(objectives._sizes, float).astype(int)
        stacked_X, stacked_y = objectives._X, objectives._y
        n, _, d = stacked_X.shape
        N = int(sizes.sum())
        from ._memory import check_memory

        check_memory(matrix_free_bytes(N, d, self.n_outputs, n, stacked_X.itemsize),
                     f"the matrix-free objectives ({N} rows x {d} features, {self.n_outputs} outputs)",
                     instead="use fewer rows or features, or a machine with more memory")
        self.X, self.y = _compact_rows(stacked_X, stacked_y, sizes)
        self.sizes = sizes
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.labels = self.y.astype(np.intp) if isinstance(loss, Multinomial) else None
        #: the softmax's label scores in the flattened ``(N, K)`` scores: :math:`jK+y_j`
        self.label_positions = (None if self.labels is None
                                else np.arange(N, dtype=np.intp) * self.n_outputs + self.labels)
        self._row_norms = self._row_square_sums = None
        self._feature_norm_means = {}

    # ------------------------------------------------------------------ shapes
    @property
    def n(self) -> int:
        """Number of clients."""
        return self.sizes.size

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def dim(self) -> int:
        """:math:`P=Kd`."""
        return self.n_features * self.n_outputs

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    def row_weights(self, lam) -> np.ndarray:
        """:math:`w_j=\\lambda_{c(j)}/N_{c(j)}` for every row (shape ``(N,)``)."""
        return np.repeat(np.asarray(lam, float) / self.sizes, self.sizes)

    def client_sums(self, per_row: np.ndarray) -> np.ndarray:
        """Per-client sums of a per-row array (first axis), shape ``(n, ...)``. One client's sums of
        an ``(N, K)`` block are one matrix-vector product (numpy's reduction of short rows is
        2-10x slower)."""
        if per_row.ndim > 1 and self.n == 1:
            flat = per_row.reshape(per_row.shape[0], -1)
            return (np.ones(flat.shape[0]) @ flat).reshape((1,) + per_row.shape[1:])
        return np.add.reduceat(per_row, self.offsets[:-1], axis=0)

    def _square_statistics(self) -> None:
        """The rows' squared norms and each client's column sums of squares, in one pass over the
        rows (:func:`drflmodel._float64_products.square_sums`; computed once)."""
        if self._row_norms is None:
            rows, columns = fp.square_sums(self.X, self.offsets)
            self._row_norms = np.sqrt(rows)
            self._column_square_sums = columns

    def row_norms(self) -> np.ndarray:
        """:math:`\\|x_j\\|_2` of every row (computed once)."""
        self._square_statistics()
        return self._row_norms

    def row_square_sums(self) -> np.ndarray:
        """Per client, :math:`\\sum_j\\|x_j\\|^2` over its rows (from :meth:`row_norms`; computed once)."""
        if self._row_square_sums is None:
            x = self.row_norms()
            self._row_square_sums = self.client_sums(x * x)
        return self._row_square_sums

    def mean_squared_row_norm(self) -> float:
        """:math:`\\frac1N\\sum_j\\|x_j\\|^2` (the scale of the loss's curvature in :math:`\\theta`)."""
        return float(np.mean(self.row_norms() ** 2))

    def column_second_moments(self) -> np.ndarray:
        r"""Per client (rows), the mean over its rows of every squared column,
        :math:`\frac1{N_i}\sum_{j\in\mathcal C_i}x_{jk}^2`, shape ``(n, d)``: sums of the client's own
        rows (their sum over :math:`k` is the mean :math:`\|x_j\|^2` of :meth:`RowPoint.allowance_terms`),
        the column statistics the Hessian-free route's diagonal preconditioner is made of."""
        self._square_statistics()            # client by client, in float64, no N x d temporary
        return self._column_square_sums / self.sizes[:, None]

    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, float)
        if theta.shape != (self.dim,):
            raise InvalidDataError(f"theta must have shape ({self.dim},); got {theta.shape}")
        return theta

    # ------------------------------------------------------------------ evaluation
    @property
    def float32(self) -> bool:
        """Whether the rows are float32 (then :meth:`steps_view` runs float32 products)."""
        return self.X.dtype == np.float32

    def scores(self, theta, exact: bool = True) -> np.ndarray:
        """:math:`S=XW`, shape ``(N, K)`` (one pass): in float64 arithmetic (``exact``), else, for
        float32 rows, from a float32 product (:mod:`drflmodel._float32_products`: steps only)."""
        W = self.layout.matrix(self._theta(theta))
        return fp.times(self.X, W) if exact or not self.float32 else fp32.times(self.X, W)

    def at(self, theta, scores=None, exact: bool = True) -> "RowPoint":
        """Everything one forward pass gives at ``theta`` (a :class:`RowPoint`); ``scores`` may be
        passed when already known (e.g. after a shift of the intercepts). ``exact=False`` (float32
        rows only) makes every product of the point a float32 one: for steps, never a certificate
        (:attr:`RowPoint.exact`)."""
        theta = self._theta(theta)
        exact = exact or self.X.dtype != np.float32
        if scores is None:                            # the scores' pass (as :meth:`scores`, theta checked once)
            W = self.layout.matrix(theta)
            scores = fp.times(self.X, W) if exact else fp32.times(self.X, W)
        return RowPoint(self, theta, scores, exact)

    def shifted(self, point: "RowPoint", idx: np.ndarray, b: np.ndarray) -> "RowPoint":
        """The row pass at ``point.theta`` with the intercepts (coordinates ``idx``) set to ``b``:
        every score shifts by ``b`` (no product with :math:`X`; as exact as ``point``)."""
        theta = point.theta.copy()
        theta[idx] = b
        return self.at(theta, scores=point.scores - point.theta[idx] + b, exact=point.exact)

    def steps_view(self):
        """What the steps of the Hessian-free route evaluate: for float32 rows a
        :class:`Float32Steps` view (every product in float32, about twice as fast; the points it
        gives are not ``exact``), else these objectives themselves."""
        return Float32Steps(self) if self.float32 else self

    def feature_norm_means(self, intercept_column: int) -> np.ndarray:
        """Per client, the mean of :math:`\\|\\tilde x_j\\|_2` (the rows without the constant
        intercept column; computed once per column: every certificate attempt asks for them)."""
        if intercept_column not in self._feature_norm_means:
            x2 = self.row_norms() ** 2 - fp.as_float64(self.X[:, intercept_column]) ** 2
            self._feature_norm_means[intercept_column] = self.client_sums(np.sqrt(np.maximum(x2, 0.0))) / self.sizes
        return self._feature_norm_means[intercept_column].copy()



class Float32Steps(_PointQueries):
    """:class:`MatrixFreeObjectives` over float32 rows whose points come from float32 products
    (:meth:`MatrixFreeObjectives.steps_view`); every other attribute is the objectives' own. A
    certificate must not be taken from its points: :attr:`RowPoint.exact` is ``False`` on them, and
    the Hessian-free route recomputes the point it certifies in float64
    (:func:`~drflmodel.problems.minmax.hessian_free.evaluation_certificate`)."""

    def __init__(self, objectives: MatrixFreeObjectives):
        self.exact_objectives = objectives

    def __getattr__(self, name):
        return getattr(self.exact_objectives, name)

    def at(self, theta, scores=None) -> "RowPoint":
        return self.exact_objectives.at(theta, scores, exact=False)


#: id(stacked X) -> (weak reference to it, compact X, compact y): problems built on one federation
#: share its stacked arrays (a cached property), so they share one compact copy too
_COMPACT: dict = {}


def _compact_rows(stacked_X: np.ndarray, stacked_y: np.ndarray, sizes: np.ndarray):
    """Every client's rows, contiguous and without padding: a view when nothing is padded, else one
    copy per stacked array (shared by every problem on the same federation)."""
    n, m, d = stacked_X.shape
    if np.all(sizes == m):
        return stacked_X.reshape(n * m, d), stacked_y.reshape(n * m)
    key = id(stacked_X)
    cached = _COMPACT.get(key)
    if cached is not None and cached[0]() is stacked_X and cached[1]() is stacked_y:
        return cached[2], cached[3]
    X = np.concatenate([stacked_X[i, :s] for i, s in enumerate(sizes)])
    y = np.concatenate([stacked_y[i, :s] for i, s in enumerate(sizes)])
    _COMPACT[key] = (weakref.ref(stacked_X), weakref.ref(stacked_y), X, y)
    weakref.finalize(stacked_X, _COMPACT.pop, key, None)   # the copy goes with the federation's arrays
    return X, y


class RowPoint:
    """The objectives at one point :math:`\\theta`: the scores' pass done once, the rest on demand.

    Attributes ``theta``, ``scores`` (``(N, K)``), ``row_values`` (:math:`\\ell(s_j,y_j)`),
    ``row_gradients`` (:math:`\\nabla_s\\ell`, ``(N, K)``), ``values`` (:math:`f_i(\\theta)`,
    ``(n,)``) and ``probabilities`` (the softmax's :math:`p_j`, ``(N, K)``; ``None`` for scalar-score
    losses, whose curvature is :meth:`second_derivatives`). The curvature of the loss in the scores
    is kept in this factored form for :meth:`hvp`. ``exact``: every product with the rows (the
    scores' and the later ones) in float64 arithmetic (:mod:`drflmodel._float64_products`), the
    only points a certificate is taken from; ``False``: float32 products (float32 rows, for steps).
    """

    def __init__(self, objectives: MatrixFreeObjectives, theta: np.ndarray, scores: np.ndarray,
                 exact: bool = True):
        self.objectives = ob = objectives
        self.theta = theta
        self.scores = scores
        self.exact = exact
        self._t_times = fp.t_times if exact else fp32.t_times
        self._times = fp.times if exact else fp32.times
        loss = ob.loss
        self._curvature = None              # l''(s) (scalar losses), computed at the first use
        self._exp = None                    # the logistic rows' e^{-|ys|}, the curvature's ingredient
        if isinstance(loss, Multinomial):
            self.row_values, self.row_gradients, self.probabilities = _softmax_rows(scores, ob.label_positions)
        elif type(loss) is Logistic:
            self.row_values, gradient, self._exp = _logistic_rows(scores[:, 0], ob.y)
            self.row_gradients = gradient[:, None]
            self.probabilities = None
        else:
            s = scores[:, 0]
            self.row_values = loss.value(s, ob.y)
            self.row_gradients = loss.derivative(s, ob.y)[:, None]
            self.probabilities = None
        self.penalty = 0.5 * float(ob.penalty_diagonal @ (theta * theta))
        self.values = ob.client_sums(self.row_values) / ob.sizes + self.penalty
        self._gradients = None

    # ------------------------------------------------------------------ gradients
    def gradients(self) -> np.ndarray:
        """Row *i*: :math:`\\nabla f_i(\\theta)` (one pass over the rows, client by client)."""
        if self._gradients is None:
            ob = self.objectives
            if ob.n == 1:                             # one client: one product, no loop
                G = self._t_times(ob.X, self.row_gradients).T.reshape(1, -1) / ob.sizes[0]
            else:
                G = np.empty((ob.n, ob.dim))
                for i in range(ob.n):
                    a, b = ob.offsets[i], ob.offsets[i + 1]
                    G[i] = self._t_times(ob.X[a:b], self.row_gradients[a:b]).T.reshape(-1) / ob.sizes[i]
            G += ob.penalty_diagonal * self.theta
            self._gradients = G
        return self._gradients

    def weighted_gradient(self, lam) -> np.ndarray:
        """:math:`\\sum_i\\lambda_i\\nabla f_i(\\theta)` (from the client gradients if computed, else one
        pass; for one client through :meth:`gradients`, the same pass, kept)."""
        lam = np.asarray(lam, float)
        ob = self.objectives
        if self._gradients is not None or ob.n == 1:   # one client: its gradient is the same one pass
            return lam @ self.gradients()                # (no N x K weighted copy), kept for the answer
        Gw = self.row_gradients * ob.row_weights(lam)[:, None]
        return self._t_times(ob.X, Gw).T.reshape(-1) + float(lam.sum()) * ob.penalty_diagonal * self.theta

    # ------------------------------------------------------------------ per-client sums for bounds
    def allowance_terms(self) -> np.ndarray:
        """Per client (rows), the means over its rows of :math:`|\\ell_j|`,
        :math:`\\|x_j\\|\\,\\|\\nabla_s\\ell_j\\|`, :math:`\\|x_j\\|^2` and :math:`\\|s_j\\|_1`, shape
        ``(n, 4)``: the magnitudes a floating-point allowance is made of."""
        ob = self.objectives
        x = ob.row_norms()
        K = self.row_gradients.shape[1]
        if K == 1:                                    # |g_j| and |s_j| themselves
            r, scores = np.abs(self.row_gradients[:, 0]), np.abs(self.scores[:, 0])
        else:
            r = np.sqrt(np.einsum("jk,jk->j", self.row_gradients, self.row_gradients))
            scores = np.abs(self.scores) @ np.ones(K)
        sums = np.stack([ob.client_sums(np.abs(self.row_values)), ob.client_sums(x * r), ob.row_square_sums(),
                         ob.client_sums(scores)], axis=1)          # four sums of (N,) arrays: no (N, 4) block
        return sums / ob.sizes[:, None]

    def intercept_values(self, idx: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per client, the mean data loss with the intercepts (coordinates ``idx``) set to ``b``
        (the scores shift; no product with :math:`X`), shape ``(n,)``."""
        ob = self.objectives
        S = self.scores - self.theta[idx] + b
        if self.probabilities is not None:            # log-sum-exp shifted by the row maximum, as
            Z, top, _ = _log_sum_exp_rows(S)             # scipy.special.logsumexp (without its array-API
            rows = np.log(Z)                             # overhead: 20% of a multinomial solve)
            rows += top
            rows -= S.reshape(-1).take(ob.label_positions)
        else:
            rows = ob.loss.value(S[:, 0], ob.y)
        return ob.client_sums(rows) / ob.sizes

    def intercept_terms(self, idx: np.ndarray):
        """Per client, at this point's own intercepts: the mean data loss ``(n,)``, its gradient in
        the :math:`K` intercepts ``(n, K)`` and its Hessian in them ``(n, K, K)``."""
        ob = self.objectives
        values = ob.client_sums(self.row_values) / ob.sizes
        grads = ob.client_sums(self.row_gradients) / ob.sizes[:, None]
        if self.probabilities is not None:
            P = self.probabilities
            diag = ob.client_sums(P)
            hess = np.stack([np.diag(diag[i]) - P[a:c].T @ P[a:c]
                             for i, (a, c) in enumerate(zip(ob.offsets[:-1], ob.offsets[1:]))])
        else:
            hess = ob.client_sums(self.second_derivatives())[:, :, None]
        return values, grads, hess / ob.sizes[:, None, None]

    # ------------------------------------------------------------------ curvature
    def second_derivatives(self) -> np.ndarray:
        """:math:`\\ell''(s_j)`, shape ``(N, 1)`` (scalar-score losses; computed once)."""
        if self._curvature is None:
            ob = self.objectives
            self._curvature = (_logistic_curvature(self._exp) if self._exp is not None   # no second exp
                               else ob.loss.second_derivative(self.scores[:, 0], ob.y)[:, None])
        return self._curvature

    def _apply_curvature(self, dS: np.ndarray, rows=slice(None)) -> np.ndarray:
        """:math:`\\nabla^2_s\\ell(s_j)\\,\\delta s_j` for the rows ``rows`` (in place of ``dS``)."""
        if self.probabilities is not None:
            P = self.probabilities[rows]
            dS -= np.einsum("jk,jk->j", P, dS)[:, None]
            dS *= P
            return dS
        dS *= self.second_derivatives()[rows]
        return dS

    def hvp(self, v, lam) -> np.ndarray:
        """:math:`\\sum_i\\lambda_i\\nabla^2f_i(\\theta)\\,v` (two passes)."""
        ob = self.objectives
        v = np.asarray(v, float)
        lam = np.asarray(lam, float)
        C = self._apply_curvature(self._times(ob.X, ob.layout.matrix(v)))
        C *= ob.row_weights(lam)[:, None]
        return self._t_times(ob.X, C).T.reshape(-1) + float(lam.sum()) * ob.penalty_diagonal * v

    def client_hvps(self, V) -> np.ndarray:
        """Row *i*: :math:`\\nabla^2f_i(\\theta)\\,v_i` for directions ``V`` (``(n, P)`` or one
        ``(P,)`` for all), each client on its own rows."""
        ob = self.objectives
        V = np.broadcast_to(np.asarray(V, float), (ob.n, ob.dim))
        out = np.empty((ob.n, ob.dim))
        for i in range(ob.n):
            rows = slice(ob.offsets[i], ob.offsets[i + 1])
            C = self._apply_curvature(self._times(ob.X[rows], ob.layout.matrix(V[i])), rows)
            out[i] = self._t_times(ob.X[rows], C).T.reshape(-1) / ob.sizes[i]
        return out + ob.penalty_diagonal * V


def _logistic_rows(s: np.ndarray, y: np.ndarray):
    r"""``(values, derivatives, e)`` of the logistic loss :math:`\log(1+e^{-z})`, :math:`z=ys`, for
    every row from one exponential: with :math:`e=e^{-|z|}`, :math:`\ell=\log(1+e)+\max(-z,0)`,
    :math:`\sigma(-z)=e/(1+e)` (:math:`z\ge0`) or :math:`1/(1+e)` and :math:`\partial_s\ell=-y\,\sigma(-z)`
    (no overflow, no cancellation). The curvature :math:`\ell''=e/(1+e)^2` is left to
    :func:`_logistic_curvature` (a step needs values and gradients only); the temporaries are
    reused in place."""
    z = y * s
    e = np.abs(z)
    np.negative(e, out=e)
    np.exp(e, out=e)
    values = np.log1p(e)
    clipped = np.negative(z)
    np.maximum(clipped, 0.0, out=clipped)
    values += clipped
    sigma = np.where(z >= 0, e, 1.0)
    np.add(e, 1.0, out=clipped)                       # the temporary reused: 1 + e
    sigma /= clipped
    sigma *= y
    np.negative(sigma, out=sigma)
    return values, sigma, e


def _logistic_curvature(e: np.ndarray) -> np.ndarray:
    r""":math:`\ell''=e/(1+e)^2` of :func:`_logistic_rows`' :math:`e=e^{-|ys|}`, shape ``(N, 1)``."""
    one_e = 1.0 + e
    return (e / (one_e * one_e))[:, None]


#: up to this many classes a row's maximum is taken column by column (``K`` vectorized maxima
#: over the rows: 3x faster than numpy's reduction along a short last axis at K = 10)
COLUMNWISE_MAX_CLASSES = 32


def _row_max(S: np.ndarray) -> np.ndarray:
    """:math:`\\max_ks_{jk}` of every row (exact: a maximum does not round)."""
    if S.shape[1] > COLUMNWISE_MAX_CLASSES:
        return S.max(axis=1)
    top = S[:, 0].copy()
    for k in range(1, S.shape[1]):
        np.maximum(top, S[:, k], out=top)
    return top


def _log_sum_exp_rows(S: np.ndarray):
    r"""``(log Z + top, E)``: per row :math:`\log\sum_ke^{s_k}` shifted by the row maximum
    :math:`t` (no overflow; :math:`\log\sum_ke^{s_k-t}+t`, as ``scipy.special.logsumexp``) and the
    block :math:`E=e^{S-t}` (a new array; its row sums :math:`Z` by one matrix-vector product,
    numpy's reduction along a short last axis being 10x slower)."""
    top = _row_max(S)
    E = np.subtract(S, top[:, None])
    np.exp(E, out=E)
    Z = E @ np.ones(S.shape[1])
    return Z, top, E


def _softmax_rows(S: np.ndarray, labels: np.ndarray):
    r"""``(values, gradients, probabilities)`` of the softmax cross-entropy for every row, in one
    pass: :math:`\ell=\log\sum_ke^{s_k}-s_y`, :math:`\nabla_s\ell=p-e_y`, :math:`p=\mathrm{softmax}(s)`
    (shifted by the row maximum: no overflow; :func:`_log_sum_exp_rows`). ``labels`` are the
    positions :math:`jK+y_j` of the labels' scores in the flattened ``S``
    (:attr:`MatrixFreeObjectives.label_positions`)."""
    S = np.ascontiguousarray(S)
    Z, top, E = _log_sum_exp_rows(S)
    E /= Z[:, None]                                   # the probabilities
    values = np.log(Z)
    values += top
    values -= S.reshape(-1).take(labels)
    G = E.copy()
    G.reshape(-1)[labels] -= 1.0
    return values, G, E
