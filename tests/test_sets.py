"""Tests of the client-weight sets (drflmodel/sets.py), each against an independent route:
scipy.optimize.linprog (HiGHS) for polytopes, explicit CVXPY models written here (not the sets'
own ``constraints``) for penalized sets and projections, brute-force vertex enumeration, the
closed-form formulas of the specs, and the documented reductions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import cvxpy as cp
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import linprog

from drflmodel import sets as S
from drflmodel.errors import InvalidDataError, InvalidParameterError, NotConvexError

CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


# --------------------------------------------------------------------------------------
# helpers (independent routes)
# --------------------------------------------------------------------------------------
def loss_vectors(n, seed, count=6):
    """Random loss vectors including ties, zeros and negative entries."""
    rng = np.random.default_rng(seed)
    out = [rng.normal(size=n), rng.exponential(size=n), np.zeros(n),
           np.round(rng.normal(size=n), 0),                     # many ties
           np.r_[np.zeros(n // 2), rng.uniform(size=n - n // 2)]]
    while len(out) < count:
        out.append(rng.uniform(-2, 2, size=n))
    return out


def lp_max(f, lower, upper):
    """max f^T lam s.t. lower <= lam <= upper, sum lam = 1, by HiGHS."""
    n = len(f)
    res = linprog(-np.asarray(f), A_eq=np.ones((1, n)), b_eq=[1.0],
                  bounds=list(zip(np.broadcast_to(lower, n), np.broadcast_to(upper, n))),
                  method="highs", options={"primal_feasibility_tolerance": 1e-10,
                                           "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0
    return -res.fun


def min_value(expr):
    prob = cp.Problem(cp.Minimize(expr))
    prob.solve(**CLARABEL)
    assert prob.status == cp.OPTIMAL
    return prob.value


def cvx_argmin(objective, constraints):
    prob = cp.Problem(cp.Minimize(objective), constraints)
    prob.solve(**CLARABEL)
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    return prob


def cvar_fractional(f, alpha):
    """Spec relative-fairness §2.2: (sum of top k + (alpha n - k) f_(k+1)) / (alpha n)."""
    f = np.sort(np.asarray(f))[::-1]
    n = len(f)
    an = alpha * n
    k = int(math.floor(an + 1e-12))
    val = f[:k].sum() + ((an - k) * f[k] if k < n else 0.0)
    return val / an


def random_feasible(ws, rng, count=5):
    """Points of the set: projections of random vectors (checked by contains)."""
    pts = []
    for _ in range(count):
        lam = ws.project(rng.normal(size=ws.n) * 2)
        assert ws.contains(lam, tol=1e-7)
        pts.append(lam)
    return pts


# --------------------------------------------------------------------------------------
# Simplex
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5])
def test_simplex_worst_case_support_project(n):
    ws = S.Simplex(n)
    for f in loss_vectors(n, 0):
        v, lam = ws.worst_case(f)
        assert v == pytest.approx(lp_max(f, 0, 1), abs=1e-9)
        assert ws.contains(lam) and lam @ f == pytest.approx(v, abs=1e-12)
        assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)
    rng = np.random.default_rng(1)
    for _ in range(3):
        v = rng.normal(size=n)
        x = cp.Variable(n)
        cvx_argmin(cp.sum_squares(x - v), [x >= 0, cp.sum(x) == 1])
        np.testing.assert_allclose(ws.project(v), x.value, atol=1e-6)


# --------------------------------------------------------------------------------------
# CVaR
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,alpha", [(5, 0.2), (5, 0.3), (7, 0.5), (10, 0.25), (6, 1.0), (8, 0.8)])
def test_cvar_worst_case_matches_linprog_formula_and_support(n, alpha):
    ws = S.CVaR(n, alpha)
    cap = 1 / (alpha * n)
    for f in loss_vectors(n, 2):
        v, lam, eta = ws.worst_case(f, return_eta=True)
        assert v == pytest.approx(lp_max(f, 0, cap), abs=1e-9)
        assert v == pytest.approx(cvar_fractional(f, alpha), abs=1e-12)
        assert ws.contains(lam) and lam @ f == pytest.approx(v, abs=1e-12)
        # eta* attains the Rockafellar-Uryasev minimum
        assert eta + cap * np.maximum(f - eta, 0).sum() == pytest.approx(v, abs=1e-12)
        assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)


def test_cvar_vertices_bruteforce():
    for n, alpha in [(5, 0.3), (6, 0.5), (4, 0.25), (4, 1.0), (7, 0.4)]:
        ws = S.CVaR(n, alpha)
        V = ws.vertices()
        assert all(ws.contains(v) for v in V)
        # independent: vertices of the box-capped simplex by the generic 2^n enumeration
        V2 = S._box_simplex_vertices(np.zeros(n), np.full(n, 1 / (alpha * n)))
        assert len(V) == len(V2) == len(np.unique(np.round(V, 10), axis=0))
        for f in loss_vectors(n, 3):
            assert ws.worst_case(f)[0] == pytest.approx((V @ f).max(), abs=1e-12)


def test_cvar_project_matches_cvxpy_and_is_contained():
    rng = np.random.default_rng(4)
    for n, alpha in [(5, 0.3), (8, 0.5), (6, 1.0), (6, 1 / 6)]:
        ws = S.CVaR(n, alpha)
        for _ in range(4):
            v = rng.normal(size=n) * rng.choice([0.1, 1, 10])
            x = cp.Variable(n)
            cvx_argmin(cp.sum_squares(x - v), [x >= 0, x <= 1 / (alpha * n), cp.sum(x) == 1])
            p = ws.project(v)
            np.testing.assert_allclose(p, x.value, atol=1e-6)
            assert ws.contains(p, tol=1e-12)
            assert ws.prox(v, 0.7) is not None and np.allclose(ws.prox(v, 0.7), p)


def test_cvar_reductions():
    rng = np.random.default_rng(5)
    n = 6
    for f in loss_vectors(n, 6):
        assert S.CVaR(n, 1 / n).worst_case(f)[0] == pytest.approx(f.max(), abs=1e-12)
        v, lam = S.CVaR(n, 1.0).worst_case(f)
        assert v == pytest.approx(f.mean(), abs=1e-12)
        np.testing.assert_allclose(lam, np.full(n, 1 / n), atol=1e-15)
    assert rng is not None


def test_cvar_set_alpha_is_dpp_sweep():
    n = 6
    ws = S.CVaR(n, 0.5)
    f = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(ws.support_expr(x)), [x == f])
    assert prob.is_dpp()
    for alpha in [0.2, 0.5, 1 / 6, 1.0, 0.77]:
        ws.set_alpha(alpha)
        prob.solve(**CLARABEL)
        assert prob.value == pytest.approx(cvar_fractional(f, alpha), abs=1e-7)
    with pytest.raises(InvalidParameterError, match="alpha"):
        ws.set_alpha(0.1)
    # constraints() is DPP too and matches linprog
    lam = cp.Variable(n)
    p2 = cp.Problem(cp.Maximize(f @ lam), ws.constraints(lam))
    assert p2.is_dpp()
    for alpha in [0.4, 0.9]:
        ws.set_alpha(alpha)
        p2.solve(**CLARABEL)
        assert p2.value == pytest.approx(lp_max(f, 0, 1 / (alpha * n)), abs=1e-7)


# --------------------------------------------------------------------------------------
# HCVaR
# --------------------------------------------------------------------------------------
def random_p_alpha(n, rng):
    p = rng.dirichlet(np.ones(n))
    alpha = rng.uniform(p, 1.0)
    return p, alpha


@pytest.mark.parametrize("n", [2, 4, 7])
def test_hcvar_worst_case_eta_linprog_support(n):
    rng = np.random.default_rng(10 + n)
    for trial in range(3):
        p, alpha = random_p_alpha(n, rng)
        ws = S.HCVaR(p, alpha)
        caps = p / alpha
        assert ws.tau == pytest.approx(caps.sum()) and ws.tau >= 1 - 1e-12
        for f in loss_vectors(n, trial):
            v, lam, eta = ws.worst_case(f, return_eta=True)
            assert v == pytest.approx(lp_max(f, 0, np.minimum(caps, 1)), abs=1e-9)
            assert ws.contains(lam)
            # eta* attains the variational form (2) of spec fafl-hcvar (Lemma 1)
            g = lambda e: e + caps @ np.maximum(f - e, 0)          # noqa: E731
            assert g(eta) == pytest.approx(v, abs=1e-12)
            grid = np.linspace(f.min() - 1, f.max() + 1, 201)
            assert all(g(e) >= v - 1e-12 for e in grid)
            assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)


def test_hcvar_reductions():
    rng = np.random.default_rng(20)
    n = 6
    p = rng.dirichlet(np.ones(n))
    for f in loss_vectors(n, 21):
        assert S.HCVaR(p, p).worst_case(f)[0] == pytest.approx(f.max(), abs=1e-12)
        v, lam = S.HCVaR(p, np.ones(n)).worst_case(f)
        assert v == pytest.approx(p @ f, abs=1e-12)
        np.testing.assert_allclose(lam, p, atol=1e-15)
        for chi in [1 / n, 0.3, 0.5, 1.0]:
            assert S.HCVaR(np.full(n, 1 / n), chi).worst_case(f)[0] == pytest.approx(
                S.CVaR(n, chi).worst_case(f)[0], abs=1e-12)


def test_hcvar_project_vertices():
    rng = np.random.default_rng(22)
    for n in [3, 5, 6]:
        p, alpha = random_p_alpha(n, rng)
        ws = S.HCVaR(p, alpha)
        for _ in range(3):
            v = rng.normal(size=n)
            x = cp.Variable(n)
            cvx_argmin(cp.sum_squares(x - v), [x >= 0, x <= p / alpha, cp.sum(x) == 1])
            np.testing.assert_allclose(ws.project(v), x.value, atol=1e-6)
            assert ws.contains(ws.project(v), tol=1e-12)
        V = ws.vertices()
        assert all(ws.contains(vv) for vv in V)
        for f in loss_vectors(n, 23):
            assert ws.worst_case(f)[0] == pytest.approx((V @ f).max(), abs=1e-12)


def test_hcvar_alpha_validation_and_clip():
    p = np.array([0.5, 0.3, 0.2])
    with pytest.raises(InvalidParameterError, match=r"alpha\[1\].*\[p\[1\], 1\]"):
        S.HCVaR(p, [0.6, 0.2, 0.5])
    with pytest.raises(InvalidParameterError, match=r"alpha\[2\]"):
        S.HCVaR(p, [0.6, 0.4, 1.5])
    with pytest.raises(InvalidParameterError, match="alpha"):
        S.HCVaR(p, [0.6, 0.4])
    with pytest.raises(InvalidParameterError, match="p"):
        S.HCVaR([0.5, 0.3, 0.3], 0.9)
    ws = S.HCVaR(p, [0.6, 0.2, 0.5], clip_alpha=True)
    np.testing.assert_allclose(ws.alpha, [0.6, 0.3, 0.5])
    np.testing.assert_allclose(ws.alpha_given, [0.6, 0.2, 0.5])
    f = np.array([1.0, 3.0, 2.0])
    # clipped set equals the set with alpha_1 = p_1 (cap 1, vacuous)
    assert ws.worst_case(f)[0] == pytest.approx(S.HCVaR(p, [0.6, 0.3, 0.5]).worst_case(f)[0])
    ws.set_alpha([1.0, 1.0, 1.0])
    assert ws.worst_case(f)[0] == pytest.approx(p @ f)
    assert ws.to_dict()["clip_alpha"] is True


def test_hcvar_dpp_sweep():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    ws = S.HCVaR(p, 0.5)
    f = np.array([4.0, 1.0, 3.0, 2.0])
    x = cp.Variable(4)
    prob = cp.Problem(cp.Minimize(ws.support_expr(x)), [x == f])
    assert prob.is_dpp()
    for a in [np.array([0.1, 0.2, 0.3, 0.4]), np.ones(4), np.array([0.5, 0.9, 0.3, 0.6])]:
        ws.set_alpha(a)
        prob.solve(**CLARABEL)
        assert prob.value == pytest.approx(lp_max(f, 0, np.minimum(p / a, 1)), abs=1e-7)


# --------------------------------------------------------------------------------------
# ChiSquare
# --------------------------------------------------------------------------------------
def chi2_cvx_max(f, rho):
    n = len(f)
    lam = cp.Variable(n)
    prob = cp.Problem(cp.Maximize(f @ lam - rho / (2 * n) * cp.sum_squares(n * lam - 1)),
                      [lam >= 0, cp.sum(lam) == 1])
    prob.solve(**CLARABEL)
    return prob.value, lam.value


@pytest.mark.parametrize("n,rho", [(3, 0.1), (5, 1.0), (6, 0.01), (4, 10.0)])
def test_chisquare_worst_case_support_vs_cvxpy(n, rho):
    ws = S.ChiSquare(n, rho)
    for f in loss_vectors(n, 30):
        v, lam = ws.worst_case(f)
        vc, lc = chi2_cvx_max(f, rho)
        assert v == pytest.approx(vc, abs=1e-7)
        np.testing.assert_allclose(lam, lc, atol=1e-5)
        assert ws.contains(lam)
        assert lam @ f - ws.psi(lam) == pytest.approx(v, abs=1e-12)
        assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)
        # the spec's closed form: lam_i = (1 + (f_i - eta)/rho)_+ / n for one eta (the printed
        # dual, spec scaffpd §8.2, evaluated at that eta equals the value)
        pos = lam > 1e-12
        eta = np.mean(f[pos] - rho * (n * lam[pos] - 1))
        np.testing.assert_allclose(lam, np.maximum(1 + (f - eta) / rho, 0) / n, atol=1e-12)
        dual = eta + rho / (2 * n) * np.sum(np.maximum(1 + (f - eta) / rho, 0) ** 2) - rho / 2
        assert dual == pytest.approx(v, abs=1e-10)


def test_chisquare_prox_vs_cvxpy():
    rng = np.random.default_rng(31)
    for n, rho, step in [(4, 0.5, 0.3), (6, 0.05, 2.0), (3, 3.0, 0.01), (5, 0.0, 1.0)]:
        ws = S.ChiSquare(n, rho)
        assert ws.strong_concavity == pytest.approx(rho * n)
        for _ in range(3):
            v = rng.normal(size=n)
            x = cp.Variable(n)
            cvx_argmin(rho / (2 * n) * cp.sum_squares(n * x - 1) + cp.sum_squares(x - v) / (2 * step),
                       [x >= 0, cp.sum(x) == 1])
            np.testing.assert_allclose(ws.prox(v, step), x.value, atol=1e-6)
            np.testing.assert_allclose(ws.project(v), S.project_simplex(v))


def test_chisquare_reductions_and_dpp():
    n = 5
    f = np.array([0.3, 2.0, 1.0, 2.0, -1.0])
    assert S.ChiSquare(n, 0).worst_case(f)[0] == pytest.approx(f.max())
    assert min_value(S.ChiSquare(n, 0).support_expr(f)) == pytest.approx(f.max(), abs=1e-8)
    # large rho -> uniform average (gap = O(1/rho): value - mean = ||f - mean||^2/(2 rho n))
    for rho in [1e3, 1e5]:
        v, lam = S.ChiSquare(n, rho).worst_case(f)
        assert v == pytest.approx(f.mean() + np.sum((f - f.mean()) ** 2) / (2 * rho * n), abs=1e-12)
        assert np.abs(lam - 1 / n).max() < 10 / rho
    ws = S.ChiSquare(n, 0.5)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(ws.support_expr(x)), [x == f])
    assert prob.is_dpp()
    for rho in [0.5, 0.05, 4.0]:
        ws.set_rho(rho)
        prob.solve(**CLARABEL)
        assert prob.value == pytest.approx(chi2_cvx_max(f, rho)[0], abs=1e-7)
    lam = cp.Variable(n)
    assert cp.Problem(cp.Maximize(f @ lam - ws.psi_expr(lam)), ws.constraints(lam)).is_dpp()


# --------------------------------------------------------------------------------------
# generic kernels
# --------------------------------------------------------------------------------------
def test_project_box_simplex_vs_cvxpy():
    rng = np.random.default_rng(40)
    for _ in range(10):
        n = int(rng.integers(2, 9))
        lo = rng.uniform(0, 1 / n, size=n) * rng.integers(0, 2, size=n)
        up = np.minimum(lo + rng.uniform(0, 1, size=n), 1)
        if up.sum() < 1:
            up = up / up.sum() + 1e-3
        v = rng.normal(size=n) * 3
        x = cp.Variable(n)
        cvx_argmin(cp.sum_squares(x - v), [x >= lo, x <= up, cp.sum(x) == 1])
        p = S.project_box_simplex(v, lo, up)
        np.testing.assert_allclose(p, x.value, atol=1e-6)
        assert abs(p.sum() - 1) < 1e-12 and np.all(p >= lo) and np.all(p <= up)


# --------------------------------------------------------------------------------------
# bad inputs (the first subset)
# --------------------------------------------------------------------------------------
def test_bad_inputs_cvar_chisquare():
    with pytest.raises(InvalidParameterError, match=r"alpha must lie in \[1/n, 1\]"):
        S.CVaR(5, 0.1)
    with pytest.raises(InvalidParameterError, match="alpha"):
        S.CVaR(5, 1.2)
    with pytest.raises(InvalidParameterError, match="alpha"):
        S.CVaR(5, float("nan"))
    with pytest.raises(InvalidParameterError, match="n"):
        S.CVaR(0, 0.5)
    with pytest.raises(InvalidParameterError, match="rho"):
        S.ChiSquare(4, -0.1)
    with pytest.raises(InvalidParameterError, match=r"shape \(4,\)"):
        S.CVaR(4, 0.5).worst_case(np.ones(3))
    with pytest.raises(InvalidParameterError, match=r"f must have shape"):
        S.ChiSquare(4, 0.5).worst_case(np.ones(5))
    with pytest.raises(InvalidParameterError, match=r"f must have shape"):
        S.HCVaR(np.full(4, 0.25), 0.5).worst_case(np.ones((4, 1)))
    with pytest.raises(InvalidDataError, match="NaN"):
        S.CVaR(4, 0.5).worst_case([1, 2, np.nan, 0])
    with pytest.raises(InvalidParameterError, match="step"):
        S.ChiSquare(4, 0.5).prox(np.ones(4), 0.0)
    with pytest.raises(InvalidParameterError, match="v must have shape"):
        S.CVaR(4, 0.5).project(np.ones(3))
    with pytest.raises(InvalidParameterError, match="loss expression f"):
        S.CVaR(4, 0.5).support_expr(cp.Variable(3))


# --------------------------------------------------------------------------------------
# hypothesis: invariants
# --------------------------------------------------------------------------------------
def _make_set(kind, n, u):
    if kind == "simplex":
        return S.Simplex(n)
    if kind == "cvar":
        return S.CVaR(n, 1 / n + u * (1 - 1 / n))
    if kind == "hcvar":
        p = np.linspace(1, 2, n)
        p = p / p.sum()
        return S.HCVaR(p, p + u * (1 - p))
    if kind == "chi2":
        return S.ChiSquare(n, 3 * u)
    raise AssertionError(kind)


KINDS_FIRST = ["simplex", "cvar", "hcvar", "chi2"]
floats = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS_FIRST), n=st.integers(1, 6), u=st.floats(0, 1),
       data=st.data())
def test_invariants_first(kind, n, u, data):
    ws = _make_set(kind, n, u)
    f = np.array(data.draw(st.lists(floats, min_size=n, max_size=n)))
    d = np.array(data.draw(st.lists(st.floats(0, 3), min_size=n, max_size=n)))
    c = data.draw(floats)
    v, lam = ws.worst_case(f)
    # lam* feasible and attains the value
    assert ws.contains(lam, tol=1e-9)
    assert lam @ f - ws.psi(lam) == pytest.approx(v, abs=1e-9)
    # value monotone in f
    assert ws.worst_case(f + d)[0] >= v - 1e-9
    # translation equivariance (sets inside the simplex)
    assert ws.worst_case(f + c)[0] == pytest.approx(v + c, abs=1e-9)
    # value >= lam^T f - psi(lam) for feasible lam
    rng = np.random.default_rng(int(abs(c) * 1000))
    for lam2 in random_feasible(ws, rng, 3):
        assert v >= lam2 @ f - ws.psi(lam2) - 1e-9
