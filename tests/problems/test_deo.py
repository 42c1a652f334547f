"""Tests of DEOConstrained (spec fair-vfl-deo §3): every answer is checked against an independent
route -- SciPy SLSQP on formulas written here from the raw arrays, multi-start local searches,
closed forms, finite differences -- never against numbers produced by the code under test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.losses import EpsilonInsensitive, Hinge, Logistic, Pinball, Squared
from drflmodel.problems.deo import DEOConstrained
from drflmodel.problems.deo.sdp import QuadraticDEO, build_shor_sdp, dual_function, extract_theta

import cvxpy as cp


# ---------------------------------------------------------------------------------------------
# data built directly (raw arrays kept for the independent formulas)
# ---------------------------------------------------------------------------------------------
def make_data(n=120, dims=(2, 2), seed=0, shift=1.0, intercept=True):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    m = sum(dims)
    X = rng.standard_normal((n, m)) + shift * g[:, None] * np.linspace(1.0, 0.2, m)
    w = rng.standard_normal(m)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) + 0.8 * g > 0, 1.0, -1.0)
    dims = list(dims)
    if intercept:
        X = np.hstack([X, np.ones((n, 1))])
        dims[-1] += 1
    edges = np.cumsum([0] + dims)
    blocks = [X[:, a:b] for a, b in zip(edges[:-1], edges[1:])]
    vf = dm.VerticalFederation(blocks, y, g, active=[0])
    return vf, X, y, g


def logistic_L(theta, X, y, l2):
    return np.mean(np.logaddexp(0.0, -y * (X @ theta))) + 0.5 * l2 * theta @ theta


def logistic_L_grad(theta, X, y, l2):
    s = -y / (1.0 + np.exp(y * (X @ theta)))
    return X.T @ s / len(y) + l2 * theta


def group_masks(y, g):
    return (g == 0) & (y == 1), (g == 1) & (y == 1)


def slsqp(fun, jac, cons, x0, ftol=1e-15):
    return minimize(fun, x0, jac=jac, method="SLSQP", constraints=cons,
                    options={"ftol": ftol, "maxiter": 1000})


# ---------------------------------------------------------------------------------------------
# "linear" (Donini): exact convex problem
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,seed,swap", [(0.01, 0, False), (0.03, 1, False), (0.01, 0, True)])
def test_linear_matches_slsqp_theta_and_multipliers(eps, seed, swap):
    vf, X, y, g = make_data(seed=seed)
    if swap:  # swapping a and b swaps lambda1 and lambda2 (spec §3.6)
        g = 1 - g
        vf = dm.VerticalFederation(vf.blocks, y, g, active=[0])
    l2 = 0.05
    sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="linear", l2=l2).solve()
    Na, Nb = group_masks(y, g)
    d = X[Na].mean(0) - X[Nb].mean(0)
    D = lambda t: -0.5 * d @ t  # noqa: E731
    cons = [{"type": "ineq", "fun": lambda t: eps - D(t), "jac": lambda t: 0.5 * d},   # (5a)
            {"type": "ineq", "fun": lambda t: eps + D(t), "jac": lambda t: -0.5 * d}]  # (5b)
    ref = slsqp(lambda t: logistic_L(t, X, y, l2), lambda t: logistic_L_grad(t, X, y, l2),
                cons, np.zeros(X.shape[1]))
    assert ref.success
    assert sol.status == "optimal"
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-6)
    lam_ref = np.asarray(ref.multipliers, float)
    np.testing.assert_allclose([sol.duals["lambda1"], sol.duals["lambda2"]], lam_ref, atol=1e-6)
    assert max(lam_ref) > 1e-3, "the instance must have an active constraint"
    assert abs(sol.value - ref.fun) <= 1e-9
    assert sol.lower_bound <= sol.upper_bound + 1e-10


def test_linear_complementary_slackness_and_kkt():
    vf, X, y, g = make_data(seed=2)
    for eps in (0.0, 0.005, 0.02, 0.05):
        sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="linear", l2=0.02).solve()
        l1, l2_ = sol.duals["lambda1"], sol.duals["lambda2"]
        Na, Nb = group_masks(y, g)
        D = -0.5 * (X[Na].mean(0) - X[Nb].mean(0)) @ sol.theta
        assert abs(D) <= eps + 1e-9
        assert abs(l1 * (D - eps)) <= 1e-8 and abs(l2_ * (-D - eps)) <= 1e-8
        if eps > 0:
            assert min(l1, l2_) <= 1e-7  # both sides cannot be active
        assert sol.info["kkt"]["stationarity"] <= 1e-6
        assert sol.status == "optimal"


def test_linear_large_eps_inactive_equals_unconstrained():
    vf, X, y, g = make_data(seed=3)
    l2 = 0.03
    sol = DEOConstrained(vf, Logistic(), 100.0, fairness_loss="linear", l2=l2).solve()
    ref = minimize(lambda t: logistic_L(t, X, y, l2), np.zeros(X.shape[1]),
                   jac=lambda t: logistic_L_grad(t, X, y, l2), method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-6)
    assert sol.duals["lambda1"] <= 1e-8 and sol.duals["lambda2"] <= 1e-8
    assert sol.status == "optimal"


def test_linear_donini_convention_is_twice_eps():
    vf, X, y, g = make_data(seed=0)
    a = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="linear", l2=0.05).solve()
    b = DEOConstrained(vf, Logistic(), 0.02, fairness_loss="linear", l2=0.05,
                       tolerance_convention="donini").solve()
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-7)
    np.testing.assert_allclose(b.duals["lambda2_donini"], 0.5 * a.duals["lambda2"], atol=1e-7)
    Na, Nb = group_masks(y, g)
    inner = (X[Na].mean(0) - X[Nb].mean(0)) @ b.theta
    assert abs(inner) <= 0.02 + 1e-9  # Donini's |<theta, u_a - u_b>| <= eps


def test_linear_squared_objective_on_pm1_labels_matches_closed_form():
    """Squared objective + linear constraint: KKT is a linear system (independent route)."""
    vf, X, y, g = make_data(seed=4)
    l2, eps = 0.1, 0.01
    sol = DEOConstrained(vf, Squared(), eps, fairness_loss="linear", l2=l2).solve()
    Na, Nb = group_masks(y, g)
    d = X[Na].mean(0) - X[Nb].mean(0)
    n, m = X.shape
    H = 2 * X.T @ X / n + l2 * np.eye(m)
    rhs = 2 * X.T @ y / n
    # active side: D = -d.t/2 = s*eps with s = sign of the unconstrained D
    t_u = np.linalg.solve(H, rhs)
    s = np.sign(-0.5 * d @ t_u)
    K = np.block([[H, -0.5 * d[:, None]], [-0.5 * d[None, :], np.zeros((1, 1))]])
    sol_kkt = np.linalg.solve(K, np.concatenate([rhs, [s * eps]]))
    np.testing.assert_allclose(sol.theta, sol_kkt[:m], atol=1e-7)
    assert abs(sol.duals["rho"] - sol_kkt[m]) <= 1e-6  # H t - rhs + rho * grad D = 0


def test_hinge_linear_certificate_is_valid():
    vf, X, y, g = make_data(seed=5)
    sol = DEOConstrained(vf, Hinge(), 0.01, fairness_loss="linear", l2=0.05).solve()
    assert sol.status == "optimal" and sol.certificate == "piecewise_linear_dual"
    assert sol.lower_bound <= sol.upper_bound + 1e-9
    Na, Nb = group_masks(y, g)
    assert abs(0.5 * (X[Na].mean(0) - X[Nb].mean(0)) @ sol.theta) <= 0.01 + 1e-9


# piecewise-linear losses written here from their definitions, as affine pieces in the score u
PIECES = {
    "hinge": (Hinge(), lambda y: [(-y, np.ones_like(y)), (0 * y, 0 * y)]),                   # max(0, 1 - y u)
    "pinball": (Pinball(0.3), lambda y: [(-0.3 + 0 * y, 0.3 * y), (0.7 + 0 * y, -0.7 * y)]),  # tau = 0.3, z = u - y
    "epsilon_insensitive": (EpsilonInsensitive(0.1),                                            # max(0, |u - y| - 0.1)
                            lambda y: [(1 + 0 * y, -y - 0.1), (-1 + 0 * y, y - 0.1), (0 * y, 0 * y)]),
}


def piecewise_reference(X, y, g, pieces, l2, eps, c=None):
    """Problem (4) (or P_c) with a piecewise-linear loss as a smooth program for SLSQP, written
    from the raw arrays: epigraph variables t_i >= every piece, s >= |D| - eps for P_c. Returns
    the objective, evaluated exactly, at SLSQP's point pulled back to feasibility."""
    n, m = X.shape
    Na, Nb = group_masks(y, g)
    d = X[Na].mean(0) - X[Nb].mean(0)
    D = lambda t: -0.5 * d @ t                                       # noqa: E731
    slopes, offsets = zip(*pieces(y))

    def loss(t):
        u = X @ t
        return np.mean(np.max([a * u + b for a, b in zip(slopes, offsets)], axis=0)) + 0.5 * l2 * t @ t

    def value(t):
        pen = 0.0 if c is None else max(abs(D(t)) - eps, 0.0) ** 2 / (2 * c)
        return loss(t) + pen

    k = m + n + (c is not None)
    fun = lambda z: np.mean(z[m:m + n]) + 0.5 * l2 * z[:m] @ z[:m] + (0 if c is None else z[-1] ** 2 / (2 * c))  # noqa: E731
    cons = [{"type": "ineq", "fun": (lambda z, a=a, b=b: z[m:m + n] - (a * (X @ z[:m]) + b))} for a, b in zip(slopes, offsets)]
    if c is None:
        cons += [{"type": "ineq", "fun": lambda z: eps - D(z[:m])}, {"type": "ineq", "fun": lambda z: eps + D(z[:m])}]
    else:
        cons += [{"type": "ineq", "fun": lambda z: z[-1] - (D(z[:m]) - eps)},
                 {"type": "ineq", "fun": lambda z: z[-1] - (-D(z[:m]) - eps)}, {"type": "ineq", "fun": lambda z: z[-1]}]
    z0 = np.zeros(k)
    z0[m:m + n] = np.max([b for b in offsets], axis=0) + 1.0
    res = minimize(fun, z0, method="SLSQP", constraints=cons, options={"ftol": 1e-15, "maxiter": 2000})
    t = res.x[:m]
    if c is None and abs(D(t)) > eps:
        t = t * eps / abs(D(t))
    return value(t)


