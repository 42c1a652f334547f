"""The Hessian-free route on a federated server (issue 30 item 6): the clients answer values,
gradients and the bound's per-client means (O(P) floats), never a Hessian; the federated
certificate is the centralized one."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, Site, federated_solve

N_CLIENTS = 4


def _problem(K, penalize_intercept, set_name, rows=400, d=6, seed=0):
    fed = dm.datasets.gaussian_mixture(rows, d, K, n_clients=N_CLIENTS, alpha=1.0, min_size=5, seed=seed)
    loss = dm.losses.Multinomial() if K > 2 else dm.losses.Logistic()
    W = {"chi2": dm.sets.ChiSquare(N_CLIENTS, 0.5), "cvar": dm.sets.CVaR(N_CLIENTS, 0.5),
         "erm": dm.sets.HCVaR(fed.proportions, 1.0)}[set_name]
    return dm.FederatedDRO(fed, loss, W, l2=0.02, penalize_intercept=penalize_intercept)


@pytest.mark.parametrize("K, penalize_intercept, set_name",
                         [(3, False, "chi2"), (2, True, "cvar"), (3, False, "cvar"), (2, False, "erm")])
def test_federated_hessian_free_is_the_centralized_one(K, penalize_intercept, set_name):
    prob = _problem(K, penalize_intercept, set_name)
    central = prob.solve(method="hessian_free")
    sol = federated_solve(prob, LocalChannel.from_problem(prob), method="hessian_free")
    assert sol.status == central.status == "optimal"
    scale = max(1.0, abs(central.upper_bound))
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-8 * scale
    assert abs(sol.lower_bound - central.lower_bound) <= 1e-8 * scale
    info = sol.info["federated"]
    assert info["method"] == "hessian_free"
    assert info["queries_needed"] == ["gradients", "hessian_vector_products", "values"]
    assert 0 < info["largest_answer_floats"] <= 4 * prob.dim
    assert info["checked"] and info["rejections"] == []          # every answer passed the server's checks
    asked = set(info["queries"])
    assert "bound_terms" in asked and "evaluate" in asked and "hvp" not in asked
    assert not any(r["quantity"].startswith("Hessian of h_i (upper") for r in info["reveals"])


def test_auto_on_a_federated_server_takes_it_at_large_p_without_a_hessian_on_the_wire():
    """At HESSIAN_FREE_MIN_DIM parameters the federated auto solve ships no Hessian: no answer is
    larger than 4 P floats (a Hessian triangle would be P (P + 1) / 2; auto takes block_newton)."""
    from drflmodel.problems.minmax.hessian_free import HESSIAN_FREE_MIN_DIM

    prob = _problem(10, False, "chi2", rows=300, d=HESSIAN_FREE_MIN_DIM // 10 - 1, seed=2)
    assert prob.dim == HESSIAN_FREE_MIN_DIM
    sol = federated_solve(prob, LocalChannel.from_problem(prob))
    info = sol.info["federated"]
    assert sol.status == "optimal" and info["method"] == "block_newton"     # value, gradient, 2 products
    assert info["largest_answer_floats"] <= 4 * prob.dim
    assert sol.info["route_choice"]["method"] == "block_newton"
    central = prob.solve()
    assert central.lower_bound <= sol.upper_bound and sol.lower_bound <= central.upper_bound   # one optimum in both


def test_the_bound_terms_are_the_site_s_own_means_and_refused_for_a_non_smooth_loss():
    prob = _problem(3, False, "chi2")
    fed = prob.federation
    site = Site.from_problem(prob, 0)
    theta = np.random.default_rng(0).standard_normal(prob.dim) * 0.1
    got = site.answer("bound_terms", {"theta": theta}, {"intercept_column": fed.intercept_column})
    X, y = fed.clients[0].X, fed.clients[0].y.astype(int)
    S = X @ prob.layout.matrix(theta)
    rows = np.log(np.exp(S).sum(axis=1)) - S[np.arange(len(y)), y]          # softmax loss, independently
    assert got["intercept_value"][0] == pytest.approx(rows.mean(), rel=1e-12)
    assert got["allowance"][2] == pytest.approx(np.mean(np.sum(X * X, axis=1)), rel=1e-12)
    hinge = Site(X, np.where(y == 0, -1.0, 1.0), dm.losses.Hinge())
    with pytest.raises(dm.InvalidParameterError, match="cannot answer 'bound_terms'.*not smooth"):
        hinge.answer("bound_terms", {"theta": np.zeros(X.shape[1])})


def test_a_quadratic_loss_on_a_server_keeps_its_statistics():
    fed = dm.datasets.synthetic_regression(n_clients=N_CLIENTS, dim=5, samples=[20, 30, 40, 50], seed=1)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), dm.sets.ChiSquare(N_CLIENTS, 0.1), l2=0.1)
    with pytest.raises(dm.InvalidParameterError, match="sufficient statistics, asked once"):
        federated_solve(prob, LocalChannel.from_problem(prob), method="hessian_free")


@pytest.mark.parametrize("key, change, check", [
    ("intercept_value", lambda a: 0.5 * a, "same point, same value"),
    ("allowance", lambda a: -a, "bound magnitudes"),
    ("intercept_hessian", lambda a: -a, "Hessian PSD"),
    ("intercept_gradient", lambda a: a + 0.1, "bound gradient"),
])
def test_a_client_lying_in_its_bound_terms_is_rejected_by_name(key, change, check):
    """The server checks every bound_terms answer (against the client's evaluate answer at the same
    point): a lie ends the solve 'failed' naming the client and the check, never 'optimal'."""
    from tests._lying import Lying, edit

    prob = _problem(3, False, "chi2")
    sites = [Site.from_problem(prob, i) for i in range(N_CLIENTS)]
    sites[0] = Lying(sites[0], edit(key, change))
    sol = federated_solve(prob, LocalChannel(sites), method="hessian_free")
    assert sol.status == "failed" and sol.info["fault"]["client"] == 0
    assert sol.info["fault"]["check"] == check
