r"""DEO-constrained learning for fair vertical FL, with honest certificates.

Seed paper: Liu et al., *Achieving Model Fairness in Vertical Federated Learning*; math and errata
in spec ``fair-vfl-deo`` (§1 the model, §3 convexity and oracles, §5 implementer notes).

The problem (paper (1)-(4)) on a :class:`~drflmodel.data.VerticalFederation` with design
:math:`X = [X^1, \dots, X^K]` and labels :math:`y \in \{\pm1\}`:

.. math::

    \min_\theta\ L(\theta) = \frac1n\sum_{i=1}^n l(X_i^\top\theta, y_i) + \frac{\ell_2}{2}\|\theta\|^2
    \quad\text{s.t.}\quad |D_f(\theta)| \le \varepsilon,\qquad
    D_f = \hat l_f^a - \hat l_f^b,\quad
    \hat l_f^s(\theta) = \frac1{|\mathcal N^s|}\sum_{i\in\mathcal N^s} l_f(X_i^\top\theta, y_i).

The regularizer is :math:`h_k(\theta_k) = \frac{\ell_2}2\|\theta_k\|^2` for every party (the paper's
LM, spec §2.1, with :math:`\mu = \ell_2`); the group means contain no regularizer (spec N20).
:math:`\mathcal N^s` are the rows of group *s* with the favourable label :math:`y=+1` (spec N4).

Fairness losses :math:`l_f` (``fairness_loss``) and what the oracle can certify (spec §3):

``"linear"``  Donini et al.'s :math:`l_{\rm lin}(z, y) = (1 - yz)/2`, so
              :math:`D_{\rm lin}(\theta) = -\tfrac12\langle\theta, u_a - u_b\rangle` is affine and the
              problem is convex for every convex objective loss (§3.2): **exact**. The tolerance
              convention is explicit (spec N21): ``tolerance_convention="deo"`` (default) bounds
              :math:`|D_{\rm lin}| \le \varepsilon`, i.e. :math:`|\langle\theta, u_a-u_b\rangle| \le 2\varepsilon`;
              ``"donini"`` puts ``eps`` directly on the inner product,
              :math:`|\langle\theta,u_a-u_b\rangle|\le\varepsilon` (Donini's :math:`\epsilon` = 2 x ours).
``"squared"`` :math:`l_f(u, y) = (u - y)^2` (the :class:`~drflmodel.losses.Squared` scaling, no 1/2).
              With a squared objective the problem is a one-constraint QCQP solved **exactly** by the
              Shor SDP (:mod:`._deo_sdp`, §3.3): rank-one extraction, trust-region hard case,
              S-lemma certificate. With another objective: the §3.5 procedure (local).
``"same"``    :math:`l_f = l` (the paper's setting). A squared objective is the SDP case; any other
              convex loss is a DC program: the procedure of §3.5 (unconstrained test, convex
              penalty lower bound (c3), convex-concave procedure (CCP) from several feasible
              starts, Lagrangian-convexity certificate (c2)); ``"optimal"`` only with a certificate,
              otherwise ``"local"`` with upper bound, lower bound and gap.

``penalty_c = c > 0`` replaces (4) by the quadratic-penalty problem the paper's constant-:math:`c`
gradient descent-ascent converges to (§3.4 (c4)):
:math:`P_c:\ \min_\theta L(\theta) + \frac1{2c}(|D_f(\theta)| - \varepsilon)_+^2`, with
:math:`\lambda_c = ((D_f-\varepsilon)_+, (-D_f-\varepsilon)_+)/c`. Exact (convex) for the linear
fairness loss; local with a bound otherwise.

**Multipliers** (§3.6) are reported in the paper's orientation and scaling in ``Solution.duals``:
``lambda1`` for (5a) :math:`D_f - \varepsilon \le 0`, ``lambda2`` for (5b) :math:`-D_f - \varepsilon \le 0`,
``rho = lambda1 - lambda2``; they are what the server's dual variables of Algorithm 1 converge to.
(For ``tolerance_convention="donini"`` the duals of Donini's inner-product rows, which are the
paper's divided by 2, are added as ``lambda1_donini`` / ``lambda2_donini``.)

**Certificates.** Every lower bound is a Lagrangian bound evaluated in numpy: for any
:math:`\lambda \ge 0` such that :math:`f(\cdot, \lambda)` (paper (6), minus :math:`\frac c2\|\lambda\|^2`
for :math:`P_c`) is :math:`\mu`-strongly convex, and any :math:`\hat\theta`,

.. math:: \min_{\text{feasible}} L \ \ge\ \min_\theta f(\theta,\lambda)\ \ge\
          f(\hat\theta,\lambda) - \frac{\|\nabla_\theta f(\hat\theta,\lambda)\|^2}{2\mu}

(any subgradient works for non-smooth losses). Convexity of :math:`f(\cdot,\lambda)` is checked
exactly: always for the linear :math:`l_f`; :math:`-|\mathcal N^a|/n \le \rho \le |\mathcal N^b|/n`
(all weights of (12) non-negative, spec (c2)) for :math:`l_f = l`; :math:`\lambda_{\min}` of the
Hessian's quadratic part for the squared :math:`l_f`. The upper bound is :math:`L` at a point that
satisfies the constraint (within ``feasibility_tol``), computed in numpy.

**Infeasible points.** :meth:`DEOConstrained.objective` returns :math:`L(\theta)` when
:meth:`~DEOConstrained.constraint_violation` :math:`= (|D_f(\theta)| - \varepsilon)_+` is at most
``feasibility_tol`` (default ``1e-8``) and ``+inf`` otherwise (for :math:`P_c` it is the always-finite
penalized objective). Solver answers that violate the constraint by more are pulled back to
feasibility along the segment to :math:`\theta = 0` (:math:`D_f(0) = 0`, spec Fact 0) before the
upper bound is computed.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import cvxpy as cp
from scipy.optimize import minimize

from .._validation import check_choice, check_int, check_real
from ..data import VerticalFederation
from ..errors import InvalidDataError, InvalidParameterError
from ..losses import Loss, Squared
from ..solution import DEFAULT_GAP_TOL, Solution, relative_gap, status_from_gap
from ._base import SOLVER_OPTIONS, Problem, installed_solvers
from ._deo_sdp import QuadraticDEO, build_shor_sdp, dual_function, extract_theta, polish_active

__all__ = ["DEOConstrained", "PartyView", "ServerView", "LinearFairnessLoss", "FAIRNESS_LOSSES",
           "TOLERANCE_CONVENTIONS"]

FAIRNESS_LOSSES = ("linear", "squared", "same")
TOLERANCE_CONVENTIONS = ("deo", "donini")
_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)


class LinearFairnessLoss(Loss):
    r"""Donini et al.'s linear loss :math:`l_{\rm lin}(z) = (1 - z)/2`, :math:`z = y u` (spec §3.2).

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


