"""RelativeFairness (spec relative-fairness §4.4, §9, §14): R1/R2/R3 agreement, SDP certificates
against brute force, the phi = 0 reduction to FederatedDRO, convexity tests, the local (DC) route
for non-quadratic losses, phi selection, and bad input.

Every expected value comes from an independent route: vectorized grid search + SciPy SLSQP polish
on the epigraph form (brute force), SciPy minimizers on the numpy objective, closed-form
generalized eigenvalues, the spec's closed forms for ||Lambda_phi||_1, or FederatedDRO.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest
import scipy.linalg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.losses import Huber, Logistic, Squared
from drflmodel.metrics import cvar_bottom, cvar_top
from drflmodel.problems.minmax.dro import FederatedDRO
from drflmodel.problems.relative import RelativeFairness, select_phi
from drflmodel.sets import ChiSquare, CVaR, Integrated, Simplex

GAP = 1e-6
ROOT = pathlib.Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- instances
def reg_fed(n=4, d=3, m=12, seed=0):
    """Clients with heterogeneous feature scales and concept shift."""
    rng = np.random.default_rng(seed)
    Xs = [rng.normal(size=(m, d)) * rng.uniform(0.3, 2.0, size=d) for _ in range(n)]
    ys = [X @ rng.normal(size=d) + 0.5 * rng.normal(size=m) for X in Xs]
    return dm.Federation.from_arrays(Xs, ys, task="regression")


def clf_fed(n=3, d=2, m=15, seed=0):
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for i in range(n):
        X = rng.normal(size=(m, d)) + 0.5 * i
        y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    return dm.Federation.from_arrays(Xs, ys, task="classification")


def g_numpy(F, phi, alpha=None):
    """Independent objective from a loss matrix F (points x clients): sorting-based CVaR
    (``metrics.cvar_top``) or max/min for the simplex."""
    if alpha is None:
        return (F.max(axis=1) - phi * F.min(axis=1)) / (1 - phi)
    top = np.array([cvar_top(f, alpha) for f in F])
    bot = np.array([cvar_bottom(f, alpha) for f in F])
    return (top - phi * bot) / (1 - phi)


def piece_weights(n, phi, k=1):
    """The weight vectors (a_S - phi b_T)/(1 - phi) over all k-subsets S, T with uniform weights
    1/k: for CVaR sets with alpha n = k an integer (k = 1: the simplex), the objective is the max
    of lambda^T f over these points (enumerated here with itertools, independently of sets.py)."""
    import itertools

    subsets = [np.isin(np.arange(n), S) / k for S in itertools.combinations(range(n), k)]
    return np.array([(a - phi * b) / (1 - phi) for a in subsets for b in subsets])


def brute_force_box(prob, phi, lower, upper, k=161, top=8, subset=1):
    """min over the box of max_v lambda_v^T f(theta) (pieces from :func:`piece_weights`): a
    vectorized grid, then SciPy SLSQP on the epigraph form t >= lambda_v^T f(theta) from the best
    grid points. Uses only the data matrices (not the oracle)."""
    d = lower.size
    Xs = [c.X for c in prob.federation.clients]
    ys = [c.y for c in prob.federation.clients]
    lams = piece_weights(len(Xs), phi, subset)

    def losses(T):
        T = np.atleast_2d(T)
        return np.stack([np.mean((T @ X.T - y) ** 2, axis=1) for X, y in zip(Xs, ys)], axis=1)

    grids = np.meshgrid(*[np.linspace(lower[j], upper[j], k) for j in range(d)])
    T = np.stack([g.ravel() for g in grids], axis=1)
    G = (losses(T) @ lams.T).max(axis=1)
    best = float(G.min())
    for p in T[np.argsort(G)[:top]]:
        def cons(x):
            return x[-1] - lams @ losses(x[:-1])[0]
        x0 = np.append(p, G.min() + 1.0)
        res = minimize(lambda x: x[-1], x0, method="SLSQP", constraints=[{"type": "ineq", "fun": cons}],
                       bounds=[(lower[j], upper[j]) for j in range(d)] + [(None, None)],
                       options={"ftol": 1e-13, "maxiter": 500})
        x = np.clip(res.x[:-1], lower, upper)
        best = min(best, float((lams @ losses(x)[0]).max()))
    return best


# ----------------------------------------------------------------------------- R1 / R2 / R3
@settings(max_examples=int(__import__("os").environ.get("RELATIVE_HYPOTHESIS_EXAMPLES", 4)), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cvar=st.booleans(), frac=st.floats(0.2, 0.95))
def test_r1_r2_r3_agree_on_convex_instances(seed, cvar, frac):
    n, d = 4, 3
    fed = reg_fed(n, d, seed=seed)
    mk = (lambda: CVaR(n, 0.5)) if cvar else (lambda: Simplex(n))
    prob = RelativeFairness(fed, Squared(), mk(), mk(), phi=0.0)
    phi = min(0.6, frac * prob.max_convex_phi("vertex"))
    prob.set_parameter("phi", phi)
    assert prob.convexity_report().conditions["vertex_psd"].holds
    sols = {m: prob.solve(method=m) for m in ("R1", "R2", "R3")}
    for m, s in sols.items():
        assert s.status == "optimal", (m, s.summary())
        assert s.lower_bound <= s.upper_bound + 1e-7 * max(1, abs(s.upper_bound))
    vals = np.array([s.value for s in sols.values()])
    assert np.ptp(vals) <= 2e-6 * max(1.0, abs(vals.mean()))
    # the value is the numpy objective at each theta, computed independently
    F = np.stack([prob.client_losses(s.theta) for s in sols.values()])
    np.testing.assert_allclose(g_numpy(F, phi, alpha=0.5 if cvar else None), vals, rtol=1e-9)
    # strong convexity -> unique theta*: the three routes find the same point
    for s in sols.values():
        assert np.linalg.norm(s.theta - sols["R1"].theta) <= 1e-3 * max(1, np.linalg.norm(sols["R1"].theta))
    assert prob.choose_method() == "R1"
    # saddle check (spec §14.3 step 3): grad of lam_bar^T f vanishes at theta* (R1 and R3 duals)
    for m in ("R1", "R3"):
        scale = max(1.0, float(np.abs(prob.objectives.gradients(sols[m].theta)).max()))
        assert sols[m].info["stationarity_residual"] <= 1e-4 * scale   # R1 multipliers: ~1e-5


def test_many_vertices_convex_by_prop10_uses_r3_and_agrees_with_r2_and_ccp():
    """CVaR(8, 1/2): 70 x 70 vertex pairs (too many for R1/the vertex test); Prop 10 certifies
    convexity, so the automatic route is R3; the lifted SDP and the CCP (closed by the Lemma-8
    bound) give the same value."""
    rng = np.random.default_rng(0)
    n, d = 8, 3
    Xs = [rng.normal(size=(60, d)) for _ in range(n)]
    ys = [X @ rng.normal(size=d) + 0.3 * rng.normal(size=60) for X in Xs]
    prob = RelativeFairness(dm.Federation.from_arrays(Xs, ys), Squared(), CVaR(n, 0.5), CVaR(n, 0.5),
                            phi=0.1, l2=1.0)
    assert prob.vertex_weights() is None and "vertex_psd" not in prob.convexity_report().conditions
    assert prob.convexity_report().conditions["prop10_convexity"].holds
    sols = [prob.solve(), prob.solve(method="R2"), prob.solve(method="local")]
    assert sols[0].info["method"] == "R3"
    assert all(s.status == "optimal" for s in sols)
    vals = [s.value for s in sols]
    assert np.ptp(vals) <= 1e-6 * max(1, abs(vals[0]))
    F = prob.client_losses(sols[0].theta)[None, :]
    assert g_numpy(F, 0.1, alpha=0.5)[0] == pytest.approx(vals[0], rel=1e-10)


def test_other_polytopes_lpball_and_hcvar_agree_across_r1_r2_r3():
    from drflmodel.sets import HCVaR, LpBall

    n, d = 4, 3
    fed = reg_fed(n, d, seed=11)
    A = LpBall(np.ones(n) / n, 0.3, np.inf)
    B = HCVaR(fed.proportions, 0.5 * np.ones(n))
    prob = RelativeFairness(fed, Squared(), A, B, phi=0.0)
    prob.set_parameter("phi", 0.5 * prob.max_convex_phi())
    sols = [prob.solve(method=m) for m in ("R1", "R2", "R3")]
    assert all(s.status == "optimal" for s in sols)
    vals = [s.value for s in sols]
    assert np.ptp(vals) <= 1e-6 * max(1, abs(vals[0]))
    # numpy objective from an independent LP (scipy.optimize.linprog over A and B)
    from scipy.optimize import linprog

    f = prob.client_losses(sols[0].theta)
    lo_a, hi_a = np.maximum(0, 1 / n - 0.3), np.minimum(1, 1 / n + 0.3)
    FA = -linprog(-f, A_eq=np.ones((1, n)), b_eq=[1], bounds=[(lo_a, hi_a)] * n).fun
    cap = fed.proportions / 0.5
    FB = linprog(f, A_eq=np.ones((1, n)), b_eq=[1], bounds=list(zip(np.zeros(n), cap))).fun
    assert (FA - prob.phi * FB) / (1 - prob.phi) == pytest.approx(vals[0], rel=1e-8)


def test_local_searches_never_beat_a_certified_optimum():
    n, d = 4, 3
    for seed in range(3):
        fed = reg_fed(n, d, seed=seed)
        prob = RelativeFairness(fed, Squared(), Simplex(n), Simplex(n), phi=0.0)
        prob.set_parameter("phi", 0.8 * prob.max_convex_phi("vertex"))
        sol = prob.solve()
        assert sol.status == "optimal"
        L = sol.lower_bound
        # our CCP from random starts ...
        _, _, runs = prob.local_search(n_starts=4, seed=seed + 100)
        assert min(r["value"] for r in runs) >= L - 1e-7 * max(1, abs(L))
        # ... and an independent derivative-free search on the numpy objective
        rng = np.random.default_rng(seed)
        for _ in range(4):
            res = minimize(prob.objective, sol.theta + rng.normal(size=d), method="Nelder-Mead",
                           options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000})
            assert res.fun >= L - 1e-7 * max(1, abs(L))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nonconvex_sdp_certificate_confirmed_by_brute_force(seed):
    """phi above the exact vertex threshold (not convex in general), box, d = 2: R2 + RLT."""
    n, d = 3, 2
    fed = reg_fed(n, d, m=8, seed=seed)
    lower, upper = -2.0 * np.ones(d), 2.0 * np.ones(d)
    prob = RelativeFairness(fed, Squared(), Simplex(n), Simplex(n), phi=0.0, box=(lower, upper))
    phi = min(0.9, prob.max_convex_phi("vertex") + 0.3)
    prob.set_parameter("phi", phi)
    rep = prob.convexity_report()
    assert not rep.conditions["vertex_psd"].holds and not rep.convex
    sol = prob.solve()
    assert sol.info["method"] == "R2" and sol.info["rlt_cuts"]
    assert prob.in_box(sol.theta)
    best = brute_force_box(prob, phi, lower, upper)
    scale = max(1.0, abs(best))
    assert sol.lower_bound <= best + 1e-7 * scale           # the SDP bound is valid
    assert sol.upper_bound >= best - 1e-7 * scale           # U is attained by a feasible point
    assert sol.status == "optimal"                          # certified on these instances ...
    assert sol.info["rank_one"]
    assert abs(sol.value - best) <= 1e-6 * scale            # ... and the certified value is the brute-force one


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_nonconvex_d3_bound_valid_and_honest_status(seed):
    """d = 3 with CVaR sets: whatever the status, L <= (best point found by exhaustive
    multi-start) <= U-consistent, and "optimal" only with a rank-one matrix and a closed gap."""
    n, d = 5, 3
    fed = reg_fed(n, d, m=8, seed=seed)
    lower, upper = -2.0 * np.ones(d), 2.0 * np.ones(d)
    prob = RelativeFairness(fed, Squared(), CVaR(n, 0.4), CVaR(n, 0.4), phi=0.8, box=(lower, upper))
    sol = prob.solve()
    rng = np.random.default_rng(seed)
    best = sol.upper_bound
    for x0 in rng.uniform(lower, upper, size=(30, d)):
        res = minimize(prob.objective, x0, method="Powell", bounds=list(zip(lower, upper)),
                       options={"xtol": 1e-10, "ftol": 1e-13})
        best = min(best, float(res.fun))
    scale = max(1.0, abs(best))
    assert sol.lower_bound <= best + 1e-7 * scale
    if sol.status == "optimal":
        assert sol.info["rank_one"] or "branch_and_bound" in sol.info
        assert abs(sol.value - best) <= 1e-6 * scale
    else:
        assert sol.status == "optimal_within_gap"


def test_branch_and_bound_certifies_where_the_root_relaxation_does_not():
    """d = 3, CVaR(5, 0.4) sets, phi = 0.8, box: the root SDP + RLT is not tight (status
    "optimal_within_gap" with max_nodes=0); the spatial branch-and-bound closes the gap, and the
    certified value is confirmed by a grid + Powell search over the box."""
    n, d = 5, 3
    fed = reg_fed(n, d, m=8, seed=1)
    lower, upper = -2.0 * np.ones(d), 2.0 * np.ones(d)
    prob = RelativeFairness(fed, Squared(), CVaR(n, 0.4), CVaR(n, 0.4), phi=0.8, box=(lower, upper))
    root = prob.solve(max_nodes=0, n_starts=1)
    assert root.status == "optimal_within_gap" and not root.info["rank_one"]
    sol = prob.solve(max_nodes=200)
    assert sol.status == "optimal" and sol.relative_gap <= GAP
    assert "branch_and_bound" in sol.info and sol.lower_bound >= root.lower_bound - 1e-9
    # brute force: alpha n = 2, so CVaR_0.4 is the mean of the top (bottom) two losses exactly
    best = brute_force_box(prob, 0.8, lower, upper, k=31, top=6, subset=2)
    assert sol.lower_bound <= best + 1e-7 * best
    assert abs(sol.value - best) <= 1e-6 * best


def test_open_relaxation_is_reported_within_gap_not_optimal():
    """A plain Shor relaxation (no box) that is not tight: the status says so, L stays valid."""
    n, d = 4, 3
    fed = reg_fed(n, d, m=8, seed=4)
    prob = RelativeFairness(fed, Squared(), Simplex(n), Simplex(n), phi=0.9)
    sol = prob.solve(n_starts=3, max_iter=30)
    assert sol.info["method"] == "R2"
    assert sol.status == "optimal_within_gap" and sol.relative_gap > 1e-3
    assert not sol.info["rank_one"]
    rng = np.random.default_rng(0)
    for x0 in rng.normal(size=(10, d)) * 2:
        res = minimize(prob.objective, x0, method="Nelder-Mead", options={"maxiter": 3000})
        assert res.fun >= sol.lower_bound - 1e-7 * max(1, abs(sol.lower_bound))


# ----------------------------------------------------------------------------- phi = 0
@pytest.mark.parametrize("sets", ["simplex", "cvar"])
def test_phi_zero_equals_federated_dro(sets):
    n, d = 4, 3
    fed = reg_fed(n, d, seed=3)
    mk = (lambda: Simplex(n)) if sets == "simplex" else (lambda: CVaR(n, 0.5))
    prob = RelativeFairness(fed, Squared(), mk(), mk(), phi=0.0)
    sol = prob.solve()
    ref = FederatedDRO(fed, Squared(), weights=mk()).solve()
    assert sol.info["method"] == "FederatedDRO"
    assert sol.status == ref.status == "optimal"
    assert sol.certificate == ref.certificate
    assert abs(sol.value - ref.value) <= 1e-9 * max(1, abs(ref.value))
    np.testing.assert_allclose(sol.theta, ref.theta, atol=1e-6)
    # independent routes at phi = 0 (vertex SOCP, lifted SDP) agree
    for m in ("R1", "R2"):
        s = prob.solve(method=m)
        assert s.status == "optimal"
        assert abs(s.value - ref.value) <= 2e-6 * max(1, abs(ref.value))


def test_phi_zero_non_quadratic_equals_dro():
    fed = clf_fed()
    prob = RelativeFairness(fed, Logistic(), Simplex(3), Simplex(3), phi=0.0, l2=0.1)
    sol = prob.solve()
    ref = FederatedDRO(fed, Logistic(), weights=Simplex(3), l2=0.1).solve()
    assert sol.status == "optimal" and abs(sol.value - ref.value) <= 1e-8 * max(1, ref.value)


# ----------------------------------------------------------------------------- convexity tests
def test_convexity_report_thresholds_and_max_convex_phi():
    n, d = 3, 3
    fed = reg_fed(n, d, seed=5)
    prob = RelativeFairness(fed, Squared(), Simplex(n), Simplex(n), phi=0.05)
    Q = np.stack([2 * c.X.T @ c.X / c.size for c in fed.clients]) / 2      # f_i = t'Q_i t - 2 r't + c
    # exact pairwise threshold (spec §14.2): min_{i != j} lambda_min(Q_j^{-1/2} Q_i Q_j^{-1/2})
    ref = min(scipy.linalg.eigh(Q[i], Q[j], eigvals_only=True).min()
              for i in range(n) for j in range(n) if i != j)
    phi_star = prob.max_convex_phi("vertex")
    assert abs(phi_star - min(ref, 1.0)) <= 1e-9
    for phi, expect in ((0.98 * phi_star, True), (min(0.99, 1.02 * phi_star), False)):
        direct = min(np.linalg.eigvalsh(Q[i] - phi * Q[j])[0] for i in range(n) for j in range(n) if i != j)
        assert (direct >= 0) == expect
        assert prob.vertex_psd_test(phi)["holds"] == expect
    # Prop 10 / Thm 3 / Assumption 8 with ||Lambda||_1 = (1+phi)/(1-phi) for the full simplex
    ev = np.linalg.eigvalsh(2 * Q)
    m_f, M_f = ev[:, 0].min(), ev[:, -1].max()
    rep = prob.convexity_report(0.05)
    assert rep.norm1 == pytest.approx(1.05 / 0.95, rel=1e-12)
    assert rep.m_f == pytest.approx(m_f, rel=1e-9) and rep.M_f == pytest.approx(M_f, rel=1e-9)
    c = rep.conditions
    assert c["prop10_convexity"].threshold == pytest.approx(1 + 2 * m_f / (M_f - m_f), rel=1e-9)
    assert c["theorem3_printed"].threshold == pytest.approx(1 + 2 * m_f / M_f, rel=1e-9)
    assert c["assumption8_rate"].threshold == pytest.approx(1 + m_f / (2 * M_f), rel=1e-9)
    for cond in c.values():
        assert cond.holds == ((cond.value < cond.threshold) if cond.comparison == "<" else (cond.value >= 0))
    # the Prop 10 sufficient condition is phi < m_f/M_f for the full simplex (spec table)
    assert prob.max_convex_phi("prop10") == pytest.approx(m_f / M_f, rel=1e-6)
    # the conditions are nested: Assumption 8 => Theorem 3 => Prop 10 (thresholds ordered)
    assert c["assumption8_rate"].threshold <= c["theorem3_printed"].threshold <= c["prop10_convexity"].threshold
    json.dumps(rep.to_dict())
    assert "prop10_convexity" in rep.table()


def test_penguins_convexity_numbers_of_the_spec():
    """Spec §14.2: m_f/M_f ~ 9e-9 (unscaled) and the exact pairwise threshold 0.0034."""
    fed = dm.datasets.penguins(n_per_species=10)
    prob = RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.01)
    assert prob.max_convex_phi("vertex") == pytest.approx(0.0034, abs=5e-5)
    m, M = prob.curvature_constants()
    assert 5e-9 < m / M < 2e-8
    assert not prob.convexity_certified(0.01) and prob.convexity_certified(0.003)
    assert not prob.rate_conditions_hold(0.01)


# ----------------------------------------------------------------------------- non-quadratic
def test_non_quadratic_phi_positive_is_local_with_a_valid_bound():
    fed = reg_fed(3, 2, m=10, seed=1)
    lower, upper = -3.0 * np.ones(2), 3.0 * np.ones(2)
    phi = 0.3
    prob = RelativeFairness(fed, Huber(1.0), Simplex(3), Simplex(3), phi=phi, box=(lower, upper))
    assert not prob.convexity_report().convex
    sol = prob.solve(n_starts=3, seed=0)
    assert sol.info["method"] == "local"
    assert np.isfinite(sol.lower_bound) and sol.lower_bound <= sol.upper_bound
    assert sol.status in ("local", "optimal")
    if sol.status == "optimal":
        assert sol.relative_gap <= GAP
    assert sol.info["lower_bound_kind"] in sol.info["lower_bounds"]
    json.dumps(sol.to_dict())
    # the bound is valid: a dense grid over the box never goes below it
    g = np.linspace(-3, 3, 241)
    T = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    F = np.stack([Huber(1.0).value(T @ c.X.T, c.y[None, :]).mean(axis=1) for c in fed.clients], axis=1)
    grid_min = g_numpy(F, phi).min()
    assert sol.lower_bound <= grid_min + 1e-9
    assert sol.upper_bound <= grid_min + 1e-6 * max(1, grid_min) or sol.status == "local"
    assert prob.in_box(sol.theta)


def test_non_quadratic_convex_case_closes_with_the_strong_convexity_bound():
    """Logistic with a large ridge: Prop 10 holds, so every lambda^T f is strongly convex and the
    Lemma-8 bound can certify the CCP point."""
    fed = clf_fed(3, 2, seed=2)
    prob = RelativeFairness(fed, Logistic(), Simplex(3), Simplex(3), phi=0.1, l2=1.0)
    rep = prob.convexity_report()
    assert rep.conditions["prop10_convexity"].holds and rep.modulus > 0
    sol = prob.solve(n_starts=2, max_iter=100)
    assert sol.info["method"] == "local"
    assert "strong_convexity_prop10" in sol.info["lower_bounds"]
    assert sol.lower_bound <= sol.upper_bound + 1e-9
    # independent check of the value: Nelder-Mead on the numpy objective cannot beat L
    res = minimize(prob.objective, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-13})
    assert res.fun >= sol.lower_bound - 1e-9
    assert abs(res.fun - sol.value) <= 1e-5
    assert sol.status == "optimal" and sol.relative_gap <= GAP   # the certificate closes here


# ----------------------------------------------------------------------------- sweep, indices, phi
def test_sweep_phi_theorem1_invariants_and_indices():
    n, d = 4, 2
    fed = reg_fed(n, d, seed=7)
    box = (-3 * np.ones(d), 3 * np.ones(d))
    prob = RelativeFairness(fed, Squared(), Simplex(n), Simplex(n), phi=0.0, box=box)
    sols = prob.sweep_phi([0.0, 0.1, 0.3, 0.5])
    assert all(s.status == "optimal" for s in sols)
    FA = [s.client_losses.max() for s in sols]
    FB = [s.client_losses.min() for s in sols]
    R = [s.info["indices"]["relative_unfairness"] for s in sols]
    tol = 1e-6
    for k in range(len(sols) - 1):
        assert FA[k] <= FA[k + 1] + tol * FA[k]                           # (10)
        assert FA[k + 1] - FB[k + 1] <= FA[k] - FB[k] + tol * FA[k]       # (11)
        assert R[k + 1] <= R[k] * (1 + tol)                               # Theorem 1
    ind = sols[-1].info["indices"]
    f = sols[-1].client_losses
    assert ind["relative_unfairness"] == pytest.approx(f.max() / f.min(), rel=1e-12)
    for key in ("ratio_20_20", "palma", "atkinson_inf", "gini"):
        assert key in ind and np.isfinite(ind[key])
    assert [s.info["phi"] for s in sols] == [0.0, 0.1, 0.3, 0.5]
    json.dumps(sols[-1].to_dict())


def test_select_phi_minimizes_the_approximate_utility():
    fed = reg_fed(4, 3, seed=8)
    A, B = CVaR(4, 0.5), CVaR(4, 0.5)
    sel = select_phi(fed, Squared(), A, B, l2=0.1)
    assert 0 <= sel.phi <= 1 - 1e-6 and sel.c > 0
    # independent: minimize u(phi) = (a + phi^2 c / 2)(b + phi c)^(-1/2) numerically (spec §9 step iv)
    u = lambda p: (sel.a + p * p * sel.c / 2) / np.sqrt(sel.b + p * sel.c)  # noqa: E731
    res = minimize_scalar(u, bounds=(0, 50), method="bounded", options={"xatol": 1e-12})
    assert sel.phi == pytest.approx(min(res.x, 1 - 1e-6), rel=1e-6, abs=1e-9)
    assert sel.clipped == (res.x > 1 - 1e-6)
    # c = g' H^{-1} g from the definitions, with numpy Hessians/gradients at theta0
    obj = dm.ClientObjectives(fed, Squared(), 0.1)
    H = np.einsum("i,ijk->jk", sel.a0, obj.hessians(sel.theta0))
    g = sel.b0 @ obj.gradients(sel.theta0)
    assert sel.c == pytest.approx(g @ np.linalg.solve(H, g), rel=1e-9)
    json.dumps(sel.to_dict())
    assert float(sel) == sel.phi


def test_select_phi_singular_hessian_is_a_clear_error():
    """d = 5 features, 2 clients with 2 samples each and no ridge: H has rank <= 4 (errata item 6)."""
    rng = np.random.default_rng(0)
    fed = dm.Federation.from_arrays([rng.normal(size=(2, 5)) for _ in range(2)], [rng.normal(size=2) for _ in range(2)])
    with pytest.raises(dm.NotConvexError, match="positive definite"):
        select_phi(fed, Squared(), Simplex(2), Simplex(2))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("phi", [1.0, -0.1, 1.5, float("nan"), "0.1"])
def test_bad_phi(phi):
    fed = reg_fed(3, 2)
    with pytest.raises(InvalidParameterError, match="phi"):
        RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=phi)


def test_bad_sets_and_box():
    fed = reg_fed(3, 2)
    with pytest.raises(InvalidParameterError, match="A has size"):
        RelativeFairness(fed, Squared(), Simplex(4), Simplex(3), phi=0.1)
    with pytest.raises(InvalidParameterError, match="B has size"):
        RelativeFairness(fed, Squared(), Simplex(3), CVaR(4, 0.5), phi=0.1)
    # sets that are not penalty-free polytopes inside the simplex
    with pytest.raises(InvalidParameterError, match="simplex"):
        RelativeFairness(fed, Squared(), Integrated(Simplex(3), Simplex(3), 0.5), Simplex(3), phi=0.1)
    with pytest.raises(InvalidParameterError, match="simplex"):
        RelativeFairness(fed, Squared(), Simplex(3), ChiSquare(3, 1.0), phi=0.1)
    with pytest.raises(InvalidParameterError, match="WeightSet"):
        RelativeFairness(fed, Squared(), np.ones(3) / 3, Simplex(3), phi=0.1)
    with pytest.raises(InvalidParameterError, match="shape"):
        RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.1, box=(np.zeros(3), np.ones(3)))
    with pytest.raises(InvalidParameterError, match="lower bounds must be <="):
        RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.1, box=(np.ones(2), np.zeros(2)))
    with pytest.raises(InvalidDataError):
        RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.1, box=(np.array([0, np.nan]), np.ones(2)))
    prob = RelativeFairness(fed, Huber(1.0), Simplex(3), Simplex(3), phi=0.1)
    with pytest.raises(InvalidParameterError, match="quadratic"):
        prob.solve(method="R2")
    with pytest.raises(InvalidParameterError, match="method"):
        prob.solve(method="R7")
    with pytest.raises(InvalidParameterError, match="phi"):
        prob.set_parameter("phi", 1.0)
    with pytest.raises(InvalidParameterError, match="phi"):
        prob.set_parameter("alpha", 0.3)
    with pytest.raises(InvalidDataError, match="theta"):
        prob.objective(np.zeros(5))
    # forcing an exact convex route on a non-convex instance is refused with the alternative named
    q = RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.0)
    q.set_parameter("phi", min(0.95, q.max_convex_phi("vertex") + 0.2))
    with pytest.raises(dm.NotConvexError, match="R2"):
        q.solve(method="R1")
    with pytest.raises(InvalidParameterError, match="box"):
        RelativeFairness(fed, Squared(), Simplex(3), Simplex(3), phi=0.1,
                         box=(-np.ones(2), np.ones(2))).solve(method="R3")
    with pytest.raises(InvalidParameterError, match="FederatedDRO"):
        q.solve(method="FederatedDRO")
    with pytest.raises(InvalidParameterError):
        select_phi(fed, dm.losses.Hinge() if False else dm.losses.EpsilonInsensitive(0.1), Simplex(3), Simplex(3))


# ----------------------------------------------------------------------------- the example
def _load_example():
    path = ROOT / "examples" / "relative_fairness_penguins.py"
    spec = importlib.util.spec_from_file_location("relative_fairness_penguins", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_penguins_example_quick_is_certified_monotone_and_cross_checked():
    ex = _load_example()
    rows = ex.main(quick=True, verbose=False)
    assert [r["phi"] for r in rows] == list(ex.PHIS)
    for r in rows:
        assert r["status"] == "optimal", r            # every value certified
        assert r["relative_gap"] <= GAP
        if r["phi"] > 0:
            assert r["method"] == "R2" and r["rank_one_ratio"] <= 1e-6
        lo, hi = ex.BOX
        assert np.all(np.asarray(r["theta"]) >= lo) and np.all(np.asarray(r["theta"]) <= hi)
    Rs = [r["R"] for r in rows]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(Rs, Rs[1:]))      # Theorem 1
    assert Rs[-1] < Rs[0]                                            # and it does improve
    # independent cross-check of the objectives: grid + SLSQP restricted to the box (rel tol 1e-3,
    # spec §14.4); the certified value must not exceed what the search finds
    prob = ex.build_problem()
    lo, hi = ex.BOX
    for r in rows:
        best = brute_force_box(prob, r["phi"], lo, hi, k=21, top=6)
        assert r["objective"] <= best * (1 + 1e-7)
        assert abs(r["objective"] - best) <= 1e-3 * best
        assert r["objective_paper_sum"] == pytest.approx(10 * r["objective"], rel=1e-12)
