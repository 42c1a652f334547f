"""Tables in, arrays out: the column handling behind ``Federation.from_dataframe``,
``VerticalFederation.from_dataframe`` and the command line's ``csv`` / ``parquet`` sources.

A *table* is a pandas ``DataFrame`` or any mapping ``{column name: 1-D array}`` (so pandas stays
optional for callers that already hold arrays). Every complaint is one line naming the column:

* a column that is not in the table;
* a missing value (NaN, None, ``pd.NA``) in a column that is used;
* a feature that is neither numeric nor a set of string categories: dates, nested objects,
  Python objects mixing strings and numbers, or text in which some entries are numbers and others
  are not (a numeric column with placeholders such as ``"?"``): it cannot be encoded;
* a classification target without exactly two classes (a multi-class target needs at least two);
* a text target for a regression (the message names the tasks that accept text).

Where a complaint points at a row, it says where to look: for a CSV file read by
:func:`read_table`, the line of the file (header = line 1, blank lines skipped as pandas does);
for a DataFrame, the row's index label; for a mapping of arrays, the 0-based position.
Every error is a :class:`TableError` whose ``role`` says which argument it concerns
(``"target"``, ``"client"``, ``"feature"``, ``"group"``, ``"party k feature"``, or ``"table"``), so
that the command line can name the configuration key.

:func:`standardize` rescales the numeric feature columns (centring them when the design has an
intercept) and :func:`to_file_units` maps coefficients back to the file's units.

Encoding: numeric and boolean columns become floats; a column of strings (or a pandas
``category`` / ``string`` column) is **one-hot encoded** with one 0/1 column per category, named
``"column=value"``, categories in sorted order. All categories are kept (no reference level is
dropped, as in the built-in Adult data), so with an intercept column the one-hot block is
collinear with it; a ridge term ``l2 > 0`` makes the model unique. Which columns were encoded is
returned, so that callers can report it.
"""

from __future__ import annotations

import csv
import numbers
from pathlib import Path

import numpy as np

from .errors import InvalidDataError, InvalidParameterError

__all__ = ["TableColumns", "TableError", "read_table", "encode_features", "binary_target", "numeric_target",
           "class_target", "labels_column", "client_labels", "sorted_unique", "feature_list", "label_key", "infer_task",
           "standardize", "to_file_units", "TABLE_SOURCES"]

#: file formats the command line reads (pandas needed; pyarrow for parquet)
TABLE_SOURCES = ("csv", "parquet")


#: the key under which :func:`read_table` records where a table came from (``DataFrame.attrs``)
SOURCE_ATTR = "drflmodel_source"


class TableError(InvalidDataError):
    """An error about a table's columns; ``role`` names the argument concerned."""

    def __init__(self, message: str, role: str = "table"):
        super().__init__(message)
        self.role = role


def _is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and value != value:
        return True
    return type(value).__name__ in ("NAType", "NaTType")


