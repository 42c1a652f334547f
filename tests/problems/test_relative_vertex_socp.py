"""The R1 route through Clarabel's native interface (problems/relative/vertex_socp.py).

Checks, each able to fail: the native answer and the CVXPY model's (forced with solver='ECOS')
agree to 1e-8 and are both certified, with and without a box; the R3 route (an independent,
matrix-fractional formulation) agrees; the vertex multipliers are a probability vector; a failing
native solve falls back to the CVXPY model and records both attempts; a vertex matrix that is not
PSD is refused as before.
"""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import NotConvexError
from drflmodel.problems.relative import routes as relative_routes


def _problem(n=6, phi=0.1, box=None, seed=0, samples=40, A=None):
    fed = dm.datasets.synthetic_regression(n_clients=n, dim=4, samples=samples, noise=0.2, seed=seed)
    return dm.RelativeFairness(fed, dm.losses.Squared(), A=A or dm.sets.Simplex(n), B=dm.sets.Simplex(n),
                               phi=phi, l2=1e-2, box=box)


@pytest.mark.parametrize("box", [None, (-0.3, 0.3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_native_agrees_with_the_cvxpy_model(box, seed):
    native = _problem(box=box, seed=seed).solve(method="R1")
    assert native.info["attempts"][0]["interface"] == "native" and len(native.info["attempts"]) == 1
    cvx = _problem(box=box, seed=seed).solve(method="R1", solver="ECOS")
    assert native.status == "optimal" and cvx.status == "optimal"
    assert native.upper_bound == pytest.approx(cvx.upper_bound, rel=1e-8)
    assert native.lower_bound <= cvx.upper_bound + 1e-12 and cvx.lower_bound <= native.upper_bound + 1e-12
    mu = native.duals["vertex_multipliers"]
    assert np.all(mu >= 0) and mu.sum() == pytest.approx(1.0, abs=1e-7)
    if box is not None:
        assert np.all(np.abs(native.theta) <= 0.3 + 1e-12)


def test_native_agrees_with_the_matrix_fractional_route():
    prob = _problem(n=5, phi=0.15, seed=3, A=dm.sets.CVaR(5, 0.4))
    r1, r3 = prob.solve(method="R1"), _problem(n=5, phi=0.15, seed=3, A=dm.sets.CVaR(5, 0.4)).solve(method="R3")
    assert r1.status == "optimal" and r3.status == "optimal"
    # R3's point is the less accurate here (its certified gap is 9e-7): the R1 value lies in R3's
    # certified interval and R3's lower bound below R1's value
    assert r3.lower_bound - 1e-12 <= r1.upper_bound <= r3.upper_bound + 1e-12
    assert r1.lower_bound <= r3.upper_bound + 1e-12
    assert r1.upper_bound - r1.lower_bound <= 1e-8
    assert r1.upper_bound == pytest.approx(prob.objective(r1.theta), rel=1e-13)


def test_a_failing_native_solve_falls_back_to_the_cvxpy_model(monkeypatch):
    monkeypatch.setattr(relative_routes, "solve_vertex_socp",
                        lambda *a, **k: (None, None, float("nan"), "NumericalError (simulated)", 3))
    sol = _problem().solve(method="R1")
    assert sol.status == "optimal"
    attempts = sol.info["attempts"]
    assert attempts[0]["interface"] == "native" and attempts[0]["solver_status"].startswith("NumericalError")
    assert attempts[1]["solver"] == "CLARABEL" and "interface" not in attempts[1]


def test_a_vertex_matrix_that_is_not_psd_is_refused():
    fed = dm.Federation.from_arrays([np.eye(3) * s for s in (1.0, 5.0, 9.0)], [np.ones(3)] * 3, task="regression")
    prob = dm.RelativeFairness(fed, dm.losses.Squared(), A=dm.sets.Simplex(3), B=dm.sets.Simplex(3), phi=0.5)
    assert not prob.vertex_psd_test()["holds"]
    with pytest.raises(NotConvexError, match="not convex"):
        prob.solve(method="R1")


def test_the_vertex_active_set_finds_the_full_vertex_optimum():
    """144 vertex pairs, d = 2: the native solve starts from 8 vertices and adds violated ones; its
    value is the CVXPY model's over all 144, and no vertex lies above it at the answer."""
    from drflmodel.problems.relative import quadratic as qd
    from drflmodel.problems.relative.vertex_socp import solve_vertex_socp

    fed = dm.datasets.synthetic_regression(n_clients=12, dim=2, samples=15, noise=0.5, heterogeneity=1.0, seed=4)
    prob = dm.RelativeFairness(fed, dm.losses.Squared(), A=dm.sets.Simplex(12), B=dm.sets.Simplex(12),
                               phi=0.05, l2=1e-2)
    V = prob.vertex_weights()
    Q, r, c = prob.objectives.quadratic_forms()
    theta, mu, value, status, _ = solve_vertex_socp(Q, r, c, V)
    full, th, t, _ = qd.build_r1(Q, r, c, V)
    full.solve(solver="CLARABEL")
    assert value == pytest.approx(full.value, rel=1e-8)
    f = prob.client_losses(theta)
    assert np.max(V @ f) <= value + 1e-9 * max(1.0, abs(value))
    # mu is exactly zero off the active set: it grew past the 8 starting vertices, not to all 144
    assert 8 < np.count_nonzero(mu) < 144 and mu.sum() == pytest.approx(1.0, abs=1e-7)
