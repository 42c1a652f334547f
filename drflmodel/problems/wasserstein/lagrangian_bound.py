r"""A rigorous lower bound for Wasserstein DRFL on unbounded support, computed in numpy.

The conic route used the solver's dual objective as :math:`L`; it is a valid bound only up to the
solver's dual residual (measured: :math:`L` above :math:`U` by up to 5e-9 relative). This module
builds a bound that is valid **for any choice of its multipliers** and evaluates it in floating
point, so :math:`L\le p^\star` holds to rounding whatever the solver's accuracy; the solver's answer
only makes it tight.

**Derivation** (DRFL paper, Proposition 4.2, with the Lipschitz form of :mod:`.omega`; unbounded
support). For weights :math:`\tilde q\in\mathcal Q` (weak min–max duality)

.. math::

    p^\star\ \ge\ \min_w\ \sum_s\tilde q_s z_s(w)+\tfrac{\ell_2}2\|w\|^2,\qquad
    z_s(w)=\min_{\lambda_g\ge \mathrm{Lip}\,N_*(w)}\ \rho_s\lambda_g+\tfrac1{N_s}\textstyle\sum_i
    \max_k\big(v_{ik}(w)-\kappa\lambda_g[k\text{ flips}]\big),

where :math:`g` is the multiplier group of client :math:`s` (its own for DRFL, one shared by all
clients for WAFL), :math:`k` runs over the branches (the sample's loss, and its label flip when
:math:`\kappa<\infty` in classification) and, for piecewise-linear losses, the affine pieces
:math:`a_ju+b_j` of each branch. Every :math:`v_{ik}` is convex in the score :math:`u_i=x_i^\top w`
and has a global affine minorant :math:`v_{ik}(u)\ge m_{ik}u+b_{ik}` (the tangent at the current
score for smooth losses; the piece itself for piecewise-linear ones). For weights
:math:`\mu_i` in the simplex over the branches/pieces, and :math:`\nu_g\ge0` on
:math:`\lambda_g\ge\mathrm{Lip}\|w\|_*` (with :math:`\lambda_g\ge0` kept),

.. math::

    \text{objective}\ \ge\ C(\mu)+G(\mu)^\top w+c(\mu)\|w\|_*
    \quad\text{if}\quad \sum_{s\in g}\tilde q_s\big(\rho_s-\kappa\bar\beta_s(\mu)\big)\ge\nu_g\ge0,

(:math:`\bar\beta_s` the mean flip mass of client :math:`s`; the :math:`\ell_2` term by its tangent at
:math:`\hat w`; in regression :math:`\max(\|w\|_*,1/\kappa)\ge\tau\|w\|_*+(1-\tau)/\kappa`). Every
minimizer lies in :math:`\{\|w\|_*\le R\}` with :math:`R=\hat G/(\mathrm{Lip}\sum_s\tilde q_s\rho_s)`
(because :math:`z_s\ge\rho_s\mathrm{Lip}\|w\|_*` for nonnegative losses; :math:`\hat G` the fixed-weight
objective at :math:`\hat w`) and, if :math:`\ell_2>0`, :math:`\|w\|_2\le\sqrt{2\hat G/\ell_2}`. Hence

.. math::

    p^\star\ \ge\ L=C(\mu)-R\,\max\big(0,\ \|G(\mu)\|-c(\mu)\big)

(:math:`\|\cdot\|` the transport norm, dual to :math:`\|\cdot\|_*`; with :math:`R=\infty` the bound
is :math:`C` if :math:`\|G\|\le c` and :math:`-\infty` otherwise). The multipliers are fixed where
the current point decides them (one active branch/piece) and chosen by a small convex problem for
the near-active samples (ties between branches, kinks); that choice is then projected onto its
constraints and :math:`L` recomputed in numpy from scratch.

**A free intercept** (``penalize_intercept=False``: the all-one column :math:`j_0` is neither moved
nor penalized). The norm term and the ridge cover the other columns :math:`\mathcal M` only, so the
minorant is :math:`C+G_{\mathcal M}^\top w_{\mathcal M}+c\|w_{\mathcal M}\|_*+G_{j_0}b` and the
intercept :math:`b` needs a box of its own: every minimizer has :math:`|b|\le R_0`, whence

.. math:: p^\star\ \ge\ L=C-R\max\big(0,\|G_{\mathcal M}\|-c\big)-R_0|G_{j_0}|,

and the multipliers are chosen to make :math:`G_{j_0}` vanish (then :math:`R_0` costs rounding only).
:math:`R_0` follows from :math:`\sum_s\tilde q_s\frac1{N_s}\sum_i\ell_i\le G_{\tilde q}(w^\star)\le\hat G`
(losses non-negative, :math:`\tilde q\ge0`, the worst case at least the empirical loss): with
:math:`|x_{i\mathcal M}^\top w_{\mathcal M}|\le B=\max_i\|x_{i\mathcal M}\|\,R`, a large :math:`b` puts
every score of one label (classification; that label's weight
:math:`a_\pm=\sum_s\tilde q_sn^\pm_s/N_s>0`) or every residual (regression) beyond a point
:math:`t` where the loss exceeds :math:`\hat G/a` and is non-decreasing from there on (convexity:
:math:`\ell(t)\ge\ell(0)`); :math:`t` is found by doubling, exactly in floating point. So
:math:`R_0=B+\max(\ldots)` (:func:`intercept_radius`).

Not covered (the route keeps the solver's dual objective and says so): bounded (polyhedral)
supports, problems with neither a positive radius nor :math:`\ell_2>0`, fixed columns other than
one all-one column, weights :math:`\tilde q` with a negative entry under a free intercept. The
softmax loss has its own bound (:mod:`.multiclass_bound`; a free intercept there keeps the solver's
dual objective).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import cvxpy as cp
import numpy as np

from ...sets import project_simplex
from ..._solver_sequence import OK_STATUSES, SOLVER_DEFAULTS, SolverSequence, installed_solvers, solve_with_fallback, solver_order
from .omega import lambda_min, min_piecewise

__all__ = ["lagrangian_lower_bound", "sample_rows", "SampleRows", "intercept_radius"]

#: a branch/piece is "near-active" for a sample if its value at the current point is within this
#: (relative) tolerance of the sample's maximum; only those get free multipliers
NEAR_ACTIVE = 1e-6


class SampleRows(NamedTuple):
    """Every sample's candidate functions of its score :math:`u`, as rows (K, N) -- see
    :func:`sample_rows`."""

    values: np.ndarray       # (K, N) the row's value at u
    slopes: np.ndarray       # (K, N) its derivative in u (the tangent's slope)
    intercepts: np.ndarray   # (K, N) the tangent's intercept: values = slopes * u + intercepts
    curvatures: np.ndarray   # (K, N) its second derivative in u, clipped at 0 (0 for a piece)
    flips: np.ndarray        # (K,) bool: a label-flip row (carries -kappa * lambda_s)
    branch: np.ndarray       # (K,) int: 0 the own label, 1 the flipped one


def sample_rows(problem, u, y) -> SampleRows:
    r"""The rows of every sample (:class:`SampleRows`): the own-label branch and, in classification
    with :math:`\kappa<\infty`, the flipped one; for a piecewise-linear loss every affine piece
    :math:`a_ju+b_j` of each branch (its own exact minorant), for a smooth loss the branch itself
    with its tangent at ``u`` (a global minorant by convexity). The sample's value is the max over
    its rows (flip rows only for robust clients). Shared by the bound and the SQP route
    (:mod:`.trust_region_sqp`)."""
    model, loss = problem.model, problem.loss
    labels = [(y, False)] + ([(-y, True)] if model.flips else [])
    V, D, B, H, F, branch = [], [], [], [], [], []
    for b, (yb, flip) in enumerate(labels):
        if loss.piecewise_linear:
            for a, c0 in loss.pieces():
                if model.task == "classification":
                    slope, const = a * yb, np.full_like(u, float(c0))
                else:
                    slope, const = np.full_like(u, float(a)), c0 - a * yb
                V.append(slope * u + const), D.append(slope), B.append(const), H.append(np.zeros_like(u))
                F.append(flip), branch.append(b)
        else:
            value, slope = loss.value(u, yb), loss.derivative(u, yb)
            V.append(value), D.append(slope), B.append(value - slope * u)
            H.append(np.maximum(loss.second_derivative(u, yb), 0.0)), F.append(flip), branch.append(b)
    return SampleRows(np.array(V), np.array(D), np.array(B), np.array(H), np.array(F), np.array(branch))


def _candidates(problem, w, X, y, robust_i, lam_i, interval_i):
    """Per-sample affine minorants ``(slope in u, intercept)`` of every branch/piece (rows), which
    rows are label flips, and the near-active mask at ``w``.

    A piece is near-active if it is within :data:`NEAR_ACTIVE` of its branch's value; a branch if
    it is within it of the sample's maximum at the multiplier ``lam_i`` -- or, for the two branches
    of a label flip, if the sample's breakpoint (where they tie) lies in ``interval_i``, the set of
    optimal multipliers of its group (the minimum over lambda may be attained on an interval, and
    the bound must see every sample that ties somewhere on it). Flip rows exist only for robust
    clients (``rho_s > 0``)."""
    model = problem.model
    u = X @ w
    rows = sample_rows(problem, u, y)
    V, flips, branch_of = rows.values, rows.flips, rows.branch
    n_branches = 2 if model.flips else 1
    tol = lambda v: NEAR_ACTIVE * (1.0 + np.abs(v))                  # noqa: E731
    branch_max = np.array([V[branch_of == b].max(axis=0) for b in range(n_branches)])
    piece_near = V >= branch_max[branch_of] - tol(branch_max[branch_of])
    shifted = branch_max.copy()
    if model.flips:
        shifted[1] = branch_max[1] - model.kappa * lam_i
        shifted[1, ~robust_i] = -np.inf
    top = shifted.max(axis=0)
    branch_near = shifted >= top - tol(top)
    if model.flips:
        breakpoint = (branch_max[1] - branch_max[0]) / model.kappa
        inside = robust_i & (breakpoint >= interval_i[0] - tol(interval_i[0])) & \
            (breakpoint <= interval_i[1] + tol(interval_i[1]))
        branch_near[:, inside] = True
    near = piece_near & branch_near[branch_of]
    return rows.slopes, rows.intercepts, flips, near


def _optimal_interval(model, X, y, w, c, rho) -> tuple[float, float]:
    """The set of minimizers over lambda of the client worst case (an interval of breakpoints)."""
    lo = lambda_min(model, w)
    if not model.flips or rho == 0:
        return lo, lo
    u = X @ w
    L, Lt = model.loss.value(u, y), model.loss.value(u, -y)
    cand = np.concatenate([[lo], (Lt - L)[(Lt - L) / model.kappa > lo] / model.kappa])
    vals = np.array([rho * t + c @ np.maximum(L, Lt - model.kappa * t) for t in cand]) if cand.size < 2000 \
        else None
    if vals is None:                                 # many breakpoints: the sorted formula
        best, lam = min_piecewise(rho, c, L, Lt, model.kappa, lo)
        return lam, lam
    best = vals.min()
    opt = cand[vals <= best + 1e-12 * (1.0 + abs(best))]
    return float(opt.min()), float(opt.max())


class _Terms:
    """The data of the bound for one problem and point (module docstring notation)."""

    def __init__(self, problem, w, q):
        model, fed = problem.model, problem.federation
        self.problem, self.model, self.w, self.q = problem, model, np.asarray(w, float), np.asarray(q, float)
        self.X, y, self.cid = fed.pooled()
        self.sizes = fed.sizes.astype(float)
        P = self.X.shape[1]
        self.fixed = np.zeros(P, bool)                 # the columns not moved: a free intercept
        if model.moved is not None:
            self.fixed[np.setdiff1d(np.arange(P), np.asarray(model.moved, int))] = True
        self.M = np.flatnonzero(~self.fixed)
        self.pen = np.asarray(getattr(problem.objectives, "penalty_diagonal", problem.l2 * np.ones(P)), float)
        self.rho = np.asarray(problem.radius, float)
        S = fed.n_clients
        self.groups = np.zeros(S, int) if getattr(problem, "shared_multiplier", False) else np.arange(S)
        self.n_groups = int(self.groups.max()) + 1
        z_exact, lam_exact = problem.worst_case_losses(self.w)     # exact, numpy
        lam_group = np.zeros(self.n_groups)
        for s in range(S):
            if self.rho[s] > 0 and np.isfinite(lam_exact[s]):
                lam_group[self.groups[s]] = lam_exact[s]
        robust_i = self.rho[self.cid] > 0
        self.branch_labels = [y] + ([-y] if model.flips else [])
        interval = np.tile(lam_group[:, None], (1, 2))
        for g in range(self.n_groups):
            members = np.flatnonzero((self.groups == g) & (self.rho > 0))
            if members.size:
                rows = np.isin(self.cid, members)
                c = (self.q[self.cid[rows]] / self.sizes[self.cid[rows]]) if members.size > 1 else \
                    np.full(int(rows.sum()), 1.0 / rows.sum())
                c = c / c.sum()
                interval[g] = _optimal_interval(model, self.X[rows], y[rows], self.w, c, float(self.rho[members[0]]))
        self.slopes, self.intercepts, self.flips, self.near = _candidates(
            problem, self.w, self.X, y, robust_i, lam_group[self.groups[self.cid]],
            interval[self.groups[self.cid]].T)
        self.weights = self.q[self.cid] / self.sizes[self.cid]
        self.member = np.zeros((self.n_groups, S))
        self.member[self.groups, np.arange(S)] = 1.0
        self.tau_free = model.task == "regression" and np.isfinite(model.kappa)
        self.kappa = model.kappa if np.isfinite(model.kappa) else 0.0
        self.G_hat = float(self.q @ z_exact + 0.5 * float(self.w @ (self.pen * self.w)))
        radii = []                                     # bounds on ||w_M||_* of every minimizer
        if model.lip > 0 and float(self.q @ self.rho) > 0:
            radii.append(self.G_hat / (model.lip * float(self.q @ self.rho)))
        ridge = float(self.pen[self.M].min()) if self.M.size else 0.0
        if ridge > 0:
            r2 = np.sqrt(2.0 * max(self.G_hat, 0.0) / ridge)
            radii.append(r2 * (1.0 if model.dual >= 2 else np.sqrt(self.M.size)))   # ||w||_* <= c||w||_2
        self.R = min(radii) if radii else np.inf
        self.R0 = intercept_radius(self, y) if self.fixed.any() else 0.0

    def retangent(self, w_new) -> None:
        """Move the linearization point of a smooth loss (and of the l2 term) to ``w_new``: the
        tangents there are again global minorants, so every bound stays valid. The pieces of a
        piecewise-linear loss are global minorants everywhere; only the l2 tangent moves."""
        self.w = np.asarray(w_new, float)
        loss = self.problem.loss
        if loss.piecewise_linear:
            return
        rows = sample_rows(self.problem, self.X @ w_new, self.branch_labels[0])
        self.slopes, self.intercepts = rows.slopes, rows.intercepts

    def linear_parts(self, mu):
        """``(C, G, beta_bar)`` of the affine minorant for multipliers ``mu`` (K, N), numpy."""
        per_sample = self.weights * np.sum(mu * self.intercepts, axis=0)
        G = self.X.T @ (self.weights * np.sum(mu * self.slopes, axis=0))
        flip_mass = np.sum(mu[self.flips], axis=0)
        beta_bar = np.bincount(self.cid, weights=flip_mass, minlength=len(self.q)) / self.sizes
        return float(per_sample.sum()), G, beta_bar

    def bound_terms(self, C, G, beta_bar, tau, lib):
        """``(C, G, c, slack)`` after the l2 tangent, the norm multipliers and (regression) tau;
        linear in ``beta_bar``/``tau``, so ``lib`` may be numpy or cvxpy."""
        problem, model = self.problem, self.model
        G = G + self.pen * self.w
        C = C - 0.5 * float(self.w @ (self.pen * self.w))
        q_rho = self.member @ (self.q * self.rho)
        slack = q_rho - self.kappa * (self.member @ lib.multiply(self.q, beta_bar))   # nu_g <= slack_g
        if self.tau_free:
            c = model.lip * lib.sum(lib.multiply(q_rho, tau))
            C = C + model.lip / model.kappa * lib.sum(lib.multiply(q_rho, 1.0 - tau))
        elif model.flips:
            c = model.lip * lib.sum(slack)
        else:
            c = model.lip * float(q_rho.sum())
        return C, G, c, slack


def lagrangian_lower_bound(problem, w, q, rounds: int = 2) -> tuple[float, dict]:
    """``(L, info)``: the bound of the module docstring at the point ``w`` with client weights
    ``q`` (which must lie in Q); ``L = -inf`` with ``info["reason"]`` where it does not apply.
    For smooth losses the point is polished and the multipliers re-chosen there (``rounds``
    times at most); the best bound found is returned."""
    if problem.model.support.bounded:
        return float("-inf"), {"reason": "bounded support (polyhedral form): not covered"}
    if problem.model.multiclass:
        from .multiclass_bound import softmax_lagrangian_bound

        return softmax_lagrangian_bound(problem, w, q)
    if problem.model.moved is not None:
        X = problem.federation.pooled()[0]
        fixed = np.setdiff1d(np.arange(X.shape[1]), np.asarray(problem.model.moved, int))
        if fixed.size != 1 or not np.all(X[:, fixed] == 1.0):
            return float("-inf"), {"reason": "fixed columns other than one all-one intercept column: not covered"}
    best = None
    for k in range(rounds):
        L, info, w = _one_round(problem, w, q)
        info["rounds"] = k + 1
        if best is None or L > best[0]:
            best = (L, info)
        if problem.loss.piecewise_linear or info.get("G_hat", np.inf) - L <= 1e-9 * max(1.0, abs(L)):
            break
    return best


def _one_round(problem, w, q):
    T = _Terms(problem, w, q)
    counts = T.near.sum(axis=0)
    mu = np.where(T.near, 1.0 / np.maximum(counts, 1), 0.0)
    w_dual = float(np.linalg.norm(T.w[T.M], T.model.dual))
    tau = (np.full(T.n_groups, 1.0 if w_dual * T.model.kappa >= 1.0 else 0.0) if T.tau_free else None)
    free = np.flatnonzero(counts > 1)
    target = 1e-9 * max(1.0, abs(T.G_hat))
    best = (*_evaluate(T, mu, tau), mu, tau, "not better than uniform multipliers")
    for mu_k, tau_k, status in _choose(T, mu, tau, free):      # the next solver only if needed
        L, parts = _evaluate(T, mu_k, tau_k)
        if L > best[0]:
            best = (L, parts, mu_k, tau_k, status)
        if T.G_hat - L <= target:
            break
    L, parts, mu, tau, solved = best
    steps = 0
    if (not problem.loss.piecewise_linear or problem.l2 > 0) and np.isfinite(T.R):
        L, parts, steps = _polish(T, mu, tau, L, parts, gap_target=target)
    info = {"lower_bound_method": "numpy Lagrangian bound (rigorous)", "radius_bound_R": float(T.R),
            "free_samples": int(free.size), "multiplier_problem": solved, "polish_steps": steps,
            "G_hat": T.G_hat, **parts}
    return L, info, T.w


def _polish(T, mu, tau, L, parts, gap_target, max_steps: int = 4):
    r"""Smooth losses: with the multipliers fixed, the bound is tight only where the linearization
    point minimizes the Lagrangian :math:`f_\mu(w)+c\|w\|_*` (:math:`f_\mu` the
    multiplier-weighted losses plus the ridge). A conic solver's :math:`\hat w` may be accurate in
    value but not in :math:`w` (flat directions), so take proximal Newton steps on it (exact
    Hessian of :math:`f_\mu`, the norm kept exact, a small problem in :math:`d` variables) and
    re-linearize; the bound is valid at every point, and the best one is kept. Piecewise-linear
    losses with a ridge: the same with only the ridge's tangent moving (one exact step)."""
    problem, loss = T.problem, T.problem.loss
    _, _, beta_bar = T.linear_parts(mu)
    c = float(T.bound_terms(0.0, np.zeros(T.X.shape[1]), beta_bar, tau, np)[2])
    best = (L, parts)
    w = T.w.copy()
    steps = 0
    for steps in range(1, max_steps + 1):
        if T.G_hat - best[0] <= gap_target:
            break
        if loss.piecewise_linear:      # the pieces are fixed affine functions: only the ridge curves
            grad = T.X.T @ (T.weights * np.sum(mu * T.slopes, axis=0)) + T.pen * w
            H = np.diag(T.pen + 1e-12)
        else:
            u = T.X @ w
            rows = [T.weights * mu[r] for r in range(mu.shape[0])]
            grad = T.X.T @ sum(r * loss.derivative(u, yb) for r, yb in zip(rows, T.branch_labels)) + T.pen * w
            curv = sum(r * loss.second_derivative(u, yb) for r, yb in zip(rows, T.branch_labels))
            H = T.X.T @ (T.X * curv[:, None]) + np.diag(T.pen + 1e-12)
        delta = cp.Variable(len(w))
        R = np.linalg.cholesky(H + 1e-12 * np.trace(H) * np.eye(len(w))).T
        norm_w = cp.norm((w + delta)[T.M], T.model.dual)
        if T.tau_free:     # regression: the exact term Lip sum_s q_s rho_s max(||w||_*, 1/kappa)
            norm_term = T.model.lip * float(T.q @ T.rho) * cp.maximum(norm_w, 1.0 / T.model.kappa)
        else:     # c < 0 only by rounding (then the bound is -inf anyway); the point choice stays convex
            norm_term = max(c, 0.0) * norm_w
        model = cp.Problem(cp.Minimize(grad @ delta + 0.5 * cp.sum_squares(R @ delta) + norm_term),
                           [cp.norm(delta, "inf") <= 1.0 + float(np.abs(w).max())])
        if solve_with_fallback(model, tolerances=SOLVER_DEFAULTS) is None or delta.value is None:
            break
        w = w + np.asarray(delta.value, float)
        T.retangent(w)
        cand = _evaluate(T, mu, tau)
        if cand[0] > best[0]:
            best = cand
    return best[0], best[1], steps



