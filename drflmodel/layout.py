r"""The one parameter layout of every linear model in drflmodel.

A model with :math:`d` features (the intercept, when there is one, is an explicit constant column)
and :math:`K` outputs has a parameter matrix :math:`W\in\mathbb R^{d\times K}` and scores
:math:`s=W^\top x\in\mathbb R^K`; scalar-score losses (regression, binary classification) are
:math:`K=1`, the softmax loss :class:`~drflmodel.losses.Multinomial` has :math:`K\ge2`. Wherever a
vector is needed -- ``Solution.theta``, ``Trace.theta``, :func:`drflmodel.verify`, the Flower
arrays, the estimators -- the parameter is the **class-major** flattening

.. math::

    \theta = (w_1^\top, \dots, w_K^\top)^\top\in\mathbb R^{Kd},\qquad \theta_{kd+j}=W_{jk},

i.e. ``theta.reshape(K, d)[k]`` is class *k*'s weight vector -- scikit-learn's ``coef_[k]`` with the
intercept column kept in place. For :math:`K=1` this is the familiar :math:`\theta\in\mathbb R^d`.

**Identifiable parametrization.** The softmax loss is invariant to a common shift of the scores,
so :math:`W` and :math:`W+c\mathbf 1^\top` (any :math:`c` supported on the *unpenalized* features)
give the same objective; on penalized features the ridge term picks the representative whose class
columns sum to zero. drflmodel reports, and :func:`drflmodel.verify` measures distances in, the
**centred** representative: :math:`\sum_kW_{jk}=0` for every unpenalized feature :math:`j`
(:meth:`ParameterLayout.identifiable`). With :math:`K=1` nothing is invariant and the map is the
identity. (This is the convention of scikit-learn's multinomial ``LogisticRegression``, whose
unpenalized intercepts sum to zero.)
"""

from __future__ import annotations

import numpy as np

from ._validation import check_int
from .errors import InvalidDataError, InvalidParameterError

__all__ = ["ParameterLayout"]


