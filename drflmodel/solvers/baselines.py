"""Baselines of the Scaff-PD and relative-fairness papers, vectorized (full participation;
DRFA and Stochastic-AFL also with the client sampling of their papers).

The Scaff-PD paper (§C.2, Table 4) and the relative-fairness paper (§2, §7) compare with these
baselines without restating them; the published definitions are implemented, with the deviations
listed per class:

* :class:`FedAvg` (McMahan et al. 2017) and :class:`Scaffold` (Karimireddy et al. 2020) solve
  ERM :math:`\\min_\\theta\\sum_ip_if_i(\\theta)` with **fixed** weights :math:`p`: they run on a
  :class:`~drflmodel.problems.minmax.dro.FederatedDRO` whose weight set is a single point, e.g.
  ``CVaR(n, 1)`` (uniform :math:`p`) or ``HCVaR(p, 1)`` (:math:`p`-weighted).
* :class:`FedProx` (Li et al. 2020) runs FedAvg's round on each client's proximal objective
  :math:`f_i(u)+\\frac\\mu2\\|u-\\theta^r\\|^2`, on the same fixed weights. Its fixed point is in
  general **not** ERM's optimum under heterogeneity (its class docstring; measured in the tests).
* :class:`StochasticAFL` (Mohri et al. 2019) and :class:`DRFA` (Deng et al. 2020) solve the
  min–max problem over the problem's weight set (the simplex in the papers; any set with a
  ``prox`` works, which for a penalized set is DRFA-Prox). Both run with full participation
  (default) or, with ``clients_per_round=m``, with the client sampling of their papers, drawn
  by the server from ``runtime.rng`` (:mod:`drflmodel.solvers.sampling`): :math:`m` clients
  with replacement by :math:`\\lambda` for the model (their average is unbiased for the
  :math:`\\lambda`-weighted one) and :math:`m` distinct clients uniformly for the losses
  (:math:`v_i=\\frac nmf_i` on them, 0 elsewhere: unbiased for :math:`f`). Only the sampled
  clients communicate; the trace records ``sampled`` (multiplicity of each client in the model
  sample) and ``loss_clients`` (indicator of the loss sample) per round.
* :class:`QFedAvg` (Li et al. 2020, Algorithm 2 "q-FedAvg") solves q-FFL on a ``FederatedDRO``
  with a ``QFFL`` set: :math:`\\min_\\theta\\frac1{q+1}\\sum_if_i(\\theta)^{q+1}`. **Each client
  weights its update by its own loss** :math:`F_i(\\theta^r)^q` (as in the paper's Algorithm 2;
  an implementation that uses one server-side loss for every client would not be q-FedAvg).

Default step sizes are documented recipes from the smoothness :math:`L_{xx}=\\max_iL_i`
(``problem.objectives.smoothness()``); every step can be overridden.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_choice, check_int, check_real
from ..errors import InvalidParameterError
from ._base import Solver, check_batch_size, check_rounds, check_step
from .sampling import sample_by_weights, sample_uniform, sampling_probabilities
from .scaffpd import _initial_weights

__all__ = ["FedAvg", "FedProx", "Scaffold", "StochasticAFL", "DRFA", "QFedAvg", "fixed_weights",
           "default_local_step", "proximal_local_steps"]

_DRO = ("drflmodel.problems.minmax.dro:FederatedDRO",)
#: recorded per round by the min-max baselines when they sample clients
_SAMPLING_RECORD = ("sampled", "loss_clients")


def _smoothness(problem) -> float:
    L = float(np.max(problem.objectives.smoothness()))
    if not np.isfinite(L) or L <= 0:
        raise InvalidParameterError(
            f"the default step needs a smooth loss (L_xx finite and > 0); got L_xx={L} for "
            f"{problem.loss!r}: pass step_size explicitly")
    return L


def default_local_step(problem, local_steps: int, mu: float = 0.0) -> float:
    """The local step FedAvg and FedProx take when ``step_size=None``: :math:`1/((L_{xx}+\\mu)J)`,
    :math:`L_{xx}=\\max_iL_i` (:math:`\\mu=0` for FedAvg)."""
    return 1.0 / ((_smoothness(problem) + mu) * local_steps)


def _local_step(solver, problem) -> float:
    """The user's ``step_size``, else the documented default :func:`default_local_step`."""
    eta = solver.params["step_size"]
    return eta if eta is not None else default_local_step(problem, solver.local_steps)