#: a linear multiplier problem goes to HiGHS' dual simplex (through scipy, always installed) with
#: feasibility tolerances at 1e-10: its vertex leaves ||G|| - c at rounding level (1e-17 measured),
#: where an interior-point answer leaves it at the solver's tolerance (1e-11..7e-9) and HiGHS'
#: default 1e-7 tolerances at 4e-10 -- multiplied by R (~3e3 with radius 1e-4), that alone opened
#: gaps of 4e-6..7e-5 relative on the DRFL paper's heart and breast-cancer folds
LP_SOLVER = ("SCIPY", {"scipy_options": {"method": "highs-ds", "primal_feasibility_tolerance": 1e-10,
                                         "dual_feasibility_tolerance": 1e-10}})
#: the small problems of this module run Clarabel at its own default tolerances (1e-8), as they
#: always did (:data:`~drflmodel._solver_sequence.SOLVER_DEFAULTS`); any answer is made
#: feasible before it enters the bound


def _multiplier_solvers(norm: float) -> SolverSequence:
    """The solver sequence of the multiplier problem, best first: with a polyhedral transport norm
    (1, inf) it is a linear program (:data:`LP_SOLVER`, then the documented order from
    Clarabel); with the l2 norm a second-order cone program (the documented order)."""
    if norm in (1, np.inf) and LP_SOLVER[0] in installed_solvers():
        return SolverSequence(None, [LP_SOLVER[0], *solver_order()], record_value=False,
                              tolerances={LP_SOLVER[0]: LP_SOLVER[1], **SOLVER_DEFAULTS})
    return SolverSequence(None, solver_order(), record_value=False, tolerances=SOLVER_DEFAULTS)


