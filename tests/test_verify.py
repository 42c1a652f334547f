"""Tests of the verification harness on synthetic iterates with known rates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drflmodel.errors import InvalidDataError, InvalidParameterError
from drflmodel.solution import Solution
from drflmodel.verify import Verifier, fit_rate, verify, verify_iterates


class QuadraticProblem:
    """g(theta) = ||theta - c||^2 + 1: minimizer c, value 1 (known in closed form)."""

    family = "toy-quadratic"

    def __init__(self, c):
        self.c = np.asarray(c, float)

    def objective(self, theta):
        return float(np.sum((np.asarray(theta) - self.c) ** 2) + 1.0)


def _solution(problem):
    return Solution(theta=problem.c.copy(), weights=None, client_losses=None, value=1.0,
                    lower_bound=1.0, upper_bound=1.0, status="optimal", certificate="closed form",
                    problem=problem)


def _iterates(c, errors, seed=0):
    """theta_r = c + e_r * u_r with unit vectors u_r, so ||theta_r - c|| = e_r exactly."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(len(errors), c.size))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return c + np.asarray(errors)[:, None] * u


C = np.array([1.0, -2.0, 0.5])


def test_fit_rate_recovers_linear_factor():
    rounds = np.arange(200)
    errors = 3.0 * 0.9**rounds
    fit = fit_rate(errors, kind="linear")
    assert fit["factor"] == pytest.approx(0.9, rel=1e-10)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12)


def test_fit_rate_recovers_sublinear_order():
    rounds = np.arange(1, 2001)
    errors = np.concatenate([[5.0], 2.0 / rounds[:-1]])  # e_r = 2/r for r >= 1
    fit = fit_rate(errors, kind="sublinear")
    assert fit["slope"] == pytest.approx(-1.0, abs=1e-9)


def test_verify_iterates_linear_rate_and_rounds_to_tol():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    dists = 2.0 * 0.8 ** np.arange(120)
    rep = verify_iterates(prob, sol, _iterates(C, dists), tol=1e-8, expected_rate="linear")
    # error metric is the squared distance: factor 0.64 per round
    assert rep.rate["factor"] == pytest.approx(0.64, rel=1e-8)
    assert rep.passed, rep.reasons
    first = int(np.nonzero((dists**2) <= 1e-8)[0][0])
    assert rep.rounds_to_tol == first
    # the objective gap equals the squared distance for this problem
    assert rep.final["rel_gap"] == pytest.approx(dists[-1] ** 2, rel=1e-6, abs=1e-15)


def test_verify_iterates_sublinear_rate():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    r = np.arange(1, 3000)
    dists = np.sqrt(np.concatenate([[2.0], 1.0 / r]))  # squared distance at round r >= 1 is 1/r
    rep = verify_iterates(prob, sol, _iterates(C, dists), tol=1e-3, expected_rate="sublinear")
    assert rep.rate["slope"] == pytest.approx(-1.0, abs=1e-6)
    assert rep.passed, rep.reasons


def test_diverging_trace_fails_with_reason():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    dists = 0.1 * 1.05 ** np.arange(100)
    rep = verify_iterates(prob, sol, _iterates(C, dists), tol=1e-6, expected_rate="linear")
    assert not rep.passed
    assert any("divergence" in s for s in rep.reasons)
    assert any("exceeds tol" in s for s in rep.reasons)
    assert "FAILED" in rep.summary()


def test_iterate_below_certified_value_is_flagged():
    # a 'certified' value that is too high: the iterates beat it, which must be reported
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    sol.value = 1.5
    rep = verify_iterates(prob, sol, _iterates(C, np.full(10, 1e-6)), tol=1e-6, error_metric="rel_gap")
    assert not rep.passed
    assert any("below the certified optimum" in s for s in rep.reasons)


def test_nan_iterates_fail():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    T = _iterates(C, 0.5 ** np.arange(10))
    T[-1, 0] = np.nan
    rep = verify_iterates(prob, sol, T, tol=1e-2)
    assert not rep.passed
    assert any("NaN" in s for s in rep.reasons)


def test_report_serializes_to_json():
    prob = QuadraticProblem(C)
    rep = verify_iterates(prob, _solution(prob), _iterates(C, 0.5 ** np.arange(30)), tol=1e-6)
    d = json.loads(rep.to_json())
    assert d["rows"][0]["round"] == 0 and len(d["rows"]) == 30


class _Trace:
    def __init__(self, thetas):
        self.thetas = thetas
        self.solver = "toy"
        self.expected_rate = "linear"


def test_verify_reads_trace_and_expected_rate():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    rep = verify(_Trace(_iterates(C, 0.7 ** np.arange(80))), sol, tol=1e-10)
    assert rep.rate["expected"] == "linear"
    assert rep.solver == "toy"
    assert rep.passed, rep.reasons


def test_verifier_stops_the_run():
    prob = QuadraticProblem(C)
    ver = Verifier(_solution(prob), tol=1e-6)
    thetas = _iterates(C, 0.5 ** np.arange(40))
    stopped = None
    for r, th in enumerate(thetas):
        try:
            ver({"theta": th, "round": r})
        except StopIteration:
            stopped = r
            break
    # ||theta_r - c||^2 = 0.25^r <= 1e-6 first at r = 10
    assert stopped == 10 == ver.stopped_at


def test_bad_inputs():
    prob = QuadraticProblem(C)
    sol = _solution(prob)
    with pytest.raises(InvalidDataError, match="thetas"):
        verify_iterates(prob, sol, np.zeros((5, 2)))
    with pytest.raises(InvalidParameterError, match="tol"):
        verify_iterates(prob, sol, np.zeros((5, 3)), tol=0.0)
    with pytest.raises(InvalidParameterError, match="expected_rate"):
        verify_iterates(prob, sol, np.zeros((5, 3)), expected_rate="quadratic")
    with pytest.raises(InvalidDataError, match="lambdas"):
        verify_iterates(prob, sol, np.zeros((5, 3)), lambdas=np.zeros((4, 2)))
    with pytest.raises(InvalidParameterError, match="kind"):
        fit_rate([1.0, 0.5], kind="cubic")


def test_dm_verify_stays_callable_after_submodule_import():
    import drflmodel as dm
    import drflmodel.verify  # noqa: F401  (rebinds the package attribute to the module)

    prob = QuadraticProblem(C)
    rep = dm.verify(_Trace(_iterates(C, 0.7 ** np.arange(40))), _solution(prob), tol=1e-5)
    assert rep.passed


def test_verifier_writes_its_error_on_the_round_result_for_the_progress_display():
    prob = QuadraticProblem(C)
    ver = Verifier(_solution(prob), tol=1e-12, error_metric="dist_theta")

    class Result:                                   # like solvers.RoundResult
        def __init__(self, theta, r):
            self.theta, self.round = theta, r

    res = Result(C + np.array([0.0, 0.3, 0.4]), 1)
    ver(res)
    assert res.error == pytest.approx(0.5, abs=1e-15) and ver.history == [(1, res.error)]
    plain = {"theta": C + 1.0, "round": 2}          # a user's dict is left as it was
    ver(plain)
    assert set(plain) == {"theta", "round"}
