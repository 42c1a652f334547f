"""Multi-class models (issue 21): the softmax loss on score blocks, the parameter layout, the
vectorized objectives for every K, and the certified oracles -- each checked against an independent
route (finite differences, a hand-written per-sample loop, the binary logistic loss, scikit-learn's
own solver at tight tolerance, a hand-written CVXPY model, scipy's L-BFGS-B)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel import losses as L
from drflmodel.errors import InvalidDataError, InvalidParameterError, NotConvexError
from drflmodel.layout import ParameterLayout
from drflmodel.objectives import ClientObjectives


def _softmax_loss_loop(S, y):
    """Per-sample softmax cross-entropy written directly (independent of losses.py)."""
    out = []
    for s, k in zip(S, y.astype(int)):
        m = max(s)
        out.append(m + np.log(sum(np.exp(v - m) for v in s)) - s[k])
    return np.array(out)


# ------------------------------------------------------------------------------- the loss
def test_multinomial_value_gradient_curvature_against_independent_routes():
    rng = np.random.default_rng(0)
    S = 3 * rng.normal(size=(50, 4))
    y = rng.integers(0, 4, 50).astype(float)
    loss = L.Multinomial()
    np.testing.assert_allclose(loss.block_value(S, y), _softmax_loss_loop(S, y), rtol=1e-12)
    h = 1e-6
    G = loss.block_gradient(S, y)
    for k in range(4):
        E = np.zeros_like(S)
        E[:, k] = h
        fd = (loss.block_value(S + E, y) - loss.block_value(S - E, y)) / (2 * h)
        np.testing.assert_allclose(G[:, k], fd, atol=1e-8)
    C = loss.block_curvature(S, y)
    a, b = loss.block_curvature_factors(S, y)
    np.testing.assert_allclose(C, np.einsum("nk,kl->nkl", a, np.eye(4)) - b[:, :, None] * b[:, None, :], atol=1e-15)
    V = rng.normal(size=S.shape)
    np.testing.assert_allclose(loss.block_hvp(S, y, V), np.einsum("nkl,nl->nk", C, V), atol=1e-14)
    for k in range(4):
        E = np.zeros_like(S)
        E[:, k] = h
        fd = (loss.block_gradient(S + E, y) - loss.block_gradient(S - E, y)) / (2 * h)
        np.testing.assert_allclose(C[:, :, k], fd, atol=1e-8)
    # constants: ||p - e_y|| <= sqrt 2, lambda_max(C) <= 1/2
    assert np.all(np.linalg.norm(G, axis=1) <= loss.lipschitz + 1e-12)
    assert np.linalg.eigvalsh(C).max() <= loss.smoothness + 1e-12


def test_multinomial_self_concordance_constant_bounds_the_third_derivative():
    """|D^3 l[u,u,v]| <= sqrt(2) ||v|| D^2 l[u,u] (the constant the numpy certificate relies on),
    checked by finite differences of the Hessian along v at random points and directions."""
    rng = np.random.default_rng(1)
    loss = L.Multinomial()
    worst = 0.0
    for _ in range(400):
        K = int(rng.integers(2, 6))
        s = 4 * rng.normal(size=(1, K))
        u, v = rng.normal(size=K), rng.normal(size=K)
        y = np.array([0.0])
        h = 1e-5
        d3 = (u @ loss.block_curvature(s + h * v, y)[0] @ u - u @ loss.block_curvature(s - h * v, y)[0] @ u) / (2 * h)
        d2 = u @ loss.block_curvature(s, y)[0] @ u
        if d2 > 1e-8:
            worst = max(worst, abs(d3) / (np.linalg.norm(v) * d2))
    assert worst <= L.Multinomial.self_concordance + 1e-4


def test_two_classes_is_the_binary_logistic_loss_of_the_score_difference():
    rng = np.random.default_rng(2)
    S = 5 * rng.normal(size=(200, 2))
    y = rng.integers(0, 2, 200).astype(float)
    binary = L.Logistic().value(S[:, 1] - S[:, 0], 2 * y - 1)
    np.testing.assert_allclose(L.Multinomial().block_value(S, y), binary, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------------------- the layout
def test_layout_round_trips_and_centring():
    lay = ParameterLayout(5, 3, intercept_column=0, unpenalized=[0])
    rng = np.random.default_rng(3)
    theta = rng.normal(size=15)
    W = lay.matrix(theta)
    assert W.shape == (5, 3) and W[2, 1] == theta[1 * 5 + 2]         # theta[k*d + j] = W[j, k]
    np.testing.assert_array_equal(lay.vector(W), theta)
    c = lay.identifiable(theta)
    assert abs(lay.matrix(c)[0].sum()) < 1e-14                         # intercepts centred
    np.testing.assert_allclose(lay.matrix(c)[1:], W[1:])               # penalized rows untouched
    coef, intercept = lay.to_sklearn(theta)
    assert coef.shape == (3, 4) and intercept.shape == (3,)
    np.testing.assert_allclose(lay.from_sklearn(coef, intercept), c, atol=1e-15)
    with pytest.raises(InvalidDataError, match="coef_ must have shape"):
        lay.from_sklearn(coef.T, intercept)


def test_binary_sklearn_layout_maps_to_the_centred_pair():
    lay = ParameterLayout(3, 2, intercept_column=0, unpenalized=[0])
    theta = lay.from_sklearn(np.array([[1.0, -2.0]]), np.array([0.5]))
    W = lay.matrix(theta)
    np.testing.assert_allclose(W[:, 1] - W[:, 0], [0.5, 1.0, -2.0])
    np.testing.assert_allclose(lay.to_sklearn(theta)[0], [[1.0, -2.0]])


# ------------------------------------------------------------------------------- objectives
def _mc_fed(seed=0, n=3, K=3, d=4, samples=(20, 35, 12)):
    return dm.datasets.synthetic_multiclass(n_clients=n, dim=d, n_classes=K, samples=list(samples), seed=seed)


@pytest.mark.parametrize("penalize_intercept", [True, False])
def test_objectives_match_a_per_sample_loop_and_finite_differences(penalize_intercept):
    fed = _mc_fed()
    obj = ClientObjectives(fed, L.Multinomial(), l2=0.3, penalize_intercept=penalize_intercept)
    K, d = 3, fed.dim
    rng = np.random.default_rng(4)
    theta = rng.normal(size=K * d)
    W = theta.reshape(K, d).T
    omega = np.ones(d)
    if not penalize_intercept:
        omega[0] = 0.0
    expected = [np.mean(_softmax_loss_loop(c.X @ W, c.y)) + 0.15 * np.sum(omega[:, None] * W**2)
                for c in fed.clients]
    np.testing.assert_allclose(obj.values(theta), expected, rtol=1e-12)
    G, H = obj.gradients(theta), obj.hessians(theta)
    h = 1e-6
    for p in range(K * d):
        e = np.zeros(K * d)
        e[p] = h
        np.testing.assert_allclose(G[:, p], (obj.values(theta + e) - obj.values(theta - e)) / (2 * h), atol=1e-7)
        np.testing.assert_allclose(H[:, :, p], (obj.gradients(theta + e) - obj.gradients(theta - e)) / (2 * h),
                                   atol=1e-7)
    lam = np.array([0.2, 0.5, 0.3])
    values, grads, Hw = obj.evaluate(theta, lam)
    np.testing.assert_allclose(values, obj.values(theta), rtol=1e-14)
    np.testing.assert_allclose(grads, G, atol=1e-14)
    np.testing.assert_allclose(Hw, np.einsum("i,ipq->pq", lam, H), atol=1e-13)
    V = rng.normal(size=K * d)
    np.testing.assert_allclose(obj.hessian_vector_products(theta, V), H @ V, atol=1e-13)
    # per-client iterates and the client view
    T = rng.normal(size=(3, K * d))
    np.testing.assert_allclose(obj.values(T), [obj.values(T[i])[i] for i in range(3)], rtol=1e-14)
    np.testing.assert_allclose(obj.gradients(T), [obj.gradients(T[i])[i] for i in range(3)], atol=1e-14)


def test_cvxpy_expressions_equal_the_numpy_values():
    fed = _mc_fed(seed=5)
    obj = ClientObjectives(fed, L.Multinomial(), l2=0.1, penalize_intercept=False)
    theta = np.random.default_rng(5).normal(size=obj.dim)
    var = cp.Variable(obj.dim)
    var.value = theta
    np.testing.assert_allclose([e.value for e in obj.expressions(var)], obj.values(theta), rtol=1e-10)


def test_objective_is_invariant_along_the_layout_invariant_directions():
    fed = _mc_fed(seed=6)
    obj = ClientObjectives(fed, L.Multinomial(), l2=0.2, penalize_intercept=False)
    B = obj.layout.invariant_basis()
    assert B.shape == (obj.dim, 1)
    theta = np.random.default_rng(6).normal(size=obj.dim)
    np.testing.assert_allclose(obj.values(theta + 3.0 * B[:, 0]), obj.values(theta), rtol=1e-12)
    assert np.abs(obj.gradients(theta) @ B).max() < 1e-12


# ------------------------------------------------------------------------------- certified oracles
def _sklearn_objective_reference(X, y, C):
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=C, tol=1e-12, max_iter=100_000).fit(X, y)
    return m


@pytest.mark.parametrize("dataset", ["iris", "penguins"])
def test_one_client_equal_weights_reaches_scikit_learns_objective(dataset):
    """One client, the simplex (= plain ERM), l2 = 1/(C N) and an unpenalized intercept: the certified
    value equals scikit-learn's LogisticRegression objective at its own solution to 1e-8 relative,
    and scikit-learn's point lies in the certified interval's objective range."""
    pytest.importorskip("sklearn")
    fed = dm.datasets.iris() if dataset == "iris" else dm.datasets.penguin_species()
    X, y, _ = fed.pooled()
    N, C = len(y), 0.5
    one = dm.Federation.from_groups(X, y, np.zeros(N), task="multiclass")
    prob = dm.FederatedDRO(one, L.Multinomial(), dm.sets.Simplex(1), l2=1.0 / (C * N), penalize_intercept=False)
    sol = prob.solve()
    assert sol.status == "optimal"
    m = _sklearn_objective_reference(X[:, 1:], y.astype(int), C)
    sk_value = prob.objective(prob.layout.from_sklearn(m.coef_, m.intercept_))
    assert sol.lower_bound <= sk_value + 1e-12 * abs(sk_value)          # L below scikit-learn's value
    assert abs(sol.value - sk_value) <= 1e-8 * abs(sk_value)
    np.testing.assert_allclose(prob.layout.to_sklearn(sol.theta)[1].sum(), 0.0, atol=1e-12)


def test_two_class_softmax_equals_binary_logistic_with_half_the_ridge():
    """K = 2 softmax with l2 = 2c and the binary logistic loss with l2 = c (labels 2y-1) have the same
    optimal value, and theta_logistic = w_1 - w_0 (the usual reparametrization)."""
    fed2 = dm.datasets.synthetic_multiclass(n_clients=3, dim=3, n_classes=2, samples=[30, 40, 25], seed=7)
    fedb = dm.Federation.from_arrays([c.X for c in fed2.clients], [2 * c.y - 1 for c in fed2.clients],
                                     task="classification")
    W = dm.sets.CVaR(3, 0.5)
    soft = dm.FederatedDRO(fed2, L.Multinomial(), W, l2=0.02).solve(method="sqp")
    logi = dm.FederatedDRO(fedb, L.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.01).solve(method="sqp")
    assert soft.status == logi.status == "optimal"
    assert abs(soft.value - logi.value) <= 1e-8 * max(1.0, abs(logi.value))
    Wm = soft.theta.reshape(2, -1)
    np.testing.assert_allclose(Wm[1] - Wm[0], logi.theta, atol=1e-7)


def test_cvar_value_equals_a_hand_written_cvxpy_model():
    """The CVaR DRO of the softmax loss written by hand in its Rockafellar-Uryasev form,
    min_{W, eta} eta + 1/(alpha n) sum_i (f_i(W) - eta)_+, with f_i written from the data
    (log_sum_exp of X_i W minus the label's score), independent of objectives.py and sets.py."""
    fed = _mc_fed(seed=11, n=4, samples=(25, 40, 15, 30))
    K, d, n, alpha, l2 = 3, fed.dim, 4, 0.5, 0.05
    Wv, eta = cp.Variable((d, K)), cp.Variable()
    omega = np.ones(d)
    omega[0] = 0.0
    f = []
    for c in fed.clients:
        Y = np.eye(K)[c.y.astype(int)]
        S = c.X @ Wv
        f.append(cp.sum(cp.log_sum_exp(S, axis=1) - cp.sum(cp.multiply(Y, S), axis=1)) / c.size
                 + 0.5 * l2 * cp.sum_squares(cp.multiply(np.sqrt(omega)[:, None], Wv)))
    ref = cp.Problem(cp.Minimize(eta + cp.sum(cp.pos(cp.hstack(f) - eta)) / (alpha * n)))
    ref.solve(solver="CLARABEL")
    assert ref.status == cp.OPTIMAL
    sol = dm.FederatedDRO(fed, L.Multinomial(), dm.sets.CVaR(n, alpha), l2=l2, penalize_intercept=False).solve()
    assert sol.status == "optimal"
    assert sol.lower_bound <= ref.value + 1e-7 * abs(ref.value)
    assert abs(sol.value - ref.value) <= 1e-7 * abs(ref.value)


@pytest.mark.parametrize("weights", ["chi2", "cvar", "simplex", "ball"])
@pytest.mark.parametrize("penalize_intercept", [True, False])
def test_conic_and_sqp_routes_agree_and_certify(weights, penalize_intercept):
    fed = _mc_fed(seed=8, n=4, samples=(25, 40, 15, 30))
    n = 4
    sets = {"chi2": dm.sets.ChiSquare(n, 0.3), "cvar": dm.sets.CVaR(n, 0.5), "simplex": dm.sets.Simplex(n),
            "ball": dm.sets.LpBall(np.full(n, 1 / n), 0.1, 2)}
    conic = dm.FederatedDRO(fed, L.Multinomial(), sets[weights], l2=0.05,
                            penalize_intercept=penalize_intercept).solve(method="conic")
    sqp = dm.FederatedDRO(fed, L.Multinomial(), sets[weights], l2=0.05,
                          penalize_intercept=penalize_intercept).solve(method="sqp")
    assert conic.status == sqp.status == "optimal"
    assert abs(conic.value - sqp.value) <= 1e-8 * max(1.0, abs(conic.value))
    assert conic.lower_bound <= sqp.upper_bound + 1e-9 and sqp.lower_bound <= conic.upper_bound + 1e-9
    np.testing.assert_allclose(conic.theta, sqp.theta, atol=2e-4)


def test_minmax_value_agrees_with_scipy_on_the_exact_objective():
    """Independent route: minimize the exact robust objective (numpy, Simplex = max of client losses
    via a smooth epigraph is not available, so use CVaR through scipy on the fixed certified weights):
    the certified lower bound equals min_theta sum_i lambda*_i f_i - psi by L-BFGS-B."""
    fed = _mc_fed(seed=9, n=3)
    prob = dm.FederatedDRO(fed, L.Multinomial(), dm.sets.CVaR(3, 0.5), l2=0.1, penalize_intercept=False)
    sol = prob.solve(method="conic")
    lam = sol.weights

    def g(th):
        return float(lam @ prob.objectives.values(th)), lam @ prob.objectives.gradients(th)

    r = minimize(g, np.zeros(prob.dim), jac=True, method="L-BFGS-B",
                 options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 20_000})
    ref = r.fun - float(prob.weights.psi(lam))
    assert sol.lower_bound <= ref + 1e-10
    assert ref - sol.lower_bound <= 1e-7 * max(1.0, abs(ref))


