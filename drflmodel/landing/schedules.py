r"""Decaying local learning rates: the landing point moves with the step, and the run is graded against
the schedule.

With a local step :math:`\eta_r` that changes between rounds (step decay, :math:`\eta_r=\eta_0/(1+r/\tau)`,
or whatever a Flower strategy sends as ``lr`` each round), round :math:`r` applies the map
:math:`T_{\eta_r}` of :mod:`drflmodel.landing.contraction`, whose fixed point :math:`\theta^\star(\eta_r)`
depends on :math:`\eta_r` (client drift grows with :math:`J\eta`). A correct run follows the moving
point; it is graded against the point of the **final** step, :math:`\theta^\star=\theta^\star(\eta_R)`
(certified, radius :math:`\rho`), with the drift of the earlier maps charged per round:

.. math::

    \|T_{\eta_r}(\theta)-\theta^\star\|\le\|T_{\eta_r}(\theta)-T_{\eta_r}(\theta^\star)\|
    +\|T_{\eta_r}(\theta^\star)-\theta^\star\|\le q(\eta_r)\|\theta-\theta^\star\|+b_r,\qquad
    b_r=\|T_{\eta_r}(\theta^\star)-\theta^\star\|,

:math:`q(\eta_r)=\sum_ip_iq_i(\eta_r)` the contraction factor at that step (its per-client factors
:math:`q_i`, :mod:`drflmodel.landing.contraction`). :math:`b_r` is computed at the certified point
(:math:`\hat b_r+(1+q)\rho` bounds it at the exact one) and is 0 for rounds run with the final step.
This is the same recursion as for a sampled round (:mod:`drflmodel.landing.participation`), and the
two combine: a sampled round with step :math:`\eta_r` takes :math:`q=\max_{i\in S}q_i(\eta_r)` and
:math:`b=\max_{i\in S}\|u_{i,J,\eta_r}(\theta^\star)-\theta^\star\|`. So every correct scheduled run obeys
:math:`d_{r+1}\le\kappa_rd_r+\eta_gb_r+\varepsilon_r` and Banach's a-posteriori bound
:math:`d_r\le(\|\theta_{r+1}-\theta_r\|/\eta_g+\varepsilon_r/\eta_g+b_r)/(1-q_r)`; a run that breaks
either is not the claimed strategy with this schedule (proved). A correct run is never "elsewhere":
a run that slows down as the step decays is "not landed" (consistent with the schedule), and it has
landed when it is within the rounding region of the final step's point.

The schedule is given (``step_size=``: one step per round, or a function of the round ``1..R`` --
Flower's ``server-round`` numbering) or read from a recorded Flower run (the ``lr`` /
``learning-rate`` entry of each round's training configuration,
:class:`drflmodel.flower.Recorder`).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError
from .contraction import contraction_factors, local_iterates
from .participation import ALL

__all__ = ["split_schedule", "recorded_schedule", "schedule_constants", "scheduled_client_faults", "LR_KEYS"]

#: training-configuration keys that carry the local learning rate
LR_KEYS = ("lr", "learning-rate")


def split_schedule(step_size, rounds: int):
    """``(final step, per-round steps or None)`` of ``step_size``: a number, a sequence of one step per
    round ``1..R``, or a function of the round; ``None`` when every round has the same step."""
    if step_size is None or isinstance(step_size, (int, float, np.integer, np.floating)):
        return step_size, None
    if callable(step_size):
        values = [step_size(r) for r in range(1, rounds + 1)]
    else:
        try:
            values = list(np.asarray(step_size, float).ravel())
        except (TypeError, ValueError):
            raise InvalidParameterError(f"step_size must be a number, one step per round or a function of the round; "
                                        f"got {type(step_size).__name__}") from None
    etas = np.asarray(values, float)
    if etas.size != rounds:
        raise InvalidParameterError(f"step_size: a schedule needs one step per round ({rounds}); got {etas.size}")
    if not np.all(np.isfinite(etas)) or np.any(etas <= 0):
        raise InvalidParameterError(f"step_size: every step of the schedule must be finite and > 0; got "
                                    f"min {np.min(etas)!r}")
    if np.all(etas == etas[-1]):
        return float(etas[-1]), None
    return float(etas[-1]), etas


def recorded_schedule(run, rounds: int) -> np.ndarray | None:
    """The per-round local step a recorded Flower run sent (module docstring), when every round
    ``1..R`` records one and they differ; else ``None``."""
    info = dict(getattr(run, "info", None) or {})
    sent = {}
    for row in info.get("participation", []):
        config = row.get("train_config") or {}
        for key in LR_KEYS:
            if isinstance(config.get(key), (int, float)) and not isinstance(config.get(key), bool):
                sent[int(row["round"])] = float(config[key])
                break
    if any(r not in sent for r in range(1, rounds + 1)):
        return None
    etas = np.array([sent[r] for r in range(1, rounds + 1)])
    return None if np.all(etas == etas[-1]) else etas


def schedule_constants(problem, fp, etas, subsets) -> tuple[np.ndarray, np.ndarray]:
    r"""Per round :math:`(q_r, b_r)` for the schedule ``etas`` (module docstring) against the final step's
    certified point ``fp``, with the round's participants ``subsets`` (:data:`ALL` or indices)."""
    obj = problem.objectives
    p = np.asarray(fp.config["weights"], float)
    J, mu = int(fp.config["local_steps"]), float(fp.config.get("mu") or 0.0)
    L, m = fp.info["smoothness"], fp.info["strong_convexity"]
    rho = float(fp.radius) if np.isfinite(fp.radius) else np.inf
    final = float(fp.config["step_size"])
    cache: dict[float, tuple] = {}
    q_r, b_r = np.empty(len(etas)), np.empty(len(etas))
    for k, (eta, S) in enumerate(zip(np.asarray(etas, float), subsets)):
        if eta not in cache:
            q_i = contraction_factors(L, m, J, float(eta), mu)
            V = local_iterates(obj, fp.theta, J, float(eta), mu) - fp.theta[None, :]
            cache[eta] = (q_i, V, np.linalg.norm(V, axis=1))
        q_i, V, v_norm = cache[eta]
        if isinstance(S, str) and S == ALL:
            q_r[k] = float(p @ q_i)
            b_r[k] = 0.0 if eta == final else float(np.linalg.norm(p @ V)) + (1.0 + q_r[k]) * rho
        else:
            idx = np.arange(p.size) if isinstance(S, str) else S
            q_r[k] = float(np.max(q_i[idx]))
            b_r[k] = float(np.max(v_norm[idx])) + (1.0 + q_r[k]) * rho
    return q_r, b_r


