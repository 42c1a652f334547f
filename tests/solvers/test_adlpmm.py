"""AD-LPMM (spec drfl-admm §6) against the WassersteinDRFL oracle.

Instance (the spec §6.8 kind): hinge loss, 3 clients x 20 samples in [-1, 1]^2, l1 transport,
kappa = 0.5, radii (0.05, 0.1, 0.02), Q = LpBall(uniform, 0.15, p = 2). Recipes: zero
initialization, c = 1 (§6.7/§6.8), proximal constants "paper" (2Sc) or "tight" (2c, (S+1)c), the
§6.7 stopping rule with its default tolerances 1e-6. Independent references: ``problem.solve()``
(certified CVXPY solve of (4)), a literal implementation of Algorithm 1 with the verbatim operators
(6)-(10), CVXPY projections.
"""

import json

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.problems.fafl import FairnessAwareFL
from drflmodel.problems.wasserstein import ExactDualWAFL, WassersteinDRFL
from drflmodel.solvers.adlpmm import ADLPMM, project_unit_ball, prox_dual_norm

RADII = [0.05, 0.1, 0.02]


def _federation():
    rng = np.random.default_rng(0)
    Xs, ys = [], []
    for _ in range(3):
        X = rng.uniform(-1, 1, size=(20, 2))
        w = np.array([1.0, -0.5]) + 0.5 * rng.standard_normal(2)
        Xs.append(X)
        ys.append(np.where(X @ w + 0.3 * rng.standard_normal(20) >= 0, 1.0, -1.0))
    return dm.Federation.from_arrays(Xs, ys, task="classification")


def _problem(support=None, weights=None):
    fed = _federation()
    weights = dm.sets.LpBall(np.full(3, 1 / 3), 0.15, 2) if weights is None else weights
    return WassersteinDRFL(fed, dm.losses.Hinge(), radius=RADII, kappa=0.5, norm=1,
                           weights=weights, support=support)


@pytest.fixture(scope="module")
def problem():
    return _problem()


@pytest.fixture(scope="module")
def oracle(problem):
    sol = problem.solve()
    assert sol.status == "optimal"
    return sol


def test_converges_to_oracle_with_stopping_rule(problem, oracle):
    """Fast check: tight proximal constants, run until the §6.7 stopping rule (<= 400 rounds)."""
    tr = ADLPMM(rounds=400, proximal="tight").run(problem)
    assert tr.info["converged"] and tr.rounds < 400
    assert tr.iterates["primal_residual"][-1] <= 1e-6 and tr.iterates["change"][-1] <= 1e-6
    gaps = np.array([problem.objective(tr.theta[k]) for k in (10, 30, 60, tr.rounds)]) - oracle.value
    assert np.all(np.diff(gaps) < 0)                                 # decreasing
    assert -1e-9 <= gaps[-1] <= 1e-6 * max(1.0, abs(oracle.value))   # to the solver tolerance
    assert np.linalg.norm(tr.theta[-1] - oracle.theta) < 1e-5
    # the multipliers zeta of varpi_s = z_s converge to the worst-case weights q* of the oracle
    assert np.abs(tr.iterates["zeta"][-1] - oracle.weights).max() < 1e-5
    assert np.abs(tr.weights[-1] - oracle.weights).max() < 1e-5
    assert all(problem.weights.contains(q, tol=1e-8) for q in tr.weights)
    # the ADMM objective of (5) approaches the same value
    assert abs(tr.iterates["admm_objective"][-1] - oracle.value) < 1e-5
    # last iterate and ergodic average are both reported; the ergodic one is the running mean
    assert np.allclose(tr.iterates["theta_avg"][-1], tr.theta[1:].mean(axis=0), atol=1e-14)
    ergodic = problem.objective(tr.iterates["theta_avg"][-1]) - oracle.value
    assert gaps[-1] <= ergodic < problem.objective(tr.iterates["theta_avg"][9]) - oracle.value
    json.dumps(tr.to_dict())


@pytest.mark.slow
def test_paper_constants_on_box_support(oracle):
    """Prop. 6.3 box support, c' = c'' = 2Sc (the operators verbatim), c = 1."""
    pb = _problem(support="box")
    sol = pb.solve()
    assert abs(sol.value - oracle.value) < 1e-7        # data inside the box: same optimum here
    tr = ADLPMM(rounds=1000).run(pb)
    assert tr.info["converged"]
    gap = pb.objective(tr.theta[-1]) - sol.value
    assert -1e-9 <= gap <= 1e-6
    assert np.linalg.norm(tr.theta[-1] - sol.theta) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["simplex", "fixed"])
