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
* :func:`penguins` -- the relative-fairness paper's simulation (§4.3, Appendix J.1).
* :func:`synthetic_regression` -- the Scaff-PD paper's synthetic recipe (§C.1).
* :func:`synthetic_classification` -- the classification analogue (per-client logistic models).
* :func:`breast_cancer`, :func:`diabetes` -- scikit-learn's bundled data, split over clients.
* :func:`dirichlet_partition`, :func:`iid_partition`, :func:`imbalance` -- partitioners and
  Scaff-PD's size imbalance (Scaff-PD paper, §C.2).
* :func:`adult`, :func:`adult_horizontal`, :func:`adult_attribute_blocks` -- real data with a
  sensitive attribute (fair-VFL paper, §5).
* :func:`synthetic_vertical` -- vertical data with a controllable group shift.
* :func:`breast_cancer_original`, :func:`heart`, :func:`abalone` -- the DRFL paper's three scaled
  benchmark sets (DRFL paper, §6), shipped in ``drflmodel/_data/`` (module
  :mod:`drflmodel._drfl_benchmarks`).
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

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
    "digits",
    "iris",
    "penguin_species",
    "synthetic_multiclass",
    "gaussian_mixture",
    "dirichlet_partition",
    "iid_partition",
    "imbalance",
    "adult",
    "adult_arrays",
    "adult_horizontal",
    "adult_attribute_blocks",
    "synthetic_vertical",
    "breast_cancer_original",
    "heart",
    "abalone",
    "ADULT_ATTRIBUTES",
    "ADULT_FEMALE_COLUMN",
    "ADULT_MALE_COLUMN",
    "PENGUIN_SPECIES",
]

from . import _drfl_benchmarks as _drfl  # noqa: E402  (the shipped files of the DRFL benchmark loaders)

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
    """Palmer penguins as three regression clients (relative-fairness paper, §4.3 and Appendix J.1;
    the paper takes "the first 10 samples from each species" without saying how missing values
    are handled: the recipe below drops them first).

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
    """Scaff-PD's synthetic regression with client-specific concept shift (Scaff-PD paper, §C.1).

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


# ---------------------------------------------------------------------------------- partitions
def _check_Xy(X, y):
    X = as_finite_array(X, "X", ndim=2)
    y = as_finite_array(y, "y", ndim=1)
    if X.shape[0] != y.shape[0]:
        raise InvalidDataError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    if X.shape[0] < 1:
        raise InvalidDataError("X must hold at least one row")
    return X, y


def _quantile_classes(y: np.ndarray, n_bins: int) -> np.ndarray:
    """Class index in ``0..n_bins-1`` of each target: with the inner edges
    :math:`e_k` = the :math:`k/B` empirical quantiles (``numpy.quantile``, linear interpolation,
    :math:`k=1..B-1`) and :math:`e_0=-\\infty`, :math:`e_B=+\\infty`, bin *k* is
    :math:`[e_k, e_{k+1})` (a value equal to an edge goes to the upper bin). With distinct
    targets the bins hold :math:`N/B` rows up to rounding; ties can leave a bin empty, which the
    partition tolerates."""
    edges = np.quantile(y, np.arange(1, n_bins) / n_bins)
    return np.searchsorted(edges, y, side="right")


def _one_name(value, flower_value, name: str, flower_name: str, default=None):
    """An argument given by drflmodel's name or by Flower Datasets' (not both, unless equal)."""
    if value is not None and flower_value is not None and value != flower_value:
        raise InvalidParameterError(f"{name} and {flower_name} name the same argument (Flower Datasets calls it "
                                    f"{flower_name}); got {name}={value!r} and {flower_name}={flower_value!r}")
    return value if value is not None else (flower_value if flower_value is not None else default)


def iid_partition(n_rows: int, n_clients: int | None = None, seed: int = 42, *,
                  num_partitions: int | None = None) -> list[np.ndarray]:
    """Uniformly random split of ``range(n_rows)`` into ``n_clients`` parts of sizes differing by
    at most one (a seeded permutation cut by ``numpy.array_split``); each part sorted.

    ``num_partitions`` is Flower Datasets' name for ``n_clients``; the default ``seed`` is 42, as
    Flower's (``FederatedDataset`` shuffles with seed 42 before ``IidPartitioner`` cuts it)."""
    n_rows = check_int(n_rows, "n_rows", low=1)
    n_clients = _one_name(n_clients, num_partitions, "n_clients", "num_partitions")
    if n_clients is None:
        raise InvalidParameterError("n_clients (or num_partitions) is required")
    n_clients = check_int(n_clients, "n_clients", low=1, high=n_rows)
    perm = np.random.default_rng(_check_seed(seed)).permutation(n_rows)
    return [np.sort(p) for p in np.array_split(perm, n_clients)]


