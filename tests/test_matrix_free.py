"""drflmodel.matrix_free (issue 30 item 1): values, gradients and Hessian-vector products of every
smooth loss without a P x P array, against the dense Hessians of ClientObjectives and against
finite differences of the gradients; and the size refusal before allocating."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import losses as L
from drflmodel.errors import InvalidParameterError, MemoryLimitError
from drflmodel.matrix_free import MatrixFreeObjectives, matrix_free_bytes
from drflmodel.objectives import ClientObjectives

SIZES = [7, 30, 1, 12]              # unequal, one single-row client: offsets and padding matter


def _federation(loss, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [np.hstack([np.ones((m, 1)), rng.standard_normal((m, 4))]) for m in SIZES]
    if loss.task == "multiclass":
        ys = [rng.integers(0, 3, size=m) for m in SIZES]
        return dm.Federation.from_arrays(Xs, ys, task="multiclass", classes=[0, 1, 2])
    if loss.task == "classification":
        ys = [np.where(rng.random(m) < 0.5, 1.0, -1.0) for m in SIZES]
        return dm.Federation.from_arrays(Xs, ys, task="classification")
    ys = [2.0 * rng.standard_normal(m) for m in SIZES]
    return dm.Federation.from_arrays(Xs, ys, task="regression")


SMOOTH = [L.Logistic(), L.Multinomial(), L.SmoothHinge(), L.Huber(0.7), L.Squared()]
IDS = [loss.name for loss in SMOOTH]


@pytest.mark.parametrize("loss", SMOOTH, ids=IDS)
@pytest.mark.parametrize("penalize_intercept", [True, False])
def test_operators_match_the_dense_objectives(loss, penalize_intercept):
    fed = _federation(loss)
    dense = ClientObjectives(fed, loss, l2=0.05, penalize_intercept=penalize_intercept)
    mf = MatrixFreeObjectives(dense)
    rng = np.random.default_rng(1)
    theta = rng.standard_normal(dense.dim)
    V = rng.standard_normal((dense.n, dense.dim))
    lam = rng.random(dense.n)
    point = mf.at(theta)
    np.testing.assert_allclose(point.values, dense.values(theta), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(point.gradients(), dense.gradients(theta), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(point.weighted_gradient(lam), lam @ dense.gradients(theta), rtol=1e-12, atol=1e-13)
    H = dense.hessians(theta)
    np.testing.assert_allclose(point.client_hvps(V), np.einsum("ipq,iq->ip", H, V), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(point.hvp(V[0], lam), dense.weighted_hessian(theta, lam) @ V[0],
                               rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("loss", [L.Logistic(), L.Multinomial(), L.Squared()], ids=["logistic", "multinomial",
                                                                                     "squared"])
def test_hessian_vector_products_are_derivatives_of_the_gradients(loss):
    """Central differences of the matrix-free gradient along v give the matrix-free HVP (twice
    differentiable losses; an independent check of both)."""
    fed = _federation(loss, seed=3)
    mf = MatrixFreeObjectives(ClientObjectives(fed, loss, l2=0.01))
    rng = np.random.default_rng(4)
    theta, v = rng.standard_normal(mf.dim), rng.standard_normal(mf.dim)
    lam = rng.random(mf.n)
    h = 1e-5
    fd = (mf.at(theta + h * v).weighted_gradient(lam) - mf.at(theta - h * v).weighted_gradient(lam)) / (2 * h)
    np.testing.assert_allclose(mf.at(theta).hvp(v, lam), fd, rtol=1e-6, atol=1e-8)


def test_gradients_are_derivatives_of_the_values():
    loss = L.Multinomial()
    mf = MatrixFreeObjectives(ClientObjectives(_federation(loss, seed=5), loss, l2=0.02))
    rng = np.random.default_rng(6)
    theta, v = rng.standard_normal(mf.dim), rng.standard_normal(mf.dim)
    h = 1e-6
    fd = (mf.values(theta + h * v) - mf.values(theta - h * v)) / (2 * h)
    np.testing.assert_allclose(mf.gradients(theta) @ v, fd, rtol=1e-7, atol=1e-9)


def test_softmax_kernel_is_stable_for_large_scores():
    """Scores of 1e3 would overflow a naive exp: the fused kernel shifts by the row maximum."""
    loss = L.Multinomial()
    fed = _federation(loss, seed=7)
    dense = ClientObjectives(fed, loss, l2=0.0)
    mf = MatrixFreeObjectives(dense)
    theta = 300.0 * np.random.default_rng(8).standard_normal(mf.dim)
    with np.errstate(over="raise"):
        values = mf.values(theta)
    assert np.all(np.isfinite(values))
    np.testing.assert_allclose(values, dense.values(theta), rtol=1e-12)


def test_non_smooth_loss_is_refused_by_name():
    fed = _federation(L.Hinge())
    with pytest.raises(InvalidParameterError, match="hinge.*not smooth"):
        MatrixFreeObjectives(ClientObjectives(fed, L.Hinge(), l2=0.1))


def test_size_refused_before_allocating(monkeypatch):
    import drflmodel._memory as memory

    monkeypatch.setattr(memory, "MIN_REFUSED_BYTES", 0)

    fed = _federation(L.Logistic())
    dense = ClientObjectives(fed, L.Logistic(), l2=0.1)
    need = matrix_free_bytes(sum(SIZES), 5, 1, len(SIZES))
    monkeypatch.setattr(memory, "available_memory", lambda: need // 4)
    with pytest.raises(MemoryLimitError, match=r"matrix-free objectives .* needs about .* available"):
        MatrixFreeObjectives(dense)
    monkeypatch.setattr(memory, "available_memory", lambda: 100 * need)
    assert MatrixFreeObjectives(dense).n_rows == sum(SIZES)


def test_dense_hessians_refused_before_allocating(monkeypatch):
    """ClientObjectives' dense Hessians say what they would need (no raw MemoryError)."""
    import drflmodel._memory as memory

    monkeypatch.setattr(memory, "MIN_REFUSED_BYTES", 0)

    fed = _federation(L.Logistic())
    dense = ClientObjectives(fed, L.Logistic(), l2=0.1)
    monkeypatch.setattr(memory, "available_memory", lambda: 100)
    theta = np.zeros(dense.dim)
    with pytest.raises(MemoryLimitError, match=r"dense 5 x 5 Hessian.*method='hessian_free'"):
        dense.weighted_hessian(theta, np.ones(dense.n))
    with pytest.raises(MemoryLimitError, match=r"4 dense 5 x 5 Hessians"):
        dense.hessians(theta)


