"""Wasserstein DRFL with the softmax loss and with a free intercept (issue 42, item 7).

Independent routes:

* the inner sup of Proposition 4.2 from the *primal* side: an LP over distributions supported on
  a finite candidate set (moves of every sample along the directions that attain the pairwise
  dual norms, every relabelling) -- a lower bound that tightens to the closed form; and the
  divergence for lambda below the pairwise Lipschitz constant;
* an independent CVXPY model written here from the definitions (every relabelled loss as its own
  log-sum-exp, every class pair's norm in a loop -- not the package's epigraph trick or pair
  matrix) whose optimal value the certified answer must match, on penguins (3 classes) and a
  digits subsample (10 classes);
* K = 2 against the binary logistic problem (the DRFL paper's Corollary B.6 with w = w_1 - w_0);
* the free intercept against a closed form in numpy and an independent CVXPY model with the
  intercept as its own unpenalized, untransported variable.
"""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.special import logsumexp

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.losses import Logistic, Multinomial
from drflmodel.problems.wasserstein import WassersteinDRFL

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NORMS = [1, 2, np.inf]


def rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


def small_multiclass(K=3, d=3, sizes=(6, 7, 8), seed=0):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(K, d))
    clients = []
    for s, n in enumerate(sizes):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, d - 1))])
        y = np.argmax(X @ B.T + 0.7 * rng.normal(size=(n, K)), axis=1)
        y[:K] = np.arange(K)                      # every class on every client
        clients.append(dm.Client(X, y))
    return dm.Federation(clients, task="multiclass", n_classes=K)


def softmax_loss(W, x, k):
    s = W @ x
    return logsumexp(s) - s[k]


def dual_direction(u, norm):
    """A unit vector (in the transport norm) v with u'v = ||u||_*."""
    if norm == 2:
        return u / np.linalg.norm(u)
    if norm == 1:
        v = np.zeros_like(u)
        j = int(np.argmax(np.abs(u)))
        v[j] = np.sign(u[j])
        return v
    return np.sign(u)


# ============================================================== the inner sup from the primal side
@pytest.mark.parametrize("norm,kappa,free", [(1, 0.8, False), (2, 0.8, False), (np.inf, 0.8, False),
                                              (2, np.inf, False), (1, 0.8, True), (np.inf, np.inf, True)],
                         ids=["l1", "l2", "linf", "l2-kinf", "l1-free", "linf-kinf-free"])
def test_primal_lp_over_moves_and_relabellings_tightens_to_the_closed_form(norm, kappa, free):
    """Distributions on a finite candidate set (each sample moved along the pairs' dual directions
    and the axes, to every label it may take) approach the closed form from below. With a free
    intercept the moves keep column 0 (the constant 1) fixed, and the closed form is that of the
    columns 1.. only -- never above the transported intercept's."""
    fed = small_multiclass()
    rho = 0.1
    rng = np.random.default_rng(5)
    prob = WassersteinDRFL(fed, Multinomial(), radius=rho, kappa=kappa, norm=norm, weights=dm.sets.Simplex(3),
                           penalize_intercept=not free)
    K, d = 3, fed.dim
    W = rng.normal(size=(K, d))
    W[:, 0] *= 4.0                                      # a large intercept: moving it would pay
    dual, lam = prob.client_view(0).worst_case(W.ravel())
    X, y = fed.clients[0].X, fed.clients[0].y
    N = len(y)
    cols = np.arange(1, d) if free else np.arange(d)

    def on_cols(v):
        out = np.zeros(d)
        out[cols] = v[cols]
        return out

    dirs = [on_cols(dual_direction(on_cols(W[k] - W[j]), norm)) for j, k in itertools.permutations(range(K), 2)]
    dirs += [np.eye(d)[j] * s for j in cols for s in (1, -1)]
    labels_of = (lambda i: range(K)) if np.isfinite(kappa) else (lambda i: [int(y[i])])

    def lp(Rs):
        vals, costs, rows = [], [], []
        for i in range(N):
            for k in labels_of(i):
                moves = [np.zeros(d)] + [R * v for R in Rs for v in dirs]
                for dx in moves:
                    vals.append(softmax_loss(W, X[i] + dx, k))
                    costs.append(np.linalg.norm(dx, norm) + (kappa if k != y[i] else 0.0))
                    rows.append(i)
        vals, costs, rows = map(np.asarray, (vals, costs, rows))
        A = np.zeros((N, vals.size))
        A[rows, np.arange(vals.size)] = 1.0
        res = linprog(-vals, A_ub=costs[None, :], b_ub=[rho], A_eq=A, b_eq=np.full(N, 1 / N),
                      bounds=(0, None), method="highs")
        assert res.status == 0
        return -res.fun

    lows = [lp(Rs) for Rs in ([0.5], [0.5, 10.0], [0.5, 10.0, 1e3], [0.5, 10.0, 1e3, 1e6])]
    assert all(b >= a - 1e-10 for a, b in zip(lows, lows[1:]))       # tightens with the set
    assert all(v <= dual + 1e-8 for v in lows)                        # lower bounds of the sup
    assert lows[-1] >= dual - 1e-6 * max(1.0, dual)                   # and reaches the closed form
    # the closed form's lambda is at least the pairwise Lipschitz constant, computed here directly
    present = set(np.unique(y).astype(int)) if not np.isfinite(kappa) else set(range(K))
    Lam = max(np.linalg.norm((W[k] - W[j])[cols], prob.model.dual)
              for j, k in itertools.permutations(range(K), 2) if j in present)
    assert lam >= Lam * (1 - 1e-12)
    if free:                  # transporting the intercept raises the Lipschitz constant and never lowers the sup
        moved = WassersteinDRFL(fed, Multinomial(), radius=rho, kappa=kappa, norm=norm, weights=dm.sets.Simplex(3))
        from drflmodel.problems.wasserstein.omega import lambda_min

        assert lambda_min(moved.model, W.ravel(), np.unique(y)) > lambda_min(prob.model, W.ravel(), np.unique(y)) + 1e-3
        assert moved.client_view(0).worst_case(W.ravel())[0] >= dual - 1e-12


