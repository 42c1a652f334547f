"""The certified oracle computed on Flower from the clients' own answers (drflmodel.flower.oracle):
against the centralized solve for every supported family, what the clients reveal, and faults.

Every federated solve here runs on the in-process grid (Flower's messages and protobuf
serialization, one ClientApp per supernode answering from its own partition)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import ClientFault, DeclaredFederation, FederatedObjectives, Site
from drflmodel.flower.grid import LocalGrid
from drflmodel.flower.oracle import certified_solve, oracle_client_app, solve_on_grid

N = 4


def _rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.fixture(scope="module")
def binary():
    return dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[30, 40, 50, 60],
                                                heterogeneity=1.0, seed=0)


@pytest.fixture(scope="module")
def regression():
    return dm.datasets.synthetic_regression(n_clients=N, dim=5, samples=[20, 30, 40, 50], seed=1,
                                            heterogeneity=1.0)


def _families(binary, regression):
    """(label, problem, method of the centralized solve that uses the same route)."""
    lg, hinge = dm.losses.Logistic(), dm.losses.Hinge()
    p = binary.proportions
    iris = dm.datasets.iris(n_clients=3, seed=0)
    return [
        ("AFL / logistic", dm.FederatedDRO(binary, lg, dm.sets.Simplex(N), l2=0.01), "sqp"),
        ("CVaR / logistic", dm.FederatedDRO(binary, lg, dm.sets.CVaR(N, 0.5), l2=0.01), "sqp"),
        ("chi2 / logistic", dm.FederatedDRO(binary, lg, dm.sets.ChiSquare(N, 0.1), l2=0.01), "sqp"),
        ("l2 ball / logistic", dm.FederatedDRO(binary, lg, dm.sets.LpBall(p, 0.1, 2), l2=0.01), "sqp"),
        ("HCVaR / logistic", dm.FederatedDRO(binary, lg, dm.sets.HCVaR(p, 0.6), l2=0.01), "sqp"),
        ("q-FFL / logistic", dm.FederatedDRO(binary, lg, dm.sets.QFFL(N, 1.0), l2=0.01), "sqp"),
        ("FAFL / logistic", dm.FairnessAwareFL(binary, lg, alpha=0.5, l2=0.01), "sqp"),
        ("chi2 / squared (statistics)", dm.FederatedDRO(regression, dm.losses.Squared(), dm.sets.ChiSquare(N, 0.1),
                                                        l2=0.1), "sqp"),
        ("CVaR / softmax, free intercept", dm.FederatedDRO(iris, dm.losses.Multinomial(), dm.sets.CVaR(3, 0.5),
                                                           l2=0.01, penalize_intercept=False), "sqp"),
        ("CVaR / hinge (bundle)", dm.FederatedDRO(binary, hinge, dm.sets.CVaR(N, 0.5), l2=0.1), "level_bundle"),
        ("FAFL / pinball (bundle)", dm.FairnessAwareFL(regression, dm.losses.Pinball(0.3), alpha=0.5, l2=0.05),
         "level_bundle"),
    ]


def test_federated_certificate_is_the_centralized_one(binary, regression):
    """Every supported family: the federated solve (in-process Flower grid, the server holding no row)
    certifies the same interval as the centralized solve with the same route (1e-8 relative, both
    bounds), and the interval overlaps the conic route's certified interval."""
    rows = []
    for label, prob, method in _families(binary, regression):
        tol = {"tol": 1e-9} if method == "level_bundle" else {}
        central = prob.solve(method=method, **tol)
        fed = certified_solve(prob, method=method, **tol)     # the same route (auto's is block_newton from P = 5)
        reference = prob.solve(method="conic")
        assert central.status == fed.status == "optimal", label
        assert fed.info["method"] == method, label
        err = max(_rel(fed.lower_bound, central.lower_bound), _rel(fed.upper_bound, central.upper_bound))
        assert err <= 1e-8, (label, err)
        assert fed.lower_bound <= reference.upper_bound + 1e-9 * abs(reference.upper_bound), label
        assert reference.lower_bound <= fed.upper_bound + 1e-9 * abs(fed.upper_bound), label
        assert np.linalg.norm(prob.identifiable(fed.theta) - reference.theta) <= 1e-3, label
        rows.append((label, err, fed.info["federated"]["exchanges"]))
    assert len(rows) == 11


