r"""A client's own policy: which query kinds it answers, and how much.

A :class:`~drflmodel.client_oracle.Site` answers every query its loss allows; a site under a
:class:`QueryPolicy` (:class:`PolicySite`) answers only the kinds on its allow-list and within its
budget, and refuses anything else with :class:`QueryRefused`, whose message names the rule -- the
server sees that message as the client's failed answer, so a refused query is named on the server.

The defaults are what a certified solve asks and no more, measured on 54 federated solves (six
losses -- logistic, smooth hinge, hinge, squared, Huber, softmax -- three weight sets, three seeds)
and bounded by the routes' own caps: one point per value query (a line search asks one; grading
every round of a run at once asks more and must be allowed explicitly), 100 Hessians (the SQP route
asks one per step, at most 50 steps; 23 measured), 400 gradients (the level bundle method's 300
steps; 33 measured), 600 value queries (16 measured), three statistics answers and three row norms
(the squared loss asks its statistics once and a self-concordance bound the row norm once; the two
more are the server's re-asks within its default retry budget of 2 after an answer was lost or
rejected -- re-answering the same statistics reveals nothing new). Hessian-vector products are
allowed up to 2,000 (the Hessian-free routes' conjugate-gradient iterations), and the Hessian-free
route's bound terms up to 400 (one per certificate attempt: 3-7 measured at P = 650 to 51,300). A budget counts answers
per run (one federated solve) and client.

Issue 44 measured the preconditioned Hessian-free route on awkward data (``benchmarks/sweep_honest.py``'s
problems: columns scaled 10^U(-3, 3), sites of 1-3 rows, nearly separable classes, l2 down to 1e-5; 86
solves): median 31 evaluations, 90th percentile 400, 95th 769 -- so the defaults are 1,000 gradient
evaluations and 1,000 bound-term answers, and 1,500 value queries (the intercepts' polish); the route
states them as its plan up front (:mod:`.plan`) and stops within them with its best certificate.

A refusal is final on the server (the channel does not re-ask: the policy would refuse again) and
ends the federated solve ``"failed"``, naming the client, the query and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int
from ..errors import DrflmodelError, InvalidParameterError

__all__ = ["QueryPolicy", "PolicySite", "QueryRefused", "POLICY_KINDS"]

#: the query kinds a policy names (``hessian``: an ``evaluate`` query asking the Hessian)
POLICY_KINDS = ("describe", "row_norm", "values", "evaluate", "hessian", "hvp", "statistics", "bound_terms")


class QueryRefused(DrflmodelError, PermissionError):
    """A query the client's policy does not allow (the message names the rule)."""


