r"""The solve routes of relative fairness (drflmodel's reformulations), in the order
``method="auto"`` considers them (:meth:`~.problem.RelativeFairness.routes`).

=====================  ============================================================================
route                  applies / chosen by ``"auto"`` / certificate
=====================  ============================================================================
``"FederatedDRO"``     :math:`\varphi=0`, :math:`\Theta=\mathbb R^d`: the problem *is* federated DRO
                       over :math:`A`; delegated (same answer, same certificate).
``"R1"``               quadratic losses with at most :data:`MAX_VERTEX_PAIRS` vertex pairs; auto:
                       when the exact vertex test shows every :math:`Q(\lambda_v)\succeq0`.
                       Vertex-enumeration SOCP; lower bound by weak duality at the multipliers'
                       :math:`\bar\lambda=\sum_v\mu_v\lambda_v`: :math:`L=\min_\Theta\bar\lambda^\top f`.
``"R3"``               quadratic, :math:`\Theta=\mathbb R^d`; auto: when the vertices are too many for
                       the vertex test and Prop 10 certifies convexity. Matrix-fractional dual; the
                       same weak-duality bound at the dual optimum.
``"R2"``               quadratic. Lifted Shor SDP with the sets' LP duals (+ RLT cuts on a box); the
                       SDP value is a valid lower bound, :math:`U` = objective at the extracted
                       point, improved by the local search. ``"optimal"`` only if the lifted matrix
                       is numerically rank one **and** the gap closes; otherwise, with a box, a
                       spatial branch-and-bound (:func:`branch_and_bound`) may close it.
                       Options ``refine``, ``n_starts``, ``max_iter``, ``max_nodes``.
``"local"``            always (auto: non-quadratic losses with :math:`\varphi>0` or a box). The
                       convex--concave procedure from ``n_starts`` seeded starts with the best
                       bound of :meth:`~.local.LocalSearch.lower_bounds`; ``"local"`` unless the
                       bound closes the gap. Uses no user-chosen solver.
=====================  ============================================================================

The exact routes (all but ``"local"``) hand extra keywords to their first conic solver (validated
against its settings) and run it through the shared :class:`~drflmodel._solver_sequence.SolverSequence`.
"""

from __future__ import annotations

import heapq
import time

import numpy as np
import cvxpy as cp

from ..._validation import check_int
from ...sets import feasible_weights
from ...errors import InvalidParameterError, NotConvexError
from ...solution import DEFAULT_GAP_TOL, relative_gap
from . import quadratic as qd
from ..._solver_sequence import OK_STATUSES, SolverSequence, installed_solvers, solve_with_fallback
from ..engine.route import Route
from .convexity import MAX_VERTEX_PAIRS
from .vertex_socp import solve_vertex_socp

__all__ = ["FederatedDRORoute", "R1Route", "R3Route", "R2Route", "LocalRoute", "branch_and_bound",
           "RANK_TOL"]

#: a lifted matrix is "numerically rank one" if lambda_2 <= RANK_TOL * lambda_1
RANK_TOL = 1e-6


def _run_solvers(problem, prob, request, certify, exact: bool = True):
    """Try solvers in order; ``certify(name)`` turns a solved problem into a Solution. Stops at the
    first ``"optimal"`` answer (for a relaxation, ``exact=False``, at the first answer that is not
    ``"failed"``: its gap is structural, another solver cannot close it); returns the best
    (smallest relative gap) with ``info["attempts"]``."""
    seq = SolverSequence(request, prob=prob)
    best = None
    for name in seq:
        record = seq.run(prob, name)
        if record is None or prob.status not in OK_STATUSES:
            continue
        sol = certify(name)
        record.update(status=sol.status, relative_gap=sol.relative_gap)
        if best is None or sol.relative_gap < best.relative_gap:
            best = sol
        if sol.status == "optimal" or (not exact and sol.status != "failed"):
            break
    if best is None:
        best = problem.failed_solution(seq.attempts, seq.failure())
    best.info["attempts"] = seq.attempts
    best.info.setdefault("solver", next((a["solver"] for a in reversed(seq.attempts) if "status" in a), None))
    return best


def _needs_quadratic(structure, name: str) -> str | None:
    if not structure.quadratic:
        return f"method {name!r} needs a quadratic loss (Squared); got {structure.loss!r}"
    return None


