"""The DRFL paper's three "scaled benchmark datasets" (DRFL paper, §6), shipped offline.

Bai, Wong, Qiao & Ho (Wasserstein DRFL, §6) train SVMs on **breast-cancer** and **heart** and Huber
regression (ε = 1.35) on **abalone**. The copies in ``drflmodel/_data/`` are the LIBSVM-scaled
files (breast-cancer, heart) and UCI's original CSV (abalone), gzip-compressed, unmodified; the
provenance and the CC BY 4.0 attribution are in ``drflmodel/_data/README.md``.

Every loader returns a :class:`~drflmodel.data.Federation` split over ``n_clients`` like
:func:`drflmodel.datasets.breast_cancer` (``partition="iid"`` by default, as the paper splits its
data "randomly"), or ``(X, y)`` arrays with ``return_X_y=True`` (what the paper-figures example
uses, since it splits train/test itself). Features are in :math:`[-1, 1]` (LIBSVM's ``svm-scale``:
:math:`x' = 2(x-\\min)/(\\max-\\min) - 1` per column over all rows); classification labels are in
:math:`\\{-1,+1\\}`.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

import numpy as np

from ._validation import check_int
from .data import Federation
from .errors import InvalidDataError, InvalidParameterError

__all__ = ["breast_cancer_original", "heart", "abalone", "libsvm_scale", "ABALONE_SEX_CODES"]

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


def _finish(X, y, task, n_clients, partition, alpha, seed, add_intercept, return_X_y):
    from .datasets import _split_rows, add_intercept as prepend_ones

    if not isinstance(return_X_y, bool):
        raise InvalidParameterError(f"return_X_y must be True or False; got {return_X_y!r}")
    if not isinstance(add_intercept, bool):
        raise InvalidParameterError(f"add_intercept must be True or False; got {add_intercept!r}")
    X, y = np.array(X, float), np.array(y, float)
    if add_intercept:
        X = prepend_ones(X)
    if return_X_y:
        return X, y
    n_clients = check_int(n_clients, "n_clients", low=1, high=len(y))
    return _split_rows(X, y, partition, n_clients, alpha, seed, 1, task)


def breast_cancer_original(n_clients: int = 3, partition: str = "iid", alpha: float = 0.5,
                           keep_code_number: bool = False, add_intercept: bool = False,
                           seed: int = 0, return_X_y: bool = False):
    """Breast Cancer Wisconsin (**Original**; Wolberg 1992, UCI DOI 10.24432/C5HP4Z) as LIBSVM's
    ``breast-cancer_scale``: 683 rows (the 16 of 699 with a missing value dropped), labels
    ``-1`` = benign (444 rows, raw class 2), ``+1`` = malignant (239 rows, raw class 4).

    Features, each scaled to :math:`[-1, 1]` by LIBSVM: **feature 1 is the scaled sample code
    number** (a patient identifier) and features 2–10 are the nine clinical attributes (clump
    thickness, uniformity of cell size, uniformity of cell shape, marginal adhesion, single
    epithelial cell size, bare nuclei, bland chromatin, normal nucleoli, mitoses; integers 1–10
    before scaling). By default the code number is **dropped** (``keep_code_number=False``, 9
    features): an identifier carries no signal about the tumour, and a linear model fitted on it
    would learn the order in which samples were collected (the UCI file is in collection order,
    from 1989 to 1991). ``keep_code_number=True`` keeps the LIBSVM file's 10 columns.

    No intercept by default (the DRFL paper's models have none); ``add_intercept=True`` prepends
    the constant column. ``partition``/``alpha``/``seed`` split the rows over ``n_clients`` as
    :func:`drflmodel.datasets.breast_cancer` does; ``return_X_y=True`` returns the arrays instead.
    """
    if not isinstance(keep_code_number, bool):
        raise InvalidParameterError(f"keep_code_number must be True or False; got {keep_code_number!r}")
    X, y = _read_libsvm_dense("breast-cancer_scale.gz", 10)
    X = X if keep_code_number else X[:, 1:]
    y = np.where(y > 0, 1.0, -1.0)          # LIBSVM's file stores -1 / +1 already; keep it explicit
    return _finish(X, y, "classification", n_clients, partition, alpha, seed, add_intercept, return_X_y)


def heart(n_clients: int = 3, partition: str = "iid", alpha: float = 0.5, add_intercept: bool = False,
          seed: int = 0, return_X_y: bool = False):
    """Statlog (Heart) (UCI DOI 10.24432/C57303) as LIBSVM's ``heart_scale``: 270 rows, 13
    attributes (age, sex, chest pain type, resting blood pressure, serum cholesterol, fasting blood
    sugar > 120, resting ECG, maximum heart rate, exercise-induced angina, ST depression, slope of
    the peak ST segment, number of major vessels, thal), each scaled to :math:`[-1, 1]`. Labels:
    ``-1`` = absence of heart disease (150 rows), ``+1`` = presence (120 rows).

    Arguments as in :func:`breast_cancer_original` (no intercept by default, the paper's models
    have none).
    """
    X, y = _read_libsvm_dense("heart_scale.gz", 13)
    y = np.where(y > 0, 1.0, -1.0)
    return _finish(X, y, "classification", n_clients, partition, alpha, seed, add_intercept, return_X_y)


def abalone(n_clients: int = 3, partition: str = "iid", alpha: float = 0.5, add_intercept: bool = False,
            seed: int = 0, return_X_y: bool = False):
    """Abalone (Nash et al. 1995, UCI DOI 10.24432/C55C7W): 4,177 rows, target = **rings** (an
    integer age proxy, 1–29, unscaled, as in LIBSVM's ``abalone_scale``).

    Features as LIBSVM encodes them: Sex as a number, M = 1, F = 2, I = 3
    (:data:`ABALONE_SEX_CODES`), then the seven measurements (length, diameter, height, whole,
    shucked, viscera and shell weight); all eight columns scaled to :math:`[-1, 1]` over all rows
    (:func:`libsvm_scale`), so Sex becomes M = -1, F = 0, I = +1. (One ordinal column for a
    categorical attribute is LIBSVM's choice, kept for fidelity to the paper's data.)

    Arguments as in :func:`breast_cancer_original`; ``partition="dirichlet"`` bins the rings into
    quantile classes first.
    """
    X, rings, _ = _read_abalone_csv()
    return _finish(libsvm_scale(X), rings, "regression", n_clients, partition, alpha, seed,
                   add_intercept, return_X_y)
