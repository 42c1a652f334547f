"""Scaff-PD-IA (Nakakita et al. 2024, the relative-fairness paper: Algorithms 1–3 of §5.1 and
Appendix G, the schedule of Assumption 8), on a :class:`~drflmodel.problems.relative.RelativeFairness`.

Problem (6)/(12): :math:`\\min_{\\theta\\in\\Theta}\\max_{\\lambda\\in\\Lambda_\\varphi(A,B)}\\sum_i\\lambda_if_i(\\theta)-\\psi(\\lambda)`
with the integrated set :math:`\\Lambda_\\varphi(A,B)=\\{(a-\\varphi b)/(1-\\varphi)\\}` (entries may be
negative) and :math:`\\Theta` the problem's box (or :math:`\\mathbb R^d`).

A round is Scaff-PD's (:func:`drflmodel.solvers.scaffpd.primal_dual_round`: losses and control
variates up, extrapolated dual step, :math:`c^r=\\sum_i\\lambda_i^{r+1}c_i^r` down -- no
normalization is needed since every :math:`\\lambda\\in\\Lambda_\\varphi` sums to one -- J local
steps, :math:`\\lambda^{r+1}`-weighted aggregation **with negative weights**), except:

* **dual step** (Algorithm 1 lines 8–9): :math:`\\lambda^{r+1}=\\Pi_{\\Lambda_\\varphi}(\\lambda^r+\\sigma_rs^r)`,
  the QP over :math:`A\\times B` of ``problem.integrated.project`` (Clarabel, cached DPP problem);
  with the regularizer of Algorithm 3, :math:`\\psi(\\lambda)=\\frac m2\\|\\lambda-c\\|^2`
  (``regularization=m``, ``center=c``, default uniform), the step is the exact prox
  :math:`\\Pi_{\\Lambda_\\varphi}\\big((\\lambda^r+\\sigma_rs^r+\\sigma_rm\\,c)/(1+\\sigma_rm)\\big)`;
* **primal step** (line 13): :math:`\\theta^{r+1}=\\Pi_\\Theta(\\theta^r-\\tau_r\\sum_i\\lambda^{r+1}_i\\Delta u_i)`
  (a box projection, i.e. a clip; whether it was active is recorded).

Schedules (``schedule=``):

* ``"theory"`` -- Assumption 8 made concrete: :math:`c_\\alpha=\\tfrac12`,
  :math:`\\kappa_\\Lambda=m_f/4-M_f(\\|\\Lambda\\|_1-1)/2>0`,
  :math:`\\tau_0=\\min\\{\\frac1{1200M_f\\|\\Lambda\\|_1},\\frac{18(1+\\sqrt3)}{4\\kappa_\\Lambda},\\frac1{54M_f}\\}`,
  :math:`\\gamma_0=c_\\alpha(1-27M_f\\tau_0)/(4L_{\\lambda\\theta}^2\\tau_0^2)`,
  :math:`\\beta=\\max\\{1,2\\tau_0M_f\\}`; :math:`\\sigma_r=\\gamma_r\\tau_r`,
  :math:`\\gamma_{r+1}=\\gamma_r(1+\\kappa_\\Lambda\\tau_r)`, :math:`\\tau_{r+1}=\\tau_r\\sqrt{\\gamma_r/\\gamma_{r+1}}`,
  :math:`\\varsigma_{r+1}=\\sigma_r/\\sigma_{r+1}` (consistent with Assumption 8's :math:`\\gamma`
  recursion; the paper's Appendix G.4 prints Scaff-PD's :math:`1/\\sqrt{1+m_f\\tau_r}`), :math:`\\eta_r=\\tau_r/(J\\beta)`.
  Valid for Theorem 3's :math:`O(1/R^2)` rate; very small steps.
* ``"sc-c"`` (default) -- derived here, not in the paper: the Scaff-PD solver's
  strongly-convex–concave schedule (Condition 3.1 of the Scaff-PD paper) with the contraction
  :math:`\\kappa_\\Lambda` of Assumption 8 in place of :math:`\\mu_x/4` (the two coincide at
  :math:`\\|\\Lambda\\|_1=1`) and the smoothness of :math:`\\sum_i\\lambda_if_i`,
  :math:`M_f\\|\\Lambda\\|_1`, in place of :math:`L_{xx}`: :math:`\\tau_0=1/(48M_f\\|\\Lambda\\|_1)`,
  :math:`\\gamma_0=\\frac12(12M_f\\|\\Lambda\\|_1)/(2L_{\\lambda\\theta}^2\\tau_0)`, then the same recursions
  with :math:`\\beta=1`. Not covered by Theorem 3's constants; used because "theory" is orders of
  magnitude slower.
* ``"constant"`` -- :math:`\\tau,\\sigma,\\varsigma` given (``step_size``, ``dual_step``,
  ``extrapolation`` default 1), :math:`\\eta=\\tau/(J\\beta)` with ``global_step``
  :math:`\\beta` (default 1); :math:`\\tau=\\sigma=0.05`, :math:`J=5`, :math:`\\varsigma=1` converge on
  small instances.

Constants: :math:`(m_f,M_f)` = ``problem.curvature_constants()``, :math:`\\|\\Lambda\\|_1` =
``problem.norm1()`` (exact), :math:`L_{\\lambda\\theta}` on a ball centred at :math:`\\theta^0` of
radius :math:`2\\|\\Lambda\\|_1G/\\mu_\\Lambda` with :math:`G=\\max_i\\|\\nabla f_i(\\theta^0)\\|` and
:math:`\\mu_\\Lambda=m_f-\\frac{M_f-m_f}2(\\|\\Lambda\\|_1-1)` the strong convexity of every
:math:`\\lambda`-weighted loss (Lemma 8), which bounds :math:`\\|\\theta^\\star-\\theta^0\\|` by half the radius.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_finite_array, check_choice, check_real
from ..errors import InvalidParameterError
from ._base import Solver, check_batch_size, check_rounds, check_step
from .scaffpd import ConstantSchedule, SCCSchedule, ball_lipschitz, primal_dual_round

__all__ = ["ScaffPDIA", "ia_constants"]

_REL = ("drflmodel.problems.relative:RelativeFairness",)


def ia_constants(problem, theta0, lipschitz=None, radius=None) -> dict:
    """``{"m_f", "M_f", "norm1", "kappa", "mu_lambda_weighted", "L_lt", "radius"}`` (module doc)."""
    m_f, M_f = problem.curvature_constants()
    if not np.isfinite(M_f):
        raise InvalidParameterError(f"Scaff-PD-IA's schedules need a smooth loss; got {problem.loss!r}")
    nrm = float(problem.norm1())
    kappa = m_f / 4.0 - M_f * (nrm - 1.0) / 2.0
    mu_w = m_f - (M_f - m_f) / 2.0 * (nrm - 1.0)
    obj = problem.objectives
    rb = radius
    if lipschitz is None:
        g = np.linalg.norm(obj.gradients(theta0), axis=1)
        if rb is None:
            if mu_w <= 0:
                raise InvalidParameterError(
                    "the lambda-weighted losses are not strongly convex on Lambda_phi "
                    f"(m_f - (M_f - m_f)(||Lambda||_1 - 1)/2 = {mu_w:.3g} <= 0): pass lipschitz= or radius=")
            rb = 2.0 * nrm * float(g.max()) / mu_w
        lip = ball_lipschitz(g, obj.smoothness(), rb)
    else:
        lip = lipschitz
    return {"m_f": m_f, "M_f": M_f, "norm1": nrm, "kappa": kappa, "mu_lambda_weighted": mu_w,
            "L_lt": lip, "radius": None if rb is None else float(rb)}


class ScaffPDIA(Solver):
    """Scaff-PD-IA (relative-fairness paper, Algorithms 1–3) on a ``RelativeFairness`` problem.

    Parameters
    ----------
    rounds, local_steps : :math:`R` and :math:`J` (the theory asks :math:`J\\ge2`).
    schedule : ``"sc-c"`` (default), ``"theory"`` or ``"constant"`` (module docstring).
    step_size, dual_step, extrapolation : :math:`\\tau,\\sigma,\\varsigma` of ``"constant"``.
    global_step : :math:`\\beta\\ge1` of the ``"constant"`` schedule (:math:`\\eta=\\tau/(J\\beta)`).
    regularization, center : Algorithm 3's :math:`\\psi(\\lambda)=\\frac m2\\|\\lambda-c\\|^2`
        (``regularization=0`` is Algorithm 1).
    batch_size : ``None`` (exact gradients) or the minibatch size (control variates and local
        steps draw independent samples; the losses :math:`L_i^r` stay exact, as in the paper).
    lipschitz, radius : override :math:`L_{\\lambda\\theta}` or its ball radius.
    """

    problem_types = _REL
    record = ("client_losses", "tau", "sigma", "extrapolation", "projection_active")

    def __init__(self, rounds: int = 300, local_steps: int = 5, schedule: str = "sc-c",
                 step_size: float | None = None, dual_step: float | None = None,
                 extrapolation: float | None = None, global_step: float = 1.0,
                 regularization: float = 0.0, center=None, batch_size: int | None = None,
                 lipschitz: float | None = None, radius: float | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, schedule=schedule,
                         step_size=step_size, dual_step=dual_step, extrapolation=extrapolation,
                         global_step=global_step, regularization=regularization,
                         center=None if center is None else np.asarray(center, float).tolist(),
                         batch_size=batch_size, lipschitz=lipschitz, radius=radius)

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        self.schedule = check_choice(p["schedule"], "schedule", ("sc-c", "theory", "constant"))
        if self.schedule == "constant" and (p["step_size"] is None or p["dual_step"] is None):
            raise InvalidParameterError(
                "schedule='constant' needs step_size (tau > 0) and dual_step (sigma > 0)")
        for k in ("step_size", "dual_step", "lipschitz", "radius"):
            if p[k] is not None:
                check_step(p[k], k)
        if p["extrapolation"] is not None:
            check_real(p["extrapolation"], "extrapolation", low=0.0)
        self.global_step = check_real(p["global_step"], "global_step", low=1.0)
        self.regularization = check_real(p["regularization"], "regularization", low=0.0)
        self.batch_size = check_batch_size(p["batch_size"])
        if p["center"] is not None:
            as_finite_array(p["center"], "center", ndim=1)

    # ------------------------------------------------------------------ schedule
    def _make_schedule(self, problem, theta0):
        p = self.params
        if self.schedule == "constant":
            ext = 1.0 if p["extrapolation"] is None else p["extrapolation"]
            return (ConstantSchedule(p["step_size"], p["dual_step"], ext), self.global_step,
                    {"schedule": "constant"}, None)
        c = ia_constants(problem, theta0, p["lipschitz"], p["radius"])
        info = {"schedule": self.schedule, **c}
        if c["kappa"] <= 0:
            raise InvalidParameterError(
                f"schedule {self.schedule!r} needs Assumption 8: ||Lambda_phi||_1 = {c['norm1']:.4g} "
                f"< 1 + m_f/(2 M_f) = {1 + c['m_f'] / (2 * c['M_f']):.4g} (kappa = {c['kappa']:.3g} <= 0); "
                "use a smaller phi or schedule='constant'")
        M, nrm, L = c["M_f"], c["norm1"], c["L_lt"]
        if self.schedule == "theory":
            c_alpha = 0.5
            tau0 = min(1.0 / (1200.0 * M * nrm), 18.0 * (1.0 + np.sqrt(3.0)) / (4.0 * c["kappa"]),
                       1.0 / (54.0 * M))
            gamma0 = c_alpha * (1.0 - 27.0 * M * tau0) / (4.0 * L**2 * tau0**2)
            beta = max(1.0, 2.0 * tau0 * M)
            sched = SCCSchedule(tau0, gamma0, c["kappa"])
        else:
            sched = SCCSchedule.from_constants(M * nrm, L, c["kappa"])
            beta = 1.0
        info.update(tau0=sched.tau0, gamma0=sched.gamma0, beta=beta)
        return sched, beta, info, "sublinear"

    # ------------------------------------------------------------------ hooks
    def _initialize(self, problem, runtime, theta0):
        n = problem.n_clients
        if problem.box is not None and not problem.in_box(theta0):
            raise InvalidParameterError("theta0 must lie in the problem's box Theta")
        sched, beta, info, rate = self._make_schedule(problem, theta0)
        iset = problem.integrated
        lam0 = np.asarray(iset.project(np.full(n, 1.0 / n)), float)
        center = self.params["center"]
        if center is None:
            center = np.full(n, 1.0 / n)
        center = np.asarray(center, float)
        if center.shape != (n,):
            raise InvalidParameterError(f"center must have length {n}; got {center.shape}")
        m = self.regularization
        if m > 0:
            def dual(v, s):
                return iset.project((v + s * m * center) / (1.0 + s * m))
        else:
            def dual(v, s):
                return iset.project(v)
        info["algorithm"] = 3 if m > 0 else 1
        return {"theta": theta0, "weights": lam0, "L_prev": None, "schedule": sched, "beta": beta,
                "dual": dual, "box": problem.box, "info": info, "projection_active": 0.0,
                "expected_rate": None if self.batch_size else rate}

    def _round(self, r, state, runtime):
        tau, sigma, ext = state["schedule"](r)
        x_next, lam_next, L, _ = primal_dual_round(
            state["theta"], state["weights"], state["L_prev"], tau, sigma, ext, self.local_steps,
            state["beta"], runtime, state["dual"], normalize=False)
        return self.server_step(r, state, x_next, lam_next, L, tau, sigma, ext)

    def server_step(self, r, state, x_next, lam_next, L, tau, sigma, ext):
        """Round *r*'s record after the primal and dual steps (the simulator's and the Flower
        port's): the box projection :math:`\\Pi_\\Theta` of line 13 (``projection_active`` says
        whether it moved the iterate), the new iterates, the round's losses and steps."""
        active = 0.0
        if state["box"] is not None:
            lo, up = state["box"]
            proj = np.minimum(np.maximum(x_next, lo), up)        # Pi_Theta (line 13)
            active = float(not np.array_equal(proj, x_next))
            x_next = proj
        state.update(theta=x_next, weights=lam_next, L_prev=L, client_losses=L, tau=tau,
                     sigma=sigma, extrapolation=ext, projection_active=active)
        return state