@pytest.mark.parametrize("name", sorted(PIECES))
@pytest.mark.parametrize("eps, c", [(0.0, None), (0.02, None), (0.005, 0.1)])
def test_piecewise_linear_losses_are_certified(name, eps, c):
    """Hinge, pinball and epsilon-insensitive losses: the exact dual bound closes the gap (before:
    relative gaps of 1-80% from the subgradient Lagrangian bound) and lies below the value of an
    independent SLSQP solve of the epigraph form, which the answer matches."""
    vf, X, y, g = make_data(n=60, seed=7)
    loss, pieces = PIECES[name]
    l2 = 1e-3
    sol = DEOConstrained(vf, loss, eps, fairness_loss="linear", l2=l2, penalty_c=c).solve()
    assert sol.status == "optimal", sol.summary()
    assert sol.certificate == "piecewise_linear_dual"
    ref = piecewise_reference(X, y, g, pieces, l2, eps, c)
    assert sol.lower_bound <= ref + 1e-10                      # a valid lower bound
    assert sol.upper_bound <= ref + 1e-7 * max(1.0, abs(ref))   # as good as the independent solve
    if c is None:
        Na, Nb = group_masks(y, g)
        assert abs(0.5 * (X[Na].mean(0) - X[Nb].mean(0)) @ sol.theta) <= eps + 1e-9


