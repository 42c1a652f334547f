"""rFedFair (spec fafl-hcvar §5, §6, §9.4) against the FairnessAwareFL oracles.

Parameter recipe everywhere: the spec's step ``step_size="theory"`` (§9.1 #9, Lemma C.1's L),
``eta0="quantile"``, kappa = 10; only mu, T and the instance are chosen by the test.
Independent references: a literal per-client, per-iteration loop of Algorithm 1 (t = 0..T-1 with
the ``t mod kappa`` branch), ``problem.solve_smoothed(mu)`` and ``problem.solve()`` (CVXPY,
certified), and Proposition 2's expectation computed by hand.
"""

import json

import numpy as np
import pytest
from scipy.special import expit

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.problems.minmax.dro import FederatedDRO
from drflmodel.problems.minmax.fafl import FairnessAwareFL
from drflmodel.solvers.rfedfair import RFedFair, hcvar_eta, rfedfair_constants, theory_step

MU = 0.5


def _federation(perm=None):
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=3, samples=[30, 40, 50, 60],
                                               heterogeneity=1.0, seed=0)
    if perm is None:
        return fed
    cl = [fed.clients[i] for i in perm]
    return dm.Federation.from_arrays([c.X for c in cl], [c.y for c in cl], task="classification")


@pytest.fixture(scope="module")
def problem():
    return FairnessAwareFL(_federation(), dm.losses.Logistic(), alpha=0.5, l2=0.0)


@pytest.fixture(scope="module")
def smoothed(problem):
    sol = problem.solve_smoothed(MU)
    assert sol.status == "optimal"
    return sol


@pytest.fixture(scope="module")
def exact(problem):
    sol = problem.solve()
    assert sol.status == "optimal"
    return sol


# ------------------------------------------------------------------------------ reference loop
def reference_rfedfair(problem, mu, T, kappa, beta, seed=0, K=None):
    """Algorithm 1 literally: t = 0..T-1, one Python object per client, ``t mod kappa`` branch."""
    n, d = problem.n_clients, problem.dim
    views = [problem.client_view(i) for i in range(n)]
    p, alpha = problem.p, problem.alpha
    rng = np.random.default_rng(seed)
    w0 = np.zeros(d)
    f0 = np.array([v.value(w0) for v in views])
    eta0 = hcvar_eta(f0, p / alpha)
    Z = list(range(n)) if K is None else list(rng.choice(n, size=K, replace=True, p=p))
    w = [w0.copy() for _ in range(n)]
    e = [eta0] * n
    synced = []
    for t in range(T):
        steps = {}
        for i in set(Z):
            s = expit((views[i].value(w[i]) - e[i]) / mu)
            steps[i] = (w[i] - beta * s / alpha[i] * views[i].gradient(w[i]),
                        e[i] - beta * (1.0 - s / alpha[i]))
        if t % kappa != 0:
            for i, (wi, ei) in steps.items():
                w[i], e[i] = wi, ei
            continue
        if K is None:
            wn = sum(p[i] * steps[i][0] for i in Z)
            en = sum(p[i] * steps[i][1] for i in Z)
        else:
            wn = sum(steps[i][0] for i in Z) / K          # duplicates counted
            en = sum(steps[i][1] for i in Z) / K
        synced.append((wn, en))
        if t == T - 1:
            break
        Z = list(range(n)) if K is None else list(rng.choice(n, size=K, replace=True, p=p))
        for i in range(n):
            w[i], e[i] = wn.copy(), en
    return synced


@pytest.mark.parametrize("K", [None, 3])
def test_matches_literal_algorithm_1(problem, K):
    kappa, T = 3, 2 + 3 * 4
    kw = {} if K is None else {"participation": "partial", "clients_per_round": K}
    tr = RFedFair(mu=MU, iterations=T, local_steps=kappa, **kw).run(problem, seed=7)
    beta = tr.info["step_size"]
    ref = reference_rfedfair(problem, MU, T, kappa, beta, seed=7, K=K)
    assert tr.rounds == len(ref) == (T - 2) // kappa + 1
    for r, (wr, er) in enumerate(ref):
        assert np.allclose(tr.theta[r + 1], wr, atol=1e-13, rtol=0)
        assert abs(tr.iterates["eta"][r] - er) < 1e-13
    # output: the ergodic average of the synchronized iterates omega_{r kappa + 1}
    assert np.allclose(tr.iterates["theta_avg"][-1], np.mean([w for w, _ in ref], axis=0), atol=1e-13)
    assert np.allclose(tr.info["theta_ergodic"], tr.iterates["theta_avg"][-1])


