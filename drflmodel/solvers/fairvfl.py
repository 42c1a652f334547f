r"""Fair VFL gradient descent–ascent (Liu et al., Algorithms 1–3) and the FedBCD baseline.

The fair-VFL paper (Liu, Fan, Zhou, Shi, Pei, Chu and Zhang, arXiv:2109.08344): the regularized
Lagrangian (6), the updates (8)–(12), Algorithms 1–3 and Theorem 2; where the algorithms' indexing
disagrees with equations (10)–(11), the equations are followed. Runs on a :class:`~drflmodel.problems.deo.DEOConstrained` over a vertical federation of
:math:`K` parties (party *k* holds the feature block :math:`X^k` and :math:`\theta_k`; the active
parties also hold :math:`y`, the groups and the loss; the server holds :math:`y` and the groups).

Regularized Lagrangian (paper (6), with :math:`c_t\ge0`):
:math:`\tilde f_t(\theta,\lambda)=L(\theta)+\lambda_1(D(\theta)-\varepsilon)-\lambda_2(D(\theta)+\varepsilon)
-\frac{c_t}2\|\lambda\|^2`.

**One round** :math:`t=0,1,\dots`:

S1. every party uploads its partial scores :math:`p^k=X^k\theta_k^{(t)}` (:math:`n` floats); the
    server forms :math:`z^{(t)}=\sum_kp^k`;
S2. if :math:`t\ge1`: :math:`\lambda^{(t)}=[\lambda^{(t-1)}+\beta\nabla_\lambda\tilde f_{t-1}(\theta^{(t)},\lambda^{(t-1)})]_+`
    (paper (8), (10), with :math:`c_{t-1}`); :math:`\lambda^{(0)}=0` (Algorithm 1);
S3. server → active parties :math:`(z^{(t)},\lambda^{(t)})` (:math:`n+2` floats); server → passive
    parties :math:`\nu^{(t)}=\partial f/\partial z` (paper (12), :math:`n` floats). **Passive parties
    never receive labels, groups,** :math:`\lambda` **or scores** -- only :math:`\nu`;
S4a. passive party *k*: one step
    :math:`\theta_k^{(t+1)}=\theta_k^{(t)}-\eta_t^{-1}((X^k)^\top\nu^{(t)}+\ell_2\theta_k^{(t)})`
    (``PartyView.block_gradient``), or with ``passive_steps`` :math:`=P>1` (the paper's theory
    allows every party up to :math:`Q` updates per round; its algorithms give passive parties one),
    :math:`P` steps :math:`\theta_k\leftarrow\theta_k-\eta_t^{-1}((X^k)^\top\nu^{(t)}+\ell_2\theta_k)`
    with the round's :math:`\nu^{(t)}`: the passive party cannot recompute :math:`\nu` (it holds
    no labels, groups or loss), so its data term is the stale read at :math:`z^{(t)}` (its own
    block is fresh only in the regularizer); nothing more is communicated. The fixed points are
    unchanged: a block is fixed by the :math:`P`-step map iff its gradient
    :math:`(X^k)^\top\nu+\ell_2\theta_k` vanishes;
S4b. active party *k*: :math:`q_k^{(t)}\in\{1,\dots,Q\}` local steps on the "inconsistent read"
    :math:`z^{(t)}+X^k(\theta_k-\theta_k^{(t)})` with :math:`\lambda^{(t)}` fixed (the
    active party cannot see the other blocks between messages; ``PartyView.local_scores`` / ``local_gradient``). :math:`q_k^{(t)}=Q` (``local_schedule="fixed"``)
    or uniform in :math:`\{1,\dots,Q\}` (``"random"``, seeded).

:math:`\eta_t` is an **inverse** step size, as in the paper (:math:`\eta_t=100` is a step of 0.01), and :math:`\beta` a forward dual step.

**Asynchrony** (deterministic given the seed): with ``update_prob`` :math:`=p<1`, at every round each
party independently (``runtime.rng``) is *delayed* with probability :math:`1-p`: it receives
nothing and keeps :math:`\theta_k^{(t+1)}=\theta_k^{(t)}`; it still reports its (unchanged) partial
scores at S1, so the server always uses the latest products. Together with the random
:math:`q_k^{(t)}` this gives runs satisfying Assumption 1 for the parties that update. The
parties are processed one after another (different block widths; each step is an
:math:`n\times m_k` array operation), not in one stacked array.

**Schedules**: ``c`` is a float :math:`\ge0` (constant :math:`c_t=c`; 0 gives the unregularized
Lagrangian) or ``"decreasing"``: :math:`c_t=\frac\beta2\max(t,1)^{-1/4}` (Theorem 2's :math:`c_t`, which is undefined at :math:`t=0`).
``eta_inv`` is a float (constant :math:`\eta_t`) or ``"theory"``: Theorem 2's lower bound
:math:`\eta_t=\frac{L^2(KQ+2)(KQ-1)+2(L+1)}4+\frac{L_{12}^2KQ(1+32\tau\sqrt{\max(t,1)})}{2\beta}`
with :math:`\tau=` ``tau_const`` :math:`>8`, :math:`Q=\max(` ``local_steps``, ``passive_steps`` :math:`)`
(the most updates a party makes in a round), :math:`L_{12}=\sqrt2\,\mathrm{Lip}(D_f)` and :math:`L`
the smoothness of :math:`\theta\mapsto f(\theta,\lambda)` -- computed for the affine (linear)
fairness loss only, where both are independent of :math:`\lambda` (computed once
before the first round as a setup step). ``preset="paper"`` is the paper's experiment
(:math:`c=10^{-3}`, :math:`\eta=100`, :math:`\beta=0.1`; constant steps, outside Theorem 2);
``preset="theory"`` is
``c="decreasing", eta_inv="theory"`` with :math:`\beta=0.1`; ``preset="lagrangian"`` is the
unregularized GDA (:math:`c\equiv0`, :math:`\eta=10`, :math:`\beta=0.5`).

**Limits**: with :math:`c\equiv0` the fixed points are the KKT pairs, so
:math:`\lambda^{(t)}\to` the oracle's ``duals["lambda1"], duals["lambda2"]`` and
:math:`\theta^{(t)}\to\theta^\star`; with constant :math:`c>0` the fixed point is the solution of
:math:`P_c` (``DEOConstrained(..., penalty_c=c)``) with :math:`\lambda_c=((D-\varepsilon)_+,(-D-\varepsilon)_+)/c`.

Recorded per round: ``lam`` (:math:`\lambda^{(t)}` used in round *t*), ``D`` (:math:`D_f(\theta^{(t)})`,
from the server's scores), ``c`` and ``eta_inv`` (:math:`c_t,\eta_t`), ``stationarity_gap``
(paper (13) at :math:`(\theta^{(t)},\lambda^{(t)})`; its :math:`\theta` block is the aggregate round
displacement times :math:`\eta_t`), ``updated`` (which parties updated). ``Trace.theta[t]`` is
:math:`\theta^{(t)}`; ``Trace.info["lam_final"]`` is :math:`\lambda` at the last iterate
(one more server step (10) at :math:`\theta^{(R)}`, no communication needed beyond S1 -- it is
not counted).

:class:`FedBCD` is the vertical ERM baseline (:math:`\varepsilon=\infty`, i.e. :math:`\lambda\equiv0`):
the same simulator without the dual step; passive parties receive
:math:`\nu=\frac1n\partial_zl(z,y)`.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_choice, check_int, check_real
from ..errors import InvalidParameterError
from ._base import Solver, check_step

__all__ = ["FairVFL", "FedBCD", "theory_eta"]

_DEO = ("drflmodel.problems.deo:DEOConstrained",)

PRESETS = {"paper": {"c": 1e-3, "eta_inv": 100.0, "beta": 0.1},
           "theory": {"c": "decreasing", "eta_inv": "theory", "beta": 0.1},
           "lagrangian": {"c": 0.0, "eta_inv": 10.0, "beta": 0.5}}


def vfl_constants(problem, dual: bool = True) -> dict:
    r""":math:`L` (smoothness of :math:`f(\cdot,\lambda)`) and :math:`L_{12}=\sqrt2\,\|\nabla D\|` for an
    affine fairness loss (for it both are independent of :math:`\lambda`)."""
    if dual and not problem.is_affine:
        raise InvalidParameterError(
            "eta_inv='theory' is computed for the linear (affine) fairness loss only: otherwise L grows "
            "with |lambda1 - lambda2|; pass a float eta_inv")
    s = float(problem.loss.smoothness)
    if not np.isfinite(s):
        raise InvalidParameterError(
            f"eta_inv='theory' needs a smooth objective loss (Assumption 2); got {problem.loss!r}")
    X = problem.X
    L = s * float(np.linalg.eigvalsh(X.T @ X / problem.n)[-1]) + problem.l2
    L12 = np.sqrt(2.0) * 0.5 * float(np.linalg.norm(problem.d)) if dual else 0.0  # D_lin = -<theta,d>/2
    return {"L": L, "L12": L12}


def theory_eta(t: int, L: float, L12: float, K: int, Q: int, beta: float, tau: float) -> float:
    """Theorem 2's lower bound on the inverse step :math:`\\eta_t` (with :math:`\\max(t,1)`)."""
    KQ = K * Q
    return ((L * L * (KQ + 2) * (KQ - 1) + 2.0 * (L + 1.0)) / 4.0
            + L12 * L12 * KQ * (1.0 + 32.0 * tau * np.sqrt(max(t, 1))) / (2.0 * beta))


