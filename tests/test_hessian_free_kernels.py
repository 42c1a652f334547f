"""The Hessian-free route's row kernels (drflmodel/matrix_free.py): the softmax and logistic rows
against SciPy's formulas, the one-client weighted gradient against the dense objectives, and the
route's certified answers against the dense ``sqp`` route on random instances (binary and
softmax, float32 and float64 rows)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, log_expit, logsumexp, softmax

import drflmodel as dm
from drflmodel import matrix_free as mfm
from drflmodel.matrix_free import MatrixFreeObjectives
from drflmodel.objectives import ClientObjectives


@pytest.mark.parametrize("K", [2, 10, mfm.COLUMNWISE_MAX_CLASSES + 8])     # both ways of the row maximum
def test_softmax_rows_are_scipy_s_log_sum_exp_and_softmax(K):
    rng = np.random.default_rng(K)
    S = 40.0 * rng.standard_normal((500, K))
    S[:7] = 800.0                                          # ties and scores a naive exp overflows
    S[7:9, 0] = -900.0
    labels = rng.integers(0, K, 500)
    positions = np.arange(500) * K + labels
    with np.errstate(over="raise"):
        values, G, P = mfm._softmax_rows(S, positions)
    np.testing.assert_allclose(values, logsumexp(S, axis=1) - S[np.arange(500), labels], rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(P, softmax(S, axis=1), rtol=1e-13, atol=1e-300)
    onehot = np.eye(K)[labels]
    np.testing.assert_allclose(G, softmax(S, axis=1) - onehot, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(mfm._row_max(S), S.max(axis=1))


def test_logistic_rows_and_their_lazy_curvature_are_scipy_s():
    rng = np.random.default_rng(3)
    s = np.concatenate([30.0 * rng.standard_normal(400), [0.0, 800.0, -800.0]])
    y = np.where(rng.random(s.size) < 0.5, 1.0, -1.0)
    values, gradient, e = mfm._logistic_rows(s, y)
    z = y * s
    np.testing.assert_allclose(values, -log_expit(z), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(gradient, -y * expit(-z), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(mfm._logistic_curvature(e)[:, 0], expit(z) * expit(-z), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("multiclass", [False, True])
def test_one_client_weighted_gradient_and_curvature_match_the_dense_objectives(multiclass):
    """One client: the row weight lambda/N applied to the K x d product; the intercept block of the
    logistic curvature from the stored exponential."""
    fed = dm.datasets.gaussian_mixture(300, 6, 3 if multiclass else 2, n_clients=3, alpha=0.5, seed=4)
    X, y, _ = fed.pooled()
    one = (dm.Federation.from_arrays([X], [y], task="multiclass", classes=[0, 1, 2]) if multiclass
           else dm.Federation.from_arrays([X], [y], task=fed.task))
    loss = dm.losses.Multinomial() if multiclass else dm.losses.Logistic()
    dense = ClientObjectives(one, loss, l2=0.03, penalize_intercept=False)
    mf = MatrixFreeObjectives(dense)
    theta = np.random.default_rng(5).standard_normal(dense.dim)
    point = mf.at(theta)
    lam = np.array([0.7])
    np.testing.assert_allclose(point.weighted_gradient(lam), 0.7 * dense.gradients(theta)[0], rtol=1e-12, atol=1e-14)
    v = np.random.default_rng(6).standard_normal(dense.dim)
    np.testing.assert_allclose(point.hvp(v, lam), 0.7 * dense.hessians(theta)[0] @ v, rtol=1e-11, atol=1e-13)


def _random_problem(seed, multiclass, dtype, n_clients, stored=None):
    """Features rounded to ``dtype`` and held as ``stored`` (default ``dtype``): a float64 copy of
    float32-rounded rows is the same problem."""
    K = 4 if multiclass else 2
    fed = dm.datasets.gaussian_mixture(900, 8, K, n_clients=n_clients, alpha=0.5, seed=seed)
    Xs = [c.X.astype(dtype).astype(stored or dtype) for c in fed.clients]
    ys = [c.y for c in fed.clients]
    kw = dict(task="multiclass", classes=list(range(K))) if multiclass else dict(task=fed.task)
    fed = dm.Federation.from_arrays(Xs, ys, **kw)
    loss = dm.losses.Multinomial() if multiclass else dm.losses.Logistic()
    W = dm.sets.Simplex(1) if n_clients == 1 else dm.sets.ChiSquare(n_clients, 0.2)
    return dm.FederatedDRO(fed, loss, W, l2=1e-2, penalize_intercept=False)


@pytest.mark.parametrize("multiclass", [False, True], ids=["binary", "softmax"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("n_clients", [1, 4], ids=["erm", "chi2"])
def test_the_hessian_free_answer_is_the_dense_route_s_to_1e_9(multiclass, dtype, n_clients):
    """Random instances: the Hessian-free route at gap 1e-10 certifies, and its answer's objective and
    interval agree with the dense sqp route's (an independent route: P x P Newton systems, on the float64
    copy of float32 rows) to 1e-9."""
    seed = 11 + 2 * int(multiclass) + int(dtype is np.float32) + 5 * n_clients
    prob = _random_problem(seed, multiclass, dtype, n_clients)
    sol = prob.solve(method="hessian_free", gap_tol=1e-10)
    ref = _random_problem(seed, multiclass, dtype, n_clients, np.float64).solve(method="sqp", gap_tol=1e-10)
    assert sol.status == "optimal" and ref.status == "optimal"
    scale = max(1.0, abs(ref.value))
    assert abs(sol.upper_bound - ref.upper_bound) <= 1e-9 * scale
    assert sol.lower_bound <= ref.upper_bound + 1e-12 * scale and ref.lower_bound <= sol.upper_bound + 1e-12 * scale
    assert sol.upper_bound == pytest.approx(prob.objective(sol.theta), rel=1e-12)


@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("n_clients", [1, 3])
def test_allowance_terms_and_client_sums_are_their_definitions(multiclass, n_clients):
    """The magnitudes of the bound's floating-point allowances (per client, the means of |l_j|,
    ||x_j|| ||grad l_j||, ||x_j||^2 and ||s_j||_1) and the per-client sums of an (N, K) block, from
    plain loops over each client's rows."""
    K = 3 if multiclass else 2
    fed = dm.datasets.gaussian_mixture(240, 5, K, n_clients=3, alpha=0.5, seed=9)
    if n_clients == 1:
        X, y, _ = fed.pooled()
        kw = dict(task="multiclass", classes=list(range(K))) if multiclass else dict(task=fed.task)
        fed = dm.Federation.from_arrays([X], [y], **kw)
    loss = dm.losses.Multinomial() if multiclass else dm.losses.Logistic()
    mf = MatrixFreeObjectives(ClientObjectives(fed, loss, l2=0.1, penalize_intercept=False))
    point = mf.at(np.random.default_rng(10).standard_normal(mf.dim))
    expected = []
    for i in range(mf.n):
        rows = slice(mf.offsets[i], mf.offsets[i + 1])
        x = np.linalg.norm(mf.X[rows], axis=1)
        g = np.linalg.norm(point.row_gradients[rows], axis=1)
        expected.append([np.mean(np.abs(point.row_values[rows])), np.mean(x * g), np.mean(x * x),
                         np.mean(np.abs(point.scores[rows]).sum(axis=1))])
    np.testing.assert_allclose(point.allowance_terms(), expected, rtol=1e-13)
    sums = [point.row_gradients[mf.offsets[i]:mf.offsets[i + 1]].sum(axis=0) for i in range(mf.n)]
    np.testing.assert_allclose(mf.client_sums(point.row_gradients), sums, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_square_sums_by_blocks_are_the_rows_and_columns_squared(dtype, monkeypatch):
    """Several blocks per client (a small block size) and unequal clients: every row's squared
    norm and each client's column sums of squares, in float64 from float32 rows too."""
    from drflmodel import _float64_products as fp

    monkeypatch.setattr(fp, "SQUARES_BLOCK", 40)
    X = (np.random.default_rng(12).standard_normal((103, 7)) * np.logspace(-3, 3, 7)).astype(dtype)
    offsets = np.array([0, 5, 60, 103])
    rows, columns = fp.square_sums(X, offsets)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(rows, (X64 ** 2).sum(axis=1), rtol=1e-14)
    expected = [(X64[a:b] ** 2).sum(axis=0) for a, b in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_allclose(columns, expected, rtol=1e-14)


def test_float32_steps_whose_line_search_meets_their_rounding_hand_over_to_float64():
    """A softmax head on float32 rows asked a 1e-9 gap: near the optimum the float32 values' rounding
    exceeds a step's decrease and L-BFGS-B's line search took 10-100 evaluations per iteration (204
    evaluations in 27 iterations before the handover existed). The float32 run now ends after
    FLOAT32_STALL evaluations in one iteration and float64 steps finish: few evaluations, the same
    certified answer as the dense sqp route on the float64 copy of the rows."""
    fed = dm.datasets.gaussian_mixture(3000, 32, 5, n_clients=1, alpha=0.5, seed=0)
    X, y, _ = fed.pooled()

    def problem(dtype):
        one = dm.Federation.from_arrays([X.astype(np.float32).astype(dtype)], [y], task="multiclass",
                                        classes=list(range(5)))
        return dm.FederatedDRO(one, dm.losses.Multinomial(), dm.sets.Simplex(1), l2=1e-3, penalize_intercept=False)

    sol = problem(np.float32).solve(method="hessian_free", gap_tol=1e-9)
    ref = problem(np.float64).solve(method="sqp", gap_tol=1e-10)
    assert sol.status == "optimal" and sol.info["step_precision"] == ["float32", "float64"]
    assert sol.info["evaluations"] <= 2 * sol.info["iterations"] + 10
    assert abs(sol.upper_bound - ref.upper_bound) <= 1e-9 * max(1.0, abs(ref.value))
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12


def test_float32_quasi_newton_sqp_steps_hand_over_at_their_rounding_too():
    """CVaR over 4 clients on float32 rows at a 1e-9 gap (the quasi-Newton SQP steps): the Armijo
    backtracking stops after FLOAT32_STALL halvings in float32 (206 evaluations in 31 iterations
    before, halving down to 1e-10) and float64 steps finish, with the sqp route's certified answer."""
    fed = dm.datasets.gaussian_mixture(3000, 32, 5, n_clients=4, alpha=0.5, seed=0)

    def problem(dtype):
        f = dm.Federation.from_arrays([c.X.astype(np.float32).astype(dtype) for c in fed.clients],
                                      [c.y for c in fed.clients], task="multiclass", classes=list(range(5)))
        return dm.FederatedDRO(f, dm.losses.Multinomial(), dm.sets.CVaR(4, 0.5), l2=1e-3, penalize_intercept=False)

    sol = problem(np.float32).solve(method="hessian_free", gap_tol=1e-9)
    ref = problem(np.float64).solve(method="sqp", gap_tol=1e-10)
    assert sol.info["algorithm"] == "sqp" and sol.info["step_precision"] == ["float32", "float64"]
    assert sol.status == "optimal" and ref.status == "optimal"
    assert sol.info["evaluations"] <= 2 * sol.info["iterations"] + 10
    assert abs(sol.upper_bound - ref.upper_bound) <= 1e-9 * max(1.0, abs(ref.value))
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12
