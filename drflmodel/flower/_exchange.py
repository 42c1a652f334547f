"""The server's side of the privacy boundary on a Flower ``Grid``: send, collect, count.

:class:`Exchange` is to a Flower run what :class:`~drflmodel.solvers._base.ClientRuntime`'s
``broadcast`` / ``upload`` are to the simulator. It

* waits for the supernodes and checks there is exactly one per client (before any round), then
  learns which node holds which partition (the server sees random node ids) from the replies to
  the run's first message, which every algorithm sends to all clients alike (a ``query.hello``
  exchange, not counted, does it first when that message differs per client);
* sends one message per client (:meth:`Exchange.send`), pulls the replies (its own polling loop,
  ``poll_interval`` seconds, instead of ``Grid.send_and_receive``'s fixed 0.1 s), and counts
  messages and payload floats per round and direction in the simulator's
  :class:`~drflmodel.solvers._base.CommLedger`;
* records who took part: a client whose reply is an error (its ``ClientApp`` raised) or that does
  not reply within ``timeout`` drops out of the rest of the round (Flower's behaviour: the round
  goes on with the replies received); ``participation`` lists, per round, the participants and
  the reason for each failure.
"""

from __future__ import annotations

import time

import numpy as np
from flwr.app import Message

from .._validation import check_real
from ..errors import InvalidParameterError
from ..solvers import CommLedger
from ._records import (METRICS, diagnostic_arrays, down_content, payload_arrays, payload_floats,
                       payload_name)

__all__ = ["Exchange", "combine", "losses_or_stale"]


