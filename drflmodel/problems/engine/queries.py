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

from typing import Iterable, Mapping

from ...errors import InvalidParameterError

__all__ = ["VALUES", "GRADIENTS", "HESSIAN_VECTOR_PRODUCTS", "HESSIANS", "STATISTICS", "ROWS", "QUERY_KINDS",
           "EVERY_KIND", "Available", "query_kinds", "why_not"]

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