def test_below_the_pairwise_lipschitz_constant_the_inner_sup_diverges():
    """For lambda < max ||w_k - w_j||_*, moving a sample along the maximizing direction with the
    pair's first label makes loss - lambda * distance grow without bound (Step 2)."""
    rng = np.random.default_rng(2)
    W = rng.normal(size=(3, 4))
    j, k = max(itertools.combinations(range(3), 2), key=lambda p: np.linalg.norm(W[p[1]] - W[p[0]], 2))
    Lam = np.linalg.norm(W[k] - W[j], 2)
    v = dual_direction(W[k] - W[j], 2)
    x = rng.normal(size=4)
    g = [softmax_loss(W, x + t * v, j) - 0.95 * Lam * t for t in (1e1, 1e2, 1e3)]
    assert g[0] < g[1] < g[2] and g[2] - g[1] > 0.04 * Lam * 900
    h = [softmax_loss(W, x + t * v, j) - 1.0 * Lam * t for t in (1e1, 1e2, 1e3)]
    assert max(h) <= softmax_loss(W, x, j) + 1e-9                    # at lambda = Lam: bounded by L(x)


# ============================================================== the independent CVXPY model
def independent_value(fed, radii, kappa, norm, l2=0.0, free_intercept=False):
    """min_W max_s z_s(W) (+ ridge) written from the definitions: for each sample and each label k,
    alpha_i >= log-sum-exp(W x_i) - (W x_i)_k - kappa lam_s [k != y_i] (only k = y_i when kappa is
    infinite); for each client and each ordered class pair (j, k) with j a label it may hold,
    lam_s >= ||w_k - w_j||_* (over the non-intercept columns when the intercept is free); the
    simplex outer term as an epigraph; the ridge on the penalized coordinates."""
    K, d = fed.n_classes, fed.dim
    W = cp.Variable((K, d))
    gamma = cp.Variable()
    dual = {1: np.inf, 2: 2, np.inf: 1}[norm]
    cols = list(range(1, d)) if free_intercept else list(range(d))
    cons = []
    for c, rho in zip(fed.clients, radii):
        X, y = c.X, c.y.astype(int)
        N = len(y)
        lam = cp.Variable(nonneg=True)
        alpha = cp.Variable(N)
        S = X @ W.T
        lse = cp.log_sum_exp(S, axis=1)
        for k in range(K):
            if np.isfinite(kappa):
                cons.append(lse - S[:, k] - kappa * lam * (y != k).astype(float) <= alpha)
            else:
                rows = np.flatnonzero(y == k)
                if rows.size:
                    cons.append(lse[rows] - S[rows, k] <= alpha[rows])
        present = set(range(K)) if np.isfinite(kappa) else set(np.unique(y).tolist())
        for j, k in itertools.permutations(range(K), 2):
            if j in present:
                cons.append(cp.norm(W[k, cols] - W[j, cols], dual) <= lam)
        cons.append(rho * lam + cp.sum(alpha) / N <= gamma)
    ridge = 0.5 * l2 * cp.sum_squares(W[:, cols] if free_intercept else W) if l2 > 0 else 0
    pr = cp.Problem(cp.Minimize(gamma + ridge), cons)
    pr.solve(solver="CLARABEL")
    assert pr.status == cp.OPTIMAL
    return float(pr.value)