def test_the_server_holds_no_row_and_the_reveal_table_is_exact(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.ChiSquare(N, 0.1), l2=0.01)
    sol = certified_solve(prob)
    server = sol.problem
    assert isinstance(server.federation, DeclaredFederation)
    assert isinstance(server.objectives, FederatedObjectives)
    with pytest.raises(dm.InvalidDataError, match="holds no rows"):
        server.federation.clients
    assert not any(isinstance(v, np.ndarray) and v.ndim == 3 for v in vars(server.objectives).values())
    fed_info = sol.info["federated"]
    table = {r["quantity"]: r for r in fed_info["reveals"]}
    P = prob.dim
    assert table["gradient of h_i"]["floats"] == P
    assert table["Hessian of h_i (upper triangle)"]["floats"] == P * (P + 1) // 2
    assert table["value h_i(theta)"]["floats"] == 1
    assert table["rows N_i"]["exchanges"] == 1
    assert set(table) == {"rows N_i", "features d", "outputs K", "all-one columns", "value h_i(theta)",
                          "gradient of h_i", "Hessian of h_i (upper triangle)", "max_j ||x_ij||"}
    queries = fed_info["queries"]
    assert fed_info["exchanges"] == sum(q["exchanges"] for q in queries.values())
    assert fed_info["retries"] == 0
    # each client answers each exchange once: answers = clients x exchanges
    assert all(q["answers"] <= N * q["exchanges"] for q in queries.values())


def test_squared_loss_reveals_only_its_statistics_once(regression):
    prob = dm.FederatedDRO(regression, dm.losses.Squared(), dm.sets.CVaR(N, 0.5), l2=0.1)
    sol = certified_solve(prob)
    assert sol.status == "optimal"
    q = sol.info["federated"]["queries"]
    assert set(q) == {"describe", "statistics"} and q["statistics"]["exchanges"] == 1
    d = regression.dim
    floats = {r["quantity"]: r["floats"] for r in sol.info["federated"]["reveals"]}
    assert floats["X_i'X_i (upper triangle)"] == d * (d + 1) // 2 and floats["X_i'y_i"] == d


# ------------------------------------------------------------------------------------ faults
class _Flaky:
    """A Site that fails on chosen calls of a query (counted from 1)."""

    def __init__(self, site, query, fail_on):
        self.site, self.query, self.fail_on, self.calls = site, query, set(fail_on), 0

    def answer(self, query, arrays=None, options=None):
        if query == self.query:
            self.calls += 1
            if self.calls in self.fail_on or "always" in self.fail_on:
                raise RuntimeError(f"injected failure on call {self.calls}")
        return self.site.answer(query, arrays, options)


def _flaky_solve(prob, client, query, fail_on, grid_cls=LocalGrid, **options):
    sites = [Site.from_problem(prob, i) for i in range(prob.n_clients)]
    sites[client] = _Flaky(sites[client], query, fail_on)

    def site_of(context):
        return sites[int(context.node_config["partition-id"])]

    app = oracle_client_app(lambda context: _AsSite(site_of(context)))
    with grid_cls(app, prob.n_clients) as grid:
        return solve_on_grid(grid, prob, **options)


class _AsSite(Site):
    """Wrap any object with ``answer`` as a Site (the handlers accept Site instances)."""

    def __init__(self, inner):
        self.inner = inner

    def answer(self, query, arrays=None, options=None):
        return self.inner.answer(query, arrays, options)


