r"""The solve routes of the DEO-constrained problem, one per problem class (and a fast one for the
convex classes).

=====================  ==========================================  ====================================
route                  problem class                               certificate
=====================  ==========================================  ====================================
``"newton"``           ``affine_fair``, ``penalty_c_affine``,      Lagrangian bound at the Newton
                       twice-differentiable loss, ``l2 > 0``       multipliers / the penalty
                       (:mod:`.newton`; numpy, no conic model)     multipliers
``"convex"``           ``affine_fair``, ``penalty_c_affine``       Lagrangian bound at the solver's
                                                                   duals / the penalty multipliers;
                                                                   piecewise-linear losses: the exact
                                                                   dual function (:mod:`.dual`)
``"sdp"``              ``squared_fair_qcqp`` (:mod:`.sdp`)         S-lemma dual function
``"dc"``               ``dc_deo`` (:mod:`.local`)                  (c1)--(c3) bounds; ``"local"`` if
                                                                   no certificate closes the gap
``"penalty_local"``    ``penalty_c_nonconvex`` (:mod:`.local`)      Lagrangian-convexity (c2) or
                                                                   ``"local"``
=====================  ==========================================  ====================================

One conic route applies to a problem (its :attr:`~.problem.DEOConstrained.problem_class`);
forcing another raises naming the right one. For the convex classes ``method="auto"`` tries the
Newton route first where it applies and falls back to ``"convex"`` when it does not certify. Every
conic route takes solver options (the first conic solver's settings) and runs its convex
subproblems through the shared :class:`~drflmodel._solver_sequence.SolverSequence`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import cvxpy as cp

from ...solution import relative_gap, status_from_gap
from ..._solver_sequence import SolverSequence
from ..engine.route import Route
from ...errors import InvalidParameterError
from .dual import piecewise_dual_bound

__all__ = ["DEORoute", "ConvexRoute", "solve_subproblem", "smaller_gap"]

_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)


def solver_sequence(problem, request) -> SolverSequence:
    """The solver sequence of a DEO route (no CVXPY value in the records; solver warnings off:
    the certificate is checked in numpy)."""
    return SolverSequence(request, problem.solver_order(), record_value=False, quiet="user")


def solve_subproblem(problem, prob: cp.Problem, request, record: list | None = None) -> str | None:
    """Solve a convex subproblem with the first solver that reports an optimal status (its name or
    ``None``); the attempts are appended to ``record``."""
    seq = solver_sequence(problem, request)
    used = seq.first_optimal(prob)
    if record is not None:
        record.extend(seq.attempts)
    return used


def smaller_gap(a, b) -> bool:
    """``a`` has the smaller certified relative gap."""
    return relative_gap(a.lower_bound, a.upper_bound) < relative_gap(b.lower_bound, b.upper_bound)


class DEORoute(Route):
    """A DEO route: applies to the problem classes in :attr:`classes`."""

    classes: ClassVar[tuple] = ()
    uses_solver = True
    passes_solver_options = True

    def applies(self, structure) -> str | None:
        problem_class = structure.facts["problem_class"]
        if problem_class in self.classes:
            return None
        return f"it solves the problem class(es) {', '.join(self.classes)}; this problem is {problem_class!r}"

    def refusal(self, problem, reason: str) -> Exception:
        """The refusal names the routes that do apply to this problem's class."""
        right = [repr(r.name) for r in problem.routes() if r.applies(problem.structure) is None]
        return InvalidParameterError(f"method {self.name!r} does not apply to this problem: {reason} "
                                     f"(method {' or '.join(right) or None})")

    def first_solver(self, problem) -> str | None:
        order = problem.solver_order()
        return order[0] if order else None


class ConvexRoute(DEORoute):
    r"""Affine :math:`D` (linear fairness loss): problem (4) or :math:`P_c` is
    convex. Lower bound: the Lagrangian bound at the solver's multipliers (problem (4), after
    projecting :math:`\theta` onto the feasible slab) or at :math:`\lambda_c` (:math:`P_c`); for a
    piecewise-linear loss the exact dual function of :mod:`.dual` (whose primal point is kept when
    better); the solver's value only when ``l2 = 0`` leaves no strong convexity."""

    name = "convex"
    classes = ("affine_fair", "penalty_c_affine")

    def solve(self, problem, request):
        prob = problem.build()
        seq = solver_sequence(problem, request)
        best = None
        for name in seq:
            if seq.run(prob, name) is None or prob.status not in _OK:
                continue
            theta = np.asarray(problem.theta_variable.value, float)
            if problem.penalty_c is None:
                lam = np.array([problem.deo_constraints[0].dual_value, problem.deo_constraints[1].dual_value], float).ravel()
                theta = problem.project_to_slab(theta)     # the nearest feasible point (exact)
                lam = np.maximum(lam, 0.0)
                lb_method = "lagrangian_at_solver_duals"
            else:
                lam = problem.penalty_multipliers(theta)
                lb_method = "lagrangian_at_penalty_multipliers"
            lb = problem.polished_bound(theta, lam)
            certificate = "lagrangian_dual_bound"
            info = {"solver": name, "attempts": seq.attempts}
            if problem.loss.piecewise_linear:
                theta, lb, lb_method, certificate = self._piecewise_dual(problem, request, theta, lam, lb,
                                                                         lb_method, certificate, info)
                if problem.penalty_c is not None:      # lambda_c belongs to the point that is kept
                    lam = problem.penalty_multipliers(theta)
            if not np.isfinite(lb):  # l2 = 0: no strong convexity, fall back on the solver's value
                lb, lb_method = float(prob.value), "solver_value (l2 = 0: no strong-convexity bound)"
                certificate = "solver"
            ub = problem.objective(theta)
            status = status_from_gap(lb, ub, request.gap_tol)
            sol = problem.make_solution(theta, lam, lb, lb_method, status, certificate, info)
            if best is None or smaller_gap(sol, best):
                best = sol
            if status == "optimal":
                break
        return best if best is not None else problem.failed_solution(seq.attempts, seq.failure())

    @staticmethod
    def _piecewise_dual(problem, request, theta, lam, lb, lb_method, certificate, info):
        """A piecewise-linear loss: the exact dual bound of :mod:`.dual` (the subgradient Lagrangian
        bound is loose at the kinks), and the dual's primal point where it is feasible and better."""
        dual = piecewise_dual_bound(problem, theta, lam, problem.objective(theta),
                                    lambda qp: solve_subproblem(problem, qp, request), c=problem.penalty_coefficient())
        info["piecewise_dual"] = {"bound": dual.bound, "free_samples": dual.n_free, "qp_rounds": dual.rounds}
        if dual.bound > lb:
            lb, lb_method, certificate = dual.bound, "piecewise_linear_dual", "piecewise_linear_dual"
        if dual.theta is not None:
            candidate = dual.theta if problem.penalty_c is not None else problem.project_to_slab(dual.theta)
            if problem.objective(candidate) < problem.objective(theta):
                theta = candidate
                info["theta_from"] = "piecewise_linear_dual"
        return theta, lb, lb_method, certificate
