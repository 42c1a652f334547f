"""What the server receives in private mode: every secure sum of the ERM, χ², CVaR, KL and FAFL
(per-client caps) routes (breast cancer, 4 sites), compared entry by entry with every client's own answer to the same
query, recorded on the client side. No sum the server formed is one client's value, gradient or
bound term: each entry is the sum of no client's nonzero term or of at least ``min_contributors``,
and no entry equals one client's own nonzero entry within the sum's error bound."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle.private.secure_sum import SumWithheld
from drflmodel.client_oracle.private import (SumOnlyChannel, kl_clients, private_chi_square_solve, private_clients,
                                             private_cvar_solve, private_fixed_weight_solve, private_kl_solve,
                                             route_clients)
from drflmodel.client_oracle.private.cvar import private_hcvar_solve


class _Book:
    """The record of one solve: each secure sum's call number, query and result (server side) and
    each client's own vector for that call (client side, never sent)."""

    def __init__(self):
        self.call, self.sums, self.sent = -1, [], {}


def _recorded_channel(problem, book, channel=None):
    """A channel whose server side records each secure sum and whose clients record, on their
    side, the term they put into it (after the guard's floor; ``SumClient.sent``)."""
    channel = channel or SumOnlyChannel(private_clients(problem), seed=0)
    for i, sc in enumerate(channel._sum_clients):
        def answer(query, stage, scale, params, floor=None, holders=False, sc=sc, plain=sc.answer, i=i):
            out = plain(query, stage, scale, params, floor, holders)
            if stage == 0 and not holders:
                book.sent.setdefault(book.call, {})[i] = sc.sent.copy()
            return out
        sc.answer = answer
    plain = channel.sum

    def recorded(query, *args, **kwargs):
        book.call += 1
        out = plain(query, *args, **kwargs)
        book.sums.append((book.call, query, out))
        return out

    channel.sum = recorded
    return channel


def inspect(book, k: int = 2):
    """The entries of the server's sums that single out a client: ``(query, entry, why)``."""
    found = []
    for call, query, s in book.sums:
        if query == "dual_count":         # counts of clients above eta: released by design
            continue
        V = np.stack([book.sent[call][i] for i in sorted(book.sent[call])])     # clients x entries
        assert V.shape[1] == s.value.size
        rounding = s.error - (s.floor_error if s.floor_error is not None else 0.0)   # the server's resolution
        # the server's sum is the sum of what the clients sent, within its rounding bound
        assert np.all(np.abs(s.value - V.sum(axis=0)) <= rounding + 8 * np.finfo(float).eps * np.abs(V).sum(axis=0))
        nonzero = V != 0
        for j in range(V.shape[1]):
            holders = np.flatnonzero(nonzero[:, j])
            if 0 < holders.size < k:
                found.append((query, j, f"{holders.size} client(s) with a nonzero term"))
                continue
            for i in holders:
                if abs(s.value[j] - V[i, j]) <= 2 * rounding[j] and abs(V[i, j]) > 2 * rounding[j]:
                    found.append((query, j, f"equals client {i}'s own term within the sum's error"))
                    break
    return found


def _bc(weights):
    return dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                           weights=weights, l2=0.01)


class _Fixed:
    def __init__(self, v):
        self.v = np.asarray(v, float)

    def contribution(self, query, **params):
        return self.v


def test_the_inspector_catches_one_clients_term():
    """The check could fail: an entry held by one client, and one where a second client's term is
    below the sum's resolution, are both caught (no guard on this channel)."""
    book = _Book()
    vectors = [[0.3, 1.0, 5.0], [0.0, 2.5, 1e-15], [0.0, -1.25, 0.0]]
    ch = _recorded_channel(None, book, SumOnlyChannel([_Fixed(v) for v in vectors]))
    ch.sum("x")
    assert inspect(book) == [("x", 0, "1 client(s) with a nonzero term"),
                             ("x", 2, "equals client 0's own term within the sum's error")]
    # with the guard the same sum is withheld: the server learns the holders' counts only
    book = _Book()
    ch = _recorded_channel(None, book, SumOnlyChannel([_Fixed(v) for v in vectors], min_contributors=2))
    with pytest.raises(SumWithheld, match=r"entries \[0, 2\] would hold fewer than min_contributors=2") as err:
        ch.sum("x")
    assert err.value.holders.tolist() == [1, 3, 1]
    assert [seen.query for seen in ch.seen] == ["x (holders)"] and book.sums == []


@pytest.mark.parametrize("route", ["erm", "chi_square", "cvar", "kl", "fafl"])
def test_no_sum_the_server_receives_is_one_clients_answer(route):
    book = _Book()
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    if route == "erm":
        prob = _bc(dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0))
        cert = private_fixed_weight_solve(prob, channel=_recorded_channel(prob, book))
    elif route == "chi_square":
        prob = _bc(dm.sets.ChiSquare(4, 0.5))
        cert = private_chi_square_solve(prob, channel=_recorded_channel(prob, book), reveal_loss_distribution=True)
    elif route == "cvar":
        prob = _bc(dm.sets.CVaR(4, 0.5))
        cert = private_cvar_solve(prob, channel=_recorded_channel(prob, book), reveal_loss_distribution=True)
    elif route == "fafl":       # FAFL's HCVaR caps p_i/alpha (unequal sizes 166, 210, 29, 164): per-client caps
        caps = bc.sizes / bc.sizes.sum() / 0.6
        prob = _bc(dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 0.6))
        ch = _recorded_channel(prob, book, SumOnlyChannel(route_clients(prob), seed=0))
        cert = private_hcvar_solve(prob, channel=ch, reveal_loss_distribution=True)
        weights = [call for call, query, _ in book.sums if query == "weight"]
        assert weights and all(book.sent[call][i][0] <= caps[i] for call in weights for i in book.sent[call])
    else:                       # the KL penalty's log-sum-exp terms (its clients also answer "kl_terms")
        prob = _bc(dm.sets.KLPenalty(4, 0.5))
        cert = private_kl_solve(prob, channel=_recorded_channel(prob, book, SumOnlyChannel(kl_clients(prob), seed=0)))
        assert {query for _, query, _ in book.sums} == {"size", "value_gradient", "kl_terms", "dual_allowances"}
    assert cert.status == "optimal"
    assert len(book.sums) > 20 and book.sums[-1][0] == book.call
    assert inspect(book) == []


def test_without_the_guard_the_cvar_dual_isolates_clients():
    """min_contributors=1 (the guard off) on the same CVaR solve: the inspector finds sums whose
    entries are one client's term -- what the guard removes."""
    book = _Book()
    prob = _bc(dm.sets.CVaR(4, 0.5))
    cert = private_cvar_solve(prob, channel=_recorded_channel(prob, book), reveal_loss_distribution=True,
                              min_contributors=1)
    found = inspect(book)
    assert cert.status == "optimal" and len(found) >= 1
    assert {query for query, _, _ in found} <= {"cvar_eta", "cvar_gradient"}
