"""The matrix-free route of Wasserstein DRFL (issue 42, item 7: a route that scales past the dense
ones for smooth losses). Independent routes: the conic model (rows in one CVXPY problem) on small
instances; at P = 5,000 the certificate itself (U the exact objective, L the ridge's strong
convexity at fixed weights, both in numpy)."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.losses import Huber, Logistic, SmoothHinge
from drflmodel.problems.wasserstein import WassersteinDRFL
from drflmodel.problems.wasserstein.hessian_free import bound_at

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def gaussian_fed(P, rows, task="classification", seed=0):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=P) / np.sqrt(P)
    clients = []
    for n in rows:
        X = rng.normal(size=(n, P))
        t = X @ beta + 0.5 * rng.normal(size=n)
        clients.append(dm.Client(X, np.where(t > 0, 1.0, -1.0) if task == "classification" else t))
    return dm.Federation(clients, task=task)


def rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


WEIGHTS = {"simplex": lambda: dm.sets.Simplex(3), "ball": lambda: dm.sets.LpBall(np.full(3, 1 / 3), 0.2, 2),
           "fixed": lambda: np.array([0.2, 0.3, 0.5])}


@pytest.mark.parametrize("weights", list(WEIGHTS))
@pytest.mark.parametrize("loss", [Logistic(), SmoothHinge(), Huber(0.5)], ids=lambda l: l.name)
def test_matrix_free_route_agrees_with_the_conic_model(loss, weights):
    fed = gaussian_fed(12, [30, 35, 40], task=loss.task, seed=1)
    prob = WassersteinDRFL(fed, loss, radius=[0.05, 0.1, 0.02], kappa=np.inf, norm=2, weights=WEIGHTS[weights](),
                           l2=0.05)
    a = prob.solve(method="hessian_free")
    b = prob.solve(method="conic")
    assert a.status == b.status == "optimal"
    assert a.info["method"] == "hessian_free"
    assert rel(a.value, b.value) <= 1e-6
    assert a.lower_bound <= b.upper_bound + 1e-12 and b.lower_bound <= a.upper_bound + 1e-8
    assert rel(a.upper_bound, prob.objective(a.theta)) <= 1e-12           # U is the exact objective


def test_the_bound_holds_at_any_point_and_weight():
    """L(w, q) <= p* for every w and every q in Q (the ridge's strong convexity at fixed weights)."""
    fed = gaussian_fed(8, [20, 25, 30], seed=2)
    prob = WassersteinDRFL(fed, Logistic(), radius=0.1, kappa=np.inf, norm=2, weights=dm.sets.Simplex(3), l2=0.1)
    opt = prob.solve(method="conic").upper_bound
    from drflmodel.problems.wasserstein.hessian_free import _ClientTerms

    terms = _ClientTerms(prob)
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.normal(size=prob.dim)
        q = rng.dirichlet(np.ones(3))
        z, G = terms(w)
        assert np.allclose(z, prob.worst_case_losses(w)[0], rtol=1e-12)
        assert bound_at(prob, z, G, w, q) <= opt + 1e-9


@pytest.mark.parametrize("P,rows", [(1000, [120, 150, 130]),
                                    pytest.param(5000, [300, 300, 300], marks=pytest.mark.slow)],  # ~8 s
                         ids=["P1000", "P5000"])
def test_auto_takes_it_from_p_1000_and_certifies(P, rows):
    fed = gaussian_fed(P, rows, seed=0)
    prob = WassersteinDRFL(fed, Logistic(), radius=[0.05, 0.1, 0.02], kappa=np.inf, norm=2,
                           weights=dm.sets.Simplex(3), l2=0.05)
    sol = prob.solve()
    assert sol.info["method"] == "hessian_free" and sol.status == "optimal"
    assert sol.relative_gap <= 1e-6 and prob.dim == P
    assert rel(sol.upper_bound, prob.objective(sol.theta)) <= 1e-12


@pytest.mark.parametrize("kw,why", [
    (dict(kappa=1.0), "finite label cost"),
    (dict(norm=1), "polyhedral"),
    (dict(l2=0.0), "l2 > 0"),
    (dict(loss=dm.losses.Hinge()), "not smooth"),
])
def test_refusals_name_the_reason(kw, why):
    fed = gaussian_fed(5, [10, 12, 14], seed=4)
    args = dict(loss=Logistic(), radius=0.1, kappa=np.inf, norm=2, weights=dm.sets.Simplex(3), l2=0.1)
    args.update(kw)
    prob = WassersteinDRFL(fed, **args)
    with pytest.raises(InvalidParameterError, match=why):
        prob.solve(method="hessian_free")
