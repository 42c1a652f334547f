r"""A theorem's explicit bound, evaluated with one run's own constants at every round.

:mod:`drflmodel._rates` knows the *shape* of a theorem's bound (up to a constant factor), which is
enough to compare rates but lets any error that does not grow "match" a bound that barely falls.
Here the constant is computed too, from what the run itself recorded (its start
:math:`(x^0,\lambda^0)`, its step sizes, its loss vectors) and the certified saddle point
:math:`(x^\star,\lambda^\star)` of the oracle, so that the bound is a number at every round and a
round above it means a solver defect or a wrong constant -- never a slow run.

Scaff-PD (Yu, Karimireddy, Ma, Jordan, "SCAFF-PD: Communication Efficient Fair and Robust Federated
Learning", arXiv:2307.13381), deterministic gradients, every client in every round. Indexing as in
:class:`~drflmodel.solvers.Trace`: round :math:`r` uses :math:`(\tau_r,\sigma_r,\theta_r)`, starts
from :math:`x^r` (``theta[r]``) with the losses :math:`L^r=(f_i(x^r))_i` and gives
:math:`x^{r+1}`; :math:`q^r=L^r-L^{r-1}` (:math:`q^0=0`, the paper's :math:`x^{-1}=x^0`).

* **Theorem 3.1** (no strong concavity in :math:`\lambda`, Condition 3.1 with Remark E.4's
  :math:`\mu_x/4`; :math:`\delta=c_\alpha=\tfrac12`). Lemma E.1 at :math:`(x^\star,\lambda^\star)`
  (where :math:`F(x^{r+1},\lambda^\star)-F(x^\star,\lambda^{r+1})\ge0` and :math:`\Delta_r\le0`)
  and Lemma E.2 give :math:`t_{r+1}V_{r+1}\le t_rZ_{r+1}\le t_rV_r` with :math:`t_r=\sigma_r/\sigma_0`,
  :math:`\alpha_r=c_\alpha/\sigma_{r-1}` and the potential

  .. math:: V_r=\theta_r\langle q^r,\lambda^r-\lambda^\star\rangle+\frac{\|\lambda^r-\lambda^\star\|^2}{2\sigma_r}
            +\frac{\|x^r-x^\star\|^2}{2\tau_r}+\frac{\theta_r\|q^r\|^2}{2\alpha_r}.

  Since :math:`\langle q,\lambda-\lambda^\star\rangle+\|q\|^2/(2\alpha_{r+1})\ge-\tfrac{c_\alpha}{2\sigma_r}
  \|\lambda-\lambda^\star\|^2`, :math:`Z_{r+1}\ge\|x^{r+1}-x^\star\|^2/(2\tau_r)`, and with
  :math:`q^0=0`, :math:`\gamma_r=\sigma_r/\tau_r` (the proof of Theorem E.6 before its
  :math:`O(1/R^2)` simplification):

  .. math:: \|x^{r+1}-x^\star\|^2\le\frac{\gamma_0}{\gamma_r}\Big(\|x^0-x^\star\|^2
            +\frac{\|\lambda^0-\lambda^\star\|^2}{\gamma_0}\Big).

* **Theorem 3.5** (a :math:`\mu_\lambda`-strongly concave penalty, Condition 3.2 with constant
  :math:`(\tau,\sigma,\theta)`). Lemma E.7 at the saddle point with Lemma E.8's conditions
  (:math:`Z_{r+1}\ge V_{r+1}/\theta`, :math:`\Delta_r\le0`) gives :math:`V_{r+1}\le\theta V_r` for
  :math:`V_r=\theta\langle q^r,\lambda^r-\lambda^\star\rangle+\|\lambda^r-\lambda^\star\|^2/(2\sigma)
  +\|x^r-x^\star\|^2/(2\tau)`; bounding the cross term by
  :math:`\|\lambda^r-\lambda^\star\|^2/(2\sigma)+\theta^2\sigma\|q^r\|^2/2`:

  .. math:: \|x^r-x^\star\|^2\le2\tau\theta^rV_0+\tau\sigma\theta^2\|q^r\|^2 ,\qquad
            V_0=\frac{\|\lambda^0-\lambda^\star\|^2}{2\sigma}+\frac{\|x^0-x^\star\|^2}{2\tau}

  (the paper's constant :math:`C_1` of eq. (3.2) is not explicit; the second term uses the
  run's measured :math:`q^r`).

* **Scaff-PD-IA** (Nakakita, Kaneko, Takamaeda-Yamazaki, Imaizumi, "Federated Learning with Relative
  Fairness", Theorem 3) with the schedule of its Assumption 8 (``schedule="theory"``): Lemma 16,
  Lemma 17 and Proposition 19 give the chain of Theorem 3.1 above with :math:`\kappa_\Lambda` in
  place of :math:`\mu_x/4`, hence the same bound; Assumption 7 asks the box projection to stay
  inactive (the trace records whether it was).

Both chains need the constants the schedule was built from to hold along the run: the smoothness
and strong convexity of every :math:`f_i`, and :math:`L_{\lambda x}`, which drflmodel computes on a
ball of radius :math:`R_b` around :math:`x^0` (the check reports whether the iterates stayed in it).

**The oracle's precision.** :math:`x^\star` is known to :math:`\delta=\sqrt{2(U-L)/\mu_x}` (the
certificate's gap :math:`U-L`), so a round is a violation only when its squared distance exceeds
:math:`(\sqrt{B_r}+\delta)^2`, :math:`B_r` computed with :math:`\|x^0-x^\star\|+\delta`; the
potential is checked (increase beyond :math:`10^{-8}` relative) only while the distance is above
:math:`100\,\delta`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TheoremBound", "theorem_bound"]

SCAFFPD = "Yu, Karimireddy, Ma, Jordan, \"SCAFF-PD\" (arXiv:2307.13381)"
IA = "Nakakita, Kaneko, Takamaeda-Yamazaki, Imaizumi, \"Federated Learning with Relative Fairness\""
#: relative increase of a potential that is reported as a violation
POTENTIAL_RTOL = 1e-8
#: the potential is checked while the distance to theta* exceeds this many oracle precisions
PRECISION_FACTOR = 100.0


@dataclass
class TheoremBound:
    r"""A theorem's bound on :math:`\|x^r-x^\star\|^2` at every round of one run.

    Attributes
    ----------
    applies : whether the theorem covers this run; when ``False``, ``why_not`` says why in words
        (nothing else is filled).
    theorem, statement, source : the theorem's name (e.g. ``"Theorem 3.1"``), the bound in words
        and the paper and proof it comes from.
    errors, bound : ``(R+1,)`` squared distances :math:`\|x^r-x^\star\|^2` (raw parameters) and
        the bound on them, oracle precision included (``NaN`` where the bound says nothing).
    constant : the run's constants the bound used (``C``, :math:`\gamma_0`, ...).
    potential : the proof's potential along the run (``None`` if not computed), with its name.
    checked_until : the last round at which the potential was checked (module docstring).
    ball : ``{"radius", "max_distance", "left_at"}`` -- whether the iterates stayed where the
        schedule's :math:`L_{\lambda x}` holds (``None`` when the run gave its own constant).
    """

    applies: bool
    why_not: str = ""
    theorem: str = ""
    statement: str = ""
    source: str = ""
    errors: np.ndarray | None = None
    bound: np.ndarray | None = None
    constant: dict = field(default_factory=dict)
    potential: np.ndarray | None = None
    potential_name: str = ""
    checked_until: int | None = None
    ball: dict | None = None

    # ------------------------------------------------------------------ results
    def ratios(self) -> np.ndarray:
        """:math:`\\|x^r-x^\\star\\|^2/B_r` (``NaN`` where the bound says nothing)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isfinite(self.bound) & (self.bound > 0), self.errors / self.bound, np.nan)

    def worst(self) -> tuple[float, int]:
        """The largest ratio over rounds :math:`r\\ge1` (round 0 holds by construction) and its round."""
        ratio = self.ratios()[1:]
        if not np.any(np.isfinite(ratio)):
            return float("nan"), 0
        k = int(np.nanargmax(ratio))
        return float(ratio[k]), k + 1

    def violations(self) -> np.ndarray:
        """Rounds at which the error exceeds the bound."""
        return np.nonzero(self.ratios() > 1.0)[0]

    def potential_increases(self) -> np.ndarray:
        """Rounds :math:`r+1` at which the potential rose by more than :data:`POTENTIAL_RTOL`
        relative (up to ``checked_until``)."""
        if self.potential is None or self.checked_until is None or self.checked_until < 1:
            return np.zeros(0, int)
        W = self.potential[:self.checked_until + 1]
        rise = np.diff(W) > POTENTIAL_RTOL * np.abs(W[:-1])
        return np.nonzero(rise)[0] + 1

    @property
    def holds(self) -> bool:
        return self.applies and self.violations().size == 0 and self.potential_increases().size == 0

    def text(self) -> str:
        """One line: what was checked and what it gave."""
        if not self.applies:
            return f"no explicit bound checked: {self.why_not}"
        ratio, at = self.worst()
        bad = self.violations()
        if bad.size:
            k = int(bad[0])
            head = (f"VIOLATED at {bad.size} round(s), first round {k} (||x - x*||^2 = {self.errors[k]:.3e} > "
                    f"bound {self.bound[k]:.3e}); largest ratio {ratio:.3g} at round {at}")
        else:
            ratios = self.ratios()
            last = int(np.nonzero(np.isfinite(ratios))[0][-1])
            head = (f"holds at every round (largest ratio {ratio:.3g} at round {at}; {ratios[last]:.3g} at "
                    f"round {last})")
        out = f"{self.statement}: {head}"
        if self.potential is not None:
            rises = self.potential_increases()
            span = f"rounds 0-{self.checked_until}"
            if rises.size:
                k = int(rises[0])
                out += (f"; the proof's potential {self.potential_name} ROSE at {rises.size} round(s) of {span}, "
                        f"first round {k} ({self.potential[k - 1]:.6g} -> {self.potential[k]:.6g})")
            else:
                out += f"; the proof's potential {self.potential_name} fell at every round ({span})"
        if self.ball is not None and self.ball.get("left_at") is not None:
            out += (f"; the iterates left the ball of radius {self.ball['radius']:.3g} on which L_lx was computed at "
                    f"round {self.ball['left_at']} (the bound is not guaranteed after it)")
        return out

    def slow_dual_note(self) -> str | None:
        r"""When the bound is dominated by its dual term :math:`\|\lambda^0-\lambda^\star\|^2/\gamma_0`
        (the strongly-convex--concave chain), why the distance may stall or grow inside it: the dual
        step :math:`\sigma_r=\gamma_r\tau_r` is small and :math:`x` tracks the minimizer of the
        current weighting while :math:`\lambda` moves slowly towards :math:`\lambda^\star`."""
        c = self.constant
        if not self.applies or "gamma0" not in c:
            return None
        dual = c["dist_lambda0_sq"] / c["gamma0"]
        if dual <= c["dist_x0_sq"]:
            return None
        return (f"{self.theorem}'s bound is dominated by its dual term ||lambda^0 - lambda*||^2/gamma_0 = {dual:.3g} "
                f"(||x^0 - x*||^2 = {c['dist_x0_sq']:.3g}): the dual steps are small, lambda moved only from "
                f"||lambda - lambda*||^2 = {c['dist_lambda0_sq']:.3g} to {c['dist_lambda_end_sq']:.3g}, and x follows "
                "the minimizer of the current weights, so ||x - x*||^2 may stall or grow inside the bound while "
                "the proof's potential falls")

    def to_dict(self) -> dict:
        out = {"applies": self.applies, "why_not": self.why_not, "theorem": self.theorem,
               "statement": self.statement, "source": self.source}
        if self.applies:
            ratio, at = self.worst()
            out.update(holds=self.holds, largest_ratio=ratio, largest_ratio_round=at,
                       violations=self.violations().tolist(), constant=dict(self.constant),
                       potential=self.potential_name or None, potential_increases=self.potential_increases().tolist(),
                       checked_until=self.checked_until, ball=self.ball, text=self.text())
        return out


