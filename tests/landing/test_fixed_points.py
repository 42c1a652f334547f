"""Certified landing points against independent routes: closed forms from the raw rows for quadratic
losses, long simulations with the repo's own solvers (to 1e-10), an independent CVXPY model of the
Moreau-envelope problem, and the certificates' bounds checked to hold -- and to be tight enough to
fail when they are tightened."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.landing import StrategyNotCharacterized, fixed_point
from drflmodel.landing.contraction import contraction_factors, local_iterates
from drflmodel.landing.moreau import moreau_certificate, strong_convexity_modulus
# the closed forms of the FedProx tests, computed from the raw rows (squared loss, ridge 0.1)
from tests.solvers.test_fedprox import _raw, fixed_point_exact_prox, fixed_point_local_steps

L2 = 0.1


@pytest.fixture(scope="module")
def quadratic():
    """p-weighted least squares on 5 heterogeneous clients of different sizes."""
    fed = dm.datasets.synthetic_regression(n_clients=5, dim=4, samples=[20, 40, 60, 30, 50],
                                           heterogeneity=1.0, seed=1)
    return dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.HCVaR(fed.proportions, 1.0), l2=L2)


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("J,scale", [(1, 1.0), (5, 1.0), (20, 0.5), (10, 1.9)])
def test_fedavg_matches_the_closed_form_of_quadratics(quadratic, J, scale):
    L = float(np.max(quadratic.objectives.smoothness()))
    eta = scale / (L * J) if scale < 1.5 else scale / L          # last case: a large local step
    fp = fixed_point(quadratic, "FedAvg", local_steps=J, step_size=eta)
    exact = fixed_point_local_steps(quadratic, 0.0, J, eta)
    assert fp.status == "certified"
    err = np.linalg.norm(fp.theta - exact)
    assert err <= fp.radius                                    # the certificate holds
    assert err <= 1e-12 * max(1.0, np.linalg.norm(exact))


def test_fedavg_with_one_local_step_is_the_erm_optimum(quadratic):
    L = float(np.max(quadratic.objectives.smoothness()))
    fp = fixed_point(quadratic, "FedAvg", local_steps=1, step_size=1.0 / L)
    H = sum(p * Hi for p, Hi, _ in _raw(quadratic))
    b = sum(p * bi for p, _, bi in _raw(quadratic))
    assert np.allclose(fp.theta, np.linalg.solve(H, b), atol=1e-12)


@pytest.mark.parametrize("mu,J", [(0.1, 5), (1.0, 10), (10.0, 3)])
def test_fedprox_local_steps_match_the_closed_form(quadratic, mu, J):
    L = float(np.max(quadratic.objectives.smoothness()))
    eta = 1.0 / ((L + mu) * J)
    fp = fixed_point(quadratic, "FedProx", mu=mu, local_steps=J, step_size=eta)
    exact = fixed_point_local_steps(quadratic, mu, J, eta)
    assert fp.status == "certified" and np.linalg.norm(fp.theta - exact) <= min(fp.radius, 1e-12)


@pytest.mark.parametrize("mu", [0.01, 1.0, 100.0])
def test_fedprox_exact_matches_the_closed_form(quadratic, mu):
    fp = fixed_point(quadratic, "FedProx", mu=mu, local_steps="exact")
    exact = fixed_point_exact_prox(quadratic, mu)
    assert fp.status == "certified" and fp.kind == "moreau"
    assert np.linalg.norm(fp.theta - exact) <= fp.radius + 1e-14
    assert np.linalg.norm(fp.theta - exact) <= 1e-11


def test_the_contraction_factor_is_the_exact_lipschitz_constant_for_quadratics(quadratic):
    """For quadratics m_i and L_i are the extreme curvatures, so q_i equals the spectral norm of
    the (affine) local map's matrix -- a valid and sharp bound: a smaller factor would be false."""
    obj = quadratic.objectives
    L, m = obj.smoothness(), obj.strong_convexity()
    d = quadratic.dim
    for mu, J, scale in [(0.0, 5, 1.0), (1.0, 10, 1.0), (0.5, 3, 0.4)]:
        eta = scale / ((np.max(L) + mu) * J)
        q = contraction_factors(L, m, J, eta, mu)
        for i, (_, H, _) in enumerate(_raw(quadratic)):
            M = np.eye(d) - eta * (H + mu * np.eye(d))
            A = np.linalg.matrix_power(M, J) + eta * mu * sum(np.linalg.matrix_power(M, k) for k in range(J))
            assert q[i] == pytest.approx(np.linalg.norm(A, 2), rel=1e-9)


