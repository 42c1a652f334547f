"""The problem base classes shared by every formulation family.

* :class:`ProblemBase` -- what every oracle has, whatever its federation: the CVXPY side
  (``build()`` is a *reduction* from the formulation to a ``cvxpy.Problem``, cached), the solve
  contract (``routes()`` and ``solve()``) and parameter sweeps.
* :class:`Problem` -- a problem on a horizontal :class:`~drflmodel.data.Federation` (clients own
  rows): the client objectives :math:`f_i` and :class:`ClientView`. The four horizontal families
  derive from it; vertical problems derive from :class:`~drflmodel.problems.engine.problem.VerticalProblem`.

**The solve contract.** ``solve(solver=None, gap_tol=..., method="auto", seed=None,
verbose=False, fallback=True, **options)`` is the same for every family: ``method`` names a route
of :meth:`ProblemBase.routes` (``"auto"``: the first that applies and accepts the options),
``options`` are validated against the chosen route, and ``info["method"]`` records the route
that answered (:mod:`.route`). The default route, :class:`~drflmodel.problems.engine.conic.ConicRoute`,
runs an open conic solver and *inverts* the answer into a :class:`~drflmodel.solution.Solution`
whose status comes from an independent certificate:

* upper bound :math:`U` = the exact robust objective at the returned :math:`\\theta`, computed in
  numpy by :meth:`ProblemBase.objective` (no CVXPY);
* lower bound :math:`L` = a dual argument supplied by the subclass in :meth:`ProblemBase.certify_solved`.

If the certificate does not close (relative gap above ``gap_tol``) the next solver in
:meth:`ProblemBase.solver_order` is tried; the best answer is returned with an honest status, and
``"failed"`` if none passed. Solver names, settings, tolerances and the fallback
rule when a named solver fails are documented in :mod:`.solvers`.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it

from ..._frames import SweepResult
from ..._progress import progress_iter
from ..._validation import check_real
from ...data import VerticalFederation
from ...errors import InvalidDataError, InvalidParameterError
from ...losses import Loss
from ...objectives import ClientObjectives
from ...solution import DEFAULT_GAP_TOL, Solution, status_from_gap
from .conic import ConicRoute
from .queries import ROWS, ClientOracle
from .route import Route, dispatch
from ..._solver_sequence import failure_reason, solver_order
from .structure import Structure, describe_objectives


__all__ = ["ProblemBase", "Problem", "VerticalProblem", "ClientView"]


class ClientView:
    """What client *i* may compute on its own data (a distributed solver reads nothing else).

    Only client *i*'s rows are reachable from this object: its loss value, gradient, Hessian,
    Hessian-vector products and seeded minibatch gradients of
    :math:`f_i(\\theta)=\\frac1{N_i}\\sum_j\\ell(W^\\top x_{ij},y_{ij})+\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2`
    (:mod:`drflmodel.objectives`; :math:`\\theta` in the layout of :mod:`drflmodel.layout`).
    """

    def __init__(self, problem: "Problem", index: int):
        fed = problem.federation
        if not (0 <= index < fed.n_clients):
            raise InvalidParameterError(f"client index must be in [0, {fed.n_clients - 1}]; got {index}")
        client = fed.clients[index]
        self.index = index
        self.name = client.name
        self._X, self._y = client.X, client.y
        self.loss = problem.loss
        self.l2 = problem.l2
        self._objective = problem.objectives.restricted(index)

    @property
    def size(self) -> int:
        return self._X.shape[0]

    def value(self, theta) -> float:
        """:math:`f_i(\\theta)`."""
        return float(self._objective.values(theta)[0])

    def gradient(self, theta) -> np.ndarray:
        """:math:`\\nabla f_i(\\theta)`."""
        return self._objective.gradients(theta)[0]

    def hessian(self, theta) -> np.ndarray:
        """:math:`\\nabla^2 f_i(\\theta)` (smooth losses)."""
        return self._objective.hessians(theta)[0]

    def hessian_vector_product(self, theta, v) -> np.ndarray:
        """:math:`\\nabla^2 f_i(\\theta)\\,v` (smooth losses; matrix-free)."""
        return self._objective.hessian_vector_products(theta, v)[0]

    def minibatch_gradient(self, theta, batch_size: int, seed=None) -> np.ndarray:
        """Unbiased gradient from ``batch_size`` rows drawn uniformly with replacement."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return self._objective.minibatch_gradients(theta, batch_size, [rng])[0]


