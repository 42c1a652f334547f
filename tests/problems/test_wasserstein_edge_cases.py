"""Wasserstein DRFL at its edges: the conic model's memory estimate (a forced conic solve that
cannot fit is refused by name before anything is allocated), and the Hessian-free route at
:math:`\\theta^\\star=0`, where :math:`\\varepsilon\\|\\theta\\|` is not differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import MemoryLimitError
from drflmodel.problems.wasserstein.problem import CONIC_BYTES_PER_ENTRY, CONIC_BYTES_PER_SQUARE


def _gaussian(n_clients, rows, d, seed=0, squash=False):
    rng = np.random.default_rng(seed)
    clients = []
    for _ in range(n_clients):
        X = rng.standard_normal((rows, d))
        X = 0.9 * np.tanh(X) if squash else X
        y = np.where(X[:, 0] + 0.5 * rng.standard_normal(rows) > 0, 1.0, -1.0)
        clients.append(dm.data.Client(X, y))
    return dm.data.Federation(clients, task="classification")


def test_a_forced_conic_model_at_p_5000_is_refused_by_its_memory_estimate(monkeypatch):
    import drflmodel._memory as memory

    fed = _gaussian(3, 300, 5000)
    prob = dm.WassersteinDRFL(fed, dm.losses.Logistic(), radius=0.1, norm=2, kappa=np.inf,
                              weights=dm.sets.Simplex(3), l2=0.1)
    N, P = 900, 5000
    expected = CONIC_BYTES_PER_ENTRY * N * P + CONIC_BYTES_PER_SQUARE * P * P     # 6.6 GB
    assert prob.structure.conic_bytes == expected
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 2**30)
    with pytest.raises(MemoryLimitError, match=r"route 'conic' .* would allocate about 6\.\d+ GiB but only"):
        prob.solve(method="conic")


def test_the_estimate_counts_a_polyhedral_support():
    fed = _gaussian(3, 20, 4, seed=1, squash=True)        # inside the box [-1, 1]^d
    free = dm.WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.1, norm=1, kappa=1.0, weights=dm.sets.Simplex(3))
    box = dm.WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.1, norm=1, kappa=1.0, weights=dm.sets.Simplex(3),
                             support="box")
    # hinge: 2 pieces, a finite label cost: 2 branches; the box: r = 2 d = 8 constraints
    N, d, r = 60, 4, 8
    assert free.structure.conic_bytes == CONIC_BYTES_PER_ENTRY * N * d + CONIC_BYTES_PER_SQUARE * d * d
    assert box.structure.conic_bytes == (CONIC_BYTES_PER_ENTRY * (N * d + 2 * 2 * N * (d * (r + 1) + r))
                                           + CONIC_BYTES_PER_SQUARE * d * d)


def _independent_value(fed, rho, l2):
    """min_w max_s mean logistic_s(w) + rho_s ||w||_2 + l2/2 ||w||^2 (the Simplex, kappa = inf,
    unbounded support: the DRFL paper's Lipschitz form written directly, Lip = 1)."""
    import cvxpy as cp

    w, t = cp.Variable(fed.clients[0].X.shape[1]), cp.Variable()
    cons = [cp.sum(cp.logistic(-cp.multiply(c.y, c.X @ w))) / c.X.shape[0] + r * cp.norm(w, 2) <= t
            for c, r in zip(fed.clients, rho)]
    prob = cp.Problem(cp.Minimize(t + 0.5 * l2 * cp.sum_squares(w)), cons)
    prob.solve(solver="CLARABEL")
    return prob.value, w.value


@pytest.mark.parametrize("weights", ["simplex", "lpball"])
def test_hessian_free_certifies_that_zero_is_optimal(weights):
    """A radius large enough that no model beats the constant one: theta* = 0, where the norm is not
    differentiable; the route certifies it from the smallest subgradient at 0. (Before, L-BFGS crept
    towards 0 for seconds; at P = 1,500 the forced route did not close and fell back to
    ``trust_region_sqp`` after about 40 s.)"""
    fed = _gaussian(3, 40, 6, seed=3)
    rho = [2.0, 3.0, 2.5]
    W = dm.sets.Simplex(3) if weights == "simplex" else dm.sets.LpBall(np.full(3, 1 / 3), 0.2, 2)
    prob = dm.WassersteinDRFL(fed, dm.losses.Logistic(), radius=rho, norm=2, kappa=np.inf, weights=W, l2=0.05)
    sol = prob.solve(method="hessian_free")
    assert sol.status == "optimal" and sol.info["method"] == "hessian_free" and sol.info.get("zero_optimal") is True
    np.testing.assert_array_equal(sol.theta, 0.0)
    assert sol.upper_bound == pytest.approx(np.log(2.0), rel=1e-12)      # every logistic loss at score 0
    conic = prob.solve(method="conic")                                    # the family's own conic model
    assert conic.lower_bound <= sol.upper_bound + 1e-8 and sol.lower_bound <= conic.upper_bound + 1e-8
    if weights == "simplex":
        value, w = _independent_value(fed, rho, 0.05)
        assert abs(value - sol.value) <= 1e-7 and np.linalg.norm(w) <= 1e-5


def test_hessian_free_away_from_zero_is_unchanged():
    """A small radius: 0 is not optimal, the zero check does not close and the iterations certify."""
    fed = _gaussian(3, 40, 6, seed=3)
    prob = dm.WassersteinDRFL(fed, dm.losses.Logistic(), radius=[0.01, 0.02, 0.015], norm=2, kappa=np.inf,
                              weights=dm.sets.Simplex(3), l2=0.05)
    sol = prob.solve(method="hessian_free")
    value, w = _independent_value(fed, [0.01, 0.02, 0.015], 0.05)
    assert sol.status == "optimal" and not sol.info.get("zero_optimal") and np.linalg.norm(sol.theta) > 0.1
    assert abs(value - sol.value) <= 1e-6 * max(1.0, abs(value))


# ---------------------------------------------------------------- the free intercept's numpy bound
def _with_intercept(task, sizes=(15, 18, 20), seed=1):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=4)
    clients = []
    for n in sizes:
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, 3))])
        t = X @ beta + 0.5 * rng.normal(size=n)
        clients.append(dm.Client(X, np.where(t > 0, 1.0, -1.0) if task == "classification" else t))
    return dm.Federation(clients, task=task)


