"""The baselines of the scale rows of ``bench_certified.py`` (issue 30): what a user runs instead.

* ERM: scikit-learn's ``LogisticRegression`` (``lbfgs``, ``newton-cg``, ``newton-cholesky``;
  ``tol=1e-8``; ``C = 1/(l2 N)``, whose objective is :math:`\\frac1N\\sum_j\\ell_j+\\frac{l_2}2\\|W\\|^2`
  with the intercept unpenalized -- drflmodel's ERM with ``penalize_intercept=False``).
* chi-square DRO: SciPy's L-BFGS-B on the smooth dual of the chi-square support function in
  :math:`(\\theta,\\eta)`, :math:`\\eta+\\rho/2+\\frac1{2n\\rho}\\sum_i(f_i(\\theta)-\\eta)_+^2`, with the
  client losses and gradients written here in plain numpy (independently of drflmodel), the same
  tolerances as scikit-learn's lbfgs (``gtol=1e-8``, ``ftol=64 eps``).
* CVaR DRO: the same L-BFGS-B on the softplus-smoothed Rockafellar-Uryasev form
  :math:`\\eta+\\frac1{\\alpha n}\\sum_i\\mu\\log(1+e^{(f_i-\\eta)/\\mu})`, :math:`\\mu=10^{-4}`.
* FAFL (HCVaR): the same with the client caps :math:`c_i=p_i/\\alpha_i` in place of :math:`1/(\\alpha n)`
  (the FAFL paper's smoothed problem (5), Tu et al., "Fairness-Aware Federated Learning").
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logsumexp

EPS = np.finfo(float).eps

#: the clock every baseline is timed with (``bench_grid.py --clock cpu`` sets ``time.process_time``: on a
#: shared machine a call's CPU time is not inflated by other processes' preemption; every run here is
#: one-threaded, ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``)
clock = time.perf_counter


class PlainClientLosses:
    """Client losses :math:`f_i` (mean loss + ridge, intercept unpenalized) and the gradient of
    :math:`\\sum_iv_if_i` for client weights :math:`v`, written in plain numpy (pooled rows)."""

    def __init__(self, fed, l2: float):
        X, y, client = fed.pooled()
        self.X, self.y = X, y
        self.multiclass = fed.task == "multiclass"
        self.K = fed.n_classes if self.multiclass else 1
        self.d = X.shape[1]
        self.sizes = np.bincount(client, minlength=fed.n_clients).astype(float)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(int)
        self.client = client
        self.omega = np.ones(self.d)
        self.omega[fed.intercept_column] = 0.0
        self.l2 = l2
        if self.multiclass:
            self.Y = np.zeros((len(y), self.K))
            self.Y[np.arange(len(y)), y.astype(int)] = 1.0

    def W(self, theta):
        return theta.reshape(self.K, self.d).T

    def values_and_rows(self, theta):
        W = self.W(theta)
        S = self.X @ W
        if self.multiclass:
            lse = logsumexp(S, axis=1)
            rows = lse - np.sum(S * self.Y, axis=1)
            R = np.exp(S - lse[:, None]) - self.Y
        else:
            z = self.y * S[:, 0]
            rows = np.logaddexp(0.0, -z)
            R = (-self.y * expit(-z))[:, None]
        ridge = 0.5 * self.l2 * float(np.sum(self.omega[:, None] * W * W))
        f = np.add.reduceat(rows, self.starts) / self.sizes + ridge
        return f, R

    def weighted_gradient(self, theta, R, v):
        w = (v / self.sizes)[self.client]
        G = self.X.T @ (R * w[:, None])                      # (d, K)
        G += self.l2 * float(v.sum()) * self.omega[:, None] * self.W(theta)
        return G.T.reshape(-1)


def lbfgs_options():
    return {"maxiter": 100_000, "maxfun": 200_000, "gtol": 1e-8, "ftol": 64 * EPS, "maxls": 50}


def chi2_dual_lbfgs(fed, l2: float, rho: float):
    """``(theta, eta, seconds, iterations)`` of L-BFGS-B on the chi-square dual."""
    t0 = clock()
    plain = PlainClientLosses(fed, l2)
    n = fed.n_clients
    P = plain.K * plain.d

    def fun(z):
        theta, eta = z[:P], z[P]
        f, R = plain.values_and_rows(theta)
        excess = np.maximum(f - eta, 0.0)
        value = eta + 0.5 * rho + float(excess @ excess) / (2 * n * rho)
        v = excess / (n * rho)
        grad = np.concatenate([plain.weighted_gradient(theta, R, v), [1.0 - v.sum()]])
        return value, grad

    res = minimize(fun, np.zeros(P + 1), jac=True, method="L-BFGS-B", options=lbfgs_options())
    return res.x[:P], res.x[P], clock() - t0, int(res.nit)


def cvar_smoothed_lbfgs(fed, l2: float, alpha: float, mu: float = 1e-4):
    """``(theta, eta, seconds, iterations)`` of L-BFGS-B on the softplus-smoothed CVaR dual."""
    return capped_smoothed_lbfgs(fed, l2, np.full(fed.n_clients, 1.0 / (alpha * fed.n_clients)), mu)


def fafl_smoothed_lbfgs(fed, l2: float, alpha: float, mu: float = 1e-4):
    """``(theta, eta, seconds, iterations)`` of L-BFGS-B on the softplus-smoothed FAFL (HCVaR) dual,
    caps :math:`p_i/\\max(\\alpha,p_i)` (levels below :math:`p_i` clipped, as ``alpha_below_p="clip"``)."""
    p = np.asarray(fed.proportions, float)
    return capped_smoothed_lbfgs(fed, l2, p / np.maximum(alpha, p), mu)


def capped_smoothed_lbfgs(fed, l2: float, cap, mu: float = 1e-4):
    """``(theta, eta, seconds, iterations)`` of L-BFGS-B on
    :math:`\\eta+\\sum_ic_i\\mu\\log(1+e^{(f_i-\\eta)/\\mu})` (client caps :math:`c`)."""
    t0 = clock()
    plain = PlainClientLosses(fed, l2)
    P = plain.K * plain.d
    cap = np.asarray(cap, float)

    def fun(z):
        theta, eta = z[:P], z[P]
        f, R = plain.values_and_rows(theta)
        u = (f - eta) / mu
        value = eta + mu * float(cap @ np.logaddexp(0.0, u))
        v = cap * expit(u)
        grad = np.concatenate([plain.weighted_gradient(theta, R, v), [1.0 - v.sum()]])
        return value, grad

    res = minimize(fun, np.zeros(P + 1), jac=True, method="L-BFGS-B", options=lbfgs_options())
    return res.x[:P], res.x[P], clock() - t0, int(res.nit)


def sklearn_erm(fed, l2: float, solver: str, tol: float = 1e-8):
    """``(model, seconds, iterations)`` of ``LogisticRegression(solver=solver, tol=tol)`` on the
    pooled rows, in drflmodel's layout."""
    from sklearn.linear_model import LogisticRegression

    X, y, _ = fed.pooled()
    j = fed.intercept_column
    keep = [c for c in range(X.shape[1]) if c != j]
    t0 = clock()
    model = LogisticRegression(C=1.0 / (l2 * len(y)), solver=solver, tol=tol, max_iter=10_000)
    model.fit(X[:, keep], y.astype(int) if fed.task == "multiclass" else y)
    return model, clock() - t0, int(np.max(model.n_iter_))


def erm_lbfgs(fed, l2: float):
    """``(theta, seconds, iterations)`` of L-BFGS-B on the ERM objective
    :math:`\\frac1N\\sum_j\\ell_j+\\frac{l_2}2\\|W\\|^2` (client weights = row shares), with the plain
    numpy losses above and scikit-learn's lbfgs tolerances."""
    t0 = clock()
    plain = PlainClientLosses(fed, l2)
    v = plain.sizes / plain.sizes.sum()

    def fun(theta):
        f, R = plain.values_and_rows(theta)
        return float(v @ f), plain.weighted_gradient(theta, R, v)

    res = minimize(fun, np.zeros(plain.K * plain.d), jac=True, method="L-BFGS-B", options=lbfgs_options())
    return res.x, clock() - t0, int(res.nit)
