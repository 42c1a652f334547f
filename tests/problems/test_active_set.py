"""The active-set route for piecewise-linear losses (problems/minmax/active_set.py, problems/minmax/pieces.py).

Checks, each able to fail: the pieces and the Moreau envelope against the loss itself and a brute
force minimization; the numpy Lagrangian bound below an independently solved fixed-weight minimum
for arbitrary multipliers and equal to it at good ones; the route against the conic route on random
instances (ties, badly scaled columns, one client, tiny clients; several weight sets; FAFL): both
certified, the active-set value inside the conic certificate's interval and within 1e-8 relative of
the conic value where the conic certificate itself is that tight, theta within the distance the two
certificates allow; a start far from the solution is repaired by the active-set rounds; forced
where it cannot apply it is refused with the reason, and auto then answers with the conic route.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.problems.minmax import active_set
from drflmodel.problems.minmax.pieces import MoreauEnvelope, Pieces, SampleTable, piecewise_dual_bound

PIECEWISE = [dm.losses.Hinge(), dm.losses.Pinball(0.3), dm.losses.Pinball(0.0), dm.losses.Pinball(1.0),
             dm.losses.EpsilonInsensitive(0.2), dm.losses.EpsilonInsensitive(0.0)]


# ------------------------------------------------------------------------------------ data
def _federation(kind: str, loss, seed: int, d: int = 4):
    """Random federations: 'plain', 'ties' (integer features, integer noise, repeated rows),
    'scaled' (columns scaled by 1e3 .. 1e-3), 'one' (a single client), 'tiny' (clients of 1-3 rows)."""
    rng = np.random.default_rng(seed)
    sizes = {"one": [30], "tiny": [1, 2, 1, 3, 30]}.get(kind, [int(s) for s in rng.integers(5, 40, 4)])
    w = rng.normal(size=d)
    Xs, ys = [], []
    for s in sizes:
        X = rng.normal(size=(s, d))
        if kind == "ties":
            X = np.round(X)
        if kind == "scaled":
            X = X * np.array([1e3, 1.0, 1e-3, 10.0])
        if loss.task == "classification":
            y = np.where(X @ w + 0.5 * rng.normal(size=s) > 0, 1.0, -1.0)
        else:
            y = X @ w + (np.round(rng.normal(size=s)) if kind == "ties" else 0.3 * rng.normal(size=s))
        if kind == "ties":
            X, y = np.vstack([X, X[:3]]), np.concatenate([y, y[:3]])
        Xs.append(X), ys.append(y)
    return dm.Federation.from_arrays(Xs, ys, task=loss.task)


def _weight_sets(n):
    return {"cvar": dm.sets.CVaR(n, 0.5 if n > 1 else 1.0), "chi2": dm.sets.ChiSquare(n, 0.5),
            "simplex": dm.sets.Simplex(n), "lp2": dm.sets.LpBall(np.full(n, 1.0 / n), 0.1, 2)}


# ------------------------------------------------------------------------------------ pieces
@pytest.mark.parametrize("loss", PIECEWISE, ids=repr)
def test_pieces_are_the_loss_and_the_kinks_are_where_pieces_meet(loss):
    P = Pieces.of(loss)
    z = np.linspace(-3, 3, 2001)
    np.testing.assert_allclose(P.values(z).max(axis=0), loss.phi(z), atol=1e-15)
    assert np.all(np.diff(P.slopes) > 0)
    for k, c in enumerate(P.kinks):              # both neighbours take the same value at a kink
        assert P.slopes[k] * c + P.intercepts[k] == pytest.approx(P.slopes[k + 1] * c + P.intercepts[k + 1])
    # the active piece attains the max
    top = P.values(z)[P.active(z), np.arange(z.size)]
    np.testing.assert_allclose(top, loss.phi(z), atol=1e-15)


def test_pieces_refuse_a_smooth_loss():
    with pytest.raises(InvalidParameterError, match="not piecewise linear"):
        Pieces.of(dm.losses.Logistic())


@pytest.mark.parametrize("loss", PIECEWISE, ids=repr)
@pytest.mark.parametrize("mu", [0.05, 0.7])
def test_moreau_envelope_against_brute_force(loss, mu):
    env = MoreauEnvelope(loss, mu)
    z = np.linspace(-2.5, 2.5, 41)
    # min_v L(v) + (z - v)^2 / (2 mu) of a convex piecewise quadratic: attained at a kink or at a
    # piece's stationary point z - mu a_k -- the minimum over those candidates is exact
    P = Pieces.of(loss)

    def prox_value(zz):
        v = np.concatenate([P.kinks, zz - mu * P.slopes])
        return np.min(loss.phi(v) + (zz - v) ** 2 / (2 * mu))

    exact = np.array([prox_value(zz) for zz in z])
    np.testing.assert_allclose(env.phi(z), exact, rtol=1e-14, atol=1e-15)
    brute = np.array([minimize_scalar(lambda v: loss.phi(np.array(v)) + (zz - v) ** 2 / (2 * mu),
                                      bounds=(zz - 5, zz + 5), method="bounded").fun for zz in z])
    np.testing.assert_allclose(env.phi(z), brute, atol=1e-5)        # (Brent stops at xatol = 1e-5)
    assert np.all(brute >= env.phi(z) - 1e-15)                       # a minimum is below every trial
    h = 1e-6                                     # derivative and curvature by finite differences
    np.testing.assert_allclose(env.dphi(z), (env.phi(z + h) - env.phi(z - h)) / (2 * h), atol=1e-5)
    fd2 = (env.dphi(z + h) - env.dphi(z - h)) / (2 * h)
    smooth = np.abs(fd2 - np.round(fd2 * mu) / mu) < 1e-3           # away from the band edges
    np.testing.assert_allclose(env.ddphi(z)[smooth], fd2[smooth], atol=1e-4)
    a_max = np.max(np.abs(Pieces.of(loss).slopes))
    assert np.all(env.phi(z) <= loss.phi(z) + 1e-15)
    assert np.all(env.phi(z) >= loss.phi(z) - 0.5 * mu * a_max ** 2 - 1e-15)


def test_weighted_hessian_of_a_piecewise_quadratic_loss_skips_only_flat_rows():
    """The weighted Hessian skips rows without curvature; it must equal the sum of the client Hessians."""
    fed = _federation("tiny", dm.losses.Hinge(), seed=7)
    lam = np.array([0.1, 0.0, 0.3, 0.2, 0.4])
    theta = np.array([0.3, -0.2, 0.5, 0.1])
    for loss in (MoreauEnvelope(dm.losses.Hinge(), 0.5), dm.losses.SmoothHinge()):
        obj = dm.FederatedDRO(fed, loss, dm.sets.Simplex(5), l2=0.1).objectives
        expected = np.einsum("i,ipq->pq", lam, obj.hessians(theta))
        np.testing.assert_allclose(obj.weighted_hessian(theta, lam), expected, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------------------------ the bound
@pytest.mark.parametrize("loss", [dm.losses.Hinge(), dm.losses.EpsilonInsensitive(0.1)], ids=repr)
def test_dual_bound_is_below_the_fixed_weight_minimum_and_tight_at_the_optimum(loss):
    fed = _federation("plain", loss, seed=3)
    prob = dm.FederatedDRO(fed, loss, dm.sets.CVaR(fed.n_clients, 0.5), l2=0.05)
    table, pieces = SampleTable(prob.objectives), Pieces.of(loss)
    rng = np.random.default_rng(0)
    lam = rng.dirichlet(np.ones(fed.n_clients))
    # the fixed-weight minimum by the conic fixed-weight problem (independent of the bound)
    prob_fixed, theta_v, lam_v = prob.fixed_weight_problem()
    lam_v.value = lam
    exact = prob_fixed.solve(solver="CLARABEL")
    for _ in range(5):                           # arbitrary multipliers: a valid (loose) bound
        mix = rng.dirichlet(np.ones(pieces.count), size=table.X.shape[0])
        b = piecewise_dual_bound(table, prob.weights, lam, mix @ pieces.slopes, mix @ pieces.intercepts)
        assert b["value"] <= exact + 1e-9
        assert b["bound"] == pytest.approx(b["value"] - prob.weights.psi(lam), abs=1e-14)
    # multipliers on the active pieces at the minimizer, the kink rows' mixed to make the gradient
    # vanish (the route's way): the bound closes
    sol = prob.solve(method="active_set")
    b_sol = sol.info["min_at_lambda"] + prob.weights.psi(sol.weights)
    lam_v.value = sol.weights
    exact_sol = prob_fixed.solve(solver="CLARABEL")
    assert b_sol <= exact_sol + 1e-9 * max(1.0, abs(exact_sol))
    assert b_sol == pytest.approx(exact_sol, rel=1e-7, abs=1e-9)


def test_dual_bound_needs_every_coordinate_penalized():
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=20, seed=1, add_intercept=True)
    obj = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.Simplex(3), l2=0.1, penalize_intercept=False).objectives
    table, pieces = SampleTable(obj), Pieces.of(dm.losses.Hinge())
    active = pieces.active(table.arguments(np.zeros(obj.dim)))
    b = piecewise_dual_bound(table, dm.sets.Simplex(3), np.full(3, 1 / 3), pieces.slopes[active],
                             pieces.intercepts[active])
    assert b["value"] == -np.inf and b["bound"] == -np.inf


# ------------------------------------------------------------------------------------ the route
def _agree(prob, fast, conic, l2):
    """Both certified; the fast value inside the conic interval, within 1e-8 of the conic value up to
    the conic certificate's own gap; theta within the distance the certificates allow."""
    assert fast.status == "optimal" and conic.status == "optimal", (fast.status, conic.status)
    assert fast.info["method"] == "active_set"
    scale = max(1.0, abs(conic.upper_bound))
    tol = 1e-8 * scale
    assert fast.lower_bound <= conic.upper_bound + 1e-12 * scale
    # the conic route's L for a piecewise-linear loss is the fixed-weight solver's optimal value, not a
    # rigorous bound: on these instances it lies above the active-set route's U (an exact objective
    # value, so above the optimum) by up to 1.9e-10 relative
    assert conic.lower_bound <= fast.upper_bound + 1e-9 * scale
    assert abs(fast.upper_bound - conic.upper_bound) <= max(tol, conic.upper_bound - conic.lower_bound + 1e-12)
    assert fast.upper_bound - fast.lower_bound <= 1e-9 * scale
    assert prob.objective(fast.theta) == pytest.approx(fast.upper_bound, rel=1e-12, abs=1e-14)
    if prob.weight_set.in_simplex:
        # Phi is l2-strongly convex: ||theta - theta*||^2 <= 2 (Phi(theta) - p*) / l2, and p* >= the
        # active-set route's rigorous L
        radius = (np.sqrt(2 * max(fast.upper_bound - fast.lower_bound, 0) / l2)
                  + np.sqrt(2 * max(conic.upper_bound - fast.lower_bound, 0) / l2))
        assert np.linalg.norm(fast.theta - conic.theta) <= radius + 1e-12


