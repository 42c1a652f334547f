"""Tests of the shared :class:`Problem` base behaviour (DESIGN.md §4.1): solver order per cone
type, retry when a certificate fails, the ``"failed"`` / ``"infeasible"`` statuses, sweeps, and
``client_view`` against the vectorized :class:`ClientObjectives`."""

from __future__ import annotations

import numpy as np
import cvxpy as cp
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.losses import Logistic, Squared, Huber
from drflmodel.objectives import ClientObjectives
from drflmodel.problems.engine.problem import Problem
from drflmodel._solver_sequence import installed_solvers
from drflmodel.solution import Solution


def _fed(task="regression", n=3, d=3, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.normal(size=(10 + 3 * i, d)) for i in range(n)]
    if task == "regression":
        ys = [X @ rng.normal(size=d) + 0.1 * rng.normal(size=X.shape[0]) for X in Xs]
    else:
        ys = [np.where(X @ rng.normal(size=d) + rng.normal(size=X.shape[0]) > 0, 1.0, -1.0) for X in Xs]
    return dm.Federation.from_arrays(Xs, ys, task=task)


class AverageRisk(Problem):
    """Toy oracle: min_θ (1/n) Σ f_i(θ) with the strong-convexity lower bound of the mean.

    ``corrupt`` maps a solver name to how its certificate is damaged:
    ``"loose"`` lowers L by 1 (a valid but open gap), ``"invalid"`` raises L above U.
    """

    family = "toy"

    def __init__(self, fed, loss, l2=0.1, corrupt=None, psd=False, infeasible=False):
        super().__init__(fed, loss, l2)
        self.corrupt = corrupt or {}
        self.psd = psd
        self.infeasible = infeasible
        self.shift = 0.0

    def _build(self):
        self.theta = cp.Variable(self.dim)
        self.shift_par = cp.Parameter(name="shift", value=self.shift)
        self._parameters = {"shift": self.shift_par}
        obj = sum(self.objectives.expressions(self.theta)) / self.n_clients + self.shift_par
        cons = []
        if self.psd == "variable":
            S = cp.Variable((2, 2), PSD=True)
            cons += [S[0, 0] == 1, S[1, 1] == 1]
        elif self.psd == "lmi":
            S = cp.Variable((2, 2), symmetric=True)
            cons += [S >> 0, S[0, 0] == 1, S[1, 1] == 1]
        if self.infeasible:
            cons += [self.theta[0] >= 1, self.theta[0] <= 0]
        return cp.Problem(cp.Minimize(obj), cons)

    def objective(self, theta):
        return float(self.client_losses(theta).mean()) + self.shift

    def certify_solved(self, solver):
        th = np.asarray(self.theta.value, float)
        U = self.objective(th)
        g = self.objectives.gradients(th).mean(axis=0)
        L = U - g @ g / (2 * self.l2)          # valid: the mean is l2-strongly convex
        kind = self.corrupt.get(solver)
        if kind == "loose":
            L -= 1.0
        elif kind == "invalid":
            L = U + 10.0
        return Solution(theta=th, weights=None, client_losses=self.client_losses(th), value=U,
                        lower_bound=L, upper_bound=U, status="optimal", certificate="toy",
                        info={"solver": solver})

    def set_parameter(self, name, value):
        if name != "shift":
            return super().set_parameter(name, value)
        self.shift = float(value)
        if self._cp_problem is not None:
            self.shift_par.value = self.shift


NEEDED = {"CLARABEL", "ECOS", "SCS"}
pytestmark = pytest.mark.skipif(not NEEDED <= set(installed_solvers()),
                                reason="needs Clarabel, ECOS and SCS")


def test_solver_order_by_cone_type():
    assert AverageRisk(_fed(), Squared()).solver_order() == ["CLARABEL", "ECOS", "SCS"]
    for kind in ("variable", "lmi"):   # a PSD-declared variable and an explicit LMI
        assert AverageRisk(_fed(), Squared(), psd=kind).solver_order() == ["CLARABEL", "SCS"]


def test_requested_solver_is_tried_first():
    sol = AverageRisk(_fed(), Squared()).solve(solver="scs")
    assert sol.info["attempts"][0]["solver"] == "SCS"


def test_certified_answer_stops_after_first_solver():
    prob = AverageRisk(_fed(), Squared())
    sol = prob.solve()
    assert sol.status == "optimal" and [a["solver"] for a in sol.info["attempts"]] == ["CLARABEL"]
    # independent check: the mean of squared losses is a quadratic with a closed-form minimizer
    Q, r, _ = prob.objectives.quadratic_forms()
    theta = np.linalg.solve(Q.mean(0), r.mean(0))
    assert np.linalg.norm(sol.theta - theta) < 1e-6


def test_retry_when_certificate_does_not_close():
    prob = AverageRisk(_fed(), Squared(), corrupt={"CLARABEL": "loose"})
    sol = prob.solve()
    att = sol.info["attempts"]
    assert [a["solver"] for a in att] == ["CLARABEL", "ECOS"]
    assert att[0]["status"] == "optimal_within_gap" and att[1]["status"] == "optimal"
    assert sol.status == "optimal" and sol.info["solver"] == "ECOS"


