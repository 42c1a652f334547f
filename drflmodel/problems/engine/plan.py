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

The routes' own plans live with the routes (e.g. :mod:`drflmodel.problems.minmax.route_plans`).

**A plan counts what is left of the run.** A client's budgets count answers per run (one federated
solve), and ``method="auto"`` may run a second route after the first stopped short; so a plan states the
most answers the route will ask *from now on*, and the policy admits it when it fits in what is left of
its budget (:func:`plan_refusal` with the counts so far). The server sizes its plans to what the
default policy has left (:func:`budget_left`: the default budgets less the exchanges of each kind this
solve has made -- each exchange asks each client at most once, so this bounds what every client
answered): an honest client under the default policy always admits them, and a client with a stricter
policy refuses the plan at the route's first query, by name, before answering anything of the route.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ...errors import InvalidParameterError

#: the per-run budgets of the default :class:`~drflmodel.client_oracle.QueryPolicy` (its fields' defaults
#: read these, so a plan is lowered to them without importing the policy)
DEFAULT_BUDGETS = {"values": 1500, "evaluations": 1000, "hessians": 100, "hvps": 2000, "statistics": 3,
                   "row_norms": 3, "bound_terms": 1000}

__all__ = ["QueryPlan", "PlanExhausted", "plan_refusal", "budget_left", "left_on", "hessians_counted",
           "PLAN_KINDS"]

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

    def spend(self, *kinds: str) -> None:
        """Count one more query of every budget in ``kinds`` (one query counted by several, e.g. a
        Hessian evaluation); :class:`PlanExhausted` (before it is sent, nothing counted) when a plan's
        limit is reached -- its limit less the ``reserve`` kept for the route's last certificate until
        :attr:`final` is set."""
        kinds = [k for k in kinds if k in self.limits]
        for kind in kinds:
            held = 0 if self.final else int(self.reserve.get(kind, 0))
            if self.used.get(kind, 0) >= self.limits[kind] - held:
                raise PlanExhausted(f"the {self.route!r} route reached its plan's limit of {self.limits[kind]} "
                                    f"{kind} per client (the server's own limit, stated to the clients up front)")
        for kind in kinds:
            self.used[kind] = self.used.get(kind, 0) + 1

    def within(self, left: dict) -> "QueryPlan":
        """This plan with every limit lowered to what is ``left`` (budget name -> count; a kind absent
        from ``left`` keeps its limit), the reserves lowered with them (at most a quarter of a limit)."""
        self.limits = {k: max(0, min(v, int(left.get(k, v)))) for k, v in self.limits.items()}
        self.reserve = {k: min(int(v), self.limits.get(k, 0) // 4) for k, v in self.reserve.items()}
        return self

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


def budget_left(ledger_queries: dict | None, policy=None, retries: int = 0, hessians: int | None = None) -> dict:
    """What ``policy``'s budgets (default: the default :class:`~drflmodel.client_oracle.QueryPolicy`) leave
    after the exchanges ``ledger_queries`` (the channel ledger's ``queries``: query -> {"exchanges": ...}) --
    an upper bound on every client's count, since an exchange asks each client at most once and a retry
    is counted as another exchange. ``hessians``: the most Hessians one client may have counted so far
    (:func:`left_on`: from the ledger); ``None``: every ``evaluate`` exchange is counted against the
    Hessians too (it may have asked one). ``retries``: the channel's retry budget, kept aside from every
    kind -- a plan travels with the route's first query, and a re-asked first query must still find it
    within what is left."""
    limits = dict(DEFAULT_BUDGETS) if policy is None else {k: int(getattr(policy, k)) for k in DEFAULT_BUDGETS}
    asked = {q: int(v.get("exchanges", 0)) for q, v in (ledger_queries or {}).items()}
    used = {"values": asked.get("values", 0), "evaluations": asked.get("evaluate", 0),
            "hessians": asked.get("evaluate", 0) if hessians is None else int(hessians), "hvps": asked.get("hvp", 0),
            "statistics": asked.get("statistics", 0), "row_norms": asked.get("row_norm", 0),
            "bound_terms": asked.get("bound_terms", 0)}
    return {k: max(0, limits[k] - used[k] - int(retries)) for k in used}


def left_on(channel) -> dict:
    """:func:`budget_left` of the default policy after this solve's exchanges on ``channel`` (its
    ledger), keeping its retry budget aside. The Hessians are counted from the ledger: the most
    Hessian answers of one client plus every retried attempt (a client counts a query when it admits
    it, answered or not) -- an ``evaluate`` exchange that asked none (the Hessian-free and
    ``block_newton`` routes') leaves the Hessian budget whole for a route ``auto`` runs next."""
    ledger = getattr(channel, "ledger", None)
    retries = int(getattr(channel, "retries", 0))
    if ledger is None:
        return budget_left(None, retries=retries)
    return budget_left(ledger.queries, retries=retries, hessians=hessians_counted(ledger))


def hessians_counted(ledger) -> int | None:
    """The most Hessians one client may have counted in the run of ``ledger`` (a
    :class:`~drflmodel.client_oracle.channel.RevealLedger`): its most Hessian answers plus the ledger's
    retried attempts; ``None`` for a ledger that does not count answers per client."""
    most = getattr(ledger, "most_answers", None)
    return None if most is None else int(most("hessian")) + int(ledger.retries)


def plan_refusal(policy, plan: QueryPlan, used: dict | None = None) -> str | None:
    """The rule of ``policy`` (a :class:`~drflmodel.client_oracle.QueryPolicy`) that ``plan`` breaks,
    in words, or ``None`` when the policy admits the plan: a kind the policy does not answer, more
    answers of a kind than its budget per run leaves after ``used`` (budget name -> answers so far in the
    run; default none), more points per value query than it allows."""
    words = getattr(policy, "_WORDS", {})
    for budget, count in plan.limits.items():
        if count == 0:
            continue
        kind = PLAN_KINDS[budget]
        if kind not in policy.allow:
            return (f"the {plan.route!r} route's plan asks {kind!r} queries; its policy answers only "
                    f"{', '.join(policy.allow)}")
        limit = int(getattr(policy, budget))
        spent = int((used or {}).get(budget, 0))
        if count > limit - spent:
            return (f"the {plan.route!r} route's plan may ask up to {count} {words.get(budget, budget)}; its policy "
                    f"allows at most {limit} per run" + (f", {limit - spent} left after {spent} answered" if spent else ""))
    if plan.limits.get("values", 0) and plan.points_per_values > policy.points_per_values:
        return (f"the {plan.route!r} route's plan asks {plan.points_per_values} points per value query; its "
                f"policy allows at most {policy.points_per_values}")
    return None
