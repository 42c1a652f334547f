"""Wasserstein DRFL at its edges: the conic model's memory estimate (a forced conic solve that
cannot fit is refused by name before anything is allocated), and the Hessian-free route at
:math:`\\theta^\\star=0`, where :math:`\\varepsilon\\|\\theta\\|` is not differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import MemoryLimitError
from drflmodel.problems.wasserstein.problem import CONIC_BYTES_PER_ENTRY, CONIC_BYTES_PER_SQUARE


def _gaussian(n_clients, rows, d, seed=0, squash=False):
    rng = np.random.default_rng(seed)
    clients = []
    for _ in range(n_clients):
        X = rng.standard_normal((rows, d))
        X = 0.9 * np.tanh(X) if squash else X
        y = np.where(X[:, 0] + 0.5 * rng.standard_normal(rows) > 0, 1.0, -1.0)
        clients.append(dm.data.Client(X, y))
    return dm.data.Federation(clients, task="classification")


def test_a_forced_conic_model_at_p_5000_is_refused_by_its_memory_estimate(monkeypatch):
    import drflmodel._memory as memory

    fed = _gaussian(3, 300, 5000)
    prob = dm.WassersteinDRFL(fed, dm.losses.Logistic(), radius=0.1, norm=2, kappa=np.inf,
                              weights=dm.sets.Simplex(3), l2=0.1)
    N, P = 900, 5000
    expected = CONIC_BYTES_PER_ENTRY * N * P + CONIC_BYTES_PER_SQUARE * P * P     # 6.5 GB
    assert prob.structure.conic_bytes == expected
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 2**30)
    with pytest.raises(MemoryLimitError, match=r"route 'conic' .* would allocate about 6\.\d+ GiB but only"):
        prob.solve(method="conic")


def test_the_estimate_counts_a_polyhedral_support():
    fed = _gaussian(3, 20, 4, seed=1, squash=True)        # inside the box [-1, 1]^d
    free = dm.WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.1, norm=1, kappa=1.0, weights=dm.sets.Simplex(3))
    box = dm.WassersteinDRFL(fed, dm.losses.Hinge(), radius=0.1, norm=1, kappa=1.0, weights=dm.sets.Simplex(3),
                             support="box")
    # hinge: 2 pieces, a finite label cost: 2 branches; the box: r = 2 d = 8 constraints
    N, d, r = 60, 4, 8
    assert free.structure.conic_bytes == CONIC_BYTES_PER_ENTRY * N * d + CONIC_BYTES_PER_SQUARE * d * d
    assert box.structure.conic_bytes == (CONIC_BYTES_PER_ENTRY * (N * d + 2 * 2 * N * (d * (r + 1) + r))
                                           + CONIC_BYTES_PER_SQUARE * d * d)
