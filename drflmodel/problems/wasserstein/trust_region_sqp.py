r"""The fast certified route of Wasserstein DRFL (every loss: smooth ones and piecewise-linear
ones) on unbounded support: trust-region SQP on the exact robust objective
(``solve(method="trust_region_sqp")``, formerly ``"newton"``, chosen by ``method="auto"`` when it
applies).

**Problem** (:mod:`.problem`, unbounded support). With :math:`u=Xw`, the own-label loss
:math:`v_{i0}(u_i)=L(u_i,y_i)`, the flipped one :math:`v_{i1}(u_i)=L(u_i,-y_i)` (classification
with :math:`\kappa<\infty`) and :math:`\mathrm{lo}(w)=\mathrm{Lip}\,N_*(w)` (:func:`.omega.lambda_min`),

.. math::

    F(w)=\sigma_{\mathcal Q}(z(w))+\tfrac{\ell_2}2\|w\|^2,\qquad
    z_s(w)=\min_{\lambda_s\ge\mathrm{lo}(w)}\ \rho_s\lambda_s+\tfrac1{N_s}\sum_{i\in s}
    \max\big(v_{i0}(u_i),\ v_{i1}(u_i)-\kappa\lambda_s\big),

evaluated exactly in numpy (:meth:`~.problem.WassersteinDRFL.objective`).

For a piecewise-linear loss each branch is itself a max of affine pieces; every piece is a *row*
of the sample (:func:`.lagrangian_bound.sample_rows`) and the sample's value is the max over its rows.

**Why it is fast.** A sample's max is decided by its *gap*, the best row minus the runner-up
(e.g. :math:`|v_{i1}(u_i)-v_{i0}(u_i)-\kappa\lambda_s|` for two smooth branches). Inside a trust region
:math:`\|\Delta\|_\infty\le r`, :math:`|\lambda_s-\lambda^0_s|\le r_\lambda` the gap moves by at most
:math:`2\,\mathrm{Lip}\,r\|x_i\|_1+\kappa r_\lambda`, so every sample whose gap exceeds that is *clear*:
its active row is known on the whole region and its loss is smooth there. The clear samples of a
client enter the step model through one quadratic in :math:`\Delta` (value, gradient and Hessian
:math:`X_s^\top\mathrm{diag}(v'')X_s/N_s`, one :math:`O(N_sd^2)` BLAS product), only the few *tied*
samples keep their max (each row by its second-order model in :math:`x_i^\top\Delta`; exact for
affine pieces), and the
trust region is shrunk until at most ``cap`` samples are tied. The step problem

.. math::

    \min_{\Delta,\lambda,t,\alpha}\ \sigma_{\mathcal Q}(t)+\tfrac{\ell_2}2\|w+\Delta\|^2\quad\text{s.t.}\quad
    t_s\ge(\rho_s-\kappa m_s)\lambda_s+c_s+g_s^\top\Delta+\tfrac12\|R_s\Delta\|^2+\tfrac1{N_s}\textstyle\sum_{i\text{ tied}}\alpha_i,

:math:`\alpha_i\ge` each tied branch's model, :math:`\lambda_s\ge\mathrm{lo}(w+\Delta)` (exact norm
cone), the trust region (:math:`m_s` the fraction of clear samples whose flip is active) has
:math:`d+3S+\text{cap}` variables whatever :math:`N` (built per step: with CVXPY parameters its
DPP tensor grows as rows x parameters and did not fit in memory at cap = 1000). At :math:`\Delta=0` the model equals :math:`F(w)`, so the usual
trust-region ratio test on the exact :math:`F` accepts or rejects steps; near the solution the
model is second-order exact on the clear samples and exact in the tied ones' branches (for
piecewise-linear losses the model is exact on the whole region: the steps are trust-region LP/QP
steps and end on the solution's pieces).

**Start.** L-BFGS-B (scipy) on :math:`F` with a subgradient from the active branches -- good to
a few digits, which is all the trust region needs -- from 0, and also from the nominal
(radius-0) minimizer when it does not leave 0: at :math:`w=0` every norm is at its kink and, with
a finite label cost, every sample's own and flipped losses tie, so the subgradient it sees need
not point downhill.

**Degenerate points and recovery.** Samples tied at the point itself (all of them at :math:`w=0`)
cannot be untied by any region, so they are kept tied (with ``cap`` others) rather than shrinking
the region to nothing; while the cap is what keeps good steps short it doubles, up to 16x. A step
problem no solver answers is retried with the next solver, then in a smaller region
(:func:`~drflmodel.problems.engine.steps.recovered_step`).

**Certificate (the conic route's, independent of the steps).** :math:`U=F(w)` in numpy;
:math:`L` = the rigorous Lagrangian bound of :mod:`.lagrangian_bound` at :math:`w` with client
weights from the step problem's multipliers of the :math:`t` constraints (projected onto
:math:`\mathcal Q`). If it does not close to ``gap_tol``, ``method="auto"`` falls back to the conic
route and records the attempt in ``info["route_attempts"]``.
"""