class ParameterLayout:
    """Shapes and conventions of :math:`\\theta` (module docstring).

    Parameters
    ----------
    n_features : :math:`d` (the intercept column included).
    n_outputs : :math:`K` (1 for scalar-score losses).
    intercept_column : index of the intercept column among the features, or ``None``.
    unpenalized : indices of the features whose coefficients the ridge term leaves free (all of
        them when ``l2 = 0``); with :math:`K\\ge2` their class-shift is an invariance.
    """

    def __init__(self, n_features: int, n_outputs: int = 1, intercept_column=None, unpenalized=()):
        self.n_features = check_int(n_features, "n_features", low=1)
        self.n_outputs = check_int(n_outputs, "n_outputs", low=1)
        self.intercept_column = (None if intercept_column is None
                                 else check_int(intercept_column, "intercept_column", 0, self.n_features - 1))
        self.unpenalized = np.array(sorted({check_int(j, "unpenalized", 0, self.n_features - 1)
                                            for j in unpenalized}), dtype=int)

    @property
    def size(self) -> int:
        """:math:`Kd`, the length of :math:`\\theta`."""
        return self.n_features * self.n_outputs

    @property
    def shift_invariant(self) -> np.ndarray:
        """Features whose class-shift leaves the objective unchanged (empty for :math:`K=1`)."""
        return self.unpenalized if self.n_outputs > 1 else np.zeros(0, int)

    # ------------------------------------------------------------------ vector <-> matrix
    def _check_theta(self, theta, name: str = "theta") -> np.ndarray:
        theta = np.asarray(theta, float)
        if theta.shape[-1:] != (self.size,):
            raise InvalidDataError(
                f"{name} must have {self.size} = {self.n_outputs} x {self.n_features} entries in its last "
                f"axis (class-major, drflmodel.layout); got shape {theta.shape}")
        return theta

    def matrix(self, theta) -> np.ndarray:
        """:math:`W` (shape ``(..., d, K)``) from :math:`\\theta` (shape ``(..., Kd)``)."""
        theta = self._check_theta(theta)
        return np.swapaxes(theta.reshape(theta.shape[:-1] + (self.n_outputs, self.n_features)), -1, -2)

    def vector(self, W) -> np.ndarray:
        """:math:`\\theta` (shape ``(..., Kd)``) from :math:`W` (shape ``(..., d, K)``)."""
        W = np.asarray(W, float)
        if W.shape[-2:] != (self.n_features, self.n_outputs):
            raise InvalidDataError(f"W must have shape (..., {self.n_features}, {self.n_outputs}); got {W.shape}")
        return np.swapaxes(W, -1, -2).reshape(W.shape[:-2] + (self.size,))

    # ------------------------------------------------------------------ identifiability
    def identifiable(self, theta) -> np.ndarray:
        """The centred representative of :math:`\\theta` (module docstring): for every
        shift-invariant feature :math:`j`, :math:`W_{j\\cdot}\\leftarrow W_{j\\cdot}-\\mathrm{mean}_kW_{jk}`.
        Accepts ``(..., Kd)``; the identity when nothing is invariant. A non-finite entry (NaN or
        inf, e.g. a diverged iterate) has no representative: :class:`InvalidDataError` naming it."""
        theta = self._check_theta(theta)
        bad = np.argwhere(~np.isfinite(theta))
        if bad.size:
            where = tuple(int(i) for i in bad[0])
            raise InvalidDataError(f"theta has {len(bad)} non-finite entr{'y' if len(bad) == 1 else 'ies'} (first "
                                   f"{float(theta[where])} at index {where if theta.ndim > 1 else where[0]}): a NaN or "
                                   "infinite model has no identifiable representative")
        free = self.shift_invariant
        if free.size == 0:
            return theta.copy()
        blocks = theta.reshape(theta.shape[:-1] + (self.n_outputs, self.n_features)).copy()
        blocks[..., free] -= blocks[..., free].mean(axis=-2, keepdims=True)
        return blocks.reshape(theta.shape)

    def invariant_basis(self) -> np.ndarray:
        """An orthonormal basis (columns, shape ``(Kd, m)``) of the directions along which the
        objective is constant: :math:`e_j\\otimes\\mathbf 1_K/\\sqrt K` for every shift-invariant
        feature :math:`j`."""
        free = self.shift_invariant
        B = np.zeros((self.size, free.size))
        for col, j in enumerate(free):
            B[j + self.n_features * np.arange(self.n_outputs), col] = 1.0 / np.sqrt(self.n_outputs)
        return B

    # ------------------------------------------------------------------ scikit-learn
    def to_sklearn(self, theta, regressor: bool = False):
        """``(coef_, intercept_)`` as a fitted scikit-learn linear model stores them.

        Classifiers: ``coef_`` of shape ``(K, d')`` -- ``(1, d')`` for a binary model, whose score
        is :math:`w_1-w_0` when :math:`K=2` -- and ``intercept_`` of shape ``(K,)``/``(1,)``;
        regressors (``regressor=True``, :math:`K=1`): ``coef_`` of shape ``(d',)`` and a float
        ``intercept_``. :math:`d'` excludes the intercept column; without one the intercept is 0.
        """
        W = self.matrix(self.identifiable(theta))
        if self.n_outputs == 2:                               # binary multinomial: one score
            W = (W[:, 1] - W[:, 0])[:, None]
        j = self.intercept_column
        keep = [c for c in range(self.n_features) if c != j]
        coef, intercept = W[keep].T, (W[j] if j is not None else np.zeros(W.shape[1]))
        if regressor:
            if self.n_outputs != 1:
                raise InvalidParameterError("a regressor has one output; this layout has "
                                            f"{self.n_outputs}")
            return coef[0].copy(), float(intercept[0])
        return coef.copy(), np.asarray(intercept, float).copy()

    def from_sklearn(self, coef, intercept=None) -> np.ndarray:
        """:math:`\\theta` from a scikit-learn ``coef_`` / ``intercept_`` (the inverse of
        :meth:`to_sklearn`; a binary ``(1, d')`` model becomes the centred :math:`K=2` pair
        :math:`(-w/2, w/2)` under a multinomial layout). Shapes are checked exactly: an array that
        could be read two ways is refused, never reshaped."""
        coef = np.asarray(coef, float)
        d_prime = self.n_features - (self.intercept_column is not None)
        rows = 1 if self.n_outputs in (1, 2) else self.n_outputs
        if coef.ndim == 1 and self.n_outputs == 1:
            coef = coef[None, :]
        if coef.shape != (rows, d_prime) and not (self.n_outputs == 2 and coef.shape == (2, d_prime)):
            raise InvalidDataError(
                f"coef_ must have shape ({rows}, {d_prime}) for this model ({self.n_outputs} output(s), "
                f"{self.n_features} features{' incl. the intercept column' if d_prime < self.n_features else ''}); "
                f"got {coef.shape}")
        if intercept is None:
            b = np.zeros(coef.shape[0])
        else:
            b = np.atleast_1d(np.asarray(intercept, float))
            if b.shape != (coef.shape[0],):
                raise InvalidDataError(f"intercept_ must have shape ({coef.shape[0]},); got {b.shape}")
        if self.intercept_column is None and np.any(b != 0):
            raise InvalidDataError("intercept_ is nonzero but the data have no intercept column "
                                   "(add one with add_intercept=True)")
        full = np.zeros((coef.shape[0], self.n_features))
        keep = [c for c in range(self.n_features) if c != self.intercept_column]
        full[:, keep] = coef
        if self.intercept_column is not None:
            full[:, self.intercept_column] = b
        if self.n_outputs == 2 and full.shape[0] == 1:
            full = np.vstack([-full[0] / 2, full[0] / 2])
        return full.reshape(-1)

    def to_dict(self) -> dict:
        return {"n_features": self.n_features, "n_outputs": self.n_outputs,
                "intercept_column": self.intercept_column, "unpenalized": self.unpenalized.tolist(),
                "order": "class-major: theta[k*d + j] = W[j, k]"}

    def __repr__(self) -> str:
        return (f"ParameterLayout(n_features={self.n_features}, n_outputs={self.n_outputs}, "
                f"intercept_column={self.intercept_column}, unpenalized={self.unpenalized.tolist()})")