def dirichlet_partition(X, y, n_clients: int | None = None, alpha: float | None = None, seed: int = 42,
                        min_size: int | None = None, task: str = "auto", n_bins: int = 5,
                        return_indices: bool = False, max_tries: int = 1000, *, num_partitions: int | None = None,
                        min_partition_size: int | None = None, partition_by=None):
    """Label-skewed Dirichlet split of ``(X, y)`` over ``n_clients`` clients
    (Li et al. 2022, NIID-Bench, as the Scaff-PD paper's §C.2 prescribes).

    For every class *k* (with rows :math:`I_k`, shuffled): draw
    :math:`p_k \\sim \\mathrm{Dir}_N(\\alpha\\mathbf 1)` and give client *j* the next
    :math:`\\lfloor |I_k| \\textstyle\\sum_{l\\le j} p_{k,l}\\rfloor - \\lfloor |I_k|
    \\sum_{l<j} p_{k,l}\\rfloor` rows of :math:`I_k` (the last client takes the rest). Small
    :math:`\\alpha` gives very skewed label mixes; :math:`\\alpha\\to\\infty` approaches an i.i.d.
    split.

    * Classes: ``task="classification"`` and ``task="multiclass"`` use the distinct values of
      ``y``; ``task="regression"`` first bins ``y`` into ``n_bins`` quantile classes
      (:func:`_quantile_classes`); ``task="auto"`` means classification iff every label is in
      {-1, +1}. A multi-class federation keeps every class index (a client may miss classes).
      ``partition_by`` (one value per row, e.g. a sensitive attribute) draws the proportions per
      value of that column instead of per class of ``y``.
    * Minimum size: if some client gets fewer than ``min_size`` rows (default 1), the whole draw
      is repeated with the same generator (deterministic given ``seed``), at most ``max_tries``
      times; then :class:`InvalidParameterError` is raised (raise ``alpha`` or lower
      ``n_clients``/``min_size``). ``n_clients * min_size > len(y)`` is rejected up front.
    * Every row goes to exactly one client; each client's rows are in the original order.
    * Flower Datasets' names are accepted (``DirichletPartitioner``'s): ``num_partitions`` for
      ``n_clients``, ``min_partition_size`` for ``min_size``, ``partition_by``; the default
      ``seed`` is 42, as Flower's. The draw is this recipe's, not Flower's partitioner's (which
      also rebalances): for Flower's own partitions use
      :meth:`drflmodel.data.Federation.from_partitions`.

    Returns a :class:`Federation` (clients ``client0..``, the detected/given task), or, with
    ``return_indices=True``, the list of ``n_clients`` sorted integer index arrays.
    """
    X, y = _check_Xy(X, y)
    N = y.shape[0]
    n_clients = _one_name(n_clients, num_partitions, "n_clients", "num_partitions")
    if n_clients is None or alpha is None:
        raise InvalidParameterError(f"{'alpha' if n_clients is not None else 'n_clients (or num_partitions)'} "
                                    "is required")
    n_clients = check_int(n_clients, "n_clients", low=1)
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
    min_size = check_int(_one_name(min_size, min_partition_size, "min_size", "min_partition_size", 1), "min_size",
                         low=0)
    task = check_choice(task, "task", ("auto", "classification", "regression", "multiclass"))
    n_bins = check_int(n_bins, "n_bins", low=1)
    max_tries = check_int(max_tries, "max_tries", low=1)
    if n_clients * min_size > N:
        raise InvalidParameterError(
            f"n_clients * min_size must be at most the number of rows {N}; "
            f"got n_clients={n_clients}, min_size={min_size}")
    if task == "auto":
        task = "classification" if np.isin(y, (-1.0, 1.0)).all() else "regression"
    if partition_by is not None:
        by = np.asarray(partition_by, dtype=object)
        if by.shape != (N,):
            raise InvalidParameterError(f"partition_by must hold one value per row ({N}); got shape {by.shape}")
        classes = np.unique(by.astype(str), return_inverse=True)[1]
    elif task in ("classification", "multiclass"):
        classes = np.unique(y, return_inverse=True)[1]
    else:
        classes = _quantile_classes(y, n_bins)
    rng = np.random.default_rng(_check_seed(seed))
    members = [np.flatnonzero(classes == k) for k in range(int(classes.max()) + 1)]
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for idx in members:
            if idx.size == 0:
                continue
            idx = rng.permutation(idx)
            p = rng.dirichlet(np.full(n_clients, alpha))
            cuts = np.floor(np.cumsum(p)[:-1] * idx.size).astype(int)
            for j, chunk in enumerate(np.split(idx, np.clip(cuts, 0, idx.size))):
                parts[j].append(chunk)
        out = [np.sort(np.concatenate(pj)) if pj else np.zeros(0, dtype=int) for pj in parts]
        if min(o.size for o in out) >= min_size:
            break
    else:
        raise InvalidParameterError(
            f"alpha={alpha}: no Dirichlet draw in max_tries={max_tries} attempts gave every one of "
            f"the n_clients={n_clients} clients at least min_size={min_size} rows; increase alpha "
            "or lower n_clients/min_size")
    if return_indices:
        return out
    return _federation_from_parts(X, y, out, task)


def _federation_from_parts(X, y, parts, task: str) -> Federation:
    """Clients ``client0..`` holding the rows ``parts[i]``; multi-class labels mapped over the
    whole ``y`` (so every client shares one class order)."""
    if task == "multiclass":
        from .data import class_indices

        index, classes = class_indices(y)
        return Federation.from_arrays([X[o] for o in parts], [index[o].astype(int) for o in parts],
                                      task=task, classes=list(range(len(classes)))) \
            ._with_classes(classes)
    return Federation.from_arrays([X[o] for o in parts], [y[o] for o in parts], task=task)


