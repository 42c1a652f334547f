"""Query plans of the federated SQP route (stated up front from its own step bound, lowered to what the
default policy has left in the run, kept), the plan admission against what a client has answered so
far, and the memory bounds of the federated server (the answer book's Hessians, the level bundle
model's estimate)."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, PolicySite, QueryPolicy, Site, federated_solve, validation
from drflmodel.problems.engine.plan import QueryPlan, budget_left, plan_refusal
from drflmodel.problems.minmax.route_plans import sqp_plan
from drflmodel.errors import MemoryLimitError


def _smooth_hinge(seed: int = 3, K: int = 3, d: int = 12, l2: float = 1e-5):
    """Badly scaled, nearly separable smooth-hinge clients with a tiny ridge: an SQP run of many steps."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-3, 3, size=d - 1)
    w = rng.normal(size=d - 1) / scale * 8.0
    Xs, ys = [], []
    for n in rng.integers(20, 40, size=K):
        X = np.hstack([np.ones((n, 1)), rng.normal(size=(n, d - 1)) * scale])
        Xs.append(X)
        ys.append(np.where(X[:, 1:] @ w > 0, 1.0, -1.0))
    fed = dm.Federation.from_arrays(Xs, ys, task="classification")
    return dm.FederatedDRO(fed, dm.losses.SmoothHinge(), weights=dm.sets.Simplex(K), l2=l2)


def _sites(prob, policy=None):
    return [PolicySite(Site.from_problem(prob, i), policy or QueryPolicy(rows_above_parameters=False))
            for i in range(prob.n_clients)]


def test_the_sqp_plan_follows_from_its_steps_and_is_lowered_to_what_is_left():
    plan = sqp_plan(50, budget_left(None))
    assert plan.route == "sqp"
    assert plan.limits["hessians"] == QueryPolicy().hessians          # 1 + 2 * 50 + 30 = 131, lowered to 100
    assert plan.limits["values"] == QueryPolicy().values // 2
    small = sqp_plan(3, budget_left(None))
    assert small.limits["hessians"] == 1 + 2 * 3 + 30 and small.limits["values"] == 1 + 34 * 3
    left = budget_left({"evaluate": {"exchanges": 30}, "values": {"exchanges": 7}}, retries=2)
    assert left["hessians"] == 100 - 30 - 2 and left["evaluations"] == 1000 - 30 - 2 and left["values"] == 1500 - 9


def test_a_plan_is_admitted_against_what_is_left_of_the_run():
    plan = QueryPlan("sqp", {"hessians": 90})
    assert plan_refusal(QueryPolicy(), plan, used={"hessians": 10}) is None
    why = plan_refusal(QueryPolicy(), plan, used={"hessians": 11})
    assert "89 left after 11 answered" in why


def test_federated_sqp_states_its_plan_and_an_honest_default_client_finishes_within_it():
    prob = _smooth_hinge()
    sites = _sites(prob)
    sol = federated_solve(prob, LocalChannel(sites), method="sqp")
    assert sol.info.get("fault") is None and sol.info["federated"]["rejections"] == []
    plan = sol.info["plan"]
    assert plan["route"] == "sqp" and plan["limits"]["hessians"] <= QueryPolicy().hessians
    for site in sites:                          # what each client answered is within the plan
        assert site.counts.get("hessians", 0) <= plan["limits"]["hessians"]
        assert site.counts.get("values", 0) <= plan["limits"]["values"] + 1     # + the start's worst case
    if sol.status != "failed":
        conic = prob.solve(method="conic")
        assert sol.lower_bound <= conic.upper_bound + 1e-6 * max(1.0, abs(conic.upper_bound))


def test_a_stricter_client_refuses_the_sqp_plan_by_name_before_answering_a_hessian():
    prob = _smooth_hinge()
    sites = _sites(prob, QueryPolicy(hessians=20, rows_above_parameters=False))
    sol = federated_solve(prob, LocalChannel(sites), method="sqp")
    fault = sol.info["fault"]
    assert sol.status == "failed" and fault["kind"] == "refused"
    assert "refuses the route's plan" in fault["message"] and "allows at most 20 per run" in fault["message"]
    assert all(site.counts.get("hessians", 0) == 0 for site in sites)


