"""How the server asks the clients: :class:`Channel` (a transport with a retry budget),
:class:`LocalChannel` (in process, for tests), and :class:`RevealLedger`, the record of what the
clients revealed. The Flower transport is :class:`drflmodel.flower.oracle.FlowerChannel`."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .._validation import check_int
from ..problems.registry import client_query
from .protocol import ClientFault, fault_kind
from .site import Site

__all__ = ["RevealLedger", "Channel", "LocalChannel"]

#: reply arrays of the protocol's own queries -> the quantity they reveal (the reveal table's names);
#: a family's declared query names its own arrays (:func:`quantity`)
QUANTITY = {
    "rows": "rows N_i", "features": "features d", "outputs": "outputs K", "ones_columns": "all-one columns",
    "classes_present": "classes present", "max_row_norm": "max_j ||x_ij||", "value": "value h_i(theta)",
    "gradient": "gradient of h_i", "hessian": "Hessian of h_i (upper triangle)",
    "hvp": "Hessian-vector product", "gram": "X_i'X_i (upper triangle)", "moment": "X_i'y_i", "yy": "y_i'y_i",
    "allowance": "mean |loss|, ||x|| ||loss'||, ||x||^2, ||score||_1 (round-off allowance)",
    "feature_norm": "mean ||x_ij|| without the intercept", "intercept_value": "value h_i(theta) (bound)",
    "intercept_gradient": "gradient of h_i in the K intercepts",
    "intercept_hessian": "Hessian of h_i in the K intercepts (upper triangle)",
    "column_squares": "mean x_ijk^2 of every column k (preconditioner)",
}


def quantity(query: str, array: str) -> str | None:
    """What ``array`` of an answer to ``query`` reveals (``None``: protocol text, not counted): the
    declaration of a family's query, else :data:`QUANTITY`."""
    declared = client_query(query)
    if declared is not None:
        spec = declared.answer.get(array)
        return None if spec is None else spec[1]
    return QUANTITY.get(array)


class RevealLedger:
    """What the clients revealed: per quantity, the floats of one answer, the exchanges (rounds of
    messages) that carried it and the answers per client; per query, the exchanges and attempts."""

    def __init__(self):
        self._rows: OrderedDict = OrderedDict()
        self.exchanges = 0
        self.queries: OrderedDict = OrderedDict()
        self.retries = 0
        self.largest_answer = 0          # floats of the largest single answer of one client

    def record(self, query: str, replies: dict, attempts: int = 1) -> None:
        self.exchanges += attempts
        self.retries += attempts - 1
        q = self.queries.setdefault(query, {"exchanges": 0, "answers": 0})
        q["exchanges"] += attempts
        q["answers"] += len(replies)
        seen = set()
        names = {key: quantity(query, key) for arrays in replies.values() for key in arrays}
        for i, arrays in replies.items():
            self.largest_answer = max(self.largest_answer, sum(int(np.size(v)) for k, v in arrays.items()
                                                               if names[k] is not None))
            for key, value in arrays.items():
                if names[key] is None:
                    continue
                row = self._rows.setdefault(names[key], {"quantity": names[key], "floats": 0, "exchanges": 0,
                                                         "answers": {}})
                row["floats"] = max(row["floats"], int(np.size(value)))
                row["answers"][i] = row["answers"].get(i, 0) + 1
                if names[key] not in seen:
                    row["exchanges"] += 1
                    seen.add(names[key])

    def most_answers(self, array: str) -> int:
        """The most answers of one client that carried the protocol's reply array ``array`` (e.g.
        ``"hessian"``: the Hessians the busiest client sent)."""
        row = self._rows.get(QUANTITY.get(array, array))
        return max(row["answers"].values()) if row else 0

    def table(self) -> list[dict]:
        """One row per quantity: ``quantity``, ``floats`` (one answer), ``exchanges``,
        ``max_answers_per_client``, ``floats_per_client`` (the most any one client sent)."""
        out = []
        for row in self._rows.values():
            most = max(row["answers"].values())
            out.append({"quantity": row["quantity"], "floats": row["floats"], "exchanges": row["exchanges"],
                        "max_answers_per_client": most, "floats_per_client": most * row["floats"]})
        return out

    def to_dict(self) -> dict:
        """A snapshot (later queries do not change it)."""
        return {"exchanges": self.exchanges, "retries": self.retries, "largest_answer_floats": self.largest_answer,
                "queries": {q: dict(v) for q, v in self.queries.items()}, "reveals": self.table()}


