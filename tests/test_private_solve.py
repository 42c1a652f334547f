"""Private mode's entry point (issue 40): ``private_solve`` picks the route from the weight set,
returns a normal Solution whose ``info["private"]`` says what the server saw, brackets the
in-process CVXPY certificate (an independent route), and refuses the other sets and families by name."""

import json

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import private_solve
from drflmodel.errors import InvalidParameterError


@pytest.fixture(scope="module")
def bc():
    return dm.datasets.breast_cancer(n_clients=4, seed=0)


def _agrees(sol, ref):
    """Both certificates bracket the same optimum: each lower bound is below the other's upper."""
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12
    assert abs(sol.upper_bound - ref.upper_bound) <= sol.gap + ref.gap + 1e-12


def _server_saw(sol, route):
    info = sol.info["private"]
    assert info["route"] == route and sol.info["method"] == f"private_{route}"
    assert info["secure_sums"] == sum(info["sums_by_query"].values()) > 0
    assert sol.weights is None and sol.client_losses is None      # the server never learnt them
    json.dumps(sol.to_dict())
    return info


def test_erm_is_certified_from_sums_and_equals_the_cvxpy_optimum(bc):
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0), l2=0.01)
    sol = private_solve(prob)
    assert sol.status == "optimal" and (sol.upper_bound - sol.lower_bound) <= 1e-6 * sol.upper_bound
    _agrees(sol, prob.solve())
    info = _server_saw(sol, "fixed_weight")
    assert info["weights"] == "size (N only)" and info["total_rows"] == int(bc.sizes.sum())
    assert info["isolating_sums"] == 0
    # the carried quantization error is of the order of n quanta per stage and inside the gap
    assert 0 < info["quantization"]["value"] <= sol.gap


def test_public_weights_take_the_fixed_weight_route(bc):
    p = np.array([0.1, 0.2, 0.3, 0.4])            # not the size proportions: public weights
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(p, 1.0), l2=0.01)
    sol = private_solve(prob)
    assert sol.status == "optimal" and sol.info["private"]["weights"] == "public"
    _agrees(sol, prob.solve())


def test_chi_square_is_certified_from_sums_and_reports_its_isolating_sums(bc):
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.ChiSquare(4, 0.5), l2=0.01)
    with pytest.raises(InvalidParameterError, match="reveal_loss_distribution=True"):
        private_solve(prob)                      # chi-square reveals the loss distribution: opt in
    sol = private_solve(prob, reveal_loss_distribution=True)
    assert sol.status == "optimal"
    _agrees(sol, prob.solve())
    info = _server_saw(sol, "chi_square")
    assert info["isolating_sums"] == 0 and info["min_contributors"] == 2
    assert "unlabeled empirical distribution" in info["server_learns"]


@pytest.mark.parametrize("weights, words", [
    (lambda bc: dm.sets.Simplex(4), ["Simplex", "largest client loss"]),
    (lambda bc: dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), [1.0, 0.5, 0.5, 0.5]), ["HCVaR", "mixing alpha_i = 1"]),
    (lambda bc: dm.sets.QFFL(4, 1.0), ["QFFL", "per-client values"]),
])
def test_other_weight_sets_are_refused_by_name_with_the_reason(bc, weights, words):
    prob = dm.FederatedDRO(bc, dm.losses.Logistic(), weights=weights(bc), l2=0.01)
    with pytest.raises(InvalidParameterError) as err:
        private_solve(prob)
    for word in words:
        assert word in str(err.value)


def _unequal_sites(sizes=(50, 70, 90, 110, 110, 139), seed=0):
    """Breast cancer's 569 rows in sites of unequal sizes (FAFL's caps p_i/alpha unequal)."""
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    X = np.vstack([c.X for c in bc.clients])
    y = np.concatenate([c.y for c in bc.clients])
    parts = np.split(np.random.default_rng(seed).permutation(y.size)[:sum(sizes)], np.cumsum(sizes)[:-1])
    return dm.Federation.from_arrays([X[o] for o in parts], [y[o] for o in parts], task="classification")


def test_fafl_with_unequal_caps_is_certified_privately_and_meets_the_cvxpy_optimum():
    """FAFL (HCVaR caps p_i/alpha, unequal client sizes) on the guarded CVaR route with per-client
    caps: certified to 1e-6 from secure sums, bracketing the in-process CVXPY certificate of the same
    problem (an independent route) -- which the common-cap CVaR(n, alpha) value would not."""
    fed = _unequal_sites()
    for alpha in (0.3, 0.6):
        fafl = dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=alpha, l2=0.01)
        with pytest.raises(InvalidParameterError, match="reveal_loss_distribution=True"):
            private_solve(fafl)                  # it reveals the loss distribution near eta: opt in
        sol = private_solve(fafl, reveal_loss_distribution=True)
        ref = fafl.solve()
        assert sol.status == "optimal" and sol.gap <= 1e-6 * abs(sol.upper_bound)
        _agrees(sol, ref)
        info = _server_saw(sol, "hcvar")
        assert info["weights"].startswith("HCVaR caps") and info["isolating_sums"] == 0
        assert "caps-weighted" in info["server_learns"]
        cvar = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(6, alpha), l2=0.01).solve()
        assert abs(cvar.upper_bound - ref.upper_bound) > 1e3 * (sol.gap + ref.gap)    # the caps matter
    # with min_contributors=3 at alpha 0.3 the two largest caps (0.81 + 0.64) exceed 1: two clients alone
    # above eta could carry the dual's slope, which the guard cannot release -- refused, naming both
    with pytest.raises(InvalidParameterError, match=r"min_contributors=3 needs the 2 largest caps.*0\.814"):
        private_solve(dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.3, l2=0.01),
                      reveal_loss_distribution=True, min_contributors=3)


def test_other_families_and_non_smooth_losses_are_refused_by_name(bc):
    hinge = dm.FederatedDRO(bc, dm.losses.Hinge(), weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    with pytest.raises(InvalidParameterError, match="hinge.*not smooth"):
        private_solve(hinge)


def test_a_hand_built_channel_without_the_caps_is_refused_for_fafl():
    """Plain clients send their CVaR terms at the common cap: on that channel the server would certify
    CVaR(n, max c) instead of FAFL's set, and no sum would show it. The route checks the clients' ratios."""
    from drflmodel.client_oracle.private import SumOnlyChannel, private_clients, route_clients

    fed = _unequal_sites()
    fafl = dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.6, l2=0.01)
    plain = SumOnlyChannel(private_clients(fafl), seed=0)
    with pytest.raises(InvalidParameterError, match=r"channel: its clients must scale their terms by their caps"):
        private_solve(fafl, reveal_loss_distribution=True, channel=plain)
    right = SumOnlyChannel(route_clients(fafl), seed=0)
    sol = private_solve(fafl, reveal_loss_distribution=True, channel=right)
    assert sol.status == "optimal"
