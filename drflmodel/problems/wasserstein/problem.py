"""Wasserstein distributionally robust federated learning (DRFL), problem (4) of Bai, Wong, Qiao & Ho
(the DRFL paper, arXiv:2503.18436: problem (2), Proposition 4.2, Theorem 4.3): one type-1 Wasserstein ball per client and a client-weight set Q,

.. math::
    \\min_{w}\\ \\max_{q\\in\\mathcal Q}\\ \\sum_s q_s\\ \\sup_{W(\\mathbb P_s,\\hat{\\mathbb P}_s)\\le\\rho_s}
    \\mathbb E^{\\mathbb P_s}[L(f_w(x),y)]\\ \\ (+\\tfrac{\\ell_2}2\\|w\\|^2).

**Reformulation (Thm 4.3, Prop. A.1).** With :math:`\\varpi_s=\\rho_s\\lambda_s+\\frac1{N_s}e^\\top\\alpha_s`,
:math:`(\\lambda_s,\\alpha_s,w)\\in\\Omega_s` (:mod:`.omega`, Corollaries B.1–B.6, Props 6.3/6.4) and
:math:`\\varpi\\le z`, the outer term is the support function of Q at z:

* ``weights=LpBall(q̂, θ, p)`` (:math:`\\{q\\in\\Delta:\\|q-\\hat q\\|_p\\le\\theta\\}`): Prop. A.1's dual
  :math:`\\min_{\\gamma,\\eta\\ge0}\\hat q^\\top(z+\\eta)+\\theta\\|z+\\gamma e+\\eta\\|_{p_*}` (Thm 4.3);
* ``weights=Simplex(S)`` (DRFA): :math:`\\max_s z_s` (the :math:`\\gamma` form of (20));
* a 1-D probability vector q̂: no weight ambiguity, :math:`\\hat q^\\top z`;
* any other nonnegative :class:`~drflmodel.sets.WeightSet`: its ``support_expr`` (not in the paper).

The multiplier of :math:`\\varpi\\le z` is the worst-case weight vector :math:`q^\\star` (KKT:
:math:`q=\\hat q+\\theta g` with :math:`g\\in\\partial\\|t\\|_{p_*}`, which lies in Q). For clients with
:math:`\\rho_s=0` the dedicated empirical epigraph of (17)/(20) is used and :math:`\\lambda_s` is not
reported (the duality of Proposition 4.2 needs :math:`\\rho_s>0`; at :math:`\\rho_s=0` the multiplier is
free). :math:`\\lambda_s\\ge0` is explicit (the paper's (4)/(5) write :math:`\\lambda_s\\in\\mathbb R`).

**Certificate.** Upper bound :math:`U` = :meth:`objective` at the returned :math:`w` (exact worst case
per client — closed form for unbounded support, a small LP/SOCP per client for polyhedral supports —
then the support function of Q). Lower bound :math:`L` = the conic **dual objective** of the solved
problem read from the solver's raw output (Clarabel ``obj_val_dual``, ECOS ``dcost``, SCS ``dobj``)
plus CVXPY's constant offset, accepted only when the solver's reported dual residual is
<= 1e-6. By weak conic duality any dual-feasible point bounds the optimal value of (4) from below,
and (4) equals the robust problem by Thm 4.3; the residual check guards the feasibility of the dual
point (its effect on the bound is of the order of residual × ‖x‖). Tests cross-check :math:`L`
against an independent fixed-weight minimization :math:`\\min_w\\sum_s\\tilde q_s z_s(w)` with
:math:`\\tilde q\\in\\mathcal Q`, which is a lower bound by weak min–max duality.

**Intercept.** The paper's models have no intercept. An intercept must be an explicit
constant column (``datasets.add_intercept``). With ``penalize_intercept=True`` (the default) it is
an ordinary feature: the adversary may move it at transport cost, and it enters :math:`\\|w\\|_*`
and the ridge. An all-ones column lies on the boundary of ``"box"`` ([-1,1]^n) and ``"unit_box"``
([0,1]^n), hence in the support; it is accepted. With ``penalize_intercept=False``
(scikit-learn's convention) it is the constant 1 of every sample, which the transport does not
move (the support of :math:`x` is :math:`\\{x_0=1\\}`): the inner sup of Proposition 4.2 runs over
the other coordinates, so every dual norm of the Lipschitz form reads the other columns only,
and the ridge leaves it out (unbounded support; :mod:`.multiclass` gives the argument).

**Multi-class.** ``Multinomial()`` on a :math:`K`-class federation: the cost
:math:`\\|x-x'\\|+\\kappa\\mathbb 1[y\\ne y']` over :math:`K` labels and the exact reformulation with
:math:`\\lambda_s\\ge\\max_{j<k}\\|w_k-w_j\\|_*` (:mod:`.multiclass`); its lower bound is the conic
rigorous numpy bound of :mod:`.multiclass_bound` (the conic dual objective with a free intercept).
With a scalar loss a free intercept keeps the rigorous numpy bound of :mod:`.lagrangian_bound` (the
intercept boxed by the objective's level set).
"""

from __future__ import annotations


import time

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..._validation import as_finite_array, as_real_array, check_probability_vector, check_real
from ...errors import InvalidDataError, InvalidParameterError, SolverError
from ...sets import Simplex, WeightSet, project_simplex
from ...solution import DEFAULT_GAP_TOL, Solution, relative_gap
from ..engine.problem import ClientView, Problem
from ..engine.steps import keep_warm_start
from ..._solver_sequence import SOLVER_DEFAULTS, SolverSequence, failure_reason, installed_solvers, solve_with_fallback, solver_order
from .omega import (TransportModel, dual_exponent, empirical_constraints, omega_constraints, own_and_flipped,
                    worst_case_unbounded)