def test_theory_step_is_the_spec_recipe(problem):
    c = rfedfair_constants(problem, MU)
    # L1 = max_i lambda_max(X_i^T X_i / m_i) / 4, L2 = max_i mean_j ||x_ij|| (logistic: lip 1)
    L1 = max(np.linalg.eigvalsh(cl.X.T @ cl.X / len(cl.y))[-1] / 4 for cl in problem.federation.clients)
    L2 = max(np.mean(np.linalg.norm(cl.X, axis=1)) for cl in problem.federation.clients)
    L = (L1 + (L2**2 + 1) / MU) / 0.5
    assert np.isclose(c["L"], L, rtol=1e-12)
    assert theory_step(L, 10, None) == pytest.approx(min(1 / (40 * L), 1 / (np.sqrt(6) * L * 9)))
    assert theory_step(L, 10, 2) == pytest.approx(min(1 / (20 * L * (15 + 2)), 1 / (np.sqrt(6) * L * 9)))


def test_converges_to_smoothed_optimum_and_within_bias_of_exact(problem, smoothed, exact):
    """Fast check: 1000 rounds (T = 9992, kappa = 10) with the theory step."""
    tr = RFedFair(mu=MU, iterations=2 + 10 * 999, local_steps=10).run(problem)
    theta, eta = tr.theta[-1], tr.iterates["eta"][-1]
    # last synchronized iterate -> minimizer of F^mu (unique here: strictly convex instance)
    assert np.linalg.norm(theta - smoothed.theta) < 1e-2
    assert abs(eta - smoothed.duals["eta"]) < 1e-2
    gap = problem.smoothed_objective(theta, eta, MU) - smoothed.lower_bound
    assert -1e-9 <= gap < 2e-5
    # the algorithm's output (ergodic average) vs the exact FAFL optimum (Lemma 2, errata #11):
    # f* <= f_alpha(w~) <= F^mu(w~, eta~) <= F^mu_* + opt_err <= f* + mu log2 tau + opt_err
    w_avg, e_avg = tr.iterates["theta_avg"][-1], tr.iterates["eta_avg"][-1]
    opt_err = problem.smoothed_objective(w_avg, e_avg, MU) - smoothed.lower_bound
    excess = problem.objective(w_avg) - exact.lower_bound
    assert -1e-7 <= excess <= MU * np.log(2) * problem.tau_alpha + opt_err + 1e-7
    assert excess <= MU * problem.tau_alpha                 # the paper's mu tau_alpha
    # Theorem 1's bound with the computed L and rho^2 at the smoothed optimum (spec §9.4 step 3)
    n = problem.n_clients
    ws, es = smoothed.theta, smoothed.duals["eta"]
    rho2 = 0.0
    for i in range(n):
        v = problem.client_view(i)
        s = expit((v.value(ws) - es) / MU)
        g = np.append(s / problem.alpha[i] * v.gradient(ws), 1 - s / problem.alpha[i])
        rho2 += problem.p[i] * g @ g
    beta, L, kappa, TN = tr.info["step_size"], tr.info["L"], 10, tr.rounds - 1
    bound = (2 * (np.sum(ws**2) + (tr.info["eta0"] - es) ** 2) / (beta * (TN + 1))
             + 26 * L * beta**2 * (kappa - 1) ** 2 * kappa * rho2 + MU * problem.tau_alpha)
    assert excess <= bound


@pytest.mark.slow
def test_converges_tightly_in_3000_rounds(problem, smoothed):
    tr = RFedFair(mu=MU, iterations=2 + 10 * 2999, local_steps=10).run(problem)
    assert np.linalg.norm(tr.theta[-1] - smoothed.theta) < 1e-3
    gap = problem.smoothed_objective(tr.theta[-1], tr.iterates["eta"][-1], MU) - smoothed.lower_bound
    assert -1e-9 <= gap < 1e-6