CASES = [(kind, loss, seed) for kind in ("plain", "ties", "scaled", "one", "tiny")
         for seed, loss in enumerate([dm.losses.Hinge(), dm.losses.Pinball(0.3), dm.losses.EpsilonInsensitive(0.2),
                                      dm.losses.EpsilonInsensitive(0.0)])]


@pytest.mark.parametrize("path", ["direct", "smoothed"])
@pytest.mark.parametrize("kind,loss,seed", CASES, ids=[f"{k}-{l.name}-{s}" for k, l, s in CASES])
def test_agrees_with_the_conic_route(kind, loss, seed, path, monkeypatch):
    """``direct``: these small instances take every row as a kink row; ``smoothed``: a kink budget of
    10 rows forces the smoothing stage and the active-set rounds."""
    if path == "smoothed":
        monkeypatch.setattr(active_set, "_band_target", lambda P, n, N: 10)
    fed = _federation(kind, loss, seed)
    l2 = [1e-3, 1e-1][seed % 2]
    sets = _weight_sets(fed.n_clients)
    names = list(sets) if kind == "plain" else ["cvar", "chi2"]
    for name in (names if path == "direct" else names[:1]):
        prob = dm.FederatedDRO(fed, loss, sets[name], l2=l2)
        fast = prob.solve()                                  # auto takes the active-set route
        conic = dm.FederatedDRO(fed, loss, sets[name], l2=l2).solve(method="conic")
        _agree(prob, fast, conic, l2)