class _StepView:
    """``fp`` with another local step (what :func:`~drflmodel.landing.clients.client_faults` reads)."""

    def __init__(self, fp, eta):
        self.config = dict(fp.config, step_size=float(eta))


def scheduled_client_faults(problem, fp, thetas, client_models, u: float, strategy: str, etas,
                            max_rounds: int = 24) -> list[dict]:
    """Each recorded client model against its own local steps **with that round's step** (at most
    ``max_rounds`` rounds, evenly spread); the faults as :func:`~drflmodel.landing.clients.client_faults`
    gives them."""
    from .clients import client_faults

    models = np.asarray(client_models, float)
    replied = [r for r in range(1, min(len(thetas), len(models)))
               if np.any(np.all(np.isfinite(models[r]), axis=1))]
    if not replied:
        return []
    pick = [replied[i] for i in np.unique(np.linspace(0, len(replied) - 1, min(max_rounds, len(replied))).astype(int))]
    faults: dict[int, dict] = {}
    for r in pick:
        one = np.full_like(models[: r + 1], np.nan)
        one[r] = models[r]
        for fault in client_faults(problem, _StepView(fp, etas[r - 1]), thetas, one, u, strategy):
            faults.setdefault(fault["client"], fault)
    return [faults[i] for i in sorted(faults)]