from __future__ import annotations

import time

import cvxpy as cp
import numpy as np
from scipy.optimize import minimize

from ...solution import relative_gap, status_from_gap
from ..._solver_sequence import default_solver, solve_or_raise
from .omega import lambda_min
from ..engine.route import Route
from .lagrangian_bound import sample_rows
from ..engine.steps import check_step_options, recovered_step, warm_start

__all__ = ["WassersteinSQPRoute", "WassersteinStepModel", "value_and_subgradient", "AUTO_MIN_SIZE"]

#: ``method="auto"`` takes this route when (rows N) x (parameters P) reaches this size; below it
#: the conic route is as fast (building the step problems costs ~0.1-0.4 s; measured in
#: benchmarks/bench_fast.py). A federated server has no conic route: there it always applies.
AUTO_MIN_SIZE = 50_000


def _norm_subgradient(w, p: float) -> np.ndarray:
    """One subgradient of :math:`\\|w\\|_p` (p = 1, 2, inf)."""
    g = np.zeros_like(w)
    if not np.any(w):
        return g
    if p == 1:
        return np.sign(w)
    if p == 2:
        return w / np.linalg.norm(w)
    j = int(np.argmax(np.abs(w)))
    g[j] = np.sign(w[j])
    return g


def value_and_subgradient(problem, w) -> tuple[float, np.ndarray]:
    r""":math:`F(w)` and one subgradient (the start's oracle): the active branch of every sample,
    the worst-case weights :math:`q^\star` and, where :math:`\lambda_s^\star=\mathrm{lo}(w)` binds, the
    norm's subgradient times the multiplier :math:`\rho_s-\kappa\cdot` (fraction of active flips)."""
    model, loss = problem.model, problem.loss
    z, lam = problem.worst_case_losses(w)
    value, q = problem.outer(z)
    grad = problem.l2 * w
    lo = lambda_min(model, w)
    dnorm = float(np.linalg.norm(w, model.dual))
    norm_grad = model.lip * _norm_subgradient(w, model.dual)
    if model.task == "regression" and np.isfinite(model.kappa) and dnorm * model.kappa < 1.0:
        norm_grad = np.zeros_like(w)                      # lo = Lip/kappa: flat in w
    for s, client in enumerate(problem.federation.clients):
        if q[s] == 0:
            continue
        u = client.X @ w
        d0 = loss.derivative(u, client.y)
        rho = float(problem.radius[s])
        mu = rho
        if rho > 0 and model.flips:
            active = loss.value(u, -client.y) - loss.value(u, client.y) > model.kappa * lam[s]
            d0 = np.where(active, loss.derivative(u, -client.y), d0)
            mu = rho - model.kappa * float(active.mean())
        g = client.X.T @ d0 / client.X.shape[0]
        if rho > 0 and mu > 0 and lam[s] <= lo * (1 + 1e-12):
            g = g + mu * norm_grad
        grad = grad + q[s] * g
    return value + 0.5 * problem.l2 * float(w @ w), grad


