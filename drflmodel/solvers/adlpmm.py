r"""AD-LPMM for Wasserstein DRFL (Bai, Wong, Qiao & Ho, the DRFL paper: Algorithm 1 of §5, the
operators (6)–(10) and Appendix E), with the gaps the paper leaves (step size, initialization,
stopping rule) filled as stated below.

Runs on a :class:`~drflmodel.problems.wasserstein.WassersteinDRFL` and solves its ADMM-ready form (5)

.. math::

    \min\ \hat q^\top t+\theta\|t\|_{p_*}-\gamma\ (+\tfrac{\ell_2}2\|w\|^2)\quad\text{s.t.}\quad
    t=z+\gamma e+\eta,\ \ w=\hat w_s,\ \ z_s=\varpi_s:=\rho_s\lambda_s+\tfrac1{N_s}e^\top\alpha_s,\
    (\lambda_s,\alpha_s,\hat w_s)\in\Omega_s,\ \eta\ge0,

with multipliers :math:`\sigma` (of :math:`t-z-\gamma e-\eta`), :math:`\psi_s` (of :math:`w-\hat w_s`)
and :math:`\zeta_s` (of :math:`\varpi_s-z_s`). One iteration :math:`k` (= one communication round):

1. server, group 1 (Jacobi, from :math:`(t^k,z^k,\eta^k,\gamma^k)`):
   :math:`w^{k+1}=\frac{\sum_s(c\hat w_s^k-\psi_s^k)}{cS+\ell_2}` (6),
   :math:`z^{k+1}=\frac{c\varpi^k+c'z^k+\zeta^k+\sigma^k+c(t^k-z^k-\gamma^ke-\eta^k)}{c+c'}` (7),
   :math:`t^{k+1}=u-\frac\theta{c'}\mathrm{Proj}_{B_p}(\frac{c'}\theta u)`,
   :math:`u=t^k-(\hat q+\sigma^k+c(t^k-z^k-\gamma^ke-\eta^k))/c'` (8; the projection onto the unit
   ball of the primal :math:`p`-norm, :math:`p\in\{1,2,\infty\}`, with the sort-based exact
   :math:`\ell_1` projection and the soft threshold :math:`[|x|-\delta e]_+\odot\mathrm{sgn}(x)`, whose :math:`|x|` the paper
   omits);
2. server, group 2: with :math:`r=-\gamma^ke-\eta^k+t^{k+1}-z^{k+1}`,
   :math:`\eta^{k+1}=[\eta^k+(\sigma^k+cr)/c'']_+` (9),
   :math:`\gamma^{k+1}=\gamma^k+(1+e^\top\sigma^k+ce^\top r)/c''` (10);
3. server → client *s*: :math:`(w^{k+1},z^{k+1}_s)` (the global :math:`w^{k+1}`, where the paper's Algorithm 1, line 11, writes :math:`w^{k+1}_s`);
4. client *s*, on its own data: :math:`(\lambda_s,\alpha_s,\hat w_s)^{k+1}=\mathfrak C_s(w^{k+1},z^{k+1}_s,
   \psi^k_s,\zeta^k_s)` (``problem.client_view(s).admm_step``, a small conic program; no lower
   bound on :math:`\alpha`, :math:`\lambda_s\ge0` explicit, loss epigraphs as inequalities);
5. client *s* → server: :math:`(\hat w_s^{k+1},\varpi_s^{k+1})` (:math:`m+1` floats);
6. duals, replicated by the server and by client *s* (both know every term):
   :math:`\sigma\mathrel{+}=c(t-z-\gamma e-\eta)`, :math:`\psi_s\mathrel{+}=c(w-\hat w_s)`,
   :math:`\zeta_s\mathrel{+}=c(\varpi_s-z_s)`. With ``dual_storage="server"`` the server keeps them and
   sends :math:`(\psi_s^k,\zeta_s^k)` in step 3 instead (:math:`m+1` more floats down per client).

Constants: step :math:`c>0` (default 1; the paper gives no value), proximity
:math:`c'=c''=2Sc` (``proximal="paper"``, the operators verbatim; the paper's "that is,
:math:`c'=2Sc`" is a valid upper choice, not an equality) or the tight
:math:`c'=2c`, :math:`c''=(S+1)c` (``"tight"``, :math:`\lambda_{\max}(A_1^\top A_1)=2`,
:math:`\lambda_{\max}(A_2^\top A_2)=S+1`). All primal and dual variables start at 0 (the paper leaves the initialization open),
:math:`\varpi^0=0`.

Weight sets: ``LpBall(q̂, θ, p)`` as in (5); ``Simplex(S)`` as the ball :math:`(\frac1Se, 2, 1)`
(equal to :math:`\Delta_S`); fixed weights q̂ as :math:`\theta=0` (the prox is the
identity). ``l2 > 0`` adds :math:`\frac{\ell_2}2\|w\|^2` to the objective, which changes only (6) as
written (an extension; the paper has no ridge). :class:`~drflmodel.problems.wasserstein.ExactDualWAFL`
(one multiplier shared by all clients) is not separable and is refused.

**Sampled client step** (the inexact update the paper suggests in §5; ``sample_size=b``, default ``None``: the exact step). At every
round client *s* draws :math:`b` distinct rows :math:`\tilde{\mathcal I}_s` of its :math:`N_s`
uniformly at random (without replacement, from its own generator ``runtime.client_rngs[s]``) and
solves :math:`\mathfrak C_s` with :math:`\Omega_s` built on those rows only, i.e. with
:math:`\tilde\varpi_s=\rho_s\lambda_s+\frac1b\sum_{i\in\tilde{\mathcal I}_s}\alpha_{si}`, which it sends
in place of :math:`\varpi_s`. A client with :math:`N_s=b` takes the exact step (its sample is all
its rows; it draws nothing). The paper gives no guarantee for this variant (a heuristic: the
iterates do not settle, they fluctuate around the exact solution with an amplitude that shrinks
as :math:`b\to N_s`), so ``expected_rate`` is ``None``, and the stopping rule rarely fires before
``rounds``. Each sampled step compiles a new small conic program (about 10 ms per client step,
against about 2 ms for the exact step, whose compiled problem is reused).

Stopping (the paper leaves the rule open): the run stops early (``Trace.info["converged"]``) once the primal residual
:math:`\max\{\|t-z-\gamma e-\eta\|_\infty,\max_s\|w-\hat w_s\|_\infty,\max_s|\varpi_s-z_s|\}\le`
``tol_primal`` and the change :math:`\max\{\|\Delta w\|_\infty,\|\Delta z\|_\infty,\|\Delta t\|_\infty\}\le`
``tol_change`` (defaults :math:`10^{-6}`; ``rounds`` is :math:`k_{\max}`, default 5000; pass
``tol_primal=0`` to run all rounds). Recorded per round: ``theta_avg`` (the ergodic average of
:math:`w`, for which the cited :math:`O(1/k)` holds), ``admm_objective``
(:math:`\hat q^\top t+\theta\|t\|_{p_*}-\gamma+\frac{\ell_2}2\|w\|^2`), ``primal_residual``,
``change``, ``z``, ``t``, ``gamma``, ``varpi`` and ``lambda`` (the clients' :math:`\lambda_s`).
``Trace.theta`` is the last iterate :math:`w^k`. ``Trace.iterates["zeta"]`` are the multipliers of
:math:`\varpi_s=z_s`: at a KKT point of (5), stationarity in :math:`z` and :math:`t` gives
:math:`\zeta=-\sigma=\hat q+\theta g` (:math:`g\in\partial\|t\|_{p_*}`), the worst-case client weights
:math:`q^\star\in\mathcal Q` (the oracle's ``Solution.weights``); ``Trace.weights`` is their
projection onto :math:`\mathcal Q` (equal to :math:`\zeta` at convergence; a point of
:math:`\mathcal Q` at every round, as :func:`drflmodel.verify` expects).
"""