class TableColumns:
    """Uniform read access to the columns of a DataFrame or a mapping of 1-D arrays.

    ``column(name)`` returns ``(values, kind)``: ``kind`` is ``"numeric"`` (a float array, NaN
    marks missing values), ``"categorical"`` (an object array of the raw values) or ``"other"``
    (a dtype that cannot be encoded, e.g. datetimes; the object array of the values).
    """

    def __init__(self, table, what: str = "df"):
        self.what = what
        self._lines = None
        self._index = None
        self.na_text: dict = {}         # the texts pandas read as missing (read_table), per column
        if hasattr(table, "columns") and hasattr(table, "__getitem__") and hasattr(table, "shape"):
            self._frame = table
            self.names = [c for c in table.columns]
            self.n_rows = int(table.shape[0])
            source = getattr(table, "attrs", {}).get(SOURCE_ATTR)
            if source:
                self.what = source["name"]
                self.na_text = source.get("na_text") or {}
                lines = source.get("lines")
                if lines is not None and len(lines) == self.n_rows:
                    self._lines = np.asarray(lines)
            else:
                self._index = getattr(table, "index", None)
        elif isinstance(table, dict) or (hasattr(table, "keys") and hasattr(table, "__getitem__")):
            self._frame = None
            self._arrays = {k: np.asarray(table[k]) for k in table.keys()}
            self.names = list(self._arrays)
            lengths = {k: (a.shape[0] if a.ndim == 1 else None) for k, a in self._arrays.items()}
            bad = [k for k, n in lengths.items() if n is None]
            if bad:
                raise InvalidDataError(f"{what}: column {bad[0]!r} must be 1-dimensional")
            if len(set(lengths.values())) > 1:
                raise InvalidDataError(f"{what}: columns have different lengths {lengths}")
            self.n_rows = next(iter(lengths.values())) if lengths else 0
        else:
            raise InvalidDataError(
                f"{what} must be a pandas DataFrame or a mapping {{column: 1-D array}}; "
                f"got {type(table).__name__}")
        if self.n_rows < 1:
            raise TableError(f"{self.what} has no rows")

    def where(self, k: int) -> str:
        """Where data row ``k`` (0-based position) is, for a message (module docstring)."""
        if self._lines is not None:
            return f"line {int(self._lines[k])} of {self.what}"
        if self._index is not None:
            label = self._index[k]
            return f"index {label.item() if hasattr(label, 'item') else label!r}"
        return f"row {k}"

    def check_present(self, columns, role: str) -> None:
        for c in columns:
            if c not in self.names:
                shown = ", ".join(map(repr, self.names[:12])) + (", ..." if len(self.names) > 12 else "")
                raise TableError(f"{role} column {c!r} is not in {self.what} (columns: {shown})", role)

    def categories(self, name):
        """The declared categories of a pandas ``category`` column (``None`` otherwise); a
        declared category may have no rows."""
        if self._frame is None:
            return None
        dtype = getattr(self._frame[name], "dtype", None)
        cats = getattr(dtype, "categories", None)
        return None if cats is None else [_plain(c) for c in cats]

    def column(self, name):
        if self._frame is not None:
            return _pandas_column(self._frame[name])
        return _numpy_column(self._arrays[name])


def _numpy_column(values: np.ndarray):
    kind = values.dtype.kind
    if kind in "biuf":
        return values.astype(float), "numeric"
    if kind in "US":
        return values.astype(object), "categorical"
    if kind == "O":
        present = [v for v in values if not _is_missing(v)]
        if present and all(isinstance(v, (bool, np.bool_)) for v in present):
            return np.array([np.nan if _is_missing(v) else float(v) for v in values]), "numeric"
        if present and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                           for v in present):
            return np.array([np.nan if _is_missing(v) else float(v) for v in values]), "numeric"
        if all(isinstance(v, str) for v in present):
            return values, "categorical"
        return values, "other"
    return values.astype(object), "other"


def _pandas_column(series):
    import pandas as pd

    if isinstance(series, pd.DataFrame):   # duplicated column name
        raise InvalidDataError(f"column {series.columns[0]!r} appears more than once")
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        values = series.astype(object).to_numpy()
        values = np.array([None if _is_missing(v) else v for v in values], dtype=object)
        return values, ("categorical" if all(isinstance(c, str) for c in dtype.categories) else "other")
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                             and not pd.api.types.is_complex_dtype(dtype)):
        return series.to_numpy(dtype=float, na_value=np.nan), "numeric"
    if pd.api.types.is_string_dtype(dtype) or dtype == object:
        values = series.to_numpy(dtype=object)
        values = np.array([None if _is_missing(v) else v for v in values], dtype=object)
        return _numpy_column(values)
    return series.to_numpy(dtype=object), "other"


def _missing_mask(values: np.ndarray, kind: str) -> np.ndarray:
    if kind == "numeric":
        return ~np.isfinite(values)
    return np.array([_is_missing(v) for v in values], dtype=bool)