class _ExactRoute(Route):
    """A relative-fairness route that solves one convex program with a conic solver."""

    uses_solver = True
    passes_solver_options = True

    def refusal(self, problem, reason: str) -> Exception:
        return InvalidParameterError(reason)


# ---- phi = 0: delegate ------------------------------------------------------------------------
class FederatedDRORoute(_ExactRoute):
    r""":math:`\varphi=0`, no box: :math:`\Lambda_0(A,B)=A`, so the problem is federated DRO over
    :math:`A` (the paper's reduction of (6) at :math:`\varphi=0`); solved and certified by :class:`~drflmodel.problems.minmax.dro.FederatedDRO`."""

    name = "FederatedDRO"

    def applies(self, structure) -> str | None:
        phi, box = structure.facts["phi"], structure.facts["box"]
        if phi != 0 or box:
            return ("method 'FederatedDRO' is the phi = 0 reduction without a box; got "
                    f"phi={phi}, box={'set' if box else None}")
        return None

    def solve(self, problem, request):
        from ..minmax.dro import FederatedDRO

        dro = FederatedDRO(problem.federation, problem.loss, weights=problem.A, l2=problem.l2,
                           penalize_intercept=problem.penalize_intercept)
        sol = dro.solve(solver=request.solver, gap_tol=request.gap_tol, verbose=request.verbose,
                        fallback=request.fallback, **request.solver_options)
        sol.info["delegated_to"] = "FederatedDRO (phi = 0 reduction: Lambda_0(A, B) = A)"
        if sol.theta is not None:
            _, _, b = problem.worst_case_weights(sol.theta)
            sol.duals = {**sol.duals, "b": b}
        return sol


# ---- R1 ---------------------------------------------------------------------------------------
class R1Route(_ExactRoute):
    """Vertex-enumeration SOCP, exact when every vertex matrix is PSD."""

    name = "R1"

    def applies(self, structure) -> str | None:
        if (reason := _needs_quadratic(structure, self.name)) is not None:
            return reason
        if not structure.facts["vertices_listable"]:
            return f"R1 needs at most {MAX_VERTEX_PAIRS} vertex pairs; use method='R2'"
        return None

    def auto_skip(self, structure) -> str | None:
        return None if structure.facts["vertex_psd"] else "the exact vertex test fails (not convex at this phi)"

    def refusal(self, problem, reason: str) -> Exception:
        return NotConvexError(reason) if problem.structure.quadratic else InvalidParameterError(reason)

    def solve(self, problem, request):
        """Clarabel's native interface first (:mod:`.vertex_socp`: no CVXPY compilation) when the
        solver is Clarabel or unnamed; if it gives no certified answer, the CVXPY model with the
        solver sequence. Either way the same weak-duality certificate."""
        V = problem.vertex_weights()
        Q, r, c = problem.objectives.quadratic_forms()

        def certified(theta, mu, value, name):
            share = mu / mu.sum() if mu.sum() > 0 else np.eye(V.shape[0])[0]
            lam_bar = share @ V
            # the convex combination's rounding (gamma_{m+2} of |share|^T |V|) is carried into the bound
            u = np.finfo(float).eps / 2
            k = V.shape[0] + 2
            L, _ = qd.certified_min_quadratic(Q, r, c, lam_bar, box=problem.box,
                                              weight_error=k * u / (1 - k * u) * (np.abs(share) @ np.abs(V)))
            info = {"solver": name, "r1_value": value, "n_vertices": int(V.shape[0]),
                    "lower_bound_kind": "weak duality: min over Theta of lam_bar^T f, lam_bar = vertex "
                                        "multipliers' convex combination (in Lambda_phi)"}
            return problem.make_solution(theta, L, None, "R1 vertex SOCP + weak duality at the multipliers",
                                     request.gap_tol, duals={"lambda_bar": lam_bar, "vertex_multipliers": mu},
                                     info=info)

        native_attempt = None
        if request.solver in (None, "CLARABEL") and "CLARABEL" in installed_solvers():
            t0 = time.perf_counter()
            try:
                theta, mu, value, status, iters = solve_vertex_socp(Q, r, c, V, box=problem.box,
                                                                    settings=request.solver_options)
            except Exception as exc:  # noqa: BLE001 - Clarabel's own error; the CVXPY sequence follows
                theta, status, iters = None, f"error: {type(exc).__name__}: {str(exc)[:160]}", 0
            native_attempt = {"solver": "CLARABEL", "interface": "native", "solver_status": status,
                              "iterations": iters, "time": time.perf_counter() - t0}
            if theta is not None:
                sol = certified(theta, mu, value, "CLARABEL (native)")
                native_attempt.update(status=sol.status, relative_gap=sol.relative_gap)
                if sol.status == "optimal":
                    sol.info["attempts"] = [native_attempt]
                    return sol
        prob, theta_v, t, vcons = qd.build_r1(Q, r, c, V, box=problem.box)   # NotConvexError if not PSD

        def certify(name):
            mu = np.maximum(np.array([float(np.asarray(cn.dual_value).reshape(-1)[0]) for cn in vcons]), 0.0)
            return certified(theta_v.value, mu, float(prob.value), name)

        sol = _run_solvers(problem, prob, request, certify)
        if native_attempt is not None:
            sol.info["attempts"] = [native_attempt, *sol.info["attempts"]]
        return sol


