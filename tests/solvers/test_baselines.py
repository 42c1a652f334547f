"""Baselines (FedAvg, SCAFFOLD, Stochastic-AFL, DRFA, q-FedAvg) against the FederatedDRO oracle
and against direct per-client computations on ``client_view(i)``. Default step recipes only,
except where a test is about the step (drift bias scaling)."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.solvers import DRFA, FedAvg, QFedAvg, Scaffold, ScaffPD, StochasticAFL


def _fed(n=5, d=6, m=40, seed=0, **kw):
    return dm.datasets.synthetic_regression(n_clients=n, dim=d, samples=m, seed=seed, **kw)


def _problem(weights, fed=None, l2=0.1):
    return dm.FederatedDRO(_fed() if fed is None else fed, dm.losses.Squared(), weights=weights, l2=l2)


def _sq(tr, sol):
    return np.sum((tr.theta - sol.theta) ** 2, axis=1)


@pytest.fixture(scope="module")
def erm():
    prob = _problem(dm.sets.CVaR(5, 1.0))          # the single point 1/n: ERM with uniform weights
    sol = prob.solve()
    assert sol.status == "optimal"
    return prob, sol


@pytest.fixture(scope="module")
def chi2():
    prob = _problem(dm.sets.ChiSquare(5, 0.1))
    return prob, prob.solve()


# ------------------------------------------------------------------ ERM baselines
def test_fedavg_one_local_step_is_gradient_descent_and_converges(erm):
    prob, sol = erm
    tr = FedAvg(rounds=100, local_steps=1).run(prob)
    L = float(np.max(prob.objectives.smoothness()))
    x = np.zeros(prob.dim)
    for _ in range(5):
        x = x - (1 / L) * np.mean([prob.client_view(i).gradient(x) for i in range(5)], axis=0)
    assert np.allclose(tr.theta[5], x, atol=1e-12)
    assert _sq(tr, sol)[-1] <= 1e-9
    assert prob.objective(tr.theta[-1]) - sol.value <= 1e-9


def test_fedavg_weighted_erm_with_hcvar():
    fed = _fed(m=[20, 40, 60, 30, 50])
    p = fed.proportions
    prob = _problem(dm.sets.HCVaR(p, 1.0), fed)
    sol = prob.solve()
    tr = FedAvg(rounds=100, local_steps=1).run(prob)
    assert np.allclose(tr.weights[-1], p)
    assert _sq(tr, sol)[-1] <= 1e-9


def test_fedavg_local_steps_drift_bias_shrinks_with_step(erm):
    """J = 10 on heterogeneous clients: FedAvg's fixed point is biased by client drift, and the
    bias shrinks with the local step (O(eta) in theta)."""
    prob, sol = erm
    L = float(np.max(prob.objectives.smoothness()))
    e1 = _sq(FedAvg(rounds=300, local_steps=10, step_size=1 / (10 * L)).run(prob), sol)
    e2 = _sq(FedAvg(rounds=1200, local_steps=10, step_size=1 / (40 * L)).run(prob), sol)
    assert 1e-9 < e1[-1] <= 1e-2 and e1[150] / e1[-1] <= 1.01       # a floor, not convergence
    assert e2[-1] <= e1[-1] / 4


@pytest.mark.parametrize("control", ["gradient", "local"])
def test_scaffold_converges_without_drift(erm, control):
    prob, sol = erm
    tr = Scaffold(rounds=150, local_steps=10, control=control).run(prob)
    assert _sq(tr, sol)[-1] <= 1e-9
    n, d = 5, prob.dim
    if control == "gradient":
        assert tr.floats_up.tolist() == [2 * n * d] * 150 and tr.messages_up.tolist() == [2 * n] * 150
    else:
        assert tr.floats_up.tolist() == [2 * n * d] * 150 and tr.messages_up.tolist() == [n] * 150
    assert tr.messages_down.tolist() == [2 * n] * 150 and tr.floats_down.tolist() == [2 * n * d] * 150


def test_scaffold_option1_is_scaffpd_with_fixed_weights(erm):
    """relative-fairness §7.6: SCAFFOLD = Scaff-PD(-IA) with Lambda = {1/n}. Same iterates for
    tau = J eta_l (any dual step: the projection onto a point is constant)."""
    prob, _ = erm
    eta, J = 0.01, 7
    a = Scaffold(rounds=20, local_steps=J, step_size=eta).run(prob)
    b = ScaffPD(rounds=20, local_steps=J, schedule="constant", step_size=eta * J, dual_step=1.0).run(prob)
    assert np.max(np.abs(a.theta - b.theta)) <= 1e-12


# ------------------------------------------------------------------ min-max baselines
def test_stochastic_afl_converges_on_chi_square(chi2):
    prob, sol = chi2
    tr = StochasticAFL(rounds=2000).run(prob)
    assert _sq(tr, sol)[-1] <= 1e-6
    assert np.linalg.norm(tr.weights[-1] - sol.weights) <= 1e-3
    n, d = 5, prob.dim
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "model", "messages": n, "floats": n * d},
        {"direction": "up", "name": "losses+gradients", "messages": n, "floats": n * (d + 1)}]


def test_stochastic_afl_average_on_afl():
    """AFL (simplex, nonsmooth max): sublinear progress of the averaged iterate (the paper's
    O(1/sqrt(R)) bound predicts a factor sqrt(10) ~ 3.2 from R=200 to 2000; we require 2) and
    the last iterate approaches x*."""
    prob = _problem(dm.sets.Simplex(5))
    sol = prob.solve()
    tr = StochasticAFL(rounds=2000).run(prob)
    gap_avg = prob.objective(tr.iterates["theta_avg"][-1]) - sol.value
    gap_200 = prob.objective(tr.iterates["theta_avg"][199]) - sol.value
    assert 0 <= gap_avg <= 5e-3 and gap_avg <= gap_200 / 2
    assert _sq(tr, sol)[-1] <= 1e-4


def test_drfa_one_round_by_hand(chi2):
    """One DRFA round recomputed from client views with the same seed (snapshot step t' drawn
    first from default_rng(seed))."""
    prob, _ = chi2
    J, eta, gamma, n = 4, 0.01, 0.02, 5
    tr = DRFA(rounds=1, local_steps=J, step_size=eta, dual_step=gamma).run(prob, seed=11)
    t_snap = int(np.random.default_rng(11).integers(1, J + 1))
    lam = np.full(n, 1 / n)
    x0 = np.zeros(prob.dim)
    U, S = [], []
    for i in range(n):
        u = x0.copy()
        for j in range(1, J + 1):
            u = u - eta * prob.client_view(i).gradient(u)
            if j == t_snap:
                S.append(u.copy())
        U.append(u)
    x1 = lam @ np.array(U)
    xs = lam @ np.array(S)
    f = np.array([prob.client_view(i).value(xs) for i in range(n)])
    lam1 = prob.weights.prox(lam + gamma * J * f, gamma * J)
    assert np.allclose(tr.theta[1], x1, atol=1e-12) and np.allclose(tr.weights[1], lam1, atol=1e-12)
    d = prob.dim
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "model", "messages": n, "floats": n * d},
        {"direction": "up", "name": "models+snapshots", "messages": n, "floats": 2 * n * d},
        {"direction": "down", "name": "snapshot", "messages": n, "floats": n * d},
        {"direction": "up", "name": "losses", "messages": n, "floats": n}]


def test_drfa_converges_without_heterogeneity():
    """Remark 3.7: DRFA converges when clients share the optimum (sigma_het = 0, no ridge: every
    f_i is minimized at x_hat, so local steps do not drift)."""
    prob = _problem(dm.sets.Simplex(5), _fed(heterogeneity=0.0), l2=0.0)
    sol = prob.solve()
    tr = DRFA(rounds=300, local_steps=10).run(prob)
    assert _sq(tr, sol)[-1] <= 1e-8
    assert prob.objective(tr.theta[-1]) - sol.value <= 1e-8


def test_drfa_floor_with_heterogeneity(chi2):
    prob, sol = chi2
    L = float(np.max(prob.objectives.smoothness()))
    e1 = _sq(DRFA(rounds=400, step_size=1 / (10 * L)).run(prob), sol)
    e2 = _sq(DRFA(rounds=1600, step_size=1 / (40 * L)).run(prob), sol)
    assert e1[-1] > 1e-7 and e2[-1] <= e1[-1] / 4


# ------------------------------------------------------------------ q-FedAvg
@pytest.fixture(scope="module")
def qffl():
    prob = _problem(dm.sets.QFFL(5, 2.0))
    sol = prob.solve()
    assert sol.status == "optimal"
    return prob, sol


def test_qfedavg_converges_to_qffl_oracle(qffl):
    prob, sol = qffl
    tr = QFedAvg(rounds=300, local_steps=1).run(prob)
    assert _sq(tr, sol)[-1] <= 1e-8
    assert prob.objective(tr.theta[-1]) - sol.value <= 1e-8
    # recorded weights F_i^q are the q-FFL maximizer lambda* = f_i(theta)^q
    assert np.allclose(tr.weights[-1], sol.weights, rtol=1e-3, atol=1e-6)


def test_qfedavg_each_client_uses_its_own_loss(qffl):
    """One round recomputed from client views: Delta_i = F_i^q L (w - w_i), h_i with F_i = f_i(w)
    of client i. A server-side single loss (the bug flagged in the issue) gives another step."""
    prob, _ = qffl
    q, J = 2.0, 3
    tr = QFedAvg(rounds=1, local_steps=J).run(prob)
    L = float(np.max(prob.objectives.smoothness()))
    w = np.zeros(prob.dim)
    D, H, Dbug, Hbug = [], [], [], []
    Fbar = np.mean([prob.client_view(i).value(w) for i in range(5)])
    for i in range(5):
        v = prob.client_view(i)
        F = v.value(w)
        u = w.copy()
        for _ in range(J):
            u = u - v.gradient(u) / L
        dw = L * (w - u)
        D.append(F**q * dw)
        H.append(q * F ** (q - 1) * dw @ dw + L * F**q)
        Dbug.append(Fbar**q * dw)
        Hbug.append(q * Fbar ** (q - 1) * dw @ dw + L * Fbar**q)
    w1 = w - np.sum(D, axis=0) / np.sum(H)
    w1_bug = w - np.sum(Dbug, axis=0) / np.sum(Hbug)
    assert np.allclose(tr.theta[1], w1, atol=1e-12)
    assert np.linalg.norm(tr.theta[1] - w1_bug) > 1e-3
    assert tr.floats_up.tolist() == [5 * (prob.dim + 1)]


# ------------------------------------------------------------------ bad input
def test_erm_baselines_need_fixed_weights(chi2):
    prob, _ = chi2
    for S in (FedAvg, Scaffold):
        with pytest.raises(InvalidParameterError, match="fixed client weights"):
            S(rounds=2).run(prob)


def test_qfedavg_needs_qffl(chi2):
    with pytest.raises(InvalidParameterError, match="QFFL"):
        QFedAvg(rounds=2).run(chi2[0])


@pytest.mark.parametrize("cls, kwargs, match", [
    (FedAvg, {"rounds": 0}, "rounds"), (FedAvg, {"local_steps": 0}, "local_steps"),
    (FedAvg, {"step_size": 0.0}, "step_size"), (FedAvg, {"global_step": -1.0}, "global_step"),
    (Scaffold, {"control": "option3"}, "control"), (Scaffold, {"step_size": -0.1}, "step_size"),
    (StochasticAFL, {"decay": "linear"}, "decay"), (StochasticAFL, {"dual_step": 0.0}, "dual_step"),
    (DRFA, {"step_size": float("inf")}, "step_size"), (DRFA, {"rounds": -1}, "rounds"),
    (QFedAvg, {"lipschitz": 0.0}, "lipschitz"), (QFedAvg, {"batch_size": 0}, "batch_size")])
def test_bad_hyperparameters(cls, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        cls(**kwargs)


def test_wrong_problem_family():
    from drflmodel.problems.engine.problem import Problem
    other = Problem(_fed(n=3, d=3, m=10), dm.losses.Squared())
    for S in (FedAvg, Scaffold, StochasticAFL, DRFA, QFedAvg):
        with pytest.raises(InvalidParameterError, match="FederatedDRO"):
            S(rounds=2).run(other)


# ------------------------------------------------------------------ client sampling (DRFA, SAFL)
def _sampled_problem():
    """AFL (simplex) on 6 heterogeneous regression clients with a ridge: three clients active."""
    fed = _fed(n=6, d=5, m=40)
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.Simplex(6), l2=0.1)


@pytest.fixture(scope="module")
def afl6():
    prob = _sampled_problem()
    sol = prob.solve()
    assert sol.status == "optimal" and np.sum(sol.weights > 1e-6) >= 2
    return prob, sol


def _dual_value(prob, lam):
    """d(lam) = min_theta sum_i lam_i f_i(theta) in closed form (squared loss + ridge)."""
    Q, r, c = prob.objectives.quadratic_forms()
    A, b = np.tensordot(lam, Q, 1), lam @ r
    return float(lam @ c - b @ np.linalg.solve(A, b))


@pytest.mark.parametrize("cls, kw", [(StochasticAFL, {}), (DRFA, {"local_steps": 3}),
                                     (StochasticAFL, {"batch_size": 4}), (DRFA, {"batch_size": 4})])
def test_sampling_off_is_full_participation_bitwise(afl6, cls, kw):
    """clients_per_round=None (the off value) is today's full-participation run, bit for bit."""
    prob, _ = afl6
    a = cls(rounds=15, **kw).run(prob, seed=3)
    b = cls(rounds=15, clients_per_round=None, **kw).run(prob, seed=3)
    assert np.array_equal(a.theta, b.theta) and np.array_equal(a.weights, b.weights)
    assert a.iterates.keys() == b.iterates.keys() and "sampled" not in a.iterates
    for k in a.iterates:
        assert np.array_equal(a.iterates[k], b.iterates[k])
    assert a.info["comm_schedule"] == b.info["comm_schedule"]


