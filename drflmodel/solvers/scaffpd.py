"""Scaff-PD (Yu, Karimireddy, Ma, Jordan 2023, arXiv:2307.13381): Algorithms 1–2, with the step-size
schedules of the strongly-convex–concave case (SC-C: Condition 3.1, Theorem 3.1) and of the
strongly-convex–strongly-concave case (SC-SC: Condition 3.2, Theorem 3.5).

Problem (1.1) of the paper:
:math:`\\min_x\\max_{\\lambda\\in\\Lambda}\\ \\sum_i\\lambda_i f_i(x)-\\psi(\\lambda)`, given by a
:class:`~drflmodel.problems.minmax.dro.FederatedDRO` (``problem.weights`` is the set :math:`\\Lambda` with
its penalty :math:`\\psi`; ``weights.prox`` is the dual step).

One round :math:`r` (0-based here; the paper's round :math:`r+1`), with :math:`x^{-1}=x^0`
(the paper's Algorithm 1 needs :math:`x^{r-1}` already at its first round; so :math:`s^0=L^0`):

1. server → clients: the model :math:`x^r`;
2. clients → server: :math:`L_i^r=f_i(x^r)` and the control variate :math:`c_i^r=g_i(x^r)`
   (one message; :math:`g_i` exact or a fresh minibatch, independent of the local steps' ones);
3. dual step (line 6–7): :math:`s^r=(1+\\theta_r)L^r-\\theta_rL^{r-1}`,
   :math:`\\lambda^{r+1}=\\operatorname{prox}_{\\sigma_r\\psi}^{\\Lambda}(\\lambda^r+\\sigma_rs^r)`;
4. server → clients: :math:`c^r=\\sum_i\\lambda_i^{r+1}c_i^r` (divided by
   :math:`\\sum_i\\lambda_i^{r+1}` when :math:`\\Lambda` is not inside
   :math:`\\{\\mathbf 1^\\top\\lambda=1\\}`, e.g. q-FFL -- a deviation from the paper, whose control
   variates cancel only when the weights sum to one; its theory does not cover q-FFL);
5. every client runs :math:`J` local steps (Algorithm 2, vectorized across clients)
   :math:`u_{i,j}=u_{i,j-1}-\\eta_\\ell(g_i(u_{i,j-1})-c_i^r+c^r)` with
   :math:`\\eta_\\ell=\\tau_r/(J\\eta_g)` (the paper's Algorithm 2 keeps :math:`\\eta_\\ell` fixed while
   :math:`\\tau_r` varies) and sends
   :math:`\\Delta u_i=(x^r-u_{i,J})/(\\eta_\\ell J)`;
6. :math:`x^{r+1}=x^r-\\tau_r\\sum_i\\lambda_i^{r+1}\\Delta u_i` (aggregation with
   :math:`\\lambda^{r+1}`).

Schedules (``schedule=``):

* ``"sc-sc"`` (Condition 3.2 and Theorem 3.5, with :math:`\\tau=4(1-\\theta)/(\\theta\\mu_x)`, the
  value the proof of Theorem E.9 needs; needs :math:`\\mu_x>0` and :math:`\\mu_\\lambda>0`, e.g. the
  :math:`\\chi^2` penalty with :math:`\\mu_\\lambda=\\rho N`):
  :math:`a=\\tfrac12+24L_{xx}/\\mu_x`, :math:`\\omega=a+\\sqrt{a^2+8L_{\\lambda x}^2/(\\mu_x\\mu_\\lambda)}`,
  :math:`\\theta=1-1/\\omega`, :math:`\\tau=\\tfrac4{\\mu_x}\\tfrac{1-\\theta}\\theta`,
  :math:`\\sigma=\\tfrac1{\\mu_\\lambda}\\tfrac{1-\\theta}\\theta`, constant. Linear rate.
* ``"sc-c"`` (Condition 3.1 with Remark E.4's :math:`\\mu_x/4`, :math:`\\theta_0=1`):
  :math:`\\delta=c_\\alpha=\\tfrac12`, :math:`\\tau_0=\\tfrac{1-\\delta}{24L_{xx}}`,
  :math:`\\gamma_0=c_\\alpha((1-\\delta)/\\tau_0-12L_{xx})/(2L_{\\lambda x}^2\\tau_0)`;
  :math:`\\sigma_r=\\gamma_r\\tau_r`, :math:`\\theta_r=\\sigma_{r-1}/\\sigma_r`,
  :math:`\\gamma_{r+1}=\\gamma_r(1+\\mu_x\\tau_r/4)`, :math:`\\tau_{r+1}=\\tau_r\\sqrt{\\gamma_r/\\gamma_{r+1}}`.
  :math:`O(1/R^2)`.
* ``"constant"``: user-given ``step_size`` (:math:`\\tau`), ``dual_step`` (:math:`\\sigma`) and
  ``extrapolation`` (:math:`\\theta`, default 1).
* ``"auto"`` (default): ``"sc-sc"`` if :math:`\\mu_\\lambda>0`, else ``"sc-c"``.

**Fixed local step** (``local_step_size=``:math:`\\eta_\\ell`; the setting of the paper's
Figure 5b, "increasing the number of local steps results in faster convergence"). Algorithm 2
takes :math:`(\\eta_\\ell, J)` as inputs and the analysis ties them to the server step by
:math:`\\tau=J\\eta_\\ell\\eta_g` (Lemma D.2); the paper gives neither the values of :math:`J` nor
the steps of Figure 5 (its parameters were "selected through grid search"). The schedules above
fix :math:`\\tau` from the problem's constants, so :math:`\\eta_\\ell=\\tau/(J\\eta_g)` shrinks as
:math:`J` grows and more local steps only average more gradients along a shorter path (with exact
gradients the curves for :math:`J=1,10,100` coincide). With ``local_step_size`` the local step is
fixed instead, :math:`\\tau=J\\eta_\\ell\\eta_g` grows with :math:`J`, and the extrapolation and
dual step follow from Condition 3.2 taken with equality (as the SC-SC schedule does):
:math:`\\theta=1/(1+\\mu_x\\tau/4)`, :math:`\\sigma=\\frac1{\\mu_\\lambda}\\frac{1-\\theta}\\theta=\\frac{\\mu_x\\tau}{4\\mu_\\lambda}`.
Theorem 3.5's linear rate :math:`\\theta^R` is guaranteed only while
:math:`1/(1-\\theta)` is at least the SC-SC schedule's :math:`\\omega` (Condition 3.2's third
requirement, i.e. :math:`\\tau` at most the SC-SC schedule's); beyond it the run is outside the
theorem, which ``info["condition_3_2_holds"]`` records. Needs :math:`\\mu_\\lambda>0` (schedule
``"auto"`` or ``"sc-sc"``).

Constants (computed once before the first round, as a setup step not counted as communication;
each may be overridden): :math:`\\mu_x=\\min_i` strong-convexity modulus of :math:`f_i`
(``problem.objectives.strong_convexity()``), :math:`L_{xx}=\\max_i` smoothness,
:math:`\\mu_\\lambda=` ``weights.strong_concavity``, and :math:`L_{\\lambda x}` on a ball
(Assumption B.3 asks for a global constant, which quadratic losses do not have) centred at :math:`x^0` -- :math:`x^\\star` is unknown to the solver --
of radius :math:`R_b=2G/\\mu_x`, :math:`G=\\max_i\\|\\nabla f_i(x^0)\\|`:
:math:`L_{\\lambda x}=\\sqrt{\\sum_i(\\|\\nabla f_i(x^0)\\|+L_iR_b)^2}`. Since every
:math:`\\Phi(\\cdot,\\lambda)`, :math:`\\lambda\\ge0`, is :math:`(\\sum_i\\lambda_i)\\mu_x`-strongly
convex with gradient norm :math:`\\le(\\sum_i\\lambda_i)G` at :math:`x^0`,
:math:`\\|x^\\star-x^0\\|\\le G/\\mu_x`, so the ball contains :math:`x^\\star` with margin
:math:`G/\\mu_x` for the iterates.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_choice, check_real
from ..errors import InvalidParameterError
from ._base import ClientRuntime, Solver, check_batch_size, check_rounds, check_step

__all__ = ["ScaffPD", "scaffpd_constants", "ball_lipschitz", "sc_sc_schedule", "fixed_local_step_schedule",
           "SCCSchedule", "ConstantSchedule", "dual_ascent", "normalized_control"]

_DRO = ("drflmodel.problems.minmax.dro:FederatedDRO",)


# ---------------------------------------------------------------------------------- constants
def ball_lipschitz(grad_norms, smoothness_rows, radius: float) -> float:
    """Lipschitz constant of the loss vector :math:`(f_i)_i` on a ball of radius :math:`R_b` around
    the point where the gradients were taken (a global constant, as the Scaff-PD paper's
    Assumption B.3 asks, does not exist for quadratic losses):
    :math:`\\sqrt{\\sum_i(\\|\\nabla f_i(x^0)\\|+L_iR_b)^2}`."""
    return float(np.sqrt(np.sum((np.asarray(grad_norms) + np.asarray(smoothness_rows) * radius) ** 2)))


def no_strong_convexity_reason(problem) -> str:
    """Why :math:`\\mu_x=0`, as a clause for an error message: an unpenalized intercept
    (``penalize_intercept=False``, scikit-learn's convention) leaves every :math:`f_i` without
    strong convexity in it even when :math:`\\ell_2>0`; otherwise ``l2 = 0``."""
    if getattr(problem, "l2", 0) > 0 and getattr(problem, "penalize_intercept", True) is False:
        return (": the intercept is unpenalized (penalize_intercept=False), so no client objective is "
                "strongly convex in it")
    return ": l2 = 0" if getattr(problem, "l2", 0) == 0 else ""


def scaffpd_constants(problem, theta0, mu_x=None, smoothness=None, lipschitz=None,
                      mu_lambda=None, radius=None) -> dict:
    """The constants of the Scaff-PD schedules (see the module docstring).

    ``radius`` overrides the ball radius :math:`R_b` used for :math:`L_{\\lambda x}`.
    Returns ``{"mu_x", "L_xx", "L_lx", "mu_lambda", "radius"}``.
    """
    obj = problem.objectives
    theta0 = np.asarray(theta0, float)
    mu = float(np.min(obj.strong_convexity())) if mu_x is None else mu_x
    Li = obj.smoothness()
    L = float(np.max(Li)) if smoothness is None else smoothness
    if not np.isfinite(L):
        raise InvalidParameterError(
            f"the loss {problem.loss!r} is not smooth (L_xx = inf): Scaff-PD's schedules need a "
            "smooth loss; use schedule='constant' with explicit steps or a smooth loss")
    ml = float(getattr(problem.weights, "strong_concavity", 0.0)) if mu_lambda is None else mu_lambda
    rb = radius
    if lipschitz is None:
        g = np.linalg.norm(obj.gradients(theta0), axis=1)
        if rb is None:
            if mu <= 0:
                raise InvalidParameterError(
                    "cannot bound the iterate region without strong convexity (mu_x = 0"
                    f"{no_strong_convexity_reason(problem)}); pass lipschitz= (L_lambda_x) or radius=, "
                    "or use l2 > 0 on every coefficient")
            rb = 2.0 * float(g.max()) / mu
        lip = ball_lipschitz(g, Li if smoothness is None else np.full_like(Li, L), rb)
    else:
        lip = lipschitz
    return {"mu_x": mu, "L_xx": L, "L_lx": lip, "mu_lambda": ml,
            "radius": None if rb is None else float(rb)}


def sc_sc_schedule(mu_x: float, mu_lambda: float, L_xx: float, L_lx: float,
                   conservative: bool = False) -> dict:
    """The SC-SC schedule of the Scaff-PD paper (Condition 3.2, Lemma E.8): ``{"omega", "theta", "tau",
    "sigma"}`` (constant parameters).

    ``conservative=True`` uses the printed 16 of (E.54) instead of the exact root's 8.
    """
    if mu_x <= 0 or mu_lambda <= 0:
        raise InvalidParameterError(
            f"schedule 'sc-sc' needs mu_x > 0 and mu_lambda > 0 (a strongly concave penalty, e.g. "
            f"ChiSquare with rho > 0); got mu_x={mu_x}, mu_lambda={mu_lambda}. Use 'sc-c'.")
    a = 0.5 + 24.0 * L_xx / mu_x
    k = 16.0 if conservative else 8.0
    omega = a + np.sqrt(a * a + k * L_lx**2 / (mu_x * mu_lambda))
    theta = 1.0 - 1.0 / omega
    ratio = (1.0 - theta) / theta
    return {"omega": float(omega), "theta": float(theta), "tau": float(4.0 / mu_x * ratio),
            "sigma": float(ratio / mu_lambda)}


def fixed_local_step_schedule(theory: dict, local_step: float, J: int, global_step: float,
                              mu_x: float, mu_lambda: float) -> dict:
    """The fixed-local-step schedule (module docstring; the paper's Figure 5b setting):
    :math:`\\tau=J\\eta_\\ell\\eta_g`, then Condition 3.2 with equality,
    :math:`\\theta=1/(1+\\mu_x\\tau/4)` and :math:`\\sigma=(1-\\theta)/(\\theta\\mu_\\lambda)`.

    ``theory`` is the SC-SC schedule (:func:`sc_sc_schedule`) of the same problem: Theorem 3.5
    covers the run iff :math:`1/(1-\\theta)\\ge\\omega` (``condition_3_2_holds``). Returns
    ``{"tau", "theta", "sigma", "omega", "local_step_size", "theory_tau", "theory_omega",
    "condition_3_2_holds"}``.
    """
    if mu_x <= 0 or mu_lambda <= 0:
        raise InvalidParameterError(
            f"local_step_size needs mu_x > 0 and mu_lambda > 0 (a strongly concave penalty, e.g. "
            f"ChiSquare with rho > 0); got mu_x={mu_x}, mu_lambda={mu_lambda}")
    tau = J * local_step * global_step
    theta = 1.0 / (1.0 + mu_x * tau / 4.0)
    omega = 1.0 / (1.0 - theta)
    return {"tau": float(tau), "theta": float(theta), "sigma": float((1.0 - theta) / (theta * mu_lambda)),
            "omega": float(omega), "local_step_size": float(local_step),
            "theory_tau": theory["tau"], "theory_omega": theory["omega"],
            "condition_3_2_holds": bool(omega >= theory["omega"] * (1.0 - 1e-12))}


class ConstantSchedule:
    """:math:`(\\tau_r,\\sigma_r,\\theta_r)=(\\tau,\\sigma,\\theta)` for every round."""

    def __init__(self, tau, sigma, theta):
        self.tau, self.sigma, self.theta = float(tau), float(sigma), float(theta)

    def __call__(self, r: int):
        return self.tau, self.sigma, self.theta

    def weight(self, r: int) -> float:
        return 1.0


class SCCSchedule:
    """Condition 3.1 of the Scaff-PD paper with :math:`\\theta_0=1`: ``schedule(r) -> (tau_r, sigma_r, theta_r)``.

    ``contraction`` is the factor :math:`\\kappa` in :math:`\\gamma_{r+1}=\\gamma_r(1+\\kappa\\tau_r)`
    (:math:`\\mu_x/4` by default, Remark E.4). Also gives :math:`t_r=\\sigma_r/\\sigma_0`.
    """

    def __init__(self, tau0: float, gamma0: float, contraction: float):
        self.tau0, self.gamma0, self.kappa = float(tau0), float(gamma0), float(contraction)
        self._tau, self._gamma = [self.tau0], [self.gamma0]

    @classmethod
    def from_constants(cls, L_xx: float, L_lx: float, contraction: float,
                       delta: float = 0.5, c_alpha: float = 0.5) -> "SCCSchedule":
        tau0 = (1.0 - delta) / (24.0 * L_xx)
        gamma0 = c_alpha * ((1.0 - delta) / tau0 - 12.0 * L_xx) / (2.0 * L_lx**2 * tau0)
        return cls(tau0, gamma0, contraction)

    def _extend(self, r: int) -> None:
        while len(self._tau) <= r:
            t, g = self._tau[-1], self._gamma[-1]
            g1 = g * (1.0 + self.kappa * t)
            self._tau.append(t * np.sqrt(g / g1))
            self._gamma.append(g1)

    def __call__(self, r: int):
        self._extend(r)
        tau = self._tau[r]
        sigma = self._gamma[r] * tau
        if r == 0:
            theta = 1.0
        else:
            theta = self._gamma[r - 1] * self._tau[r - 1] / sigma
        return tau, sigma, theta

    def weight(self, r: int) -> float:
        """:math:`t_r=\\sigma_r/\\sigma_0` (weights of the ergodic average, Thm E.6)."""
        self._extend(r)
        return self._gamma[r] * self._tau[r] / (self.gamma0 * self.tau0)


# ---------------------------------------------------------------------------------- helpers
def _sums_to_one(weights, n: int) -> bool:
    """Whether every point of the set has :math:`\\mathbf 1^\\top\\lambda=1` (checked on two
    projections; sets on the simplex or an integrated set :math:`\\Lambda_\\varphi` do)."""
    probes = (np.full(n, 1.0 / n), np.linspace(-1.0, 2.0, n) * 3.0)
    try:
        return all(abs(float(np.sum(weights.project(p))) - 1.0) <= 1e-9 for p in probes)
    except NotImplementedError:
        return False


def _initial_weights(weights, n: int, lambda0=None) -> np.ndarray:
    if lambda0 is not None:
        lam = np.asarray(lambda0, float)
        if lam.shape != (n,) or not np.all(np.isfinite(lam)):
            raise InvalidParameterError(f"lambda0 must be a finite vector of length {n}")
        if hasattr(weights, "contains") and not weights.contains(lam, tol=1e-8):
            raise InvalidParameterError("lambda0 must lie in the problem's weight set")
        return lam
    return np.asarray(weights.project(np.full(n, 1.0 / n)), float)


def dual_ascent(lam, L, L_prev, sigma: float, extrap: float, dual_step) -> np.ndarray:
    """The server's dual step (Algorithm 1 lines 6–7; the simulator's and the Flower port's):
    :math:`s=(1+\\theta_r)L^r-\\theta_rL^{r-1}` (:math:`L^{-1}=L^0`: ``L_prev=None`` at the first
    round), :math:`\\lambda^{r+1}=` ``dual_step`` :math:`(\\lambda^r+\\sigma_rs,\\sigma_r)`."""
    L_prev = L if L_prev is None else L_prev
    s = (1.0 + extrap) * L - extrap * L_prev
    return np.asarray(dual_step(lam + sigma * s, sigma), float)


def normalized_control(c, lam_next, normalize: bool):
    """The server control :math:`c=\\sum_i\\lambda^{r+1}_ic_i` divided by :math:`\\sum_i\\lambda^{r+1}_i`
    when ``normalize`` (weight sets not inside :math:`\\{\\mathbf 1^\\top\\lambda=1\\}`; zeros if that
    sum is not positive), else unchanged (module docstring, step 4)."""
    if not normalize:
        return c
    tot = float(lam_next.sum())
    return c / tot if tot > 0 else np.zeros_like(c)


def primal_dual_round(x, lam, L_prev, tau, sigma, extrap, J, global_step, runtime: ClientRuntime,
                      dual_step, normalize: bool, control_variates: bool = True):
    """One Scaff-PD round (Algorithm 1 lines 3–11, Algorithm 2), shared with Scaff-PD-IA.

    ``dual_step(v, sigma)`` returns :math:`\\lambda^{r+1}` from :math:`v=\\lambda^r+\\sigma s^r`.
    Returns ``(x_next, lam_next, L, c)``.
    """
    x_down = runtime.broadcast("model", x)
    L, C = runtime.upload(losses=runtime.losses(x_down), controls=runtime.gradients(x_down))
    lam_next = dual_ascent(lam, L, L_prev, sigma, extrap, dual_step)
    if control_variates:
        c = runtime.broadcast("control", normalized_control(runtime.aggregate(lam_next, C), lam_next, normalize))
        correction = c[None, :] - C
    else:
        correction = None
    eta = tau / (J * global_step)
    U = runtime.local_sgd(x_down, J, eta, correction=correction)
    dU = runtime.upload(update=(x_down[None, :] - U) / (eta * J))
    x_next = x - tau * runtime.aggregate(lam_next, dU)
    return x_next, lam_next, np.asarray(L), (c if control_variates else None)


# ---------------------------------------------------------------------------------- solver
class ScaffPD(Solver):
    """Scaff-PD (Scaff-PD paper, Algorithms 1–2) on a :class:`~drflmodel.problems.minmax.dro.FederatedDRO`.

    Parameters
    ----------
    rounds : communication rounds :math:`R`.
    local_steps : :math:`J\\ge1` local steps per round (the theory asks :math:`J\\ge2`).
    schedule : ``"auto"``, ``"sc-sc"``, ``"sc-c"`` or ``"constant"`` (module docstring).
    step_size, dual_step, extrapolation : :math:`\\tau`, :math:`\\sigma`, :math:`\\theta` of the
        ``"constant"`` schedule (extrapolation defaults to 1).
    global_step : :math:`\\eta_g\\ge1`; local step :math:`\\eta_\\ell=\\tau_r/(J\\eta_g)`.
    local_step_size : :math:`\\eta_\\ell>0` fixed independently of :math:`J` (the paper's
        Figure 5b setting; module docstring): :math:`\\tau=J\\eta_\\ell\\eta_g`, :math:`\\theta` and
        :math:`\\sigma` from Condition 3.2 with equality. Needs a strongly concave penalty.
    batch_size : ``None`` for exact gradients, else the minibatch size of every stochastic
        gradient (control variates and local steps draw independent samples).
    mu_x, smoothness, lipschitz, mu_lambda, radius : override the schedule constants.
    contraction : ``"quarter"`` (default, :math:`\\mu_x/4`, Remark E.4) or ``"full"``
        (:math:`\\mu_x`) in the SC-C recursion.
    conservative : use (E.54)'s 16 instead of 8 in the SC-SC :math:`\\omega`.
    control_variates : ``False`` drops :math:`c_i, c` (FedAvg-style local steps; an ablation).
    lambda0 : initial weights (default: the projection of the uniform vector onto :math:`\\Lambda`).
    """

    problem_types = _DRO
    record = ("client_losses", "tau", "sigma", "extrapolation", "theta_avg")

    def __init__(self, rounds: int = 300, local_steps: int = 10, schedule: str = "auto",
                 step_size: float | None = None, dual_step: float | None = None,
                 extrapolation: float | None = None, global_step: float = 1.0,
                 batch_size: int | None = None, mu_x: float | None = None,
                 smoothness: float | None = None, lipschitz: float | None = None,
                 mu_lambda: float | None = None, radius: float | None = None,
                 contraction: str = "quarter", conservative: bool = False,
                 control_variates: bool = True, lambda0=None, local_step_size: float | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, schedule=schedule,
                         step_size=step_size, dual_step=dual_step, extrapolation=extrapolation,
                         global_step=global_step, local_step_size=local_step_size,
                         batch_size=batch_size, mu_x=mu_x,
                         smoothness=smoothness, lipschitz=lipschitz, mu_lambda=mu_lambda,
                         radius=radius, contraction=contraction, conservative=conservative,
                         control_variates=control_variates,
                         lambda0=None if lambda0 is None else np.asarray(lambda0, float).tolist())

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        self.schedule = check_choice(p["schedule"], "schedule", ("auto", "sc-sc", "sc-c", "constant"))
        if self.schedule == "constant":
            if p["step_size"] is None or p["dual_step"] is None:
                raise InvalidParameterError(
                    "schedule='constant' needs step_size (tau > 0) and dual_step (sigma > 0)")
        for k in ("step_size", "dual_step"):
            if p[k] is not None:
                check_step(p[k], k)
        if p["local_step_size"] is not None:
            check_step(p["local_step_size"], "local_step_size")
            if self.schedule not in ("auto", "sc-sc"):
                raise InvalidParameterError(
                    f"local_step_size fixes the local step (tau = J * local_step_size * global_step, the "
                    f"paper's Figure 5b setting) and needs schedule 'auto' or 'sc-sc'; got {self.schedule!r}")
        if p["extrapolation"] is not None:
            check_real(p["extrapolation"], "extrapolation", low=0.0)
        self.global_step = check_real(p["global_step"], "global_step", low=1.0)
        self.batch_size = check_batch_size(p["batch_size"])
        for k in ("mu_x", "mu_lambda"):
            if p[k] is not None:
                check_real(p[k], k, low=0.0)
        for k in ("smoothness", "lipschitz", "radius"):
            if p[k] is not None:
                check_step(p[k], k)
        check_choice(p["contraction"], "contraction", ("quarter", "full"))
        for k in ("conservative", "control_variates"):
            if not isinstance(p[k], bool):
                raise InvalidParameterError(f"{k} must be True or False; got {p[k]!r}")

    # ------------------------------------------------------------------ schedule
    def _make_schedule(self, problem, theta0):
        p = self.params
        kind = self.schedule
        info: dict = {}
        if kind == "constant":
            ext = 1.0 if p["extrapolation"] is None else p["extrapolation"]
            return ConstantSchedule(p["step_size"], p["dual_step"], ext), {"schedule": "constant"}, None
        mu_x = float(np.min(problem.objectives.strong_convexity())) if p["mu_x"] is None else p["mu_x"]
        if mu_x <= 0:       # refused before any constant is computed: one error, advice that works
            L = float(np.max(problem.objectives.smoothness())) if p["smoothness"] is None else p["smoothness"]
            steps = f"step_size={1.0 / L:.3g}, dual_step=1.0" if np.isfinite(L) and L > 0 else "step_size=, dual_step="
            raise InvalidParameterError(
                f"schedule {kind!r} needs strongly convex client objectives (mu_x > 0; here mu_x = 0"
                f"{no_strong_convexity_reason(problem)}): Scaff-PD's schedules are those of Theorems 3.1 "
                "and 3.5 (Yu, Karimireddy, Ma, Jordan, arXiv:2307.13381). Either penalize every "
                "coefficient (l2 > 0 with penalize_intercept=True), or pass schedule='constant' with "
                f"explicit steps, e.g. ScaffPD(schedule='constant', {steps}) (tau = 1/L_xx; no rate is "
                "then promised: check the run with dm.verify)")
        const = scaffpd_constants(problem, theta0, p["mu_x"], p["smoothness"], p["lipschitz"],
                                  p["mu_lambda"], p["radius"])
        info.update(const)
        if kind == "auto":
            kind = "sc-sc" if const["mu_lambda"] > 0 else "sc-c"
        if kind == "sc-sc":
            sch = sc_sc_schedule(const["mu_x"], const["mu_lambda"], const["L_xx"], const["L_lx"],
                                 p["conservative"])
            if p["local_step_size"] is not None:
                sch = fixed_local_step_schedule(sch, p["local_step_size"], self.local_steps,
                                                self.global_step, const["mu_x"], const["mu_lambda"])
                kind = "local-step"
            info.update(sch)
            schedule = ConstantSchedule(sch["tau"], sch["sigma"], sch["theta"])
            rate = "linear" if sch.get("condition_3_2_holds", True) else None
        else:
            if p["local_step_size"] is not None:
                raise InvalidParameterError(
                    f"local_step_size needs a strongly concave penalty (mu_lambda > 0, e.g. ChiSquare with "
                    f"rho > 0): the fixed-local-step schedule is Condition 3.2's; {problem.weights!r} has "
                    f"mu_lambda = {const['mu_lambda']:g}")
            kappa = const["mu_x"] / 4.0 if p["contraction"] == "quarter" else const["mu_x"]
            schedule = SCCSchedule.from_constants(const["L_xx"], const["L_lx"], kappa)
            info.update(tau0=schedule.tau0, gamma0=schedule.gamma0, contraction=kappa)
            rate = "sublinear"
        tau0 = schedule(0)[0]
        J = self.local_steps
        info["drift_condition_holds"] = bool(
            J == 1 or 4 * tau0**2 * const["L_xx"] ** 2 / (self.global_step**2 * J) <= 1.0 / (J - 1))
        info["schedule"] = kind
        return schedule, info, rate

    # ------------------------------------------------------------------ hooks
    def _initialize(self, problem, runtime, theta0):
        schedule, info, rate = self._make_schedule(problem, theta0)
        wset = problem.weights
        lam = _initial_weights(wset, problem.n_clients, self.params["lambda0"])
        normalize = not _sums_to_one(wset, problem.n_clients)
        info["normalized_control"] = normalize
        state = {"theta": theta0, "weights": lam, "L_prev": None, "schedule": schedule,
                 "set": wset, "normalize": normalize, "info": info,
                 "theta_avg": theta0.copy(), "_wsum": 0.0, "_xsum": np.zeros_like(theta0)}
        if rate is not None:
            state["expected_rate"] = rate
        if self.batch_size is not None:
            state["expected_rate"] = None   # a noise floor O(zeta^2): no exact convergence claim
        return state

    def _round(self, r, state, runtime):
        tau, sigma, ext = state["schedule"](r)
        wset = state["set"]
        x = state["theta"]
        x_next, lam_next, L, _ = primal_dual_round(
            x, state["weights"], state["L_prev"], tau, sigma, ext, self.local_steps,
            self.global_step, runtime, wset.prox, state["normalize"],
            self.params["control_variates"])
        return self.server_step(r, state, x_next, lam_next, L, tau, sigma, ext)

    def server_step(self, r, state, x_next, lam_next, L, tau, sigma, ext):
        """Round *r*'s record after the primal and dual steps (the simulator's and the Flower
        port's): the new iterates, the round's losses and steps, and the ergodic average
        :math:`\\sum_rt_rx^{r+1}/\\sum_rt_r` of Theorem E.6 (``theta_avg``; the last iterate is
        reported too)."""
        w = state["schedule"].weight(r)
        state["_wsum"] += w
        state["_xsum"] = state["_xsum"] + w * x_next
        state.update(theta=x_next, weights=lam_next, L_prev=L, client_losses=L, tau=tau,
                     sigma=sigma, extrapolation=ext, theta_avg=state["_xsum"] / state["_wsum"])
        return state
