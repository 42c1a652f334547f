"""Tests of drflmodel.metrics: every index against an independent route (brute force over subsets,
scipy's linprog on the capped simplex, explicit loops, the Rockafellar-Uryasev variational form),
edge cases (ties, zeros, n = 1, n not divisible by the fraction), hypothesis invariants and
bad-input errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import linprog

from drflmodel import metrics as M
from drflmodel import sets as S
from drflmodel.errors import InvalidDataError, InvalidParameterError

RNG = np.random.default_rng(20261122)


# ----------------------------------------------------------------------------------------------
# independent reference computations
# ----------------------------------------------------------------------------------------------
def lp_capped(f, cap, maximize=True):
    """max (or min) of a^T f over {a in simplex, a_i <= cap_i} by HiGHS."""
    f = np.asarray(f, float)
    n = f.size
    cap = np.broadcast_to(np.asarray(cap, float), (n,))
    c = -f if maximize else f
    res = linprog(c, A_eq=np.ones((1, n)), b_eq=[1.0], bounds=list(zip([0.0] * n, cap)),
                  method="highs")
    assert res.status == 0
    return -res.fun if maximize else res.fun


def lp_cvar_top(f, alpha):
    return lp_capped(f, 1.0 / (alpha * len(f)), maximize=True)


def lp_cvar_bottom(f, beta):
    return lp_capped(f, 1.0 / (beta * len(f)), maximize=False)


def ru_cvar_top(f, alpha):
    """Rockafellar-Uryasev: min over eta of eta + sum (f - eta)_+ / (alpha n), minimized over the
    breakpoints eta in {f_i} (exact: piecewise linear convex) and a fine grid (sanity)."""
    f = np.asarray(f, float)
    n = f.size
    etas = np.concatenate([f, np.linspace(f.min() - 1, f.max() + 1, 2001)])
    vals = etas + np.maximum(f[None, :] - etas[:, None], 0).sum(1) / (alpha * n)
    return vals.min()


def subsets_mean(f, k, largest=True):
    """max (largest) or min mean over all k-subsets (brute force)."""
    means = [np.mean([f[i] for i in c]) for c in itertools.combinations(range(len(f)), k)]
    return max(means) if largest else min(means)


def gini_double_sum(u):
    u = np.asarray(u, float)
    n = u.size
    tot = 0.0
    for i in range(n):
        for j in range(n):
            tot += abs(u[i] - u[j])
    return tot / (2 * n * n * u.mean())


class VertexSet(S.WeightSet):
    """A test-only weight set given by a list of points (rows); worst_case by enumeration."""

    name = "vertexset"

    def __init__(self, V, penalty=0.0, nonneg=True):
        V = np.asarray(V, float)
        super().__init__(V.shape[1])
        self.V = V
        self.penalty = penalty
        self.nonnegative = nonneg

    def psi(self, lam):
        return self.penalty

    def worst_case(self, f):
        f = self._check_f(f)
        vals = self.V @ f - self.penalty
        i = int(np.argmax(vals))
        return float(vals[i]), self.V[i].copy()


# ----------------------------------------------------------------------------------------------
# cvar_top / cvar_bottom (fractional convention)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 13])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.25, 1 / 3, 0.4, 0.5, 0.77, 1.0])
def test_cvar_top_matches_linprog_and_variational(n, alpha):
    f = RNG.normal(size=n) * 3
    v = M.cvar_top(f, alpha)
    assert v == pytest.approx(lp_cvar_top(f, alpha), abs=1e-9)
    assert v == pytest.approx(ru_cvar_top(f, alpha), abs=1e-9)
    assert M.cvar_bottom(f, alpha) == pytest.approx(lp_cvar_bottom(f, alpha), abs=1e-9)


@pytest.mark.parametrize("n,k", [(5, 1), (5, 2), (6, 3), (8, 2), (8, 5), (9, 9)])
def test_cvar_top_integer_alpha_n_is_mean_of_top_k_subset(n, k):
    f = RNG.integers(0, 6, size=n).astype(float)  # many ties
    alpha = k / n
    assert M.cvar_top(f, alpha) == pytest.approx(subsets_mean(f, k, largest=True), abs=1e-12)
    assert M.cvar_bottom(f, alpha) == pytest.approx(subsets_mean(f, k, largest=False), abs=1e-12)


def test_cvar_top_special_levels_and_hand_value():
    f = np.array([4.0, 1.0, 3.0, 0.0, 2.0])
    assert M.cvar_top(f, 1 / 5) == 4.0
    assert M.cvar_top(f, 1.0) == pytest.approx(2.0)
    assert M.cvar_bottom(f, 1 / 5) == 0.0
    # alpha n = 1.5: (4 + 0.5*3)/1.5
    assert M.cvar_top(f, 0.3) == pytest.approx(5.5 / 1.5)
    # alpha n = 0.5 < 1: the maximum
    assert M.cvar_top(f, 0.1) == pytest.approx(4.0)
    # n = 1: every level returns the single value
    assert M.cvar_top([7.5], 0.01) == pytest.approx(7.5)
    assert M.cvar_bottom([7.5], 1.0) == pytest.approx(7.5)


def test_cvar_top_all_ties():
    f = np.full(7, 2.5)
    for a in (0.1, 0.2, 0.5, 1.0):
        assert M.cvar_top(f, a) == pytest.approx(2.5)
        assert M.cvar_bottom(f, a) == pytest.approx(2.5)


# ----------------------------------------------------------------------------------------------
# worst / best fraction means: both conventions
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 7, 10, 11])
@pytest.mark.parametrize("frac", [0.1, 0.2, 0.3, 0.5, 1.0])
def test_fraction_means_integer_convention_brute_force(n, frac):
    f = RNG.integers(0, 5, size=n).astype(float)
    k = max(1, math.floor(frac * n + 1e-9))
    assert M.worst_fraction_mean(f, frac, integer=True) == pytest.approx(subsets_mean(f, k, True))
    assert M.best_fraction_mean(f, frac, integer=True) == pytest.approx(subsets_mean(f, k, False))
    # accuracies: worst = lowest
    assert M.worst_fraction_mean(f, frac, higher_is_better=True, integer=True) == pytest.approx(
        subsets_mean(f, k, False))
    assert M.best_fraction_mean(f, frac, higher_is_better=True, integer=True) == pytest.approx(
        subsets_mean(f, k, True))


@pytest.mark.parametrize("n", [3, 7, 10])
@pytest.mark.parametrize("frac", [0.15, 0.2, 0.45])
def test_fraction_means_fractional_convention_is_lp(n, frac):
    f = RNG.uniform(0, 1, size=n)
    assert M.worst_fraction_mean(f, frac) == pytest.approx(lp_cvar_top(f, frac), abs=1e-9)
    assert M.best_fraction_mean(f, frac) == pytest.approx(lp_cvar_bottom(f, frac), abs=1e-9)
    assert M.worst_fraction_mean(f, frac, higher_is_better=True) == pytest.approx(
        lp_cvar_bottom(f, frac), abs=1e-9)
    assert M.best_fraction_mean(f, frac, higher_is_better=True) == pytest.approx(
        lp_cvar_top(f, frac), abs=1e-9)


def test_integer_floor_is_robust_to_float_rounding():
    assert 0.29 * 100 < 29  # the float product is 28.999999999999996
    f = np.arange(100.0)
    assert M.worst_fraction_mean(f, 0.29, integer=True) == pytest.approx(np.mean(np.arange(71, 100)))
    # fewer than one client: k = max(1, floor(...)) = 1
    assert M.worst_fraction_mean([3.0, 9.0, 1.0], 0.1, integer=True) == 9.0
    assert M.best_fraction_mean([3.0, 9.0, 1.0], 0.1, integer=True) == 1.0


def test_distribution_summary():
    acc = np.array([0.9, 0.5, 0.7, 0.8, 0.6, 0.95, 0.4, 0.85, 0.75, 0.65, 0.55])  # n = 11
    d = M.distribution_summary(acc, 0.2)
    s = np.sort(acc)
    assert d["average"] == pytest.approx(acc.sum() / 11)
    assert d["worst"] == pytest.approx(s[:2].mean())  # floor(2.2) = 2 lowest accuracies
    assert d["best"] == pytest.approx(s[-2:].mean())
    assert d["variance"] == pytest.approx(((acc - acc.mean()) ** 2).sum() / 11)


# ----------------------------------------------------------------------------------------------
# relative unfairness, 20:20, Palma, Atkinson
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 5, 7, 10, 13, 20])
@pytest.mark.parametrize("ab", [(0.2, 0.2), (0.1, 0.4), (0.5, 0.3), (1.0, 1.0)])
def test_relative_unfairness_vs_linprog(n, ab):
    a, b = ab
    f = RNG.uniform(0.1, 5, size=n)
    ref = lp_cvar_top(f, a) / lp_cvar_bottom(f, b)
    assert M.relative_unfairness(f, a, b) == pytest.approx(ref, rel=1e-9)
    assert M.relative_unfairness(f, A=a, B=b) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("n", [5, 10, 20, 40])
def test_ratio_20_20_divisible_is_plain_sorted_means(n):
    f = RNG.uniform(0.5, 3, size=n)
    s = np.sort(f)
    k = n // 5
    assert M.ratio_20_20(f) == pytest.approx(s[-k:].mean() / s[:k].mean(), rel=1e-12)


@pytest.mark.parametrize("n", [10, 20, 30])
def test_palma_divisible_is_share_ratio(n):
    f = RNG.uniform(0.5, 3, size=n)
    s = np.sort(f)
    top = s[-(n // 10):].sum()
    bottom = s[: 4 * n // 10].sum()
    assert M.palma(f) == pytest.approx(top / bottom, rel=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 7, 9, 11, 13, 17])
def test_palma_and_20_20_not_divisible_vs_linprog(n):
    f = RNG.uniform(0.5, 3, size=n)
    assert M.ratio_20_20(f) == pytest.approx(lp_cvar_top(f, .2) / lp_cvar_bottom(f, .2), rel=1e-9)
    assert M.palma(f) == pytest.approx(
        (0.1 * n * lp_cvar_top(f, .1)) / (0.4 * n * lp_cvar_bottom(f, .4)), rel=1e-9)


def test_indices_n_equal_one_and_equal_losses():
    for f in ([3.0], [2.0] * 9):
        assert M.ratio_20_20(f) == pytest.approx(1.0)
        assert M.palma(f) == pytest.approx(0.25)
        assert M.atkinson_inf(f) == pytest.approx(0.0)
        assert M.gini(f) == pytest.approx(0.0, abs=1e-15)
        assert M.relative_unfairness(f, 1 / len(f), 1 / len(f)) == pytest.approx(1.0)


def test_zero_loss_gives_inf_ratio_and_all_zero_is_error():
    f = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    assert M.ratio_20_20(f) == math.inf
    assert M.relative_unfairness(f, 0.2, 0.2) == math.inf
    assert M.relative_unfairness(f, 0.2, 0.6) == pytest.approx(4.0 / (3.0 / 3.0))
    assert M.atkinson_inf(f) == pytest.approx(1.0)
    assert M.gini(f) == pytest.approx(gini_double_sum(f))
    with pytest.raises(InvalidDataError, match="0/0"):
        M.relative_unfairness(np.zeros(4), 0.5, 0.5)
    with pytest.raises(InvalidDataError, match="identically zero"):
        M.gini(np.zeros(3))
    with pytest.raises(InvalidDataError, match="identically zero"):
        M.atkinson_inf(np.zeros(3))
    with pytest.raises(InvalidDataError, match="identically zero"):
        M.lorenz(np.zeros(3))
    with pytest.raises(InvalidDataError, match="0/0"):
        M.summary_indices(np.zeros(3))
    d = M.summary_indices(f)
    assert d["relative_max_min"] == math.inf and d["ratio_20_20"] == math.inf


def test_negative_loss_is_rejected_by_ratio_indices():
    f = np.array([1.0, -0.5, 2.0])
    for fn in (M.ratio_20_20, M.palma, M.atkinson_inf, M.gini, M.lorenz, M.summary_indices):
        with pytest.raises(InvalidDataError, match="f must be nonnegative"):
            fn(f)
    with pytest.raises(InvalidDataError, match="f must be nonnegative"):
        M.relative_unfairness(f, 0.5, 0.5)
    # the fraction means themselves accept any sign
    assert M.cvar_top(f, 1 / 3) == 2.0


def test_atkinson_loop_and_as_relative_index():
    for n in (1, 2, 5, 8):
        f = RNG.uniform(0.1, 4, size=n)
        mean = sum(f) / n
        mn = min(f)
        assert M.atkinson_inf(f) == pytest.approx(1 - mn / mean, abs=1e-14)
        # 1 - 1/R_{ {1/n}, simplex }: A = Delta_1 (the mean), B = Delta_{1/n} (the min)
        assert M.atkinson_inf(f) == pytest.approx(1 - 1 / M.relative_unfairness(f, 1.0, 1 / n), abs=1e-12)
        uniform = VertexSet(np.full((1, n), 1 / n))
        assert M.atkinson_inf(f) == pytest.approx(
            1 - 1 / M.relative_unfairness(f, uniform, S.Simplex(n)), abs=1e-12)


def test_relative_unfairness_with_weight_sets():
    n = 6
    f = RNG.uniform(0.2, 3, size=n)
    simplex = S.Simplex(n)
    assert M.relative_unfairness(f, simplex, simplex) == pytest.approx(f.max() / f.min())
    assert M.relative_unfairness(f, simplex, simplex) == pytest.approx(M.relative_unfairness(f, 1 / n, 1 / n))
    # a capped simplex given by its vertices (alpha n = 2: vertices are the pairs at weight 1/2)
    V = np.array([[0.5 if i in c else 0.0 for i in range(n)] for c in itertools.combinations(range(n), 2)])
    cap = VertexSet(V)
    assert M.relative_unfairness(f, cap, cap) == pytest.approx(M.relative_unfairness(f, 2 / n, 2 / n), rel=1e-12)
    # mixed: set for A, level for B
    assert M.relative_unfairness(f, cap, 0.5) == pytest.approx(
        lp_cvar_top(f, 2 / n) / lp_cvar_bottom(f, 0.5), rel=1e-9)
    for a in (0.2, 0.5, 1 / n):  # the sets module's CVaR set (written independently) agrees
        A = S.CVaR(n, a)
        assert M.relative_unfairness(f, A, A) == pytest.approx(M.relative_unfairness(f, a, a), rel=1e-12)
    # and so does its HCVaR set with uniform p (= CVaR at level chi)
    H = S.HCVaR(np.full(n, 1 / n), 0.5)
    assert M.relative_unfairness(f, H, H) == pytest.approx(M.relative_unfairness(f, 0.5, 0.5), rel=1e-12)


@pytest.mark.parametrize("n,a,b", [(5, 0.2, 0.2), (5, 0.2, 0.6), (6, 1 / 3, 0.5), (4, 0.25, 0.75)])
def test_relative_unfairness_equals_permutation_max_when_alpha_n_integer(n, a, b):
    """Spec relative-fairness §3.2 Example 2: for integer alpha n, beta n the index is the max over
    all permutations sigma of (mean of the first ka entries) / (mean of the last kb entries)."""
    f = RNG.integers(1, 6, size=n).astype(float)  # ties
    ka, kb = round(a * n), round(b * n)
    best = max(np.mean(f[list(s[:ka])]) / np.mean(f[list(s[n - kb:])])
               for s in itertools.permutations(range(n)))
    assert M.relative_unfairness(f, a, b) == pytest.approx(best, rel=1e-12)


def test_relative_unfairness_rejects_bad_sets():
    f = np.array([1.0, 2.0, 3.0])
    with pytest.raises(InvalidParameterError, match="B carries a penalty psi"):
        M.relative_unfairness(f, S.Simplex(3), VertexSet(np.eye(3), penalty=0.3))
    with pytest.raises(InvalidParameterError, match="A must be a subset of the simplex"):
        M.relative_unfairness(f, VertexSet(np.array([[1.5, -0.5, 0.0]]), nonneg=False), 0.5)
    with pytest.raises(InvalidParameterError, match="A is a set for n = 4"):
        M.relative_unfairness(f, S.Simplex(4), 0.5)
    with pytest.raises(InvalidParameterError, match="B must lie in"):
        M.relative_unfairness(f, 0.5, 0.0)
    with pytest.raises(InvalidParameterError, match="A must lie in"):
        M.relative_unfairness(f, 1.5, 0.5)
    with pytest.raises(InvalidParameterError, match="A must be a real number"):
        M.relative_unfairness(f, "simplex", 0.5)

    class Fake:
        def worst_case(self, f):
            return 0.0, f

    with pytest.raises(InvalidParameterError, match="A must be a CVaR level in \\(0, 1\\] or a drflmodel.sets.WeightSet"):
        M.relative_unfairness(f, Fake(), 0.5)


# ----------------------------------------------------------------------------------------------
# Gini and the Lorenz curve
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 6, 11])
def test_gini_three_ways(n):
    u = RNG.integers(0, 4, size=n).astype(float) + (RNG.uniform(size=n) < 0.5) * RNG.uniform(size=n)
    if u.sum() == 0:
        u[0] = 1.0
    g = M.gini(u)
    assert g == pytest.approx(gini_double_sum(u), abs=1e-12)
    L = M.lorenz(u)
    assert g == pytest.approx(1 - 2 * np.trapezoid(L.ell, L.x), abs=1e-12)
    # the paper's printed formula with ell' is wrong by +0.5 (spec erratum 15)
    assert 1 - 2 * np.trapezoid(L.ell_prime, L.x) == pytest.approx(g + 0.5, abs=1e-12)


def test_gini_extremes():
    for n in (2, 5, 9):
        e = np.zeros(n)
        e[3 % n] = 2.0
        assert M.gini(e) == pytest.approx(1 - 1 / n)
        assert M.gini(np.ones(n)) == pytest.approx(0.0, abs=1e-15)


def test_lorenz_points_by_loop():
    u = np.array([3.0, 1.0, 0.0, 2.0, 2.0])
    L = M.lorenz(u)
    n = len(u)
    s = sorted(u)
    exp = [sum(s[:k]) / sum(u) for k in range(n + 1)]
    np.testing.assert_allclose(L.x, [k / n for k in range(n + 1)])
    np.testing.assert_allclose(L.ell, exp, atol=1e-15)
    np.testing.assert_allclose(L.ell_prime, np.array(exp) - L.x / 2, atol=1e-15)
    x, ell, ellp = L  # a plain tuple as well
    assert ell[0] == 0.0 and ell[-1] == 1.0
    assert set(L.to_dict()) == {"x", "ell", "ell_prime"}


# ----------------------------------------------------------------------------------------------
# skewness
# ----------------------------------------------------------------------------------------------
def test_skewness_definition():
    for lam in (np.full(4, 0.25), np.array([0.7, 0.2, 0.1]), np.array([1.4, -0.2, -0.2])):
        n = lam.size
        ref = n * sum((li - 1 / n) ** 2 for li in lam) + 1
        assert M.skewness(lam) == pytest.approx(ref)
    assert M.skewness(np.full(5, 0.2)) == pytest.approx(1.0)
    assert M.skewness(np.eye(5)[2]) == pytest.approx(5.0)
    with pytest.raises(InvalidParameterError, match="lam must sum to 1"):
        M.skewness([0.5, 0.2])
    with pytest.raises(InvalidDataError, match="lam"):
        M.skewness([[0.5, 0.5]])


# ----------------------------------------------------------------------------------------------
# HCVaR (spec fafl-hcvar §9.3)
# ----------------------------------------------------------------------------------------------
def variational(f, p, alpha, eta):
    return eta + np.sum(p / alpha * np.maximum(f - eta, 0.0))


def variational_min(f, p, alpha):
    etas = np.concatenate([f, np.linspace(f.min() - 1, f.max() + 1, 4001)])
    vals = etas + ((p / alpha)[None, :] * np.maximum(f[None, :] - etas[:, None], 0)).sum(1)
    return vals.min()


@pytest.mark.parametrize("seed", range(12))
def test_hcvar_greedy_vs_linprog_and_variational(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    f = rng.integers(0, 5, size=n).astype(float) if seed % 3 == 0 else rng.normal(size=n)  # ties
    p = rng.dirichlet(np.ones(n))
    alpha = rng.uniform(p, 1.0)  # the paper's domain [p_i, 1]
    v, eta, lam = M.hcvar(f, p, alpha, return_weights=True)
    assert v == pytest.approx(lp_capped(f, p / alpha), abs=1e-9)
    assert v == pytest.approx(variational_min(f, p, alpha), abs=1e-9)
    assert variational(f, p, alpha, eta) == pytest.approx(v, abs=1e-9)  # eta* is a minimizer
    assert lam.sum() == pytest.approx(1.0) and np.all(lam >= 0) and np.all(lam <= p / alpha + 1e-12)
    assert lam @ f == pytest.approx(v)
    v2, eta2 = M.hcvar(f, p, alpha)
    assert (v2, eta2) == (v, eta)


def test_hcvar_reductions():
    rng = np.random.default_rng(7)
    n = 6
    f = rng.uniform(0, 3, size=n)
    p = rng.dirichlet(np.ones(n))
    # alpha_i = 1: the p-weighted mean (FedAvg)
    assert M.hcvar(f, p, 1.0)[0] == pytest.approx(p @ f)
    # alpha_i <= p_i: AFL, max_i f_i (also below p_i, where the cap is vacuous)
    assert M.hcvar(f, p, p)[0] == pytest.approx(f.max())
    assert M.hcvar(f, p, p / 3)[0] == pytest.approx(f.max())
    # uniform p, alpha_i = chi: CVaR at level chi (fractional convention)
    u = np.full(n, 1 / n)
    for chi in (0.2, 0.5, 0.75, 1.0):
        assert M.hcvar(f, u, chi)[0] == pytest.approx(M.cvar_top(f, chi), abs=1e-12)
    # a client with p_i = 0 never carries weight
    p0 = np.array([0.0, 0.5, 0.5])
    f0 = np.array([10.0, 1.0, 2.0])
    v, eta, lam = M.hcvar(f0, p0, 0.5, return_weights=True)  # caps p/alpha = (0, 1, 1)
    assert lam[0] == 0.0 and v == pytest.approx(2.0) == pytest.approx(lp_capped(f0, p0 / 0.5))
    assert variational(f0, p0, 0.5, eta) == pytest.approx(v)


def test_hcvar_agrees_with_sets_hcvar_when_available():
    """Cross-check with the weight-set implementation (written independently in drflmodel.sets)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        n = int(rng.integers(1, 7))
        f = rng.normal(size=n)
        p = rng.dirichlet(np.ones(n))
        alpha = rng.uniform(p, 1.0)
        value, _ = S.HCVaR(p, alpha).worst_case(f)
        assert M.hcvar(f, p, alpha)[0] == pytest.approx(value, abs=1e-10)