def refuse_unpenalized_intercept(value, family: str, reason: str) -> None:
    """Refuse ``penalize_intercept=value`` in a family that cannot leave the intercept unpenalized
    (a non-boolean is refused as such)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"penalize_intercept must be True or False; got {value!r}")
    if not value:
        raise InvalidParameterError(f"{family} does not support penalize_intercept=False: {reason}; "
                                    "FederatedDRO, FairnessAwareFL and RelativeFairness do")


class ProblemBase:
    """Base class of the exact oracles, whatever the shape of the federation.

    Subclasses implement :meth:`_build` (return a ``cp.Problem``; keep handles to its variables),
    :meth:`objective` (exact robust objective in numpy), :meth:`client_losses` and
    :meth:`certify_solved` (turn the solved CVXPY problem into a :class:`Solution` with an independent
    lower bound) -- or their own :meth:`routes`. Constructors only store and validate parameters
    (scikit-learn style); nothing is built until :meth:`build`.
    """

    #: short family name used in reports
    family = "problem"

    def __init__(self, federation, loss, l2: float = 0.0):
        self.federation = federation
        self.loss = loss
        self.l2 = check_real(l2, "l2", low=0.0)
        self._cp_problem: cp.Problem | None = None
        self._parameters: dict[str, cp.Parameter] = {}
        self._structure: Structure | None = None
        self._route_caches: dict[str, dict] = {}

    @property
    def dim(self) -> int:
        """The length of :math:`\\theta` (:math:`Kd` for a :math:`K`-output model; :mod:`drflmodel.layout`)."""
        return self.federation.dim

    def identifiable(self, theta) -> np.ndarray:
        """The representative of ``theta`` (shape ``(..., dim)``) that oracles report and
        :func:`drflmodel.verify` measures distances in (:meth:`drflmodel.layout.ParameterLayout.identifiable`;
        the identity for families whose objective has no invariant direction)."""
        return np.array(theta, float)

    # ------------------------------------------------------------------ numpy side
    def client_losses(self, theta) -> np.ndarray:
        """The per-client (or per-group) losses at ``theta`` in numpy."""
        raise NotImplementedError

    def objective(self, theta) -> float:
        """The exact robust objective at ``theta`` (numpy; no CVXPY)."""
        raise NotImplementedError

    def objective_for(self, solution: Solution):
        """The objective a ``solution`` certifies (a callable of :math:`\\theta`).

        Usually :meth:`objective`; a family whose oracle can also certify a *different* target
        (e.g. a smoothed objective a distributed solver converges to) returns that target's function,
        so that :func:`drflmodel.verify` measures iterates against the right value.
        """
        return self.objective

    # ------------------------------------------------------------------ CVXPY side
    def build(self) -> cp.Problem:
        """The cached CVXPY problem (built on first call)."""
        if self._cp_problem is None:
            self._cp_problem = self._build()
        return self._cp_problem

    def _build(self) -> cp.Problem:
        raise NotImplementedError

    def solver_order(self) -> list[str]:
        """Open solvers to try, in order, for this problem's cone types (:func:`~.solvers.solver_order`)."""
        return solver_order(self.build())

    def certify_solved(self, solver: str) -> Solution:
        """Turn the solved CVXPY problem of :meth:`build` into a certified :class:`Solution`
        (the conic route's inversion; ``solver`` answered)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ what routes read
    @property
    def structure(self) -> Structure:
        """The :class:`~.structure.Structure` summary routes decide on (computed once; dropped by
        :meth:`invalidate_structure`)."""
        if self._structure is None:
            self._structure = self.describe_structure()
        return self._structure

    def describe_structure(self) -> Structure:
        """Compute the :class:`~.structure.Structure` (subclasses; see :meth:`structure_facts`)."""
        raise NotImplementedError

    def structure_facts(self) -> dict:
        """What only this family's routes read, for ``structure.facts`` (default: nothing)."""
        return {}

    def invalidate_structure(self) -> None:
        """A parameter that changes the structure was set: drop the summary and every route cache."""
        self._structure = None
        self._route_caches.clear()

    def cache(self, name: str) -> dict:
        """Route ``name``'s cache on this problem (a dict: compiled step models, warm starts, ...),
        cleared with the structure (:meth:`invalidate_structure`)."""
        return self._route_caches.setdefault(name, {})

    #: why a federated server cannot take this family's routes, said when none of them can run
    #: without rows (an explanation only: :meth:`federated_routes` decides; ``None``: the routes' needs)
    federated_refusal: str | None = None

    @classmethod
    def federated_routes(cls) -> list[str]:
        """The names of this family's routes that a federated server can take: those whose
        ``Route.needs`` hold no row (:data:`~.queries.ROWS`). The one answer to "is there a
        federated solve": :meth:`check_federated` and :data:`drflmodel.client_oracle.SUPPORTED`
        read it. :meth:`routes` is the family's list, whatever the instance (a route's ``applies``
        decides per instance), so it is read on an unbuilt instance."""
        return [r.name for r in cls.routes(cls.__new__(cls)) if ROWS not in r.needs]

    def check_federated(self) -> None:
        """Refuse (:class:`~drflmodel.errors.InvalidParameterError`) if a federated server cannot
        solve this family by its routes (:meth:`federated_routes` is empty), with
        :attr:`federated_refusal` or, without one, what each route needs."""
        if not self.federated_routes():
            why = self.federated_refusal or "every route needs the clients' rows ({})".format(
                ", ".join(repr(r.name) for r in self.routes()))
            raise InvalidParameterError(f"{type(self).__name__} has no federated certified solve: {why}")

    def on_federation(self, federation):
        """The same problem (family and parameters) on another federation -- e.g. the
        :class:`~drflmodel.client_oracle.DeclaredFederation` of a federated server, whose client
        objectives ask the clients. Families without a federated solve refuse with the reason."""
        self.check_federated()
        raise NotImplementedError(f"{type(self).__name__}.on_federation")

    # ------------------------------------------------------------------ the solve contract
    def routes(self) -> list[Route]:
        """This family's solve routes in order of preference (default: the conic route)."""
        return [ConicRoute()]

    def solve(self, solver: str | None = None, gap_tol: float = DEFAULT_GAP_TOL, method: str = "auto",
              seed=None, verbose: bool = False, fallback: bool = True, **options) -> Solution:
        """Solve and certify (the same contract for every family; see :mod:`.route`).

        Parameters
        ----------
        solver : a CVXPY solver name to try first (case-insensitive); an unknown or uninstalled
            name raises :class:`~drflmodel.errors.InvalidParameterError` listing the valid ones.
            Naming a solver restricts ``method="auto"`` to routes that use one.
        gap_tol : relative certificate gap below which the status is ``"optimal"`` (default 1e-6).
            ``method="auto"`` asks every route for this gap and no finer: the answer is certified to
            it, not beyond (a forced route keeps its own documented ``tol``). Ask a smaller
            ``gap_tol`` (e.g. 1e-10) where the answer is a reference that points or objectives are
            compared to more finely (``dm.verify`` checks this).
        method : ``"auto"`` (the first route of :meth:`routes` that applies and accepts
            ``options``) or a route name; a forced route that does not apply raises with its reason.
        seed : seed of the route's random choices (multi-start points); ``None``: the problem's
            own ``seed`` attribute where it has one, else 0.
        verbose : pass solver output through.
        fallback : when the named ``solver`` fails, warn
            (:class:`~drflmodel.errors.SolverFallbackWarning`) and try the others (``True``, the
            default), or return that solver's own answer (``False``, usually ``"failed"``).
            Either way ``info["attempts"]`` records the requested attempt (``"requested": True``).
        **options : the route's options; for conic routes, settings of the first solver tried
            (validated against its documented settings; they override the documented tolerances
            of :data:`SOLVER_OPTIONS`).

        Returns a :class:`Solution`; ``info["method"]`` names the route, ``info["attempts"]``
        records every solver attempt.
        """
        return dispatch(self, self.routes(), solver=solver, gap_tol=gap_tol, method=method, seed=seed,
                        verbose=verbose, fallback=fallback, options=options)

    def annotate(self, solution: Solution, request, started: float) -> None:
        """Family-specific ``info`` added to every answer (after the route; default: nothing)."""

    def status_of(self, sol: Solution, gap_tol: float) -> str:
        """Status from the certificate (subclasses with ``"local"`` answers override)."""
        if sol.status == "local":
            return "local"
        return status_from_gap(sol.lower_bound, sol.upper_bound, gap_tol)

    def failed_solution(self, attempts, reason: str | None = None) -> Solution:
        """The honest ``"failed"`` answer: no point, no bound; ``info["reason"]`` says why (default:
        each solver attempt's error or status, :func:`~.solvers.failure_reason`)."""
        return Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                        lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                        certificate="none",
                        info={"attempts": attempts, "reason": reason or failure_reason(attempts)}, problem=self)

    def infeasible_solution(self, solver, attempts) -> Solution:
        """The ``"infeasible"`` answer backed by ``solver``'s infeasibility certificate."""
        return Solution(theta=None, weights=None, client_losses=None, value=float("inf"),
                        lower_bound=float("inf"), upper_bound=float("inf"), status="infeasible",
                        certificate=f"{solver} infeasibility certificate",
                        info={"attempts": attempts, "solver": solver}, problem=self)

    # ------------------------------------------------------------------ sweeps
    @property
    def parameters(self) -> dict:
        """The CVXPY ``Parameter`` s a sweep may change without recompiling (DPP)."""
        self.build()
        return dict(self._parameters)

    def set_parameter(self, name: str, value) -> None:
        """Set a swept parameter on both the CVXPY and the numpy side."""
        raise InvalidParameterError(
            f"{type(self).__name__} has no sweepable parameter {name!r}; "
            f"available: {sorted(self.parameters)}")

    def sweep(self, param: str, values: Iterable, progress: bool | None = None,
              **solve_kwargs) -> SweepResult:
        """One certified :class:`Solution` per value of ``param`` (re-solves without rebuilding
        where the formulation is DPP), as a list with a ``table`` (:class:`SweepResult`);
        ``progress`` as in :meth:`Solver.run <drflmodel.solvers.Solver.run>`."""
        values = list(values)
        out = SweepResult(param, values)
        for v in progress_iter(values, f"sweep {param}", unit="solve", progress=progress):
            self.set_parameter(param, v)
            sol = self.solve(**solve_kwargs)
            sol.info[param] = v
            out.append(sol)
        return out


