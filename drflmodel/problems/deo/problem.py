r"""DEO-constrained learning for fair vertical FL, with honest certificates.

Paper: Liu, Fan, Zhou, Shi, Pei, Chu and Zhang, *Achieving Model Fairness in Vertical Federated
Learning* (arXiv:2109.08344), the fair-VFL paper. The convexity analysis and the exact, SDP and local
routes below are drflmodel's (the paper solves the problem by gradient descent-ascent only).

The problem (paper (1)-(4)) on a :class:`~drflmodel.data.VerticalFederation` with design
:math:`X = [X^1, \dots, X^K]` and labels :math:`y \in \{\pm1\}`:

.. math::

    \min_\theta\ L(\theta) = \frac1n\sum_{i=1}^n l(X_i^\top\theta, y_i) + \frac{\ell_2}{2}\|\theta\|^2
    \quad\text{s.t.}\quad |D_f(\theta)| \le \varepsilon,\qquad
    D_f = \hat l_f^a - \hat l_f^b,\quad
    \hat l_f^s(\theta) = \frac1{|\mathcal N^s|}\sum_{i\in\mathcal N^s} l_f(X_i^\top\theta, y_i).

The regularizer is :math:`h_k(\theta_k) = \frac{\ell_2}2\|\theta_k\|^2` for every party (the paper's
linear model of its §5, with :math:`\mu = \ell_2`); the group means contain no regularizer.
:math:`\mathcal N^s` are the rows of group *s* with the favourable label :math:`y=+1`.

Fairness losses :math:`l_f` (``fairness_loss``) and what the oracle can certify:

``"linear"``  Donini et al.'s :math:`l_{\rm lin}(z, y) = (1 - yz)/2`, so
              :math:`D_{\rm lin}(\theta) = -\tfrac12\langle\theta, u_a - u_b\rangle` is affine and the
              problem is convex for every convex objective loss: **exact**. The tolerance
              convention is explicit: ``tolerance_convention="deo"`` (default) bounds
              :math:`|D_{\rm lin}| \le \varepsilon`, i.e. :math:`|\langle\theta, u_a-u_b\rangle| \le 2\varepsilon`;
              ``"donini"`` puts ``eps`` directly on the inner product,
              :math:`|\langle\theta,u_a-u_b\rangle|\le\varepsilon` (Donini's :math:`\epsilon` = 2 x ours).
``"squared"`` :math:`l_f(u, y) = (u - y)^2` (the :class:`~drflmodel.losses.Squared` scaling, no 1/2).
              With a squared objective the problem is a one-constraint QCQP solved **exactly** by the
              Shor SDP (:mod:`.sdp`): rank-one extraction, trust-region hard case,
              S-lemma certificate. With another objective: the local procedure below.
``"same"``    :math:`l_f = l` (the paper's setting). A squared objective is the SDP case; any other
              convex loss is a DC program: a local procedure (unconstrained test, convex
              penalty lower bound (c3), convex-concave procedure (CCP) from several feasible
              starts, Lagrangian-convexity certificate (c2)); ``"optimal"`` only with a certificate,
              otherwise ``"local"`` with upper bound, lower bound and gap.

``penalty_c = c > 0`` replaces (4) by the quadratic-penalty problem the paper's constant-:math:`c`
gradient descent-ascent converges to:
:math:`P_c:\ \min_\theta L(\theta) + \frac1{2c}(|D_f(\theta)| - \varepsilon)_+^2`, with
:math:`\lambda_c = ((D_f-\varepsilon)_+, (-D_f-\varepsilon)_+)/c`. Exact (convex) for the linear
fairness loss; local with a bound otherwise.

**Multipliers** are reported in the paper's orientation and scaling in ``Solution.duals``:
``lambda1`` for (5a) :math:`D_f - \varepsilon \le 0`, ``lambda2`` for (5b) :math:`-D_f - \varepsilon \le 0`,
``rho = lambda1 - lambda2``; they are what the server's dual variables of Algorithm 1 converge to.
(For ``tolerance_convention="donini"`` the duals of Donini's inner-product rows, which are the
paper's divided by 2, are added as ``lambda1_donini`` / ``lambda2_donini``.)

**Certificates.** Every lower bound is a Lagrangian bound evaluated in numpy: for any
:math:`\lambda \ge 0` such that :math:`f(\cdot, \lambda)` (paper (6), minus :math:`\frac c2\|\lambda\|^2`
for :math:`P_c`) is :math:`\mu`-strongly convex, and any :math:`\hat\theta`,

.. math:: \min_{\text{feasible}} L \ \ge\ \min_\theta f(\theta,\lambda)\ \ge\
          f(\hat\theta,\lambda) - \frac{\|\nabla_\theta f(\hat\theta,\lambda)\|^2}{2\mu}

(any subgradient works for non-smooth losses, but at a kink the bound is loose: for the
piecewise-linear losses -- hinge, pinball, :math:`\epsilon`-insensitive -- with the linear fairness
loss the certificate is instead the exact dual function at a feasible dual point, :mod:`.dual`).
Convexity of :math:`f(\cdot,\lambda)` is checked
exactly: always for the linear :math:`l_f`; :math:`-|\mathcal N^a|/n \le \rho \le |\mathcal N^b|/n`
(all weights of the paper's (12) non-negative) for :math:`l_f = l`; :math:`\lambda_{\min}` of the
Hessian's quadratic part for the squared :math:`l_f`. The upper bound is :math:`L` at a point that
satisfies the constraint (within ``feasibility_tol``), computed in numpy.

**Routes** (``solve(method=...)``; one per problem class, :mod:`.routes`): ``"convex"`` (linear
fairness loss, problem (4) or :math:`P_c`), ``"sdp"`` (squared losses, :mod:`.sdp`), ``"dc"`` and
``"penalty_local"`` (the non-convex cases, :mod:`.local`). The Lagrangian toolkit is in
:mod:`.lagrangian`, the party and server views in :mod:`.views`.

**Infeasible points.** :meth:`DEOConstrained.objective` returns :math:`L(\theta)` when
:meth:`~DEOConstrained.constraint_violation` :math:`= (|D_f(\theta)| - \varepsilon)_+` is at most
``feasibility_tol`` (default ``1e-8``) and ``+inf`` otherwise (for :math:`P_c` it is the always-finite
penalized objective). Solver answers are made feasible before the upper bound is computed: with
the linear fairness loss by the exact projection onto :math:`\{|D|\le\varepsilon\}`
(:meth:`~DEOConstrained.project_to_slab`), otherwise along the segment to :math:`\theta = 0`
(:math:`D_f(0) = 0`).
"""

