"""The problem the landing tests share: five heterogeneous logistic clients of different sizes,
weights N_i / N, ridge 0.1 on every coefficient (each f_i is 0.1-strongly convex)."""

import pytest

import drflmodel as dm

L2 = 0.1


@pytest.fixture(scope="module")
def logistic():
    fed = dm.datasets.synthetic_classification(n_clients=5, dim=5, samples=[30, 60, 90, 45, 75],
                                               heterogeneity=1.5, add_intercept=True, seed=4)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=L2)
    return prob, prob.solve()
