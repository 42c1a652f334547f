r"""Products with float32 features in float32 arithmetic -- for the **steps only**, never a certificate.

A float32 GEMM runs about twice as fast as the float64 one (and needs no cast of the rows), which is
what an uncertified solver given float32 features does. Its rounding error is not small enough to
certify with: the textbook bound of an inner product of length :math:`d` in float32 is
:math:`\gamma_d|x|^\top|w|`, :math:`\gamma_d=du/(1-du)`, :math:`u=2^{-24}` (N. Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., §3.1), i.e. :math:`1.2\cdot10^{-4}` relative at
:math:`d=2{,}048` -- a hundred times the default gap. So the Hessian-free route iterates on these
products (its steps only need the typical error, which averages over the rows to far below the
gradients its stopping test asks for) and takes every certificate from a float64 pass
(:mod:`drflmodel._float64_products`) at the point it certifies.

Both helpers return float64 arrays: ``times`` casts the float32 scores, ``t_times`` sums float32
products of :data:`CHUNK_ROWS` rows at a time in float64 (the error of a float32 sum grows with the
number of rows summed).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_ROWS", "times", "t_times"]

#: rows per float32 product (16,384 rows x 200 outputs: a 12.5 MiB float32 block)
CHUNK_ROWS = 16_384


def _chunks(n: int):
    for a in range(0, n, CHUNK_ROWS):
        yield slice(a, min(a + CHUNK_ROWS, n))


def times(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """:math:`XW` from a float32 product (``X`` float32 ``(N, d)``, ``W`` ``(d, ...)`` rounded to
    float32), returned in float64."""
    W32 = np.asarray(W, np.float32)
    out = np.empty((X.shape[0],) + np.shape(W)[1:])
    for r in _chunks(X.shape[0]):
        out[r] = X[r] @ W32
    return out


def t_times(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """:math:`X^\\top D` from float32 products of :data:`CHUNK_ROWS` rows, summed in float64."""
    out = np.zeros((X.shape[1],) + np.shape(D)[1:])
    for r in _chunks(X.shape[0]):
        out += X[r].T @ np.asarray(D[r], np.float32)
    return out
