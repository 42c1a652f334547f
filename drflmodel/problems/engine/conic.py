r"""The conic route, the default route of every family: solve ``Problem.build()`` with the solver
sequence (:mod:`.solvers`) and certify each answer with ``Problem._certify`` (upper bound in
numpy, lower bound from a dual argument); stop at the first ``"optimal"`` (or ``"local"``)
answer, else return the best certified one, ``"infeasible"`` on a solver's infeasibility
certificate, ``"failed"`` if none answered."""

from __future__ import annotations

from ...solution import relative_gap
from .route import Route
from ..._solver_sequence import INFEASIBLE_STATUSES, OK_STATUSES, SolverSequence

__all__ = ["ConicRoute", "better"]


def better(a, b) -> bool:
    """Prefer the smaller certified relative gap; a broken certificate (status ``"failed"``,
    e.g. L > U) never beats a valid one."""
    if (a.status == "failed") != (b.status == "failed"):
        return b.status == "failed"
    return relative_gap(a.lower_bound, a.upper_bound) < relative_gap(b.lower_bound, b.upper_bound)


class ConicRoute(Route):
    """Solve ``problem.build()`` with an open conic solver and certify with ``problem._certify``
    (the module docstring; every family's default route). Options: the first solver's settings."""

    name = "conic"
    options = {}
    uses_solver = True
    passes_solver_options = True

    allocates = "dense {P} x {P} matrices and the conic model of every row"

    def applies(self, structure) -> str | None:
        """Refused (with the estimate and the route that fits) when the family's estimate of its
        conic model (``structure.conic_bytes``) would not fit in memory."""
        return self.fits(structure)

    def memory(self, structure) -> int | None:
        """The family's estimate of its conic model and certificate (``structure.conic_bytes``;
        ``None``: the family gives none)."""
        return structure.conic_bytes

    def cost(self, structure) -> float | None:
        """Seconds of a conic solve (:func:`.cost.conic_seconds`): compiling and solving the model of
        every row -- ``None`` when the family gives no estimate of its conic model."""
        if structure.conic_bytes is None:
            return None
        from .cost import conic_seconds

        return conic_seconds(structure)

    def first_solver(self, problem) -> str | None:
        order = problem.solver_order()
        return order[0] if order else None

    def solve(self, problem, request):
        prob = problem.build()
        seq = SolverSequence(request, problem.solver_order())
        best = None
        for name in seq:
            record = seq.run(prob, name)
            if record is None:
                continue
            if prob.status in INFEASIBLE_STATUSES:
                return problem.infeasible_solution(name, seq.attempts)
            if prob.status not in OK_STATUSES:
                continue
            sol = problem.certify_solved(name)
            sol.status = problem.status_of(sol, request.gap_tol)
            record.update(status=sol.status, relative_gap=sol.relative_gap)
            if best is None or better(sol, best):
                best = sol
            if sol.status in ("optimal", "local"):
                break
        if best is None:
            return problem.failed_solution(seq.attempts, seq.failure())
        best.info.setdefault("solver", seq.attempts[-1]["solver"] if seq.attempts else None)
        best.info["attempts"] = seq.attempts
        best.info["gap_tol"] = request.gap_tol
        return best
