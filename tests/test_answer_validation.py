"""CheckedChannel: every client answer validated at the server before a route uses it. Honest clients
certify exactly as without the checks (no rejection, the same optimum); a lying client's answers are
rejected by the named check, retried, and end in a ClientFault naming the client and the check; a
one-off bad answer is retried and the solve still certifies."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import CheckedChannel
from drflmodel.client_oracle import ClientFault, LocalChannel, federated_solve
from tests._lying import Lying, edit


def _problem(loss=None, weights="cvar", scale=None, seed=0):
    loss = loss or dm.losses.Logistic()
    fed = (dm.datasets.diabetes(n_clients=4, seed=seed) if loss.task == "regression"
           else dm.datasets.breast_cancer(n_clients=4, seed=seed))
    if scale is not None:                           # ill-conditioned rows: columns scaled 1e-3 .. 1e3
        fed = dm.Federation.from_arrays([c.X * scale[: c.X.shape[1]] for c in fed.clients],
                                        [c.y for c in fed.clients], task=fed.task)
    w = dm.sets.CVaR(4, 0.5) if weights == "cvar" else dm.sets.ChiSquare(4, 0.1)
    return dm.FederatedDRO(fed, loss, weights=w, l2=0.01)


def _channel(problem, corrupt=None, retries=2):
    inner = LocalChannel.from_problem(problem, retries=retries)
    if corrupt is not None:
        inner.sites[0] = Lying(inner.sites[0], corrupt)
    return CheckedChannel(inner)


SCALE = np.resize(np.array([1.0, 1e-3, 1e3, 30.0, 0.1]), 40)


@pytest.mark.parametrize("loss, weights, scale", [
    (dm.losses.Logistic(), "cvar", None), (dm.losses.Logistic(), "chi2", SCALE),
    (dm.losses.Squared(), "cvar", SCALE), (dm.losses.SmoothHinge(), "chi2", None)],
    ids=["logistic", "logistic-ill-conditioned", "squared-statistics", "smooth-hinge"])
def test_honest_clients_certify_as_without_checks(loss, weights, scale):
    problem = _problem(loss, weights, scale)
    plain = federated_solve(problem, LocalChannel.from_problem(problem))
    channel = _channel(problem)
    checked = federated_solve(problem, channel)
    assert channel.rejections == []
    assert checked.status == plain.status == "optimal"
    np.testing.assert_allclose(checked.theta, plain.theta, rtol=0, atol=1e-12)


def _scale(key, factor):
    return edit(key, lambda a: factor * a)


def _shift(key, by):
    return edit(key, lambda a: a + by)


_replace = edit


LIES = {
    "gradients x10": (_scale("gradient", 10.0), "first-order convexity"),
    "gradients negated": (_scale("gradient", -1.0), "first-order convexity"),
    "values x0.1": (_scale("value", 0.1), "value at theta = 0"),
    "values - 1": (_shift("value", -1.0), "loss range"),
    "NaN values": (_replace("value", lambda v: np.full_like(v, np.nan)), "finite"),
    "inf gradients": (_replace("gradient", lambda g: np.full_like(g, np.inf)), "finite"),
    "short gradients": (_replace("gradient", lambda g: g[:-1]), "shape"),
    "huge values": (_replace("value", lambda v: np.full_like(v, 1e300)), "value at theta = 0"),
    "non-PSD Hessians": (_scale("hessian", -1.0), "Hessian PSD"),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_lying_client_is_rejected_by_the_named_check_and_never_certifies(lie):
    corrupt, check = LIES[lie]
    problem = _problem()
    channel = _channel(problem, corrupt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = federated_solve(problem, channel)
    assert sol.status == "failed" and sol.theta is None, (lie, sol.status)
    rejected = [r for r in channel.rejections if r["client"] == 0]
    assert rejected and rejected[0]["check"] == check, channel.rejections[:2]
    assert all(r["client"] == 0 for r in channel.rejections)          # the honest clients are never blamed
    assert sol.info["fault"]["message"].startswith("client 0 failed") and sol.info["fault"]["partition"] == 0


def test_the_fault_names_the_check_and_its_numbers():
    problem = _problem()
    channel = _channel(problem, _scale("gradient", 10.0))
    channel.ask("describe")
    channel.ask("evaluate", {"theta": np.zeros(problem.dim)})       # one tangent, nothing to contradict yet
    with pytest.raises(ClientFault) as exc:
        channel.ask("evaluate", {"theta": np.full(problem.dim, 0.05)})
    assert exc.value.client == 0 and exc.value.attempts == 3
    assert exc.value.reasons[-1].startswith("answer rejected by the server's check 'first-order convexity': h(theta_b)")
    numbers = channel.rejections[-1]["numbers"]
    assert numbers["violation"] > 0 and numbers["scale"] > 0


def test_a_one_off_bad_answer_is_retried_and_the_solve_still_certifies():
    def once(query, out, call):
        if query == "evaluate" and call == 3:
            out["value"] = np.array([np.nan])
        return out

    problem = _problem()
    channel = _channel(problem, once)
    sol = federated_solve(problem, channel)
    assert sol.status == "optimal"
    assert [(r["client"], r["check"]) for r in channel.rejections] == [(0, "finite")]
    assert channel.ledger.retries == 1


def test_statistics_no_rows_can_have_are_rejected():
    problem = _problem(dm.losses.Squared())
    for corrupt, what in ((_replace("yy", lambda v: -1e6 + 0 * v), "y'y = -1e+06 < 0"),
                          (_scale("moment", 1e3), "is not PSD"),
                          (_replace("gram", lambda g: g[:-1]), "gram (upper triangle) has")):
        channel = _channel(problem, corrupt)
        sol = federated_solve(problem, channel)
        assert sol.status == "failed" and what in channel.rejections[0]["detail"], channel.rejections[:1]


def test_scaled_hessians_are_caught_against_gradient_differences():
    """A Hessian x10 is PSD and of plausible size alone; against the gradients at two points it is not
    (generalized self-concordance of the logistic loss bounds d'(g_b - g_a) by d'H_a d)."""
    problem = _problem()
    channel = _channel(problem, _scale("hessian", 10.0))
    channel.ask("describe")
    channel.ask("row_norm")
    channel.ask("evaluate", {"theta": np.zeros(problem.dim)}, options={"hessian": True})
    with pytest.raises(ClientFault) as exc:
        channel.ask("evaluate", {"theta": np.full(problem.dim, 1e-3)}, options={"hessian": True})
    assert exc.value.client == 0 and "'curvature vs gradients'" in exc.value.reasons[-1]