class WassersteinStepModel:
    """The step problem of the module docstring at one linearization (built per step: its tied
    block changes size; with CVXPY parameters its DPP tensor grows as (rows x parameters))."""

    def __init__(self, problem, lin, w, lam_lo, lam_hi, solver: str):
        S, d = problem.n_clients, problem.dim
        model = problem.model
        self.delta = cp.Variable(d, name="delta")
        self.lam = cp.Variable(S, name="lambda")
        self.t = cp.Variable(S, name="t_model")
        quad = cp.hstack([cp.sum_squares(R @ self.delta) for R in lin.factors])
        rhs = cp.multiply(lin.coef, self.lam) + lin.c + lin.G @ self.delta + 0.5 * quad
        w_new = w + self.delta
        cons = [cp.norm(self.delta, "inf") <= lin.r, self.lam >= lam_lo, self.lam <= lam_hi]
        idx = np.flatnonzero(lin.tied)
        if idx.size:
            alpha = cp.Variable(idx.size, name="alpha")
            a = lin.X[idx] @ self.delta
            for k in range(lin.V.shape[0]):
                j = np.flatnonzero(lin.ok[k, idx])
                if not j.size:
                    continue
                row = lin.V[k, idx[j]] + cp.multiply(lin.D[k, idx[j]], a[j])
                if np.any(lin.H[k, idx[j]] > 0):
                    row = row + cp.multiply(0.5 * lin.H[k, idx[j]], cp.square(a[j]))
                if lin.F[k]:
                    row = row - model.kappa * self.lam[lin.cid[idx[j]]]
                cons.append(alpha[j] >= row)
            agg = np.zeros((S, idx.size))
            agg[lin.cid[idx], np.arange(idx.size)] = 1.0 / lin.sizes[lin.cid[idx]]
            rhs = rhs + agg @ alpha
        self.epigraph = self.t >= rhs
        robust = np.flatnonzero(problem.radius > 0)
        if robust.size:
            dn = cp.norm(w_new, model.dual)
            lo = dn if not (model.task == "regression" and np.isfinite(model.kappa)) else \
                cp.maximum(dn, 1.0 / model.kappa)
            cons.append(self.lam[robust] >= model.lip * lo)
        support, scons, _ = problem.outer_expression(self.t)
        obj = support + (0.5 * problem.l2 * cp.sum_squares(w_new) if problem.l2 > 0 else 0)
        self.problem = cp.Problem(cp.Minimize(obj), [self.epigraph, *cons, *scons])
        self.solver = solver

    def solve(self):
        """``(delta, model value, multipliers of the t constraints)``."""
        solve_or_raise(self.problem, self.solver, "step problem")
        return (np.asarray(self.delta.value, float), float(self.problem.value),
                np.asarray(self.epigraph.dual_value, float).reshape(-1))


