"""The KL penalty (the tilted risk) in private mode: ``dm.sets.KLPenalty`` against CVXPY, its private
certificate from secure sums against the in-process CVXPY certificate (an independent route) and the
exact robust objective, the quantization carried into the bound, the guard when one client's term
dominates, and FAFL at a fixed level routed or refused by name."""

import json

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle.private import (KLClient, private_kl_solve, private_route, private_solve,
                                             route_clients)
from drflmodel.errors import InvalidParameterError


@pytest.fixture(scope="module")
def bc():
    return dm.datasets.breast_cancer(n_clients=4, seed=0)


def _kl(fed, tau):
    return dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.KLPenalty(fed.n_clients, tau), l2=0.01)


def test_the_kl_penalty_set_agrees_with_its_cvxpy_model():
    """worst_case (closed form), support_expr (log-sum-exp) and prox (Wright omega) against CVXPY's
    maximization / proximal problem over the simplex with psi_expr (an independent model)."""
    W = dm.sets.KLPenalty(5, 0.3)
    f = np.array([0.2, -1.0, 0.7, 0.69, 3.0])
    value, lam = W.worst_case(f)
    x = cp.Variable(5)
    ref = cp.Problem(cp.Maximize(f @ x - W.psi_expr(x)), W.constraints(x))
    ref.solve(solver="CLARABEL")
    assert value == pytest.approx(ref.value, abs=1e-7) and W.contains(lam)
    assert value == pytest.approx(float(lam @ f) - W.psi(lam), abs=1e-14)
    assert float(W.support_expr(cp.Constant(f)).value) == pytest.approx(value, abs=1e-12)
    assert f.mean() <= value <= f.max() <= value + 0.3 * np.log(5)
    v = np.array([1.0, -2.0, 0.5, 3.0, 0.0])
    for step in (0.01, 1.0, 100.0):
        p = W.prox(v, step)
        obj = lambda y: W.psi(y) + float(np.sum((y - v) ** 2)) / (2 * step)     # noqa: E731
        y = cp.Variable(5)
        cp.Problem(cp.Minimize(W.psi_expr(y) + cp.sum_squares(y - v) / (2 * step)), W.constraints(y)).solve(
            solver="CLARABEL")
        yv = np.maximum(y.value, 0.0) / np.maximum(y.value, 0.0).sum()
        assert W.contains(p, tol=1e-12) and obj(p) <= obj(yv) + 1e-9
    with pytest.raises(InvalidParameterError, match="tau"):
        dm.sets.KLPenalty(3, 0.0)


def test_private_kl_is_certified_from_sums_and_brackets_the_cvxpy_optimum(bc):
    prob = _kl(bc, 0.5)
    sol = private_solve(prob)                     # no opt-in: one symmetric number about the losses per model
    ref = prob.solve()
    assert sol.status == "optimal" and sol.gap <= 1e-6 * sol.upper_bound
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12
    # U is above the exact robust objective at the private model, within the gap
    exact = prob.objective(sol.theta)
    assert exact <= sol.upper_bound <= exact + sol.gap
    info = sol.info["private"]
    assert info["route"] == "kl" and sol.weights is None and sol.client_losses is None
    assert "tilted risk" in info["server_learns"] and info["min_contributors"] == 2
    assert {q.replace(" (holders)", "") for q in info["sums_by_query"]} == {"size", "value_gradient", "kl_terms",
                                                                              "dual_allowances"}
    assert all(isinstance(c, KLClient) for c in route_clients(prob))
    json.dumps(sol.to_dict())


def test_coarse_quantization_is_carried_into_the_bound(bc):
    """One stage (Flower's quantum 3.8e-6, no refinement): the carried error widens the interval,
    which still holds the exact objective at the model and meets the CVXPY certificate."""
    prob = _kl(bc, 0.5)
    fine, coarse = private_kl_solve(prob), private_kl_solve(prob, stages=1, gap_tol=1e-3)
    assert coarse.quantization["sum_error"] > 1e3 * fine.quantization["sum_error"]
    assert coarse.gap > 10 * fine.gap
    ref = prob.solve()
    assert coarse.lower_bound <= ref.upper_bound and ref.lower_bound <= coarse.upper_bound
    assert coarse.lower_bound <= prob.objective(coarse.theta) <= coarse.upper_bound


def test_the_guard_withholds_the_sums_when_one_clients_term_dominates(bc):
    """tau = 0.003: the other clients' exp((f_i - eta)/tau) fall below the sum's floor, so an entry
    would be one client's term; the solve stops and says so. Without the guard it certifies -- from
    sums that are that one client's terms."""
    prob = _kl(bc, 0.003)
    cert = private_kl_solve(prob)
    assert cert.status == "not certified to gap_tol" and "min_contributors=2" in cert.details["reason"]
    assert not np.isfinite(cert.gap)
    assert private_kl_solve(prob, min_contributors=0).status == "optimal"


def _equal_sites(bc, rows=140, seed=0):
    """Breast cancer's rows in 4 sites of equal size (FAFL's caps p_i/alpha equal)."""
    X = np.vstack([c.X for c in bc.clients])
    y = np.concatenate([c.y for c in bc.clients])
    order = np.random.default_rng(seed).permutation(y.size)[:4 * rows].reshape(4, rows)
    return dm.Federation.from_arrays([X[o] for o in order], [y[o] for o in order], task="classification")


def test_fafl_at_a_fixed_level_is_routed_or_refused_by_name(bc):
    fed = _equal_sites(bc)
    level1 = dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=1.0, l2=0.01)
    assert private_route(level1) == ("fixed_weight", "size")
    half = dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.5, l2=0.01)
    route, dro = private_route(half)             # equal sizes, one level: the caps 1/(alpha n) of CVaR(n, alpha)
    assert route == "cvar" and isinstance(dro.weights, dm.sets.CVaR) and dro.weights.alpha == pytest.approx(0.5)
    with pytest.raises(InvalidParameterError, match="reveal_loss_distribution=True"):
        private_solve(half)
    sol = private_solve(half, reveal_loss_distribution=True)
    ref = half.solve()
    assert sol.status == "optimal" and sol.info["private"]["weights"].startswith("CVaR")
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12
    unequal = dm.FairnessAwareFL(bc, dm.losses.Logistic(), alpha=0.5, l2=0.01)
    route, caps = private_route(unequal)         # unequal sizes: per-client caps p_i/alpha
    assert route == "hcvar" and caps == pytest.approx(bc.sizes / bc.sizes.sum() / 0.5, rel=1e-15)
    assert [c.cap_ratio for c in route_clients(unequal)] == pytest.approx(caps / caps.max(), rel=1e-15)