def fixed_weights(weights, n: int) -> np.ndarray:
    """The single point of a one-point weight set (ERM weights), else raise.

    A set is a single point iff its projection is constant; checked on the uniform vector and
    on two far-apart probes.
    """
    probes = [np.full(n, 1.0 / n), 10.0 * np.eye(n)[0], -10.0 * np.eye(n)[-1] + np.arange(n)]
    pts = [np.asarray(weights.project(v), float) for v in probes]
    if not all(np.allclose(pts[0], p, atol=1e-10) for p in pts[1:]):
        raise InvalidParameterError(
            f"this ERM baseline needs fixed client weights, i.e. a FederatedDRO whose weight set is "
            f"a single point (e.g. CVaR(n, 1) for uniform weights or HCVaR(p, 1) for p-weights); "
            f"got {weights!r}")
    return pts[0]


def _check_clients_per_round(value):
    """``None`` (full participation) or an integer :math:`m\\ge1` (checked against :math:`n` at run)."""
    return None if value is None else check_int(value, "clients_per_round", low=1)


def _sampling_setup(solver, problem, state: dict) -> dict:
    """Check :math:`m\\le n` and add the sampling records to a min-max baseline's state."""
    m, n = solver.clients_per_round, problem.n_clients
    if m is None:
        return state
    if m > n:
        raise InvalidParameterError(
            f"clients_per_round must be an integer in [1, {n}] (the number of clients); got {m}")
    if not getattr(problem.weights, "in_simplex", True):
        raise InvalidParameterError(
            f"clients_per_round: sampling clients by their weights needs a weight set inside the "
            f"simplex; {problem.weights!r} is not (use full participation, clients_per_round=None)")
    state.update(sampled=np.zeros(n), loss_clients=np.zeros(n))
    return state


def _sampled_losses(runtime, x, U, state: dict) -> np.ndarray:
    """Clients ``U`` (:math:`m` distinct, uniform) upload :math:`f_i(x)`; returns the unbiased
    estimate :math:`v_i=\\frac nmf_i(x)\\mathbb 1[i\\in U]` of :math:`f(x)`."""
    n, m = runtime.n, len(U)
    L = runtime.upload(senders=U, losses=runtime.losses(x)[U])
    v = np.zeros(n)
    v[U] = (n / m) * L
    state["loss_clients"] = np.isin(np.arange(n), U).astype(float)
    return v


def _check_bool(value, name):
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be True or False; got {value!r}")
    return value


# ---------------------------------------------------------------------------------- ERM
class FedAvg(Solver):
    """FedAvg: :math:`J` local SGD steps, then :math:`\\theta^{r+1}=\\theta^r-\\eta_g\\sum_ip_i(\\theta^r-u_{i,J})`.

    Parameters: ``local_steps`` :math:`J`; ``step_size`` local :math:`\\eta_\\ell` (default
    :math:`1/(L_{xx}J)`, so one round moves about one gradient step); ``global_step``
    :math:`\\eta_g` (default 1, plain averaging); ``batch_size``.

    Communication per round: model down (:math:`n` messages, :math:`nd` floats), model update up
    (:math:`n`, :math:`nd`). With heterogeneous clients and :math:`J>1` the fixed point is biased
    (client drift, :math:`O(\\eta_\\ell J)`); :math:`J=1` is gradient descent and exact.
    """

    problem_types = _DRO
    expected_rate = "linear"

    def __init__(self, rounds: int = 100, local_steps: int = 10, step_size: float | None = None,
                 global_step: float = 1.0, batch_size: int | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, step_size=step_size,
                         global_step=global_step, batch_size=batch_size)

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        if p["step_size"] is not None:
            check_step(p["step_size"], "step_size")
        self.global_step = check_step(p["global_step"], "global_step")
        self.batch_size = check_batch_size(p["batch_size"])

    def _initialize(self, problem, runtime, theta0):
        p = fixed_weights(problem.weights, problem.n_clients)
        eta = _local_step(self, problem)
        return {"theta": theta0, "weights": p, "eta": eta, "info": {"step_size_used": eta},
                "expected_rate": None if self.batch_size else self.expected_rate}

    def _round(self, r, state, runtime):
        x = runtime.broadcast("model", state["theta"])
        U = runtime.local_sgd(x, self.local_steps, state["eta"])
        D = runtime.upload(update=x[None, :] - U)
        state["theta"] = x - self.global_step * runtime.aggregate(state["weights"], D)
        return state


