"""Sampled rounds replayed against their own subset's round map (landing/replay.py).

The runs are built here from the exact local steps (``landing.contraction.local_iterates``) with the
recorded subsets; the hull distance is checked against CVXPY's exact projection (an independent
route). A correct run is never refused, with known weights (by examples, uniform) or unknown ones;
planted bugs are proved "elsewhere" in the first round, and the weighting is only held against a
run that declared it.
"""

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.landing.arithmetic import bfloat16_round
from drflmodel.landing.contraction import local_iterates
from drflmodel.landing.replay import hull_distance_lower_bound

J, MU, ETA, R = 5, 1.0, 0.05, 60


def _run(prob, subsets, weighting="examples", mu=MU, eta=ETA, cast=None, momentum=0.0):
    p = np.asarray(prob.federation.proportions, float)
    theta, out, carried = np.zeros(prob.dim), [np.zeros(prob.dim)], None
    for S in subsets:
        U = local_iterates(prob.objectives, theta, J, eta, mu)
        if momentum:              # optimizer state not reset: last round's move carried into this one
            moved = U - theta[None, :]
            U = U + (momentum * carried if carried is not None else 0.0)
            carried = moved
        w = p[S] / p[S].sum() if weighting == "examples" else np.full(len(S), 1.0 / len(S))
        theta = w @ U[S]
        if cast is not None:
            theta = np.asarray(cast(theta), float)
        out.append(theta)
    return np.array(out)


@pytest.fixture(scope="module")
def sampled(logistic):
    prob, sol = logistic
    rng = np.random.default_rng(1)
    return prob, sol, [np.sort(rng.choice(5, 2, replace=False)) for _ in range(R)]


def _grade(T, prob, sol, subsets, aggregation=None, mu=MU, eta=ETA):
    return dm.landing.conformance(T, prob, "FedProx", local_steps=J, step_size=eta, mu=mu, solution=sol,
                                  participation=subsets, aggregation=aggregation)


def test_the_hull_distance_bound_is_below_the_exact_projection_and_close_to_it():
    rng = np.random.default_rng(0)
    for k in range(12):
        U = rng.normal(size=(int(rng.integers(2, 7)), 4))
        t = rng.normal(size=4) * (3.0 if k % 2 else 0.3)
        w = cp.Variable(U.shape[0], nonneg=True)
        cp.Problem(cp.Minimize(cp.sum_squares(U.T @ w - t)), [cp.sum(w) == 1]).solve()
        exact = float(np.linalg.norm(U.T @ w.value - t))
        lower = hull_distance_lower_bound(U, t)
        assert lower <= exact + 1e-9 and lower >= 0.98 * exact - 1e-6, (lower, exact)
    inside = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    assert hull_distance_lower_bound(inside, np.array([0.5, 0.5])) == 0.0


@pytest.mark.parametrize("weighting", ["examples", "uniform"])
@pytest.mark.parametrize("cast", [None, lambda x: np.asarray(x, np.float32), lambda x: bfloat16_round(
    np.asarray(x, np.float32))], ids=["float64", "float32", "bfloat16"])
def test_a_correct_sampled_run_replays_under_its_own_and_under_unknown_weights(sampled, weighting, cast):
    prob, sol, subsets = sampled
    T = _run(prob, subsets, weighting, cast=cast)
    for aggregation in (None, weighting):
        rep = _grade(T, prob, sol, subsets, aggregation)
        assert rep.verdict != "elsewhere", rep.text
        assert rep.extra["rounds_replayed"] == R and rep.extra["replay_max_ratio"] <= 1.0
        assert any("replayed 60 rounds" in r for r in rep.reasons)


def test_planted_bugs_under_sampling_are_proved_elsewhere_in_the_first_round(sampled):
    prob, sol, subsets = sampled
    bugs = {"mu ignored": _run(prob, subsets, mu=0.0),
            "learning rate ignored": _run(prob, subsets, eta=ETA / 2),
            "optimizer state not reset": _run(prob, subsets, momentum=0.5)}
    for name, T in bugs.items():
        rep = _grade(T, prob, sol, subsets)
        assert rep.verdict == "elsewhere" and rep.evidence == "proved", (name, rep.text)
        # the run ends inside the worst-case sampling region (which alone would not see the bug); the replay does
        assert rep.rows[-1]["dist_fixed_point"] < rep.extra["landing_region"], (name, rep.text)
        assert "is not FedProx's round map of its clients" in rep.text, (name, rep.text)
        first = 2 if name == "optimizer state not reset" else 1     # the carried state starts in round 2
        assert f"round {first} is not" in rep.text, (name, rep.text)


def test_the_weighting_is_held_only_against_a_run_that_declares_it(sampled):
    prob, sol, subsets = sampled
    T = _run(prob, subsets, "uniform")            # claims Flower's weighting by examples, averages uniformly
    assert _grade(T, prob, sol, subsets, "examples").verdict == "elsewhere"
    rep = _grade(T, prob, sol, subsets, None)     # any convex weighting: a uniform average is one
    assert rep.verdict != "elsewhere", rep.text
    assert _grade(T, prob, sol, subsets, "uniform").verdict != "elsewhere"


def test_a_bad_aggregation_is_refused_by_name(sampled):
    prob, sol, subsets = sampled
    with pytest.raises(InvalidParameterError, match="aggregation must be one of"):
        _grade(_run(prob, subsets), prob, sol, subsets, "median")