def test_hcvar_bad_inputs():
    f = np.array([1.0, 2.0, 3.0])
    p = np.full(3, 1 / 3)
    with pytest.raises(InvalidParameterError, match="p must"):
        M.hcvar(f, [0.5, 0.5, 0.5], 0.5)
    with pytest.raises(InvalidParameterError, match="p must have length 3"):
        M.hcvar(f, [0.5, 0.5], 0.5)
    with pytest.raises(InvalidParameterError, match="alpha must lie in \\(0.0, 1.0\\]"):
        M.hcvar(f, p, 0.0)
    with pytest.raises(InvalidParameterError, match="alpha entries must lie in \\(0, 1\\]"):
        M.hcvar(f, p, [0.5, 1.2, 0.5])
    with pytest.raises(InvalidParameterError, match="alpha must be a scalar or have length 3"):
        M.hcvar(f, p, [0.5, 0.5])
    with pytest.raises(InvalidDataError, match="f contains NaN"):
        M.hcvar([1.0, np.nan, 2.0], p, 0.5)


# ----------------------------------------------------------------------------------------------
# classification metrics: accuracy, DFP / DFN, DEO (spec fair-vfl-deo §1.2, §2.4)
# ----------------------------------------------------------------------------------------------
def _loop_rate(y, yh, g, group, label, pred):
    num = den = 0
    for yi, yhi, gi in zip(y, yh, g):
        if gi == group and yi == label:
            den += 1
            num += yhi == pred
    return num / den