from __future__ import annotations

import copy

import numpy as np

from .._validation import check_choice, check_int, check_real
from ..errors import InvalidParameterError, SolverError
from ._base import Solver, check_step

__all__ = ["ADLPMM", "project_unit_ball", "prox_dual_norm", "sample_rows", "restricted_view"]

_WASS = ("drflmodel.problems.wasserstein.problem:WassersteinDRFL",)


def project_unit_ball(x, p: float) -> np.ndarray:
    r"""Euclidean projection onto :math:`\{x:\|x\|_p\le1\}` for :math:`p\in\{1,2,\infty\}` (Beck 2017,
    Table 6.1; for :math:`p=1` the corrected soft threshold :math:`[|x|-\delta]_+\odot\mathrm{sgn}(x)`
    with the exact sort-based :math:`\delta^*`)."""
    x = np.asarray(x, float)
    if p == np.inf:
        return np.clip(x, -1.0, 1.0)
    if p == 2:
        return x / max(float(np.linalg.norm(x)), 1.0)
    if p == 1:
        a = np.abs(x)
        if a.sum() <= 1.0:
            return x.copy()
        u = np.sort(a)[::-1]
        cs = np.cumsum(u)
        j = np.arange(1, u.size + 1)
        r = int(np.nonzero(u - (cs - 1.0) / j > 0)[0][-1])
        delta = (cs[r] - 1.0) / (r + 1)
        return np.maximum(a - delta, 0.0) * np.sign(x)
    raise InvalidParameterError(f"the unit-ball projection is implemented for p in {{1, 2, inf}}; got p={p}")


