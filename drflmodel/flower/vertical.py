r"""Fair vertical FL on Flower: :class:`~drflmodel.solvers.FairVFL` and
:class:`~drflmodel.solvers.FedBCD` (fair-VFL paper, Algorithms 1–3).

A vertical federation maps onto Flower's Message API (a star: server ↔ supernodes) with one
supernode per **party** (``partition-id`` = party index *k*): the party keeps its block
:math:`\theta_k` in its ``Context.state`` and computes through ``problem.client_view(k)`` (a
:class:`~drflmodel.problems.deo.PartyView`); the server holds the labels and groups (as in the
paper) and computes :math:`z=\sum_kp^k`, the dual step and :math:`\nu` with the solver's own
public ``server_dual_step`` and ``server_step`` (which the simulator's round calls too) and the
problem's ``nu``.

One round on Flower (the simulator's steps S1–S4):

* S2/S3: the server sends :math:`(z,\lambda)` (``scores+lambda``; FedBCD: ``scores``) to every
  updating active party with its number of local steps :math:`q_k`, and :math:`\nu` (``nu``) to
  every updating passive party (with its number of steps, ``passive_steps`` when the solver has
  that option, else 1) (passive parties never receive labels, groups, :math:`\lambda` or
  scores); delays (``update_prob < 1``) and the random :math:`q_k` are drawn from the server's
  generator in the simulator's order;
* S4 + the next S1: each updating party steps and replies with the partial scores of its **new**
  block, :math:`p^k=X^k\theta_k^{(t+1)}` (:math:`n` floats) -- Flower's request–reply API has no
  upload without a request, so S1 of round *t+1* travels in the reply of round *t*. The scores of
  :math:`\theta^{(0)}` come from a setup exchange before round 0 (which also hands each party its
  starting block); the simulator, symmetrically, does not count the scores of
  :math:`\theta^{(R)}` it uses for ``lam_final``. With every party updating, the per-round message
  and float counts are the simulator's. With delays (``update_prob < 1``) a delayed party neither
  receives nor sends: the server keeps its last (unchanged) scores, where the simulator counts a
  re-upload -- Flower's counts are lower by those messages.

Each reply also carries the party's new block as a record-only ``diagnostics`` array (not
counted), so that the server can record :math:`\theta^{(t)}` in the trace and compute the
simulator's stationarity gap; the algorithm itself never uses it. A party that fails in a round
is treated as delayed (its block and scores unchanged) and recorded as missing.
"""

from __future__ import annotations

import numpy as np

from ._port import Port

__all__ = ["FairVFLPort", "FedBCDPort"]


class FairVFLPort(Port):
    """:class:`~drflmodel.solvers.FairVFL` on Flower (module docstring)."""

    solver = "FairVFL"
    handled = frozenset({"rounds", "preset", "c", "eta_inv", "beta", "local_steps", "local_schedule",
                         "update_prob", "tau_const", "passive_steps"})

    def setup(self, state, ex, solver, problem):
        state["_problem"] = problem
        K = state["K"]
        blocks = {k: {"block": state["theta"][s]} for k, s in enumerate(state["slices"])}
        reply = ex.send("train.vfl_init", {}, to=range(K), per_client_payload=blocks, count=False)
        state["_scores"] = {k: reply[k]["partial_scores"] for k in range(K)}

    def round(self, t, state, ex, solver, rng):
        problem, K, theta = state["_problem"], state["K"], state["theta"]
        z = np.tensordot(np.ones(K), np.stack([state["_scores"][k] for k in range(K)]), axes=(0, 0))
        lam = state["lam"] if t == 0 else solver.server_dual_step(problem, z, state["lam"], solver.c_t(t - 1))
        upd = np.ones(K, bool) if solver.update_prob >= 1.0 else rng.random(K) < solver.update_prob
        active = set(state["info"]["active"])
        steps = {}
        for k in range(K):                                  # the simulator's order of draws
            if upd[k] and k in active:
                steps[k] = solver.Q if solver.local_schedule == "fixed" else int(rng.integers(1, solver.Q + 1))
        eta = solver.eta_t(t, state)
        replies = {}
        if steps:
            payload = {"scores+lambda": np.append(z, lam)} if solver.dual else {"scores": z}
            replies.update(ex.send("train.vfl_step", payload, {"eta": eta}, to=steps,
                                   per_client={k: {"steps": q} for k, q in steps.items()}))
        passive = [k for k in range(K) if upd[k] and k not in active]
        if passive:      # P steps with the round's nu (passive_steps; 1 = the paper's algorithms')
            P = int(solver.params.get("passive_steps", 1))
            replies.update(ex.send("train.vfl_step", {"nu": problem.nu(z, lam)}, {"eta": eta, "steps": P},
                                   to=passive))
        new = [theta[s].copy() for s in state["slices"]]
        for k, arrays in replies.items():
            new[k] = arrays["block"]
            state["_scores"][k] = arrays["partial_scores"]
        updated = np.zeros(K)
        updated[list(replies)] = 1.0
        state = solver.server_step(t, state, problem, z, lam, eta, np.concatenate(new), updated)
        if t == solver.rounds - 1:                          # S1 of the next round: the replies' scores
            zf = np.tensordot(np.ones(K), np.stack([state["_scores"][k] for k in range(K)]), axes=(0, 0))
            state["info"]["lam_final"] = solver.server_dual_step(problem, zf, lam, solver.c_t(t)).tolist()
        return state


class FedBCDPort(FairVFLPort):
    """:class:`~drflmodel.solvers.FedBCD` on Flower: the same round with :math:`\\lambda\\equiv0`."""

    solver = "FedBCD"