__all__ = ["WassersteinDRFL", "ExactDualWAFL", "WassersteinClientView", "ball_support_expr", "erm", "afl",
           "drfa", "wafl"]

#: dual residual above which the solver's dual objective is not accepted as a lower bound
DUAL_RESIDUAL_TOL = 1e-6


class RawProblem(cp.Problem):
    """A ``cp.Problem`` that keeps the solver's raw output and the objective offset (for the
    conic dual bound)."""

    def unpack_results(self, solution, chain, inverse_data):
        self._raw = solution
        try:
            self._offset = float(inverse_data[-1].get("offset") or 0.0)
        except Exception:  # pragma: no cover - defensive
            self._offset = None
        return super().unpack_results(solution, chain, inverse_data)


#: bytes per entry of the rows' dense block and per entry of a P x P array in the conic solve
#: (CVXPY's canonicalization and Clarabel's factorization), fitted to the peak resident memory of
#: forced conic solves (logistic, unbounded support, 3 clients): (N, P) = (1500, 200) 89 MiB,
#: (1500, 800) 426 MiB, (3000, 400) 291 MiB, (600, 1500) 672 MiB (least squares: 77, 409, 309, 676)
CONIC_BYTES_PER_ENTRY, CONIC_BYTES_PER_SQUARE = 240, 220


def conic_model_bytes(model: TransportModel, rows: int) -> int:
    r"""The conic model of every row and its solve: about :data:`CONIC_BYTES_PER_ENTRY` bytes per
    entry of the :math:`N\times P` score block (written once, ``u = Xw``) and
    :data:`CONIC_BYTES_PER_SQUARE` per entry of :math:`P\times P` (the factorization), measured.
    A polyhedral support writes, per loss piece and label branch, the :math:`N\times d` matrix
    :math:`M` and the :math:`N\times r` multipliers :math:`\Phi` (:math:`r` the support's
    constraints) with :math:`r` coefficients per entry of :math:`M`: counted, not measured."""
    N, P = int(rows), int(model.n_features) * int(model.n_outputs)
    block = N * P
    if model.support.bounded:
        r = int(np.asarray(model.support.C).shape[0])
        branches = 2 if model.flips else 1
        block += len(list(model.loss.pieces())) * branches * N * (int(model.n_features) * (r + 1) + r)
    return CONIC_BYTES_PER_ENTRY * block + CONIC_BYTES_PER_SQUARE * P * P


def conic_dual_bound(prob) -> tuple[float, dict]:
    """``(L, info)``: the solver's dual objective (+ offset) if its dual residual is small."""
    raw, offset = getattr(prob, "_raw", None), getattr(prob, "_offset", None)
    if raw is None or offset is None:
        return float("-inf"), {"reason": "no raw solver output"}
    if hasattr(raw, "obj_val_dual"):
        dval, res = float(raw.obj_val_dual), float(raw.r_dual)
    elif isinstance(raw, dict) and "info" in raw and "dcost" in raw["info"]:
        dval, res = float(raw["info"]["dcost"]), float(raw["info"]["dres"])
    elif isinstance(raw, dict) and "info" in raw and "dobj" in raw["info"]:
        dval, res = float(raw["info"]["dobj"]), float(raw["info"]["res_dual"])
    else:
        return float("-inf"), {"reason": "solver reports no dual objective"}
    info = {"dual_objective": dval + offset, "dual_residual": res}
    if not np.isfinite(dval) or not res <= DUAL_RESIDUAL_TOL:
        info["reason"] = f"dual residual {res:.3g} above {DUAL_RESIDUAL_TOL:g}"
        return float("-inf"), info
    return dval + offset, info


def ball_support_expr(z, center, theta, p):
    """Prop. A.1 / Thm 4.3: :math:`\\max\\{q^\\top z: q\\in\\Delta,\\ \\|q-\\hat q\\|_p\\le\\theta\\}` equals
    :math:`\\min_{\\gamma\\in\\mathbb R,\\eta\\ge0}\\ \\hat q^\\top(z+\\eta)+\\theta\\|z+\\gamma e+\\eta\\|_{p_*}`
    (valid because :math:`e^\\top\\hat q=1`). Returns ``(expr, gamma, eta, constraints)``; the expression is
    convex and nondecreasing in ``z``, to be *minimized*. Cone: linear (p = 1, inf), SOC (p = 2),
    power cone otherwise."""
    S = z.shape[0]
    gamma = cp.Variable(name="gamma")
    eta = cp.Variable(S, name="eta")
    pst = dual_exponent(float(p))
    t = z + gamma + eta
    tn = cp.norm(t, pst) if pst in (1.0, 2.0, np.inf) else cp.pnorm(t, pst)
    return center @ (z + eta) + theta * tn, gamma, eta, [eta >= 0]


def _is_lp_ball(weights) -> bool:
    return isinstance(weights, WeightSet) and all(hasattr(weights, a) for a in ("center", "radius", "p"))


