"""Tests of drflmodel.datasets: real data against direct computations from the source files,
synthetic recipes against their written definitions, partitions, determinism, bad arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import datasets as ds
from drflmodel.errors import InvalidDataError, InvalidParameterError

pd = pytest.importorskip("pandas")
pytest.importorskip("palmerpenguins")


# ------------------------------------------------------------------------------- helpers
def _penguins_csv() -> "pd.DataFrame":
    """The package's CSV read directly with pandas (not through palmerpenguins' loader)."""
    import palmerpenguins

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