def prox_dual_norm(u, scale: float, p: float) -> np.ndarray:
    r""":math:`\mathrm{prox}_{s\|\cdot\|_{p_*}}(u)=u-s\,\mathrm{Proj}_{B_p}(u/s)` (Moreau), identity for
    :math:`s=0`."""
    u = np.asarray(u, float)
    if scale == 0:
        return u.copy()
    return u - scale * project_unit_ball(u / scale, p)


def sample_rows(rng: np.random.Generator, size: int, b: int) -> np.ndarray:
    """The sampled client step's rows: ``b`` of ``size`` row indices, uniformly
    without replacement, ascending (``rng.choice(size, b, replace=False)``, sorted)."""
    return np.sort(rng.choice(size, size=b, replace=False))


def restricted_view(view, rows):
    r"""Client *s*'s :class:`~drflmodel.problems.wasserstein.WassersteinClientView` restricted to its
    rows ``rows``: :math:`\Omega_s` and :math:`\mathfrak C_s` (``admm_step``) are built on those rows,
    with the normalization :math:`1/|\tilde{\mathcal I}_s|`. A shallow copy whose data
    are the selected rows and whose compiled-problem caches are empty (they belong to the full
    data); the client never sees other clients' rows."""
    sub = copy.copy(view)
    sub._X, sub._y = view._X[rows], view._y[rows]
    sub._admm = sub._wc = None
    return sub


def _outer_parameters(problem):
    """``(q_hat, theta, p)`` of the weight set as the ball of Theorem 4.3 (module docstring)."""
    S = problem.n_clients
    kind = problem.weight_kind
    if kind == "ball":
        p = float(problem.weights.p)
        if p not in (1.0, 2.0, np.inf):
            raise InvalidParameterError(
                f"ADLPMM's t-update (8) needs the unit-ball projection of the p-norm, implemented for "
                f"p in {{1, 2, inf}}; got p={p}")
        c = np.asarray(problem.weights.center, float)
        return c / c.sum(), float(problem.weights.radius), p
    if kind == "simplex":
        return np.full(S, 1.0 / S), 2.0, 1.0
    if kind == "fixed":
        q = np.asarray(problem.weights, float)
        return q / q.sum(), 0.0, 1.0
    raise InvalidParameterError(
        f"ADLPMM runs with weights LpBall(q, theta, p), Simplex(S) or a fixed q; got {problem.weights!r}")


