"""drflmodel.sklearn with more than two classes and scikit-learn's conventions: the objective of
``LogisticRegression`` (binary and multinomial) reached to 1e-8 with one client, the fitted
attributes in scikit-learn's shapes, the multi-class federated fit checked against the core oracle
and a numpy computation, and the refusals (one-line errors naming the argument)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy.special import log_softmax, logsumexp  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_iris, load_wine  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import drflmodel as dm  # noqa: E402
from drflmodel.errors import InvalidDataError, InvalidParameterError  # noqa: E402
from drflmodel.layout import ParameterLayout  # noqa: E402
from drflmodel.sklearn import (DEOClassifier, FairnessAwareClassifier, FederatedDROClassifier,  # noqa: E402
                               FederatedDRORegressor, SingleClientWarning, WassersteinDRClassifier)


# ------------------------------------------------------------------------------ data
def _dataset(name):
    if name == "iris-binary":             # versicolor vs virginica: overlapping, a finite optimum
        X, y = load_iris(return_X_y=True)
        return X[y > 0], y[y > 0]
    if name == "breast-cancer":
        X, y = load_breast_cancer(return_X_y=True)
        return StandardScaler().fit_transform(X), y
    if name == "iris":
        return load_iris(return_X_y=True)
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _sklearn_objective(coef, intercept, X, y, C):
    """scikit-learn's LogisticRegression objective, written here from its documentation:
    1/2 ||coef||_F^2 + C * sum_j loss_j, with the binary logistic loss of the one score for two
    classes and the softmax cross-entropy for more (the intercepts are not penalized)."""
    S = X @ np.asarray(coef).T + intercept
    classes = np.unique(y)
    idx = np.searchsorted(classes, y)
    if S.shape[1] == 1:
        losses = np.logaddexp(0.0, -np.where(idx == 1, 1.0, -1.0) * S[:, 0])
    else:
        losses = logsumexp(S, axis=1) - S[np.arange(len(y)), idx]
    return 0.5 * np.sum(np.square(coef)) + C * losses.sum()


def _mc_data(n=150, d=3, K=4, seed=0):
    """Four classes with string labels, three clients with shifted features (label skew too)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    site = rng.choice(["site-b", "site-a", "site-c"], size=n)
    X[site == "site-c"] += 0.8
    W = rng.normal(size=(d, K)) * 1.5
    scores = X @ W + rng.gumbel(size=(n, K))
    labels = np.array(["delta", "alpha", "charlie", "bravo"])
    return X, labels[scores.argmax(axis=1)], site


# ------------------------------------------------------------------------------ scikit-learn's objective
@pytest.mark.parametrize("estimator", [FederatedDROClassifier, FairnessAwareClassifier])
@pytest.mark.parametrize("dataset", ["iris-binary", "breast-cancer", "iris", "wine"])
def test_one_client_reaches_logistic_regressions_objective(estimator, dataset):
    """One client, l2 = 1/(C N), fit_intercept=True: the certified model has scikit-learn's own
    objective (computed here in numpy) equal to that of LogisticRegression(C) solved at tol 1e-12,
    to 1e-8 relative; the certificate's lower bound lies below scikit-learn's value; coef_ and
    intercept_ have scikit-learn's shapes; and the two models predict alike."""
    X, y = _dataset(dataset)
    C, N = 0.5, len(y)
    ref = LogisticRegression(C=C, tol=1e-12, max_iter=100_000).fit(X, y)
    with pytest.warns(SingleClientWarning):
        est = estimator(l2=1.0 / (C * N), gap_tol=1e-10).fit(X, y)      # compared at 1e-8 relative
    assert est.status_ == "optimal"
    assert est.coef_.shape == ref.coef_.shape and est.intercept_.shape == ref.intercept_.shape
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    ours = _sklearn_objective(est.coef_, est.intercept_, X, y, C)
    theirs = _sklearn_objective(ref.coef_, ref.intercept_, X, y, C)
    assert abs(ours - theirs) <= 1e-8 * theirs
    assert C * N * est.upper_bound_ == pytest.approx(ours, rel=1e-10)     # the certified value is this objective
    assert C * N * est.lower_bound_ <= theirs * (1 + 1e-10)               # and its bound holds at scikit-learn's point
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-4)
    assert np.mean(est.predict(X) == ref.predict(X)) >= 0.99


