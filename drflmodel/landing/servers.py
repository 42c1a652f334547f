r"""Server optimizers (FedAvgM, FedAdam, FedYogi, FedAdagrad): where they land, and what a round proves.

**Landing point.** FedAvgM (Hsu, Qi & Brown 2019) and FedAdam / FedYogi / FedAdagrad (Reddi, Charles,
Zaheer, Garrett, Rush, Konečný, Kumar & McMahan, "Adaptive federated optimization", ICLR 2021,
Algorithm 2) keep FedAvg's clients and replace the server step: from the pseudo-gradient
:math:`\Delta_r=T(\theta_r)-\theta_r` (:math:`T` the average of the clients' :math:`J` local steps,
:mod:`drflmodel.landing.contraction`) they update a momentum :math:`m_r=\beta_1m_{r-1}+(1-\beta_1)
\Delta_r` (FedAvgM: :math:`m_r=\beta m_{r-1}+\Delta_r`), a second moment :math:`v_r` (Adam:
:math:`\beta_2v_{r-1}+(1-\beta_2)\Delta_r^2`; Yogi: :math:`v_{r-1}-(1-\beta_2)\Delta_r^2
\operatorname{sign}(v_{r-1}-\Delta_r^2)`; Adagrad: :math:`v_{r-1}+\Delta_r^2`) and step
:math:`\theta_{r+1}=\theta_r+\eta\,m_r/(\sqrt{v_r}+\tau)` (FedAvgM: :math:`\theta_r+\eta m_r`). A
stationary run (:math:`\theta_{r+1}=\theta_r` for all later rounds) has :math:`m_r=0` for all later
rounds, hence :math:`\Delta_r=0`: :math:`T(\theta)=\theta`. So the only point such a run can land on is
FedAvg's fixed point with the same local steps (the same as FedProx's with the same :math:`\mu`): the
server optimizer changes the path and the speed, not the landing point. Whether it converges at all
is not guaranteed (adaptive steps with small :math:`\tau` can oscillate); no a-priori rate holds.

**What a round proves, whatever the server optimizer does.** Banach's a-posteriori bound needs only
the round map at the model the clients received: if :math:`T` is a :math:`q`-contraction,
:math:`\|\theta-\theta^\star\|\le\|T(\theta)-\theta\|/(1-q)` for every :math:`\theta`. A recorded round
gives :math:`T(\theta_r)` without trusting the server: the clients' returned models
:math:`\tilde u_{i}` (:class:`drflmodel.flower.Recorder` keeps them) averaged with the problem's
weights :math:`p` (whatever weighting the server used). With a sampled subset :math:`S` the round's
map is :math:`T_S` (weights :math:`p` renormalized over :math:`S`), a :math:`q_S`-contraction whose
point lies within :math:`b_S/(1-q_S)` of :math:`\theta^\star` (:mod:`drflmodel.landing.participation`).
A correct client's model is its local steps up to the rounding allowance
:math:`e_i=4(J+2)\,u\max(1,\|\theta_r\|,\|\tilde u_i\|)` (:mod:`drflmodel.landing.clients`), so

.. math::

    \|\theta_r-\theta^\star\|\le B_r:=\frac{\big\|\sum_{i\in S}w_i\tilde u_i-\theta_r\big\|
    +\sum_{i\in S}w_ie_i+b_S}{1-q_S}+\rho

(:math:`\rho` the landing point's certified radius, :math:`b_S=0` with every client). This is a
per-round certificate: "landed (proved at round r)" when :math:`B_r` is within the tolerance, and
"elsewhere, proved" when the run's model at round :math:`r` is farther from the certified point than
:math:`B_r`: the clients' updates are then not the claimed local steps (the server cannot cause it;
the bound holds for every :math:`\theta_r`). Each client is also checked against its own local steps,
which names the faulty one (:mod:`drflmodel.landing.clients`). 
**FedAvgM from its models alone.** Flower's FedAvgM (``server_momentum`` :math:`\beta`,
``server_learning_rate`` :math:`\eta_s`) steps :math:`\theta_{r+1}=\theta_r-\eta_sm_r`,
:math:`m_r=\beta m_{r-1}+g_r` (:math:`m_0=g_0`), with :math:`g_r=\theta_r-T_S(\theta_r)`: the
pseudo-gradients are recovered exactly from consecutive models,
:math:`\hat m_r=(\theta_r-\theta_{r+1})/\eta_s`, :math:`\hat g_r=\hat m_r-\beta\hat m_{r-1}`, and
the same bound applies with :math:`\|\hat g_r\|` for the move; the allowance adds the rounding of
the recorded models (:math:`2u(\|\theta_r\|+\|\theta_{r+1}\|)/\eta_s` per :math:`\hat m_r`) and of the
momentum update (:math:`2u\|\hat m_r\|`) to the clients' :math:`\varepsilon_r`
(:mod:`drflmodel.landing.arithmetic`). :math:`\beta` and :math:`\eta_s` are read from the strategy
(:class:`drflmodel.flower.Recorder` keeps them) or given. FedAdam / FedYogi / FedAdagrad divide by a
second moment that depends on the pseudo-gradient itself; their pseudo-gradients are not recovered.

Without recorded client models (and for FedAdam / FedYogi / FedAdagrad) a server optimizer run is
graded by its distance only: "landed" within the rounding region of the round map
:math:`\max_r\varepsilon_r/(1-q)` (:mod:`drflmodel.landing.arithmetic`), else "not landed"; a stall far
away is "observed", never proved.
"""