class ADLPMM(Solver):
    r"""AD-LPMM (DRFL Algorithm 1) on a :class:`~drflmodel.problems.wasserstein.WassersteinDRFL`.

    Parameters
    ----------
    rounds : iteration cap :math:`k_{\max}` (one iteration = one communication round).
    c : ADMM step / penalty :math:`c>0`.
    proximal : ``"paper"`` (:math:`c'=c''=2Sc`) or ``"tight"`` (:math:`2c`, :math:`(S+1)c`).
    c_prime, c_dprime : explicit :math:`c'\ge2c`, :math:`c''\ge(S+1)c` (override ``proximal``).
    tol_primal, tol_change : stopping tolerances (§6.7; 0 disables stopping).
    dual_storage : ``"client"`` (default; clients replicate their duals) or ``"server"``.
    client_solver : CVXPY solver of the client step (default ``"CLARABEL"``).
    sample_size : ``None`` (exact client step, default) or :math:`b\ge1`, the rows each client
        samples per round for the sampled step (module docstring); at most the
        smallest client's size.
    """

    problem_types = _WASS
    record = ("theta_avg", "admm_objective", "primal_residual", "change", "z", "t", "gamma",
              "varpi", "lambda", "zeta")
    expected_rate = "sublinear"

    def __init__(self, rounds: int = 5000, c: float = 1.0, proximal: str = "paper",
                 c_prime: float | None = None, c_dprime: float | None = None,
                 tol_primal: float = 1e-6, tol_change: float = 1e-6, dual_storage: str = "client",
                 client_solver: str = "CLARABEL", sample_size: int | None = None):
        super().__init__(rounds=rounds, c=c, proximal=proximal, c_prime=c_prime, c_dprime=c_dprime,
                         tol_primal=tol_primal, tol_change=tol_change, dual_storage=dual_storage,
                         client_solver=client_solver, sample_size=sample_size)

    def _validate(self):
        p = self.params
        self.c = check_step(p["c"], "c")
        self.proximal = check_choice(p["proximal"], "proximal", ("paper", "tight"))
        if p["c_prime"] is not None:
            check_real(p["c_prime"], "c_prime", low=2.0 * self.c)
        if p["c_dprime"] is not None:
            check_step(p["c_dprime"], "c_dprime")
        self.tol_primal = check_real(p["tol_primal"], "tol_primal", low=0.0)
        self.tol_change = check_real(p["tol_change"], "tol_change", low=0.0)
        self.dual_storage = check_choice(p["dual_storage"], "dual_storage", ("client", "server"))
        if not isinstance(p["client_solver"], str):
            raise InvalidParameterError(f"client_solver must be a CVXPY solver name; got {p['client_solver']!r}")
        self.sample_size = None if p["sample_size"] is None else check_int(p["sample_size"], "sample_size", low=1)

    def _constants(self, S: int):
        c = self.c
        cp_ = (2 * S * c if self.proximal == "paper" else 2 * c) if self.params["c_prime"] is None \
            else float(self.params["c_prime"])
        cpp = (2 * S * c if self.proximal == "paper" else (S + 1) * c) if self.params["c_dprime"] is None \
            else float(self.params["c_dprime"])
        if cpp < (S + 1) * c * (1 - 1e-12):
            raise InvalidParameterError(
                f"c_dprime must be >= (S + 1) c = {(S + 1) * c} so that G_2 is PSD; got {cpp}")
        return cp_, cpp

    # ------------------------------------------------------------------ driver (stopping rule)
    def run(self, problem, seed=0, callback=None, theta0=None, progress=None):
        """As :meth:`Solver.run`, plus the stopping rule of the module docstring (``Trace.info["converged"]``)."""
        user = {"stopped": False}
        tp, tc = self.tol_primal, self.tol_change
        enabled = tp > 0 or tc > 0

        def cb(res):
            if callback is not None:
                try:
                    callback(res)
                except StopIteration:
                    user["stopped"] = True
                    raise
            it = res.iterates
            if enabled and it["primal_residual"] <= tp and it["change"] <= tc:
                raise StopIteration

        if callback is not None and not callable(callback):
            raise InvalidParameterError(f"callback must be callable; got {type(callback).__name__}")
        trace = super().run(problem, seed=seed, callback=cb, theta0=theta0, progress=progress)
        converged = bool(trace.info["stopped_by_callback"] and not user["stopped"])
        trace.info.update(stopped_by_callback=user["stopped"], converged=converged)
        return trace

    def _client_step(self, view, s, w, z, psi, zeta, info) -> dict:
        r""":math:`\mathfrak C_s` by ``view.admm_step`` with ``client_solver`` first; if that solver
        fails (e.g. a numerical failure of Clarabel at its 1e-9 tolerances), the step's solver
        sequence tries the other installed solvers and the fallback is counted in
        ``Trace.info["client_solver_fallbacks"]``."""
        first = self.params["client_solver"].upper()
        o = view.admm_step(w, z, psi, zeta, self.c, solver=first)
        if o["status"] not in ("optimal", "optimal_inaccurate"):
            raise SolverError(f"client {s}: the ADMM client step C_s failed with every solver ({o['reason']})")
        if o["solver"] != first:
            info["client_solver_fallbacks"] = info.get("client_solver_fallbacks", 0) + 1
        return o

    @staticmethod
    def _to_weight_set(problem, v) -> np.ndarray:
        """Projection of a multiplier vector onto the weight set Q (fixed weights: q itself)."""
        if problem.weight_kind == "fixed":
            return np.asarray(problem.weights, float).copy()
        return np.asarray(problem.weights.project(np.asarray(v, float)), float)

    # ------------------------------------------------------------------ hooks
    def _initialize(self, problem, runtime, theta0):
        if getattr(problem, "shared_multiplier", False):
            raise InvalidParameterError(
                "ADLPMM needs separable client sets Omega_s; ExactDualWAFL shares one multiplier "
                "across clients (solve it centrally with problem.solve())")
        q_hat, theta, p = _outer_parameters(problem)
        S, m = problem.n_clients, problem.dim
        cp_, cpp = self._constants(S)
        pst = {1.0: np.inf, 2.0: 2.0, np.inf: 1.0}[p]
        info = {"c": self.c, "c_prime": cp_, "c_dprime": cpp, "q_hat": q_hat, "theta_ball": theta,
                "p": p, "l2": problem.l2, "dual_storage": self.dual_storage, "converged": False}
        views = [runtime.view(s) for s in range(S)]
        extra = {}
        if self.sample_size is not None:
            smallest = min(v.size for v in views)
            if self.sample_size > smallest:
                raise InvalidParameterError(
                    f"sample_size must be an integer in [1, {smallest}] (the smallest client's number "
                    f"of rows); got {self.sample_size}")
            extra["expected_rate"] = None          # a heuristic: no rate is claimed
            info["sample_size"] = self.sample_size
        zero = np.zeros(S)
        return {**extra, "theta": np.asarray(theta0, float), "weights": self._to_weight_set(problem, q_hat),
                "views": views,
                "q_hat": q_hat, "ball": theta, "p": p, "pst": pst, "cp": cp_, "cpp": cpp,
                "t": zero.copy(), "z": zero.copy(), "eta": zero.copy(), "gamma": 0.0,
                "w_hat": np.tile(np.asarray(theta0, float), (S, 1)), "varpi": zero.copy(),
                "lambda": zero.copy(), "sigma": zero.copy(), "psi": np.zeros((S, m)),
                "zeta": zero.copy(), "theta_avg": np.asarray(theta0, float).copy(), "_k": 0,
                "info": info}

    def _round(self, k, st, runtime):
        c, cp_, cpp = self.c, st["cp"], st["cpp"]
        problem = runtime.problem
        S = runtime.n
        t, z, eta, gamma = st["t"], st["z"], st["eta"], st["gamma"]
        sigma, zeta, psi = st["sigma"], st["zeta"], st["psi"]
        w_old = st["theta"]
        # 1. group 1 on the server: (6), (7), (8)
        w = (c * st["w_hat"].sum(axis=0) - psi.sum(axis=0)) / (c * S + problem.l2)
        res1 = t - z - gamma - eta
        z_new = (c * st["varpi"] + cp_ * z + zeta + sigma + c * res1) / (c + cp_)
        u = t - (st["q_hat"] + sigma + c * res1) / cp_
        t_new = prox_dual_norm(u, st["ball"] / cp_, st["p"])
        # 2. group 2 on the server: (9), (10)
        r = -gamma - eta + t_new - z_new
        eta_new = np.maximum(eta + (sigma + c * r) / cpp, 0.0)
        gamma_new = gamma + (1.0 + sigma.sum() + c * r.sum()) / cpp
        # 3. server -> client s: (w, z_s) [+ (psi_s, zeta_s)]
        rows = np.column_stack([np.tile(w, (S, 1)), z_new])
        if self.dual_storage == "server":
            rows = np.column_stack([rows, psi, zeta])
        rows = runtime.scatter("w+z_s" if self.dual_storage == "client" else "w+z_s+psi_s+zeta_s", rows)
        # 4. client step C_s on each client's own data: one small conic program per client (a loop
        #    over clients: each is a separate CVXPY/Clarabel solve, nothing to stack)
        out = []
        for s, view in enumerate(st["views"]):
            if self.sample_size is not None and self.sample_size < view.size:     # the sampled step
                view = restricted_view(view, sample_rows(runtime.client_rngs[s], view.size, self.sample_size))
            ws, zs = rows[s, :w.size], rows[s, w.size]
            ps, zt = psi[s], zeta[s]                 # the client's own replica (or the received row)
            out.append(self._client_step(view, s, ws, zs, ps, zt, st["info"]))
        # 5. client -> server: (w_hat_s, varpi_s)
        up = runtime.upload(w_hat_varpi=np.array([np.append(o["w_hat"], o["varpi"]) for o in out]))
        w_hat, varpi = np.array(up[:, :-1]), np.array(up[:, -1])
        lam = np.array([o["lambda"] for o in out])
        # 6. dual updates
        res_t = t_new - z_new - gamma_new - eta_new
        sigma = sigma + c * res_t
        psi = psi + c * (w[None, :] - w_hat)
        zeta = zeta + c * (varpi - z_new)
        primal = max(np.abs(res_t).max(), np.abs(w[None, :] - w_hat).max(), np.abs(varpi - z_new).max())
        change = max(np.abs(w - w_old).max(), np.abs(z_new - z).max(), np.abs(t_new - t).max())
        kk = st["_k"] + 1
        obj = (st["q_hat"] @ t_new + st["ball"] * np.linalg.norm(t_new, st["pst"]) - gamma_new
               + 0.5 * problem.l2 * float(w @ w))
        st.update(theta=w, t=t_new, z=z_new, eta=eta_new, gamma=float(gamma_new), w_hat=w_hat,
                  varpi=varpi, sigma=sigma, psi=psi, zeta=zeta, weights=self._to_weight_set(problem, zeta), **{"lambda": lam},
                  theta_avg=st["theta_avg"] + (w - st["theta_avg"]) / kk, _k=kk,
                  admm_objective=float(obj), primal_residual=float(primal), change=float(change))
        return st