# ---- R3 ---------------------------------------------------------------------------------------
class R3Route(_ExactRoute):
    """Matrix-fractional dual for :math:`\\Theta=\\mathbb R^d`."""

    name = "R3"

    def applies(self, structure) -> str | None:
        if (reason := _needs_quadratic(structure, self.name)) is not None:
            return reason
        if structure.facts["box"]:
            return "method 'R3' needs Theta = R^d (box=None); use 'R1' or 'R2' with a box"
        return None

    def auto_skip(self, structure) -> str | None:
        if structure.facts["vertex_psd"] is not None:
            return "the vertices are few enough for the exact test (R1 or R2 decide)"
        if not structure.facts["prop10_convex"]:
            return "Prop 10 does not certify convexity"
        return None

    def solve(self, problem, request):
        Q, r, c = problem.objectives.quadratic_forms()
        n, phi = problem.n_clients, problem.phi
        a, b = cp.Variable(n, name="a"), cp.Variable(n, name="b")
        S = qd.preconditioner(Q)      # theta = S z: same dual optimum, better-conditioned matrices
        Qs, rs = np.einsum("jk,ikl,lm->ijm", S, Q, S), r @ S
        prob, lam = qd.build_r3(Qs, rs, c, a, b, phi, problem.A.constraints(a) + problem.B.constraints(b))

        def certify(name):
            # exactly in A and B (exact unit sums within the caps); lam_bar's own rounding (four
            # operations per entry) is carried into the bound as a weight error
            av = feasible_weights(problem.A, problem.A.project(np.asarray(a.value, float)))[0]
            bv = feasible_weights(problem.B, problem.B.project(np.asarray(b.value, float)))[0]
            lam_bar = (av - phi * bv) / (1.0 - phi)
            u = np.finfo(float).eps / 2
            error = 6 * u * (np.abs(av) + phi * np.abs(bv)) / (1.0 - phi)
            L = qd.certified_min_quadratic(Q, r, c, lam_bar, box=None, weight_error=error)[0]
            z = qd.min_quadratic(*qd.aggregate(Qs, rs, c, lam_bar), box=None)[1]     # the point, as before
            if z is None:
                Pz, qz, _ = qd.aggregate(Qs, rs, c, lam_bar)
                z = np.linalg.lstsq(Pz, qz, rcond=None)[0]
            info = {"solver": name, "r3_value": float(prob.value),
                    "lower_bound_kind": "weak duality: min_theta lam*^T f (closed form) at the R3 dual optimum"}
            return problem.make_solution(S @ z, L, None, "R3 matrix-fractional dual + weak duality", request.gap_tol,
                                     duals={"lambda_bar": lam_bar, "a_dual": av, "b_dual": bv}, info=info)

        return _run_solvers(problem, prob, request, certify)


def _check_search_options(opts: dict) -> dict:
    for key, low in (("n_starts", 1), ("max_iter", 1), ("max_nodes", 0)):
        if key in opts:
            opts[key] = check_int(opts[key], key, low=low)
    return opts


