"""Budgets the server cannot reset and a policy the submitter cannot loosen: the answers are counted
per Flower run id and supernode (what the SuperLink assigns), not per the ``run`` label the server
writes into each message; a site's policy comes from the file its SuperNode's node config names and
the app's code or run config can only make it stricter; a site with fewer than P + 1 rows refuses
per-client gradients by name (the reconstruction attack of benchmarks/reconstruction_attack.py is
refused under the default policy)."""

import json

import numpy as np
import pytest
from flwr.app import Message
from flwr.clientapp import ClientApp

import drflmodel as dm
from drflmodel.client_oracle import PolicySite, QueryPolicy, QueryRefused, Site
from drflmodel.client_oracle.policy import site_policy
from drflmodel.errors import InvalidParameterError
from drflmodel.flower._records import down_content
from drflmodel.flower.grid import LocalGrid
from drflmodel.flower.oracle import message_type, solve_on_grid, with_oracle

N = 2


@pytest.fixture(scope="module")
def prob():
    fed = dm.datasets.breast_cancer(n_clients=N, seed=0)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)


def _ask(grid, node, query, label, theta, options=None):
    """One query to ``node`` under run label ``label``; True if answered."""
    content = down_content({"theta": theta}, {"run": label, "options": json.dumps(options or {})})
    msg = Message(content, node, message_type(query), group_id=label)
    (reply,) = grid.pull_messages(grid.push_messages([msg]))
    return not reply.has_error()


def test_a_thousand_fresh_run_labels_do_not_reset_the_budget(prob):
    """The budget-reset attack of issue 39: every message names a new run. Under the default policy
    (100 Hessians per run) at most 100 of 1,000 Hessian queries are answered."""
    app = with_oracle(ClientApp(), prob)
    theta = np.zeros(prob.dim)
    with LocalGrid(app, N) as grid:
        node = next(iter(grid.contexts))
        answered = sum(_ask(grid, node, "evaluate", f"fresh-{k}", theta, {"hessian": True}) for k in range(1000))
        statistics_like = sum(_ask(grid, node, "row_norm", f"other-{k}", theta) for k in range(10))
    assert answered == QueryPolicy().hessians == 100
    assert statistics_like == QueryPolicy().row_norms == 3


def _policy_file(tmp_path, **fields):
    path = tmp_path / "policy.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_submitted_app_cannot_loosen_the_sites_policy(prob, tmp_path):
    """The site allows 5 Hessians (its node config names its file); the app's code asks for 10,000
    and its run config says so too: 5 are answered, the sixth is refused naming the rule."""
    path = _policy_file(tmp_path, hessians=5, points_per_values=1)
    loose = QueryPolicy(hessians=10_000, points_per_values=5_000)
    app = with_oracle(ClientApp(), prob, policy=lambda context: loose)
    configs = [{"partition-id": i, "num-partitions": N, "query-policy": path} for i in range(N)]
    theta = np.zeros(prob.dim)
    with LocalGrid(app, N, node_configs=configs, run_config={"query-policy": "none", "hessians": 10_000}) as grid:
        node = next(iter(grid.contexts))
        answered = [_ask(grid, node, "evaluate", "oracle", theta, {"hessian": True}) for _ in range(7)]
        many = _ask(grid, node, "values", "oracle", np.zeros(3 * prob.dim))
    assert answered == [True] * 5 + [False] * 2 and not many
    policy = site_policy({"query-policy": path}).stricter(loose)
    assert (policy.hessians, policy.points_per_values) == (5, 1)


def test_the_site_policy_file_is_checked(tmp_path):
    assert site_policy({"partition-id": 0}) is None
    with pytest.raises(InvalidParameterError, match="unknown query-policy field"):
        site_policy({"query-policy": _policy_file(tmp_path, hesians=5)})
    with pytest.raises(InvalidParameterError, match="cannot be read"):
        site_policy({"query-policy": str(tmp_path / "missing.toml")})
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"allow": ["describe", "values"], "min_rows": 50}))
    assert site_policy({"query-policy": str(p)}).to_dict()["min_rows"] == 50


def _small_site(rows=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(rows, d - 1)), np.ones((rows, 1))])
    y = np.where(rng.random(rows) < 0.5, -1.0, 1.0)
    return Site(X, y, dm.losses.Logistic(), name="clinic-6")