@pytest.fixture(scope="module")
def penguins():
    pytest.importorskip("palmerpenguins")
    return dm.datasets.penguin_species()


@pytest.mark.parametrize("kappa,norm", [(1.0, 1), (0.5, 2), (np.inf, np.inf)], ids=["k1-l1", "k05-l2", "kinf-linf"])
def test_penguins_certified_optimal_against_the_independent_model(penguins, kappa, norm):
    radii = [0.05, 0.1, 0.02]
    prob = WassersteinDRFL(penguins, Multinomial(), radius=radii, kappa=kappa, norm=norm,
                           weights=dm.sets.Simplex(3))
    sol = prob.solve()
    assert sol.status == "optimal", sol.summary()
    assert sol.info["method"] == "conic"
    assert abs(sol.upper_bound - sol.lower_bound) <= 1e-6 * max(1.0, abs(sol.upper_bound))
    ref = independent_value(penguins, radii, kappa, norm)
    assert rel(sol.value, ref) <= 1e-6
    assert rel(sol.lower_bound, ref) <= 1e-6


def digits_subsample(rows_per_client=40, n_clients=3):
    """scikit-learn's digits (10 classes, 65 columns with the intercept) split iid over
    ``n_clients`` clients, the first ``rows_per_client`` rows of each."""
    pytest.importorskip("sklearn")
    fed = dm.datasets.digits(n_clients=n_clients, partition="iid", seed=0)
    clients = [dm.Client(c.X[:rows_per_client], c.y[:rows_per_client]) for c in fed.clients]
    return dm.Federation(clients, task="multiclass", n_classes=10)


@pytest.mark.slow          # about 10 s alone (5 s the package, 5 s the independent model), more under load
@pytest.mark.parametrize("kappa,norm", [(1.0, 2), (np.inf, 1)], ids=["k1-l2", "kinf-l1"])
def test_digits_certified_optimal_against_the_independent_model(kappa, norm):
    fed = digits_subsample()
    radii = [0.05, 0.05, 0.1]
    prob = WassersteinDRFL(fed, Multinomial(), radius=radii, kappa=kappa, norm=norm, weights=dm.sets.Simplex(3),
                           l2=0.01)
    sol = prob.solve()
    assert sol.status == "optimal", sol.summary()
    assert prob.dim == 650
    ref = independent_value(fed, radii, kappa, norm, l2=0.01)
    assert rel(sol.value, ref) <= 1e-6 and rel(sol.lower_bound, ref) <= 1e-6


def test_two_classes_are_the_binary_logistic_problem():
    """K = 2: the softmax loss of (w_0, w_1) is the logistic loss of w = w_1 - w_0 and the pairwise
    constant is ||w_1 - w_0||_*, the DRFL paper's Corollary B.6: the same optimal value (no ridge),
    the binary one certified by the package's rigorous numpy bound."""
    rng = np.random.default_rng(4)
    clients_b, clients_m = [], []
    for n in (12, 15, 9):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, 2))])
        y = np.where(X @ np.array([0.3, 1.0, -1.0]) + 0.8 * rng.normal(size=n) > 0, 1.0, -1.0)
        clients_b.append(dm.Client(X, y))
        clients_m.append(dm.Client(X, (y > 0).astype(int)))
    binary = dm.Federation(clients_b, task="classification")
    multi = dm.Federation(clients_m, task="multiclass", n_classes=2)
    for norm, kappa in ((1, 0.7), (2, np.inf)):
        kw = dict(radius=[0.1, 0.05, 0.2], kappa=kappa, norm=norm, weights=dm.sets.Simplex(3))
        a = WassersteinDRFL(multi, Multinomial(), **kw).solve()
        b = WassersteinDRFL(binary, Logistic(), **kw).solve()
        assert a.status == b.status == "optimal"
        assert rel(a.value, b.value) <= 1e-6
        W = a.theta.reshape(2, -1)
        pb = WassersteinDRFL(binary, Logistic(), **kw)
        assert rel(pb.objective(W[1] - W[0]), a.value) <= 1e-9          # the same function, exactly