# ------------------------------------------------------------------------------ multi-class wiring
def test_multiclass_federated_fit_matches_the_core_oracle_and_a_numpy_cvar():
    X, y, site = _mc_data()
    clf = FederatedDROClassifier(weights="cvar", cvar_level=0.5, l2=0.05).fit(X, y, clients=site)
    assert clf.status_ == "optimal"
    assert list(clf.classes_) == ["alpha", "bravo", "charlie", "delta"]
    assert clf.coef_.shape == (4, 3) and clf.intercept_.shape == (4,)
    assert clf.client_names_ == ["site-a", "site-b", "site-c"]
    assert abs(clf.intercept_.sum()) < 1e-9                  # centred, like scikit-learn's intercepts
    # the core oracle on a hand-built federation (class indices in classes_ order, intercept column 0)
    names = clf.client_names_
    Z = np.c_[np.ones(len(X)), X]
    k = np.searchsorted(clf.classes_, y).astype(float)
    fed = dm.Federation.from_arrays([Z[site == s] for s in names], [k[site == s] for s in names],
                                    names=names, task="multiclass")
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), dm.sets.CVaR(3, 0.5), l2=0.05, penalize_intercept=False)
    sol = prob.solve()
    coef, intercept = ParameterLayout(4, 4, 0, [0]).to_sklearn(sol.theta)
    np.testing.assert_allclose(clf.coef_, coef, atol=1e-6)
    np.testing.assert_allclose(clf.intercept_, intercept, atol=1e-6)
    # the certified value, recomputed from coef_ / intercept_ alone: each client's mean softmax loss
    # plus l2/2 ||coef||^2, and the CVaR at level 1/2 over three clients (caps 2/3)
    f = []
    for s in names:
        S = X[site == s] @ clf.coef_.T + clf.intercept_
        kk = k[site == s].astype(int)
        f.append(np.mean(logsumexp(S, axis=1) - S[np.arange(len(kk)), kk]) + 0.025 * np.sum(clf.coef_ ** 2))
    top = np.sort(f)[::-1]
    assert clf.upper_bound_ == pytest.approx((top[0] + 0.5 * top[1]) / 1.5, rel=1e-8)
    assert clf.lower_bound_ <= clf.upper_bound_
    np.testing.assert_allclose(np.sort(clf.client_weights_)[::-1][:2], [2 / 3, 1 / 3], atol=1e-6)


def test_wasserstein_classifier_fits_four_classes_as_the_core_oracle_with_the_free_intercept():
    """K = 4 classes, three clients, fit_intercept=True: the estimator is the direct
    WassersteinDRFL solve with the softmax loss and penalize_intercept=False on the same rows (the
    intercept rows centred, as scikit-learn's), certified; its value, recomputed in numpy from
    coef_ / intercept_ alone with the reformulation's closed form (Prop. 4.2 of the DRFL paper:
    Lambda = max_{j<k} ||coef_k - coef_j||_2, the intercept not transported), is upper_bound_."""
    X, y, site = _mc_data(n=90)
    clf = WassersteinDRClassifier(radius=0.05, kappa=1.0, norm=2, weights="simplex", l2=0.05)
    clf.fit(X, y, clients=site)
    assert clf.status_ == "optimal" and clf.relative_gap_ <= 1e-6
    assert clf.coef_.shape == (4, 3) and clf.intercept_.shape == (4,)
    assert abs(clf.intercept_.sum()) < 1e-9
    names = clf.client_names_
    Z = np.c_[np.ones(len(X)), X]
    k = np.searchsorted(clf.classes_, y).astype(float)
    fed = dm.Federation.from_arrays([Z[site == s] for s in names], [k[site == s] for s in names],
                                    names=names, task="multiclass")
    prob = dm.WassersteinDRFL(fed, dm.losses.Multinomial(), radius=0.05, kappa=1.0, norm=2,
                              weights=dm.sets.Simplex(3), l2=0.05, penalize_intercept=False)
    sol = prob.solve()
    W = sol.theta.reshape(4, 4)                                 # class-major rows [intercept, coef]
    np.testing.assert_allclose(clf.coef_, W[:, 1:], atol=1e-6)
    np.testing.assert_allclose(clf.intercept_, W[:, 0] - W[:, 0].mean(), atol=1e-6)
    # numpy: each client's worst case is min over lam >= Lambda of the convex piecewise-linear
    # rho*lam + mean max(L_i, max_j L_ij - kappa*lam): its minimum is at Lambda or at a breakpoint
    C = clf.coef_
    lam0 = max(np.linalg.norm(C[a] - C[b]) for a in range(4) for b in range(a))
    worst = []
    for s in names:
        S = X[site == s] @ C.T + clf.intercept_
        kk = k[site == s].astype(int)
        lse = logsumexp(S, axis=1)
        own = lse - S[np.arange(len(kk)), kk]
        flipped = (lse[:, None] - S).max(axis=1)
        grid = np.r_[lam0, (flipped - own)[flipped - own > lam0]]     # kappa = 1
        worst.append(min(0.05 * g + np.mean(np.maximum(own, flipped - g)) for g in grid))
    value = max(worst) + 0.025 * np.sum(C ** 2)                 # Q = simplex: the worst client
    assert clf.upper_bound_ == pytest.approx(value, rel=1e-7)
    assert clf.upper_bound_ == pytest.approx(sol.value, rel=1e-6)


