"""The in-process grid's wire: every message is encoded by Flower's protobuf serialization, and the
receiver's copy equals what decoding the bytes would give (the default skips the decode, the
costliest part of the round trip) while sharing no container with the sender."""

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict

from drflmodel.flower.grid import LocalGrid, _wire


@pytest.fixture(autouse=True)
def _task_identity():
    """Flower builds message metadata from its task identity, which an open grid sets."""
    from flwr.clientapp import ClientApp

    with LocalGrid(ClientApp(), 1):
        yield


def _message():
    content = RecordDict({
        "payload": ArrayRecord({"model": Array(np.arange(5.0)), "m": Array(np.eye(3, dtype=np.float32))}),
        "config": ConfigRecord({"run": "r", "seed": 7, "flag": True, "eta": 0.25, "ids": [1, 2, 3],
                                "blob": b"\x00\x01", "names": ["a", "b"]}),
        "metrics": MetricRecord({"partition-id": 3, "loss": 0.5, "hist": [0.1, 0.2]}),
    })
    msg = Message(content, 12345, "train.step", group_id="g1")
    msg.metadata.__dict__["_message_id"] = "mid"
    return msg


def _as_plain(msg):
    out = {}
    for key, record in msg.content.items():
        if isinstance(record, ArrayRecord):
            out[key] = {k: (a.numpy().dtype.str, a.numpy().tolist()) for k, a in record.items()}
        else:
            out[key] = {k: v for k, v in record.items()}
    return out


def test_the_copy_equals_the_decoded_message():
    msg = _message()
    fast, decoded = _wire(msg), _wire(msg, decode=True)
    assert _as_plain(fast) == _as_plain(decoded) == _as_plain(msg)
    for field in ("message_id", "dst_node_id", "message_type", "group_id", "ttl", "created_at", "run_id"):
        assert getattr(fast.metadata, field) == getattr(decoded.metadata, field), field


def test_the_receiver_shares_no_container_with_the_sender():
    msg = _message()
    got = _wire(msg)
    assert got.content["payload"]["model"] is not msg.content["payload"]["model"]
    got.content["config"]["ids"].append(4)
    got.content["payload"].pop("model")
    del got.content["metrics"]
    assert msg.content["config"]["ids"] == [1, 2, 3]
    assert "model" in msg.content["payload"] and "metrics" in msg.content


def test_content_a_network_cannot_carry_fails_on_the_grid_too():
    msg = _message()
    msg.content["config"].__dict__["_data"]["huge"] = 2 ** 70      # past the record's check: proto int64
    with pytest.raises(Exception):
        _wire(msg)


def test_errors_cross_as_errors():
    msg = _message()
    reply = Message(Error(code=3, reason="boom"), reply_to=msg)
    got = _wire(reply)
    assert got.has_error() and got.error.reason == "boom" and got.error.code == 3