def _check_complete(cols: TableColumns, values, kind, column: str, role: str) -> None:
    bad = _missing_mask(values, kind)
    if bad.any():
        what = "missing or infinite" if kind == "numeric" else "missing"
        first = int(np.flatnonzero(bad)[0])
        text = cols.na_text.get(column, {}).get(first)
        read = (f", the text {text!r}, which pandas reads as missing; to keep such text, read the file "
                "with pandas.read_csv(path, keep_default_na=False)" if text is not None else "")
        raise TableError(
            f"{role} column {column!r} has {int(bad.sum())} {what} value(s) (first at "
            f"{cols.where(first)}{read}); drop or impute them first", role)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_not_mixed(cols: TableColumns, values, column, role: str) -> None:
    """A text column in which some entries are numbers and others are not (``"12"``, ``"?"``) is
    a numeric column with placeholders or typos, not a set of categories: refuse to encode it."""
    numeric = np.array([_is_number(v) for v in values], dtype=bool)
    if numeric.any() and not numeric.all():
        k = int(np.flatnonzero(~numeric)[0])
        raise TableError(
            f"{role} column {column!r} cannot be encoded: it mixes numbers and text (e.g. {values[k]!r} "
            f"at {cols.where(k)}); clean it, or make every entry a category name", role)


def encode_features(cols: TableColumns, columns, role: str = "feature"):
    """``(X, names, one_hot)``: the float design of ``columns`` (in order), the name of every
    design column, and ``{column: [design names]}`` for the one-hot encoded ones."""
    cols.check_present(columns, role)
    blocks, names, one_hot = [], [], {}
    for c in columns:
        values, kind = cols.column(c)
        if kind == "other":
            present = [v for v in values if not _is_missing(v)]
            types = sorted({type(v).__name__ for v in present})
            shown = next((v for v in present if not isinstance(v, str)), None)
            raise TableError(
                f"{role} column {c!r} cannot be encoded: it must be numeric, boolean or string "
                f"categories; it holds {', '.join(types)} values such as {shown!r}", role)
        _check_complete(cols, values, kind, c, role)
        if kind == "categorical":
            _check_not_mixed(cols, values, c, role)
        if kind == "numeric":
            blocks.append(values[:, None])
            names.append(str(c))
        else:
            levels = sorted(set(values))
            blocks.append((values[:, None] == np.array(levels, dtype=object)[None, :]).astype(float))
            dummies = [f"{c}={v}" for v in levels]
            names.extend(dummies)
            one_hot[str(c)] = dummies
    if not blocks:
        raise TableError(f"no {role} columns selected", role)
    return np.hstack(blocks), names, one_hot


def _raw_labels(cols: TableColumns, column: str, role: str):
    cols.check_present([column], role)
    values, kind = cols.column(column)
    if kind == "other":
        raise TableError(f"{role} column {column!r} holds values that are neither numbers nor strings", role)
    _check_complete(cols, values, kind, column, role)
    return values, kind


def _shown_classes(classes: list) -> list:
    return classes[:6] + (["..."] if len(classes) > 6 else [])


def numeric_target(cols: TableColumns, column: str) -> np.ndarray:
    """The regression target: a numeric column without missing values."""
    values, kind = _raw_labels(cols, column, "target")
    if kind != "numeric":
        classes = sorted_unique(values, f"target column {column!r}")
        raise TableError(
            f"target column {column!r} is not numeric (text, {len(classes)} classes {_shown_classes(classes)}); "
            "regression needs numbers; a text target takes task='classification' (exactly two classes, "
            "binary losses) or task='multiclass' (two or more classes, the multinomial loss)", "target")
    return values