def imbalance(federation: Federation, client_fraction: float = 0.3, drop: float = 0.7,
              seed: int = 0) -> Federation:
    """Scaff-PD's size imbalance after a Dirichlet split (Scaff-PD paper, §C.2):
    pick :math:`\\mathrm{round}(\\texttt{client\\_fraction}\\cdot n)` clients uniformly at random
    (seeded) and remove a ``drop`` fraction of each one's rows, i.e. keep
    :math:`\\max(1, \\mathrm{round}((1-\\texttt{drop}) N_i))` rows drawn uniformly without
    replacement (file order kept). Other clients are unchanged. The paper uses 0.3 and 0.7.
    """
    if not isinstance(federation, Federation):
        raise InvalidDataError(f"federation must be a drflmodel.Federation; got {type(federation).__name__}")
    client_fraction = check_real(client_fraction, "client_fraction", low=0.0, high=1.0)
    drop = check_real(drop, "drop", low=0.0, high=1.0, high_open=True)
    rng = np.random.default_rng(_check_seed(seed))
    n = federation.n_clients
    chosen = set(rng.choice(n, size=int(round(client_fraction * n)), replace=False).tolist())
    clients = []
    for i, c in enumerate(federation.clients):
        if i in chosen:
            keep = max(1, int(round((1.0 - drop) * c.size)))
            rows = np.sort(rng.choice(c.size, size=keep, replace=False))
            c = Client(c.X[rows], c.y[rows], name=c.name)
        clients.append(c)
    if federation.task == "multiclass":
        return Federation(clients, task="multiclass", n_classes=federation.n_classes, classes=federation.classes)
    return Federation(clients, task=federation.task)


def _split_rows(X, y, partition, n_clients, alpha, seed, min_size, task, n_bins=5):
    partition = check_choice(partition, "partition", ("dirichlet", "iid"))
    if partition == "iid":
        idx = iid_partition(len(y), n_clients, seed)
    else:
        idx = dirichlet_partition(X, y, n_clients, alpha, seed=seed, min_size=min_size, task=task,
                                  n_bins=n_bins, return_indices=True)
    return _federation_from_parts(X, y, idx, task)


# ---------------------------------------------------------------------------------- scikit-learn
def breast_cancer(n_clients: int = 3, partition: str = "dirichlet", alpha: float = 0.5,
                  standardize: bool = True, add_intercept: bool = True, seed: int = 0,
                  min_size: int = 1) -> Federation:
    """Wisconsin diagnostic breast cancer (scikit-learn's bundled copy, 569 rows, 30 features)
    as a classification federation.

    * Labels: ``y = +1`` for **benign** (scikit-learn's target 1), ``y = -1`` for malignant
      (target 0); i.e. ``y = 2 * target - 1``.
    * ``standardize``: every feature is centred and scaled with the mean and the population
      standard deviation (``ddof=0``) of **all 569 rows** (pooled statistics, computed before the
      split -- a convenience, not something clients could do privately).
    * Split: ``partition="dirichlet"`` (:func:`dirichlet_partition` with ``alpha``, per label)
      or ``"iid"`` (:func:`iid_partition`), both seeded; the intercept column (``add_intercept``)
      is the first column.
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    skd = _import_optional("sklearn.datasets")
    data = skd.load_breast_cancer()
    X = np.asarray(data.data, float)
    y = 2.0 * np.asarray(data.target, float) - 1.0
    if standardize:
        X = _standardize(X)
    if add_intercept:
        X = _prepend_ones(X)
    return _split_rows(X, y, partition, n_clients, alpha, seed, min_size, "classification")


def diabetes(n_clients: int = 3, partition: str = "dirichlet", alpha: float = 0.5,
             standardize: bool = True, add_intercept: bool = True, seed: int = 0,
             min_size: int = 1, n_bins: int = 5, standardize_target: bool = False) -> Federation:
    """scikit-learn's diabetes data (442 rows, 10 features, target = disease progression after one
    year, 25..346) as a regression federation.

    * Features are loaded **unscaled** (``load_diabetes(scaled=False)``); ``standardize`` centres
      and scales them with the pooled mean and population standard deviation of all 442 rows.
    * ``standardize_target`` does the same to ``y`` (default off: ``y`` in its original units).
    * Split: ``partition="dirichlet"`` bins ``y`` into ``n_bins`` quantile classes and applies
      :func:`dirichlet_partition`; ``"iid"`` is a seeded uniform split.
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    skd = _import_optional("sklearn.datasets")
    data = skd.load_diabetes(scaled=False)
    X = np.asarray(data.data, float)
    y = np.asarray(data.target, float)
    if standardize:
        X = _standardize(X)
    if standardize_target:
        y = (y - y.mean()) / y.std()
    if add_intercept:
        X = _prepend_ones(X)
    return _split_rows(X, y, partition, n_clients, alpha, seed, min_size, "regression", n_bins)


# ---------------------------------------------------------------------------------- multi-class
def _multiclass_split(X, y, class_names, n_clients, partition, alpha, seed, min_size, standardize,
                      add_intercept) -> Federation:
    if standardize:
        X = _standardize(X)
    if add_intercept:
        X = _prepend_ones(X)
    fed = _split_rows(X, y, partition, n_clients, alpha, seed, min_size, "multiclass")
    return fed._with_classes(list(class_names))


