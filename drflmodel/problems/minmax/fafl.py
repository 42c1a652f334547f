r"""Fairness-aware federated learning (FAFL): the HCVaR objective, its dual, and the smoothed target.

The FAFL paper (Tu, Xu, Huang, Tao and Li, "Fairness-Aware Federated Learning"), §3–§4. With :math:`p_i=N_i/N`, levels :math:`\alpha_i\in[p_i,1]` and caps
:math:`c_i=p_i/\alpha_i`, the FAFL loss (Definition 1, eq. (1)/(3)) in :math:`\lambda=q\circ p` form is

.. math::

    f_\alpha(\theta)=\max\Big\{\lambda^\top f(\theta):\ \lambda\in\Delta^{n-1},\ \lambda_i\le c_i\Big\}
    =\inf_{\eta\in\mathbb R}\ \eta+\sum_i c_i\,(f_i(\theta)-\eta)_+ \qquad\text{(Lemma 1)}.

* :meth:`FairnessAwareFL.objective` is the **primal** sup over :math:`Q_\alpha` (greedy,
  via ``sets.HCVaR.worst_case``), in numpy.
* The CVXPY problem is the **dual** of Lemma 1, joint in :math:`(\theta,\eta)` (problem (4)):
  :math:`\min_{\theta,\eta,t}\ \eta+\sum_ic_i(t_i-\eta)_+` s.t. :math:`t_i\ge f_i(\theta)`, with the caps
  :math:`c=p/\alpha` a nonnegative ``cp.Parameter`` (DPP: an :math:`\alpha` sweep does not recompile).
  The epigraph multipliers are :math:`\lambda^\star`; :math:`q^\star=\lambda^\star/p` and
  :math:`\eta^\star` are in ``Solution.duals``.
* Certificate: as :class:`~drflmodel.problems.minmax.dro.FederatedDRO` (upper bound = primal sup at
  :math:`\theta^\star` in numpy, lower bound = fixed-weight minimization at :math:`\lambda^\star`).
* The smoothed objective of problem (5),
  :math:`F^\mu_\alpha(\theta,\eta)=\eta+\sum_ic_i\,\phi_\mu(f_i(\theta)-\eta)` with the softplus
  :math:`\phi_\mu(x)=\mu\log(1+e^{x/\mu})`, is :meth:`FairnessAwareFL.smoothed_objective`;
  :meth:`FairnessAwareFL.solve_smoothed` returns its certified minimizer (the point rFedFair
  converges to). Lemma 2: :math:`F_\alpha\le F^\mu_\alpha\le F_\alpha+\mu\tau_\alpha` with
  :math:`\tau_\alpha=\sum_ip_i/\alpha_i` (in fact :math:`\le F_\alpha+\mu\log2\,\tau_\alpha`: :math:`\phi_\mu` is the softplus, whose gap
to :math:`(\cdot)_+` is at most :math:`\mu\log2`).

For :math:`\alpha_i<p_i` (outside Definition 1's range) the cap is vacuous and the exact objective
equals AFL. By default such :math:`\alpha` is an error; ``alpha_below_p="clip"`` uses
:math:`\max(\alpha_i,p_i)` with a warning (same exact objective).
"""

from __future__ import annotations

import warnings

import numpy as np
from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
from scipy.optimize import brentq
from scipy.special import expit, xlogy

from ..._validation import as_finite_array, check_choice, check_real
from ...errors import InvalidParameterError
from ...solution import Solution, status_from_gap, DEFAULT_GAP_TOL
from ... import sets as _sets
from ...sets import feasible_weights
from ..._solver_sequence import OK_STATUSES, SolverSequence
from ..engine.queries import ROWS
from ..engine.route import Route, dispatch
from .dro import WeightedMinMax, lower_bound_kind

__all__ = ["FairnessAwareFL", "SmoothedRoute"]

