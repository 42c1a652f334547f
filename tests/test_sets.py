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
    # the tight 1e-10 tolerances sometimes end "optimal_inaccurate" on power cones; the value
    # is still compared with the exact one by the caller
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
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
    with pytest.warns(UserWarning, match=r"clients \[1\].*clip_alpha=True"):
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


# --------------------------------------------------------------------------------------
# LpBall
# --------------------------------------------------------------------------------------
P_VALUES = [1, 2, np.inf, 3, 1.5]


def lp_ball_instances(seed, count=10):
    rng = np.random.default_rng(seed)
    out = []
    for t in range(count):
        n = int(rng.integers(2, 7))
        c = rng.dirichlet(np.ones(n) * rng.choice([0.3, 1, 5]))
        if t % 4 == 3:
            c = np.eye(n)[t % n]                      # a vertex of the simplex as center
        r = float(rng.choice([0.05, 0.3, 1.0, 3.0]))
        out.append((c, r, rng))
    return out


def cvx_lp_ball_max(f, c, r, p):
    n = len(f)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Maximize(f @ x), [x >= 0, cp.sum(x) == 1, cp.norm(x - c, p) <= r])
    prob.solve(**CLARABEL)
    return prob.value


@pytest.mark.parametrize("p", P_VALUES)
def test_lpball_worst_case_and_support(p):
    count = 10 if p in (1, 2, np.inf) else 5          # general p needs a Clarabel solve each
    for c, r, rng in lp_ball_instances(50 + P_VALUES.index(p), count=count):
        ws = S.LpBall(c, r, p)
        n = len(c)
        for f in loss_vectors(n, int(rng.integers(1000)), count=5):
            v, lam = ws.worst_case(f)
            assert ws.contains(lam, tol=1e-7)
            assert lam @ f == pytest.approx(v, abs=1e-12)
            if p == 1 or p == np.inf:           # polytope: HiGHS LP in lifted form
                if p == np.inf:
                    ref = lp_max(f, np.maximum(c - r, 0), np.minimum(c + r, 1))
                else:                           # variables (lam, d): |lam - c| <= d, sum d <= r
                    A_ub = np.block([[np.eye(n), -np.eye(n)], [-np.eye(n), -np.eye(n)],
                                     [np.zeros((1, n)), np.ones((1, n))]])
                    b_ub = np.r_[c, -c, r]
                    res = linprog(np.r_[-f, np.zeros(n)], A_ub=A_ub, b_ub=b_ub,
                                  A_eq=np.r_[np.ones(n), np.zeros(n)][None], b_eq=[1],
                                  bounds=[(0, None)] * (2 * n), method="highs")
                    ref = -res.fun
                assert v == pytest.approx(ref, abs=1e-9)
            else:
                assert v == pytest.approx(cvx_lp_ball_max(f, c, r, p), abs=1e-7)
            assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)


@pytest.mark.parametrize("p", P_VALUES)
def test_lpball_project_vs_cvxpy(p):
    for c, r, rng in lp_ball_instances(60, count=6):
        ws = S.LpBall(c, r, p)
        n = len(c)
        v = rng.normal(size=n)
        x = cp.Variable(n)
        prob = cvx_argmin(cp.sum_squares(x - v), [x >= 0, cp.sum(x) == 1, cp.norm(x - c, p) <= r])
        mine = ws.project(v)
        assert ws.contains(mine, tol=1e-7)
        # optimal up to solver accuracy; the projection is unique, so the points agree
        assert np.sum((mine - v) ** 2) <= prob.value + 1e-7
        np.testing.assert_allclose(mine, x.value, atol=2e-5)