def digits(n_clients: int = 20, partition: str = "dirichlet", alpha: float = 0.1,
           standardize: bool = True, add_intercept: bool = True, seed: int = 0,
           min_size: int = 10) -> Federation:
    """scikit-learn's bundled handwritten digits (1,797 rows, 8x8 = 64 pixel features, 10 classes)
    as a multi-class federation (labels are class indices 0..9, ``classes`` the digits).

    The Scaff-PD paper's protocol for its multi-class tables (Yu, Karimireddy, Ma, Jordan 2023,
    "Scaff-PD: Communication Efficient Fair and Robust Federated Learning", Section 6): label skew
    by a Dirichlet split (:func:`dirichlet_partition`, ``alpha`` in {0.01, 0.05, 0.1} there) over
    ``n_clients`` (20) clients, then :func:`imbalance` for the size imbalance.

    * ``standardize``: each pixel centred and scaled with the pooled mean and population standard
      deviation of all 1,797 rows (constant pixels only centred).
    * ``partition="iid"`` splits uniformly at random instead. ``min_size`` is the smallest
      client (the Dirichlet draw is repeated until every client has it).
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    skd = _import_optional("sklearn.datasets")
    data = skd.load_digits()
    return _multiclass_split(np.asarray(data.data, float), np.asarray(data.target), list(range(10)),
                             n_clients, partition, alpha, seed, min_size, standardize, add_intercept)


def iris(n_clients: int = 3, partition: str = "iid", alpha: float = 0.5, standardize: bool = True,
         add_intercept: bool = True, seed: int = 0, min_size: int = 1) -> Federation:
    """Fisher's iris (scikit-learn's bundled copy: 150 rows, 4 features, 3 species) as a
    multi-class federation; the data of Flower's scikit-learn quickstart. ``classes`` are the
    species names; splits and scaling as in :func:`digits`."""
    n_clients = check_int(n_clients, "n_clients", low=1)
    skd = _import_optional("sklearn.datasets")
    data = skd.load_iris()
    return _multiclass_split(np.asarray(data.data, float), np.asarray(data.target),
                             [str(c) for c in data.target_names], n_clients, partition, alpha, seed,
                             min_size, standardize, add_intercept)


def penguin_species(add_intercept: bool = True, standardize: bool = True) -> Federation:
    """Palmer penguins as a multi-class federation: predict the **species** (Adelie, Chinstrap,
    Gentoo) from ``bill_length_mm``, ``bill_depth_mm``, ``flipper_length_mm`` and ``body_mass_g``,
    one client per **island** (Biscoe, Dream, Torgersen, sorted) -- a natural label skew: Gentoo
    live on Biscoe only, Chinstrap on Dream only. Rows with a missing value in those columns are
    dropped (2 rows); ``standardize`` scales the four features with the pooled mean and population
    standard deviation. Requires the optional ``palmerpenguins`` package."""
    pp = _import_optional("palmerpenguins")
    df = pp.load_penguins()
    cols = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    df = df.dropna(subset=cols)
    X = df[cols].to_numpy(float)
    if standardize:
        X = _standardize(X)
    if add_intercept:
        X = _prepend_ones(X)
    fed = Federation.from_groups(X, df["species"].to_numpy(object), df["island"].to_numpy(object),
                                 task="multiclass", classes=list(PENGUIN_SPECIES))
    fed.feature_names = (["intercept"] if add_intercept else []) + cols
    return fed


def synthetic_multiclass(n_clients: int = 5, dim: int = 10, n_classes: int = 3, samples=100,
                         noise: float = 1.0, add_intercept: bool = True, seed: int = 0) -> Federation:
    r"""A multi-class federation from a softmax model with client-specific means: client *i*'s
    features are :math:`x\sim N(m_i, I)` with :math:`m_i\sim N(0, I)` (seeded), labels
    :math:`y=\arg\max_k(W^\top x+\text{noise}\cdot g)_k` with a shared :math:`W\sim N(0, I)` and
    Gumbel noise :math:`g` (so :math:`P(y=k\mid x)` is the softmax of :math:`W^\top x/\text{noise}`).
    Every class is present overall (a draw missing one is redrawn with the same generator)."""
    n_clients = check_int(n_clients, "n_clients", low=1)
    dim = check_int(dim, "dim", low=1)
    n_classes = check_int(n_classes, "n_classes", low=2)
    noise = check_real(noise, "noise", low=0.0)
    counts = _sample_counts(samples, n_clients)
    rng = np.random.default_rng(_check_seed(seed))
    for _ in range(1000):
        W = rng.normal(size=(dim, n_classes))
        Xs, ys = [], []
        for i, m in enumerate(counts):
            X = rng.normal(size=(m, dim)) + rng.normal(size=dim)
            scores = X @ W + noise * rng.gumbel(size=(m, n_classes))
            Xs.append(_prepend_ones(X) if add_intercept else X)
            ys.append(np.argmax(scores, axis=1))
        if len(np.unique(np.concatenate(ys))) == n_classes:
            break
    return Federation.from_arrays(Xs, ys, task="multiclass", classes=list(range(n_classes)))


def gaussian_mixture(n_rows: int = 10_000, n_features: int = 50, n_classes: int = 2, n_clients: int = 20,
                     alpha: float = 0.5, mean_norm: float = 2.0, add_intercept: bool = True, min_size: int = 10,
                     seed: int = 0) -> Federation:
    r"""**Synthetic** features shaped like a linear head's input (e.g. ResNet-18 features of the
    Scaff-PD paper's Table 1, which cannot be downloaded here), split over clients by a Dirichlet
    label skew.

    With ``rng = numpy.random.default_rng(seed)``: class means :math:`m_k=c\,u_k/\|u_k\|` with
    :math:`c` = ``mean_norm`` and :math:`u_k\sim N(0, I_d)` (:math:`d` = ``n_features``); labels
    uniform over the ``n_classes`` classes; rows :math:`x=m_y+\varepsilon` with
    :math:`\varepsilon\sim N(0, I_d)` (unit noise); then :func:`dirichlet_partition` with ``alpha``
    over ``n_clients`` clients (every client at least ``min_size`` rows). ``add_intercept``
    prepends a constant-one column, so a softmax model has :math:`P=K(d+1)` parameters.

    Two classes give a **binary** federation (labels in {-1, +1}, class 1 is +1: for
    :class:`~drflmodel.losses.Logistic`); three or more a multi-class one (class indices).
    """
    n_rows = check_int(n_rows, "n_rows", low=1)
    n_features = check_int(n_features, "n_features", low=1)
    n_classes = check_int(n_classes, "n_classes", low=2)
    n_clients = check_int(n_clients, "n_clients", low=1, high=n_rows)
    mean_norm = check_real(mean_norm, "mean_norm", low=0.0)
    rng = np.random.default_rng(_check_seed(seed))
    U = rng.standard_normal((n_classes, n_features))
    means = mean_norm * U / np.linalg.norm(U, axis=1, keepdims=True)
    labels = rng.integers(0, n_classes, size=n_rows)
    X = rng.standard_normal((n_rows, n_features))
    X += means[labels]
    if add_intercept:
        X = _prepend_ones(X)
    binary = n_classes == 2
    y = np.where(labels == 1, 1.0, -1.0) if binary else labels
    return dirichlet_partition(X, y, n_clients, alpha, seed=seed, min_size=min_size,
                               task="classification" if binary else "multiclass")


# ---------------------------------------------------------------------------------- Adult (a8a)
#: The 14 original Adult attributes and their 1-based LIBSVM column ranges (inclusive) in the
#: a-series encoding (``a8a``: 123 binary columns; continuous attributes quantized into bins,
#: categorical ones one-hot encoded; a row may have no column set in workclass, occupation or
#: native-country, which is how the original "?" appears).
ADULT_ATTRIBUTES: tuple[tuple[str, int, int], ...] = (
    ("age", 1, 5), ("workclass", 6, 13), ("fnlwgt", 14, 18), ("education", 19, 34),
    ("education-num", 35, 39), ("marital-status", 40, 46), ("occupation", 47, 60),
    ("relationship", 61, 66), ("race", 67, 71), ("sex", 72, 73), ("capital-gain", 74, 75),
    ("capital-loss", 76, 77), ("hours-per-week", 78, 82), ("native-country", 83, 123),
)
_ADULT_N_FEATURES = 123

#: Which of the two sex columns is "female" (1-based LIBSVM index). The LIBSVM files do not name
#: their columns, so this is determined from the data (checked in tests/test_datasets.py):
#: (i) exactly one of columns 72/73 is set in every row of a8a and a8a.t; (ii) column 72 is set in
#: 7,466 of 22,696 training rows (32.9%) and column 73 in 15,230 (67.1%), the known ~1:2
#: female:male ratio of the Adult census sample (UCI: 33% female); (iii) the income > 50K rate is
#: 11.1% in column 72 vs 30.7% in column 73 (UCI: ~11% of women vs ~31% of men); (iv) of the
#: rows with relationship column 61 ("Wife"), 99.8% have column 72, and of those with column 63
#: ("Husband"), 99.99% have column 73. Hence column 72 = Female, column 73 = Male.
ADULT_FEMALE_COLUMN = 72
ADULT_MALE_COLUMN = 73

_ADULT_FILES = {"train": ("a8a.gz",), "test": ("a8a.t.gz",), "all": ("a8a.gz", "a8a.t.gz")}


@functools.lru_cache(maxsize=2)
def _read_libsvm_gz(fname: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse one shipped gzip LIBSVM file (``label col:value ...``, 1-based columns) into a
    dense ``(n, 123)`` 0/1 array (``uint8``: a8a is binary, which is checked) and float labels
    (cached; read-only arrays)."""
    ref = resources.files("drflmodel").joinpath("_data").joinpath(fname)
    with ref.open("rb") as fh, gzip.open(fh, "rt", encoding="ascii") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    y = np.array([float(ln.split(None, 1)[0]) for ln in lines])
    counts = np.array([ln.count(":") for ln in lines])
    body = " ".join(ln.split(None, 1)[1] if ":" in ln else "" for ln in lines)
    flat = body.replace(":", " ").split()
    if len(flat) != 2 * counts.sum():
        raise InvalidDataError(f"{fname}: malformed LIBSVM line (expected `col:value` pairs)")
    cols, vals = np.array(flat[0::2], dtype=int), np.array(flat[1::2], dtype=float)
    if cols.size and (cols.min() < 1 or cols.max() > _ADULT_N_FEATURES):
        raise InvalidDataError(f"{fname}: column index outside 1..{_ADULT_N_FEATURES}")
    if not np.all(vals == 1.0):
        raise InvalidDataError(f"{fname}: expected binary features (every stored value 1)")
    X = np.zeros((len(lines), _ADULT_N_FEATURES), dtype=np.uint8)
    X[np.repeat(np.arange(len(lines)), counts), cols - 1] = vals
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@functools.lru_cache(maxsize=3)
def _adult_raw(split: str) -> tuple[np.ndarray, np.ndarray]:
    """Read-only ``(X, y)`` of a split, ``X`` as ``uint8`` 0/1 (cached; callers index into
    float copies)."""
    parts = [_read_libsvm_gz(f) for f in _ADULT_FILES[split]]
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    f, m = X[:, ADULT_FEMALE_COLUMN - 1], X[:, ADULT_MALE_COLUMN - 1]
    if not (np.isin(f, (0.0, 1.0)).all() and np.array_equal(f + m, np.ones_like(f))):
        raise InvalidDataError("Adult data: expected exactly one of the sex columns 72/73 per row")
    if not np.isin(y, (-1.0, 1.0)).all():
        raise InvalidDataError("Adult data: labels must be -1/+1")
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def adult_arrays(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """The Adult census rows of LIBSVM's ``a8a`` preprocessing as read-only arrays ``(X, y)``:
    ``X`` the 123 binary features (``uint8`` 0/1, column ``j`` is LIBSVM's feature ``j + 1``),
    ``y`` in {-1, +1} (+1: income > 50K). ``split`` is ``"train"`` (``a8a``) or ``"test"``
    (``a8a.t``). For protocols that split the rows by a feature column themselves (e.g.
    :func:`drflmodel.instances.adult_doctorate`); :func:`adult` builds federations."""
    if split not in _ADULT_FILES:
        raise InvalidParameterError(f"split must be one of {sorted(_ADULT_FILES)}; got {split!r}")
    return _adult_raw(split)


def _adult_attrs(drop_sensitive: bool) -> list[tuple[str, int, int]]:
    return [a for a in ADULT_ATTRIBUTES if not (drop_sensitive and a[0] == "sex")]


def adult_attribute_blocks(n_parties: int = 6, drop_sensitive: bool = True) -> list[list[str]]:
    """The attributes each party holds in :func:`adult` (contiguous runs of
    :data:`ADULT_ATTRIBUTES`, without ``sex`` when ``drop_sensitive``).

    Among all ways to cut the attribute sequence into ``n_parties`` non-empty contiguous runs,
    the one with the smallest largest block (number of columns) is chosen, ties broken by the
    smallest sum of squared block sizes, then by the earliest cut points (exhaustive search over
    at most :math:`\\binom{13}{6}=1716` cuts). ``native-country`` alone has 41 columns, so for
    ``n_parties >= 3`` the largest block has 41 columns.
    """
    import itertools

    attrs = _adult_attrs(drop_sensitive)
    n_parties = check_int(n_parties, "n_parties", low=1, high=len(attrs))
    sizes = np.array([b - a + 1 for _, a, b in attrs])
    csum = np.concatenate([[0], np.cumsum(sizes)])
    best = None
    for cuts in itertools.combinations(range(1, len(attrs)), n_parties - 1):
        edges = (0, *cuts, len(attrs))
        blk = np.diff(csum[list(edges)])
        key = (int(blk.max()), int((blk ** 2).sum()), cuts)
        if best is None or key < best:
            best = key
    edges = (0, *best[2], len(attrs))
    return [[attrs[j][0] for j in range(a, b)] for a, b in zip(edges[:-1], edges[1:])]


def _check_split(split):
    return check_choice(split, "split", tuple(_ADULT_FILES))


def _stratified_subsample(strata: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows without replacement, the number per stratum proportional to its size
    (largest-remainder rounding; every non-empty stratum gets at least one row when ``n`` is at
    least the number of strata), uniformly within strata; returned sorted (file order)."""
    labels, counts = np.unique(strata, return_counts=True)
    quota = n * counts / counts.sum()
    take = np.floor(quota).astype(int)
    order = np.lexsort((np.arange(len(labels)), -(quota - take)))
    take[order[: n - take.sum()]] += 1
    while (take == 0).any() and n >= len(labels):
        take[np.argmax(take)] -= 1
        take[np.flatnonzero(take == 0)[0]] += 1
    chosen = [rng.choice(np.flatnonzero(strata == lab), size=k, replace=False)
              for lab, k in zip(labels, take) if k > 0]
    return np.sort(np.concatenate(chosen))


def adult(n_parties: int = 6, active=(0,), split: str = "train", n_samples: int | None = None,
          add_intercept: bool = True, seed: int = 0,
          drop_sensitive: bool = True) -> VerticalFederation:
    """Real Adult census data (LIBSVM ``a8a``) as a fair-VFL :class:`VerticalFederation`
    (fair-VFL paper, §5; group a = female, b = male; the favourable label +1 = income > 50K).

    * Data: the copy shipped in ``drflmodel/_data`` (UCI Adult, CC BY 4.0, LIBSVM preprocessing;
      see ``_data/README.md``): ``split="train"`` is ``a8a`` (22,696 rows), ``"test"`` is
      ``a8a.t`` (9,865 rows), ``"all"`` both (32,561 rows). 123 binary columns.
    * Labels: ``y = +1`` iff income > 50K, the favourable outcome.
    * Protected groups: **a = female** (column 72), **b = male** (column 73); see
      :data:`ADULT_FEMALE_COLUMN` for how the columns were identified. ``group`` uses 0 = a, 1 = b.
    * ``drop_sensitive=True`` (default) removes the two sex columns from the features (the model
      does not see the attribute; only the active party's group labels do). With ``False`` the sex
      attribute stays, as a block in its place in the attribute order.
    * Parties: the remaining attributes, in their original order, are cut into ``n_parties``
      contiguous runs (:func:`adult_attribute_blocks`); party *k* holds its run's columns.
      The paper's experiments use ``n_parties=6`` with one active party (index 0). The intercept
      column (``add_intercept``) is the first column of the block of the lowest-indexed active
      party. Note that the one-hot blocks are collinear with the intercept (each complete block
      sums to one), so the unregularized least-squares/logistic optimum is not unique in θ.
    * ``n_samples``: a seeded subsample without replacement, **stratified by group × label**
      (proportional allocation, largest-remainder rounding, each of the 4 cells at least one
      row), kept in file order; ``None`` keeps every row.

    The returned object carries ``feature_names`` (per party, e.g. ``"age:3"`` for LIBSVM column
    3, ``"intercept"``) and ``attributes`` (per party) as extra attributes.
    """
    split = _check_split(split)
    attrs = _adult_attrs(bool(drop_sensitive))
    if isinstance(n_parties, (int, np.integer)) and not isinstance(n_parties, bool) \
            and n_parties > len(attrs):
        raise InvalidParameterError(
            f"n_parties must be an integer in [1, {len(attrs)}] (the number of attribute blocks"
            f"{' without sex' if drop_sensitive else ''}); got {n_parties!r}")
    runs = adult_attribute_blocks(n_parties, drop_sensitive=bool(drop_sensitive))
    active = [check_int(k, "active", 0, len(runs) - 1) for k in np.atleast_1d(active)]
    if not active:
        raise InvalidParameterError("active must name at least one party")
    X, y = _adult_raw(split)
    group = np.where(X[:, ADULT_FEMALE_COLUMN - 1] == 1.0, 0, 1)
    if n_samples is not None:
        n_samples = check_int(n_samples, "n_samples", low=4, high=len(y))
        rows = _stratified_subsample(2 * group + (y > 0), n_samples,
                                     np.random.default_rng(_check_seed(seed)))
    else:
        rows = np.arange(len(y))
    span = {name: (a, b) for name, a, b in attrs}
    blocks, names = [], []
    for k, run in enumerate(runs):
        cols = [c for name in run for c in range(span[name][0], span[name][1] + 1)]
        Xk = X[np.ix_(rows, np.array(cols) - 1)].astype(float)
        nk = [f"{name}:{c}" for name in run for c in range(span[name][0], span[name][1] + 1)]
        if add_intercept and k == min(active):
            Xk = _prepend_ones(Xk)
            nk = ["intercept"] + nk
        blocks.append(Xk)
        names.append(nk)
    vfed = VerticalFederation(blocks, y[rows].copy(), group[rows], active=active)
    vfed.feature_names = names
    vfed.attributes = runs
    return vfed


def adult_horizontal(n_clients: int | None = None, partition: str = "dirichlet",
                     alpha: float = 0.5, attribute: str | None = None, split: str = "train",
                     n_samples: int | None = None, add_intercept: bool = True,
                     drop_sensitive: bool = True, seed: int = 0, min_size: int = 1) -> Federation:
    """Adult (LIBSVM ``a8a``, see :func:`adult`) as a horizontal classification federation
    (``y = +1`` iff income > 50K), e.g. for DRO / FAFL examples.

    * ``n_samples``: first a seeded uniform subsample without replacement (file order kept).
    * ``partition="dirichlet"``: :func:`dirichlet_partition` over the labels with ``alpha``
      (``n_clients`` default 5); ``"iid"``: seeded uniform split; ``"attribute"``: one client per
      category of ``attribute`` (a name in :data:`ADULT_ATTRIBUTES`) present in the rows, in
      column order, named ``"female"``/``"male"`` for ``sex`` and ``"<attribute>:<column>"``
      otherwise, plus ``"<attribute>:none"`` for rows with no column of the attribute set (the
      original "?"). ``n_clients`` must then be ``None`` or equal that number.
    * ``drop_sensitive`` removes the sex columns 72/73 from the features (default ``True``).
    """
    split = _check_split(split)
    partition = check_choice(partition, "partition", ("dirichlet", "iid", "attribute"))
    X, y = _adult_raw(split)
    rng = np.random.default_rng(_check_seed(seed))
    if n_samples is not None:
        n_samples = check_int(n_samples, "n_samples", low=1, high=len(y))
        rows = np.sort(rng.choice(len(y), size=n_samples, replace=False))
    else:
        rows = np.arange(len(y))
    keep = np.array([c for name, a, b in _adult_attrs(bool(drop_sensitive)) for c in range(a, b + 1)])
    Xf = X[np.ix_(rows, keep - 1)].astype(float)
    if add_intercept:
        Xf = _prepend_ones(Xf)
    ys = y[rows].copy()
    if partition != "attribute":
        if attribute is not None:
            raise InvalidParameterError(
                f"attribute is only used with partition='attribute'; got attribute={attribute!r}")
        n_clients = 5 if n_clients is None else check_int(n_clients, "n_clients", low=1)
        return _split_rows(Xf, ys, partition, n_clients, alpha, seed, min_size, "classification")
    span = {name: (a, b) for name, a, b in ADULT_ATTRIBUTES}
    attribute = check_choice(attribute, "attribute", tuple(span))
    a, b = span[attribute]
    onehot = X[np.ix_(rows, np.arange(a - 1, b))]
    cat = np.where(onehot.sum(1) > 0, onehot.argmax(1), b - a + 1)  # b-a+1 means "none"
    present = np.unique(cat)
    if n_clients is not None:
        n_clients = check_int(n_clients, "n_clients", low=1)
        if n_clients != len(present):
            raise InvalidParameterError(
                f"n_clients must be None or {len(present)} (the categories of {attribute!r} "
                f"present) with partition='attribute'; got {n_clients}")
    def _name(k):
        if k == b - a + 1:
            return f"{attribute}:none"
        if attribute == "sex":
            return "female" if a + k == ADULT_FEMALE_COLUMN else "male"
        return f"{attribute}:{a + k}"
    return Federation.from_arrays([Xf[cat == k] for k in present], [ys[cat == k] for k in present],
                                  names=[_name(k) for k in present], task="classification")


# ---------------------------------------------------------------------------------- synthetic VFL
def synthetic_vertical(n_samples: int = 500, dim: int = 10, n_parties: int = 3,
                       group_shift: float = 1.0, seed: int = 0, active=(0,),
                       add_intercept: bool = True, return_params: bool = False):
    """Vertical classification data with a controllable group shift (for DEO experiments).

    With ``rng = numpy.random.default_rng(seed)`` and in this draw order:

    1. a true direction :math:`w \\sim \\mathcal N(0, I_d)`, :math:`\\hat w = w/\\|w\\|`;
    2. groups :math:`g_i \\in \\{0, 1\\}` i.i.d. with probability 1/2 each (0 = a, 1 = b);
    3. base features :math:`z_i \\sim \\mathcal N(0, I_d)` (``(n, d)``), then uniforms
       :math:`U_i \\sim \\mathcal U(0, 1)`;
    4. features :math:`x_i = z_i + \\tfrac{s}{2}(2g_i - 1)\\hat w` with :math:`s =`
       ``group_shift``: the two groups' feature means differ by :math:`s` along the label
       direction;
    5. labels :math:`y_i = +1` iff :math:`U_i < \\sigma(\\langle x_i, w\\rangle)` (logistic model
       without bias), else :math:`-1`.

    With ``s = 0`` the groups are identically distributed; as ``s`` grows group b gets more
    favourable labels and higher scores among its favourable rows, so an unconstrained model has
    a growing DEO. The ``d`` features are cut into ``n_parties`` contiguous blocks of sizes
    differing by at most one (``numpy.array_split``); the intercept column (``add_intercept``) is
    the first column of the lowest-indexed active party's block. A sample so small that a group
    has no ``y = +1`` row raises :class:`InvalidDataError` (from :class:`VerticalFederation`).

    Returns the :class:`VerticalFederation`, or ``(vfed, {"w": w})`` with ``return_params``.
    """
    n_samples = check_int(n_samples, "n_samples", low=2)
    dim = check_int(dim, "dim", low=1)
    n_parties = check_int(n_parties, "n_parties", low=1, high=dim)
    group_shift = check_real(group_shift, "group_shift", low=0.0)
    active = [check_int(k, "active", 0, n_parties - 1) for k in np.atleast_1d(active)]
    if not active:
        raise InvalidParameterError("active must name at least one party")
    rng = np.random.default_rng(_check_seed(seed))
    w = rng.standard_normal(dim)
    g = (rng.random(n_samples) < 0.5).astype(int)
    Z = rng.standard_normal((n_samples, dim))
    U = rng.random(n_samples)
    X = Z + 0.5 * group_shift * (2 * g - 1)[:, None] * (w / np.linalg.norm(w))[None, :]
    y = np.where(U < 1.0 / (1.0 + np.exp(-(X @ w))), 1.0, -1.0)
    blocks = [X[:, idx] for idx in np.array_split(np.arange(dim), n_parties)]
    if add_intercept:
        k = min(active)
        blocks[k] = _prepend_ones(blocks[k])
    vfed = VerticalFederation(blocks, y, g, active=active)
    if return_params:
        return vfed, {"w": w}
    return vfed


# ---------------------------------------------------------------------------------- DRFL paper's benchmark sets
def _drfl_finish(X, y, task, n_clients, partition, alpha, seed, add_intercept, return_X_y):
    """The DRFL benchmark loaders' common end: the intercept column, then the arrays or the split."""
    if not isinstance(return_X_y, bool):
        raise InvalidParameterError(f"return_X_y must be True or False; got {return_X_y!r}")
    if not isinstance(add_intercept, bool):
        raise InvalidParameterError(f"add_intercept must be True or False; got {add_intercept!r}")
    X, y = np.array(X, float), np.array(y, float)
    if add_intercept:
        X = _prepend_ones(X)
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
    X, y = _drfl.read_breast_cancer_original(keep_code_number)
    return _drfl_finish(X, y, "classification", n_clients, partition, alpha, seed, add_intercept, return_X_y)


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
    X, y = _drfl.read_heart()
    return _drfl_finish(X, y, "classification", n_clients, partition, alpha, seed, add_intercept, return_X_y)


def abalone(n_clients: int = 3, partition: str = "iid", alpha: float = 0.5, add_intercept: bool = False,
            seed: int = 0, return_X_y: bool = False):
    """Abalone (Nash et al. 1995, UCI DOI 10.24432/C55C7W): 4,177 rows, target = **rings** (an
    integer age proxy, 1–29, unscaled, as in LIBSVM's ``abalone_scale``).

    Features as LIBSVM encodes them: Sex as a number, M = 1, F = 2, I = 3
    (:data:`drflmodel._drfl_benchmarks.ABALONE_SEX_CODES`), then the seven measurements (length, diameter, height, whole,
    shucked, viscera and shell weight); all eight columns scaled to :math:`[-1, 1]` over all rows
    (:func:`drflmodel._drfl_benchmarks.libsvm_scale`), so Sex becomes M = -1, F = 0, I = +1. (One ordinal column for a
    categorical attribute is LIBSVM's choice, kept for fidelity to the paper's data.)

    Arguments as in :func:`breast_cancer_original`; ``partition="dirichlet"`` bins the rings into
    quantile classes first.
    """
    X, rings = _drfl.read_abalone()
    return _drfl_finish(X, rings, "regression", n_clients, partition, alpha, seed, add_intercept, return_X_y)