class WassersteinDRFL(Problem):
    """Problem (4) of the DRFL paper: per-client Wasserstein balls and a client-weight set Q.

    Parameters
    ----------
    federation : :class:`~drflmodel.data.Federation`.
    loss : one of ``Huber(eps)``, ``EpsilonInsensitive(eps)``, ``Pinball(tau)`` (the paper's
        quantile level), ``Hinge()``, ``SmoothHinge()``, ``Logistic()``, or ``Multinomial()`` on a
        multi-class federation (the :math:`K`-class cost and its exact reformulation: :mod:`.multiclass`).
    radius : :math:`\\rho_s\\ge0`, a scalar (shared) or one per client.
    kappa : label cost :math:`\\kappa>0`, ``np.inf`` for labels that cannot move.
    norm : feature norm of the transport cost, 1, 2 or inf.
    weights : ``LpBall(q̂, θ, p)`` (∩ simplex), ``Simplex(S)`` (DRFA), a probability vector q̂
        (fixed weights), or another nonnegative ``WeightSet``.
    support : None (unbounded), ``"box"`` ([-1,1]^n), ``"unit_box"`` ([0,1]^n) or ``(C, d)``
        (polyhedral :math:`\\{C\\xi\\le d\\}`, Slater-checked); bounded supports only for the
        piecewise-linear losses. Training samples must lie in the support (the reformulation assumes it).
    l2 : optional ridge term :math:`\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2` (0 in the paper;
        :math:`\\omega_j=0` on a free intercept).
    penalize_intercept : ``True`` (default: every coordinate, the intercept column included, is
        transported and penalized, as in the paper) or ``False`` (scikit-learn's free intercept: the
        intercept column is the constant 1 of every sample, not moved by the transport -- its
        coordinate is left out of every dual norm -- and left out of the ridge; unbounded support).

    Sweepable parameters (DPP, no recompilation): ``"radius"`` (while the zero pattern of
    :math:`\\rho` is unchanged) and ``"theta"`` (the LpBall radius).
    """

    family = "wasserstein"
    shared_multiplier = False
    supports_multiclass = True

    def __init__(self, federation, loss, radius, kappa, norm, weights, support=None, l2: float = 0.0,
                 penalize_intercept: bool = True):
        TransportModel.check_loss(loss)
        kappa = check_real(kappa, "kappa", low=0.0, low_open=True, allow_inf=True)
        # checks the loss's task against the data and penalize_intercept (an intercept column needed)
        super().__init__(federation, loss, l2, penalize_intercept)
        layout = self.layout
        moved = None
        if not self.penalize_intercept:
            j0 = federation.intercept_column
            moved = [j for j in range(layout.n_features) if j != j0]
        model = TransportModel.validate(loss, norm, kappa, support, layout.n_features, layout.n_outputs, moved)
        self.kappa = kappa
        self.model = model
        self.norm = self.model.norm
        self.support = self.model.support
        self.radius = self._check_radius(radius)
        self._set_weights(weights)
        for c in federation.clients:
            self.model.check_samples(c.X, c.y, f"client {c.name!r}")
        self._local: dict = {}

    # ------------------------------------------------------------------ validation
    def _check_radius(self, radius) -> np.ndarray:
        S = self.n_clients
        if np.ndim(radius) == 0:
            r = check_real(radius, "radius", low=0.0)
            return np.full(S, r)
        arr = np.asarray(radius, dtype=float)
        if arr.ndim != 1 or arr.shape[0] != S:
            raise InvalidParameterError(
                f"radius must be a scalar or a vector with one entry per client (length {S}); "
                f"got shape {arr.shape}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise InvalidParameterError(f"radius entries must lie in [0, inf); got {arr.tolist()}")
        return arr.copy()

    def _set_weights(self, weights) -> None:
        S = self.n_clients
        if isinstance(weights, WeightSet):
            if weights.n != S:
                raise InvalidParameterError(f"weights must be a set over {S} clients; got n={weights.n}")
            if isinstance(weights, Simplex):
                kind = "simplex"
            elif _is_lp_ball(weights):
                kind = "ball"
                center = check_probability_vector(weights.center, "weights.center", n=S)
                self._center = center / center.sum()          # (4) equals (5) only for a center exactly on the simplex
                self._theta = check_real(weights.radius, "weights.radius", low=0.0)
                p = float(weights.p)
                if p < 1:
                    raise InvalidParameterError(f"weights.p must lie in [1, inf]; got {weights.p!r}")
                self._p = p
            else:
                if not getattr(weights, "nonnegative", False):
                    raise InvalidParameterError(
                        f"weights {weights!r} allows negative client weights; the DRFL problem needs "
                        "Q inside the simplex (LpBall, Simplex, a fixed q̂)")
                kind = "generic"
            self.weights = weights
        elif weights is None:
            raise InvalidParameterError("weights must be LpBall(center, radius, p), Simplex(n), a "
                                        "probability vector q̂ or a WeightSet; got None")
        else:
            q = as_real_array(weights, "weights")
            if q.ndim != 1:
                raise InvalidParameterError(
                    f"weights must be a WeightSet or a 1-D probability vector; got shape {q.shape}")
            self.weights = check_probability_vector(q, "weights", n=S)
            kind = "fixed"
        self.weight_kind = kind

    @property
    def nominal_weights(self) -> np.ndarray:
        """The center :math:`\\hat q` of an ``LpBall`` weight set, else the data proportions :math:`N_s/N`."""
        return self._center.copy() if self.weight_kind == "ball" else np.asarray(self.federation.proportions, float)

    # ------------------------------------------------------------------ numpy side
    def outer(self, z) -> tuple[float, np.ndarray]:
        """:math:`(\\max_{q\\in\\mathcal Q} q^\\top z,\\ q^\\star)` (the support function of Q)."""
        z = np.asarray(z, float)
        if self.weight_kind == "fixed":
            return float(self.weights @ z), self.weights.copy()
        if self.weight_kind == "simplex":
            q = np.zeros_like(z)
            q[int(np.argmax(z))] = 1.0
            return float(z.max()), q
        val, q = self.weights.worst_case(z)
        return float(val), np.asarray(q, float)

    def worst_case_losses(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """Per client :math:`z_s(w)=\\sup_{W(\\mathbb P_s,\\hat{\\mathbb P}_s)\\le\\rho_s}\\mathbb E[L]`
        and the minimizing :math:`\\lambda_s` (``nan`` where :math:`\\rho_s=0`), computed by each
        client alone (:meth:`WassersteinClientView.worst_case`)."""
        theta = self._check_theta(theta)
        out = [self.client_view(s).worst_case(theta) for s in range(self.n_clients)]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])

    def client_losses(self, theta) -> np.ndarray:
        """The clients' worst-case expected losses :math:`z_s(w)` (not the empirical means; those
        are ``self.objectives.values(theta)``)."""
        return self.worst_case_losses(theta)[0]

    def objective(self, theta) -> float:
        """Exact robust objective at ``theta`` without the joint CVXPY problem: each client's
        worst case (:meth:`worst_case_losses`), then the support function of Q."""
        theta = self._check_theta(theta)
        z, _ = self.worst_case_losses(theta)
        return self.outer(z)[0] + self.penalty(theta)

    def penalty(self, theta) -> float:
        """The ridge :math:`\\frac{\\ell_2}2\\sum_j\\omega_j\\|W_{j\\cdot}\\|^2` (not on a free intercept)."""
        return float(self.objectives.penalty(np.asarray(theta, float)))

    def _check_theta(self, theta) -> np.ndarray:
        theta = as_finite_array(theta, "theta", ndim=1)
        if theta.shape != (self.dim,):
            raise InvalidParameterError(f"theta must have shape ({self.dim},); got {theta.shape}")
        return theta

    # ------------------------------------------------------------------ CVXPY side
    def _build(self) -> cp.Problem:
        fed, model = self.federation, self.model
        S, n = self.n_clients, self.dim
        X, y, cid = fed.pooled()
        N = X.shape[0]
        w = cp.Variable(n, name="w")
        lam = cp.Variable(S, name="lambda")
        alpha = cp.Variable(N, name="alpha")
        z = cp.Variable(S, name="z")
        rho = cp.Parameter(S, nonneg=True, name="radius", value=self.radius.copy())
        robust_c = self.radius > 0
        robust_i = robust_c[cid]
        cons = [lam >= 0]                              # the paper writes lambda_s in R
        if robust_i.any():
            ri = np.flatnonzero(robust_i)
            cons += omega_constraints(model, w, lam, alpha[ri], X[ri], y[ri], cid[ri],
                                      np.flatnonzero(robust_c))
        if (~robust_i).any():
            ei = np.flatnonzero(~robust_i)
            cons += empirical_constraints(model, w, alpha[ei], X[ei], y[ei])
        if (~robust_c).any():
            cons.append(lam[np.flatnonzero(~robust_c)] == 0)
        if self.shared_multiplier and S > 1:
            cons.append(lam[1:] == lam[0])
        # averaging matrix (S x N): varpi_s = rho_s lam_s + mean_i alpha_si
        sizes = fed.sizes
        avg = sp.csr_array((1.0 / sizes[cid], (cid, np.arange(N))), shape=(S, N))  # sparse: one nnz per sample
        varpi = cp.multiply(rho, lam) + avg @ alpha
        con_z = varpi <= z
        cons.append(con_z)
        outer, ocons, oparams = self.outer_expression(z)
        cons += ocons
        self._parameters = {"radius": rho, **{k: v for k, v in oparams.items() if isinstance(v, cp.Parameter)}}
        aux = {k: v for k, v in oparams.items() if k in ("gamma", "eta")}
        ridge = self.objectives.penalty_expr(w)
        obj = outer + (ridge if ridge is not None else 0)
        self._vars = {"w": w, "lambda": lam, "alpha": alpha, "z": z, "con_z": con_z, **aux}
        return RawProblem(cp.Minimize(obj), cons)

    def outer_expression(self, z) -> tuple:
        """``(expression, constraints, parameters)`` of the support function of Q at ``z`` (a
        CVXPY expression): fixed weights, the simplex (an epigraph ``gamma``), Thm 4.3's ball dual
        (``gamma``, ``eta`` and the radius parameter ``theta``) or the set's ``support_expr``.
        Used by the joint model and by the SQP step model (:mod:`.trust_region_sqp`)."""
        kind = self.weight_kind
        if kind == "fixed":
            return self.weights @ z, [], {}
        if kind == "simplex":
            gamma = cp.Variable(name="gamma")
            return gamma, [z <= gamma], {"gamma": gamma}
        if kind == "ball":
            theta = cp.Parameter(nonneg=True, name="theta", value=self._theta)
            outer, gamma, eta, bcons = ball_support_expr(z, self._center, theta, self._p)
            return outer, bcons, {"theta": theta, "gamma": gamma, "eta": eta}
        expr = self.weights.support_expr(z)
        return (expr if not isinstance(expr, tuple) else expr[0]), \
            ([] if not isinstance(expr, tuple) else list(expr[1])), {}

    # ------------------------------------------------------------------ routes
    federated_refusal = (
        "its fast route keeps every sample whose worst-case branch may change inside the trust region "
        "(the 'tied' samples) as an explicit term of the step problem, and its rigorous lower bound "
        "solves a small problem over the near-active samples: both read individual rows (x_ij, y_ij), "
        "which a client would have to send to the server. Its own federated oracle, where each client "
        "answers for its own ball, is drflmodel.problems.wasserstein.federated.federated_solve (the "
        "family's declared oracle, which drflmodel.client_oracle.federated_solve runs when given the problem "
        "itself, not a factory)")

    def structure_facts(self) -> dict:
        """``shared_multiplier`` (WAFL's one ball), ``support_bounded`` (a polyhedral support),
        ``fixed_columns`` (the columns the transport does not move: a free intercept),
        ``labels_move`` (a finite label cost) and ``transport_norm``."""
        moved = self.model.moved
        fixed = [] if moved is None else sorted(set(range(self.model.n_features)) - set(moved))
        labels_move = self.model.flips or (self.model.task == "regression" and np.isfinite(self.model.kappa))
        return {"shared_multiplier": bool(self.shared_multiplier),
                "support_bounded": bool(self.model.support.bounded),
                "fixed_columns": tuple(fixed), "labels_move": bool(labels_move),
                "transport_norm": float(self.model.norm)}

    def structure_fields(self) -> dict:
        """``conic_bytes``: the conic model's size (:func:`conic_model_bytes`), so a forced conic
        solve that cannot fit is refused before it allocates."""
        return {"conic_bytes": conic_model_bytes(self.model, int(np.asarray(self.federation.sizes).sum()))}

    def routes(self):
        """``[WassersteinHessianFreeRoute, WassersteinSQPRoute, ConicRoute]``: the matrix-free route
        (smooth worst cases, from P = 1,000 under ``auto``), the trust-region SQP (smooth or
        piecewise-linear loss, unbounded support, large N), each falling back to the conic model
        when it cannot certify."""
        from ..engine.conic import ConicRoute
        from .hessian_free import WassersteinHessianFreeRoute
        from .trust_region_sqp import WassersteinSQPRoute

        return [WassersteinHessianFreeRoute(), WassersteinSQPRoute(), ConicRoute()]

    def certify_at(self, w, q_raw, solver: str, extra_info: dict | None = None) -> Solution:
        """The certified :class:`Solution` at ``w`` with candidate client weights ``q_raw`` (any
        route's multipliers of :math:`\\varpi\\le z`): :math:`U` the exact objective (numpy),
        :math:`L` the rigorous Lagrangian bound at :math:`w` with ``q_raw`` projected onto Q."""
        w = np.asarray(w, float)
        z_exact, lam_exact = self.worst_case_losses(w)
        U = self.outer(z_exact)[0] + self.penalty(w)
        q_cert = self._weights_from_duals(q_raw, z_exact)
        L, bound_info = self._lower_bound(w, q_cert, U, float("-inf"))
        if not bound_info["lower_bound_method"].startswith("numpy"):
            bound_info["lower_bound_method"] = "none (the rigorous bound did not close; no conic dual here)"
        lam = lam_exact.copy()
        info = {"solver": solver, "lambda_exact": lam_exact, "q_argmax": self.outer(z_exact)[1],
                **bound_info, **(extra_info or {}), "weights_kind": self.weight_kind,
                "support": self.support.kind}
        keep_warm_start(self, w)                 # the next fast solve of a sweep starts here
        return Solution(theta=w, weights=q_cert, client_losses=z_exact, value=U, lower_bound=L,
                        upper_bound=U, status="optimal", certificate="numpy Lagrangian bound of (4)",
                        duals={"lambda": lam, "q_dual": None if q_raw is None else np.asarray(q_raw, float)},
                        info=info)

    def certify_solved(self, solver: str) -> Solution:
        prob, v = self._cp_problem, self._vars
        w = np.asarray(v["w"].value, float)
        z_exact, lam_exact = self.worst_case_losses(w)
        U = self.outer(z_exact)[0] + self.penalty(w)
        L_conic, dinfo = conic_dual_bound(prob)
        q_dual = None if v["con_z"].dual_value is None else np.asarray(v["con_z"].dual_value, float)
        q_cert = self._weights_from_duals(q_dual, z_exact)
        L, bound_info = self._lower_bound(w, q_cert, U, L_conic)
        lam_solver = np.asarray(v["lambda"].value, float).copy()
        lam_solver[self.radius == 0] = np.nan
        duals = {"lambda": lam_solver, "q_dual": q_dual}
        if "gamma" in v:
            duals["gamma"] = float(v["gamma"].value)
        if "eta" in v:
            duals["eta"] = np.asarray(v["eta"].value, float)
            t = np.asarray(v["z"].value + v["gamma"].value + v["eta"].value, float)
            duals["beta"] = float(np.linalg.norm(t, dual_exponent(self._p)))
        info = {"solver": solver, "solver_value": prob.value, "lambda_exact": lam_exact,
                "z_solver": np.asarray(v["z"].value, float), "q_argmax": self.outer(z_exact)[1],
                **dinfo, **bound_info,
                "weights_kind": self.weight_kind, "support": self.support.kind}
        return Solution(theta=w, weights=q_cert, client_losses=z_exact, value=U, lower_bound=L,
                        upper_bound=U, status="optimal", certificate="conic dual objective of (4)",
                        duals=duals, info=info)

    def _lower_bound(self, w, q, U: float, L_conic: float) -> tuple[float, dict]:
        """``(L, info)``: the rigorous numpy Lagrangian bound (:mod:`.lagrangian_bound`) when it
        applies and closes the gap to :data:`~drflmodel.solution.DEFAULT_GAP_TOL`; otherwise the
        solver's conic dual objective, which is valid only up to the solver's dual residual (said
        in ``info["lower_bound_method"]``; the rigorous value is kept in ``info`` for comparison)
        -- unless a rigorous bound exists and that objective lies above :math:`U` (the dual point
        is then shown infeasible) or below the rigorous bound: then the rigorous bound is returned
        (the gap stays open and the conic route tries its next solver)."""
        from .lagrangian_bound import lagrangian_lower_bound

        t0 = time.perf_counter()
        inside = self.weight_kind in ("fixed", "simplex") or bool(self.weights.contains(q, tol=1e-12))
        if inside:
            L_rig, info = lagrangian_lower_bound(self, w, q)
        else:
            L_rig, info = float("-inf"), {"reason": "dual weights not in Q to round-off"}
        info = {"rigorous_lower_bound": L_rig, "rigorous_bound_time": time.perf_counter() - t0,
                **{f"rigorous_{k}": v for k, v in info.items() if k != "lower_bound_method"}}
        if np.isfinite(L_rig) and relative_gap(L_rig, U) <= DEFAULT_GAP_TOL:
            return L_rig, {"lower_bound_method": "numpy Lagrangian bound (rigorous to rounding)", **info}
        if np.isfinite(L_rig) and (L_conic > U + 1e-12 * max(1.0, abs(U)) or L_rig >= L_conic):
            # a dual objective above an attained primal value: the solver's dual point is not
            # feasible, so its objective bounds nothing; or the rigorous bound is simply the larger
            # one (always so where there is no conic dual, as on the fast route): an honest gap
            why = (f"the conic dual objective {L_conic:.12g} exceeds U and is rejected" if L_conic > U
                   else "no conic dual objective here" if not np.isfinite(L_conic)
                   else f"above the conic dual objective {L_conic:.12g}")
            return L_rig, {"lower_bound_method": f"numpy Lagrangian bound (rigorous to rounding; did not close); {why}",
                           **info}
        return L_conic, {"lower_bound_method": "conic dual objective (weak duality; valid up to the solver's "
                                               "dual residual)", **info}

    def _weights_from_duals(self, q_dual, z_exact) -> np.ndarray:
        """A point of Q near the multiplier of :math:`\\varpi\\le z` (projected onto Q)."""
        if self.weight_kind == "fixed":
            return self.weights.copy()
        if q_dual is None or not np.all(np.isfinite(q_dual)):
            return self.outer(z_exact)[1]
        if self.weight_kind == "simplex":
            return project_simplex(q_dual)
        try:
            q = np.asarray(self.weights.project(q_dual), float)
        except NotImplementedError:
            return self.outer(z_exact)[1]
        return q

    def set_parameter(self, name: str, value) -> None:
        """Set ``"radius"`` (scalar or per client) or ``"theta"`` (LpBall radius)."""
        if name == "radius":
            new = self._check_radius(value)
            pattern_changed = not np.array_equal(new > 0, self.radius > 0)
            self.radius = new
            self._local.clear()
            if self._cp_problem is not None:
                if pattern_changed:
                    self._cp_problem = None
                else:
                    self._parameters["radius"].value = new.copy()
            return
        if name == "theta" and self.weight_kind == "ball":
            self._theta = check_real(value, "theta", low=0.0, low_open=True)
            if hasattr(self.weights, "set_radius"):
                self.weights.set_radius(self._theta)
            else:
                self.weights = type(self.weights)(self.weights.center, self._theta, self.weights.p)
            if self._cp_problem is not None:
                self._parameters["theta"].value = self._theta
            return
        raise InvalidParameterError(
            f"{type(self).__name__} has sweepable parameters 'radius' and 'theta' (LpBall weights); "
            f"got {name!r}")

    # ------------------------------------------------------------------ clients
    def client_view(self, i: int) -> "WassersteinClientView":
        if i not in self._local:
            self._local[i] = WassersteinClientView(self, i)
        return self._local[i]

    # ------------------------------------------------------------------ special cases
    @classmethod
    def erm(cls, federation, loss, l2: float = 0.0) -> "WassersteinDRFL":
        """Standard FL (1) / Cor. 6.1–6.2: equal client weights 1/S, no robustness (ρ = 0)."""
        S = federation.n_clients
        return cls(federation, loss, radius=0.0, kappa=1.0, norm=1, weights=np.full(S, 1.0 / S), l2=l2)

    @classmethod
    def afl(cls, federation, loss, weights, l2: float = 0.0) -> "WassersteinDRFL":
        """AFL (17): ρ_s = 0 with the Thm 4.3 ball ``weights`` (as in the DRFL paper's experiments) or any Q."""
        return cls(federation, loss, radius=0.0, kappa=1.0, norm=1, weights=weights, l2=l2)

    @classmethod
    def drfa(cls, federation, loss, l2: float = 0.0) -> "WassersteinDRFL":
        """DRFA (20): ρ_s = 0 and Q = the whole simplex."""
        return cls(federation, loss, radius=0.0, kappa=1.0, norm=1,
                   weights=Simplex(federation.n_clients), l2=l2)

    @classmethod
    def wafl(cls, federation, loss, radius, kappa, norm, center=None, support=None,
             l2: float = 0.0) -> "ExactDualWAFL":
        """Exact-dual WAFL; see :class:`ExactDualWAFL`."""
        return ExactDualWAFL(federation, loss, radius, kappa, norm, center=center, support=support, l2=l2)