def test_lpball_reductions_and_dpp():
    n = 5
    c = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    f = np.array([1.0, -2.0, 0.5, 3.0, 3.0])
    for p in P_VALUES:
        # radius large enough: the whole simplex (AFL)
        assert S.LpBall(c, 10.0, p).worst_case(f)[0] == pytest.approx(f.max(), abs=1e-7)
        # tiny radius: the c-weighted average
        assert S.LpBall(c, 1e-9, p).worst_case(f)[0] == pytest.approx(c @ f, abs=1e-7)
    ws = S.LpBall(c, 0.2, 2)
    x = cp.Variable(n)
    prob = cp.Problem(cp.Minimize(ws.support_expr(x)), [x == f])
    assert prob.is_dpp()
    for r in [0.2, 0.05, 0.7]:
        ws.set_radius(r)
        prob.solve(**CLARABEL)
        assert prob.value == pytest.approx(cvx_lp_ball_max(f, c, r, 2), abs=1e-7)
    # the support expression is DCP for a *convex* f (not only affine)
    th = cp.Variable(2)
    fexpr = cp.hstack([cp.sum_squares(th - k) for k in range(n)])
    assert cp.Problem(cp.Minimize(ws.support_expr(fexpr))).is_dcp()


def test_lpball_spec_dual_prop_a1():
    """The support value equals the printed dual of spec drfl-admm Prop. A.1 (p* norm)."""
    rng = np.random.default_rng(61)
    for p in [1, 2, np.inf]:
        pstar = {1: np.inf, 2: 2, np.inf: 1}[p]
        n = 4
        c = rng.dirichlet(np.ones(n))
        r = 0.3
        f = rng.normal(size=n)
        g, eta, beta = cp.Variable(), cp.Variable(n, nonneg=True), cp.Variable(nonneg=True)
        prob = cp.Problem(cp.Minimize(c @ (f + g + eta) + beta * r - g),
                          [cp.norm(f + g + eta, pstar) <= beta])
        prob.solve(**CLARABEL)
        assert prob.value == pytest.approx(S.LpBall(c, r, p).worst_case(f)[0], abs=1e-7)


# --------------------------------------------------------------------------------------
# QFFL
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [0.5, 1.0, 2.0, 3.3])
def test_qffl_worst_case_support_prox(q):
    n = 5
    ws = S.QFFL(n, q)
    assert not ws.in_simplex and ws.nonnegative
    rng = np.random.default_rng(70)
    for f in loss_vectors(n, 71, count=5):
        v, lam = ws.worst_case(f)
        x = cp.Variable(n)
        prob = cp.Problem(cp.Maximize(f @ x - q / (q + 1) * cp.sum(cp.power(x, 1 + 1 / q))), [x >= 0])
        prob.solve(**CLARABEL)
        assert v == pytest.approx(prob.value, abs=1e-7)
        assert lam @ f - ws.psi(lam) == pytest.approx(v, abs=1e-10)
        np.testing.assert_allclose(lam, np.maximum(f, 0) ** q)          # the closed form
        if np.all(f >= 0):
            assert v == pytest.approx(np.sum(f ** (q + 1)) / (q + 1))      # the q-FFL objective
        assert min_value(ws.support_expr(f)) == pytest.approx(v, abs=1e-7)
    for step in [0.1, 1.0, 5.0]:
        v = rng.normal(size=n) * 2
        x = cp.Variable(n)
        cvx_argmin(q / (q + 1) * cp.sum(cp.power(x, 1 + 1 / q)) + cp.sum_squares(x - v) / (2 * step), [x >= 0])
        mine = ws.prox(v, step)
        np.testing.assert_allclose(mine, x.value, atol=1e-5)
        if q == 1.0:
            np.testing.assert_allclose(mine, np.maximum(v, 0) / (1 + step), atol=1e-14)
        assert ws.contains(mine)
    np.testing.assert_allclose(ws.project(np.array([-1.0, 2, 0, -3, 1])), [0, 2, 0, 0, 1])