# ============================================================== the free intercept
def binary_with_intercept(sizes, d=3, seed=0):
    """Binary classification clients with an intercept column (column 0) and d - 1 features."""
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=d)
    clients = []
    for n in sizes:
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, d - 1))])
        clients.append(dm.Client(X, np.where(X @ beta + 0.8 * rng.normal(size=n) > 0, 1.0, -1.0)))
    return dm.Federation(clients, task="classification")


def free_intercept_closed_form(fed, w, rho, kappa, norm):
    """Binary logistic worst case per client with the intercept (column 0) not moved: lambda over
    [||w[1:]||_*, inf), the flip branch, minimized over a fine grid plus the breakpoints."""
    dual = {1: np.inf, 2: 2, np.inf: 1}[norm]
    lo = np.linalg.norm(w[1:], dual)
    out = []
    for c in fed.clients:
        u = c.X @ w
        L, Lt = np.logaddexp(0, -c.y * u), np.logaddexp(0, c.y * u)
        cands = np.concatenate([[lo], (Lt - L) / kappa])
        cands = cands[cands >= lo]
        out.append(min(rho * lam + np.mean(np.maximum(L, Lt - kappa * lam)) for lam in cands))
    return np.array(out)


def test_free_intercept_objective_matches_the_closed_form_and_ignores_the_intercept():
    fed = binary_with_intercept([10, 12, 14], d=4, seed=2)
    assert fed.intercept_column == 0
    kw = dict(radius=0.1, kappa=1.5, norm=np.inf, weights=dm.sets.Simplex(3))
    free = WassersteinDRFL(fed, Logistic(), penalize_intercept=False, **kw)
    moved = WassersteinDRFL(fed, Logistic(), **kw)
    rng = np.random.default_rng(0)
    for _ in range(5):
        w = rng.normal(size=fed.dim)
        w[0] = 5.0 * rng.normal()                 # a large intercept: the moved model pays for it
        z_free = free.worst_case_losses(w)[0]
        assert np.allclose(z_free, free_intercept_closed_form(fed, w, 0.1, 1.5, np.inf), rtol=1e-12, atol=1e-12)
        assert np.all(moved.worst_case_losses(w)[0] >= z_free - 1e-12)
    # the dual norm is ||w[1:]||_1 (norm inf's dual), whatever the intercept
    w = np.array([100.0, 0.5, -0.25, 0.0])
    assert free.worst_case_losses(w)[1][0] >= 0.75 - 1e-12


@pytest.mark.parametrize("loss,l2", [(Logistic(), 0.05), (Multinomial(), 0.05)], ids=["logistic", "softmax"])
def test_free_intercept_certified_against_the_independent_model(loss, l2):
    """penalize_intercept=False: the intercept is its own variable, outside every dual norm and
    outside the ridge, in an independent CVXPY model; the same optimal value."""
    if loss.task == "multiclass":
        fed = small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=1)
    else:
        fed = binary_with_intercept([15, 18, 20], seed=1)
    radii = [0.1, 0.2, 0.05]
    prob = WassersteinDRFL(fed, loss, radius=radii, kappa=1.0, norm=2, weights=dm.sets.Simplex(3), l2=l2,
                           penalize_intercept=False)
    sol = prob.solve()
    assert sol.status == "optimal", sol.summary()
    assert prob.routes()[0].applies(prob.structure) is not None        # the SQP route says why not
    if loss.task == "multiclass":
        ref = independent_value(fed, radii, 1.0, 2, l2=l2, free_intercept=True)
    else:
        w, b = cp.Variable(fed.dim - 1), cp.Variable()
        gamma, cons = cp.Variable(), []
        for c, rho in zip(fed.clients, radii):
            lam, alpha = cp.Variable(nonneg=True), cp.Variable(c.size)
            m = cp.multiply(c.y, c.X[:, 1:] @ w + b)
            cons += [cp.logistic(-m) <= alpha, cp.logistic(m) - lam <= alpha, cp.norm(w, 2) <= lam,
                     rho * lam + cp.sum(alpha) / c.size <= gamma]
        pr = cp.Problem(cp.Minimize(gamma + 0.5 * l2 * cp.sum_squares(w)), cons)
        pr.solve(solver="CLARABEL")
        ref = pr.value
    assert rel(sol.value, ref) <= 1e-6 and rel(sol.lower_bound, ref) <= 1e-6
    # and it differs from the transported, penalized intercept (the flag changes the problem)
    other = WassersteinDRFL(fed, loss, radius=radii, kappa=1.0, norm=2, weights=dm.sets.Simplex(3), l2=l2).solve()
    assert other.value >= sol.value - 1e-9


