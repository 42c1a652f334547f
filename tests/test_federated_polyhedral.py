"""The federated ``block_newton`` route on polyhedral weight sets (CVaR, the whole simplex of agnostic
federated learning), and ``auto``'s fallback after it when the run's client budgets are spent."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel, federated_solve
from drflmodel.problems.engine import plan as plan_module
from drflmodel.problems.minmax import block_newton_steps

L2 = 1e-3


def _digits_like(W):
    """20 clients, softmax over 4 classes, 24 features: P = 100 (a small digits)."""
    fed = dm.datasets.gaussian_mixture(2000, 24, 4, n_clients=20, alpha=0.5, seed=0)
    return dm.FederatedDRO(fed, dm.losses.Multinomial(), W, l2=L2, penalize_intercept=False)


@pytest.mark.parametrize("W, most", [(dm.sets.Simplex(20), 35), (dm.sets.CVaR(20, 0.5), 35)])
def test_polyhedral_sets_certify_in_few_exchanges(W, most):
    """Measured: simplex 23 exchanges (57 when the products were combined with the point's worst-case
    vertex), CVaR(0.5) 22 (24); the bound is ``most``. The answer agrees with the central solve (an
    independent route, ``hessian_free`` on the held rows) to 1e-8 and every answer is at most 4P floats."""
    prob = _digits_like(W)
    channel = LocalChannel.from_problem(prob)
    sol = federated_solve(prob, channel)
    central = _digits_like(W).solve()
    assert sol.info["method"] == "block_newton" and sol.status == "optimal"
    assert channel.ledger.exchanges <= most
    assert channel.ledger.largest_answer <= 4 * prob.dim
    scale = max(1.0, abs(central.upper_bound))
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-8 * scale
    assert max(sol.lower_bound, central.lower_bound) <= min(sol.upper_bound, central.upper_bound) + 1e-12 * scale


def _afl_small():
    fed = dm.datasets.gaussian_mixture(400, 6, 2, n_clients=4, alpha=0.5, seed=1)
    return dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(4), l2=L2, penalize_intercept=False)


def _spend_then_stop(evaluations):
    """A ``block_newton`` run that spends ``evaluations`` Hessian-free evaluations and stops uncertified."""
    def minimize(self, theta, max_iterations):
        for k in range(evaluations):
            self._point(theta + 1e-6 * (k + 1))
        return theta
    return minimize


def test_fallback_after_hessian_free_evaluations_runs_sqp(monkeypatch):
    """block_newton spends 120 evaluations without a Hessian (more than the default policy's 100
    Hessians) and stops short: the fallback ``sqp`` still has the whole Hessian budget (the ledger
    counts the Hessians answered, not the evaluations) and certifies."""
    monkeypatch.setattr(block_newton_steps.BlockNewtonRun, "minimize", _spend_then_stop(120))
    prob = _afl_small()
    channel = LocalChannel.from_problem(prob)
    sol = federated_solve(prob, channel)
    assert [a["method"] for a in sol.info["route_attempts"]] == ["block_newton"]
    assert sol.info["method"] == "sqp" and sol.status == "optimal"
    assert channel.ledger.queries["evaluate"]["exchanges"] > 120
    central = _afl_small().solve()
    assert abs(sol.upper_bound - central.upper_bound) <= 1e-8 * max(1.0, abs(central.upper_bound))


def test_fallback_not_started_when_the_budget_left_cannot_run_it(monkeypatch):
    """With 2 Hessians per client in the default budgets, the ``sqp`` route (a Hessian at the start and
    two per step) is not started after block_newton stops short: the answer is block_newton's, and
    the reason names the budget; no client was asked a Hessian."""
    monkeypatch.setattr(block_newton_steps.BlockNewtonRun, "minimize", _spend_then_stop(3))
    monkeypatch.setitem(plan_module.DEFAULT_BUDGETS, "hessians", 2)
    prob = _afl_small()
    channel = LocalChannel.from_problem(prob)
    sol = federated_solve(prob, channel)
    assert sol.info["method"] == "block_newton" and sol.status != "optimal"
    assert "route_attempts" not in sol.info
    refused = sol.info["fallback_not_started"]
    assert refused["method"] == "sqp"
    assert "admit 0 hessians per client" in refused["why"] and "3 hessians" in refused["why"]
    assert channel.ledger.most_answers("hessian") == 0


def test_left_on_counts_hessians_answered():
    """``left_on`` after a run with Hessian answers: the Hessian budget less the busiest client's
    Hessians; an evaluation without a Hessian leaves it whole (hand-counted)."""
    prob = _afl_small()
    channel = LocalChannel.from_problem(prob)
    theta = np.zeros(prob.dim)
    channel.ask("evaluate", {"theta": theta}, per_client_options={i: {"hessian": False} for i in range(4)})
    assert plan_module.left_on(channel)["hessians"] == 100 - channel.retries
    channel.ask("evaluate", {"theta": theta}, clients=[1], per_client_options={1: {"hessian": True}})
    channel.ask("evaluate", {"theta": theta}, clients=[1, 2], per_client_options={1: {"hessian": True},
                                                                                 2: {"hessian": True}})
    left = plan_module.left_on(channel)
    assert left["hessians"] == 100 - 2 - channel.retries
    assert left["evaluations"] == 1000 - 3 - channel.retries
