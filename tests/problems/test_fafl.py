"""FairnessAwareFL (spec fafl-hcvar §2–§4, §9): Lemma 1 (primal sup over Q_α = HCVaR dual),
Lemma 2 (0 <= F^μ − F <= μ τ_α), the certificates of the exact and smoothed problems, the
reductions (α→1 average, α=p AFL, equal α CVaR), DPP α sweeps and bad input.

Independent routes: scipy ``linprog`` for the primal sup, brute force over the breakpoints
η ∈ {f_i} for the dual inf, closed-form weighted least squares, FederatedDRO over Simplex/CVaR,
scipy L-BFGS on the numpy smoothed objective with the spec §4 gradient formulas.
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import linprog, minimize

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.losses import Hinge, Logistic, Squared
from drflmodel.problems.minmax.dro import FederatedDRO
from drflmodel.problems.minmax.fafl import FairnessAwareFL
from drflmodel.sets import CVaR, HCVaR, Simplex

GAP = 1e-6


def regression_fed(sizes=(12, 20, 28, 36), d=3, seed=0, shift=0.6):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    Xs, ys = [], []
    for m in sizes:
        X = rng.normal(size=(m, d))
        Xs.append(X)
        ys.append(X @ (w + shift * rng.normal(size=d)) + 0.1 * rng.normal(size=m))
    return dm.Federation.from_arrays(Xs, ys)


def classification_fed(sizes=(15, 25, 35), d=3, seed=2):
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for m in sizes:
        X = rng.normal(size=(m, d))
        Xs.append(X)
        ys.append(np.where(X @ rng.normal(size=d) + 0.7 * rng.normal(size=m) > 0, 1.0, -1.0))
    return dm.Federation.from_arrays(Xs, ys, task="classification")


FED = regression_fed()
P = FED.proportions


def weighted_least_squares(prob, w):
    Q, r, _ = prob.objectives.quadratic_forms()
    theta = np.linalg.solve(np.einsum("i,ijk->jk", w, Q), w @ r)
    return theta, float(w @ prob.client_losses(theta))


def theta_radius(sol, mu):
    """sqrt(2 g / mu): certified distance to the minimizer of a mu-strongly convex objective."""
    g = max(sol.gap, 1e-12 * max(1.0, abs(sol.upper_bound)))
    return float(np.sqrt(2 * g / mu))


def primal_sup_vertices(f, p, alpha):
    """sup_{q∈Q_α} Σ q_i p_i f_i by enumerating the vertices of {λ: Σλ=1, 0<=λ<=p/α} (λ = q∘p):
    at a vertex every coordinate but (at most) one sits at a bound. Exact; n <= 6."""
    c = p / alpha
    n = len(f)
    best = -np.inf
    for j in range(n):
        others = [i for i in range(n) if i != j]
        for bits in itertools.product([0, 1], repeat=n - 1):
            lam = np.zeros(n)
            lam[others] = np.array(bits, float) * c[others]
            lam[j] = 1.0 - lam.sum()
            if -1e-12 <= lam[j] <= c[j] + 1e-12:
                best = max(best, float(lam @ f))
    return best


def primal_sup_linprog(f, p, alpha):
    """sup_{q∈Q_α} Σ q_i p_i f_i as an LP in q (Definition 1), by HiGHS (tolerance ~1e-7)."""
    res = linprog(-(p * f), A_eq=p[None, :], b_eq=[1.0], bounds=list(zip(np.zeros_like(p), 1 / alpha)),
                  method="highs")
    assert res.status == 0
    return -res.fun, res.x


def dual_inf_bruteforce(f, p, alpha):
    """inf_η η + Σ (p_i/α_i)(f_i − η)_+ : piecewise linear and convex with breakpoints at the f_i
    and bounded below (τ_α >= 1), so the infimum is attained at a breakpoint."""
    c = p / alpha
    vals = [eta + c @ np.maximum(f - eta, 0) for eta in f]
    return min(vals)


# ----------------------------------------------------------------------------- strategies
@st.composite
def fafl_inputs(draw, max_n=6):
    n = draw(st.integers(1, max_n))
    sizes = np.array(draw(st.lists(st.integers(1, 50), min_size=n, max_size=n)), float)
    p = sizes / sizes.sum()
    u = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    alpha = p + u * (1 - p)                       # α_i ∈ [p_i, 1]
    ties = draw(st.booleans())
    if ties:   # losses on a coarse grid: many ties (the case spec §9.1 #5 warns about)
        f = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), float)
    else:
        f = np.array(draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n, max_size=n)))
    return p, alpha, f


# ----------------------------------------------------------------------------- Lemma 1
@settings(max_examples=100, deadline=None)
@given(fafl_inputs())
def test_lemma1_primal_sup_equals_hcvar_dual(inp):
    p, alpha, f = inp
    primal = primal_sup_vertices(f, p, alpha)
    dual = dual_inf_bruteforce(f, p, alpha)
    value, lam, eta = HCVaR(p, alpha).worst_case(f, return_eta=True)
    scale = max(1.0, np.abs(f).max())
    assert abs(primal - dual) <= 1e-9 * scale
    assert abs(primal_sup_linprog(f, p, alpha)[0] - primal) <= 1e-6 * scale   # HiGHS, LP tolerance
    assert abs(value - primal) <= 1e-9 * scale
    # the greedy λ is primal feasible (q = λ/p ∈ Q_α) and η* attains the dual infimum
    qg = lam / p
    assert abs(p @ qg - 1) <= 1e-12 and np.all(qg >= -1e-15) and np.all(qg <= 1 / alpha + 1e-12)
    assert abs(eta + (p / alpha) @ np.maximum(f - eta, 0) - dual) <= 1e-9 * scale


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), u=st.floats(0.05, 0.95))
def test_lemma1_at_model_level_certificate_closes(seed, u):
    """Random federations: the CVXPY dual (Lemma 1, joint in (θ, η)) equals the primal sup at θ*,
    the certificate closes, and η* from the solve attains the inner infimum."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    fed = regression_fed(sizes=tuple(int(m) for m in rng.integers(5, 40, size=n)), seed=seed)
    p = fed.proportions
    alpha = p + u * (1 - p) * rng.uniform(0.2, 1.0, size=n)
    prob = FairnessAwareFL(fed, Squared(), alpha, l2=0.05)
    sol = prob.solve()
    assert sol.status == "optimal", sol.summary()
    assert sol.value == pytest.approx(primal_sup_vertices(sol.client_losses, p, prob.alpha), rel=1e-12)
    assert prob.joint_objective(sol.theta, sol.duals["eta"]) == pytest.approx(sol.value, rel=1e-6)
    assert sol.info["saddle_value"] == pytest.approx(sol.value, rel=1e-6)


