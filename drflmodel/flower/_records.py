"""How drflmodel's quantities travel in Flower messages, and how they are counted.

A message from the server carries ``RecordDict({"payload": ArrayRecord, "config": ConfigRecord})``
and a client's reply ``RecordDict({"payload": ArrayRecord, "metrics": MetricRecord})``. The
``payload`` holds the named float arrays the simulator counts (``"model"``, ``"losses"`` +
``"controls"``, ...); ``config`` and ``metrics`` hold protocol scalars the simulator treats as
known to both sides and does not count (the round's step size and number of local steps, the
snapshot index, the partition id, the number of gradient evaluations).

Counting (the simulator's convention, :mod:`drflmodel.solvers._base`): one message per receiving
or sending client; its floats are the sizes of the arrays in its ``payload``; its name is the
payload's keys joined by ``"+"`` (so a Flower run's ledger reads like the simulator's
``Trace.info["comm_schedule"]``).
"""

from __future__ import annotations

import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

__all__ = ["PAYLOAD", "CONFIG", "METRICS", "DIAGNOSTICS", "down_content", "up_content",
           "payload_arrays", "diagnostic_arrays", "payload_floats", "payload_name", "record_floats",
           "rng_to_text", "rng_from_text"]

PAYLOAD, CONFIG, METRICS = "payload", "config", "metrics"
#: arrays a client returns for the server's *record* only (e.g. a vertical party's block, so the
#: trace holds theta); not part of the algorithm's communication, not counted
DIAGNOSTICS = "diagnostics"


def _array_record(arrays: dict) -> ArrayRecord:
    return ArrayRecord({k: Array(np.ascontiguousarray(np.asarray(v, float))) for k, v in arrays.items()})


def down_content(arrays: dict, config: dict) -> RecordDict:
    """Server → client content: float ``arrays`` (counted) and protocol ``config`` (not counted)."""
    return RecordDict({PAYLOAD: _array_record(arrays), CONFIG: ConfigRecord(dict(config))})


def up_content(arrays: dict, metrics: dict, diagnostics: dict | None = None) -> RecordDict:
    """Client → server content: float ``arrays`` (counted), protocol ``metrics`` and record-only
    ``diagnostics`` (not counted)."""
    records = {PAYLOAD: _array_record(arrays), METRICS: MetricRecord(dict(metrics))}
    if diagnostics:
        records[DIAGNOSTICS] = _array_record(diagnostics)
    return RecordDict(records)


def _arrays(content: RecordDict, key: str) -> dict:
    rec = content.array_records.get(key)
    return {} if rec is None else {k: np.array(v.numpy(), float) for k, v in rec.items()}


def payload_arrays(content: RecordDict) -> dict:
    """The named float arrays of a message's payload (copies, float64)."""
    return _arrays(content, PAYLOAD)


def diagnostic_arrays(content: RecordDict) -> dict:
    """The record-only arrays of a reply (not counted)."""
    return _arrays(content, DIAGNOSTICS)


def payload_floats(content: RecordDict) -> int:
    """Number of floats in the content's payload (what the ledger counts)."""
    rec = content.array_records.get(PAYLOAD)
    return 0 if rec is None else int(sum(int(np.prod(a.shape)) for a in rec.values()))


def record_floats(content: RecordDict) -> int:
    """Number of floats in every ``ArrayRecord`` of the content (any strategy's messages)."""
    return int(sum(int(np.prod(a.shape)) for rec in content.array_records.values() for a in rec.values()))


def payload_name(content: RecordDict) -> str:
    """The payload's array names joined by ``"+"`` (the simulator's ledger name)."""
    rec = content.array_records.get(PAYLOAD)
    return "" if rec is None else "+".join(rec.keys())


def rng_to_text(rng: np.random.Generator) -> str:
    """A generator's exact state as text (a ``ConfigRecord`` holds 64-bit integers only; PCG64's
    state is 128-bit)."""
    return json.dumps(rng.bit_generator.state)


def rng_from_text(text: str) -> np.random.Generator:
    """Inverse of :func:`rng_to_text`."""
    state = json.loads(text)
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)