# --------------------------------------------------------------------------------------
# Integrated
# --------------------------------------------------------------------------------------
def integrated_instances(seed, count=12, nmax=6):
    rng = np.random.default_rng(seed)

    def mk(n):
        k = int(rng.integers(0, 5))
        if k == 0:
            return S.Simplex(n)
        if k == 1:
            return S.CVaR(n, float(rng.uniform(1 / n, 1)))
        if k == 2:
            p = rng.dirichlet(np.ones(n))
            return S.HCVaR(p, rng.uniform(p, 1))
        if k == 3:
            return S.LpBall(rng.dirichlet(np.ones(n)), float(rng.uniform(0.01, 0.5)), np.inf)
        return S.LpBall(rng.dirichlet(np.ones(n)), float(rng.uniform(0.01, 1.5)), 1)

    out = []
    for _ in range(count):
        n = int(rng.integers(2, nmax + 1))
        out.append(S.Integrated(mk(n), mk(n), float(rng.choice([0.0, 0.1, 0.3, 0.7]))))
    return out


def test_integrated_worst_case_vs_vertices_and_lp():
    for I in integrated_instances(80):
        V = I.vertices()
        for f in loss_vectors(I.n, 81, count=4):
            v, lam = I.worst_case(f)
            assert v == pytest.approx((V @ f).max(), abs=1e-10)            # brute force
            assert lam @ f == pytest.approx(v, abs=1e-10)
            assert abs(lam.sum() - 1) < 1e-12
            # independent: a joint LP over (a, b), with the bounds written here
            n = I.n
            a, b = cp.Variable(n), cp.Variable(n)
            cons = []
            for var, X in ((a, I.A), (b, I.B)):
                if isinstance(X, S.LpBall) and X.p == 1:
                    cons += [var >= 0, cp.sum(var) == 1, cp.sum(cp.abs(var - X.center)) <= X.radius]
                    continue
                lo, up = X._bounds() if hasattr(X, "_bounds") else X._box()
                cons += [var >= lo, var <= up, cp.sum(var) == 1]
            prob = cp.Problem(cp.Maximize(f @ (a - I.phi * b) / (1 - I.phi)), cons)
            prob.solve(**CLARABEL)
            assert v == pytest.approx(prob.value, abs=1e-7)


def spec_norm1_cvar(n, alpha, beta, phi):
    """Spec relative-fairness §14.2, the max-over-s formula for CVaR x CVaR."""
    best = max(phi * min(1, s / (beta * n)) - max(0, 1 - (n - s) / (alpha * n)) for s in range(n + 1))
    return 1 + 2 / (1 - phi) * best


def test_integrated_norm1_vs_bruteforce_and_spec_formula():
    for I in integrated_instances(82, count=20):
        V = I.vertices()
        assert I.norm1() == pytest.approx(np.abs(V).sum(axis=1).max(), abs=1e-12)
        assert I.norm1() <= (1 + I.phi) / (1 - I.phi) + 1e-12
    for n, a, b, phi in [(5, 0.4, 0.4, 0.2), (7, 0.3, 0.5, 0.5), (10, 0.2, 0.2, 0.2),
                         (4, 1.0, 0.25, 0.3), (6, 1 / 6, 1.0, 0.6), (9, 0.35, 0.45, 0.9)]:
        I = S.Integrated(S.CVaR(n, a), S.CVaR(n, b), phi)
        assert I.norm1() == pytest.approx(spec_norm1_cvar(n, a, b, phi), abs=1e-12)
        if len(S.CVaR(n, a).vertices()) * len(S.CVaR(n, b).vertices()) < 50_000:
            assert I.norm1() == pytest.approx(np.abs(I.vertices()).sum(axis=1).max(), abs=1e-12)
    # spec: A = B = Delta_0.2, n = 100, phi = 0.2 gives (1 + phi)/(1 - phi) = 1.5
    assert S.Integrated(S.CVaR(100, 0.2), S.CVaR(100, 0.2), 0.2).norm1() == pytest.approx(1.5)