def test_partial_participation_is_unbiased_proposition_2(problem):
    """E_Z[(1/K) sum_{i in Z} u_i] = sum_i p_i u_i: the mean over seeds of omega_1 (one round)
    matches full participation within 4 standard errors."""
    full = RFedFair(mu=MU, iterations=2, local_steps=10, step_size=0.05).run(problem)
    solver = RFedFair(mu=MU, iterations=2, local_steps=10, step_size=0.05,
                      participation="partial", clients_per_round=2)
    S = 400
    W = np.array([np.append(t.theta[1], t.iterates["eta"][0])
                  for t in (solver.run(problem, seed=s) for s in range(S))])
    target = np.append(full.theta[1], full.iterates["eta"][0])
    se = W.std(axis=0, ddof=1) / np.sqrt(S)
    assert np.all(np.abs(W.mean(axis=0) - target) <= 4 * se + 1e-12)
    assert np.all(se > 0)


def test_permutation_invariance(problem):
    perm = [2, 0, 3, 1]
    pb2 = FairnessAwareFL(_federation(perm), dm.losses.Logistic(), alpha=0.5, l2=0.0)
    a = RFedFair(mu=MU, iterations=2 + 10 * 20, local_steps=10).run(problem)
    b = RFedFair(mu=MU, iterations=2 + 10 * 20, local_steps=10).run(pb2)
    assert np.allclose(a.theta, b.theta, atol=1e-12)
    assert np.allclose(a.iterates["eta"], b.iterates["eta"], atol=1e-12)


def test_communication_counts(problem):
    n, d = problem.n_clients, problem.dim
    tr = RFedFair(mu=MU, iterations=2 + 10 * 3, local_steps=10).run(problem)
    assert tr.info["comm_schedule"] == [
        {"direction": "down", "name": "model0", "messages": n, "floats": n * d},
        {"direction": "up", "name": "loss0", "messages": n, "floats": n},
        {"direction": "down", "name": "model+eta", "messages": n, "floats": n * (d + 1)},
        {"direction": "up", "name": "update", "messages": n, "floats": n * (d + 1)}]
    assert tr.messages_up.tolist() == [2 * n, n, n, n]
    assert tr.floats_down.tolist() == [n * d + n * (d + 1)] + [n * (d + 1)] * 3
    # partial participation: only the distinct sampled clients communicate
    tr = RFedFair(mu=MU, iterations=2 + 10 * 5, local_steps=10, participation="partial",
                  clients_per_round=3, eta0=0.0).run(problem, seed=3)
    distinct = (tr.iterates["participants"] > 0).sum(axis=1)
    assert np.all(tr.iterates["participants"].sum(axis=1) == 3)
    assert tr.messages_up.tolist() == distinct.tolist() == tr.messages_down.tolist()
    assert tr.floats_up.tolist() == (distinct * (d + 1)).tolist()


def test_trace_is_json_and_reproducible(problem):
    s = RFedFair(mu=MU, rounds=4, local_steps=2, participation="partial", clients_per_round=2)
    a, b = s.run(problem, seed=11), s.run(problem, seed=11)
    assert np.array_equal(a.theta, b.theta)
    assert a.params["iterations"] == 2 + 2 * 3
    json.dumps(a.to_dict())


