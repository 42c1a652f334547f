"""dm.from_sklearn: the objective FedAvg-style training of a scikit-learn model minimizes, and the map
between its [coef_, intercept_] and theta. Independent references: scikit-learn's own solver at
tight tolerance (one client: its optimum is the certified optimum) and the clients' objectives
written by hand from scikit-learn's documented formulas."""

import numpy as np
import pytest

import drflmodel as dm

sklearn = pytest.importorskip("sklearn")
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.linear_model import (Lasso, LinearRegression, LogisticRegression, Ridge,  # noqa: E402
                                  SGDClassifier)
from sklearn.svm import LinearSVC  # noqa: E402


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X, y, np.random.default_rng(0).integers(0, 3, len(y))


def _one_client(est, X, y):
    """The certified optimum of from_sklearn's problem with one client vs scikit-learn's own fit."""
    prob, pmap = dm.from_sklearn(est, X, y, clients=np.zeros(len(y)))
    sol = prob.solve(method="sqp" if np.isfinite(prob.loss.smoothness) else "auto")
    fitted = est.fit(X, y)
    arrays = [fitted.coef_, fitted.intercept_] if est.get_params().get("fit_intercept", True) else [fitted.coef_]
    value = prob.objective(pmap.to_theta(arrays))
    return sol, value


@pytest.mark.parametrize("case", ["multinomial", "binary", "binary C=inf", "ridge", "ols", "svc hinge"])
def test_one_client_scikit_learns_optimum_is_the_certified_optimum(iris, case):
    X, y, _ = iris
    noisy = (X[:, 0] + 0.3 * np.random.default_rng(1).normal(size=len(y)) > 5.8).astype(int)  # not separable
    est, yy, XX, rtol = {
        "multinomial": (LogisticRegression(C=0.5, tol=1e-12, solver="newton-cholesky"), y, X, 1e-9),
        "binary": (LogisticRegression(C=0.5, tol=1e-12, solver="newton-cholesky"), (y == 2).astype(int), X, 1e-9),
        "binary C=inf": (LogisticRegression(C=np.inf, tol=1e-12, max_iter=100_000), noisy, X[:, :2], 1e-7),
        "ridge": (Ridge(alpha=2.0), X[:, 0], X[:, 1:], 1e-10),
        "ols": (LinearRegression(), X[:, 0], X[:, 1:], 1e-12),
        # liblinear's dual coordinate descent visits the rows in a random order: with some orders it
        # stops at max_iter 1e-4 short of the optimum (ConvergenceWarning); the seed fixes one that converges
        "svc hinge": (LinearSVC(loss="hinge", C=0.3, tol=1e-12, max_iter=1_000_000, random_state=0),
                      (y == 1).astype(int), X, 1e-5),
    }[case]
    sol, value = _one_client(est, XX, yy)
    assert sol.status == "optimal"
    assert sol.lower_bound <= value * (1 + 1e-12)                     # scikit-learn cannot beat L
    assert abs(value - sol.value) <= rtol * abs(sol.value), (value, sol.value)


def test_many_clients_objective_is_the_weighted_average_of_their_own(iris):
    """sum_i (N_i/N) [objective of client i's own scikit-learn fit] / (C N_i), written by hand from
    scikit-learn's documented objectives: LogisticRegression C sum loss + ||w||^2/2, Ridge
    ||y - Xw - b||^2 + alpha ||w||^2, SGDClassifier mean loss + alpha ||w||^2/2."""
    X, y, site = iris
    rng = np.random.default_rng(3)
    sizes = np.bincount(site)
    N, J = len(y), 3

    def softmax_loss(W, b, Xi, yi):
        S = Xi @ W.T + b
        return np.sum(np.log(np.exp(S).sum(1)) - S[np.arange(len(yi)), yi])

    C = 0.7
    prob, pmap = dm.from_sklearn(LogisticRegression(C=C), X, y, clients=site)
    W, b = rng.normal(size=(3, 4)), rng.normal(size=3)
    own = [C * softmax_loss(W, b, X[site == i], y[site == i]) + 0.5 * np.sum(W * W) for i in range(J)]
    hand = sum(sizes[i] / N * own[i] / (C * sizes[i]) for i in range(J))
    assert np.isclose(prob.objective(pmap.to_theta([W, b])), hand, rtol=1e-12)
    assert np.isclose(prob.l2, J / (C * N))

    alpha = 0.4
    prob, pmap = dm.from_sklearn(Ridge(alpha=alpha), X[:, 1:], X[:, 0], clients=site)
    w, b0 = rng.normal(size=3), 0.3
    own = [np.sum((X[site == i, 0] - X[site == i, 1:] @ w - b0) ** 2) + alpha * w @ w for i in range(J)]
    hand = sum(sizes[i] / N * own[i] / sizes[i] for i in range(J))
    assert np.isclose(prob.objective(pmap.to_theta([w, np.array(b0)])), hand, rtol=1e-12)

    yb = (y == 1).astype(int)
    for loss, phi in (("log_loss", lambda z: np.log1p(np.exp(-z))), ("hinge", lambda z: np.maximum(0, 1 - z))):
        prob, pmap = dm.from_sklearn(SGDClassifier(loss=loss, alpha=alpha), X, yb, clients=site)
        w, b0 = rng.normal(size=4), -0.2
        margins = (2 * yb - 1) * (X @ w + b0)
        own = [np.mean(phi(margins[site == i])) + alpha / 2 * w @ w for i in range(J)]
        hand = sum(sizes[i] / N * own[i] for i in range(J))
        assert np.isclose(prob.objective(pmap.to_theta([w[None], np.array([b0])])), hand, rtol=1e-12), loss


