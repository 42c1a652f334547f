r"""The query plans of the Hessian-free and SQP routes on a federated server (the plan itself, its
admission and what is left of a run: :mod:`drflmodel.problems.engine.plan`).

The Hessian-free route's plan (:func:`hessian_free_plan`): at most ``evaluations`` ``evaluate``
queries (each step's value and gradient, and the intercepts' Newton polish of its bound),
``bound_terms`` answers (one per certificate attempt and polish step, plus the column statistics at
:math:`\theta=0`) and ``values`` queries of one point (the polish's backtracking). Its defaults are
those of the default policy, so an honest client under the default policy accepts it.

The SQP route's plan (:func:`sqp_plan`, the route ``sqp`` of :mod:`drflmodel.problems.minmax.lagrangian_sqp`
on a federated server): from its own bound on its steps -- per step at most two Hessian evaluations (the
full step, and the accepted shorter step when the line search backtracks) and 34 one-point value queries
(Armijo halvings down to a step of :math:`10^{-10}`), one value query and one Hessian evaluation at the
start -- so :math:`1+2\,\mathrm{max\_steps}` Hessians, with Newton steps of the bound's last polish on top.
"""

from __future__ import annotations

from ..engine.plan import DEFAULT_BUDGETS, QueryPlan, budget_left

__all__ = ["hessian_free_plan", "sqp_plan"]


def hessian_free_plan(evaluations: int = 1000, bound_terms: int = 1000, values: int = 1500) -> QueryPlan:
    """The Hessian-free route's plan on a federated server (module docstring). The steps stop short of
    the limits by a reserve for one last certificate at the last point (its bound terms, and the
    intercepts' polish: up to 30 Newton steps, each one evaluation, one bound-term answer and a few
    value queries)."""
    reserve = {"evaluations": min(31, evaluations // 4), "bound_terms": min(32, bound_terms // 4),
               "values": min(120, values // 4)}
    return QueryPlan("hessian_free", {"evaluations": evaluations, "bound_terms": bound_terms, "values": values},
                     reserve=reserve,
                     derivation=(f"at most {evaluations} value-and-gradient evaluations (steps and the intercepts' "
                                 f"polish), {bound_terms} bound-term answers (certificate attempts, polish steps "
                                 f"and the column statistics), {values} one-point value queries; the route stops "
                                 f"at the first limit reached with its best certificate"))


def sqp_plan(max_steps: int = 50, left: dict | None = None) -> QueryPlan:
    r"""The SQP route's plan on a federated server (module docstring): from ``max_steps``, at most
    :math:`1+2\,\mathrm{max\_steps}` Hessian evaluations and :math:`1+34\,\mathrm{max\_steps}` value
    queries, and as many gradient evaluations as Hessians plus the polish's; every limit lowered to what
    the default policy has ``left`` (:func:`budget_left`), value queries to half of it (the rest stays for
    a route ``auto`` may run after this one). The route stops at the first limit it reaches with its best
    certificate."""
    left = budget_left(None) if left is None else dict(left)
    steps = int(max_steps)
    hessians = 1 + 2 * steps + 30                 # the steps, and the last polish's Newton steps
    plan = QueryPlan("sqp", {"hessians": hessians, "evaluations": hessians, "values": 1 + 34 * steps},
                     derivation=(f"{steps} steps: at most 2 Hessian evaluations and 34 one-point value queries per "
                                 f"step, one of each at the start, 30 Newton steps of the last polish; lowered to "
                                 f"the default policy's budgets left in this run (values: half of them)"))
    half = {**left, "values": int(left.get("values", DEFAULT_BUDGETS["values"])) // 2}
    return plan.within(half)
