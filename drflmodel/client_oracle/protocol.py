"""The client-oracle protocol: the queries a client answers (and the query kinds of
:mod:`drflmodel.problems.engine.queries` each one serves), the interface a route may ask
(:class:`ClientOracle`, defined beside the query kinds in :mod:`drflmodel.problems.engine.queries`:
the engine's routes read it), the fault a client's silence becomes, and the wire form of a symmetric
matrix (its upper triangle).

The queries are the protocol's own (:data:`CORE_QUERIES`, what the engine's routes ask) and those a
family declares for its own federated oracle in the family registry
(:class:`drflmodel.problems.registry.ClientQuery`); :data:`QUERIES` is both, read when asked."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._lazy import LiveTable
from ..errors import DrflmodelError
from ..problems.engine.queries import GRADIENTS, HESSIAN_VECTOR_PRODUCTS, HESSIANS, STATISTICS, VALUES, ClientOracle
from ..problems.registry import RESERVED_QUERIES, client_queries

__all__ = ["QUERIES", "CORE_QUERIES", "KIND_OF_ANSWER", "NEEDS_ROWS", "ClientFault", "ClientOracle", "pack_symmetric",
           "unpack_symmetric", "REFUSED", "REJECTED", "FAULT_KINDS", "fault_kind"]

#: the protocol's own queries (what the engine's routes ask), and the arrays of each answer
CORE_QUERIES = {
    "describe": ("rows", "features", "outputs", "ones_columns", "classes_present"),
    "row_norm": ("max_row_norm",),
    "values": ("value",),
    # "hvp": with "directions" (q x P, same exchange); the bound terms' arrays with the option "bound_terms"
    "evaluate": ("value", "gradient", "hessian", "hvp", "allowance", "feature_norm", "intercept_value",
                 "intercept_gradient", "intercept_hessian", "column_squares"),
    "hvp": ("hvp",),
    "statistics": ("gram", "moment", "yy"),
    # the per-client means the Hessian-free bound reads at a point (O(K^2) floats): answered by the
    # sites that answer "hvp" (smooth losses), part of that kind
    "bound_terms": ("allowance", "feature_norm", "intercept_value", "intercept_gradient", "intercept_hessian",
                    "column_squares"),
}
assert set(CORE_QUERIES) <= set(RESERVED_QUERIES)          # no family may declare one of these names


class _Queries(LiveTable):
    """Every query a :class:`Site` answers, name -> the arrays of its answer: :data:`CORE_QUERIES`
    and the families' declared queries (:func:`drflmodel.problems.registry.client_queries`, read
    whenever this is read: a family registered later is seen)."""

    _name = "QUERIES"

    def _table(self) -> dict:
        return {**CORE_QUERIES, **{name: q.arrays for name, q in client_queries().items()}}

    def __contains__(self, key):
        return key in CORE_QUERIES or key in client_queries()



#: the queries a :class:`Site` answers (the protocol's and the families' declared ones), and the
#: arrays of each answer
QUERIES: Mapping[str, tuple] = _Queries()

#: what a client's ability to answer a query gives the routes: the query kind it serves
#: (``"hessian"`` is the ``evaluate`` query with Hessians, answered by smooth losses only)
KIND_OF_ANSWER = {"values": VALUES, "evaluate": GRADIENTS, "hessian": HESSIANS, "hvp": HESSIAN_VECTOR_PRODUCTS,
                  "statistics": STATISTICS}

#: why a federated server cannot take the routes that read rows
NEEDS_ROWS = ("the conic route writes each client's rows into the CVXPY model and the 'hessian_sqp' route "
              "reads them for its per-client cones; a federated server holds no row")


#: how a query a client's policy refused shows in the reason of its failed answer, over any transport
#: (the client raised :class:`~drflmodel.client_oracle.QueryRefused`)
REFUSED = "QueryRefused"
#: how an answer the server's checks rejected shows in its reason (:mod:`.validation`)
REJECTED = "answer rejected by the server's check"

#: the kinds of fault: the client lied (an answer the checks rejected), refused by its policy, or was silent
FAULT_KINDS = ("rejected", "refused", "no answer")


def fault_kind(reason: str) -> str:
    """What a failed answer's ``reason`` says happened: ``"rejected"`` (the server's checks),
    ``"refused"`` (the client's policy) or ``"no answer"`` (an error, a lost message, a timeout)."""
    reason = str(reason)
    if reason.startswith(REJECTED):
        return "rejected"
    return "refused" if REFUSED in reason else "no answer"


class ClientFault(DrflmodelError, RuntimeError):
    """A client failed a query: no valid answer on any attempt within the retry budget, or a
    refusal (never retried: a policy gives the same answer again).

    Attributes ``client`` (index: the partition), ``query``, ``attempts``, ``reasons`` (one per
    attempt), ``kind`` (:data:`FAULT_KINDS`: ``"rejected"`` if any attempt was, else the last
    attempt's), and, when known, ``node`` (the
    transport's node id), ``check`` and ``numbers`` (the server's check that rejected the last answer)."""

    def __init__(self, client: int | None, query: str, reasons: list, node=None, check: str | None = None,
                 numbers: dict | None = None):
        self.client = None if client is None else int(client)    # None: a supernode not yet identified
        self.query, self.reasons = str(query), list(reasons)
        self.attempts = len(self.reasons)
        kinds = [fault_kind(r) for r in self.reasons]
        #: a client whose answer was rejected and whose re-ask was then refused or lost is a rejected one
        self.kind = "rejected" if "rejected" in kinds else (kinds[-1] if kinds else "no answer")
        self.node, self.check, self.numbers = node, check, dict(numbers or {})
        what = "refused" if self.kind == "refused" else "did not answer"
        super().__init__(f"{self.who} {what} the {self.query!r} query in "
                         f"{self.attempts} attempt(s): {self.reasons[-1]}")

    @property
    def who(self) -> str:
        """``"client i"``, or ``"supernode n (partition unknown)"`` before the node was identified."""
        if self.client is not None:
            return f"client {self.client}"
        return f"supernode {self.node} (partition unknown)"

    def to_dict(self) -> dict:
        """JSON-safe: ``partition`` (= ``client``; ``None`` for a supernode not yet identified), ``node``,
        ``query``, ``kind``, ``check``, ``numbers``, ``attempts``, ``reasons``."""
        return {"client": self.client, "partition": self.client,
                "node": None if self.node is None else int(self.node), "query": self.query, "kind": self.kind,
                "check": self.check, "numbers": dict(self.numbers),
                "attempts": self.attempts, "reasons": list(self.reasons)}


def pack_symmetric(H: np.ndarray) -> np.ndarray:
    """The upper triangle of a symmetric matrix, row by row (what a client sends)."""
    return H[np.triu_indices(H.shape[0])]


def unpack_symmetric(v: np.ndarray, P: int) -> np.ndarray:
    """The symmetric ``(P, P)`` matrix whose upper triangle is ``v`` (:func:`pack_symmetric`)."""
    H = np.zeros((P, P))
    H[np.triu_indices(P)] = v
    return H + np.triu(H, 1).T
