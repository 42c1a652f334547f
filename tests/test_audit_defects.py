"""The defects a random audit of the public API found (11,472 instances over all families; issue 32),
each reproduced from the public API as the audit wrote it. Each test failed before its fix: a raw
TypeError / AttributeError / ValueError, or bad input accepted. Every error is now a one-line
drflmodel error naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

import drflmodel as dm
from drflmodel.client_oracle import Site
from drflmodel.errors import DrflmodelError, InvalidDataError, InvalidParameterError
from drflmodel.layout import ParameterLayout


def _one_line(exc_info) -> str:
    assert isinstance(exc_info.value, DrflmodelError)
    text = str(exc_info.value)
    assert "\n" not in text, text
    return text


# ------------------------------------------------------------------ a one-client l_p ball
@pytest.mark.parametrize("p", [1, 2, np.inf])
@pytest.mark.parametrize("method", ["auto", "conic"])
def test_a_one_client_lp_ball_solves_to_the_clients_own_optimum(p, method):
    """Was: TypeError at dro.py _support_duals (a length-1 auxiliary vector converted with float())."""
    rng = np.random.default_rng(0)
    X = np.c_[np.ones(20), rng.normal(size=(20, 2))]
    y = np.where(X[:, 1] + rng.normal(scale=0.5, size=20) > 0, 1.0, -1.0)
    prob = dm.FederatedDRO(dm.Federation.from_arrays([X], [y], task="classification"), dm.losses.Logistic(),
                           weights=dm.sets.LpBall(np.ones(1), 0.5, p), l2=0.01)
    sol = prob.solve(method=method, gap_tol=1e-10)      # compared to scipy's optimum at 1e-8
    assert sol.status == "optimal" and sol.weights.tolist() == [1.0]
    # the only weight on the simplex is lambda = 1: the client's own regularized logistic fit (scipy)
    ref = minimize(lambda t: np.mean(np.logaddexp(0, -y * (X @ t))) + 0.005 * t @ t, np.zeros(3),
                   method="BFGS", options={"gtol": 1e-10})
    assert sol.value == pytest.approx(ref.fun, abs=1e-8)
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-5)
    aux = sol.duals.get("aux", {})
    assert all(np.ndim(v) == 1 for k, v in aux.items() if k.startswith("lp_")), aux   # a vector stays a vector


# ------------------------------------------------------------------ DEO with a multi-class loss
def test_deo_with_a_multiclass_loss_is_refused_at_construction():
    """Was: accepted, then IndexError at solve."""
    vf = dm.datasets.synthetic_vertical(seed=0)
    with pytest.raises(InvalidParameterError) as exc:
        dm.DEOConstrained(vf, dm.losses.Multinomial(), eps=0.05, l2=1e-3)
    assert "DEOConstrained does not support the multi-class loss Multinomial" in _one_line(exc)


# ------------------------------------------------------------------ from_sklearn
def _rows(seed=0, n=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.where(X[:, 0] > 0, 1, 0), np.arange(n) % 3


def test_from_sklearn_with_a_name_or_a_class_says_to_pass_an_instance():
    """Was: AttributeError: 'str' object has no attribute 'get_params'."""
    from sklearn.linear_model import LogisticRegression

    X, y, site = _rows()
    with pytest.raises(InvalidParameterError) as exc:
        dm.from_sklearn("LogisticRegression", X, y, clients=site)
    assert _one_line(exc).startswith("estimator must be a scikit-learn estimator instance, e.g. "
                                     "LogisticRegression() from sklearn.linear_model")
    with pytest.raises(InvalidParameterError, match="got the class LogisticRegression"):
        dm.from_sklearn(LogisticRegression, X, y, clients=site)


def test_from_sklearn_regressor_with_text_targets_names_y():
    """Was: ValueError: could not convert string to float (y not named)."""
    from sklearn.linear_model import Ridge

    X, _, site = _rows()
    with pytest.raises(InvalidDataError) as exc:
        dm.from_sklearn(Ridge(), X, np.array(["low", "high"] * 15), clients=site)
    assert _one_line(exc).startswith("y (the target of the regressor Ridge) must be numeric; got text")
    with pytest.raises(InvalidDataError, match=r"^X must be numeric"):
        dm.from_sklearn(Ridge(), np.array([["a", "b"]] * 30), np.ones(30), clients=site)


def test_an_infinite_class_label_is_refused():
    """Was: accepted as a class of its own."""
    from sklearn.linear_model import LogisticRegression

    X, y, site = _rows()
    labels = np.where(y == 1, np.inf, 1.0)
    with pytest.raises(InvalidDataError) as exc:
        dm.from_sklearn(LogisticRegression(), X, labels, clients=site)
    assert "y: class label inf at row" in _one_line(exc) and "must be finite" in str(exc.value)
    three = np.where(y == 1, np.inf, np.where(X[:, 1] > 0, 2.0, 3.0))
    with pytest.raises(InvalidDataError, match="y: class label inf at row 0"):
        dm.Federation.from_groups(np.c_[np.ones(30), X], three, site, task="multiclass")


# ------------------------------------------------------------------ certified_solve timeouts
@pytest.mark.parametrize("timeout, match", [("soon", "timeout must be a real number; got 'soon'"),
                                            (-1, r"timeout must lie in \(0.0, inf\); got -1"),
                                            (0.0, r"timeout must lie in \(0.0, inf\); got 0.0")])
def test_certified_solve_refuses_a_timeout_that_is_not_a_positive_number(timeout, match):
    """Was: raw ValueError for "soon"; -1 accepted."""
    pytest.importorskip("flwr")
    from drflmodel import flower as dmf

    prob = dm.FederatedDRO(dm.datasets.synthetic_regression(n_clients=2, dim=2, samples=10, seed=0),
                           dm.losses.Squared(), weights=dm.sets.Simplex(2), l2=0.1)
    with pytest.raises(InvalidParameterError, match=match) as exc:
        dmf.certified_solve(prob, timeout=timeout)
    _one_line(exc)


# ------------------------------------------------------------------ identifiable representatives
def test_the_identifiable_representative_of_a_nan_model_is_refused():
    """Was: NaN accepted and spread over the class block (every class's coefficient became NaN)."""
    layout = ParameterLayout(3, 2, 0, [0])
    for bad in (np.array([np.nan, 1, 2, 3, 4, 5]), np.array([0, 1, 2, 3, np.inf, 5.0])):
        with pytest.raises(InvalidDataError) as exc:
            layout.identifiable(bad)
        assert "a NaN or infinite model has no identifiable representative" in _one_line(exc)
    np.testing.assert_allclose(layout.identifiable(np.array([1.0, 1, 2, 3, 4, 5])), [-1, 1, 2, 1, 4, 5])


# ------------------------------------------------------------------ the client oracle's two defects
class _Site(Site):
    """A site whose answers pass through ``change(query, answer, call)`` (its declaration stays honest)."""

    def __init__(self, site, change):
        self.__dict__.update(site.__dict__)
        self.change, self.calls = change, 0

    def answer(self, query, arrays=None, options=None):
        self.calls += 1
        out = dict(Site.answer(self, query, arrays, options))
        return out if query == "describe" else self.change(query, out, self.calls)


def _federated(problem, client0_change, retries=2):
    from drflmodel.client_oracle import LocalChannel, federated_solve

    channel = LocalChannel.from_problem(problem, retries=retries)
    channel.sites[0] = _Site(channel.sites[0], client0_change)
    return federated_solve(problem, channel)


def test_a_gram_triangle_of_the_wrong_length_is_a_named_fault():
    """Was: a raw ValueError in client_oracle._untriu, not retried, no fault recorded."""
    prob = dm.FederatedDRO(dm.datasets.diabetes(n_clients=3, seed=0), dm.losses.Squared(),
                           weights=dm.sets.CVaR(3, 0.5), l2=0.01)
    short = lambda query, out, call: {**out, "gram": out["gram"][:-1]} if "gram" in out else out  # noqa: E731
    sol = _federated(prob, short)
    fault = sol.info["fault"]
    assert sol.status == "failed" and sol.theta is None
    assert (fault["partition"], fault["query"], fault["check"], fault["attempts"]) == (0, "statistics", "shape", 3)
    d = prob.dim
    assert f"gram (upper triangle) has {d * (d + 1) // 2 - 1} entries" in fault["message"]


def test_a_one_off_nan_answer_is_retried_and_the_solve_certifies():
    """Was: a one-off NaN aborted the solve with a raw error naming no client."""
    prob = dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                           weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    hit = []

    def once(query, out, call):           # the first value answer after the opening queries, once
        if call >= 3 and "value" in out and not hit:
            hit.append(call)
            return {**out, "value": np.array([np.nan])}
        return out

    sol = _federated(prob, once)
    assert len(hit) == 1
    assert sol.status == "optimal" and sol.info["federated"]["retries"] == 1
    assert [(r["client"], r["check"]) for r in sol.info["federated"]["rejections"]] == [(0, "finite")]
    central = prob.solve()
    assert sol.lower_bound <= central.upper_bound + 1e-9 and central.lower_bound <= sol.upper_bound + 1e-9


def test_a_federated_free_intercept_smooth_loss_is_refused_with_what_a_server_can_do():
    """Was: refused with "use method='conic'", a route a server without rows cannot take."""
    from drflmodel.client_oracle import LocalChannel, federated_solve

    for loss, fed in ((dm.losses.Huber(), dm.datasets.diabetes(n_clients=3, seed=0)),
                      (dm.losses.SmoothHinge(), dm.datasets.breast_cancer(n_clients=3, seed=0))):
        prob = dm.FederatedDRO(fed, loss, weights=dm.sets.CVaR(3, 0.5), l2=0.01, penalize_intercept=False)
        with pytest.raises(InvalidParameterError) as exc:
            federated_solve(prob, LocalChannel.from_problem(prob))
        text = _one_line(exc)
        assert "sqp: " in text and "use method='conic'" not in text.split("newton:")[0]
        assert "a federated server holds no row, so the conic route is not open to it: penalize every coordinate" \
            in text
        fixed = dm.FederatedDRO(fed, loss, weights=dm.sets.CVaR(3, 0.5), l2=0.01, penalize_intercept=True)
        assert federated_solve(fixed, LocalChannel.from_problem(fixed)).status == "optimal"   # as the text says