def test_the_contraction_factor_bounds_the_local_map_of_a_non_quadratic_loss(logistic):
    prob, _ = logistic
    obj = prob.objectives
    rng = np.random.default_rng(0)
    J, mu = 8, 0.5
    eta = 1.0 / ((np.max(obj.smoothness()) + mu) * J)
    q = contraction_factors(obj.smoothness(), obj.strong_convexity(), J, eta, mu)
    worst = np.zeros(prob.n_clients)
    for _ in range(50):
        a, b = rng.normal(scale=2.0, size=(2, prob.dim))
        ratio = np.linalg.norm(local_iterates(obj, a, J, eta, mu) - local_iterates(obj, b, J, eta, mu),
                               axis=1) / np.linalg.norm(a - b)
        worst = np.maximum(worst, ratio)
    assert np.all(worst <= q * (1 + 1e-12)) and np.all(worst > 0.5 * q)


def test_the_banach_radius_holds_and_is_not_vacuous(logistic):
    """At a point moved by delta from the fixed point the radius covers the true point (>= |delta|)
    and is at most (1 + q)/(1 - q) |delta| -- a bound that would fail if the radius were inflated."""
    from drflmodel.landing.contraction import average_map

    prob, _ = logistic
    obj = prob.objectives
    J, eta = 10, 0.05
    fp = fixed_point(prob, "FedAvg", local_steps=J, step_size=eta)
    q = fp.contraction
    p = fp.config["weights"]
    rng = np.random.default_rng(1)
    for size in (1e-6, 1e-3, 1e-1):
        delta = rng.normal(size=prob.dim)
        delta *= size / np.linalg.norm(delta)
        x = fp.theta + delta
        radius = np.linalg.norm(average_map(obj, p, x, J, eta) - x) / (1 - q)
        assert size <= radius * (1 + 1e-9) <= (1 + q) / (1 - q) * size * (1 + 1e-6)


# --------------------------------------------------------------------------- long simulations
def test_fedavg_simulation_lands_on_the_fixed_point_to_1e_10(logistic):
    prob, sol = logistic
    fp = fixed_point(prob, dm.solvers.FedAvg(local_steps=10))
    tr = dm.solvers.FedAvg(rounds=600, local_steps=10).run(prob)
    assert fp.config["step_size"] == tr.info["step_size_used"]
    assert np.linalg.norm(tr.theta[-1] - fp.theta) <= 1e-10
    assert np.linalg.norm(fp.theta - sol.theta) > 1e-3          # client drift: not the optimum


def test_fedprox_simulation_lands_on_the_fixed_point_to_1e_10(logistic):
    prob, sol = logistic
    solver = dm.solvers.FedProx(rounds=800, mu=1.0, local_steps=10)
    fp = fixed_point(prob, solver)
    tr = solver.run(prob)
    assert np.linalg.norm(tr.theta[-1] - fp.theta) <= 1e-10
    fedavg = fixed_point(prob, "FedAvg", local_steps=10, step_size=fp.config["step_size"])
    assert np.linalg.norm(fp.theta - fedavg.theta) > 1e-4       # the proximal term moves the point


