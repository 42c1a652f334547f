"""What the theory predicts for one solver run, from the problem's constants.

:func:`predict` reads a :class:`~drflmodel.solvers.Trace` (solver name, parameters, the schedule
constants the solver recorded in ``trace.info``) and returns a :class:`Prediction`: the rate the
solver's paper proves for this configuration, the error it bounds, the *shape* of the bound over
the rounds (an :class:`Envelope`, known up to a constant factor), and the structural facts that
make the run fast or slow (``notes``). :mod:`drflmodel._diagnosis` compares it with the observed
errors.

The rates (with :math:`x^\\star` the certified optimum and :math:`r` the round):

* Scaff-PD (Yu, Karimireddy, Ma, Jordan, "SCAFF-PD: Communication Efficient Fair and Robust
  Federated Learning", arXiv:2307.13381):

  - strongly concave penalty (SC-SC schedule, Theorem 3.5, eq. (3.2)):
    :math:`\\mathbb E\\|x^r-x^\\star\\|^2\\le C_1\\theta^rD_0` -- linear with the schedule's factor
    :math:`\\theta=1-1/\\omega`;
  - no strong concavity in :math:`\\lambda` (SC-C schedule, Theorem 3.1, eq. (3.1); the proof of
    Theorem E.6 before its :math:`O(1/R^2)` simplification):
    :math:`\\|x^r-x^\\star\\|^2\\le(\\gamma_0/\\gamma_r)\\,(\\|x^0-x^\\star\\|^2+\\|\\lambda^0-\\lambda^\\star\\|^2/\\gamma_0)`
    with :math:`\\gamma_{r+1}=\\gamma_r(1+\\kappa\\tau_r)`, :math:`\\tau_{r+1}=\\tau_r\\sqrt{\\gamma_r/\\gamma_{r+1}}`:
    nearly linear while :math:`\\kappa\\tau_r r` is small, :math:`O(1/r^2)` afterwards;
  - minibatch gradients: both bounds add a noise floor proportional to :math:`\\zeta^2`, so no
    exact convergence is claimed;
  - a fixed local step (Figure 5b's setting): Theorem 3.5 applies only while Condition 3.2 holds.

* Scaff-PD-IA (Nakakita, Kaneko, Takamaeda-Yamazaki, Imaizumi, "Federated Learning with Relative
  Fairness", Theorem 3): the same :math:`\\gamma_0/\\gamma_r` envelope with :math:`\\kappa_\\Lambda`.
* FedAvg with one local step and exact gradients is gradient descent on
  :math:`\\sum_ip_if_i`: :math:`\\|x^{r+1}-x^\\star\\|\\le\\max(|1-s\\mu|,|1-sL|)\\|x^r-x^\\star\\|`
  for the step :math:`s`; with :math:`J>1` local steps on heterogeneous clients its fixed point
  is biased (client drift; Karimireddy et al., "SCAFFOLD", ICML 2020).
* Stochastic-AFL (Mohri, Sivek, Suresh, "Agnostic Federated Learning", ICML 2019) and DRFA (Deng,
  Kamani, Mahdavi, "Distributionally Robust Federated Averaging", NeurIPS 2020) bound the
  duality gap of *averaged* iterates by :math:`O(1/\\sqrt R)` and :math:`O(T^{-3/8})`; the last
  iterates verified here are not what those theorems bound, so their rates are stated, not compared.

Every other solver falls back to the kind of rate its paper proves (``trace.expected_rate``),
without a factor or an order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Prediction", "Envelope", "LinearEnvelope", "PowerEnvelope", "AcceleratedEnvelope",
           "predict", "SCAFFPD_PAPER"]

SCAFFPD_PAPER = "Yu, Karimireddy, Ma, Jordan, \"SCAFF-PD\" (arXiv:2307.13381)"
IA_PAPER = "Nakakita, Kaneko, Takamaeda-Yamazaki, Imaizumi, \"Federated Learning with Relative Fairness\""
#: rounds beyond which a prediction is reported as "more than" this many
ROUND_CAP = 10_000_000


# --------------------------------------------------------------------------- envelopes
class Envelope:
    """The shape of a theorem's bound over the rounds, up to a constant factor.

    ``log(r)`` is the natural log of the bound at rounds ``r`` (an array), minus a constant;
    ``rounds_to_drop(start, drop)`` the first round :math:`r\\ge` ``start`` at which the bound has
    fallen by ``drop`` (in log units) since ``start`` (``None`` beyond :data:`ROUND_CAP`)."""

    def log(self, r) -> np.ndarray:
        raise NotImplementedError

    def rounds_to_drop(self, start: int, drop: float) -> int | None:
        raise NotImplementedError


@dataclass
class LinearEnvelope(Envelope):
    """:math:`\\rho^r` (``factor`` :math:`\\rho<1`)."""

    factor: float

    def log(self, r):
        return np.asarray(r, float) * math.log(self.factor)

    def rounds_to_drop(self, start, drop):
        if drop <= 0:
            return int(start)
        per_round = -math.log(self.factor)
        if per_round <= 0:
            return None
        n = start + math.ceil(drop / per_round)
        return int(n) if n <= ROUND_CAP else None


@dataclass
class PowerEnvelope(Envelope):
    """:math:`r^{\\text{order}}` (``order`` < 0, e.g. -0.5 for :math:`O(1/\\sqrt r)`)."""

    order: float

    def log(self, r):
        return self.order * np.log(np.maximum(np.asarray(r, float), 1.0))

    def rounds_to_drop(self, start, drop):
        if drop <= 0:
            return int(start)
        n = max(start, 1) * math.exp(drop / -self.order)
        return int(math.ceil(n)) if n <= ROUND_CAP else None


class AcceleratedEnvelope(Envelope):
    """:math:`\\gamma_0/\\gamma_r` of the accelerated (SC-C) schedule: :math:`\\gamma_{r+1}=
    \\gamma_r(1+\\kappa\\tau_r)`, :math:`\\tau_{r+1}=\\tau_r\\sqrt{\\gamma_r/\\gamma_{r+1}}`, from
    :math:`\\tau_0`.

    The first ``EXACT`` (16,384) rounds follow the recursion exactly; beyond them, where
    :math:`\\kappa\\tau_r` is small, the recursion is the ODE :math:`\\tau'=-\\kappa\\tau^2/2`, so
    :math:`\\log(\\gamma_{r_1}/\\gamma_r)=-2\\log(1+\\kappa\\tau_{r_1}(r-r_1)/2)` (relative error
    :math:`O(\\kappa\\tau_{r_1})`), which is the :math:`1/r^2` of Theorem 3.1 in the limit."""

    EXACT = 1 << 14

    def __init__(self, tau0: float, kappa: float):
        self.tau0, self.kappa = float(tau0), float(kappa)
        self._log = np.zeros(1)          # log(gamma_0 / gamma_r), r = 0, 1, ..., exactly

    def _extend(self, n: int) -> None:
        have = self._log.size
        n = min(n + 1, self.EXACT)
        if have >= n:
            return
        n = min(max(n, 2 * have), self.EXACT)
        out = np.empty(n)
        out[:have] = self._log
        value = float(self._log[-1])
        for k in range(have, n):
            tau = self.tau0 * math.exp(0.5 * value)     # tau_r = tau_0 sqrt(gamma_0 / gamma_r)
            value -= math.log1p(self.kappa * tau)
            out[k] = value
        self._log = out

    def _tail(self):
        """``(r1, log_env(r1), kappa * tau_{r1})`` at the last exactly computed round."""
        self._extend(self.EXACT)
        r1 = self._log.size - 1
        value = float(self._log[-1])
        return r1, value, self.kappa * self.tau0 * math.exp(0.5 * value)

    def log(self, r):
        r = np.asarray(r, dtype=float)
        top = float(r.max()) if r.size else 0.0
        self._extend(int(min(top, self.EXACT)))
        exact = np.minimum(r, self._log.size - 1).astype(int)
        out = self._log[exact]
        if top >= self._log.size:
            r1, value, s1 = self._tail()
            far = r > r1
            out = np.where(far, value - 2.0 * np.log1p(s1 * np.maximum(r - r1, 0.0) / 2.0), self._log[
                np.minimum(r, r1).astype(int)])
        return out

    def rounds_to_drop(self, start, drop):
        if drop <= 0:
            return int(start)
        target = float(self.log([start])[0]) - drop
        self._extend(max(4 * start, 1024))
        while True:
            hit = np.nonzero(self._log[start:] <= target)[0] if start < self._log.size else np.array([])
            if hit.size:
                return int(start + hit[0])
            if self._log.size >= self.EXACT:
                break
            self._extend(4 * self._log.size)
        r1, value, s1 = self._tail()          # target < log(max(start, r1)) <= value: beyond r1
        r = r1 + 2.0 * (math.exp((value - target) / 2.0) - 1.0) / s1
        return int(math.ceil(r)) if r <= ROUND_CAP else None


# --------------------------------------------------------------------------- prediction
@dataclass
class Prediction:
    """The rate the theory predicts for one run.

    Attributes
    ----------
    kind : ``"linear"``, ``"sublinear"`` or ``None`` (no rate is claimed for this configuration).
    statement : the rate in words (e.g. ``"linear, factor 0.99976 per round"``).
    source : the paper and theorem it comes from.
    metrics : the verification metrics the bound applies to (``"dist_theta_sq"``; a bound on the
        squared distance also gives the distance's, with half the exponent). Empty when the
        theorem bounds something not verified here (e.g. the duality gap of averaged iterates).
    envelope : the bound's shape over the rounds (:class:`Envelope`) or ``None``.
    constants : the problem's constants the prediction used (smoothness, strong convexity, ...).
    notes : structural facts that make this run fast or slow, in words (the report's "cause" lines).
    """

    kind: str | None
    statement: str
    source: str
    metrics: tuple = ()
    envelope: Envelope | None = None
    constants: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def log_envelope(self, r, metric: str) -> np.ndarray | None:
        """Log of the bound on ``metric`` at rounds ``r`` (up to a constant), or ``None``."""
        if self.envelope is None or metric not in self.metrics:
            return None
        scale = 0.5 if metric == "dist_theta" else 1.0
        return scale * self.envelope.log(r)

    def rounds_to_drop(self, start: int, drop: float, metric: str) -> int | None:
        """First round at which the bound on ``metric`` has fallen by ``drop`` (log units)."""
        scale = 0.5 if metric == "dist_theta" else 1.0
        return self.envelope.rounds_to_drop(start, drop / scale)

    def to_dict(self) -> dict:
        env = self.envelope
        shape = None
        if isinstance(env, LinearEnvelope):
            shape = {"linear_factor": env.factor}
        elif isinstance(env, PowerEnvelope):
            shape = {"order": env.order}
        elif isinstance(env, AcceleratedEnvelope):
            shape = {"accelerated": {"tau0": env.tau0, "kappa": env.kappa}}
        return {"kind": self.kind, "statement": self.statement, "source": self.source,
                "metrics": list(self.metrics), "envelope": shape, "constants": dict(self.constants),
                "notes": list(self.notes)}


_DIST = ("dist_theta_sq", "dist_theta")


def _coupling_note(info: dict) -> str | None:
    """Which term of the SC-SC :math:`\\omega` dominates (the cause of a factor close to 1)."""
    mu, L, Llx, ml = (info.get(k) for k in ("mu_x", "L_xx", "L_lx", "mu_lambda"))
    if not all(isinstance(v, (int, float)) and v > 0 for v in (mu, L, Llx, ml)):
        return None
    a = 0.5 + 24.0 * L / mu
    coupling = math.sqrt(8.0 * Llx**2 / (mu * ml))
    radius = info.get("radius")
    where = f" on a ball of radius R_b = {radius:.3g} around the start" if radius else ""
    if coupling > a:
        return (f"the factor is set by the coupling term sqrt(8 L_lx^2/(mu_x mu_lambda)) = {coupling:.3g} "
                f"of omega (L_lx = {Llx:.3g}, the Lipschitz constant of the loss vector{where}; "
                f"mu_x = {mu:.3g}, mu_lambda = {ml:.3g}), larger than the conditioning term "
                f"24 L_xx/mu_x = {24 * L / mu:.3g}")
    return (f"the factor is set by the conditioning term 24 L_xx/mu_x = {24 * L / mu:.3g} of omega "
            f"(smoothness L_xx = {L:.3g}, strong convexity mu_x = {mu:.3g})")


def _step_note(L: float, mu: float, step: float, how: str) -> str:
    return (f"the step is limited by the smoothness L_xx = {L:.3g} ({how} = {step:.3g}) while the strong "
            f"convexity is mu_x = {mu:.3g}: condition number L_xx/mu_x = {L / mu:.3g}")


def _scaffpd(trace, problem) -> Prediction:
    info, params = trace.info, trace.params
    consts = {k: info[k] for k in ("mu_x", "L_xx", "L_lx", "mu_lambda", "radius") if k in info}
    schedule = info.get("schedule")
    notes = []
    if params.get("batch_size") is not None:
        return Prediction(None, "no exact convergence: a noise floor proportional to the minibatch "
                          "variance zeta^2", f"{SCAFFPD_PAPER}, Theorems 3.1 and 3.5 (eqs. 3.1-3.2)",
                          constants=consts,
                          notes=[f"minibatch gradients (batch_size = {params['batch_size']}): the theorems "
                                 "bound the error by the deterministic rate plus a noise floor "
                                 "proportional to zeta^2; the error fluctuates around it"])
    if schedule == "constant":
        return Prediction(None, "not predicted: user-given constant steps (the theorems' conditions "
                          "are not checked)", SCAFFPD_PAPER, constants=consts)
    if consts.get("mu_lambda", 0) == 0 and schedule == "sc-c":
        notes.append(f"{type(problem.weights).__name__} is not strongly concave in lambda "
                     f"(mu_lambda = 0): the theorem's rate is O(1/R^2), not linear; a strongly concave "
                     f"penalty (e.g. ChiSquare with rho > 0) gives a linear rate (Theorem 3.5)")
    if schedule in ("sc-sc", "local-step"):
        theta = float(info["theta"])
        if schedule == "local-step" and not info.get("condition_3_2_holds", False):
            notes.append(f"the fixed local step gives tau = J * local_step_size = {info['tau']:.3g}, above "
                         f"the {info['theory_tau']:.3g} of Condition 3.2: outside Theorem 3.5, no rate is "
                         "guaranteed (the observed rate is reported as it is)")
            return Prediction(None, "not guaranteed (outside Condition 3.2)", f"{SCAFFPD_PAPER}, Theorem 3.5",
                              constants={**consts, "tau": info["tau"], "theta": theta}, notes=notes)
        if theta > 0.999:
            notes.append(_step_note(consts["L_xx"], consts["mu_x"], float(info["tau"]), "tau"))
            coupling = _coupling_note(info)
            if coupling:
                notes.append(coupling)
        return Prediction("linear", f"linear, factor {theta:.6g} per round on ||x - x*||^2",
                          f"{SCAFFPD_PAPER}, Theorem 3.5 (eq. 3.2), theta = 1 - 1/omega of Condition 3.2",
                          _DIST, LinearEnvelope(theta), {**consts, "theta": theta, "tau": info["tau"]}, notes)
    if schedule == "sc-c":
        tau0, kappa = float(info["tau0"]), float(info["contraction"])
        if consts["L_xx"] / consts["mu_x"] > 100:
            notes.insert(0, _step_note(consts["L_xx"], consts["mu_x"], tau0, "tau_0 = 1/(48 L_xx)"))
        return Prediction("sublinear", "O(1/R^2) on ||x - x*||^2 (the bound gamma_0/gamma_r: nearly linear "
                          f"for the first ~{4 / (kappa * tau0):.3g} rounds, then 1/r^2)",
                          f"{SCAFFPD_PAPER}, Theorem 3.1 (eq. 3.1; proof of Theorem E.6)", _DIST,
                          AcceleratedEnvelope(tau0, kappa), {**consts, "tau0": tau0, "kappa": kappa}, notes)
    return _fallback(trace)


def _scaffpd_ia(trace, problem) -> Prediction:
    info, params = trace.info, trace.params
    if params.get("batch_size") is not None or info.get("schedule") == "constant" or "tau0" not in info:
        return _fallback(trace)
    tau0, kappa = float(info["tau0"]), float(info["kappa"])
    derived = info.get("schedule") != "theory"
    return Prediction("sublinear", "O(1/R^2) on ||theta - theta*||^2 (bound gamma_0/gamma_r)",
                      f"{IA_PAPER}, Theorem 3" + (" (shape only: the default 'sc-c' steps are not "
                                                  "covered by the theorem's constants)" if derived else ""),
                      _DIST, AcceleratedEnvelope(tau0, kappa), {"tau0": tau0, "kappa": kappa})


def _fedavg(trace, problem) -> Prediction:
    params, info = trace.params, trace.info
    J = int(params.get("local_steps", 1))
    try:
        obj = problem.objectives
        L = float(np.max(obj.smoothness()))
        mu = float(np.min(obj.strong_convexity()))
    except (AttributeError, ValueError, TypeError):
        return _fallback(trace)
    consts = {"L_xx": L, "mu_x": mu, "local_steps": J}
    source = "gradient descent on sum_i p_i f_i (strong convexity mu_x, smoothness L_xx)"
    if params.get("batch_size") is not None:
        return Prediction(None, "no exact convergence: minibatch noise floor", source, constants=consts,
                          notes=[f"minibatch gradients (batch_size = {params['batch_size']}): the error "
                                 "fluctuates around a noise floor"])
    if J > 1:
        return Prediction(None, "linear convergence to a biased point (client drift)",
                          "Karimireddy et al., \"SCAFFOLD\", ICML 2020", constants=consts,
                          notes=[f"client drift: with J = {J} local steps on heterogeneous clients FedAvg's "
                                 "fixed point is not the optimum (Karimireddy et al. 2020); J = 1 or "
                                 "control variates (Scaffold, Scaff-PD) remove it"])
    step = float(info.get("step_size_used", 1.0 / L)) * float(params.get("global_step", 1.0))
    if mu <= 0:
        return Prediction("sublinear", "O(1/R) (not strongly convex)", source, ("rel_gap",),
                          PowerEnvelope(-1.0), consts)
    factor = max(abs(1.0 - step * mu), abs(1.0 - step * L)) ** 2
    notes = [_step_note(L, mu, step, "step")] if factor > 0.999 else []
    if factor >= 1.0:
        return Prediction(None, f"no contraction: the step {step:.3g} exceeds 2/L_xx = {2 / L:.3g}",
                          source, constants={**consts, "step": step}, notes=notes)
    return Prediction("linear", f"linear, factor {factor:.6g} per round on ||x - x*||^2", source, _DIST,
                      LinearEnvelope(factor), {**consts, "step": step}, notes)


def _averaged_gap(trace, problem) -> Prediction:
    J = int(trace.params.get("local_steps", 1))
    if trace.solver == "DRFA":
        statement, source = ("O(T^(-3/8)) on the duality gap of the averaged iterates, T = R J",
                             "Deng, Kamani, Mahdavi, \"Distributionally Robust Federated Averaging\", "
                             "NeurIPS 2020, Theorem 1")
    else:
        statement, source = ("O(1/sqrt(R)) on the duality gap of the averaged iterates",
                             "Mohri, Sivek, Suresh, \"Agnostic Federated Learning\", ICML 2019, Theorem 2")
    notes = []
    if J > 1:
        notes.append(f"client drift: J = {J} local steps without control variates bias the iterates on "
                     "heterogeneous clients (a floor that shrinks with the local step)")
    if trace.params.get("batch_size") is not None or trace.params.get("clients_per_round") is not None:
        notes.append("stochastic gradients or client sampling: the error fluctuates around a noise floor")
    return Prediction("sublinear", statement, source, (), None, {"local_steps": J}, notes)


def _fallback(trace) -> Prediction:
    rate = getattr(trace, "expected_rate", None)
    if rate is None:
        return Prediction(None, "no rate is claimed for this configuration", trace.solver or "")
    return Prediction(rate, f"{rate} (the paper's rate kind; no factor or order is computed)",
                      trace.solver or "")


_PREDICTORS = {"ScaffPD": _scaffpd, "ScaffPDIA": _scaffpd_ia, "FedAvg": _fedavg,
               "DRFA": _averaged_gap, "StochasticAFL": _averaged_gap}


def predict(trace, problem) -> Prediction:
    """The theory's rate for the run recorded in ``trace`` on ``problem`` (module docstring).

    A run recorded from someone else's algorithm (e.g. a Flower strategy graded by
    :class:`drflmodel.flower.Recorder`, whose steps drflmodel does not know) gets no prediction."""
    info = getattr(trace, "info", None)
    if isinstance(info, dict) and info.get("recorded_by"):
        return Prediction(None, f"not predicted: a run of {getattr(trace, 'solver', '') or 'an external algorithm'} "
                          f"recorded by {info['recorded_by']} (its steps are not known here)", "")
    fn = _PREDICTORS.get(getattr(trace, "solver", ""))
    if fn is None or not isinstance(info, dict) or not getattr(trace, "params", None):
        return _fallback(trace)
    try:
        return fn(trace, problem)
    except (KeyError, TypeError, ValueError):    # a trace without the constants (e.g. loaded, partial)
        return _fallback(trace)