class Exchange:
    """Messages between the server and the ``n_clients`` supernodes of one run (module docstring).

    Parameters
    ----------
    grid : the Flower ``Grid`` the ``ServerApp`` received.
    n_clients : number of clients of the federation (= supernodes required).
    run : the run key (clients keep their state under it).
    timeout : seconds to wait for the replies of one exchange.
    poll_interval : seconds between two pulls.
    connect_timeout : seconds to wait for the supernodes to connect.
    """

    def __init__(self, grid, n_clients: int, run: str = "run", timeout: float = 600.0,
                 poll_interval: float = 0.005, connect_timeout: float = 60.0):
        self.grid = grid
        self.n = int(n_clients)
        self.run = str(run)
        self.timeout = check_real(timeout, "timeout", low=0.0, low_open=True)
        self.poll_interval = check_real(poll_interval, "poll_interval", low=0.0, low_open=True)
        self.connect_timeout = check_real(connect_timeout, "connect_timeout", low=0.0, low_open=True)
        self.ledger = CommLedger()
        self.node_of: dict[int, int] = {}
        self.nodes: list[int] = []
        self.seed = 0
        self.participation: list[dict] = []
        self.gradient_evaluations = 0
        self._round = 0
        self.active: set[int] = set()
        self._missing: dict[int, str] = {}
        self._took_part: set[int] = set()

    # ------------------------------------------------------------------ setup
    def connect(self, seed: int) -> None:
        """Wait for exactly :attr:`n` supernodes (else raise before any round).

        Raises :class:`~drflmodel.errors.InvalidParameterError` if more supernodes than clients
        are connected, or fewer after ``connect_timeout`` seconds."""
        self.seed = int(seed)
        deadline = time.monotonic() + self.connect_timeout
        while True:
            nodes = sorted(self.grid.get_node_ids())
            if len(nodes) > self.n:
                raise InvalidParameterError(
                    f"{len(nodes)} Flower supernodes are connected but the federation has {self.n} "
                    f"clients: run exactly one supernode per client (num_supernodes = {self.n})")
            if len(nodes) == self.n:
                break
            if time.monotonic() > deadline:
                raise InvalidParameterError(
                    f"only {len(nodes)} of the {self.n} supernodes the federation needs connected "
                    f"within {self.connect_timeout:g} s: run one supernode per client")
            time.sleep(self.poll_interval)
        self.nodes = nodes

    def _identify(self, replies: dict, errors: dict) -> None:
        """Learn ``partition -> node`` from the first replies (each carries its ``partition-id``);
        a client failing before it is identified stops the run with its reason."""
        if errors:
            node, reason = next(iter(errors.items()))
            raise InvalidParameterError(f"supernode {node} failed before the run started: {reason}")
        seen: dict[int, int] = {}
        for node, msg in replies.items():
            i = int(msg.content.metric_records[METRICS]["partition-id"])
            if i in seen:
                raise InvalidParameterError(
                    f"supernodes {seen[i]} and {node} both hold partition-id {i}: give each of the "
                    f"{self.n} supernodes its own partition-id in 0..{self.n - 1}")
            seen[i] = node
        self.node_of = dict(sorted(seen.items()))

    def _hello(self) -> None:
        """A ``query.hello`` exchange (not counted) to identify the nodes, when the first message
        of a run already differs per client."""
        replies, errors = self._exchange(
            {node: "query.hello" for node in self.nodes},
            {node: down_content({}, self._config()) for node in self.nodes}, group="hello")
        self._identify(replies, errors)

    def _config(self, config: dict | None = None) -> dict:
        return {**(config or {}), "run": self.run, "seed": self.seed, "n-clients": self.n}

    # ------------------------------------------------------------------ rounds
    def begin_round(self) -> None:
        self.ledger.begin_round()
        self.active = set(range(self.n))
        self._missing = {}
        self._took_part = set()

    def end_round(self) -> dict:
        """Close the round's ledger and participation record: ``participants`` -- the clients that
        exchanged messages in the round without failing (an algorithm's own sampling or delays
        leave clients out too); ``missing`` -- the clients that failed, with the reason."""
        self._round += 1
        self.participation.append({"round": self._round,
                                   "participants": sorted(self._took_part - set(self._missing)),
                                   "missing": {int(i): r for i, r in sorted(self._missing.items())}})
        return self.ledger.end_round()

    def send(self, op: str, payload: dict, config: dict | None = None, to=None,
             per_client: dict | None = None, per_client_payload: dict | None = None,
             count: bool = True, by_array: tuple | None = None) -> dict[int, dict]:
        """Send ``payload`` (named float arrays, counted; ``per_client_payload[i]`` added for
        client *i*) and ``config`` (+ ``per_client[i]``) to the clients ``to`` (default: those
        still taking part this round) as message type ``op``.

        Returns ``{partition: reply arrays}`` (the reply's payload and record-only diagnostics)
        for the clients that replied without error; the others are recorded as missing and
        dropped for the rest of the round. The first message of a run, sent to every node alike,
        also identifies the nodes (its replies carry their partition ids); if it differs per
        client a ``query.hello`` exchange does that first. ``count=False`` is a setup exchange
        before the rounds (not counted; any failure stops the run). ``by_array`` (names, in order)
        counts the replies per array instead of per message -- the simulator's convention for a
        client that uploads two quantities it was sampled for separately (Stochastic-AFL: one
        ``gradients`` and one ``losses`` message)."""
        base = self._config(config)
        if not self.node_of:
            if to is not None or per_client or per_client_payload:
                self._hello()
            else:
                content = down_content(payload, base)
                replies, errors = self._exchange({node: op for node in self.nodes},
                                                 {node: content for node in self.nodes},
                                                 group=str(self._round + 1))
                self._identify(replies, errors)
                return self._collect(replies, {}, {v: k for k, v in self.node_of.items()},
                                     {i: content for i in self.node_of}, count)
        pool = self.active if count else set(self.node_of)
        targets = sorted(pool if to is None else {int(i) for i in to} & pool)
        contents = {i: down_content({**payload, **(per_client_payload or {}).get(i, {})},
                                    {**base, **(per_client or {}).get(i, {})}) for i in targets}
        replies, errors = self._exchange({self.node_of[i]: op for i in targets},
                                         {self.node_of[i]: c for i, c in contents.items()},
                                         group=str(self._round + 1) if count else "setup")
        if errors and not count:
            node, reason = next(iter(errors.items()))
            raise InvalidParameterError(f"supernode {node} failed during the setup of the run: {reason}")
        return self._collect(replies, errors, {self.node_of[i]: i for i in targets}, contents, count,
                             by_array)

    def _collect(self, replies: dict, errors: dict, partition: dict, contents: dict,
                 count: bool = True, by_array: tuple | None = None) -> dict[int, dict]:
        """Count the exchange in the ledger, record the failures, return the arrays by partition."""
        by_partition = {partition[node]: msg for node, msg in replies.items()}
        out = {i: {**payload_arrays(m.content), **diagnostic_arrays(m.content)}
               for i, m in sorted(by_partition.items())}
        for msg in replies.values():
            self.gradient_evaluations += int(msg.content.metric_records[METRICS]["gradient-evaluations"])
        if not count:
            return out
        if contents:
            first = contents[min(contents)]
            self.ledger.record("down", payload_name(first), len(contents),
                               sum(payload_floats(c) for c in contents.values()))
        self._took_part |= set(out)
        for node, reason in errors.items():
            self._missing.setdefault(partition[node], reason)
            self.active.discard(partition[node])
        if out and by_array:
            for name in by_array:
                senders = [i for i in out if name in out[i]]
                if senders:
                    self.ledger.record("up", name, len(senders), sum(int(np.size(out[i][name])) for i in senders))
        elif out:
            self.ledger.record("up", payload_name(by_partition[min(out)].content), len(out),
                               sum(payload_floats(m.content) for m in by_partition.values()))
        return out

    # ------------------------------------------------------------------ transport
    def _exchange(self, types: dict, contents: dict, group: str):
        """Push one message per node, pull until every node replied or ``timeout``; return
        ``({node: reply}, {node: reason})``."""
        messages = [Message(contents[node], node, types[node], group_id=group) for node in contents]
        ids = list(self.grid.push_messages(messages))
        pending = {mid: msg.metadata.dst_node_id for mid, msg in zip(ids, messages)}
        replies, errors = {}, {}
        deadline = time.monotonic() + self.timeout
        while pending:
            for reply in self.grid.pull_messages(list(pending)):
                node = pending.pop(reply.metadata.reply_to_message_id, None)
                if node is None:
                    continue
                if reply.has_error():
                    errors[node] = f"client error: {reply.error.reason}"
                else:
                    replies[node] = reply
            if pending and time.monotonic() > deadline:
                errors.update({node: f"no reply within {self.timeout:g} s" for node in pending.values()})
                break
            if pending:
                time.sleep(self.poll_interval)
        return replies, errors