@pytest.mark.parametrize("seed", range(8))
def test_classification_metrics_vs_loops(seed):
    rng = np.random.default_rng(seed)
    n = 40
    y = rng.choice([-1.0, 1.0], size=n)
    g = rng.choice([0, 1], size=n)
    y[:4] = [1, 1, -1, -1]
    g[:4] = [0, 1, 0, 1]  # every (group, label) cell is nonempty
    scores = rng.normal(size=n)
    scores[5] = 0.0  # a tie: predicted +1
    yh = M.predict_sign(scores)
    assert yh[5] == 1.0
    assert list(yh) == [1.0 if s >= 0 else -1.0 for s in scores]
    in_a, in_b = g == 0, g == 1

    acc = sum(int(a == b) for a, b in zip(y, yh)) / n
    assert M.accuracy(y, yh) == pytest.approx(acc)
    fpr_a = _loop_rate(y, yh, g, 0, -1, 1)
    fpr_b = _loop_rate(y, yh, g, 1, -1, 1)
    fnr_a = _loop_rate(y, yh, g, 0, 1, -1)
    fnr_b = _loop_rate(y, yh, g, 1, 1, -1)
    assert M.dfp(y, yh, in_a, in_b) == pytest.approx(abs(fpr_a - fpr_b))
    assert M.dfn(y, yh, in_a, in_b) == pytest.approx(abs(fnr_a - fnr_b))
    assert M.false_positive_rate(y, yh, in_a) == pytest.approx(fpr_a)
    assert M.false_negative_rate(y, yh, in_b) == pytest.approx(fnr_b)
    # DEO with the 0-1 loss on N^s = {group s, y = +1}: |mean err on N_a - mean err on N_b|
    err_a = [int(a != b) for a, b, gi in zip(y, yh, g) if gi == 0 and a == 1]
    err_b = [int(a != b) for a, b, gi in zip(y, yh, g) if gi == 1 and a == 1]
    deo = abs(sum(err_a) / len(err_a) - sum(err_b) / len(err_b))
    assert M.deo_01(y, yh, in_a, in_b) == pytest.approx(deo)
    assert M.deo_01(y, yh, in_a, in_b) == pytest.approx(M.dfn(y, yh, in_a, in_b))
    # TPR gap form
    tpr_a = 1 - fnr_a
    tpr_b = 1 - fnr_b
    assert M.deo_01(y, yh, in_a, in_b) == pytest.approx(abs(tpr_a - tpr_b))
    # per-group accuracy
    acc_a = sum(int(a == b) for a, b, gi in zip(y, yh, g) if gi == 0) / sum(g == 0)
    acc_b = sum(int(a == b) for a, b, gi in zip(y, yh, g) if gi == 1) / sum(g == 1)
    assert M.per_group_accuracy(y, yh, in_a, in_b) == pytest.approx((acc_a, acc_b))
    assert M.group_accuracy(y, yh, in_a.astype(int)) == pytest.approx(acc_a)
    # surrogate DEO on arbitrary per-sample losses
    losses = rng.uniform(0, 2, size=n)
    N_a, N_b = in_a & (y == 1), in_b & (y == 1)
    la = sum(l for l, m in zip(losses, N_a) if m) / N_a.sum()
    lb = sum(l for l, m in zip(losses, N_b) if m) / N_b.sum()
    assert M.deo_surrogate(losses, N_a, N_b) == pytest.approx(abs(la - lb))
    assert M.deo_surrogate(losses, N_a, N_b, signed=True) == pytest.approx(la - lb)
    # the 0-1 surrogate reproduces deo_01
    assert M.deo_surrogate((y != yh).astype(float), N_a, N_b) == pytest.approx(M.deo_01(y, yh, in_a, in_b))