def test_fafl_multiclass_is_certified_on_both_routes():
    fed = _mc_fed(seed=10, n=3)
    conic = dm.FairnessAwareFL(fed, L.Multinomial(), alpha=0.6, l2=0.05, penalize_intercept=False).solve(method="conic")
    sqp = dm.FairnessAwareFL(fed, L.Multinomial(), alpha=0.6, l2=0.05, penalize_intercept=False).solve(method="sqp")
    assert conic.status == sqp.status == "optimal"
    assert abs(conic.value - sqp.value) <= 1e-8 * max(1.0, abs(conic.value))


# ------------------------------------------------------------------------------- bad input
def test_bad_multiclass_input_is_refused_by_name():
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(InvalidDataError, match="at least 2 classes"):
        dm.Federation.from_groups(X, np.zeros(6), np.zeros(6), task="multiclass")
    with pytest.raises(InvalidDataError, match="class 2 has no row"):
        dm.Federation([dm.Client(X, np.array([0, 1, 0, 1, 0, 1.0]))], task="multiclass", n_classes=3)
    with pytest.raises(InvalidDataError, match="hashable"):
        dm.Federation.from_groups(X, [{1}, {2}, {1}, {2}, {1}, {2}], np.zeros(6), task="multiclass")
    with pytest.raises(InvalidDataError, match="ordered"):
        dm.Federation.from_groups(X, [1, "a", 1, "a", 1, "a"], np.zeros(6), task="multiclass")
    with pytest.raises(InvalidDataError, match="class indices"):
        dm.Federation([dm.Client(X, np.array([0, 1, 0.5, 1, 0, 1.0]))], task="multiclass")
    fed = dm.Federation.from_groups(X, [0, 1, 2, 0, 1, 2], [0, 0, 0, 1, 1, 1], task="multiclass")
    with pytest.raises(InvalidParameterError, match="penalize_intercept=False needs an intercept column"):
        dm.FederatedDRO(fed, L.Multinomial(), dm.sets.Simplex(2), penalize_intercept=False)
    with pytest.raises(InvalidParameterError, match="penalize_intercept must be True or False"):
        dm.FederatedDRO(fed, L.Multinomial(), dm.sets.Simplex(2), penalize_intercept="no")
    with pytest.raises(InvalidParameterError, match="multiclass"):
        dm.FederatedDRO(fed, L.Logistic(), dm.sets.Simplex(2))
    with pytest.raises(NotConvexError, match="Multinomial on a bounded support"):
        dm.WassersteinDRFL(fed, L.Multinomial(), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(2),
                           support="box")
    # WassersteinDRFL (tests/problems/test_wasserstein_multiclass.py) and RelativeFairness
    # (tests/problems/test_relative_multiclass.py) accept the softmax loss
    assert dm.WassersteinDRFL(fed, L.Multinomial(), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(2)).dim == 6
    assert dm.RelativeFairness(fed, L.Multinomial(), A=dm.sets.Simplex(2), B=dm.sets.Simplex(2), phi=0.1).dim == 6


