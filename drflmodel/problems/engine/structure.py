r"""The structure summary of a problem, computed once: what routes decide on.

A route's :meth:`~drflmodel.problems.engine.route.Route.applies` and ``auto_skip`` read only a
:class:`Structure` (``problem.structure``), never the problem's internals -- as CVXPY's
``SolvingChain`` asks each solver to accept a problem form computed once. The summary holds:

* the loss: smooth (finite smoothness constant: Hessians exist) or piecewise linear and its number
  of affine pieces, quadratic, self-concordant and its constant :math:`M` (F. Bach 2010);
* the sizes: :math:`n` clients, :math:`K` outputs, :math:`N` rows, :math:`P` parameters, :math:`NP`;
* the ridge: :math:`\ell_2`, the coordinates its penalty weights leave out (an unpenalized
  intercept: weight 0) and the smallest per-client strong-convexity modulus;
* where the data are: rows local or remote, and the query kinds the problem's client objectives
  answer (:mod:`.queries`);
* a memory estimate: bytes of the rows held, bytes of one dense :math:`P\times P` Hessian;
* what the family says of its own conic model (``conic_bytes``: its estimated size, ``None`` when
  the family gives none -- the conic route reads it, never the family's name) and of its weights
  (``weights``: ``"fixed"``, ``"smooth"``, ``"polyhedral"`` or ``""``: what the routes' cost models
  read, :mod:`.cost`; ``numpy_weight_step``: whether its weight step runs in numpy rather than as a
  compiled conic model);
* the relative gap the solve asks (``gap_tol``; :func:`~.route.dispatch` sets the user's): routes
  that stop at it are priced and given options for it (:meth:`~.route.Route.cost`,
  :meth:`~.route.Route.auto_options`);
* the family's routes (``routes``, not part of ``to_dict``), so a route can be asked for its
  estimates by name (:mod:`.memory`);
* ``facts``: what only one family's routes read (e.g. a box, a support set, a problem class:
  each family documents its keys, in ``structure_facts`` or ``describe_structure``).

A problem computes it on first use and drops it (and its route caches, ``problem.cache(name)``)
when a parameter that changes it is set (``problem.invalidate_structure()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ...solution import DEFAULT_GAP_TOL, jsonable
from .queries import EVERY_KIND, ROWS

__all__ = ["Structure", "describe_objectives", "loss_fields"]


@dataclass(frozen=True)
class Structure:
    """The structure summary of a problem (module docstring); ``to_dict()`` is JSON-serializable."""

    family: str
    loss: str
    smooth: bool
    piecewise_linear: bool
    pieces: int
    quadratic: bool
    self_concordant: bool
    self_concordance: float | None
    twice_differentiable: bool
    n_clients: int
    n_outputs: int
    rows: int
    dim: int
    l2: float
    unpenalized: tuple[int, ...]
    strong_convexity: float
    rows_local: bool
    queries: frozenset = field(default=EVERY_KIND)
    data_bytes: int = 0
    #: rows of the zero-padded client arrays (n m_max) where the rows are held, else 0
    padded_rows: int = 0
    facts: Mapping[str, Any] = field(default_factory=dict)
    conic_bytes: int | None = None
    weights: str = ""
    #: the family's weight step runs in numpy (no conic model to compile): :func:`.cost.weight_step_seconds`
    numpy_weight_step: bool = False
    #: the relative certificate gap asked of the solve (``solve(gap_tol=...)``, set by the dispatch)
    gap_tol: float = DEFAULT_GAP_TOL
    routes: tuple = field(default=(), compare=False, repr=False)

    @property
    def size(self) -> int:
        """:math:`NP` (rows times parameters): the cost of one pass over the data."""
        return int(self.rows) * int(self.dim)

    @property
    def ridge_covers_all(self) -> bool:
        """Every coordinate is penalized: :math:`\\ell_2>0` and no unpenalized coordinate."""
        return self.l2 > 0 and not self.unpenalized

    @property
    def strongly_convex(self) -> bool:
        """Every client objective is strongly convex (on the identifiable parameters)."""
        return self.strong_convexity > 0

    @property
    def hessian_bytes(self) -> int:
        """Bytes of one dense :math:`P\\times P` Hessian in float64."""
        return 8 * int(self.dim) ** 2

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "routes"}
        out["queries"] = sorted(self.queries)
        out["unpenalized"] = list(self.unpenalized)
        out.update(size=self.size, ridge_covers_all=self.ridge_covers_all, strongly_convex=self.strongly_convex,
                   hessian_bytes=self.hessian_bytes)
        return jsonable(out)


def loss_fields(loss) -> dict:
    """The loss's fields of a :class:`Structure`: name, smooth, piecewise linear and its pieces,
    quadratic, self-concordant and its constant, twice differentiable."""
    pieces = len(loss.pieces()) if getattr(loss, "piecewise_linear", False) else 0
    try:
        loss.ddphi(np.zeros(1))
        twice = True
    except (NotImplementedError, TypeError):
        twice = False
    return dict(loss=str(getattr(loss, "name", type(loss).__name__)), smooth=bool(np.isfinite(loss.smoothness)),
                piecewise_linear=bool(getattr(loss, "piecewise_linear", False)), pieces=int(pieces),
                quadratic=bool(loss.is_quadratic), self_concordant=loss.self_concordance is not None,
                self_concordance=None if loss.self_concordance is None else float(loss.self_concordance),
                twice_differentiable=twice)


def describe_objectives(family: str, objectives, facts: Mapping[str, Any] | None = None, **fields) -> Structure:
    """The :class:`Structure` of a horizontal problem from its client objectives (a
    :class:`~drflmodel.objectives.ClientObjectives` holding rows, or a federated server's
    objectives of :mod:`drflmodel.client_oracle`, which say what they can answer); ``fields``:
    what the family sets itself (``conic_bytes``, ``weights``, ``routes``)."""
    rows_local = bool(getattr(objectives, "holds_rows", True))
    queries = frozenset(getattr(objectives, "query_kinds", EVERY_KIND))
    if not rows_local:
        queries = queries - {ROWS}
    unpenalized = tuple(np.flatnonzero(np.asarray(objectives.penalty_weights) <= 0).tolist())
    moduli = np.asarray(objectives.strong_convexity(), float)
    return Structure(
        family=family, **loss_fields(objectives.loss),
        n_clients=int(objectives.n), n_outputs=int(objectives.n_outputs),
        rows=int(np.asarray(objectives.federation.sizes).sum()), dim=int(objectives.dim),
        l2=float(objectives.l2), unpenalized=unpenalized,
        strong_convexity=float(moduli.min()) if moduli.size else 0.0,
        rows_local=rows_local, queries=queries, data_bytes=int(getattr(objectives, "data_bytes", 0)) if rows_local else 0,
        padded_rows=int(getattr(objectives, "padded_rows", 0)) if rows_local else 0,
        facts=dict(facts or {}), **fields)