def test_per_client_accuracy():
    yt = [np.array([1, -1, 1]), np.array([-1, -1])]
    yp = [np.array([1, 1, 1]), np.array([-1, -1])]
    np.testing.assert_allclose(M.per_client_accuracy(yt, yp), [2 / 3, 1.0])
    with pytest.raises(InvalidDataError, match="same number of clients"):
        M.per_client_accuracy(yt, yp[:1])


def test_classification_bad_inputs():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    yh = np.array([1.0, 1.0, -1.0, -1.0])
    a = np.array([True, True, False, False])
    b = ~a
    with pytest.raises(InvalidDataError, match="y_pred must contain labels in \\{-1, \\+1\\}"):
        M.accuracy(y, [1, 0, 1, 1])
    with pytest.raises(InvalidDataError, match="y_true must contain labels"):
        M.accuracy([1, 2, 1, 1], yh)
    with pytest.raises(InvalidDataError, match="y_pred must have length 4"):
        M.accuracy(y, yh[:3])
    with pytest.raises(InvalidDataError, match="in_a and in_b overlap"):
        M.dfp(y, yh, a, np.ones(4, bool))
    with pytest.raises(InvalidDataError, match="in_b must be a 1-D boolean mask of length 4"):
        M.dfn(y, yh, a, b[:3])
    with pytest.raises(InvalidDataError, match="in_a must be a boolean mask"):
        M.dfn(y, yh, [0, 2, 1, 0], b)
    # group a has no negative rows -> FPR_a undefined
    with pytest.raises(InvalidDataError, match="FPR of group a"):
        M.dfp(np.array([1.0, 1.0, -1.0, -1.0]), yh, a, b)
    with pytest.raises(InvalidDataError, match="N_b .*is empty"):
        M.deo_01(np.array([1.0, -1.0, -1.0, -1.0]), yh, np.array([1, 0, 0, 0]), np.array([0, 1, 1, 1]))
    with pytest.raises(InvalidDataError, match="N_a is empty"):
        M.deo_surrogate(np.ones(4), np.zeros(4, bool), b)
    with pytest.raises(InvalidDataError, match="N_a and N_b overlap"):
        M.deo_surrogate(np.ones(4), a, np.ones(4, bool))
    with pytest.raises(InvalidDataError, match="losses contains NaN"):
        M.deo_surrogate([1.0, np.inf, 0.0, 1.0], a, b)
    with pytest.raises(InvalidDataError, match="scores must be 1-dimensional"):
        M.predict_sign(np.zeros((2, 2)))
    with pytest.raises(InvalidDataError, match="group_accuracy"):
        M.group_accuracy(y, yh, np.zeros(4, bool))


