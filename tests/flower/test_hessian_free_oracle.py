"""The Hessian-free route over Flower (issue 30 item 6): on the in-process grid the clients answer
values, gradients and the bound's per-client means -- no answer larger than 4 P floats, no Hessian
-- and the certificate is the centralized Hessian-free one."""

import pytest

import drflmodel as dm
from drflmodel.flower.oracle import certified_solve


def _cases():
    iris = dm.datasets.iris(n_clients=3, seed=0)
    binary = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60],
                                                  heterogeneity=1.0, seed=0)
    return [("CVaR / softmax, free intercept",
             dm.FederatedDRO(iris, dm.losses.Multinomial(), dm.sets.CVaR(3, 0.5), l2=0.01, penalize_intercept=False)),
            ("chi2 / logistic", dm.FederatedDRO(binary, dm.losses.Logistic(), dm.sets.ChiSquare(4, 0.1), l2=0.01))]


@pytest.mark.parametrize("case", range(2), ids=["softmax-cvar", "logistic-chi2"])
def test_hessian_free_on_the_grid_is_the_centralized_one(case):
    label, prob = _cases()[case]
    central = prob.solve(method="hessian_free")
    fed = certified_solve(prob, method="hessian_free")
    assert fed.status == central.status == "optimal", label
    scale = max(1.0, abs(central.upper_bound))
    assert abs(fed.upper_bound - central.upper_bound) <= 1e-8 * scale, label
    assert abs(fed.lower_bound - central.lower_bound) <= 1e-8 * scale, label
    info = fed.info["federated"]
    assert info["method"] == "hessian_free" and info["largest_answer_floats"] <= 4 * prob.dim
    assert "bound_terms" in info["queries"] and "hvp" not in info["queries"]
    assert not any(r["quantity"].startswith("Hessian of h_i (upper") for r in info["reveals"])
