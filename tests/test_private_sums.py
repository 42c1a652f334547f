"""Private mode (issue 40, first cut): Flower's quantization, the sum-only channel's error bound and
clipping detection, and the fixed-weight certificate from secure sums only, checked against the
in-process certified solve (an independent route) and against what the server saw."""

import math

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle.private import (SumOnlyChannel, flower_dequantize_sum, flower_quantize,
                                             private_clients, private_fixed_weight_solve)
from drflmodel.client_oracle.private.secure_sum import SumWithheld, flags_per_entry
from drflmodel.errors import InvalidParameterError


class _Fixed:
    """A client answering fixed vectors (for the channel's own tests); keeps what it sent."""

    def __init__(self, vector):
        self.vector = np.asarray(vector, float)

    def contribution(self, query, **params):
        return self.vector


def test_quantize_is_flowers_own_under_the_same_seed():
    quantization = pytest.importorskip("flwr.common.secure_aggregation.quantization")
    z = np.random.default_rng(1).uniform(-9, 9, size=200)          # some entries clip
    for seed in (0, 7):
        np.random.seed(seed)
        theirs = quantization.quantize([z], 8.0, 2 ** 22)[0]
        ours = flower_quantize(z, 8.0, 2 ** 22, np.random.RandomState(seed))
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    # and the server's dequantization of a sum of 3 is Flower's dequantize plus SecAgg+'s offset
    q = [flower_quantize(z * 0.5, 8.0, 2 ** 22, np.random.RandomState(s)) for s in range(3)]
    total = sum(x.astype(np.int64) for x in q)
    theirs = quantization.dequantize([total], 8.0, 2 ** 22)[0] - 2 * 8.0
    assert np.array_equal(flower_dequantize_sum(total, 3, 8.0, 2 ** 22), theirs)


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_the_secure_sum_is_within_its_error_bound(stages):
    rng = np.random.default_rng(stages)
    vectors = [rng.normal(size=50) * np.logspace(-3, 2, 50) for _ in range(7)]
    channel = SumOnlyChannel([_Fixed(v) for v in vectors], stages=stages, seed=3)
    s = channel.sum("x", scale=1.0)
    exact = np.array([math.fsum(v[j] for v in vectors) for j in range(50)])
    assert np.all(np.abs(s.value - exact) <= s.error)
    # the bound is the stochastic rounding's n quanta (times the scale), not far above the error seen
    assert s.widenings == 1                                          # entries up to ~300 > 8: widened once
    quantum, u, scale = 16 / 2 ** 22, 2.0 ** -53, 1024.0
    if stages == 1:   # the clients round to the nearest grid point: n half-quanta (times the scale)
        assert np.max(s.error) == pytest.approx(7 * quantum / 2 * scale, rel=1e-6)
    else:   # each stage divides the rounding error by quantum / c, down to the floating-point floor ~7 n u c s
        rounding = 7 * quantum / 2 * scale * (quantum / 8) ** (stages - 1)
        floor = 7 * 8 * scale * 8 * u * (stages + 1)
        assert np.max(s.error) <= rounding * 1.01 + floor
        assert np.max(s.error) < 1e-5 * 7 * quantum * scale


def test_clipping_is_counted_widened_or_refused_by_name():
    vectors = [np.array([1.0, 5e4]), np.array([2.0, -3.0]), np.array([0.5, 0.25])]
    channel = SumOnlyChannel([_Fixed(v) for v in vectors], max_widenings=2, widen=2.0 ** 10)
    s = channel.sum("x")
    assert s.widenings == 2 and [seen.clipped for seen in channel.seen[:2]] == [1, 1]
    assert np.all(np.abs(s.value - np.array([3.5, 5e4 - 2.75])) <= s.error)
    with pytest.raises(InvalidParameterError, match=r"still clips at 1 client\(s\) after 1 widenings"):
        SumOnlyChannel([_Fixed(v) for v in vectors], max_widenings=1, widen=2.0).sum("x")


@pytest.mark.parametrize("n", [2, 4, 20, 30])
def test_packed_holder_counts_are_the_plain_counts(n):
    """The guard's count round packs the flags (base n + 1): the channel reads back exactly the
    counts of nonzero terms (counted here from the vectors themselves), from fewer entries."""
    rng = np.random.default_rng(n)
    vectors = [np.where(rng.random(57) < 0.3, rng.normal(size=57), 0.0) for _ in range(n)]
    vectors[0][:3], vectors[1][:3] = 1.0, 1.0          # entries 0-2: exactly 2 holders
    counts = (np.array(vectors) != 0).sum(axis=0)
    channel = SumOnlyChannel([_Fixed(v) for v in vectors], min_contributors=n)
    with pytest.raises(SumWithheld) as err:
        channel.sum("x")
    assert err.value.holders.tolist() == counts.tolist()
    sent = channel.seen[0].total.size - 1              # the count round, without the clip flag
    assert sent < 57 and sent == math.ceil(58 / flags_per_entry(n + 1, 8.0, 2 ** 22))