from __future__ import annotations

import time

import numpy as np
import cvxpy as cp

from ..._validation import check_choice, check_int, check_real
from ...data import VerticalFederation
from ...errors import InvalidDataError, InvalidParameterError
from ...losses import Loss, Squared
from ...solution import Solution
from ..engine.problem import VerticalProblem
from ..engine.structure import Structure, loss_fields
from ..._solver_sequence import solver_order
from .lagrangian import Lagrangian
from .local import DCRoute, PenaltyLocalRoute
from .routes import ConvexRoute
from .sdp import QuadraticDEO, SDPRoute, build_shor_sdp
from .views import PartyView, ServerView

__all__ = ["DEOConstrained", "LinearFairnessLoss", "FAIRNESS_LOSSES", "TOLERANCE_CONVENTIONS"]

FAIRNESS_LOSSES = ("linear", "squared", "same")
TOLERANCE_CONVENTIONS = ("deo", "donini")


class LinearFairnessLoss(Loss):
    r"""Donini et al.'s linear loss :math:`l_{\rm lin}(z) = (1 - z)/2`, :math:`z = y u` (Donini et al., NeurIPS 2018).

    Affine (hence convex and concave); used only inside the DEO constraint."""

    name = "linear"
    task = "classification"
    lipschitz = 0.5
    smoothness = 0.0

    def phi(self, z):
        return 0.5 * (1.0 - np.asarray(z, float))

    def dphi(self, z):
        return np.full_like(np.asarray(z, float), -0.5)

    def ddphi(self, z):
        return np.zeros_like(np.asarray(z, float))

    def phi_expr(self, z):
        return 0.5 * (1 - z)



