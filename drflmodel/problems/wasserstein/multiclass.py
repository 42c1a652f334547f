r"""Wasserstein DRFL with the softmax loss: the per-client worst case over a type-1 Wasserstein
ball for :math:`K` classes, derived exactly (not a bound), and its conic form.

**Setting.** Features :math:`x\in\mathbb R^d`, a label :math:`y\in\{0,\dots,K-1\}`, class rows
:math:`w_1,\dots,w_K` (``theta.reshape(K, d)``, :mod:`drflmodel.layout`), scores :math:`s_k=w_k^\top x`
and the softmax cross-entropy :math:`\ell(W;x,y)=\log\sum_ke^{s_k}-s_y`. The transport cost is
the DRFL paper's classification cost (Bai, Wong, Qiao & Ho, eq. (13)) with :math:`K` labels,

.. math:: d\big((x,y),(x',y')\big)=\|x-x'\|+\kappa\,\mathbb 1[y\ne y'],

:math:`\|\cdot\|` the feature norm (1, 2 or :math:`\infty`) and :math:`\|\cdot\|_*` its dual.

**Step 1 (duality).** For :math:`\rho_s>0`, the DRFL paper's Proposition 4.2 (strong duality by
Shapiro 2001, Proposition 3.4; in general form Gao & Kleywegt 2023, "Distributionally robust
stochastic optimization with Wasserstein distance", Math. Oper. Res. 48(2), Theorem 1, and
Blanchet & Murthy 2019, "Quantifying distributional model risk via optimal transport", Math. Oper.
Res. 44(2), Theorem 1; :math:`\ell` is continuous and the cost lower semicontinuous) gives

.. math:: \sup_{W(\mathbb P,\hat{\mathbb P}_s)\le\rho_s}\mathbb E^{\mathbb P}[\ell]
   =\min_{\lambda\ge0}\ \rho_s\lambda+\frac1{N_s}\sum_i\max_{y'}\Big(\sup_x\
   \ell(W;x,y')-\lambda\|x-\hat x_i\|\Big)-\lambda\kappa\mathbb 1[y'\ne\hat y_i].

**Step 2 (the sup over x, one label y').** :math:`f=\ell(W;\cdot,y')` is convex and finite with
:math:`\nabla_xf=\sum_kp_k(w_k-w_{y'})`, :math:`p=\mathrm{softmax}(s)` in the open simplex, so the
closure of its gradients is :math:`\mathrm{conv}\{w_k-w_{y'}\}_k` and its recession function is
:math:`f_\infty(v)=\max_k(w_k-w_{y'})^\top v` (Rockafellar 1970, *Convex Analysis*, Theorem 8.5:
:math:`(f(x+tv)-f(x))/t\uparrow f_\infty(v)`). Let
:math:`L_{y'}(W)=\max_{\|v\|\le1}f_\infty(v)=\max_k\|w_k-w_{y'}\|_*`. If :math:`\lambda\ge L_{y'}`,
:math:`f` is :math:`\lambda`-Lipschitz and the sup is :math:`f(\hat x_i)` (at :math:`x=\hat x_i`); if
:math:`\lambda<L_{y'}`, along the maximizing unit :math:`v`,
:math:`f(\hat x_i+tv)-\lambda t=f(\hat x_i)+t\big((f(\hat x_i+tv)-f(\hat x_i))/t-\lambda\big)\to\infty`
because the quotient increases to :math:`f_\infty(v)>\lambda`. This is the
Lipschitz case of Mohajerin Esfahani & Kuhn (2018, Math. Program. 171, Theorem 6.3) and of
Shafieezadeh-Abadeh, Kuhn & Mohajerin Esfahani (2019, "Regularization via mass transportation",
JMLR 20(103)): the growth rate is the Lipschitz constant, here computed exactly.

**Step 3 (the labels).** With :math:`\kappa<\infty` every label is a candidate, so the client's term
is finite iff :math:`\lambda\ge\Lambda(W)=\max_{j<k}\|w_k-w_j\|_*` (the exact Lipschitz constant of
the loss in :math:`x` over all labels -- no surrogate), and then

.. math:: z_s(W)=\min_{\lambda\ge\Lambda(W)}\ \rho_s\lambda+\frac1{N_s}\sum_i
   \max\big(L_i(W),\ \tilde L_i(W)-\kappa\lambda\big),\qquad
   \tilde L_i=\max_{y'\ne\hat y_i}\ell(W;\hat x_i,y')=\log\textstyle\sum_ke^{s_{ik}}-\min_{k\ne\hat y_i}s_{ik}.

With :math:`\kappa=\infty` only :math:`y'=\hat y_i` is a candidate:
:math:`\lambda\ge\max_{y\in Y_s}\max_k\|w_k-w_y\|_*`, :math:`Y_s` the labels client *s* holds.
The formula is **exact** and jointly convex in :math:`(W,\lambda)` (a log-sum-exp, a max of norms of
linear maps). For :math:`K=2` it is the DRFL paper's Corollary B.6 with :math:`w=w_1-w_0`.

**Conic form** (:func:`omega_constraints_softmax`). Since
:math:`\ell(\hat x_i,k)=\ell(\hat x_i,\hat y_i)+s_{i\hat y_i}-s_{ik}`, one epigraph
:math:`t_i\ge\log\sum_ke^{s_{ik}}-s_{i\hat y_i}` (:math:`K` exponential cones) serves every label:
:math:`\alpha_i\ge t_i`, :math:`\alpha_i\ge t_i+s_{i\hat y_i}-s_{ik}-\kappa\lambda_s` for all
:math:`k`, :math:`\tau\ge\|w_k-w_j\|_*` for the :math:`K(K-1)/2` pairs and :math:`\lambda_s\ge\tau`
(:math:`NK` exponential cones, not :math:`NK^2`; the pair norms are linear for the
:math:`\ell_1`/:math:`\ell_\infty` costs, second-order cones for :math:`\ell_2`).

**An intercept the adversary does not move** (``penalize_intercept=False``): the intercept is the
constant 1 of every sample, so the sup of Step 2 runs over the other coordinates only (the
support of :math:`x` is :math:`\{x_0=1\}`); the gradients project onto them and every dual norm
above reads the moved columns only (``model.moved``). The same holds for the scalar-score losses
(:func:`.omega.lambda_min`).

**Certificate.** :math:`U` is the exact objective above in numpy (the minimum over :math:`\lambda` by
sorting the breakpoints, :func:`.omega.min_piecewise`); :math:`L` is the rigorous numpy Lagrangian
bound of :mod:`.multiclass_bound` when it closes the gap, else the conic dual objective of the
solved model (accepted when the solver's dual residual is at most 1e-6), as ``info["lower_bound_method"]``
says. With a free intercept only the conic dual objective is available.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
from scipy import special

__all__ = ["class_pairs", "pair_matrix", "class_rows", "pairwise_lipschitz", "score_expr",
           "softmax_own_and_flipped", "omega_constraints_softmax"]


def class_pairs(K: int, labels=None) -> list[tuple[int, int]]:
    """The class pairs :math:`(j,k)`, :math:`j<k`, whose difference bounds :math:`\\lambda`: all of
    them, or (``labels`` given: :math:`\\kappa=\\infty`) those touching a label in ``labels``."""
    keep = None if labels is None else {int(v) for v in np.asarray(labels).ravel()}
    return [(j, k) for j in range(K) for k in range(j + 1, K)
            if keep is None or j in keep or k in keep]


def pair_matrix(K: int, labels=None) -> np.ndarray:
    """Rows :math:`e_k-e_j` for the pairs of :func:`class_pairs`, shape ``(pairs, K)``."""
    pairs = class_pairs(K, labels)
    D = np.zeros((len(pairs), K))
    for r, (j, k) in enumerate(pairs):
        D[r, k], D[r, j] = 1.0, -1.0
    return D


def class_rows(model, w):
    """The class rows :math:`W` (``(K, d)``) of the class-major ``w`` (numpy or CVXPY)."""
    K, d = model.n_outputs, model.n_features
    if isinstance(w, cp.Expression):
        return cp.reshape(w, (K, d), order="C")
    return np.asarray(w, float).reshape(K, d)


def _moved(model, rows):
    return rows if model.moved is None else rows[:, np.asarray(model.moved, dtype=int)]


def pairwise_lipschitz(model, w, labels=None) -> float:
    """:math:`\\Lambda(W)=\\max_{j<k}\\|w_k-w_j\\|_*` over the moved columns (numpy; module
    docstring, Step 3); with :math:`\\kappa=\\infty` over the pairs touching ``labels``."""
    D = pair_matrix(model.n_outputs, None if model.flips else labels)
    if D.shape[0] == 0:
        return 0.0
    M = D @ _moved(model, class_rows(model, w))
    return float(np.max(np.linalg.norm(M, model.dual, axis=1)))


def score_expr(model, X, w):
    """Scores :math:`S=XW^\\top` (``(N, K)``) for numpy or CVXPY ``w``."""
    return X @ class_rows(model, w).T


def softmax_own_and_flipped(model, w, X, y) -> tuple[np.ndarray, np.ndarray | None]:
    """:math:`L_i=\\ell(\\hat x_i,\\hat y_i)` and :math:`\\tilde L_i=\\log\\sum_ke^{s_{ik}}-\\min_{k\\ne\\hat y_i}s_{ik}`
    (``None`` when :math:`\\kappa=\\infty`)."""
    S = score_expr(model, X, w)
    idx = np.asarray(y).astype(np.intp)
    lse = special.logsumexp(S, axis=1)
    own = S[np.arange(S.shape[0]), idx]
    L = lse - own
    if not model.flips:
        return L, None
    others = S.copy()
    others[np.arange(S.shape[0]), idx] = np.inf
    return L, lse - others.min(axis=1)


def _pair_norms_le(M, bound, dual: float) -> list:
    """:math:`\\|M_{r,:}\\|_*\\le` ``bound`` (a scalar expression) for every row of ``M``."""
    if np.isinf(dual):
        return [cp.abs(M) <= bound]
    if dual == 1:
        return [cp.sum(cp.abs(M), axis=1) <= bound]
    return [cp.norm(M, 2, axis=1) <= bound]


def omega_constraints_softmax(model, w, lam, alpha, X, y, cid, clients) -> list:
    """:math:`(\\lambda_s,\\alpha_s,W)\\in\\Omega_s` for the softmax loss (module docstring, conic
    form); arguments as :func:`.omega.omega_constraints`. Unbounded support only."""
    N, K = X.shape[0], model.n_outputs
    y = np.asarray(y).astype(np.intp)
    rows = class_rows(model, w)
    if isinstance(w, cp.Expression) and not w.is_constant():
        S = cp.Variable((N, K))              # one copy of the dense scores (as the scalar form)
        cons = [S == X @ rows.T]
    else:
        S, cons = X @ np.asarray(rows.value if isinstance(rows, cp.Expression) else rows, float).T, []
    onehot = np.zeros((N, K))
    onehot[np.arange(N), y] = 1.0
    t = cp.Variable(N)
    cons += [model.loss.block_expr(S, y) <= t, t <= alpha]
    if model.flips:
        own = cp.sum(cp.multiply(onehot, S), axis=1)
        gap = t + own - model.kappa * lam[cid] - alpha                        # (N,)
        cons.append(cp.reshape(gap, (N, 1), order="C") @ np.ones((1, K)) <= S)
    moved = _moved(model, rows)
    clients = np.asarray(clients, dtype=int)
    groups = {None: clients} if model.flips else {}
    if not model.flips:                      # kappa = inf: each client's own labels decide its pairs
        for c in clients:
            groups.setdefault(tuple(np.unique(y[cid == c]).tolist()), []).append(int(c))
    for labels, members in groups.items():
        D = pair_matrix(K, labels)
        if D.shape[0] == 0:
            continue
        tau = cp.Variable()
        cons += _pair_norms_le(D @ moved, tau, model.dual)
        cons.append(lam[np.asarray(members, dtype=int)] >= tau)
    return cons