class Channel:
    """How the server asks the clients (a transport), with the retry budget.

    Subclasses implement :meth:`_send` ``({client: (arrays, options)}, query) -> (replies,
    errors)``; :meth:`ask` sends, retries the clients that failed up to ``retries`` times, and
    raises :class:`ClientFault` when one still fails. Every exchange is counted in
    :attr:`ledger` (:class:`RevealLedger`)."""

    def __init__(self, n_clients: int, retries: int = 2):
        self.n_clients = check_int(n_clients, "n_clients", low=1)
        self.retries = check_int(retries, "retries", low=0)
        self.ledger = RevealLedger()

    def _send(self, query: str, contents: dict) -> tuple[dict, dict]:
        raise NotImplementedError

    def fault(self, client: int, query: str, reasons: list) -> ClientFault:
        """The :class:`ClientFault` of ``client`` on ``query`` (with its node id when the transport
        maps partitions to nodes, ``node_of``)."""
        node = (getattr(self, "node_of", None) or {}).get(client)
        return ClientFault(client, query, reasons, node=node)

    def ask(self, query: str, arrays: dict | None = None, clients=None, per_client: dict | None = None,
            options: dict | None = None, per_client_options: dict | None = None) -> dict[int, dict]:
        """Ask ``clients`` (default: all) ``query`` with ``arrays`` (+ ``per_client[i]``) and
        ``options``; returns ``{client: answer arrays}`` from **every** client asked, or raises
        :class:`ClientFault` after the retry budget -- at once for a refusal (the client's policy
        would refuse again)."""
        clients = list(range(self.n_clients)) if clients is None else sorted(int(i) for i in clients)
        contents = {i: ({**(arrays or {}), **(per_client or {}).get(i, {})},
                        {**(options or {}), **(per_client_options or {}).get(i, {})}) for i in clients}
        got, reasons, attempts = {}, {i: [] for i in clients}, 0
        pending = dict(contents)
        while pending:
            attempts += 1
            replies, errors = self._send(query, pending)
            got.update(replies)
            for i, why in errors.items():
                reasons[i].append(why)
            pending = {i: pending[i] for i in errors}
            refused = sorted(i for i, why in errors.items() if fault_kind(why) == "refused")
            if refused or (pending and attempts > self.retries):
                self.ledger.record(query, got, attempts)
                i = refused[0] if refused else min(pending)
                raise self.fault(i, query, reasons[i])
        self.ledger.record(query, got, attempts)
        return got


class LocalChannel(Channel):
    """The in-process transport: the server calls each :class:`Site` directly (an exception is a
    failed answer, retried like a lost message)."""

    def __init__(self, sites, retries: int = 2):
        self.sites = list(sites)
        super().__init__(len(self.sites), retries)

    @classmethod
    def from_problem(cls, problem, retries: int = 2) -> "LocalChannel":
        return cls([Site.from_problem(problem, i) for i in range(problem.n_clients)], retries)

    def _send(self, query: str, contents: dict):
        replies, errors = {}, {}
        for i, (arrays, options) in contents.items():
            try:
                replies[i] = {k: np.asarray(v, float) if not isinstance(v, str) else v
                              for k, v in self.sites[i].answer(query, arrays, options).items()}
            except Exception as exc:  # noqa: BLE001 - a failed answer, reported with its reason
                errors[i] = f"{type(exc).__name__}: {exc}"
        return replies, errors