def test_a_site_with_fewer_than_p_plus_one_rows_refuses_gradients_by_name():
    """The 6-row logistic client of the reconstruction attack (P = 5 < 6 would pass P + 1 = 6; with
    P = 10 it must refuse): gradients, Hessians, products and statistics refused naming the floor;
    values, describe and the row norm still answered. A site-set min_rows raises the floor."""
    small = _small_site(rows=6, d=10)
    site = PolicySite(small, QueryPolicy())
    theta = np.zeros(10)
    for query, options in [("evaluate", {}), ("evaluate", {"hessian": True}), ("hvp", {}), ("bound_terms", {})]:
        with pytest.raises(QueryRefused, match=r"holds 6 rows, fewer than its policy's floor of 11"):
            site.answer(query, {"theta": theta, "direction": theta}, options)
    assert site.answer("values", {"theta": theta})["value"].shape == (1,)
    enough = PolicySite(_small_site(rows=11, d=10), QueryPolicy())
    assert enough.answer("evaluate", {"theta": theta})["gradient"].shape == (10,)
    with pytest.raises(QueryRefused, match="floor of 50"):
        PolicySite(_small_site(rows=11, d=10), QueryPolicy(min_rows=50)).answer("evaluate", {"theta": theta})
    opted_out = PolicySite(small, QueryPolicy(rows_above_parameters=False))       # explicit: no floor
    assert opted_out.answer("evaluate", {"theta": theta})["gradient"].shape == (10,)


def test_the_reconstruction_attack_is_refused_for_the_six_row_client():
    """benchmarks/reconstruction_attack.py recovers the 6 rows and labels of this client from its
    gradients and values when it answers them (no floor); under the default policy its first
    gradient query is refused by name, so the attack gets nothing."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "reconstruction_attack.py"
    spec = importlib.util.spec_from_file_location("reconstruction_attack", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    X, y, site = bench.make_client(rows=6, features=30, seed=0)
    open_site = PolicySite(site, QueryPolicy(rows_above_parameters=False))      # explicitly no floor
    found = bench.score(bench.attack(open_site, rows=6, features=30, seed=0), X, y)
    assert found["rows_recovered"] == found["labels_recovered"] == 6 and found["max_row_error"] < 1e-8, found
    assert open_site.counts["evaluations"] <= QueryPolicy().evaluations       # within one default budget
    with pytest.raises(QueryRefused, match="holds 6 rows, fewer than its policy's floor of 31"):
        bench.attack(PolicySite(site, QueryPolicy()), rows=6, features=30, seed=0)


def test_a_small_client_ends_the_federated_solve_failed_naming_the_floor(prob):
    """Over Flower, a client below the floor refuses its first gradient query: the solve ends
    "failed" at the start, naming the client, the query and the rule."""
    fed = dm.Federation.from_arrays([prob.federation.clients[0].X, prob.federation.clients[1].X[:12]],
                                    [prob.federation.clients[0].y, prob.federation.clients[1].y[:12]],
                                    task="classification")
    small = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    with LocalGrid(with_oracle(ClientApp(), small), N) as grid:
        sol = solve_on_grid(grid, small)
    fault = sol.info["fault"]
    assert sol.status == "failed" and (fault["partition"], fault["kind"]) == (1, "refused"), fault
    assert "holds 12 rows, fewer than its policy's floor of 32" in fault["message"]


def test_values_at_many_points_fall_back_to_one_point_per_query_under_the_default_policy(prob):
    """Grading every round at the end asks the values at all rounds' models at once; the default
    policy (one point per value query) refuses that by name, and the server then asks one point at a
    time: the values are the clients' own, each within the budget."""
    with LocalGrid(with_oracle(ClientApp(), prob), N) as grid:
        sol = solve_on_grid(grid, prob)
        objectives = sol.problem.objectives
        thetas = np.array([sol.theta, 0.5 * sol.theta, np.zeros(prob.dim)])
        objectives.prefetch_values(thetas)
        assert "at most 1 point(s) per value query" in objectives.prefetch_refused
        got = np.array([objectives.values(t) for t in thetas])
    want = np.array([prob.objectives.values(t) for t in thetas])        # the rows, in this process
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_the_example_apps_policy_does_not_come_from_the_submitted_configuration(tmp_path):
    """Issue 39: the example Flower App derived points_per_values from the submitter's TOML (rounds =
    1,000,000 let a 5,000-point value query through). Now the submitted configuration has no say: the
    query is refused by name, and answered only where the site's own file allows it."""
    from pathlib import Path

    from drflmodel._config import build_problem, load_config
    from drflmodel.flower.deploy import config_client_app

    app_dir = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
    toml = tmp_path / "problem.toml"
    toml.write_text((app_dir / "problem.toml").read_text().replace("rounds = 3", "rounds = 1000000"))
    assert "rounds = 1000000" in toml.read_text()
    P = build_problem(load_config(toml, need_solver=True)).dim
    app = config_client_app(app_dir)
    theta = np.zeros(5000 * P)
    allow = _policy_file(tmp_path, points_per_values=6000)
    for node_config, answered in [({}, False), ({"query-policy": allow}, True)]:
        configs = [{"partition-id": i, "num-partitions": 3, **node_config} for i in range(3)]
        with LocalGrid(app, 3, node_configs=configs, run_config={"problem-config": str(toml)}) as grid:
            node = next(iter(grid.contexts))
            content = down_content({"theta": theta}, {"run": "oracle", "options": "{}"})
            (reply,) = grid.pull_messages(grid.push_messages([Message(content, node, message_type("values"),
                                                                      group_id="g")]))
        assert reply.has_error() != answered
        if not answered:
            assert "refuses a 'values' query at 5000 points" in reply.error.reason