def binary_target(cols: TableColumns, column: str, pos_label=None):
    """``(y, label_map)``: the target as labels in {-1, +1} and ``{"-1": value, "+1": value}``.

    Exactly two classes are required. ``+1`` is ``pos_label`` if given, else the larger of the two
    (sorted) values; labels already in {-1, +1} keep their sign."""
    values, _ = _raw_labels(cols, column, "target")
    classes = sorted(set(values.tolist()))
    if len(classes) != 2:
        hint = (f"; task='multiclass' (the multinomial loss) takes all {len(classes)}" if len(classes) > 2
                else "")
        raise TableError(
            f"target column {column!r} has {len(classes)} class(es) {_shown_classes(classes)}; a binary "
            f"classifier needs exactly two{hint}", "target")
    if pos_label is None:
        pos = classes[1]
    elif pos_label in classes:
        pos = pos_label
    else:
        raise InvalidParameterError(f"pos_label must be one of the classes {classes} of target column "
                                    f"{column!r}; got {pos_label!r}")
    neg = classes[0] if pos == classes[1] else classes[1]
    y = np.where(values == pos, 1.0, -1.0)
    return y, {"-1": _plain(neg), "+1": _plain(pos)}


def class_target(cols: TableColumns, column: str) -> np.ndarray:
    """The multi-class target: the raw class labels (strings, or numbers -- integers when every
    value is integral), as an object array for :func:`drflmodel.data.class_indices`, which maps
    them to ``0..K-1`` in sorted order (scikit-learn's ``classes_``)."""
    return labels_column(cols, column, "target")


def labels_column(cols: TableColumns, column: str, role: str) -> np.ndarray:
    """The raw labels of a client or group column (no missing values), as an object array."""
    values, kind = _raw_labels(cols, column, role)
    if kind == "numeric" and np.all(values == np.round(values)):
        return np.array([int(v) for v in values], dtype=object)
    return np.asarray(values, dtype=object)


def label_key(v):
    """A hashable key under which equal labels of different numpy/python types coincide."""
    v = v.item() if hasattr(v, "item") else v
    return v


def client_labels(clients, n: int) -> np.ndarray:
    labels = np.asarray(clients, dtype=object)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InvalidDataError(f"clients must be 1-dimensional (one label per row); got shape {labels.shape}")
    if labels.shape[0] != n:
        raise InvalidDataError(f"clients has {labels.shape[0]} labels but X has {n} rows")
    for k, v in enumerate(labels):
        v = label_key(v)
        if v is None or (isinstance(v, float) and v != v):
            raise InvalidDataError(f"clients: missing label at row {k}")
        if not isinstance(v, (str, int, float, np.str_)):
            raise InvalidDataError(f"clients: labels must be strings or numbers; row {k} has {v!r}")
    return labels


def sorted_unique(values, what: str) -> list:
    keys = {label_key(v) for v in values}
    try:
        return sorted(keys)
    except TypeError:
        raise InvalidDataError(f"{what}: labels must be all strings or all numbers to be ordered; "
                               f"got {sorted(map(repr, keys))[:6]}") from None


def feature_list(cols, features, exclude) -> list:
    if features is None:
        return [c for c in cols.names if c not in exclude]
    if isinstance(features, str) or not hasattr(features, "__iter__"):
        raise InvalidParameterError(f"features must be a list of column names; got {features!r}")
    features = list(features)
    if len(set(features)) != len(features):
        raise InvalidParameterError(f"features must not repeat a column; got {features}")
    for c in features:
        if c in exclude:
            raise InvalidParameterError(f"column {c!r} is the target, client or group column and "
                                        "cannot also be a feature")
    cols.check_present(features, "feature")
    return features


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def read_table(path, source: str):
    """Read a CSV or Parquet file into a pandas ``DataFrame`` (pandas, and pyarrow for parquet,
    are optional dependencies: the extras ``pandas`` and ``parquet``)."""
    if source not in TABLE_SOURCES:
        raise InvalidParameterError(f"source must be one of {', '.join(TABLE_SOURCES)}; got {source!r}")
    try:
        import pandas as pd
    except ImportError:
        raise InvalidParameterError(
            f"reading a {source} file needs pandas: pip install 'drflmodel[pandas]'") from None
    path = Path(path)
    if source == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InvalidParameterError(
                "reading a parquet file needs pyarrow: pip install 'drflmodel[parquet]'") from None
        return pd.read_parquet(path)
    try:
        df = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidDataError(f"{path}: cannot read it as CSV: {first}") from None
    df.attrs[SOURCE_ATTR] = {"name": path.name, "lines": _record_lines(path), "na_text": _na_text(pd, path, df)}
    return df