def test_bad_inputs_are_refused_by_name():
    fed = small_multiclass()
    with pytest.raises(InvalidParameterError, match="penalize_intercept"):
        WassersteinDRFL(fed, Multinomial(), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(3),
                        penalize_intercept="no")
    with pytest.raises(InvalidParameterError, match="unbounded support only"):
        WassersteinDRFL(binary_with_intercept([10, 10, 10]), dm.losses.Hinge(), radius=0.1, kappa=1.0, norm=1,
                        weights=dm.sets.Simplex(3), support="box", penalize_intercept=False)
    no_intercept = dm.Federation([dm.Client(c.X[:, 1:], c.y) for c in fed.clients], task="multiclass", n_classes=3)
    with pytest.raises(InvalidParameterError, match="intercept"):
        WassersteinDRFL(no_intercept, Multinomial(), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(3),
                        penalize_intercept=False)
    prob = WassersteinDRFL(fed, Multinomial(), radius=0.1, kappa=1.0, norm=1, weights=dm.sets.Simplex(3))
    with pytest.raises(InvalidParameterError, match="softmax"):
        prob.solve(method="newton")


def test_radius_zero_is_federated_dro_with_the_softmax_loss():
    """rho = 0 with the simplex is DRFA: FederatedDRO's own model of the softmax loss (an
    independent family and route) gives the same optimum."""
    fed = small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=2)
    a = WassersteinDRFL.drfa(fed, Multinomial(), l2=0.1).solve()
    b = dm.FederatedDRO(fed, Multinomial(), weights=dm.sets.Simplex(3), l2=0.1).solve()
    assert a.status == b.status == "optimal"
    assert rel(a.value, b.value) <= 1e-6


def test_wafl_and_the_client_operator_with_the_softmax_loss():
    """One shared ball (WAFL) is at least DRFL with the same fixed weights (one multiplier for all
    clients is a restriction); the ADMM client operator of Algorithm 1 answers in P = K d."""
    fed = small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=3)
    q = fed.proportions
    drfl = WassersteinDRFL(fed, Multinomial(), radius=0.1, kappa=1.0, norm=2, weights=q).solve()
    wafl = dm.problems.wasserstein.wafl(fed, Multinomial(), 0.1, 1.0, 2).solve()
    assert drfl.status == wafl.status == "optimal"
    assert wafl.value >= drfl.value - 1e-7
    view = WassersteinDRFL(fed, Multinomial(), radius=0.1, kappa=1.0, norm=2, weights=q).client_view(0)
    out = view.admm_step(np.zeros(9), 0.5, np.zeros(9), 0.3, c=1.0)
    assert out["status"] == "optimal" and out["w_hat"].shape == (9,)


# ============================================================== the rigorous numpy bound (softmax)
@pytest.mark.parametrize("kappa,norm,l2", [(0.8, 1, 0.0), (0.8, 2, 0.1), (0.8, np.inf, 0.0), (np.inf, 1, 0.0),
                                           (np.inf, 2, 0.1)],
                         ids=["k08-l1", "k08-l2-ridge", "k08-linf", "kinf-l1", "kinf-l2-ridge"])
def test_softmax_bound_is_below_the_optimum_everywhere_and_tight_at_the_solution(kappa, norm, l2):
    """L(W, q) <= p* at random points and random weights of Q (p* from the independent CVXPY
    model), and at the certified solution it closes the gap (the answer says it used it)."""
    from drflmodel.problems.wasserstein.multiclass_bound import softmax_lagrangian_bound

    fed = small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=4)
    radii = [0.1, 0.2, 0.05]
    prob = WassersteinDRFL(fed, Multinomial(), radius=radii, kappa=kappa, norm=norm, weights=dm.sets.Simplex(3),
                           l2=l2)
    opt = independent_value(fed, radii, kappa, norm, l2=l2)
    sol = prob.solve()
    assert sol.status == "optimal" and sol.info["lower_bound_method"].startswith("numpy Lagrangian bound")
    assert sol.lower_bound <= opt + 1e-9 * max(1.0, opt) and rel(sol.lower_bound, opt) <= 1e-6
    rng = np.random.default_rng(1)
    for scale in (0.0, 0.01, 0.3, 3.0):
        for _ in range(3):
            W = sol.theta + scale * rng.normal(size=prob.dim)
            q = rng.dirichlet(np.ones(3))
            L, info = softmax_lagrangian_bound(prob, W, q)
            assert L <= opt + 1e-9 * max(1.0, opt), (scale, L, opt, info)