def test_integrated_norm1_lpball1_and_milp():
    """LpBall(p=1) has no vertex list: brute force over sign patterns s, max s^T lambda by LP."""
    rng = np.random.default_rng(83)
    for t in range(4):
        n = 4
        A = S.LpBall(rng.dirichlet(np.ones(n)), float(rng.uniform(0.05, 1.0)), 1)
        B = S.CVaR(n, 0.5) if t % 2 else S.LpBall(rng.dirichlet(np.ones(n)), 0.4, 1)
        I = S.Integrated(A, B, 0.4)
        best = 0.0
        for signs in itertools.product([-1.0, 1.0], repeat=n):
            a, b = cp.Variable(n), cp.Variable(n)
            prob = cp.Problem(cp.Maximize(np.array(signs) @ (a - 0.4 * b) / 0.6),
                              A.constraints(a) + B.constraints(b))
            prob.solve(**CLARABEL)
            best = max(best, prob.value)
        assert I.norm1() == pytest.approx(best, abs=1e-7)
    # the MILP route (n > 16) agrees with the subset enumeration on small n
    for I in integrated_instances(84, count=15, nmax=9):
        z = I._norm1_milp()
        assert 1 + 2 / (1 - I.phi) * max(0, I._negative_mass(z[None])[0]) == pytest.approx(I.norm1(), abs=1e-12)
    p = np.random.default_rng(85).dirichlet(np.ones(30))
    big = S.Integrated(S.HCVaR(p, np.maximum(p, 0.5)), S.CVaR(30, 0.2), 0.3)
    assert 1.0 <= big.norm1() <= 1.3 / 0.7 + 1e-12


def test_integrated_project_contains_and_reductions():
    rng = np.random.default_rng(86)
    for I in integrated_instances(87, count=5):
        for _ in range(2):
            v = rng.normal(size=I.n)
            lam = I.project(v)
            assert I.contains(lam, tol=1e-6)
            assert abs(lam.sum() - 1) < 1e-7
            # optimality against a brute-force check: no vertex direction improves the distance
            V = I.vertices()
            grad = lam - v
            assert np.all((V - lam) @ grad >= -1e-6 * (1 + np.abs(V).max()))
        far = I.vertices()[0] + 5.0 * np.r_[1.0, -1.0, np.zeros(I.n - 2)]
        assert not I.contains(far)
    # phi = 0 reduces to A
    A = S.CVaR(5, 0.4)
    I0 = S.Integrated(A, S.Simplex(5), 0.0)
    assert I0.nonnegative and not S.Integrated(A, A, 0.2).nonnegative
    for f in loss_vectors(5, 88):
        assert I0.worst_case(f)[0] == pytest.approx(A.worst_case(f)[0], abs=1e-12)
        assert min_value(I0.support_expr(f)) == pytest.approx(A.worst_case(f)[0], abs=1e-7)
    assert I0.norm1() == 1.0
    with pytest.raises(NotConvexError, match="not DCP.*R1.*R2.*R3"):
        S.Integrated(A, A, 0.2).support_expr(cp.Variable(5))
    # A = B = {e_1}-like singleton: CVaR alpha=1 twice gives the uniform vector for any phi
    U = S.Integrated(S.CVaR(4, 1.0), S.CVaR(4, 1.0), 0.5)
    np.testing.assert_allclose(U.worst_case(np.arange(4.0))[1], np.full(4, 0.25), atol=1e-12)


# --------------------------------------------------------------------------------------
# serialization
# --------------------------------------------------------------------------------------
def test_to_dict_json_and_repr():
    import json
    p = np.array([0.2, 0.3, 0.5])
    for ws in [S.Simplex(3), S.CVaR(3, 0.5), S.ChiSquare(3, 0.1), S.LpBall(p, 0.2, np.inf),
               S.LpBall(p, 0.2, 2), S.HCVaR(p, 0.6), S.QFFL(3, 2.0),
               S.Integrated(S.CVaR(3, 0.5), S.HCVaR(p, 0.7), 0.25)]:
        d = json.loads(json.dumps(ws.to_dict()))
        assert d["name"] == ws.name
        assert type(ws).__name__ in repr(ws)