SMOOTHED_CERTIFICATE = "entropy-regularized fixed-weight minimization (softplus Fenchel dual)"


def _softplus(x: np.ndarray, mu: float) -> np.ndarray:
    r""":math:`\phi_\mu(x)=\mu\log(1+e^{x/\mu})`, computed stably."""
    return mu * np.logaddexp(0.0, np.asarray(x, float) / mu)


def _binary_entropy(s: np.ndarray) -> np.ndarray:
    """:math:`h(s)=-s\\log s-(1-s)\\log(1-s)` (0 at s in {0, 1})."""
    s = np.asarray(s, float)
    return -xlogy(s, s) - xlogy(1.0 - s, 1.0 - s)


class FairnessAwareFL(WeightedMinMax):
    r"""FAFL (HCVaR) oracle: :math:`\min_\theta f_\alpha(\theta)` with :math:`f_\alpha` of Definition 1.

    Parameters
    ----------
    federation : :class:`~drflmodel.data.Federation`; :math:`p_i` are its ``proportions``.
    loss : :class:`~drflmodel.losses.Loss` whose task matches the federation.
    alpha : a scalar or a vector of :math:`n` levels :math:`\alpha_i\in[p_i,1]`.
    l2 : ridge weight :math:`\ell_2\ge0`.
    penalize_intercept : ``False`` leaves the intercept column out of the ridge term.
    alpha_below_p : ``"error"`` (default) or ``"clip"`` (use :math:`\max(\alpha_i,p_i)`, warn).

    The swept parameter is ``"alpha"`` (the CVXPY ``Parameter`` holds the caps :math:`p/\alpha`).
    """

    family = "fafl"

    def __init__(self, federation, loss, alpha, l2: float = 0.0, alpha_below_p: str = "error",
                 penalize_intercept: bool = True):
        super().__init__(federation, loss, l2, penalize_intercept)
        self.p = np.asarray(federation.proportions, float)
        self.alpha_below_p = check_choice(alpha_below_p, "alpha_below_p", ("error", "clip"))
        self.alpha = self._check_alpha(alpha)
        self._eta = None
        self._cap = None
        self._smoothed = {}
        self._hcvar = None

    # ------------------------------------------------------------------ parameters
    def _check_alpha(self, alpha) -> np.ndarray:
        n = self.n_clients
        a = as_finite_array(alpha, "alpha")
        if a.ndim == 0:
            a = np.full(n, float(a))
        if a.shape != (n,):
            raise InvalidParameterError(f"alpha must be a scalar or a vector of length {n}; got shape {a.shape}")
        bad = np.flatnonzero((a <= 0) | (a > 1))
        if bad.size:
            i = int(bad[0])
            raise InvalidParameterError(
                f"alpha[{i}] = {a[i]!r} must lie in [p_{i}, 1] = [{self.p[i]:.6g}, 1] (Definition 1)")
        below = np.flatnonzero(a < self.p)
        if below.size:
            i = int(below[0])
            if self.alpha_below_p == "error":
                raise InvalidParameterError(
                    f"alpha[{i}] = {a[i]!r} must lie in [p_{i}, 1] = [{self.p[i]:.6g}, 1] (Definition 1); "
                    f"for alpha_i <= p_i the cap p_i/alpha_i >= 1 is vacuous and the exact objective is "
                    f"AFL's; pass alpha_below_p='clip' to use max(alpha_i, p_i), which has the same value")
            warnings.warn(f"alpha_i < p_i for clients {below.tolist()}: using max(alpha_i, p_i) "
                          f"(the cap is vacuous; the exact objective is unchanged)", stacklevel=3)
            a = np.maximum(a, self.p)
        return a

    @property
    def cap(self) -> np.ndarray:
        r"""Caps :math:`c_i=p_i/\alpha_i` on :math:`\lambda_i` (:math:`q_i\le1/\alpha_i`)."""
        return self.p / self.alpha

    @property
    def tau_alpha(self) -> float:
        r""":math:`\tau_\alpha=\sum_ip_i/\alpha_i\ge1` (Definition 2)."""
        return float(self.cap.sum())

    @property
    def weights(self):
        """The HCVaR weight set :math:`\\{\\lambda\\in\\Delta: \\lambda_i\\le p_i/\\alpha_i\\}` (``sets.HCVaR``)."""
        if self._hcvar is None or not np.array_equal(self._hcvar.alpha, self.alpha):
            self._hcvar = _sets.HCVaR(self.p, self.alpha)
        return self._hcvar

    def set_parameter(self, name: str, value) -> None:
        """``set_parameter("alpha", a)``: validated as in the constructor; re-solves without
        recompiling (the caps are a DPP ``Parameter``)."""
        if name != "alpha":
            raise InvalidParameterError(f"FairnessAwareFL has no sweepable parameter {name!r}; available: ['alpha']")
        self.alpha = self._check_alpha(value)
        if self._cap is not None:
            self._cap.value = self.cap

    def on_federation(self, federation) -> "FairnessAwareFL":
        """The same problem (loss, levels, ridge) on ``federation`` -- e.g. a federated server's
        declared federation (:mod:`drflmodel.client_oracle`)."""
        return FairnessAwareFL(federation, self.loss, alpha=self.alpha, l2=self.l2,
                               alpha_below_p=self.alpha_below_p, penalize_intercept=self.penalize_intercept)

    # ------------------------------------------------------------------ numpy
    def objective(self, theta) -> float:
        r"""Primal :math:`f_\alpha(\theta)=\sup_{q\in Q_\alpha}\sum_iq_ip_if_i(\theta)` (greedy)."""
        return float(self.weights.worst_case(self.client_losses(theta))[0])

    def joint_objective(self, theta, eta) -> float:
        r"""The dual objective of Lemma 1 / problem (4): :math:`F_\alpha(\theta,\eta)=\eta+\sum_ic_i(f_i(\theta)-\eta)_+`."""
        eta = check_real(eta, "eta")
        f = self.client_losses(theta)
        return float(eta + self.cap @ np.maximum(f - eta, 0.0))

    def smoothed_objective(self, theta, eta, mu) -> float:
        r""":math:`F^\mu_\alpha(\theta,\eta)=\eta+\sum_ic_i\,\mu\log(1+e^{(f_i(\theta)-\eta)/\mu})` (problem (5))."""
        eta = check_real(eta, "eta")
        mu = check_real(mu, "mu", low=0.0, low_open=True)
        f = self.client_losses(theta)
        return float(eta + self.cap @ _softplus(f - eta, mu))

    def smoothed_eta(self, theta, mu) -> float:
        r"""The exact minimizer :math:`\eta` of :math:`F^\mu_\alpha(\theta,\cdot)`: the root of
        :math:`\sum_ic_i\,\mathrm{sigmoid}((f_i-\eta)/\mu)=1` (needs :math:`\tau_\alpha>1`)."""
        mu = check_real(mu, "mu", low=0.0, low_open=True)
        self.check_tau_for_smoothing()
        f = self.client_losses(theta)
        c, tau = self.cap, self.tau_alpha
        g = lambda eta: float(c @ expit((f - eta) / mu)) - 1.0  # noqa: E731 (decreasing in eta)
        lo = f.min() - mu * (max(0.0, -np.log(tau - 1.0)) + 1.0)
        hi = f.max() + mu * (np.log(tau) + 1.0)
        return float(brentq(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500))

    def smoothed_value(self, theta, mu) -> float:
        r""":math:`\min_\eta F^\mu_\alpha(\theta,\eta)` (exact in :math:`\eta`, numpy)."""
        return self.smoothed_objective(theta, self.smoothed_eta(theta, mu), mu)

    def objective_for(self, solution):
        r"""The smoothed objective :math:`\min_\eta F^\mu_\alpha(\theta,\eta)` for a solution of
        :meth:`solve_smoothed` (what rFedFair converges to), else the exact FAFL objective."""
        if solution is not None and solution.certificate == SMOOTHED_CERTIFICATE:
            mu = solution.info["mu"]
            return lambda theta: self.smoothed_value(theta, mu)
        return self.objective

    def check_tau_for_smoothing(self) -> None:
        r"""Refuse the smoothed problem (5) when :math:`\tau_\alpha\le1` (its infimum is not attained)."""
        if self.tau_alpha - 1.0 <= 1e-12:
            raise InvalidParameterError(
                "the smoothed problem (5) needs tau_alpha = sum_i p_i/alpha_i > 1; with alpha_i = 1 for "
                "all i its infimum (the p-weighted average) is approached only as eta -> -inf")

    # ------------------------------------------------------------------ CVXPY (Lemma 1 dual)
    def _support(self, t):
        self._eta = cp.Variable(name="eta")
        self._cap = cp.Parameter(self.n_clients, nonneg=True, name="cap", value=self.cap)
        self._parameters = {"alpha": self._cap}
        return self._eta + self._cap @ cp.pos(t - self._eta), []

    def _extra_duals(self) -> dict:
        lam = feasible_weights(self.weights, self._raw_dual_weights())[0]
        theta = np.asarray(self._theta.value, float)
        eta_greedy = self.weights.worst_case(self.client_losses(theta), return_eta=True)[2]
        return {"eta": float(self._eta.value), "q": lam / self.p, "eta_greedy": float(eta_greedy)}

    def answer_duals(self, lam_raw, theta, step_model=None) -> dict:
        r"""SQP answers: ``eta`` is the greedy minimizer of :math:`F_\alpha(\theta,\cdot)` (exact)."""
        lam = feasible_weights(self.weights, lam_raw)[0]
        eta = float(self.weights.worst_case(self.client_losses(theta), return_eta=True)[2])
        return {"epigraph": lam_raw, "eta": eta, "q": lam / self.p, "eta_greedy": eta}

    # ------------------------------------------------------------------ smoothed target
    def smoothed_problem(self, mu) -> tuple:
        """``(problem, theta, eta)`` of problem (5) for this ``mu`` (cached per ``mu`` and ``alpha``)."""
        mu = check_real(mu, "mu", low=0.0, low_open=True)
        key = (mu, tuple(self.alpha))
        if key not in self._smoothed:
            theta = cp.Variable(self.dim, name="theta")
            eta = cp.Variable(name="eta")
            t = cp.Variable(self.n_clients, name="t")
            f = cp.hstack(self.objectives.expressions(theta))
            obj = eta + mu * (self.cap @ cp.logistic((t - eta) / mu))
            self._smoothed[key] = (cp.Problem(cp.Minimize(obj), [t >= f]), theta, eta)
        return self._smoothed[key]

    def solve_smoothed(self, mu, solver: str | None = None, gap_tol: float = DEFAULT_GAP_TOL, *,
                       verbose: bool = False, fallback: bool = True, **solver_options) -> Solution:
        r"""Certified minimizer of the smoothed objective :math:`F^\mu_\alpha` (problem (5)).

        Certificate: the softplus is :math:`\phi_\mu(x)=\max_{s\in[0,1]}sx+\mu h(s)` with the binary
        entropy :math:`h`, so for any :math:`s\in[0,1]^n` with :math:`\sum_ic_is_i=1`,
        :math:`\min F^\mu_\alpha\ge\min_\theta\sum_i\lambda_if_i(\theta)+\mu\sum_ic_ih(s_i)`,
        :math:`\lambda=c\circ s`. We take :math:`s=\mathrm{sigmoid}((f(\hat\theta)-\tilde\eta)/\mu)` with
        :math:`\tilde\eta` = :meth:`smoothed_eta` (exact in :math:`\eta`), and the upper bound
        :math:`U=F^\mu_\alpha(\hat\theta,\tilde\eta)` in numpy.
        ``duals``: ``eta`` (:math:`\tilde\eta`), ``eta_solver``, ``q`` (:math:`\lambda/p`), ``s``.

        The solve contract of :meth:`solve` with the route :class:`SmoothedRoute` (``info["method"]
        == "smoothed"``): ``solver``, ``verbose``, ``fallback`` and solver options as there.
        """
        return dispatch(self, [SmoothedRoute()], solver=solver, gap_tol=gap_tol, method="smoothed",
                        verbose=verbose, fallback=fallback, options={"mu": mu, **solver_options})

    def certify_smoothed(self, mu: float, theta: np.ndarray, eta_solver: float, solver: str) -> Solution:
        r"""The certified :class:`Solution` of problem (5) at ``theta`` (the certificate of
        :meth:`solve_smoothed`); ``eta_solver`` is the solver's :math:`\eta`, reported only."""
        c = self.cap
        losses = self.client_losses(theta)
        eta = self.smoothed_eta(theta, mu)
        s = expit((losses - eta) / mu)
        lam = c * s
        U = float(eta + c @ _softplus(losses - eta, mu))
        fixed = self.fixed_weight_minimum(lam, theta0=theta)
        entropy = float(mu * (c @ _binary_entropy(s)))
        L = fixed["value"] + entropy
        info = {"solver": solver, "mu": mu, "tau_alpha": self.tau_alpha,
                "smoothing_bias_bound": mu * np.log(2.0) * self.tau_alpha,
                "exact_objective": self.objective(theta),
                "lower_bound_kind": lower_bound_kind(fixed),
                "stationarity_residual": float(np.linalg.norm(lam @ self.objectives.gradients(theta))),
                "weights_sum_residual": float(abs(lam.sum() - 1.0))}
        return Solution(theta=theta, weights=lam, client_losses=losses, value=U, lower_bound=float(L),
                        upper_bound=U, status="optimal", certificate=SMOOTHED_CERTIFICATE,
                        duals={"eta": eta, "eta_solver": eta_solver, "q": lam / self.p, "s": s},
                        info=info)

    def __repr__(self) -> str:
        return (f"FairnessAwareFL(n_clients={self.n_clients}, dim={self.dim}, loss={self.loss!r}, "
                f"alpha={self.alpha.tolist()}, l2={self.l2})")


