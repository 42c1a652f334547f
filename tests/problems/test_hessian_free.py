"""The Hessian-free certified route (issue 30 item 2): certified "optimal" for every weight set, both
scalar and softmax losses, penalized and unpenalized intercepts; its interval overlaps the dense
route's; ERM against scikit-learn and SciPy; the bound is valid, tight and falsifiable; sizes are
refused by name before anything is allocated."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel.errors import InvalidParameterError, MemoryLimitError
from drflmodel.matrix_free import MatrixFreeObjectives
from drflmodel.problems.minmax.hessian_free import SmoothedSupport, fixed_weights_of
from drflmodel.problems.minmax.hessian_free_bound import hessian_free_bound
from drflmodel.problems.minmax.fixed_weight_bound import weighted_newton_bound

N_CLIENTS = 4


def _fed(K, seed=0, rows=240, d=4):
    return dm.datasets.gaussian_mixture(rows, d, K, n_clients=N_CLIENTS, alpha=1.0, min_size=5, seed=seed)


def _loss(K):
    return dm.losses.Logistic() if K == 2 else dm.losses.Multinomial()


def _sets(fed):
    n = fed.n_clients
    return {
        "chi2": dm.sets.ChiSquare(n, 0.5),
        "cvar": dm.sets.CVaR(n, 0.5),
        "simplex": dm.sets.Simplex(n),
        "l2ball": dm.sets.LpBall(np.full(n, 1.0 / n), 0.15, 2),
        "linf-ball": dm.sets.LpBall(np.full(n, 1.0 / n), 0.1, "inf"),
        "hcvar": dm.sets.HCVaR(fed.proportions, 0.6),
        "qffl": dm.sets.QFFL(n, 1.0),
        "erm": dm.sets.HCVaR(fed.proportions, 1.0),
    }


def _overlap(a, b, slack=1e-9):
    scale = max(1.0, abs(a.upper_bound))
    return a.lower_bound <= b.upper_bound + slack * scale and b.lower_bound <= a.upper_bound + slack * scale


@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("penalize_intercept", [True, False])
@pytest.mark.parametrize("set_name", ["chi2", "cvar", "simplex", "l2ball", "linf-ball", "hcvar", "qffl", "erm"])
def test_certified_and_overlapping_the_dense_certificate(K, penalize_intercept, set_name):
    fed = _fed(K)
    W = _sets(fed)[set_name]
    hf = dm.FederatedDRO(fed, _loss(K), W, l2=0.02, penalize_intercept=penalize_intercept).solve(
        method="hessian_free")
    dense = dm.FederatedDRO(fed, _loss(K), _sets(fed)[set_name], l2=0.02,
                            penalize_intercept=penalize_intercept).solve(method="sqp")
    assert hf.info["method"] == "hessian_free"
    assert hf.status == "optimal" and dense.status == "optimal"
    assert hf.lower_bound <= hf.upper_bound + 1e-12
    assert _overlap(hf, dense), (hf.lower_bound, hf.upper_bound, dense.lower_bound, dense.upper_bound)
    assert W.contains(hf.weights, tol=1e-9)
    json.dumps(hf.to_dict())                            # the info is JSON-serializable


@pytest.mark.parametrize("loss", [dm.losses.SmoothHinge(), dm.losses.Huber(0.5), dm.losses.Squared()],
                         ids=["smooth_hinge", "huber", "squared"])
def test_other_smooth_losses_with_every_coordinate_penalized(loss):
    if loss.task == "classification":
        fed = dm.datasets.synthetic_classification(n_clients=N_CLIENTS, dim=4, samples=[40, 60, 25, 50], seed=2)
    else:
        fed = dm.datasets.synthetic_regression(n_clients=N_CLIENTS, dim=4, samples=[40, 60, 25, 50], seed=2)
    for W in (dm.sets.ChiSquare(N_CLIENTS, 0.5), dm.sets.CVaR(N_CLIENTS, 0.5)):
        hf = dm.FederatedDRO(fed, loss, W, l2=0.05).solve(method="hessian_free")
        conic = dm.FederatedDRO(fed, loss, W, l2=0.05).solve(method="conic")
        assert hf.status == "optimal" and conic.status == "optimal"
        assert _overlap(hf, conic)


def test_fairness_aware_fl():
    fed = _fed(3, seed=4)
    hf = dm.FairnessAwareFL(fed, dm.losses.Multinomial(), alpha=0.5, l2=0.02, penalize_intercept=False).solve(
        method="hessian_free")
    dense = dm.FairnessAwareFL(fed, dm.losses.Multinomial(), alpha=0.5, l2=0.02, penalize_intercept=False).solve(
        method="sqp")
    assert hf.status == dense.status == "optimal"
    assert _overlap(hf, dense)
    assert "eta" in hf.duals and "q" in hf.duals


# ------------------------------------------------------------------------------------- ERM
def _pooled_erm(K, l2, seed=1):
    fed = _fed(K, seed=seed, rows=400, d=5)
    X, y, _ = fed.pooled()
    one = dm.Federation.from_arrays([X], [y], task=fed.task, **({"classes": list(range(K))} if K > 2 else {}))
    return fed, X, y, dm.FederatedDRO(one, _loss(K), dm.sets.Simplex(1), l2=l2, penalize_intercept=False)


@pytest.mark.parametrize("K", [2, 3])
def test_erm_matches_scikit_learn(K):
    """scikit-learn's LogisticRegression(C = 1/(l2 N)) minimizes the same objective (intercept
    unpenalized): its objective lies in the certified interval, up to its own tolerance."""
    from sklearn.linear_model import LogisticRegression

    l2 = 0.01
    fed, X, y, prob = _pooled_erm(K, l2)
    sol = prob.solve(method="hessian_free", gap_tol=1e-9)
    assert sol.status == "optimal"
    keep = [j for j in range(X.shape[1]) if j != fed.intercept_column]
    model = LogisticRegression(C=1.0 / (l2 * len(y)), tol=1e-12, max_iter=10_000).fit(X[:, keep], y)
    sk = prob.objective(prob.layout.from_sklearn(model.coef_, model.intercept_))
    assert sol.lower_bound <= sk + 1e-12
    assert sk - sol.upper_bound <= 1e-9 * abs(sol.upper_bound) + 1e-12
    assert sol.upper_bound - sk <= 1e-8 * abs(sk)


def test_erm_matches_scipy_on_the_exact_objective():
    fed, X, y, prob = _pooled_erm(3, 0.05, seed=3)
    sol = prob.solve(method="hessian_free", gap_tol=1e-10)
    obj = prob.objectives

    def g(theta):
        return float(obj.values(theta)[0]), obj.gradients(theta)[0]

    ref = minimize(g, np.zeros(prob.dim), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20_000})
    assert sol.lower_bound <= ref.fun + 1e-12
    assert sol.upper_bound - ref.fun <= 1e-9 * abs(ref.fun)


# ------------------------------------------------------------------------------ falsification
def _exact_fixed_minimum(prob, lam):
    """min_theta sum_i lam_i f_i by dense Newton to round-off (an independent route: the full
    Hessian and the self-concordance bound of _newton), certified within 1e-13."""
    out = weighted_newton_bound(prob.objectives, lam, np.zeros(prob.dim), 0.0, rtol=1e-14, max_iter=100)
    assert out.value - out.bound <= 1e-12 * max(1.0, abs(out.value))
    return out.value, out.theta


@pytest.mark.parametrize("K", [2, 3])
def test_bound_is_valid_tight_and_falsifiable(K):
    """(1) At points around the optimum the Hessian-free bound stays below the true minimum; (2) at
    the optimum, raising it by 1e-9 of the scale exceeds the minimum (it is not vacuous); (3) two
    bounds that must fail do fail: the plain strong-convexity bound that forgets the intercept is
    unpenalized (its curvature in b is below mu = l2 here), and one with a wrong modulus. With a
    target out of reach the same bound is returned."""
    fed = _fed(K, seed=5)
    l2 = 1.0                                   # mu above the data's curvature along the intercepts
    prob = dm.FederatedDRO(fed, _loss(K), dm.sets.Simplex(N_CLIENTS), l2=l2, penalize_intercept=False)
    lam = np.array([0.1, 0.2, 0.3, 0.4])
    opt, theta_star = _exact_fixed_minimum(prob, lam)
    mf = MatrixFreeObjectives(prob.objectives)
    mu = l2 * lam.sum()
    rng = np.random.default_rng(0)
    idx = prob.layout.intercept_column + prob.layout.n_features * np.arange(prob.objectives.n_outputs)
    failed_plain = failed_modulus = 0
    for scale in (1e-6, 1e-3, 0.1, 0.5):
        for _ in range(3):
            theta = theta_star + scale * rng.standard_normal(prob.dim)
            shift = np.arange(idx.size) - (idx.size - 1) / 2 if idx.size > 1 else np.ones(1)
            theta[idx] += 20 * scale * shift            # move the intercepts most (not a common shift)
            point = mf.at(theta)
            bound = hessian_free_bound(mf, lam, point)
            assert bound.bound <= opt + 1e-13, (scale, bound.bound - opt)
            # a target out of reach: the own intercepts' bound is completed lazily, the answer is the same
            assert hessian_free_bound(mf, lam, point, target=np.inf).bound == bound.bound
            g = point.weighted_gradient(lam)
            plain = float(lam @ point.values) - float(g @ g) / (2 * mu)          # forgets b is free
            wrong = float(lam @ point.values) - float(g @ g) / (2 * 100 * mu)    # a wrong modulus
            failed_plain += plain > opt
            failed_modulus += wrong > opt
    assert failed_plain > 0
    assert failed_modulus > 0
    tight = hessian_free_bound(mf, lam, mf.at(theta_star))
    assert opt - tight.bound <= 1e-9 * max(1.0, abs(opt))
    assert tight.bound + 1e-9 * max(1.0, abs(opt)) > opt


def test_route_certificate_is_below_an_independent_optimum():
    """The route's L at its final weights is at most the exactly computed fixed-weight minimum
    minus psi, and its U is the exact objective."""
    fed = _fed(3, seed=6)
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), dm.sets.ChiSquare(N_CLIENTS, 0.3), l2=0.05,
                           penalize_intercept=False)
    sol = prob.solve(method="hessian_free")
    opt, _ = _exact_fixed_minimum(prob, sol.weights)
    assert sol.lower_bound <= opt - prob.weights.psi(sol.weights) + 1e-13
    assert sol.upper_bound == pytest.approx(prob.objective(sol.theta), rel=1e-14, abs=1e-15)


def test_smoothed_support_brackets_the_exact_one():
    rng = np.random.default_rng(2)
    W = dm.sets.CVaR(6, 0.4)
    for tau in (1.0, 1e-2, 1e-5):
        S = SmoothedSupport(W, tau)
        for _ in range(5):
            t = rng.standard_normal(6)
            exact = W.worst_case(t)[0]
            smooth, lam = S(t)
            assert W.contains(lam, tol=1e-12)
            assert exact - tau * 2.0 - 1e-12 <= smooth <= exact + 1e-12
    assert fixed_weights_of(dm.sets.HCVaR([0.2, 0.3, 0.5], 1.0)) == pytest.approx([0.2, 0.3, 0.5])
    assert fixed_weights_of(dm.sets.Simplex(1)) == pytest.approx([1.0])
    assert fixed_weights_of(dm.sets.CVaR(5, 0.5)) is None


# ------------------------------------------------------------------------------ refusals
def test_refused_with_reasons():
    fed = _fed(2)
    n = fed.n_clients
    with pytest.raises(InvalidParameterError, match="not smooth"):
        dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(n, 0.5), l2=0.1).solve(method="hessian_free")
    with pytest.raises(InvalidParameterError, match="l2 = 0"):
        dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(n, 0.5), l2=0.0).solve(method="hessian_free")
    with pytest.raises(InvalidParameterError, match="self-concordance"):
        dm.FederatedDRO(fed, dm.losses.SmoothHinge(), dm.sets.CVaR(n, 0.5), l2=0.1,
                        penalize_intercept=False).solve(method="hessian_free")
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.CVaR(n, 0.5), l2=0.1)
    with pytest.raises(InvalidParameterError, match="max_iterations"):
        prob.solve(method="hessian_free", max_iterations=0)
    with pytest.raises(InvalidParameterError, match="algorithm"):
        prob.solve(method="hessian_free", algorithm="newton")
    with pytest.raises(InvalidParameterError, match="unknown option"):
        prob.solve(method="hessian_free", rtol=1e-3)


def test_dense_routes_refused_by_memory_and_auto_takes_the_matrix_free_route(monkeypatch):
    """With memory for the matrix-free objectives but not for P x P matrices: the dense routes are
    refused with their estimate and the route that fits; ``auto`` solves Hessian-free."""
    import drflmodel._memory as memory

    monkeypatch.setattr(memory, "MIN_REFUSED_BYTES", 0)

    fed = dm.datasets.gaussian_mixture(60, 39, 3, n_clients=3, alpha=5.0, min_size=5, seed=1)   # P = 120
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), dm.sets.ChiSquare(3, 0.5), l2=0.05,
                           penalize_intercept=False)
    monkeypatch.setattr(memory, "available_memory", lambda: 100_000)
    for method in ("sqp", "conic"):
        with pytest.raises(MemoryLimitError, match=rf"route '{method}' \(dense 120 x 120 .*\) would allocate about .*"
                                                        r"method='hessian_free' needs no P x P array"):
            prob.solve(method=method)
    sol = prob.solve()
    assert sol.info["method"] == "hessian_free" and sol.status == "optimal"
    assert sol.info["route_choice"]["why"].startswith("the dense routes do not fit in memory: route 'sqp'")
    monkeypatch.setattr(memory, "available_memory", lambda: 1_000)
    with pytest.raises(MemoryLimitError, match="matrix-free objectives would allocate about"):
        dm.FederatedDRO(fed, dm.losses.Multinomial(), dm.sets.ChiSquare(3, 0.5), l2=0.05,
                        penalize_intercept=False).solve()


@pytest.mark.parametrize("set_name", ["qffl", "cvar", "chi2"])
def test_weight_step_for_many_clients_needs_no_parameter_tensor(set_name, monkeypatch):
    """Above DPP_MAX_CLIENTS the SQP weight step is built from constants (CVXPY's parameter tensors
    grow like n^3: a q-FFL step on 1,000 clients was killed at 23 GB); its answer is the compiled
    (parametric) model's."""
    from drflmodel.problems.minmax import lagrangian_sqp

    n = 70
    W = {"qffl": dm.sets.QFFL(n, 1.0), "cvar": dm.sets.CVaR(n, 0.2), "chi2": dm.sets.ChiSquare(n, 0.5)}[set_name]
    rng = np.random.default_rng(3)
    A = rng.standard_normal((n, 8))
    S, f = A @ A.T / 8, rng.random(n)
    big = lagrangian_sqp.WeightStepModel(W, "CLARABEL")
    assert not big.parametric
    lam_big, value_big = big.solve(f, S)
    monkeypatch.setattr(lagrangian_sqp, "DPP_MAX_CLIENTS", 1000)
    small = lagrangian_sqp.WeightStepModel(W, "CLARABEL")
    assert small.parametric
    lam_small, value_small = small.solve(f, S)
    assert value_big == pytest.approx(value_small, rel=1e-7, abs=1e-9)
    np.testing.assert_allclose(lam_big, lam_small, atol=1e-5)