# ----------------------------------------------------------------------------------------------
# generic bad inputs (naming the argument)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [M.cvar_top, M.cvar_bottom, M.worst_fraction_mean, M.best_fraction_mean])
def test_fraction_functions_bad_inputs(fn):
    arg = "alpha" if fn is M.cvar_top else ("beta" if fn is M.cvar_bottom else "frac")
    with pytest.raises(InvalidParameterError, match=f"{arg} must lie in \\(0.0, 1.0\\]"):
        fn([1.0, 2.0], 0.0)
    with pytest.raises(InvalidParameterError, match=f"{arg} must lie in"):
        fn([1.0, 2.0], 1.01)
    with pytest.raises(InvalidParameterError, match=f"{arg} must be finite"):
        fn([1.0, 2.0], float("nan"))
    with pytest.raises(InvalidDataError, match="f must be 1-dimensional"):
        fn([[1.0, 2.0]], 0.5)
    with pytest.raises(InvalidDataError, match="f contains NaN or infinite"):
        fn([1.0, np.inf], 0.5)
    with pytest.raises(InvalidDataError, match="f must be nonempty"):
        fn([], 0.5)
    with pytest.raises(InvalidDataError, match="f must be numeric"):
        fn(["a", "b"], 0.5)


@pytest.mark.parametrize("fn", [M.ratio_20_20, M.palma, M.atkinson_inf, M.gini, M.lorenz, M.summary_indices])
def test_index_bad_inputs(fn):
    with pytest.raises(InvalidDataError, match="f must be 1-dimensional"):
        fn(np.ones((2, 3)))
    with pytest.raises(InvalidDataError, match="f contains NaN"):
        fn([1.0, np.nan])
    with pytest.raises(InvalidDataError, match="f must be nonempty"):
        fn([])


