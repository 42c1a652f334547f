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
           "unpack_symmetric"]

#: the queries a :class:`Site` answers, and the arrays of each answer
QUERIES = {
    "describe": ("rows", "features", "outputs", "ones_columns", "classes_present"),
    "row_norm": ("max_row_norm",),
    "values": ("value",),
    "evaluate": ("value", "gradient", "hessian"),
    "hvp": ("hvp",),
    "statistics": ("gram", "moment", "yy"),
    # the per-client means the Hessian-free bound reads at a point (O(K^2) floats): answered by the
    # sites that answer "hvp" (smooth losses), part of that kind
    "bound_terms": ("allowance", "feature_norm", "intercept_value", "intercept_gradient", "intercept_hessian"),
}

#: what a client's ability to answer a query gives the routes: the query kind it serves
#: (``"hessian"`` is the ``evaluate`` query with Hessians, answered by smooth losses only)
KIND_OF_ANSWER = {"values": VALUES, "evaluate": GRADIENTS, "hessian": HESSIANS, "hvp": HESSIAN_VECTOR_PRODUCTS,
                  "statistics": STATISTICS}

#: why a federated server cannot take the routes that read rows
NEEDS_ROWS = ("the conic route writes each client's rows into the CVXPY model and the 'newton' route "
              "reads them for its per-client cones; a federated server holds no row")


class ClientFault(DrflmodelError, RuntimeError):
    """A client failed (error or no answer) on every attempt of a query within the retry budget.

    Attributes ``client`` (index), ``query``, ``attempts`` and ``reasons`` (one per attempt)."""

    def __init__(self, client: int, query: str, reasons: list):
        self.client, self.query, self.reasons = int(client), str(query), list(reasons)
        self.attempts = len(self.reasons)
        super().__init__(f"client {self.client} did not answer the {self.query!r} query in "
                         f"{self.attempts} attempt(s): {self.reasons[-1]}")


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
