"""Built-in data: real data sets and the seed papers' synthetic recipes, plus partitioners.

Every function returns a validated :class:`~drflmodel.data.Federation` (horizontal FL) or
:class:`~drflmodel.data.VerticalFederation` (feature-partitioned FL). Conventions:

* An intercept is an explicit constant-one column (:func:`add_intercept`), always the **first**
  column (of the active party's block for vertical data); it is never a hidden variable.
* Classification labels are in :math:`\\{-1, +1\\}`; each loader states which class is ``+1``.
* Every random choice takes a ``seed`` (``numpy.random.default_rng(seed)``); the same arguments
  give the same data.
* Real data sets need no network: Palmer penguins comes from the ``palmerpenguins`` package,
  breast cancer / diabetes from scikit-learn's bundled files (install both with
  ``pip install drflmodel[data]``), and Adult (LIBSVM ``a8a``) is shipped inside this package
  (``drflmodel/_data/``, see the README there for provenance and licence).

Contents
--------
* :func:`add_intercept`
* :func:`penguins` -- relative-fairness paper, spec relative-fairness §6 / §14.1 item 4.
* :func:`synthetic_regression` -- Scaff-PD's synthetic recipe, spec scaffpd §5.
* :func:`synthetic_classification` -- the classification analogue (per-client logistic models).
* :func:`breast_cancer`, :func:`diabetes` -- scikit-learn's bundled data, split over clients.
* :func:`dirichlet_partition`, :func:`iid_partition` -- partitioners (spec scaffpd §8.1 item 25).
* :func:`adult`, :func:`adult_horizontal`, :func:`adult_attribute_blocks` -- real data with a
  sensitive attribute (spec fair-vfl-deo §2.3, N4, N5).
* :func:`synthetic_vertical` -- vertical data with a controllable group shift.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources
from typing import Sequence

import numpy as np

from ._validation import as_finite_array, check_choice, check_int, check_real
from .data import Client, Federation, VerticalFederation
from .errors import InvalidDataError, InvalidParameterError

__all__ = [
    "add_intercept",
    "penguins",
    "synthetic_regression",
    "synthetic_classification",
    "breast_cancer",
    "diabetes",
    "dirichlet_partition",
    "iid_partition",
    "adult",
    "adult_horizontal",
    "adult_attribute_blocks",
    "synthetic_vertical",
    "ADULT_ATTRIBUTES",
    "ADULT_FEMALE_COLUMN",
    "ADULT_MALE_COLUMN",
    "PENGUIN_SPECIES",
]

_DATA_EXTRA_HINT = "install the optional data dependencies with `pip install drflmodel[data]`"


# ---------------------------------------------------------------------------------- helpers
def add_intercept(X) -> np.ndarray:
    """Return ``[1, X]``: ``X`` (shape ``(N, d)``, finite) with a constant-one column prepended.

    The intercept of a linear model is thus :math:`\\theta_0` (the first coordinate) and is
    regularized/constrained like any other coordinate unless a problem says otherwise.
    """
    X = as_finite_array(X, "X", ndim=2)
    return np.hstack([np.ones((X.shape[0], 1)), X])


_prepend_ones = add_intercept  # alias: several loaders have a boolean argument named add_intercept


def _standardize(X: np.ndarray) -> np.ndarray:
    """Columnwise :math:`(x - \\bar x)/s` with the mean and the population standard deviation
    (``ddof=0``) of the rows given; constant columns are only centred (``s`` replaced by 1)."""
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X - mu) / sd


def _check_seed(seed, name: str = "seed"):
    if seed is None:
        return None
    return check_int(seed, name, low=0)


def _sample_counts(samples, n_clients: int, name: str = "samples") -> list[int]:
    """``samples`` as a list of ``n_clients`` positive integers (an int means all equal)."""
    if isinstance(samples, (int, np.integer)) and not isinstance(samples, bool):
        return [check_int(samples, name, low=1)] * n_clients
    try:
        seq = list(samples)
    except TypeError:
        raise InvalidParameterError(
            f"{name} must be a positive integer or a list of {n_clients} positive integers; "
            f"got {samples!r}") from None
    if len(seq) != n_clients:
        raise InvalidParameterError(
            f"{name} must have one entry per client ({n_clients}); got {len(seq)} entries")
    return [check_int(s, f"{name}[{i}]", low=1) for i, s in enumerate(seq)]


def _import_optional(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this data set needs the optional package {module!r}; {_DATA_EXTRA_HINT}") from exc


# ---------------------------------------------------------------------------------- penguins
PENGUIN_SPECIES = ("Adelie", "Chinstrap", "Gentoo")
_PENGUIN_FEATURES = ("bill_depth_mm", "flipper_length_mm")
_PENGUIN_TARGET = "bill_length_mm"


def penguins(n_per_species: int | None = None, add_intercept: bool = True,
             standardize: bool = False) -> Federation:
    """Palmer penguins as three regression clients (spec relative-fairness §6, §14.1 item 4).

    Recipe (exactly):

    1. ``palmerpenguins.load_penguins()`` (the package's ``penguins.csv``, 344 rows);
    2. drop the rows with a missing value in any of ``bill_length_mm``, ``bill_depth_mm``,
       ``flipper_length_mm`` (2 rows: one Adelie, one Gentoo), keeping file order;
    3. client *i* = species *i* in the order Adelie, Chinstrap, Gentoo; its rows in file order;
       with ``n_per_species`` only its first ``n_per_species`` rows
       (``n_per_species=10`` is the paper's simulation setup, :math:`j=1..30`);
    4. response :math:`y =` ``bill_length_mm``; features ``(bill_depth_mm, flipper_length_mm)``,
       with a leading intercept column when ``add_intercept`` (so
       :math:`\\theta = (\\theta_1, \\theta_2, \\theta_3)` as in the paper's model
       bill length = θ₁ + θ₂·depth + θ₃·flipper).

    ``standardize=True`` centres and scales the two features with the mean and the population
    standard deviation (``ddof=0``) of the pooled rows returned (all three species after step 3),
    before the intercept is added; ``y`` stays in millimetres. The paper uses raw units.

    Requires the optional ``palmerpenguins`` package (``pip install drflmodel[data]``).
    """
    if n_per_species is not None:
        n_per_species = check_int(n_per_species, "n_per_species", low=1)
    pp = _import_optional("palmerpenguins")
    df = pp.load_penguins()
    cols = [_PENGUIN_TARGET, *_PENGUIN_FEATURES]
    df = df.dropna(subset=cols)
    parts = []
    for sp in PENGUIN_SPECIES:
        sub = df[df["species"] == sp]
        if n_per_species is not None:
            if n_per_species > len(sub):
                raise InvalidParameterError(
                    f"n_per_species must lie in [1, {len(sub)}] ({sp} has {len(sub)} complete rows); "
                    f"got {n_per_species}")
            sub = sub.iloc[:n_per_species]
        parts.append((sp, sub[list(_PENGUIN_FEATURES)].to_numpy(float),
                      sub[_PENGUIN_TARGET].to_numpy(float)))
    if standardize:
        pooled = np.vstack([X for _, X, _ in parts])
        mu, sd = pooled.mean(axis=0), pooled.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        parts = [(sp, (X - mu) / sd, y) for sp, X, y in parts]
    clients = [Client(_prepend_ones(X) if add_intercept else X, y, name=sp) for sp, X, y in parts]
    return Federation(clients, task="regression")


# ---------------------------------------------------------------------------------- synthetic
def synthetic_regression(n_clients: int = 5, dim: int = 10, samples=100, scale: float = 1.0,
                         heterogeneity: float = 0.1, noise: float = 0.0, seed: int = 0,
                         return_params: bool = False):
    """Scaff-PD's synthetic regression with client-specific concept shift (spec scaffpd §5).

    With ``rng = numpy.random.default_rng(seed)`` and in this draw order:

    1. shared :math:`\\hat x \\sim \\mathcal N(0, c^2 I_d)` with :math:`c =` ``scale``;
    2. per-client shifts :math:`\\delta_i \\sim \\mathcal N(0, \\sigma^2 I_d)`, :math:`\\sigma =`
       ``heterogeneity`` (an ``(n_clients, d)`` draw);
    3. for each client *i* in turn: features :math:`a_i^j \\sim \\mathcal N(0, I_d)`
       (``(m_i, d)``), then, only if ``noise > 0``, noise :math:`\\epsilon_i^j \\sim \\mathcal N(0, 1)`;
    4. :math:`y_i^j = \\langle a_i^j, \\hat x + \\delta_i\\rangle + \\texttt{noise}\\cdot\\epsilon_i^j`.

    The paper uses ``noise = 0`` (the default), :math:`N=5`, :math:`d=10`, :math:`m_i=100`;
    it does not give :math:`c` or :math:`\\sigma`. No intercept column (the paper has none).
    ``samples`` is an int (all clients) or a list of per-client sizes.

    Returns the :class:`Federation`, or ``(federation, {"x_hat": ..., "shifts": ...})`` when
    ``return_params`` (``shifts[i]`` is :math:`\\delta_i`; client *i*'s true model is
    ``x_hat + shifts[i]``).
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    dim = check_int(dim, "dim", low=1)
    sizes = _sample_counts(samples, n_clients)
    scale = check_real(scale, "scale", low=0.0)
    heterogeneity = check_real(heterogeneity, "heterogeneity", low=0.0)
    noise = check_real(noise, "noise", low=0.0)
    rng = np.random.default_rng(_check_seed(seed))
    x_hat = scale * rng.standard_normal(dim)
    shifts = heterogeneity * rng.standard_normal((n_clients, dim))
    Xs, ys = [], []
    for i, m in enumerate(sizes):
        A = rng.standard_normal((m, dim))
        y = A @ (x_hat + shifts[i])
        if noise > 0:
            y = y + noise * rng.standard_normal(m)
        Xs.append(A)
        ys.append(y)
    fed = Federation.from_arrays(Xs, ys, task="regression")
    if return_params:
        return fed, {"x_hat": x_hat, "shifts": shifts}
    return fed


def synthetic_classification(n_clients: int = 5, dim: int = 10, samples=100,
                             heterogeneity: float = 0.5, seed: int = 0,
                             add_intercept: bool = False, scale: float = 1.0,
                             return_params: bool = False):
    """Binary classification with per-client shifted logistic models (the analogue of
    :func:`synthetic_regression`; concept shift across clients).

    With ``rng = numpy.random.default_rng(seed)`` and in this draw order:

    1. shared :math:`\\hat w \\sim \\mathcal N(0, c^2 I_d)` with :math:`c =` ``scale``;
    2. per-client shifts :math:`\\delta_i \\sim \\mathcal N(0, \\sigma^2 I_d)`, :math:`\\sigma =`
       ``heterogeneity``; client *i*'s true model is :math:`w_i = \\hat w + \\delta_i`;
    3. for each client in turn: features :math:`x_i^j \\sim \\mathcal N(0, I_d)`, then uniforms
       :math:`U_i^j \\sim \\mathcal U(0, 1)`;
    4. :math:`y_i^j = +1` if :math:`U_i^j < \\sigma(\\langle x_i^j, w_i\\rangle)` with
       :math:`\\sigma(t) = 1/(1+e^{-t})`, else :math:`-1`; i.e. :math:`P(y=+1\\mid x) =
       \\sigma(\\langle x, w_i\\rangle)`, a logistic model without bias.

    ``add_intercept`` prepends a constant-one column to the features *after* generation (the true
    models have no bias, so the best intercept is near zero). Labels are in {-1, +1}; a client
    may hold a single class when its sample is tiny.

    Returns the :class:`Federation` (task ``"classification"``), or
    ``(federation, {"w_hat": ..., "shifts": ...})`` when ``return_params``.
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    dim = check_int(dim, "dim", low=1)
    sizes = _sample_counts(samples, n_clients)
    heterogeneity = check_real(heterogeneity, "heterogeneity", low=0.0)
    scale = check_real(scale, "scale", low=0.0)
    rng = np.random.default_rng(_check_seed(seed))
    w_hat = scale * rng.standard_normal(dim)
    shifts = heterogeneity * rng.standard_normal((n_clients, dim))
    Xs, ys = [], []
    for i, m in enumerate(sizes):
        X = rng.standard_normal((m, dim))
        u = rng.random(m)
        prob = 1.0 / (1.0 + np.exp(-(X @ (w_hat + shifts[i]))))
        ys.append(np.where(u < prob, 1.0, -1.0))
        Xs.append(_prepend_ones(X) if add_intercept else X)
    fed = Federation.from_arrays(Xs, ys, task="classification")
    if return_params:
        return fed, {"w_hat": w_hat, "shifts": shifts}
    return fed