def test_other_weight_sets(weights):
    ws = dm.sets.Simplex(3) if weights == "simplex" else np.array([0.2, 0.3, 0.5])
    pb = _problem(weights=ws)
    sol = pb.solve()
    tr = ADLPMM(rounds=1000, proximal="tight").run(pb)
    assert tr.info["converged"]
    assert -1e-9 <= pb.objective(tr.theta[-1]) - sol.value <= 1e-6 * max(1, abs(sol.value))


@pytest.mark.slow
def test_ridge_and_nonrobust_client():
    """l2 > 0 (the extension of (6)) and a client with rho_s = 0 (empirical epigraph, errata 10)."""
    fed = _federation()
    pb = WassersteinDRFL(fed, dm.losses.Hinge(), radius=[0.0, 0.1, 0.02], kappa=0.5, norm=1,
                         weights=dm.sets.LpBall(np.full(3, 1 / 3), 0.15, 2), l2=0.1)
    sol = pb.solve()
    assert sol.status == "optimal"
    tr = ADLPMM(rounds=1000, proximal="tight").run(pb)
    assert tr.info["converged"]
    assert -1e-9 <= pb.objective(tr.theta[-1]) - sol.value <= 1e-6
    assert np.linalg.norm(tr.theta[-1] - sol.theta) < 1e-5
    assert np.abs(tr.iterates["lambda"][:, 0]).max() < 1e-9       # lambda_s = 0 where rho_s = 0


def reference_algorithm_1(problem, K, c=1.0):
    """Algorithm 1 (spec §6.6) with the verbatim operators (6)-(10), c' = c'' = 2Sc."""
    S, m = problem.n_clients, problem.dim
    q = np.full(S, 1 / 3)
    theta, p = 0.15, 2.0
    w, t, z, eta, gamma = np.zeros(m), np.zeros(S), np.zeros(S), np.zeros(S), 0.0
    lam, alpha_mean, w_hat = np.zeros(S), np.zeros(S), np.zeros((S, m))
    sigma, psi, zeta = np.zeros(S), np.zeros((S, m)), np.zeros(S)
    e = np.ones(S)
    out = []
    for _ in range(K):
        varpi = np.array(RADII) * lam + alpha_mean
        w = (c * w_hat - psi).sum(axis=0) / (c * S)                                         # (6)
        z_new = (varpi + t - z - gamma * e - eta + 2 * S * z + (zeta + sigma) / c) / (1 + 2 * S)  # (7)
        u = t - (q + sigma + c * (t - z - gamma * e - eta)) / (2 * S * c)                    # (8)
        t_new = u - theta / (2 * S * c) * (lambda x: x / max(np.linalg.norm(x), 1))(2 * S * c / theta * u)
        eta_new = np.maximum(eta + (sigma / c - gamma * e - eta + t_new - z_new) / (2 * S), 0)   # (9)
        gamma_new = gamma + (1 + sigma @ e + c * (-gamma * e - eta + t_new - z_new) @ e) / (2 * S * c)  # (10)
        t, z, eta, gamma = t_new, z_new, eta_new, gamma_new
        for s in range(S):
            o = problem.client_view(s).admm_step(w, z[s], psi[s], zeta[s], c)
            lam[s], alpha_mean[s], w_hat[s] = o["lambda"], o["alpha"].mean(), o["w_hat"]
        varpi = np.array(RADII) * lam + alpha_mean
        sigma = sigma + c * (t - z - gamma * e - eta)
        psi = psi + c * (w[None] - w_hat)
        zeta = zeta + c * (varpi - z)
        out.append((w.copy(), z.copy(), t.copy(), gamma))
    return out


def test_matches_verbatim_algorithm_1(problem):
    tr = ADLPMM(rounds=6, tol_primal=0, tol_change=0).run(problem)
    ref = reference_algorithm_1(problem, 6)
    for k, (w, z, t, g) in enumerate(ref):
        assert np.allclose(tr.theta[k + 1], w, atol=1e-7)     # client QPs solved to ~1e-9
        assert np.allclose(tr.iterates["z"][k], z, atol=1e-7)
        assert np.allclose(tr.iterates["t"][k], t, atol=1e-7)
        assert abs(tr.iterates["gamma"][k] - g) < 1e-7


@pytest.mark.parametrize("p", [1.0, 2.0, np.inf])
def test_unit_ball_projection_against_cvxpy(p):
    rng = np.random.default_rng(1)
    for scale in (0.3, 3.0):
        x = scale * rng.standard_normal(6)
        v = cp.Variable(6)
        cp.Problem(cp.Minimize(cp.sum_squares(v - x)), [cp.norm(v, p) <= 1]).solve(solver="CLARABEL")
        assert np.allclose(project_unit_ball(x, p), v.value, atol=1e-6)
    # the l1 projection uses |x| in the soft threshold (errata 3): signs are kept
    y = project_unit_ball(np.array([-2.0, 0.5, 1.0]), 1.0)
    assert np.isclose(np.abs(y).sum(), 1.0) and y[0] < 0 and y[1] == 0


