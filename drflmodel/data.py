"""Data model: :class:`Client`, :class:`Federation` (horizontal FL) and
:class:`VerticalFederation` (feature-partitioned FL).

Conventions:

* a linear model uses one vector :math:`\\theta`; an intercept is an explicit constant column
  (see :func:`drflmodel.datasets.add_intercept`), never a hidden variable;
* binary classification labels are in :math:`\\{-1, +1\\}`; multi-class labels
  (``task="multiclass"``) are class indices :math:`0,\\dots,K-1`, the original labels kept in
  ``federation.classes`` (mapped by :func:`class_indices`, like scikit-learn's ``classes_``);
* client weights :math:`\\lambda` are indexed like ``federation.clients``;
* :math:`p_i = N_i / N` are the sample proportions.

Validation happens in the constructors (shapes, finite values, labels, at least one sample per
client) and raises :class:`~drflmodel.errors.InvalidDataError` naming the offending argument.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from ._tabular import client_labels, feature_list, label_key, sorted_unique
from ._validation import as_finite_array, check_choice, check_int
from .errors import InvalidDataError, InvalidParameterError

__all__ = ["Client", "Federation", "StackedData", "VerticalFederation", "TASKS", "class_indices"]

TASKS = ("regression", "classification", "multiclass")


def _check_labels(y: np.ndarray, name: str) -> None:
    bad = ~np.isin(y, (-1.0, 1.0))
    if bad.any():
        vals = np.unique(y[bad])[:5]
        raise InvalidDataError(
            f"{name}: classification labels must be in {{-1, +1}}; found {vals.tolist()}")


def class_indices(labels, classes=None) -> tuple[np.ndarray, list]:
    """Map class labels (any hashable, mutually orderable values) to indices ``0..K-1``.

    ``classes`` (optional) lists the classes in the wanted order; default: the sorted distinct
    labels (scikit-learn's ``classes_``). Returns ``(indices as floats, classes)``. Raises
    :class:`InvalidDataError` for missing, infinite, unhashable or unorderable labels, a label not in
    ``classes``, or fewer than two classes.
    """
    values = np.asarray(labels, dtype=object)
    if values.ndim != 1:
        raise InvalidDataError(f"y must be 1-dimensional (one label per row); got shape {values.shape}")
    keys = []
    for k, v in enumerate(values):
        v = label_key(v)
        if v is None or (isinstance(v, float) and v != v):
            raise InvalidDataError(f"y: missing class label at row {k}")
        if isinstance(v, float) and not np.isfinite(v):
            raise InvalidDataError(f"y: class label {v!r} at row {k} is infinite; numeric class labels must be "
                                   "finite (as scikit-learn requires)")
        try:
            hash(v)
        except TypeError:
            raise InvalidDataError(f"y: class labels must be hashable; row {k} has {v!r}") from None
        keys.append(v)
    if classes is None:
        classes = sorted_unique(keys, "y")
    else:
        classes = [label_key(c) for c in classes]
        if len(set(classes)) != len(classes):
            raise InvalidDataError(f"classes must not repeat a class; got {classes}")
    if len(classes) < 2:
        raise InvalidDataError(f"y: multi-class data needs at least 2 classes; got {classes}")
    index = {c: i for i, c in enumerate(classes)}
    try:
        out = np.array([index[v] for v in keys], dtype=float)
    except KeyError as exc:
        raise InvalidDataError(f"y: label {exc.args[0]!r} is not one of the classes {classes}") from None
    return out, list(classes)


def _check_class_indices(y: np.ndarray, name: str, n_classes: int) -> None:
    bad = (y != np.round(y)) | (y < 0) | (y >= n_classes)
    if bad.any():
        raise InvalidDataError(
            f"{name}: multi-class labels must be class indices in {{0, ..., {n_classes - 1}}}; found "
            f"{np.unique(y[bad])[:5].tolist()} (map arbitrary labels with Federation.from_groups / "
            "from_arrays, which keep them as federation.classes)")


def _warn_constant_columns(X: np.ndarray, names: list, add_intercept: bool) -> None:
    """Warn once about the feature columns that hold one value in every row (nothing that changes
    the model is kept silently): such a column is an intercept -- a second one next to
    ``add_intercept``'s -- penalized by the ridge term (``penalize_intercept=False`` frees only the
    column named ``"intercept"``) and left unscaled by ``standardize`` (its deviation is 0)."""
    if X.shape[0] < 2 or X.shape[1] == 0:
        return
    constant = [j for j in np.flatnonzero(np.ptp(X, axis=0) == 0)]
    if not constant:
        return
    shown = ", ".join(f"{str(names[j])!r} (= {X[0, j]:g})" for j in constant[:5]) + (", ..." if len(constant) > 5 else "")
    role = ("a second intercept next to add_intercept's" if add_intercept
            else "an intercept (add_intercept=True adds the usual one)")
    warnings.warn(f"feature column(s) {shown} hold one value in every row: each is {role}, penalized by "
                  "l2 and not standardized; drop it from features unless that is what you want",
                  UserWarning, stacklevel=3)


class Client:
    """One client's local data set :math:`\\{(x_j, y_j)\\}_{j=1}^{N_i}`.

    Parameters
    ----------
    X : array of shape (N_i, d), finite. A float32 array is kept in float32 (``features``; no
        float64 copy is made unless a route that reads :attr:`X` asks for it): every float32 number
        is a float64 number, so the problem is the float64 problem on these features.
    y : array of shape (N_i,), finite.
    name : str, optional, a human-readable name (default ``"client"``).
    """

    def __init__(self, X, y, name: str | None = None):
        self.name = "client" if name is None else str(name)
        # copies: the client owns its (read-only) data; the caller's arrays stay writable and
        # later changes to them (or to an array they are a view of) cannot alter the client
        dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else float
        self.features = as_finite_array(X, f"X of client {self.name!r}", ndim=2, dtype=dtype).copy()
        self._X64 = None
        self.y = as_finite_array(y, f"y of client {self.name!r}", ndim=1).copy()
        if self.features.shape[0] != self.y.shape[0]:
            raise InvalidDataError(
                f"client {self.name!r}: X has {self.features.shape[0]} rows but y has {self.y.shape[0]}")
        if self.features.shape[0] < 1:
            raise InvalidDataError(f"client {self.name!r} must hold at least one sample")
        if self.features.shape[1] < 1:
            raise InvalidDataError(f"X of client {self.name!r} must have at least one feature column")
        self.features.setflags(write=False)
        self.y.setflags(write=False)

    @property
    def X(self) -> np.ndarray:
        """The features in float64: :attr:`features` itself, or (float32 features) their exact
        float64 copy, made on first access and kept (the routes that keep float32 read
        :attr:`features`)."""
        if self.features.dtype == np.float64:
            return self.features
        if self._X64 is None:
            self._X64 = self.features.astype(np.float64)
            self._X64.setflags(write=False)
        return self._X64

    @property
    def size(self) -> int:
        """Number of samples :math:`N_i`."""
        return self.features.shape[0]

    @property
    def dim(self) -> int:
        """Number of features :math:`d`."""
        return self.features.shape[1]

    def __repr__(self) -> str:
        return f"Client(name={self.name!r}, size={self.size}, dim={self.dim})"


@dataclass(frozen=True)
class StackedData:
    """Client data stacked and zero-padded to the largest client, for vectorized solvers.

    ``X[i, :sizes[i]]`` are client *i*'s rows; padded rows are zero and have ``mask == 0``.
    Solvers compute a per-client mean as ``(mask * values).sum(1) / sizes``, so padded rows
    never contribute. Each client's update reads only its own slice ``[i]``.
    """

    X: np.ndarray      # (n, m_max, d); float32 when every client's features are (else float64)
    y: np.ndarray      # (n, m_max)
    mask: np.ndarray   # (n, m_max), 1.0 for real rows, 0.0 for padding
    sizes: np.ndarray  # (n,) integer sample counts


class Federation:
    """A horizontal federation: clients share the feature space and hold different samples.

    Parameters
    ----------
    clients : sequence of :class:`Client`, at least one, all with the same number of features.
    task : ``"regression"``, ``"classification"`` (binary, labels in {-1, +1}) or
        ``"multiclass"`` (labels are class indices :math:`0,\\dots,K-1`).
    n_classes : multi-class only: :math:`K\\ge2` (default: the largest label + 1). Every class must
        have a row in some client (a class no client holds has no defined softmax optimum).
    classes : multi-class only: the original label of each class index (default ``0..K-1``).

    Attributes ``n_classes`` (``None`` for regression, 2 for binary classification) and
    ``classes`` (the labels; ``[-1, 1]`` for binary classification).
    """

    def __init__(self, clients: Sequence[Client], task: str = "regression", n_classes=None, classes=None):
        self.task = check_choice(task, "task", TASKS)
        if isinstance(clients, Client) or not hasattr(clients, "__iter__"):
            raise InvalidDataError(
                f"clients must be a sequence of drflmodel.Client; got {type(clients).__name__}")
        clients = list(clients)
        if not clients:
            raise InvalidDataError("clients must contain at least one Client")
        for k, c in enumerate(clients):
            if not isinstance(c, Client):
                raise InvalidDataError(f"clients[{k}] must be a drflmodel.Client; got {type(c).__name__}")
        dims = {c.dim for c in clients}
        if len(dims) != 1:
            raise InvalidDataError(f"all clients must have the same number of features; got {sorted(dims)}")
        if task == "classification":
            for c in clients:
                _check_labels(c.y, f"y of client {c.name!r}")
        self.n_classes, self.classes = self._check_classes(clients, n_classes, classes)
        names = [c.name for c in clients]
        if len(set(names)) != len(names):
            # keep names unique so that reports can index by name
            clients = [Client(c.features, c.y, name=f"{c.name}-{k}") for k, c in enumerate(clients)]
        self.clients: list[Client] = clients

    def _check_classes(self, clients, n_classes, classes):
        """``(n_classes, classes)`` of the task; multi-class labels checked as class indices."""
        if self.task != "multiclass":
            if n_classes is not None or classes is not None:
                raise InvalidParameterError("n_classes and classes apply to task='multiclass' only")
            return (2, [-1, 1]) if self.task == "classification" else (None, None)
        largest = max(int(np.max(c.y)) for c in clients)
        K = largest + 1 if n_classes is None else check_int(n_classes, "n_classes", low=2)
        for c in clients:
            _check_class_indices(c.y, f"y of client {c.name!r}", max(K, 2))
        if K < 2:
            raise InvalidDataError("task='multiclass' needs at least 2 classes; every label is 0")
        present = np.zeros(K, bool)
        for c in clients:
            present[np.unique(c.y).astype(int)] = True
        if not present.all():
            k = int(np.flatnonzero(~present)[0])
            raise InvalidDataError(
                f"class {k} has no row in any client; every one of the n_classes = {K} classes must be "
                "held by some client (drop the class or pass the right n_classes)")
        if classes is None:
            classes = list(range(K))
        elif len(list(classes)) != K:
            raise InvalidParameterError(f"classes must list n_classes = {K} labels; got {len(list(classes))}")
        return K, list(classes)

    @classmethod
    def from_arrays(cls, Xs, ys, names=None, task: str = "regression", classes=None) -> "Federation":
        """Build a federation from per-client arrays ``Xs[i]``, ``ys[i]``.

        For ``task="multiclass"`` the labels may be any hashable, orderable values; they are
        mapped to class indices over all clients (:func:`class_indices`; ``classes`` fixes the
        order) and kept as ``federation.classes``."""
        Xs, ys = list(Xs), list(ys)
        if len(Xs) != len(ys):
            raise InvalidDataError(f"Xs has {len(Xs)} clients but ys has {len(ys)}")
        if names is None:
            names = [f"client{i}" for i in range(len(Xs))]
        names = list(names)
        if len(names) != len(Xs):
            raise InvalidDataError(f"names has {len(names)} entries but there are {len(Xs)} clients")
        if check_choice(task, "task", TASKS) == "multiclass":
            ys = [np.asarray(y, dtype=object) for y in ys]
            flat, classes = class_indices(np.concatenate(ys) if ys else [], classes)
            ys = np.split(flat, np.cumsum([len(y) for y in ys])[:-1])
            return cls([Client(X, y, name=n) for X, y, n in zip(Xs, ys, names)], task=task,
                       n_classes=len(classes), classes=classes)
        if classes is not None:
            raise InvalidParameterError("classes applies to task='multiclass' only")
        return cls([Client(X, y, name=n) for X, y, n in zip(Xs, ys, names)], task=task)

    @classmethod
    def from_groups(cls, X, y, clients, task: str = "regression", names=None, classes=None) -> "Federation":
        """Build a federation from one array and a client label per row.

        Parameters
        ----------
        X : array of shape (N, d); y : array of shape (N,) (labels in {-1, +1} for classification;
            any hashable, orderable class labels for ``"multiclass"``, mapped to indices by
            :func:`class_indices` and kept as ``federation.classes``).
        clients : array of N client labels (strings or numbers, no missing values).
        task : ``"regression"``, ``"classification"`` or ``"multiclass"``.
        classes : multi-class only, the class order (default: the sorted distinct labels).
        names : optional list of the expected client labels, in the order wanted. Default: the
            sorted unique labels of ``clients``. Every row's label must be listed, and every listed
            client must have at least one row.

        Client *i* holds the rows whose label is ``names[i]`` (in their original order) and is
        named ``str(names[i])``; ``federation.client_labels`` keeps the labels themselves.
        """
        X = as_finite_array(X, "X", ndim=2, dtype=np.float32 if getattr(X, "dtype", None) == np.float32 else float)
        check_choice(task, "task", TASKS)
        class_args = {}
        if task == "multiclass":
            y, classes = class_indices(y, classes)
            class_args = {"n_classes": len(classes), "classes": classes}
        elif classes is not None:
            raise InvalidParameterError("classes applies to task='multiclass' only")
        y = as_finite_array(y, "y", ndim=1)
        labels = client_labels(clients, X.shape[0])
        if y.shape[0] != X.shape[0]:
            raise InvalidDataError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        present = sorted_unique(labels, "clients")
        if names is None:
            order = present
        else:
            order = list(names)
            if len(set(map(label_key, order))) != len(order):
                raise InvalidDataError(f"names must not repeat a client; got {order}")
            listed = set(map(label_key, order))
            extra = [v for v in present if label_key(v) not in listed]
            if extra:
                raise InvalidDataError(f"clients: label {extra[0]!r} is not in names {order}")
        keys = np.array([label_key(v) for v in labels], dtype=object)
        rows = [np.flatnonzero(keys == label_key(v)) for v in order]
        for v, r in zip(order, rows):
            if r.size == 0:
                raise InvalidDataError(f"clients: client {v!r} has no rows")
        fed = cls([Client(X[r], y[r], name=str(v)) for v, r in zip(order, rows)], task=task, **class_args)
        fed.client_labels = list(order)
        return fed

    @classmethod
    def from_dataframe(cls, df, target: str, client: str, features=None, task: str | None = None,
                       pos_label=None, add_intercept: bool = False,
                       standardize: bool = False, classes=None) -> "Federation":
        """Build a federation from one table with a column naming each row's client.

        Parameters
        ----------
        df : a pandas ``DataFrame`` or a mapping ``{column: 1-D array}`` (pandas is optional).
        target : the label column. Regression: numeric. Classification: exactly two classes,
            mapped to -1/+1 (``+1`` is ``pos_label``, default the larger class). Multi-class: two or
            more classes (strings or numbers), mapped to ``0..K-1`` in sorted order like
            scikit-learn's ``classes_`` (``classes`` fixes another order) and kept as
            ``federation.classes``.
        client : the column of client labels; client order is the sorted unique labels (for a
            pandas ``category`` column: its sorted categories, each of which must have rows).
        features : the feature columns, in order (default: every other column). Numeric and
            boolean columns are used as they are; string columns are one-hot encoded (one 0/1
            column per category, named ``"column=value"``).
        task : ``"classification"``, ``"multiclass"`` or ``"regression"``; default: inferred from
            the target -- exactly two distinct values (0/1, yes/no, ...) make a classification task,
            text with more than two distinct values a multi-class task, numbers a regression (pass
            ``task="regression"`` for a numeric target with two values, ``task="multiclass"`` for
            numeric class codes such as 0/1/2).
        add_intercept : prepend the explicit constant column ``"intercept"``.
        standardize : divide every numeric feature column by its standard deviation, and centre
            it when ``add_intercept`` (one-hot columns and the intercept stay as they are). The
            model is then fitted on standardized columns -- a ridge term penalizes the
            standardized coefficients, as in a scikit-learn pipeline with ``StandardScaler`` --
            and the solvers' steps are no longer limited by one large column.
            ``table_info["standardized"]`` records the means and scales, and
            :meth:`theta_in_file_units` gives the same predictor in the table's units.
        classes : multi-class only: the class labels in the order wanted (default: sorted).

        The federation carries ``feature_names`` (one per design column) and ``table_info``
        (target, task and whether it was inferred, client column, features, one-hot encodings,
        label map, scaling), which the command line copies into the solution's ``info``. Errors
        name the column (missing column, missing values, a feature that cannot be encoded, a
        target without two classes, an empty client). A client with fewer rows than design
        columns gets a ``UserWarning``: its own loss does not determine a model; so does a
        constant feature column (one value in every row), which acts as a second intercept that
        the ridge term penalizes and ``standardize`` leaves unscaled.
        """
        from . import _tabular as tab

        if task is not None:
            check_choice(task, "task", TASKS)
        if not isinstance(standardize, bool):
            raise InvalidParameterError(f"standardize must be True or False; got {standardize!r}")
        cols = tab.TableColumns(df)
        cols.check_present([target], "target")
        cols.check_present([client], "client")
        features = feature_list(cols, features, exclude=(target, client))
        X, feature_names, one_hot = tab.encode_features(cols, features)
        inferred = task is None
        if inferred:
            task = tab.infer_task(cols, target)
        if task != "classification" and pos_label is not None:
            raise InvalidParameterError(f"pos_label applies to task='classification' only; got task={task!r}")
        if task != "multiclass" and classes is not None:
            raise InvalidParameterError(f"classes applies to task='multiclass' only; got task={task!r}")
        if task == "classification":
            y, label_map = tab.binary_target(cols, target, pos_label)
        elif task == "multiclass":
            y, label_map = tab.class_target(cols, target), None
        else:
            y, label_map = tab.numeric_target(cols, target), None
        _warn_constant_columns(X, feature_names, add_intercept)
        labels = tab.labels_column(cols, client, "client")
        declared = cols.categories(client)
        names = None if declared is None else sorted_unique(declared, f"categories of client column {client!r}")
        if add_intercept:
            X = np.hstack([np.ones((X.shape[0], 1)), X])
            feature_names = ["intercept"] + feature_names
        scaling = None
        if standardize:
            X, scaling = tab.standardize(X, feature_names, one_hot, intercept=add_intercept)
        if task == "multiclass":
            try:
                classes = class_indices(y, classes)[1]     # checked here, to name the target column
            except InvalidDataError as exc:
                raise tab.TableError(f"target column {target!r}: {str(exc).removeprefix('y: ')}", "target") from None
        try:
            fed = cls.from_groups(X, y, labels, task=task, names=names, classes=classes)
        except InvalidDataError as exc:
            raise tab.TableError(str(exc).replace("clients:", f"client column {client!r}:", 1), "client") from None
        small = [(c.name, c.size) for c in fed.clients if c.size < X.shape[1]]
        if small:
            shown = ", ".join(f"{name!r} ({n} row{'s' if n != 1 else ''})" for name, n in small[:5])
            warnings.warn(f"client column {client!r}: {len(small)} client(s) have fewer rows than the "
                          f"{X.shape[1]} design columns: {shown}{', ...' if len(small) > 5 else ''}; such a "
                          "client's own loss does not determine a model (it is strongly convex only "
                          "through l2 > 0) -- check the client column", UserWarning, stacklevel=2)
        fed.feature_names = feature_names
        fed.table_info = {"target": target, "task": task, "task_inferred": inferred, "client": client,
                          "features": list(map(str, features)), "one_hot": one_hot, "label_map": label_map,
                          "classes": fed.classes if task == "multiclass" else None,
                          "add_intercept": bool(add_intercept), "standardized": scaling, "clients": fed.names}
        return fed

    @classmethod
    def from_partitions(cls, source, target: str, features=None, *, split: str | None = None, take=None,
                        task: str | None = None, classes=None, pos_label=None, add_intercept: bool = False,
                        standardize: bool = False) -> "Federation":
        """One client per partition of a Flower Datasets ``FederatedDataset`` or ``Partitioner``,
        holding exactly the rows that partition gives (its own ``load_partition``: the same
        partitioner, the same seed and the same shuffle as the Flower app that loads it).

        Parameters
        ----------
        source : a ``flwr_datasets.FederatedDataset`` (``split`` names the partitioned split;
            default: its only one) or a ``flwr_datasets.partitioner.Partitioner`` whose dataset is
            assigned (e.g. ``partitioner.dataset = datasets.Dataset.from_pandas(df)``, Flower
            Datasets' way with local data).
        target, features, task, classes, pos_label, add_intercept, standardize : as in
            :meth:`from_dataframe` (``features`` default: every other column, in the dataset's
            order; a ``ClassLabel`` target arrives as its integer codes).
        take : the rows of each partition the app trains on: ``None`` (all), a fraction ``f`` in
            (0, 1] (the first ``int(f * len(partition))`` rows, as Flower's quickstarts do), or a
            function ``partition -> partition`` (e.g.
            ``lambda p: p.train_test_split(test_size=0.2, seed=42)["train"]``).

        Client *i* is partition *i*, named ``"partition-i"`` (zero-padded from 11 partitions on, so
        that the names sort like the ids); ``table_info`` records the partitioner, the split and
        ``take``. An empty partition is an error naming it.
        """
        from . import _partitions

        load, n, described = _partitions.resolve(source, split)
        table = _partitions.partitions_table(load, n, take)
        column = _partitions.PARTITION_COLUMN
        if features is None:
            features = [c for c in table.columns if c not in (target, column)]
        fed = cls.from_dataframe(table, target=target, client=column, features=features, task=task,
                                 pos_label=pos_label, add_intercept=add_intercept, standardize=standardize,
                                 classes=classes)
        fed.table_info = {**fed.table_info, "client": None, "clients": fed.names, "source": "flower-datasets",
                          **described, "num_partitions": n,
                          "take": take if take is None or not callable(take) else getattr(take, "__name__", "function")}
        return fed

    def _with_classes(self, classes) -> "Federation":
        """Set the original labels of the classes (multi-class; used by the data helpers)."""
        if self.task != "multiclass" or len(classes) != self.n_classes:
            raise InvalidParameterError(f"classes must list n_classes = {self.n_classes} labels")
        self.classes = list(classes)
        return self

    def theta_in_file_units(self, theta) -> np.ndarray:
        """``theta`` (one coefficient per design column; multi-class: one block of them per class,
        class-major) for the table's own units: the identity unless the federation was built with
        ``from_dataframe(..., standardize=True)``, whose scaling it undoes -- the same predictions
        :math:`x^\\top\\theta`: :math:`\\theta_j/s_j` on a scaled column, and the intercept shifted by
        :math:`\\sum_j\\theta_jm_j/s_j` when the columns were centred."""
        from ._tabular import to_file_units

        scaling = (getattr(self, "table_info", None) or {}).get("standardized")
        theta = np.asarray(theta, dtype=float)
        if not scaling:
            return theta.copy()
        d = len(self.feature_names)
        if self.task == "multiclass" and theta.shape == (self.n_classes * d,):    # class-major blocks
            return np.concatenate([to_file_units(block, self.feature_names, scaling)
                                   for block in theta.reshape(self.n_classes, d)])
        return to_file_units(theta, self.feature_names, scaling)

    # ----------------------------------------------------------------- sizes
    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def dim(self) -> int:
        return self.clients[0].dim

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.clients]

    @cached_property
    def sizes(self) -> np.ndarray:
        """Sample counts :math:`N_i` (integer array)."""
        return np.array([c.size for c in self.clients], dtype=int)

    @cached_property
    def intercept_column(self) -> int | None:
        """The index of the intercept, i.e. of the one feature column equal to 1 in every row of
        every client (``None`` if there is no such column). The data helpers add it with
        ``add_intercept=True``; problems leave it unpenalized with ``penalize_intercept=False``.
        Raises :class:`InvalidDataError` if several columns are constant 1 (which one is the
        intercept would be a guess)."""
        ones = np.ones(self.dim, bool)
        for c in self.clients:
            ones &= np.all(c.features == 1.0, axis=0)
        found = np.flatnonzero(ones)
        if found.size > 1:
            raise InvalidDataError(f"columns {found.tolist()} are all constant 1: the intercept column is "
                                   "ambiguous; keep one of them")
        return int(found[0]) if found.size else None

    @cached_property
    def proportions(self) -> np.ndarray:
        """Sample proportions :math:`p_i = N_i / \\sum_j N_j`."""
        return self.sizes / self.sizes.sum()

    # --------------------------------------------------------------- views
    def pooled(self):
        """All samples in one array: ``(X, y, client_index)``."""
        X = np.vstack([c.X for c in self.clients])
        y = np.concatenate([c.y for c in self.clients])
        idx = np.repeat(np.arange(self.n_clients), self.sizes)
        return X, y, idx

    @cached_property
    def stacked(self) -> StackedData:
        """Zero-padded stacked arrays (see :class:`StackedData`). Raises
        :class:`~drflmodel.errors.MemoryLimitError` before allocating when they would not fit in
        the memory available (:func:`drflmodel._memory.check_memory`, the package's one memory
        refusal: naming the size and the estimate)."""
        n, m, d = self.n_clients, int(self.sizes.max()), self.dim
        from ._memory import check_memory

        # float32 features stay float32 when every client's are (products: drflmodel._float64_products)
        dtype = np.float32 if all(c.features.dtype == np.float32 for c in self.clients) else np.float64
        itemsize = np.dtype(dtype).itemsize
        check_memory(n * m * (itemsize * d + 16), f"the stacked client data ({n} clients x {m} rows x {d} features)",
                     instead="use fewer rows or features, or a machine with more memory")
        X = np.zeros((n, m, d), dtype=dtype)
        y = np.zeros((n, m))
        mask = np.zeros((n, m))
        for i, c in enumerate(self.clients):
            X[i, : c.size] = c.features
            y[i, : c.size] = c.y
            mask[i, : c.size] = 1.0
        for a in (X, y, mask):
            a.setflags(write=False)
        return StackedData(X=X, y=y, mask=mask, sizes=self.sizes.copy())

    def subset(self, indices) -> "Federation":
        """A federation of the clients at ``indices`` (in that order)."""
        chosen = [self.clients[check_int(i, "indices", 0, self.n_clients - 1)] for i in indices]
        if self.task == "multiclass":
            return Federation(chosen, task=self.task, n_classes=self.n_classes, classes=self.classes)
        return Federation(chosen, task=self.task)

    def __repr__(self) -> str:
        return (f"Federation(n_clients={self.n_clients}, dim={self.dim}, task={self.task!r}, "
                f"sizes={self.sizes.tolist()})")


_GROUP_CODES = {"a": 0, "b": 1, 0: 0, 1: 1}


class VerticalFederation:
    """A vertical (feature-partitioned) federation for fair VFL (fair-VFL paper, Definition 2).

    All parties hold the same ``n`` samples; party *k* holds the feature block ``blocks[k]``
    (shape ``(n, m_k)``). The full design is ``X = [X^1, ..., X^K]`` and ``theta`` is the
    concatenation of the party blocks ``theta_k``.

    Parameters
    ----------
    blocks : list of K arrays with the same number of rows.
    y : labels in {-1, +1} (the favourable outcome is ``+1``).
    group : protected-group membership per row, values in ``{"a", "b"}`` or ``{0, 1}``
        (0 means group a, 1 means group b).
    active : indices of the active parties (hold labels and know the loss); default ``[0]``.

    Attributes
    ----------
    in_a, in_b : boolean masks of the protected groups.
    favourable : boolean mask ``y == +1``.
    N_a, N_b : boolean masks of :math:`\\mathcal N^a, \\mathcal N^b` (group and favourable label),
        the rows that enter DEO (Definition 1 of the paper).
    """

    def __init__(self, blocks, y, group, active=(0,)):
        blocks = list(blocks)
        if not blocks:
            raise InvalidDataError("blocks must contain at least one party block")
        self.blocks = [as_finite_array(B, f"blocks[{k}]", ndim=2).copy() for k, B in enumerate(blocks)]
        rows = {B.shape[0] for B in self.blocks}
        if len(rows) != 1:
            raise InvalidDataError(
                f"all party blocks must have the same number of rows; got {[B.shape[0] for B in self.blocks]}")
        n = self.blocks[0].shape[0]
        if n < 1:
            raise InvalidDataError("blocks must hold at least one row")
        self.y = as_finite_array(y, "y", ndim=1).copy()
        if self.y.shape[0] != n:
            raise InvalidDataError(f"y has {self.y.shape[0]} rows but the blocks have {n}")
        _check_labels(self.y, "y")
        g = np.asarray(group, dtype=object)
        if g.ndim != 1:
            raise InvalidDataError(f"group must be 1-dimensional (one label per row); got shape {g.shape}")
        if g.shape[0] != n:
            raise InvalidDataError(f"group has {g.shape[0]} rows but the blocks have {n}")

        def _code(v):
            v = v.item() if hasattr(v, "item") else v
            try:
                return _GROUP_CODES[v]
            except (KeyError, TypeError):
                raise InvalidDataError(
                    f"group values must be in {{'a', 'b'}} or {{0, 1}}; found {v!r}") from None

        codes = np.array([_code(v) for v in g], dtype=int)
        self.group = codes
        active = [check_int(k, "active", 0, len(self.blocks) - 1) for k in np.atleast_1d(active)]
        if not active:
            raise InvalidParameterError("active must name at least one party")
        self.active = sorted(set(active))
        self.in_a = codes == 0
        self.in_b = codes == 1
        self.favourable = self.y == 1.0
        self.N_a = self.in_a & self.favourable
        self.N_b = self.in_b & self.favourable
        if not self.N_a.any() or not self.N_b.any():
            empty = "a" if not self.N_a.any() else "b"
            raise InvalidDataError(
                f"group: protected group {empty!r} has no rows with the favourable label y = +1, "
                "so its DEO term is undefined")

    @classmethod
    def from_dataframe(cls, df, target: str, group: str, parties, active=(0,), pos_label=None,
                       add_intercept: bool = False) -> "VerticalFederation":
        """Build a vertical federation from one table: party *k* holds the columns ``parties[k]``.

        Parameters
        ----------
        df : a pandas ``DataFrame`` or a mapping ``{column: 1-D array}``.
        target : the label column, exactly two classes, mapped to -1/+1 (``+1``, the favourable
            outcome, is ``pos_label``, default the larger class).
        group : the protected-group column, exactly two values: the first in sorted order is
            group a (code 0), the second group b (code 1).
        parties : a list of lists of feature columns, one list per party (no column twice, not
            the target). String columns are one-hot encoded within their party's block.
        active : indices of the active parties.
        add_intercept : prepend the explicit constant column to the lowest-indexed active party's
            block (as :func:`drflmodel.datasets.adult` does).

        The result carries ``feature_names`` (per party) and ``table_info`` (columns, one-hot
        encodings, the label map and the group map).
        """
        from . import _tabular as tab

        cols = tab.TableColumns(df)
        cols.check_present([target], "target")
        cols.check_present([group], "group")
        if isinstance(parties, str) or not hasattr(parties, "__iter__"):
            raise InvalidParameterError("parties must be a list of lists of column names")
        parties = [list(p) if not isinstance(p, str) else None for p in parties]
        if not parties or any(p is None or not p for p in parties):
            raise InvalidParameterError("parties must be a non-empty list of non-empty lists of column names")
        seen = {}
        for k, p in enumerate(parties):
            for c in p:
                if c == target:
                    raise InvalidParameterError(f"column {c!r} is the target and cannot be a feature of party {k}")
                if c in seen:
                    raise InvalidParameterError(f"column {c!r} is given to parties {seen[c]} and {k}")
                seen[c] = k
        active_list = [check_int(k, "active", 0, len(parties) - 1) for k in np.atleast_1d(active)]
        blocks, names, one_hot = [], [], {}
        for k, p in enumerate(parties):
            Xk, nk, ok = tab.encode_features(cols, p, role=f"party {k} feature")
            if add_intercept and active_list and k == min(active_list):
                Xk = np.hstack([np.ones((Xk.shape[0], 1)), Xk])
                nk = ["intercept"] + nk
            blocks.append(Xk)
            names.append(nk)
            one_hot.update(ok)
        y, label_map = tab.binary_target(cols, target, pos_label)
        raw = tab.labels_column(cols, group, "group")
        levels = sorted_unique(raw, f"group column {group!r}")
        if len(levels) != 2:
            raise InvalidDataError(f"group column {group!r} has {len(levels)} value(s) {levels[:6]}; "
                                   "DEO needs exactly two protected groups")
        codes = np.array([0 if label_key(v) == levels[0] else 1 for v in raw])
        try:
            vfed = cls(blocks, y, codes, active=active_list)
        except InvalidDataError as exc:
            raise InvalidDataError(f"group column {group!r}: {exc}") from None
        vfed.feature_names = names
        vfed.table_info = {"target": target, "group": group, "parties": [list(map(str, p)) for p in parties],
                           "one_hot": one_hot, "label_map": label_map,
                           "group_map": {"a": levels[0], "b": levels[1]}, "add_intercept": bool(add_intercept)}
        return vfed

    @property
    def n_samples(self) -> int:
        return self.blocks[0].shape[0]

    @property
    def n_parties(self) -> int:
        return len(self.blocks)

    @property
    def block_sizes(self) -> list[int]:
        return [B.shape[1] for B in self.blocks]

    @property
    def dim(self) -> int:
        return int(sum(self.block_sizes))

    @cached_property
    def block_slices(self) -> list[slice]:
        """``theta[block_slices[k]]`` is party *k*'s block :math:`\\theta_k`."""
        edges = np.concatenate([[0], np.cumsum(self.block_sizes)])
        return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    @cached_property
    def X(self) -> np.ndarray:
        """The full design ``[X^1, ..., X^K]`` (used by the centralized oracle only)."""
        X = np.hstack(self.blocks)
        X.setflags(write=False)
        return X

    @property
    def task(self) -> str:
        return "classification"

    def __repr__(self) -> str:
        return (f"VerticalFederation(n_samples={self.n_samples}, blocks={self.block_sizes}, "
                f"active={self.active}, |N_a|={int(self.N_a.sum())}, |N_b|={int(self.N_b.sum())})")