class _Linearization:
    r"""The step model's data at a point ``w`` (numpy): every sample's rows (:func:`sample_rows`),
    its *gap* (best row minus the runner-up, flip rows shifted by :math:`-\kappa\lambda^0_s`), the
    trust region that leaves at most ``cap`` samples tied, and the client quadratics of the clear
    samples' active rows."""

    def __init__(self, problem, w, lam, r: float, cap: int):
        model, fed = problem.model, problem.federation
        X, y, cid = self.X, self.y, self.cid = fed.pooled()
        S, d = problem.n_clients, problem.dim
        robust_i = problem.radius[cid] > 0
        rows = sample_rows(problem, X @ w, y)
        V, D, H, F = self.V, self.D, self.H, self.F = rows.values, rows.slopes, rows.curvatures, rows.flips
        self.ok = ~F[:, None] | robust_i[None, :]                  # (K, N): flip rows of robust samples only
        shift = model.kappa * F[:, None] * lam[cid][None, :] if model.flips else 0.0
        shifted = np.where(self.ok, V - shift, -np.inf)
        order = np.argsort(-shifted, axis=0)
        top = order[0]
        cols = np.arange(len(y))
        box = _box_dual_norm(d, model.dual)
        self.lam_width = model.lip * r * box
        if shifted.shape[0] > 1:
            gap = shifted[top, cols] - shifted[order[1], cols]          # >= 0; inf if one row only
            reach = 2.0 * model.lip * np.abs(X).sum(axis=1) + (model.kappa * model.lip * box if model.flips else 0.0)
            ratio = np.where(np.isfinite(gap), gap / reach, np.inf)      # tied iff ratio <= r
            # samples tied at the point itself (e.g. every sample at w = 0, where the own and the
            # flipped label's losses are equal) stay tied however small the region: shrinking it
            # to untie them would stall the route there, so they are all kept, plus cap others
            exact = int(np.sum(ratio <= _EXACT_TIE * (1.0 + float(np.abs(w).max()))))
            keep = cap + exact if exact >= cap else cap
            self.capped = bool(np.sum(ratio <= r) > keep)
            if self.capped:
                r = float(np.partition(ratio, keep - 1)[keep - 1]) * (1 - 1e-9)
                self.lam_width = model.lip * r * box
            tied = ratio <= r
        else:
            tied = np.zeros(len(y), bool)
            self.capped = False
        self.r, self.tied = r, tied
        sizes = self.sizes = fed.sizes.astype(float)
        keep = (~tied).astype(float)
        v, dv, hv = V[top, cols], D[top, cols], H[top, cols]
        flip = ~tied & F[top]
        self.c = np.bincount(cid, weights=keep * v, minlength=S) / sizes
        self.G = np.zeros((S, d))
        np.add.at(self.G, cid, X * (keep * dv)[:, None])
        self.G /= sizes[:, None]
        self.factors = np.empty((S, d, d))
        for s in range(S):
            rows = cid == s
            Hs = X[rows].T @ (X[rows] * (keep[rows] * hv[rows])[:, None]) / sizes[s]
            Hs += 1e-12 * (np.trace(Hs) / d + 1.0) * np.eye(d)
            self.factors[s] = np.linalg.cholesky(Hs).T
        self.coef = problem.radius - model.kappa * np.bincount(cid, weights=flip.astype(float), minlength=S) / sizes \
            if model.flips else problem.radius.astype(float)


#: the cap on tied samples grows (doubling) up to this factor when it is what limits the steps
_CAP_GROWTH = 16
#: a sample whose gap (over its reach) is below this, relative to max(1, |w|_inf), is tied at the
#: point itself: no trust region small enough to untie it is worth taking
_EXACT_TIE = 1e-10


def _box_dual_norm(d: int, p: float) -> float:
    """:math:`\\max\\{\\|\\Delta\\|_p:\\|\\Delta\\|_\\infty\\le1\\}` in dimension d."""
    return float(d) ** (1.0 / p) if np.isfinite(p) else 1.0