def test_sqp_stops_at_its_plan_with_its_best_certificate_and_names_nobody():
    prob = _smooth_hinge()
    full = federated_solve(prob, LocalChannel(_sites(prob)), method="sqp")
    needed = full.info["federated"]["queries"]["evaluate"]["exchanges"]
    assert needed > 8                           # the route needs more Hessians than the plan below leaves
    channel = LocalChannel(_sites(prob))
    # an earlier route of this run asked 90 Hessian evaluations: the default policy leaves 10, 2 kept for retries
    for _ in range(90):
        channel.ledger.record("evaluate", {i: {"hessian": np.zeros(1)} for i in range(channel.n_clients)})
    sol = federated_solve(prob, channel, method="sqp", max_steps=50)   # an option: no fallback
    assert sol.info.get("fault") is None
    plan = sol.info["plan"]
    assert plan["limits"]["hessians"] == 8 and "exhausted" in plan
    assert all(site.counts.get("hessians", 0) <= 8 for site in channel.sites)


def test_the_answer_book_keeps_hessians_within_its_bytes_and_still_checks_against_the_latest(monkeypatch):
    rng = np.random.default_rng(0)
    X = np.hstack([np.ones((30, 1)), rng.normal(size=(30, 7))])
    y = np.where(rng.normal(size=30) > 0, 1.0, -1.0)
    prob = dm.FederatedDRO(dm.Federation.from_arrays([X, X[:20]], [y, y[:20]], task="classification"),
                           dm.losses.Logistic(), weights=dm.sets.Simplex(2), l2=1e-2)
    P = prob.dim
    monkeypatch.setattr(validation, "HESSIAN_BYTES", 3 * 8 * P * P)
    site = Site.from_problem(prob, 0)
    book = validation.ClientBook(dm.losses.Logistic())
    book.keep("describe", {}, {}, site.answer("describe"))
    thetas = [rng.normal(size=P) * 0.3 for _ in range(10)]
    for t in thetas:
        answer = site.answer("evaluate", {"theta": t}, {"hessian": True})
        assert book.validate("evaluate", {"theta": t}, {"hessian": True}, answer) is None
        book.keep("evaluate", {"theta": t}, {"hessian": True}, answer)
    held = [rec for rec in book.records.values() if rec.hessian is not None]
    assert len(held) == 3 and all(np.array_equal(rec.theta, t) for rec, t in zip(held, thetas[-3:]))
    assert all(rec.gradient is not None for rec in book.records.values())       # gradients are all kept
    v = rng.normal(size=P)
    honest = site.answer("hvp", {"theta": thetas[-1], "direction": v}, {})
    assert book.validate("hvp", {"theta": thetas[-1], "direction": v}, {}, honest) is None
    lie = {"hvp": np.asarray(honest["hvp"]) * 1.5}
    bad = book.validate("hvp", {"theta": thetas[-1], "direction": v}, {}, lie)
    assert bad is not None


def test_the_level_bundle_route_is_refused_by_its_memory_estimate_before_any_data_query(monkeypatch):
    from drflmodel import _memory
    from drflmodel.problems.minmax.level_bundle import bundle_model_bytes

    assert bundle_model_bytes(1, 2717) > 10 * 2**30          # the 13 GiB the honest sweep met
    rng = np.random.default_rng(1)
    Xs = [np.hstack([np.ones((n, 1)), rng.normal(size=(n, 200))]) for n in (20, 25)]
    ys = [np.where(rng.normal(size=X.shape[0]) > 0, 1.0, -1.0) for X in Xs]
    prob = dm.FederatedDRO(dm.Federation.from_arrays(Xs, ys, task="classification"), dm.losses.Hinge(),
                           weights=dm.sets.Simplex(2), l2=1e-2)
    monkeypatch.setattr(_memory, "available_memory", lambda: bundle_model_bytes(2, prob.dim) // 2)
    sites = _sites(prob)
    with pytest.raises(MemoryLimitError, match="level_bundle"):
        federated_solve(prob, LocalChannel(sites), method="level_bundle")
    assert all(site.counts.get("evaluations", 0) == 0 and site.counts.get("values", 0) == 0 for site in sites)


def _softmax_site():
    rng = np.random.default_rng(5)
    X = np.hstack([np.ones((9, 1)), rng.normal(size=(9, 4)) * 10.0 ** rng.uniform(-2, 2, size=4)])
    y = np.arange(9) % 3
    fed = dm.Federation.from_arrays([X, X[:4]], [y, y[:4]], task="multiclass", classes=[0, 1, 2])
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.Simplex(2), l2=1e-3)
    return prob, Site.from_problem(prob, 0), X