def test_open_gap_everywhere_is_reported_not_called_optimal():
    prob = AverageRisk(_fed(), Squared(), corrupt={s: "loose" for s in NEEDED})
    sol = prob.solve()
    assert [a["solver"] for a in sol.info["attempts"]] == ["CLARABEL", "ECOS", "SCS"]
    assert sol.status == "optimal_within_gap" and sol.gap >= 1.0 - 1e-6


def test_invalid_certificate_everywhere_is_failed():
    prob = AverageRisk(_fed(), Squared(), corrupt={s: "invalid" for s in NEEDED})
    sol = prob.solve()
    assert sol.status == "failed"
    assert len(sol.info["attempts"]) == 3


def test_invalid_certificate_never_preferred_over_a_valid_one():
    """A lower bound above the upper bound is a broken certificate; a later solver's valid (if
    open) gap must win over it."""
    prob = AverageRisk(_fed(), Squared(), corrupt={"CLARABEL": "invalid", "ECOS": "loose", "SCS": "loose"})
    sol = prob.solve()
    assert sol.status == "optimal_within_gap"
    assert sol.lower_bound <= sol.upper_bound


def test_no_solver_answer_is_failed():
    prob = AverageRisk(_fed(), Squared())
    prob.solver_order = lambda: ["NOT_A_SOLVER"]
    sol = prob.solve()
    assert sol.status == "failed" and sol.theta is None
    assert "error" in sol.info["attempts"][0]
    sol.to_json()  # serializable even when failed


def test_infeasible_problem():
    sol = AverageRisk(_fed(), Squared(), infeasible=True).solve()
    assert sol.status == "infeasible"


def test_sweep_one_solution_per_value_without_rebuild():
    prob = AverageRisk(_fed(), Squared())
    compiled = prob.build()
    sols = prob.sweep("shift", [0.0, 1.0, 2.5])
    assert prob.build() is compiled
    assert [s.info["shift"] for s in sols] == [0.0, 1.0, 2.5]
    assert all(s.status == "optimal" for s in sols)
    np.testing.assert_allclose([s.value - sols[0].value for s in sols], [0.0, 1.0, 2.5], atol=1e-7)
    with pytest.raises(InvalidParameterError, match="shift"):
        prob.set_parameter("radius", 1.0)


@pytest.mark.parametrize("loss,task", [(Squared(), "regression"), (Huber(0.5), "regression"),
                                       (Logistic(), "classification")])
def test_client_view_matches_client_objectives(loss, task):
    fed = _fed(task, n=4)
    prob = AverageRisk(fed, loss, l2=0.3)
    obj = ClientObjectives(fed, loss, 0.3)
    theta = np.random.default_rng(1).normal(size=fed.dim)
    vals, grads, hess = obj.values(theta), obj.gradients(theta), obj.hessians(theta)
    for i in range(fed.n_clients):
        view = prob.client_view(i)
        assert view.size == fed.sizes[i]
        assert view.value(theta) == pytest.approx(vals[i], rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(view.gradient(theta), grads[i], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(view.hessian(theta), hess[i], rtol=1e-10, atol=1e-12)
        # finite differences of the view's own value (independent of ClientObjectives)
        e = np.eye(fed.dim) * 1e-6
        fd = np.array([(view.value(theta + e[k]) - view.value(theta - e[k])) / 2e-6 for k in range(fed.dim)])
        np.testing.assert_allclose(view.gradient(theta), fd, rtol=1e-5, atol=1e-6)


def test_client_view_minibatch_seeded_and_unbiased():
    fed = _fed("classification", n=3)
    prob = AverageRisk(fed, Logistic(), l2=0.1)
    theta = np.array([0.3, -0.2, 0.5])
    view = prob.client_view(1)
    g1 = view.minibatch_gradient(theta, 5, seed=7)
    g2 = view.minibatch_gradient(theta, 5, seed=7)
    np.testing.assert_array_equal(g1, g2)
    assert not np.allclose(g1, view.minibatch_gradient(theta, 5, seed=8))
    # unbiased: the mean of many single-sample gradients approaches the full gradient
    rng = np.random.default_rng(0)
    G = np.array([view.minibatch_gradient(theta, 1, seed=rng) for _ in range(20000)])
    se = G.std(axis=0) / np.sqrt(len(G))
    assert np.all(np.abs(G.mean(axis=0) - view.gradient(theta)) < 5 * se + 1e-12)


def test_client_view_index_checked():
    prob = AverageRisk(_fed(), Squared())
    with pytest.raises(InvalidParameterError, match="client index"):
        prob.client_view(3)
    with pytest.raises(InvalidParameterError, match="client index"):
        prob.client_view(-1)


def test_loss_task_mismatch_is_an_error():
    with pytest.raises(InvalidParameterError, match="task"):
        AverageRisk(_fed("regression"), Logistic())
    with pytest.raises(InvalidParameterError, match="l2"):
        AverageRisk(_fed(), Squared(), l2=-1.0)
