"""float32 rows: the Hessian-free route steps on float32 products and certifies from float64 ones.

A float32 product's rounding error is far above the default gap on rows with cancellation (here
features 1000 + N(0, 1): the float32 value of the objective is off by ~1e-5 relative), so a
certificate taken from it would be wrong; the route recomputes the point it certifies in float64
(drflmodel/problems/minmax/hessian_free.py, ``evaluation_certificate``). The references are other
routes on the float64 copy of the same (float32-rounded) features."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel import _float32_products as fp32
from drflmodel.matrix_free import MatrixFreeObjectives
from drflmodel.problems.minmax.hessian_free import evaluation_certificate
from drflmodel.problems.minmax.hessian_free_steps import Evaluation


def _cancelling(seed=1, n=3, rows=600, d=32):
    """Binary rows [1, 1000 + z] in float32: scores are small differences of terms of ~1000."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for _ in range(n):
        Z = rng.standard_normal((rows // n, d))
        ys.append(np.where(Z @ np.linspace(-1, 1, d) + 0.5 * rng.standard_normal(rows // n) > 0, 1, -1))
        Xs.append(np.hstack([np.ones((rows // n, 1)), 1000.0 + Z]).astype(np.float32))
    return Xs, ys


def _problem(Xs, ys, weights, dtype, loss=None, task="classification", l2=1e-4):
    fed = dm.Federation.from_arrays([x.astype(dtype) for x in Xs], ys, task=task)
    return dm.FederatedDRO(fed, loss or dm.losses.Logistic(), weights(fed), l2=l2, penalize_intercept=False)


def _erm(fed):
    return dm.sets.HCVaR(fed.proportions, 1.0)


def test_the_certificate_of_a_float32_evaluation_is_the_float64_one():
    """At the float64 optimum (the dense ``sqp`` route on the float64 copy), the float32 pass's
    objective is off by more than ten gaps; the certificate offered that float32 evaluation has the
    float64 value as U and a lower bound below the reference's U."""
    Xs, ys = _cancelling()
    ref = _problem(Xs, ys, _erm, np.float64).solve(method="sqp")
    prob = _problem(Xs, ys, _erm, np.float32)
    W = prob.weight_set
    mf = MatrixFreeObjectives(prob.objectives)
    assert mf.float32 and mf.steps_view() is not mf
    fast = mf.steps_view().at(ref.theta)
    exact_value = float(W.worst_case(mf.at(ref.theta).values)[0])
    fast_value = float(W.worst_case(fast.values)[0])
    assert not fast.exact and abs(fast_value - exact_value) > 10 * 1e-6 * exact_value   # float32: unusable
    lam = W.single_point()
    ev = Evaluation(ref.theta, fast, lam, fast.weighted_gradient(lam), fast_value)
    cert = evaluation_certificate(prob, mf, W, ev, 1e-6, force=True)
    assert cert["evaluation"].point.exact
    assert cert["upper"] == pytest.approx(exact_value, rel=1e-13)
    assert cert["lower"] <= ref.upper_bound + 1e-12 and cert["upper"] >= ref.lower_bound - 1e-12


@pytest.mark.parametrize("weights", ["erm", "chi_square", "cvar"])
def test_float32_steps_certify_the_float64_problem(weights):
    """Softmax head on float32 rows: the steps ran in float32 (``info["step_precision"]``), U is the
    float64 objective at the answer and [L, U] meets the conic route's interval on the float64 copy."""
    fed = dm.datasets.gaussian_mixture(1200, 12, 3, n_clients=4, alpha=0.5, seed=2)
    Xs = [c.X.astype(np.float32) for c in fed.clients]
    ys = [c.y for c in fed.clients]
    make = {"erm": _erm, "chi_square": lambda f: dm.sets.ChiSquare(4, 0.5),
            "cvar": lambda f: dm.sets.CVaR(4, 0.5)}[weights]
    args = dict(loss=dm.losses.Multinomial(), task="multiclass", l2=1e-2)
    sol = _problem(Xs, ys, make, np.float32, **args).solve(method="hessian_free")
    prob64 = _problem(Xs, ys, make, np.float64, **args)
    ref = prob64.solve(method="conic")
    assert sol.info["method"] == "hessian_free" and sol.info["step_precision"] == ["float32"]
    assert sol.status == "optimal" and ref.status == "optimal"
    assert sol.upper_bound == pytest.approx(prob64.objective(sol.theta), rel=1e-12)
    slack = 1e-9 * max(1.0, abs(ref.value))                  # the conic solver's own tolerance
    assert sol.lower_bound <= ref.upper_bound + slack and ref.lower_bound <= sol.upper_bound + slack


def test_wrong_float32_products_stall_the_steps_not_the_certificate(monkeypatch):
    """float32 products given a random relative error of 1e-3 (a new one at every product): the
    float32 steps cannot close the gap, the float64 steps take over from where they stopped, and the
    certificate is still the float64 problem's (it never reads a float32 product)."""
    exact_times, rng = fp32.times, np.random.default_rng(0)
    monkeypatch.setattr(fp32, "times", lambda X, W: (lambda S: S * (1.0 + 1e-3 * rng.standard_normal(S.shape)))(
        exact_times(X, W)))
    fed = dm.datasets.gaussian_mixture(900, 10, 2, n_clients=3, alpha=1.0, seed=4)
    Xs, ys = [c.X.astype(np.float32) for c in fed.clients], [c.y for c in fed.clients]
    sol = _problem(Xs, ys, _erm, np.float32, l2=1e-2).solve(method="hessian_free")
    prob64 = _problem(Xs, ys, _erm, np.float64, l2=1e-2)
    ref = prob64.solve(method="sqp")
    assert sol.info["method"] == "hessian_free" and sol.status == "optimal"
    assert sol.info["step_precision"] == ["float32", "float64"]
    assert sol.upper_bound == pytest.approx(prob64.objective(sol.theta), rel=1e-12)
    assert sol.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= sol.upper_bound + 1e-12
