"""Tests of drflmodel.datasets: real data against direct computations from the source files,
synthetic recipes against their written definitions, partitions, determinism, bad arguments."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import datasets as ds
from drflmodel.errors import InvalidDataError, InvalidParameterError

HAVE_PENGUINS = importlib.util.find_spec("palmerpenguins") is not None
HAVE_SKLEARN = importlib.util.find_spec("sklearn") is not None
needs_penguins = pytest.mark.skipif(not HAVE_PENGUINS, reason="palmerpenguins not installed")
needs_sklearn = pytest.mark.skipif(not HAVE_SKLEARN, reason="scikit-learn not installed")


# ------------------------------------------------------------------------------- helpers
def _penguins_csv() -> "pd.DataFrame":
    """The package's CSV read directly with pandas (not through palmerpenguins' loader)."""
    import palmerpenguins
    import pandas as pd

    return pd.read_csv(Path(palmerpenguins.__file__).parent / "data" / "penguins.csv")


def _fed_arrays(fed):
    return [(c.X.copy(), c.y.copy()) for c in fed.clients]


def _same_fed(f1, f2) -> bool:
    a, b = _fed_arrays(f1), _fed_arrays(f2)
    return len(a) == len(b) and all(np.array_equal(X1, X2) and np.array_equal(y1, y2)
                                    for (X1, y1), (X2, y2) in zip(a, b))


# ------------------------------------------------------------------------------- add_intercept
def test_add_intercept_prepends_ones():
    X = np.arange(6.0).reshape(3, 2)
    Z = ds.add_intercept(X)
    assert Z.shape == (3, 3)
    assert np.array_equal(Z[:, 0], np.ones(3))
    assert np.array_equal(Z[:, 1:], X)


@pytest.mark.parametrize("bad", [np.ones(3), np.array([[1.0, np.nan]]), np.array([[np.inf]])])
def test_add_intercept_rejects_bad_input(bad):
    with pytest.raises(InvalidDataError, match="X"):
        ds.add_intercept(bad)


# ------------------------------------------------------------------------------- penguins
@needs_penguins
def test_penguins_counts_match_direct_pandas_computation():
    df = _penguins_csv()
    df = df.dropna(subset=["bill_length_mm", "bill_depth_mm", "flipper_length_mm"])
    fed = ds.penguins()
    assert fed.task == "regression"
    assert fed.names == ["Adelie", "Chinstrap", "Gentoo"]
    expected = [int((df["species"] == s).sum()) for s in ("Adelie", "Chinstrap", "Gentoo")]
    assert fed.sizes.tolist() == expected
    assert expected == [151, 68, 123]  # 152/68/124 in the file, one NaN row in Adelie and Gentoo
    for c, s in zip(fed.clients, ("Adelie", "Chinstrap", "Gentoo")):
        sub = df[df["species"] == s]
        assert np.array_equal(c.X[:, 0], np.ones(len(sub)))
        assert np.array_equal(c.X[:, 1], sub["bill_depth_mm"].to_numpy())
        assert np.array_equal(c.X[:, 2], sub["flipper_length_mm"].to_numpy())
        assert np.array_equal(c.y, sub["bill_length_mm"].to_numpy())


@needs_penguins
def test_penguins_first_ten_is_the_paper_setup():
    """Spec relative-fairness §6 / §14.1 item 4: first 10 complete rows per species, file order."""
    df = _penguins_csv()
    fed = ds.penguins(n_per_species=10)
    assert fed.sizes.tolist() == [10, 10, 10]
    # Adelie row 4 (index 3) of the file is all-NaN, so the Adelie client skips it and takes
    # file rows 0,1,2,4,...,10.
    rows = [0, 1, 2, 4, 5, 6, 7, 8, 9, 10]
    assert df.loc[3, ["bill_length_mm", "bill_depth_mm", "flipper_length_mm"]].isna().all()
    assert np.array_equal(fed.clients[0].y, df.loc[rows, "bill_length_mm"].to_numpy())
    assert fed.clients[0].y[:4].tolist() == [39.1, 39.5, 40.3, 36.7]
    # Chinstrap and Gentoo: the first 10 rows of each species (no NaN among them)
    for c, s in zip(fed.clients[1:], ("Chinstrap", "Gentoo")):
        sub = df[df["species"] == s].iloc[:10]
        assert not sub[["bill_length_mm", "bill_depth_mm", "flipper_length_mm"]].isna().any().any()
        assert np.array_equal(c.X[:, 1:], sub[["bill_depth_mm", "flipper_length_mm"]].to_numpy())
        assert np.array_equal(c.y, sub["bill_length_mm"].to_numpy())


@needs_penguins
def test_penguins_options():
    raw = ds.penguins(n_per_species=10)
    no_int = ds.penguins(n_per_species=10, add_intercept=False)
    assert no_int.dim == 2
    for a, b in zip(raw.clients, no_int.clients):
        assert np.array_equal(a.X[:, 1:], b.X)
    st = ds.penguins(n_per_species=10, standardize=True)
    pooled = np.vstack([c.X for c in st.clients])
    assert np.array_equal(pooled[:, 0], np.ones(30))
    assert np.allclose(pooled[:, 1:].mean(0), 0.0, atol=1e-12)
    assert np.allclose(pooled[:, 1:].std(0), 1.0, atol=1e-12)
    # standardization is an affine map of the raw features with pooled statistics
    raw_pooled = np.vstack([c.X[:, 1:] for c in raw.clients])
    expect = (raw_pooled - raw_pooled.mean(0)) / raw_pooled.std(0)
    assert np.allclose(pooled[:, 1:], expect)
    assert all(np.array_equal(a.y, b.y) for a, b in zip(raw.clients, st.clients))


@needs_penguins
@pytest.mark.parametrize("bad", [0, -1, 69, 2.5, True])
def test_penguins_bad_n_per_species(bad):
    with pytest.raises(InvalidParameterError, match="n_per_species"):
        ds.penguins(n_per_species=bad)


def test_penguins_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "palmerpenguins", None)
    with pytest.raises(ImportError, match=r"drflmodel\[data\]"):
        ds.penguins()


# ------------------------------------------------------------------------------- synthetic regression
def test_synthetic_regression_follows_the_scaffpd_recipe():
    fed, p = ds.synthetic_regression(n_clients=4, dim=6, samples=[5, 7, 9, 11], scale=2.0,
                                     heterogeneity=0.3, seed=3, return_params=True)
    assert fed.task == "regression" and fed.n_clients == 4 and fed.dim == 6
    assert fed.sizes.tolist() == [5, 7, 9, 11]
    # y = <a, x_hat + delta_i> exactly (no noise by default)
    for i, c in enumerate(fed.clients):
        assert np.allclose(c.y, c.X @ (p["x_hat"] + p["shifts"][i]), atol=1e-12)
    # independent re-implementation of the documented draw order
    rng = np.random.default_rng(3)
    x_hat = 2.0 * rng.standard_normal(6)
    shifts = 0.3 * rng.standard_normal((4, 6))
    assert np.array_equal(x_hat, p["x_hat"]) and np.array_equal(shifts, p["shifts"])
    for m, c in zip([5, 7, 9, 11], fed.clients):
        assert np.array_equal(rng.standard_normal((m, 6)), c.X)


def test_synthetic_regression_statistics():
    """Distributional check: shifts have variance sigma^2, x_hat variance c^2, features N(0, 1)."""
    fed, p = ds.synthetic_regression(n_clients=400, dim=50, samples=20, scale=3.0,
                                     heterogeneity=0.2, seed=1, return_params=True)
    assert abs(p["shifts"].std() - 0.2) < 0.01       # 20000 draws: sd error ~ 0.001
    assert abs(p["x_hat"].std() - 3.0) < 0.9         # 50 draws
    X, _, _ = fed.pooled()
    assert abs(X.mean()) < 0.01 and abs(X.std() - 1.0) < 0.01


def test_synthetic_regression_noise_and_heterogeneity_zero():
    fed, p = ds.synthetic_regression(n_clients=3, dim=4, samples=50, heterogeneity=0.0,
                                     noise=0.5, seed=0, return_params=True)
    assert np.array_equal(p["shifts"], np.zeros((3, 4)))
    res = np.concatenate([c.y - c.X @ p["x_hat"] for c in fed.clients])
    assert 0.35 < res.std() < 0.65        # noise sd 0.5 on 150 points
    # without noise and heterogeneity every client shares the exact same model
    fed0, p0 = ds.synthetic_regression(n_clients=3, dim=4, samples=50, heterogeneity=0.0,
                                       seed=0, return_params=True)
    X, y, _ = fed0.pooled()
    sol = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.allclose(sol, p0["x_hat"], atol=1e-10)


def test_synthetic_determinism_under_seed():
    assert _same_fed(ds.synthetic_regression(seed=5), ds.synthetic_regression(seed=5))
    assert not _same_fed(ds.synthetic_regression(seed=5), ds.synthetic_regression(seed=6))
    assert _same_fed(ds.synthetic_classification(seed=5), ds.synthetic_classification(seed=5))
    assert not _same_fed(ds.synthetic_classification(seed=5), ds.synthetic_classification(seed=6))


@pytest.mark.parametrize("kwargs, name", [
    ({"n_clients": 0}, "n_clients"), ({"dim": 0}, "dim"), ({"samples": 0}, "samples"),
    ({"samples": [10, 10]}, "samples"), ({"samples": [10, 0, 10, 10, 10]}, r"samples\[1\]"),
    ({"heterogeneity": -0.1}, "heterogeneity"), ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
    ({"samples": "many"}, "samples"),
])
def test_synthetic_bad_arguments(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        ds.synthetic_regression(**kwargs)
    with pytest.raises(InvalidParameterError, match=name):
        ds.synthetic_classification(**kwargs)


@pytest.mark.parametrize("kwargs, name", [({"scale": -1.0}, "scale"), ({"noise": -1.0}, "noise"),
                                          ({"noise": float("nan")}, "noise")])
def test_synthetic_regression_bad_scalars(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        ds.synthetic_regression(**kwargs)


# ------------------------------------------------------------------------------- synthetic classification
def test_synthetic_classification_recipe():
    fed, p = ds.synthetic_classification(n_clients=3, dim=4, samples=[6, 8, 10], heterogeneity=0.7,
                                         seed=11, add_intercept=True, return_params=True)
    assert fed.task == "classification" and fed.dim == 5
    assert fed.sizes.tolist() == [6, 8, 10]
    rng = np.random.default_rng(11)
    w_hat = rng.standard_normal(4)
    shifts = 0.7 * rng.standard_normal((3, 4))
    assert np.array_equal(w_hat, p["w_hat"]) and np.array_equal(shifts, p["shifts"])
    for i, (m, c) in enumerate(zip([6, 8, 10], fed.clients)):
        X = rng.standard_normal((m, 4))
        u = rng.random(m)
        assert np.array_equal(c.X[:, 0], np.ones(m)) and np.array_equal(c.X[:, 1:], X)
        prob = 1.0 / (1.0 + np.exp(-X @ (w_hat + shifts[i])))
        assert np.array_equal(c.y, np.where(u < prob, 1.0, -1.0))
        assert set(np.unique(c.y)) <= {-1.0, 1.0}


def test_synthetic_classification_label_frequencies_follow_the_logistic_model():
    fed, p = ds.synthetic_classification(n_clients=2, dim=3, samples=20000, heterogeneity=1.0,
                                         seed=2, return_params=True)
    for i, c in enumerate(fed.clients):
        prob = 1.0 / (1.0 + np.exp(-c.X @ (p["w_hat"] + p["shifts"][i])))
        # mean of Bernoulli(prob) labels: E[(y+1)/2] = mean(prob); sd of the mean <= 0.0036
        assert abs(((c.y + 1) / 2).mean() - prob.mean()) < 0.015


# ------------------------------------------------------------------------------- partitions
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(n=st.integers(5, 80), n_clients=st.integers(1, 5), alpha=st.floats(0.05, 50.0),
       seed=st.integers(0, 10_000), classes=st.integers(1, 4))
def test_dirichlet_partition_covers_every_row_once(n, n_clients, alpha, seed, classes):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = rng.integers(0, classes, n).astype(float)
    idx = ds.dirichlet_partition(X, y, n_clients, alpha, seed=seed, min_size=0,
                                 task="classification", return_indices=True)
    assert len(idx) == n_clients
    allrows = np.concatenate(idx)
    assert np.array_equal(np.sort(allrows), np.arange(n))     # every row exactly once
    assert all(np.array_equal(i, np.sort(i)) for i in idx)    # file order within a client


def test_dirichlet_partition_matches_the_documented_recipe():
    """Independent re-implementation of the per-class Dirichlet split (one draw, no retry)."""
    rng0 = np.random.default_rng(0)
    y = np.where(rng0.random(60) < 0.4, 1.0, -1.0)
    X = rng0.standard_normal((60, 3))
    got = ds.dirichlet_partition(X, y, 3, 2.0, seed=7, min_size=0, return_indices=True)
    rng = np.random.default_rng(7)
    parts = [[], [], []]
    for k in (-1.0, 1.0):                     # classes in sorted order
        idx = rng.permutation(np.flatnonzero(y == k))
        p = rng.dirichlet([2.0, 2.0, 2.0])
        c1 = int(np.floor(p[0] * idx.size))
        c2 = int(np.floor((p[0] + p[1]) * idx.size))
        for j, chunk in enumerate((idx[:c1], idx[c1:c2], idx[c2:])):
            parts[j].extend(chunk.tolist())
    for g, e in zip(got, parts):
        assert g.tolist() == sorted(e)


def test_dirichlet_partition_alpha_controls_label_skew():
    rng = np.random.default_rng(1)
    y = np.where(rng.random(4000) < 0.5, 1.0, -1.0)
    X = rng.standard_normal((4000, 2))
    wide = ds.dirichlet_partition(X, y, 4, 1e4, seed=0)
    narrow = ds.dirichlet_partition(X, y, 4, 0.05, seed=0)
    frac_wide = np.array([(c.y == 1).mean() for c in wide.clients])
    frac_narrow = np.array([(c.y == 1).mean() for c in narrow.clients])
    assert np.all(np.abs(frac_wide - (y == 1).mean()) < 0.05)    # nearly iid
    assert np.abs(frac_narrow - 0.5).max() > 0.3                  # strongly skewed
    assert wide.task == "classification"                           # auto-detected from {-1,+1}


def test_dirichlet_partition_regression_bins_by_quantiles():
    rng = np.random.default_rng(2)
    y = rng.standard_normal(500)
    X = rng.standard_normal((500, 2))
    cls = ds._quantile_classes(y, 5)
    assert np.bincount(cls).tolist() == [100] * 5                 # distinct values: equal bins
    order = np.argsort(y)
    assert np.all(np.diff(cls[order]) >= 0)                        # bins are intervals of y
    fed = ds.dirichlet_partition(X, y, 4, 0.3, seed=3, task="auto")
    assert fed.task == "regression" and fed.n_clients == 4
    Xp, yp, _ = fed.pooled()
    assert np.array_equal(np.sort(yp), np.sort(y))
    # very small alpha: each client's targets concentrate in few quantile bins
    idx = ds.dirichlet_partition(X, y, 4, 0.01, seed=3, task="regression", return_indices=True)
    n_bins_used = [len(np.unique(cls[i])) for i in idx]
    assert min(n_bins_used) <= 2


def test_dirichlet_partition_determinism_and_min_size():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(100) < 0.5, 1.0, -1.0)
    X = rng.standard_normal((100, 2))
    a = ds.dirichlet_partition(X, y, 5, 0.3, seed=4, min_size=8, return_indices=True)
    b = ds.dirichlet_partition(X, y, 5, 0.3, seed=4, min_size=8, return_indices=True)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert min(len(u) for u in a) >= 8
    c = ds.dirichlet_partition(X, y, 5, 0.3, seed=5, min_size=8, return_indices=True)
    assert not all(np.array_equal(u, v) for u, v in zip(a, c))


@pytest.mark.parametrize("kwargs, err, name", [
    ({"n_clients": 0}, InvalidParameterError, "n_clients"),
    ({"alpha": 0.0}, InvalidParameterError, "alpha"),
    ({"alpha": -1.0}, InvalidParameterError, "alpha"),
    ({"alpha": float("nan")}, InvalidParameterError, "alpha"),
    ({"min_size": 11}, InvalidParameterError, "min_size"),
    ({"min_size": -1}, InvalidParameterError, "min_size"),
    ({"task": "ranking"}, InvalidParameterError, "task"),
    ({"seed": -3}, InvalidParameterError, "seed"),
    ({"n_bins": 0}, InvalidParameterError, "n_bins"),
])
def test_dirichlet_partition_bad_arguments(kwargs, err, name):
    X, y = np.zeros((20, 2)), np.tile([1.0, -1.0], 10)
    args = {"n_clients": 2, "alpha": 1.0, **kwargs}
    with pytest.raises(err, match=name):
        ds.dirichlet_partition(X, y, **args)


def test_dirichlet_partition_bad_data_and_impossible_min_size():
    with pytest.raises(InvalidDataError, match="rows"):
        ds.dirichlet_partition(np.zeros((5, 2)), np.ones(4), 2, 1.0)
    with pytest.raises(InvalidDataError, match="X"):
        ds.dirichlet_partition(np.full((4, 2), np.nan), np.ones(4), 2, 1.0)
    with pytest.raises(InvalidDataError, match="y"):
        ds.dirichlet_partition(np.zeros((4, 2)), np.ones((4, 1)), 2, 1.0)
    # one class, alpha tiny, 10 clients, 10 rows with min_size 1: a single client takes almost
    # everything, so the retries fail and the error says what to change
    y = np.ones(10)
    with pytest.raises(InvalidParameterError, match="alpha"):
        ds.dirichlet_partition(np.zeros((10, 1)), y, 10, 1e-3, seed=0, max_tries=20)


def test_iid_partition():
    idx = ds.iid_partition(23, 4, seed=1)
    assert sorted(len(i) for i in idx) == [5, 6, 6, 6]
    assert np.array_equal(np.sort(np.concatenate(idx)), np.arange(23))
    with pytest.raises(InvalidParameterError, match="n_clients"):
        ds.iid_partition(3, 4)
    with pytest.raises(InvalidParameterError, match="n_clients"):
        ds.iid_partition(3, 0)


# ------------------------------------------------------------------------------- scikit-learn
if HAVE_SKLEARN:
    import sklearn.datasets as skd


def _rows_multiset_equal(A, B):
    """Same multiset of rows (order-free), exact."""
    if A.shape != B.shape:
        return False
    ka, kb = np.lexsort(A.T[::-1]), np.lexsort(B.T[::-1])
    return np.array_equal(A[ka], B[kb])


@needs_sklearn
def test_breast_cancer():
    raw = skd.load_breast_cancer()
    fed = ds.breast_cancer(n_clients=4, alpha=0.5, seed=1)
    assert fed.task == "classification" and fed.n_clients == 4 and fed.dim == 31
    X, y, _ = fed.pooled()
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert int((y == 1).sum()) == int((raw.target == 1).sum()) == 357   # +1 = benign
    assert np.array_equal(X[:, 0], np.ones(569))
    Z = (raw.data - raw.data.mean(0)) / raw.data.std(0)                 # pooled, ddof=0
    assert np.allclose(X[:, 1:].mean(0), 0, atol=1e-10) and np.allclose(X[:, 1:].std(0), 1)
    full = np.column_stack([y, X[:, 1:]])
    expect = np.column_stack([2.0 * raw.target - 1.0, Z])
    assert np.allclose(full[np.lexsort(full.T[::-1])], expect[np.lexsort(expect.T[::-1])])
    # determinism and the iid option
    assert _same_fed(fed, ds.breast_cancer(n_clients=4, alpha=0.5, seed=1))
    iid = ds.breast_cancer(n_clients=5, partition="iid", standardize=False, add_intercept=False)
    assert iid.dim == 30 and sorted(iid.sizes.tolist()) == [113, 114, 114, 114, 114]
    Xi, yi, _ = iid.pooled()
    assert _rows_multiset_equal(np.column_stack([yi, Xi]),
                                np.column_stack([2.0 * raw.target - 1.0, raw.data]))


@needs_sklearn
def test_diabetes():
    raw = skd.load_diabetes(scaled=False)
    fed = ds.diabetes(n_clients=3, seed=0)
    assert fed.task == "regression" and fed.dim == 11 and fed.sizes.sum() == 442
    X, y, _ = fed.pooled()
    assert np.array_equal(np.sort(y), np.sort(raw.target))
    Z = (raw.data - raw.data.mean(0)) / raw.data.std(0)
    assert _rows_multiset_equal(np.column_stack([y, X[:, 1:]]).round(12),
                                np.column_stack([raw.target, Z]).round(12))
    fs = ds.diabetes(n_clients=2, partition="iid", standardize_target=True)
    _, ys, _ = fs.pooled()
    assert abs(ys.mean()) < 1e-12 and abs(ys.std() - 1) < 1e-12


@needs_sklearn
@pytest.mark.parametrize("fn", [ds.breast_cancer, ds.diabetes])
@pytest.mark.parametrize("kwargs, name", [({"n_clients": 0}, "n_clients"),
                                          ({"alpha": 0.0}, "alpha"),
                                          ({"partition": "random"}, "partition"),
                                          ({"n_clients": 1000}, "n_clients|min_size")])
def test_sklearn_loaders_bad_arguments(fn, kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        fn(**kwargs)


# ------------------------------------------------------------------------------- Adult
REPOSITORY = Path(__file__).resolve().parents[1]
#: the workspace's independent reference copy of a8a, looked up next to the repository (its
#: ``../shared``, or two levels up for a git worktree): never an absolute machine path
SHARED_ADULT = next((p for p in (REPOSITORY.parent / "shared/data/adult-a8a",
                                 REPOSITORY.parent.parent / "shared/data/adult-a8a") if p.exists()),
                    REPOSITORY.parent / "shared/data/adult-a8a")
SHIPPED_ADULT = Path(ds.__file__).parent / "_data"
# the raw-file checks read the shared reference copy when this machine has it (the project's
# workspace), else the shipped copy (a fresh clone); the byte-equality test below ties the two together
RAW_ADULT = SHARED_ADULT if SHARED_ADULT.exists() else SHIPPED_ADULT
needs_shared = pytest.mark.skipif(not SHARED_ADULT.exists(),
                                  reason="the shared reference copy of a8a is not on this machine")


@functools.lru_cache(maxsize=2)
def _plain_read(fname):
    """Plain-Python LIBSVM reader (independent of drflmodel's parser)."""
    import gzip

    rows, ys = [], []
    with gzip.open(RAW_ADULT / fname, "rt") as fh:
        for line in fh:
            tok = line.split()
            if not tok:
                continue
            ys.append(float(tok[0]))
            row = np.zeros(123)
            for t in tok[1:]:
                i, v = t.split(":")
                row[int(i) - 1] = float(v)
            rows.append(row)
    return np.array(rows), np.array(ys)


def _shared_a8a(split="train"):
    files = {"train": ["a8a.gz"], "test": ["a8a.t.gz"], "all": ["a8a.gz", "a8a.t.gz"]}[split]
    parts = [_plain_read(f) for f in files]
    return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@needs_shared
def test_shipped_adult_equals_the_shared_copy():
    from importlib import resources

    for f in ("a8a.gz", "a8a.t.gz"):
        shipped = resources.files("drflmodel").joinpath("_data").joinpath(f).read_bytes()
        assert shipped == (SHARED_ADULT / f).read_bytes()
    total = sum(p.stat().st_size for p in Path(ds.__file__).parent.joinpath("_data").iterdir())
    assert total < 1.5e6
    # our parser agrees with a plain reader and with scikit-learn's LIBSVM reader
    for split, f in (("train", "a8a.gz"), ("test", "a8a.t.gz")):
        X, y = ds._adult_raw(split)
        Xr, yr = _shared_a8a(split)
        assert np.array_equal(X, Xr) and np.array_equal(y, yr)
        if HAVE_SKLEARN:
            Xs, ys_ = skd.load_svmlight_file(str(SHARED_ADULT / f), n_features=123)
            assert np.array_equal(X, Xs.toarray()) and np.array_equal(y, ys_)


def test_adult_sex_columns_and_which_is_female():
    """The evidence recorded at ADULT_FEMALE_COLUMN, recomputed from the raw file."""
    X, y = _shared_a8a("train")
    f, m = X[:, 71], X[:, 72]
    assert np.array_equal(f + m, np.ones(len(y)))                     # exactly one per row
    assert (f.sum(), m.sum()) == (7466, 15230)
    assert 0.30 < f.mean() < 0.36                                     # ~1:2 female:male
    assert (y[f == 1] == 1).mean() < 0.12 < 0.30 < (y[m == 1] == 1).mean()
    wife, husband = X[:, 60] == 1, X[:, 62] == 1
    assert f[wife].mean() > 0.99 and m[husband].mean() > 0.999
    Xt, _ = _shared_a8a("test")
    assert np.array_equal(Xt[:, 71] + Xt[:, 72], np.ones(len(Xt)))
    assert ds.ADULT_FEMALE_COLUMN == 72 and ds.ADULT_MALE_COLUMN == 73


@pytest.mark.parametrize("split", ["train", "test", "all"])
def test_adult_vertical_matches_the_raw_file(split):
    Xr, yr = _shared_a8a(split)
    v = ds.adult(split=split)
    assert isinstance(v, dm.VerticalFederation)
    assert v.n_samples == len(yr) and v.n_parties == 6 and v.active == [0]
    assert np.array_equal(v.y, yr)
    assert np.array_equal(v.in_a, Xr[:, 71] == 1) and np.array_equal(v.in_b, Xr[:, 72] == 1)
    assert np.array_equal(v.N_a, (Xr[:, 71] == 1) & (yr == 1))
    assert np.array_equal(v.N_b, (Xr[:, 72] == 1) & (yr == 1))
    # features: intercept + every raw column except 72/73, in order, split into contiguous blocks
    assert v.dim == 1 + 121
    assert np.array_equal(v.blocks[0][:, 0], np.ones(len(yr)))
    keep = [c for c in range(123) if c not in (71, 72)]
    assert np.array_equal(v.X[:, 1:], Xr[:, keep])
    names = [n for blk in v.feature_names for n in blk]
    assert names[0] == "intercept" and len(names) == v.dim
    assert [int(n.split(":")[1]) for n in names[1:]] == [c + 1 for c in keep]
    assert [len(b) for b in v.feature_names] == v.block_sizes


def test_adult_attribute_blocks():
    attrs = [a for a, _, _ in ds.ADULT_ATTRIBUTES if a != "sex"]
    size = {a: b - c + 1 for a, c, b in ds.ADULT_ATTRIBUTES}
    for K in range(1, 14):
        runs = ds.adult_attribute_blocks(K)
        assert len(runs) == K and all(runs)
        assert [a for r in runs for a in r] == attrs                   # contiguous, in order
        biggest = max(sum(size[a] for a in r) for r in runs)
        assert biggest == (121 if K == 1 else 41 if K >= 3 else biggest)
    # K = 2: brute force the best largest block independently
    sizes = [size[a] for a in attrs]
    best = min(max(sum(sizes[:c]), sum(sizes[c:])) for c in range(1, 13))
    assert max(sum(size[a] for a in r) for r in ds.adult_attribute_blocks(2)) == best
    assert len(ds.adult_attribute_blocks(14, drop_sensitive=False)) == 14


@pytest.mark.parametrize("kwargs, name", [
    ({"n_parties": 14}, "n_parties"), ({"n_parties": 0}, "n_parties"),
    ({"n_parties": 15, "drop_sensitive": False}, "n_parties"),
    ({"active": [6]}, "active"), ({"active": []}, "active"), ({"active": [-1]}, "active"),
    ({"split": "validation"}, "split"), ({"n_samples": 3}, "n_samples"),
    ({"n_samples": 10**6}, "n_samples"), ({"seed": -1, "n_samples": 100}, "seed"),
])
def test_adult_bad_arguments(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        ds.adult(**kwargs)


def test_adult_subsample_is_stratified_and_seeded():
    full = ds.adult()
    strata = 2 * full.group + (full.y > 0)
    counts = np.bincount(strata, minlength=4)
    v = ds.adult(n_samples=1000, seed=3)
    assert v.n_samples == 1000
    sub = np.bincount(2 * v.group + (v.y > 0), minlength=4)
    assert sub.sum() == 1000
    assert np.all(np.abs(sub - 1000 * counts / counts.sum()) < 1.0)   # largest-remainder rounding
    v2 = ds.adult(n_samples=1000, seed=3)
    assert np.array_equal(v.X, v2.X) and np.array_equal(v.y, v2.y)
    v3 = ds.adult(n_samples=1000, seed=4)
    assert not np.array_equal(v.X, v3.X)
    # subsampled rows are rows of the full data (as multisets of (x, y, group))
    F = np.column_stack([full.X, full.y, full.group])
    S = np.column_stack([v.X, v.y, v.group])
    Fu = {tuple(r) for r in F}
    assert all(tuple(r) in Fu for r in S)
    tiny = ds.adult(n_samples=4, seed=0)       # every group x label cell gets a row
    assert tiny.N_a.sum() == 1 and tiny.N_b.sum() == 1


def test_adult_options():
    v = ds.adult(n_parties=3, active=[1, 2], add_intercept=False, drop_sensitive=False)
    assert v.dim == 123 and v.n_parties == 3 and v.active == [1, 2]
    assert "intercept" not in [n for b in v.feature_names for n in b]
    v2 = ds.adult(n_parties=4, active=[2])
    assert v2.feature_names[2][0] == "intercept" and v2.block_sizes[0] == sum(
        b - a + 1 for name, a, b in ds.ADULT_ATTRIBUTES if name in v2.attributes[0])


def test_adult_horizontal():
    f = ds.adult_horizontal(partition="attribute", attribute="sex")
    assert f.names == ["female", "male"] and f.sizes.tolist() == [7466, 15230]
    assert f.dim == 1 + 121 and f.task == "classification"
    f2 = ds.adult_horizontal(n_clients=4, alpha=0.3, n_samples=3000, seed=2)
    assert f2.n_clients == 4 and f2.sizes.sum() == 3000
    assert _same_fed(f2, ds.adult_horizontal(n_clients=4, alpha=0.3, n_samples=3000, seed=2))
    f3 = ds.adult_horizontal(partition="attribute", attribute="workclass", drop_sensitive=False)
    X, _ = ds._adult_raw("train")
    assert f3.names[-1] == "workclass:none"
    assert f3.sizes[-1] == int((X[:, 5:13].sum(1) == 0).sum()) == 1260
    assert f3.dim == 124
    with pytest.raises(InvalidParameterError, match="n_clients"):
        ds.adult_horizontal(n_clients=3, partition="attribute", attribute="sex")
    with pytest.raises(InvalidParameterError, match="attribute"):
        ds.adult_horizontal(partition="attribute", attribute="zodiac")
    with pytest.raises(InvalidParameterError, match="attribute"):
        ds.adult_horizontal(partition="iid", attribute="sex")
    with pytest.raises(InvalidParameterError, match="partition"):
        ds.adult_horizontal(partition="by-sex")


# ------------------------------------------------------------------------------- synthetic vertical
def test_synthetic_vertical_recipe():
    v, p = ds.synthetic_vertical(n_samples=200, dim=7, n_parties=3, group_shift=2.0, seed=5,
                                 return_params=True)
    assert v.block_sizes == [1 + 3, 2, 2] and v.active == [0]
    rng = np.random.default_rng(5)
    w = rng.standard_normal(7)
    g = (rng.random(200) < 0.5).astype(int)
    Z = rng.standard_normal((200, 7))
    U = rng.random(200)
    X = Z + np.where(g == 1, 1.0, -1.0)[:, None] * (w / np.linalg.norm(w))   # shift/2 = 1
    assert np.array_equal(p["w"], w) and np.array_equal(v.group, g)
    assert np.allclose(v.X[:, 1:], X, atol=1e-12)
    assert np.array_equal(v.y, np.where(U < 1 / (1 + np.exp(-X @ w)), 1.0, -1.0))


def test_synthetic_vertical_group_shift_controls_the_gap():
    def gap(shift):
        v = ds.synthetic_vertical(n_samples=20000, dim=5, group_shift=shift, seed=0)
        return (v.y[v.in_b] == 1).mean() - (v.y[v.in_a] == 1).mean()
    g0, g1, g3 = gap(0.0), gap(1.0), gap(3.0)
    assert abs(g0) < 0.03 and g1 > 0.1 and g3 > g1 + 0.1


@pytest.mark.parametrize("kwargs, name", [({"n_parties": 11}, "n_parties"), ({"dim": 0}, "dim"),
                                          ({"group_shift": -1.0}, "group_shift"),
                                          ({"n_samples": 1}, "n_samples"), ({"active": [3]}, "active")])
def test_synthetic_vertical_bad_arguments(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        ds.synthetic_vertical(**kwargs)


def test_imbalance():
    fed = ds.synthetic_regression(n_clients=10, samples=[20 + i for i in range(10)], seed=0)
    out = ds.imbalance(fed, client_fraction=0.3, drop=0.7, seed=1)
    assert out.names == fed.names and out.task == fed.task
    shrunk = [i for i in range(10) if out.sizes[i] < fed.sizes[i]]
    assert len(shrunk) == 3
    for i in range(10):
        if i in shrunk:
            assert out.sizes[i] == round(0.3 * fed.sizes[i])
            # kept rows are rows of the original client, in order
            pos = [int(np.flatnonzero((fed.clients[i].X == r).all(1))[0]) for r in out.clients[i].X]
            assert pos == sorted(pos) and len(set(pos)) == len(pos)
            assert np.array_equal(out.clients[i].y, fed.clients[i].y[pos])
        else:
            assert np.array_equal(out.clients[i].X, fed.clients[i].X)
    assert _same_fed(out, ds.imbalance(fed, 0.3, 0.7, seed=1))
    assert _same_fed(ds.imbalance(fed, 0.0, 0.7), fed)
    for kw, name in [({"client_fraction": 1.5}, "client_fraction"), ({"drop": 1.0}, "drop"),
                     ({"drop": -0.1}, "drop")]:
        with pytest.raises(InvalidParameterError, match=name):
            ds.imbalance(fed, **kw)
    with pytest.raises(InvalidDataError, match="federation"):
        ds.imbalance([1, 2])


def test_shipped_data_is_declared_as_package_data():
    """pyproject's package-data globs cover every file in drflmodel/_data (so wheels ship them;
    verified once by building a wheel: the three files are in it)."""
    import fnmatch

    tomllib = pytest.importorskip("tomllib")
    root = Path(ds.__file__).parent.parent
    if not (root / "pyproject.toml").exists():
        pytest.skip("not running from a source checkout")
    cfg = tomllib.loads((root / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["drflmodel"]
    files = sorted(p.name for p in SHIPPED_ADULT.iterdir() if p.is_file())
    assert {"a8a.gz", "a8a.t.gz", "README.md"} <= set(files)
    for f in files:
        assert any(fnmatch.fnmatch(f"_data/{f}", g) for g in globs), f


def test_partition_helpers_take_flower_datasets_names():
    """num_partitions / min_partition_size / partition_by (Flower Datasets' names) mean n_clients /
    min_size / the column drawn per value; the old names keep working; the default seed is 42."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 2)), rng.choice([-1.0, 1.0], size=200)
    old = ds.dirichlet_partition(X, y, 4, 0.5, seed=42, min_size=5, return_indices=True)
    new = ds.dirichlet_partition(X, y, alpha=0.5, num_partitions=4, min_partition_size=5, return_indices=True)
    assert all(np.array_equal(a, b) for a, b in zip(old, new))            # same draw, seed 42 by default
    assert min(len(p) for p in new) >= 5
    site = rng.choice(["a", "b", "c", "d"], size=200)
    by_site = ds.dirichlet_partition(X, y, alpha=0.05, num_partitions=4, partition_by=site, return_indices=True)
    by_label = ds.dirichlet_partition(X, y, alpha=0.05, num_partitions=4, return_indices=True)
    assert sorted(np.concatenate(by_site).tolist()) == list(range(200))
    assert any(not np.array_equal(a, b) for a, b in zip(by_site, by_label))
    # each value of partition_by is split by its own Dirichlet draw: with a tiny alpha most of a
    # value's rows land in one partition
    for value in "abcd":
        rows = np.flatnonzero(site == value)
        share = max(np.isin(rows, part).mean() for part in by_site)
        assert share > 0.5, value
    assert all(np.array_equal(a, b) for a, b in zip(ds.iid_partition(23, num_partitions=4), ds.iid_partition(23, 4, 42)))
    with pytest.raises(InvalidParameterError, match="n_clients and num_partitions name the same argument"):
        ds.iid_partition(23, 3, num_partitions=4)
    with pytest.raises(InvalidParameterError, match="min_size and min_partition_size"):
        ds.dirichlet_partition(X, y, 4, 0.5, min_size=2, min_partition_size=3)
    with pytest.raises(InvalidParameterError, match="n_clients \\(or num_partitions\\) is required"):
        ds.iid_partition(23)
    with pytest.raises(InvalidParameterError, match="partition_by must hold one value per row"):
        ds.dirichlet_partition(X, y, 4, 0.5, partition_by=site[:10])