def _supplied(objectives, federation):
    """``objectives`` if it has every member of the :class:`~drflmodel.client_oracle.ClientOracle`
    protocol (what the routes ask), else :class:`~drflmodel.errors.InvalidDataError` naming the
    missing ones (checked where a federation supplies its own; the in-process
    :class:`~drflmodel.objectives.ClientObjectives` is checked by the conformance test)."""
    if not isinstance(objectives, ClientOracle):
        members = [*ClientOracle.__annotations__, *(n for n in vars(ClientOracle) if not n.startswith("_"))]
        missing = sorted({n for n in members if not hasattr(objectives, n)})
        raise InvalidDataError(f"{type(federation).__name__}.client_objectives returned a {type(objectives).__name__}, "
                               f"not a ClientOracle: it has no {', '.join(missing)}")
    return objectives


class Problem(ProblemBase):
    """An oracle on a horizontal :class:`~drflmodel.data.Federation`: client *i* owns rows
    :math:`(X_i, y_i)` and the objective :math:`f_i(\\theta)=\\frac1{N_i}\\sum_j\\ell+\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2`
    (:class:`~drflmodel.objectives.ClientObjectives`; ``penalize_intercept=False`` sets
    :math:`\\omega=0` on the intercept column, scikit-learn's convention).

    A federation may supply its own client objectives (``federation.client_objectives(loss, l2,
    penalize_intercept)``): a federated server's :class:`~drflmodel.client_oracle.DeclaredFederation`
    over a channel supplies objectives that ask the clients, so the same family, built the same way,
    is the server's problem (:func:`drflmodel.client_oracle.federated_solve`)."""

    #: whether the family accepts the multi-class (softmax) loss; the others refuse it with a reason
    supports_multiclass = False
    multiclass_refusal = "its reformulation is written for one score per sample"
    #: the clients' objectives, all a route reads of the data (:class:`~drflmodel.client_oracle.ClientOracle`)
    objectives: ClientOracle

    def __init__(self, federation, loss, l2: float = 0.0, penalize_intercept: bool = True):
        from ...data import Federation

        if not isinstance(federation, Federation):
            raise InvalidDataError(f"federation must be a drflmodel.Federation; got {type(federation).__name__}")
        super().__init__(federation, loss, l2)
        if getattr(loss, "task", None) == "multiclass" and not self.supports_multiclass:
            raise InvalidParameterError(
                f"{type(self).__name__} does not support the multi-class loss {loss!r}: "
                f"{self.multiclass_refusal}; FederatedDRO, FairnessAwareFL and RelativeFairness do")
        supply = getattr(federation, "client_objectives", None)     # a federated server's federation
        self.objectives = (_supplied(supply(loss, self.l2, penalize_intercept), federation) if callable(supply)
                           else ClientObjectives(federation, loss, self.l2, penalize_intercept))
        self.penalize_intercept = self.objectives.penalize_intercept

    @property
    def dim(self) -> int:
        """The length :math:`P=Kd` of :math:`\\theta` (:mod:`drflmodel.layout`)."""
        return self.objectives.dim

    @property
    def layout(self):
        """The :class:`~drflmodel.layout.ParameterLayout` of :math:`\\theta`."""
        return self.objectives.layout

    def identifiable(self, theta) -> np.ndarray:
        return self.layout.identifiable(theta)

    @property
    def n_clients(self) -> int:
        return self.federation.n_clients

    def client_losses(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta), \\dots, f_n(\\theta))` in numpy."""
        return self.objectives.values(np.asarray(theta, float))

    def client_view(self, i: int) -> ClientView:
        """What client *i* may compute on its own data."""
        return ClientView(self, i)

    def describe_structure(self) -> Structure:
        """The structure of a horizontal problem, read from its client objectives
        (:func:`~.structure.describe_objectives`), the family's :meth:`structure_facts` and
        :meth:`structure_fields` and its :meth:`routes`."""
        return describe_objectives(self.family, self.objectives, self.structure_facts(),
                                   routes=tuple(self.routes()), **self.structure_fields())

    def structure_fields(self) -> dict:
        """The :class:`~.structure.Structure` fields the family sets (``conic_bytes``: the size
        of its conic model; ``weights``: the kind of its weight set; default: none)."""
        return {}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_clients={self.n_clients}, dim={self.dim}, "
                f"loss={self.loss!r}, l2={self.l2})")


class VerticalProblem(ProblemBase):
    r"""An oracle on a :class:`~drflmodel.data.VerticalFederation`: the parties hold feature blocks
    :math:`X^k` of the same rows (:math:`X=[X^1,\dots,X^K]`), and a server holds the labels.
    Subclasses provide the party and server views (``client_view(k)``, ``server_view()``)."""

    def __init__(self, vertical_federation, loss, l2: float = 0.0):
        if not isinstance(vertical_federation, VerticalFederation):
            raise InvalidDataError(
                "vertical_federation must be a drflmodel.VerticalFederation; got "
                f"{type(vertical_federation).__name__}")
        if not isinstance(loss, Loss):
            raise InvalidParameterError(f"loss must be a drflmodel.losses.Loss; got {loss!r}")
        super().__init__(vertical_federation, loss, l2)

    @property
    def n_clients(self) -> int:
        """Number of parties :math:`K`."""
        return self.federation.n_parties