from __future__ import annotations

import numpy as np

from .arithmetic import FLOAT64_FLOOR
from .participation import ALL, subset_constants
from .schedules import schedule_constants

__all__ = ["SERVER_OPTIMIZERS", "client_update_certificate", "momentum_certificate", "momentum_settings",
           "grade_server_run"]

#: server optimizers on FedAvg's clients: their point is FedAvg's, graded per round by :func:`grade_server_run`
SERVER_OPTIMIZERS = ("FedAvgM", "FedAdam", "FedYogi", "FedAdagrad")


def client_update_certificate(problem, fp, thetas, client_models, u: float, etas=None) -> dict | None:
    r"""Per recorded round :math:`r` the bound :math:`B_r\ge\|\theta_r-\theta^\star\|` from the clients'
    returned models (module docstring). ``thetas`` ``(R+1, P)``; ``client_models`` ``(R'+1, n, P)``, row
    :math:`r+1` the models returned from :math:`\theta_r` (NaN where none). Returns ``{"rounds", "bound",
    "move", "allowance", "q", "b"}`` (arrays over the recorded rounds) or ``None`` when no round is
    recorded or the point has no contraction factor. ``etas``: a decaying local step per round, each
    round's :math:`(q_r, b_r)` then those of its own step (:mod:`drflmodel.landing.schedules`)."""
    q = fp.contraction
    if q is None or not (0 <= q < 1) or fp.status == "uncertified":
        return None
    models = np.asarray(client_models, float)
    T = np.asarray(thetas, float)
    p = np.asarray(fp.config["weights"], float)
    J = int(fp.config["local_steps"])
    rounds, subsets = [], []
    for k in range(min(len(T) - 1, len(models) - 1)):
        ok = np.all(np.isfinite(models[k + 1]), axis=1)
        if ok.any():
            rounds.append(k)
            subsets.append(ALL if ok.all() else np.flatnonzero(ok))
    if not rounds:
        return None
    q_r, b_r = _constants(problem, fp, subsets, None if etas is None else np.asarray(etas, float)[rounds])
    radius = float(fp.radius) if np.isfinite(fp.radius) else 0.0
    move, allowance = np.empty(len(rounds)), np.empty(len(rounds))
    for j, (k, S) in enumerate(zip(rounds, subsets)):
        idx = np.arange(p.size) if isinstance(S, str) else S
        w = p[idx] / p[idx].sum()
        U = models[k + 1, idx]
        scale = max(1.0, float(np.linalg.norm(T[k])))
        e = 4.0 * (J + 2) * u * np.maximum(scale, np.linalg.norm(U, axis=1))
        move[j] = float(np.linalg.norm(w @ U - T[k]))
        allowance[j] = float(w @ e) + FLOAT64_FLOOR * scale
    with np.errstate(divide="ignore"):
        bound = np.where(q_r < 1.0, (move + allowance + b_r) / (1.0 - q_r) + radius, np.inf)
    return {"rounds": np.array(rounds), "bound": bound, "move": move, "allowance": allowance, "q": q_r, "b": b_r}


def momentum_settings(run, server_momentum=None, global_step=None) -> tuple[float, float] | None:
    """``(beta, eta_s)`` of a FedAvgM run: given, else as :class:`drflmodel.flower.Recorder` recorded them
    (``info["strategy_settings"]``: Flower's ``server_momentum``, ``server_learning_rate``, default 1);
    ``None`` when the momentum is unknown."""
    settings = dict((getattr(run, "info", None) or {}).get("strategy_settings") or {})
    beta = server_momentum if server_momentum is not None else settings.get("server_momentum")
    eta = global_step if global_step is not None else settings.get("server_learning_rate", 1.0)
    if beta is None or eta is None or not (0 <= float(beta) < 1) or not float(eta) > 0:
        return None
    return float(beta), float(eta)


def _constants(problem, fp, subsets, etas):
    """Per round :math:`(q_r, b_r)`: the subset's (participation), with each round's own step (schedules)."""
    if etas is None:
        return subset_constants(problem, fp, subsets)[:2]
    return schedule_constants(problem, fp, etas, subsets)


