"""The client-oracle protocol: the queries a client answers (and the query kinds of
:mod:`drflmodel.problems.engine.queries` each one serves), the interface a route may ask
(:class:`ClientOracle`), the fault a client's silence becomes, and the wire form of a symmetric
matrix (its upper triangle)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import DrflmodelError
from ..layout import ParameterLayout
from ..losses import Loss
from ..problems.engine.queries import GRADIENTS, HESSIAN_VECTOR_PRODUCTS, HESSIANS, STATISTICS, VALUES

__all__ = ["QUERIES", "KIND_OF_ANSWER", "NEEDS_ROWS", "ClientFault", "ClientOracle", "pack_symmetric",
           "unpack_symmetric", "REFUSED", "REJECTED", "FAULT_KINDS", "fault_kind"]

#: the queries a :class:`Site` answers, and the arrays of each answer
QUERIES = {
    "describe": ("rows", "features", "outputs", "ones_columns", "classes_present"),
    "row_norm": ("max_row_norm",),
    "values": ("value",),
    "evaluate": ("value", "gradient", "hessian", "hvp"),     # "hvp": with "directions" (q x P, same exchange)
    "hvp": ("hvp",),
    "statistics": ("gram", "moment", "yy"),
    # the per-client means the Hessian-free bound reads at a point (O(K^2) floats): answered by the
    # sites that answer "hvp" (smooth losses), part of that kind
    "bound_terms": ("allowance", "feature_norm", "intercept_value", "intercept_gradient", "intercept_hessian",
                    "column_squares"),
    # Wasserstein DRFL's own oracle: a client answers for its own ball (drflmodel.problems.wasserstein.
    # federated.QUERIES, written out here: that package imports CVXPY)
    "wasserstein_value": ("value", "lambda"),
    "wasserstein_prox": ("w_hat", "varpi"),
    "wasserstein_bound": ("bound", "dual_residual"),
}

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


@runtime_checkable


class ClientOracle(Protocol):
    """What a solve route may ask of the clients (module docstring). Shapes: :math:`\\theta`
    ``(P,)`` with :math:`P=Kd` in the layout of :mod:`drflmodel.layout`; ``n`` clients."""

    loss: Loss
    layout: ParameterLayout
    l2: float
    penalty_diagonal: np.ndarray

    @property
    def n(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def values(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta),\\dots,f_n(\\theta))`."""

    def gradients(self, theta) -> np.ndarray:
        """Rows :math:`\\nabla f_i(\\theta)`, shape ``(n, P)``."""

    def evaluate(self, theta, lam=None, hessian: bool = True):
        """``(values, gradients, sum_i lam_i Hess f_i(theta) or None)``."""

    def weighted_hessian(self, theta, lam) -> np.ndarray:
        """:math:`\\sum_i\\lambda_i\\nabla^2f_i(\\theta)`, shape ``(P, P)``."""

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        """Rows :math:`\\nabla^2f_i(\\theta)v_i`, shape ``(n, P)``."""

    def strong_convexity(self) -> np.ndarray:
        """Per-client strong-convexity moduli."""

    def max_row_norms(self) -> np.ndarray:
        """Per-client :math:`\\max_j\\|x_{ij}\\|` (the self-concordance bound's scale)."""

    def penalty(self, theta) -> np.ndarray:
        """The ridge term (the same for every client; not data)."""


def pack_symmetric(H: np.ndarray) -> np.ndarray:
    """The upper triangle of a symmetric matrix, row by row (what a client sends)."""
    return H[np.triu_indices(H.shape[0])]


def unpack_symmetric(v: np.ndarray, P: int) -> np.ndarray:
    """The symmetric ``(P, P)`` matrix whose upper triangle is ``v`` (:func:`pack_symmetric`)."""
    H = np.zeros((P, P))
    H[np.triu_indices(P)] = v
    return H + np.triu(H, 1).T