def test_bad_inputs(problem):
    fed = _federation()
    with pytest.raises(InvalidParameterError, match="FairnessAwareFL"):
        RFedFair(rounds=2).run(FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(4)))
    with pytest.raises(InvalidParameterError, match="divisible"):
        RFedFair(iterations=15, local_steps=10)
    with pytest.raises(InvalidParameterError, match="iterations"):
        RFedFair(iterations=0)
    with pytest.raises(InvalidParameterError, match="rounds"):
        RFedFair(rounds=0)
    with pytest.raises(InvalidParameterError, match="not both"):
        RFedFair(rounds=3, iterations=12)
    with pytest.raises(InvalidParameterError, match="mu"):
        RFedFair(mu=0.0)
    with pytest.raises(InvalidParameterError, match="step_size"):
        RFedFair(step_size=-0.1)
    with pytest.raises(InvalidParameterError, match="step_size"):
        RFedFair(step_size="fast")
    with pytest.raises(InvalidParameterError, match="local_steps"):
        RFedFair(local_steps=0)
    with pytest.raises(InvalidParameterError, match="clients_per_round"):
        RFedFair(participation="partial")
    with pytest.raises(InvalidParameterError, match="clients_per_round"):
        RFedFair(participation="partial", clients_per_round=0)
    with pytest.raises(InvalidParameterError, match="participation"):
        RFedFair(participation="some")
    # the theory step needs a Lipschitz loss (Assumption 2): squared loss must pass lipschitz=
    sq = FairnessAwareFL(dm.Federation.from_arrays([c.X for c in fed.clients],
                                                   [c.y.astype(float) for c in fed.clients]),
                         dm.losses.Squared(), alpha=0.5)
    with pytest.raises(InvalidParameterError, match="lipschitz"):
        RFedFair(rounds=2).run(sq)
    RFedFair(rounds=2, lipschitz=5.0).run(sq)


# ------------------------------------------------------------------------------ minibatch (errata #10)
def _state(tr):
    """Per-round synchronized iterates (omega, eta) as one array, shape (R, d + 1)."""
    return np.column_stack([tr.theta[1:], tr.iterates["eta"]])


@pytest.mark.parametrize("kw", [{}, {"participation": "partial", "clients_per_round": 3}])
def test_default_is_full_batch_bitwise(problem, kw):
    """batch_size=None (the off value) is today's exact-gradient run, bit for bit."""
    a = RFedFair(mu=MU, rounds=20, local_steps=3, **kw).run(problem, seed=4)
    b = RFedFair(mu=MU, rounds=20, local_steps=3, batch_size=None, **kw).run(problem, seed=4)
    assert np.array_equal(a.theta, b.theta)
    for k in a.iterates:
        assert np.array_equal(a.iterates[k], b.iterates[k])
    assert a.expected_rate == b.expected_rate == "sublinear"
    assert a.messages_up.tolist() == b.messages_up.tolist()


def reference_minibatch(problem, mu, rounds, kappa, beta, batch, seed, K=None):
    """Algorithm 1 with minibatch local steps, one client at a time: client i draws each step's
    rows from its own generator (client_generators(seed, n)[i], minibatch_indices) and only when
    it takes part; its loss value is exact."""
    from drflmodel.objectives import minibatch_indices
    from drflmodel.solvers import client_generators

    n, p, alpha = problem.n_clients, problem.p, problem.alpha
    views = [problem.client_view(i) for i in range(n)]
    gens = client_generators(seed, n)
    server = np.random.default_rng(seed)
    w = np.zeros(problem.dim)
    e = hcvar_eta([v.value(w) for v in views], p / alpha)
    out = []
    for r in range(rounds):
        Z = list(range(n)) if K is None else list(server.choice(n, size=K, replace=True, p=p))
        ups = {}
        for i in sorted(set(Z)):
            v, wi, ei = views[i], w.copy(), e
            for _ in range(1 if r == 0 else kappa):
                idx = minibatch_indices(gens[i], v.size, batch)
                Xb, yb = v._X[idx], v._y[idx]
                g = Xb.T @ problem.loss.derivative(Xb @ wi, yb) / batch
                s = expit((v.value(wi) - ei) / mu)
                wi, ei = wi - beta * s / alpha[i] * g, ei - beta * (1 - s / alpha[i])
            ups[i] = (wi, ei)
        if K is None:
            w, e = sum(p[i] * ups[i][0] for i in Z), sum(p[i] * ups[i][1] for i in Z)
        else:
            w, e = sum(ups[i][0] for i in Z) / K, sum(ups[i][1] for i in Z) / K
        out.append(np.append(w, e))
    return np.array(out)


