"""A family declares its own client queries and its own federated oracle in the registry
(:class:`drflmodel.problems.registry.ClientQuery`), and ``drflmodel.client_oracle`` -- the protocol,
the sites' dispatch, the reveal ledger, the site policies, the answer book and the decoder of Flower
replies -- serves them without one line of it naming the family: a toy family declared in this
test is solved over ``LocalChannel`` and over Flower's in-process grid.

The toy's oracle: every client answers the column means :math:`\\mu_i` of its own rows and its row
count :math:`N_i`; the server certifies :math:`\\min_\\theta\\sum_iq_i\\|\\theta-\\mu_i\\|^2/2` with
:math:`q_i=N_i/N`, whose minimizer is the mean of all rows -- computed here from the raw rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, PolicySite, QueryPolicy, Site, federated_solve
from drflmodel.client_oracle.decoding import Malformed, expected_sizes
from drflmodel.client_oracle.policy import QueryRefused, policy_kinds
from drflmodel.client_oracle.protocol import QUERIES
from drflmodel.problems import registry
from drflmodel.problems.minmax.dro import FederatedDRO
from drflmodel.solution import Solution


class ToyMean(FederatedDRO):
    """A family registered by this test only."""

    family = "toymean"


def column_means(site, query, arrays, options):
    """The toy's handler, run on the site: its own rows' column means and row count."""
    site.memo["asked"] = site.memo.get("asked", 0) + 1      # handlers may keep state on the site
    X = site.X
    if options.get("lie_about_size"):
        return {"mean": np.append(X.mean(axis=0), 0.0), "rows": [float(X.shape[0])]}
    return {"mean": X.mean(axis=0), "rows": [float(X.shape[0])]}


def rows_are_a_count(request, options, answer):
    """The toy's server-side check: a row count is a positive integer."""
    n = float(np.ravel(answer["rows"])[0])
    return None if n >= 1 and n == round(n) else f"rows = {n:g} is not a positive integer"


def toy_oracle(problem, channel, declared, method="auto", gap_tol=1e-6, **options):
    got = channel.ask("toy_means", options=options)
    mu = np.array([np.ravel(got[i]["mean"]) for i in range(channel.n_clients)])
    n = np.array([float(np.ravel(got[i]["rows"])[0]) for i in range(channel.n_clients)])
    q = n / n.sum()
    theta = q @ mu
    value = 0.5 * float(q @ np.sum((mu - theta) ** 2, axis=1))
    return Solution(theta=theta, weights=q, client_losses=None, value=value, lower_bound=value, upper_bound=value,
                    status="optimal", certificate="closed form", info={"method": "toy"})


QUERY = registry.ClientQuery("toy_means", {"mean": ("d", "column means of X_i"), "rows": (1, "rows N_i (toy)")},
                             column_means, budget=3, floor=True, check=rows_are_a_count)
TOY = registry.Family("toymean", "ToyMean", __name__, weight_keys=("weights",), client_queries=(QUERY,),
                      federated_oracle=toy_oracle, federated="the toy's own oracle")


@pytest.fixture
def toy():
    registry.register(TOY)
    try:
        yield TOY
    finally:
        registry.unregister("toymean")


@pytest.fixture(scope="module")
def problem():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=4, samples=[11, 17, 23], seed=2)
    return ToyMean(fed, dm.losses.Logistic(), weights=dm.sets.Simplex(3), l2=0.1)


def _all_rows_mean(problem):
    return np.vstack([c.X for c in problem.federation.clients]).mean(axis=0)


def test_a_declared_query_is_seen_by_every_reader(toy, problem):
    d = problem.federation.clients[0].X.shape[1]
    assert QUERIES["toy_means"] == ("mean", "rows") and "toy_means" in QUERIES
    assert "toy_means" in policy_kinds() and "toy_means" in QueryPolicy().allow
    assert expected_sizes("toy_means", {}, {}, {"features": d, "outputs": 1}) == {"mean": (d, True), "rows": (1, True)}
    with pytest.raises(Malformed, match="declared nothing yet"):       # a size from the declaration: none yet
        expected_sizes("toy_means", {}, {}, None)
    site = Site.from_problem(problem, 0)
    assert site.answer("toy_means")["rows"] == [11.0]
    with pytest.raises(dm.InvalidParameterError, match="unknown query 'toy_nope'"):
        site.answer("toy_nope")
    with pytest.raises(ValueError, match="read-only"):                   # the rows a handler sees are read-only
        site.X[0, 0] = 1.0


def test_without_the_registration_nothing_knows_the_query(problem):
    assert "toy_means" not in QUERIES and "toy_means" not in policy_kinds()
    with pytest.raises(dm.InvalidParameterError, match="unknown query 'toy_means'"):
        Site.from_problem(problem, 0).answer("toy_means")
    with pytest.raises(Malformed, match="unknown query"):
        expected_sizes("toy_means", {}, {}, {"features": 4, "outputs": 1})


