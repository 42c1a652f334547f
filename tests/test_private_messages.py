"""What the server receives in private mode: every secure sum of the ERM, χ² and CVaR routes
(breast cancer, 4 sites), compared entry by entry with every client's own answer to the same
query, recorded on the client side. No sum the server formed is one client's value, gradient or
bound term: each entry is the sum of no client's nonzero term or of at least ``min_contributors``,
and no entry equals one client's own nonzero entry within the sum's error bound."""

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle.private import (SumOnlyChannel, private_chi_square_solve, private_clients,
                                             private_cvar_solve, private_fixed_weight_solve)


class _Book:
    """The record of one solve: each secure sum's call number, query and result (server side) and
    each client's own vector for that call (client side, never sent)."""

    def __init__(self):
        self.call, self.sums, self.sent = -1, [], {}


class _Spy:
    def __init__(self, client, index, book):
        self.client, self.index, self.book = client, index, book

    def contribution(self, query, **params):
        v = np.array(self.client.contribution(query, **params), float).ravel()
        self.book.sent.setdefault(self.book.call, {})[self.index] = v
        return v


def _recorded_channel(problem, book):
    channel = SumOnlyChannel([_Spy(c, i, book) for i, c in enumerate(private_clients(problem))], seed=0)
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
        V = np.stack([book.sent[call][i] for i in sorted(book.sent[call])])     # clients x entries
        assert V.shape[1] == s.value.size
        exact = V.sum(axis=0)
        assert np.all(np.abs(s.value - exact) <= s.error + 1e-12 * np.abs(exact).max(initial=0))
        nonzero = V != 0
        for j in range(V.shape[1]):
            holders = np.flatnonzero(nonzero[:, j])
            if 0 < holders.size < k:
                found.append((query, j, f"{holders.size} client(s) with a nonzero term"))
                continue
            for i in holders:
                if abs(s.value[j] - V[i, j]) <= 2 * s.error[j] and abs(V[i, j]) > 2 * s.error[j]:
                    found.append((query, j, f"equals client {i}'s own term within the sum's error"))
                    break
    return found


def _bc(weights):
    return dm.FederatedDRO(dm.datasets.breast_cancer(n_clients=4, seed=0), dm.losses.Logistic(),
                           weights=weights, l2=0.01)


def test_the_inspector_catches_one_clients_term():
    """The check could fail: a channel whose clients but one send zeros gives that client's vector."""
    book = _Book()

    class Lonely:
        def __init__(self, v):
            self.v = np.asarray(v, float)

        def contribution(self, query, **params):
            return self.v

    ch = SumOnlyChannel([_Spy(Lonely(v), i, book) for i, v in enumerate([[0.3, 1.0, 5.0],
                                                                                   [0.0, 2.5, 1e-15],
                                                                                   [0.0, -1.25, 0.0]])])
    book.call += 1
    book.sums.append((book.call, "x", ch.sum("x")))
    # entry 0: one client alone; entry 2: a second client's term below the sum's resolution
    assert inspect(book) == [("x", 0, "1 client(s) with a nonzero term"),
                             ("x", 2, "equals client 0's own term within the sum's error")]


@pytest.mark.parametrize("route", ["erm", "chi_square", "cvar"])
def test_no_sum_the_server_receives_is_one_clients_answer(route):
    book = _Book()
    bc = dm.datasets.breast_cancer(n_clients=4, seed=0)
    if route == "erm":
        prob = _bc(dm.sets.HCVaR(bc.sizes / bc.sizes.sum(), 1.0))
        cert = private_fixed_weight_solve(prob, channel=_recorded_channel(prob, book))
    elif route == "chi_square":
        prob = _bc(dm.sets.ChiSquare(4, 0.5))
        cert = private_chi_square_solve(prob, channel=_recorded_channel(prob, book), reveal_loss_distribution=True)
    else:
        prob = _bc(dm.sets.CVaR(4, 0.5))
        cert = private_cvar_solve(prob, channel=_recorded_channel(prob, book), reveal_loss_distribution=True)
    assert cert.status == "optimal"
    assert len(book.sums) > 20 and book.sums[-1][0] == book.call
    assert inspect(book) == []