@pytest.mark.parametrize("loss", [L.Logistic(), L.Multinomial()], ids=["logistic", "multinomial"])
def test_intercept_terms_are_the_intercept_block_of_the_dense_derivatives(loss):
    """The per-client terms of the intercepts' partial minimization (a bound's only row access)
    equal the intercept block of the dense gradient and Hessian, and shifting the scores equals
    evaluating at the shifted intercepts."""
    fed = _federation(loss, seed=9)
    dense = ClientObjectives(fed, loss, l2=0.1, penalize_intercept=False)
    mf = MatrixFreeObjectives(dense)
    rng = np.random.default_rng(10)
    theta = rng.standard_normal(mf.dim)
    idx = 0 + mf.n_features * np.arange(mf.n_outputs)          # the intercept column is 0
    values, grads, hess = mf.at(theta).intercept_terms(idx)
    np.testing.assert_allclose(values, dense.values(theta) - dense.penalty(theta), rtol=1e-13)
    np.testing.assert_allclose(grads, dense.gradients(theta)[:, idx], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hess, dense.hessians(theta)[:, idx][:, :, idx], rtol=1e-11, atol=1e-13)
    b = rng.standard_normal(idx.size)
    shifted = theta.copy()
    shifted[idx] = b
    np.testing.assert_allclose(mf.at(theta).intercept_values(idx, b), dense.values(shifted) - dense.penalty(shifted),
                               rtol=1e-12)
    np.testing.assert_allclose(mf.shifted(mf.at(theta), idx, b).values, dense.values(shifted), rtol=1e-12)
    terms = mf.at(theta).allowance_terms()
    assert terms.shape == (mf.n, 4) and np.all(terms >= 0)


def test_column_second_moments_are_each_client_s_mean_squared_columns_and_the_jacobi_scaling():
    """The preconditioner's column statistics (issue 44) against numpy on each client's own rows, and
    the Hessian-free route's diagonal scaling: D^-2 = smoothness x mean squared column + ridge."""
    from drflmodel.problems.minmax.hessian_free import diagonal_scaling

    fed = _federation(L.Multinomial())
    ob = ClientObjectives(fed, L.Multinomial(), l2=0.05)
    mf = MatrixFreeObjectives(ob)
    expected = np.stack([np.mean(c.X ** 2, axis=0) for c in fed.clients])
    assert np.allclose(mf.column_second_moments(), expected, rtol=1e-14, atol=0)
    overall = np.concatenate([c.X for c in fed.clients]) ** 2
    D = diagonal_scaling(mf)
    want = L.Multinomial().smoothness * np.tile(overall.mean(axis=0), 3) + ob.penalty_diagonal
    assert np.allclose(D ** -2, want, rtol=1e-12, atol=0)