def test_declarations_are_checked():
    with pytest.raises(dm.InvalidParameterError, match="already declared"):
        registry.register(registry.Family("other", "Other", __name__, client_queries=(
            registry.ClientQuery("values", {"value": (1, "v")}, column_means, budget=1),)))
    with pytest.raises(dm.InvalidParameterError, match="name must match"):
        registry.ClientQuery("Bad-Name", {"value": (1, "v")}, column_means, budget=1)
    with pytest.raises(dm.InvalidParameterError, match="must be \\(a count"):
        registry.ClientQuery("toy_x", {"value": ("N", "rows")}, column_means, budget=1)
    with pytest.raises(dm.InvalidParameterError, match="budget"):
        registry.ClientQuery("toy_x", {"value": (1, "v")}, column_means, budget=-1)


def test_the_toy_oracle_over_the_local_channel(toy, problem):
    sol = federated_solve(problem, LocalChannel.from_problem(problem))
    assert sol.status == "optimal" and sol.info["method"] == "toy"
    np.testing.assert_allclose(sol.theta, _all_rows_mean(problem), rtol=0, atol=1e-12)
    fed = sol.info["federated"]
    assert fed["checked"] and fed["queries"]["toy_means"]["answers"] == 3
    reveals = {r["quantity"]: r["floats"] for r in fed["reveals"]}
    assert reveals["column means of X_i"] == 4 and reveals["rows N_i (toy)"] == 1


def test_the_toy_oracle_on_flower_is_the_local_one(toy, problem):
    pytest.importorskip("flwr")
    from drflmodel.flower.oracle import certified_solve

    local = federated_solve(problem, LocalChannel.from_problem(problem))
    sol = certified_solve(problem)
    assert sol.status == "optimal" and sol.info["federated"]["transport"] == "flower"
    np.testing.assert_array_equal(sol.theta, local.theta)
    assert sol.info["federated"]["queries"]["toy_means"]["answers"] == 3


def test_an_answer_of_the_wrong_size_is_rejected_by_the_flower_decoder_and_the_answer_book(toy, problem):
    pytest.importorskip("flwr")
    from drflmodel.flower.oracle import certified_solve

    sol = certified_solve(problem, lie_about_size=True, retries=0)
    fault = sol.info["fault"]
    assert sol.status == "failed" and fault["query"] == "toy_means" and fault["kind"] == "rejected"
    assert fault["check"] == "shape" and "mean declares 5 entries" in fault["reasons"][-1]
    sol = federated_solve(problem, LocalChannel.from_problem(problem, retries=0), lie_about_size=True)
    assert sol.status == "failed" and "mean has 5 entries; expected 4" in sol.info["fault"]["reasons"][-1]


def test_the_declared_check_rejects_an_impossible_answer(toy, problem):
    class Lying(Site):
        def answer(self, query, arrays=None, options=None):
            out = super().answer(query, arrays, options)
            return {**out, "rows": [0.5]} if query == "toy_means" else out

    sites = [Site.from_problem(problem, 0), Site.from_problem(problem, 1),
             Lying(problem.federation.clients[2].X, problem.federation.clients[2].y, problem.loss)]
    sol = federated_solve(problem, LocalChannel(sites, retries=0))
    assert sol.status == "failed" and sol.info["fault"]["client"] == 2
    assert sol.info["fault"]["check"] == "declared" and "rows = 0.5" in sol.info["fault"]["reasons"][-1]


def test_a_site_policy_budgets_allows_and_floors_a_declared_query(toy, problem):
    site = Site.from_problem(problem, 0)             # 11 rows, P = 4 parameters
    guarded = PolicySite(site, QueryPolicy(rows_above_parameters=False))
    for _ in range(3):                                # the declaration's default budget
        guarded.answer("toy_means")
    with pytest.raises(QueryRefused, match="at most 3 'toy_means' answers per run"):
        guarded.answer("toy_means")
    one = PolicySite(site, QueryPolicy(budgets={"toy_means": 1}, rows_above_parameters=False))
    one.answer("toy_means")
    with pytest.raises(QueryRefused, match="at most 1 'toy_means'"):
        one.answer("toy_means")
    with pytest.raises(QueryRefused, match="policy allows only"):
        PolicySite(site, QueryPolicy(allow=("describe", "values"))).answer("toy_means")
    with pytest.raises(QueryRefused, match="floor of 12"):   # floor=True: fewer rows than min_rows refuse it
        PolicySite(site, QueryPolicy(min_rows=12)).answer("toy_means")
    assert QueryPolicy(budgets={"toy_means": 5}).stricter(QueryPolicy(budgets={"toy_means": 2})).budgets == {
        "toy_means": 2}
    with pytest.raises(dm.InvalidParameterError, match="budgets"):
        QueryPolicy(budgets={"nope": 1})


def test_client_oracle_names_no_family_and_no_family_query():
    """What the registry declares is read, never written, inside ``drflmodel.client_oracle``
    (its private mode, which refuses other families by name in prose, aside)."""
    root = Path(dm.__file__).parent / "client_oracle"
    # the family names that are no English word ("dro" and "relative" are, in "relative gap"), the
    # classes and the declared queries
    names = {*(f for f in registry.FAMILIES if f not in ("dro", "relative")), *registry.client_queries(),
             *(f.cls for f in registry.FAMILIES.values() if f.cls not in ("FederatedDRO", "FairnessAwareFL"))}
    assert {"wasserstein", "wasserstein_prox", "WassersteinDRFL"} <= names
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    hits = [f"{p.name}: {m.group(0)}" for p in root.glob("*.py") for m in pattern.finditer(p.read_text())]
    assert hits == []
