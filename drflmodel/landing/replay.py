r"""Sampled clients, round by round: does each round apply its own subset's round map?

A round of FedAvg / FedProx with full-batch local steps and a recorded subset :math:`S_r` of clients
is *deterministic* given :math:`S_r`: the server model becomes

.. math::

    \theta^{r+1}=\theta^r+\eta_g\big(T_{S_r}(\theta^r)-\theta^r\big),\qquad
    T_S(\theta)=\sum_{i\in S}w^S_iu_{i,J}(\theta),

with :math:`u_{i,J}` the client's :math:`J` local steps from the model it received
(:mod:`drflmodel.landing.contraction`) and :math:`w^S` the aggregation weights over :math:`S`. The
sampling is random, but once the subsets are recorded nothing else is: the run can be *replayed*
one round at a time from its own models, and a correct run computed in a format of unit roundoff
:math:`u` differs from the replay by at most the rounding allowance :math:`\varepsilon_r`
(:mod:`drflmodel.landing.arithmetic`): with :math:`t_r=\theta^r+(\theta^{r+1}-\theta^r)/\eta_g`,
:math:`\|t_r-T_{S_r}(\theta^r)\|\le\varepsilon_r/\eta_g`. This is Banach's setting of
:mod:`drflmodel.landing.participation` without the worst case over subsets: the contraction
towards each subset's own point is not needed to grade a round, only the round itself.

**Known weights** (``aggregation="examples"``: :math:`w^S_i=p_i/\sum_{j\in S}p_j`, how Flower's FedAvg
and FedProx weight each reply by its ``num_examples``; ``"uniform"``: :math:`1/|S|`, FedProx's
Algorithm 2 in Li et al. 2020, "Federated optimization in heterogeneous networks"): the residual
:math:`\|t_r-T_{S_r}(\theta^r)\|` is computed directly. **Unknown weights** (the default): a correct
round's :math:`t_r` lies within :math:`\varepsilon_r/\eta_g` of the convex hull of
:math:`\{u_{i,J}(\theta^r)\}_{i\in S_r}`, whatever the weights. The distance to the hull is bounded
*below* by a separating hyperplane: for the unit vector :math:`d` from an approximate projection
:math:`\hat x` (non-negative least squares) to :math:`t_r`,
:math:`\operatorname{dist}(t_r,\operatorname{conv}U)\ge\langle d,t_r\rangle-\max_i\langle d,u_i\rangle`
(for every point :math:`x` of the hull :math:`\|t-x\|\ge\langle d,t-x\rangle`), so the check never
depends on the solver's accuracy. A round whose lower bound exceeds the allowance cannot come from
the claimed strategy with any weighting of its recorded clients: "landed elsewhere", proved (under
the rounding allowance, an allowance model and not interval arithmetic). A round without a recorded
subset is checked against the hull of all clients (every strict subset's hull lies in it).

At most :data:`MAX_ROUNDS_REPLAYED` rounds are replayed (the first ones and evenly spaced after), each
costing one round of local steps of every client. Minibatch local steps are random within the round
and are not replayed (:mod:`drflmodel.landing.minibatch`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from ..errors import InvalidParameterError
from .arithmetic import rounding_allowance
from .contraction import local_iterates

__all__ = ["AGGREGATIONS", "MAX_ROUNDS_REPLAYED", "check_aggregation", "hull_distance_lower_bound",
           "replay_rounds", "grade_replay"]

#: how a sampled subset is averaged: ``"examples"`` (weights p renormalized over S, Flower) or ``"uniform"`` (1/|S|)
AGGREGATIONS = ("examples", "uniform")
#: the most rounds replayed per run
MAX_ROUNDS_REPLAYED = 64


def check_aggregation(aggregation) -> str | None:
    """Validate ``aggregation`` (``None``: unknown, any convex weighting of the subset)."""
    if aggregation is not None and aggregation not in AGGREGATIONS:
        raise InvalidParameterError(f"aggregation must be one of {AGGREGATIONS} or None (unknown: any convex "
                                    f"weighting of the round's clients); got {aggregation!r}")
    return aggregation


def hull_distance_lower_bound(points, target) -> float:
    r"""A certified lower bound on the distance from ``target`` to the convex hull of the rows of
    ``points`` (module docstring): a separating hyperplane through an approximate projection."""
    U, t = np.asarray(points, float), np.asarray(target, float)
    scale = max(1.0, float(np.max(np.abs(U))), float(np.max(np.abs(t))))
    beta = 1e3 * scale
    A = np.vstack([U.T, np.full((1, U.shape[0]), beta)])
    w, _ = nnls(A, np.append(t, beta), maxiter=50 * U.shape[0] + 100)
    x = (w / w.sum()) @ U if w.sum() > 0 else U[0]
    d = t - x
    nd = float(np.linalg.norm(d))
    if nd == 0.0:
        return 0.0
    d /= nd
    return max(0.0, float(d @ t - np.max(U @ d)))


def replay_rounds(problem, fp, thetas, subsets, aggregation, eps, global_step: float = 1.0) -> dict:
    r"""Replay up to :data:`MAX_ROUNDS_REPLAYED` rounds (module docstring). ``subsets``: per round
    ``"all"``, ``"unknown"`` or an index array (:mod:`drflmodel.landing.participation`); ``eps``:
    the per-round rounding allowances. Returns the rounds replayed, their residuals (for unknown
    weights: lower bounds), allowances, and the first failing round (``None``)."""
    T = np.asarray(thetas, float)
    R = len(T) - 1
    J, eta, mu = int(fp.config["local_steps"]), float(fp.config["step_size"]), float(fp.config.get("mu") or 0.0)
    p = np.asarray(fp.config["weights"], float)
    n = p.size
    if R <= MAX_ROUNDS_REPLAYED:
        rounds = np.arange(R)
    else:                                       # the first half, then evenly spaced to the last round
        half = MAX_ROUNDS_REPLAYED // 2
        rounds = np.concatenate([np.arange(half), np.linspace(half, R - 1, MAX_ROUNDS_REPLAYED - half).astype(int)])
    residual, allowed = np.empty(rounds.size), np.empty(rounds.size)
    for k, r in enumerate(rounds):
        S = subsets[r]
        idx = np.arange(n) if isinstance(S, str) else np.asarray(S, int)
        U = local_iterates(problem.objectives, T[r], J, eta, mu)[idx]
        target = T[r] + (T[r + 1] - T[r]) / global_step
        known = aggregation is not None and not (isinstance(S, str) and S == "unknown")
        if known:
            w = p[idx] / p[idx].sum() if aggregation == "examples" else np.full(idx.size, 1.0 / idx.size)
            residual[k] = float(np.linalg.norm(w @ U - target))
        else:
            residual[k] = hull_distance_lower_bound(U, target)
        allowed[k] = float(eps[r]) / global_step
    over = np.flatnonzero(residual > allowed * (1.0 + 1e-9))
    return {"rounds": rounds, "residual": residual, "allowance": allowed,
            "first_failing": int(rounds[over[0]]) if over.size else None,
            "failing_index": int(over[0]) if over.size else None}


def grade_replay(rep, problem, fp, thetas, subsets, aggregation, u: float, global_step: float = 1.0) -> None:
    """Replay the run's rounds into a :class:`~drflmodel.landing.verdict.Conformance` (``u``: the run's
    unit roundoff): a round that is not its subset's map turns the verdict into "elsewhere" (proved)
    and says which."""
    T = np.asarray(thetas, float)
    norms = np.linalg.norm(T, axis=1)
    eps = rounding_allowance(u, int(fp.config["local_steps"]), int(problem.n_clients),
                             np.maximum(norms[:-1], norms[1:]))
    res = replay_rounds(problem, fp, thetas, subsets, aggregation, eps, global_step)
    weighting = {"examples": "weighted by examples", "uniform": "averaged uniformly"}.get(
        aggregation, "with any convex weights")
    rep.extra.update(rounds_replayed=int(res["rounds"].size), replay_max_ratio=float(
        np.max(res["residual"] / res["allowance"])) if res["rounds"].size else 0.0, aggregation=aggregation)
    r, k = res["first_failing"], res["failing_index"]
    if r is None:
        rep.reasons.append(f"replayed {res['rounds'].size} rounds: each is its recorded clients' round map "
                           f"({weighting}) within the rounding allowance (largest residual/allowance "
                           f"{rep.extra['replay_max_ratio']:.2g})")
        return
    S = subsets[r]
    who = "every client" if isinstance(S, str) else f"clients {np.asarray(S).tolist()}"
    why = (f"round {r + 1} is not {rep.strategy}'s round map of its {who} {weighting}: the new model is "
           f"{res['residual'][k]:.3e}{' (at least)' if aggregation is None else ''} from it, beyond the rounding "
           f"allowance {res['allowance'][k]:.1e}")
    hint = " (if the clients use minibatches, pass batch_size=)"
    rep.reasons.append(f"evidence (proved, replayed round): {why}{hint}")
    rep.rounds_to_land = None
    if rep.verdict == "elsewhere" and rep.evidence == "proved":
        rep.text += f"; {why}"
        return
    rep.verdict, rep.evidence = "elsewhere", "proved"
    rep.text = (f"landed elsewhere: not the strategy it claims to be ({why}); distance to its fixed point "
                f"{rep.rows[-1]['dist_fixed_point']:.3e}")
