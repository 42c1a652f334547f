"""Wasserstein DRFL federated (issue 42, item 7): every client answers for its own ball, no row
leaves a site, and the server's certified answer equals the centralized one on the in-process
channel (LocalChannel). The centralized answer (the conic route, rows in one CVXPY model) is the
independent reference; the server is given only the problem's parameters (ServerSpec)."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import LocalChannel
from drflmodel.errors import InvalidParameterError
from drflmodel.losses import Logistic, Multinomial
from drflmodel.problems.wasserstein import WassersteinDRFL
from drflmodel.problems.wasserstein.federated import QUERIES, BallClient, ServerSpec, federated_solve

from .test_wasserstein_multiclass import binary_with_intercept, small_multiclass

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")


class RecordingChannel(LocalChannel):
    """LocalChannel that keeps every answer's array names and sizes (what left each site)."""

    def __init__(self, sites):
        super().__init__(sites)
        self.sent = []

    def _send(self, query, contents):
        replies, errors = super()._send(query, contents)
        for arrays in replies.values():
            self.sent.append((query, {k: int(np.size(v)) for k, v in arrays.items()}))
        return replies, errors


def channel_of(prob):
    return RecordingChannel([BallClient.from_problem(prob, s) for s in range(prob.n_clients)])


def rel(a, b):
    return abs(a - b) / max(1.0, abs(b))


CASES = {
    "logistic-l2-simplex": (lambda: binary_with_intercept([15, 18, 20], seed=1), Logistic(),
                            dict(radius=[0.1, 0.2, 0.05], kappa=1.0, norm=2, weights=dm.sets.Simplex(3), l2=0.1)),
    "softmax-free-intercept-ball": (lambda: small_multiclass(K=3, d=3, sizes=(15, 18, 20), seed=1), Multinomial(),
                                    dict(radius=[0.1, 0.2, 0.05], kappa=1.0, norm=np.inf,
                                         weights=dm.sets.LpBall(np.full(3, 1 / 3), 0.2, 2), l2=0.05,
                                         penalize_intercept=False)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_federated_equals_centralized_on_the_local_channel(case):
    make, loss, kw = CASES[case]
    fed = make()
    prob = WassersteinDRFL(fed, loss, **kw)
    ref = prob.solve()                                  # centralized: rows in one conic model
    assert ref.status == "optimal"
    spec = ServerSpec.from_problem(prob)                # the server keeps parameters, no row
    channel = channel_of(prob)
    sol = federated_solve(spec, channel, rounds=300, c=1.0, check_every=20)
    assert sol.status == "optimal", sol.info["history"][-3:]
    assert sol.relative_gap <= 1e-6
    # both certificates bracket the same optimum (to the conic solvers' dual residual) ...
    assert sol.lower_bound <= ref.upper_bound + 1e-8 * max(1.0, abs(ref.upper_bound))
    assert ref.lower_bound <= sol.upper_bound + 1e-8 * max(1.0, abs(sol.upper_bound))
    # ... so the values agree to the gaps
    assert rel(sol.value, ref.value) <= 2e-6
    # the federated U is the centralized objective at the federated point (clients' closed forms)
    assert rel(sol.upper_bound, prob.objective(sol.theta)) <= 1e-12
    # what left the sites: the three queries, each answer at most P + 1 floats (never a row)
    P = prob.dim
    assert {q for q, _ in channel.sent} == set(QUERIES)
    assert max(sum(sizes.values()) for _, sizes in channel.sent) <= P + 1
    assert all(set(sizes) <= set(QUERIES[q]) for q, sizes in channel.sent)


def test_the_certificate_is_valid_at_any_round():
    """After one round the point is poor, but L <= p* <= U still holds (weak duality)."""
    make, loss, kw = CASES["logistic-l2-simplex"]
    prob = WassersteinDRFL(make(), loss, **kw)
    ref = prob.solve()
    sol = federated_solve(ServerSpec.from_problem(prob), channel_of(prob), rounds=2, c=1.0, check_every=1)
    assert sol.status != "optimal"
    assert sol.lower_bound <= ref.lower_bound + 1e-9 and sol.upper_bound >= ref.upper_bound - 1e-9
    assert sol.relative_gap > 1e-6


def test_client_values_are_the_centralized_worst_cases():
    make, loss, kw = CASES["softmax-free-intercept-ball"]
    prob = WassersteinDRFL(make(), loss, **kw)
    channel = channel_of(prob)
    spec = ServerSpec.from_problem(prob)
    from drflmodel.problems.wasserstein.federated import _ball_options

    theta = np.random.default_rng(0).normal(size=prob.dim)
    got = channel.ask("wasserstein_value", {"theta": theta},
                      per_client_options={s: _ball_options(spec.model, spec.radius[s]) for s in range(3)})
    z, lam = prob.worst_case_losses(theta)
    assert np.allclose([float(got[s]["value"][0]) for s in range(3)], z, rtol=1e-13, atol=0)
    assert np.allclose([float(got[s]["lambda"][0]) for s in range(3)], lam, rtol=1e-13, atol=0)


def test_refusals():
    fed = binary_with_intercept([10, 12, 14])
    with pytest.raises(InvalidParameterError, match="unbounded support"):
        ServerSpec.from_problem(WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.1, kappa=1.0, norm=1,
                                                weights=dm.sets.Simplex(3), support=(np.eye(3)[1:], np.full(2, 50.0))))
    with pytest.raises(InvalidParameterError, match="WAFL"):
        ServerSpec.from_problem(dm.problems.wasserstein.wafl(fed, Logistic(), 0.1, 1.0, 2))
    client = BallClient(fed.clients[0].X, fed.clients[0].y, Logistic())
    with pytest.raises(InvalidParameterError, match="unknown query"):
        client.answer("rows")
    prob = WassersteinDRFL(fed, Logistic(), radius=0.1, kappa=1.0, norm=2, weights=dm.sets.Simplex(3))
    with pytest.raises(InvalidParameterError, match="rounds"):
        federated_solve(prob, channel_of(prob), rounds=0)