def test_fedprox_with_many_local_steps_approaches_the_exact_point(logistic):
    """J -> infinity local steps of size 1/(L + mu) solve the local problems exactly."""
    prob, _ = logistic
    mu = 1.0
    exact = fixed_point(prob, "FedProx", mu=mu, local_steps="exact")
    L = float(np.max(prob.objectives.smoothness()))
    many = fixed_point(prob, "FedProx", mu=mu, local_steps=3000, step_size=1.0 / (L + mu))
    assert np.linalg.norm(many.theta - exact.theta) <= 1e-10


def test_scaffold_and_q_fedavg_simulations_land_on_the_oracle(logistic):
    prob, sol = logistic
    fp = fixed_point(prob, "SCAFFOLD", solution=sol)
    assert fp.status == "certified" and np.linalg.norm(fp.theta - sol.theta) <= 1e-5
    tr = dm.solvers.Scaffold(rounds=400, local_steps=10).run(prob)
    assert np.linalg.norm(tr.theta[-1] - fp.theta) <= 1e-10
    qprob = dm.FederatedDRO(prob.federation, prob.loss, weights=dm.sets.QFFL(prob.n_clients, 1.0), l2=L2)
    qfp = fixed_point(qprob, "q-FedAvg", local_steps=1)
    assert qfp.status in ("certified", "certified_within_radius") and np.isfinite(qfp.radius)
    tq = dm.solvers.QFedAvg(rounds=3000, local_steps=1).run(qprob)
    assert np.linalg.norm(tq.theta[-1] - qfp.theta) <= qfp.radius + 1e-8


# --------------------------------------------------------------------------- the Moreau problem against CVXPY
def test_the_moreau_problem_against_an_independent_cvxpy_model(logistic):
    """min over (theta, u_i) of sum_i p_i [f_i(u_i) + mu/2 |u_i - theta|^2], written here from the
    rows with cvxpy's logistic atom and solved by Clarabel: its value lies in the certificate's
    interval (to the conic solver's accuracy) and its theta within the radius plus that accuracy."""
    import cvxpy as cp

    prob, _ = logistic
    mu = 0.5
    fp = fixed_point(prob, "FedProx", mu=mu, local_steps="exact")
    clients, p = prob.federation.clients, prob.federation.proportions
    theta = cp.Variable(prob.dim)
    terms = []
    for pi, c in zip(p, clients):
        u = cp.Variable(prob.dim)
        loss = cp.sum(cp.logistic(-cp.multiply(c.y, c.X @ u))) / len(c.y) + 0.5 * L2 * cp.sum_squares(u)
        terms.append(pi * (loss + 0.5 * mu * cp.sum_squares(u - theta)))
    model = cp.Problem(cp.Minimize(sum(terms)))
    model.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert fp.lower_bound - 1e-7 <= model.value <= fp.upper_bound + 1e-7
    assert fp.upper_bound - fp.lower_bound <= 1e-12
    assert np.linalg.norm(theta.value - fp.theta) <= fp.radius + 1e-4


def test_the_moreau_lower_bound_holds_and_fails_when_the_modulus_is_raised(logistic):
    """The bound F - |g|^2/(2 kappa) stays below the minimum at perturbed points (logistic), and on
    one quadratic client -- where kappa is the joint problem's exact smallest curvature -- raising
    kappa by 1% makes it exceed the minimum along the flattest direction: kappa is not over-stated."""
    prob, _ = logistic
    mu = 0.5
    fp = fixed_point(prob, "FedProx", mu=mu, local_steps="exact")
    obj, p = prob.objectives, fp.config["weights"]
    kappa = strong_convexity_modulus(obj.strong_convexity(), mu, p)
    U = fp.info["local_models"]
    rng = np.random.default_rng(2)
    for _ in range(20):
        th = fp.theta + 0.3 * rng.normal(size=prob.dim)
        Uq = U + 0.3 * rng.normal(size=U.shape)
        assert moreau_certificate(obj, p, mu, th, Uq, kappa)["lower"] <= fp.value + 1e-12

    fed = dm.datasets.synthetic_regression(n_clients=1, dim=3, samples=40, seed=5)
    one = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.CVaR(1, 1.0), l2=L2)
    fp1 = fixed_point(one, "FedProx", mu=mu, local_steps="exact")
    obj1, p1 = one.objectives, np.ones(1)
    m = float(obj1.strong_convexity()[0])
    kappa1 = strong_convexity_modulus([m], mu, p1)
    (_, H, _), = _raw(one)
    w, V = np.linalg.eigh(H)
    v = V[:, 0]                                              # the flattest curvature of f
    a = mu / (mu - kappa1)                                   # the joint eigenvector (theta, u) = (a v, v)
    t = 0.2
    th, Uq = fp1.theta + t * a * v, fp1.info["local_models"] + t * v[None, :]
    assert moreau_certificate(obj1, p1, mu, th, Uq, kappa1)["lower"] <= fp1.value + 1e-12
    assert moreau_certificate(obj1, p1, mu, th, Uq, 1.01 * kappa1)["lower"] > fp1.value + 1e-9