class Scaffold(Solver):
    """SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, full participation) on fixed weights :math:`p`.

    Local steps :math:`u\\leftarrow u-\\eta_\\ell(g_i(u)-c_i+c)`; then
    :math:`\\theta\\leftarrow\\theta+\\eta_g\\sum_ip_i(u_{i,J}-\\theta)` and the control variates
    ``control="gradient"`` (option I: :math:`c_i^+=g_i(\\theta^r)`, a fresh gradient at the server
    model) or ``"local"`` (option II: :math:`c_i^+=c_i-c+(\\theta^r-u_{i,J})/(J\\eta_\\ell)`),
    :math:`c^+=\\sum_ip_ic_i^+`. Here :math:`c` is the :math:`p`-weighted average (the paper's
    uniform :math:`1/N` with :math:`p` uniform). Option I is Scaff-PD with fixed weights
    (relative-fairness §7.6). Initial :math:`c_i`: option I -- computed in round 1; option II --
    zeros (as in the paper).

    Defaults: ``step_size`` :math:`\\eta_\\ell=1/(L_{xx}J)`, ``global_step`` :math:`\\eta_g=1`.
    Communication per round: model and :math:`c` down (:math:`2n` messages); option I adds the
    control-variate upload before the local steps (:math:`n` messages, :math:`nd` floats) and
    then the model update (:math:`nd`); option II sends model update and control update together
    (:math:`n` messages, :math:`2nd` floats).
    """

    problem_types = _DRO
    expected_rate = "linear"

    def __init__(self, rounds: int = 100, local_steps: int = 10, step_size: float | None = None,
                 global_step: float = 1.0, control: str = "gradient", batch_size: int | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, step_size=step_size,
                         global_step=global_step, control=control, batch_size=batch_size)

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        if p["step_size"] is not None:
            check_step(p["step_size"], "step_size")
        self.global_step = check_step(p["global_step"], "global_step")
        self.control = check_choice(p["control"], "control", ("gradient", "local"))
        self.batch_size = check_batch_size(p["batch_size"])

    def _initialize(self, problem, runtime, theta0):
        p = fixed_weights(problem.weights, problem.n_clients)
        eta = _local_step(self, problem)
        n, d = problem.n_clients, problem.dim
        return {"theta": theta0, "weights": p, "eta": eta, "C": np.zeros((n, d)),
                "c": np.zeros(d), "info": {"step_size_used": eta},
                "expected_rate": None if self.batch_size else self.expected_rate}

    def _round(self, r, state, runtime):
        p, eta, J = state["weights"], state["eta"], self.local_steps
        x = runtime.broadcast("model", state["theta"])
        if self.control == "gradient":
            Cu = runtime.upload(controls=runtime.gradients(x))
            C = np.asarray(Cu)                       # client i keeps its own row
            c = runtime.broadcast("control", runtime.aggregate(p, Cu))
        else:
            C = state["C"]
            c = runtime.broadcast("control", state["c"])
        U = runtime.local_sgd(x, J, eta, correction=c[None, :] - C)
        if self.control == "gradient":
            D = runtime.upload(update=U - x[None, :])
        else:
            C_new = C - c[None, :] + (x[None, :] - U) / (J * eta)
            D, dC = runtime.upload(update=U - x[None, :], control_update=C_new - C)
            state["C"] = C_new
            state["c"] = state["c"] + runtime.aggregate(p, dC)
        state["theta"] = x + self.global_step * runtime.aggregate(p, D)
        return state