def _minibatch_gradient(view, x, gen, b):
    from drflmodel.objectives import minibatch_indices
    idx = minibatch_indices(gen, view.size, b)
    Xb, yb = view._X[idx], view._y[idx]
    return Xb.T @ view.loss.derivative(Xb @ x, yb) / b + view.l2 * x


def test_sampled_stochastic_afl_two_rounds_by_hand(afl6):
    """Server draws from default_rng(seed): D (m with replacement by lambda), then U (m distinct,
    uniform); only D's clients draw minibatches from their own generators; v = (n/m) f on U."""
    from drflmodel.solvers import client_generators
    prob, _ = afl6
    n, m, b, g, seed = 6, 3, 5, 0.02, 8
    tr = StochasticAFL(rounds=2, step_size=g, dual_step=g, decay="constant", batch_size=b,
                       clients_per_round=m).run(prob, seed=seed)
    server, gens = np.random.default_rng(seed), client_generators(seed, n)
    views = [prob.client_view(i) for i in range(n)]
    x, lam = np.zeros(prob.dim), np.full(n, 1 / n)
    for r in range(2):
        D = server.choice(n, size=m, replace=True, p=lam)
        U = server.choice(n, size=m, replace=False)
        grads = {i: _minibatch_gradient(views[i], x, gens[i], b) for i in sorted(set(D))}
        v = np.zeros(n)
        v[U] = n / m * np.array([views[i].value(x) for i in U])
        x = x - g * sum(grads[k] for k in D) / m
        lam = prob.weights.prox(lam + g * v, g)
        assert np.allclose(tr.theta[r + 1], x, atol=1e-13) and np.allclose(tr.weights[r + 1], lam, atol=1e-13)
        assert tr.iterates["sampled"][r].tolist() == np.bincount(D, minlength=n).tolist()
        assert np.flatnonzero(tr.iterates["loss_clients"][r]).tolist() == sorted(U)
        # only the sampled clients communicate: model to D u U; gradients from D, losses from U
        k = np.unique(D).size
        assert tr.messages_down[r] == np.union1d(D, U).size
        assert tr.messages_up[r] == k + m and tr.floats_up[r] == k * prob.dim + m