def test_algorithm_choice(monkeypatch):
    """auto: L-BFGS for fixed and (small) smooth weight sets, the quasi-Newton SQP for polyhedral sets
    and for smooth ones from SQP_MIN_SIZE rows x parameters; both certify."""
    from drflmodel.problems.minmax import hessian_free

    fed = _fed(2, seed=8)
    n = fed.n_clients

    def algorithm(W):
        sol = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=0.02).solve(method="hessian_free")
        assert sol.status == "optimal"
        return sol.info["algorithm"]

    assert algorithm(dm.sets.ChiSquare(n, 0.5)) == "lbfgs"
    assert algorithm(dm.sets.HCVaR(fed.proportions, 1.0)) == "lbfgs"
    assert algorithm(dm.sets.CVaR(n, 0.5)) == "sqp"
    monkeypatch.setattr(hessian_free, "SQP_MIN_SIZE", 1)
    assert algorithm(dm.sets.ChiSquare(n, 0.5)) == "sqp"
    assert algorithm(dm.sets.HCVaR(fed.proportions, 1.0)) == "lbfgs"


def test_tol_goes_on_past_the_first_certificate_and_stops_at_the_floor():
    fed = _fed(3, seed=9)
    W = dm.sets.ChiSquare(N_CLIENTS, 0.3)
    first = dm.FederatedDRO(fed, dm.losses.Multinomial(), W, l2=0.02).solve(method="hessian_free")
    tight = dm.FederatedDRO(fed, dm.losses.Multinomial(), W, l2=0.02).solve(method="hessian_free", tol=1e-11)
    floor = dm.FederatedDRO(fed, dm.losses.Multinomial(), W, l2=0.02).solve(method="hessian_free", tol=1e-30)
    assert first.status == tight.status == floor.status == "optimal"
    assert tight.relative_gap <= 1e-11 < 1e-6 and first.info["iterations"] < tight.info["iterations"]
    assert floor.relative_gap <= 1e-11                        # it stalls at the allowance's floor, certified
    assert floor.info["iterations"] < 2000


