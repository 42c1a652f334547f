"""Issue 44: the answer checks' allowances derived from rounding (checks.Magnitudes), on the clients
that broke the former fixed allowance -- a 3-row site of a 9-class, nearly separable softmax (its
Hessian's diagonal cancels: "Hessian PSD" rejected it), the bound terms computed by a second code
path ("bound magnitudes") -- and on tiny, separable, badly scaled clients of every loss through the
server's CheckedChannel; lies a little beyond the allowance are still caught."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import CheckedChannel, LocalChannel, Site
from drflmodel.client_oracle import checks as C
from drflmodel.client_oracle.protocol import unpack_symmetric

SOFTMAX = dm.losses.Multinomial()


def _saturated_softmax(seed: int, K: int = 9, N: int = 3):
    """A 3-row site, 9 classes, columns scaled 10^U(-3, 3) on odd seeds, at a point of large margins."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 30))
    scale = 10 ** rng.uniform(-3, 3, size=d) if seed % 2 else np.ones(d)
    X = rng.normal(size=(N, d)) * scale
    X[:, 0] = 1.0
    y = rng.integers(0, K, N).astype(float)
    site = Site(X, y, SOFTMAX, n_outputs=K)
    theta = (rng.normal(size=(d, K)) / scale[:, None] * 10 ** rng.uniform(0, 2)).T.reshape(-1)
    mags = C.Magnitudes(rows=N, dim=K * d, outputs=K, row_norm=float(np.max(np.linalg.norm(X, axis=1))),
                        lipschitz=SOFTMAX.lipschitz, smoothness=SOFTMAX.smoothness)
    return site, theta, mags, d


def test_saturated_softmax_hessians_of_a_three_row_site_pass_and_the_fixed_allowance_rejected_them():
    derived, fixed = [], []
    for seed in range(60):
        site, theta, mags, d = _saturated_softmax(seed)
        H = unpack_symmetric(site.answer("evaluate", {"theta": theta}, {"hessian": True})["hessian"], 9 * d)
        derived.append(C.hessian_psd(H, mags))
        fixed.append(C.hessian_psd(H))                   # the former allowance (no magnitudes): the rejections
    assert [str(v) for v in derived if v is not None] == []
    assert sum(v is not None for v in fixed) >= 10       # the false rejections, reproduced


def test_bound_terms_of_a_saturated_softmax_site_pass_against_its_evaluate_answer():
    derived, fixed = [], []
    for seed in range(60):
        site, theta, _, d = _saturated_softmax(seed)
        value = float(site.answer("evaluate", {"theta": theta})["value"][0])
        grad = site.answer("evaluate", {"theta": theta})["gradient"][d * np.arange(9)]
        terms = site.answer("bound_terms", {"theta": theta}, {"intercept_column": 0, "columns": 1})
        derived.append(C.bound_terms(terms, 9, SOFTMAX.smoothness, value, grad, theta, 3, d))
        fixed.append(C.bound_terms(terms, 9, SOFTMAX.smoothness, value, grad))
    assert [str(v) for v in derived if v is not None] == []
    assert sum(v is not None for v in fixed) >= 5


def test_a_value_errs_within_its_derived_allowance_against_an_extended_precision_reference():
    """Magnitudes.value_error against the mean loss recomputed in long double (an independent route)."""
    if np.finfo(np.longdouble).eps >= np.finfo(float).eps:
        pytest.skip("no extended precision on this platform")
    rng = np.random.default_rng(5)
    worst = 0.0
    for trial in range(30):
        N, d = int(rng.integers(1, 40)), int(rng.integers(2, 30))
        X = rng.normal(size=(N, d)) * 10 ** rng.uniform(-3, 3, size=d)
        y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
        theta = rng.normal(size=d) * 10 ** rng.uniform(-3, 1, size=d)
        site = Site(X, y, dm.losses.Logistic())
        value = float(site.answer("values", {"theta": theta})["value"][0])
        z = y.astype(np.longdouble) * (X.astype(np.longdouble) @ theta.astype(np.longdouble))
        exact = float(np.mean(np.logaddexp(np.longdouble(0), -z)))
        mags = C.Magnitudes(rows=N, dim=d, row_norm=float(np.max(np.linalg.norm(X, axis=1))), lipschitz=1.0,
                            smoothness=0.25)
        allowed = mags.value_error(value, float(np.linalg.norm(theta)))
        assert abs(value - exact) <= allowed
        worst = max(worst, abs(value - exact) / allowed)
    assert worst > 0.0                                   # the reference differs: the comparison measured something