class ExactDualWAFL(WassersteinDRFL):
    """Exact-dual WAFL (the DRFL paper compares with WAFL without describing its implementation;
    this is the exact dual of WAFL's model): ONE Wasserstein ball of radius ρ around
    :math:`\\hat{\\mathbb P}_{agg}=\\sum_s\\hat q_s\\hat{\\mathbb P}_s`, dualized with one shared
    multiplier:

    .. math:: \\min_{w,\\lambda\\ge0,\\alpha}\\ \\rho\\lambda+\\sum_s\\hat q_s\\tfrac1{N_s}e^\\top\\alpha_s
       \\quad\\text{s.t.}\\quad(\\lambda,\\alpha_s,w)\\in\\Omega_s\\ \\forall s.

    It equals :class:`WassersteinDRFL` with fixed weights q̂, all radii ρ and the constraint
    :math:`\\lambda_1=\\dots=\\lambda_S` (since :math:`\\sum_s\\hat q_s=1`). This is not Nguyen et al.'s
    approximate algorithm. ``center`` defaults to :math:`N_s/N`.
    """

    family = "wafl"
    shared_multiplier = True

    def __init__(self, federation, loss, radius, kappa, norm, center=None, support=None, l2: float = 0.0):
        if np.ndim(radius) != 0:
            raise InvalidParameterError("WAFL has one ball: radius must be a scalar >= 0")
        rho = check_real(radius, "radius", low=0.0)
        q = federation.proportions if center is None else center
        super().__init__(federation, loss, rho, kappa, norm, weights=q, support=support, l2=l2)

    def _check_radius(self, radius):
        if np.ndim(radius) != 0:
            raise InvalidParameterError("WAFL has one ball: radius must be a scalar >= 0")
        return super()._check_radius(radius)

    def worst_case_losses(self, theta):
        """WAFL has one joint worst case, not per-client ones. Returns the per-client parts
        :math:`z_s=\\rho\\lambda^\\star+\\frac1{N_s}\\sum_i g_{si}(w,\\lambda^\\star)` at the shared optimal
        :math:`\\lambda^\\star` (so :math:`\\sum_s\\hat q_s z_s` is the WAFL objective) and :math:`\\lambda^\\star`."""
        theta = self._check_theta(theta)
        val, lam, parts = self._joint(theta)
        return parts, np.full(self.n_clients, lam)

    def _joint(self, theta):
        rho = float(self.radius[0])
        fed, model = self.federation, self.model
        X, y, cid = fed.pooled()
        c = self.weights[cid] / fed.sizes[cid]
        if not self.support.bounded or rho == 0:
            val, lam = worst_case_unbounded(model, theta, X, y, rho, weights=c)
            lam_eval = lam if np.isfinite(lam) else 0.0
        else:
            val, lam = _local_problem(self, "wafl", X, y, c, rho).solve(theta)
            lam_eval = lam
        # split into per-client parts z_s with sum_s q_s z_s = val
        parts = np.array([self._client_part(theta, s, rho, lam_eval) for s in range(self.n_clients)])
        return val, lam, parts

    def _client_part(self, theta, s, rho, lam):
        cl = self.federation.clients[s]
        if rho == 0:
            return float(np.mean(own_and_flipped(self.model, theta, cl.X, cl.y)[0]))
        if not self.support.bounded:
            L, Lt = own_and_flipped(self.model, theta, cl.X, cl.y)
            if Lt is None:
                return float(rho * lam + L.mean())
            return float(rho * lam + np.mean(np.maximum(L, Lt - self.kappa * lam)))
        return float(self.client_view(s).value_at_lambda(theta, lam))

    def objective(self, theta) -> float:
        theta = self._check_theta(theta)
        val, _, _ = self._joint(theta)
        return val + self.penalty(theta)