def test_summary_indices_consistency():
    f = RNG.uniform(0.5, 2, size=12)
    d = M.summary_indices(f)
    assert set(d) == {"relative_max_min", "ratio_20_20", "palma", "atkinson_inf", "gini"}
    assert d["relative_max_min"] == pytest.approx(f.max() / f.min())
    assert d["ratio_20_20"] == M.ratio_20_20(f)
    assert d["palma"] == M.palma(f)
    assert d["atkinson_inf"] == M.atkinson_inf(f)
    assert d["gini"] == M.gini(f)


# ----------------------------------------------------------------------------------------------
# hypothesis invariants
# ----------------------------------------------------------------------------------------------
pos_vectors = hnp.arrays(np.float64, st.integers(1, 12),
                         elements=st.floats(0.01, 100.0, allow_nan=False, allow_infinity=False))
nonneg_vectors = hnp.arrays(np.float64, st.integers(1, 12),
                            elements=st.floats(0.0, 100.0, allow_nan=False, allow_infinity=False))


@settings(max_examples=60, deadline=None)
@given(f=pos_vectors, c=st.floats(1e-3, 1e3), seed=st.integers(0, 2**31 - 1))
def test_scale_and_permutation_invariance(f, c, seed):
    perm = np.random.default_rng(seed).permutation(f.size)
    for fn in (M.ratio_20_20, M.palma, M.atkinson_inf, M.gini):
        base = fn(f)
        assert fn(c * f) == pytest.approx(base, rel=1e-9, abs=1e-12)
        assert fn(f[perm]) == pytest.approx(base, rel=1e-12, abs=1e-14)
    assert M.relative_unfairness(c * f, 0.3, 0.6) == pytest.approx(M.relative_unfairness(f, 0.3, 0.6), rel=1e-9)
    assert M.cvar_top(f[perm], 0.35) == pytest.approx(M.cvar_top(f, 0.35), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(f=nonneg_vectors)
def test_gini_range_and_ratio_at_least_one(f):
    if f.sum() == 0:
        return
    n = f.size
    g = M.gini(f)
    assert -1e-12 <= g <= 1 - 1 / n + 1e-12
    r = M.ratio_20_20(f)
    assert r >= 1 - 1e-12
    assert M.relative_unfairness(f, 0.5, 0.5) >= 1 - 1e-12
    assert 0 <= M.atkinson_inf(f) <= 1


@settings(max_examples=60, deadline=None)
@given(f=hnp.arrays(np.float64, st.integers(1, 10), elements=st.floats(-50, 50)),
       a1=st.floats(0.01, 1.0), a2=st.floats(0.01, 1.0))
def test_cvar_top_monotone_and_bounded(f, a1, a2):
    lo, hi = min(a1, a2), max(a1, a2)
    # smaller alpha = a more extreme tail: non-increasing in alpha, between mean and max
    assert M.cvar_top(f, lo) >= M.cvar_top(f, hi) - 1e-9
    assert M.cvar_bottom(f, lo) <= M.cvar_bottom(f, hi) + 1e-9
    for a in (lo, hi):
        assert f.mean() - 1e-9 <= M.cvar_top(f, a) <= f.max() + 1e-9
        assert f.min() - 1e-9 <= M.cvar_bottom(f, a) <= f.mean() + 1e-9


def test_indices_of_a_subnormal_loss_do_not_underflow_to_zero_over_zero():
    """Found by hypothesis: a single subnormal loss once gave cvar_top = 0.2 * 5e-324 / 0.2 = 0,
    so ratio_20_20 raised 0/0. With one client every index is its trivial value."""
    f = np.array([5e-324])
    assert M.cvar_top(f, 0.2) == 5e-324 and M.cvar_bottom(f, 0.2) == 5e-324
    assert M.ratio_20_20(f) == 1.0


def test_ratio_indices_are_computed_on_subnormal_and_huge_losses():
    """The hypothesis failure f = [5e-324, 0, ...]: the mean underflowed to 0 and the indices raised
    their 0/0 error; they are scale-invariant, so f and 1e300 * f give the same index."""
    f = np.array([5e-324, 0.0, 0.0, 0.0])
    assert M.atkinson_inf(f) == 1.0 and M.relative_unfairness(f, 0.5, 0.5) == np.inf
    g = np.array([1.0, 2.0, 3.0, 4.0])
    for scale in (5e-320, 1e300):
        assert M.atkinson_inf(scale * g) == pytest.approx(M.atkinson_inf(g), rel=1e-12)
        assert M.relative_unfairness(scale * g, 0.5, 0.5) == pytest.approx(M.relative_unfairness(g, 0.5, 0.5),
                                                                            rel=1e-6)