# ---------------------------------------------------------------------------------- server math
def combine(weights, replies: dict, key: str, intended) -> np.ndarray:
    r""":math:`\sum_{i\in S}w_iv_i` over the clients :math:`S` that replied (rows ``replies[i][key]``).

    With every intended client present this is exactly the simulator's
    ``ClientRuntime.aggregate`` (``tensordot`` in client order). With some missing, the
    participants' weights are scaled to the intended total :math:`\sum_{i\in I}w_i` -- Flower's
    rule (``FedAvg`` averages over the replies it received), recorded in ``Trace.info``."""
    parts = sorted(replies)
    if not parts:
        raise InvalidParameterError(f"no client replied with {key!r} this round: nothing to aggregate")
    w = np.asarray(weights, float)
    out = np.tensordot(w[parts], np.stack([replies[i][key] for i in parts]), axes=(0, 0))
    intended = sorted(intended)
    if parts != intended:
        got = float(w[parts].sum())
        out = out * (float(w[intended].sum()) / got) if got != 0 else np.zeros_like(out)
    return out


def losses_or_stale(replies: dict, key: str, previous, n: int) -> np.ndarray:
    """The clients' reported losses as a vector of length ``n``; a client that did not reply
    keeps its previous value (``previous``), or the mean of this round's reports if it has none."""
    got = {i: float(np.ravel(v[key])[0]) for i, v in replies.items()}
    if not got:
        raise InvalidParameterError(f"no client replied with {key!r} this round")
    out = (np.full(n, np.nan) if previous is None else np.array(previous, float))
    for i, value in got.items():
        out[i] = value
    out[np.isnan(out)] = float(np.mean(list(got.values())))
    return out