# ====================================================================== local problems
class _LocalWorstCase:
    """:math:`\\min_{\\lambda\\ge0,\\alpha}\\rho\\lambda+c^\\top\\alpha` s.t. :math:`\\Omega` at a fixed w:
    the exact worst case on a polyhedral support (an LP for ℓ1/ℓ∞ transport, solved by HiGHS; an
    SOCP for ℓ2, by Clarabel), independent of the joint problem. ``w`` enters as a constant (a
    ``cp.Parameter`` inside ``maximum`` trips CVXPY 1.9's bound propagation), so each call
    compiles a small problem."""

    def __init__(self, model, X, y, c, rho):
        self.model, self.X, self.y, self.c, self.rho = model, X, y, np.asarray(c, float), float(rho)
        self.lp = model.norm != 2

    def solve(self, theta):
        w = np.asarray(theta, float)
        lam = cp.Variable(1)
        alpha = cp.Variable(self.X.shape[0])
        cons = [lam >= 0] + omega_constraints(self.model, w, lam, alpha, self.X, self.y,
                                              np.zeros(self.X.shape[0], int), [0])
        prob = cp.Problem(cp.Minimize(self.rho * lam[0] + self.c @ alpha), cons)
        # documented tolerances first; the solvers' defaults (1e-8) if the tight run is inaccurate
        fallback = None
        tight = [s for s in (("HIGHS", "CLARABEL") if self.lp else ("CLARABEL",)) if s in installed_solvers()]
        for order, tolerances in ((tight, None), (solver_order(), SOLVER_DEFAULTS)):
            seq = SolverSequence(None, order, tolerances=tolerances, record_value=False)
            for s in seq:
                if seq.run(prob, s) is None:
                    continue
                if prob.status == cp.OPTIMAL:
                    return float(prob.value), float(lam.value[0])
                if prob.status == cp.OPTIMAL_INACCURATE and fallback is None:
                    fallback = (float(prob.value), float(lam.value[0]))
        if fallback is not None:
            return fallback
        raise SolverError(f"local worst-case problem failed ({seq.failure()})")


