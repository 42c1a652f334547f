"""The bridge to Flower Datasets: the rows a Flower app loads with ``flwr_datasets``, given to the
oracle without a hand-written ``rows=``.

A Flower app builds its data at run time from its node config, e.g. Flower's scikit-learn
quickstart::

    partitioner = IidPartitioner(num_partitions=num_partitions)
    fds = FederatedDataset(dataset="hitorilabs/iris", partitioners={"train": partitioner})
    partition = fds.load_partition(partition_id, "train")   # then X = partition[FEATURES], first 80%

:class:`FlowerDatasets` describes the same thing once -- the data set, the partitioner (its class,
built with each run's ``num_partitions``), the columns, which rows are trained on -- and builds the
same ``FederatedDataset`` (Flower's defaults: shuffled with seed 42), so that

* ``FlowerDatasets(...)(context)`` gives a supernode the ``(X, y)`` its app trains on (the
  ``rows=`` of :func:`~drflmodel.flower.app_grading.answering`): the federated oracle is computed from
  exactly those rows;
* :meth:`FlowerDatasets.federation` gives the same rows as a :class:`~drflmodel.data.Federation`
  (one client per partition, :meth:`~drflmodel.data.Federation.from_partitions`), for the
  centralized oracle or anything else drflmodel does.

Flower Datasets is in the ``flower`` extra (``pip install "drflmodel[flower]"``); data sets are
loaded by Hugging Face ``datasets`` (a hub name, or a local folder or file: ``dataset="csv",
data_files="iris.csv"`` or a directory path).
"""

from __future__ import annotations

import numpy as np

from .. import _partitions
from ..errors import InvalidDataError, InvalidParameterError

__all__ = ["FlowerDatasets"]


class FlowerDatasets:
    """A Flower Datasets source as the app declares it (module docstring).

    Parameters
    ----------
    dataset : the data set's name (``FederatedDataset(dataset=...)``: a Hugging Face hub name, a
        loader such as ``"csv"`` with ``data_files=...``, or a local directory).
    partitioner : the partitioner class (e.g. ``IidPartitioner``, ``DirichletPartitioner``), or a
        function ``num_partitions -> Partitioner``; built once per number of partitions.
    target : the label column; ``features`` the feature columns in the app's order (default: every
        other column).
    split : the partitioned split (default ``"train"``).
    take : which rows of a partition the app trains on: ``None`` (all), a fraction in (0, 1] (the
        first ``int(f * len(partition))`` rows), or a function ``partition -> partition``.
    partitioner_options : keyword arguments of the partitioner class besides ``num_partitions``
        (e.g. ``{"partition_by": "label", "alpha": 0.5, "seed": 42}``).
    shuffle, seed : ``FederatedDataset``'s (defaults ``True`` and 42, Flower's).
    load_options : other keyword arguments of ``FederatedDataset`` (passed to
        ``datasets.load_dataset``, e.g. ``data_files=``).
    """

    def __init__(self, dataset: str, partitioner, *, target: str, features=None, split: str = "train",
                 take=None, partitioner_options: dict | None = None, shuffle: bool = True, seed: int | None = 42,
                 **load_options):
        if not isinstance(dataset, str) or not dataset:
            raise InvalidParameterError(f"dataset must be a data set name or path; got {dataset!r}")
        if not callable(partitioner):
            raise InvalidParameterError("partitioner must be a Flower Datasets partitioner class or a function "
                                        f"num_partitions -> Partitioner; got {partitioner!r}")
        take = _partitions.check_take(take)
        self.dataset, self.partitioner, self.target, self.split = dataset, partitioner, target, split
        self.features = None if features is None else list(features)
        self.take, self.shuffle, self.seed = take, shuffle, seed
        self.partitioner_options = dict(partitioner_options or {})
        self.load_options = load_options
        self._made: dict[int, object] = {}

    def federated_dataset(self, num_partitions: int):
        """The ``FederatedDataset`` of a run with ``num_partitions`` partitions (built once)."""
        num_partitions = int(num_partitions)
        if num_partitions not in self._made:
            from flwr_datasets import FederatedDataset

            from ._hygiene import network_hygiene

            network_hygiene()
            if isinstance(self.partitioner, type):
                part = self.partitioner(num_partitions=num_partitions, **self.partitioner_options)
            else:
                part = self.partitioner(num_partitions)
            self._made[num_partitions] = FederatedDataset(dataset=self.dataset, partitioners={self.split: part},
                                                          shuffle=self.shuffle, seed=self.seed, **self.load_options)
        return self._made[num_partitions]

    def frame(self, partition_id: int, num_partitions: int):
        """The rows partition ``partition_id`` trains on, as a pandas DataFrame."""
        fds = self.federated_dataset(num_partitions)
        return _partitions.partition_frame(lambda i: fds.load_partition(i, self.split), int(partition_id), self.take)

    def rows(self, partition_id: int, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
        """``(X, y)`` of partition ``partition_id``: the feature columns as floats (in the order of
        ``features``) and the target column, as the app passes them to ``fit``."""
        frame = self.frame(partition_id, num_partitions)
        features = self.features or [c for c in frame.columns if c != self.target]
        missing = [c for c in [self.target, *features] if c not in frame.columns]
        if missing:
            raise InvalidDataError(f"column {missing[0]!r} is not in {self.dataset!r} (columns: {list(frame.columns)})")
        try:
            X = frame[features].to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise InvalidDataError(f"the features {features} of {self.dataset!r} must be numeric: a supernode "
                                   "encodes only its own rows, so text columns would be encoded differently at "
                                   "each site; encode them in the data set") from None
        return X, frame[self.target].to_numpy()

    def __call__(self, context) -> tuple[np.ndarray, np.ndarray]:
        """``rows(partition-id, num-partitions)`` of a supernode's ``Context`` (the ``rows=`` of
        :func:`~drflmodel.flower.app_grading.answering`)."""
        config = context.node_config
        return self.rows(config["partition-id"], config["num-partitions"])

    def federation(self, num_partitions: int, **options):
        """Every partition's rows as a :class:`~drflmodel.data.Federation` (one client per partition;
        ``options`` as in :meth:`~drflmodel.data.Federation.from_partitions`, e.g. ``task``)."""
        from ..data import Federation

        return Federation.from_partitions(self.federated_dataset(num_partitions), self.target, self.features,
                                          split=self.split, take=self.take, **options)

    def __repr__(self) -> str:
        name = getattr(self.partitioner, "__name__", repr(self.partitioner))
        return (f"FlowerDatasets({self.dataset!r}, {name}, target={self.target!r}, split={self.split!r}, "
                f"take={self.take!r}, seed={self.seed})")