def test_auto_takes_the_hessian_free_route_from_its_size_and_the_dense_route_below():
    """``method="auto"`` (issue 30 item 5): Hessian-free from HESSIAN_FREE_MIN_DIM parameters, a dense
    route below, each with its reason in ``info["route_choice"]``; where both run, the certified
    intervals overlap."""
    from drflmodel.problems.minmax.hessian_free import HESSIAN_FREE_MIN_DIM

    big = dm.datasets.gaussian_mixture(300, HESSIAN_FREE_MIN_DIM // 10 - 1, 10, n_clients=N_CLIENTS, alpha=1.0,
                                       min_size=5, seed=2)
    prob = dm.FederatedDRO(big, dm.losses.Multinomial(), dm.sets.ChiSquare(N_CLIENTS, 0.5), l2=0.02,
                           penalize_intercept=False)
    assert prob.dim == HESSIAN_FREE_MIN_DIM
    auto = prob.solve()
    assert auto.info["method"] == "hessian_free" and auto.status == "optimal"
    choice = auto.info["route_choice"]
    # issue 41: auto ranks by estimated seconds; the dense sqp route's O(N P^2 + P^3) steps cost more
    assert choice["method"] == "hessian_free" and "cheapest" in choice["why"]
    assert choice["estimated_seconds"]["hessian_free"] < choice["estimated_seconds"]["sqp"]
    json.dumps(auto.to_dict())
    dense = dm.FederatedDRO(big, dm.losses.Multinomial(), dm.sets.ChiSquare(N_CLIENTS, 0.5), l2=0.02,
                            penalize_intercept=False).solve(method="sqp")
    assert dense.status == "optimal" and _overlap(auto, dense)
    assert "route_choice" not in dense.info                  # forced: no choice to record

    small = dm.FederatedDRO(_fed(3), dm.losses.Multinomial(), dm.sets.ChiSquare(N_CLIENTS, 0.5), l2=0.02,
                            penalize_intercept=False)
    sol = small.solve()                       # issue 41: the route of least estimated seconds
    estimated = sol.info["route_choice"]["estimated_seconds"]
    assert sol.info["method"] == min(estimated, key=estimated.get) and sol.status == "optimal"
    assert sol.relative_gap <= 1e-10 or sol.info["method"] != "hessian_free"   # auto asks it for sqp's 1e-10