def test_sampled_drfa_round_by_hand(afl6):
    """One DRFA round as printed (Algorithm 1): D by lambda, t', local SGD on D only, 1/m averages
    with multiplicity, U uniform, v = (n/m) f(snapshot) on U."""
    prob, _ = afl6
    n, m, J, eta, gamma, seed = 6, 4, 3, 0.01, 0.02, 5
    tr = DRFA(rounds=1, local_steps=J, step_size=eta, dual_step=gamma, clients_per_round=m).run(prob, seed=seed)
    server = np.random.default_rng(seed)
    lam = np.full(n, 1 / n)
    D = server.choice(n, size=m, replace=True, p=lam)
    t_snap = int(server.integers(1, J + 1))
    U = server.choice(n, size=m, replace=False)
    models, snaps = {}, {}
    for i in set(D):
        u = np.zeros(prob.dim)
        for j in range(1, J + 1):
            u = u - eta * prob.client_view(i).gradient(u)
            if j == t_snap:
                snaps[i] = u.copy()
        models[i] = u
    x1 = sum(models[k] for k in D) / m
    xs = sum(snaps[k] for k in D) / m
    v = np.zeros(n)
    v[U] = n / m * np.array([prob.client_view(i).value(xs) for i in U])
    lam1 = prob.weights.prox(lam + gamma * J * v, gamma * J)
    assert np.allclose(tr.theta[1], x1, atol=1e-13) and np.allclose(tr.weights[1], lam1, atol=1e-13)
    k, d = np.unique(D).size, prob.dim
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "model", "messages": k, "floats": k * d},
        {"direction": "up", "name": "models+snapshots", "messages": k, "floats": 2 * k * d},
        {"direction": "down", "name": "snapshot", "messages": m, "floats": m * d},
        {"direction": "up", "name": "losses", "messages": m, "floats": m}]