def _awkward_sites(loss, K, seed):
    """Tiny (1-3 rows), nearly separable, badly scaled sites of one loss."""
    rng = np.random.default_rng(seed)
    d = 6
    scale = 10 ** rng.uniform(-3, 3, size=d)
    scale[0] = 1.0
    W = rng.normal(size=(d, K)) / scale[:, None] * 20.0
    sites = []
    for i, n in enumerate((1, 2, 3, 40)):
        X = rng.normal(size=(n, d)) * scale
        X[:, 0] = 1.0
        s = X @ W
        if loss.task == "regression":
            y = s[:, 0] + rng.normal(size=n)
        elif loss.task == "classification":
            y = np.where(s[:, 0] > 0, 1.0, -1.0)
        else:
            y = np.argmax(s, axis=1).astype(float)
        sites.append(Site(X, y, loss, n_outputs=K, name=f"site{i}"))
    return sites, W


CASES = [(dm.losses.Logistic(), 1), (dm.losses.Squared(), 1), (dm.losses.Huber(1.0), 1), (dm.losses.SmoothHinge(), 1),
         (dm.losses.Multinomial(), 9), (dm.losses.Hinge(), 1)]


@pytest.mark.parametrize("loss, K", CASES, ids=[type(l).__name__ for l, _ in CASES])
def test_every_check_passes_honest_answers_of_tiny_separable_badly_scaled_clients(loss, K):
    sites, W = _awkward_sites(loss, K, seed=K + len(type(loss).__name__))
    channel = CheckedChannel(LocalChannel(sites), loss)
    d = 6
    P = d * K
    channel.ask("describe")
    smooth = np.isfinite(loss.smoothness)
    rng = np.random.default_rng(1)
    points = [np.zeros(P)] + [(W * t).T.reshape(-1) + rng.normal(size=P) * 1e-6 for t in (0.01, 0.3, 1.0, 3.0)]
    for k, theta in enumerate(points):
        if k == 2:
            channel.ask("row_norm")                      # declared midway: both allowances are exercised
        channel.ask("evaluate", {"theta": theta}, options={"hessian": smooth})
        channel.ask("values", {"theta": theta})
        if smooth:
            for _ in range(2):
                channel.ask("hvp", {"theta": theta, "direction": rng.normal(size=P)})
            channel.ask("bound_terms", {"theta": theta}, options={"intercept_column": 0, "columns": 1})
        if loss.is_quadratic and K == 1 and k == 0:
            channel.ask("statistics")
    assert channel.rejections == []


def test_lies_just_beyond_the_derived_allowance_are_caught():
    site, theta, mags, d = _saturated_softmax(3)
    P = 9 * d
    H = unpack_symmetric(site.answer("evaluate", {"theta": theta}, {"hessian": True})["hessian"], P)
    v = np.random.default_rng(0).normal(size=P)
    v /= np.linalg.norm(v)
    lie = H - 1e3 * mags.hessian_error() * np.outer(v, v) - np.linalg.eigvalsh(H)[0] * np.outer(v, v)
    assert C.hessian_psd(H, mags) is None and C.hessian_psd(lie, mags).check == "Hessian PSD"
    # a mean |loss| below the mean loss, at a point where the rows are not saturated
    site = Site(np.array([[1.0, 0.3], [1.0, -1.2], [1.0, 0.5]]), np.array([0.0, 2.0, 1.0]), SOFTMAX, n_outputs=3)
    theta = np.array([0.1, -0.2, 0.0, 0.3, 0.2, 0.1])
    value = float(site.answer("evaluate", {"theta": theta})["value"][0])
    terms = site.answer("bound_terms", {"theta": theta}, {"intercept_column": 0})
    assert C.bound_terms(terms, 3, 0.5, value, None, theta, 3, 2) is None
    terms["allowance"] = np.array(terms["allowance"], float)
    terms["allowance"][0] = value * (1 - 1e-9)
    assert C.bound_terms(terms, 3, 0.5, value, None, theta, 3, 2).check == "bound magnitudes"
    # column statistics that do not sum to the mean squared norm
    terms = site.answer("bound_terms", {"theta": theta}, {"intercept_column": 0, "columns": 1})
    terms["column_squares"] = np.array(terms["column_squares"]) * (1 + 1e-9)
    assert C.bound_terms(terms, 3, 0.5, value, None, theta, 3, 2).check == "bound magnitudes"