def test_hinge_deo_classifier_is_certified_without_warning():
    """The audit's case: DEOClassifier(loss="hinge", eps=0.05, l2=1e-3) on a small random table
    warned (L = 0.13 vs U = 0.75)."""
    import warnings

    from drflmodel.sklearn import DEOClassifier

    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 3))
    y = (X[:, 0] + 0.7 * rng.standard_normal(50) > 0).astype(int)
    s = (X[:, 1] + rng.standard_normal(50) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = DEOClassifier(loss="hinge", eps=0.05, l2=1e-3).fit(X, y, sensitive_features=s)
    assert est.status_ == "optimal" and est.relative_gap_ <= 1e-6


# ---------------------------------------------------------------------------------------------
# P_c (spec §3.4 (c4))
# ---------------------------------------------------------------------------------------------
def test_penalty_c_linear_matches_independent_minimization():
    vf, X, y, g = make_data(seed=0)
    l2, eps, c = 0.05, 0.01, 0.05
    sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="linear", l2=l2, penalty_c=c).solve()
    Na, Nb = group_masks(y, g)
    d = X[Na].mean(0) - X[Nb].mean(0)

    def Pc(t):
        v = max(abs(-0.5 * d @ t) - eps, 0.0)
        return logistic_L(t, X, y, l2) + v * v / (2 * c)

    def Pc_grad(t):
        D = -0.5 * d @ t
        v = max(abs(D) - eps, 0.0)
        return logistic_L_grad(t, X, y, l2) + (np.sign(D) * v / c) * (-0.5 * d)

    ref = minimize(Pc, np.zeros(X.shape[1]), jac=Pc_grad, method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-6)
    D = -0.5 * d @ ref.x
    lam_ref = np.array([max(D - eps, 0), max(-D - eps, 0)]) / c
    np.testing.assert_allclose([sol.duals["lambda1"], sol.duals["lambda2"]], lam_ref, atol=1e-5)
    assert sol.status == "optimal"
    # fixed point: DEO = eps + c * lambda_active (spec N8)
    assert abs(abs(D) - (eps + c * lam_ref.max())) <= 1e-9


def test_penalty_c_tends_to_constrained_solution():
    vf, X, y, g = make_data(seed=0)
    exact = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="linear", l2=0.05).solve()
    errs = []
    for c in (1e-1, 1e-2, 1e-3):
        s = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="linear", l2=0.05, penalty_c=c).solve()
        errs.append(abs(s.duals["rho"] - exact.duals["rho"]))
    assert errs[2] < errs[1] < errs[0]
    assert errs[2] <= 1e-2


# ---------------------------------------------------------------------------------------------
# "squared": Shor SDP, rank one, S-lemma certificate, hard case
# ---------------------------------------------------------------------------------------------
def qcqp_multistart(q_fun, D_fun, m, eps, starts=20, seed=0):
    rng = np.random.default_rng(seed)
    best = np.inf
    cons = [{"type": "ineq", "fun": lambda t: eps - D_fun(t)},
            {"type": "ineq", "fun": lambda t: eps + D_fun(t)}]
    for _ in range(starts):
        r = minimize(q_fun, rng.standard_normal(m), method="SLSQP", constraints=cons,
                     options={"ftol": 1e-14, "maxiter": 500})
        if r.success and abs(D_fun(r.x)) <= eps + 1e-8:
            best = min(best, r.fun)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_squared_sdp_rank_one_matches_multistart_and_certificate(seed):
    vf, X, y, g = make_data(n=100, dims=(2, 2), seed=seed, shift=1.5)
    l2 = 0.02
    Na, Nb = group_masks(y, g)
    n, m = X.shape
    q_fun = lambda t: np.mean((X @ t - y) ** 2) + 0.5 * l2 * t @ t  # noqa: E731
    D_fun = lambda t: np.mean((X[Na] @ t - 1) ** 2) - np.mean((X[Nb] @ t - 1) ** 2)  # noqa: E731
    # eps = 30 % of the unconstrained model's |D|: the constraint is active
    theta_u = np.linalg.solve(X.T @ X / n + 0.5 * l2 * np.eye(m), X.T @ y / n)
    eps = 0.3 * abs(D_fun(theta_u))
    prob = DEOConstrained(vf, Squared(), eps, fairness_loss="squared", l2=l2)
    sol = prob.solve()
    assert sol.status == "optimal"
    assert sol.info["rank_ratio"] <= 1e-6
    best = qcqp_multistart(q_fun, D_fun, m, eps, seed=seed)
    assert abs(sol.value - q_fun(sol.theta)) <= 1e-12
    assert abs(D_fun(sol.theta)) <= eps + 1e-8
    assert abs(sol.value - best) <= 1e-6 * max(1.0, abs(best))
    assert best >= sol.lower_bound - 1e-9  # no local search beats the certified lower bound
    # S-lemma: A0 + rho A is PSD, recomputed from the raw data
    A0 = X.T @ X / n + 0.5 * l2 * np.eye(m)
    A = X[Na].T @ X[Na] / Na.sum() - X[Nb].T @ X[Nb] / Nb.sum()
    assert np.linalg.eigvalsh(A0 + sol.duals["rho"] * A)[0] >= -1e-9
    assert sol.info["s_lemma"]["holds"]
    assert abs(sol.duals["rho"]) > 1e-4, "the instance must have an active constraint"
    # the SDP's fairness-row duals are the QCQP's KKT multipliers: SLSQP from theta* agrees
    cons = [{"type": "ineq", "fun": lambda t: eps - D_fun(t)}, {"type": "ineq", "fun": lambda t: eps + D_fun(t)}]
    ref = minimize(q_fun, sol.theta, method="SLSQP", constraints=cons, options={"ftol": 1e-15, "maxiter": 500})
    np.testing.assert_allclose([sol.duals["lambda1"], sol.duals["lambda2"]], ref.multipliers, atol=1e-5)