def _choose(T, mu, tau, free):
    """Maximize the bound over the free multipliers (a small convex problem in the near-active
    samples' weights and tau only): yields ``(mu, tau, status)`` for each solver of
    :func:`_multiplier_solvers` that answers, in order. Any answer is made feasible here and by
    :func:`_evaluate`, so its accuracy matters for tightness only, never for validity."""
    if free.size == 0 and not T.tau_free:
        yield mu, tau, "none needed"
        return
    fixed = mu.copy()
    fixed[:, free] = 0.0
    C0, G0, b0 = T.linear_parts(fixed)
    K, F = mu.shape[0], free.size
    cand = T.near[:, free]                                   # (K, F)
    Cf = T.weights[free] * T.intercepts[:, free]             # (K, F)
    Gf = T.X[free].T[:, None, :] * (T.weights[free] * T.slopes[:, free])[None, :, :]   # (d, K, F)
    Bf = np.zeros((len(T.q), K, F))
    Bf[T.cid[free], :, np.arange(F)] = (T.flips[:, None] / T.sizes[T.cid[free]][None, :]).T
    m = cp.Variable((K, F), nonneg=True) if F else None
    mflat = cp.vec(m, order="C") if F else None
    C = C0 + (cp.sum(cp.multiply(Cf, m)) if F else 0.0)
    G = G0 + (Gf.reshape(len(G0), K * F) @ mflat if F else 0.0)
    beta_bar = b0 + (Bf.reshape(len(T.q), K * F) @ mflat if F else 0.0)
    tau_v = cp.Variable(T.n_groups) if T.tau_free else None
    C, G, c, slack = T.bound_terms(C, G, beta_bar, tau_v, cp)
    t = cp.Variable(nonneg=True)
    cons = [cp.norm(G[T.M], T.model.norm) - c <= t]
    if isinstance(slack, cp.Expression):
        cons.append(slack >= 0)
    if F:
        cons += [cp.sum(m, axis=0) == 1, m <= cand.astype(float)]
    if T.tau_free:
        cons += [tau_v >= 0, tau_v <= 1]
    if np.isfinite(T.R):
        objective = C - T.R * t
    else:
        objective, cons = C, cons + [t == 0]
    if T.fixed.any():                       # the free intercept's coefficient: |G_j0| at R_0's price
        fixed_part = cp.norm(G[np.flatnonzero(T.fixed)], 1)
        if np.isfinite(T.R0):
            objective = objective - T.R0 * fixed_part
        else:
            cons.append(fixed_part == 0)
    prob = cp.Problem(cp.Maximize(objective), cons)
    seq = _multiplier_solvers(T.model.norm)
    for solver in seq:
        with warnings.catch_warnings():     # CVXPY's variable-bound inference for the LP
            warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
            answered = seq.run(prob, solver) is not None
        if not answered or prob.status not in OK_STATUSES:
            continue
        chosen_mu = mu
        if F:
            chosen_mu = mu.copy()
            vals = np.asarray(m.value, float)
            for j, i in enumerate(free):
                rows = np.flatnonzero(T.near[:, i])
                chosen_mu[:, i] = 0.0
                chosen_mu[rows, i] = project_simplex(vals[rows, j])
        chosen_tau = np.clip(np.asarray(tau_v.value, float), 0.0, 1.0) if T.tau_free else tau
        yield chosen_mu, chosen_tau, f"{prob.status} ({solver})"