def test_parameter_map_round_trip_and_exact_shapes(iris):
    X, y, site = iris
    prob, pmap = dm.from_sklearn(LogisticRegression(), X, y, clients=site)
    assert pmap.shapes == [(3, 4), (3,)] and prob.dim == 15
    theta = prob.identifiable(np.random.default_rng(0).normal(size=15))
    coef, intercept = pmap.to_arrays(theta)
    assert coef.shape == (3, 4) and intercept.shape == (3,)
    np.testing.assert_allclose(pmap.to_theta([coef, intercept]), theta, atol=1e-14)
    # class k's block is [intercept_k, coef_k] (the intercept column 0 of drflmodel's layout)
    np.testing.assert_allclose(theta.reshape(3, 5)[:, 0], intercept, atol=1e-14)
    for bad, what in (([coef.T, intercept], "coef_ has shape (4, 3)"), ([coef], "expected 2"),
                      ([coef.ravel(), intercept], "coef_ has shape (12,)"),
                      ([coef, intercept[:2]], "intercept_ has shape (2,)")):
        with pytest.raises(dm.InvalidDataError, match=what.replace("(", r"\(").replace(")", r"\)")):
            pmap.to_theta(bad)
    _, reg = dm.from_sklearn(Ridge(), X[:, 1:], X[:, 0], clients=site)
    assert reg.shapes == [(3,), ()]
    assert reg.to_theta([np.ones(3), np.array([2.0])])[0] == 2.0        # intercept first in theta


@pytest.mark.parametrize("est, match", [
    (Lasso(), "does not know sklearn.linear_model._coordinate_descent.Lasso"),
    (LogisticRegression(l1_ratio=1.0, solver="saga"), "l1_ratio=1.0"),
    (LogisticRegression(class_weight="balanced"), "class_weight='balanced'"),
    (SGDClassifier(loss="modified_huber"), "loss='modified_huber'"),
    (SGDClassifier(penalty="l1"), "penalty='l1'"),
    (LinearSVC(), "squared hinge"),
    (LinearSVC(loss="hinge", intercept_scaling=10), "intercept_scaling=10"),
    (Ridge(positive=True), "positive=True"),
])
def test_unknown_estimators_and_unmappable_options_are_refused_by_name(iris, est, match):
    X, y, site = iris
    yy = (y == 1).astype(int) if not isinstance(est, (Ridge, Lasso)) else X[:, 0]
    with pytest.raises(dm.InvalidParameterError, match=match):
        dm.from_sklearn(est, X, yy, clients=site)


def test_one_vs_rest_multiclass_fits_are_refused(iris):
    X, y, site = iris
    for est in (SGDClassifier(loss="log_loss"), LinearSVC(loss="hinge"), LogisticRegression(solver="liblinear")):
        with pytest.raises(dm.InvalidParameterError, match="one-vs-rest"):
            dm.from_sklearn(est, X, y, clients=site)
    with pytest.raises(dm.InvalidParameterError, match="aggregation must be 'fedavg'"):
        dm.from_sklearn(LogisticRegression(), X, y, clients=site, aggregation="fedprox")
    with pytest.raises(dm.InvalidParameterError, match="needs clients="):
        dm.from_sklearn(LogisticRegression(), X, y)


def test_sklearn_site_maps_labels_like_from_sklearn(iris):
    from drflmodel._from_sklearn import sklearn_site

    X, y, site = iris
    est = LogisticRegression()
    prob, _ = dm.from_sklearn(est, X, y, clients=site)
    rows = site == 1
    s = sklearn_site(est, X[rows], y[rows], classes=[0, 1, 2])
    theta = np.random.default_rng(0).normal(size=prob.dim)
    h = s.answer("values", {"theta": theta})["value"][0]
    assert np.isclose(h + prob.objectives.penalty(theta), prob.client_losses(theta)[1], rtol=1e-13)
    with pytest.raises(dm.InvalidDataError, match=r"labels \[7\] are not among classes"):
        sklearn_site(est, X[:3], np.array([0, 1, 7]), classes=[0, 1, 2])
    with pytest.raises(dm.InvalidParameterError, match="needs classes="):
        sklearn_site(LogisticRegression(), X[:3], y[:3])


def test_to_theta_reads_a_fitted_estimator_and_names_what_it_takes(iris):
    X, y, site = iris
    prob, pmap = dm.from_sklearn(LogisticRegression(), X, y, clients=site)
    fitted = LogisticRegression(max_iter=500).fit(X, y)
    np.testing.assert_array_equal(pmap.to_theta(fitted), pmap.to_theta([fitted.coef_, fitted.intercept_]))
    with pytest.raises(dm.InvalidDataError, match=r"not fitted.*\[coef_, intercept_\]"):
        pmap.to_theta(LogisticRegression())
    with pytest.raises(dm.InvalidDataError, match=r"\[coef_, intercept_\]"):
        pmap.to_theta(fitted.coef_)