def test_same_with_squared_loss_is_the_sdp_case():
    vf, *_ = make_data(n=80, seed=1)
    a = DEOConstrained(vf, Squared(), 0.02, fairness_loss="same", l2=0.02)
    assert a.problem_class == "squared_fair_qcqp"
    b = DEOConstrained(vf, Squared(), 0.02, fairness_loss="squared", l2=0.02)
    np.testing.assert_allclose(a.solve().theta, b.solve().theta, atol=1e-9)


def test_quadratic_data_matches_losses():
    vf, X, y, g = make_data(n=90, seed=3)
    prob = DEOConstrained(vf, Squared(), 0.1, fairness_loss="squared", l2=0.3)
    q = prob.quadratic
    rng = np.random.default_rng(0)
    for _ in range(5):
        t = rng.standard_normal(X.shape[1])
        assert abs(q.q0(t) - prob.loss_value(t)) <= 1e-10
        assert abs(q.D(t) - prob.fairness_gap(t)) <= 1e-10


def test_sdp_polish_near_the_end_of_the_definite_interval():
    """The optimal multiplier within 1e-3 of where A0 + rho A stops being definite (near the hard
    case): the polish must keep its brackets inside the definite interval (before: every bracket
    crossed it, the polish gave up, and an extracted point slightly outside the constraint was
    shrunk towards 0 -- a 2% gap in a random sweep). Checked by the KKT conditions and weak
    duality: the dual function at the polished multiplier equals the objective at the point."""
    rho_star, eps = 0.9995, 0.01
    a = 1.0
    b = (1 - rho_star) * np.sqrt(a * a / (1 + rho_star) ** 2 - eps)       # puts the root at rho_star
    q = QuadraticDEO(A0=np.eye(2), c0=np.array([a, b]), k0=2.0, A=np.diag([1.0, -1.0]), d=np.zeros(2))
    from drflmodel.problems.deo.sdp import definite_interval, polish_active
    assert definite_interval(q) == pytest.approx((-1.0, 1.0))
    out = polish_active(q, 0.99949, eps)
    assert out is not None
    theta, rho = out
    assert rho == pytest.approx(rho_star, abs=1e-9)
    assert q.D(theta) <= eps and q.D(theta) == pytest.approx(eps, abs=1e-12)      # active, feasible side
    M, bb = q.lagrangian_matrix(rho)
    np.testing.assert_allclose(M @ theta, bb, atol=1e-12)                     # stationary
    lb, _, _ = dual_function(q, [rho, 0.0], eps)
    assert lb <= q.q0(theta) + 1e-12 and q.q0(theta) - lb <= 1e-9              # weak duality closes


def test_sdp_hard_case():
    """min |t|^2 - 2c t_1  s.t. |t_1^2 - t_2^2| <= eps with c^2 > 4 eps: the optimal multiplier
    rho = 1 makes A0 + rho A = diag(2, 0) singular (trust-region hard case); the optima are
    (c/2, +-sqrt(c^2/4 - eps)) with value -c^2/2 - eps, so the SDP face is not a singleton."""
    c, eps = 1.0, 0.1
    q = QuadraticDEO(np.eye(2), np.array([c, 0.0]), 0.0, np.diag([1.0, -1.0]), np.zeros(2))
    E = cp.Parameter(nonneg=True, value=eps)
    prob, Y, (ca, cb) = build_shor_sdp(q, E)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    lam = np.array([ca.dual_value, cb.dual_value], float).ravel()
    assert abs(lam[0] - lam[1] - 1.0) <= 1e-5
    theta, info = extract_theta(q, Y.value, lam, eps)
    assert info["method"] == "hard_case"
    assert info["rank_ratio"] > 1e-3
    p_star = -c * c / 2 - eps
    assert abs(q.q0(theta) - p_star) <= 1e-5
    assert abs(abs(q.D(theta)) - eps) <= 1e-6
    assert abs(abs(theta[1]) - np.sqrt(c * c / 4 - eps)) <= 1e-4
    lb, delta, _ = dual_function(q, lam, eps)
    assert lb <= p_star + 1e-12 and lb >= p_star - 1e-4


def test_sdp_hard_case_from_data():
    """A data set realizing the hard case (derivation in the docstring's numbers):
    N_a = {(+-1, 0)}, N_b = {(0, +-1)} (y = +1), four y = -1 rows at (-1, 0); l2 = 0. Then
    A0 = diag(3/4, 1/4), c0 = (1/2, 0), k0 = 1, A = diag(1, -1), d = 0, so A0 + rho A is singular
    at rho = 1/4 where theta_1 = c/(3/4 + 1/4) = 1/2 still has D = 1/4 > eps = 0.1: the optimum is
    theta = (1/2, +-sqrt(0.15)), value 0.725, rho* = 1/4 (two optimal points, rank-2 SDP face)."""
    X = np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [-1, 0], [-1, 0], [-1, 0], [-1, 0]], float)
    y = np.array([1, 1, 1, 1, -1, -1, -1, -1], float)
    g = np.array([0, 0, 1, 1, 0, 1, 0, 1])
    vf = dm.VerticalFederation([X[:, :1], X[:, 1:]], y, g)
    sol = DEOConstrained(vf, Squared(), 0.1, fairness_loss="squared", l2=0.0).solve()
    assert sol.info["extraction"]["method"] == "hard_case"
    assert sol.status == "optimal" and "hard_case" in sol.certificate
    assert sol.value == pytest.approx(0.725, abs=1e-8)
    assert np.mean((X @ sol.theta - y) ** 2) == pytest.approx(0.725, abs=1e-8)
    np.testing.assert_allclose(np.abs(sol.theta), [0.5, np.sqrt(0.15)], atol=1e-6)
    assert sol.duals["rho"] == pytest.approx(0.25, abs=1e-6)
    assert sol.lower_bound <= 0.725 + 1e-12