def test_bad_channel_parameters_are_refused_by_name():
    two = [_Fixed([1.0]), _Fixed([2.0])]
    with pytest.raises(InvalidParameterError, match="clipping_range"):
        SumOnlyChannel(two, clipping_range=0.0)
    with pytest.raises(InvalidParameterError, match="modulus_range"):
        SumOnlyChannel(two, quantization_range=2 ** 31)
    with pytest.raises(InvalidParameterError, match="power of two"):
        SumOnlyChannel(two, quantization_range=10 ** 6)
    with pytest.raises(InvalidParameterError, match="stages"):
        SumOnlyChannel(two, stages=0)
    with pytest.raises(InvalidParameterError, match="at least 2 clients"):
        SumOnlyChannel(two[:1])


def _erm(fed, loss, penalize_intercept):
    p = fed.sizes / fed.sizes.sum()
    return dm.FederatedDRO(fed, loss, weights=dm.sets.HCVaR(p, 1.0), l2=0.01, penalize_intercept=penalize_intercept)


@pytest.mark.parametrize("penalize_intercept", [True, False])
def test_private_erm_certifies_the_in_process_optimum(penalize_intercept):
    """breast cancer, 4 sites, logistic: the private certificate reaches 1e-6 and brackets the
    in-process certified optimum (HCVaR at level 1 = ERM, the centralized route)."""
    prob = _erm(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(), penalize_intercept)
    ref = prob.solve()
    cert = private_fixed_weight_solve(prob)
    assert cert.status == "optimal" and cert.relative_gap <= 1e-6
    assert cert.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= cert.upper_bound + 1e-12
    assert abs(cert.upper_bound - ref.upper_bound) <= cert.gap + abs(ref.upper_bound - ref.lower_bound) + 1e-12
    asked = {q.removesuffix(" (holders)") for q in cert.server_saw["sums_by_query"]}
    assert asked <= {"size", "value_gradient", "bound_terms", "intercept_terms", "intercept_values"}
    assert cert.to_dict()["secure_sums"] == cert.secure_sums


def test_private_softmax_with_a_free_intercept_certifies():
    fed = dm.datasets.digits(n_clients=20, seed=0)
    prob = _erm(fed, dm.losses.Multinomial(), penalize_intercept=False)
    cert = private_fixed_weight_solve(prob)
    ref = prob.solve()
    assert cert.status == "optimal" and cert.relative_gap <= 1e-6
    assert cert.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= cert.upper_bound + 1e-12


def test_public_weights_and_their_refusals():
    fed = dm.datasets.breast_cancer(n_clients=4, seed=0)
    lam = np.array([0.1, 0.4, 0.2, 0.3])
    prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(lam, 1.0), l2=0.01)
    ref = prob.solve()
    cert = private_fixed_weight_solve(prob, weights=lam)
    assert cert.relative_gap <= 1e-6 and cert.lower_bound <= ref.upper_bound + 1e-12 <= cert.upper_bound + 2e-12 + ref.upper_bound - ref.lower_bound
    with pytest.raises(InvalidParameterError, match="at least 2 clients a positive weight"):
        private_fixed_weight_solve(prob, weights=[0.0, 1.0, 0.0, 0.0])
    with pytest.raises(InvalidParameterError, match="weights must be 'size'"):
        private_fixed_weight_solve(prob, weights=[0.5, 0.5])
    with pytest.raises(InvalidParameterError, match="l2 must be > 0"):
        private_fixed_weight_solve(dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.HCVaR(lam, 1.0)))


class _Spy:
    """Wraps a private client and keeps every vector it computed (client side, never sent)."""

    def __init__(self, client):
        self.client, self.sent = client, []

    def contribution(self, query, **params):
        out = np.asarray(self.client.contribution(query, **params), float)
        self.sent.append((query, out.copy()))
        return out


def _reveals_one_client(seen_total, contributions, rtol=1e-3) -> bool:
    """True when an array the server received is, entry for entry, one client's own vector."""
    body = seen_total[:-1]                                   # the last entry is the clipping count
    same = [v for v in contributions if v.size == body.size]
    if not same:
        return False
    V = np.stack(same)
    return bool(np.any(np.all(np.abs(V - body) <= 1e-9 + rtol * np.abs(V), axis=1)))


def test_the_server_receives_sums_only_never_one_clients_answer():
    prob = _erm(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(), penalize_intercept=False)
    spies = [_Spy(c) for c in private_clients(prob)]
    channel = SumOnlyChannel(spies, seed=0)
    cert = private_fixed_weight_solve(prob, channel=channel)
    assert cert.status == "optimal"
    assert len(channel.seen) == channel.secure_sums == cert.secure_sums   # one array a secure-sum round
    contributions = [v for spy in spies for q, v in spy.sent if q != "size"]
    assert len(contributions) >= 4 * 30
    for seen in channel.seen:
        if seen.stage == 0 and seen.query != "size":
            assert not _reveals_one_client(seen.total, contributions)
    # the detector itself catches a single client's vector (it could fail)
    one = contributions[5]
    assert _reveals_one_client(np.append(one, 0.0), contributions)
    # and the value entry of each first-stage value/gradient sum is no single client's value
    values = np.array([v[0] for spy in spies for q, v in spy.sent if q == "value_gradient"])
    for seen in channel.seen:
        if seen.stage == 0 and seen.query == "value_gradient":
            assert np.min(np.abs(values - seen.total[0])) > 1e-6


