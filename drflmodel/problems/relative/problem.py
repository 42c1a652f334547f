r"""The relative-fairness formulation and its numpy objective (relative-fairness
paper, problem (6)).

.. math::

    \min_{\theta\in\Theta}\ \max_{\lambda\in\Lambda_\varphi(A,B)}\ \lambda^\top f(\theta)
    \;=\;\min_{\theta\in\Theta}\ \frac{F_{A,\max}(\theta)-\varphi F_{B,\min}(\theta)}{1-\varphi}.

:class:`RelativeFairness` holds the data, the numpy objective, the parameters and sweeps; its
convexity tests come from :mod:`.convexity`, its local search and lower bounds from
:mod:`.local`, and its solve routes are listed by :meth:`RelativeFairness.routes`
(:mod:`.routes`).
"""

from __future__ import annotations

import time

import numpy as np
import cvxpy as cp

from ..._validation import as_finite_array, check_real
from ...errors import InvalidDataError, InvalidParameterError
from ...sets import Integrated, WeightSet
from ...solution import DEFAULT_GAP_TOL, Solution, status_from_gap
from . import quadratic as qd
from ..engine.problem import Problem
from .convexity import ConvexityAnalysis
from .local import LocalSearch
from .routes import FederatedDRORoute, LocalRoute, R1Route, R2Route, R3Route, branch_and_bound

__all__ = ["RelativeFairness"]


def _check_box(box, d: int):
    if box is None:
        return None
    try:
        lower, upper = box
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError("box must be a pair (lower, upper) of arrays of shape (d,)") from exc
    lower = as_finite_array(lower, "box lower bound").reshape(-1) if np.ndim(lower) else np.full(d, float(lower))
    upper = as_finite_array(upper, "box upper bound").reshape(-1) if np.ndim(upper) else np.full(d, float(upper))
    if lower.shape != (d,) or upper.shape != (d,):
        raise InvalidParameterError(
            f"box bounds must have shape ({d},) (the model dimension); got {lower.shape} and {upper.shape}")
    if np.any(lower > upper):
        raise InvalidParameterError(f"box lower bounds must be <= upper bounds; violated at "
                                    f"coordinates {np.flatnonzero(lower > upper).tolist()}")
    return lower, upper