@pytest.mark.filterwarnings("ignore:alpha_i < p_i")
@pytest.mark.parametrize("kind", ["plain", "ties", "tiny"])
def test_fafl_agrees_with_the_conic_route(kind):
    loss = dm.losses.Hinge()
    fed = _federation(kind, loss, seed=11)
    prob = dm.FairnessAwareFL(fed, loss, alpha=0.7, l2=1e-2, alpha_below_p="clip")
    fast = prob.solve(method="active_set")
    conic = dm.FairnessAwareFL(fed, loss, alpha=0.7, l2=1e-2, alpha_below_p="clip").solve(method="conic")
    _agree(prob, fast, conic, 1e-2)
    assert prob.joint_objective(fast.theta, fast.duals["eta"]) == pytest.approx(fast.value, rel=1e-9)


@pytest.mark.parametrize("loss", [dm.losses.Hinge(), dm.losses.Pinball(0.3), dm.losses.EpsilonInsensitive(0.1)],
                         ids=repr)
def test_a_start_far_from_the_solution_is_repaired_by_the_rounds(loss, monkeypatch):
    """No smoothing: every row fixed on its piece at theta = 0, no kink rows. The rounds must move the
    rows whose piece changes into the kink set until the reduced problem is exact."""
    monkeypatch.setattr(active_set, "_band_target", lambda P, n, N: 0)
    monkeypatch.setattr(active_set, "_smoothed_minimizer",
                        lambda problem, pieces, table, request: (np.zeros(problem.dim), {"band": 0.0}))
    fed = _federation("plain", loss, seed=5)
    prob = dm.FederatedDRO(fed, loss, dm.sets.CVaR(fed.n_clients, 0.5), l2=1e-2)
    fast = prob.solve(method="active_set")
    history = fast.info["history"]
    assert history[0]["kink_rows"] == 0 and history[0]["violated"] > 0
    assert history[-1]["violated"] == 0 and len(history) >= 2
    conic = dm.FederatedDRO(fed, loss, dm.sets.CVaR(fed.n_clients, 0.5), l2=1e-2).solve(method="conic")
    _agree(prob, fast, conic, 1e-2)