# --------------------------------------------------------------------------- helpers
def _oracle_precision(problem, solution, mu: float) -> float:
    """:math:`\\delta=\\sqrt{2(U-L)/\\mu_x}` (at least a few ulps of the value)."""
    try:
        gap = abs(float(solution.upper_bound) - float(solution.lower_bound))
    except (AttributeError, TypeError, ValueError):
        return float("inf")
    gap = max(gap, 4 * np.finfo(float).eps * max(1.0, abs(float(solution.upper_bound))))
    return float(np.sqrt(2.0 * gap / mu)) if mu > 0 and np.isfinite(gap) else float("inf")


def _ball(trace, info) -> dict | None:
    radius = info.get("radius")
    if radius is None:                       # the run was given L_lambda_x (lipschitz=) without a ball
        return None
    dist = np.linalg.norm(trace.theta - trace.theta[0], axis=1)
    out = np.nonzero(dist > radius)[0]
    return {"radius": float(radius), "max_distance": float(dist.max()),
            "left_at": int(out[0]) if out.size else None}


def _checked_until(errors, delta) -> int:
    """The last round before the distance first falls to ``PRECISION_FACTOR * delta``."""
    close = np.nonzero(errors <= (PRECISION_FACTOR * delta) ** 2)[0]
    return int(close[0]) - 1 if close.size else errors.size - 1


