"""Flower Datasets partitions as tables: the rows each partition of a ``FederatedDataset`` or a
``Partitioner`` (package ``flwr-datasets``) gives, read through its own ``load_partition`` -- the
same partitioner and the same seed as the Flower app that trains on them, so the oracle and the app
see exactly the same rows.

Duck-typed (nothing here imports Flower Datasets): a *federated dataset* has ``partitioners`` (a
dict ``split -> Partitioner``) and ``load_partition(partition_id, split)``; a *partitioner* has
``num_partitions`` and ``load_partition(partition_id)`` (its dataset assigned). A partition is a
Hugging Face ``datasets.Dataset``; ``to_pandas()`` turns it into a DataFrame (a ``ClassLabel``
column becomes its integer codes).

``take`` says which rows of a partition the app trains on: ``None`` (all of them), a fraction
``f`` in (0, 1] (the first ``int(f * len(partition))`` rows, as Flower's quickstarts split a
partition ``X[: int(0.8 * len(X))]``), or a function ``partition -> partition`` (e.g.
``lambda p: p.train_test_split(test_size=0.2, seed=42)["train"]``, the other common split).
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidDataError, InvalidParameterError

__all__ = ["resolve", "check_take", "take_rows", "partition_frame", "partitions_table"]

#: the client column of the pooled table: ``"partition-i"`` (zero-padded to sort as numbers)
PARTITION_COLUMN = "partition"


def resolve(source, split: str | None = None):
    """``(load, num_partitions, description)`` of a federated dataset or a partitioner:
    ``load(partition_id)`` returns that partition."""
    if hasattr(source, "partitioners") and hasattr(source, "load_partition"):
        names = list(getattr(source, "_partitioners", None) or source.partitioners)
        if split is None:
            if len(names) != 1:
                raise InvalidParameterError(f"split must name one of the partitioned splits {names}; got None")
            split = names[0]
        elif split not in names:
            raise InvalidParameterError(f"split must be one of the partitioned splits {names}; got {split!r}")
        partitioner = source.partitioners[split]
        return ((lambda i: source.load_partition(i, split)), int(partitioner.num_partitions),
                {"partitioner": type(partitioner).__name__, "split": split})
    if hasattr(source, "load_partition") and hasattr(source, "num_partitions"):
        if split is not None:
            raise InvalidParameterError("split applies to a FederatedDataset; a Partitioner has one dataset")
        if getattr(source, "is_dataset_assigned", lambda: True)() is False:
            raise InvalidParameterError(
                f"source: the {type(source).__name__} has no dataset assigned; set its dataset first "
                "(partitioner.dataset = datasets.Dataset.from_pandas(df)) or pass a FederatedDataset")
        n = int(source.num_partitions)
        rows = len(source.dataset) if hasattr(source, "dataset") else None
        if rows is not None and n > rows:
            raise InvalidDataError(
                f"source: {n} partitions of a {rows}-row dataset leave at least {n - rows} partition(s) with no "
                f"rows (an IidPartitioner: partitions {rows} to {n - 1}); use at most {rows} partitions")
        return source.load_partition, n, {"partitioner": type(source).__name__}
    raise InvalidParameterError(
        "source must be a Flower Datasets FederatedDataset or Partitioner (with its dataset assigned); "
        f"got {type(source).__name__}")


def check_take(take):
    """``take`` checked (module docstring): ``None``, a fraction in (0, 1] or a function."""
    if take is None or callable(take):
        return take
    if isinstance(take, numbers.Real) and not isinstance(take, bool) and 0.0 < float(take) <= 1.0:
        return float(take)
    raise InvalidParameterError(f"take must be None, a fraction in (0, 1] or a function partition -> partition; "
                                f"got {take!r}")


def take_rows(partition, take):
    """The rows of ``partition`` the app trains on (module docstring)."""
    take = check_take(take)
    if take is None:
        return partition
    if callable(take):
        return take(partition)
    return partition.select(range(int(take * len(partition))))


def partition_frame(load, partition_id: int, take=None):
    """Partition ``partition_id`` (after ``take``) as a pandas DataFrame."""
    try:
        part = load(partition_id)
    except IndexError as exc:          # Flower Datasets' partitioners index past a too-small dataset
        raise InvalidDataError(f"partition {partition_id} has no rows: the partitioner could not fill it "
                               f"({exc}); use fewer partitions") from None
    part = take_rows(part, take)
    frame = part.to_pandas() if hasattr(part, "to_pandas") else part
    if not hasattr(frame, "columns") or not hasattr(frame, "reset_index"):
        raise InvalidParameterError(
            f"take must return a partition (a datasets.Dataset, e.g. p.select(...)) or a pandas DataFrame; "
            f"for partition {partition_id} it returned a {type(frame).__name__}")
    if len(frame) == 0:
        raise InvalidDataError(f"partition {partition_id} has no rows (after take={take!r})")
    return frame


def partitions_table(load, num_partitions: int, take=None):
    """Every partition's rows in one DataFrame, with ``"partition-i"`` in :data:`PARTITION_COLUMN`."""
    import pandas as pd

    frames, width = [], len(str(num_partitions - 1))
    for i in range(num_partitions):
        frame = partition_frame(load, i, take).reset_index(drop=True)
        if PARTITION_COLUMN in frame.columns:
            raise InvalidDataError(f"the data already has a column named {PARTITION_COLUMN!r} (the client "
                                   "column of the partitions); rename it")
        frames.append(frame.assign(**{PARTITION_COLUMN: np.full(len(frame), f"partition-{i:0{width}d}")}))
    return pd.concat(frames, ignore_index=True)
