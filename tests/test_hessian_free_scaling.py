"""Issue 44: the Hessian-free route on badly scaled columns (diagonal preconditioning from the column
statistics, certificate in the original variables) and its query plan (stated up front, admitted or
refused by the client's policy by name, kept by the route)."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, PolicySite, QueryPolicy, Site, federated_solve
from drflmodel.problems.engine.plan import QueryPlan, plan_refusal
from drflmodel.problems.minmax.route_plans import hessian_free_plan
from drflmodel.problems.minmax.hessian_free_steps import InverseLBFGS


def _huber(seed: int, scaled: bool = True):
    """The issue's reproducer: Huber over 4 sites of 31/50/50/40 rows, an intercept and 21 columns
    scaled by 10^U(-3, 3), Simplex(4), l2 = 0.0124."""
    rng = np.random.default_rng(seed)
    scale = 10 ** rng.uniform(-3, 3, size=21) if scaled else np.ones(21)
    if not scaled:
        rng.uniform(-3, 3, size=21)
    Xs, ys = [], []
    for n in (31, 50, 50, 40):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, 21)) * scale])
        Xs.append(X)
        ys.append(X[:, 1:] @ (rng.normal(size=21) / scale) + rng.normal(size=n))
    return dm.FederatedDRO(dm.Federation.from_arrays(Xs, ys, task="regression"), dm.losses.Huber(1.0),
                           weights=dm.sets.Simplex(4), l2=0.0124)


def _federated(prob, policy=None, **options):
    sites = [PolicySite(Site.from_problem(prob, i), policy or QueryPolicy()) for i in range(prob.n_clients)]
    return federated_solve(prob, LocalChannel(sites), method="hessian_free", **options)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_issue_reproducer_certifies_within_twice_the_standardized_exchanges(seed):
    scaled, standard = _federated(_huber(seed)), _federated(_huber(seed, scaled=False))
    assert scaled.status == "optimal" and standard.status == "optimal"
    assert scaled.info.get("fault") is None and scaled.info["federated"]["rejections"] == []
    assert scaled.info["federated"]["exchanges"] <= 2 * standard.info["federated"]["exchanges"]
    # the bound is the original problem's: the conic route's optimum lies in [L, U]
    conic = _huber(seed).solve(method="conic")
    assert scaled.lower_bound <= conic.upper_bound + 1e-7 * abs(conic.upper_bound)
    assert conic.lower_bound <= scaled.upper_bound + 1e-7 * abs(conic.upper_bound)


@pytest.mark.slow
def test_unpreconditioned_the_reproducer_runs_out_of_the_default_budget_and_now_stops_without_naming_anyone():
    sol = _federated(_huber(0), precondition=False)
    assert sol.info.get("fault") is None                     # the route's own plan stopped it, not a client's refusal
    assert "exhausted" in sol.info["plan"]
    used = sol.info["plan"]["used"]
    assert all(used.get(k, 0) <= n for k, n in sol.info["plan"]["limits"].items())


def test_central_forced_hessian_free_on_scaled_columns_certifies_and_brackets_the_conic_optimum():
    rng = np.random.default_rng(3)
    scale = 10 ** rng.uniform(-3, 3, size=30)
    Xs, ys = [], []
    for n in (40, 25, 3, 60):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, 30)) * scale])
        Xs.append(X)
        ys.append(np.where(X[:, 1:] @ (rng.normal(size=30) / scale) + rng.logistic(size=n) > 0, 1.0, -1.0))
    prob = dm.FederatedDRO(dm.Federation.from_arrays(Xs, ys, task="classification"), dm.losses.Logistic(),
                           weights=dm.sets.CVaR(4, 0.5), l2=1e-3)
    plain = prob.solve(method="hessian_free", precondition=False, max_iterations=150)
    pre = dm.FederatedDRO(prob.federation, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5),
                          l2=1e-3).solve(method="hessian_free")
    conic = prob.solve(method="conic")
    assert plain.status != "optimal"                     # unscaled: the interval stays wide within 150 steps
    assert pre.status == "optimal" and pre.info["preconditioned"]
    assert pre.lower_bound <= conic.upper_bound + 1e-7 and conic.lower_bound <= pre.upper_bound + 1e-7


def test_the_inverse_bfgs_with_a_diagonal_start_is_bfgs_in_the_scaled_variables():
    rng = np.random.default_rng(0)
    P, D = 7, 10 ** rng.uniform(-2, 2, size=7)
    pairs = []
    for _ in range(4):
        s = rng.normal(size=P)
        A = rng.normal(size=(P, P))
        pairs.append((s, (A @ A.T + np.eye(P)) @ s))
    theta_space, z_space = InverseLBFGS(5, 0.7, D ** 2), InverseLBFGS(5, 0.7)
    for s, y in pairs:
        theta_space.update(s, y)
        z_space.update(s / D, D * y)
    V = rng.normal(size=(P, 3))
    assert np.allclose(theta_space.apply(V), D[:, None] * z_space.apply(D[:, None] * V), rtol=1e-10, atol=0)


def test_a_policy_refuses_a_plan_it_cannot_keep_by_name_before_answering_anything_of_the_route():
    sol = _federated(_huber(0), policy=QueryPolicy(evaluations=50))
    fault = sol.info["fault"]
    assert sol.status == "failed" and fault["kind"] == "refused" and fault["query"] == "bound_terms"
    assert "refuses the route's plan" in fault["message"] and "at most 50" in fault["message"]
    assert sol.info["federated"]["queries"]["bound_terms"]["answers"] == 0     # nothing of the route answered
    assert "evaluate" not in sol.info["federated"]["queries"]


def test_a_plan_names_what_breaks_a_policy():
    plan = hessian_free_plan()
    assert plan_refusal(QueryPolicy(), plan) is None
    assert "bound-term answers" in plan_refusal(QueryPolicy(bound_terms=10), plan)
    assert "answers only" in plan_refusal(QueryPolicy(allow=("describe", "evaluate", "values")), plan)
    assert QueryPlan.from_wire(plan.wire()).limits == plan.limits
    with pytest.raises(dm.errors.InvalidParameterError, match="limits"):
        QueryPlan("x", {"gradients": 3})


def test_a_small_plan_is_kept_and_the_solve_returns_its_best_certificate():
    prob = _huber(1)
    sol = _federated(prob, plan=hessian_free_plan(evaluations=14, bound_terms=14, values=20))
    plan = sol.info["plan"]
    assert "exhausted" in plan and sol.info.get("fault") is None
    assert plan["used"]["evaluations"] <= 14 and plan["used"]["bound_terms"] <= 14
    assert sol.info["federated"]["queries"]["evaluate"]["exchanges"] <= 14
    assert sol.status in ("optimal", "optimal_within_gap", "failed")
    if sol.status != "failed":
        conic = prob.solve(method="conic")
        assert sol.lower_bound <= conic.upper_bound + 1e-7 * abs(conic.upper_bound)