# --------------------------------------------------------------------------------------
# bad inputs (the rest)
# --------------------------------------------------------------------------------------
def test_bad_inputs_lpball_qffl_integrated():
    c = np.array([0.5, 0.5])
    with pytest.raises(InvalidParameterError, match="radius"):
        S.LpBall(c, 0.0, 2)
    with pytest.raises(InvalidParameterError, match="radius"):
        S.LpBall(c, -1.0, 2)
    with pytest.raises(InvalidParameterError, match="center.*simplex"):
        S.LpBall([0.5, 0.6], 0.1, 2)                      # not renormalized
    with pytest.raises(InvalidParameterError, match="center.*simplex"):
        S.LpBall([1.2, -0.2], 0.1, 2)
    with pytest.raises(InvalidParameterError, match=r"p must lie in \[1, inf\]"):
        S.LpBall(c, 0.1, 0.5)
    with pytest.raises(InvalidParameterError, match="q must lie in"):
        S.QFFL(3, 0.0)
    with pytest.raises(InvalidParameterError, match="q"):
        S.QFFL(3, -1.0)
    A = S.CVaR(4, 0.5)
    with pytest.raises(InvalidParameterError, match=r"phi must lie in \[0, 1\)"):
        S.Integrated(A, A, 1.0)
    with pytest.raises(InvalidParameterError, match="phi"):
        S.Integrated(A, A, -0.1)
    with pytest.raises(InvalidParameterError, match="same number of clients"):
        S.Integrated(A, S.CVaR(5, 0.5), 0.1)
    with pytest.raises(InvalidParameterError, match="B must be a polytope inside the probability simplex"):
        S.Integrated(A, S.ChiSquare(4, 0.1), 0.1)
    with pytest.raises(InvalidParameterError, match="A must be a polytope inside the probability simplex"):
        S.Integrated(S.QFFL(4, 1.0), A, 0.1)
    with pytest.raises(InvalidParameterError, match="A must be a polytope"):
        S.Integrated(S.LpBall(np.full(4, 0.25), 0.1, 2), A, 0.1)
    with pytest.raises(InvalidParameterError, match="A must be a WeightSet"):
        S.Integrated(np.ones(4) / 4, A, 0.1)
    for ws in [S.LpBall(c, 0.1, 1), S.QFFL(2, 1.0), S.Integrated(S.Simplex(2), S.Simplex(2), 0.1)]:
        with pytest.raises(InvalidParameterError, match="f must have shape"):
            ws.worst_case(np.ones(3))
    with pytest.raises(InvalidParameterError, match="step"):
        S.QFFL(2, 1.0).prox(np.ones(2), -1.0)


# --------------------------------------------------------------------------------------
# hypothesis: invariants of the remaining sets
# --------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), p=st.sampled_from([1.0, 2.0, np.inf]), r=st.floats(1e-3, 2.5),
       seed=st.integers(0, 10_000), data=st.data())