def _independent_free_intercept(fed, loss_name, radii, kappa, norm, l2, tau=0.3):
    """The free-intercept problem written directly (Simplex weights, unbounded support): w the
    moved columns (ridge, dual norm), b the intercept (neither); Lipschitz constant 1 (logistic,
    hinge) or max(tau, 1 - tau) (pinball); label flips at cost kappa in classification."""
    import cvxpy as cp

    dual = {1: np.inf, 2: 2, np.inf: 1}[norm]
    w, b, gamma = cp.Variable(fed.dim - 1), cp.Variable(), cp.Variable()
    lip = max(tau, 1 - tau) if loss_name == "pinball" else 1.0
    cons = []
    for c, rho in zip(fed.clients, radii):
        lam, alpha = cp.Variable(nonneg=True), cp.Variable(c.size)
        s = c.X[:, 1:] @ w + b
        if loss_name == "pinball":
            r = s - c.y
            cons.append(cp.maximum(tau * -r, (1 - tau) * r) <= alpha)     # l(r) = max(-tau r, (1-tau) r)
        else:
            m = cp.multiply(c.y, s)
            own = cp.logistic(-m) if loss_name == "logistic" else cp.pos(1 - m)
            flip = cp.logistic(m) if loss_name == "logistic" else cp.pos(1 + m)
            cons.append(own <= alpha)
            if np.isfinite(kappa):
                cons.append(flip - kappa * lam <= alpha)
        cons += [lip * cp.norm(w, dual) <= lam, rho * lam + cp.sum(alpha) / c.size <= gamma]
    prob = cp.Problem(cp.Minimize(gamma + 0.5 * l2 * cp.sum_squares(w)), cons)
    prob.solve(solver="CLARABEL")
    return prob.value


CASES = [("logistic", 1.0, 2), ("logistic", np.inf, np.inf), ("hinge", 1.0, 1), ("pinball", np.inf, 2)]


def _free_problem(loss_name, kappa, norm):
    fed = _with_intercept("regression" if loss_name == "pinball" else "classification")
    loss = {"logistic": dm.losses.Logistic(), "hinge": dm.losses.Hinge(), "pinball": dm.losses.Pinball(0.3)}[loss_name]
    return fed, dm.WassersteinDRFL(fed, loss, radius=[0.1, 0.2, 0.05], kappa=kappa, norm=norm,
                                   weights=dm.sets.Simplex(3), l2=0.05, penalize_intercept=False)


@pytest.mark.parametrize("loss_name,kappa,norm", CASES)
def test_the_free_intercept_is_certified_by_the_numpy_bound(loss_name, kappa, norm):
    """The lower bound is the rigorous numpy one (the intercept boxed by R_0), not the solver's dual
    objective, and it brackets an independent CVXPY model's optimum."""
    fed, prob = _free_problem(loss_name, kappa, norm)
    sol = prob.solve()
    ref = _independent_free_intercept(fed, loss_name, [0.1, 0.2, 0.05], kappa, norm, 0.05)
    assert sol.status == "optimal"
    assert sol.info["lower_bound_method"] == "numpy Lagrangian bound (rigorous to rounding)"
    assert np.isfinite(sol.info["rigorous_intercept_radius"])
    assert sol.lower_bound <= ref + 1e-9 * max(1.0, abs(ref)) and abs(sol.upper_bound - ref) <= 1e-6 * max(1.0, ref)


@pytest.mark.parametrize("loss_name,kappa,norm", CASES[:3])
def test_the_free_intercept_bound_holds_at_any_point(loss_name, kappa, norm):
    """At random points and weights of the simplex the numpy bound stays below the independent
    optimum (validity does not depend on the point; tightness does)."""
    from drflmodel.problems.wasserstein.lagrangian_bound import lagrangian_lower_bound

    fed, prob = _free_problem(loss_name, kappa, norm)
    ref = _independent_free_intercept(fed, loss_name, [0.1, 0.2, 0.05], kappa, norm, 0.05)
    rng = np.random.default_rng(5)
    finite = 0
    for _ in range(6):
        w = rng.normal(size=fed.dim)
        w[0] = 3.0 * rng.normal()
        q = rng.dirichlet(np.ones(3))
        L, _ = lagrangian_lower_bound(prob, w, q)
        assert L <= ref + 1e-9 * max(1.0, abs(ref))
        finite += bool(np.isfinite(L))
    assert finite == 6