# ---------------------------------------------------------------------------------------------
# "same" (logistic, the paper's setting): the §3.5 procedure
# ---------------------------------------------------------------------------------------------
def logistic_multistart(X, y, g, l2, eps, starts=8, seed=0):
    Na, Nb = group_masks(y, g)

    def D(t):
        return np.mean(np.logaddexp(0, -X[Na] @ t)) - np.mean(np.logaddexp(0, -X[Nb] @ t))

    cons = [{"type": "ineq", "fun": lambda t: eps - D(t)}, {"type": "ineq", "fun": lambda t: eps + D(t)}]
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(starts):
        r = slsqp(lambda t: logistic_L(t, X, y, l2), lambda t: logistic_L_grad(t, X, y, l2), cons,
                  0.5 * rng.standard_normal(X.shape[1]), ftol=1e-13)
        if abs(D(r.x)) <= eps + 1e-9:
            vals.append(r.fun)
    return min(vals), D


@pytest.mark.parametrize("seed,shift", [(0, 2.0), (2, 3.0)])
def test_same_logistic_bounds_and_status(seed, shift):
    vf, X, y, g = make_data(n=150, dims=(2, 2), seed=seed, shift=shift)
    l2, eps = 2 / 150, 0.01
    sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="same", l2=l2, n_starts=1).solve()
    assert sol.lower_bound <= sol.upper_bound + 1e-10
    best, D = logistic_multistart(X, y, g, l2, eps, seed=seed)
    assert abs(D(sol.theta)) <= eps + 1e-8
    assert abs(sol.value - logistic_L(sol.theta, X, y, l2)) <= 1e-12
    assert best >= sol.lower_bound - 1e-9  # the lower bound is valid
    rho = sol.duals["rho"]
    box = sol.info["convexity_box"]
    if sol.status == "optimal":
        # certified: no multi-start local search beats it
        assert best >= sol.value - 1e-7
        assert sol.certificate in ("lagrangian_convex", "penalty_bound_attained", "unconstrained_feasible")
        assert box[0] - 1e-9 <= rho <= box[1] + 1e-9
    else:
        assert sol.status == "local"
        assert not (box[0] <= rho <= box[1])  # the (c2) certificate did not apply
        assert sol.info["kkt"]["stationarity"] <= 1e-5
        assert sol.info["kkt"]["complementarity"] <= 1e-7
        assert sol.gap > 0
        # a correct local KKT point: SLSQP started there stays and reports the same multipliers
        Na, Nb = group_masks(y, g)
        cons = [{"type": "ineq", "fun": lambda t: eps - D(t)}, {"type": "ineq", "fun": lambda t: eps + D(t)}]
        ref = slsqp(lambda t: logistic_L(t, X, y, l2), lambda t: logistic_L_grad(t, X, y, l2), cons,
                    sol.theta, ftol=1e-14)
        np.testing.assert_allclose(ref.x, sol.theta, atol=1e-5)
        np.testing.assert_allclose([sol.duals["lambda1"], sol.duals["lambda2"]], ref.multipliers, atol=1e-4)
    # the two instances are chosen so that both outcomes are exercised
    assert sol.status == ("local" if seed == 0 else "optimal")


def test_same_logistic_unconstrained_feasible():
    vf, X, y, g = make_data(n=100, seed=1)
    sol = DEOConstrained(vf, Logistic(), 5.0, fairness_loss="same", l2=0.02).solve()
    assert sol.status == "optimal" and sol.certificate == "unconstrained_feasible"
    ref = minimize(lambda t: logistic_L(t, X, y, 0.02), np.zeros(X.shape[1]),
                   jac=lambda t: logistic_L_grad(t, X, y, 0.02), method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_same_logistic_more_instances(seed):
    vf, X, y, g = make_data(n=200, dims=(3, 2), seed=seed, shift=2.5)
    l2 = 0.01
    for eps in (0.005, 0.05):
        sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="same", l2=l2, n_starts=2).solve()
        best, D = logistic_multistart(X, y, g, l2, eps, starts=12, seed=seed)
        assert sol.lower_bound <= sol.upper_bound + 1e-10
        assert best >= sol.lower_bound - 1e-9
        if sol.status == "optimal":
            assert best >= sol.value - 1e-7
        else:
            assert sol.status == "local"