def test_invariants_lpball(n, p, r, seed, data):
    rng = np.random.default_rng(seed)
    ws = S.LpBall(rng.dirichlet(np.ones(n)), r, p)
    f = np.array(data.draw(st.lists(floats, min_size=n, max_size=n)))
    d = np.array(data.draw(st.lists(st.floats(0, 3), min_size=n, max_size=n)))
    c = data.draw(floats)
    v, lam = ws.worst_case(f)
    assert ws.contains(lam, tol=1e-8)
    assert lam @ f == pytest.approx(v, abs=1e-9)
    assert ws.worst_case(f + d)[0] >= v - 1e-9
    assert ws.worst_case(f + c)[0] == pytest.approx(v + c, abs=1e-8)
    for lam2 in random_feasible(ws, rng, 3):
        assert v >= lam2 @ f - 1e-8


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), q=st.floats(0.2, 5), t=st.floats(0.1, 10), data=st.data())
def test_invariants_qffl(n, q, t, data):
    ws = S.QFFL(n, q)
    f = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n)))
    d = np.array(data.draw(st.lists(st.floats(0, 3), min_size=n, max_size=n)))
    v, lam = ws.worst_case(f)
    assert ws.contains(lam) and lam @ f - ws.psi(lam) == pytest.approx(v, rel=1e-9, abs=1e-12)
    assert ws.worst_case(f + d)[0] >= v - 1e-12
    # positive homogeneity of degree q + 1 (the q-FFL objective)
    assert ws.worst_case(t * f)[0] == pytest.approx(t ** (q + 1) * v, rel=1e-9, abs=1e-12)
    rng = np.random.default_rng(n)
    for _ in range(3):
        lam2 = rng.exponential(size=n)
        assert v >= lam2 @ f - ws.psi(lam2) - 1e-9
    # prox is the resolvent: its output minimizes the prox objective against perturbations
    vv = f * 2
    x = ws.prox(vv, t)
    obj = lambda z: ws.psi(z) + np.sum((z - vv) ** 2) / (2 * t)      # noqa: E731
    for _ in range(3):
        z = np.maximum(x + rng.normal(size=n) * 1e-3, 0)
        assert obj(z) >= obj(x) - 1e-12


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_invariants_integrated(seed, data):
    I = integrated_instances(seed, count=1, nmax=5)[0]
    f = np.array(data.draw(st.lists(floats, min_size=I.n, max_size=I.n)))
    c = data.draw(floats)
    v, lam = I.worst_case(f)
    a, b = I.last_witness
    assert I.A.contains(a) and I.B.contains(b)
    np.testing.assert_allclose(lam, (a - I.phi * b) / (1 - I.phi), atol=1e-12)
    assert I.worst_case(f + c)[0] == pytest.approx(v + c, abs=1e-8)
    assert np.all(I.vertices() @ f <= v + 1e-9)
    assert np.abs(lam).sum() <= I.norm1() + 1e-9


def test_support_expr_dcp_for_convex_losses_and_list_input():
    """support_expr must be DCP (convex, nondecreasing) for a *convex* loss vector, accept a list
    of scalar expressions, and equal the worst case at the minimizing theta."""
    n = 4
    p = np.array([0.1, 0.2, 0.3, 0.4])
    th = cp.Variable(2)
    targets = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    f_list = [cp.sum_squares(th - t) for t in targets]
    for ws in [S.Simplex(n), S.CVaR(n, 0.5), S.HCVaR(p, 0.6), S.ChiSquare(n, 0.3), S.ChiSquare(n, 0.0),
               S.LpBall(p, 0.2, 1), S.LpBall(p, 0.2, 2), S.LpBall(p, 0.2, np.inf), S.QFFL(n, 2.0),
               S.Integrated(S.CVaR(n, 0.5), S.Simplex(n), 0.0)]:
        prob = cp.Problem(cp.Minimize(ws.support_expr(f_list)))
        assert prob.is_dcp(), ws
        prob.solve(**CLARABEL)
        fv = np.sum((th.value[None, :] - targets) ** 2, axis=1)
        # at the returned theta the exact robust value equals the solver's optimum
        assert ws.worst_case(fv)[0] == pytest.approx(prob.value, abs=1e-6), ws


def test_integrated_set_phi():
    I = S.Integrated(S.CVaR(4, 0.5), S.CVaR(4, 0.5), 0.1)
    v = np.array([0.7, -0.4, 0.5, 0.2])
    I.project(v)
    I.set_phi(0.5)
    J = S.Integrated(S.CVaR(4, 0.5), S.CVaR(4, 0.5), 0.5)
    np.testing.assert_allclose(I.project(v), J.project(v), atol=1e-7)
    assert I.norm1() == J.norm1()
    with pytest.raises(InvalidParameterError, match="phi"):
        I.set_phi(1.5)


