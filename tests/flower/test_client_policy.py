"""A client's own policy (drflmodel.client_oracle.policy): an allow-list of query kinds and a budget per
run. The issue's measurements -- one 'values' query at 100,000 points answered, three Hessian-vector
products returning X'X/(4N) exactly -- are refused by the default policy or an allow-list, by name,
on the in-process Flower grid; the default policy answers every query a certified solve asks."""

import numpy as np
from flwr.clientapp import ClientApp
import pytest

import drflmodel as dm
from drflmodel.client_oracle import PolicySite, QueryPolicy, QueryRefused
from drflmodel.client_oracle import ClientFault, LocalChannel, Site, federated_solve
from drflmodel.errors import InvalidParameterError
from drflmodel.flower.grid import LocalGrid
from drflmodel.flower.oracle import FlowerChannel, oracle_client_app, solve_on_grid, with_oracle

N = 3


@pytest.fixture(scope="module")
def prob():
    fed = dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[30, 40, 50], seed=0)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)


def test_the_default_policy_refuses_many_points_and_names_the_rule(prob):
    site = PolicySite(Site.from_problem(prob, 0))
    theta = np.zeros(prob.dim)
    assert site.answer("values", {"theta": theta})["value"].shape == (1,)
    with pytest.raises(QueryRefused, match=r"refuses a 'values' query at 100000 points: its policy allows at most "
                                           r"1 point\(s\) per value query"):
        site.answer("values", {"theta": np.zeros((100_000, prob.dim))})


def test_an_allow_list_and_a_budget(prob):
    counts = {}
    site = PolicySite(Site.from_problem(prob, 0), QueryPolicy(allow=("describe", "values", "evaluate", "hessian"),
                                                              hessians=2), counts)
    theta = np.zeros(prob.dim)
    with pytest.raises(QueryRefused, match="refuses the 'hvp' query: its policy allows only describe, values, "
                                           "evaluate, hessian"):
        site.answer("hvp", {"theta": theta, "direction": np.ones(prob.dim)})
    for _ in range(2):
        site.answer("evaluate", {"theta": theta}, {"hessian": True})
    with pytest.raises(QueryRefused, match=r"at most 2 Hessians per run \(2 answered\)"):
        site.answer("evaluate", {"theta": theta}, {"hessian": True})
    assert counts == {"hessians": 2, "evaluations": 2}
    site.answer("evaluate", {"theta": theta})                      # a gradient alone is still answered
    with pytest.raises(InvalidParameterError, match="allow: unknown query kind"):
        QueryPolicy(allow=("rows",))


def test_the_default_policy_answers_what_a_certified_solve_asks(prob):
    sites = [PolicySite(Site.from_problem(prob, i)) for i in range(N)]
    sol = federated_solve(prob, LocalChannel(sites))
    assert sol.status == "optimal"
    assert all(s.counts["hessians"] <= QueryPolicy().hessians for s in sites)


def test_refused_queries_are_named_on_the_server_over_flower(prob):
    """With_oracle's policy on the in-process grid: the server's fault names the refusing client and
    the rule; the answers of a run are counted in the supernode's Context.state across messages."""
    no_hvp = QueryPolicy(allow=("describe", "row_norm", "values", "evaluate", "hessian"))
    app = with_oracle(ClientApp(), {"oracle": prob}, policy=no_hvp)
    with LocalGrid(app, N) as grid:
        channel = FlowerChannel(grid, N, run="oracle", retries=0)
        channel.ask("describe")
        with pytest.raises(ClientFault) as exc:
            channel.ask("hvp", {"theta": np.zeros(prob.dim)}, per_client={i: {"direction": np.ones(prob.dim)}
                                                                            for i in range(N)})
        assert "QueryRefused" in exc.value.reasons[-1] and "refuses the 'hvp' query" in exc.value.reasons[-1]
        with pytest.raises(ClientFault) as exc:
            channel.ask("values", {"theta": np.zeros((100_000, prob.dim)).reshape(-1)})
        assert "at 100000 points" in exc.value.reasons[-1]
    two = QueryPolicy(hessians=2)
    app = with_oracle(ClientApp(), {"oracle": prob}, policy=two)
    with LocalGrid(app, N) as grid:
        channel = FlowerChannel(grid, N, run="oracle", retries=0)
        channel.ask("describe")
        for k in range(2):
            channel.ask("evaluate", {"theta": np.full(prob.dim, 0.1 * k)}, options={"hessian": True})
        with pytest.raises(ClientFault, match=r"at most 2 Hessians per run \(2 answered\)"):
            channel.ask("evaluate", {"theta": np.full(prob.dim, 0.5)}, options={"hessian": True})


def test_a_certified_solve_on_flower_under_the_default_policy(prob):
    app = oracle_client_app({"oracle": prob})
    with LocalGrid(app, N) as grid:
        sol = solve_on_grid(grid, prob)
    assert sol.status == "optimal"


def test_a_refused_query_is_not_retried_and_ends_the_solve_failed(prob):
    """A budget refusal: the solve ends 'failed' at once (one attempt, whatever the retry budget),
    naming the client, the query and the rule -- never the certificate completed before it."""
    sites = [PolicySite(Site.from_problem(prob, i), QueryPolicy(hessians=2)) for i in range(N)]
    sol = federated_solve(prob, LocalChannel(sites, retries=5))
    assert sol.status == "failed" and sol.theta is None and sol.lower_bound == -np.inf
    fault = sol.info["fault"]
    # the sqp route states its plan (up to 98 Hessians) with its first query: refused there, by name,
    # before any Hessian is answered (it was refused mid-solve, at the third Hessian)
    assert (fault["kind"], fault["attempts"]) == ("refused", 1)
    i = fault["partition"]
    assert fault["message"].startswith(f"client {i} refused the '{fault['query']}' query (its policy; not retried)")
    assert f"client{i} refuses the route's plan" in fault["message"] and "allows at most 2 per run" in fault["message"]
    assert all(site.counts.get("hessians", 0) == 0 for site in sites)
    assert sol.info["federated"]["retries"] == 0


def test_a_client_that_allows_no_hessian_declares_it_and_the_server_takes_a_route_it_answers(prob):
    no_hessian = QueryPolicy(allow=("describe", "row_norm", "values", "evaluate"))
    sites = [PolicySite(Site.from_problem(prob, i), no_hessian) for i in range(N)]
    assert "hessian" not in sites[0].answer("describe")["answers"]
    sol = federated_solve(prob, LocalChannel(sites))
    assert sol.status == "optimal" and sol.info["method"] == "level_bundle"
    central = prob.solve()
    assert sol.lower_bound <= central.upper_bound + 1e-9 and central.lower_bound <= sol.upper_bound + 1e-9


def test_a_refusal_over_flower_names_the_partition_and_its_supernode(prob):
    app = with_oracle(ClientApp(), {"oracle": prob}, policy=QueryPolicy(hessians=2))
    with LocalGrid(app, N) as grid:
        sol = solve_on_grid(grid, prob)
        nodes = {c.node_config["partition-id"]: node for node, c in grid.contexts.items()}
    fault = sol.info["fault"]
    assert sol.status == "failed" and fault["kind"] == "refused" and fault["attempts"] == 1
    assert fault["node"] == nodes[fault["partition"]]
    assert f"supernode {fault['node']}" in fault["message"]