def _rate_runs(prob, sol, make, horizons, seeds):
    """Mean (over seeds) duality gap max_lam F(theta_bar, lam) - min_theta F(theta, lam_bar) of the
    averaged pair after R rounds, for each horizon R; the runs use the steps a paper's theorem
    prescribes for that horizon (``make(R)``)."""
    means, ses = [], []
    for R in horizons:
        gaps = []
        for seed in seeds:
            tr = make(R).run(prob, seed=seed)
            theta_bar = tr.iterates["theta_avg"][-1]
            lam_bar = tr.weights[1:].mean(axis=0)
            gap = prob.objective(theta_bar) - _dual_value(prob, lam_bar)
            assert prob.objective(theta_bar) >= sol.lower_bound - 1e-9      # the certificate holds
            assert _dual_value(prob, lam_bar) <= sol.upper_bound + 1e-9     # weak duality
            gaps.append(gap)
        means.append(np.mean(gaps))
        ses.append(np.std(gaps, ddof=1) / np.sqrt(len(gaps)) if len(gaps) > 1 else 0.0)
    return np.array(means), np.array(ses)


def _fitted_order(horizons, means):
    return float(np.polyfit(np.log(horizons), np.log(means), 1)[0])


# Both papers bound the expected duality gap of the averaged iterates, with steps tuned to the
# horizon: Stochastic-AFL (Mohri et al. 2019, Thm 2) O(1/sqrt(R)), DRFA (Deng et al. 2020,
# Thm 1, convex losses) O(T^(-3/8)) with T = R J. The fitted order of the mean gap over
# R = 100, 400, 1600 must be at least that fast, up to 0.15 for the pre-asymptotic transient
# (measured: the gap x sqrt(R) of sampled SAFL levels off only around R = 1600-6400; see the slow
# test). A sampler that were biased (e.g. not drawing by lambda) would plateau: order ~ 0.
RATE_CASES = {
    "StochasticAFL": (-0.5, lambda L, R, m: StochasticAFL(
        rounds=R, step_size=1 / L * np.sqrt(100 / R), dual_step=np.sqrt(100 / R), decay="constant",
        clients_per_round=m)),
    "DRFA": (-0.375, lambda L, R, m: DRFA(
        rounds=R, local_steps=5, step_size=1 / (5 * L) * np.sqrt(100 / R), dual_step=0.3 * (100 / R) ** 0.625,
        clients_per_round=m)),
}