def momentum_certificate(problem, fp, thetas, beta: float, eta_s: float, subsets, u: float, eps,
                         etas=None) -> dict | None:
    r"""Per round :math:`r<R` the bound :math:`B_r\ge\|\theta_r-\theta^\star\|` from the pseudo-gradients
    FedAvgM's models reveal (module docstring); ``subsets`` per round (:data:`ALL` or indices), ``eps``
    the clients' rounding allowance per round. Same keys as :func:`client_update_certificate`."""
    q = fp.contraction
    if q is None or not (0 <= q < 1) or fp.status == "uncertified":
        return None
    T = np.asarray(thetas, float)
    M = (T[:-1] - T[1:]) / eta_s
    G = M.copy()
    G[1:] -= beta * M[:-1]
    norms = np.linalg.norm(T, axis=1)
    e_m = 2.0 * u * (norms[:-1] + norms[1:]) / eta_s + 2.0 * u * np.linalg.norm(M, axis=1)
    allowance = np.asarray(eps, float) + e_m
    allowance[1:] += beta * e_m[:-1]
    q_r, b_r = _constants(problem, fp, subsets, etas)
    radius = float(fp.radius) if np.isfinite(fp.radius) else 0.0
    move = np.linalg.norm(G, axis=1)
    with np.errstate(divide="ignore"):
        bound = np.where(q_r < 1.0, (move + allowance + b_r) / (1.0 - q_r) + radius, np.inf)
    return {"rounds": np.arange(len(G)), "bound": bound, "move": move, "allowance": allowance, "q": q_r, "b": b_r}


def grade_server_run(rep, problem, fp, T, d_fp, client_models, u: float, eps, tol_abs: float,
                     momentum=None, subsets=None, schedule=None) -> None:
    """Refine a server-optimizer verdict in place (module docstring): the per-round certificate from the
    recorded client models ("elsewhere, proved" when a round breaks it; the best round's bound in the
    reasons) and, with or without records, "landed" within the round map's rounding region."""
    q = fp.contraction
    radius = float(fp.radius) if np.isfinite(fp.radius) else 0.0
    if q is not None and 0 <= q < 1 and rep.verdict == "not_landed":
        region = float(np.max(eps)) / (1.0 - q)
        if d_fp[-1] <= tol_abs + radius + region:
            rep.verdict, rep.evidence = "landed", ""
            rep.text = (f"landed on its fixed point within its {rep.extra.get('precision', '')} rounding region "
                        f"(radius {region:.2e}; distance {d_fp[-1]:.2e}): {rep.strategy} lands on FedAvg's point "
                        f"with the same local steps")
            rep.extra["landing_region"] = region
    source = "the recorded client updates"
    if client_models is not None:
        cert = client_update_certificate(problem, fp, T, client_models, u, schedule)
    elif momentum is not None and rep.strategy == "FedAvgM":
        cert = momentum_certificate(problem, fp, T, momentum[0], momentum[1], subsets, u, eps, schedule)
        source = f"the pseudo-gradients its models reveal (momentum {momentum[0]:g}, server step {momentum[1]:g})"
    else:
        rep.reasons.append(f"{rep.strategy}: no client updates recorded -- graded by distance only; no per-round "
                           "bound holds for a server optimizer's own iterates" +
                           (" (FedAvgM: pass server_momentum= to recover them from the models)"
                            if rep.strategy == "FedAvgM" else ""))
        return
    if cert is None:
        return
    k_all, bound = cert["rounds"], cert["bound"]
    rep.extra["server_certificate"] = {"rounds": k_all.tolist(), "bound": bound.tolist()}
    over = np.flatnonzero(d_fp[k_all] > bound * (1.0 + 1e-9))
    if over.size:
        j = int(over[0])
        k = int(k_all[j])
        why = (f"round {k}: {source} give a move of {cert['move'][j]:.3e}, so a model "
               f"whose round map moves that little lies within (move + rounding {cert['allowance'][j]:.1e} + subset "
               f"pull {cert['b'][j]:.1e})/(1-q) = {bound[j]:.3e} of the landing point (Banach, q = {cert['q'][j]:.4f}; "
               f"valid whatever the server optimizer does); the run's model is at {d_fp[k]:.3e}")
        rep.reasons.append(f"evidence (proved, from {source}): {why}")
        if rep.verdict != "elsewhere" or rep.evidence != "proved":
            named = rep.extra.get("faulty_clients")       # a client already named: keep its sentence
            rep.verdict, rep.evidence = "elsewhere", "proved"
            rep.text = rep.text if named else (f"landed elsewhere: not the strategy it claims to be ({why}); distance to its fixed point "
                        f"{d_fp[-1]:.3e}")
        return
    j = int(np.argmin(bound))
    proved = bound[j] <= tol_abs + radius + max(rep.extra.get("landing_region", 0.0), 0.0)
    rep.extra["server_certificate"]["best_round"] = int(k_all[j])
    rep.reasons.append(f"per-round certificate from {source} ({k_all.size} rounds): "
                       f"||theta_{int(k_all[j])} - theta*|| <= {bound[j]:.3e} (the tightest; valid whatever the "
                       f"server optimizer does)" + ("; landed, proved at that round" if proved else ""))
    if proved and rep.verdict == "landed":
        rep.text += f" (proved at round {int(k_all[j])} from {source}: distance <= {bound[j]:.2e})"
