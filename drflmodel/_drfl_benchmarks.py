"""The DRFL paper's three "scaled benchmark datasets" (DRFL paper, §6), shipped offline.

Bai, Wong, Qiao & Ho (Wasserstein DRFL, §6) train SVMs on **breast-cancer** and **heart** and Huber
regression (ε = 1.35) on **abalone**. The copies in ``drflmodel/_data/`` are the LIBSVM-scaled
files (breast-cancer, heart) and UCI's original CSV (abalone), gzip-compressed, unmodified; the
provenance and the CC BY 4.0 attribution are in ``drflmodel/_data/README.md``.

This module reads the shipped files into arrays (``read_*``); the loaders
:func:`drflmodel.datasets.breast_cancer_original`, :func:`~drflmodel.datasets.heart` and
:func:`~drflmodel.datasets.abalone` split them into a :class:`~drflmodel.data.Federation` over
``n_clients`` like :func:`drflmodel.datasets.breast_cancer` (``partition="iid"`` by default, as the
paper splits its data "randomly"), or return ``(X, y)`` arrays with ``return_X_y=True`` (what the
paper-figures example uses, since it splits train/test itself). Features are in :math:`[-1, 1]` (LIBSVM's ``svm-scale``:
:math:`x' = 2(x-\\min)/(\\max-\\min) - 1` per column over all rows); classification labels are in
:math:`\\{-1,+1\\}`.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

import numpy as np

from .errors import InvalidDataError, InvalidParameterError

__all__ = ["read_breast_cancer_original", "read_heart", "read_abalone", "libsvm_scale", "ABALONE_SEX_CODES"]

#: LIBSVM's ``abalone_scale`` encodes UCI's Sex column as M = 1, F = 2, I = 3 (the order of first
#: appearance in the UCI file) before scaling, so M, F, I become -1, 0, +1.
ABALONE_SEX_CODES = {"M": 1.0, "F": 2.0, "I": 3.0}


def _open_shipped(fname: str):
    ref = resources.files("drflmodel").joinpath("_data").joinpath(fname)
    return gzip.open(ref.open("rb"), "rt", encoding="ascii")


@functools.lru_cache(maxsize=4)
def _read_libsvm_dense(fname: str, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse a shipped gzip LIBSVM file (``label col:value ...``, 1-based columns, zero entries
    omitted) into a dense float ``(n, n_features)`` array and float labels (cached, read-only)."""
    with _open_shipped(fname) as f:
        lines = [ln.split() for ln in f.read().splitlines() if ln.strip()]
    y = np.array([float(tokens[0]) for tokens in lines])
    X = np.zeros((len(lines), n_features))
    for i, tokens in enumerate(lines):
        for pair in tokens[1:]:
            col, val = pair.split(":")
            j = int(col)
            if not 1 <= j <= n_features:
                raise InvalidDataError(f"{fname}: column index {j} outside 1..{n_features}")
            X[i, j - 1] = float(val)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@functools.lru_cache(maxsize=1)
def _read_abalone_csv() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """UCI's abalone CSV: ``(X, rings, header)`` with Sex coded by :data:`ABALONE_SEX_CODES`."""
    with _open_shipped("abalone.csv.gz") as f:
        header, *rows = [ln.split(",") for ln in f.read().splitlines() if ln.strip()]
    unknown = sorted({r[0] for r in rows} - set(ABALONE_SEX_CODES))
    if unknown:
        raise InvalidDataError(f"abalone.csv.gz: unknown Sex codes {unknown}")
    X = np.array([[ABALONE_SEX_CODES[r[0]], *map(float, r[1:-1])] for r in rows])
    rings = np.array([float(r[-1]) for r in rows])
    X.setflags(write=False)
    rings.setflags(write=False)
    return X, rings, tuple(header)


def libsvm_scale(X) -> np.ndarray:
    """LIBSVM ``svm-scale`` to :math:`[-1, 1]`: :math:`x' = 2(x-\\min_j)/(\\max_j-\\min_j) - 1` per
    column over the rows given (a constant column is an error: it cannot be scaled)."""
    X = np.asarray(X, float)
    lo, hi = X.min(axis=0), X.max(axis=0)
    if np.any(hi <= lo):
        raise InvalidDataError(f"libsvm_scale: constant column(s) {np.flatnonzero(hi <= lo).tolist()}")
    return 2.0 * (X - lo) / (hi - lo) - 1.0


def read_breast_cancer_original(keep_code_number: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of :func:`drflmodel.datasets.breast_cancer_original` (LIBSVM's
    ``breast-cancer_scale``; the sample code number dropped unless ``keep_code_number``)."""
    if not isinstance(keep_code_number, bool):
        raise InvalidParameterError(f"keep_code_number must be True or False; got {keep_code_number!r}")
    X, y = _read_libsvm_dense("breast-cancer_scale.gz", 10)
    X = X if keep_code_number else X[:, 1:]
    return X, np.where(y > 0, 1.0, -1.0)    # LIBSVM's file stores -1 / +1 already; keep it explicit


def read_heart() -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of :func:`drflmodel.datasets.heart` (LIBSVM's ``heart_scale``)."""
    X, y = _read_libsvm_dense("heart_scale.gz", 13)
    return X, np.where(y > 0, 1.0, -1.0)


def read_abalone() -> tuple[np.ndarray, np.ndarray]:
    """``(X, rings)`` of :func:`drflmodel.datasets.abalone`: UCI's CSV, all columns
    :func:`libsvm_scale` d (Sex coded by :data:`ABALONE_SEX_CODES` first)."""
    X, rings, _ = _read_abalone_csv()
    return libsvm_scale(X), rings
