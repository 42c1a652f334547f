"""The kinds of client queries a route may need -- the one list of them.

A route declares what it asks of the clients' data in :attr:`Route.needs
<drflmodel.problems.engine.route.Route.needs>`, a frozenset of these kinds; :func:`dispatch
<drflmodel.problems.engine.route.dispatch>` runs only routes whose needs are available. A problem
that holds its rows answers every kind; a federated server answers what its clients answer
(:mod:`drflmodel.client_oracle`).

=============================  =====================================================================
kind                           what the route reads of client :math:`i`
=============================  =====================================================================
``values``                     :math:`f_i(\\theta)`
``gradients``                  :math:`\\nabla f_i(\\theta)` (a subgradient for a non-smooth loss)
``hessian_vector_products``    :math:`\\nabla^2 f_i(\\theta)\\,v` (smooth losses)
``hessians``                   :math:`\\nabla^2 f_i(\\theta)` (smooth losses; :math:`P\\times P`)
``statistics``                 sufficient statistics of a quadratic loss (:math:`X_i^\\top X_i`, ...)
``rows``                       the rows :math:`(x_{ij}, y_{ij})` themselves (CVXPY models, per-row
                               bookkeeping): only where they are held
=============================  =====================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Protocol, runtime_checkable

import numpy as np

from ...errors import InvalidParameterError

if TYPE_CHECKING:
    from ...layout import ParameterLayout
    from ...losses import Loss

__all__ = ["VALUES", "GRADIENTS", "HESSIAN_VECTOR_PRODUCTS", "HESSIANS", "STATISTICS", "ROWS", "QUERY_KINDS",
           "EVERY_KIND", "Available", "query_kinds", "why_not", "ClientOracle"]

VALUES = "values"
GRADIENTS = "gradients"
HESSIAN_VECTOR_PRODUCTS = "hessian_vector_products"
HESSIANS = "hessians"
STATISTICS = "statistics"
ROWS = "rows"
#: every kind, in the order of the table above
QUERY_KINDS = (VALUES, GRADIENTS, HESSIAN_VECTOR_PRODUCTS, HESSIANS, STATISTICS, ROWS)
#: what a problem holding its rows can answer
EVERY_KIND = frozenset(QUERY_KINDS)


def query_kinds(kinds: Iterable[str], name: str = "kinds") -> frozenset:
    """``kinds`` as a frozenset, each one of :data:`QUERY_KINDS` (else
    :class:`~drflmodel.errors.InvalidParameterError` naming the unknown ones and the valid ones)."""
    kinds = frozenset(kinds)
    unknown = sorted(kinds - EVERY_KIND)
    if unknown:
        raise InvalidParameterError(f"{name}: unknown query kind(s) {', '.join(map(repr, unknown))}; "
                                    f"valid: {', '.join(QUERY_KINDS)}")
    return kinds


def why_not(kind: str) -> str:
    """The default sentence for a kind that is not available."""
    if kind == ROWS:
        return "the rows are remote (a federated server holds none)"
    return f"the clients' {kind.replace('_', ' ')} are not available here"


class Available(frozenset):
    """The query kinds a solve can use, and, for the others, why not (one sentence each, e.g.
    ``"client 0 cannot answer 'hessian' (its loss Hinge())"``)."""

    def __new__(cls, kinds: Iterable[str] = EVERY_KIND, missing: Mapping[str, str] | None = None):
        self = super().__new__(cls, query_kinds(kinds, "available"))
        self.missing = dict(missing or {})
        return self

    def why_not(self, kind: str) -> str:
        """Why ``kind`` is not available (a default sentence if none was given)."""
        return self.missing.get(kind) or why_not(kind)


@runtime_checkable
class ClientOracle(Protocol):
    """What a solve route may ask of the clients: the client-oracle interface
    (:mod:`drflmodel.client_oracle`; re-exported there). Shapes: :math:`\\theta`
    ``(P,)`` with :math:`P=Kd` in the layout of :mod:`drflmodel.layout`; ``n`` clients."""

    loss: "Loss"
    layout: "ParameterLayout"
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