def _na_text(pd, path: Path, df) -> dict:
    """``{column: {row: text}}``: the non-empty texts pandas read as missing (its default markers
    ``NA``, ``n/a``, ``null``, ``NaN``, ...), so that a complaint about a missing value can say
    which text it was (an empty field is missing as written, and not listed)."""
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError):
        return {}
    if raw.shape != df.shape or list(raw.columns) != list(df.columns):
        return {}
    found = {}
    for column in df.columns:
        rows = np.flatnonzero(df[column].isna().to_numpy() & (raw[column].str.strip() != "").to_numpy())
        if rows.size:
            found[column] = {int(k): str(raw[column].iloc[k]) for k in rows[:3]}
    return found


def _record_lines(path: Path) -> list[int] | None:
    """The file line on which each data record of a CSV file starts (header = line 1; blank lines
    skipped, as ``pandas.read_csv`` does), or ``None`` if the file cannot be scanned."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            lines, start = [], 1
            for record in reader:
                if any(field.strip() for field in record):
                    lines.append(start)
                start = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return lines[1:]            # the first record is the header


# --------------------------------------------------------------------------- task and scaling
def infer_task(cols: TableColumns, column: str) -> str:
    """The task a target column implies: ``"classification"`` when it has exactly two distinct
    values (numbers or strings); ``"multiclass"`` when it holds text with more than two distinct
    values (text cannot be a regression target); else ``"regression"`` (numbers)."""
    values, kind = _raw_labels(cols, column, "target")
    distinct = len(set(values.tolist()))
    if distinct == 2:
        return "classification"
    return "multiclass" if kind == "categorical" and distinct > 2 else "regression"


def standardize(X: np.ndarray, names: list, one_hot: dict, intercept: bool):
    """``(X, scaling)``: every numeric feature column with a positive standard deviation divided by
    it -- and centred by its mean when the design has an intercept column (``intercept``), which
    absorbs the shift; without one, centring would change the model. One-hot columns and the
    intercept are left as they are. ``scaling = {"columns": {name: {"mean", "scale"}}, "centred"}``
    with the statistics of the whole table (every client's rows: the per-client counts, sums and
    sums of squares a federation would aggregate once)."""
    dummies = {d for block in one_hot.values() for d in block}
    X = np.array(X, dtype=float, copy=True)
    columns = {}
    for j, name in enumerate(names):
        if name in dummies or name == "intercept":
            continue
        mean, scale = float(X[:, j].mean()), float(X[:, j].std())
        if scale <= 0:
            continue
        X[:, j] = (X[:, j] - (mean if intercept else 0.0)) / scale
        columns[name] = {"mean": mean if intercept else 0.0, "scale": scale}
    return X, {"columns": columns, "centred": bool(intercept)}


def to_file_units(theta, feature_names: list, scaling: dict) -> np.ndarray:
    """Coefficients on standardized columns (:func:`standardize`) as coefficients on the file's
    columns, for the same predictions: :math:`\\theta_j/s_j` on a scaled column and, with centring,
    the intercept :math:`\\theta_0-\\sum_j\\theta_jm_j/s_j`."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape != (len(feature_names),):
        raise InvalidParameterError(f"theta must have one entry per design column ({len(feature_names)}); "
                                    f"got shape {theta.shape}")
    out = theta.copy()
    shift = 0.0
    for name, st in scaling["columns"].items():
        j = feature_names.index(name)
        out[j] = theta[j] / st["scale"]
        shift += out[j] * st["mean"]
    if scaling.get("centred") and shift:
        out[feature_names.index("intercept")] -= shift
    return out
