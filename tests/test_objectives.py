"""Tests of drflmodel.objectives.ClientObjectives against per-client loops, finite differences,
CVXPY values, Monte-Carlo averages (minibatch unbiasedness) and the quadratic form."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel import losses as L
from drflmodel.data import Federation
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.objectives import ClientObjectives

SIZES = (4, 9, 1, 6)   # unequal sizes, one single-sample client: padding matters
D = 3


def _fed(task, seed=0, sizes=SIZES, d=D):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((m, d)) for m in sizes]
    if task == "regression":
        ys = [rng.standard_normal(m) * 2 for m in sizes]
    else:
        ys = [np.where(rng.random(m) < 0.5, 1.0, -1.0) for m in sizes]
    return Federation.from_arrays(Xs, ys, task=task)


LOSSES = [L.Squared(), L.Huber(0.5), L.EpsilonInsensitive(0.2), L.Pinball(0.3), L.Hinge(),
          L.SmoothHinge(), L.Logistic()]
SMOOTH = [l for l in LOSSES if l.name in ("squared", "huber", "smooth_hinge", "logistic")]
IDS = [repr(l) for l in LOSSES]


def _direct_value(c, loss, theta, l2):
    """f_i(theta) = mean_j L(z_ij) + l2/2 |theta|^2 by a plain per-client computation."""
    u = c.X @ theta
    z = u - c.y if loss.task == "regression" else c.y * u
    return float(np.mean(loss.phi(z)) + 0.5 * l2 * theta @ theta)


def _direct_grad(c, loss, theta, l2):
    u = c.X @ theta
    if loss.task == "regression":
        g = loss.dphi(u - c.y)
    else:
        g = c.y * loss.dphi(c.y * u)
    return c.X.T @ g / c.size + l2 * theta


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_values_and_gradients_match_per_client_loops(loss, l2):
    fed = _fed(loss.task)
    obj = ClientObjectives(fed, loss, l2=l2)
    rng = np.random.default_rng(1)
    theta = rng.standard_normal(D)
    thetas = rng.standard_normal((fed.n_clients, D))
    v, g = obj.values(theta), obj.gradients(theta)
    assert v.shape == (4,) and g.shape == (4, D)
    vi, gi = obj.values(thetas), obj.gradients(thetas)
    for i, c in enumerate(fed.clients):
        assert np.isclose(v[i], _direct_value(c, loss, theta, l2), rtol=1e-12, atol=1e-12)
        assert np.allclose(g[i], _direct_grad(c, loss, theta, l2), rtol=1e-12, atol=1e-12)
        # per-client iterates: row i uses theta_i and client i's data only
        assert np.isclose(vi[i], _direct_value(c, loss, thetas[i], l2), rtol=1e-12, atol=1e-12)
        assert np.allclose(gi[i], _direct_grad(c, loss, thetas[i], l2), rtol=1e-12, atol=1e-12)


def _kinks(loss):
    return {"huber": lambda: [-loss.eps, loss.eps],
            "epsilon_insensitive": lambda: [-loss.eps, loss.eps],
            "pinball": lambda: [0.0], "hinge": lambda: [1.0],
            "smooth_hinge": lambda: [0.0, 1.0]}.get(loss.name, lambda: [])()


def _min_kink_distance(fed, loss, theta):
    u = np.concatenate([c.X @ theta for c in fed.clients])
    y = np.concatenate([c.y for c in fed.clients])
    z = loss.argument(u, y)
    ks = _kinks(loss)
    return np.inf if not ks else float(np.min(np.abs(z[:, None] - np.array(ks)[None, :])))


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_gradients_match_finite_differences(loss):
    fed = _fed(loss.task, seed=2)
    obj = ClientObjectives(fed, loss, l2=0.1)
    theta = np.random.default_rng(3).standard_normal(D)
    h = 1e-6
    # the FD is only meaningful away from kinks; the data are random, check it
    assert _min_kink_distance(fed, loss, theta) > 1e-3 * (1 + np.abs(theta).sum())
    fd = np.stack([(obj.values(theta + h * e) - obj.values(theta - h * e)) / (2 * h)
                   for e in np.eye(D)], axis=1)
    assert np.allclose(obj.gradients(theta), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss", SMOOTH, ids=[repr(l) for l in SMOOTH])
def test_hessians_match_finite_differences_and_loops(loss):
    fed = _fed(loss.task, seed=4)
    obj = ClientObjectives(fed, loss, l2=0.2)
    rng = np.random.default_rng(5)
    theta = rng.standard_normal(D)
    assert _min_kink_distance(fed, loss, theta) > 1e-3 * (1 + np.abs(theta).sum())
    H = obj.hessians(theta)
    assert H.shape == (4, D, D)
    h = 1e-6
    fd = np.stack([(obj.gradients(theta + h * e) - obj.gradients(theta - h * e)) / (2 * h)
                   for e in np.eye(D)], axis=2)
    assert np.allclose(H, fd, rtol=1e-5, atol=1e-5)
    thetas = rng.standard_normal((4, D))
    Hi = obj.hessians(thetas)
    for i, c in enumerate(fed.clients):
        z = loss.argument(c.X @ thetas[i], c.y)
        direct = (c.X * loss.ddphi(z)[:, None]).T @ c.X / c.size + 0.2 * np.eye(D)
        assert np.allclose(Hi[i], direct, rtol=1e-12, atol=1e-12)
        assert np.allclose(Hi[i], Hi[i].T)


@pytest.mark.parametrize("loss", [l for l in LOSSES if l not in SMOOTH],
                         ids=[repr(l) for l in LOSSES if l not in SMOOTH])
def test_hessians_of_nonsmooth_losses_raise(loss):
    obj = ClientObjectives(_fed(loss.task), loss)
    with pytest.raises(NotImplementedError):
        obj.hessians(np.zeros(D))


@pytest.mark.parametrize("loss", [L.Squared(), L.Logistic(), L.Hinge(), L.Pinball(0.8)],
                         ids=["squared", "logistic", "hinge", "pinball"])
@pytest.mark.parametrize("per_client", [False, True])
def test_minibatch_gradients_are_unbiased(loss, per_client):
    fed = _fed(loss.task, seed=6)
    obj = ClientObjectives(fed, loss, l2=0.05)
    rng0 = np.random.default_rng(7)
    theta = rng0.standard_normal((4, D)) if per_client else rng0.standard_normal(D)
    full = obj.gradients(theta)
    rng = np.random.default_rng(8)
    K = 4000
    draws = np.stack([obj.minibatch_gradients(theta, 3, rng) for _ in range(K)])
    mean, sd = draws.mean(0), draws.std(0)
    # CLT: each coordinate within 5 standard errors (an error in the sampling, e.g. drawing
    # padded rows or another client's rows, shifts the mean by far more)
    assert np.all(np.abs(mean - full) <= 5 * sd / np.sqrt(K) + 1e-12)
    # a one-sample client has no sampling noise: its minibatch gradient is exact
    assert np.allclose(draws[:, 2], full[2], rtol=1e-12, atol=1e-12)


def test_minibatch_gradients_determinism_and_range():
    fed = _fed("regression", seed=9)
    obj = ClientObjectives(fed, L.Squared())
    theta = np.ones(D)
    a = obj.minibatch_gradients(theta, 5, np.random.default_rng(0))
    b = obj.minibatch_gradients(theta, 5, np.random.default_rng(0))
    c = obj.minibatch_gradients(theta, 5, np.random.default_rng(1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # every per-sample gradient a client can draw lies in the span of its own rows' gradients:
    # a batch of size 1 must equal one of the client's per-sample gradients
    rng = np.random.default_rng(2)
    for _ in range(50):
        g = obj.minibatch_gradients(theta, 1, rng)
        for i, cl in enumerate(fed.clients):
            per = cl.X * (2 * (cl.X @ theta - cl.y))[:, None]
            assert np.min(np.abs(per - g[i]).max(1)) < 1e-12


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
@pytest.mark.parametrize("l2", [0.0, 0.7])
def test_expressions_match_values(loss, l2):
    fed = _fed(loss.task, seed=10)
    obj = ClientObjectives(fed, loss, l2=l2)
    th = cp.Variable(D)
    exprs = obj.expressions(th)
    assert len(exprs) == fed.n_clients
    assert all(e.is_convex() and e.is_dcp() and e.shape == () for e in exprs)
    for seed in range(3):
        th.value = np.random.default_rng(seed).standard_normal(D) * 2
        assert np.allclose([e.value for e in exprs], obj.values(th.value), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("l2", [0.0, 0.4])
def test_quadratic_forms_reconstruct_f(l2):
    fed = _fed("regression", seed=11)
    obj = ClientObjectives(fed, L.Squared(), l2=l2)
    Q, r, c = obj.quadratic_forms()
    assert Q.shape == (4, D, D) and r.shape == (4, D) and c.shape == (4,)
    rng = np.random.default_rng(12)
    for _ in range(5):
        th = rng.standard_normal(D) * 3
        rec = np.einsum("d,ide,e->i", th, Q, th) - 2 * r @ th + c
        assert np.allclose(rec, obj.values(th), rtol=1e-12, atol=1e-10)
    assert np.allclose(Q, np.transpose(Q, (0, 2, 1)))
    # Hessian of f_i is 2 Q_i
    assert np.allclose(obj.hessians(np.zeros(D)), 2 * Q)



@pytest.mark.parametrize("shape", [(50, 6), (3, 6), (40, 6, "rank-deficient")])
def test_squared_loss_factors_reproduce_the_sum_of_squares(shape):
    """||X theta - y||^2 from the QR factors equals the direct sum, also with fewer rows than
    features and with duplicated columns (rank-deficient X)."""
    from drflmodel.objectives import squared_loss_factors

    rng = np.random.default_rng(20)
    X = rng.standard_normal(shape[:2]) * np.array([1e3, 1.0, 1e-3, 1.0, 5.0, 1.0])
    if len(shape) == 3:
        X[:, 3] = X[:, 1]
    y = rng.standard_normal(shape[0]) * 10
    R, qty, residual = squared_loss_factors(X, y)
    assert R.shape == (min(shape[:2]), 6) and residual >= 0
    for _ in range(5):
        th = rng.standard_normal(6)
        direct = float(np.sum((X @ th - y) ** 2))
        assert float(np.sum((R @ th - qty) ** 2)) + residual == pytest.approx(direct, rel=1e-11)


def test_squared_loss_model_size_does_not_grow_with_rows():
    """The conic model of the squared loss has one cone per client whatever the number of rows."""
    sizes = []
    for rows in (20, 2000):
        fed = Federation.from_arrays([np.random.default_rng(k).standard_normal((rows, D)) for k in range(3)],
                                     [np.random.default_rng(9 + k).standard_normal(rows) for k in range(3)])
        th = cp.Variable(D)
        prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(ClientObjectives(fed, L.Squared(), l2=0.1).expressions(th)))))
        data = prob.get_problem_data(cp.CLARABEL)[0]
        sizes.append(data["A"].shape)
    assert sizes[0] == sizes[1]

def test_quadratic_forms_need_a_quadratic_loss():
    obj = ClientObjectives(_fed("regression"), L.Huber(1.0))
    with pytest.raises(InvalidParameterError, match="quadratic"):
        obj.quadratic_forms()


@pytest.mark.parametrize("loss", SMOOTH, ids=[repr(l) for l in SMOOTH])
def test_smoothness_and_strong_convexity_bound_the_hessian(loss):
    fed = _fed(loss.task, seed=13)
    obj = ClientObjectives(fed, loss, l2=0.1)
    Ls, mus = obj.smoothness(), obj.strong_convexity()
    rng = np.random.default_rng(14)
    top = np.zeros(4)
    for _ in range(200):
        ev = np.linalg.eigvalsh(obj.hessians(rng.standard_normal(D) * rng.choice([0.1, 1, 10])))
        assert np.all(ev[:, -1] <= Ls * (1 + 1e-10)) and np.all(ev[:, 0] >= mus * (1 - 1e-10) - 1e-12)
        top = np.maximum(top, ev[:, -1])
    # direct: beta * lambda_max(X_i^T X_i / N_i) + l2
    for i, c in enumerate(fed.clients):
        lam = np.linalg.eigvalsh(c.X.T @ c.X / c.size)
        assert np.isclose(Ls[i], loss.smoothness * lam[-1] + 0.1)
        if loss.is_quadratic:
            assert np.isclose(mus[i], 2 * max(lam[0], 0) + 0.1)
        else:
            assert mus[i] == 0.1
    if loss.is_quadratic:
        assert np.allclose(top, Ls)                    # attained everywhere


def test_loss_task_mismatch_and_bad_arguments():
    reg, cls = _fed("regression"), _fed("classification")
    with pytest.raises(InvalidParameterError, match="classification loss but the federation's task is 'regression'"):
        ClientObjectives(reg, L.Logistic())
    with pytest.raises(InvalidParameterError, match="regression loss"):
        ClientObjectives(cls, L.Squared())
    with pytest.raises(InvalidParameterError, match="loss must be a drflmodel.losses.Loss"):
        ClientObjectives(reg, "squared")
    with pytest.raises(InvalidParameterError, match="l2"):
        ClientObjectives(reg, L.Squared(), l2=-1.0)
    obj = ClientObjectives(reg, L.Squared())
    for bad in (np.zeros(D + 1), np.zeros((3, D)), np.zeros((4, D, 1))):
        with pytest.raises(InvalidDataError, match="theta must have shape"):
            obj.values(bad)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        obj.minibatch_gradients(np.zeros(D), 0, np.random.default_rng(0))


def test_gram_constants_match_each_clients_own_matrix_and_follow_a_subsample():
    """Smoothness and the quadratic moduli against eigendecompositions of X_i^T X_i / N_i computed
    here client by client; a subsample's constants are its own rows', not the cached full ones."""
    fed = dm.datasets.synthetic_regression(n_clients=4, dim=6, samples=[7, 30, 12, 50], seed=3)
    obj = ClientObjectives(fed, dm.losses.Squared(), 0.01)
    grams = [c.X.T @ c.X / c.size for c in fed.clients]
    ridge = 0.01 * np.diag(obj.penalty_weights)
    expected_l = [dm.losses.Squared().smoothness * np.linalg.eigvalsh(G)[-1] + 0.01 * obj.penalty_weights.max()
                  for G in grams]
    expected_mu = [max(np.linalg.eigvalsh(dm.losses.Squared().smoothness * G + ridge)[0], 0.0) for G in grams]
    assert np.allclose(obj.smoothness(), expected_l, rtol=1e-12)
    assert np.allclose(obj.strong_convexity(), expected_mu, rtol=1e-10, atol=1e-14)
    assert np.allclose(obj.smoothness(), expected_l, rtol=1e-12)          # the cached values
    sub = obj.subsample(0.5, minimum=3, seed=1)
    sub_grams = [sub._X[i].T @ sub._X[i] / sub._sizes[i] for i in range(4)]
    assert np.allclose(sub.smoothness(), [dm.losses.Squared().smoothness * np.linalg.eigvalsh(G)[-1]
                                          + 0.01 * obj.penalty_weights.max() for G in sub_grams], rtol=1e-12)
    assert not np.allclose(sub.smoothness(), obj.smoothness())