def _not_covered(trace) -> str:
    """Why Scaff-PD's theorems do not cover this run ("" if they do)."""
    info, params = trace.info or {}, trace.params or {}
    if params.get("batch_size") is not None:
        return "minibatch gradients (the theorems add a noise floor with an unknown constant)"
    if info.get("partial_participation"):
        return "not every client took part in every round"
    from .landing.arithmetic import run_precision          # the run's arithmetic

    precision = run_precision(np.asarray(trace.theta), info.get("dtypes"))[0]
    if precision != "float64":
        return (f"the models are rounded to {precision} (the theorems' bounds are for exact arithmetic; no "
                "rounding allowance is derived for them)")
    if params.get("control_variates") is False:
        return "control variates off (an ablation outside the theorems)"
    if info.get("normalized_control"):
        return "the weight set is not inside {sum(lambda) = 1} (outside the theorems)"
    if info.get("drift_condition_holds") is False:
        return "the local steps break the drift condition 4 tau^2 L_xx^2/(eta_g^2 J) <= 1/(J - 1) (Lemma D.2)"
    return ""


def _loss_differences(trace, R: int) -> np.ndarray | None:
    L = trace.iterates.get("client_losses") if trace.iterates else None
    if L is None:
        return None
    L = np.asarray(L, float)
    if L.ndim != 2 or L.shape[0] < R:
        return None
    return np.vstack([np.zeros(L.shape[1]), np.diff(L[:R], axis=0)])