# =============================================================================================
# what one party may compute (spec §1.4)
# =============================================================================================
class PartyView:
    r"""What party *k* of the vertical federation can compute (spec §1.1, §1.4).

    Every party holds its block :math:`X^k` and :math:`\theta_k`: it computes its partial scores
    :math:`p^k = X^k\theta_k` (sent to the server) and, given the server's per-sample message
    :math:`\nu = \partial f/\partial z` (paper (12), generalized to :math:`l_f \ne l`), its block
    gradient :math:`\nabla_k f = (X^k)^\top\nu + \ell_2\theta_k`. **Active** parties also hold the
    labels, the groups and the loss, so they can form :math:`\nu` themselves from the aggregated
    scores :math:`z` and :math:`\lambda` (:meth:`nu`, :meth:`local_gradient`), and take local steps
    on the "inconsistent read" :math:`z + X^k(\theta_k - \theta_k^{(t)})` (:meth:`local_scores`,
    spec N7). Calling a label-dependent method on a passive party raises
    :class:`~drflmodel.errors.InvalidParameterError`.
    """

    def __init__(self, problem: "DEOConstrained", k: int):
        vf = problem.federation
        self.index = check_int(k, "k", 0, vf.n_parties - 1)
        self.is_active = self.index in vf.active
        self.block = vf.block_slices[self.index]
        self._X = vf.blocks[self.index]
        self._problem = problem
        self.l2 = problem.l2

    @property
    def dim(self) -> int:
        return self._X.shape[1]

    @property
    def n_samples(self) -> int:
        return self._X.shape[0]

    def partial_scores(self, theta_k) -> np.ndarray:
        r""":math:`p^k = X^k\theta_k` (what the party sends to the server)."""
        return self._X @ self._block(theta_k)

    def regularizer(self, theta_k) -> float:
        r""":math:`h_k(\theta_k) = \frac{\ell_2}2\|\theta_k\|^2`."""
        t = self._block(theta_k)
        return 0.5 * self.l2 * float(t @ t)

    def block_gradient(self, nu, theta_k) -> np.ndarray:
        r""":math:`\nabla_k f = (X^k)^\top\nu + \ell_2\theta_k` from the server's message :math:`\nu`."""
        nu = np.asarray(nu, float)
        if nu.shape != (self.n_samples,):
            raise InvalidDataError(f"nu must have shape ({self.n_samples},); got {nu.shape}")
        return self._X.T @ nu + self.l2 * self._block(theta_k)

    # ---- active parties only -------------------------------------------------------------
    def _require_active(self, what: str) -> None:
        if not self.is_active:
            raise InvalidParameterError(
                f"party {self.index} is passive: it holds no labels, groups or loss, so it cannot "
                f"compute {what} (spec fair-vfl-deo §1.1); use block_gradient(nu, theta_k) with the "
                "server's message nu")

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nu = \partial f/\partial z` at the aggregated scores (paper (12); active only)."""
        self._require_active("nu")
        return self._problem.nu(scores, lam)

    def local_gradient(self, scores, theta_k, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nabla_k f(\theta, \lambda)` from the aggregated scores (paper (9); active only)."""
        self._require_active("local_gradient")
        return self.block_gradient(self._problem.nu(scores, lam), theta_k)

    def local_scores(self, scores, theta_k_new, theta_k_old) -> np.ndarray:
        r""":math:`z + X^k(\theta_k^{\rm new} - \theta_k^{\rm old})` (the inconsistent read, spec N7)."""
        self._require_active("local_scores")
        return np.asarray(scores, float) + self._X @ (self._block(theta_k_new) - self._block(theta_k_old))

    def loss_value(self, scores) -> float:
        r""":math:`\frac1n\sum_i l(z_i, y_i)` (no regularizer; active only)."""
        self._require_active("loss_value")
        return self._problem.data_loss_from_scores(scores)

    def _block(self, theta_k) -> np.ndarray:
        t = np.asarray(theta_k, float)
        if t.shape != (self.dim,):
            raise InvalidDataError(f"theta_k of party {self.index} must have shape ({self.dim},); got {t.shape}")
        return t

    def __repr__(self) -> str:
        return f"PartyView(k={self.index}, {'active' if self.is_active else 'passive'}, dim={self.dim})"


class ServerView:
    r"""What the (trusted) server computes from the aggregated scores :math:`z` (spec §1.4,
    Algorithm 1): it holds :math:`\{y_i, s_i\}` and, in the paper, the loss. It never sees a
    party's block :math:`X^k` or :math:`\theta_k`.

    * :meth:`fairness_gap` -- :math:`D_f(z)`;
    * :meth:`dual_gradient` -- :math:`\nabla_\lambda\tilde f` of (8);
    * :meth:`nu` -- the message :math:`\nu = \partial f/\partial z` of (12) sent to passive parties;
    * :meth:`loss_value` -- :math:`\frac1n\sum_i l(z_i, y_i)` (no regularizer).
    """

    def __init__(self, problem: "DEOConstrained"):
        self._problem = problem
        self.n_samples = problem.n

    @property
    def eps(self) -> float:
        """The current tolerance on :math:`|D_f|` (DEO convention)."""
        return self._problem.eps_deo

    def fairness_gap(self, scores) -> float:
        return self._problem.fairness_gap_from_scores(scores)

    def dual_gradient(self, scores, lam=(0.0, 0.0), c: float = 0.0) -> np.ndarray:
        return self._problem.dual_gradient(scores, lam, c)

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        return self._problem.nu(scores, lam)

    def loss_value(self, scores) -> float:
        return self._problem.data_loss_from_scores(scores)


# =============================================================================================
# the oracle
# =============================================================================================
class DEOConstrained(Problem):
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
    penalty_c : ``None`` (problem (4)) or :math:`c > 0` (problem :math:`P_c`, §3.4 (c4)).
    tolerance_convention : ``"deo"`` (default) or ``"donini"`` (linear fairness loss only).
    feasibility_tol : constraint violation accepted by :meth:`objective` (default 1e-8).
    n_starts : number of random feasible starts for the local search (non-convex cases), in
        addition to :math:`0`, the scaled unconstrained and the scaled penalty solutions.
    max_ccp_iter, ccp_tol : CCP iteration cap and relative decrease tolerance.
    local_solver : ``"slsqp+ccp"`` (default: SciPy SLSQP from each feasible start, then the CCP
        from SLSQP's point, which converges in a few iterations and gives the multipliers) or
        ``"ccp"`` (the CCP alone, spec §3.5 step 3). Non-smooth losses always use ``"ccp"``.
    rank_tol : :math:`\lambda_2(Y)/\lambda_1(Y)` below which the SDP solution is rank one.
    seed : seed of the random starts.
    """

    family = "deo"

    def __init__(self, vertical_federation, loss, eps, fairness_loss: str = "linear", l2: float = 0.0,
                 penalty_c=None, tolerance_convention: str = "deo", feasibility_tol: float = 1e-8,
                 n_starts: int = 3, max_ccp_iter: int = 100, ccp_tol: float = 1e-10,
                 rank_tol: float = 1e-6, local_solver: str = "slsqp+ccp", seed=0):
        # Problem.__init__ builds ClientObjectives of a horizontal Federation: not applicable here
        if not isinstance(vertical_federation, VerticalFederation):
            raise InvalidDataError(
                "vertical_federation must be a drflmodel.VerticalFederation; got "
                f"{type(vertical_federation).__name__}")
        if not isinstance(loss, Loss):
            raise InvalidParameterError(f"loss must be a drflmodel.losses.Loss; got {loss!r}")
        self.federation = vertical_federation
        self.loss = loss
        self.l2 = check_real(l2, "l2", low=0.0)
        self.objectives = None
        self._cp_problem = None
        self._parameters = {}
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
        self._dw = self.N_a / self.n_a - self.N_b / self.n_b
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
        """``affine_fair``, ``squared_fair_qcqp``, ``dc_deo`` (spec's ``logistic_deo``), or
        ``penalty_c_affine`` / ``penalty_c_nonconvex``."""
        if self.penalty_c is not None:
            return "penalty_c_affine" if self.is_affine else "penalty_c_nonconvex"
        if self.is_affine:
            return "affine_fair"
        if self.is_quadratic:
            return "squared_fair_qcqp"
        return "dc_deo"

    @property
    def n_clients(self) -> int:
        """Number of parties :math:`K`."""
        return self.federation.n_parties

    @property
    def dim(self) -> int:
        return self.federation.dim

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
        return float(self._dw @ self.fair.value(self._scores(scores), self.y))

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
        return self.X.T @ (self._dw * self.fair.derivative(self.X @ t, self.y))

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
        r""":math:`\lambda_c = ((D_f-\varepsilon)_+, (-D_f-\varepsilon)_+)/c` (§3.4 (c4))."""
        if self.penalty_c is None:
            raise InvalidParameterError("penalty_multipliers needs penalty_c > 0")
        D = self.fairness_gap(theta)
        return np.array([max(D - self.eps_deo, 0.0), max(-D - self.eps_deo, 0.0)]) / self.penalty_c

    # ---- the Lagrangian (6) and the server's quantities -----------------------------------
    def _c(self) -> float:
        return 0.0 if self.penalty_c is None else self.penalty_c

    def nu(self, scores, lam=(0.0, 0.0)) -> np.ndarray:
        r""":math:`\nu_i = \partial f/\partial z_i = \frac1n\partial_z l(z_i,y_i) + \rho\,
        (\frac{\mathbb 1[i\in\mathcal N^a]}{|\mathcal N^a|} - \frac{\mathbb 1[i\in\mathcal N^b]}{|\mathcal N^b|})
        \partial_z l_f(z_i,y_i)`, :math:`\rho = \lambda_1 - \lambda_2` (paper (12), spec §1.4)."""
        z = self._scores(scores)
        lam = np.asarray(lam, float)
        rho = float(lam[0] - lam[1])
        return self.loss.derivative(z, self.y) / self.n + rho * self._dw * self.fair.derivative(z, self.y)

    def dual_gradient(self, scores, lam=(0.0, 0.0), c: float = 0.0) -> np.ndarray:
        r""":math:`\nabla_\lambda \tilde f = (D - \varepsilon - c\lambda_1,\ -D - \varepsilon - c\lambda_2)` (paper (8))."""
        D = self.fairness_gap_from_scores(scores)
        lam = np.asarray(lam, float)
        return np.array([D - self.eps_deo, -D - self.eps_deo]) - c * lam

    def lagrangian(self, theta, lam, c: float | None = None) -> float:
        r""":math:`f(\theta, \lambda) - \frac c2\|\lambda\|^2` (paper (6); :math:`c` defaults to ``penalty_c`` or 0)."""
        c = self._c() if c is None else c
        lam = np.asarray(lam, float)
        D = self.fairness_gap(theta)
        return (self.loss_value(theta) + lam[0] * (D - self.eps_deo) - lam[1] * (D + self.eps_deo)
                - 0.5 * c * float(lam @ lam))

    def lagrangian_gradient(self, theta, lam) -> np.ndarray:
        r""":math:`\nabla_\theta f(\theta,\lambda) = X^\top\nu + \ell_2\theta` (paper (9))."""
        t = self._theta(theta)
        return self.X.T @ self.nu(self.X @ t, lam) + self.l2 * t

    def lagrangian_convexity(self, lam) -> float:
        r"""A lower bound :math:`\mu` on the strong-convexity modulus of :math:`f(\cdot, \lambda)`
        (``-inf`` if convexity cannot be established; see the module docstring)."""
        lam = np.asarray(lam, float)
        rho = float(lam[0] - lam[1])
        if self.is_affine:
            return self.l2
        if isinstance(self.fair, Squared):
            H = self.l2 * np.eye(self.dim) + 2.0 * rho * self.quadratic.A
            if isinstance(self.loss, Squared):
                H = H + 2.0 * self.X.T @ self.X / self.n
            return float(np.linalg.eigvalsh(0.5 * (H + H.T))[0])
        # l_f = l: every weight w_i(rho) of (12) must be non-negative (spec (c2))
        if -self.n_a / self.n - 1e-15 <= rho <= self.n_b / self.n + 1e-15:
            return self.l2
        return -np.inf

    def lagrangian_bound(self, theta_hat, lam, c: float | None = None) -> float:
        r"""Valid lower bound :math:`f(\hat\theta,\lambda) - \|\nabla_\theta f\|^2/(2\mu)` (``-inf``
        unless :math:`f(\cdot,\lambda)` is :math:`\mu`-strongly convex with :math:`\mu>0`)."""
        lam = np.maximum(np.asarray(lam, float), 0.0)
        mu = self.lagrangian_convexity(lam)
        if not mu > 0:
            return -np.inf
        g = self.lagrangian_gradient(theta_hat, lam)
        return self.lagrangian(theta_hat, lam, c) - float(g @ g) / (2.0 * mu)

    def _polished_bound(self, theta_hat, lam, c=None) -> float:
        """:meth:`lagrangian_bound` at ``theta_hat`` and at a Newton-polished minimizer of
        :math:`f(\\cdot,\\lambda)` (twice-differentiable losses; the bound holds at any point)."""
        best = self.lagrangian_bound(theta_hat, lam, c)
        if not np.isfinite(best):
            return best
        try:
            self.loss.ddphi(np.zeros(1))
            self.fair.ddphi(np.zeros(1))
        except NotImplementedError:
            return best
        lam = np.maximum(np.asarray(lam, float), 0.0)
        rho = float(lam[0] - lam[1])

        def hess(t):
            z = self.X @ t
            w = self.loss.second_derivative(z, self.y) / self.n + rho * self._dw * self.fair.second_derivative(z, self.y)
            return (self.X * w[:, None]).T @ self.X + self.l2 * np.eye(self.dim)

        try:
            res = minimize(lambda t: self.lagrangian(t, lam, c), np.asarray(theta_hat, float),
                           jac=lambda t: self.lagrangian_gradient(t, lam), hess=hess,
                           method="trust-exact", options={"gtol": 1e-13, "maxiter": 50})
            best = max(best, self.lagrangian_bound(res.x, lam, c))
        except (ValueError, np.linalg.LinAlgError, ArithmeticError):  # pragma: no cover
            pass
        return best

    def kkt_residuals(self, theta, lam) -> dict:
        r"""KKT residuals of (4) at :math:`(\theta, \lambda)` (spec §3.5 report fields); for
        :math:`P_c` the stationarity of :math:`P_c` and the consistency of :math:`\lambda_c`."""
        lam = np.asarray(lam, float)
        D = self.fairness_gap(theta)
        g = self.lagrangian_gradient(theta, lam)
        out = {"stationarity": float(np.linalg.norm(g)),
               "primal_violation": max(abs(D) - self.eps_deo, 0.0),
               "dual_feasibility": float(max(-lam.min(), 0.0)),
               "D": D}
        if self.penalty_c is None:
            out["complementarity"] = float(abs(lam[0] * (D - self.eps_deo)) + abs(lam[1] * (D + self.eps_deo)))
        else:
            out["multiplier_consistency"] = float(np.abs(lam - self.penalty_multipliers(theta)).max())
        # (13) at the solution with eta = beta = 1: (grad_theta f, lambda - [lambda + grad_lambda f]_+)
        gl = self.dual_gradient(self.X @ self._theta(theta), lam, c=self._c())
        gap_lam = lam - np.maximum(lam + gl, 0.0)
        out["stationarity_gap_13"] = float(np.sqrt(g @ g + gap_lam @ gap_lam))
        return out

    def client_view(self, k: int) -> PartyView:
        """What party *k* may compute (:class:`PartyView`; spec §1.4)."""
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
        training federation), all from :mod:`drflmodel.metrics` (spec §2.4 definitions)."""
        from .. import metrics as M

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
    def _loss_expr(self, theta):
        return cp.sum(self.loss.expr(self.X @ theta, self.y)) / self.n + 0.5 * self.l2 * cp.sum_squares(theta)

    def _group_expr(self, theta, mask):
        Xs = self.X[mask]
        return cp.sum(self.fair.expr(Xs @ theta, np.ones(Xs.shape[0]))) / Xs.shape[0]

    def _weighted_expr(self, theta, w_loss, w_fair, const=0.0):
        """:math:`\\sum_i w^{l}_i l(z_i) + \\sum_i w^{f}_i l_f(z_i) + \\frac{\\ell_2}2\\|\\theta\\|^2 + const`
        with non-negative weights (rows with zero weight are dropped; DCP)."""
        terms = [0.5 * self.l2 * cp.sum_squares(theta) + const]
        for w, loss in ((w_loss, self.loss), (w_fair, self.fair)):
            w = np.where(w > 0, w, 0.0)  # clip round-off negatives (spec §3.7); callers ensure >= -1e-15
            keep = w > 0
            if keep.any():
                terms.append(w[keep] @ loss.expr(self.X[keep] @ theta, self.y[keep]))
        return cp.sum(cp.hstack(terms)) if len(terms) > 1 else terms[0]

    def _eps_param(self) -> cp.Parameter:
        if "eps" not in self._parameters:
            self._parameters["eps"] = cp.Parameter(nonneg=True, value=self.eps_deo, name="eps")
        return self._parameters["eps"]

    def _build(self) -> cp.Problem:
        """The convex program of the case: (4) with affine :math:`D` (§3.2), :math:`P_c` with
        affine :math:`D` (§3.4 (c4)), the Shor SDP (§3.3), or the CCP subproblem (§3.5)."""
        eps = self._eps_param()
        theta = cp.Variable(self.dim, name="theta")
        self._theta_var = theta
        cls = self.problem_class
        if cls == "affine_fair":
            D = -0.5 * (self.d @ theta)
            self._cons = (D - eps <= 0, -D - eps <= 0)
            return cp.Problem(cp.Minimize(self._loss_expr(theta)), list(self._cons))
        if cls == "penalty_c_affine":
            D = -0.5 * (self.d @ theta)
            pen = cp.square(cp.pos(cp.abs(D) - eps)) / (2.0 * self.penalty_c)
            return cp.Problem(cp.Minimize(self._loss_expr(theta) + pen))
        if cls == "squared_fair_qcqp":
            prob, Y, cons = build_shor_sdp(self.quadratic, eps)
            self._Y, self._cons = Y, cons
            return prob
        # CCP subproblem: convex <= affine (spec §3.7)
        self._lin = {s: (cp.Parameter(self.dim, name=f"grad_{s}"), cp.Parameter(name=f"off_{s}"))
                     for s in ("a", "b")}
        ga, ka = self._lin["a"]
        gb, kb = self._lin["b"]
        la, lb = self._group_expr(theta, self.N_a), self._group_expr(theta, self.N_b)
        self._cons = (la - (gb @ theta + kb) <= eps, lb - (ga @ theta + ka) <= eps)
        return cp.Problem(cp.Minimize(self._loss_expr(theta)), list(self._cons))

    def set_parameter(self, name: str, value) -> None:
        """Sweepable: ``"eps"`` (validated :math:`\\ge 0`, in the problem's tolerance convention)."""
        if name != "eps":
            raise InvalidParameterError(f"DEOConstrained has no sweepable parameter {name!r}; available: ['eps']")
        self.eps = check_real(value, "eps", low=0.0)
        if "eps" in self._parameters:
            self._parameters["eps"].value = self.eps_deo

    @property
    def parameters(self) -> dict:
        self.build()
        return dict(self._parameters)

    def solver_order(self) -> list[str]:
        avail = set(installed_solvers())
        order = ["CLARABEL", "SCS"] if self.problem_class == "squared_fair_qcqp" else ["CLARABEL", "ECOS", "SCS"]
        return [s for s in order if s in avail]

    def _run(self, prob: cp.Problem, order, solver_options=None, record=None):
        """Solve ``prob`` with the first solver of ``order`` that returns an optimal status."""
        for name in order:
            opts = {**SOLVER_OPTIONS.get(name, {}), **(solver_options or {})} if name == order[0] else \
                dict(SOLVER_OPTIONS.get(name, {}))
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    # OPTIMAL_INACCURATE is recorded below; the certificate is checked in numpy
                    warnings.simplefilter("ignore", UserWarning)
                    prob.solve(solver=name, **opts)
            except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
                if record is not None:
                    record.append({"solver": name, "error": str(exc)[:200]})
                continue
            if record is not None:
                record.append({"solver": name, "cvxpy_status": prob.status, "time": time.perf_counter() - t0})
            if prob.status in _OK:
                return name
        return None

    # ------------------------------------------------------------------ feasibility
    def shrink_to_feasible(self, theta, margin: float = 0.0) -> tuple[np.ndarray, float]:
        r"""The point :math:`\alpha\theta` with the largest :math:`\alpha\in[0,1]` found by bisection
        such that :math:`|D_f(\alpha\theta)| \le \varepsilon - \text{margin}` (exact for affine :math:`D_f`;
        :math:`D_f(0) = 0`, spec Fact 0). Returns ``(alpha * theta, alpha)``."""
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

    # ------------------------------------------------------------------ solve
    def solve(self, solver: str | None = None, gap_tol: float = DEFAULT_GAP_TOL, verbose: bool = False,
              **solver_options) -> Solution:
        """Solve and certify according to :attr:`problem_class` (module docstring).

        ``info`` holds ``problem_class``, ``kkt`` residuals, ``metrics`` (training data),
        ``lb_method``, the solver record and, for the non-convex cases, the local-search record.
        """
        gap_tol = check_real(gap_tol, "gap_tol", low=0.0)
        order = self.solver_order()
        if solver is not None:
            order = [solver.upper()] + [s for s in order if s != solver.upper()]
        t0 = time.perf_counter()
        cls = self.problem_class
        if cls in ("affine_fair", "penalty_c_affine"):
            sol = self._solve_convex(order, gap_tol, solver_options)
        elif cls == "squared_fair_qcqp":
            sol = self._solve_sdp(order, gap_tol, solver_options)
        elif cls == "dc_deo":
            sol = self._solve_dc(order, gap_tol, solver_options)
        else:
            sol = self._solve_penalty_nonconvex(order, gap_tol)
        sol.info["problem_class"] = cls
        sol.info["fairness_loss"] = self.fairness_loss
        sol.info["tolerance_convention"] = self.tolerance_convention
        sol.info["eps"] = self.eps
        sol.info["eps_deo"] = self.eps_deo
        sol.info["gap_tol"] = gap_tol
        sol.info["wall_time"] = time.perf_counter() - t0
        sol.problem = self
        if sol.theta is not None:
            sol.info["theta_blocks"] = self.party_blocks(sol.theta)
            sol.info["L"] = self.loss_value(sol.theta)
            sol.info["D"] = self.fairness_gap(sol.theta)
            sol.info["DEO"] = abs(sol.info["D"])
            sol.info["violation"] = self.constraint_violation(sol.theta)
            sol.info["metrics"] = self.metrics(sol.theta)
        return sol

    def _make_solution(self, theta, lam, lb, lb_method, status, certificate, info) -> Solution:
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
                            "identifiable (spec §3.2)")
        info["lagrangian_convexity_modulus"] = self.lagrangian_convexity(lam)
        return Solution(theta=np.asarray(theta, float), weights=None, client_losses=self.group_losses(theta),
                        value=ub, lower_bound=float(lb), upper_bound=ub, status=status,
                        certificate=certificate, duals=duals, info=info)

    def _failed(self, record) -> Solution:
        return Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                        lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                        certificate="none", info={"attempts": record}, problem=self)

    # ---- convex cases: affine D (§3.2) and P_c with affine D (§3.4 (c4)) ---------------------
    def _solve_convex(self, order, gap_tol, solver_options) -> Solution:
        prob = self.build()
        attempts, best = [], None
        for i, name in enumerate(order):
            used = self._run(prob, [name], solver_options if i == 0 else None, attempts)
            if used is None:
                continue
            theta = np.asarray(self._theta_var.value, float)
            if self.penalty_c is None:
                lam = np.array([self._cons[0].dual_value, self._cons[1].dual_value], float).ravel()
                theta, _ = self.shrink_to_feasible(theta)
                lam = np.maximum(lam, 0.0)
                lb_method = "lagrangian_at_solver_duals"
            else:
                lam = self.penalty_multipliers(theta)
                lb_method = "lagrangian_at_penalty_multipliers"
            lb = self._polished_bound(theta, lam)
            if not np.isfinite(lb):  # l2 = 0: no strong convexity, fall back on the solver's value
                lb, lb_method = float(prob.value), "solver_value (l2 = 0: no strong-convexity bound)"
            ub = self.objective(theta)
            status = status_from_gap(lb, ub, gap_tol)
            sol = self._make_solution(theta, lam, lb, lb_method, status,
                                      "lagrangian_dual_bound" if "lagrangian" in lb_method else "solver",
                                      {"solver": used, "attempts": attempts})
            if best is None or relative_gap(sol.lower_bound, sol.upper_bound) < relative_gap(best.lower_bound, best.upper_bound):
                best = sol
            if status == "optimal":
                break
        return best if best is not None else self._failed(attempts)

    # ---- squared loss: Shor SDP (§3.3) ------------------------------------------------------
    def _solve_sdp(self, order, gap_tol, solver_options) -> Solution:
        prob = self.build()
        q = self.quadratic
        attempts, best = [], None
        for i, name in enumerate(order):
            used = self._run(prob, [name], solver_options if i == 0 else None, attempts)
            if used is None:
                continue
            lam = np.maximum(np.array([self._cons[0].dual_value, self._cons[1].dual_value], float).ravel(), 0.0)
            theta, ext = extract_theta(q, np.asarray(self._Y.value, float), lam, self.eps_deo, self.rank_tol)
            ext["polished"] = False
            rho_sdp = float(lam[0] - lam[1])
            if abs(rho_sdp) <= 1e-7:
                # inactive constraint: the unconstrained minimizer A0^{-1} c0, if feasible (c1)
                th_u = np.linalg.solve(q.A0, q.c0)
                if self.constraint_violation(th_u) <= self.feasibility_tol:
                    theta, lam = th_u, np.zeros(2)
                    ext["polished"] = "unconstrained"
            elif ext["method"] != "hard_case":
                pol = polish_active(q, rho_sdp, self.eps_deo)
                if pol is not None and q.q0(pol[0]) <= q.q0(theta) + 1e-7 * max(1.0, abs(q.q0(theta))):
                    theta, rho = pol
                    lam = np.array([max(rho, 0.0), max(-rho, 0.0)])
                    ext["polished"] = True
                    ext["rho_sdp"] = rho_sdp
            theta, alpha = self.shrink_to_feasible(theta)
            lb, delta, lam_used = dual_function(q, lam, self.eps_deo)
            M, _ = q.lagrangian_matrix(float(lam[0] - lam[1]))
            lmin = float(np.linalg.eigvalsh(M)[0])
            info = {"solver": used, "attempts": attempts, "sdp_value": float(prob.value),
                    "extraction": ext, "rank_ratio": ext["rank_ratio"], "shrink_alpha": alpha,
                    "s_lemma": {"lambda_min(A0 + rho A)": lmin, "dual_shrink_delta": delta,
                                "holds": bool(lmin >= -1e-9 * max(1.0, abs(np.linalg.eigvalsh(M)[-1])))}}
            ub = self.objective(theta)
            status = status_from_gap(lb, ub, gap_tol)
            sol = self._make_solution(theta, lam, lb, "s_lemma_dual_function", status,
                                      "s_lemma" + ("" if ext["method"] == "rank_one" else f"+{ext['method']}"), info)
            if best is None or relative_gap(sol.lower_bound, sol.upper_bound) < relative_gap(best.lower_bound, best.upper_bound):
                best = sol
            if status == "optimal":
                break
        return best if best is not None else self._failed(attempts)

    # ---- the DC case (§3.5) -----------------------------------------------------------------
    def _unconstrained(self, order, solver_options, record):
        """:math:`\\theta_u = \\arg\\min L` and a valid lower bound on :math:`\\min L` (cached:
        independent of :math:`\\varepsilon`, so an :math:`\\varepsilon` sweep computes it once)."""
        if getattr(self, "_unc_cache", None) is not None:
            return self._unc_cache
        theta = cp.Variable(self.dim)
        prob = cp.Problem(cp.Minimize(self._loss_expr(theta)))
        used = self._run(prob, order, solver_options, record)
        if used is None:
            return None, -np.inf
        th = np.asarray(theta.value, float)
        lb = self._polished_bound(th, np.zeros(2), c=0.0)
        if not np.isfinite(lb):
            lb = float(prob.value)
        self._unc_cache = (th, lb)
        return th, lb

    def _penalty_bound(self, order, record):
        r"""(c3): :math:`\min_\theta \max\{L, L + w_1(D-\varepsilon), L - w_2(D+\varepsilon)\}` with
        :math:`w_1 = |\mathcal N^b|/n`, :math:`w_2 = |\mathcal N^a|/n` (needs :math:`l_f = l`).
        Returns ``(theta_pen, lower_bound, lam)``: the bound is the Lagrangian bound at the
        multipliers read from the epigraph duals (a point of the box), checked in numpy."""
        if self.fair is not self.loss:
            return None, -np.inf, None
        w1, w2 = self.n_b / self.n, self.n_a / self.n
        eps = self.eps_deo
        theta = cp.Variable(self.dim)
        t = cp.Variable()
        base = np.full(self.n, 1.0 / self.n)
        cons = [t >= self._weighted_expr(theta, base, np.zeros(self.n)),
                t >= self._weighted_expr(theta, base + w1 * self._dw, np.zeros(self.n), -w1 * eps),
                t >= self._weighted_expr(theta, base - w2 * self._dw, np.zeros(self.n), -w2 * eps)]
        prob = cp.Problem(cp.Minimize(t), cons)
        used = self._run(prob, order, None, record)
        if used is None:
            return None, -np.inf, None
        th = np.asarray(theta.value, float)
        beta = np.maximum(np.array([float(c.dual_value) for c in cons]), 0.0)
        beta = beta / beta.sum() if beta.sum() > 0 else np.array([1.0, 0.0, 0.0])
        lam = np.array([beta[1] * w1, beta[2] * w2])
        return th, self._polished_bound(th, lam, c=0.0), lam

    def _ccp(self, theta0, order, solver_options):
        """Convex-concave procedure from the feasible ``theta0`` (spec §3.5 step 3)."""
        prob = self.build()
        th = np.asarray(theta0, float)
        values = [self.loss_value(th)]
        lam = np.zeros(2)
        it = 0
        for it in range(1, self.max_ccp_iter + 1):
            z = self.X @ th
            for s, other in (("a", self.N_a), ("b", self.N_b)):
                Xs = self.X[other]
                v = self.fair.value(z[other], self.y[other])
                g = Xs.T @ self.fair.derivative(z[other], self.y[other]) / Xs.shape[0]
                self._lin[s][0].value = g
                self._lin[s][1].value = float(v.mean() - g @ th)
            if self._run(prob, order, solver_options) is None:
                break
            new = np.asarray(self._theta_var.value, float)
            lam = np.maximum(np.array([self._cons[0].dual_value, self._cons[1].dual_value], float).ravel(), 0.0)
            values.append(self.loss_value(new))
            step = np.linalg.norm(new - th)
            th = new
            if values[-2] - values[-1] <= self.ccp_tol * max(1.0, abs(values[-1])) and step <= 1e-6 * max(1.0, np.linalg.norm(th)):
                break
        return th, lam, {"iterations": it, "values": [values[0], values[-1]]}

    def _slsqp(self, theta0):
        """SciPy SLSQP on (4) from ``theta0`` (smooth losses only), pulled back to feasibility;
        ``None`` if unavailable or worse than the start. Used to warm-start the CCP, which
        then certifies feasibility/monotonicity and yields the multipliers."""
        try:
            self.loss.ddphi(np.zeros(1))
            self.fair.ddphi(np.zeros(1))
        except NotImplementedError:
            return None
        eps = self.eps_deo
        cons = [{"type": "ineq", "fun": lambda t: eps - self.fairness_gap(t),
                 "jac": lambda t: -self.fairness_gap_gradient(t)},
                {"type": "ineq", "fun": lambda t: eps + self.fairness_gap(t),
                 "jac": lambda t: self.fairness_gap_gradient(t)}]
        try:
            res = minimize(self.loss_value, np.asarray(theta0, float), jac=self.loss_gradient,
                           method="SLSQP", constraints=cons, options={"ftol": 1e-12, "maxiter": 500})
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):  # pragma: no cover
            return None
        th, _ = self.shrink_to_feasible(res.x)
        if self.loss_value(th) > self.loss_value(theta0):
            return None
        return th

    def _feasible_starts(self, theta_u, theta_pen):
        rng = np.random.default_rng(self.seed)
        margin = 1e-3 * self.eps_deo
        starts = [("zero", np.zeros(self.dim))]
        if theta_u is not None:
            starts.append(("scaled_unconstrained", self.shrink_to_feasible(theta_u, margin)[0]))
        if theta_pen is not None:
            starts.append(("scaled_penalty", self.shrink_to_feasible(theta_pen, margin)[0]))
        scale = np.linalg.norm(theta_u) if theta_u is not None else 1.0
        for j in range(self.n_starts):
            v = rng.standard_normal(self.dim)
            v *= scale / max(np.linalg.norm(v), 1e-300)
            starts.append((f"random{j}", self.shrink_to_feasible(v, margin)[0]))
        return starts

    def _certify_local(self, theta, lam, lb_global):
        """Lagrangian-convexity certificate (c2) at a KKT point; returns (lb, method)."""
        lb_c2 = self._polished_bound(theta, lam)
        if np.isfinite(lb_c2) and lb_c2 > lb_global:
            return lb_c2, "lagrangian_convex"
        return lb_global, None

    def _solve_dc(self, order, gap_tol, solver_options) -> Solution:
        record = []
        # 1. unconstrained test (c1)
        theta_u, lb_u = self._unconstrained(order, solver_options, record)
        if theta_u is None:
            return self._failed(record)
        info = {"attempts": record, "lb_unconstrained": lb_u}
        if self.constraint_violation(theta_u) <= self.feasibility_tol:
            ub = self.objective(theta_u)
            return self._make_solution(theta_u, np.zeros(2), lb_u, "unconstrained_minimum",
                                       status_from_gap(lb_u, ub, gap_tol), "unconstrained_feasible", info)
        # 2. penalty lower bound (c3)
        theta_pen, lb_pen, lam_pen = self._penalty_bound(order, record)
        info["lb_penalty"] = lb_pen
        lb, lb_method = (lb_pen, "penalty_c3") if lb_pen > lb_u else (lb_u, "unconstrained_minimum")
        if theta_pen is not None and self.constraint_violation(theta_pen) <= self.feasibility_tol:
            ub = self.objective(theta_pen)
            st = status_from_gap(lb, ub, gap_tol)
            if st == "optimal":
                return self._make_solution(theta_pen, lam_pen, lb, lb_method, st, "penalty_bound_attained", info)
        # 3. CCP from several feasible starts
        runs = []
        for name, start in self._feasible_starts(theta_u, theta_pen):
            pre = self._slsqp(start) if self.local_solver == "slsqp+ccp" else None
            th, lam, rec = self._ccp(start if pre is None else pre, order, solver_options)
            th, _ = self.shrink_to_feasible(th)
            runs.append({"start": name, "theta": th, "lam": lam, "value": self.objective(th),
                         "slsqp_presolve": pre is not None, **rec})
        runs = [r for r in runs if np.isfinite(r["value"])]
        if not runs:
            return self._failed(record)
        best = min(runs, key=lambda r: r["value"])
        info["local_search"] = {"n_starts": len(runs),
                                "values": [float(r["value"]) for r in runs],
                                "starts": [r["start"] for r in runs],
                                "iterations": [r["iterations"] for r in runs],
                                "spread": float(max(r["value"] for r in runs) - best["value"])}
        # 4. certificate (c2)
        lb2, cert = self._certify_local(best["theta"], best["lam"], lb)
        if cert is not None:
            lb, lb_method = lb2, cert
        ub = self.objective(best["theta"])
        st = status_from_gap(lb, ub, gap_tol)
        if cert is None or st != "optimal":
            # 5. no certificate closed the gap: honest local answer
            st, cert = "local", ("none" if cert is None else cert + " (gap open)")
        return self._make_solution(best["theta"], best["lam"], lb, lb_method, st, cert, info)

    # ---- P_c with a nonlinear fairness loss -------------------------------------------------
    def _solve_penalty_nonconvex(self, order, gap_tol) -> Solution:
        record = []
        theta_u, lb_u = self._unconstrained(order, None, record)
        if theta_u is None:
            return self._failed(record)
        rng = np.random.default_rng(self.seed)
        starts = [np.zeros(self.dim), theta_u] + [rng.standard_normal(self.dim) * max(np.linalg.norm(theta_u), 1.0) / np.sqrt(self.dim)
                                                  for _ in range(self.n_starts)]
        c = self.penalty_c

        def grad(t):
            D = self.fairness_gap(t)
            v = max(abs(D) - self.eps_deo, 0.0)
            return self.loss_gradient(t) + (np.sign(D) * v / c) * self.fairness_gap_gradient(t)

        runs = []
        for x0 in starts:
            res = minimize(self.objective, x0, jac=grad, method="L-BFGS-B",
                           options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
            runs.append(res.x)
        vals = [self.objective(t) for t in runs]
        theta = runs[int(np.argmin(vals))]
        lam = self.penalty_multipliers(theta)
        lb_c2 = self._polished_bound(theta, lam)
        info = {"attempts": record, "local_search": {"n_starts": len(runs), "values": vals,
                                                     "spread": float(max(vals) - min(vals))}}
        ub = self.objective(theta)
        if np.isfinite(lb_c2) and lb_c2 > lb_u and status_from_gap(lb_c2, ub, gap_tol) == "optimal":
            return self._make_solution(theta, lam, lb_c2, "lagrangian_convex", "optimal", "lagrangian_convex", info)
        lb = max(lb_u, lb_c2)
        return self._make_solution(theta, lam, lb, "unconstrained_minimum" if lb == lb_u else "lagrangian_convex",
                                   "local", "none", info)

    def __repr__(self) -> str:
        return (f"DEOConstrained(parties={self.federation.n_parties}, dim={self.dim}, loss={self.loss!r}, "
                f"eps={self.eps}, fairness_loss={self.fairness_loss!r}, l2={self.l2}, "
                f"penalty_c={self.penalty_c}, tolerance_convention={self.tolerance_convention!r})")