@pytest.mark.parametrize("name", list(RATE_CASES))
def test_sampled_averaged_iterates_approach_the_oracle_at_the_proved_rate(afl6, name):
    prob, sol = afl6
    order, make = RATE_CASES[name]
    L = float(np.max(prob.objectives.smoothness()))
    horizons = (100, 400, 1600)
    means, ses = _rate_runs(prob, sol, lambda R: make(L, R, 3), horizons, seeds=range(12))
    assert np.all(np.diff(means) < -2 * np.hypot(ses[1:], ses[:-1]))    # shrinks with R
    assert _fitted_order(horizons, means) <= order + 0.15
    full, _ = _rate_runs(prob, sol, lambda R: make(L, R, None), horizons, seeds=[0])
    assert _fitted_order(horizons, full) <= order                     # the full-participation run
    assert np.all(means > full)                                         # sampling costs accuracy


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RATE_CASES))
def test_sampled_gap_times_rate_levels_off(afl6, name):
    """Longer horizons (to R = 6400, 20 seeds): gap / R^order stops growing -- the bound's regime."""
    prob, sol = afl6
    order, make = RATE_CASES[name]
    L = float(np.max(prob.objectives.smoothness()))
    horizons = np.array([100, 400, 1600, 6400])
    means, ses = _rate_runs(prob, sol, lambda R: make(L, R, 3), horizons, seeds=range(20))
    scaled = means / horizons.astype(float) ** order
    assert scaled[-1] <= 1.15 * scaled[-2]
    assert _fitted_order(horizons[-2:], means[-2:]) <= order + 0.1


def test_sampling_bad_inputs(afl6):
    prob, _ = afl6
    for cls in (StochasticAFL, DRFA):
        with pytest.raises(InvalidParameterError, match="clients_per_round"):
            cls(clients_per_round=0)
        with pytest.raises(InvalidParameterError, match=r"clients_per_round must be an integer in \[1, 6\]"):
            cls(rounds=2, clients_per_round=7).run(prob)
        qffl = dm.FederatedDRO(prob.federation, dm.losses.Squared(), weights=dm.sets.QFFL(6, 1.0), l2=0.1)
        with pytest.raises(InvalidParameterError, match="inside the simplex"):
            cls(rounds=2, clients_per_round=2).run(qffl)
