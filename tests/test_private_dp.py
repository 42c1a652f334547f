"""Differentially private sums (issue 40 item 4, first cut): the zCDP accounting, and the noised
fixed-weight bound on breast cancer (4 sites) against the CVXPY optimum (an independent route)."""

import math

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle.private import dp_fixed_weight_solve, zcdp_rho
from drflmodel.errors import InvalidParameterError


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (4.0, 1e-6), (8.0, 1e-3)])
def test_zcdp_rho_converts_back_to_epsilon(epsilon, delta):
    rho = zcdp_rho(epsilon, delta)
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(epsilon, rel=1e-12)


@pytest.fixture(scope="module")
def prob():
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    return dm.FederatedDRO(bc, dm.losses.Logistic(), weights=dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0), l2=1.0)


def test_the_noised_bound_contains_the_optimum_and_narrows_with_epsilon(prob):
    ref = prob.solve()
    widths = []
    for eps in (1.0, 8.0):
        r = dp_fixed_weight_solve(prob, eps, seed=3)
        assert r["lower_bound"] <= ref.upper_bound and ref.lower_bound <= r["upper_bound"]
        assert r["sigma_gradient"] == pytest.approx(2 * r["row_norm"] * prob.weights.p.max() / math.sqrt(r["rho"]))
        widths.append(r["raw_width"])
    assert widths[1] < widths[0]
    # with (practically) no noise, at theta = 0 the upper end is F(0) = log 2 (every logistic loss at score 0)
    r = dp_fixed_weight_solve(prob, 1e12)
    assert r["upper_bound"] == pytest.approx(math.log(2), abs=1e-9) and r["lower_bound"] <= ref.lower_bound


def test_refusals_are_named(prob):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        dp_fixed_weight_solve(prob, 0.0)
    with pytest.raises(InvalidParameterError, match="row_norm"):
        dp_fixed_weight_solve(prob, 1.0, row_norm=1.0)
    hinge = dm.FederatedDRO(prob.federation, dm.losses.SmoothHinge(), weights=prob.weights, l2=1.0)
    with pytest.raises(InvalidParameterError, match="logistic"):
        dp_fixed_weight_solve(hinge, 1.0)
    chi = dm.FederatedDRO(prob.federation, dm.losses.Logistic(), weights=dm.sets.ChiSquare(4, 0.5), l2=1.0)
    with pytest.raises(InvalidParameterError, match="HCVaR"):
        dp_fixed_weight_solve(chi, 1.0)