def _local_problem(problem, key, X, y, c, rho) -> _LocalWorstCase:
    cache = problem.cache("local_worst_case")
    k = (key, float(rho))
    if k not in cache:
        cache[k] = _LocalWorstCase(problem.model, X, y, c, rho)
    return cache[k]


class WassersteinClientView(ClientView):
    """What client *s* computes on its own data for DRFL (DRFL paper, Proposition 4.2 and Appendix E).

    * :meth:`worst_case` — :math:`z_s(w)` and :math:`\\lambda_s^\\star(w)`: the client's worst-case
      expected loss (Prop. 4.2), exact (closed form on unbounded support; a small LP/SOCP on a
      polyhedral support);
    * :meth:`omega` — the CVXPY constraints :math:`(\\lambda_s,\\alpha_s,\\hat w)\\in\\Omega_s` for
      caller-supplied variables (to build custom local subproblems);
    * :meth:`admm_step` — the client operator :math:`\\mathfrak C_s(w,z_s,\\psi_s,\\zeta_s)` of
      Algorithm 1 (§6.5): argmin over :math:`(\\lambda_s,\\alpha_s,\\hat w_s)\\in\\Omega_s` (and the
      auxiliaries) of :math:`\\zeta_s\\varpi_s-\\psi_s^\\top\\hat w_s+\\frac c2\\|w-\\hat w_s\\|^2+
      \\frac c2(\\varpi_s-z_s)^2` with :math:`\\varpi_s=\\rho_s\\lambda_s+\\frac1{N_s}e^\\top\\alpha_s`.
      Returns ``{"lambda", "alpha", "w_hat", "varpi", "status"}``; the client sends back
      ``w_hat`` and the scalar ``varpi`` only. No lower bound on α is added (§6.5).

    Inherits the empirical loss value/gradient of :class:`~drflmodel.problems.engine.problem.ClientView`.
    """

    def __init__(self, problem: WassersteinDRFL, index: int):
        super().__init__(problem, index)
        self.model = problem.model
        self.problem_dim = problem.dim
        self.rho = float(problem.radius[index])
        self._admm = None
        self._wc = None

    @property
    def radius(self) -> float:
        return self.rho

    def omega(self, w, lam, alpha) -> list:
        """Constraints :math:`(\\lambda,\\alpha,w)\\in\\Omega_s` (``lam`` of shape (1,), ``alpha``
        of shape (N_s,)); for :math:`\\rho_s=0` the empirical epigraph :math:`L(\\hat\\xi_i)\\le\\alpha_i`."""
        if self.rho == 0:
            return empirical_constraints(self.model, w, alpha, self._X, self._y)
        return omega_constraints(self.model, w, lam, alpha, self._X, self._y,
                                 np.zeros(self.size, int), [0])

    def worst_case(self, w) -> tuple[float, float]:
        """``(z_s, lambda_s)`` at the fixed model ``w`` (``lambda_s`` is nan if ρ_s = 0)."""
        w = np.asarray(w, float)
        if self.rho == 0 or not self.model.support.bounded:
            return worst_case_unbounded(self.model, w, self._X, self._y, self.rho)
        if self._wc is None:
            self._wc = _LocalWorstCase(self.model, self._X, self._y,
                                       np.full(self.size, 1.0 / self.size), self.rho)
        return self._wc.solve(w)

    def value_at_lambda(self, w, lam) -> float:
        """:math:`\\rho_s\\lambda+\\frac1{N_s}\\sum_i g_i(w,\\lambda)` at a fixed λ (small LP on
        polyhedral supports)."""
        w = np.asarray(w, float)
        alpha = cp.Variable(self.size)
        cons = omega_constraints(self.model, w, np.array([float(lam)]), alpha, self._X, self._y,
                                 np.zeros(self.size, int), [0])
        prob = cp.Problem(cp.Minimize(cp.sum(alpha) / self.size), cons)
        if solve_with_fallback(prob) is None:
            raise SolverError(f"client {self.index}: the value at a fixed lambda (a small LP) found no solver that answers")
        return self.rho * float(lam) + float(prob.value)

    def admm_step(self, w, z, psi, zeta, c: float, solver: str = "CLARABEL") -> dict:
        """The client operator :math:`\\mathfrak C_s` of the DRFL paper's Algorithm 1 (Appendix E)."""
        n = self.problem_dim
        c = check_real(c, "c", low=0.0, low_open=True)
        if self._admm is None:
            # DPP: c enters as sqrt(c/2) times variables, and sqrt(c/2) w, sqrt(c/2) z are
            # parameters of their own (a parameter times a parameter-affine term is not DPP).
            P = {k: cp.Parameter(shape) for k, shape in
                 (("sw", n), ("sz", ()), ("psi", n), ("zeta", ()))}
            P["sc"] = cp.Parameter(nonneg=True)
            w_hat = cp.Variable(n)
            lam = cp.Variable(1)
            alpha = cp.Variable(self.size)
            cons = [lam >= 0] + self.omega(w_hat, lam, alpha)
            if self.rho == 0:
                cons.append(lam == 0)
            varpi = self.rho * lam[0] + cp.sum(alpha) / self.size
            obj = (P["zeta"] * varpi - P["psi"] @ w_hat + cp.sum_squares(P["sw"] - P["sc"] * w_hat)
                   + cp.square(P["sc"] * varpi - P["sz"]))
            self._admm = (cp.Problem(cp.Minimize(obj), cons), P, w_hat, lam, alpha, varpi)
        prob, P, w_hat, lam, alpha, varpi = self._admm
        sc = np.sqrt(c / 2.0)
        P["sc"].value = sc
        P["sw"].value = sc * np.asarray(w, float)
        P["sz"].value = sc * float(z)
        P["psi"].value = np.asarray(psi, float)
        P["zeta"].value = float(zeta)
        attempts = []
        used = solve_with_fallback(prob, first=solver, attempts=attempts)
        if used is None:
            return {"status": "solver_error", "reason": failure_reason(attempts), "attempts": attempts}
        return {"lambda": float(lam.value[0]), "alpha": np.asarray(alpha.value, float),
                "w_hat": np.asarray(w_hat.value, float), "varpi": float(varpi.value),
                "status": prob.status, "solver": used}


# ====================================================================== functions
def erm(federation, loss, l2: float = 0.0) -> WassersteinDRFL:
    """Standard FL (1), Cor. 6.1/6.2 — see :meth:`WassersteinDRFL.erm`."""
    return WassersteinDRFL.erm(federation, loss, l2=l2)


def afl(federation, loss, weights, l2: float = 0.0) -> WassersteinDRFL:
    """AFL (17) — see :meth:`WassersteinDRFL.afl`."""
    return WassersteinDRFL.afl(federation, loss, weights, l2=l2)


def drfa(federation, loss, l2: float = 0.0) -> WassersteinDRFL:
    """DRFA (20) — see :meth:`WassersteinDRFL.drfa`."""
    return WassersteinDRFL.drfa(federation, loss, l2=l2)


def wafl(federation, loss, radius, kappa, norm, center=None, support=None, l2: float = 0.0) -> ExactDualWAFL:
    """Exact-dual WAFL — see :class:`ExactDualWAFL`."""
    return ExactDualWAFL(federation, loss, radius, kappa, norm, center=center, support=support, l2=l2)