# --------------------------------------------------------------------------- refusals and bad input
@pytest.mark.parametrize("name", ["Krum", "FedMedian", "fed_trimmed_avg", "Bulyan", "DRFA", "Stochastic-AFL"])
def test_strategies_without_a_characterization_are_refused_by_name(logistic, name):
    prob, _ = logistic
    with pytest.raises(StrategyNotCharacterized, match=f"strategy {name!r} has no certified landing point"):
        fixed_point(prob, name)


def test_an_unknown_strategy_is_refused_with_the_known_names(logistic):
    prob, _ = logistic
    with pytest.raises(StrategyNotCharacterized, match="no known characterization.*FedAvg, FedProx"):
        fixed_point(prob, "FedNova")


def test_missing_configuration_names_what_it_needs(logistic):
    prob, _ = logistic
    with pytest.raises(InvalidParameterError, match="missing: local_steps .*; step_size"):
        fixed_point(prob, "FedAvg")
    with pytest.raises(InvalidParameterError, match="missing: mu"):
        fixed_point(prob, "FedProx", local_steps="exact")
    with pytest.raises(InvalidParameterError, match=r"mu must lie in \(0"):
        fixed_point(prob, "FedProx", mu=0.0, local_steps="exact")
    with pytest.raises(InvalidParameterError, match="mu is FedProx's proximal weight"):
        fixed_point(prob, "FedAvg", local_steps=3, step_size=0.1, mu=1.0)
    with pytest.raises(InvalidParameterError, match="local_steps must be an integer"):
        fixed_point(prob, "FedAvg", local_steps=2.5, step_size=0.1)


def test_minibatch_q_fedavg_with_local_steps_and_nonsmooth_losses_are_refused(logistic):
    prob, _ = logistic
    with pytest.raises(StrategyNotCharacterized, match="minibatch"):
        fixed_point(prob, dm.solvers.FedAvg(local_steps=5, batch_size=8))
    qprob = dm.FederatedDRO(prob.federation, prob.loss, weights=dm.sets.QFFL(prob.n_clients, 1.0), l2=L2)
    with pytest.raises(StrategyNotCharacterized, match="more than one local step"):
        fixed_point(qprob, "q-FedAvg", local_steps=5)
    hinge = dm.FederatedDRO(prob.federation, dm.losses.Hinge(), weights=prob.weights, l2=L2)
    with pytest.raises(StrategyNotCharacterized, match="not differentiable"):
        fixed_point(hinge, "FedAvg", local_steps=3, step_size=0.1)
    dro = dm.FederatedDRO(prob.federation, prob.loss, weights=dm.sets.CVaR(prob.n_clients, 0.5), l2=L2)
    with pytest.raises(InvalidParameterError, match="fixed client weights"):
        fixed_point(dro, "FedAvg", local_steps=3, step_size=0.1)


