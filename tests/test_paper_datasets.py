"""The DRFL paper's benchmark sets (breast-cancer Original, heart, abalone): counts, balance and
ranges against the shipped README (``../shared/data/drfl-benchmarks/README.md``) and UCI's own
documented statistics, which are independent of the loaders."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np
import pytest

from drflmodel import datasets as ds
from drflmodel._drfl_benchmarks import ABALONE_SEX_CODES, libsvm_scale
from drflmodel.errors import InvalidDataError, InvalidParameterError

#: UCI ``abalone.names``: (min, max) of the seven measurements, and the rings range.
UCI_ABALONE_RANGES = {"Length": (0.075, 0.815), "Diameter": (0.055, 0.650), "Height": (0.0, 1.130),
                      "Whole": (0.002, 2.826), "Shucked": (0.001, 1.488), "Viscera": (0.001, 0.760),
                      "Shell": (0.002, 1.005)}


def _class_counts(y):
    return {float(k): int(v) for k, v in zip(*np.unique(y, return_counts=True))}


def test_breast_cancer_original_counts_and_balance_match_the_readme():
    X, y = ds.breast_cancer_original(return_X_y=True)
    assert X.shape == (683, 9)
    assert _class_counts(y) == {-1.0: 444, 1.0: 239}
    X10, y10 = ds.breast_cancer_original(return_X_y=True, keep_code_number=True)
    assert X10.shape == (683, 10) and np.array_equal(y10, y)
    assert np.array_equal(X10[:, 1:], X)


def test_breast_cancer_clinical_attributes_are_scaled_integers_1_to_10():
    """Each clinical attribute is an integer 1..10 before LIBSVM's scaling, so 9(x'+1)/2 + 1 is an
    integer in 1..10 and both ends of [-1, 1] are reached (the data's min 1 and max 10)."""
    X, _ = ds.breast_cancer_original(return_X_y=True)
    raw = 9.0 * (X + 1.0) / 2.0 + 1.0
    assert np.allclose(raw, np.round(raw), atol=1e-5)
    assert raw.min() == pytest.approx(1.0) and raw.max() == pytest.approx(10.0)
    assert np.allclose(X.min(axis=0), -1.0) and np.allclose(X.max(axis=0), 1.0)


def test_breast_cancer_code_number_column_is_the_scaled_identifier():
    """Feature 1 takes many distinct values (an identifier), unlike the 10-level attributes."""
    X10, _ = ds.breast_cancer_original(return_X_y=True, keep_code_number=True)
    assert len(np.unique(X10[:, 0])) > 500
    assert all(len(np.unique(X10[:, j])) <= 10 for j in range(1, 10))


def test_heart_counts_balance_and_ranges_match_the_readme():
    X, y = ds.heart(return_X_y=True)
    assert X.shape == (270, 13)
    assert _class_counts(y) == {-1.0: 150, 1.0: 120}
    assert X.min() >= -1.0 and X.max() <= 1.0
    assert np.allclose(X.min(axis=0), -1.0) and np.allclose(X.max(axis=0), 1.0)


def test_heart_zero_entries_omitted_in_the_file_are_zeros():
    """LIBSVM omits zero entries: the number of stored pairs equals the number of nonzeros."""
    ref = resources.files("drflmodel").joinpath("_data").joinpath("heart_scale.gz")
    with gzip.open(ref.open("rb"), "rt") as f:
        stored = sum(line.count(":") for line in f)
    X, _ = ds.heart(return_X_y=True)
    assert stored == np.count_nonzero(X)


def test_abalone_counts_and_sex_encoding():
    X, rings = ds.abalone(return_X_y=True)
    assert X.shape == (4177, 8)
    assert rings.min() == 1 and rings.max() == 29 and np.all(rings == np.round(rings))
    assert rings.mean() == pytest.approx(9.934, abs=5e-4)             # UCI abalone.names
    # UCI counts of Sex: M 1528, F 1307, I 1342; coded 1/2/3 then scaled -> -1, 0, +1
    assert ABALONE_SEX_CODES == {"M": 1.0, "F": 2.0, "I": 3.0}
    assert _class_counts(X[:, 0]) == {-1.0: 1528, 0.0: 1307, 1.0: 1342}


def test_abalone_measurements_are_scaled_with_ucis_documented_ranges():
    """Unscale each measurement with UCI's published (min, max); the first UCI row is
    M, 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15, rings 15."""
    X, rings = ds.abalone(return_X_y=True)
    lo = np.array([r[0] for r in UCI_ABALONE_RANGES.values()])
    hi = np.array([r[1] for r in UCI_ABALONE_RANGES.values()])
    raw = lo + (X[:, 1:] + 1.0) / 2.0 * (hi - lo)
    first = [0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15]
    # UCI prints the ranges to 3 decimals: exact for length/diameter/height, rounded for the weights
    assert np.allclose(raw[0, :3], first[:3], atol=1e-9)
    assert np.allclose(raw[0], first, atol=1e-3)
    assert X[0, 0] == -1.0 and rings[0] == 15.0
    assert X[0, 1] == pytest.approx(0.027027, abs=1e-6)               # LIBSVM abalone_scale row 1


def test_loaders_return_federations_split_over_clients():
    for loader, n in ((ds.breast_cancer_original, 683), (ds.heart, 270), (ds.abalone, 4177)):
        fed = loader(n_clients=3, seed=1)
        assert fed.n_clients == 3 and sum(fed.sizes) == n
        assert max(fed.sizes) - min(fed.sizes) <= 1
        with_ones = loader(n_clients=2, add_intercept=True, seed=1)
        assert np.all(with_ones.clients[0].X[:, 0] == 1.0)
    assert ds.abalone(n_clients=2).task == "regression"
    assert ds.heart(n_clients=2).task == "classification"


def test_loaders_are_deterministic_and_seeded():
    a, b, c = ds.heart(seed=3), ds.heart(seed=3), ds.heart(seed=4)
    assert all(np.array_equal(p.X, q.X) for p, q in zip(a.clients, b.clients))
    assert not all(np.array_equal(p.X, q.X) for p, q in zip(a.clients, c.clients))


@pytest.mark.parametrize("kwargs, name", [
    ({"n_clients": 0}, "n_clients"), ({"n_clients": 10_000}, "n_clients"),
    ({"partition": "random"}, "partition"), ({"return_X_y": "yes"}, "return_X_y"),
    ({"add_intercept": 1}, "add_intercept"),
])
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        ds.heart(**kwargs)


def test_bad_keep_code_number():
    with pytest.raises(InvalidParameterError, match="keep_code_number"):
        ds.breast_cancer_original(keep_code_number="no")


def test_libsvm_scale_refuses_a_constant_column():
    with pytest.raises(InvalidDataError, match="constant column"):
        libsvm_scale(np.array([[1.0, 2.0], [1.0, 3.0]]))
    assert np.array_equal(libsvm_scale([[0.0], [5.0], [10.0]]).ravel(), [-1.0, 0.0, 1.0])
