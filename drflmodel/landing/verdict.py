r"""The conformance verdict: did a run land where the strategy it claims to be provably lands?

``conformance(run, problem, strategy)`` grades a run -- a simulator
:class:`~drflmodel.solvers.Trace`, a Flower run recorded by :class:`drflmodel.flower.Recorder` or a
:func:`drflmodel.flower.graded` app (its ``trace``), or an array of iterates -- against **both**
the certified optimum of the objective (the oracle) and the strategy's certified landing point
(:func:`~drflmodel.landing.points.fixed_point`). A FedAvg or FedProx run with local steps
legitimately stops away from the optimum (client drift); the verdict separates that from a run
that is not the strategy it claims to be:

``"landed"``
    the last iterate is within ``tol`` (plus the landing point's certified radius) of the landing
    point: "landed on its fixed point (drift from the optimum: ..., expected)".
``"elsewhere"``
    proved or observed not to be the claimed strategy: "landed elsewhere: not the strategy it
    claims to be". *Proved* for strategies whose round map :math:`T` is a certified contraction
    (FedAvg, FedProx; :mod:`drflmodel.landing.contraction`) with a plain server step
    :math:`\theta^{r+1}=\theta^r+\eta_g(T(\theta^r)-\theta^r)`: every round of such a run obeys
    Banach's a-posteriori bound

    .. math:: \|\theta^r-\theta^\star\|\le\frac{\|\theta^{r+1}-\theta^r\|}{\eta_g(1-q)},

    and the a-priori one :math:`\|\theta^R-\theta^\star\|\le\kappa^R\|\theta^0-\theta^\star\|`,
    :math:`\kappa=|1-\eta_g|+\eta_gq`; a round that breaks either (beyond the landing point's radius
    and a rounding allowance) cannot come from the claimed strategy. *Observed* otherwise: the run
    has stopped away from the landing point (over the last 10% of the rounds its distance fell by
    less than 1%, and its last step is below ``1e-3`` of the distance) -- evidence, not a proof.
    The nearest alternative landing point is named when the run matches one (FedAvg's point with
    the same steps -- "the proximal term had no effect" --, FedProx with exact local solves, the
    optimum).
``"not_landed"``
    still moving and consistent with the strategy so far; the rounds still needed at the certified
    rate are estimated.
``"observed"``
    no landing point or region is certified for the run (minibatch local steps on a loss without a
    per-sample gradient bound, or with a server optimizer): the distances to the full-batch point
    over the last rounds are reported, nothing is proved. Minibatch runs of FedAvg / FedProx on a
    Lipschitz loss are graded against a certified noise region (:mod:`drflmodel.landing.minibatch`).
``"incomplete"``
    the landing point depends on configuration the run does not record (the local steps
    :math:`J`, the step :math:`\eta`, FedProx's :math:`\mu`): the report names what it needs and
    still grades the distance to the optimum.

**The run's arithmetic and participation.** Every bound above holds for the exact round map with
every client. A run computed in float32 / float16 / bfloat16 perturbs each round by at most a rounding
allowance :math:`\varepsilon_r` (:mod:`drflmodel.landing.arithmetic`): the bounds become
:math:`(\|\theta^{r+1}-\theta^r\|+\varepsilon_r)/(\eta_g(1-q))` and
:math:`\kappa^Rd_0+\sum_r\kappa^{R-1-r}\varepsilon_r`, and "landed" means within the rounding region
:math:`\varepsilon/(1-\kappa)`. A round with a sampled subset of the clients applies that subset's map,
a contraction towards its own point: the bounds take the subset's pull :math:`b_S`
(:mod:`drflmodel.landing.participation`), and "landed" means within the region every correct sampled
run reaches. Iterates that record no participation are assumed to have full participation, and a
proof says so.

The configuration is read from the run where it is recorded (a simulator trace's parameters and
``info["step_size_used"]``; the training configuration a Flower strategy sent -- ``proximal-mu``,
``lr``, ``local-steps`` -- as recorded by :class:`drflmodel.flower.Recorder`), and any keyword given
here takes precedence (its source is reported).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import as_finite_array, check_real
from ..errors import InvalidDataError, InvalidParameterError
from ..solution import ORACLE_GAP_TOL, jsonable
from .arithmetic import rounding_allowance, run_precision
from .clients import client_faults, describe
from .minibatch import martingale_radius, noise_bounds
from .participation import ALL, round_noise, round_subsets, subset_constants
from .replay import check_aggregation, grade_replay
from .points import CONFIG_KEYS, check_problem, check_solution, fixed_point, missing_configuration, optimum_point
from .result import FixedPoint
from .schedules import recorded_schedule, schedule_constants, scheduled_client_faults, split_schedule
from .servers import SERVER_OPTIMIZERS, grade_server_run, momentum_settings
from .strategies import StrategyNotCharacterized, characterize

__all__ = ["conformance", "Conformance", "VERDICTS", "recorded_configuration"]

VERDICTS = ("landed", "elsewhere", "not_landed", "incomplete", "observed")

#: Flower training-configuration keys -> drflmodel's configuration keys
FLOWER_CONFIG_KEYS = {"proximal-mu": "mu", "lr": "step_size", "learning-rate": "step_size",
                      "local-steps": "local_steps", "local-epochs": None, "batch-size": "batch_size",
                      "batch_size": "batch_size"}
#: server optimizers: their fixed point is FedAvg's, but no per-round contraction holds for them
_SERVER_OPTIMIZERS = ("FedAdam", "FedYogi", "FedAdagrad", "FedAvgM")


@dataclass
class Conformance:
    """A run graded against the optimum and the strategy's certified landing point (module docstring).

    Attributes
    ----------
    strategy : the strategy the run claims to be.
    verdict : one of :data:`VERDICTS`; ``passed`` is ``verdict == "landed"``.
    text : the verdict in one sentence.
    reasons : the evidence, one line each.
    config : the configuration used (``config_source`` says, per key, ``"recorded"`` or ``"given"``).
    missing : the configuration keys the landing point needs that neither the run nor the call gave.
    fixed_point : the certified :class:`~drflmodel.landing.result.FixedPoint` (``None`` when incomplete).
    optimum : the objective's certified :class:`~drflmodel.solution.Solution`.
    rows : per round: ``dist_fixed_point``, ``dist_optimum``, ``step`` (the move to the next round).
    drift : distance from the landing point to the optimum, and ``drift_objective`` the relative
        objective excess there -- what the strategy gives up by design.
    evidence : str
        ``"proved"`` (a certified bound broken), ``"observed"`` (stopped away from the point) or ``""``.
    matches : the alternative landing point the run matches, when it landed elsewhere.
    """

    strategy: str
    verdict: str
    text: str
    reasons: list
    config: dict
    config_source: dict
    missing: list
    fixed_point: FixedPoint | None
    optimum: Any
    rows: list
    drift: float | None
    drift_objective: float | None
    tol: float
    evidence: str = ""
    matches: str | None = None
    rounds_to_land: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == "landed"

    @property
    def final(self) -> dict:
        return self.rows[-1] if self.rows else {}

    def summary(self) -> str:
        lines = [f"{'PASSED' if self.passed else 'FAILED'}: {self.strategy} -- {self.text}"]
        f = self.final
        if f:
            parts = [f"{k}={f[k]:.3e}" for k in ("dist_fixed_point", "dist_optimum")
                     if f.get(k) is not None and np.isfinite(f[k])]
            lines.append(f"  after {len(self.rows) - 1} rounds: " + ", ".join(parts))
        if self.drift is not None:
            lines.append(f"  drift of the landing point from the optimum: {self.drift:.3e} "
                         f"(objective {self.drift_objective:+.3e} relative)")
        shown = {k: v for k, v in self.config.items() if k != "weights" and v is not None}
        if shown:
            lines.append("  configuration: " + ", ".join(
                f"{k}={v:g} ({self.config_source.get(k, '?')})" if isinstance(v, float)
                else f"{k}={v} ({self.config_source.get(k, '?')})" for k, v in shown.items()))
        for reason in self.reasons:
            lines.append(f"  {reason}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return jsonable({"strategy": self.strategy, "verdict": self.verdict, "passed": self.passed,
                         "text": self.text, "reasons": self.reasons, "config": self.config,
                         "config_source": self.config_source, "missing": self.missing,
                         "fixed_point": None if self.fixed_point is None else self.fixed_point.to_dict(),
                         "optimum": None if self.optimum is None else {
                             "theta": self.optimum.theta, "value": self.optimum.value,
                             "status": self.optimum.status},
                         "rows": self.rows, "drift": self.drift, "drift_objective": self.drift_objective,
                         "tol": self.tol, "evidence": self.evidence, "matches": self.matches,
                         "rounds_to_land": self.rounds_to_land, "extra": self.extra})

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def plot(self, ax=None, path=None, label: str | None = None):
        """Distances to the landing point (solid) and to the optimum (dashed) per round, log scale,
        onto ``ax`` or into ``path``; returns the axes."""
        import matplotlib

        if ax is None:
            if path is not None:
                matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(6, 4))
        r = [row["round"] for row in self.rows]
        name = label or self.strategy
        tiny = 1e-300
        line, = ax.semilogy(r, [max(row["dist_fixed_point"], tiny) if row["dist_fixed_point"] is not None
                               else np.nan for row in self.rows],
                            label=f"{name}: to its fixed point ({self.verdict})")
        ax.semilogy(r, [max(row["dist_optimum"], tiny) for row in self.rows], "--", color=line.get_color(),
                    alpha=0.7, label=f"{name}: to the optimum")
        ax.set_xlabel("round")
        ax.set_ylabel(r"$\|\theta^r-\cdot\|$")
        ax.legend(fontsize="small")
        if path is not None:
            ax.figure.savefig(path, dpi=120, bbox_inches="tight")
        return ax


# --------------------------------------------------------------------------- reading the run
def recorded_configuration(run) -> tuple[str | None, dict]:
    """``(strategy name, configuration)`` a run records: a simulator trace's solver and parameters
    (``step_size`` from ``info["step_size_used"]`` when the solver chose it), or the training
    configuration a Flower strategy sent (:class:`drflmodel.flower.Recorder` keeps it per round;
    the last round's is used)."""
    params = dict(getattr(run, "params", None) or {})
    info = dict(getattr(run, "info", None) or {})
    name = getattr(run, "solver", None) or None
    config = {k: params[k] for k in CONFIG_KEYS if params.get(k) is not None}
    if "step_size" not in config and info.get("step_size_used") is not None:
        config["step_size"] = float(info["step_size_used"])
    sent = [row.get("train_config") for row in info.get("participation", []) if row.get("train_config")]
    if sent:
        for key, value in sent[-1].items():
            ours = FLOWER_CONFIG_KEYS.get(key)
            if ours is not None and ours not in config:
                config[ours] = value
    if name in ("flower", "iterates"):
        name = None
    return name, config


def _iterates(run) -> np.ndarray:
    thetas = getattr(run, "theta", None)
    if thetas is None and not hasattr(run, "solver"):
        thetas = run
    if thetas is None:
        raise InvalidDataError("run has no per-round models: pass a Trace, a graded app or an array (R+1, P)")
    try:
        T = np.asarray(thetas, float)
    except (TypeError, ValueError):
        raise InvalidDataError(f"iterates must be an array of shape (R+1, P) of floats; got "
                               f"{type(thetas).__name__}") from None
    if T.ndim != 2 or T.shape[0] < 2 or T.shape[1] < 1:
        raise InvalidDataError(f"iterates must have shape (R+1, P) with R >= 1 rounds (at least two models: the "
                               f"start and one round); got shape {T.shape}")
    return as_finite_array(thetas, "iterates", ndim=2)


# --------------------------------------------------------------------------- the verdict
def conformance(run, problem, strategy=None, *, local_steps=None, step_size=None, mu=None, weights=None,
                global_step=None, batch_size=None, solution=None, tol: float = 1e-6, precision=None,
                participation=None, client_models=None, delta: float = 1e-3,
                batch_sampling: str | None = None, server_momentum=None,
                aggregation: str | None = None) -> Conformance:
    r"""Grade ``run`` against the optimum and the certified landing point of ``strategy`` (module
    docstring).

    Parameters
    ----------
    run : a :class:`~drflmodel.solvers.Trace` (simulator or recorded Flower run), an object with a
        ``trace`` attribute (a :func:`drflmodel.flower.graded` app), or iterates of shape ``(R+1, P)``.
    problem : the problem the run trains on (the objective the strategy claims to minimize).
    strategy : the strategy the run claims to be (default: the one the trace records).
    local_steps, step_size, mu, weights, global_step, batch_size : the configuration; recorded values
        are used where these are ``None`` (a recorded ``mu`` only when grading as FedProx).
    precision : the arithmetic of the run (``"float64"``, ``"float32"``, ``"float16"``, ``"bfloat16"``
        or a unit roundoff); default: recorded or inferred (:mod:`drflmodel.landing.arithmetic`).
    participation : ``"all"``, ``"sampled"`` or per round the indices of the clients that took part;
        default: as the run records it (:mod:`drflmodel.landing.participation`).
    client_models : ``(R+1, n, P)``, row ``r`` the model each client returned in round ``r`` (NaN where
        none; fewer rows: only the first rounds are checked); default: ``run.iterates["client_models"]``
        (a recorded Flower run). Each is checked against the client's own local steps and a faulty
        client is named
        (:mod:`drflmodel.landing.clients`).
    delta, batch_sampling : for minibatch local steps (``batch_size`` set): the failure probability of
        the noise region, and how each step's batch is drawn -- ``"fresh"`` (each step samples anew;
        drflmodel's simulator) or ``"epoch"`` (batches of one shuffled epoch: worst-case noise);
        default ``"fresh"`` for a simulator trace, else ``"epoch"`` (:mod:`drflmodel.landing.minibatch`).
    server_momentum : FedAvgM's momentum (Flower's ``server_momentum``; its ``server_learning_rate`` is
        ``global_step``), to recover the pseudo-gradients from the models (:mod:`drflmodel.landing.servers`);
        default: as the Recorder recorded it.
    aggregation : how a sampled subset of clients is averaged: ``"examples"`` (the weights renormalized
        over the subset, Flower's FedAvg / FedProx), ``"uniform"`` (1/m, FedProx's Algorithm 2) or
        ``None`` (default, unless the run records it: any convex weighting). Full-batch runs with recorded
        subsets are replayed round by round against their subset's map (:mod:`drflmodel.landing.replay`).
    solution : the objective's certified solution (default: the graded app's, else ``problem.solve()``).
    tol : landing tolerance on the distance, relative to :math:`\max(1,\|\theta^\star\|)`.

    Returns
    -------
    Conformance
        The verdict, its evidence, the distances per round, the drift of the landing point.
    """
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    check_problem(problem)
    check_solution(solution)
    if global_step is not None:
        global_step = check_real(global_step, "global_step", low=0.0, low_open=True)
    if server_momentum is not None:
        server_momentum = check_real(server_momentum, "server_momentum", low=0.0, high=1.0, high_open=True)
    if not isinstance(run, (np.ndarray, list, tuple)) and hasattr(run, "trace") and not hasattr(run, "theta"):
        if solution is None:
            solution = getattr(run, "solution", None)
        run = run.trace
        if run is None:
            raise InvalidParameterError("the graded app has no trace yet: run it first")
    T = _iterates(run)
    step_size, schedule = split_schedule(step_size, len(T) - 1)       # a decaying step: landing.schedules
    if schedule is None and step_size is None and hasattr(run, "solver"):
        schedule = recorded_schedule(run, len(T) - 1)
    recorded_name, recorded = recorded_configuration(run) if hasattr(run, "solver") else (None, {})
    name = strategy if strategy is not None else recorded_name
    if name is None:
        raise InvalidParameterError("strategy: name the strategy the run claims to be (e.g. 'FedProx'); "
                                    "these iterates record none")
    if not isinstance(name, str):
        name = type(name).__name__
    char = characterize(name)
    given = {"local_steps": local_steps, "step_size": step_size, "mu": mu, "global_step": global_step,
             "batch_size": batch_size}
    config, source = {}, {}
    for key in CONFIG_KEYS:
        if given.get(key) is not None:
            config[key], source[key] = given[key], "given"
        elif recorded.get(key) is not None and (key != "mu" or char.name == "FedProx"):
            config[key], source[key] = recorded[key], "recorded"
    if T.shape[1] != int(problem.dim):
        raise InvalidDataError(f"iterates must have {problem.dim} columns (the problem's P); got {T.shape[1]}")
    sol = solution if solution is not None else problem.solve(gap_tol=ORACLE_GAP_TOL)
    identify = getattr(problem, "identifiable", lambda t: np.asarray(t, float))
    T_id = np.array([identify(t) for t in T])
    opt_theta, opt_radius, _ = optimum_point(problem, sol)
    opt_id = identify(opt_theta)
    d_opt = np.linalg.norm(T_id - opt_id[None, :], axis=1)
    steps = np.append(np.linalg.norm(np.diff(T, axis=0), axis=1), np.nan)

    missing = missing_configuration(name, config)
    if char.name == "FedProx" and config.get("local_steps") == "exact":
        missing = [k for k in missing if k != "step_size"]
    if missing:
        rows = [{"round": r, "dist_fixed_point": None, "dist_optimum": float(d_opt[r]), "step": float(steps[r])}
                for r in range(len(T))]
        needs = "; ".join(f"{k} ({CONFIG_KEYS[k]})" for k in missing)
        call = ", ".join(f"{k}=..." for k in missing)
        text = (f"cannot grade the landing: {char.name}'s landing point depends on {', '.join(char.needs)}, "
                f"and the run records no {', '.join(missing)}; pass them: conformance(run, problem, "
                f"{char.name!r}, {call})")
        return Conformance(strategy=char.name, verdict="incomplete", text=text,
                           reasons=[f"needs: {needs}", f"distance to the optimum after {len(T) - 1} rounds: "
                                    f"{d_opt[-1]:.3e}"],
                           config=config, config_source=source, missing=missing, fixed_point=None, optimum=sol,
                           rows=rows, drift=None, drift_objective=None, tol=tol)

    fp_config = {k: v for k, v in config.items() if k in ("local_steps", "step_size", "mu", "global_step")}
    if char.kind == "optimum":
        fp_config = {k: v for k, v in fp_config.items() if k in char.needs}
    fp = fixed_point(problem, char.name, weights=weights, solution=sol if char.kind == "optimum" else None,
                     theta0=opt_theta if char.kind != "optimum" else None, **fp_config)
    if fp.theta is None:
        raise InvalidParameterError(f"{char.name}'s landing point could not be computed ({fp.status}): "
                                    f"{fp.info.get('reason', '')}")
    fp_id = identify(fp.theta)
    d_fp = np.linalg.norm(T_id - fp_id[None, :], axis=1)
    rows = [{"round": r, "dist_fixed_point": float(d_fp[r]), "dist_optimum": float(d_opt[r]),
             "step": float(steps[r])} for r in range(len(T))]
    drift = float(np.linalg.norm(fp_id - opt_id))
    objective = problem.objective_for(sol) if hasattr(problem, "objective_for") else problem.objective
    g_star = float(sol.value)
    drift_objective = (float(objective(fp.theta)) - float(objective(opt_theta))) / max(1.0, abs(g_star))
    common = dict(strategy=char.name, config=_shown(config, fp), config_source=source, missing=[], fixed_point=fp,
                  optimum=sol, rows=rows, drift=drift, drift_objective=drift_objective, tol=tol)
    noise = None
    if config.get("batch_size") is not None:
        if batch_sampling is None:
            batch_sampling = "fresh" if getattr(run, "solver", None) not in (None, "flower", "iterates") and \
                getattr(run, "info", {}).get("engine") != "flower" else "epoch"
        if fp.kind == "local_steps" and _plain_round(char, config)[0]:
            noise = noise_bounds(problem, fp, config["batch_size"], len(T) - 1, delta, batch_sampling)
            if noise is not None:
                noise = (*noise, {"batch_size": config["batch_size"], "delta": delta, "sampling": batch_sampling})
        if noise is None or schedule is not None:
            return _minibatch_observed(char, fp, d_fp, d_opt, steps, tol, common)
    arithmetic = run_precision(T, _recorded_dtypes(run), precision)
    subsets, how = round_subsets(run, int(problem.n_clients), len(T) - 1, participation)
    aggregation = check_aggregation(aggregation if aggregation is not None else
                                    dict(getattr(run, "info", None) or {}).get("aggregation"))
    rep = _verdict(char, fp, problem, T, d_fp, d_opt, steps, config, drift, tol, weights, opt_theta, opt_radius,
                   arithmetic, subsets, how, common, noise, schedule, aggregation)
    if noise is not None:
        return rep
    if fp.kind == "local_steps" and schedule is None and _plain_round(char, config)[0] and \
            any(not (isinstance(S, str) and S == ALL) for S in subsets):      # sampled rounds: replay them
        grade_replay(rep, problem, fp, T, subsets, aggregation, arithmetic[1], _plain_round(char, config)[1])
    if client_models is None:
        client_models = (getattr(run, "iterates", None) or {}).get("client_models")
    if client_models is not None and fp.kind == "local_steps" and char.name in ("FedAvg", "FedProx") + SERVER_OPTIMIZERS:
        _grade_clients(rep, problem, fp, T, client_models, arithmetic[1], schedule)
    if char.name in SERVER_OPTIMIZERS and fp.kind == "local_steps":
        eps = rounding_allowance(arithmetic[1], int(fp.config["local_steps"]), int(problem.n_clients),
                                 np.maximum(np.linalg.norm(T, axis=1)[:-1], np.linalg.norm(T, axis=1)[1:]))
        grade_server_run(rep, problem, fp, T, d_fp, client_models, arithmetic[1], eps,
                         tol * max(1.0, float(np.linalg.norm(fp.theta))),
                         momentum_settings(run, server_momentum, global_step), subsets, schedule)
    return rep


def _grade_clients(rep, problem, fp, T, client_models, u, schedule=None) -> None:
    """Each client's returned models against its own local steps; a faulty client turns the verdict
    into "elsewhere" (proved under the rounding allowance) and is named."""
    models = np.asarray(client_models, float)
    if models.ndim != 3 or not 2 <= models.shape[0] <= len(T) or models.shape[2] != T.shape[1] \
            or models.shape[1] != int(problem.n_clients):
        raise InvalidDataError(f"client_models must have shape ({len(T)}, {problem.n_clients}, {T.shape[1]}) "
                               f"(row r: the models returned in round r; fewer rows: the first rounds only); "
                               f"got {models.shape}")
    faults = (client_faults(problem, fp, T, client_models, u, rep.strategy) if schedule is None else
              scheduled_client_faults(problem, fp, T, client_models, u, rep.strategy, schedule))
    rep.extra["faulty_clients"] = faults
    rep.extra["clients_checked"] = True
    if not faults:
        rep.reasons.append("every recorded client update matches its own local steps (within rounding)")
        return
    named = describe(faults[0], rep.strategy)
    if len(faults) > 1:
        named += f" (and client(s) {', '.join(str(f['client']) for f in faults[1:])} likewise: extra['faulty_clients'])"
    rep.reasons.append(f"evidence (proved, per client): {named}")
    if rep.verdict != "elsewhere":
        rep.verdict, rep.evidence = "elsewhere", "proved"
        rep.text = f"landed elsewhere: not the strategy it claims to be ({named})"
    else:
        rep.evidence = "proved"
        rep.text += f"; {named}"


#: FedProx clients that are not J gradient steps (scikit-learn's saga / lbfgs, any exact local solver)
_EXACT_HINT = ("if the clients solve their proximal problem to optimality (a non-gradient local solver, e.g. "
               "scikit-learn's saga or lbfgs), grade against that point: conformance(..., local_steps='exact')")


def _recorded_dtypes(run):
    info = dict(getattr(run, "info", None) or {})
    found = list(info.get("dtypes", []))
    for row in info.get("participation", []):
        found.extend(row.get("dtypes", []))
    return sorted(set(found)) or None


def _minibatch_observed(char, fp, d_fp, d_opt, steps, tol, common) -> Conformance:
    """Minibatch local steps: no landing point is certified; the statistics, observed."""
    R = len(d_fp) - 1
    tail = slice(R - max(1, R // 10), R + 1)
    B = common["config"]["batch_size"]
    stats = {"last_distance": float(d_fp[-1]), "tail_median_distance": float(np.median(d_fp[tail])),
             "tail_max_distance": float(np.max(d_fp[tail])), "tail_median_step": float(np.nanmedian(steps[tail]))}
    text = (f"observed, not graded: {char.name} with minibatch local steps (batch_size={B}) has no certified "
            f"landing point or region here; over the last {R + 1 - tail.start} rounds the distance to the "
            f"full-batch fixed point has median {stats['tail_median_distance']:.3e} (max "
            f"{stats['tail_max_distance']:.3e}) and the rounds move {stats['tail_median_step']:.3e}; distance to "
            f"the optimum {d_opt[-1]:.3e}")
    reasons = [f"full-batch landing point: {fp.characterization.statement} [{fp.status}, radius {fp.radius:.2e}]",
               "minibatch gradient noise keeps the iterates moving around it: nothing is proved either way"]
    return Conformance(verdict="observed", text=text, reasons=reasons, evidence="observed",
                       extra={"minibatch": stats}, **common)


def _verdict(char, fp, problem, T, d_fp, d_opt, steps, config, drift, tol, weights, opt_theta, opt_radius,
             arithmetic, subsets, how, common, noise=None, schedule=None, aggregation=None) -> Conformance:
    R = len(T) - 1
    scale = max(1.0, float(np.linalg.norm(fp.theta)))
    tol_abs = tol * scale
    radius = fp.radius if np.isfinite(fp.radius) else 0.0
    near = tol_abs + radius + (opt_radius if np.isfinite(opt_radius) else 0.0)
    expected = (f"drift from the optimum: {drift:.3e} in theta, {common['drift_objective']:+.3e} relative in the "
                f"objective, expected" if drift > near else "it is the optimum")
    precision, u, precision_source = arithmetic
    norms = np.linalg.norm(T, axis=1)
    J = fp.config.get("local_steps") if isinstance(fp.config.get("local_steps"), int) else 1
    eps = rounding_allowance(u, J, int(problem.n_clients), np.maximum(norms[:-1], norms[1:]))
    bounds = _round_bounds(char, fp, problem, config, subsets, eps, noise, schedule, aggregation)
    sampled = sum(1 for S in subsets if not (isinstance(S, str) and S == ALL))
    region = bounds["region"] if bounds is not None else 0.0
    reasons = [f"landing point: {fp.characterization.statement} [{fp.status}, radius {fp.radius:.2e}]",
               f"source: {fp.source}",
               f"arithmetic: {precision} ({precision_source}; rounding allowance up to {eps.max():.2e} per round)",
               f"participation: {sampled} of {R} rounds with a strict subset of the clients ({how})"]
    extra = {"precision": precision, "unit_roundoff": u, "precision_source": precision_source,
             "rounding_allowance": float(eps.max()), "sampled_rounds": sampled, "participation_source": how,
             "landing_region": region}
    if schedule is not None:
        reasons.append(f"schedule: the local step goes from {schedule[0]:.3g} to {schedule[-1]:.3g} over {R} rounds "
                       f"({np.unique(schedule).size} values); graded against the final step's point, the drift of the "
                       f"earlier steps' points charged per round (landing.schedules)")
        extra["schedule"] = {"first": float(schedule[0]), "final": float(schedule[-1]),
                             "distinct": int(np.unique(schedule).size)}
    if noise is not None:
        extra.update(noise_region=region, noise_probability=noise[1], batch_size=config["batch_size"])
        if bounds is not None and bounds.get("rho") is not None:
            extra.update(noise_rho=bounds["rho"])
            reasons.append(f"minibatch local steps (batch_size={config['batch_size']}): the run stays within "
                           f"{bounds['rho']:.3e} of the full-batch run at every round ({noise[1]}; cross-round "
                           f"martingale bound, per-sample gradient bounds from the rows)")
        else:
            reasons.append(f"minibatch local steps (batch_size={config['batch_size']}): the round deviates from "
                           f"the full-batch map by at most {float(np.max(noise[0])):.3e} per client ({noise[1]}; "
                           f"per-sample gradient bounds from the rows)")
        where = f"within the noise region (radius {region:.3e}, {noise[1]})"
    elif sampled:
        where = (f"within the region every correct run with sampled clients reaches (radius {region:.3e} around "
                 f"the full-participation point; {sampled} of {R} rounds sampled)")
    elif region > tol_abs:
        where = f"within its {precision} rounding region (radius {region:.2e})"
    else:
        where = ""
    if d_fp[-1] <= tol_abs + radius + region:
        text = (f"landed on its fixed point{' ' + where if where else ''} (distance {d_fp[-1]:.2e} <= "
                f"tol {tol_abs:.1e}{' + region' if where else ''}; {expected})")
        return Conformance(verdict="landed", text=text, reasons=reasons, extra=extra, **common)

    proof = _broken_bound(char, d_fp, steps, radius, bounds)
    if proof is not None and noise is not None:
        proof += (" -- a correct run does this with probability <= " + noise[1].split("- ")[1]
                  if noise[1].startswith("probability >=") else " -- impossible for a correct run (worst-case noise)")
    if proof is not None and how.startswith("assumed"):
        proof += " -- assuming every client took part every round (these iterates record no participation)"
    stopped = (_stopped(d_fp, steps) and not sampled and noise is None and schedule is None
               and d_fp[-1] > tol_abs + radius + _stall_floor(fp, eps, u, scale))
    if proof is not None or stopped:
        matches = _nearest_alternative(char, fp, problem, opt_theta, opt_radius, T[-1], tol_abs + region, weights)
        evidence = "proved" if proof is not None else "observed"
        why = proof if proof is not None else (
            f"the run stopped (last step {steps[R - 1]:.2e}; its distance fell by less than 1% over the last "
            f"10% of the rounds) at distance {d_fp[-1]:.3e} from the landing point -- observed, not proved: "
            f"no per-round bound is certified for {char.name}")
        text = (f"landed elsewhere: not the strategy it claims to be ({why}); distance to its fixed point "
                f"{d_fp[-1]:.3e}, to the optimum {d_opt[-1]:.3e}")
        if matches:
            text += f"; it matches {matches}"
        elif char.name == "FedProx" and fp.kind == "local_steps":
            text += f"; {_EXACT_HINT}"
        return Conformance(verdict="elsewhere", text=text, reasons=reasons + [f"evidence ({evidence}): {why}"],
                           evidence=evidence, matches=matches, extra=extra, **common)
    certified_rate = bounds is not None and not sampled and noise is None and schedule is None
    rounds = _rounds_to_land(fp, config, d_fp[-1], tol_abs + region) if certified_rate else None
    if _stopped(d_fp, steps):
        text = (f"not landed: stalled at distance {d_fp[-1]:.3e} from its fixed point (last step "
                f"{steps[R - 1]:.2e}), within the distance a correct {precision} run may stall at "
                f"({_stall_floor(fp, eps, u, scale):.2e}); consistent with {char.name}, not proved")
    else:
        text = (f"not landed yet: distance {d_fp[-1]:.3e} to its fixed point, still moving (last step "
                f"{steps[R - 1]:.2e}); consistent with {char.name} so far")
    if rounds is not None:
        text += f"; about {rounds} more rounds at the certified rate"
    elif sampled and bounds is not None:
        text += f" (a correct run with these sampled rounds ends within {region:.3e} of the point)"
    elif schedule is not None and bounds is not None:
        reach = d_fp[0] + radius                      # the a-priori bound of a correct run with this schedule
        for r in range(R):
            reach = bounds["kappa"][r] * reach + bounds["g"] * bounds["b"][r] + bounds["eps"][r]
        text += f"; with its decaying step a correct run is within {reach + radius:.3e} of the final step's point here"
    if char.name == "FedProx" and fp.kind == "local_steps":
        reasons.append(_EXACT_HINT)
    return Conformance(verdict="not_landed", text=text, reasons=reasons, rounds_to_land=rounds, extra=extra, **common)


def _stall_floor(fp, eps, u, scale) -> float:
    """How far from its point a correct rounded run may stall (its updates rounded away): the rounding
    region of the round map, :math:`\\varepsilon/(1-q)` (for local-steps points), and at least
    :math:`\\sqrt u` of the scale -- a
    heuristic floor for "observed" (no per-round bound gives it for a server optimizer, whose steps
    can be rounded away sooner)."""
    q = fp.contraction
    region = float(np.max(eps)) / (1.0 - q) if q is not None and 0 <= q < 1 else 0.0
    return max(np.sqrt(u) * scale, region)


def _stopped(d_fp, steps) -> bool:
    """The run has stopped away from the point: over the last 10% of the rounds (at least 10) its
    distance fell by less than 1% (a sublinear O(1/r) method still gains about 10% there), and the last
    step is below 1e-3 of the distance."""
    R = len(d_fp) - 1
    window = max(10, R // 10)
    if R < window + 1:
        return False
    return bool(d_fp[-1] >= 0.99 * d_fp[R - window] and steps[R - 1] <= 1e-3 * d_fp[-1])


def _shown(config: dict, fp: FixedPoint) -> dict:
    out = dict(config)
    for key in ("local_steps", "step_size", "mu"):
        if fp.config.get(key) is not None:
            out[key] = fp.config[key]
    return out


def _plain_round(char, config) -> tuple[bool, float]:
    """Whether the server step is :math:`\\theta+\\eta_g(T(\\theta)-\\theta)` (FedAvg, FedProx), and :math:`\\eta_g`."""
    if char.kind != "local_steps" or char.name in _SERVER_OPTIMIZERS:
        return False, 1.0
    return True, float(config.get("global_step") or 1.0)


def _round_bounds(char, fp, problem, config, subsets, eps, noise=None, schedule=None,
                  aggregation=None) -> dict | None:
    """Per round the contraction :math:`q_r`, the subset's pull :math:`b_r` (0 with every client), the
    server step and the rounding allowance :math:`\\varepsilon_r`; ``None`` when no per-round bound is
    certified for the strategy (module docstring; :mod:`drflmodel.landing.participation`)."""
    plain, g = _plain_round(char, config)
    q = fp.contraction
    if not plain or q is None or not (0 <= q < 1) or fp.status == "uncertified":
        return None
    q_r, b_r, _ = subset_constants(problem, fp, subsets, aggregation)
    if schedule is not None and fp.kind == "local_steps":      # each round's own step (landing.schedules)
        q_r, b_r = schedule_constants(problem, fp, schedule, subsets)
    rho = None
    if noise is not None and noise[2]["sampling"] == "fresh" and g == 1.0:
        # cross-round martingale bound (landing.minibatch): |theta_r - full-batch run| <= rho, all r
        rho = martingale_radius(problem, fp, noise[2]["batch_size"], subsets, eps, noise[2]["delta"],
                                aggregation if any(not isinstance(S, str) for S in subsets) else "examples")
    if noise is not None and rho is None:      # per-step worst case: the noise enters like a subset's pull
        b_r = b_r + round_noise(noise[0], fp.config["weights"], subsets)
    if not np.all(q_r < 1.0):
        return None
    kappa = np.abs(1.0 - g) + g * q_r
    if not np.all(kappa < 1.0):
        return None
    if rho is not None:
        region = rho + float(np.max(g * b_r / (1.0 - kappa)))
        return {"g": g, "q": q_r, "b": b_r, "kappa": kappa, "eps": np.zeros_like(eps), "region": region,
                "rho": rho}
    region = float(np.max((g * b_r + eps) / (1.0 - kappa)))
    out = {"g": g, "q": q_r, "b": b_r, "kappa": kappa, "eps": eps, "region": region, "rho": None}
    if schedule is not None:      # landed: within the final step's rounding region
        out["region"] = float((g * b_r[-1] + np.max(eps)) / (1.0 - kappa[-1]))
    return out


def _broken_bound(char, d_fp, steps, radius, bounds) -> str | None:
    """The first certified bound the run breaks (module docstring), as a sentence, or ``None``."""
    if bounds is None:
        return None
    R = len(d_fp) - 1
    g, q, b, kappa, eps, rho = (bounds[k] for k in ("g", "q", "b", "kappa", "eps", "rho"))
    if rho is not None:        # minibatch, cross-round bound: d_r <= (noiseless recursion) + rho
        D = np.empty(R + 1)
        D[0] = d_fp[0] + radius
        for r in range(R):
            D[r + 1] = kappa[r] * D[r] + g * b[r]
        over = np.flatnonzero(d_fp > (D + rho + radius) * (1.0 + 1e-9))
        if over.size:
            r = int(over[0])
            return (f"after {r} rounds the distance {d_fp[r]:.3e} exceeds the certified bound kappa^r d_0 "
                    f"(+ sampling terms) + rho = {D[r] + rho + radius:.3e} (rho = {rho:.3e}, the cross-round "
                    f"minibatch noise radius; kappa <= {kappa.max():.4f})")
        return None
    # a posteriori: ||theta_r - theta*|| <= (||theta_{r+1} - theta_r|| / g + eps_r / g + b_r) / (1 - q_r) + radius
    allowed = (steps[:R] / g + eps / g + b) / (1.0 - q) + radius
    over = np.flatnonzero(d_fp[:R] > allowed * (1.0 + 1e-9))
    if over.size:
        r = int(over[0])
        return (f"round {r}: distance {d_fp[r]:.3e} to the landing point exceeds the bound "
                f"(step/eta_g + rounding + subset pull)/(1-q) = {allowed[r]:.3e} that every round of {char.name} "
                f"obeys (q = {q[r]:.4f})")
    # a priori: d_{r+1} <= kappa_r d_r + g b_r + eps_r from d_0 (+ radius on both ends)
    D = np.empty(R + 1)
    D[0] = d_fp[0] + radius
    for r in range(R):
        D[r + 1] = kappa[r] * D[r] + g * b[r] + eps[r]
    over = np.flatnonzero(d_fp > (D + radius) * (1.0 + 1e-9))
    if over.size:
        r = int(over[0])
        return (f"after {r} rounds the distance {d_fp[r]:.3e} exceeds the certified contraction bound "
                f"kappa^r d_0 (+ rounding and sampling terms) = {D[r] + radius:.3e} (kappa <= {kappa.max():.4f})")
    return None


def _rounds_to_land(fp, config, distance, tol_abs) -> int | None:
    kappa = fp.round_factor(float(config.get("global_step") or 1.0))
    if kappa is None or not (0 < kappa < 1) or distance <= tol_abs:
        return None
    return int(np.ceil(np.log(tol_abs / distance) / np.log(kappa)))


def _nearest_alternative(char, fp, problem, opt_theta, opt_radius, theta, tol_abs, weights) -> str | None:
    """The alternative landing point ``theta`` is within tolerance of, in words (module docstring)."""
    identify = getattr(problem, "identifiable", lambda t: np.asarray(t, float))
    candidates = [("the objective's optimum (the local steps made no drift)", opt_theta, opt_radius)]
    if fp.kind in ("local_steps", "moreau"):
        J, eta, mu = fp.config.get("local_steps"), fp.config.get("step_size"), fp.config.get("mu")
        try:
            if char.name == "FedProx" and isinstance(J, int):
                avg = fixed_point(problem, "FedAvg", local_steps=J, step_size=eta, weights=weights, theta0=fp.theta)
                candidates.insert(0, (f"FedAvg's fixed point with the same J={J} and step {eta:.3g}: the proximal "
                                      "term had no effect (mu ignored or the term evaluated to zero)",
                                      avg.theta, avg.radius))
                exact = fixed_point(problem, "FedProx", local_steps="exact", mu=mu, weights=weights, theta0=fp.theta)
                candidates.append((f"FedProx's point with exact local solves (mu={mu:g})", exact.theta, exact.radius))
        except (InvalidParameterError, StrategyNotCharacterized):
            pass
    for text, point, rad in candidates:
        if point is None:
            continue
        rad = rad if np.isfinite(rad) else 0.0
        if np.linalg.norm(identify(theta) - identify(point)) <= tol_abs + rad:
            return text
    return None