def _repair_flip_mass(T, mu, slack):
    """Multipliers with negative lambda coefficients (flip mass above :math:`\\rho` in a group):
    move the excess flip mass of each such group onto the own branch's first row -- any point of
    the per-sample simplex gives a valid bound, so this keeps validity; when the deficit is a
    rounding one (the multiplier problem's tolerance) the bound moves by the same amount."""
    mu = mu.copy()
    own_row = int(np.flatnonzero(~T.flips)[0])
    for g in np.flatnonzero(slack < 0):
        rows = np.isin(T.cid, np.flatnonzero(T.groups == g))
        need = float(T.member[g] @ (T.q * T.rho))               # sum_s q_s rho_s over the group
        have = T.kappa * float(T.member[g] @ (T.q * T.linear_parts(mu)[2]))
        factor = (need / have) * (1.0 - 1e-12) if have > 0 else 0.0
        moved = mu[T.flips][:, rows] * (1.0 - factor)
        mu[np.ix_(T.flips, rows)] *= factor
        mu[own_row, rows] += moved.sum(axis=0)
    return mu


def _evaluate(T, mu, tau):
    """The bound in numpy, from scratch, for multipliers already feasible for their own
    constraints (simplex per sample, tau in [0, 1]); a negative lambda coefficient (the multiplier
    problem is solved to a tolerance) is repaired first (:func:`_repair_flip_mass`; valid for any
    deficit, tight when it is a rounding one); ``-inf`` if one stays negative."""
    def terms(mu):
        C, G, c, slack = T.bound_terms(*T.linear_parts(mu), tau, np)
        return C, G, c, np.atleast_1d(np.asarray(slack, float))

    C, G, c, slack = terms(mu)
    if T.model.flips and np.any(slack < 0):
        C, G, c, slack = terms(_repair_flip_mass(T, mu, slack))
    if np.any(slack < 0):
        return float("-inf"), {"reason": f"lambda coefficient negative ({float(slack.min()):.3g})"}
    excess = max(0.0, float(np.linalg.norm(G[T.M], T.model.norm)) - float(c))
    if excess > 0 and not np.isfinite(T.R):
        return float("-inf"), {"reason": "no bound on ||w|| and ||G|| > c", "norm_excess": excess}
    fixed_part = float(np.abs(G[T.fixed]).sum())
    if fixed_part > 0 and not np.isfinite(T.R0):
        return float("-inf"), {"reason": "no bound on the free intercept and its coefficient is not 0",
                               "intercept_coefficient": fixed_part}
    info = {"lagrangian_constant": float(C), "norm_excess": excess}
    if T.fixed.any():
        info.update(intercept_radius=float(T.R0), intercept_coefficient=fixed_part)
    return (float(C) - (T.R * excess if excess > 0 else 0.0) - (T.R0 * fixed_part if fixed_part > 0 else 0.0)), info


