r"""What a server can reconstruct from a small client's answers: its rows and labels, from gradients.

The attack (issue 39, "what a server can learn within budget"): a logistic client with rows
:math:`x_j` (an intercept column of ones) and labels :math:`y_j=\pm1` answers the data-term
gradient

.. math::  \nabla h(\theta) = -\tfrac1N\textstyle\sum_j \sigma(-u_j^\top\theta)\,u_j,\qquad u_j=y_jx_j,

so every gradient lies in the span of the :math:`N` vectors :math:`u_j`. The server

1. asks the gradient at ``queries`` random points (within the default budget of 400 evaluations);
2. finds the span (the top :math:`N` singular vectors :math:`B` of the gradients; the rank also
   tells :math:`N`);
3. fits the :math:`N\times N` coordinates :math:`a_j` of :math:`u_j=Ba_j` to the gradients by
   nonlinear least squares (``scipy.optimize.least_squares``; the model is the formula above, exact
   for the true rows, so a zero residual identifies them up to their order);
4. reads the label from the intercept entry (:math:`u_{j,0}=y_j`) and the row :math:`x_j=u_j/y_j`.

Run ``python benchmarks/reconstruction_attack.py [ROWSxP ...]`` for the table (rows x parameters -> rows recovered,
labels recovered, largest row error, gradients used). Under the default
:class:`~drflmodel.client_oracle.QueryPolicy` a client with fewer than :math:`P+1` rows refuses the
first gradient query (``tests/flower/test_site_policy.py``); the table shows what an open site (no
floor) reveals.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy.optimize import least_squares
from scipy.special import expit

import drflmodel as dm
from drflmodel.client_oracle import Site


def make_client(rows: int = 6, features: int = 30, seed: int = 0):
    """A logistic site: ``rows`` Gaussian rows of ``features - 1`` features plus an intercept column
    of ones (column 0), labels +-1."""
    rng = np.random.default_rng(seed)
    X = np.hstack([np.ones((rows, 1)), rng.normal(size=(rows, features - 1))])
    y = np.where(rng.random(rows) < 0.5, -1.0, 1.0)
    return X, y, Site(X, y, dm.losses.Logistic(), name=f"site-{rows}")


def _model(a_flat, S, N):
    A = a_flat.reshape(N, N)                     # row j: a_j
    W = expit(-(S @ A.T))                        # (K, N): sigma(-u_j' theta_k)
    return -(W @ A) / N                          # (K, N): B' grad at each point


def _jacobian(a_flat, S, N):
    """d(model)/d(a): for point k and row j, -(1/N) (w_kj I - w_kj (1 - w_kj) a_j s_k')."""
    A = a_flat.reshape(N, N)
    W = expit(-(S @ A.T))                                           # (K, N)
    K = S.shape[0]
    J = np.zeros((K, N, N, N))                                      # [k, output, j, input]
    eye = np.eye(N)
    for j in range(N):
        J[:, :, j, :] = -(W[:, j, None, None] * eye[None] -
                          (W[:, j] * (1 - W[:, j]))[:, None, None] * A[j][None, :, None] * S[:, None, :]) / N
    return J.reshape(K * N, N * N)


def attack(site, rows: int, features: int, queries: int | None = None, seed: int = 0, restarts: int = 10,
           max_nfev: int = 200) -> dict:
    """The attack on ``site`` (any object with ``answer(query, arrays, options)``): returns the
    recovered rows and labels and the queries used. Raises whatever the site raises (e.g. a
    :class:`~drflmodel.client_oracle.QueryRefused`)."""
    rng = np.random.default_rng(seed)
    K = queries if queries is not None else min(400, 10 * rows)
    thetas = rng.normal(scale=1.0 / np.sqrt(features), size=(K, features))
    G = np.stack([np.asarray(site.answer("evaluate", {"theta": t})["gradient"], float) for t in thetas])
    U, s, _ = np.linalg.svd(G.T, full_matrices=False)
    N = int(np.sum(s > 1e-9 * s[0]))             # the rank reveals the number of rows
    B = U[:, :N]
    S, target = thetas @ B, G @ B                # everything in the span's coordinates
    best = None
    for _ in range(restarts):
        start = rng.normal(scale=np.sqrt(features), size=N * N)
        fit = least_squares(lambda a: (_model(a, S, N) - target).ravel(), start, jac=lambda a: _jacobian(a, S, N),
                            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=max_nfev)
        if best is None or fit.cost < best.cost:
            best = fit
        if best.cost < 1e-24:
            break
    Uhat = best.x.reshape(N, N) @ B.T            # rows u_j = y_j x_j, in some order
    labels = np.sign(Uhat[:, 0])
    Xhat = Uhat / labels[:, None]
    return {"rows_found": N, "X": Xhat, "y": labels, "gradients": K, "residual": float(np.sqrt(2 * best.cost))}


def score(result: dict, X, y) -> dict:
    """Match each true row to its nearest recovered row: rows within 1e-6 relative, labels recovered."""
    Xhat, yhat = result["X"], result["y"]
    errors, labels = [], 0
    for j in range(X.shape[0]):
        dist = np.linalg.norm(Xhat - X[j], axis=1) / np.linalg.norm(X[j])
        k = int(np.argmin(dist)) if len(dist) else -1
        errors.append(float(dist[k]) if k >= 0 else np.inf)
        labels += int(k >= 0 and yhat[k] == y[j] and dist[k] < 1e-6)
    errors = np.array(errors)
    return {"rows_recovered": int(np.sum(errors < 1e-6)), "labels_recovered": labels,
            "max_row_error": float(errors.max())}


def run(rows: int, features: int, seed: int = 0) -> dict:
    from drflmodel.client_oracle import PolicySite, QueryPolicy

    X, y, site = make_client(rows, features, seed)
    open_site = PolicySite(site, QueryPolicy(rows_above_parameters=False))   # an open site: no floor
    started = time.perf_counter()
    result = attack(open_site, rows, features, seed=seed)
    return {"rows": rows, "P": features, **score(result, X, y), "gradients": result["gradients"],
            "seconds": time.perf_counter() - started}


def main(argv=None) -> None:
    sizes = [(6, 10), (6, 31), (12, 31), (18, 31)] if not argv else [tuple(map(int, a.split("x"))) for a in argv]
    print(f"{'rows':>5} {'P':>4} {'rows recovered':>15} {'labels':>7} {'max row error':>14} {'gradients':>10} {'s':>6}")
    for rows, P in sizes:
        r = run(rows, P)
        print(f"{r['rows']:>5} {r['P']:>4} {r['rows_recovered']:>15} {r['labels_recovered']:>7} "
              f"{r['max_row_error']:>14.2e} {r['gradients']:>10} {r['seconds']:>6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
