"""Tests of drflmodel.losses against independent routes: the spec drfl-admm §1 definitions
(written again here, scalar if/else), finite differences, CVXPY values, sampled Lipschitz and
smoothness constants, convexity."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from drflmodel import losses as L
from drflmodel.errors import InvalidParameterError


# ------------------------------------------------------------------------------- spec definitions
def spec_phi(name, z, p):
    """Spec drfl-admm §1 (paper §3), transcribed independently; Squared is z**2 (no 1/2)."""
    if name == "squared":
        return z * z
    if name == "huber":
        e = p["eps"]
        return z * z / 2 if abs(z) <= e else e * (abs(z) - e / 2)
    if name == "epsilon_insensitive":
        return max(0.0, abs(z) - p["eps"])
    if name == "pinball":
        t = p["tau"]
        return max(-t * z, (1 - t) * z)
    if name == "hinge":
        return max(0.0, 1 - z)
    if name == "smooth_hinge":
        if z <= 0:
            return 0.5 - z
        if z < 1:
            return (1 - z) ** 2 / 2
        return 0.0
    if name == "logistic":
        return math.log1p(math.exp(-z)) if z > -30 else -z + math.log1p(math.exp(z))
    raise AssertionError(name)


def kinks(loss):
    """Points where L is not twice differentiable (from the spec definitions)."""
    n = loss.name
    if n == "huber":
        return [-loss.eps, loss.eps]
    if n == "epsilon_insensitive":
        return [-loss.eps, loss.eps]
    if n == "pinball":
        return [0.0]
    if n in ("hinge",):
        return [1.0]
    if n == "smooth_hinge":
        return [0.0, 1.0]
    return []


CASES = [
    L.Squared(), L.Huber(0.7), L.Huber(2.0), L.EpsilonInsensitive(0.3), L.EpsilonInsensitive(0.0),
    L.Pinball(0.2), L.Pinball(0.5), L.Pinball(1.0), L.Pinball(0.0), L.Hinge(), L.SmoothHinge(),
    L.Logistic(),
]
SMOOTH = [c for c in CASES if c.name in ("squared", "huber", "smooth_hinge", "logistic")]
IDS = [repr(c) for c in CASES]


def _away_from_kinks(loss, z, gap):
    ks = kinks(loss)
    if not ks:
        return z
    d = np.min(np.abs(z[:, None] - np.array(ks)[None, :]), axis=1)
    return z[d > gap]


def _points(seed=0, n=400, scale=3.0):
    rng = np.random.default_rng(seed)
    return np.concatenate([scale * rng.standard_normal(n), rng.uniform(-0.1, 1.1, n // 4)])


# ------------------------------------------------------------------------------- values
@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_phi_matches_spec_definition(loss):
    z = np.concatenate([_points(1), np.array(kinks(loss)), [0.0, 1.0, -1.0, 50.0, -50.0]])
    expect = np.array([spec_phi(loss.name, float(v), loss.params()) for v in z])
    assert np.allclose(loss.phi(z), expect, rtol=1e-12, atol=1e-12)


def test_squared_has_no_half_and_huber_matches_half_square_inside():
    assert L.Squared().phi(np.array(3.0)) == 9.0
    assert L.Huber(10.0).phi(np.array(3.0)) == 4.5
    assert L.Huber(1.0).phi(np.array(3.0)) == 2.5            # eps(|z| - eps/2)


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_value_uses_the_right_argument(loss):
    rng = np.random.default_rng(2)
    u = rng.standard_normal(50) * 2
    if loss.task == "regression":
        y = rng.standard_normal(50)
        z = u - y
    else:
        y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
        z = y * u
    expect = np.array([spec_phi(loss.name, float(v), loss.params()) for v in z])
    assert np.allclose(loss.value(u, y), expect, rtol=1e-12, atol=1e-12)


def test_tasks_and_flags():
    reg = {"squared", "huber", "epsilon_insensitive", "pinball"}
    for c in CASES:
        assert c.task == ("regression" if c.name in reg else "classification")
        assert c.is_quadratic == (c.name == "squared")
        assert c.piecewise_linear == (c.name in ("epsilon_insensitive", "pinball", "hinge"))
    assert set(L.ALL_LOSSES) == {"squared", "huber", "epsilon_insensitive", "pinball", "hinge",
                                 "smooth_hinge", "logistic", "multinomial"}
    assert L.Multinomial().task == "multiclass"


# ------------------------------------------------------------------------------- derivatives
@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_dphi_matches_finite_differences(loss):
    h = 1e-6
    z = _away_from_kinks(loss, _points(3), 1e-3)
    fd = (loss.phi(z + h) - loss.phi(z - h)) / (2 * h)
    assert np.allclose(loss.dphi(z), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss", SMOOTH, ids=[repr(c) for c in SMOOTH])
def test_ddphi_matches_finite_differences(loss):
    h = 1e-6
    z = _away_from_kinks(loss, _points(4), 1e-3)
    fd = (loss.dphi(z + h) - loss.dphi(z - h)) / (2 * h)
    assert np.allclose(loss.ddphi(z), fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("loss", [c for c in CASES if c not in SMOOTH],
                         ids=[repr(c) for c in CASES if c not in SMOOTH])
def test_nonsmooth_losses_have_no_second_derivative(loss):
    with pytest.raises(NotImplementedError):
        loss.ddphi(np.zeros(3))


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_dphi_is_the_right_derivative_at_kinks(loss):
    for k in kinks(loss):
        h = 1e-7
        right = (loss.phi(np.array(k + h)) - loss.phi(np.array(k))) / h
        assert abs(float(loss.dphi(np.array(k))) - right) < 1e-5, k


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_dphi_is_a_subgradient_everywhere(loss):
    """Convexity + subgradient: L(w) >= L(z) + L'(z)(w - z) for all sampled z, w (incl. kinks)."""
    z = np.concatenate([_points(5, 100), np.array(kinks(loss))])
    w = _points(6, 100)
    Z, W = np.meshgrid(z, w)
    gap = loss.phi(W) - loss.phi(Z) - loss.dphi(Z) * (W - Z)
    assert gap.min() >= -1e-10


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_derivatives_in_the_score_match_finite_differences(loss):
    rng = np.random.default_rng(7)
    u = rng.standard_normal(300) * 2
    y = rng.standard_normal(300) if loss.task == "regression" else np.where(rng.random(300) < .5, 1.0, -1.0)
    z = loss.argument(u, y)
    ok = np.ones(z.shape, bool)
    for k in kinks(loss):
        ok &= np.abs(z - k) > 1e-3
    u, y = u[ok], y[ok]
    h = 1e-6
    fd = (loss.value(u + h, y) - loss.value(u - h, y)) / (2 * h)
    assert np.allclose(loss.derivative(u, y), fd, rtol=1e-6, atol=1e-6)
    if loss in SMOOTH:
        fd2 = (loss.derivative(u + h, y) - loss.derivative(u - h, y)) / (2 * h)
        assert np.allclose(loss.second_derivative(u, y), fd2, rtol=1e-5, atol=1e-5)