def test_private_cvar_certifies_the_in_process_optimum_under_the_guard():
    """CVaR(4, 0.5) on breast cancer: the smoothed dual from secure sums reaches 1e-6 and brackets
    the in-process certificate, with the guard on (no released entry is fewer than 2 clients' terms:
    tests/test_private_messages.py checks it from the client side)."""
    from drflmodel.client_oracle.private import private_cvar_solve

    prob = dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                           weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    ref = prob.solve()
    cert = private_cvar_solve(prob, reveal_loss_distribution=True)
    assert cert.status == "optimal" and cert.relative_gap <= 1e-6
    assert cert.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= cert.upper_bound + 1e-12
    assert cert.details["smoothing_floor"] <= cert.gap
    assert cert.details["isolating_sums"] == 0 and cert.details["min_contributors"] == 2
    assert "unlabeled empirical distribution" in cert.server_saw["server_learns"]


def test_private_cvar_refusals():
    from drflmodel.client_oracle.private import private_cvar_solve

    fed = dm.datasets.breast_cancer(n_clients=4, seed=0)
    cvar = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=0.01)
    with pytest.raises(InvalidParameterError, match="reveal_loss_distribution=True") as err:
        private_cvar_solve(cvar)                          # the opt-in: the loss distribution is revealed
    assert "unlabeled" in str(err.value)
    with pytest.raises(InvalidParameterError, match="min_contributors must be an integer"):
        private_cvar_solve(cvar, reveal_loss_distribution=True, min_contributors=1.5)
    with pytest.raises(InvalidParameterError, match=r"min_contributors=3 needs min_contributors <= alpha \* n"):
        private_cvar_solve(cvar, reveal_loss_distribution=True, min_contributors=3)
    with pytest.raises(InvalidParameterError, match="alpha = 1 is the uniform average"):
        private_cvar_solve(dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 1.0), l2=0.01),
                           reveal_loss_distribution=True)
    with pytest.raises(InvalidParameterError, match="every coordinate penalized"):
        private_cvar_solve(dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.CVaR(4, 0.5), l2=0.01,
                                           penalize_intercept=False), reveal_loss_distribution=True)
    with pytest.raises(InvalidParameterError, match="CVaR"):
        private_cvar_solve(dm.FederatedDRO(fed, dm.losses.Logistic(), weights=dm.sets.ChiSquare(4, 0.5), l2=0.01))


@pytest.mark.parametrize("rho", [0.5, 0.05])
def test_private_chi_square_certifies_the_in_process_optimum(rho):
    """ChiSquare(4, rho) on breast cancer: its exact C^1 dual from secure sums (no smoothing) reaches
    1e-6 and brackets the in-process certificate."""
    from drflmodel.client_oracle.private import private_chi_square_solve

    prob = dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                           weights=dm.sets.ChiSquare(4, rho), l2=0.01)
    ref = prob.solve()
    cert = private_chi_square_solve(prob, reveal_loss_distribution=True)
    assert cert.status == "optimal" and cert.relative_gap <= 1e-6
    assert cert.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= cert.upper_bound + 1e-12
    with pytest.raises(InvalidParameterError, match="rho = 0"):
        private_chi_square_solve(dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                                                 weights=dm.sets.ChiSquare(4, 0.0), l2=0.01), reveal_loss_distribution=True)


def test_private_cvar_certifies_a_tie_at_the_level_under_the_guard():
    """Breast cancer over 5 sites, CVaR(5, 0.4): at the optimum two clients' losses tie at the CVaR
    level (the in-process solve's losses, equal to 1e-8, and its weights split between them).
    Before the kink-free descent and the clients' own weights, the guarded solve withheld every
    sum there (one client alone at the kink) and certified nothing; now it certifies to 1e-6 and
    its interval meets the in-process one."""
    from drflmodel.client_oracle.private import private_cvar_solve

    prob = dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=5, seed=0), dm.losses.Logistic(),
                           weights=dm.sets.CVaR(5, 0.4), l2=0.01)
    ref = prob.solve(gap_tol=1e-10)       # its losses are compared to 1e-8
    losses = np.sort(ref.client_losses)
    assert losses[3] - losses[2] <= 1e-8 * losses[3] and min(losses[4] - losses[3], losses[2] - losses[1]) > 1e-3
    cert = private_cvar_solve(prob, reveal_loss_distribution=True)
    assert cert.details["min_contributors"] == 2 and cert.details["isolating_sums"] == 0
    assert cert.status == "optimal" and cert.relative_gap <= 1e-6
    assert cert.lower_bound <= ref.upper_bound + 1e-12 and ref.lower_bound <= cert.upper_bound + 1e-12