# ---- R2 ---------------------------------------------------------------------------------------
class R2Route(_ExactRoute):
    """Lifted Shor SDP (+ RLT on a box), local refinement of the upper bound, branch-and-bound.

    Options: ``refine`` (when the gap is open, run the convex--concave procedure from the extracted
    point, then the multi-start local search; it can only lower :math:`U`), ``n_starts`` and
    ``max_iter`` of that search, ``max_nodes`` (with a box: at most this many SDP solves of the
    spatial branch-and-bound when the root does not certify; 0 disables it)."""

    name = "R2"
    options = {"refine": True, "n_starts": 3, "max_iter": 50, "max_nodes": 100}

    def applies(self, structure) -> str | None:
        return _needs_quadratic(structure, self.name)

    def complete_options(self, given) -> dict:
        return _check_search_options(super().complete_options(given))

    def solve(self, problem, request):
        opts, gap_tol = request.options, request.gap_tol
        prob, h = problem.lifted_sdp()
        h["p1"].value = 1.0 / (1.0 - problem.phi)
        h["p2"].value = problem.phi / (1.0 - problem.phi)
        d, box = problem.dim, problem.box

        def certify(name):
            Mv = np.asarray(h["M"].value, float)
            Mv = 0.5 * (Mv + Mv.T)
            w, V = np.linalg.eigh(Mv)
            rank_ratio = float(max(w[-2], 0.0) / w[-1]) if w[-1] > 0 else float("inf")
            cands = [Mv[:d, d]]
            if abs(V[d, -1]) > 1e-12:
                cands.append(V[:d, -1] / V[d, -1])
            cands = [problem.feasible_point(cnd) for cnd in cands]
            vals = [problem.objective(cnd) for cnd in cands]
            theta = cands[int(np.argmin(vals))]
            L = float(prob.value)
            info = {"solver": name, "sdp_value": L, "lifted_eigenvalues": w,
                    "rank_one_ratio": rank_ratio, "rank_one": bool(rank_ratio <= RANK_TOL),
                    "rlt_cuts": box is not None, "extracted_objective": float(min(vals)),
                    "lower_bound_kind": "lifted Shor SDP value (a relaxation of the problem)"}
            U = float(min(vals))
            if opts["refine"] and relative_gap(L, U) > gap_tol:
                th2, U2, it = problem.convex_concave(theta, max_iter=opts["max_iter"])
                info.update(refined=True, refine_iterations=it, refine_improvement=U - U2)
                if U2 < U:
                    theta, U = th2, U2
                if relative_gap(L, U) > gap_tol and opts["n_starts"] > 1:
                    th3, U3, runs = problem.local_search(n_starts=opts["n_starts"], max_iter=opts["max_iter"],
                                                         seed=request.seed)
                    info.update(multistart_values=[r_["value"] for r_ in runs])
                    if U3 < U:
                        theta, U = th3, U3
            closed = relative_gap(L, U) <= gap_tol
            status = "optimal" if (closed and rank_ratio <= RANK_TOL) else "optimal_within_gap"
            cert = "lifted SDP (Shor" + (" + RLT" if box is not None else "") + ") bound, rank-one check"
            if status != "optimal" and box is not None and opts["max_nodes"] > 0 and not closed:
                bb = branch_and_bound(problem, theta, U, L, gap_tol=gap_tol, max_nodes=opts["max_nodes"])
                info["branch_and_bound"] = {k: v for k, v in bb.items() if k != "theta"}
                theta, U, L = bb["theta"], bb["upper"], max(L, bb["lower"])
                if relative_gap(L, U) <= gap_tol:
                    status = "optimal"
                    cert = ("spatial branch-and-bound over the box: lifted SDP + RLT bound on every leaf "
                            f"({bb['nodes']} nodes)")
            if relative_gap(L, U) < -max(gap_tol, 1e-6):
                status = "failed"
            return problem.make_solution(theta, L, status, cert, gap_tol, info=info)

        return _run_solvers(problem, prob, request, certify, exact=False)


