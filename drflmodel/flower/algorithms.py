r"""The server side of each ported algorithm: one round over Flower messages.

Each port runs the **same** round as the simulator solver it ports, split at the privacy
boundary: the server part is here, the client part is an operation of
:mod:`drflmodel.flower.client`. The math is not re-derived: the initial state (schedule objects
with their constants, :math:`\lambda^0`, step sizes, the dual-step function, the box, ...) comes
from the simulator solver's public ``Solver.start``, and each round ends in the solver's own
public server step, which the simulator's round calls too (``ScaffPD.server_step`` /
``ScaffPDIA.server_step`` after :func:`~drflmodel.solvers.scaffpd.dual_ascent` and
:func:`~drflmodel.solvers.scaffpd.normalized_control`, ``DRFA.server_step``,
``StochasticAFL.server_step``, ``RFedFair.sample_clients`` / ``server_step``; rFedFair's
:math:`\eta_0` is the solver module's ``hcvar_eta``). What is written here is the exchange of
each round -- who receives what, and the aggregation of the replies with fault handling
(:func:`~drflmodel.flower._exchange.combine`) -- and, for FedAvg, FedProx, Scaffold and q-FedAvg,
their one-line model update (the papers' equations cited per class), keeping the simulator's
state keys, so the :class:`~drflmodel.solvers.Trace` of a Flower run records the same iterates.

Messages per round (the simulator's ``Trace.info["comm_schedule"]``, checked by the tests):

=============  =========================================================================
ScaffPD, -IA   ``model`` ↓, ``losses+controls`` ↑, ``control`` ↓, ``update`` ↑
DRFA           ``model`` ↓, ``models+snapshots`` ↑, ``snapshot`` ↓, ``losses`` ↑ (sampled: to / from
               the distinct clients of :math:`D`, then the :math:`m` clients of :math:`U`)
StochasticAFL  ``model`` ↓, ``losses+gradients`` ↑ (sampled: ``model`` ↓ to :math:`D\cup U`,
               ``gradients`` ↑ from :math:`D`, ``losses`` ↑ from :math:`U`)
FedAvg         ``model`` ↓, ``update`` ↑
FedProx        ``model`` ↓, ``update`` ↑ (FedAvg's, with the proximal weight in the config)
Scaffold       ``model`` ↓, ``controls`` ↑, ``control`` ↓, ``update`` ↑ (option I)
QFedAvg        ``model`` ↓, ``delta+h`` ↑
RFedFair       (round 0 with ``eta0="quantile"``: ``model0`` ↓, ``loss0`` ↑), ``model+eta`` ↓, ``update`` ↑
FairVFL        ``scores+lambda`` ↓ (active), ``nu`` ↓ (passive), ``partial_scores`` ↑ (:mod:`.vertical`)
=============  =========================================================================

Faults: a client that fails (its ``ClientApp`` raised or did not reply) is dropped for the rest
of the round; aggregates use the participants with their weights scaled to the intended total
(:func:`~drflmodel.flower._exchange.combine`), and a missing loss keeps its last reported value
(:func:`~drflmodel.flower._exchange.losses_or_stale`). The trace records the participants and
drops the paper's rate claim for such a run.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError
from ..solvers.sampling import sample_by_weights, sample_uniform, sampling_probabilities
from ..solvers.scaffpd import dual_ascent, normalized_control
from ._exchange import Exchange, combine, losses_or_stale
from ._port import Port, batch_size
from .vertical import FairVFLPort, FedBCDPort

__all__ = ["PORTED", "port_for", "Port"]


def primal_dual_round(x, lam, L_prev, tau, sigma, extrap, J, global_step, ex: Exchange,
                      dual_step, normalize: bool, batch: int):
    r"""One Scaff-PD round on Flower (Scaff-PD paper, Algorithm 1 lines 3–11, Algorithm 2): the server part of
    :func:`drflmodel.solvers.scaffpd.primal_dual_round`.

    :math:`s=(1+\theta_r)L^r-\theta_rL^{r-1}`, :math:`\lambda^{r+1}=` ``dual_step``
    :math:`(\lambda^r+\sigma_rs,\sigma_r)`, :math:`c=\sum_i\lambda^{r+1}_ic_i` (normalized when
    :math:`\Lambda\not\subset\{\mathbf 1^\top\lambda=1\}`), local steps with
    :math:`\eta_\ell=\tau_r/(J\eta_g)` on the clients, :math:`x^{r+1}=x^r-\tau_r\sum_i\lambda^{r+1}_i\Delta u_i`.
    Returns ``(x_next, lam_next, L)``."""
    n = ex.n
    up = ex.send("train.losses_controls", {"model": x}, {"batch-size": batch})
    L = losses_or_stale(up, "losses", L_prev, n)
    lam_next = dual_ascent(lam, L, L_prev, sigma, extrap, dual_step)
    c = normalized_control(combine(lam_next, up, "controls", range(n)), lam_next, normalize)
    eta = tau / (J * global_step)
    du = ex.send("train.corrected_steps", {"control": c},
                 {"eta": eta, "steps": J, "batch-size": batch}, to=up)
    return x - tau * combine(lam_next, du, "update", range(n)), lam_next, L


class ScaffPDPort(Port):
    """:class:`~drflmodel.solvers.ScaffPD` (Scaff-PD paper, Algorithms 1–2, with the ergodic
    average of its Theorem E.6 recorded as ``theta_avg``)."""

    solver = "ScaffPD"
    handled = frozenset({"rounds", "local_steps", "schedule", "step_size", "dual_step",
                         "extrapolation", "global_step", "batch_size", "mu_x", "smoothness",
                         "lipschitz", "mu_lambda", "radius", "contraction", "conservative",
                         "control_variates", "lambda0", "local_step_size"})

    def check(self, solver):
        super().check(solver)
        if solver.params["control_variates"] is not True:
            raise InvalidParameterError(
                "ScaffPD(control_variates=False) (an ablation) is not ported to Flower; run it on "
                "the simulator")

    def round(self, r, state, ex, solver, rng):
        tau, sigma, ext = state["schedule"](r)
        x_next, lam_next, L = primal_dual_round(
            state["theta"], state["weights"], state["L_prev"], tau, sigma, ext, solver.local_steps,
            solver.global_step, ex, state["set"].prox, state["normalize"], batch_size(solver))
        return solver.server_step(r, state, x_next, lam_next, L, tau, sigma, ext)


class ScaffPDIAPort(Port):
    r""":class:`~drflmodel.solvers.ScaffPDIA` (relative-fairness paper, Algorithms 1–3): Scaff-PD's
    round with the dual step onto :math:`\Lambda_\varphi(A,B)` (the solver's ``dual``), negative
    aggregation weights, and the box projection :math:`\Pi_\Theta` of line 13."""

    solver = "ScaffPDIA"
    handled = frozenset({"rounds", "local_steps", "schedule", "step_size", "dual_step",
                         "extrapolation", "global_step", "regularization", "center", "batch_size",
                         "lipschitz", "radius"})

    def round(self, r, state, ex, solver, rng):
        tau, sigma, ext = state["schedule"](r)
        x_next, lam_next, L = primal_dual_round(
            state["theta"], state["weights"], state["L_prev"], tau, sigma, ext, solver.local_steps,
            state["beta"], ex, state["dual"], False, batch_size(solver))
        return solver.server_step(r, state, x_next, lam_next, L, tau, sigma, ext)


class DRFAPort(Port):
    r""":class:`~drflmodel.solvers.DRFA` (Deng et al. 2020, Alg. 1): the server draws
    :math:`t'\sim\mathrm{Unif}\{1..J\}` from its own generator (the simulator's order),
    :math:`\theta^{r+1}=\sum_i\lambda_iu_{i,J}`, :math:`\bar\theta'=\sum_i\lambda_iu_{i,t'}`,
    :math:`\lambda^{r+1}=\operatorname{prox}_{\gamma J\psi}(\lambda+\gamma Jf(\bar\theta'))`. With
    ``clients_per_round=m`` the paper's sampling, drawn by the server in the simulator's order:
    :math:`D` (:math:`m` draws by :math:`\lambda`), :math:`t'`, then :math:`U` (:math:`m` distinct);
    only those clients receive messages (:func:`_sampled_round`)."""

    solver = "DRFA"
    handled = frozenset({"rounds", "local_steps", "step_size", "dual_step", "batch_size", "lambda0",
                         "clients_per_round"})

    def round(self, r, state, ex, solver, rng):
        J, lam, x = solver.local_steps, state["weights"], state["theta"]
        if solver.clients_per_round is None:
            t_snap = int(rng.integers(1, J + 1))
            up = ex.send("train.local_sgd", {"model": x},
                         {"eta": state["eta"], "steps": J, "snapshot": t_snap, "batch-size": batch_size(solver)})
            x_next = combine(lam, up, "models", range(ex.n))
            x_snap = combine(lam, up, "snapshots", range(ex.n))
            losses = ex.send("query.loss", {"snapshot": x_snap}, {"reply": "losses"}, to=up)
            L = losses_or_stale(losses, "losses", state.get("_losses"), ex.n)
            state["_losses"] = L
        else:
            x_next, L = self._sampled_round(state, ex, solver, rng)
        return solver.server_step(r, state, x_next, L)

    @staticmethod
    def _sampled_round(state, ex, solver, rng):
        r"""``(x_next, v)``: :math:`\frac1m\sum_{k\in D}u_{k,J}` and
        :math:`v=\frac nm(f_i(\bar\theta')\mathbb 1[i\in U])_i` (the simulator's ``_sampled_round``)."""
        J, m, n = solver.local_steps, solver.clients_per_round, ex.n
        mult, D = sample_by_weights(rng, sampling_probabilities(state["weights"]), m)
        t_snap = int(rng.integers(1, J + 1))
        up = ex.send("train.local_sgd", {"model": state["theta"]},
                     {"eta": state["eta"], "steps": J, "snapshot": t_snap, "batch-size": batch_size(solver)},
                     to=D)
        x_next = combine(mult / m, up, "models", D)
        x_snap = combine(mult / m, up, "snapshots", D)
        U = sample_uniform(rng, n, m)
        losses = ex.send("query.loss", {"snapshot": x_snap}, {"reply": "losses"}, to=U)
        state["sampled"] = mult
        state["loss_clients"] = np.isin(np.arange(n), U).astype(float)
        return x_next, _unbiased_losses(losses, n, m)


def _unbiased_losses(replies: dict, n: int, m: int) -> np.ndarray:
    """:math:`v_i=\frac nmf_i` for the clients that replied, 0 elsewhere."""
    v = np.zeros(n)
    for i, arrays in replies.items():
        v[i] = (n / m) * float(np.ravel(arrays["losses"])[0])
    return v


class StochasticAFLPort(Port):
    r""":class:`~drflmodel.solvers.StochasticAFL` (Mohri et al. 2019, Alg. 1): one exchange per round,
    :math:`\theta^{r+1}=\theta^r-\gamma^\theta_r\sum_i\lambda_ig_i`,
    :math:`\lambda^{r+1}=\operatorname{prox}(\lambda+\gamma^\lambda_rf)`; with ``clients_per_round=m``
    the server draws :math:`D` (by :math:`\lambda`) then :math:`U` (uniform) from its generator and
    sends the model to :math:`D\cup U` only: clients of :math:`D` return a gradient, of :math:`U` a
    loss (a client in both, both -- counted as two messages, as in the simulator)."""

    solver = "StochasticAFL"
    handled = frozenset({"rounds", "step_size", "dual_step", "decay", "batch_size", "lambda0",
                         "clients_per_round"})

    def round(self, r, state, ex, solver, rng):
        lam, m, n, x = state["weights"], solver.clients_per_round, ex.n, state["theta"]
        config = {"batch-size": batch_size(solver)}
        if m is None:
            up = ex.send("train.loss_gradient", {"model": x}, config)
            v = losses_or_stale(up, "losses", state.get("_losses"), n)
            state["_losses"] = v
            g = combine(lam, up, "gradients", range(n))
        else:
            mult, D = sample_by_weights(rng, sampling_probabilities(lam), m)
            U = sample_uniform(rng, n, m)
            inD, inU = set(D.tolist()), set(U.tolist())
            want = {int(i): {"want": "both" if i in inD and i in inU else ("gradient" if i in inD else "loss")}
                    for i in np.union1d(D, U)}
            up = ex.send("train.loss_gradient", {"model": x}, config, to=sorted(want), per_client=want,
                         by_array=("gradients", "losses"))
            g = combine(mult / m, {i: up[i] for i in D if i in up}, "gradients", D)
            v = _unbiased_losses({i: up[i] for i in U if i in up}, n, m)
            state["sampled"] = mult
            state["loss_clients"] = np.isin(np.arange(n), U).astype(float)
        return solver.server_step(r, state, x, g, v)


class FedAvgPort(Port):
    r""":class:`~drflmodel.solvers.FedAvg`: :math:`\theta^{r+1}=\theta^r-\eta_g\sum_ip_i(\theta^r-u_{i,J})`."""

    solver = "FedAvg"
    handled = frozenset({"rounds", "local_steps", "step_size", "global_step", "batch_size"})

    def round(self, r, state, ex, solver, rng):
        x = state["theta"]
        up = ex.send("train.local_sgd", {"model": x},
                     {"eta": state["eta"], "steps": solver.local_steps, "batch-size": batch_size(solver)})
        state["theta"] = x - solver.global_step * combine(state["weights"], up, "update", range(ex.n))
        return state


class FedProxPort(Port):
    r""":class:`~drflmodel.solvers.FedProx` (Li et al. 2020, Algorithm 2, full participation):
    FedAvg's exchange with :math:`\mu` in the config; :math:`\theta^{r+1}=\theta^r-\sum_ip_i(\theta^r-u_{i,J})`."""

    solver = "FedProx"
    handled = frozenset({"rounds", "mu", "local_steps", "step_size", "batch_size"})

    def round(self, r, state, ex, solver, rng):
        x = state["theta"]
        up = ex.send("train.local_sgd", {"model": x},
                     {"eta": state["eta"], "steps": solver.local_steps, "mu": solver.mu,
                      "batch-size": batch_size(solver)})
        state["theta"] = x - combine(state["weights"], up, "update", range(ex.n))
        return state


class ScaffoldPort(Port):
    r""":class:`~drflmodel.solvers.Scaffold` with control variates option I (Karimireddy et al.
    2020, Algorithm 1): :math:`c_i=g_i(\theta^r)` up, :math:`c=\sum_ip_ic_i` down, corrected
    local steps, :math:`\theta^{r+1}=\theta^r+\eta_g\sum_ip_i(u_{i,J}-\theta^r)`. The client
    replies :math:`\Delta u_i=(\theta^r-u_{i,J})/(\eta_\ell J)` (Scaff-PD's operation), so the
    server uses :math:`u_{i,J}-\theta^r=-\eta_\ell J\Delta u_i`."""

    solver = "Scaffold"
    handled = frozenset({"rounds", "local_steps", "step_size", "global_step", "control", "batch_size"})

    def check(self, solver):
        super().check(solver)
        if solver.control != "gradient":
            raise InvalidParameterError(
                "Scaffold(control='local') (option II: each client keeps its control variate between "
                "rounds) is not ported to Flower; run it on the simulator or use control='gradient'")

    def round(self, r, state, ex, solver, rng):
        x, p, eta, J = state["theta"], state["weights"], state["eta"], solver.local_steps
        up = ex.send("train.controls", {"model": x}, {"batch-size": batch_size(solver)})
        c = combine(p, up, "controls", range(ex.n))
        du = ex.send("train.corrected_steps", {"control": c},
                     {"eta": eta, "steps": J, "batch-size": batch_size(solver)}, to=up)
        state["theta"] = x - solver.global_step * (eta * J) * combine(p, du, "update", range(ex.n))
        return state


class QFedAvgPort(Port):
    r""":class:`~drflmodel.solvers.QFedAvg` (Li, Sanjabi, Beirami, Smith 2020, Algorithm 2): each
    client weights its own update by its own loss; :math:`w^{r+1}=w^r-\sum_i\Delta_i/\sum_ih_i`.
    The recorded weights :math:`F_i^q` come back as record-only diagnostics (not counted)."""

    solver = "QFedAvg"
    handled = frozenset({"rounds", "local_steps", "lipschitz", "batch_size"})

    def round(self, r, state, ex, solver, rng):
        x = state["theta"]
        up = ex.send("train.q_weighted_steps", {"model": x},
                     {"lipschitz": state["L"], "q": state["q"], "steps": solver.local_steps,
                      "batch-size": batch_size(solver)})
        ones = np.ones(ex.n)
        h = float(combine(ones, up, "h", range(ex.n))[0])
        state["theta"] = x - combine(ones, up, "delta", range(ex.n)) / h
        state["weights"] = losses_or_stale(up, "weight", state["weights"], ex.n)
        return state


class RFedFairPort(Port):
    r""":class:`~drflmodel.solvers.RFedFair` (FAFL paper, Algorithm 1): clients step
    on :math:`\hat f^{\mu,i}` (exact loss in the sigmoid weight; the gradient exact, or a minibatch
    from the client's own generator when the solver has a ``batch_size``); the server averages :math:`(\omega,\eta)` with weights :math:`p_i`
    (full) or the multiplicities of :math:`K` draws with replacement by :math:`p` (partial,
    drawn by the solver's ``sample_clients`` from the server's generator), and keeps the ergodic
    averages of Theorem 1 (the solver's ``server_step``)."""

    solver = "RFedFair"
    handled = frozenset({"rounds", "mu", "iterations", "local_steps", "participation",
                         "clients_per_round", "step_size", "lipschitz", "eta0", "batch_size"})

    def round(self, r, state, ex, solver, rng):
        from ..solvers.rfedfair import hcvar_eta

        if r == 0 and state["eta"] is None:
            if solver.params["eta0"] == "quantile":
                f0 = ex.send("query.loss", {"model0": state["theta"]}, {"reply": "loss0"})
                state["eta"] = hcvar_eta(losses_or_stale(f0, "loss0", None, ex.n), state["cap"])
            else:
                state["eta"] = float(solver.params["eta0"])
            state["info"]["eta0"] = state["eta"]
        weights, members, mult = solver.sample_clients(state, ex.n, rng)
        config = {"steps": 1 if r == 0 else solver.local_steps, "beta": state["beta"], "mu": solver.mu,
                  "batch-size": batch_size(solver)}
        per_client = {int(i): {"alpha": float(state["alpha"][i])} for i in members}
        up = ex.send("train.smoothed_steps", {"model+eta": np.append(state["theta"], state["eta"])},
                     config, to=members, per_client=per_client)
        return solver.server_step(r, state, combine(weights, up, "update", members), mult)


#: simulator solver name -> its Flower port
PORTED: dict[str, Port] = {p.solver: p for p in (ScaffPDPort(), ScaffPDIAPort(), DRFAPort(),
                                                   StochasticAFLPort(), FedAvgPort(), FedProxPort(),
                                                   ScaffoldPort(), QFedAvgPort(), RFedFairPort(),
                                                   FairVFLPort(), FedBCDPort())}


def port_for(solver) -> Port:
    """The Flower port of a simulator solver instance (raises for solvers not ported)."""
    name = type(solver).__name__
    if name not in PORTED:
        raise InvalidParameterError(
            f"{name} is not ported to Flower; ported: {', '.join(sorted(PORTED))} "
            "(run it on the simulator, or grade any Flower strategy with drflmodel.flower.Recorder)")
    port = PORTED[name]
    port.check(solver)
    return port