def test_client_accuracies_match_a_direct_count():
    fed = _mc_fed(seed=12)
    theta = np.random.default_rng(12).normal(size=fed.dim * 3)
    W = theta.reshape(3, fed.dim).T
    expected = [float(np.mean([np.argmax(x @ W) == k for x, k in zip(c.X, c.y.astype(int))]))
                for c in fed.clients]
    np.testing.assert_allclose(dm.metrics.client_accuracies(fed, theta), expected)
    assert dm.metrics.class_accuracy([0, 1, 2], [0, 2, 2]) == pytest.approx(2 / 3)
    with pytest.raises(InvalidDataError, match="class indices"):
        dm.metrics.class_accuracy([0, 1.5], [0, 1])


def test_unpenalized_intercept_in_relative_fairness_and_refusals_elsewhere():
    """RelativeFairness takes penalize_intercept (phi = 0 is the FederatedDRO problem with the same
    penalty); WassersteinDRFL takes it (the intercept column is then not transported:
    tests/problems/test_wasserstein_multiclass.py); DEO refuses it with the reason."""
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=[20, 30, 25], seed=3)
    fed = dm.Federation.from_arrays([dm.datasets.add_intercept(c.X) for c in fed.clients],
                                    [c.y for c in fed.clients])
    rel = dm.RelativeFairness(fed, L.Squared(), A=dm.sets.CVaR(3, 0.5), B=dm.sets.CVaR(3, 0.5), phi=0.0, l2=0.5,
                              penalize_intercept=False).solve()
    dro = dm.FederatedDRO(fed, L.Squared(), dm.sets.CVaR(3, 0.5), l2=0.5, penalize_intercept=False).solve()
    penalized = dm.FederatedDRO(fed, L.Squared(), dm.sets.CVaR(3, 0.5), l2=0.5).solve()
    assert rel.status == dro.status == "optimal"
    assert rel.value == pytest.approx(dro.value, rel=1e-7)
    assert dro.value < penalized.value - 1e-6           # the free intercept lowers the optimum
    free = dm.WassersteinDRFL(fed, L.Huber(1.0), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(3),
                              penalize_intercept=False)
    assert fed.intercept_column not in free.model.moved
    vfed = dm.datasets.synthetic_vertical(n_samples=60, dim=4, n_parties=2, seed=0)
    with pytest.raises(InvalidParameterError, match="DEOConstrained does not support penalize_intercept=False"):
        dm.DEOConstrained(vfed, L.Logistic(), eps=0.1, penalize_intercept=False)