@dataclass
class _Run:
    """What every bound reads from a run and its oracle (module docstring's notation)."""

    x: np.ndarray              # (R+1, P) iterates
    lam: np.ndarray            # (R+1, n) dual iterates
    x_star: np.ndarray
    lam_star: np.ndarray
    q: np.ndarray              # (R, n) loss differences q^r, q^0 = 0
    errors: np.ndarray         # (R+1,) ||x^r - x*||^2
    delta: float               # the oracle's precision on x*

    @property
    def R(self) -> int:
        return self.x.shape[0] - 1

    @property
    def e0(self) -> float:
        """||x^0 - x*||^2 with the oracle's precision added (the bound must hold for the true x*)."""
        return float((np.sqrt(self.errors[0]) + self.delta) ** 2)

    @property
    def dl0(self) -> float:
        return float(np.sum((self.lam[0] - self.lam_star) ** 2))

    def bound(self, core: np.ndarray) -> np.ndarray:
        """The bound on the measured squared distance: (sqrt(B_r) + delta)^2."""
        return (np.sqrt(core) + self.delta) ** 2 if np.isfinite(self.delta) else np.full(core.shape, np.nan)


def _run(trace, problem, solution, mu: float) -> "_Run | str":
    """The run's arrays, or why they cannot be had (a sentence)."""
    if solution.weights is None or trace.weights is None:
        return "the dual iterates or the oracle's weights lambda* are missing"
    x, lam = np.asarray(trace.theta, float), np.asarray(trace.weights, float)
    x_star, lam_star = np.asarray(solution.theta, float), np.asarray(solution.weights, float)
    if lam.shape[1] != lam_star.size or x.shape[1] != x_star.size:
        return "the trace and the oracle have different shapes"
    q = _loss_differences(trace, x.shape[0] - 1)
    if q is None or x.shape[0] < 2:
        return "the trace has no per-round client losses"
    return _Run(x, lam, x_star, lam_star, q, np.sum((x - x_star) ** 2, axis=1),
                _oracle_precision(problem, solution, mu))