def test_prox_is_the_prox_of_the_dual_norm():
    rng = np.random.default_rng(2)
    for p, pst in ((1.0, np.inf), (2.0, 2.0), (np.inf, 1.0)):
        u, s = rng.standard_normal(5), 0.4
        v = cp.Variable(5)
        cp.Problem(cp.Minimize(s * cp.norm(v, pst) + 0.5 * cp.sum_squares(v - u))).solve(solver="CLARABEL")
        assert np.allclose(prox_dual_norm(u, s, p), v.value, atol=1e-6)
    # p = inf: soft thresholding (spec §6.4)
    u = np.array([1.0, -0.2, 0.5])
    assert np.allclose(prox_dual_norm(u, 0.3, np.inf), np.sign(u) * np.maximum(np.abs(u) - 0.3, 0))
    assert np.array_equal(prox_dual_norm(u, 0.0, 2.0), u)


def test_communication_counts(problem):
    S, m = problem.n_clients, problem.dim
    tr = ADLPMM(rounds=2, tol_primal=0, tol_change=0).run(problem)
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "w+z_s", "messages": S, "floats": S * (m + 1)},
        {"direction": "up", "name": "w_hat_varpi", "messages": S, "floats": S * (m + 1)}]
    tr2 = ADLPMM(rounds=2, tol_primal=0, tol_change=0, dual_storage="server").run(problem)
    assert tr2.floats_down.tolist() == [S * (2 * m + 2)] * 2
    assert np.allclose(tr.theta, tr2.theta, atol=1e-12)       # same iterates either way


def test_client_solver_fallback_is_counted(problem, monkeypatch):
    from drflmodel.problems.wasserstein import WassersteinClientView
    real = WassersteinClientView.admm_step
    calls = []

    def flaky(self, w, z, psi, zeta, c, solver="CLARABEL"):
        calls.append(solver)
        if solver == "CLARABEL" and len(calls) == 2:         # the second client step fails once
            raise cp.error.SolverError("simulated failure")
        return real(self, w, z, psi, zeta, c, solver=solver)

    monkeypatch.setattr(WassersteinClientView, "admm_step", flaky)
    tr = ADLPMM(rounds=3, tol_primal=0, tol_change=0).run(problem)
    monkeypatch.setattr(WassersteinClientView, "admm_step", real)
    ref = ADLPMM(rounds=3, tol_primal=0, tol_change=0).run(problem)
    assert calls[:3] == ["CLARABEL", "CLARABEL", "ECOS"]
    assert tr.info["client_solver_fallbacks"] == 1
    assert np.allclose(tr.theta, ref.theta, atol=1e-6)


def test_callback_stop_is_not_convergence(problem):
    def cb(res):
        if res.round == 2:
            raise StopIteration
    tr = ADLPMM(rounds=50).run(problem, callback=cb)
    assert tr.rounds == 2 and tr.info["stopped_by_callback"] and not tr.info["converged"]


def test_bad_inputs(problem):
    fed = _federation()
    with pytest.raises(InvalidParameterError, match="WassersteinDRFL"):
        ADLPMM(rounds=2).run(FairnessAwareFL(fed, dm.losses.Hinge(), alpha=0.6))
    with pytest.raises(InvalidParameterError, match="rounds"):
        ADLPMM(rounds=0)
    with pytest.raises(InvalidParameterError, match="c"):
        ADLPMM(c=0.0)
    with pytest.raises(InvalidParameterError, match="c_prime"):
        ADLPMM(c=1.0, c_prime=1.5)
    with pytest.raises(InvalidParameterError, match="c_dprime"):
        ADLPMM(rounds=2, c=1.0, c_dprime=2.0).run(problem)       # needs >= (S + 1) c = 4
    with pytest.raises(InvalidParameterError, match="proximal"):
        ADLPMM(proximal="loose")
    with pytest.raises(InvalidParameterError, match="tol_primal"):
        ADLPMM(tol_primal=-1.0)
    wafl = ExactDualWAFL(fed, dm.losses.Hinge(), radius=0.05, kappa=0.5, norm=1)
    with pytest.raises(InvalidParameterError, match="shares one multiplier"):
        ADLPMM(rounds=2).run(wafl)
    p3 = _problem(weights=dm.sets.LpBall(np.full(3, 1 / 3), 0.15, 3))
    with pytest.raises(InvalidParameterError, match="p in"):
        ADLPMM(rounds=2).run(p3)
