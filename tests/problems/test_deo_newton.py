"""The Newton route of the convex DEO problems (problems/deo/newton.py).

Checks, each able to fail: against the conic route and an independent hand-written CVXPY model of
problem (4) (values to 1e-8, both certified), inside and outside the slab, with eps = 0, unequal
groups and badly scaled columns, for the logistic, squared and smooth-hinge losses; problem P_c
against the conic route; the multipliers satisfy the KKT conditions; auto takes the route only where
it applies and a forced use elsewhere is refused with the reason.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError

LOSSES = [dm.losses.Logistic(), dm.losses.Squared(), dm.losses.SmoothHinge()]


def _vertical(seed=0, n=400, dim=6, scaled=False, shift=1.5):
    vf = dm.datasets.synthetic_vertical(n_samples=n, dim=dim, n_parties=3, group_shift=shift, seed=seed)
    if scaled:
        scale = np.array([1e2, 1.0, 1e-2, 3.0, 0.3, 10.0][:dim])
        vf = dm.VerticalFederation(blocks=[b * scale[s] for b, s in zip(vf.blocks, vf.block_slices)], y=vf.y,
                                   group=vf.group, active=vf.active)
    return vf


def _hand_written(prob) -> float:
    """Problem (4) written directly in CVXPY (independent of the oracle's model)."""
    theta = cp.Variable(prob.dim)
    z = prob.X @ theta
    if isinstance(prob.loss, dm.losses.Logistic):
        data = cp.sum(cp.logistic(-cp.multiply(prob.y, z)))
    elif isinstance(prob.loss, dm.losses.Squared):
        data = cp.sum_squares(z - prob.y)
    else:
        data = cp.sum(0.5 * cp.huber(cp.pos(1 - cp.multiply(prob.y, z)), 1))
    D = -0.5 * (prob.u_a - prob.u_b) @ theta
    problem = cp.Problem(cp.Minimize(data / prob.n + 0.5 * prob.l2 * cp.sum_squares(theta)),
                         [cp.abs(D) <= prob.eps_deo])
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return float(problem.value)


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("eps", [0.0, 0.01, 0.5, 10.0])
def test_agrees_with_the_conic_route_and_a_hand_written_model(loss, eps):
    vf = _vertical(seed=1)
    prob = dm.DEOConstrained(vf, loss, eps=eps, fairness_loss="linear", l2=1e-2)
    fast = prob.solve()
    assert fast.info["method"] == "newton" and fast.status == "optimal"
    conic = dm.DEOConstrained(vf, loss, eps=eps, fairness_loss="linear", l2=1e-2).solve(method="convex")
    assert conic.status == "optimal"
    scale = max(1.0, abs(conic.upper_bound))
    assert abs(fast.upper_bound - conic.upper_bound) <= max(1e-8 * scale, conic.upper_bound - conic.lower_bound)
    assert fast.lower_bound <= conic.upper_bound + 1e-12 and conic.lower_bound <= fast.upper_bound + 1e-12
    assert fast.upper_bound == pytest.approx(_hand_written(prob), rel=1e-8, abs=1e-10)
    assert prob.constraint_violation(fast.theta) <= 1e-15         # on the slab up to rounding
    assert 0 < fast.info["bound_allowance"] <= 1e-12 and fast.lower_bound < fast.upper_bound
    kkt = fast.info["kkt"]
    assert kkt["stationarity"] <= 1e-8 and kkt["complementarity"] <= 1e-10 and kkt["dual_feasibility"] == 0.0


@pytest.mark.parametrize("kind", ["unequal", "scaled"])
def test_hard_data(kind):
    vf = _vertical(seed=3, n=300, scaled=kind == "scaled", shift=3.0 if kind == "unequal" else 1.5)
    prob = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-3)
    fast = prob.solve(method="newton")
    conic = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-3).solve(
        method="convex")
    assert fast.status == "optimal"
    assert fast.upper_bound == pytest.approx(_hand_written(prob), rel=1e-8)
    assert fast.lower_bound <= conic.upper_bound + 1e-12


def test_the_multiplier_sign_follows_the_active_side():
    vf = _vertical(seed=2)
    prob = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.01, fairness_loss="linear", l2=1e-2)
    sol = prob.solve(method="newton")
    D = prob.fairness_gap(sol.theta)
    assert abs(abs(D) - 0.01) <= 1e-12                    # on the face
    assert (sol.duals["lambda1"] > 0) == (D > 0) and (sol.duals["lambda2"] > 0) == (D < 0)
    loose = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=10.0, fairness_loss="linear", l2=1e-2).solve(
        method="newton")
    assert loose.duals["lambda1"] == 0.0 and loose.duals["lambda2"] == 0.0


@pytest.mark.parametrize("c", [0.01, 1.0])
def test_penalty_problem_agrees_with_the_conic_route(c):
    vf = _vertical(seed=4)
    prob = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-2, penalty_c=c)
    fast = prob.solve()
    conic = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-2,
                              penalty_c=c).solve(method="convex")
    assert fast.info["method"] == "newton" and fast.status == "optimal" and conic.status == "optimal"
    assert fast.upper_bound == pytest.approx(conic.upper_bound, rel=1e-8)
    assert fast.info["kkt"]["multiplier_consistency"] == 0.0


def test_refused_where_it_cannot_apply_and_auto_takes_the_conic_route():
    vf = _vertical(seed=0, n=120)
    hinge = dm.DEOConstrained(vf, dm.losses.Hinge(), eps=0.02, fairness_loss="linear", l2=1e-2)
    with pytest.raises(InvalidParameterError, match="not twice differentiable"):
        hinge.solve(method="newton")
    assert hinge.solve().info["method"] == "convex"
    no_ridge = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=0.0)
    with pytest.raises(InvalidParameterError, match="l2 > 0"):
        no_ridge.solve(method="newton")
    assert no_ridge.solve().info["method"] == "convex"
    same = dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="same", l2=1e-2)
    with pytest.raises(InvalidParameterError, match="dc_deo"):
        same.solve(method="newton")
    with pytest.raises(InvalidParameterError, match="method 'newton' or 'convex'"):
        dm.DEOConstrained(vf, dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-2).solve(method="dc")
    with pytest.raises(InvalidParameterError, match=r"\(method 'convex'\)"):       # newton does not apply to hinge
        hinge.solve(method="dc")


def test_options_are_validated():
    prob = dm.DEOConstrained(_vertical(n=120), dm.losses.Logistic(), eps=0.02, fairness_loss="linear", l2=1e-2)
    with pytest.raises(InvalidParameterError, match="max_steps"):
        prob.solve(method="newton", max_steps=0)
    with pytest.raises(InvalidParameterError, match="unknown option"):
        prob.solve(method="newton", tol_gap_abs=1e-9)          # a solver setting: Newton uses no solver