class FairVFL(Solver):
    r"""Fair VFL (fair-VFL paper, Algorithms 1–3) on a :class:`~drflmodel.problems.deo.DEOConstrained`.

    Parameters
    ----------
    rounds : communication rounds.
    preset : ``None``, ``"paper"``, ``"theory"`` or ``"lagrangian"`` (module docstring); explicit ``c``,
        ``eta_inv``, ``beta`` override the preset's values.
    c : float :math:`\ge0` (constant) or ``"decreasing"`` (:math:`\frac\beta2\max(t,1)^{-1/4}`).
    eta_inv : inverse step :math:`\eta_t>0` (float) or ``"theory"``.
    beta : dual step :math:`\beta>0`.
    local_steps : :math:`Q\ge1` (active parties).
    passive_steps : :math:`P\ge1` steps of every passive party per round (default 1, as the
        algorithms; :math:`P>1` is allowed by its analysis, module docstring S4a).
    local_schedule : ``"fixed"`` (:math:`q_k=Q`) or ``"random"`` (uniform in :math:`1..Q`).
    update_prob : probability :math:`\in(0,1]` that a party updates in a round (asynchrony).
    tau_const : the constant :math:`\tau>8` of Theorem 2 (``eta_inv="theory"``).
    """

    problem_types = _DEO
    record = ("lam", "D", "c", "eta_inv", "stationarity_gap", "updated")
    expected_rate = "sublinear"
    dual = True

    def __init__(self, rounds: int = 1000, preset: str | None = "paper", c=None, eta_inv=None,
                 beta=None, local_steps: int = 1, local_schedule: str = "fixed",
                 update_prob: float = 1.0, tau_const: float = 9.0, passive_steps: int = 1):
        if preset is not None:
            preset = check_choice(preset, "preset", tuple(PRESETS))
            base = PRESETS[preset]
            c = base["c"] if c is None else c
            eta_inv = base["eta_inv"] if eta_inv is None else eta_inv
            beta = base["beta"] if beta is None else beta
        super().__init__(rounds=rounds, preset=preset, c=c, eta_inv=eta_inv, beta=beta,
                         local_steps=local_steps, local_schedule=local_schedule,
                         update_prob=update_prob, tau_const=tau_const, passive_steps=passive_steps)

    def _validate(self):
        p = self.params
        for k in ("c", "eta_inv", "beta"):
            if p[k] is None and (self.dual or k == "eta_inv"):
                raise InvalidParameterError(f"{k} is required when preset=None")
        if self.dual:
            if isinstance(p["c"], str):
                check_choice(p["c"], "c", ("decreasing",))
            else:
                check_real(p["c"], "c", low=0.0)
            self.beta = check_step(p["beta"], "beta")
        if isinstance(p["eta_inv"], str):
            check_choice(p["eta_inv"], "eta_inv", ("theory",))
        else:
            check_step(p["eta_inv"], "eta_inv")
        self.Q = check_int(p["local_steps"], "local_steps", low=1)
        self.local_schedule = check_choice(p["local_schedule"], "local_schedule", ("fixed", "random"))
        self.update_prob = check_real(p["update_prob"], "update_prob", low=0.0, high=1.0, low_open=True)
        self.tau_const = check_real(p["tau_const"], "tau_const", low=8.0, low_open=True)
        self.passive_steps = check_int(p["passive_steps"], "passive_steps", low=1)

    # ------------------------------------------------------------------ schedules
    def c_t(self, t: int) -> float:
        if not self.dual:
            return 0.0
        c = self.params["c"]
        if c == "decreasing":
            return 0.5 * self.beta * max(t, 1) ** -0.25
        return float(c)

    def eta_t(self, t: int, state) -> float:
        e = self.params["eta_inv"]
        if e == "theory":
            k = state["constants"]
            # Theorem 2 counts up to Q updates per party and round: Q = max(local, passive) steps
            Q = max(self.Q, self.passive_steps)
            return theory_eta(t, k["L"], k["L12"], state["K"], Q, state["beta"], self.tau_const)
        return float(e)

    # ------------------------------------------------------------------ hooks
    def _initialize(self, problem, runtime, theta0):
        vf = problem.federation
        K = vf.n_parties
        views = [runtime.view(k) for k in range(K)]
        info = {"active": list(vf.active), "n_parties": K, "eps_deo": float(problem.eps_deo),
                "problem_class": problem.problem_class}
        beta = self.beta if self.dual else 1.0
        constants = None
        if self.params["eta_inv"] == "theory":
            constants = vfl_constants(problem, self.dual)
            info.update(constants)
        return {"theta": theta0, "lam": np.zeros(2), "views": views, "K": K, "beta": beta,
                "slices": list(vf.block_slices), "constants": constants, "info": info,
                "updated": np.ones(K)}

    def server_dual_step(self, problem, z, lam, c_prev):
        """The server's dual step (10) from the scores :math:`z=\\sum_kp^k`:
        :math:`\\lambda^+=\\max(\\lambda+\\beta\\nabla_\\lambda,0)` with :math:`c_{t-1}` = ``c_prev``
        (zeros for FedBCD; the simulator's and the Flower port's)."""
        if not self.dual:
            return np.zeros(2)
        return np.maximum(lam + self.beta * problem.dual_gradient(z, lam, c=c_prev), 0.0)

    def server_step(self, t, state, problem, z, lam, eta, theta_next, updated):
        """Round *t*'s server-side record (not communication; the simulator's and the Flower
        port's): the fairness gap :math:`D` from the scores ``z``, the stationarity gap of paper
        (13) from :math:`\\eta_t(\\theta^{(t)}-\\theta^{(t+1)})` and the dual residual, and the new
        state (``theta_next``, :math:`\\lambda`, :math:`c_t`, :math:`\\eta_t`, which parties
        ``updated``)."""
        D = problem.fairness_gap_from_scores(z)
        gl = np.array([D - problem.eps_deo, -D - problem.eps_deo])
        gap_lam = (lam - np.maximum(lam + state["beta"] * gl, 0.0)) / state["beta"] if self.dual else np.zeros(2)
        gap = np.sqrt(np.sum((eta * (state["theta"] - theta_next)) ** 2) + gap_lam @ gap_lam)
        state.update(theta=theta_next, lam=lam, D=D, c=self.c_t(t), eta_inv=eta,
                     stationarity_gap=gap, updated=updated)
        return state

    def _round(self, t, state, runtime):
        problem, views, K = runtime.problem, state["views"], state["K"]
        theta, slices = state["theta"], state["slices"]
        blocks = [theta[s] for s in slices]
        # S1: partial scores up, server aggregates
        P = runtime.upload(partial_scores=np.stack([v.partial_scores(b) for v, b in zip(views, blocks)]))
        z = runtime.aggregate(np.ones(K), P)
        # S2: server dual step (10) with c_{t-1}
        lam = state["lam"] if t == 0 else self.server_dual_step(problem, z, state["lam"], self.c_t(t - 1))
        # who updates this round (asynchrony) and how many local steps (active parties)
        upd = np.ones(K, bool) if self.update_prob >= 1.0 else runtime.rng.random(K) < self.update_prob
        act = np.array([v.is_active for v in views])
        # S3: server -> parties (passive: nu only)
        n_act, n_pas = int(np.sum(upd & act)), int(np.sum(upd & ~act))
        if n_act:
            msg = runtime.broadcast("scores+lambda" if self.dual else "scores", np.append(z, lam) if self.dual else z,
                                    receivers=n_act)
            z_act = msg[:z.size]
        if n_pas:
            nu = runtime.broadcast("nu", problem.nu(z, lam), receivers=n_pas)
        eta = self.eta_t(t, state)
        new = [b.copy() for b in blocks]
        for k, v in enumerate(views):
            if not upd[k]:
                continue
            if v.is_active:                                  # S4b: q local steps, stale other blocks
                q = self.Q if self.local_schedule == "fixed" else int(runtime.rng.integers(1, self.Q + 1))
                b = blocks[k]
                for _ in range(q):
                    zk = v.local_scores(z_act, b, blocks[k])
                    b = b - v.local_gradient(zk, b, lam) / eta
                new[k] = b
            else:                                            # S4a: P steps from the round's nu
                b = blocks[k]
                for _ in range(self.passive_steps):
                    b = b - v.block_gradient(nu, b) / eta
                new[k] = b
        theta_next = np.concatenate(new)
        state = self.server_step(t, state, problem, z, lam, eta, theta_next, upd.astype(float))
        if t == self.rounds - 1:
            zf = problem.X @ theta_next                      # S1 of the next round (not counted)
            state["info"]["lam_final"] = self.server_dual_step(problem, zf, lam, self.c_t(t)).tolist()
        return state