class WassersteinSQPRoute(Route):
    """Trust-region SQP with the rigorous numpy certificate (module docstring). Options:
    ``max_steps`` (default 60), ``cap`` (samples kept tied in a step model, default 1000; doubled,
    up to 16x, while good steps are cut short by the region it forces),
    ``tol`` (relative certificate gap at which it stops, default 1e-9)."""

    name = "trust_region_sqp"
    aliases = ("newton",)      # its name until 2026-12-06
    options = {"max_steps": 60, "cap": 1000, "tol": 1e-9}
    uses_solver = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        if structure.facts.get("shared_multiplier"):
            return "WAFL shares one multiplier across clients; the conic route applies"
        if structure.facts.get("support_bounded"):
            return "bounded (polyhedral) support: the conic route applies"
        if structure.n_outputs > 1:
            return ("the softmax loss has K scores per sample and this route's step model one; "
                    "the conic route applies")
        if structure.facts.get("fixed_columns"):
            return ("a free intercept (penalize_intercept=False) leaves its column out of the dual norm, "
                    "which this route's step model does not; the conic route applies")
        if not (structure.smooth or structure.piecewise_linear):
            return (f"the loss {structure.loss!r} is neither smooth nor piecewise linear; "
                    f"the conic route applies")
        return None

    def auto_skip(self, structure) -> str | None:
        """Why ``method="auto"`` leaves this problem to the conic route (N*P below
        :data:`AUTO_MIN_SIZE` where the rows are held), or ``None``."""
        if structure.rows_local and structure.size < AUTO_MIN_SIZE:
            return (f"N*P = {structure.size} < {AUTO_MIN_SIZE} (rows x parameters): the conic route is as fast on "
                    f"small problems; force the fast route by its method name")
        return None

    def complete_options(self, given) -> dict:
        from ..._validation import check_int

        opts = check_step_options(super().complete_options(given))
        opts["cap"] = check_int(opts["cap"], "cap", low=1)
        return opts

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        timing = {"start": 0.0, "model": 0.0, "numpy": 0.0, "step_solve": 0.0, "certificate": 0.0}
        solver = default_solver()
        t0 = time.perf_counter()
        w = _start(problem)
        timing["start"] = time.perf_counter() - t0
        value = problem.objective(w)
        r = max(1e-3, 0.1 * float(np.abs(w).max()))
        best, history, q_raw = None, [], None
        robust = problem.radius > 0
        cap = opts["cap"]
        for k in range(1, opts["max_steps"] + 1):
            t0 = time.perf_counter()
            _, lam = problem.worst_case_losses(w)
            lam = np.where(robust, np.nan_to_num(lam), 0.0)
            record = {"iteration": k}
            built = {}

            def solve_step(step_solver, radius):
                """The step at region ``r`` (or, recovering, a smaller ``radius``) with ``step_solver``."""
                t1 = time.perf_counter()
                key = r if radius is None else min(radius, r)
                if key not in built:
                    lin_k = _Linearization(problem, w, lam, key, cap)
                    lam_lo = np.where(robust, np.maximum(lam - lin_k.lam_width, 0.0), 0.0)
                    lam_hi = np.where(robust, lam + lin_k.lam_width, 0.0)
                    built[key] = (lin_k, WassersteinStepModel(problem, lin_k, w, lam_lo, lam_hi, step_solver))
                timing["model"] += time.perf_counter() - t1
                lin_k, model_k = built[key]
                model_k.solver = step_solver
                built["last"] = lin_k
                return model_k.solve()

            t0, building = time.perf_counter(), timing["model"]
            try:
                delta, m_value, q_step = recovered_step(solve_step, solver, r, record)
            except ArithmeticError as exc:
                history.append({**record, "error": str(exc)[:400]})
                break
            lin = built["last"]
            timing["step_solve"] += time.perf_counter() - t0 - (timing["model"] - building)
            t0 = time.perf_counter()
            predicted = value - m_value
            # the model equals F at delta = 0, so a minimum above F(w) beyond tolerance is the step
            # solver's inaccuracy (seen: 6.6e-8 with Clarabel "optimal_inaccurate"), not a
            # stationary point: reject the step, shrink the region and go on
            inaccurate = predicted < -1e-8 * max(1.0, abs(value))     # 10x the solver's 1e-9 gap tolerance
            cand = problem.objective(w + delta)
            actual = value - cand
            ratio = actual / predicted if predicted > 0 else 0.0
            size = float(np.abs(delta).max())
            if actual > 0:
                w, value, q_raw = w + delta, cand, q_step
            if ratio < 0.25:
                r = max(0.25 * size, 1e-14)
            elif ratio > 0.75:            # the region also bounds lambda: widen it even for short steps
                r = 2.0 * lin.r
                if lin.capped:
                    # a good model on a region the cap on tied samples made small: the cap,
                    # not the model, limits progress -- admit more tied samples (up to 16x cap)
                    cap = min(2 * cap, _CAP_GROWTH * opts["cap"])
            else:
                r = max(lin.r, size)
            timing["numpy"] += time.perf_counter() - t0
            record.update(value=value, model_value=m_value, ratio=ratio, radius=lin.r, tied=int(lin.tied.sum()),
                          cap=cap)
            history.append(record)
            record["inaccurate_model"] = bool(inaccurate)
            stalled = (predicted <= 1e-13 * max(1.0, abs(value)) and not inaccurate) or r <= 1e-14
            progress = predicted > opts["tol"] * max(1.0, abs(value)) or inaccurate
            if progress and not stalled and k < opts["max_steps"]:
                continue
            t0 = time.perf_counter()
            sol = problem.certify_at(w, q_raw if q_raw is not None else q_step, "numpy-sqp",
                                     {"step_solver": solver})
            timing["certificate"] += time.perf_counter() - t0
            record["relative_gap"] = gap = relative_gap(sol.lower_bound, sol.upper_bound)
            if best is None or gap < relative_gap(best.lower_bound, best.upper_bound):
                best = sol
            if gap <= opts["tol"] or (gap <= request.gap_tol and stalled) or stalled:
                break
        if best is None:
            return problem.failed_solution([{"method": self.name, "history": history}])
        best.status = status_from_gap(best.lower_bound, best.upper_bound, request.gap_tol)
        best.info.update({"iterations": len(history), "history": history, "gap_tol": request.gap_tol,
                          "time_split": {**timing, "total": time.perf_counter() - started}})
        return best