class SmoothedRoute(Route):
    r"""The certified minimizer of :math:`F^\mu_\alpha` (problem (5); :meth:`FairnessAwareFL.solve_smoothed`).
    Option ``mu`` (:math:`\mu>0`, required); solver settings for the first solver."""

    name = "smoothed"
    options = {"mu": None}
    needs = frozenset({ROWS})
    passes_solver_options = True

    def complete_options(self, given) -> dict:
        opts = super().complete_options(given)
        opts["mu"] = check_real(opts["mu"], "mu", low=0.0, low_open=True)
        return opts

    def solve(self, problem, request):
        mu = request.options["mu"]
        problem.check_tau_for_smoothing()
        prob, theta_v, eta_v = problem.smoothed_problem(mu)
        seq = SolverSequence(request, prob=prob, record_value=False)
        best = None
        for name in seq:
            record = seq.run(prob, name)
            if record is None or prob.status not in OK_STATUSES:
                continue
            sol = problem.certify_smoothed(mu, problem.identifiable(np.asarray(theta_v.value, float)),
                                            float(eta_v.value), name)
            sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, request.gap_tol)
            record.update(status=sol.status, relative_gap=sol.relative_gap)
            if best is None or sol.relative_gap < best.relative_gap:
                best = sol
            if sol.status == "optimal":
                break
        if best is None:
            return problem.failed_solution(seq.attempts, seq.failure())
        best.info["attempts"] = seq.attempts
        best.info["gap_tol"] = request.gap_tol
        return best