def test_a_transient_failure_is_retried_and_changes_nothing(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    clean = certified_solve(prob)
    flaky = _flaky_solve(prob, 2, "evaluate", {2})
    assert flaky.status == "optimal" and flaky.info["federated"]["retries"] == 1
    assert flaky.lower_bound == clean.lower_bound and flaky.upper_bound == clean.upper_bound


def test_a_client_failing_every_attempt_ends_failed_never_optimal(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    sol = _flaky_solve(prob, 1, "evaluate", {"always"}, retries=3)
    assert sol.status == "failed"
    assert sol.info["federated"]["fault"]["client"] == 1
    assert sol.info["federated"]["fault"]["attempts"] == 4          # 1 + the budget of 3 retries
    assert "no certificate over every client" in sol.info["fault"]["message"]


def test_a_fault_after_a_full_certificate_returns_that_certificate(binary):
    """The client fails after the first certificate was computed over every client: that
    certificate is returned, labelled with the fault (its bounds are valid: they bracket the
    centralized optimum)."""
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.ChiSquare(N, 0.1), l2=0.01)
    clean = certified_solve(prob, tol=1e-15, max_steps=8)
    n_eval = clean.info["federated"]["queries"]["evaluate"]["exchanges"]
    sol = _flaky_solve(prob, 0, "evaluate", set(range(n_eval, 100)),
                       retries=1, tol=1e-15, max_steps=8)
    assert sol.info["federated"]["fault"] is not None and "before the fault" in sol.info["fault"]["message"]
    assert np.isfinite(sol.lower_bound) and np.isfinite(sol.upper_bound)
    central = prob.solve()
    assert sol.lower_bound <= central.upper_bound + 1e-12 and central.lower_bound <= sol.upper_bound + 1e-12


class _DroppingGrid(LocalGrid):
    """A grid on which one node never answers after its first ``keep`` replies (messages lost)."""

    drop_partition, keep = 3, 2

    def push_messages(self, messages):
        ids = list(super().push_messages(messages))
        for mid in ids:
            reply = self._replies[mid]
            node = reply.metadata.src_node_id
            if self.contexts[node].node_config["partition-id"] == self.drop_partition:
                self.keep -= 1
                if self.keep < 0:
                    del self._replies[mid]
        return ids


def test_a_client_that_stops_answering_times_out_and_the_solve_fails(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    capp = oracle_client_app({"oracle": prob})
    with _DroppingGrid(capp, N) as grid:
        sol = solve_on_grid(grid, prob, timeout=0.05, retries=2)   # the lost replies never come
    assert sol.status == "failed"
    fault = sol.info["federated"]["fault"]
    assert fault["client"] == 3 and fault["attempts"] == 3
    assert all("no reply within" in r for r in fault["reasons"])
    assert fault["kind"] == "no answer" and sol.info["fault"] == fault and fault["partition"] == 3


def test_a_client_disconnecting_mid_solve_fails_the_solve(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)

    class Leaving(LocalGrid):
        pushes = 0

        def push_messages(self, messages):
            self.pushes += 1
            if self.pushes == 4:                                  # after setup and two queries
                node = next(n for n, c in self.contexts.items() if c.node_config["partition-id"] == 2)
                del self.contexts[node]
            return super().push_messages(messages)

    with Leaving(oracle_client_app({"oracle": prob}), N) as grid:
        sol = solve_on_grid(grid, prob)
    assert sol.status == "failed" and sol.info["federated"]["fault"]["client"] == 2


# ------------------------------------------------------------------------------------ bad input
def test_mismatched_dimensions_are_refused_before_any_round(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    sites = [Site.from_problem(prob, i) for i in range(N)]
    c = binary.clients[1]
    sites[1] = Site(np.hstack([c.X, np.ones((c.size, 1))]), c.y, dm.losses.Logistic())
    app = oracle_client_app(lambda ctx: sites[int(ctx.node_config["partition-id"])])
    with LocalGrid(app, N) as grid, pytest.raises(dm.InvalidDataError, match="different numbers of features"):
        solve_on_grid(grid, prob)


def test_a_non_smooth_client_cannot_answer_hessians(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Hinge(), dm.sets.CVaR(N, 0.5), l2=0.1)
    with pytest.raises(dm.InvalidParameterError, match=r"client 0 cannot answer 'hessian'.*bundle"):
        certified_solve(prob, method="sqp")


def test_a_client_with_another_loss_is_named(binary):
    prob = dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5), l2=0.01)
    sites = [Site.from_problem(prob, i) for i in range(N)]
    c = binary.clients[2]
    sites[2] = Site(c.X, c.y, dm.losses.SmoothHinge(), name="clinic-2")
    app = oracle_client_app(lambda ctx: sites[int(ctx.node_config["partition-id"])])
    with LocalGrid(app, N) as grid:          # a client failing the setup ends the solve "failed", named
        sol = solve_on_grid(grid, prob)
    fault = sol.info["fault"]
    assert sol.status == "failed" and sol.theta is None and sol.problem is None
    # its error reply names no partition: the fault names its supernode (the partition is not guessed)
    assert (fault["partition"], fault["query"]) == (None, "describe") and isinstance(fault["node"], int)
    assert f"supernode {fault['node']} (partition unknown)" in fault["message"]
    assert "clinic-2 computes the loss" in fault["message"]


def test_unknown_query_and_unsupported_families_are_refused(binary, regression):
    site = Site.from_problem(dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.CVaR(N, 0.5)), 0)
    with pytest.raises(dm.InvalidParameterError, match="unknown query 'moments'"):
        site.answer("moments")
    with pytest.raises(dm.InvalidParameterError, match="cannot answer 'statistics'"):
        site.answer("statistics")
    free = dm.FederatedDRO(binary, dm.losses.Hinge(), dm.sets.CVaR(N, 0.5), l2=0.0)
    with pytest.raises(dm.InvalidParameterError, match="every coordinate penalized"):
        certified_solve(free)


