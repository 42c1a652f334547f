"""drflmodel.client_oracle without Flower: the federated implementations of the interface return
what the in-process ClientObjectives returns (the reference: every client's rows in one object),
the ledger counts what crossed, the retry budget holds, and a declared federation has no rows."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import (ClientFault, DeclaredFederation, FederatedObjectives, LocalChannel, Site,
                                     StatisticsObjectives, federated_solve)


def _server(problem, cls=FederatedObjectives, channel=None):
    declared = DeclaredFederation(problem.federation.sizes, problem.federation.dim, problem.federation.task,
                                  n_classes=problem.federation.n_classes if problem.loss.task == "multiclass" else None,
                                  intercept_column=problem.federation.intercept_column)
    template = dm.ClientObjectives(declared, problem.loss, problem.l2, problem.penalize_intercept)
    channel = channel or LocalChannel.from_problem(problem)
    return cls(template, channel), channel


@pytest.mark.parametrize("case", ["logistic", "softmax, free intercept", "huber"])
def test_federated_objectives_equal_the_in_process_ones(case):
    if case == "logistic":
        fed = dm.datasets.synthetic_classification(n_clients=4, dim=4, samples=[20, 30, 25, 40], seed=2)
        prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(4, 0.5), l2=0.05)
    elif case == "huber":
        fed = dm.datasets.synthetic_regression(n_clients=3, dim=4, samples=[20, 30, 25], seed=2)
        prob = dm.FederatedDRO(fed, dm.losses.Huber(1.0), dm.sets.ChiSquare(3, 0.1), l2=0.05)
    else:
        fed = dm.datasets.iris(n_clients=3, seed=1)
        prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), dm.sets.CVaR(3, 0.5), l2=0.05, penalize_intercept=False)
    ref = prob.objectives
    server, _ = _server(prob)
    rng = np.random.default_rng(0)
    theta, V = rng.normal(size=prob.dim), rng.normal(size=(prob.n_clients, prob.dim))
    lam = np.r_[0.0, rng.uniform(0.1, 1.0, prob.n_clients - 1)]             # a zero weight too
    for got, want in ((server.values(theta), ref.values(theta)), (server.gradients(theta), ref.gradients(theta)),
                      (server.weighted_hessian(theta, lam), ref.weighted_hessian(theta, lam)),
                      (server.hessian_vector_products(theta, V), ref.hessian_vector_products(theta, V)),
                      (server.strong_convexity(), ref.strong_convexity()),
                      (server.max_row_norms(), ref.max_row_norms())):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    assert server.layout.to_dict() == ref.layout.to_dict()


def test_statistics_objectives_equal_the_in_process_ones():
    fed = dm.datasets.synthetic_regression(n_clients=4, dim=5, samples=[20, 30, 40, 50], seed=1)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), dm.sets.ChiSquare(4, 0.1), l2=0.1)
    ref = prob.objectives
    server, channel = _server(prob, StatisticsObjectives)
    assert channel.ledger.queries["statistics"]["exchanges"] == 1
    theta, lam = np.random.default_rng(1).normal(size=5), np.array([0.1, 0.0, 0.5, 0.4])
    values, grads, H = server.evaluate(theta, lam)
    v_ref, g_ref, H_ref = ref.evaluate(theta, lam)
    np.testing.assert_allclose(values, v_ref, rtol=1e-12)
    np.testing.assert_allclose(grads, g_ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(H, H_ref, rtol=1e-12)
    np.testing.assert_allclose(server.strong_convexity(), ref.strong_convexity(), rtol=1e-10)
    np.testing.assert_allclose(server.smoothness(), ref.smoothness(), rtol=1e-10)
    for a, b in zip(server.quadratic_forms(), ref.quadratic_forms()):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert set(channel.ledger.queries) == {"statistics"}                  # nothing else was asked


def test_answers_at_a_known_point_are_not_asked_again():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[20, 30, 25], seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(3), l2=0.1)
    server, channel = _server(prob)
    theta = np.full(3, 0.2)
    server.values(theta)
    server.evaluate(theta, np.array([1.0, 0.0, 1.0]))
    server.evaluate(theta, np.array([0.5, 0.0, 0.2]))         # the same clients' Hessians: no exchange
    server.gradients(theta)
    q = channel.ledger.queries
    assert q["values"]["exchanges"] == 1 and q["evaluate"]["exchanges"] == 1
    assert q["evaluate"]["answers"] == 3                       # client 1 (weight 0) sent no Hessian
    table = {r["quantity"]: r for r in channel.ledger.table()}
    assert table["Hessian of h_i (upper triangle)"]["max_answers_per_client"] == 1
    server.prefetch_values(np.stack([theta + k for k in range(4)]))
    server.values(theta + 3)
    assert q["values"]["exchanges"] == 2                       # four points in one exchange


class _Flaky:
    def __init__(self, site, failures):
        self.site, self.failures = site, failures

    def answer(self, query, arrays=None, options=None):
        if query == "values" and self.failures:
            self.failures -= 1
            raise ConnectionError("lost")
        return self.site.answer(query, arrays, options)


def test_the_retry_budget():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[20, 30, 25], seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(3), l2=0.1)
    sites = [Site.from_problem(prob, i) for i in range(3)]
    sites[1] = _Flaky(sites[1], failures=2)
    channel = LocalChannel(sites, retries=2)
    assert set(channel.ask("values", {"theta": np.zeros(3)})) == {0, 1, 2}
    assert channel.ledger.retries == 2
    sites[1].failures = 3
    with pytest.raises(ClientFault, match=r"client 1 did not answer the 'values' query in 3 attempt\(s\): "
                                          r"ConnectionError: lost"):
        channel.ask("values", {"theta": np.zeros(3)})


def test_a_declared_federation_has_no_rows_but_builds_problems():
    declared = DeclaredFederation([30, 10], 3, "classification", intercept_column=0)
    for call in (lambda: declared.clients, declared.pooled, lambda: declared.subset([0])):
        with pytest.raises(dm.InvalidDataError, match="holds no rows"):
            call()
    fafl = dm.FairnessAwareFL(declared, dm.losses.Logistic(), alpha=[0.8, 0.5], penalize_intercept=False)
    np.testing.assert_allclose(fafl.p, [0.75, 0.25])
    assert fafl.objectives.penalty_weights.tolist() == [0.0, 1.0, 1.0]
    with pytest.raises(dm.InvalidParameterError, match="alpha"):
        dm.FairnessAwareFL(declared, dm.losses.Logistic(), alpha=[0.5, 0.1])     # 0.1 < p_2 = 0.25


def test_a_site_checks_what_it_is_given():
    X = np.ones((4, 2))
    with pytest.raises(dm.InvalidDataError, match="binary labels must be -1 or \\+1"):
        Site(X, np.array([0, 1, 0, 1]), dm.losses.Logistic())
    with pytest.raises(dm.InvalidDataError, match="class indices"):
        Site(X, np.array([0, 1, 3, 1]), dm.losses.Multinomial(), n_outputs=3)
    site = Site(X, np.array([1, -1, 1, 1]), dm.losses.Logistic(), name="clinic")
    with pytest.raises(dm.InvalidDataError, match="clinic: theta has 3 entries"):
        site.answer("evaluate", {"theta": np.zeros(3)})
    assert site.answer("describe")["ones_columns"].tolist() == [0.0, 1.0]


def test_federated_solve_over_the_local_channel_is_the_centralized_one():
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60], seed=0)
    prob = dm.FairnessAwareFL(fed, dm.losses.SmoothHinge(), alpha=0.5, l2=0.05)
    central = prob.solve(method="sqp")
    sol = federated_solve(prob, LocalChannel.from_problem(prob))
    assert sol.status == central.status == "optimal" and sol.info["federated"]["transport"] == "LocalChannel"
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-10 and abs(sol.lower_bound - central.lower_bound) <= 1e-10


def test_the_federated_solve_is_the_dispatch_of_the_family_over_what_the_clients_answer():
    """The server's problem is the family's own, built on the declared federation (its objectives
    ask the clients from construction on): no method, objectives or certify_at replaced at run time,
    and the route is the one dispatch chose among those whose needs the clients answer."""
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=[30, 40, 50], seed=1)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.05)
    sol = federated_solve(prob, LocalChannel.from_problem(prob))
    server = sol.problem
    assert type(server) is dm.FederatedDRO and server is not prob
    assert isinstance(server.objectives, FederatedObjectives) and not server.structure.rows_local
    assert {"certify_at", "solve", "routes", "fixed_weight_minimum"}.isdisjoint(vars(server))   # the class's methods
    assert server.federation.channel is not None
    info = sol.info["federated"]
    assert sol.info["method"] == info["method"] == "sqp"
    assert info["queries_needed"] == ["gradients", "hessians", "values"]
    assert "rows" not in info["queries_available"] and {"values", "gradients", "hessians"} <= set(info["queries_available"])
    with pytest.raises(dm.InvalidParameterError, match="method 'conic' needs the clients' rows: a federated server "
                                                       "holds no row.*'sqp', 'level_bundle'"):
        federated_solve(prob, LocalChannel.from_problem(prob), method="conic")


def test_the_client_oracle_patches_nothing_and_switches_on_no_type():
    """An AST scan of drflmodel/client_oracle: no ``type(x) is ...`` switch, no assignment to a
    problem's ``objectives`` or ``certify_at``."""
    import ast
    from pathlib import Path

    found = []
    for path in sorted((Path(dm.__file__).parent / "client_oracle").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) \
                    and getattr(node.left.func, "id", None) == "type" and isinstance(node.ops[0], (ast.Is, ast.Eq)):
                found.append(f"{path.name}:{node.lineno} type(...) is")
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr in ("objectives", "certify_at"):
                        found.append(f"{path.name}:{node.lineno} .{target.attr} =")
    assert not found, found