def branch_and_bound(problem, theta, upper: float, lower: float, gap_tol: float = DEFAULT_GAP_TOL,
                     max_nodes: int = 100, time_limit: float = 60.0) -> dict:
    r"""Spatial branch-and-bound over the box for quadratic losses.

    Every node is a sub-box :math:`[l,u]\subseteq\Theta`; its bound is the lifted SDP with the
    RLT cuts of that sub-box (a relaxation of the problem restricted to it), and never below its
    parent's. The node with the smallest bound is split at the midpoint of its widest side
    (relative to the root box). The point extracted from each node's lifted matrix, clipped into
    the node, is a feasible candidate for the incumbent. Nodes whose bound is within ``gap_tol``
    of the incumbent are closed. The returned ``lower`` is the minimum bound over all leaves
    (open and closed), a valid lower bound of the problem over the whole box; ``upper`` is
    the objective at ``theta``. Starts from the root's ``lower`` bound and incumbent.
    """
    if problem.box is None or not problem.is_quadratic:
        raise InvalidParameterError("branch_and_bound needs a quadratic loss and a box")
    prob, h = problem.lifted_sdp()
    h["p1"].value = 1.0 / (1.0 - problem.phi)
    h["p2"].value = problem.phi / (1.0 - problem.phi)
    lo0, hi0 = problem.box
    width0 = np.where(hi0 > lo0, hi0 - lo0, 1.0)
    d = problem.dim
    best_theta, U = problem.feasible_point(theta), float(upper)
    heap = [(float(lower), 0, lo0.copy(), hi0.copy())]
    closed_min, count, nodes, t0 = float("inf"), 1, 0, time.perf_counter()
    try:
        while heap and nodes < max_nodes and time.perf_counter() - t0 < time_limit:
            if relative_gap(min(heap[0][0], closed_min), U) <= gap_tol:
                break
            bnd, _, lo, hi = heapq.heappop(heap)
            if relative_gap(bnd, U) <= gap_tol:
                closed_min = min(closed_min, bnd)
                continue
            j = int(np.argmax((hi - lo) / width0))
            mid = 0.5 * (lo[j] + hi[j])
            for clo, chi in ((lo, np.where(np.arange(d) == j, mid, hi)),
                             (np.where(np.arange(d) == j, mid, lo), hi)):
                qd.set_box(h, clo, chi)
                nodes += 1
                ok = solve_with_fallback(prob) is not None
                v = bnd
                if ok:
                    v = max(bnd, float(prob.value))
                    Mv = np.asarray(h["M"].value, float)
                    cand = np.clip(Mv[:d, d], clo, chi)
                    gc = problem.objective(cand)
                    if gc < U:
                        best_theta, U = cand, gc
                if relative_gap(v, U) <= gap_tol:
                    closed_min = min(closed_min, v)
                else:
                    heapq.heappush(heap, (v, count, clo, chi))
                    count += 1
    finally:
        qd.set_box(h, lo0, hi0)
    L = min([heap[0][0]] if heap else [float("inf")])
    L = min(L, closed_min, U) if (heap or np.isfinite(closed_min)) else U
    return {"theta": best_theta, "upper": U, "lower": float(L), "nodes": nodes,
            "open_nodes": len(heap), "time": time.perf_counter() - t0}


# ---- local ------------------------------------------------------------------------------------
class LocalRoute(Route):
    """Multi-start convex--concave procedure with the best valid lower bound (no global claim
    unless the bound closes the gap). Options ``n_starts``, ``max_iter``."""

    name = "local"
    options = {"n_starts": 3, "max_iter": 50}
    uses_solver = False

    def complete_options(self, given) -> dict:
        return _check_search_options(super().complete_options(given))

    def solve(self, problem, request):
        opts = request.options
        t0 = time.perf_counter()
        theta, U, runs = problem.local_search(n_starts=opts["n_starts"], max_iter=opts["max_iter"],
                                              seed=request.seed)
        t_local = time.perf_counter() - t0
        bounds = problem.lower_bounds(theta, cuts=[problem.client_losses(r["theta"]) for r in runs])
        L = bounds["best"]["value"]
        if relative_gap(L, U) <= request.gap_tol:
            status = "optimal"
        elif problem.phi == 0:
            status = "optimal_within_gap" if np.isfinite(L) else "local"   # convex: CCP is exact
        else:
            status = "local"
        info = {"local_runs": [dict(r) for r in runs], "local_time": t_local,
                "lower_bounds": bounds, "lower_bound_kind": bounds["best"]["method"],
                "note": "no exact reformulation is known for non-quadratic losses with phi > 0 "
                        "(a DC program); theta is a local solution of the convex-concave procedure"}
        return problem.make_solution(theta, L, status, f"local CCP; lower bound: {bounds['best']['method']}",
                                 request.gap_tol, info=info)