# ----------------------------------------------------------------------------- Lemma 2
@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), eta=st.floats(-3, 6), mu=st.floats(1e-4, 10),
       u=st.floats(0, 1))
def test_lemma2_sandwich_random_points(seed, eta, mu, u):
    rng = np.random.default_rng(seed)
    alpha = P + u * (1 - P)
    prob = FairnessAwareFL(FED, Squared(), alpha)
    theta = rng.normal(size=FED.dim)
    F = prob.joint_objective(theta, eta)
    Fmu = prob.smoothed_objective(theta, eta, mu)
    tau = prob.tau_alpha
    assert F - 1e-12 * max(1, abs(F)) <= Fmu
    assert Fmu <= F + mu * np.log(2) * tau + 1e-10 * max(1, abs(F))   # sharp form (spec §9.1 #11)
    assert Fmu <= F + mu * tau + 1e-10 * max(1, abs(F))               # Lemma 2 as printed
    # F itself: the inf over η of F(θ, ·) is the primal objective (Lemma 1)
    assert prob.objective(theta) <= F + 1e-12 * max(1, abs(F))


@pytest.mark.parametrize("mu", [1.0, 0.1, 0.01])
def test_lemma2_at_the_optima_and_smoothed_certificate(mu):
    prob = FairnessAwareFL(FED, Squared(), np.minimum(1, 2 * P), l2=0.05)
    exact = prob.solve()
    smooth = prob.solve_smoothed(mu)
    assert exact.status == "optimal" and smooth.status == "optimal", smooth.summary()
    bias = mu * np.log(2) * prob.tau_alpha
    assert exact.lower_bound - 1e-9 <= smooth.value <= exact.upper_bound + bias + 1e-9
    # the exact objective at the smoothed optimum is within the bias of the exact optimum
    assert exact.lower_bound - 1e-9 <= prob.objective(smooth.theta) <= exact.upper_bound + bias + 1e-9
    q = smooth.duals["q"]
    assert P @ q == pytest.approx(1.0, abs=1e-12) and np.all(q <= 1 / prob.alpha + 1e-12)