def test_multiclass_predictions_are_scikit_learns():
    X, y, site = _mc_data(seed=1)
    clf = FairnessAwareClassifier(alpha=0.6).fit(X, y, clients=site)
    scores = X @ clf.coef_.T + clf.intercept_
    np.testing.assert_allclose(clf.decision_function(X), scores, atol=1e-12)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.log(proba), clf.predict_log_proba(X), atol=1e-10)
    np.testing.assert_allclose(clf.predict_log_proba(X), log_softmax(scores, axis=1), atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[scores.argmax(axis=1)])
    assert clf.score(X, y) == np.mean(clf.predict(X) == y) > 0.5


def test_relabelling_the_classes_permutes_the_rows_of_coef():
    """Labels of any type: integers and strings in another sorted order fit the same model, with
    coef_ / intercept_ rows following classes_."""
    X, y, site = _mc_data(seed=2)
    names = np.array(["alpha", "bravo", "charlie", "delta"])
    codes = {"alpha": 3, "bravo": 1, "charlie": 0, "delta": 2}
    y_int = np.array([codes[v] for v in y])
    a = FederatedDROClassifier(l2=0.1).fit(X, y, clients=site)
    b = FederatedDROClassifier(l2=0.1).fit(X, y_int, clients=site)
    assert list(b.classes_) == [0, 1, 2, 3]
    order = [codes[v] for v in names]                 # row of b for each of a's classes
    np.testing.assert_allclose(a.coef_, b.coef_[order], atol=1e-6)
    np.testing.assert_allclose(a.intercept_, b.intercept_[order], atol=1e-6)
    np.testing.assert_array_equal(names[np.searchsorted(names, a.predict(X))],
                                  [names[order.index(c)] for c in b.predict(X)])


def test_a_client_without_some_classes_is_fine():
    """Label skew: a client that holds only two of the four classes is a client like any other
    (a class absent from *every* client cannot occur: classes_ are the labels present in y)."""
    X, y, site = _mc_data(seed=3)
    site = site.copy()
    site[np.isin(y, ["alpha", "bravo"])] = "site-a"       # site-b and site-c: charlie and delta only
    clf = FederatedDROClassifier(weights="chi_square", rho=0.5).fit(X, y, clients=site)
    assert clf.status_ == "optimal" and len(clf.classes_) == 4
    assert clf.client_weights_.sum() == pytest.approx(1.0)


def test_two_classes_keep_one_score():
    X, y, site = _mc_data(seed=4)
    keep = np.isin(y, ["alpha", "delta"])
    clf = FederatedDROClassifier().fit(X[keep], y[keep], clients=site[keep])
    assert clf.coef_.shape == (1, 3) and clf.intercept_.shape == (1,)
    d = clf.decision_function(X[keep])
    assert d.shape == (keep.sum(),)
    np.testing.assert_array_equal(clf.predict(X[keep]), np.where(d > 0, "delta", "alpha"))
    np.testing.assert_allclose(clf.predict_proba(X[keep])[:, 1], 1.0 / (1.0 + np.exp(-d)), atol=1e-12)


def test_grid_search_with_log_loss_routes_the_clients_of_a_four_class_problem():
    import sklearn
    from sklearn.model_selection import GridSearchCV

    X, y, site = _mc_data(n=120, seed=5)
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("error", SingleClientWarning)      # a fit without its clients would warn
        est = FederatedDROClassifier(weights="cvar", cvar_level=0.5).set_fit_request(clients=True)
        search = GridSearchCV(est, {"l2": [1e-3, 1e-1]}, cv=3, scoring="neg_log_loss").fit(X, y, clients=site)
    assert search.best_estimator_.coef_.shape == (4, 3)
    assert search.best_estimator_.client_names_ == ["site-a", "site-b", "site-c"]
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_the_multi_class_tag_tells_scikit_learns_checks_which_estimators_take_k_classes():
    """The common checks add the 3-class problems (check_classifiers_train, ..._classes) exactly
    where this tag is True, and check that the others refuse them ('Only binary ...')."""
    from sklearn.utils import get_tags

    multi = {type(e).__name__ + f"({e.loss})": get_tags(e).classifier_tags.multi_class for e in (
        FederatedDROClassifier(), FairnessAwareClassifier(), FederatedDROClassifier(loss="hinge"),
        WassersteinDRClassifier(), DEOClassifier())}
    assert multi == {"FederatedDROClassifier(logistic)": True, "FairnessAwareClassifier(logistic)": True,
                     "FederatedDROClassifier(hinge)": False, "WassersteinDRClassifier(logistic)": True,
                     "DEOClassifier(logistic)": False}