class RelativeFairness(ConvexityAnalysis, LocalSearch, Problem):
    r"""Relative fairness (relative-fairness paper, problem (6)):
    :math:`\min_{\theta\in\Theta}\max_{\lambda\in\Lambda_\varphi(A,B)}\sum_i\lambda_if_i(\theta)`.

    Parameters
    ----------
    federation, loss, l2, penalize_intercept : as for every :class:`~drflmodel.problems.engine.problem.Problem`
        (``penalize_intercept=False`` leaves the intercept column out of the ridge term; the quadratic
        forms of the R1/R3 routes and the convexity test's moduli read the same penalty weights)
        (:math:`f_i` = mean loss + :math:`\frac{\ell_2}2\|\theta\|^2`).
    A, B : weight sets of size ``federation.n_clients``, polytopes inside the simplex without
        penalty (``Simplex``, ``CVaR``, ``HCVaR``, ``LpBall`` with p in {1, inf}).
    phi : :math:`\varphi\in[0,1)`.
    box : ``None`` (:math:`\Theta=\mathbb R^d`) or ``(lower, upper)`` arrays of shape ``(d,)``:
        :math:`\Theta=\{l\le\theta\le u\}`. The box is a *constraint* of the problem; returned
        points are feasible for it.

    ``solve(method="auto")`` chooses the route (:meth:`routes`, :mod:`.routes`) and records it in
    ``solution.info["method"]``; ``solution.info["indices"]`` holds :math:`\mathfrak R_{A,B}`,
    20:20, Palma, Atkinson and Gini of the client losses at the solution.

    **Multi-class (softmax) models** (:class:`~drflmodel.losses.Multinomial`, :math:`\theta` of
    length :math:`Kd` in the layout of :mod:`drflmodel.layout`). The formulation needs only the
    client objectives :math:`f_i`, which stay convex, so it extends as written; what changes is
    what can be certified. The exact routes R1/R2/R3 are for quadratic losses and do not apply.
    :math:`\varphi=0` is federated DRO over :math:`A` (certified by
    :class:`~drflmodel.problems.minmax.dro.FederatedDRO`). For :math:`\varphi>0` the objective mixes
    negative weights, and its convexity is tested by Nakakita et al.'s Proposition 10,
    :math:`\|\Lambda_\varphi\|_1<1+2m_f/(M_f-m_f)`, with :math:`m_f=\ell_2` (the softmax
    cross-entropy itself is not strongly convex: its Hessian vanishes as the probabilities
    saturate) and :math:`M_f=\frac12\lambda_{\max}(X_i^\top X_i/N_i)+\ell_2` (Böhning's bound on
    the softmax Hessian). Where it holds, the local route's answer is certified by the
    strong-convexity (Lemma 8) lower bound and can be ``"optimal"``; where it fails -- any
    realistic :math:`\ell_2` on real data -- the problem is not known to be convex, the route
    returns ``"local"`` with the weak-duality lower bound over the nonnegative part of
    :math:`\Lambda_\varphi` (valid for any convex losses), and the gap says how far from certified
    it is. No intercept option: every coefficient is penalized.
    """

    family = "relative"
    #: the softmax loss enters only through the client objectives f_i (convex in theta for every
    #: K): the local route (CCP + weak-duality bound) and the phi = 0 reduction hold as written;
    #: the exact quadratic routes do not apply (see the class docstring)
    supports_multiclass = True

    def __init__(self, federation, loss, A, B, phi, l2: float = 0.0, box=None, penalize_intercept: bool = True):
        super().__init__(federation, loss, l2, penalize_intercept)
        n = self.n_clients
        for nm, S in (("A", A), ("B", B)):
            if not isinstance(S, WeightSet):
                raise InvalidParameterError(f"{nm} must be a drflmodel.sets.WeightSet; got {type(S).__name__}")
            if S.n != n:
                raise InvalidParameterError(
                    f"{nm} has size n={S.n} but the federation has {n} clients; "
                    f"the weight sets' size must equal the number of clients")
        self.A, self.B = A, B
        self.phi = check_real(phi, "phi", low=0.0, high=1.0, high_open=True)
        # Integrated validates that A and B are penalty-free polytopes inside the simplex
        self.integrated = Integrated(A, B, self.phi)
        self.box = _check_box(box, self.dim)
        self._r2 = None           # (problem, handles) of the lifted SDP (DPP in phi)
        self._ccp_cache = None    # (problem, theta, const, J, p1, p2) of the CCP majorizer
        self._wmin = None         # (problem, theta, lam) of the fixed-weight minimization
        self._last_method = None

    # ------------------------------------------------------------------ numpy side
    def _split(self, f):
        """``(F_A, a*, F_B, b*)``: :math:`\\max_{a\\in A}a^\\top f`, :math:`\\min_{b\\in B}b^\\top f`."""
        FA, a = self.A.worst_case(f)[:2]
        negFB, b = self.B.worst_case(-f)[:2]
        return float(FA), np.asarray(a, float), -float(negFB), np.asarray(b, float)

    def objective(self, theta) -> float:
        r"""Exact :math:`g(\theta)=(F_{A,\max}(\theta)-\varphi F_{B,\min}(\theta))/(1-\varphi)` in numpy
        (sorting / closed forms of the sets; no CVXPY)."""
        theta = as_finite_array(theta, "theta")
        if theta.shape != (self.dim,):
            raise InvalidDataError(f"theta must have shape ({self.dim},); got {theta.shape}")
        FA, _, FB, _ = self._split(self.client_losses(theta))
        return (FA - self.phi * FB) / (1.0 - self.phi)

    def worst_case_weights(self, theta):
        """``(lam, a, b)``: a maximizer :math:`\\lambda^\\star=(a^\\star-\\varphi b^\\star)/(1-\\varphi)` at ``theta``."""
        _, a, _, b = self._split(self.client_losses(theta))
        return (a - self.phi * b) / (1.0 - self.phi), a, b

    def in_box(self, theta, tol: float = 0.0) -> bool:
        if self.box is None:
            return True
        return bool(np.all(theta >= self.box[0] - tol) and np.all(theta <= self.box[1] + tol))

    def feasible_point(self, theta) -> np.ndarray:
        """A box-feasible version of a solver's point (clipping is only used to make a *feasible
        point* out of an approximately feasible solver answer; user input is never clipped)."""
        theta = np.asarray(theta, float).reshape(-1)
        return theta if self.box is None else np.clip(theta, self.box[0], self.box[1])

    # ------------------------------------------------------------------ parameters
    def set_parameter(self, name: str, value) -> None:
        """Only ``"phi"`` is sweepable (R2 keeps :math:`1/(1-\\varphi)` and :math:`\\varphi/(1-\\varphi)`
        as ``cp.Parameter`` s, so a sweep re-solves without recompiling)."""
        if name != "phi":
            raise InvalidParameterError(f"RelativeFairness has one sweepable parameter 'phi'; got {name!r}")
        self.phi = check_real(value, "phi", low=0.0, high=1.0, high_open=True)
        self.integrated = Integrated(self.A, self.B, self.phi)
        self.invalidate_structure()          # the routes' facts (convexity at phi) change

    @property
    def parameters(self) -> dict:
        r"""The ``cp.Parameter`` s :math:`p_1=1/(1-\varphi)`, :math:`p_2=\varphi/(1-\varphi)` of the
        built problem (set from ``phi`` at each solve)."""
        if self.is_quadratic:
            h = self.lifted_sdp()[1]
            return {"p1": h["p1"], "p2": h["p2"]}
        prob, _, _, _, p1, p2 = self._build_ccp()
        return {"p1": p1, "p2": p2}

    def sweep_phi(self, values, progress: bool | None = None, **solve_kwargs):
        """One :class:`Solution` per :math:`\\varphi` in ``values`` (``info["phi"]`` set), as the
        base :meth:`~drflmodel.problems.engine.problem.ProblemBase.sweep`'s ``SweepResult``. The problem
        keeps the last value afterwards."""
        return self.sweep("phi", values, progress=progress, **solve_kwargs)

    def sweep(self, param: str, values, progress: bool | None = None, **solve_kwargs):
        if param != "phi":
            raise InvalidParameterError(f"RelativeFairness has one sweepable parameter 'phi'; got {param!r}")
        return super().sweep(param, values, progress=progress, **solve_kwargs)

    # ------------------------------------------------------------------ routes
    federated_refusal = "its certified routes (SDP relaxations, branch and bound) are written on the clients' rows"

    def structure_facts(self) -> dict:
        """What the routes decide on: ``phi``, ``box`` (set or not) and, for quadratic losses, the
        vertex lists (``vertices_listable``), the exact vertex PSD test (``vertex_psd``: holds,
        ``None`` when the vertices are too many) and Prop 10's condition (``prop10_convex``)."""
        facts = {"phi": float(self.phi), "box": self.box is not None}
        if self.is_quadratic:
            vt = self.vertex_psd_test()
            facts.update(vertices_listable=self.vertex_weights() is not None,
                         vertex_psd=None if vt is None else bool(vt["holds"]),
                         prop10_convex=bool(self.prop10_condition().holds) if vt is None else None)
        return facts

    def routes(self) -> list:
        """``FederatedDRO``, ``R1``, ``R3``, ``R2``, ``local`` (:mod:`.routes`; the order of
        preference of ``solve(method="auto")``)."""
        return [FederatedDRORoute(), R1Route(), R3Route(), R2Route(), LocalRoute()]

    def choose_method(self) -> str:
        """The automatic route: FederatedDRO (:math:`\\varphi=0`, no box), R1 (quadratic, exact
        vertex test passes, few vertices), R3 (quadratic, convex, no box), R2 (quadratic otherwise),
        local (other losses) -- the first of :meth:`routes` that applies and is not skipped."""
        return next(r.name for r in self.routes()
                    if r.applies(self.structure) is None and r.auto_skip(self.structure) is None)

    def _build(self) -> cp.Problem:
        r"""The lifted SDP (quadratic losses) or the CCP majorizer (other losses); both keep
        :math:`\varphi` in ``cp.Parameter`` s."""
        return self.lifted_sdp()[0] if self.is_quadratic else self._build_ccp()[0]

    def lifted_sdp(self):
        r"""``(problem, handles)`` of the lifted Shor SDP (:func:`.quadratic.build_r2`, with RLT cuts on a
        box), built once; :math:`\varphi` enters through its parameters ``p1``, ``p2``."""
        if self._r2 is None:
            Q, r, c = self.objectives.quadratic_forms()
            self._r2 = qd.build_r2(Q, r, c, self.A, self.B, box=self.box, rlt=True)
        return self._r2

    def branch_and_bound(self, theta, upper: float, lower: float, gap_tol: float = DEFAULT_GAP_TOL,
                         max_nodes: int = 100, time_limit: float = 60.0) -> dict:
        """Spatial branch-and-bound over the box (quadratic losses): :func:`.routes.branch_and_bound`."""
        return branch_and_bound(self, theta, upper, lower, gap_tol=gap_tol, max_nodes=max_nodes,
                                time_limit=time_limit)

    def annotate(self, solution: Solution, request, started: float) -> None:
        """``phi``, ``box``, ``gap_tol``, the fairness ``indices`` of the client losses and the
        solve time."""
        self._last_method = solution.info["method"]
        solution.info["phi"] = self.phi
        solution.info["box"] = None if self.box is None else [self.box[0], self.box[1]]
        solution.info["gap_tol"] = request.gap_tol
        if solution.client_losses is not None:
            solution.info["indices"] = self.indices(solution.client_losses)
        solution.info["solve_time"] = time.perf_counter() - started

    # ---- indices ------------------------------------------------------------------------
    def indices(self, losses) -> dict:
        r""":math:`\mathfrak R_{A,B}` (this problem's sets), 20:20, Palma, Atkinson (infinite
        aversion), Gini and :math:`\max/\min` of a loss vector (:mod:`drflmodel.metrics`)."""
        from ... import metrics

        f = np.asarray(losses, float)
        out = {}
        try:
            out["relative_unfairness"] = metrics.relative_unfairness(f, self.A, self.B)
        except (InvalidDataError, InvalidParameterError) as exc:
            out["relative_unfairness"] = None
            out["relative_unfairness_error"] = str(exc)
        try:
            out.update(metrics.summary_indices(f))
        except (InvalidDataError, InvalidParameterError) as exc:
            out["summary_error"] = str(exc)
        return out


    def make_solution(self, theta, L, status, certificate, gap_tol, duals=None, info=None) -> Solution:
        """The :class:`Solution` at (the box-feasible version of) ``theta`` with lower bound ``L``:
        :math:`U` the exact objective there, the worst-case weights, ``status`` (``None``: from the
        gap) and, when ``duals`` hold ``lambda_bar``, the saddle check's stationarity residual."""
        theta = self.feasible_point(theta)
        losses = self.client_losses(theta)
        U = self.objective(theta)
        lam, a, b = self.worst_case_weights(theta)
        if status is None:
            status = status_from_gap(L, U, gap_tol)
        info = dict(info or {})
        lam_bar = (duals or {}).get("lambda_bar")
        if lam_bar is not None:
            # saddle check: the (projected) gradient of
            # lam_bar^T f at theta vanishes at a saddle point
            grad = np.asarray(lam_bar, float) @ self.objectives.gradients(theta)
            step = theta - grad if self.box is None else np.clip(theta - grad, self.box[0], self.box[1])
            info["stationarity_residual"] = float(np.linalg.norm(theta - step))
        return Solution(theta=theta, weights=lam, client_losses=losses, value=U, lower_bound=float(L),
                        upper_bound=U, status=status, certificate=certificate,
                        duals={"a": a, "b": b, **(duals or {})}, info=info)


    def __repr__(self) -> str:
        return (f"RelativeFairness(n_clients={self.n_clients}, dim={self.dim}, loss={self.loss!r}, "
                f"A={self.A!r}, B={self.B!r}, phi={self.phi}, l2={self.l2}, "
                f"box={'None' if self.box is None else 'set'})")