@pytest.mark.parametrize("loss", [dm.losses.Hinge(), dm.losses.Pinball(0.3), dm.losses.EpsilonInsensitive(0.1)],
                         ids=repr)
def test_the_smoothing_stage_locates_the_kinks(loss, monkeypatch):
    """Small instances skip the smoothing (every row is a kink row); with a kink budget of 10 rows it
    runs: the Moreau-smoothed problems for decreasing mu, then the reduced problem."""
    monkeypatch.setattr(active_set, "_band_target", lambda P, n, N: 10)
    fed = _federation("plain", loss, seed=6)
    prob = dm.FederatedDRO(fed, loss, dm.sets.ChiSquare(fed.n_clients, 0.5), l2=1e-2)
    fast = prob.solve(method="active_set")
    mus = [h["mu"] for h in fast.info["smoothing"]["history"]]
    assert len(mus) >= 1 and all(b < a for a, b in zip(mus, mus[1:]))
    assert fast.info["history"][0]["kink_rows"] < fed.sizes.sum()
    conic = dm.FederatedDRO(fed, loss, dm.sets.ChiSquare(fed.n_clients, 0.5), l2=1e-2).solve(method="conic")
    _agree(prob, fast, conic, 1e-2)


def test_defaults_on_a_larger_instance():
    """12,000 rows: the smoothing (with its 5% subsample start from 100k rows, not here) and one or two
    rounds; certified and equal to the conic value."""
    fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=3000, seed=9)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(4, 0.5), l2=1e-2)
    fast = prob.solve()
    assert "history" in fast.info["smoothing"] and fast.info["history"][0]["kink_rows"] < 12_000 / 4
    conic = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(4, 0.5), l2=1e-2).solve(method="conic")
    _agree(prob, fast, conic, 1e-2)


