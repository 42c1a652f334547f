r"""Sampled clients: the region every correct run with partial participation stays in.

FedProx's Algorithm 2 (Li et al. 2020, "Federated optimization in heterogeneous networks") and
Flower's ``fraction_train`` sample a subset :math:`S_r` of the clients each round; the round then
applies the subset's own map :math:`T_{S}(\theta)=\sum_{i\in S}w^S_iu_{i,J}(\theta)` (:math:`w^S` the
aggregation weights over :math:`S`, summing to 1), a contraction towards the subset's own fixed
point, not towards the full map's :math:`\theta^\star`. So the full-participation bound
:math:`\kappa^Rd_0` does not hold for such a run. What does hold, for every subset and every convex
weighting of it: with :math:`v_i=u_{i,J}(\theta^\star)-\theta^\star` (the client's move from the full
point) and :math:`q_i` its Lipschitz constant (:mod:`drflmodel.landing.contraction`),

.. math::

    \|T_S(\theta)-\theta^\star\|\le\|T_S(\theta)-T_S(\theta^\star)\|+\|T_S(\theta^\star)-\theta^\star\|
    \le q_S\|\theta-\theta^\star\|+b_S,\qquad q_S=\max_{i\in S}q_i,\quad b_S=\max_{i\in S}\|v_i\|,

(a convex combination of the :math:`q_i` and of the :math:`v_i` is at most their maximum), and with
a server step :math:`\eta_g`, :math:`d_{r+1}\le\kappa_rd_r+\eta_gb_{S_r}`,
:math:`\kappa_r=|1-\eta_g|+\eta_gq_{S_r}`. Every correct sampled run therefore stays below the
recursion started at its own :math:`d_0` and ends in the ball of radius
:math:`\max_r\eta_gb_{S_r}/(1-\kappa_r)` around :math:`\theta^\star` (its *sampling region*), and
Banach's a-posteriori bound for the round's own map gives, through
:math:`\|\theta^\star_S-\theta^\star\|\le b_S/(1-q_S)`,
:math:`\|\theta^r-\theta^\star\|\le(\|T_S(\theta^r)-\theta^r\|+b_S)/(1-q_S)`. When every client took
part (:math:`S` = all, weights :math:`p`), :math:`b_S=\|T(\theta^\star)-\theta^\star\|` is the fixed
point's own move is zero, :math:`b=0`, and the bounds are the full-participation ones. The subsets are read per round
where the run records them (clients named by their ``partition-id``); a round that records only
that not everyone took part takes the maximum over all clients.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from .contraction import local_iterates

__all__ = ["round_subsets", "subset_constants", "round_noise", "ALL", "UNKNOWN"]

#: every client took part (weights p); a strict subset that is not recorded
ALL, UNKNOWN = "all", "unknown"


def round_subsets(run, n_clients: int, rounds: int, participation=None) -> tuple[list, str]:
    """Per round ``1..R`` the clients that took part: :data:`ALL`, :data:`UNKNOWN` or an index
    array; and where that came from. ``participation``: ``None`` (read from the run; iterates
    without a record are assumed to have full participation), ``"all"``, ``"sampled"`` (unknown
    strict subsets every round) or a sequence of ``R`` client-index sequences."""
    if isinstance(participation, str):
        if participation not in ("all", "sampled"):
            raise InvalidParameterError(f"participation must be 'all', 'sampled' or one sequence of client "
                                        f"indices per round; got {participation!r}")
        return [ALL if participation == "all" else UNKNOWN] * rounds, "given"
    if participation is not None:
        rows = list(participation)
        if len(rows) != rounds:
            raise InvalidDataError(f"participation must list the clients of each of the {rounds} rounds; "
                                   f"got {len(rows)} rows")
        return [_subset(row, n_clients, r) for r, row in enumerate(rows, start=1)], "given"
    info = dict(getattr(run, "info", None) or {})
    recorded = {int(row["round"]): row for row in info.get("participation", []) if "round" in row}
    partial = set(info.get("partial_participation", []))
    if not recorded and not partial:
        how = "recorded: every client every round" if hasattr(run, "solver") else \
            "assumed: every client every round (the iterates record no participation; pass participation=)"
        return [ALL] * rounds, how
    out = []
    for r in range(1, rounds + 1):
        row = recorded.get(r, {})
        who = row.get("participants")
        if who is not None and all(isinstance(c, (int, np.integer)) and 0 <= c < n_clients for c in who):
            out.append(_subset(who, n_clients, r))
        elif r in partial:
            out.append(UNKNOWN)
        else:
            out.append(ALL)
    return out, "recorded"


def _subset(row, n_clients: int, r: int):
    idx = np.unique(np.asarray(list(row), dtype=int))
    if idx.size == 0 or idx.min() < 0 or idx.max() >= n_clients:
        raise InvalidDataError(f"participation: round {r} must list client indices in [0, {n_clients}); got "
                               f"{list(row)}")
    return ALL if idx.size == n_clients else idx


def subset_constants(problem, fp, subsets, aggregation=None) -> tuple[np.ndarray, np.ndarray, dict]:
    r"""Per round :math:`(q_{S_r}, b_{S_r})` (module docstring) at the certified point ``fp``, the
    radius :math:`\rho` of the point folded in (:math:`b_S(\theta^\star)\le\hat b_S+(1+q_S)\rho`; :math:`b=0`
    for a round with every client);
    and a summary. ``aggregation``: how a recorded subset is averaged -- ``"examples"`` (the weights
    :math:`p` renormalized over :math:`S`, as Flower's FedAvg / FedProx weight replies by their
    ``num_examples``), ``"uniform"`` (:math:`1/|S|`, FedProx's Algorithm 2) or ``None`` (unknown:
    the maxima over :math:`S`, valid for any convex weighting). With known weights
    :math:`q_S=\sum_{i\in S}w^S_iq_i` and :math:`b_S=\|\sum_{i\in S}w^S_iv_i\|`."""
    p = np.asarray(fp.config["weights"], float)
    q_i = np.asarray(fp.info["per_client_factors"], float)
    rho = float(fp.radius) if np.isfinite(fp.radius) else np.inf
    J, eta, mu = fp.config["local_steps"], fp.config["step_size"], fp.config.get("mu") or 0.0
    V = local_iterates(problem.objectives, fp.theta, J, eta, mu) - fp.theta[None, :]
    v_norm = np.linalg.norm(V, axis=1)
    q_r, b_r = np.empty(len(subsets)), np.empty(len(subsets))
    for k, S in enumerate(subsets):
        if isinstance(S, str) and S == ALL:       # T(theta*) = theta* exactly: b = 0
            q_r[k], b_r[k] = fp.contraction, 0.0
        else:
            idx = np.arange(p.size) if isinstance(S, str) else S
            if isinstance(S, str) or aggregation is None:
                q_r[k] = float(np.max(q_i[idx]))
                b_r[k] = float(np.max(v_norm[idx])) + (1.0 + q_r[k]) * rho
            else:
                w = p[idx] / p[idx].sum() if aggregation == "examples" else np.full(idx.size, 1.0 / idx.size)
                q_r[k] = float(w @ q_i[idx])
                b_r[k] = float(np.linalg.norm(w @ V[idx])) + (1.0 + q_r[k]) * rho
    sampled = sum(1 for S in subsets if not (isinstance(S, str) and S == ALL))
    return q_r, b_r, {"sampled_rounds": sampled, "client_moves": v_norm, "max_q": float(np.max(q_r, initial=0.0))}


def round_noise(s, weights, subsets) -> np.ndarray:
    """Per round the bound on the average of the clients' deviations ``s`` (minibatch noise,
    :mod:`drflmodel.landing.minibatch`): :math:`\\sum_ip_is_i` with every client, the maximum over
    the subset otherwise (any convex weighting of it)."""
    s, p = np.asarray(s, float), np.asarray(weights, float)
    return np.array([float(p @ s) if isinstance(S, str) and S == ALL
                     else float(np.max(s if isinstance(S, str) else s[S])) for S in subsets])
