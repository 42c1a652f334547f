"""The KL penalty (``dm.sets.KLPenalty(n, tau)``, name ``"kl_penalty"``) solved exactly: every route
that takes it -- auto, conic, sqp, hessian_free, block_newton, and the federated solve over a
LocalChannel -- certifies ``optimal``, the routes' upper bounds lie within their gaps of each other,
and of an independent reference: the tilted objective of T. Li, A. Beirami, M. Sanjabi and V. Smith,
"Tilted Empirical Risk Minimization" (ICLR 2021), eq. (2),

    min_theta  tau log((1/n) sum_i exp(g_i(theta)/tau)) + (l2/2)|theta|^2,

with g_i the client's mean loss written here in numpy (not drflmodel's losses) and minimized by
scipy's L-BFGS-B. Small tau approaches AFL (the largest loss, within tau log n); large tau
approaches the uniform mean (within range^2 / (8 tau), Hoeffding's lemma)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, federated_solve

N_CLIENTS = 4
L2 = 0.02
ROUTES = ("auto", "conic", "sqp", "hessian_free", "block_newton", "federated")


def _problem(K, W_of_n, seed=0):
    fed = dm.datasets.gaussian_mixture(160, 4, K, n_clients=N_CLIENTS, alpha=1.0, min_size=5, seed=seed)
    loss = dm.losses.Multinomial() if K > 2 else dm.losses.Logistic()
    return fed, dm.FederatedDRO(fed, loss, W_of_n(N_CLIENTS), l2=L2)


def _client_losses(fed, K):
    """g_i(W) (the clients' mean losses, no ridge) and their gradients, in numpy: logistic with
    labels +-1 on the score x.w, softmax cross-entropy with class indices on the scores x.W."""
    data = [(np.asarray(c.X, float), np.asarray(c.y)) for c in fed.clients]
    d = data[0][0].shape[1]
    k = 1 if K == 2 else K

    def losses(w):
        W = w.reshape(d, k)
        vals, grads = [], []
        for X, y in data:
            S = X @ W
            if K == 2:
                z = y * S[:, 0]
                vals.append(np.mean(np.logaddexp(0.0, -z)))
                grads.append((X.T @ (-y * np.exp(-np.logaddexp(0.0, z))) / len(y))[:, None])
            else:
                lse = logsumexp(S, axis=1)
                idx = y.astype(int)
                vals.append(np.mean(lse - S[np.arange(len(y)), idx]))
                P = np.exp(S - lse[:, None])
                P[np.arange(len(y)), idx] -= 1.0
                grads.append(X.T @ P / len(y))
        return np.array(vals), np.array([g.ravel() for g in grads])

    return losses, d * k


def _tilted_reference(fed, K, tau, point=False):
    """min over theta of the tilted objective by L-BFGS-B at tight tolerance: ``(value, slack)``,
    the objective at its last point and ``|gradient|^2 / (2 l2)``, so that the optimum lies in
    ``[value - slack, value]`` (the objective is l2-strongly convex) up to the round-off of the
    float evaluation (1.6e-15 at K = 2, tau = 10: :func:`_exact_tilted_optimum`). ``point=True``
    also returns the last point."""
    losses, dim = _client_losses(fed, K)

    def fun(w):
        g, G = losses(w)
        t = g / tau
        weights = np.exp(t - logsumexp(t))
        return tau * (logsumexp(t) - math.log(len(g))) + 0.5 * L2 * w @ w, weights @ G + L2 * w

    res = minimize(fun, np.zeros(dim), jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "maxcor": 30, "ftol": 1e-16, "gtol": 1e-11})
    slack = float(res.jac @ res.jac) / (2.0 * L2)
    assert slack <= 1e-12, res                         # near the minimizer of a strongly convex function
    return (float(res.fun), slack, res.x) if point else (float(res.fun), slack)


def _exact_tilted_optimum(fed, K, tau, digits=50):
    """The tilted optimum in decimal arithmetic (``digits`` significant digits): ``(low, high)``
    Decimals with the optimum in ``[low, high]``. Newton's method from the L-BFGS-B point with
    every objective and gradient evaluated in decimal (exp / ln of the decimal module; the data
    and the start are floats, hence exact) and a float finite-difference Hessian, which only slows
    the convergence to linear at rate ~1e-8; the interval is ``[F - |grad F|^2 / (2 l2), F]`` at
    the last point, both ends evaluated in decimal (width below 1e-40, asserted)."""
    from decimal import Decimal, localcontext

    losses, dim = _client_losses(fed, K)
    w0 = _tilted_reference(fed, K, tau, point=True)[2]
    k = 1 if K == 2 else K
    with localcontext() as ctx:
        ctx.prec = digits
        one, l2, t = Decimal(1), Decimal(L2), Decimal(tau)
        data = [([[Decimal(float(v)) for v in row] for row in np.asarray(c.X, float)],
                 [Decimal(float(v)) if K == 2 else int(v) for v in np.asarray(c.y)]) for c in fed.clients]

        def objective(w):                           # (F, grad F) in decimal; theta as in _client_losses
            vals, grads = [], []
            for X, y in data:
                total, G = Decimal(0), [Decimal(0)] * dim
                for x, label in zip(X, y):
                    S = [sum(x[a] * w[a * k + c] for a in range(len(x))) for c in range(k)]
                    if K == 2:                      # log(1 + e^{-z}), z = y s; d/ds = -y / (1 + e^z)
                        z = label * S[0]
                        total += (one + (-z).exp()).ln() if z > 0 else -z + (one + z.exp()).ln()
                        P = [-label / (one + z.exp())]
                    else:                           # logsumexp(S) - S_y; d/dS = softmax(S) - e_y
                        top = max(S)
                        lse = top + sum((v - top).exp() for v in S).ln()
                        total += lse - S[label]
                        P = [(v - lse).exp() for v in S]
                        P[label] -= one
                    for a in range(len(x)):
                        for c in range(k):
                            G[a * k + c] += x[a] * P[c]
                vals.append(total / len(y))
                grads.append([v / len(y) for v in G])
            top = max(vals)
            e = [((v - top) / t).exp() for v in vals]
            F = top + t * (sum(e) / len(vals)).ln() + l2 / 2 * sum(v * v for v in w)
            grad = [sum(e[i] * grads[i][j] for i in range(len(vals))) / sum(e) + l2 * w[j] for j in range(dim)]
            return F, grad

        def float_gradient(w):
            g, G = losses(w)
            lam = np.exp(g / tau - logsumexp(g / tau))
            return lam @ G + L2 * w

        H = np.empty((dim, dim))
        for j in range(dim):                        # central differences, h = 1e-5
            e = np.zeros(dim)
            e[j] = 1e-5
            H[:, j] = (float_gradient(w0 + e) - float_gradient(w0 - e)) / 2e-5
        H = 0.5 * (H + H.T)
        w = [Decimal(float(v)) for v in w0]
        for _ in range(5):
            step = np.linalg.solve(H, np.array([float(v) for v in objective(w)[1]]))
            w = [v - Decimal(float(s)) for v, s in zip(w, step)]
        F, grad = objective(w)
        slack = sum(v * v for v in grad) / (2 * l2)
        assert slack < Decimal("1e-40"), slack
        return F - slack, F


def _solve(prob, route):
    if route == "federated":
        return federated_solve(prob, LocalChannel.from_problem(prob))
    return prob.solve(method=route)


@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("tau", [0.01, 1.0, 10.0])
def test_every_route_certifies_the_tilted_optimum(K, tau):
    fed, prob = _problem(K, lambda n: dm.sets.KLPenalty(n, tau))
    reference, slack = _tilted_reference(fed, K, tau)         # the optimum is in [reference - slack, reference]
    sols = {route: _solve(prob, route) for route in ROUTES}
    scale = max(1.0, abs(reference))
    eps = 1e-12 * scale                                        # round-off of the two evaluations
    for route, sol in sols.items():
        gap = max(sol.upper_bound - sol.lower_bound, 0.0)
        assert sol.status == "optimal", (route, sol.status)
        assert gap <= 1e-6 * scale, route
        assert sol.lower_bound <= reference + eps, (route, sol.lower_bound - reference)       # L <= opt
        assert sol.upper_bound >= reference - slack - eps, (route, sol.upper_bound - reference)   # U >= opt
        assert sol.upper_bound - reference <= gap + eps, (route, sol.upper_bound - reference)  # U - opt <= U - L
    assert sols["federated"].info["federated"]["method"] == "block_newton"
    for a in ROUTES:                                   # pairwise: each U within the other's gap
        for b in ROUTES:
            gap = max(sols[b].upper_bound - sols[b].lower_bound, 0.0)
            assert sols[a].upper_bound >= sols[b].lower_bound - 1e-11 * scale, (a, b)
            assert abs(sols[a].upper_bound - sols[b].upper_bound) <= gap + max(
                sols[a].upper_bound - sols[a].lower_bound, 0.0) + 1e-11 * scale, (a, b)


@pytest.mark.parametrize("K", [2, 3])
def test_small_tau_tends_to_the_largest_loss_and_large_tau_to_the_mean(K):
    """tau = 0.001: within tau log n below AFL's optimum (max - tau log n <= tilted <= max
    pointwise); tau = 100: between the uniform mean's optimum and it plus range^2/(8 tau), the range
    of the client losses at the mean's theta (Hoeffding's lemma)."""
    n, small_tau, large_tau = N_CLIENTS, 0.001, 100.0
    _, afl = _problem(K, dm.sets.Simplex)
    _, mean = _problem(K, lambda n: dm.sets.CVaR(n, 1.0))          # lambda_i <= 1/n: the uniform mean
    afl_sol, mean_sol = afl.solve(method="conic"), mean.solve(method="conic")
    small = _problem(K, lambda n: dm.sets.KLPenalty(n, small_tau))[1].solve()
    large = _problem(K, lambda n: dm.sets.KLPenalty(n, large_tau))[1].solve()
    assert small.status == large.status == "optimal"
    below_max = small_tau * math.log(n)
    assert afl_sol.lower_bound - below_max - 1e-9 <= small.upper_bound
    assert small.lower_bound <= afl_sol.upper_bound + 1e-9
    spread = float(np.ptp(mean.objectives.values(np.asarray(mean_sol.theta, float))))   # at the mean's theta
    above_mean = spread ** 2 / (8 * large_tau)
    assert mean_sol.lower_bound - 1e-9 <= large.upper_bound
    assert large.lower_bound <= mean_sol.upper_bound + above_mean + 1e-9
    # the two limits are far apart here, so the windows above are narrow in comparison
    assert afl_sol.lower_bound - mean_sol.upper_bound > 10 * max(below_max, above_mean)


@pytest.mark.parametrize("K, tau", [(2, 10.0), (3, 1.0)])
def test_no_lower_bound_exceeds_the_exact_optimum(K, tau):
    """Every route's certified lower bound lies at or below the tilted optimum computed in 50-digit
    decimal arithmetic, with no tolerance. These instances exposed conic multipliers summing to
    1 + 3e-13, kept as feasible weights: the dual value there exceeded the optimum by
    1.2e-13 (sets.feasible_weights now scales such weights down)."""
    from decimal import Decimal

    fed, prob = _problem(K, lambda n: dm.sets.KLPenalty(n, tau))
    low, high = _exact_tilted_optimum(fed, K, tau)
    reference = _tilted_reference(fed, K, tau)[0]
    assert abs(Decimal(reference) - high) <= Decimal("1e-14")     # the float reference, to its round-off
    for route in ROUTES:
        sol = _solve(prob, route)
        assert sol.status == "optimal", route
        assert Decimal(sol.lower_bound) <= low, (route, float(Decimal(sol.lower_bound) - low))


def test_feasible_weights_of_a_simplex_set_never_sum_above_one():
    lam = np.array([0.25, 0.25, 0.25, 0.25]) * (1.0 + 3e-13)
    for W in (dm.sets.KLPenalty(4, 10.0), dm.sets.Simplex(4), dm.sets.CVaR(4, 0.5)):
        kept, projected = dm.sets.feasible_weights(W, lam)
        assert not projected and math.fsum(kept) <= 1.0 and np.all(kept >= 0), W
        assert np.max(np.abs(kept - 0.25)) <= 4e-13                      # the excess taken off, nothing else
    kept, _ = dm.sets.feasible_weights(dm.sets.Simplex(4), lam * (1.0 - 6e-13))   # below one: completed
    assert sum(map(Fraction, kept)) == 1 and np.max(np.abs(kept - 0.25)) <= 4e-13


def test_psi_is_rounded_up_past_its_exact_value():
    """psi(lambda) >= the exact tau sum lambda_i log(n lambda_i / s) (50-digit decimal) for random
    weights at tau = 100 (the plain float evaluation fell 1.4e-14 below it), and by at most
    tau 1e-14."""
    from decimal import Decimal, localcontext

    rng = np.random.default_rng(0)
    for n, tau in ((4, 100.0), (7, 1.0), (50, 1e4)):
        W = dm.sets.KLPenalty(n, tau)
        for _ in range(50):
            lam = rng.dirichlet(np.full(n, 20.0))
            lam[rng.integers(n)] = 0.0 if n > 4 else lam[0]
            with localcontext() as ctx:
                ctx.prec = 50
                d = [Decimal(float(v)) for v in lam]
                s = sum(d)
                exact = Decimal(tau) * sum(v * (n * v / s).ln() for v in d if v > 0)
            assert Decimal(W.psi(lam)) >= exact, (n, tau)
            assert Decimal(W.psi(lam)) - exact <= Decimal(tau * 1e-14), (n, tau)


def test_psi_off_the_simplex_by_round_off_keeps_the_lower_bound_below_the_value():
    """A certificate's weights sum to 1 - delta; lambda.f - psi(lambda) must not exceed the worst
    case (the plain tau sum lambda log(n lambda) rose by ~tau delta = 7e-12 at tau = 100)."""
    W = dm.sets.KLPenalty(4, 100.0)
    f = np.array([0.46, 0.50, 0.47, 0.48])
    value, lam = W.worst_case(f)
    for delta in (7e-14, -7e-14, 1e-12):
        off = lam * (1.0 - delta)
        assert float(off @ f) - W.psi(off) <= value + 1e-15 + abs(delta) * float(np.max(f)), delta
    exact = 100.0 * math.log1p(float(np.mean(np.expm1(f / 100.0))))       # tau log mean e^{f/tau}, no shift
    assert abs(value - exact) <= 1e-15


# ------------------------------------------------------------------------------ the name "kl_penalty"
def test_the_name_builds_it_from_toml_and_refuses_a_bad_tau(tmp_path):
    from drflmodel._config import ConfigError, build_problem, load_config

    text = ('[data]\nsource = "synthetic_regression"\noptions = { n_clients = 3, dim = 2, samples = 10 }\n'
            '[loss]\nname = "squared"\n[problem]\nfamily = "dro"\noptions = { l2 = 0.1 }\n'
            'weights = { name = "kl_penalty", tau = TAU }\n')
    config = tmp_path / "c.toml"
    config.write_text(text.replace("TAU", "0.5"))
    built = build_problem(load_config(config)).weights
    assert isinstance(built, dm.sets.KLPenalty) and built.params() == {"n": 3, "tau": 0.5}
    for bad in ("0.0", "-1.0", "inf", "nan"):
        config.write_text(text.replace("TAU", bad))
        with pytest.raises((ConfigError, dm.InvalidParameterError), match="tau"):
            build_problem(load_config(config))
    config.write_text(text.replace(", tau = TAU", ""))
    with pytest.raises(ConfigError, match="missing key 'problem.weights.tau'"):
        build_problem(load_config(config))


def test_the_estimators_take_it_with_tau():
    pytest.importorskip("sklearn")
    from drflmodel.sklearn import FederatedDROClassifier

    fed, _ = _problem(2, lambda n: dm.sets.KLPenalty(n, 1.0))
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.KLPenalty(N_CLIENTS, 1.0), l2=L2,
                           penalize_intercept=False)                     # as fit_intercept=True does
    X = np.vstack([c.X[:, 1:] for c in fed.clients])                      # column 0 is the intercept
    y = np.concatenate([c.y for c in fed.clients])
    site = np.concatenate([np.full(len(c.y), i) for i, c in enumerate(fed.clients)])
    est = FederatedDROClassifier(weights="kl_penalty", tau=1.0, l2=L2, gap_tol=1e-9).fit(X, y, clients=site)
    direct = prob.solve(method="sqp")
    assert abs(est.upper_bound_ - direct.upper_bound) <= 1e-8
    with pytest.raises(dm.InvalidParameterError, match="weights='kl_penalty' needs tau"):
        FederatedDROClassifier(weights="kl_penalty").fit(X, y, clients=site)
    with pytest.raises(dm.InvalidParameterError, match=r"tau must lie in \(0"):
        FederatedDROClassifier(weights="kl_penalty", tau=0.0).fit(X, y, clients=site)
    with pytest.raises(dm.InvalidParameterError, match="tau=1.0 has no effect"):
        FederatedDROClassifier(weights="simplex", tau=1.0).fit(X, y, clients=site)
