"""float32 features (issue 41 item 6): kept in float32, no float64 copy of X, products in float64.

Every float32 number is a float64 number, so a federation given float32 features is the float64
problem on those same (rounded) features; the routes that keep float32 (``sqp``,
``hessian_free`` of FederatedDRO) must compute its products in float64
(drflmodel/_float64_products.py) and so give a certificate of that float64 problem."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import _float64_products as fp


def _arrays(rows, n_clients, seed=0):
    fed = dm.datasets.gaussian_mixture(rows, 29, 2, n_clients=n_clients, alpha=1.0, seed=seed)
    return [c.X.astype(np.float32) for c in fed.clients], [c.y for c in fed.clients]


def test_float32_features_are_kept_and_the_float64_view_is_exact():
    Xs, ys = _arrays(600, 3)
    fed = dm.Federation.from_arrays(Xs, ys, task="classification")
    assert all(c.features.dtype == np.float32 for c in fed.clients)
    assert fed.stacked.X.dtype == np.float32
    c = fed.clients[0]
    assert c.X.dtype == np.float64 and np.array_equal(c.X, Xs[0].astype(np.float64))
    float64 = dm.Federation.from_arrays([x.astype(float) for x in Xs], ys, task="classification")
    assert float64.stacked.X.dtype == np.float64                     # float64 input: unchanged


def test_products_accumulate_in_float64(monkeypatch):
    """Rows of 2^24 + 1 in float32 arithmetic would lose the 1; the helpers keep it."""
    monkeypatch.setattr(fp, "CHUNK_ROWS", 3)
    X = np.array([[2.0 ** 12], [1.0], [2.0 ** 12], [1.0], [3.0]], np.float32)
    assert fp.gram(X)[0, 0] == 2 * 2.0 ** 24 + 2 + 9
    assert fp.t_times(X, np.ones(5))[0] == 2 * 2.0 ** 12 + 5
    assert fp.row_squared_norms(np.array([[2.0 ** 12, 1.0]], np.float32))[0] == 2.0 ** 24 + 1
    assert np.array_equal(fp.times(X, np.array([[1.0 + 2.0 ** -40]])).ravel(),
                          X.astype(float).ravel() * (1.0 + 2.0 ** -40))


@pytest.mark.parametrize("method", ["sqp", "hessian_free", "hessian_sqp"])
@pytest.mark.parametrize("weights", ["cvar", "chi_square"])
def test_the_float32_certificate_contains_the_float64_optimum_of_the_same_data(method, weights):
    Xs, ys = _arrays(1500, 4, seed=3)
    make = (lambda: dm.sets.CVaR(4, 0.5)) if weights == "cvar" else (lambda: dm.sets.ChiSquare(4, 0.5))
    f32 = dm.Federation.from_arrays(Xs, ys, task="classification")
    sol = dm.FederatedDRO(f32, dm.losses.Logistic(), make(), l2=1e-2).solve(method=method)
    f64 = dm.Federation.from_arrays([x.astype(np.float64) for x in Xs], ys, task="classification")
    ref = dm.FederatedDRO(f64, dm.losses.Logistic(), make(), l2=1e-2).solve(method="conic")
    assert sol.status == "optimal" and ref.status == "optimal"
    slack = 1e-12 * max(1.0, abs(ref.value))
    assert sol.lower_bound <= ref.upper_bound + slack and ref.lower_bound <= sol.upper_bound + slack
    assert sol.value == pytest.approx(ref.value, rel=2e-6)              # both within gap_tol = 1e-6


@pytest.mark.parametrize("method", ["sqp", "hessian_free", pytest.param("hessian_sqp", marks=pytest.mark.slow)])
def test_no_float64_copy_of_the_features(method, monkeypatch):
    """tracemalloc over building the federation and the problem, then over the solve: float32
    features use at most 60 % of the float64 build's memory (a float64 copy of X would add 100 %
    of the float64 X) and the solve's peak stays within a quarter of X's float64 size of the
    float64 solve's (a float64 copy of X in a product would add a whole one)."""
    monkeypatch.setattr(fp, "CHUNK_ROWS", 1024)
    Xs, ys = _arrays(40_000, 10, seed=1)
    # warm-up on the same rows: the modules a solve of this size imports (SciPy's) are not measured
    dm.FederatedDRO(dm.Federation.from_arrays([x.astype(np.float64) for x in Xs], ys, task="classification"),
                    dm.losses.Logistic(), dm.sets.CVaR(10, 0.3), l2=1e-3).solve(method=method)
    x64 = sum(x.size for x in Xs) * 8
    measured = {}
    for label, arrays in (("float32", Xs), ("float64", [x.astype(np.float64) for x in Xs])):
        tracemalloc.start()
        try:
            fed = dm.Federation.from_arrays(arrays, ys, task="classification")
            prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(10, 0.3), l2=1e-3)
            built = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            sol = prob.solve(method=method)
            solve_peak = tracemalloc.get_traced_memory()[1] - built
        finally:
            tracemalloc.stop()
        assert sol.status == "optimal"
        measured[label] = built, solve_peak
        del arrays
    (b32, s32), (b64, s64) = measured["float32"], measured["float64"]
    assert b32 <= 0.6 * b64, (b32 / x64, b64 / x64)
    assert s32 <= s64 + 0.25 * x64, (s32 / x64, s64 / x64)


def test_active_set_keeps_float32_features_and_certifies_the_float64_problem(monkeypatch):
    """The active-set route (hinge loss) on float32 rows: no float64 copy of X during the solve (its
    peak within a quarter of X's float64 size of the float64 solve's) and the same certified
    interval as the conic route on the float64 copy."""
    monkeypatch.setattr(fp, "CHUNK_ROWS", 1024)
    Xs, ys = _arrays(20_000, 4, seed=5)
    x64 = sum(x.size for x in Xs) * 8
    peaks, sols = {}, {}
    # warm-up (not measured): the modules and compiled models a solve of this kind loads once
    dm.FederatedDRO(dm.Federation.from_arrays([x[:2000].astype(np.float64) for x in Xs], [y[:2000] for y in ys],
                                              task="classification"), dm.losses.Hinge(), dm.sets.CVaR(4, 0.5),
                    l2=1e-2).solve(method="active_set")
    for label, arrays in (("float64", [x.astype(np.float64) for x in Xs]), ("float32", Xs)):
        prob = dm.FederatedDRO(dm.Federation.from_arrays(arrays, ys, task="classification"), dm.losses.Hinge(),
                               dm.sets.CVaR(4, 0.5), l2=1e-2)
        prob.objectives.stacked_as_stored                 # the problem's own arrays, built before measuring
        tracemalloc.start()
        try:
            sols[label] = prob.solve(method="active_set")
            peaks[label] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert sols["float32"].info["method"] == "active_set" and sols["float32"].status == "optimal"
    assert peaks["float32"] <= peaks["float64"] + 0.25 * x64, (peaks["float32"] / x64, peaks["float64"] / x64)
    ref, sol = sols["float64"], sols["float32"]
    slack = 1e-9 * max(1.0, abs(ref.value))
    assert sol.lower_bound <= ref.upper_bound + slack and ref.lower_bound <= sol.upper_bound + slack