def test_client_fault_names_client_query_and_attempts():
    fault = ClientFault(3, "evaluate", ["a", "b"])
    assert fault.attempts == 2 and "client 3" in str(fault) and "'evaluate'" in str(fault)


def test_wasserstein_runs_its_own_oracle_over_flower():
    """WassersteinDRFL through certified_solve (in-process grid): client_oracle.federated_solve
    delegates to problems.wasserstein.federated, each supernode answers the three Wasserstein
    queries from its partition through the Flower messages; the answer is the one over LocalChannel
    (same floats) and the centralized certified optimum."""
    from drflmodel.client_oracle import LocalChannel, federated_solve

    from ..problems.test_wasserstein_multiclass import small_multiclass

    fed = small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=1)
    prob = dm.WassersteinDRFL(fed, dm.losses.Multinomial(), radius=[0.1, 0.2, 0.05], kappa=1.0, norm=np.inf,
                              weights=dm.sets.LpBall(np.full(3, 1 / 3), 0.2, 2), l2=0.05, penalize_intercept=False)
    ref = prob.solve()
    sol = certified_solve(prob, rounds=300, check_every=20)
    local = federated_solve(prob, LocalChannel.from_problem(prob), rounds=300, check_every=20)
    assert sol.status == "optimal" and sol.info["federated"]["transport"] == "flower"
    np.testing.assert_array_equal(sol.theta, local.theta)
    assert (sol.lower_bound, sol.upper_bound) == (local.lower_bound, local.upper_bound)
    assert sol.lower_bound <= ref.upper_bound + 1e-8 and ref.lower_bound <= sol.upper_bound + 1e-8
    assert _rel(sol.value, ref.value) <= 2e-6
    assert {"wasserstein_prox", "wasserstein_value", "wasserstein_bound"} <= set(sol.info["federated"]["queries"])
