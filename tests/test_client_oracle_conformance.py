"""One conformance test of the ClientOracle protocol (drflmodel.client_oracle.protocol), run against
every implementation of ``problem.objectives``: the in-process ``ClientObjectives`` (local), the
federated ``FederatedObjectives`` over the in-process channel and over Flower's in-process grid
(remote: every answer comes from the clients' sites; logistic loss), and ``StatisticsObjectives``
(remote, squared loss: what the federated solve builds for a quadratic loss). Each member is checked against a numpy computation written here from the clients' raw rows
(the losses' formulas of drflmodel.losses), not against another implementation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import drflmodel as dm
from drflmodel.client_oracle import DeclaredFederation, FederatedObjectives, LocalChannel, StatisticsObjectives
from drflmodel.client_oracle.protocol import ClientOracle

N, L2, TOL = 3, 0.1, 1e-10


def _problems():
    reg = dm.datasets.synthetic_regression(n_clients=N, dim=3, samples=[6, 9, 7], seed=3)
    cls = dm.datasets.synthetic_classification(n_clients=N, dim=3, samples=[8, 6, 10], seed=4)
    return {"squared": dm.FederatedDRO(reg, dm.losses.Squared(), dm.sets.Simplex(N), l2=L2),
            "logistic": dm.FederatedDRO(cls, dm.losses.Logistic(), dm.sets.Simplex(N), l2=L2)}


def _reference(loss: str, fed, theta):
    """Per client: value, gradient, Hessian of f_i = mean_j L(z_ij) + (l2/2)||theta||^2 (every
    coefficient penalized), from the rows: squared z = x.theta - y, L = z^2; logistic
    z = y x.theta, L = log(1 + e^-z)."""
    out = []
    for c in fed.clients:
        X, y, m = c.X, c.y, c.X.shape[0]
        u = X @ theta
        if loss == "squared":
            z = u - y
            val, dz, ddz = np.mean(z**2), 2 * z, np.full(m, 2.0)
        else:
            z = y * u
            val, dz, ddz = np.mean(np.logaddexp(0, -z)), -y * expit(-z), expit(z) * expit(-z)
        pen = 0.5 * L2 * theta @ theta
        out.append((val + pen, X.T @ dz / m + L2 * theta, (X.T * ddz) @ X / m + L2 * np.eye(theta.size)))
    return out


def _template(prob):
    """What the server knows of the federation: the clients' declared sizes, no row."""
    fed = prob.federation
    declared = DeclaredFederation(fed.sizes, fed.dim, fed.task, intercept_column=fed.intercept_column)
    return dm.ClientObjectives(declared, prob.loss, prob.l2, prob.penalize_intercept)


@pytest.fixture(scope="module")
def implementations():
    """``{(loss, kind): objectives}`` over the same data; the Flower grid stays open for the module."""
    probs = _problems()
    impls = {}
    for loss, prob in probs.items():
        impls[loss, "local"] = prob.objectives
        # the remote implementation the federated solve builds: sufficient statistics for a
        # quadratic loss whose clients answer them, per-query otherwise
        remote = StatisticsObjectives if prob.loss.is_quadratic else FederatedObjectives
        impls[loss, "remote"] = remote(_template(prob), LocalChannel.from_problem(prob))
    # a quadratic loss whose clients do not answer statistics: every query to the clients
    impls["squared", "remote per query"] = FederatedObjectives(_template(probs["squared"]),
                                                               LocalChannel.from_problem(probs["squared"]))
    try:
        from drflmodel.flower.grid import LocalGrid
        from drflmodel.flower.oracle import FlowerChannel, oracle_client_app
    except ImportError:          # flwr not installed: the Flower transport is not tested here
        yield probs, impls
        return
    prob = probs["logistic"]
    with LocalGrid(oracle_client_app({"conformance": prob}), N) as grid:
        impls["logistic", "remote over Flower"] = FederatedObjectives(
            _template(prob), FlowerChannel(grid, N, run="conformance", timeout=30.0))
        yield probs, impls


def test_every_implementation_answers_the_protocol_exactly(implementations):
    probs, impls = implementations
    assert {type(o).__name__ for o in impls.values()} >= {"ClientObjectives", "FederatedObjectives",
                                                           "StatisticsObjectives"}
    rng = np.random.default_rng(0)
    for (loss, kind), obj in impls.items():
        label = f"{loss} / {kind}"
        prob = probs[loss]
        P = prob.dim
        assert isinstance(obj, ClientOracle), label            # runtime_checkable: every member present
        assert obj.n == N and obj.dim == P and obj.loss.name == loss and obj.l2 == L2, label
        assert obj.layout.size == P and np.array_equal(obj.penalty_diagonal, np.full(P, L2)), label
        thetas = rng.standard_normal((2, P))
        for theta in thetas:
            ref = _reference(loss, prob.federation, theta)
            vals = np.array([r[0] for r in ref])
            grads = np.array([r[1] for r in ref])
            hess = np.array([r[2] for r in ref])
            lam = rng.dirichlet(np.ones(N))
            V = rng.standard_normal((N, P))
            np.testing.assert_allclose(obj.values(theta), vals, rtol=TOL, atol=TOL, err_msg=label)
            np.testing.assert_allclose(obj.gradients(theta), grads, rtol=TOL, atol=TOL, err_msg=label)
            v, g, H = obj.evaluate(theta, lam)
            np.testing.assert_allclose(v, vals, rtol=TOL, atol=TOL, err_msg=label)
            np.testing.assert_allclose(g, grads, rtol=TOL, atol=TOL, err_msg=label)
            np.testing.assert_allclose(H, np.tensordot(lam, hess, 1), rtol=TOL, atol=TOL, err_msg=label)
            assert obj.evaluate(theta, lam, hessian=False)[2] is None, label
            np.testing.assert_allclose(obj.weighted_hessian(theta, lam), np.tensordot(lam, hess, 1),
                                       rtol=TOL, atol=TOL, err_msg=label)
            np.testing.assert_allclose(obj.hessian_vector_products(theta, V), np.einsum("ipq,iq->ip", hess, V),
                                       rtol=TOL, atol=TOL, err_msg=label)
            np.testing.assert_allclose(obj.penalty(theta), 0.5 * L2 * theta @ theta, rtol=TOL, err_msg=label)
            # a strong-convexity modulus is a lower bound of every client's Hessian's spectrum
            mu = np.asarray(obj.strong_convexity(), float)
            assert mu.shape == (N,) and np.all(mu >= L2 - TOL), label
            assert np.all(mu <= np.linalg.eigvalsh(hess)[:, 0] + 1e-9), label
        # max_j ||x_ij|| per client (the statistics do not determine it: the remote ones ask it)
        rows = np.array([np.max(np.linalg.norm(c.X, axis=1)) for c in prob.federation.clients])
        np.testing.assert_allclose(obj.max_row_norms(), rows, rtol=TOL, err_msg=label)
