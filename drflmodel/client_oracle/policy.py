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

**Keyed by what the server cannot choose.** On Flower the answers are counted per Flower run
(``Context.run_id``, which the SuperLink assigns) and supernode, never by a label the server writes
into its messages: a server that names every message a new "run" does not get a new budget. A new
Flower run does start a fresh budget (that is what the SuperLink's run is).

**Where the policy comes from.** A site sets its policy where no submitter reaches: a file on the
site named by the SuperNode's node config, ``--node-config "query-policy='/etc/site/policy.toml'"``
(:func:`site_policy`; TOML or JSON with the fields of :class:`QueryPolicy`). The policy the app's
code passes (``with_oracle(..., policy=...)``) can only make it stricter (:meth:`QueryPolicy.stricter`):
a submitted app cannot loosen a site's policy. What this cannot bind: in Flower's deployment model the
``ClientApp`` code ships in the submitter's bundle, so a site's policy binds only apps that answer
through drflmodel's handlers -- a site that must not reveal more runs its own vetted app.

**A floor on rows.** A site with fewer rows than the model has parameters plus one (:math:`N_i < P+1`,
or the site-set ``min_rows``) refuses the per-client gradient, Hessian, Hessian-vector and statistics
queries by name: from a few hundred gradients and values of a small site a server can reconstruct its
rows and labels (``benchmarks/reconstruction_attack.py``). Small sites need the private mode of the
certificate (secure sums), not per-client answers.

The preconditioned Hessian-free route was measured on awkward data (``benchmarks/sweep_honest.py``'s
problems: columns scaled 10^U(-3, 3), sites of 1-3 rows, nearly separable classes, l2 down to 1e-5; 86
solves): median 31 evaluations, 90th percentile 400, 95th 769 -- so the defaults are 1,000 gradient
evaluations and 1,000 bound-term answers, and 1,500 value queries (the intercepts' polish); the route
states them as its plan up front (:mod:`.plan`) and stops within them with its best certificate; the
federated ``sqp`` route states its plan too (its 100 Hessians: two per step at most), and a plan is
admitted against what is left of the budgets in the run (:meth:`QueryPolicy.admit_plan`).

**A family's own queries** (declared in the family registry,
:class:`~drflmodel.problems.registry.ClientQuery`) are kinds of their own: allowed by default, each
budgeted by its declaration's ``budget`` per run unless the policy names its own (``budgets``), and
refused below the row floor when its declaration says so (``floor``).

A refusal is final on the server (the channel does not re-ask: the policy would refuse again) and
ends the federated solve ``"failed"``, naming the client, the query and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int
from ..errors import DrflmodelError, InvalidParameterError
from ..problems.registry import client_queries
from ..problems.engine.plan import DEFAULT_BUDGETS, QueryPlan, plan_refusal

__all__ = ["QueryPolicy", "PolicySite", "QueryRefused", "POLICY_KINDS", "policy_kinds", "site_policy",
           "NODE_CONFIG_KEY", "FLOOR_KINDS"]

#: the SuperNode ``node_config`` key naming the site's policy file
NODE_CONFIG_KEY = "query-policy"
#: the query kinds a site below its row floor refuses (per-client gradients and what determines them)
FLOOR_KINDS = ("evaluate", "hessian", "hvp", "statistics", "bound_terms")

#: the protocol's own query kinds (``hessian``: an ``evaluate`` query asking the Hessian)
POLICY_KINDS = ("describe", "row_norm", "values", "evaluate", "hessian", "hvp", "statistics", "bound_terms")


def policy_kinds() -> tuple[str, ...]:
    """Every kind a policy names: :data:`POLICY_KINDS` and the families' declared queries (read now)."""
    return POLICY_KINDS + tuple(client_queries())


class QueryRefused(DrflmodelError, PermissionError):
    """A query the client's policy does not allow (the message names the rule)."""


@dataclass
class QueryPolicy:
    """What a client answers (module docstring).

    Parameters
    ----------
    allow : the query kinds answered (:func:`policy_kinds`); default (``None``) every kind known when
        the policy is made.
    points_per_values : most points in one ``values`` query (1; grading a run's rounds at once asks
        ``rounds + 1``).
    values, evaluations, hessians, hvps, statistics, row_norms, bound_terms : most answers of each
        kind per run.
    budgets : most answers per run of a family's declared query, ``{query: n}``; a query not named
        here has its declaration's ``budget``.
    min_rows : the fewest rows with which the site answers :data:`FLOOR_KINDS` and the declared
        queries whose ``floor`` is set (a site-set minimum).
    rows_above_parameters : also refuse them with fewer than :math:`P+1` rows (:math:`P` the model's
        parameters; default ``True``; ``False`` with ``min_rows=0``: no floor).
    """

    allow: tuple | None = None
    points_per_values: int = 1
    values: int = DEFAULT_BUDGETS["values"]
    evaluations: int = DEFAULT_BUDGETS["evaluations"]
    hessians: int = DEFAULT_BUDGETS["hessians"]
    hvps: int = DEFAULT_BUDGETS["hvps"]
    statistics: int = DEFAULT_BUDGETS["statistics"]
    row_norms: int = DEFAULT_BUDGETS["row_norms"]
    bound_terms: int = DEFAULT_BUDGETS["bound_terms"]
    budgets: dict = field(default_factory=dict)
    min_rows: int = 0
    rows_above_parameters: bool = True
    used: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        kinds = policy_kinds()
        allow = kinds if self.allow is None else tuple(self.allow)
        unknown = sorted(set(allow) - set(kinds))
        if unknown:
            raise InvalidParameterError(f"allow: unknown query kind(s) {unknown}; known: {', '.join(kinds)}")
        self.allow = allow
        declared = client_queries()
        if not isinstance(self.budgets, dict) or set(self.budgets) - set(declared):
            raise InvalidParameterError(f"budgets: a dict over the families' declared queries "
                                        f"({', '.join(declared) or 'none'}); got {self.budgets!r}")
        self.budgets = {k: check_int(v, f"budgets[{k!r}]", low=0) for k, v in self.budgets.items()}
        for name in ("points_per_values", "values", "evaluations", "hessians", "hvps", "statistics", "row_norms",
                     "bound_terms"):
            setattr(self, name, check_int(getattr(self, name), name, low=0))
        self.min_rows = check_int(self.min_rows, "min_rows", low=0)
        if not isinstance(self.rows_above_parameters, bool):
            raise InvalidParameterError(f"rows_above_parameters must be True or False; got {self.rows_above_parameters!r}")

    _FIELDS = ("points_per_values", "values", "evaluations", "hessians", "hvps", "statistics", "row_norms",
               "bound_terms")

    def stricter(self, other: "QueryPolicy") -> "QueryPolicy":
        """The policy allowing only what both allow: the kinds both allow, the smaller of each budget,
        the higher row floor."""
        if not isinstance(other, QueryPolicy):
            raise InvalidParameterError(f"a policy is tightened by a QueryPolicy; got {type(other).__name__}")
        declared = set(self.budgets) | set(other.budgets)
        return QueryPolicy(allow=tuple(k for k in self.allow if k in other.allow),
                           budgets={k: min(self.budget_of(k), other.budget_of(k)) for k in declared},
                           min_rows=max(self.min_rows, other.min_rows),
                           rows_above_parameters=self.rows_above_parameters or other.rows_above_parameters,
                           **{k: min(getattr(self, k), getattr(other, k)) for k in self._FIELDS})

    def budget_of(self, query: str) -> int:
        """The answers per run this policy grants a family's declared ``query``."""
        return int(self.budgets[query]) if query in self.budgets else client_queries()[query].budget

    def floor(self, dim: int) -> int:
        """The fewest rows with which :data:`FLOOR_KINDS` are answered, for a model of ``dim`` parameters:
        ``max(min_rows, P + 1)``, or ``min_rows`` alone without ``rows_above_parameters``."""
        return max(self.min_rows, int(dim) + 1 if self.rows_above_parameters else 0)

    @classmethod
    def from_file(cls, path) -> "QueryPolicy":
        """A policy from a TOML (``.toml``) or JSON file holding the fields of :class:`QueryPolicy`."""
        import json
        from pathlib import Path

        path = Path(str(path))
        try:
            text = path.read_text()
        except OSError as exc:
            raise InvalidParameterError(f"the site's query policy file {str(path)!r} cannot be read: {exc}") from None
        if path.suffix == ".toml":
            import tomllib

            fields = tomllib.loads(text)
        else:
            fields = json.loads(text)
        known = {"allow", "budgets", "min_rows", "rows_above_parameters", *cls._FIELDS}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise InvalidParameterError(f"{path.name}: unknown query-policy field(s) {unknown}; known: {sorted(known)}")
        return cls(**fields)

    _BUDGET = {"values": "values", "evaluate": "evaluations", "hessian": "hessians", "hvp": "hvps",
               "statistics": "statistics", "row_norm": "row_norms", "bound_terms": "bound_terms"}
    _WORDS = {"values": "value queries", "evaluations": "gradient evaluations", "hessians": "Hessians",
              "hvps": "Hessian-vector products", "statistics": "statistics answers", "row_norms": "row-norm answers",
              "bound_terms": "bound-term answers"}

    def admit(self, query: str, arrays: dict | None, options: dict | None, dim: int, counts: dict,
              who: str = "site", rows: int | None = None) -> None:
        """Raise :class:`QueryRefused` naming the rule if ``query`` is not allowed now; else count it
        in ``counts`` (a mutable mapping kept per Flower run and supernode). ``rows``: the site's
        rows, for the floor (``None``: not checked)."""
        kind = "hessian" if query == "evaluate" and (options or {}).get("hessian") else query
        if kind not in self.allow:
            raise QueryRefused(f"{who} refuses the {kind!r} query: its policy allows only {', '.join(self.allow)}")
        declared = client_queries().get(kind)
        floored = kind in FLOOR_KINDS or (declared is not None and declared.floor)
        if floored and rows is not None and rows < self.floor(dim):
            raise QueryRefused(
                f"{who} refuses the {kind!r} query: it holds {rows} rows, fewer than its policy's floor of "
                f"{self.floor(dim)} (min_rows {self.min_rows}; P + 1 = {dim + 1} for a model of P = {dim} parameters) -- a server "
                "could reconstruct its rows from per-client gradients; a site this small needs the certificate's "
                "private mode (secure sums)")
        if query == "values":
            points = int(np.size((arrays or {}).get("theta", []))) // max(int(dim), 1)
            if points > self.points_per_values:
                raise QueryRefused(f"{who} refuses a 'values' query at {points} points: its policy allows at most "
                                   f"{self.points_per_values} point(s) per value query")
        if declared is not None:                           # a family's own query: its own budget
            budget, limit, words = kind, self.budget_of(kind), f"{kind!r} answers"
        else:
            budget = self._BUDGET.get(kind)
            if budget is None:
                return
            limit, words = getattr(self, budget), self._WORDS[budget]
        if int(counts.get(budget, 0)) >= limit:
            raise QueryRefused(f"{who} refuses the {kind!r} query: its policy allows at most {limit} "
                               f"{words} per run ({int(counts.get(budget, 0))} answered)")
        counts[budget] = int(counts.get(budget, 0)) + 1
        if kind == "hessian":                              # a Hessian comes with its gradient
            counts["evaluations"] = int(counts.get("evaluations", 0)) + 1
        if query == "evaluate" and (options or {}).get("bound_terms"):   # the bound terms asked with it
            if "bound_terms" not in self.allow:
                raise QueryRefused(f"{who} refuses bound terms with an evaluation: its policy allows only "
                                   f"{', '.join(self.allow)}")
            if int(counts.get("bound_terms", 0)) >= self.bound_terms:
                raise QueryRefused(f"{who} refuses the 'bound_terms' query: its policy allows at most "
                                   f"{self.bound_terms} {self._WORDS['bound_terms']} per run "
                                   f"({int(counts.get('bound_terms', 0))} answered)")
            counts["bound_terms"] = int(counts.get("bound_terms", 0)) + 1
        products = int(np.size((arrays or {}).get("directions", []))) // max(int(dim), 1)
        if query == "evaluate" and products:                  # Hessian-vector products asked with it
            if "hvp" not in self.allow:
                raise QueryRefused(f"{who} refuses Hessian-vector products with an evaluation: its policy allows "
                                   f"only {', '.join(self.allow)}")
            if int(counts.get("hvps", 0)) + products > self.hvps:
                raise QueryRefused(f"{who} refuses the 'hvp' query: its policy allows at most {self.hvps} "
                                   f"{self._WORDS['hvps']} per run ({int(counts.get('hvps', 0))} answered)")
            counts["hvps"] = int(counts.get("hvps", 0)) + products

    def to_dict(self) -> dict:
        return {"allow": list(self.allow), "budgets": dict(self.budgets), "min_rows": self.min_rows,
                "rows_above_parameters": self.rows_above_parameters,
                **{k: getattr(self, k) for k in self._FIELDS}}

    def admit_plan(self, plan, who: str = "site", used: dict | None = None) -> None:
        """Accept a route's :class:`~drflmodel.problems.engine.plan.QueryPlan` (stated with its first query)
        or raise :class:`QueryRefused` naming the rule it breaks (:func:`~drflmodel.problems.engine.plan.plan_refusal`)
        -- at the start of the route, before it has answered anything of it. ``used``: the answers of
        this run so far (the plan must fit in what is left)."""
        why = plan_refusal(self, plan, used)
        if why is not None:
            raise QueryRefused(f"{who} refuses the route's plan: {why}")


def site_policy(node_config) -> QueryPolicy | None:
    """The policy a site set for itself: the file named by ``node_config["query-policy"]`` (the
    SuperNode's ``--node-config``, which no submitter reaches; :meth:`QueryPolicy.from_file`), or
    ``None`` when the site named none."""
    path = (node_config or {}).get(NODE_CONFIG_KEY)
    if path is None or str(path) == "":
        return None
    return QueryPolicy.from_file(path)


class PolicySite:
    """A :class:`~drflmodel.client_oracle.Site` that answers only what ``policy`` allows; ``counts``
    (default a new dict) is where the answers of the current run are counted -- in a Flower
    deployment, a record of the supernode's ``Context.state``, which outlives the per-message process."""

    def __init__(self, site, policy: QueryPolicy | None = None, counts: dict | None = None):
        self.site = site
        self.policy = policy if policy is not None else QueryPolicy()
        self.counts = {} if counts is None else counts

    def _declared(self) -> tuple[int, int]:
        """``(P, N_i)``: the model's size :math:`P=dK` and the site's rows (a :class:`Site`'s own
        attributes, else its declaration)."""
        if isinstance(getattr(self.site, "dim", None), int) and isinstance(getattr(self.site, "size", None), int):
            return self.site.dim, self.site.size
        declared = self.site.answer("describe")
        one = lambda k: int(np.asarray(declared[k]).reshape(-1)[0])      # noqa: E731
        return one("features") * one("outputs"), one("rows")

    @property
    def dim(self) -> int:
        """The model's size :math:`P=dK` (from the site's own declaration), to count points per query."""
        return self._declared()[0]

    def answer(self, query: str, arrays: dict | None = None, options: dict | None = None) -> dict:
        if (options or {}).get("plan") is not None:      # a route states its plan with its first query
            self.policy.admit_plan(QueryPlan.from_wire(options["plan"]), who=getattr(self.site, "name", "site"),
                                   used=self.counts)
        dim, rows = self._declared() if query != "describe" else (1, None)
        self.policy.admit(query, arrays, options, dim, self.counts, who=getattr(self.site, "name", "site"), rows=rows)
        out = self.site.answer(query, arrays, options)
        if query == "describe" and "answers" in out:     # declare only what the policy allows: the server's
            out = dict(out)                              # dispatch then takes a route this client answers
            out["answers"] = ",".join(a for a in str(out["answers"]).split(",") if a in self.policy.allow)
        return out

    def __getattr__(self, name):
        return getattr(self.__dict__["site"], name)