def _start(problem) -> np.ndarray:
    """L-BFGS-B on the exact objective from the previous answer of a sweep if any, else from 0 --
    and, if it does not leave 0, also from the nominal (radius-0) minimizer, keeping the better.
    At w = 0 every norm is at its kink and, with a finite label cost, every sample's own and
    flipped losses tie, so the subgradient L-BFGS-B sees there need not point downhill (seen: it
    stayed at 0 with F(0) = log 2 where the optimum was 0.6447)."""
    previous = warm_start(problem)
    if previous is not None:
        return _lbfgs(problem, previous)
    w = _lbfgs(problem, np.zeros(problem.dim))
    if float(np.abs(w).max()) > 1e-8:
        return w
    return min([w, _lbfgs(problem, _nominal_minimizer(problem))], key=problem.objective)


def _lbfgs(problem, w0) -> np.ndarray:
    res = minimize(lambda w: value_and_subgradient(problem, w), w0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 500, "ftol": 1e-13, "gtol": 1e-10})
    return np.asarray(res.x, float)


def _nominal_minimizer(problem) -> np.ndarray:
    r"""A few digits of :math:`\arg\min_w\sum_sq_s\frac1{N_s}\sum_iL(x_i^\top w,y_i)+\frac{\ell_2}2\|w\|^2`
    (no transport; ``q`` the center of Q): a start away from the kinks at 0."""
    X, y, cid = problem.federation.pooled()
    q = problem.nominal_weights
    weights = np.asarray(q, float)[cid] / problem.federation.sizes[cid]
    loss, l2 = problem.loss, max(problem.l2, 1e-8)

    def fun(w):
        u = X @ w
        return (float(weights @ loss.value(u, y)) + 0.5 * l2 * float(w @ w),
                X.T @ (weights * loss.derivative(u, y)) + l2 * w)

    res = minimize(fun, np.zeros(problem.dim), jac=True, method="L-BFGS-B", options={"maxiter": 200})
    return np.asarray(res.x, float)