def test_certificate_is_numpy_and_names_itself():
    fed = _federation("plain", dm.losses.Hinge(), seed=2)
    sol = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(fed.n_clients, 0.5), l2=1e-2).solve()
    assert sol.info["lower_bound_kind"] == "numpy piecewise Lagrangian bound"
    assert sol.info["fixed_weight_solver"] == "numpy-dual"
    assert sol.info["bound_allowance"] > 0
    assert sol.to_dict()["status"] == "optimal"


def test_refused_where_it_cannot_apply_and_auto_takes_the_conic_route():
    clf = dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=20, seed=1, add_intercept=True)
    no_ridge = dm.FederatedDRO(clf, dm.losses.Hinge(), dm.sets.CVaR(3, 0.5), l2=0.0)
    with pytest.raises(InvalidParameterError, match="every coordinate penalized"):
        no_ridge.solve(method="active_set")
    assert no_ridge.solve().info["method"] == "conic"
    free_intercept = dm.FederatedDRO(clf, dm.losses.Hinge(), dm.sets.CVaR(3, 0.5), l2=0.1, penalize_intercept=False)
    with pytest.raises(InvalidParameterError, match="every coordinate penalized"):
        free_intercept.solve(method="active_set")
    assert free_intercept.solve().info["method"] == "conic"
    smooth = dm.FederatedDRO(clf, dm.losses.Logistic(), dm.sets.CVaR(3, 0.5), l2=0.1)
    with pytest.raises(InvalidParameterError, match="not piecewise linear"):
        smooth.solve(method="active_set")
    remote = dm.FederatedDRO(clf, dm.losses.Hinge(), dm.sets.CVaR(3, 0.5), l2=0.1)
    remote.objectives.holds_rows = False                     # as a federated server's objectives
    with pytest.raises(InvalidParameterError, match="rows are remote"):
        remote.solve(method="active_set")
    huber = dm.FederatedDRO(dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=1),
                            dm.losses.Huber(0.5), dm.sets.CVaR(3, 0.5), l2=0.1)
    with pytest.raises(InvalidParameterError, match="not piecewise linear"):
        huber.solve(method="active_set")


def test_options_are_validated():
    prob = dm.FederatedDRO(_federation("plain", dm.losses.Hinge(), 0), dm.losses.Hinge(), dm.sets.CVaR(4, 0.5),
                           l2=0.1)
    with pytest.raises(InvalidParameterError, match="max_rounds"):
        prob.solve(method="active_set", max_rounds=0)
    with pytest.raises(InvalidParameterError, match="tol"):
        prob.solve(method="active_set", tol=-1.0)
    with pytest.raises(InvalidParameterError, match="unknown option"):
        prob.solve(method="active_set", steps=3)


def test_a_kink_set_over_its_cap_fails_honestly():
    fed = _federation("plain", dm.losses.Hinge(), 4)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(4, 0.5), l2=0.1)
    forced = prob.solve(method="active_set", max_kink_rows=1)
    assert forced.status == "failed" and "max_kink_rows" in forced.info["attempts"][0]["history"][0]["error"]


def test_auto_falls_back_to_the_conic_route_when_the_reduced_problem_fails(monkeypatch):
    def fail(self):
        raise ArithmeticError("reduced problem: numerical error (simulated)")

    monkeypatch.setattr(active_set.ReducedProblem, "solve", fail)
    fed = _federation("plain", dm.losses.Hinge(), 4)
    sol = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(4, 0.5), l2=0.1).solve()
    assert sol.info["method"] == "conic" and sol.status == "optimal"
    assert sol.info["route_attempts"] == [{"method": "active_set", "status": "failed", "relative_gap": np.inf}]


def test_a_sweep_reuses_the_set_parameters():
    """The weight step and the reduced problem read the set's DPP parameters: each point of an alpha
    sweep equals a fresh conic solve at that alpha."""
    fed = dm.datasets.synthetic_classification(n_clients=6, dim=4, samples=400, seed=2)
    prob = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(6, 0.5), l2=1e-2)
    for alpha, sol in zip([0.3, 0.8], prob.sweep("alpha", [0.3, 0.8], progress=False)):
        fresh = dm.FederatedDRO(fed, dm.losses.Hinge(), dm.sets.CVaR(6, alpha), l2=1e-2)
        _agree(fresh, sol, fresh.solve(method="conic"), 1e-2)
