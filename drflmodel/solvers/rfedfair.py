r"""rFedFair (FAFL paper, Algorithm 1 of §4; Theorems 1–2 of §5.1 and Appendices C–D).

Runs on a :class:`~drflmodel.problems.minmax.fafl.FairnessAwareFL` and minimizes the **smoothed**
objective of problem (5),

.. math::

    F^\mu_\alpha(\omega,\eta)=\sum_ip_i\hat f^{\mu,i}(\omega,\eta),\qquad
    \hat f^{\mu,i}(\omega,\eta)=\frac1{\alpha_i}\phi_\mu\big(f_i(\omega)-\eta\big)+\eta,\qquad
    \phi_\mu(x)=\mu\log(1+e^{x/\mu}),

whose minimizer is ``problem.solve_smoothed(mu)``; by Lemma 2,
:math:`F_\alpha\le F^\mu_\alpha\le F_\alpha+\mu\tau_\alpha`. Client *i*'s local gradients (the paper's §4),
with :math:`s_i=\mathrm{sigmoid}((f_i(\omega)-\eta)/\mu)`:
:math:`\nabla_\omega\hat f^{\mu,i}=\frac{s_i}{\alpha_i}\nabla f_i(\omega)`,
:math:`\nabla_\eta\hat f^{\mu,i}=1-\frac{s_i}{\alpha_i}`.

**Iteration timing** (Algorithm 1, its branch "if t does not divide :math:`\kappa`" read as
"if :math:`t\bmod\kappa\ne0`", the only reading consistent with its output and Lemma C.3). There are
:math:`T` iterations :math:`t=0,\dots,T-1` with :math:`T-2` divisible by :math:`\kappa`, and
:math:`T_N=(T-2)/\kappa`. The server averages at :math:`t\in\{0,\kappa,\dots,T_N\kappa\}`, producing
the synchronized iterates :math:`\omega_1,\omega_{\kappa+1},\dots,\omega_{T_N\kappa+1}=\omega_{T-1}`.
So the run has :math:`R=T_N+1` communication rounds (``Trace.rounds``):

* round 0: every selected client takes **one** step from :math:`(\omega_0,\eta_0)` and uploads it;
* round :math:`r\ge1`: every selected client starts from the broadcast
  :math:`(\omega_{(r-1)\kappa+1},\eta_{(r-1)\kappa+1})`, takes :math:`\kappa` gradient steps
  (:math:`\kappa-1` local ones and the step of line 8) and uploads the last one;
* the step at :math:`t=T-1` is a local step whose result is never used; it is not computed.

``Trace.theta[r+1]`` is :math:`\omega_{r\kappa+1}`; the algorithm's output, the ergodic average
:math:`\tilde\omega_T=\frac1{T_N+1}\sum_{r=0}^{T_N}\omega_{r\kappa+1}` (Theorem 1), is
``Trace.iterates["theta_avg"][-1]`` (and ``Trace.info["theta_ergodic"]``).

**Aggregation** (:math:`\eta` is a global scalar, averaged with the same weights as
:math:`\omega`):

* ``participation="full"`` (Strategy 1): :math:`Z=[n]`, weights :math:`p_i`;
* ``participation="partial"`` (Strategy 2): :math:`Z` = ``clients_per_round`` (:math:`K`) i.i.d.
  draws from :math:`p` **with replacement** (``runtime.rng.choice``), each draw with weight
  :math:`1/K` -- a client drawn twice counts twice in the average (Proposition 2:
  :math:`\mathbb E_Z[\frac1K\sum_{i\in Z}e_i]=\sum_ip_ie_i`). Only the distinct clients of
  :math:`Z` receive the model and upload (the practical version; the analysis lets every client compute,
which is equivalent in distribution; with deterministic
  local steps a client drawn twice computes the same update, sends it once, and the server
  counts it with its multiplicity). :math:`Z_r` is drawn at the start of round *r* (i.e. at line 11
  of round *r-1*), with :math:`Z_0` drawn first.

Vectorization: the local steps of all clients are one array operation per step (stacked
``(n, d)`` iterates through :class:`~drflmodel.solvers._base.ClientRuntime`); row *i* reads only
client *i*'s data. Under partial participation the non-selected rows are computed and
discarded (same result as computing only the rows of :math:`Z`, since every selected client
starts from the broadcast model).

**Communication** (per round, counted by the runtime): server → each client of :math:`Z` the
pair :math:`(\omega,\eta)` (:math:`d+1` floats); each client of :math:`Z` → server its uploaded
pair (:math:`d+1` floats). With ``eta0="quantile"`` (default), round 0 additionally has a setup
exchange: the model :math:`\omega_0` to every client, one loss :math:`f_i(\omega_0)` back, from
which the server sets :math:`\eta_0` to the minimizer of :math:`\eta+\sum_ic_i(f_i(\omega_0)-\eta)_+`
(the :math:`(1-1/\tau_\alpha)`-quantile of the losses under :math:`P_\alpha`; the paper does not say how to initialize :math:`\eta`).

**Step size** (the paper leaves it unspecified): ``step_size="theory"`` (default) is
:math:`\beta=\min\{\frac1{40L},\frac1{\sqrt6L(\kappa-1)}\}` (full) or
:math:`\min\{\frac1{20L(3\kappa/K+2)},\frac1{\sqrt6L(\kappa-1)}\}` (partial), the conditions of
Theorems 1/2, with Lemma C.1's :math:`L=(L_1+\frac{L_2^2+1}\mu)\max_i\frac1{\alpha_i}`:
:math:`L_1=\max_i` smoothness of :math:`f_i` (``problem.objectives.smoothness()``) and
:math:`L_2` a Lipschitz constant of every :math:`f_i`: by default
:math:`\mathrm{lip}(l)\cdot\max_i\frac1{m_i}\sum_j\|x_{ij}\|` (needs a globally Lipschitz loss and
``l2 = 0``; otherwise pass ``lipschitz=``). These constants are computed once, before the first
round (each client reports its own; not counted as communication). A float ``step_size`` is
used as given (no theorem then).

**Minibatch local steps** (``batch_size=b``, default ``None``: exact gradients, the theorems'
setting; minibatches are outside Theorems 1–2). Each local step of client *i* uses its exact loss :math:`f_i(\omega)` (one
pass over its rows, for the weight :math:`s_i`) and an unbiased minibatch gradient
:math:`g_i(\omega)` of :math:`b` rows drawn uniformly with replacement from client *i*'s own
generator (:func:`~drflmodel.objectives.minibatch_indices`; under partial participation only the
clients of :math:`Z` draw, and a client drawn twice runs one stochastic trajectory, counted with
its multiplicity):

.. math:: \omega\leftarrow\omega-\beta\frac{s_i}{\alpha_i}g_i(\omega),\qquad
          \eta\leftarrow\eta-\beta\Big(1-\frac{s_i}{\alpha_i}\Big).

So the step is an unbiased estimate of the exact local step and the fixed point of its mean is
the smoothed optimum; the iterates settle in a neighbourhood of it whose size shrinks with
:math:`\beta/b`. (Using the minibatch loss in :math:`s_i` as well, as autograd on a minibatch
would, biases the step by :math:`O(1/b)` through the non-linearity of the sigmoid; it is not
offered.) This configuration is outside Theorems 1–2, so the trace's ``expected_rate`` is
``None``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._validation import check_choice, check_int, check_real
from ..errors import InvalidParameterError
from ._base import Solver, check_batch_size, check_step
from .sampling import sample_by_weights

__all__ = ["RFedFair", "rfedfair_constants", "iterations_to_rounds"]

_FAFL = ("drflmodel.problems.minmax.fafl:FairnessAwareFL",)


def iterations_to_rounds(iterations: int, local_steps: int) -> int:
    r"""Number of communication rounds :math:`T_N+1` of Algorithm 1 with :math:`T` iterations and
    :math:`\kappa` local steps; raises unless :math:`T\ge2` and :math:`\kappa\mid T-2`."""
    T = check_int(iterations, "iterations", low=2)
    k = check_int(local_steps, "local_steps", low=1)
    if (T - 2) % k:
        raise InvalidParameterError(
            f"iterations - 2 must be divisible by local_steps (Algorithm 1 needs T - 2 = T_N * kappa); "
            f"got iterations={T}, local_steps={k}: nearest valid values are "
            f"{2 + k * ((T - 2) // k)} and {2 + k * ((T - 2) // k + 1)}")
    return (T - 2) // k + 1


def rfedfair_constants(problem, mu: float, lipschitz: float | None = None) -> dict:
    r"""The constants of the FAFL paper's Lemma C.1: ``{"L1", "L2", "L", "L_global", "tau_alpha"}``.

    :math:`L=(L_1+\frac{L_2^2+1}\mu)\max_i\alpha_i^{-1}` (every client's objective) and
    :math:`L_{\rm global}=(L_1+\frac{L_2^2+1}\mu)\tau_\alpha` (the averaged objective)."""
    obj = problem.objectives
    L1 = float(np.max(obj.smoothness()))
    if not np.isfinite(L1):
        raise InvalidParameterError(
            f"the loss {problem.loss!r} is not smooth (L1 = inf): Theorems 1-2 (Assumption 1) need a "
            "smooth loss; use a smooth loss or a float step_size")
    if lipschitz is None:
        lip = float(problem.loss.lipschitz)
        if not np.isfinite(lip) or problem.l2 > 0:
            raise InvalidParameterError(
                "step_size='theory' needs the Lipschitz constant L2 of every f_i (Assumption 2); it is "
                f"computed only for a globally Lipschitz loss with l2 = 0 (got loss={problem.loss!r}, "
                f"l2={problem.l2}); pass lipschitz= (L2 on the region of the iterates) or a float step_size")
        # client i reports lip * mean_j ||x_ij|| (a Lipschitz constant of its mean loss)
        L2 = lip * max(float(np.mean(np.linalg.norm(c.X, axis=1))) for c in problem.federation.clients)
    else:
        L2 = check_step(lipschitz, "lipschitz")
    base = L1 + (L2 * L2 + 1.0) / mu
    return {"L1": L1, "L2": float(L2), "L": float(base * np.max(1.0 / problem.alpha)),
            "L_global": float(base * problem.tau_alpha), "tau_alpha": float(problem.tau_alpha)}


def theory_step(L: float, local_steps: int, clients_per_round: int | None) -> float:
    """The largest step the FAFL paper's Theorem 1 / Theorem 2 allow."""
    k = local_steps
    if clients_per_round is None:
        beta = 1.0 / (40.0 * L)
    else:
        beta = 1.0 / (20.0 * L * (3.0 * k / clients_per_round + 2.0))
    if k > 1:
        beta = min(beta, 1.0 / (np.sqrt(6.0) * L * (k - 1)))
    return float(beta)


def hcvar_eta(losses, cap) -> float:
    r"""A minimizer of :math:`\eta+\sum_ic_i(f_i-\eta)_+` : the loss of the client at
    which the greedy mass (clients by decreasing loss, caps :math:`c_i`) reaches 1."""
    f = np.asarray(losses, float)
    order = np.argsort(-f, kind="stable")
    mass = np.cumsum(np.asarray(cap, float)[order])
    j = int(np.searchsorted(mass, 1.0 - 1e-15))
    return float(f[order[min(j, f.size - 1)]])


class RFedFair(Solver):
    r"""rFedFair (FAFL Algorithm 1) on a :class:`~drflmodel.problems.minmax.fafl.FairnessAwareFL`.

    Parameters
    ----------
    mu : smoothing :math:`\mu>0` of :math:`\phi_\mu` (choose :math:`\mu\tau_\alpha\le\epsilon/2` for an :math:`\epsilon`-accurate FAFL value, by Lemma 2).
    iterations : total iterations :math:`T\ge2` with :math:`\kappa\mid T-2`; the run has
        :math:`T_N+1=(T-2)/\kappa+1` communication rounds. Give ``iterations`` or ``rounds``
        (then :math:`T=(\text{rounds}-1)\kappa+2`), not both.
    rounds : number of communication rounds :math:`T_N+1\ge1`.
    local_steps : :math:`\kappa\ge1` (the theorems' bounds need :math:`\kappa\ge2`).
    participation : ``"full"`` or ``"partial"``.
    clients_per_round : :math:`K\ge1` clients sampled with replacement by :math:`p` (partial only).
    step_size : ``"theory"`` (module docstring) or a float :math:`\beta>0`.
    lipschitz : override :math:`L_2` of the FAFL paper's Lemma C.1 (``step_size="theory"`` only).
    eta0 : ``"quantile"`` (default; see the module docstring) or a float :math:`\eta_0`.
    batch_size : ``None`` (exact local gradients, default) or the minibatch size :math:`b\ge1` of
        the local gradients (module docstring).

    ``run(problem, seed, callback, theta0)``: ``theta0`` is :math:`\omega_0` (default 0).
    Recorded per round: ``eta`` (:math:`\eta_{r\kappa+1}`), ``theta_avg`` / ``eta_avg`` (the
    running ergodic averages), ``participants`` (multiplicity of each client in :math:`Z_r`).
    """

    problem_types = _FAFL
    record = ("eta", "theta_avg", "eta_avg", "participants")
    expected_rate = "sublinear"

    def __init__(self, mu: float = 0.01, iterations: int | None = None, rounds: int | None = None,
                 local_steps: int = 10, participation: str = "full",
                 clients_per_round: int | None = None, step_size="theory",
                 lipschitz: float | None = None, eta0="quantile", batch_size: int | None = None):
        k = check_int(local_steps, "local_steps", low=1)
        if iterations is not None and rounds is not None:
            raise InvalidParameterError("give iterations (T) or rounds (T_N + 1), not both")
        if iterations is None and rounds is None:
            iterations = 2 + k * 99                      # 100 rounds
        if iterations is not None:
            n_rounds = iterations_to_rounds(iterations, k)
            T = int(iterations)
        else:
            n_rounds = check_int(rounds, "rounds", low=1)
            T = (n_rounds - 1) * k + 2
        super().__init__(rounds=n_rounds, mu=mu, iterations=T, local_steps=k,
                         participation=participation, clients_per_round=clients_per_round,
                         step_size=step_size, lipschitz=lipschitz, eta0=eta0,
                         batch_size=batch_size)

    def _validate(self):
        p = self.params
        self.mu = check_real(p["mu"], "mu", low=0.0, low_open=True)
        self.local_steps = p["local_steps"]
        self.iterations = p["iterations"]
        self.participation = check_choice(p["participation"], "participation", ("full", "partial"))
        if self.participation == "partial":
            if p["clients_per_round"] is None:
                raise InvalidParameterError("participation='partial' needs clients_per_round (K >= 1)")
            self.K = check_int(p["clients_per_round"], "clients_per_round", low=1)
        else:
            if p["clients_per_round"] is not None:
                raise InvalidParameterError(
                    "clients_per_round is used only with participation='partial'")
            self.K = None
        if isinstance(p["step_size"], str):
            check_choice(p["step_size"], "step_size", ("theory",))
        else:
            check_step(p["step_size"], "step_size")
        if p["lipschitz"] is not None:
            check_step(p["lipschitz"], "lipschitz")
        if isinstance(p["eta0"], str):
            check_choice(p["eta0"], "eta0", ("quantile",))
        else:
            check_real(p["eta0"], "eta0")
        self.batch_size = check_batch_size(p["batch_size"])

    # ------------------------------------------------------------------ hooks
    def _initialize(self, problem, runtime, theta0):
        p = self.params
        info = {"T": self.iterations, "T_N": self.rounds - 1, "kappa": self.local_steps,
                "mu": self.mu, "tau_alpha": float(problem.tau_alpha),
                "smoothing_bias_bound": self.mu * float(problem.tau_alpha)}
        if p["step_size"] == "theory":
            const = rfedfair_constants(problem, self.mu, p["lipschitz"])
            beta = theory_step(const["L"], self.local_steps, self.K)
            info.update(const)
        else:
            beta = float(p["step_size"])
        info["step_size"] = beta
        state = {} if self.batch_size is None else {"expected_rate": None}   # outside Theorems 1-2
        return {**state, "theta": theta0, "eta": None, "beta": beta, "info": info,
                "p": np.asarray(problem.p, float), "alpha": np.asarray(problem.alpha, float),
                "cap": np.asarray(problem.cap, float),
                "theta_avg": theta0.copy(), "eta_avg": 0.0, "_n": 0,
                "participants": np.zeros(problem.n_clients)}

    def sample_clients(self, state, n: int, rng: np.random.Generator):
        """The round's participants, drawn by the server from ``rng`` (the simulator's and the
        Flower port's): ``(weights of the average, distinct participants, multiplicities)`` --
        every client with its :math:`p_i` under full participation, else :math:`K` draws with
        replacement by :math:`p`, weighted by their multiplicities over :math:`K`."""
        if self.K is None:
            return state["p"], np.arange(n), np.ones(n)
        mult, members = sample_by_weights(rng, state["p"], self.K)
        return mult / self.K, members, mult

    def server_step(self, r, state, avg, mult):
        r"""Round *r*'s server step from the participants' average ``avg`` of
        :math:`(\omega,\eta)` (the simulator's and the Flower port's): the new model and
        :math:`\eta`, the participants' multiplicities ``mult``, the ergodic averages of Theorem 1
        (copied into ``info`` after the last round)."""
        theta, eta = avg[:-1], float(avg[-1])
        k = state["_n"] + 1
        state.update(theta=theta, eta=eta, _n=k, participants=mult,
                     theta_avg=state["theta_avg"] * ((k - 1) / k) + theta / k if k > 1 else theta.copy(),
                     eta_avg=state["eta_avg"] * ((k - 1) / k) + eta / k if k > 1 else eta)
        if r == self.rounds - 1:
            state["info"].update(theta_ergodic=state["theta_avg"], eta_ergodic=state["eta_avg"])
        return state

    def _local_step(self, U, e, beta, alpha, runtime, clients=None):
        """One gradient step of every client on :math:`\\hat f^{\\mu,i}` (stacked, vectorized);
        exact or minibatch gradients (``runtime.batch_size``); ``clients``: the participants."""
        f = runtime.losses(U)
        G = runtime.gradients(U, clients=clients)
        s = expit((f - e) / self.mu)
        a = s / alpha
        return U - beta * a[:, None] * G, e - beta * (1.0 - a)

    def _round(self, r, state, runtime):
        n, beta, alpha = runtime.n, state["beta"], state["alpha"]
        if r == 0 and state["eta"] is None:
            if self.params["eta0"] == "quantile":
                w0 = runtime.broadcast("model0", state["theta"])
                f0 = runtime.upload(loss0=runtime.losses(w0))
                state["eta"] = hcvar_eta(f0, state["cap"])
            else:
                state["eta"] = float(self.params["eta0"])
            state["info"]["eta0"] = state["eta"]
        weights, members, mult = self.sample_clients(state, runtime.n, runtime.rng)
        m = members.size
        sent = runtime.broadcast("model+eta", np.append(state["theta"], state["eta"]), receivers=m)
        U = np.array(np.broadcast_to(sent[:-1], (n, sent.size - 1)))
        e = np.full(n, sent[-1])
        for _ in range(1 if r == 0 else self.local_steps):
            U, e = self._local_step(U, e, beta, alpha, runtime,
                                    clients=None if self.K is None else members)
        up = runtime.upload(senders=members, update=np.column_stack([U[members], e[members]]))
        return self.server_step(r, state, runtime.aggregate(weights[members], up), mult)