def _accelerated(run: _Run, trace, c_alpha: float = 0.5):
    """The strongly-convex--concave chain shared by Scaff-PD's Theorem 3.1 and Scaff-PD-IA's Theorem 3
    (module docstring): ``(core bound, potential t_r V_r, C, gamma_0)`` from the recorded steps."""
    R, q = run.R, run.q
    tau, sigma, theta = (np.asarray(trace.iterates[k], float)[:R] for k in ("tau", "sigma", "extrapolation"))
    gamma = sigma / tau
    C = run.e0 + run.dl0 / gamma[0]
    core = np.concatenate([[run.e0], C * gamma[0] / gamma])
    sigma_prev = np.concatenate([[sigma[0]], sigma[:-1]])
    dl, dx = run.lam[:R] - run.lam_star, run.x[:R] - run.x_star
    V = (theta * np.sum(q * dl, 1) + np.sum(dl**2, 1) / (2 * sigma) + np.sum(dx**2, 1) / (2 * tau)
         + theta * np.sum(q**2, 1) * sigma_prev / (2 * c_alpha))
    return core, sigma / sigma[0] * V, C, float(gamma[0])


def _accelerated_statement(C: float) -> str:
    return ("||x^(r+1) - x*||^2 <= (gamma_0/gamma_r)(||x^0 - x*||^2 + ||lambda^0 - lambda*||^2/gamma_0) "
            f"= {C:.4g} gamma_0/gamma_r")


def _covered(trace, mu: float, problem, solution) -> tuple[_Run | None, str]:
    why = _not_covered(trace)
    if why:
        return None, why
    run = _run(trace, problem, solution, mu)
    return (None, run) if isinstance(run, str) else (run, "")


def _scaffpd(trace, problem, solution) -> TheoremBound:
    info = trace.info or {}
    schedule = info.get("schedule")
    if schedule == "constant":
        return TheoremBound(False, "user-given constant steps (the theorems' conditions are not checked)")
    if schedule == "local-step" and not info.get("condition_3_2_holds", False):
        return TheoremBound(False, "the fixed local step is outside Condition 3.2")
    if schedule == "sc-c" and trace.params.get("contraction") == "full":
        return TheoremBound(False, "contraction 'full' (gamma grows with mu_x tau, not mu_x tau/4): the proof "
                                   "needs Remark E.4's mu_x/4")
    if schedule not in ("sc-c", "sc-sc", "local-step"):
        return TheoremBound(False, f"schedule {schedule!r} is not recorded")
    try:
        mu = float(np.min(problem.objectives.strong_convexity()))
    except (AttributeError, TypeError, ValueError):
        mu = float(info.get("mu_x", 0.0))
    run, why = _covered(trace, mu, problem, solution)
    if run is None:
        return TheoremBound(False, why)
    R, q = run.R, run.q
    constant = {"dist_x0_sq": float(run.errors[0]), "dist_lambda0_sq": run.dl0}
    if schedule == "sc-c":
        core, potential, C, gamma0 = _accelerated(run, trace)
        statement = f"Theorem 3.1's bound {_accelerated_statement(C)}"
        constant.update(C=C, gamma0=gamma0)
        theorem, name, source = "Theorem 3.1", "t_r V_r", f"{SCAFFPD}, Theorem 3.1 (Lemmas E.1-E.2, proof of Theorem E.6)"
    else:
        tau, sigma, theta = (float(info[k]) for k in ("tau", "sigma", "theta"))
        V0 = run.dl0 / (2 * sigma) + run.e0 / (2 * tau)
        qq = np.concatenate([np.sum(q**2, 1), [np.nan]])        # q^R is not recorded: no bound at R
        core = 2 * tau * theta ** np.arange(R + 1) * V0 + tau * sigma * theta**2 * qq
        dl, dx = run.lam[:R] - run.lam_star, run.x[:R] - run.x_star
        V = theta * np.sum(q * dl, 1) + np.sum(dl**2, 1) / (2 * sigma) + np.sum(dx**2, 1) / (2 * tau)
        potential = V / theta ** np.arange(R)
        statement = (f"Theorem 3.5's bound ||x^r - x*||^2 <= 2 tau theta^r V_0 + tau sigma theta^2 ||q^r||^2 "
                     f"(2 tau V_0 = {2 * tau * V0:.4g}, theta = {theta:.6g})")
        constant.update(C=2 * tau * V0, theta=theta, tau=tau, sigma=sigma)
        theorem, name, source = "Theorem 3.5", "V_r / theta^r", f"{SCAFFPD}, Theorem 3.5 (Lemmas E.7-E.8, proof of Theorem E.9)"
    return _finish(run, core, potential, constant, theorem, statement, source, name, _ball(trace, info))