def mirrored_data(n=40, seed=0):
    """Every row twice, once in each group: the two groups' mean losses are equal for every theta
    (D = 0), so the unconstrained minimum is feasible for every eps."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, 3)), np.ones((n, 1))])
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    X2, y2, g2 = np.vstack([X, X]), np.concatenate([y, y]), np.repeat([0, 1], n)
    return dm.VerticalFederation([X2[:, :2], X2[:, 2:]], y2, g2, active=[0]), X2, y2


def test_penalty_c_local_route_with_feasible_unconstrained_minimum_is_optimal():
    """The audit's case: P_c with a non-convex fairness loss (squared, "same", c = 10, eps = 1e-3)
    whose unconstrained minimizer pays no penalty returned L = U with status "local" and
    certificate "none"; the bounds prove optimality. Checked against ridge regression's closed form."""
    vf, X, y = mirrored_data()
    l2 = 0.05
    sol = DEOConstrained(vf, Squared(), 1e-3, fairness_loss="same", l2=l2, penalty_c=10.0).solve()
    assert sol.info["problem_class"] == "penalty_c_nonconvex"
    n, m = X.shape
    theta = np.linalg.solve(2 * X.T @ X / n + l2 * np.eye(m), 2 * X.T @ y / n)   # min mean (u - y)^2 + l2/2 |t|^2
    ref = np.mean((X @ theta - y) ** 2) + 0.5 * l2 * theta @ theta
    assert sol.status == "optimal" and sol.certificate == "unconstrained_minimum"
    assert sol.lower_bound <= ref + 1e-12 and abs(sol.value - ref) <= 1e-9


def test_dc_route_with_hinge_and_feasible_unconstrained_minimum_is_optimal():
    """Hinge with fairness_loss="same" (a DC problem) whose unconstrained minimum is feasible: the
    exact dual bound of the unconstrained problem certifies it (before: "optimal_within_gap" from
    the subgradient bound). Checked against an independent SLSQP solve of the hinge QP."""
    vf, X, y = mirrored_data(n=25, seed=1)
    l2 = 1e-2
    sol = DEOConstrained(vf, Hinge(), 1e-3, fairness_loss="same", l2=l2).solve()
    assert sol.info["problem_class"] == "dc_deo"
    assert sol.status == "optimal", sol.summary()
    ref = piecewise_reference(X, y, np.repeat([0, 1], len(y) // 2), PIECES["hinge"][1], l2, 1e3)
    assert sol.lower_bound <= ref + 1e-10 and sol.upper_bound <= ref + 1e-7


def test_penalty_c_same_is_local_or_certified_with_valid_bound():
    vf, X, y, g = make_data(n=150, dims=(2, 2), seed=0, shift=2.0)
    sol = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="same", l2=2 / 150, penalty_c=0.01,
                         n_starts=1).solve()
    assert sol.status in ("local", "optimal")
    assert sol.lower_bound <= sol.upper_bound + 1e-10
    D = sol.info["D"]
    np.testing.assert_allclose(sol.duals["lambda1"] - sol.duals["lambda2"],
                               np.sign(D) * max(abs(D) - 0.01, 0) / 0.01, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# numpy side: objective, gradients, nu (paper (12)), party views
# ---------------------------------------------------------------------------------------------
def test_objective_infeasible_is_inf_and_violation():
    vf, X, y, g = make_data(seed=0)
    p = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="same", l2=0.1)
    t = np.zeros(X.shape[1])
    assert p.objective(t) == pytest.approx(np.log(2.0))
    t[0] = 5.0
    assert p.constraint_violation(t) > 0.01
    assert p.objective(t) == np.inf
    pc = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="same", l2=0.1, penalty_c=0.1)
    v = pc.constraint_violation(t)
    assert pc.objective(t) == pytest.approx(p.loss_value(t) + v * v / 0.2)


@pytest.mark.parametrize("fl", ["linear", "squared", "same"])
def test_nu_is_derivative_of_lagrangian_in_scores(fl):
    vf, X, y, g = make_data(n=40, seed=1)
    p = DEOConstrained(vf, Logistic(), 0.01, fairness_loss=fl, l2=0.1)
    rng = np.random.default_rng(0)
    t = 0.3 * rng.standard_normal(X.shape[1])
    lam = np.array([0.7, 0.2])
    z = X @ t

    def f_of_z(zz):  # f(theta, lambda) with the scores as free variables (regularizer constant)
        Na, Nb = group_masks(y, g)
        l = np.logaddexp(0, -y * zz)
        if fl == "linear":
            lf = 0.5 * (1 - y * zz)
        elif fl == "squared":
            lf = (zz - y) ** 2
        else:
            lf = l
        D = lf[Na].mean() - lf[Nb].mean()
        return l.mean() + lam[0] * (D - 0.01) - lam[1] * (D + 0.01)

    h = 1e-6
    fd = np.array([(f_of_z(z + h * e) - f_of_z(z - h * e)) / (2 * h) for e in np.eye(len(z))])
    np.testing.assert_allclose(p.nu(z, lam), fd, atol=1e-8)
    # and the theta-gradient by finite differences of the Lagrangian
    fdt = np.array([(p.lagrangian(t + h * e, lam) - p.lagrangian(t - h * e, lam)) / (2 * h)
                    for e in np.eye(len(t))])
    np.testing.assert_allclose(p.lagrangian_gradient(t, lam), fdt, atol=1e-7)