def test_smoothed_optimum_matches_lbfgs_with_spec_gradients():
    """Independent route: L-BFGS on (θ, η) ↦ F^μ in numpy with the local gradients of spec §4
    (∇_θ = Σ p_i s_i/α_i ∇f_i, ∂_η = 1 − Σ p_i s_i/α_i), themselves checked by finite differences."""
    fed = classification_fed()
    p = fed.proportions
    mu = 0.05
    prob = FairnessAwareFL(fed, Logistic(), np.minimum(1, 1.8 * p), l2=0.02)
    c = prob.cap

    def fun(z):
        th, eta = z[:-1], z[-1]
        f = prob.client_losses(th)
        s = 1 / (1 + np.exp(-(f - eta) / mu))
        g = np.append((c * s) @ prob.objectives.gradients(th), 1 - c @ s)
        return prob.smoothed_objective(th, eta, mu), g

    z0 = np.array([0.3, -0.2, 0.1, 0.5])
    h = 1e-6
    fd = np.array([(fun(z0 + h * e)[0] - fun(z0 - h * e)[0]) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(fun(z0)[1], fd, rtol=1e-6, atol=1e-8)
    ref = minimize(fun, np.zeros(4), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20000})
    sol = prob.solve_smoothed(mu)
    assert sol.status == "optimal"
    assert sol.value <= ref.fun + 1e-9
    # F^μ is l2-strongly convex in θ for every η, hence its partial minimum in θ is too
    assert np.linalg.norm(sol.theta - ref.x[:-1]) <= theta_radius(sol, 0.02) + 1e-6
    assert sol.duals["eta"] == pytest.approx(ref.x[-1], abs=1e-4)
    assert prob.smoothed_eta(sol.theta, mu) == pytest.approx(sol.duals["eta"], rel=1e-12)


def test_smoothed_converges_to_exact_as_mu_decreases():
    prob = FairnessAwareFL(FED, Squared(), np.minimum(1, 2 * P), l2=0.05)
    exact = prob.solve()
    gaps = [prob.solve_smoothed(mu).value - exact.value for mu in (1.0, 0.1, 0.01, 0.001)]
    assert all(g >= -1e-8 for g in gaps)
    assert all(a > b for a, b in zip(gaps, gaps[1:]))


# ----------------------------------------------------------------------------- certificates
@pytest.mark.parametrize("loss,make,l2", [(Squared(), regression_fed, 0.0), (Squared(), regression_fed, 0.1),
                                          (Logistic(), classification_fed, 0.05),
                                          (Hinge(), classification_fed, 0.05)])
def test_certificate_closes(loss, make, l2):
    fed = make()
    p = fed.proportions
    prob = FairnessAwareFL(fed, loss, np.minimum(1, 1.7 * p), l2=l2)
    sol = prob.solve()
    assert sol.status == "optimal", sol.summary()
    assert abs(sol.relative_gap) <= GAP
    assert sol.upper_bound == pytest.approx(prob.objective(sol.theta), rel=1e-12)
    W = HCVaR(p, prob.alpha)
    assert W.contains(sol.weights, tol=1e-9)
    np.testing.assert_allclose(sol.duals["q"], sol.weights / p)
    # η* from the solve attains the Lemma 1 infimum at θ*, as does the greedy η*
    for key in ("eta", "eta_greedy"):
        assert prob.joint_objective(sol.theta, sol.duals[key]) == pytest.approx(sol.value, rel=1e-6)
    json.dumps(sol.to_dict())


def face_ranges(f, c, value, tol=1e-7):
    """[min λ_i, max λ_i] over the optimal face {λ: Σλ=1, 0<=λ<=c, λᵀf >= value − tol} (HiGHS)."""
    n = len(f)
    lo, hi = np.empty(n), np.empty(n)
    for i in range(n):
        for sign, out in ((1, lo), (-1, hi)):
            res = linprog(sign * np.eye(n)[i], A_ub=-f[None, :], b_ub=[-(value - tol)],
                          A_eq=np.ones((1, n)), b_eq=[1.0], bounds=list(zip(np.zeros(n), c)), method="highs")
            out[i] = sign * res.fun
    return lo, hi


@pytest.mark.parametrize("scale", [1.0, 1.4, 2.5, "one"])
def test_dual_weights_agree_with_greedy_where_unique(scale):
    alpha = np.ones_like(P) if scale == "one" else np.minimum(1, scale * P)
    prob = FairnessAwareFL(FED, Squared(), alpha, l2=0.1)
    sol = prob.solve()
    f = sol.client_losses
    lam_greedy = HCVaR(P, prob.alpha).worst_case(f)[1]
    assert sol.weights @ f >= sol.value - 1e-7            # always a maximizer
    lo, hi = face_ranges(f, prob.cap, sol.value)
    if np.all(hi - lo <= 1e-4):
        np.testing.assert_allclose(sol.weights, lam_greedy, atol=1e-4)
    if scale == "one":                                     # Q_α is a single point: unique
        assert np.all(hi - lo <= 1e-4)
        np.testing.assert_allclose(sol.weights, P, atol=1e-9)


# ----------------------------------------------------------------------------- reductions
def test_alpha_one_is_p_weighted_average():
    prob = FairnessAwareFL(FED, Squared(), 1.0, l2=0.05)
    sol = prob.solve()
    theta, value = weighted_least_squares(prob, P)
    assert sol.value == pytest.approx(value, rel=1e-8)
    assert np.linalg.norm(sol.theta - theta) <= theta_radius(sol, 0.05)
    np.testing.assert_allclose(sol.weights, P, atol=1e-9)


def test_alpha_near_one_approaches_average():
    prob = FairnessAwareFL(FED, Squared(), 0.999, l2=0.05)   # α_i → 1
    _, value = weighted_least_squares(prob, P)
    sol = prob.solve()
    assert value - 1e-9 <= sol.value <= value + 0.01 * value


def test_alpha_equal_p_is_afl():
    fafl = FairnessAwareFL(FED, Squared(), P, l2=0.05).solve()
    afl = FederatedDRO(FED, Squared(), Simplex(FED.n_clients), l2=0.05).solve()
    assert fafl.value == pytest.approx(afl.value, rel=1e-8)
    assert np.linalg.norm(fafl.theta - afl.theta) <= theta_radius(fafl, 0.05) + theta_radius(afl, 0.05)


def test_alpha_below_p_clip_option_is_afl_with_warning():
    with pytest.warns(UserWarning, match="alpha_i < p_i"):
        prob = FairnessAwareFL(FED, Squared(), P / 2, l2=0.05, alpha_below_p="clip")
    afl = FederatedDRO(FED, Squared(), Simplex(FED.n_clients), l2=0.05).solve()
    assert prob.solve().value == pytest.approx(afl.value, rel=1e-8)


@pytest.mark.parametrize("chi", [0.25, 0.5, 0.8])
def test_equal_alpha_uniform_p_is_cvar(chi):
    fed = regression_fed(sizes=(20, 20, 20, 20))
    fafl = FairnessAwareFL(fed, Squared(), chi, l2=0.05).solve()
    cvar = FederatedDRO(fed, Squared(), CVaR(fed.n_clients, chi), l2=0.05).solve()
    assert fafl.value == pytest.approx(cvar.value, rel=1e-8)
    assert np.linalg.norm(fafl.theta - cvar.theta) <= theta_radius(fafl, 0.05) + theta_radius(cvar, 0.05)


# ----------------------------------------------------------------------------- DPP
def test_alpha_sweep_is_dpp_and_matches_fresh_solves():
    prob = FairnessAwareFL(FED, Squared(), np.minimum(1, 2 * P), l2=0.05)
    compiled = prob.build()
    assert compiled.is_dpp() and "alpha" in prob.parameters
    values = [np.minimum(1, k * P) for k in (1.0, 1.5, 2.0, 3.0)]
    sols = prob.sweep("alpha", values)
    assert prob.build() is compiled
    for v, s in zip(values, sols):
        fresh = FairnessAwareFL(FED, Squared(), v, l2=0.05).solve()
        assert s.status == "optimal"
        assert s.value == pytest.approx(fresh.value, rel=1e-8)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("alpha,match", [
    (1.5, r"alpha\[0\].*\[p_0, 1\]"),
    (0.0, r"alpha\[0\].*\[p_0, 1\]"),
    (-0.2, r"alpha\[0\]"),
    (P / 2, r"alpha\[0\].*\[p_0, 1\].*alpha_below_p"),
    (np.array([0.5, 0.5]), "length 4"),
    (np.array([0.5, np.nan, 0.5, 0.5]), "alpha"),
])
def test_bad_alpha(alpha, match):
    with pytest.raises((InvalidParameterError, dm.InvalidDataError), match=match):
        FairnessAwareFL(FED, Squared(), alpha)


def test_bad_alpha_in_sweep_and_other_parameters():
    prob = FairnessAwareFL(FED, Squared(), 0.5)
    with pytest.raises(InvalidParameterError, match="alpha"):
        prob.set_parameter("alpha", 1.2)
    assert np.all(prob.alpha == 0.5)               # unchanged after a rejected value
    with pytest.raises(InvalidParameterError, match="no sweepable parameter"):
        prob.set_parameter("rho", 1.0)
    with pytest.raises(InvalidParameterError, match="alpha_below_p"):
        FairnessAwareFL(FED, Squared(), 0.5, alpha_below_p="ignore")
    with pytest.raises(InvalidParameterError, match="mu"):
        prob.smoothed_objective(np.zeros(FED.dim), 0.0, 0.0)
    with pytest.raises(InvalidParameterError, match="mu"):
        prob.solve_smoothed(-1.0)
    with pytest.raises(InvalidParameterError, match="tau_alpha"):
        FairnessAwareFL(FED, Squared(), 1.0).solve_smoothed(0.1)
    with pytest.raises(InvalidParameterError, match="task"):
        FairnessAwareFL(FED, Logistic(), 0.5)


def test_public_name():
    assert dm.FairnessAwareFL is FairnessAwareFL
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FairnessAwareFL(FED, Squared(), P)   # α = p exactly is allowed, no warning