class FedProx(Solver):
    r"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith 2020, "Federated Optimization in
    Heterogeneous Networks", MLSys, Algorithm 2), full participation, on fixed weights :math:`p`.

    Round :math:`r`: the server broadcasts :math:`\theta^r`; client *i* approximately minimizes its
    proximal objective :math:`h_i(u;\theta^r)=f_i(u)+\frac\mu2\|u-\theta^r\|^2` by :math:`J` local
    (stochastic) gradient steps from :math:`u_{i,0}=\theta^r`,

    .. math:: u_{i,j}=u_{i,j-1}-\eta\big(g_i(u_{i,j-1})+\mu(u_{i,j-1}-\theta^r)\big),

    and uploads :math:`\theta^r-u_{i,J}`; the server sets
    :math:`\theta^{r+1}=\theta^r-\sum_ip_i(\theta^r-u_{i,J})=\sum_ip_iu_{i,J}` (the paper's average
    of the returned models, here with every client and its weight :math:`p_i` instead of :math:`K`
    clients sampled by :math:`p`). The paper's :math:`\gamma`-inexact local solver is these
    :math:`J` steps; ``mu=0`` is :class:`FedAvg` with ``global_step=1`` (the same iterates, bit for bit).

    Parameters: ``mu`` :math:`\mu\ge0` (the proximal weight); ``local_steps`` :math:`J`;
    ``step_size`` :math:`\eta` (default :math:`1/((L_{xx}+\mu)J)`, :math:`L_{xx}+\mu` being the
    smoothness of :math:`h_i`); ``batch_size``. Communication per round: FedAvg's (model down,
    :math:`n` messages of :math:`P` floats; update up, the same).

    **What it converges to** (not ERM's optimum, in general). A fixed point satisfies
    :math:`\sum_ip_i(\theta-u_{i,J}(\theta))=0`. With *exact* local minimization
    (:math:`u_i=\operatorname{prox}_{f_i/\mu}(\theta)`, the limit :math:`J\to\infty`, :math:`\eta`
    small) this reads :math:`\sum_ip_i\nabla f_i(u_i)=0` at the clients' *local* points
    :math:`u_i\ne\theta`: :math:`\theta` is the stationary point of
    :math:`\sum_ip_iM_i(\theta)`, :math:`M_i(\theta)=\min_uf_i(u)+\frac\mu2\|u-\theta\|^2` (the
    Moreau envelopes, :math:`\nabla M_i(\theta)=\nabla f_i(u_i)`), which equals ERM's
    :math:`\sum_ip_i\nabla f_i(\theta)=0` only when the clients agree (e.g. identical curvature or a
    common minimizer). For quadratics :math:`f_i=\frac{a_i}2(\theta-b_i)^2` the fixed point is the
    mean of the :math:`b_i` weighted by :math:`p_ia_i/(a_i+\mu)`, ERM's by :math:`p_ia_i`: the bias
    is :math:`O(1/\mu)` and vanishes only as :math:`\mu\to\infty` (where the round becomes one
    gradient step of size :math:`1/\mu`); :math:`\mu\to0` gives the average of the local minimizers.
    With :math:`J` finite steps the fixed point is that of the map :math:`u_{i,J}(\theta)` (also
    biased, like FedAvg's client drift). Li et al. analyse progress on ERM's objective under a
    bounded-dissimilarity assumption on the clients' gradients, which fails near ERM's optimum
    when the clients are heterogeneous; the bias above is measured in
    ``tests/solvers/test_fedprox.py`` against the fixed point computed in closed form.
    """

    problem_types = _DRO
    #: linear convergence to its own fixed point (exact gradients, strongly convex f_i), which is
    #: not the oracle's optimum in general: verify against ERM then reports the bias
    expected_rate = "linear"

    def __init__(self, rounds: int = 100, mu: float = 0.01, local_steps: int = 10,
                 step_size: float | None = None, batch_size: int | None = None):
        super().__init__(rounds=rounds, mu=mu, local_steps=local_steps, step_size=step_size,
                         batch_size=batch_size)

    def _validate(self):
        p = self.params
        self.mu = check_real(p["mu"], "mu", low=0.0)
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        if p["step_size"] is not None:
            check_step(p["step_size"], "step_size")
        self.batch_size = check_batch_size(p["batch_size"])

    def _initialize(self, problem, runtime, theta0):
        p = fixed_weights(problem.weights, problem.n_clients)
        eta = self.params["step_size"]
        if eta is None:
            eta = default_local_step(problem, self.local_steps, self.mu)
        return {"theta": theta0, "weights": p, "eta": eta, "info": {"step_size_used": eta},
                "expected_rate": None if self.batch_size else self.expected_rate}

    def _round(self, r, state, runtime):
        x = runtime.broadcast("model", state["theta"])
        U = proximal_local_steps(runtime, x, self.local_steps, state["eta"], self.mu)
        D = runtime.upload(update=x[None, :] - U)
        state["theta"] = x - runtime.aggregate(state["weights"], D)
        return state


def proximal_local_steps(runtime, x, steps: int, eta: float, mu: float) -> np.ndarray:
    r"""FedProx's local solver on every client at once: :math:`J` steps
    :math:`u\leftarrow u-\eta(g_i(u)+\mu(u-x))` from :math:`u=x`; returns :math:`u_J`, shape ``(n, P)``.
    With :math:`\mu=0` these are :meth:`ClientRuntime.local_sgd`'s steps (the same arithmetic)."""
    U = np.array(np.broadcast_to(x, (runtime.n, x.size)))
    for _ in range(steps):
        U = U - eta * (runtime.gradients(U) + mu * (U - x[None, :]))
    return U


# ---------------------------------------------------------------------------------- min-max
class StochasticAFL(Solver):
    """Stochastic-AFL (Mohri, Sivek, Suresh 2019, "Agnostic federated learning", Algorithm 1):
    one gradient step per round (FedSGD-style, no local steps).

    Round :math:`r`, full participation (default): the server broadcasts :math:`\\theta^r`; client
    *i* returns :math:`(f_i(\\theta^r), g_i(\\theta^r))` (one message); the server steps
    :math:`\\theta^{r+1}=\\theta^r-\\gamma^\\theta_r\\sum_i\\lambda_i^rg_i(\\theta^r)` and
    :math:`\\lambda^{r+1}=\\operatorname{prox}^\\Lambda_{\\gamma^\\lambda_r\\psi}(\\lambda^r+\\gamma^\\lambda_rf(\\theta^r))`
    (projected ascent; the paper's simplex).

    Client sampling (``clients_per_round=m``; the paper's stochastic gradients of
    :math:`L(w,\\lambda)=\\sum_i\\lambda_if_i(w)`, its "weighted" estimator with :math:`m` clients):
    the server draws :math:`D` (:math:`m` clients with replacement by :math:`\\lambda^r`), then
    :math:`U` (:math:`m` distinct clients, uniform); it broadcasts :math:`\\theta^r` to
    :math:`D\\cup U`; the distinct clients of :math:`D` upload :math:`g_i(\\theta^r)` and those of
    :math:`U` upload :math:`f_i(\\theta^r)`; the steps use the unbiased estimates
    :math:`\\frac1m\\sum_{k\\in D}g_k` and :math:`v=\\frac nm(f_i\\mathbb 1[i\\in U])_i`.

    Steps :math:`\\gamma_r=\\gamma_0/\\sqrt{r+1}` (``decay="sqrt"``) or constant (``"constant"``;
    the paper's Theorem 2 takes constant steps :math:`\\propto1/\\sqrt R`
    for a horizon of :math:`R` rounds and bounds the expected duality gap of the averages by
    :math:`O(1/\\sqrt R)`);
    defaults :math:`\\gamma^\\theta_0=1/L_{xx}`, :math:`\\gamma^\\lambda_0=\\gamma^\\theta_0`. The
    output the paper analyses is the average :math:`\\bar\\theta^R=\\frac1R\\sum_r\\theta^r`
    (``Trace.iterates["theta_avg"]``, ``["weights_avg"]``).
    Communication per round: model down (:math:`n`, :math:`nd`), losses+gradients up
    (:math:`n`, :math:`n(d+1)`); sampled: model down to :math:`|D\\cup U|` clients, gradients up
    from the distinct clients of :math:`D`, losses up from :math:`U` (two messages for a client in
    both).
    """

    problem_types = _DRO
    record = ("theta_avg", "weights_avg")
    expected_rate = "sublinear"

    def __init__(self, rounds: int = 100, step_size: float | None = None,
                 dual_step: float | None = None, decay: str = "sqrt",
                 batch_size: int | None = None, lambda0=None, clients_per_round: int | None = None):
        super().__init__(rounds=rounds, step_size=step_size, dual_step=dual_step, decay=decay,
                         batch_size=batch_size,
                         lambda0=None if lambda0 is None else np.asarray(lambda0, float).tolist(),
                         clients_per_round=clients_per_round)

    def _validate(self):
        p = self.params
        for k in ("step_size", "dual_step"):
            if p[k] is not None:
                check_step(p[k], k)
        self.decay = check_choice(p["decay"], "decay", ("sqrt", "constant"))
        self.batch_size = check_batch_size(p["batch_size"])
        self.clients_per_round = _check_clients_per_round(p["clients_per_round"])
        if self.clients_per_round is not None:
            self.record = type(self).record + _SAMPLING_RECORD

    def _initialize(self, problem, runtime, theta0):
        g0 = self.params["step_size"] or 1.0 / _smoothness(problem)
        l0 = self.params["dual_step"] or g0
        lam = _initial_weights(problem.weights, problem.n_clients, self.params["lambda0"])
        return _sampling_setup(self, problem, {
            "theta": theta0, "weights": lam, "g0": g0, "l0": l0, "set": problem.weights,
            "theta_avg": theta0.copy(), "weights_avg": lam.copy(),
            "info": {"step_size_used": g0, "dual_step_used": l0}})

    def _estimates(self, state, runtime):
        """``(x, g, v)``: the broadcast model, the estimate of :math:`\\sum_i\\lambda_ig_i(x)` and
        the estimate of :math:`f(x)` (exact sums under full participation)."""
        lam, m = state["weights"], self.clients_per_round
        if m is None:
            x = runtime.broadcast("model", state["theta"])
            L, G = runtime.upload(losses=runtime.losses(x), gradients=runtime.gradients(x))
            return x, runtime.aggregate(lam, G), L
        mult, D = sample_by_weights(runtime.rng, sampling_probabilities(lam), m)
        U = sample_uniform(runtime.rng, runtime.n, m)
        x = runtime.broadcast("model", state["theta"], receivers=np.union1d(D, U).size)
        G = runtime.upload(senders=D, gradients=runtime.gradients(x, clients=D)[D])
        state["sampled"] = mult
        return x, runtime.aggregate(mult[D] / m, G), _sampled_losses(runtime, x, U, state)

    def _round(self, r, state, runtime):
        x, g, v = self._estimates(state, runtime)
        return self.server_step(r, state, x, g, v)

    def server_step(self, r, state, x, g, v):
        r"""Round *r*'s server step from the gradient estimate ``g`` and loss estimate ``v`` (the
        simulator's and the Flower port's): :math:`\theta\leftarrow x-\gamma_x g`,
        :math:`\lambda\leftarrow\mathrm{prox}_\Lambda(\lambda+\gamma_\lambda v)` with the steps
        decayed like :math:`1/\sqrt{r+1}` when ``decay="sqrt"``, and the running averages the
        paper outputs."""
        scale = 1.0 / np.sqrt(r + 1.0) if self.decay == "sqrt" else 1.0
        gx, gl = state["g0"] * scale, state["l0"] * scale
        x_next = x - gx * g
        lam_next = np.asarray(state["set"].prox(state["weights"] + gl * v, gl), float)
        k = r + 1
        state["theta_avg"] = state["theta_avg"] + (x_next - state["theta_avg"]) / k
        state["weights_avg"] = state["weights_avg"] + (lam_next - state["weights_avg"]) / k
        state.update(theta=x_next, weights=lam_next)
        return state


class DRFA(Solver):
    """DRFA (Deng, Kamani, Mahdavi 2020, "Distributionally robust federated averaging",
    Algorithm 1), with full participation (default) or the paper's client sampling.

    Round :math:`r`, full participation (every client takes part with its weight, instead of
    sampling :math:`m` clients by :math:`\\lambda`; the full-participation limit of the paper's
    unbiased estimates): the server draws :math:`t'\\sim\\mathrm{Unif}\\{1,\\dots,J\\}`
    (``runtime.rng``) and broadcasts :math:`\\theta^r`; every client runs :math:`J` local SGD steps
    :math:`u_{i,j}=u_{i,j-1}-\\eta\\,g_i(u_{i,j-1})` and uploads :math:`u_{i,J}` and the
    snapshot :math:`u_{i,t'}` (one message); the server sets
    :math:`\\theta^{r+1}=\\sum_i\\lambda_i^ru_{i,J}` and :math:`\\bar\\theta'=\\sum_i\\lambda^r_iu_{i,t'}`,
    broadcasts :math:`\\bar\\theta'`, collects :math:`f_i(\\bar\\theta')` and takes the dual step
    :math:`\\lambda^{r+1}=\\operatorname{prox}^\\Lambda_{\\gamma J\\psi}(\\lambda^r+\\gamma Jf(\\bar\\theta'))`
    (projection onto the simplex in the paper; with a penalty this is DRFA-Prox). The weights
    are assumed to sum to one (simplex-type sets).

    Client sampling (``clients_per_round=m``, Algorithm 1 as printed): the server draws
    :math:`D^{(r)}` (:math:`m` clients with replacement by :math:`\\lambda^r`), then :math:`t'`;
    only the distinct clients of :math:`D` receive :math:`\\theta^r`, run the local steps and
    upload; :math:`\\theta^{r+1}=\\frac1m\\sum_{k\\in D}u_{k,J}` and
    :math:`\\bar\\theta'=\\frac1m\\sum_{k\\in D}u_{k,t'}` (a client drawn twice counts twice); the
    server then draws :math:`U` (:math:`m` distinct clients, uniform), sends them
    :math:`\\bar\\theta'`, and steps with :math:`v=\\frac nm(f_i(\\bar\\theta')\\mathbb 1[i\\in U])_i`
    in place of :math:`f(\\bar\\theta')`. The paper's convex-case guarantee (its Theorem 1, with
    steps tuned to the horizon, :math:`\\eta\\propto T^{-1/2}`, :math:`\\gamma\\propto T^{-5/8}`) is an :math:`O(T^{-3/8})` bound on the expected duality gap of the
    averaged iterates, :math:`T=RJ` local iterations.

    Defaults: local step :math:`\\eta=1/(L_{xx}J)`, dual step :math:`\\gamma=\\eta`. The average
    :math:`\\frac1R\\sum_r\\theta^r` of the synchronized models is ``Trace.iterates["theta_avg"]``.
    Communication per round: model and snapshot down (:math:`2n` messages, :math:`2nd` floats);
    models+snapshots up (:math:`n`, :math:`2nd`), then losses up (:math:`n`, :math:`n`); sampled:
    model down to and models+snapshots up from the distinct clients of :math:`D`, snapshot down to
    and losses up from the :math:`m` clients of :math:`U`.
    """

    problem_types = _DRO
    record = ("theta_avg",)
    expected_rate = "sublinear"

    def __init__(self, rounds: int = 100, local_steps: int = 10, step_size: float | None = None,
                 dual_step: float | None = None, batch_size: int | None = None, lambda0=None,
                 clients_per_round: int | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, step_size=step_size,
                         dual_step=dual_step, batch_size=batch_size,
                         lambda0=None if lambda0 is None else np.asarray(lambda0, float).tolist(),
                         clients_per_round=clients_per_round)

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        for k in ("step_size", "dual_step"):
            if p[k] is not None:
                check_step(p[k], k)
        self.batch_size = check_batch_size(p["batch_size"])
        self.clients_per_round = _check_clients_per_round(p["clients_per_round"])
        if self.clients_per_round is not None:
            self.record = type(self).record + _SAMPLING_RECORD

    def _initialize(self, problem, runtime, theta0):
        eta = _local_step(self, problem)
        gamma = self.params["dual_step"] or eta
        lam = _initial_weights(problem.weights, problem.n_clients, self.params["lambda0"])
        return _sampling_setup(self, problem, {
            "theta": theta0, "weights": lam, "eta": eta, "gamma": gamma, "set": problem.weights,
            "theta_avg": theta0.copy(), "info": {"step_size_used": eta, "dual_step_used": gamma}})

    def _full_round(self, state, runtime):
        """``(x_next, v)`` with every client: the :math:`\\lambda`-average and :math:`f(\\bar\\theta')`."""
        J, lam = self.local_steps, state["weights"]
        t_snap = int(runtime.rng.integers(1, J + 1))
        x = runtime.broadcast("model", state["theta"])
        U, S = runtime.local_sgd(x, J, state["eta"], snapshot=t_snap)
        Uu, Su = runtime.upload(models=U, snapshots=S)
        x_next = runtime.aggregate(lam, Uu)
        x_snap = runtime.broadcast("snapshot", runtime.aggregate(lam, Su))
        return x_next, runtime.upload(losses=runtime.losses(x_snap))

    def _sampled_round(self, state, runtime):
        """``(x_next, v)`` with the sampled clients :math:`D` and :math:`U` (class docstring)."""
        J, m = self.local_steps, self.clients_per_round
        mult, D = sample_by_weights(runtime.rng, sampling_probabilities(state["weights"]), m)
        t_snap = int(runtime.rng.integers(1, J + 1))
        x = runtime.broadcast("model", state["theta"], receivers=D.size)
        U, S = runtime.local_sgd(x, J, state["eta"], snapshot=t_snap, clients=D)
        Uu, Su = runtime.upload(senders=D, models=U[D], snapshots=S[D])
        x_next = runtime.aggregate(mult[D] / m, Uu)
        x_snap = runtime.aggregate(mult[D] / m, Su)
        Uc = sample_uniform(runtime.rng, runtime.n, m)
        x_snap = runtime.broadcast("snapshot", x_snap, receivers=m)
        state["sampled"] = mult
        return x_next, _sampled_losses(runtime, x_snap, Uc, state)

    def _round(self, r, state, runtime):
        if self.clients_per_round is None:
            x_next, v = self._full_round(state, runtime)
        else:
            x_next, v = self._sampled_round(state, runtime)
        return self.server_step(r, state, x_next, v)

    def server_step(self, r, state, x_next, v):
        r"""Round *r*'s server step from the new model ``x_next`` and the loss estimate ``v`` at
        the snapshot (the simulator's and the Flower port's): the dual step
        :math:`\lambda^{r+1}=\operatorname{prox}^\Lambda_{\gamma J\psi}(\lambda^r+\gamma Jv)` and the
        running average ``theta_avg``."""
        J, lam = self.local_steps, state["weights"]
        step = state["gamma"] * J
        lam_next = np.asarray(state["set"].prox(lam + step * v, step), float)
        k = r + 1
        state["theta_avg"] = state["theta_avg"] + (x_next - state["theta_avg"]) / k
        state.update(theta=x_next, weights=lam_next)
        return state


class QFedAvg(Solver):
    """q-FedAvg (Li, Sanjabi, Beirami, Smith 2020, "Fair resource allocation in federated
    learning", Algorithm 2), full participation, on a ``FederatedDRO`` with a ``QFFL(n, q)`` set.

    Round: the server broadcasts :math:`w^r`; client *i* evaluates **its own** loss
    :math:`F_i=f_i(w^r)`, runs :math:`J` local SGD steps with step :math:`1/L` to
    :math:`\\bar w_i`, and sends :math:`\\Delta_i=F_i^q\\,L(w^r-\\bar w_i)` and
    :math:`h_i=qF_i^{q-1}\\|L(w^r-\\bar w_i)\\|^2+LF_i^q` (one message, :math:`d+1` floats); the server
    sets :math:`w^{r+1}=w^r-\\sum_i\\Delta_i/\\sum_ih_i`. With :math:`J=1` and exact gradients the
    fixed points are exactly the stationary points of :math:`\\frac1{q+1}\\sum_if_i^{q+1}`
    (:math:`\\sum_iF_i^q\\nabla f_i=0`); with :math:`J>1` local steps bias it (as in the paper).

    ``lipschitz`` is the paper's :math:`L` (default :math:`L_{xx}=\\max_iL_i`). ``q`` is read from
    the problem's ``QFFL`` set. The weights recorded are :math:`\\lambda_i=F_i^q` (the q-FFL
    maximizer :math:`\\lambda^\\star_i=f_i^q` of :class:`~drflmodel.sets.QFFL` at the current model).
    """

    problem_types = _DRO
    expected_rate = None

    def __init__(self, rounds: int = 100, local_steps: int = 1, lipschitz: float | None = None,
                 batch_size: int | None = None):
        super().__init__(rounds=rounds, local_steps=local_steps, lipschitz=lipschitz,
                         batch_size=batch_size)

    def _validate(self):
        p = self.params
        self.local_steps = check_rounds(p["local_steps"], "local_steps")
        if p["lipschitz"] is not None:
            check_step(p["lipschitz"], "lipschitz")
        self.batch_size = check_batch_size(p["batch_size"])

    def check_problem(self, problem):
        super().check_problem(problem)
        from ..sets import QFFL
        if not isinstance(problem.weights, QFFL):
            raise InvalidParameterError(
                f"QFedAvg runs on FederatedDRO problems with a QFFL(n, q) weight set; got {problem.weights!r}")

    def _initialize(self, problem, runtime, theta0):
        L = self.params["lipschitz"] or _smoothness(problem)
        q = float(problem.weights.q)
        F0 = problem.objectives.values(theta0)
        return {"theta": theta0, "weights": np.maximum(F0, 0.0) ** q, "L": L, "q": q,
                "info": {"lipschitz_used": L, "q": q}}

    def _round(self, r, state, runtime):
        L, q = state["L"], state["q"]
        x = runtime.broadcast("model", state["theta"])
        F = runtime.losses(x)                                   # row i: client i's own loss
        U = runtime.local_sgd(x, self.local_steps, 1.0 / L)
        dW = L * (x[None, :] - U)
        Fq = np.maximum(F, 0.0) ** q
        Fp = np.maximum(F, 0.0)
        Fq1 = np.where(Fp > 0, Fp ** (q - 1.0), 0.0) if q != 1.0 else np.ones_like(F)
        Delta = Fq[:, None] * dW
        h = q * Fq1 * np.sum(dW * dW, axis=1) + L * Fq
        Du, hu = runtime.upload(delta=Delta, h=h)
        ones = np.ones(runtime.n)
        state["theta"] = x - runtime.aggregate(ones, Du) / float(runtime.aggregate(ones, hu))
        state["weights"] = Fq
        return state