def test_party_views():
    vf, X, y, g = make_data(n=50, dims=(2, 3), seed=2)
    p = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="same", l2=0.1)
    rng = np.random.default_rng(1)
    t = rng.standard_normal(X.shape[1])
    lam = (0.3, 0.0)
    views = [p.client_view(k) for k in range(vf.n_parties)]
    blocks = p.party_blocks(t)
    z = sum(v.partial_scores(b) for v, b in zip(views, blocks))
    np.testing.assert_allclose(z, X @ t, atol=1e-12)
    active, passive = views[0], views[1]
    assert active.is_active and not passive.is_active
    nu = active.nu(z, lam)  # the server sends the same nu to passive parties
    full = p.lagrangian_gradient(t, lam)
    for k, (v, b) in enumerate(zip(views, blocks)):
        np.testing.assert_allclose(v.block_gradient(nu, b), full[vf.block_slices[k]], atol=1e-12)
    np.testing.assert_allclose(active.local_gradient(z, blocks[0], lam), full[vf.block_slices[0]], atol=1e-12)
    new0 = blocks[0] + 0.1
    t2 = t.copy()
    t2[vf.block_slices[0]] = new0
    np.testing.assert_allclose(active.local_scores(z, new0, blocks[0]), X @ t2, atol=1e-12)
    server = p.server_view()
    np.testing.assert_allclose(server.nu(z, lam), nu, atol=0)
    Na, Nb = group_masks(y, g)
    la = np.logaddexp(0, -z)
    D = la[Na].mean() - la[Nb].mean()
    assert server.fairness_gap(z) == pytest.approx(D, abs=1e-13)
    np.testing.assert_allclose(server.dual_gradient(z, lam, c=0.1),
                               [D - 0.01 - 0.1 * lam[0], -D - 0.01 - 0.1 * lam[1]], atol=1e-13)
    with pytest.raises(InvalidParameterError, match="passive"):
        passive.nu(z, lam)
    with pytest.raises(InvalidParameterError):
        p.client_view(vf.n_parties)


def test_metrics_on_solution_and_serialization():
    vf, X, y, g = make_data(seed=0)
    sol = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="linear", l2=0.05).solve()
    m = sol.info["metrics"]
    yhat = np.where(X @ sol.theta >= 0, 1.0, -1.0)
    assert m["accuracy"] == pytest.approx(np.mean(yhat == y))
    Na, Nb = group_masks(y, g)
    tpr = lambda mask: np.mean(yhat[mask] == 1)  # noqa: E731
    assert m["deo_01"] == pytest.approx(abs(tpr(Na) - tpr(Nb)))
    assert m["dfn"] == pytest.approx(m["deo_01"])
    fpr = lambda s: np.mean(yhat[(g == s) & (y == -1)] == 1)  # noqa: E731
    assert m["dfp"] == pytest.approx(abs(fpr(0) - fpr(1)))
    assert m["deo_surrogate"] == pytest.approx(sol.info["DEO"])
    la = np.mean(np.logaddexp(0, -X[Na] @ sol.theta)) - np.mean(np.logaddexp(0, -X[Nb] @ sol.theta))
    assert m["deo_objective_loss"] == pytest.approx(abs(la))
    json.dumps(sol.to_dict())
    assert len(sol.info["theta_blocks"]) == vf.n_parties


def test_sweep_eps_value_function_nonincreasing():
    vf, *_ = make_data(seed=1)
    p = DEOConstrained(vf, Logistic(), 0.001, fairness_loss="linear", l2=0.05)
    sols = p.sweep("eps", [0.001, 0.005, 0.02, 0.1])
    vals = [s.value for s in sols]
    assert all(s.status == "optimal" for s in sols)
    assert all(a >= b - 1e-10 for a, b in zip(vals, vals[1:]))
    assert [s.info["eps"] for s in sols] == [0.001, 0.005, 0.02, 0.1]
    with pytest.raises(InvalidParameterError, match="eps"):
        p.set_parameter("eps", -1.0)
    with pytest.raises(InvalidParameterError):
        p.set_parameter("l2", 1.0)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
def test_bad_inputs():
    vf, X, y, g = make_data(n=60, seed=0)
    with pytest.raises(InvalidParameterError, match="eps"):
        DEOConstrained(vf, Logistic(), -0.1)
    with pytest.raises(InvalidParameterError, match="fairness_loss"):
        DEOConstrained(vf, Logistic(), 0.1, fairness_loss="cubic")
    with pytest.raises(InvalidParameterError, match="penalty_c"):
        DEOConstrained(vf, Logistic(), 0.1, penalty_c=0.0)
    with pytest.raises(InvalidParameterError, match="tolerance_convention"):
        DEOConstrained(vf, Logistic(), 0.1, tolerance_convention="other")
    with pytest.raises(InvalidParameterError, match="donini"):
        DEOConstrained(vf, Logistic(), 0.1, fairness_loss="same", tolerance_convention="donini")
    with pytest.raises(InvalidParameterError, match="l2"):
        DEOConstrained(vf, Logistic(), 0.1, l2=-1.0)
    with pytest.raises(InvalidParameterError, match="loss"):
        DEOConstrained(vf, "logistic", 0.1)
    fed = dm.Federation.from_arrays([X], [y], task="classification")
    with pytest.raises(InvalidDataError, match="VerticalFederation"):
        DEOConstrained(fed, Logistic(), 0.1)
    # a protected group without favourable-label rows
    y_bad = y.copy()
    y_bad[g == 1] = -1.0
    with pytest.raises(InvalidDataError, match="favourable"):
        DEOConstrained(dm.VerticalFederation(vf.blocks, y_bad, g), Logistic(), 0.1)
    # party blocks with mismatched rows
    with pytest.raises(InvalidDataError, match="rows"):
        DEOConstrained(dm.VerticalFederation([vf.blocks[0], vf.blocks[1][:-1]], y, g), Logistic(), 0.1)
    p = DEOConstrained(vf, Logistic(), 0.1)
    with pytest.raises(InvalidDataError, match="theta"):
        p.objective(np.zeros(3))