# ------------------------------------------------------------------------------ refusals
def _objects(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("est, message", [
    (WassersteinDRClassifier(loss="hinge"), "Only binary classification is supported by WassersteinDRClassifier: "
                                            "loss='hinge' is a margin loss for two classes"),
    (FederatedDROClassifier(loss="hinge"), "Only binary classification is supported by FederatedDROClassifier: "
                                           "loss='hinge' is a margin loss for two classes"),
    (FairnessAwareClassifier(loss="smooth_hinge"), "loss='smooth_hinge' is a margin loss"),
])
def test_binary_only_estimators_refuse_more_classes_with_the_reason(est, message):
    X, y, site = _mc_data(n=60)
    with pytest.raises(ValueError) as exc:
        est.fit(X, y, clients=site)
    assert message in _one_line(exc)


def test_deo_refuses_more_classes_because_it_is_binary_by_definition():
    X, y, _ = _mc_data(n=60)
    with pytest.raises(ValueError) as exc:
        DEOClassifier().fit(X, y, sensitive_features=X[:, 0] > 0)
    assert "DEOClassifier: DEO is binary by definition (equal opportunity of the favourable outcome" in _one_line(exc)


@pytest.mark.parametrize("y, message", [
    (np.zeros(12, int), "y: FederatedDROClassifier needs at least two classes; got 1 class ([0])"),
    (_objects(["a", ["b"]] * 6), "y: class labels must be hashable; row 1 has ['b']"),
    (np.array([1, "a"] * 6, dtype=object), "y: labels must be all strings or all numbers"),
    (np.array(["a", None, "b"] * 4, dtype=object), "y: missing class label at row 1"),
])
def test_bad_labels_are_refused_naming_y(y, message):
    X = np.random.default_rng(0).normal(size=(12, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingleClientWarning)
        with pytest.raises(InvalidDataError) as exc:
            FederatedDROClassifier().fit(X, y)
    assert message in _one_line(exc)


@pytest.mark.parametrize("kwargs, message", [
    ({"penalty": "l1"}, "penalty is not a parameter of FederatedDROClassifier: the penalty is always the ridge "
                        "term l2/2*||coef||^2 (scikit-learn's penalty='l2'; penalty=None is l2=0); 'l1' and "
                        "'elasticnet' do not map"),
    ({"C": 1.0}, "C is not a parameter of FederatedDROClassifier: set l2 = 1/(C*n_samples)"),
    ({"l1_ratio": 0.5}, "l1_ratio is not a parameter of FederatedDROClassifier: there is no L1 term"),
    ({"multi_class": "ovr"}, "multi_class is not a parameter of FederatedDROClassifier: more than two classes "
                             "are always fitted with the softmax (multinomial) loss"),
    ({"alpha": 0.5}, "alpha is now cvar_level in FederatedDROClassifier (scikit-learn reserves alpha for a "
                     "regularization strength); pass cvar_level=..."),
])
def test_scikit_learn_options_that_do_not_map_are_refused_by_name(kwargs, message):
    with pytest.raises(InvalidParameterError) as exc:
        FederatedDROClassifier(**kwargs)
    assert message in _one_line(exc)
    with pytest.raises(InvalidParameterError) as exc:
        FederatedDROClassifier().set_params(**kwargs)
    assert message in _one_line(exc)


def test_the_cvar_level_no_longer_collides_with_scikit_learns_alpha():
    """check_regressors_train sets ``alpha = 0.01`` on any regressor that has one; the default
    FederatedDRORegressor has none now, and its CVaR level is ``cvar_level``."""
    est = FederatedDRORegressor()
    assert not hasattr(est, "alpha") and "alpha" not in est.get_params()
    est.set_params(weights="cvar", cvar_level=0.25)
    assert est.get_params()["cvar_level"] == 0.25


def test_fit_intercept_must_be_a_bool_and_not_a_second_intercept():
    X, y, site = _mc_data(n=60)
    with pytest.raises(InvalidParameterError) as exc:
        FederatedDROClassifier(fit_intercept="yes").fit(X, y, clients=site)
    assert "fit_intercept must be True or False; got 'yes'" in _one_line(exc)
    with pytest.raises(InvalidDataError) as exc:
        FederatedDROClassifier().fit(np.c_[X, np.ones(len(X))], y, clients=site)
    assert "X column 3 is constant 1" in _one_line(exc) and "fit_intercept=False" in str(exc.value)
    # without an intercept the constant column is an ordinary (penalized) feature
    clf = FederatedDROClassifier(fit_intercept=False).fit(np.c_[X, np.ones(len(X))], y, clients=site)
    assert clf.coef_.shape == (4, 4) and np.all(clf.intercept_ == 0.0)