def test_logistic_is_numerically_stable():
    lg = L.Logistic()
    z = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    v, d, dd = lg.phi(z), lg.dphi(z), lg.ddphi(z)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d)) and np.all(np.isfinite(dd))
    assert v[0] == 1000.0 and v[2] == math.log(2) and v[4] == 0.0
    assert d[0] == -1.0 and d[2] == -0.5 and abs(d[4]) < 1e-300
    assert dd[2] == 0.25


# ------------------------------------------------------------------------------- CVXPY
@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_cvxpy_expression_matches_numpy(loss):
    rng = np.random.default_rng(8)
    m = 60
    u = np.concatenate([rng.standard_normal(m - 4) * 3, [1.0, -1.0, 0.0, 1e-3]])
    y = rng.standard_normal(m) if loss.task == "regression" else np.where(rng.random(m) < .5, 1.0, -1.0)
    x = cp.Variable(m)
    x.value = u
    e = loss.expr(x, y)
    assert e.is_convex() and e.is_dcp() and e.shape == (m,)
    assert np.allclose(e.value, loss.value(u, y), rtol=1e-9, atol=1e-9)
    t = cp.Variable(m)
    assert (e <= t).is_dcp()                                   # epigraph form
    # through an affine map theta -> X theta, as the oracles use it
    X = rng.standard_normal((m, 3))
    th = cp.Variable(3)
    th.value = rng.standard_normal(3)
    assert np.allclose(loss.expr(X @ th, y).value, loss.value(X @ th.value, y), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_cvxpy_minimization_matches_brute_force(loss):
    """min_u mean L(u - y) (or L(y u)) over a scalar u: CVXPY vs a dense grid in numpy."""
    rng = np.random.default_rng(9)
    y = rng.standard_normal(7) if loss.task == "regression" else np.array([1, 1, -1, 1, -1, 1, 1.0])
    u = cp.Variable()
    obj = cp.sum(loss.expr(u * np.ones(7), y)) / 7 + 0.05 * cp.square(u)
    val = cp.Problem(cp.Minimize(obj)).solve(solver=cp.CLARABEL)
    grid = np.linspace(-6, 6, 240001)
    gv = np.array([loss.value(np.full(7, g), y).mean() for g in grid[::100]])
    coarse = grid[::100][np.argmin(gv + 0.05 * grid[::100] ** 2)]
    fine = np.linspace(coarse - 0.01, coarse + 0.01, 20001)
    fv = loss.value(fine[:, None] * np.ones(7)[None, :], y[None, :]).mean(1) + 0.05 * fine ** 2
    assert abs(val - fv.min()) < 1e-6


def test_piecewise_linear_pieces_reproduce_the_loss():
    z = _points(10)
    for c in CASES:
        if not c.piecewise_linear:
            with pytest.raises(AttributeError):
                c.pieces()
            continue
        pieces = c.pieces()
        mx = np.max([a * z + b for a, b in pieces], axis=0)
        assert np.allclose(mx, c.phi(z), atol=1e-12)


# ------------------------------------------------------------------------------- constants
@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_lipschitz_constant_by_sampling(loss):
    rng = np.random.default_rng(11)
    a = rng.standard_normal(20000) * 20
    b = a + rng.standard_normal(20000) * rng.choice([1e-3, 1.0, 10.0], 20000)
    fa, fb = loss.phi(a), loss.phi(b)
    ratio = np.abs(fa - fb) / np.abs(a - b)
    rounding = 4e-16 * (np.abs(fa) + np.abs(fb)) / np.abs(a - b)   # cancellation in fa - fb
    if np.isinf(loss.lipschitz):
        assert ratio.max() > 30                                    # unbounded (squared)
    else:
        assert np.all(ratio <= loss.lipschitz * (1 + 1e-12) + rounding)  # a valid constant ...
        assert ratio.max() >= 0.98 * loss.lipschitz                # ... and tight


@pytest.mark.parametrize("loss", CASES, ids=IDS)
def test_smoothness_constant_by_sampling(loss):
    rng = np.random.default_rng(12)
    a = rng.standard_normal(20000) * 3
    b = a + rng.standard_normal(20000) * rng.choice([1e-4, 0.1, 1.0], 20000)
    ga, gb = loss.dphi(a), loss.dphi(b)
    ratio = np.abs(ga - gb) / np.abs(a - b)
    rounding = 4e-16 * (np.abs(ga) + np.abs(gb)) / np.abs(a - b)
    if np.isinf(loss.smoothness):
        # the derivative jumps at a kink, so no finite constant exists
        jumps = [abs(float(loss.dphi(np.array(k + 1e-8)) - loss.dphi(np.array(k - 1e-8)))) / 2e-8
                 for k in kinks(loss)]
        assert jumps and max(jumps) > 1e6
    else:
        assert np.all(ratio <= loss.smoothness * (1 + 1e-12) + rounding)
        assert ratio.max() >= 0.98 * loss.smoothness


@settings(max_examples=60, deadline=None)
@given(a=st.floats(-50, 50), b=st.floats(-50, 50), t=st.floats(0, 1),
       which=st.integers(0, len(CASES) - 1))
def test_convexity(a, b, t, which):
    loss = CASES[which]
    lhs = float(loss.phi(np.array(t * a + (1 - t) * b)))
    rhs = t * float(loss.phi(np.array(a))) + (1 - t) * float(loss.phi(np.array(b)))
    assert lhs <= rhs + 1e-9 * (1 + abs(rhs))


@pytest.mark.parametrize("loss", SMOOTH, ids=[repr(c) for c in SMOOTH])
def test_second_derivative_nonnegative(loss):
    assert loss.ddphi(_points(13)).min() >= 0.0


# ------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("build, name", [
    (lambda: L.Huber(0.0), "eps"), (lambda: L.Huber(-1.0), "eps"),
    (lambda: L.Huber(float("nan")), "eps"), (lambda: L.Huber(float("inf")), "eps"),
    (lambda: L.Huber("1"), "eps"),
    (lambda: L.EpsilonInsensitive(-0.1), "eps"),
    (lambda: L.Pinball(-0.01), "tau"), (lambda: L.Pinball(1.01), "tau"),
    (lambda: L.Pinball(float("nan")), "tau"),
    (lambda: L.get("cross_entropy"), "loss must be one of"),
])
def test_bad_parameters(build, name):
    with pytest.raises(InvalidParameterError, match=name):
        build()


def test_get_equality_and_to_dict():
    assert L.get("huber", eps=0.5) == L.Huber(0.5)
    assert L.get("huber", eps=0.5) != L.Huber(0.6)
    assert hash(L.Pinball(0.3)) == hash(L.Pinball(0.3))
    assert L.Pinball(0.3).to_dict() == {"name": "pinball", "task": "regression", "tau": 0.3}
    assert L.EpsilonInsensitive(0.0).eps == 0.0                 # eps >= 0 allowed for SVR
    assert L.Huber(1.5).lipschitz == 1.5 and L.Pinball(0.2).lipschitz == 0.8