def _book_with_row_norm(site, R):
    book = validation.ClientBook(dm.losses.Multinomial())
    book.keep("describe", {}, {}, site.answer("describe"))
    book.keep("row_norm", {}, {}, {"max_row_norm": np.array([R])})
    return book


def test_a_declared_row_norm_below_the_mean_its_hessian_implies_is_rejected_and_an_inflated_one_is_capped():
    prob, site, X = _softmax_site()
    zero = np.zeros(prob.dim)
    answer = site.answer("evaluate", {"theta": zero}, {"hessian": True})
    true_R = float(np.linalg.norm(X, axis=1).max())
    q = float(np.mean(np.sum(X * X, axis=1)))
    honest = _book_with_row_norm(site, true_R)
    assert honest.validate("evaluate", {"theta": zero}, {"hessian": True}, answer) is None
    deflated = _book_with_row_norm(site, 0.9 * np.sqrt(q))           # below the root mean square: impossible
    bad = deflated.validate("evaluate", {"theta": zero}, {"hessian": True}, answer)
    assert bad is not None and bad.check == "row norm"
    inflated = _book_with_row_norm(site, 1e6 * true_R)
    assert inflated.validate("evaluate", {"theta": zero}, {"hessian": True}, answer) is None
    inflated.keep("evaluate", {"theta": zero}, {"hessian": True}, answer)
    cap = np.sqrt(X.shape[0] * q)                                   # max ||x_j||^2 <= sum ||x_j||^2 = N q
    assert true_R <= inflated.row_norm_used <= cap * (1 + 1e-10)
    honest.keep("evaluate", {"theta": zero}, {"hessian": True}, answer)
    assert honest.row_norm_used == true_R                            # an honest row norm is never capped


def test_the_level_bundle_route_states_its_plan_and_stops_at_what_is_left_of_the_run():
    rng = np.random.default_rng(2)
    Xs = [np.hstack([np.ones((n, 1)), rng.normal(size=(n, 5))]) for n in (20, 25, 15)]
    ys = [np.where(X[:, 1] + rng.normal(size=X.shape[0]) > 0, 1.0, -1.0) for X in Xs]
    prob = dm.FederatedDRO(dm.Federation.from_arrays(Xs, ys, task="classification"), dm.losses.Hinge(),
                           weights=dm.sets.Simplex(3), l2=1e-2)
    full = federated_solve(prob, LocalChannel(_sites(prob)), method="level_bundle")
    assert full.info["plan"]["route"] == "level_bundle" and full.info["plan"]["limits"]["evaluations"] == 301
    assert full.info["federated"]["queries"]["evaluate"]["exchanges"] > 8
    channel = LocalChannel(_sites(prob))
    channel.ledger.queries["evaluate"] = {"exchanges": 990, "answers": 0}   # an earlier route of this run
    sol = federated_solve(prob, channel, method="level_bundle")
    assert sol.info.get("fault") is None and "exhausted" in sol.info["plan"]
    assert sol.info["plan"]["limits"]["evaluations"] == 1000 - 990 - 2
    assert all(site.counts.get("evaluations", 0) <= 8 for site in channel.sites)
    conic = prob.solve(method="conic")                    # the bound it returns still brackets the optimum
    assert sol.lower_bound <= conic.upper_bound + 1e-7 and conic.lower_bound <= sol.upper_bound + 1e-7


def test_block_newton_after_an_earlier_route_states_a_plan_within_what_is_left_and_names_nobody():
    """Was: a forced hessian_free run stopping at its plan fell back to block_newton, whose full plan
    (331 evaluations) an honest client with 33 left refused -- the client was named."""
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=4, samples=[20, 25, 30], seed=1)
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(3, 0.5), l2=0.05)
    channel = LocalChannel(_sites(prob))
    channel.ledger.queries["evaluate"] = {"exchanges": 990, "answers": 0}   # an earlier route of this run
    for site in channel.sites:
        site.counts["evaluations"] = 990                                     # what each client answered it
    sol = federated_solve(prob, channel, method="block_newton")
    assert sol.info.get("fault") is None
    assert sol.info["plan"]["route"] == "block_newton"
    assert sol.info["plan"]["limits"]["evaluations"] == 1000 - 990 - channel.retries
    assert all(site.counts["evaluations"] <= 1000 for site in channel.sites)