# ---------------------------------------------------------------------------------------------
# the Adult example (quick mode)
# ---------------------------------------------------------------------------------------------
def test_example_fair_vfl_adult_quick(capsys):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "fair_vfl_adult.py"
    spec = importlib.util.spec_from_file_location("fair_vfl_adult", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(quick=True, verbose=False)
    rows = out["rows"]
    assert out["n_train"] == mod.QUICK_TRAIN and len(rows) == 1 + 2 * len(mod.PAPER_EPS)
    base = rows[0]
    assert base["model"] == "unconstrained" and base["status"] == "optimal"
    for fl in ("linear", "same"):
        sub = [r for r in rows if r["fairness_loss"] == fl and r["model"] != "unconstrained"]
        assert [r["eps"] for r in sub] == list(mod.PAPER_EPS)
        for r in sub:
            assert r["train_deo_surrogate"] <= r["eps"] + 1e-8
            assert r["status"] in ("optimal", "local")
            assert r["relative_gap"] >= -1e-9  # lower bound <= upper bound
            assert r["objective"] >= base["objective"] - 1e-9
            assert 0.0 <= r["test_accuracy"] <= 1.0
        certified = [r for r in sub if r["status"] == "optimal"]
        vals = [r["objective"] for r in certified]
        assert all(a >= b - 1e-9 for a, b in zip(vals, vals[1:]))  # v(eps) is non-increasing
        if fl == "linear":
            assert len(certified) == len(sub)
    # the paper's Table 1 (Adult column) beside ours: every paper row, ours matched by eps
    table = out["table1"]
    assert [t["method"] for t in table] == list(mod.PAPER_TABLE1_ADULT)
    by_method = {t["method"]: t for t in table}
    assert [o["model"] for o in by_method["FedBCD"]["ours"]] == ["unconstrained"]
    assert by_method["FedBCD"]["ours"][0]["acc"] == pytest.approx(100 * base["test_accuracy"])
    assert by_method["FedBCD + EO"]["ours"] == [] and by_method["FedBCD + CEO"]["ours"] == []
    for eps in mod.PAPER_EPS:
        line = by_method[f"FairVFL(eps={eps:g})"]
        mine = {(r["model"], r["test_dfn"]) for r in rows if r["eps"] == eps}
        assert {(o["model"], o["dfn"]) for o in line["ours"]} == mine and len(mine) == 2
    mod.print_table1(table)
    printed = capsys.readouterr().out
    assert "certified optima" in printed and "iterates of its FairVFL algorithm" in printed
    assert "FairVFL(eps=0.001)    81.41%  0.01  0.08" in printed    # the paper's row as printed


# ---------------------------------------------------------------------------------------------
# invariants (hypothesis) and the l2 = 0 fallback
# ---------------------------------------------------------------------------------------------
from hypothesis import assume, given, settings, strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.floats(0.0, 0.2), l2=st.floats(1e-3, 0.5))
def test_linear_invariants(seed, eps, l2):
    try:
        vf, X, y, g = make_data(n=60, dims=(2, 1), seed=seed, shift=1.5)
    except dm.InvalidDataError as exc:
        # a small draw can leave a group without favourable rows (e.g. seed 834): DEO is then
        # undefined and the data is refused with this message -- not an instance to test
        assert "no rows with the favourable label" in str(exc)
        assume(False)
    sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="linear", l2=l2).solve()
    Na, Nb = group_masks(y, g)
    D = -0.5 * (X[Na].mean(0) - X[Nb].mean(0)) @ sol.theta
    assert abs(D) <= eps + 1e-8
    assert sol.lower_bound <= sol.upper_bound + 1e-9
    assert sol.status == "optimal"
    # weak duality from the other side: the Lagrangian at (theta*, lambda*) equals L(theta*)
    assert abs(sol.info["kkt"]["complementarity"]) <= 1e-7
    # theta = 0 is feasible (Fact 0), so the optimum is at most L(0) = log 2
    assert sol.value <= np.log(2.0) + 1e-9


def test_l2_zero_falls_back_and_says_so():
    vf, X, y, g = make_data(n=80, seed=0, shift=2.0)
    sol = DEOConstrained(vf, Logistic(), 0.01, fairness_loss="linear", l2=0.0).solve()
    assert "solver_value" in sol.info["lb_method"]
    assert sol.certificate == "solver"
    Na, Nb = group_masks(y, g)
    assert abs(0.5 * (X[Na].mean(0) - X[Nb].mean(0)) @ sol.theta) <= 0.01 + 1e-8


@pytest.mark.slow
def test_same_logistic_on_synthetic_vertical_is_local_with_valid_bound():
    """The spec §3.5 calibration situation: the KKT multiplier leaves the convexity box, the
    certificate does not close, and the answer is an honest "local" with LB <= UB."""
    vf = dm.datasets.synthetic_vertical(n_samples=300, dim=6, n_parties=3, group_shift=1.0, seed=0)
    X, y, g = vf.X, vf.y, vf.group
    l2, eps = 2 / 300, 0.01
    sol = DEOConstrained(vf, Logistic(), eps, fairness_loss="same", l2=l2, n_starts=2).solve()
    assert sol.status == "local" and sol.certificate == "none"
    box = sol.info["convexity_box"]
    assert not (box[0] <= sol.duals["rho"] <= box[1])
    best, D = logistic_multistart(X, y, g, l2, eps, starts=12)
    assert sol.lower_bound <= best + 1e-9
    assert sol.value <= best + 1e-7  # the local search found the best SLSQP value


@pytest.mark.parametrize("loss,fl,kw", [(Squared(), "squared", {}), (Logistic(), "same", {}),
                                        (Logistic(), "linear", {"penalty_c": 0.1})])
def test_to_dict_is_json_for_every_problem_class(loss, fl, kw):
    vf, *_ = make_data(n=60, seed=4, shift=2.0)
    sol = DEOConstrained(vf, loss, 0.01, fairness_loss=fl, l2=0.05, n_starts=0, **kw).solve()
    d = json.loads(json.dumps(sol.to_dict()))
    assert d["status"] == sol.status and d["info"]["problem_class"] == sol.info["problem_class"]
    assert set(d["duals"]) >= {"lambda1", "lambda2", "rho"}