class DEOConstrained(Lagrangian, VerticalProblem):
    r"""DEO-constrained linear model on a vertical federation (module docstring for the math).

    Parameters
    ----------
    vertical_federation : :class:`~drflmodel.data.VerticalFederation` (groups a/b, favourable
        label +1; it already refuses a group without favourable-label rows and blocks with
        mismatched rows).
    loss : a :class:`~drflmodel.losses.Loss` for the objective (classification losses, or
        :class:`~drflmodel.losses.Squared` on the ±1 labels: :math:`(u - y)^2`).
    eps : DEO tolerance :math:`\varepsilon \ge 0`.
    fairness_loss : ``"linear"``, ``"squared"`` or ``"same"``.
    l2 : ridge :math:`\ell_2 \ge 0` (:math:`h_k = \frac{\ell_2}2\|\theta_k\|^2`; the paper uses
        :math:`\ell_2 = 2/n`). Certificates need :math:`\ell_2 > 0` (strong convexity); with
        ``l2 = 0`` the lower bounds fall back to solver values and say so.
    penalize_intercept : only ``True``; ``False`` (an unpenalized intercept) is refused with the
        reason: the certificates use the ridge's strong convexity in every coordinate.
    penalty_c : ``None`` (problem (4)) or :math:`c > 0` (problem :math:`P_c`, the quadratic penalty above).
    tolerance_convention : ``"deo"`` (default) or ``"donini"`` (linear fairness loss only).
    feasibility_tol : constraint violation accepted by :meth:`objective` (default 1e-8).
    n_starts : number of random feasible starts for the local search (non-convex cases), in
        addition to :math:`0`, the scaled unconstrained and the scaled penalty solutions.
    max_ccp_iter, ccp_tol : CCP iteration cap and relative decrease tolerance.
    local_solver : ``"slsqp+ccp"`` (default: SciPy SLSQP from each feasible start, then the CCP
        from SLSQP's point, which converges in a few iterations and gives the multipliers) or
        ``"ccp"`` (the CCP alone). Non-smooth losses always use ``"ccp"``.
    rank_tol : :math:`\lambda_2(Y)/\lambda_1(Y)` below which the SDP solution is rank one.
    seed : seed of the random starts.
    """

    family = "deo"

    def __init__(self, vertical_federation, loss, eps, fairness_loss: str = "linear", l2: float = 0.0,
                 penalty_c=None, tolerance_convention: str = "deo", feasibility_tol: float = 1e-8,
                 n_starts: int = 3, max_ccp_iter: int = 100, ccp_tol: float = 1e-10,
                 rank_tol: float = 1e-6, local_solver: str = "slsqp+ccp", seed=0,
                 penalize_intercept: bool = True):
        if getattr(loss, "task", None) == "multiclass":
            raise InvalidParameterError(
                f"DEOConstrained does not support the multi-class loss {loss!r}: the DEO constraint of the fair "
                "vertical FL paper compares one score per sample between the groups, on labels -1/+1; use a "
                "binary loss (Logistic, Hinge, SmoothHinge) or Squared on the -1/+1 labels")
        if penalize_intercept is not True:
            from ..engine.problem import refuse_unpenalized_intercept

            refuse_unpenalized_intercept(penalize_intercept, "DEOConstrained",
                                         "its lower bounds use the ridge's strong convexity in every coordinate "
                                         "(h_k = l2/2 ||theta_k||^2 per party, as in the fair vertical FL paper); "
                                         "with a free intercept they would rest on the solver's value")
        super().__init__(vertical_federation, loss, l2)
        self.fairness_loss = check_choice(fairness_loss, "fairness_loss", FAIRNESS_LOSSES)
        self.tolerance_convention = check_choice(tolerance_convention, "tolerance_convention",
                                                 TOLERANCE_CONVENTIONS)
        if self.tolerance_convention == "donini" and self.fairness_loss != "linear":
            raise InvalidParameterError(
                "tolerance_convention='donini' applies to fairness_loss='linear' only; got "
                f"fairness_loss={fairness_loss!r}")
        self.eps = check_real(eps, "eps", low=0.0)
        self.penalty_c = None if penalty_c is None else check_real(penalty_c, "penalty_c", low=0.0,
                                                                   low_open=True)
        self.feasibility_tol = check_real(feasibility_tol, "feasibility_tol", low=0.0)
        self.n_starts = check_int(n_starts, "n_starts", 0)
        self.max_ccp_iter = check_int(max_ccp_iter, "max_ccp_iter", 1)
        self.ccp_tol = check_real(ccp_tol, "ccp_tol", low=0.0)
        self.rank_tol = check_real(rank_tol, "rank_tol", low=0.0, low_open=True)
        self.local_solver = check_choice(local_solver, "local_solver", ("ccp", "slsqp+ccp"))
        self.seed = seed

        vf = vertical_federation
        self.X = vf.X
        self.y = vf.y
        self.n = vf.n_samples
        self.N_a, self.N_b = vf.N_a, vf.N_b
        self.n_a, self.n_b = int(vf.N_a.sum()), int(vf.N_b.sum())
        if self.fairness_loss == "linear":
            self.fair = LinearFairnessLoss()
        elif self.fairness_loss == "squared":
            self.fair = Squared()
        else:
            self.fair = loss
        # signed per-sample weights of D_f: +1/|N_a| on N_a, -1/|N_b| on N_b
        self.group_weights = self.N_a / self.n_a - self.N_b / self.n_b
        self.u_a = self.X[self.N_a].mean(axis=0)
        self.u_b = self.X[self.N_b].mean(axis=0)
        self.d = self.u_a - self.u_b
        self._quad = None

    # ------------------------------------------------------------------ identification
    @property
    def eps_deo(self) -> float:
        r"""The tolerance on :math:`|D_f|` in the paper's (DEO) convention (``eps / 2`` for Donini's)."""
        return self.eps if self.tolerance_convention == "deo" else 0.5 * self.eps

    @property
    def is_affine(self) -> bool:
        """Whether :math:`D_f` is affine (the linear fairness loss)."""
        return self.fairness_loss == "linear"

    @property
    def is_quadratic(self) -> bool:
        """Squared loss in both the objective and the constraint (the SDP case)."""
        return isinstance(self.fair, Squared) and isinstance(self.loss, Squared)

    @property
    def problem_class(self) -> str:
        """``affine_fair``, ``squared_fair_qcqp``, ``dc_deo`` (a difference-of-convex DEO constraint), or
        ``penalty_c_affine`` / ``penalty_c_nonconvex``."""
        if self.penalty_c is not None:
            return "penalty_c_affine" if self.is_affine else "penalty_c_nonconvex"
        if self.is_affine:
            return "affine_fair"
        if self.is_quadratic:
            return "squared_fair_qcqp"
        return "dc_deo"

    @property
    def quadratic(self) -> QuadraticDEO:
        """The QCQP data (squared fairness loss)."""
        if self._quad is None:
            self._quad = QuadraticDEO.from_data(self.X, self.y, self.l2, self.N_a, self.N_b)
        return self._quad

    # ------------------------------------------------------------------ numpy side
    def _theta(self, theta) -> np.ndarray:
        t = np.asarray(theta, float)
        if t.shape != (self.dim,):
            raise InvalidDataError(f"theta must have shape ({self.dim},); got {t.shape}")
        return t

    def _scores(self, scores) -> np.ndarray:
        z = np.asarray(scores, float)
        if z.shape != (self.n,):
            raise InvalidDataError(f"scores must have shape ({self.n},); got {z.shape}")
        return z

    def data_loss_from_scores(self, scores) -> float:
        r""":math:`\frac1n\sum_i l(z_i, y_i)`."""
        return float(np.mean(self.loss.value(self._scores(scores), self.y)))

    def loss_value(self, theta) -> float:
        r""":math:`L(\theta)` (paper (1), with :math:`h_k = \frac{\ell_2}2\|\theta_k\|^2`)."""
        t = self._theta(theta)
        return self.data_loss_from_scores(self.X @ t) + 0.5 * self.l2 * float(t @ t)

    def loss_gradient(self, theta) -> np.ndarray:
        r""":math:`\nabla L(\theta)`."""
        t = self._theta(theta)
        return self.X.T @ self.loss.derivative(self.X @ t, self.y) / self.n + self.l2 * t

    def fairness_gap_from_scores(self, scores) -> float:
        r""":math:`D_f = \hat l_f^a - \hat l_f^b` from the scores (what the server computes, (8))."""
        return float(self.group_weights @ self.fair.value(self._scores(scores), self.y))

    def group_losses(self, theta) -> np.ndarray:
        r""":math:`(\hat l_f^a(\theta), \hat l_f^b(\theta))`."""
        v = self.fair.value(self.X @ self._theta(theta), self.y)
        return np.array([v[self.N_a].mean(), v[self.N_b].mean()])

    def client_losses(self, theta) -> np.ndarray:
        r"""For the vertical problem there are no per-client losses: this returns the two
        protected-group fairness losses :math:`(\hat l_f^a, \hat l_f^b)` that enter DEO."""
        return self.group_losses(theta)

    def fairness_gap(self, theta) -> float:
        r""":math:`D_f(\theta)` (signed)."""
        return self.fairness_gap_from_scores(self.X @ self._theta(theta))

    def fairness_gap_gradient(self, theta) -> np.ndarray:
        r""":math:`\nabla D_f(\theta) = X^\top(w^D \odot \partial_z l_f)`."""
        t = self._theta(theta)
        return self.X.T @ (self.group_weights * self.fair.derivative(self.X @ t, self.y))

    def deo(self, theta) -> float:
        r""":math:`\mathrm{DEO}_f(\theta) = |D_f(\theta)|` (paper (2))."""
        return abs(self.fairness_gap(theta))

    def constraint_violation(self, theta) -> float:
        r""":math:`(|D_f(\theta)| - \varepsilon)_+` (``eps`` in the DEO convention)."""
        return max(self.deo(theta) - self.eps_deo, 0.0)

    def objective(self, theta) -> float:
        r"""Problem (4): :math:`L(\theta)` if the violation is at most ``feasibility_tol``, else
        ``+inf``. Problem :math:`P_c`: :math:`L(\theta) + \frac1{2c}(|D_f(\theta)| - \varepsilon)_+^2`."""
        if self.penalty_c is not None:
            v = self.constraint_violation(theta)
            return self.loss_value(theta) + v * v / (2.0 * self.penalty_c)
        if self.constraint_violation(theta) > self.feasibility_tol:
            return float("inf")
        return self.loss_value(theta)

    def penalty_multipliers(self, theta) -> np.ndarray:
        r""":math:`\lambda_c = ((D_f-\varepsilon)_+, (-D_f-\varepsilon)_+)/c`."""
        if self.penalty_c is None:
            raise InvalidParameterError("penalty_multipliers needs penalty_c > 0")
        D = self.fairness_gap(theta)
        return np.array([max(D - self.eps_deo, 0.0), max(-D - self.eps_deo, 0.0)]) / self.penalty_c


    def client_view(self, k: int) -> PartyView:
        """What party *k* may compute (:class:`PartyView`; the party updates of the paper's Algorithm 1)."""
        return PartyView(self, k)

    def server_view(self) -> ServerView:
        """What the server may compute from the aggregated scores (:class:`ServerView`)."""
        return ServerView(self)

    def party_blocks(self, theta) -> list[np.ndarray]:
        r"""``theta`` split into the party blocks :math:`\theta_k`."""
        t = self._theta(theta)
        return [t[s].copy() for s in self.federation.block_slices]

    # ---- metrics ------------------------------------------------------------------------
    def metrics(self, theta, vertical_federation: VerticalFederation | None = None) -> dict:
        r"""DEO of the fairness surrogate and of the objective loss, DEO of the 0-1 loss, DFP, DFN,
        accuracy (overall and per protected group) on ``vertical_federation`` (default: the
        training federation), all from :mod:`drflmodel.metrics`."""
        from ... import metrics as M

        vf = self.federation if vertical_federation is None else vertical_federation
        t = self._theta(theta)
        if vf.dim != self.dim:
            raise InvalidDataError(f"vertical_federation has {vf.dim} features; the model has {self.dim}")
        z = vf.X @ t
        yhat = M.predict_sign(z)
        out = {
            "deo_surrogate": M.deo_surrogate(self.fair.value(z, vf.y), vf.N_a, vf.N_b),
            "deo_surrogate_signed": M.deo_surrogate(self.fair.value(z, vf.y), vf.N_a, vf.N_b, signed=True),
            "deo_objective_loss": M.deo_surrogate(self.loss.value(z, vf.y), vf.N_a, vf.N_b),
            "deo_01": M.deo_01(vf.y, yhat, vf.in_a, vf.in_b),
            "accuracy": M.accuracy(vf.y, yhat),
        }
        for name, fn in (("dfp", M.dfp), ("dfn", M.dfn)):
            try:
                out[name] = fn(vf.y, yhat, vf.in_a, vf.in_b)
            except InvalidDataError as exc:  # a group without negative (positive) rows
                out[name] = None
                out[f"{name}_note"] = str(exc)
        acc_a, acc_b = M.per_group_accuracy(vf.y, yhat, vf.in_a, vf.in_b)
        out["accuracy_a"], out["accuracy_b"] = acc_a, acc_b
        for s, mask in (("a", vf.in_a), ("b", vf.in_b)):
            for name, fn in (("fpr", M.false_positive_rate), ("fnr", M.false_negative_rate)):
                try:
                    out[f"{name}_{s}"] = fn(vf.y, yhat, mask)
                except InvalidDataError:
                    out[f"{name}_{s}"] = None
        return out


    # ------------------------------------------------------------------ CVXPY side
    def loss_expression(self, theta):
        """CVXPY :math:`L(\\theta)`: the mean loss plus the ridge."""
        return cp.sum(self.loss.expr(self.X @ theta, self.y)) / self.n + 0.5 * self.l2 * cp.sum_squares(theta)

    def _group_expr(self, theta, mask):
        Xs = self.X[mask]
        return cp.sum(self.fair.expr(Xs @ theta, np.ones(Xs.shape[0]))) / Xs.shape[0]

    def weighted_expression(self, theta, w_loss, w_fair, const=0.0):
        """:math:`\\sum_i w^{l}_i l(z_i) + \\sum_i w^{f}_i l_f(z_i) + \\frac{\\ell_2}2\\|\\theta\\|^2 + const`
        with non-negative weights (rows with zero weight are dropped; DCP)."""
        terms = [0.5 * self.l2 * cp.sum_squares(theta) + const]
        for w, loss in ((w_loss, self.loss), (w_fair, self.fair)):
            w = np.where(w > 0, w, 0.0)  # clip round-off negatives; callers ensure >= -1e-15
            keep = w > 0
            if keep.any():
                terms.append(w[keep] @ loss.expr(self.X[keep] @ theta, self.y[keep]))
        return cp.sum(cp.hstack(terms)) if len(terms) > 1 else terms[0]

    def _eps_param(self) -> cp.Parameter:
        if "eps" not in self._parameters:
            self._parameters["eps"] = cp.Parameter(nonneg=True, value=self.eps_deo, name="eps")
        return self._parameters["eps"]

    def _build(self) -> cp.Problem:
        """The convex program of the case: (4) with affine :math:`D`, :math:`P_c` with affine
        :math:`D`, the Shor SDP, or the CCP subproblem."""
        eps = self._eps_param()
        theta = cp.Variable(self.dim, name="theta")
        self.theta_variable = theta
        cls = self.problem_class
        if cls == "affine_fair":
            D = -0.5 * (self.d @ theta)
            self.deo_constraints = (D - eps <= 0, -D - eps <= 0)
            return cp.Problem(cp.Minimize(self.loss_expression(theta)), list(self.deo_constraints))
        if cls == "penalty_c_affine":
            D = -0.5 * (self.d @ theta)
            pen = cp.square(cp.pos(cp.abs(D) - eps)) / (2.0 * self.penalty_c)
            return cp.Problem(cp.Minimize(self.loss_expression(theta) + pen))
        if cls == "squared_fair_qcqp":
            prob, Y, cons = build_shor_sdp(self.quadratic, eps)
            self.lifted_variable, self.deo_constraints = Y, cons
            return prob
        # CCP subproblem: convex <= affine
        self.linearization = {s: (cp.Parameter(self.dim, name=f"grad_{s}"), cp.Parameter(name=f"off_{s}"))
                     for s in ("a", "b")}
        ga, ka = self.linearization["a"]
        gb, kb = self.linearization["b"]
        la, lb = self._group_expr(theta, self.N_a), self._group_expr(theta, self.N_b)
        self.deo_constraints = (la - (gb @ theta + kb) <= eps, lb - (ga @ theta + ka) <= eps)
        return cp.Problem(cp.Minimize(self.loss_expression(theta)), list(self.deo_constraints))

    def set_parameter(self, name: str, value) -> None:
        """Sweepable: ``"eps"`` (validated :math:`\\ge 0`, in the problem's tolerance convention)."""
        if name != "eps":
            raise InvalidParameterError(f"DEOConstrained has no sweepable parameter {name!r}; available: ['eps']")
        self.eps = check_real(value, "eps", low=0.0)
        if "eps" in self._parameters:
            self._parameters["eps"].value = self.eps_deo

    def solver_order(self) -> list[str]:
        """The documented solver order; the semidefinite one for the squared-loss QCQP (its route
        solves a Shor SDP)."""
        return solver_order(semidefinite=self.problem_class == "squared_fair_qcqp")

    # ------------------------------------------------------------------ feasibility
    def shrink_to_feasible(self, theta, margin: float = 0.0) -> tuple[np.ndarray, float]:
        r"""The point :math:`\alpha\theta` with the largest :math:`\alpha\in[0,1]` found by bisection
        such that :math:`|D_f(\alpha\theta)| \le \varepsilon - \text{margin}` (exact for affine :math:`D_f`;
        :math:`D_f(0) = 0`). Returns ``(alpha * theta, alpha)``."""
        t = self._theta(theta)
        target = max(self.eps_deo - margin, 0.0)
        if self.deo(t) <= target + (self.feasibility_tol if margin == 0.0 else 0.0):
            return t.copy(), 1.0
        if self.is_affine:
            D = self.fairness_gap(t)
            alpha = target / abs(D)
            return alpha * t, alpha
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.deo(mid * t) <= target:
                lo = mid
            else:
                hi = mid
        return lo * t, lo

    def project_to_slab(self, theta) -> np.ndarray:
        r"""Linear fairness loss: the nearest point of :math:`\{|D(\theta)|\le\varepsilon\}`,
        :math:`\theta-\frac{D(\theta)-\mathrm{sign}(D)\,\varepsilon}{\|\nabla D\|^2}\nabla D` when
        :math:`|D(\theta)|>\varepsilon` (exactly feasible up to rounding, unlike the tolerance of
        :meth:`shrink_to_feasible`, and not pulled towards 0 when :math:`\varepsilon = 0`)."""
        t = self._theta(theta)
        if not self.is_affine:
            raise InvalidParameterError("project_to_slab needs the linear fairness loss (affine D)")
        g = self.fairness_gap_gradient(t)
        for _ in range(3):                 # a second pass removes the rounding of the first
            D = self.fairness_gap(t)
            if abs(D) <= self.eps_deo:
                break
            t = t - (D - np.sign(D) * self.eps_deo) / float(g @ g) * g
        return t.copy()

    # ------------------------------------------------------------------ solve
    def routes(self) -> list:
        """``newton``, ``convex``, ``sdp``, ``dc``, ``penalty_local``: the route of
        :attr:`problem_class` (module docstring), and for the convex classes with a
        twice-differentiable loss and ``l2 > 0`` first the Newton route (:mod:`.newton`), which
        falls back to ``convex`` if it does not certify."""
        from .newton import NewtonRoute

        return [NewtonRoute(), ConvexRoute(), SDPRoute(), DCRoute(), PenaltyLocalRoute()]

    federated_refusal = "a vertical federation: its parties hold feature blocks, not rows"

    def describe_structure(self) -> Structure:
        """The structure of the vertical problem: its loss, :math:`n` rows over ``n_clients``
        parties, :math:`P` = ``dim``, the ridge (every coordinate) and ``facts["problem_class"]``,
        which decides the route."""
        return Structure(family=self.family, **loss_fields(self.loss), n_clients=int(self.n_clients), n_outputs=1,
                         rows=int(self.n), dim=int(self.dim), l2=float(self.l2), unpenalized=(),
                         strong_convexity=float(self.l2), rows_local=True,
                         data_bytes=int(self.X.nbytes + self.y.nbytes),
                         facts={"problem_class": self.problem_class})

    def annotate(self, sol: Solution, request, started: float) -> None:
        """``info``: ``problem_class``, the tolerance, ``kkt`` residuals and ``metrics`` (training
        data), the party blocks, :math:`L`, :math:`D`, DEO and the violation at the answer."""
        sol.info["problem_class"] = self.problem_class
        sol.info["fairness_loss"] = self.fairness_loss
        sol.info["tolerance_convention"] = self.tolerance_convention
        sol.info["eps"] = self.eps
        sol.info["eps_deo"] = self.eps_deo
        sol.info["gap_tol"] = request.gap_tol
        sol.info["wall_time"] = time.perf_counter() - started
        if sol.theta is not None:
            sol.info["theta_blocks"] = self.party_blocks(sol.theta)
            sol.info["L"] = self.loss_value(sol.theta)
            sol.info["D"] = self.fairness_gap(sol.theta)
            sol.info["DEO"] = abs(sol.info["D"])
            sol.info["violation"] = self.constraint_violation(sol.theta)
            sol.info["metrics"] = self.metrics(sol.theta)

    def make_solution(self, theta, lam, lb, lb_method, status, certificate, info) -> Solution:
        """The :class:`Solution` at ``theta`` with multipliers ``lam`` and lower bound ``lb`` (how:
        ``lb_method``); :math:`U` is the objective at ``theta`` (its violation, if any, reported)."""
        lam = np.maximum(np.asarray(lam, float), 0.0)
        ub = self.objective(theta)
        duals = {"lambda1": float(lam[0]), "lambda2": float(lam[1]), "rho": float(lam[0] - lam[1])}
        if self.tolerance_convention == "donini":
            duals.update(lambda1_donini=0.5 * duals["lambda1"], lambda2_donini=0.5 * duals["lambda2"])
        info = dict(info)
        info["kkt"] = self.kkt_residuals(theta, lam)
        info["lb_method"] = lb_method
        info["convexity_box"] = [-self.n_a / self.n, self.n_b / self.n]
        if self.eps_deo == 0.0 and self.penalty_c is None:
            info["note"] = ("eps = 0: both constraints are active and only rho = lambda1 - lambda2 is "
                            "identifiable")
        info["lagrangian_convexity_modulus"] = self.lagrangian_convexity(lam)
        return Solution(theta=np.asarray(theta, float), weights=None, client_losses=self.group_losses(theta),
                        value=ub, lower_bound=float(lb), upper_bound=ub, status=status,
                        certificate=certificate, duals=duals, info=info)


    def __repr__(self) -> str:
        return (f"DEOConstrained(parties={self.federation.n_parties}, dim={self.dim}, loss={self.loss!r}, "
                f"eps={self.eps}, fairness_loss={self.fairness_loss!r}, l2={self.l2}, "
                f"penalty_c={self.penalty_c}, tolerance_convention={self.tolerance_convention!r})")