@dataclass
class QueryPolicy:
    """What a client answers (module docstring).

    Parameters
    ----------
    allow : the query kinds answered (:data:`POLICY_KINDS`); default every kind.
    points_per_values : most points in one ``values`` query (1; grading a run's rounds at once asks
        ``rounds + 1``).
    values, evaluations, hessians, hvps, statistics, row_norms, bound_terms : most answers of each
        kind per run.
    """

    allow: tuple = POLICY_KINDS
    points_per_values: int = 1
    values: int = 1500
    evaluations: int = 1000
    hessians: int = 100
    hvps: int = 2000
    statistics: int = 3
    row_norms: int = 3
    bound_terms: int = 1000
    used: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        allow = tuple(self.allow)
        unknown = sorted(set(allow) - set(POLICY_KINDS))
        if unknown:
            raise InvalidParameterError(f"allow: unknown query kind(s) {unknown}; known: {', '.join(POLICY_KINDS)}")
        self.allow = allow
        for name in ("points_per_values", "values", "evaluations", "hessians", "hvps", "statistics", "row_norms",
                     "bound_terms"):
            setattr(self, name, check_int(getattr(self, name), name, low=0))

    _BUDGET = {"values": "values", "evaluate": "evaluations", "hessian": "hessians", "hvp": "hvps",
               "statistics": "statistics", "row_norm": "row_norms", "bound_terms": "bound_terms"}
    _WORDS = {"values": "value queries", "evaluations": "gradient evaluations", "hessians": "Hessians",
              "hvps": "Hessian-vector products", "statistics": "statistics answers", "row_norms": "row-norm answers",
              "bound_terms": "bound-term answers"}

    def admit(self, query: str, arrays: dict | None, options: dict | None, dim: int, counts: dict,
              who: str = "site") -> None:
        """Raise :class:`QueryRefused` naming the rule if ``query`` is not allowed now; else count it
        in ``counts`` (a mutable mapping kept per run)."""
        kind = "hessian" if query == "evaluate" and (options or {}).get("hessian") else query
        if kind not in self.allow:
            raise QueryRefused(f"{who} refuses the {kind!r} query: its policy allows only {', '.join(self.allow)}")
        if query == "values":
            points = int(np.size((arrays or {}).get("theta", []))) // max(int(dim), 1)
            if points > self.points_per_values:
                raise QueryRefused(f"{who} refuses a 'values' query at {points} points: its policy allows at most "
                                   f"{self.points_per_values} point(s) per value query")
        budget = self._BUDGET.get(kind)
        if budget is None:
            return
        limit = getattr(self, budget)
        if int(counts.get(budget, 0)) >= limit:
            raise QueryRefused(f"{who} refuses the {kind!r} query: its policy allows at most {limit} "
                               f"{self._WORDS[budget]} per run ({int(counts.get(budget, 0))} answered)")
        counts[budget] = int(counts.get(budget, 0)) + 1
        if kind == "hessian":                              # a Hessian comes with its gradient
            counts["evaluations"] = int(counts.get("evaluations", 0)) + 1

    def to_dict(self) -> dict:
        return {"allow": list(self.allow), **{k: getattr(self, k) for k in
                ("points_per_values", "values", "evaluations", "hessians", "hvps", "statistics", "row_norms",
                 "bound_terms")}}

    def admit_plan(self, plan, who: str = "site") -> None:
        """Accept a route's :class:`~drflmodel.client_oracle.plan.QueryPlan` (stated with its first query)
        or raise :class:`QueryRefused` naming the rule it breaks (:func:`~drflmodel.client_oracle.plan.plan_refusal`)
        -- at the start of the route, before it has answered anything of it."""
        from .plan import plan_refusal

        why = plan_refusal(self, plan)
        if why is not None:
            raise QueryRefused(f"{who} refuses the route's plan: {why}")


class PolicySite:
    """A :class:`~drflmodel.client_oracle.Site` that answers only what ``policy`` allows; ``counts``
    (default a new dict) is where the answers of the current run are counted -- in a Flower
    deployment, a record of the supernode's ``Context.state``, which outlives the per-message process."""

    def __init__(self, site, policy: QueryPolicy | None = None, counts: dict | None = None):
        self.site = site
        self.policy = policy if policy is not None else QueryPolicy()
        self.counts = {} if counts is None else counts

    @property
    def dim(self) -> int:
        """The model's size :math:`P=dK` (from the site's own declaration), to count points per query."""
        declared = self.site.answer("describe")
        return int(np.asarray(declared["features"]).reshape(-1)[0]) * int(np.asarray(declared["outputs"]).reshape(-1)[0])

    def answer(self, query: str, arrays: dict | None = None, options: dict | None = None) -> dict:
        if (options or {}).get("plan") is not None:      # a route states its plan with its first query
            from .plan import QueryPlan

            self.policy.admit_plan(QueryPlan.from_wire(options["plan"]), who=getattr(self.site, "name", "site"))
        dim = self.dim if query == "values" else 1
        self.policy.admit(query, arrays, options, dim, self.counts, who=getattr(self.site, "name", "site"))
        out = self.site.answer(query, arrays, options)
        if query == "describe" and "answers" in out:     # declare only what the policy allows: the server's
            out = dict(out)                              # dispatch then takes a route this client answers
            out["answers"] = ",".join(a for a in str(out["answers"]).split(",") if a in self.policy.allow)
        return out

    def __getattr__(self, name):
        return getattr(self.__dict__["site"], name)
