"""Tests of drflmodel.data: Client / Federation / VerticalFederation validation (DESIGN.md §4
item 3: every bad input raises InvalidDataError/InvalidParameterError naming the argument),
stacked arrays, proportions, pooled views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import drflmodel as dm
from drflmodel.data import Client, Federation, VerticalFederation
from drflmodel.errors import InvalidDataError, InvalidParameterError


def _fed(sizes=(3, 5, 2), d=4, task="regression", seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((m, d)) for m in sizes]
    if task == "regression":
        ys = [rng.standard_normal(m) for m in sizes]
    else:
        ys = [np.where(rng.random(m) < 0.5, 1.0, -1.0) for m in sizes]
    return Federation.from_arrays(Xs, ys, task=task), Xs, ys


# ------------------------------------------------------------------------------- Client
def test_client_basic_and_read_only():
    X, y = np.arange(6.0).reshape(3, 2), np.array([1.0, 2.0, 3.0])
    c = Client(X, y, name="c0")
    assert c.size == 3 and c.dim == 2 and c.name == "c0"
    assert np.array_equal(c.X, X) and np.array_equal(c.y, y)
    with pytest.raises(ValueError):
        c.X[0, 0] = 1.0
    # the caller's arrays are not frozen and later changes do not leak into the client
    X[0, 0] = 99.0
    y[0] = 99.0
    assert c.X[0, 0] == 0.0 and c.y[0] == 1.0
    base = np.ones((4, 2))
    c2 = Client(base[:3], np.zeros(3))
    base[0, 0] = 7.0
    assert c2.X[0, 0] == 1.0
    assert Client(np.ones((1, 1)), [0.0]).name == "client"
    assert Client([[1, 2]], [3]).X.dtype == float      # array-like and ints are accepted


@pytest.mark.parametrize("X, y, match", [
    (np.ones(3), np.ones(3), r"X of client 'c' must be 2-dimensional"),
    (np.ones((3, 2, 1)), np.ones(3), r"X of client 'c' must be 2-dimensional"),
    (np.ones((3, 2)), np.ones((3, 1)), r"y of client 'c' must be 1-dimensional"),
    (np.ones((3, 2)), np.ones(4), r"client 'c': X has 3 rows but y has 4"),
    (np.array([[1.0, np.nan]]), np.ones(1), r"X of client 'c' contains NaN"),
    (np.array([[1.0, np.inf]]), np.ones(1), r"X of client 'c' contains NaN or infinite"),
    (np.ones((1, 2)), np.array([-np.inf]), r"y of client 'c' contains NaN or infinite"),
    (np.ones((0, 2)), np.ones(0), r"client 'c' must hold at least one sample"),
    (np.ones((3, 0)), np.ones(3), r"X of client 'c' must have at least one feature"),
    ([["a", "b"]], [1.0], r"X of client 'c' must be numeric"),
])
def test_client_bad_input(X, y, match):
    with pytest.raises(InvalidDataError, match=match):
        Client(X, y, name="c")


# ------------------------------------------------------------------------------- Federation
def test_federation_sizes_proportions_pooled():
    fed, Xs, ys = _fed()
    assert fed.n_clients == 3 and fed.dim == 4 and fed.task == "regression"
    assert fed.sizes.tolist() == [3, 5, 2] and fed.sizes.dtype.kind == "i"
    assert np.allclose(fed.proportions, np.array([3, 5, 2]) / 10)
    assert abs(fed.proportions.sum() - 1) < 1e-15
    X, y, idx = fed.pooled()
    assert np.array_equal(X, np.vstack(Xs)) and np.array_equal(y, np.concatenate(ys))
    assert idx.tolist() == [0] * 3 + [1] * 5 + [2] * 2
    assert fed.names == ["client0", "client1", "client2"]
    sub = fed.subset([2, 0])
    assert sub.sizes.tolist() == [2, 3] and np.array_equal(sub.clients[0].X, Xs[2])


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=5), d=st.integers(1, 4),
       seed=st.integers(0, 1000))
def test_stacked_arrays_reproduce_each_client(sizes, d, seed):
    fed, Xs, ys = _fed(tuple(sizes), d, seed=seed)
    s = fed.stacked
    m = max(sizes)
    assert s.X.shape == (len(sizes), m, d) and s.y.shape == (len(sizes), m)
    assert s.mask.shape == (len(sizes), m) and s.sizes.tolist() == list(sizes)
    for i, (X, y) in enumerate(zip(Xs, ys)):
        n_i = len(y)
        assert np.array_equal(s.X[i, :n_i], X) and np.array_equal(s.y[i, :n_i], y)
        assert np.all(s.mask[i, :n_i] == 1.0) and np.all(s.mask[i, n_i:] == 0.0)
        assert np.all(s.X[i, n_i:] == 0.0) and np.all(s.y[i, n_i:] == 0.0)
    # per-client means through the mask equal direct means (the solvers' formula)
    means = (s.mask * s.y).sum(1) / s.sizes
    assert np.allclose(means, [y.mean() for y in ys])
    with pytest.raises(ValueError):
        s.X[0, 0, 0] = 1.0


def test_federation_classification_labels():
    fed, _, _ = _fed(task="classification")
    assert fed.task == "classification"
    with pytest.raises(InvalidDataError, match=r"y of client 'client1': classification labels must be in"):
        Federation.from_arrays([np.ones((2, 2)), np.ones((2, 2))], [[1, -1], [1, 0]],
                               task="classification")
    with pytest.raises(InvalidDataError, match=r"found \[2.0\]"):
        Federation.from_arrays([np.ones((2, 2))], [[1, 2]], task="classification")
    with pytest.raises(InvalidDataError, match="classification labels"):
        Federation.from_arrays([np.ones((1, 2))], [[0.999999]], task="classification")
    # the same labels are fine for regression
    Federation.from_arrays([np.ones((2, 2))], [[1, 2]], task="regression")


@pytest.mark.parametrize("build, err, match", [
    (lambda: Federation([], task="regression"), InvalidDataError, "clients must contain at least one"),
    (lambda: Federation([Client(np.ones((2, 2)), np.ones(2)), "x"]), InvalidDataError, r"clients\[1\]"),
    (lambda: Federation(Client(np.ones((2, 2)), np.ones(2))), InvalidDataError, "clients must be a sequence"),
    (lambda: Federation([Client(np.ones((2, 2)), np.ones(2)), Client(np.ones((2, 3)), np.ones(2))]),
     InvalidDataError, r"same number of features; got \[2, 3\]"),
    (lambda: Federation([Client(np.ones((2, 2)), np.ones(2))], task="ranking"),
     InvalidParameterError, "task must be one of"),
    (lambda: Federation.from_arrays([np.ones((2, 2))], [np.ones(2), np.ones(2)]),
     InvalidDataError, "Xs has 1 clients but ys has 2"),
    (lambda: Federation.from_arrays([np.ones((2, 2))], [np.ones(2)], names=["a", "b"]),
     InvalidDataError, "names has 2 entries"),
    (lambda: Federation.from_arrays([np.ones((2, 2)), np.ones((0, 2))], [np.ones(2), np.ones(0)]),
     InvalidDataError, "client 'client1' must hold at least one sample"),
])
def test_federation_bad_input(build, err, match):
    with pytest.raises(err, match=match):
        build()


def test_federation_duplicate_names_made_unique_and_subset_bounds():
    c = Client(np.ones((2, 2)), np.ones(2), name="a")
    fed = Federation([c, c])
    assert len(set(fed.names)) == 2
    with pytest.raises(InvalidParameterError, match="indices"):
        fed.subset([2])


# ------------------------------------------------------------------------------- VerticalFederation
def _vfed_data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    blocks = [rng.standard_normal((n, 2)), rng.standard_normal((n, 3)), rng.standard_normal((n, 1))]
    y = np.array([1, 1, -1, 1, -1, 1, -1, -1], float)[:n]
    group = np.array(["a", "b", "a", "a", "b", "b", "b", "a"])[:n]
    return blocks, y, group


def test_vertical_federation_masks_and_blocks():
    blocks, y, group = _vfed_data()
    v = VerticalFederation(blocks, y, group, active=[0])
    assert v.n_samples == 8 and v.n_parties == 3 and v.block_sizes == [2, 3, 1] and v.dim == 6
    assert v.task == "classification" and v.active == [0]
    assert np.array_equal(v.X, np.hstack(blocks))
    for B, sl in zip(blocks, v.block_slices):
        assert np.array_equal(v.X[:, sl], B)
    # masks computed independently from the definitions
    in_a = np.array([g == "a" for g in group])
    assert np.array_equal(v.in_a, in_a) and np.array_equal(v.in_b, ~in_a)
    assert np.array_equal(v.favourable, y == 1)
    assert np.array_equal(v.N_a, in_a & (y == 1)) and np.array_equal(v.N_b, ~in_a & (y == 1))
    assert v.N_a.sum() == 2 and v.N_b.sum() == 2
    assert np.array_equal(v.group, np.where(in_a, 0, 1))
    # numeric codes 0 = a, 1 = b give the same object
    v2 = VerticalFederation(blocks, y, np.where(in_a, 0, 1), active=(0, 2))
    assert np.array_equal(v2.N_a, v.N_a) and v2.active == [0, 2]
    # theta split: <X, theta> = sum_k <X^k, theta_k>
    theta = np.arange(6.0)
    assert np.allclose(v.X @ theta, sum(B @ theta[sl] for B, sl in zip(blocks, v.block_slices)))


@pytest.mark.parametrize("mutate, err, match", [
    (lambda b, y, g: ([], y, g), InvalidDataError, "at least one party block"),
    (lambda b, y, g: ([b[0], b[1][:-1], b[2]], y, g), InvalidDataError, "same number of rows"),
    (lambda b, y, g: ([b[0], b[1].ravel(), b[2]], y, g), InvalidDataError, r"blocks\[1\] must be 2-dimensional"),
    (lambda b, y, g: ([b[0], np.where(b[1] > 0, np.nan, 1.0), b[2]], y, g), InvalidDataError, r"blocks\[1\] contains NaN"),
    (lambda b, y, g: (b, y[:-1], g), InvalidDataError, "y has 7 rows but the blocks have 8"),
    (lambda b, y, g: (b, np.where(y > 0, 1.0, 0.0), g), InvalidDataError, "classification labels"),
    (lambda b, y, g: (b, np.where(y > 0, np.inf, -1.0), g), InvalidDataError, "y contains NaN"),
    (lambda b, y, g: (b, y, g[:-1]), InvalidDataError, "group has 7 rows"),
    (lambda b, y, g: (b, y, g.reshape(4, 2)), InvalidDataError, "group must be 1-dimensional"),
    (lambda b, y, g: (b, y, np.where(g == "a", "a", "c")), InvalidDataError, r"group values must be in .*'c'"),
    (lambda b, y, g: (b, y, np.where(g == "a", 0, 2)), InvalidDataError, "group values must be in .*2"),
    (lambda b, y, g: (b, y, [0, 1, 0, 0, 1, 1, 1, [0]]), InvalidDataError, "group values must be in"),
    (lambda b, y, g: (b, y, np.where(g == "a", 0.0, np.nan)), InvalidDataError, "group values must be in"),
    # group a has no favourable row
    (lambda b, y, g: (b, np.where(g == "a", -1.0, y), g), InvalidDataError, r"protected group 'a' has no rows with the favourable"),
    # group b absent altogether
    (lambda b, y, g: (b, y, np.full(8, "a")), InvalidDataError, r"protected group 'b'"),
])
def test_vertical_federation_bad_input(mutate, err, match):
    blocks, y, group = _vfed_data()
    b, yy, g = mutate(blocks, y, group)
    with pytest.raises(err, match=match):
        VerticalFederation(b, yy, g)


@pytest.mark.parametrize("active", [[3], [-1], [], [0.5], ["0"]])
def test_vertical_federation_bad_active(active):
    blocks, y, group = _vfed_data()
    with pytest.raises(InvalidParameterError, match="active"):
        VerticalFederation(blocks, y, group, active=active)


def test_vertical_federation_owns_its_data():
    blocks, y, group = _vfed_data()
    v = VerticalFederation(blocks, y, group)
    X0 = v.X.copy()
    blocks[0][0, 0] += 5.0
    y[0] = -1.0
    assert np.array_equal(v.X, X0) and v.y[0] == 1.0 and v.N_a[0]


def test_public_names():
    assert dm.Client is Client and dm.Federation is Federation
    assert dm.VerticalFederation is VerticalFederation


def test_stacked_data_too_large_for_memory_is_refused_before_allocating(monkeypatch):
    """Issue 23: a problem too large for memory is an error naming the size and the estimate; issue
    42: the package's one memory refusal (drflmodel._memory.check_memory, MemoryLimitError)."""
    from drflmodel import _memory
    from drflmodel.errors import MemoryLimitError

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=4, samples=50, seed=0)
    monkeypatch.setattr(_memory, "available_memory", lambda: 1000)
    monkeypatch.setattr(_memory, "MIN_REFUSED_BYTES", 0)
    with pytest.raises(MemoryLimitError, match=r"3 clients x 50 rows x 4 features.*needs about 7.03 KiB but "
                                               r"1000 B of memory is available.*fewer rows"):
        fed.stacked