def test_a_quadratic_loss_is_solved_with_or_without_the_clients_statistics():
    """Squared loss: from the statistics (asked once, no row norm: M = 0 makes them unneeded) and,
    when the clients do not answer statistics, from per-query objectives whose strong-convexity
    modulus is the ridge's (it raised before); both certify the centralized optimum."""
    from drflmodel.problems.engine.queries import EVERY_KIND, ROWS, STATISTICS

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=[6, 9, 7], seed=3)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), dm.sets.Simplex(3), l2=0.1)
    central = prob.solve()
    for kinds, cls in ((None, StatisticsObjectives), (EVERY_KIND - {ROWS, STATISTICS}, FederatedObjectives)):
        channel = LocalChannel.from_problem(prob)
        declared = DeclaredFederation(fed.sizes, fed.dim, fed.task, intercept_column=fed.intercept_column,
                                      channel=channel, kinds=kinds)
        server = dm.FederatedDRO(declared, dm.losses.Squared(), dm.sets.Simplex(3), l2=0.1)
        assert type(server.objectives) is cls
        sol = server.solve()
        assert sol.status == central.status == "optimal"
        assert abs(sol.value - central.value) <= 1e-6 * abs(central.value)
        assert "row_norm" not in channel.ledger.queries
        assert ("statistics" in channel.ledger.queries) == (cls is StatisticsObjectives)
    np.testing.assert_array_equal(server.objectives.strong_convexity(), np.full(3, 0.1))