def test_without_strong_convexity_or_with_a_too_large_step_the_point_is_uncertified(logistic):
    prob, _ = logistic
    flat = dm.FederatedDRO(prob.federation, prob.loss, weights=prob.weights, l2=0.0)
    fp = fixed_point(flat, "FedAvg", local_steps=5, step_size=0.05)
    assert fp.status == "uncertified" and not np.isfinite(fp.radius) and "strongly convex" in fp.info["reason"]
    L = float(np.max(prob.objectives.smoothness()))
    big = fixed_point(prob, "FedAvg", local_steps=2, step_size=2.5 / L)
    assert big.status in ("uncertified", "failed") and "does not contract" in big.info["reason"]


def test_server_optimizers_land_on_fedavgs_point(logistic):
    prob, _ = logistic
    avg = fixed_point(prob, "FedAvg", local_steps=4, step_size=0.1)
    for name in ("FedAdam", "FedYogi", "FedAdagrad", "FedAvgM"):
        other = fixed_point(prob, name, local_steps=4, step_size=0.1)
        assert np.array_equal(other.theta, avg.theta) and "zero momentum" in other.characterization.statement


def test_results_serialize_to_json(logistic):
    import json

    prob, sol = logistic
    for fp in (fixed_point(prob, "FedAvg", local_steps=3, step_size=0.1),
               fixed_point(prob, "FedProx", mu=1.0, local_steps="exact"),
               fixed_point(prob, "SCAFFOLD", solution=sol)):
        d = json.loads(fp.to_json())
        assert d["status"] == fp.status and np.allclose(d["theta"], fp.theta)
        assert fp.source in fp.summary()


def test_a_problem_whose_rows_are_remote_is_refused_with_what_to_pass(logistic, monkeypatch):
    prob, _ = logistic
    monkeypatch.setattr(prob.objectives, "holds_rows", False, raising=False)
    with pytest.raises(InvalidParameterError, match="rows are on remote clients.*pass the problem with the rows"):
        fixed_point(prob, "FedAvg", local_steps=3, step_size=0.1)


@pytest.mark.slow
def test_a_long_scaff_pd_run_lands_on_the_certified_saddle_point():
    """Scaff-PD on a chi-square DRO problem (the Scaff-PD tests' instance): 3000 rounds of its
    strongly-convex-strongly-concave schedule land within tol + radius of the oracle's optimum,
    the radius sqrt(2 (U - L) / m) coming from the oracle's own gap."""
    from drflmodel.landing import conformance
    from tests.solvers.test_scaffpd import _problem

    prob = _problem(dm.sets.ChiSquare(5, 0.1))
    sol = prob.solve()
    fp = fixed_point(prob, "Scaff-PD", solution=sol)
    assert fp.status in ("certified", "certified_within_radius") and fp.radius < 1e-5
    tr = dm.solvers.ScaffPD(rounds=3000, local_steps=10).run(prob, seed=0)
    rep = conformance(tr, prob, solution=sol)
    assert rep.passed and rep.drift == 0.0


def test_the_matrix_free_paths_give_the_same_certified_points(logistic, monkeypatch):
    """Without the dense helpers (GMRES unpreconditioned; the Moreau Newton system by conjugate
    gradients instead of eliminating the local models) the same points are certified."""
    from drflmodel.landing import contraction, moreau

    prob, _ = logistic
    dense = (fixed_point(prob, "FedProx", mu=0.5, local_steps=6, step_size=0.05),
             fixed_point(prob, "FedProx", mu=0.5, local_steps="exact"))
    monkeypatch.setattr(contraction, "PRECONDITION_MAX_DIM", 0)
    monkeypatch.setattr(moreau, "DIRECT_MAX_ENTRIES", 0)
    free = (fixed_point(prob, "FedProx", mu=0.5, local_steps=6, step_size=0.05),
            fixed_point(prob, "FedProx", mu=0.5, local_steps="exact"))
    for a, b in zip(dense, free):
        assert b.status == "certified" and np.linalg.norm(a.theta - b.theta) <= a.radius + b.radius
    assert free[1].info["cg_iterations"] > 0 == dense[1].info["cg_iterations"]