def test_lpball_l1_vertices():
    """Vertices of simplex ∩ l1-ball: all feasible, they attain every linear maximum, and the
    vertex optimum returned by the dual simplex (HiGHS, lifted LP) is always in the list."""
    rng = np.random.default_rng(90)
    for t in range(25):
        n = int(rng.integers(1, 6))
        c = rng.dirichlet(np.ones(n) * rng.choice([0.3, 1, 4]))
        r = float(rng.choice([0.01, 0.1, 0.4, 1.0, 1.9, 2.5]))
        ws = S.LpBall(c, r, 1)
        V = ws.vertices()
        assert all(ws.contains(v, tol=1e-9) for v in V)
        for f in loss_vectors(n, t, count=5):
            assert (V @ f).max() == pytest.approx(ws.worst_case(f)[0], abs=1e-10)
            if np.unique(f).size < n:          # ties: the LP optimum need not be a vertex
                continue
            A_ub = np.block([[np.eye(n), -np.eye(n)], [-np.eye(n), -np.eye(n)], [np.zeros((1, n)), np.ones((1, n))]])
            res = linprog(np.r_[-f, np.zeros(n)], A_ub=A_ub, b_ub=np.r_[c, -c, r],
                          A_eq=np.r_[np.ones(n), np.zeros(n)][None], b_eq=[1],
                          bounds=[(0, None)] * (2 * n), method="highs-ds")
            assert np.min(np.abs(V - res.x[:n]).max(axis=1)) < 1e-7
    with pytest.raises(NotImplementedError, match="not a polytope"):
        S.LpBall(np.full(3, 1 / 3), 0.1, 2).vertices()


@pytest.mark.parametrize("spread", [1e-13, 1e-9, 1e-3])
def test_lpball_l2_worst_case_with_near_ties_stays_on_the_set(spread):
    """Regression: with nearly tied losses the multiplier beta is tiny and c + f/beta lost all
    precision (sum(lambda) = 1.000122 was returned). Checked against the exact max over the set,
    which for a near-tie equals max f up to the spread."""
    ball = S.LpBall(np.array([114.0, 114.0, 113.0]) / 341.0, 0.1, 2)
    f = np.array([1.0, 1.0 + spread, 1.0 - spread])
    value, lam = ball.worst_case(f)
    assert ball.contains(lam, tol=1e-12)
    assert f.min() - 1e-15 <= value <= f.max() + 1e-15
    assert value == pytest.approx(float(lam @ f), abs=1e-15)


def test_one_name_per_weight_set_and_the_former_name_warns(tmp_path):
    """A weight set has one name -- its ``name`` attribute, the TOML ``weights.name``, the estimators'
    ``weights=`` -- and the former ``"chi2"`` still works with a DeprecationWarning naming the new one."""
    import drflmodel as dm
    from drflmodel._config import WEIGHT_SETS, build_problem, load_config

    assert dm.sets.WEIGHT_SET_NAMES == WEIGHT_SETS
    made = {"simplex": dm.sets.Simplex(3), "cvar": dm.sets.CVaR(3, 0.5), "chi_square": dm.sets.ChiSquare(3, 0.1),
            "qffl": dm.sets.QFFL(3, 1.0), "hcvar": dm.sets.HCVaR(np.full(3, 1 / 3), 0.5),
            "lp_ball": dm.sets.LpBall(np.full(3, 1 / 3), 0.1), "kl_penalty": dm.sets.KLPenalty(3, 0.5)}
    assert {name: type(s).__name__ for name, s in made.items()} == WEIGHT_SETS
    assert all(s.name == name for name, s in made.items())
    with pytest.warns(DeprecationWarning, match="weights='chi2' is now weights='chi_square'"):
        assert dm.sets.canonical_name("chi2") == "chi_square"
    with pytest.raises(dm.InvalidParameterError, match="weights must be one of 'simplex'"):
        dm.sets.canonical_name("chisq")
    config = tmp_path / "c.toml"
    config.write_text('[data]\nsource = "synthetic_regression"\noptions = { n_clients = 3, dim = 2, samples = 10 }\n'
                      '[loss]\nname = "squared"\n[problem]\nfamily = "dro"\noptions = { l2 = 0.1 }\n'
                      'weights = { name = "chi2", rho = 0.1 }\n')
    with pytest.warns(DeprecationWarning, match="problem.weights.name='chi2' is now problem.weights.name='chi_square'"):
        old = build_problem(load_config(config))
    assert isinstance(old.weights, dm.sets.ChiSquare)
    sklearn = pytest.importorskip("sklearn")   # noqa: F841
    from drflmodel.sklearn import FederatedDRORegressor

    rng = np.random.default_rng(0)
    X, y, site = rng.normal(size=(60, 2)), rng.normal(size=60), np.repeat(["a", "b", "c"], 20)
    new = FederatedDRORegressor(weights="chi_square", rho=0.5).fit(X, y, clients=site)
    with pytest.warns(DeprecationWarning, match="weights='chi2' is now weights='chi_square'"):
        former = FederatedDRORegressor(weights="chi2", rho=0.5).fit(X, y, clients=site)
    np.testing.assert_array_equal(former.coef_, new.coef_)