def _scaffpd_ia(trace, problem, solution) -> TheoremBound:
    r"""Scaff-PD-IA (Nakakita, Kaneko, Takamaeda-Yamazaki, Imaizumi, "Federated Learning with Relative
    Fairness"): Theorem 3 with the schedule of Assumption 8 (``schedule="theory"``): Lemma 16 at the
    saddle point, Lemma 17 and Proposition 19 give the same chain as Scaff-PD's Theorem 3.1, with
    :math:`\kappa_\Lambda` for :math:`\mu_x/4`; Assumption 7 asks the box projection to stay inactive."""
    info = trace.info or {}
    if info.get("schedule") != "theory":
        return TheoremBound(False, f"schedule {info.get('schedule')!r}: only schedule='theory' (Assumption 8) has "
                                   "Theorem 3's constants")
    active = np.asarray((trace.iterates or {}).get("projection_active", []), float)
    if np.any(active > 0):
        k = int(np.nonzero(active > 0)[0][0])
        return TheoremBound(False, f"the box projection was active (round {k}): outside Assumption 7")
    run, why = _covered(trace, float(info.get("mu_lambda_weighted", 0.0)), problem, solution)
    if run is None:
        return TheoremBound(False, why)
    core, potential, C, gamma0 = _accelerated(run, trace)
    return _finish(run, core, potential, {"C": C, "gamma0": gamma0, "dist_x0_sq": float(run.errors[0]),
                                          "dist_lambda0_sq": run.dl0},
                   "Theorem 3", f"Theorem 3's bound {_accelerated_statement(C)}",
                   f"{IA}, Theorem 3 (Lemmas 16-17, Proposition 19, Assumption 8)", "t_r V_r", _ball(trace, info))


def _finish(run, core, potential, constant, theorem, statement, source, name, ball) -> TheoremBound:
    constant["oracle_precision"] = run.delta
    constant["dist_lambda_end_sq"] = float(np.sum((run.lam[-1] - run.lam_star) ** 2))
    return TheoremBound(True, theorem=theorem, statement=statement, source=source, errors=run.errors,
                        bound=run.bound(core), constant=constant, potential=potential, potential_name=name,
                        checked_until=min(_checked_until(run.errors, run.delta), run.R - 1), ball=ball)


_BOUNDS = {"ScaffPD": _scaffpd, "ScaffPDIA": _scaffpd_ia}


def theorem_bound(trace, problem, solution) -> TheoremBound | None:
    """The explicit bound of the theorem behind ``trace``'s solver, or ``None`` when drflmodel has
    none for that solver (module docstring)."""
    fn = _BOUNDS.get(getattr(trace, "solver", ""))
    info = getattr(trace, "info", None)
    if fn is None or not isinstance(info, dict) or info.get("recorded_by"):
        return None
    try:
        return fn(trace, problem, solution)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:   # a trace without the constants
        return TheoremBound(False, f"the trace lacks what the bound needs ({type(exc).__name__}: {exc})")