def _escape(value, level: float, direction: float) -> float:
    r"""The first :math:`t=\pm2^k` (``direction``, :math:`k\ge0`) where the convex ``value`` exceeds
    ``level`` and :math:`\ge` its value at 0 -- so it stays above ``level`` from there on in that
    direction; ``inf`` if none up to :math:`2^{64}`. Powers of two: the points are exact."""
    at_zero = float(value(0.0))
    margin = 1e-9 * (1.0 + abs(level))              # the values' rounding, with room
    for k in range(65):
        t = direction * 2.0 ** k
        v = float(value(t))
        if v > level + margin and v >= at_zero + margin:
            return abs(t)
    return float("inf")


def intercept_radius(T, y) -> float:
    r""":math:`R_0`: every minimizer of the fixed-weight objective has :math:`|b|\le R_0` (module
    docstring, "A free intercept"); ``inf`` where it cannot be bounded (a weight below 0, a label
    no weighted client holds, no bound :math:`R` on :math:`\|w_{\mathcal M}\|_*`)."""
    model, loss, q = T.model, T.problem.loss, T.q
    if np.any(q < 0) or not np.isfinite(T.R) or T.G_hat < 0:
        return float("inf")
    B = float(np.max(np.linalg.norm(T.X[:, T.M], model.norm, axis=1))) * T.R if T.M.size else 0.0
    mass = q[T.cid] / T.sizes[T.cid]                 # the weight of each row in sum_s q_s mean_i
    one = lambda label: (lambda t: loss.value(np.array([t]), np.array([label]))[0])     # noqa: E731
    if model.task == "classification":
        a_neg, a_pos = float(mass[y < 0].sum()), float(mass[y > 0].sum())
        if a_neg <= 0 or a_pos <= 0:
            return float("inf")
        up = _escape(one(-1.0), T.G_hat / a_neg, +1.0)     # b - B beyond it: every y = -1 row loses more
        down = _escape(one(+1.0), T.G_hat / a_pos, -1.0)
        return B + max(up, down)
    a = float(mass.sum())
    if a <= 0:
        return float("inf")
    up = _escape(one(0.0), T.G_hat / a, +1.0)              # residual t = score - y: loss(t, 0) = l(t)
    down = _escape(one(0.0), T.G_hat / a, -1.0)
    return B + max(abs(up + float(y.max())), abs(down - float(y.min())))