def test_from_name_builds_the_set_the_constructor_builds_and_names_a_wrong_option():
    """``sets.from_name`` (the one constructor behind TOML tables and the estimators) against each
    class's own constructor: the same set (same repr and the same worst case on random losses)."""
    import drflmodel as dm

    p = np.array([0.2, 0.3, 0.5])
    direct = {"simplex": (dm.sets.Simplex(3), {}), "cvar": (dm.sets.CVaR(3, 0.5), {"alpha": 0.5}),
              "chi_square": (dm.sets.ChiSquare(3, 0.1), {"rho": 0.1}), "qffl": (dm.sets.QFFL(3, 2.0), {"q": 2.0}),
              "hcvar": (dm.sets.HCVaR(p, 0.6), {"alpha": 0.6}),
              "lp_ball": (dm.sets.LpBall(p, 0.1, 1), {"radius": 0.1, "p": 1}),
              "kl_penalty": (dm.sets.KLPenalty(3, 0.5), {"tau": 0.5})}
    assert set(direct) == set(dm.sets.WEIGHT_SET_NAMES)
    losses = np.random.default_rng(0).uniform(0, 2, size=3)
    for name, (want, options) in direct.items():
        got = dm.sets.from_name(name, 3, p, **options)
        assert repr(got) == repr(want)
        assert np.isclose(got.worst_case(losses)[0], want.worst_case(losses)[0], rtol=1e-12)
    uniform = dm.sets.from_name("lp_ball", 3, p, radius=0.1, center="uniform")
    assert np.allclose(uniform.center, 1 / 3)
    with pytest.raises(dm.InvalidParameterError, match=r"^alpha is required by weights='cvar' \(its options: alpha\)"):
        dm.sets.from_name("cvar", 3)
    with pytest.raises(dm.InvalidParameterError, match=r"^beta is not an option of weights='hcvar' \(its options: alpha, "
                                                        r"clip_alpha\)"):
        dm.sets.from_name("hcvar", 3, p, alpha=0.5, beta=1)
    with pytest.raises(dm.InvalidParameterError, match="center must be a vector, 'proportions' or 'uniform'"):
        dm.sets.from_name("lp_ball", 3, p, radius=0.1, center="middle")


def test_support_is_smooth_exactly_for_strictly_concave_penalties():
    """sigma_Lambda is differentiable for the chi-square set with rho > 0 (psi strongly convex) and for
    q-FFL (psi strictly convex); a polyhedral set's support function has kinks."""
    from drflmodel.sets import CVaR, ChiSquare, HCVaR, LpBall, QFFL, Simplex

    assert ChiSquare(3, 0.1).support_is_smooth() and QFFL(3, 2.0).support_is_smooth()
    for W in (Simplex(3), CVaR(3, 0.5), HCVaR(np.full(3, 1 / 3), 0.5), LpBall(np.full(3, 1 / 3), 0.1, 2)):
        assert not W.support_is_smooth(), W