class FedBCD(FairVFL):
    r"""FedBCD: vertical ERM by block coordinate descent with local steps (the fair-VFL simulator
    with :math:`\lambda\equiv0`, i.e. :math:`\varepsilon=\infty`).

    Runs on any :class:`~drflmodel.problems.deo.DEOConstrained` and **ignores its constraint**: it
    minimizes :math:`L(\theta)=\frac1n\sum_il(X_i^\top\theta,y_i)+\frac{\ell_2}2\|\theta\|^2`. Active parties
    take :math:`Q` local steps on their fresh block with the other blocks stale; passive parties
    take one step from :math:`\nu=\frac1n\partial_zl(z,y)`.

    Parameters: ``rounds``, ``eta_inv`` (inverse step, default 100 as the paper's experiments, or
    ``"theory"``), ``local_steps``, ``local_schedule``, ``update_prob``, ``passive_steps`` (as
    :class:`FairVFL`).
    """

    record = ("D", "eta_inv", "stationarity_gap", "updated")
    dual = False

    def __init__(self, rounds: int = 1000, eta_inv=100.0, local_steps: int = 1,
                 local_schedule: str = "fixed", update_prob: float = 1.0, tau_const: float = 9.0,
                 passive_steps: int = 1):
        Solver.__init__(self, rounds=rounds, eta_inv=eta_inv, local_steps=local_steps,
                        local_schedule=local_schedule, update_prob=update_prob, tau_const=tau_const,
                        c=0.0, beta=None, passive_steps=passive_steps)
