r"""What a route will ask of each client, stated before it asks anything: a :class:`QueryPlan`.

A client's :class:`~drflmodel.client_oracle.QueryPolicy` caps its answers per run. Counted one
query at a time, a cap only shows when it is reached -- mid-solve, after the client has answered
hundreds of queries, ending an honest solve ``"failed"`` and naming the honest client. A plan turns
this around: the route states up front the most answers of each kind it will ask of every client
(from its own caps on its iterations), the plan travels with the route's first query, and the
client's policy accepts it or refuses it *then*, by name (:meth:`QueryPolicy.admit_plan
<drflmodel.client_oracle.QueryPolicy.admit_plan>`), before it has answered anything of the route.
The route then keeps to its plan: it counts its own queries and stops at the plan's limit with the
best certificate met so far (the server's own limit, said in the result's ``info["plan"]``), never
asking the client beyond what it accepted.

The Hessian-free route's plan (:func:`hessian_free_plan`): at most ``evaluations`` ``evaluate``
queries (each step's value and gradient, and the intercepts' Newton polish of its bound),
``bound_terms`` answers (one per certificate attempt and polish step, plus the column statistics at
:math:`\theta=0`) and ``values`` queries of one point (the polish's backtracking). Its defaults are
those of the default policy, so an honest client under the default policy accepts it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import InvalidParameterError

__all__ = ["QueryPlan", "PlanExhausted", "hessian_free_plan", "plan_refusal", "PLAN_KINDS"]

#: what a plan caps: the budget names of :class:`~drflmodel.client_oracle.QueryPolicy`, and the query
#: kind whose answers each counts
PLAN_KINDS = {"evaluations": "evaluate", "values": "values", "hessians": "hessian", "hvps": "hvp",
              "statistics": "statistics", "row_norms": "row_norm", "bound_terms": "bound_terms"}


class PlanExhausted(RuntimeError):
    """The route reached its own plan's limit (raised on the server, before the query is sent)."""


@dataclass
class QueryPlan:
    """The most answers of each kind (``limits``: budget name -> count per client and run) that the
    route ``route`` will ask, with ``points_per_values`` points per value query and, in words, how the
    numbers follow from the route's caps (``derivation``). ``used`` counts what was asked so far."""

    route: str
    limits: dict
    points_per_values: int = 1
    derivation: str = ""
    used: dict = field(default_factory=dict)
    reserve: dict = field(default_factory=dict)
    final: bool = False

    def __post_init__(self):
        unknown = sorted(set(self.limits) - set(PLAN_KINDS))
        if unknown:
            raise InvalidParameterError(f"limits: unknown kind(s) {unknown}; known: {', '.join(PLAN_KINDS)}")
        for name, count in self.limits.items():
            if int(count) != count or count < 0:
                raise InvalidParameterError(f"limits[{name!r}] must be a nonnegative integer; got {count!r}")
        self.limits = {k: int(v) for k, v in self.limits.items()}

    def spend(self, kind: str) -> None:
        """Count one more query of budget ``kind``; :class:`PlanExhausted` (before it is sent) when the
        plan's limit is reached -- its limit less the ``reserve`` kept for the route's last certificate
        until :attr:`final` is set."""
        if kind not in self.limits:
            return
        held = 0 if self.final else int(self.reserve.get(kind, 0))
        if self.used.get(kind, 0) >= self.limits[kind] - held:
            raise PlanExhausted(f"the {self.route!r} route reached its plan's limit of {self.limits[kind]} "
                                f"{kind} per client (the server's own limit, stated to the clients up front)")
        self.used[kind] = self.used.get(kind, 0) + 1

    def wire(self) -> str:
        """The plan as the text a query's options carry."""
        return json.dumps({"route": self.route, "limits": self.limits, "points_per_values": self.points_per_values})

    @classmethod
    def from_wire(cls, text) -> "QueryPlan":
        """The plan a query's options carried (:meth:`wire`); a malformed one is refused by name."""
        try:
            got = json.loads(text) if isinstance(text, str) else dict(text)
            return cls(str(got["route"]), dict(got["limits"]), int(got.get("points_per_values", 1)))
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidParameterError(f"plan: cannot be read ({type(exc).__name__}: {exc})") from None

    def to_dict(self) -> dict:
        return {"route": self.route, "limits": dict(self.limits), "points_per_values": self.points_per_values,
                "derivation": self.derivation, "used": dict(self.used)}


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


def plan_refusal(policy, plan: QueryPlan) -> str | None:
    """The rule of ``policy`` (a :class:`~drflmodel.client_oracle.QueryPolicy`) that ``plan`` breaks,
    in words, or ``None`` when the policy admits the plan: a kind the policy does not answer, more
    answers of a kind than its budget per run, more points per value query than it allows."""
    words = getattr(policy, "_WORDS", {})
    for budget, count in plan.limits.items():
        if count == 0:
            continue
        kind = PLAN_KINDS[budget]
        if kind not in policy.allow:
            return (f"the {plan.route!r} route's plan asks {kind!r} queries; its policy answers only "
                    f"{', '.join(policy.allow)}")
        limit = int(getattr(policy, budget))
        if count > limit:
            return (f"the {plan.route!r} route's plan may ask up to {count} {words.get(budget, budget)}; its policy "
                    f"allows at most {limit} per run")
    if plan.limits.get("values", 0) and plan.points_per_values > policy.points_per_values:
        return (f"the {plan.route!r} route's plan asks {plan.points_per_values} points per value query; its "
                f"policy allows at most {policy.points_per_values}")
    return None
