"""The ``sqp`` route's lazy Hessian and the symmetric Hessian product (problems/minmax/lagrangian_sqp.py,
objectives.py): fewer Hessian passes, the same certified optimum.

- On 20 random ERM instances (binary and softmax, an unpenalized intercept or every coordinate
  penalized) the lazy route's certified interval meets the conic route's (CVXPY) to 1e-9 and the
  eager route's (no Hessian reused), and it did reuse a Hessian;
- every certificate is computed at a point holding the *exact* weighted Hessian there (recomputed
  independently from the rows);
- at 1k x 50 it takes fewer Hessian passes than the eager route;
- ``_weighted_gram`` (``Y^T Y`` with ``Y = diag(sqrt c) X``: BLAS ``syrk``) equals the
  definition ``X^T diag(c) X``, exactly symmetric, and takes the general product for a negative weight;
- ``cholesky_lower`` (LAPACK ``potrf`` directly) is numpy's Cholesky factor bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.objectives import SYRK_MIN_WORK, ClientObjectives, _weighted_gram
from drflmodel.problems.minmax import lagrangian_sqp
from drflmodel.problems.minmax.fixed_weight_bound import cholesky_lower

L2 = 1e-3


def _erm(seed: int, softmax: bool = False, penalize_intercept: bool = False, N: int = 80, d: int = 4):
    rng = np.random.default_rng(seed)
    K = 3 if softmax else 2
    fed = dm.datasets.gaussian_mixture(N, d, K, n_clients=1, alpha=0.5, mean_norm=float(rng.uniform(0.5, 3.0)),
                                       seed=seed)
    loss = dm.losses.Multinomial() if softmax else dm.losses.Logistic()
    return dm.FederatedDRO(fed, loss, dm.sets.Simplex(1), l2=L2, penalize_intercept=penalize_intercept)


def _meet(a, b, slack: float = 1e-9) -> bool:
    """Two certified intervals of one minimum overlap (within ``slack`` of the value)."""
    s = slack * max(1.0, abs(a.upper_bound))
    return a.lower_bound <= b.upper_bound + s and b.lower_bound <= a.upper_bound + s


@pytest.mark.parametrize("seed", range(20))
def test_lazy_steps_certify_the_conic_routes_optimum(monkeypatch, seed):
    monkeypatch.setattr(lagrangian_sqp, "LAZY_MIN_WORK", 0.0)      # small instances: lazy too
    monkeypatch.setattr(lagrangian_sqp, "LAZY_MAX_OUTPUTS", 3)     # and softmax
    softmax, penalized = seed % 4 == 3, seed % 3 == 2
    lazy = _erm(seed, softmax, penalized).solve(method="sqp")
    assert lazy.status == "optimal" and lazy.relative_gap <= 1e-9
    assert any(h.get("next_hessian") == "reused" for h in lazy.info["history"])
    conic = _erm(seed, softmax, penalized).solve(method="conic", gap_tol=1e-8)
    assert conic.status == "optimal"
    assert _meet(lazy, conic)
    monkeypatch.setattr(lagrangian_sqp, "LAZY_HESSIAN", False)
    eager = _erm(seed, softmax, penalized).solve(method="sqp")
    assert not any("next_hessian" in h for h in eager.info["history"])
    assert _meet(lazy, eager, 1e-12)


@pytest.mark.parametrize("softmax", [False, True])
def test_every_certificate_holds_the_exact_hessian(monkeypatch, softmax):
    monkeypatch.setattr(lagrangian_sqp, "LAZY_MIN_WORK", 0.0)
    monkeypatch.setattr(lagrangian_sqp, "LAZY_MAX_OUTPUTS", 3)
    certify, seen = lagrangian_sqp.LagrangianSQPRoute._certify, []

    def spy(problem, point):
        exact = problem.objectives.weighted_hessian(point.theta, point.lam)     # from the rows, here
        seen.append((point.exact_hessian, float(np.abs(point.H - exact).max()), float(np.abs(exact).max())))
        return certify(problem, point)

    monkeypatch.setattr(lagrangian_sqp.LagrangianSQPRoute, "_certify", staticmethod(spy))
    sol = _erm(7, softmax).solve(method="sqp", tol=1e-14)            # ask more: several attempts
    assert sol.status == "optimal"
    assert any(h.get("next_hessian") == "reused" for h in sol.info["history"])
    assert seen and all(flag and err <= 1e-12 * scale for flag, err, scale in seen)


def test_fewer_hessian_passes_at_1k_x_50(monkeypatch):
    passes = []
    hessian = ClientObjectives._weighted_hessian_from_scores

    def counted(self, *args, **kwargs):
        passes.append(1)
        return hessian(self, *args, **kwargs)

    monkeypatch.setattr(ClientObjectives, "_weighted_hessian_from_scores", counted)
    counts = {}
    for lazy in (True, False):
        monkeypatch.setattr(lagrangian_sqp, "LAZY_HESSIAN", lazy)
        passes.clear()
        sol = _erm(0, N=1_000, d=50).solve(method="sqp")
        assert sol.status == "optimal"
        counts[lazy] = (len(passes), sol)
    assert counts[True][0] < counts[False][0]
    assert _meet(counts[True][1], counts[False][1], 1e-12)


def test_weighted_gram_is_the_definition():
    rng = np.random.default_rng(0)
    for N in (1_000, 30):                                       # syrk; below SYRK_MIN_WORK the general product
        X = rng.standard_normal((N, 12))
        assert (N * 144 >= SYRK_MIN_WORK) == (N == 1_000)
        for c in (rng.random(N), np.r_[rng.random(N - 1), 0.0], rng.standard_normal(N)):
            G = _weighted_gram(X, c)
            ref = np.einsum("ij,i,ik->jk", X, c, X)
            assert np.abs(G - ref).max() <= 1e-12 * np.abs(ref).max()
            if c.min() >= 0 and N == 1_000:
                assert np.array_equal(G, G.T)                   # syrk: one triangle, mirrored
    assert _weighted_gram(X[:0], np.zeros(0)).shape == (12, 12)


def test_cholesky_lower_is_numpys_factor():
    """``fixed_weight_bound.cholesky_lower`` (LAPACK ``potrf`` directly) is ``numpy.linalg.cholesky``'s
    factor bit for bit, and ``None`` where numpy raises (not positive definite)."""
    rng = np.random.default_rng(3)
    for P in (1, 4, 15, 51):
        A = rng.standard_normal((P, 2 * P + 1))
        H = A @ A.T
        assert np.array_equal(cholesky_lower(H), np.linalg.cholesky(H))
        H[0, 0] = -1.0
        with pytest.raises(np.linalg.LinAlgError):
            np.linalg.cholesky(H)
        assert cholesky_lower(H) is None