@pytest.mark.parametrize("set_name", ["erm", "one-client"])
def test_fixed_weight_sets_take_no_cvxpy_weight_step(set_name):
    """The fast path (issue 30 item 5): for a fixed weight set the SQP route's weight step is the
    numpy FixedWeightStep (no CVXPY problem per iteration) and the answer is the conic route's."""
    from drflmodel.problems.minmax.lagrangian_sqp import FixedWeightStep, weight_step_model

    fed = _fed(2)
    if set_name == "one-client":
        fed = dm.Federation([dm.Client(np.vstack([c.X for c in fed.clients]),
                                       np.concatenate([c.y for c in fed.clients]))], task=fed.task)
    W = dm.sets.HCVaR(fed.proportions, 1.0) if set_name == "erm" else dm.sets.Simplex(1)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=0.02)
    assert isinstance(weight_step_model(prob, "CLARABEL"), FixedWeightStep)
    fast = prob.solve(method="sqp")
    conic = dm.FederatedDRO(fed, dm.losses.Logistic(), W, l2=0.02).solve(method="conic")
    assert fast.status == "optimal" and conic.status == "optimal" and _overlap(fast, conic)
    assert np.allclose(fast.weights, W.single_point())


def test_certificate_attempted_only_where_it_can_close(monkeypatch):
    """The bound (a Newton polish of the intercepts and a backward pass) is computed only at iterates
    whose cheap estimate leaves half the gap: on 5,000 x 30 with an unpenalized intercept, going on
    to tol = 1e-10 from gap_tol = 1e-8, one bound in 13 iterations (2 when every iterate past the
    first closing attempted one), and no iterate is offered to the certificate's own test once the
    estimate refuses it. The answer stays certified around the dense route's optimum."""
    import drflmodel.problems.minmax.hessian_free as hf

    calls = []
    original = hf.hessian_free_bound

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(hf, "hessian_free_bound", counted)
    fed = dm.datasets.gaussian_mixture(5000, 30, 2, n_clients=1, alpha=0.5, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3, penalize_intercept=False)
    sol = prob.solve(method="hessian_free", gap_tol=1e-8, tol=1e-10)
    assert sol.status == "optimal" and sol.relative_gap <= 1e-10
    assert sol.info["iterations"] >= 8
    assert len(calls) <= 1
    assert sol.info.get("certificate_skipped", 0) >= sol.info["iterations"] - 2
    dense = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3,
                            penalize_intercept=False).solve(method="sqp", gap_tol=1e-12)
    assert sol.lower_bound <= dense.upper_bound and dense.lower_bound <= sol.upper_bound


