"""RelativeFairness with the softmax loss (issue 21 item 7): the formulation extends as written;
what can be certified is checked against independent routes -- phi = 0 is federated DRO, two
classes are the binary logistic problem (w = w_1 - w_0, l2 halved), a convex instance (Nakakita et
al.'s Proposition 10 holds) is certified "optimal" and Scaff-PD-IA converges to it, and where the
condition fails the answer is "local" with a lower bound that no evaluated point beats."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.solvers import ScaffPDIA

N = 4


@pytest.fixture(scope="module")
def fed():
    return dm.datasets.synthetic_multiclass(n_clients=N, dim=3, n_classes=3, samples=[20, 25, 30, 35], seed=1)


def _rf(fed, phi, l2, loss=None):
    S = dm.sets.CVaR(N, 0.5)
    return dm.RelativeFairness(fed, loss or dm.losses.Multinomial(), A=S, B=S, phi=phi, l2=l2)


def test_phi_zero_is_federated_dro(fed):
    rf = _rf(fed, 0.0, 0.1).solve()
    dro = dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.CVaR(N, 0.5), l2=0.1).solve()
    assert rf.status == dro.status == "optimal"
    assert abs(rf.value - dro.value) <= 1e-8 * max(1.0, abs(dro.value))


def test_two_classes_are_the_logistic_problem():
    """K = 2: the softmax loss at the centred (-w/2, w/2) is the logistic loss at w, and the ridge
    l2/2 (|w/2|^2 + |w/2|^2) is (l2/2)/2 |w|^2: the same optimum with l2 halved (a convex,
    certified instance of each)."""
    binary = dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[20, 25, 30, 35],
                                                  heterogeneity=1.0, seed=3)
    multi = dm.Federation([dm.Client(c.X, (c.y > 0).astype(int)) for c in binary.clients],
                          task="multiclass", n_classes=2)
    a = _rf(multi, 0.2, 2.0).solve()
    b = _rf(binary, 0.2, 1.0, loss=dm.losses.Logistic()).solve()
    assert a.status == b.status == "optimal"
    assert abs(a.value - b.value) <= 1e-7 * max(1.0, abs(b.value))
    W = a.theta.reshape(2, -1)
    assert np.allclose(W[1] - W[0], b.theta, atol=1e-4) and np.allclose(W[0], -W[1], atol=1e-8)


def test_convex_instance_is_certified_and_scaffpd_ia_converges_to_it(fed):
    rf = _rf(fed, 0.2, 1.0)
    report = rf.convexity_report()
    assert report.conditions["prop10_convexity"].holds and report.m_f == 1.0
    sol = rf.solve()
    assert sol.status == "optimal" and sol.info["lower_bound_kind"] == "strong_convexity_prop10"
    assert np.min(sol.weights) < 0                        # negative weights at the solution
    tr = ScaffPDIA(rounds=400, schedule="constant", step_size=0.2, dual_step=0.2, local_steps=3).run(rf)
    assert dm.verify(tr, sol, tol=1e-8).passed


def test_without_the_convexity_condition_the_answer_is_local_with_a_valid_bound(fed):
    """l2 = 0.1: Proposition 10 fails (m_f = l2 = 0.1 against M_f = 3.55), nothing certifies
    convexity, so the route says "local"; its lower bound lies below the objective at the answer,
    at Scaff-PD-IA's iterates and at 50 random points."""
    rf = _rf(fed, 0.1, 0.1)
    assert not rf.convexity_report().conditions["prop10_convexity"].holds
    sol = rf.solve()
    assert sol.status == "local" and sol.lower_bound <= sol.upper_bound
    tr = ScaffPDIA(rounds=60, schedule="constant", step_size=0.1, dual_step=0.1, local_steps=3).run(rf)
    rng = np.random.default_rng(0)
    points = list(tr.theta) + [sol.theta + rng.normal(scale=0.5, size=rf.dim) for _ in range(50)]
    assert min(rf.objective(t) for t in points) >= sol.lower_bound
