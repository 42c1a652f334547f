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
    # auto's block_newton asks the bound terms with each evaluation here (P = 31: room in 4P floats), so a scaled
    # gradient contradicts its own answer's intercept gradient at the first point (the two-point check below)
    "gradients x10": (_scale("gradient", 10.0), "bound gradient"),
    "gradients negated": (_scale("gradient", -1.0), "bound gradient"),
    "values x0.1": (_scale("value", 0.1), "value at theta = 0"),
    "values - 1": (_shift("value", -1.0), "loss range"),
    "NaN values": (_replace("value", lambda v: np.full_like(v, np.nan)), "finite"),
    "inf gradients": (_replace("gradient", lambda g: np.full_like(g, np.inf)), "finite"),
    "short gradients": (_replace("gradient", lambda g: g[:-1]), "shape"),
    "huge values": (_replace("value", lambda v: np.full_like(v, 1e300)), "value at theta = 0"),
    "non-PSD Hessians": (_scale("hessian", -1.0), "Hessian PSD"),
    "non-PSD products": (_scale("hvp", -1.0), "Hessian-vector product PSD"),     # block_newton's evaluations
    # the bound terms carried by block_newton's evaluations: checked as the bound_terms answer is
    "non-PSD intercept curvature": (_scale("intercept_hessian", -1.0), "Hessian PSD"),
    "intercept gradients x10": (_scale("intercept_gradient", 10.0), "bound gradient"),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_lying_client_is_rejected_by_the_named_check_and_never_certifies(lie):
    corrupt, check = LIES[lie]
    problem = _problem()
    channel = _channel(problem, corrupt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # auto ships no Hessian on this problem (block_newton): the Hessian lie is told to the route that asks them
        sol = federated_solve(problem, channel, method="sqp" if "Hessians" in lie else "auto")
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


def test_scaled_hessians_end_the_federated_solve_failed_never_with_an_earlier_certificate():
    """Before every answer was validated in federated_solve, a Hessian x10 rejected mid-solve returned the
    certificate completed before the rejection as 'optimal'; a lie ends the solve 'failed'."""
    problem = _problem()
    sol = federated_solve(problem, _channel(problem, _scale("hessian", 10.0)), method="sqp")   # the route asking Hessians
    assert sol.status == "failed" and sol.theta is None and sol.lower_bound == -np.inf
    fault = sol.info["fault"]
    assert (fault["partition"], fault["node"], fault["query"], fault["kind"], fault["check"]) == \
        (0, None, "evaluate", "rejected", "curvature vs gradients")
    assert fault["numbers"]["dHd"] > fault["numbers"]["inner"] > 0 and fault["attempts"] == 3
    assert fault["message"].endswith("no certificate is returned (any earlier one used this client's answers)")
    assert sol.info["federated"]["fault"] == fault


def test_federated_solve_validates_by_default_and_can_be_told_not_to():
    """The issue's measurement: a client sending ten times its gradients makes the unchecked solve certify a
    false optimum (breast cancer / CVaR / logistic, l2 = 1: lower bound 0.43427 above the honest optimum
    0.41877); the default solve rejects it by name."""
    fed = dm.datasets.breast_cancer(n_clients=4, seed=0)
    problem = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=1.0)
    honest = problem.solve()

    def lying():
        channel = LocalChannel.from_problem(problem)
        channel.sites[0] = Lying(channel.sites[0], _scale("gradient", 10.0))
        return channel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unchecked = federated_solve(problem, lying(), check_answers=False)
    assert not unchecked.info["federated"]["checked"] and unchecked.info["federated"]["rejections"] == []
    assert unchecked.status == "optimal" and unchecked.lower_bound > honest.upper_bound + 1e-2   # a false claim
    checked = federated_solve(problem, lying())
    assert checked.status == "failed" and checked.info["federated"]["checked"]
    # the scaled gradient contradicts the intercept gradient of the bound terms carried by the same answer
    assert checked.info["fault"]["check"] == "bound gradient" and checked.info["fault"]["partition"] == 0
    with pytest.raises(dm.InvalidParameterError, match="check_answers must be True or False"):
        federated_solve(problem, LocalChannel.from_problem(problem), check_answers="yes")


def test_a_fault_is_classified_by_its_worst_attempt():
    from drflmodel.client_oracle.protocol import ClientFault as Fault

    rejected = "answer rejected by the server's check 'finite': value is not finite"
    refused = "QueryRefused: site refuses the 'statistics' query: its policy allows at most 1 statistics answers"
    assert Fault(0, "values", [rejected, refused]).kind == "rejected"       # a lie, then a refused re-ask
    assert Fault(0, "values", [refused]).kind == "refused"
    assert Fault(0, "values", ["no reply within 60 s", "client error: ValueError: x"]).kind == "no answer"
    assert Fault(2, "values", [refused], node=7).to_dict()["node"] == 7


def test_scaled_hessian_vector_products_are_caught_against_gradient_differences():
    """For the Hessian-free routes (issue 30): products x10 are PSD and symmetric alone; against the gradients
    at two points they are not -- Cauchy-Schwarz with d'Hd bounded by the gradient difference."""
    problem = _problem()
    honest, lying = _channel(problem), _channel(problem, _scale("hvp", 10.0))
    a, b = np.zeros(problem.dim), np.full(problem.dim, 1e-2)
    for channel in (honest, lying):
        channel.ask("describe")
        channel.ask("row_norm")
        channel.ask("evaluate", {"theta": a})
        channel.ask("evaluate", {"theta": b})
    for direction in (b - a, np.linspace(-1, 1, problem.dim) + (b - a)):
        honest.ask("hvp", {"theta": a}, per_client={i: {"direction": direction} for i in range(4)})
    assert honest.rejections == []
    with pytest.raises(ClientFault) as exc:
        lying.ask("hvp", {"theta": a}, per_client={i: {"direction": b - a} for i in range(4)})
    assert exc.value.client == 0 and exc.value.check == "Hessian-vector product vs gradients"