@pytest.mark.parametrize("K", [None, 2])
def test_minibatch_matches_per_client_loop(problem, K):
    kw = {} if K is None else {"participation": "partial", "clients_per_round": K}
    tr = RFedFair(mu=MU, rounds=6, local_steps=3, step_size=0.05, batch_size=5, **kw).run(problem, seed=9)
    ref = reference_minibatch(problem, MU, 6, 3, 0.05, 5, seed=9, K=K)
    assert np.allclose(_state(tr), ref, atol=1e-13, rtol=0)
    assert tr.expected_rate is None                       # outside Theorems 1-2
    exact = RFedFair(mu=MU, rounds=6, local_steps=3, step_size=0.05, **kw).run(problem, seed=9)
    assert np.abs(_state(exact) - ref).max() > 1e-6       # the minibatches do matter


def test_minibatch_mean_error_shrinks_with_batch_size_and_rounds(problem, smoothed):
    """Over 16 seeds, step 0.05, kappa = 2, R = 400 rounds. The gradient noise has variance
    O(1/b), so the mean squared distance of the last iterate to the smoothed optimum shrinks with
    the batch size b (about as 1/b, down to the exact run's client-drift floor); the mean smoothed
    gap of the algorithm's output (the ergodic average) shrinks with the rounds at every b."""
    x_star = np.append(smoothed.theta, smoothed.duals["eta"])
    S, R, checkpoints = 16, 400, (24, 99, 399)
    exact = _state(RFedFair(mu=MU, rounds=R, local_steps=2, step_size=0.05).run(problem))[-1]
    msd, se_msd = {}, {}
    for b in (1, 4, 16):
        sq, gaps = [], []
        for seed in range(S):
            tr = RFedFair(mu=MU, rounds=R, local_steps=2, step_size=0.05, batch_size=b).run(problem, seed=seed)
            sq.append(np.sum((_state(tr)[-1] - x_star) ** 2))
            gaps.append([problem.smoothed_objective(tr.iterates["theta_avg"][k], tr.iterates["eta_avg"][k], MU)
                         - smoothed.lower_bound for k in checkpoints])
        sq, gaps = np.array(sq), np.array(gaps)
        msd[b], se_msd[b] = sq.mean(), sq.std(ddof=1) / np.sqrt(S)
        g, se = gaps.mean(axis=0), gaps.std(axis=0, ddof=1) / np.sqrt(S)
        assert np.all(gaps > -1e-9)                        # the certified lower bound holds
        assert np.all(np.diff(g) < -2 * np.hypot(se[1:], se[:-1]))   # shrinks with the rounds
    for b1, b2 in ((1, 4), (4, 16)):
        assert msd[b1] - msd[b2] > 2 * np.hypot(se_msd[b1], se_msd[b2])
    assert msd[1] / msd[16] > 4
    assert msd[16] > np.sum((exact - x_star) ** 2)         # the exact run is the floor


def test_minibatch_bad_batch_size():
    for bad in (0, 2.5, -3):
        with pytest.raises(InvalidParameterError, match="batch_size"):
            RFedFair(batch_size=bad)


@pytest.mark.slow
def test_minibatch_converges_to_smoothed_optimum_as_the_step_shrinks(problem, smoothed):
    """For a fixed step the minibatch iterates fluctuate around the smoothed optimum: their mean
    squared error is O(step / b) and the mean of the last iterate over seeds is off by the exact
    run's client-drift bias O(step) plus a noise bias O(step / b). Quartering the step (and
    running 4x the rounds) quarters the mean squared error and moves the seed mean closer."""
    x_star = np.append(smoothed.theta, smoothed.duals["eta"])
    S, out = 60, {}
    for step, R in ((0.05, 400), (0.0125, 1600)):
        last = np.array([_state(RFedFair(mu=MU, rounds=R, local_steps=2, step_size=step, batch_size=1)
                                .run(problem, seed=s))[-1] for s in range(S)])
        msd = np.mean(np.sum((last - x_star) ** 2, axis=1))
        out[step] = (msd, np.linalg.norm(last.mean(axis=0) - x_star), np.sqrt(msd / S))
    (m1, bias1, se1), (m2, bias2, se2) = out[0.05], out[0.0125]
    assert 2.5 < m1 / m2 < 6                               # ~ 4 = the step ratio
    assert bias1 <= 4 * se1 and bias2 <= 4 * se2           # the seed mean is at x* within noise