def test_stops_at_the_allowance_floor_when_tol_is_below_it(monkeypatch):
    """On 100,000 rows the bound's floating-point allowances alone leave about 1.5e-10, above
    tol = 1e-10 (auto's): the route ends once its best gap is within 1.25x that floor, in fewer
    iterations and certificate attempts than the stall rule alone (measured: 11 and 1 against 15
    and 5), certified and around the dense route's optimum."""
    from drflmodel.problems.minmax.hessian_free_steps import Certifier

    fed = dm.datasets.gaussian_mixture(100_000, 50, 2, n_clients=1, alpha=0.5, seed=0)

    def solve():
        prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3, penalize_intercept=False)
        return prob.solve(method="hessian_free", gap_tol=1e-8, tol=1e-10)

    at_floor = solve()
    b = at_floor.info["hessian_free_bound"]
    floor = (b["value_allowance"] + b["gradient_allowance"] ** 2 / (2 * b["modulus"])) / max(1.0, abs(at_floor.upper_bound))
    assert 1e-10 < floor <= at_floor.relative_gap <= floor / Certifier.FLOOR_FRACTION
    monkeypatch.setattr(Certifier, "FLOOR_FRACTION", float("inf"))     # the stall rule alone
    stalled = solve()
    assert at_floor.status == stalled.status == "optimal"
    assert at_floor.info["iterations"] < stalled.info["iterations"]
    assert at_floor.info["certificate_attempts"] < stalled.info["certificate_attempts"]
    dense = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3,
                            penalize_intercept=False).solve(method="sqp", gap_tol=1e-9)
    assert at_floor.lower_bound <= dense.upper_bound and dense.lower_bound <= at_floor.upper_bound
