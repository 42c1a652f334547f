"""A synchronous in-process Flower ``Grid``: the same ``ServerApp`` and ``ClientApp`` code as on
Flower's engines, in milliseconds per round (notes/flower-1.41.md).

:class:`LocalGrid` implements Flower's abstract ``Grid`` (``get_node_ids``, ``push_messages``,
``pull_messages``, ``send_and_receive``, ``create_message``, ``set_run`` / ``run``). Each supernode
is a ``Context`` with ``node_config = {"partition-id": i, "num-partitions": N}`` and its own
persistent ``state``; node ids are random 63-bit integers (as Flower's: the server must learn
the partitions). ``push_messages`` delivers each message to its node's ``ClientApp`` at once;
every config and metric record of every message and reply is encoded by Flower's protobuf
serializer (``flwr.common.serde``), so content a network cannot carry fails here as on Flower's
engines (array records -- bytes with a dtype and a shape -- and Flower's own metadata always
encode), and the receiver gets its own copy: its own record containers around the same
(immutable) array bytes, equal to what ``message_from_proto`` would decode (tested), at a fraction
of the cost; ``LocalGrid(decode=True)`` sends every whole message through
``message_to_proto`` / bytes / ``message_from_proto`` instead. A ``ClientApp`` that raises produces Flower's error reply
(``ErrorCode.CLIENT_APP_RAISED_EXCEPTION``), as the simulation engine does.

Flower builds a message's metadata from a process-wide task identity
(``flwr.supercore.task_identity.TaskIdentity``: run, node and task ids), set by Flower's own
runtimes. :class:`LocalGrid` sets it while it is open (``with LocalGrid(...) as grid``, or until
:meth:`LocalGrid.close`) and restores the previous values afterwards. This touches an internal of
Flower 1.41 (pinned in ``pyproject.toml``; tested in ``tests/flower``).
"""

from __future__ import annotations

import copy
import uuid
from typing import Iterable

import numpy as np
from flwr.app import Array, ConfigRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode
from flwr.app.message.message import make_message
from flwr.common.serde import (config_record_to_proto, message_from_proto, message_to_proto,
                               metric_record_to_proto)
from flwr.proto.message_pb2 import Message as ProtoMessage  # pylint: disable=no-name-in-module
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from .._validation import check_int
from ..errors import InvalidParameterError
from ._logs import flower_logs

__all__ = ["LocalGrid"]


def _copy_value(value):
    """A record value for the receiver: lists and arrays copied (an array's bytes are immutable)."""
    if isinstance(value, list):
        return list(value)
    return copy.copy(value) if isinstance(value, Array) else value


def _wire(message: Message, decode: bool = False) -> Message:
    """What the other side receives (module docstring): with ``decode=True`` the message decoded
    from its protobuf bytes; by default a copy, after the records a network could refuse -- config
    and metric records (e.g. an integer beyond 64 bits) -- are encoded by Flower's serializer
    (array records are bytes with a dtype and a shape, and the metadata is Flower's own: both
    always encode)."""
    if decode:
        return message_from_proto(ProtoMessage.FromString(message_to_proto(message).SerializeToString()))
    content = None
    if not message.has_error():
        content = RecordDict()
        for key, record in message.content.items():
            if isinstance(record, ConfigRecord):
                config_record_to_proto(record)
            elif isinstance(record, MetricRecord):
                metric_record_to_proto(record)
            copied = copy.copy(record)                   # validated by the sender's records and by
            copied.__dict__["_data"] = {k: _copy_value(v)     # the encoding; new containers, shared
                                        for k, v in record.__dict__["_data"].items()}   # bytes
            content.__dict__["_data"][key] = copied
    return make_message(metadata=copy.copy(message.metadata), content=content,
                        error=message.error if message.has_error() else None)


class LocalGrid(Grid):
    """``num_supernodes`` in-process supernodes running ``client_app`` (module docstring).

    Parameters
    ----------
    client_app : a Flower ``ClientApp``.
    num_supernodes : number of supernodes; supernode *i* holds ``partition-id = i``.
    node_configs : optional list of ``node_config`` dicts (overrides the default per node).
    run_config : the ``Context.run_config`` every client sees.
    seed : seed of the random node ids.
    decode : decode every message from its protobuf bytes (default: encode and copy; module docstring).
    verbose : Flower's INFO log while the grid is open: ``None`` (default) keeps it quiet unless you
        configured Flower's logger, ``True`` shows it, ``False`` hides it
        (Flower's warnings and drflmodel's own lines always show).
    """

    def __init__(self, client_app, num_supernodes: int, node_configs=None, run_config=None,
                 seed: int = 0, decode: bool = False, verbose: bool | None = None):
        n = check_int(num_supernodes, "num_supernodes", low=1)
        if node_configs is not None and len(node_configs) != n:
            raise InvalidParameterError(f"node_configs must have {n} entries; got {len(node_configs)}")
        rng = np.random.default_rng(seed)
        self._run = Run.create_empty(run_id=int(rng.integers(1, 2**62)))
        ids = [int(v) for v in rng.choice(2**62, size=n, replace=False) + 2]
        configs = node_configs or [{"partition-id": i, "num-partitions": n} for i in range(n)]
        self.contexts = {node: Context(run_id=self._run.run_id, node_id=node, node_config=dict(cfg),
                                       state=RecordDict(), run_config=dict(run_config or {}))
                         for node, cfg in zip(ids, configs)}
        self.client_app = client_app
        self.decode = bool(decode)
        self._replies: dict[str, Message] = {}
        self._saved = None
        self._logs = None
        self.verbose = verbose
        self.open()

    # ------------------------------------------------------------------ task identity
    def open(self) -> "LocalGrid":
        """Set Flower's task identity to this grid's run, and quiet Flower's log (done by the
        constructor)."""
        if self._saved is None:
            self._logs = flower_logs(self.verbose)
            self._logs.__enter__()
            self._saved = tuple(getattr(TaskIdentity, f"_{k}") for k in ("run_id", "node_id", "task_id"))
            TaskIdentity.run_id = self._run.run_id
            TaskIdentity.node_id = SUPERLINK_NODE_ID
            TaskIdentity.task_id = 1
        return self

    def close(self) -> None:
        """Restore the task identity that was set before this grid opened, and Flower's log."""
        if self._saved is not None:
            TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = self._saved
            self._saved = None
            self._logs.__exit__(None, None, None)
            self._logs = None

    def __enter__(self) -> "LocalGrid":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ Grid API
    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            received = _wire(msg, self.decode)
            context = self.contexts.get(received.metadata.dst_node_id)
            if context is None:
                reply = Message(Error(code=ErrorCode.NODE_UNAVAILABLE,
                                      reason=f"no supernode {received.metadata.dst_node_id}"),
                                reply_to=received)
            else:
                before = copy.deepcopy(context.state)
                try:
                    reply = self.client_app(received, context)
                except Exception as exc:  # noqa: BLE001 - Flower turns it into an error reply
                    context.state = before          # as on Flower: a failed call leaves no state
                    reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                          reason=f"{type(exc).__name__}: {exc}"), reply_to=received)
            reply.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            self._replies[msg.metadata.message_id] = _wire(reply, self.decode)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(m) for m in list(message_ids) if m in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))
