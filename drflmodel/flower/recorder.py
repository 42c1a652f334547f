"""Grade any Flower run against a certified oracle: :class:`Recorder`.

A ``Recorder`` is the ``evaluate_fn`` of any Flower strategy (``flwr.serverapp.strategy.FedAvg``,
``FedProx``, ``QFedAvg``, ``FedAdam``, or your own ``Strategy``): Flower calls it with the global
``ArrayRecord`` before round 1 and after every round, so it sees every global iterate. It keeps
them (the model is the concatenation of the record's arrays, raveled -- one vector
:math:`\\theta` for drflmodel's linear models) and, given the problem and a certified solution,
returns the live error each round as a ``MetricRecord`` (``dist_theta``, ``objective``,
``rel_gap``) that Flower logs and stores in its ``Result``::

    rec = Recorder(problem, solution)
    strategy = rec.watch(FedAvg(min_available_nodes=n, min_train_nodes=n))
    strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(d)]), num_rounds=R,
                   evaluate_fn=rec)
    report = rec.report()          # dm.verify of the run so far: distance, gap, rate, verdict

:meth:`Recorder.watch` (optional) also records, per round, which clients the strategy sampled,
which replied and which failed (a ``ClientApp`` error or no reply), the messages and payload
floats each way, and the training configuration the strategy sent (``train_config``: e.g.
``FedProx``'s ``proximal-mu``, and any ``lr`` / ``local-steps`` / ``batch-size`` given to
``start(train_config=...)``, which :func:`drflmodel.landing.conformance` reads -- a ``lr`` that changes
between rounds is graded as a schedule, :mod:`drflmodel.landing.schedules`); the strategy's participation
and server-optimizer settings (``info["strategy_settings"]``: ``fraction_train``, ``min_train_nodes``,
FedAdam's ``eta`` / ``beta_1`` / ``tau``, FedAvgM's ``server_momentum``, ...); the dtypes of the
arrays the clients returned (``info["dtypes"]``: the precision they computed in); and each named
client's returned model (``iterates["client_models"]``, shape ``(R+1, n, P)``, row :math:`r` the
models returned in round :math:`r`, computed from :math:`\\theta^{r-1}`, NaN where a client did not
reply; fewer rows when the record would exceed :data:`CLIENT_MODELS_MAX_FLOATS`), against which
each client's update is graded. Clients are named by the ``partition-id`` metric of their reply
when they send one (drflmodel's clients do), else by node id. :meth:`Recorder.trace` gives a
:class:`~drflmodel.solvers.Trace` (``dm.verify`` grades it; rounds where not every client took
part are listed in ``info["partial_participation"]`` and reported by ``dm.verify``).

**Layouts.** The recorded arrays become :math:`\theta` through ``parameters`` -- a
:class:`~drflmodel._from_sklearn.ParameterMap` (``dm.from_sklearn(...).parameters``: a scikit-learn
model's ``[coef_, intercept_]``), checked exactly every round. Without a map the strategy must ship
drflmodel's own layout, **one 1-D array of** :math:`P` **floats**; anything else is refused rather
than guessed (two arrays concatenated would put a scikit-learn intercept last, where drflmodel's is
column 0; a ``(K, d)`` array with :math:`K` = the number of clients could be one model per client or
one :math:`K`-class model).

**Live grading against a federated oracle.** With a solution of
:func:`drflmodel.flower.oracle.solve_on_grid` (whose problem holds no row), the objective at each
round's model is asked of the clients in the same deployment (one value per client) and kept:
:meth:`Recorder.report` and a saved trace grade from the kept values (``iterates["objective"]``,
``info["oracle"]``), :func:`grade` offline, after the clients are gone.
"""

from __future__ import annotations

import time
from logging import INFO

import numpy as np
from flwr.app import MetricRecord

from flwr.common.logger import log

from ..errors import InvalidDataError, InvalidParameterError
from ..solution import Solution
from ..solvers import Trace
from ._records import record_floats

__all__ = ["Recorder", "grade", "not_graded", "NOT_RECERTIFIED", "CLIENT_MODELS_MAX_FLOATS", "STRATEGY_SETTINGS"]

#: the largest per-client model record ((R+1) n P floats) a Recorder keeps
CLIENT_MODELS_MAX_FLOATS = 20_000_000
#: the strategy attributes :meth:`Recorder.watch` keeps (Flower 1.41's names): participation (``fraction_train``,
#: ``min_train_nodes``, ``min_available_nodes``), FedProx's ``proximal_mu``, FedAdam / FedYogi / FedAdagrad's
#: ``eta``, ``eta_l``, ``beta_1``, ``beta_2``, ``tau`` and FedAvgM's ``server_learning_rate``, ``server_momentum``
STRATEGY_SETTINGS = ("fraction_train", "min_train_nodes", "min_available_nodes", "proximal_mu", "eta", "eta_l",
                     "beta_1", "beta_2", "tau", "server_learning_rate", "server_momentum")


class Recorder:
    """Record a Flower strategy's global models (see the module docstring).

    Parameters
    ----------
    problem : the drflmodel problem the strategy claims to solve (for the live errors and
        :meth:`report`); optional.
    solution : its certified :class:`~drflmodel.solution.Solution` (``problem.solve()``); with it
        every call returns the live errors.
    n_clients : number of clients (default ``problem.n_clients``), to flag partial participation.
    parameters : a :class:`~drflmodel._from_sklearn.ParameterMap` from the strategy's arrays to
        :math:`\\theta` (module docstring); default: one 1-D array of :math:`P` floats.
    progress : log one line per round (Flower's logger; ``flwr run --stream`` shows it).
    """

    def __init__(self, problem=None, solution=None, n_clients: int | None = None, parameters=None,
                 progress: bool = False):
        if solution is not None and problem is None:
            problem = getattr(solution, "problem", None)
        if parameters is not None and not hasattr(parameters, "to_theta"):
            raise InvalidParameterError(f"parameters must be a ParameterMap (dm.from_sklearn(...).parameters); "
                                        f"got {type(parameters).__name__}")
        self.problem, self.solution, self.parameters = problem, solution, parameters
        self.n_clients = n_clients if n_clients is not None else getattr(problem, "n_clients", None)
        self.progress = bool(progress)
        self.thetas: dict[int, np.ndarray] = {}
        self.times: dict[int, float] = {}
        self.rounds: dict[int, dict] = {}
        self.objectives: dict[int, float] = {}
        #: per round, the model each named client returned (``{round: {partition-id: theta}}``)
        self.client_models: dict[int, dict] = {}
        self.client_models_truncated = False
        self.strategy_name = "flower"
        #: the strategy's participation and server-optimizer settings (:data:`STRATEGY_SETTINGS`), from :meth:`watch`
        self.strategy_settings: dict = {}
        #: what the verdict must say next to it (e.g. a strategy that minimizes no objective the oracle computes)
        self.caveats: list[str] = []
        #: the federated oracle's fault (``solution.info["fault"]``) when it certified nothing: the run is
        #: recorded and :meth:`report` says it is not graded, and why
        self.oracle_fault: dict | None = None
        self._t0: float | None = None

    # ------------------------------------------------------------------ evaluate_fn
    def theta_of(self, arrays, server_round=None) -> np.ndarray:
        """:math:`\\theta` of a strategy's arrays (``ArrayRecord`` or list), layout checked
        (module docstring)."""
        arrays = arrays.to_numpy_ndarrays() if hasattr(arrays, "to_numpy_ndarrays") else list(arrays)
        at = "" if server_round is None else f"round {server_round}: "
        if self.parameters is not None:
            try:
                return self.parameters.to_theta(arrays)
            except InvalidDataError as exc:
                raise InvalidDataError(f"{at}{exc}") from None
        shapes = [np.shape(a) for a in arrays]
        if self.problem is None:
            return np.concatenate([np.asarray(a, float).ravel() for a in arrays])
        P, n = int(self.problem.dim), self.n_clients
        if len(arrays) == 1 and shapes[0] == (P,):
            return np.asarray(arrays[0], float).copy()
        hint = ("pass Recorder(..., parameters=dm.from_sklearn(estimator, ...).parameters) to say how "
                "they map to theta")
        if any(len(s) == 2 and n is not None and n > 1 and s[0] == n for s in shapes):
            raise InvalidDataError(
                f"{at}the strategy ships arrays of shapes {shapes}: a ({n}, d) array with as many rows as "
                f"clients is one model per client or one {n}-class model -- ambiguous; {hint}")
        raise InvalidDataError(f"{at}the strategy ships arrays of shapes {shapes}; without a parameter map "
                               f"the Recorder takes exactly one 1-D array of P = {P} floats (drflmodel's "
                               f"layout, drflmodel.layout); {hint}")

    def __call__(self, server_round: int, arrays) -> MetricRecord | None:
        r = int(server_round)
        theta = self.theta_of(arrays, r)
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
        self.thetas[r], self.times[r] = theta, now - self._t0
        if self.solution is None or self.problem is None:
            return None
        errors = self.errors(theta)
        self.objectives[r] = errors["objective"]
        if self.progress:
            log(INFO, "[drflmodel] round %s: dist_theta=%.3e objective=%.10g rel_gap=%.3e", r,
                errors["dist_theta"], errors["objective"], errors["rel_gap"])
        return MetricRecord(errors)

    def errors(self, theta) -> dict:
        """``dist_theta`` to :math:`\\theta^\\star` (identifiable representatives), the
        certified ``objective`` and ``rel_gap``."""
        sol = self.solution
        if not np.all(np.isfinite(theta)):                   # a diverged strategy: nothing to measure
            return {"dist_theta": float("nan"), "objective": float("nan"), "rel_gap": float("nan")}
        objective = self.problem.objective_for(sol) if hasattr(self.problem, "objective_for") else self.problem.objective
        g = float(objective(theta))
        identify = getattr(self.problem, "identifiable", lambda t: np.asarray(t, float))
        return {"dist_theta": float(np.linalg.norm(identify(theta) - identify(np.asarray(sol.theta, float)))),
                "objective": g, "rel_gap": (g - float(sol.value)) / max(1.0, abs(float(sol.value)))}

    # ------------------------------------------------------------------ participation
    def _row(self, server_round: int) -> dict:
        return self.rounds.setdefault(int(server_round), {
            "round": int(server_round), "sampled": [], "participants": [], "missing": {},
            "messages_down": 0, "floats_down": 0, "messages_up": 0, "floats_up": 0})

    def watch(self, strategy):
        """Record who takes part in ``strategy``'s training rounds (wraps its
        ``configure_train`` / ``aggregate_train`` on this instance); returns ``strategy``."""
        configure, aggregate = strategy.configure_train, strategy.aggregate_train
        self.strategy_name = type(strategy).__name__
        self.strategy_settings = {k: getattr(strategy, k) for k in STRATEGY_SETTINGS
                                  if isinstance(getattr(strategy, k, None), (int, float)) and
                                  not isinstance(getattr(strategy, k), bool)}

        def configure_train(server_round, arrays, config, grid):
            messages = list(configure(server_round, arrays, config, grid))
            row = self._row(server_round)
            row["sampled"] = sorted(m.metadata.dst_node_id for m in messages)
            row["messages_down"] = len(messages)
            row["floats_down"] = sum(record_floats(m.content) for m in messages)
            row["train_config"] = _scalars(config)     # what the strategy sent (e.g. FedProx's proximal-mu)
            return messages

        def aggregate_train(server_round, replies):
            replies = list(replies)
            row = self._row(server_round)
            names = {}
            for m in replies:
                node = m.metadata.src_node_id
                if m.has_error():
                    row["missing"][self._name(node, names)] = f"client error: {m.error.reason}"
                    continue
                metrics = [rec for rec in m.content.metric_records.values() if "partition-id" in rec]
                names[node] = int(metrics[0]["partition-id"]) if metrics else node
                row["participants"].append(names[node])
                row["messages_up"] += 1
                row["floats_up"] += record_floats(m.content)
                self._keep_reply(server_round, row, names[node], m.content)
            for node in set(row["sampled"]) - {m.metadata.src_node_id for m in replies}:
                row["missing"][self._name(node, names)] = "no reply"
            row["participants"].sort()
            return aggregate(server_round, replies)

        strategy.configure_train = configure_train
        strategy.aggregate_train = aggregate_train
        return strategy

    def _keep_reply(self, server_round: int, row: dict, name, content) -> None:
        """The dtypes of a reply's arrays (the precision the client computed in), and its model as
        :math:`\\theta` when the client is named by its ``partition-id`` (to grade each client's update
        against its own round map, :func:`drflmodel.landing.conformance`)."""
        records = list(getattr(content, "array_records", {}).values())
        arrays = [a for rec in records for a in rec.to_numpy_ndarrays()]
        dtypes = sorted({str(np.asarray(a).dtype) for a in arrays if np.issubdtype(np.asarray(a).dtype, np.floating)})
        row["dtypes"] = sorted(set(row.get("dtypes", [])) | set(dtypes))
        if len(records) != 1 or not isinstance(name, int) or self.problem is None:
            return
        n = self.n_clients or 0
        if (int(server_round) + 1) * n * int(self.problem.dim) > CLIENT_MODELS_MAX_FLOATS:
            self.client_models_truncated = True        # the (R+1, n, P) record would be too large
            return
        try:
            theta = self.theta_of(records[0].to_numpy_ndarrays())
        except InvalidDataError:
            return
        self.client_models.setdefault(int(server_round), {})[name] = theta

    @staticmethod
    def _name(node, names):
        return names.get(node, f"node {node}")

    # ------------------------------------------------------------------ results
    def trace(self) -> Trace:
        """The recorded run as a :class:`~drflmodel.solvers.Trace` (rounds ``0..R``); with a solution,
        ``iterates["objective"]`` keeps the objective measured each round and ``info["oracle"]``
        the solution (and the layout), so that :func:`grade` works offline."""
        if not self.thetas:
            raise InvalidParameterError("nothing recorded yet: pass the Recorder as the strategy's "
                                        "evaluate_fn and start the strategy")
        R = max(self.thetas)
        missing = [r for r in range(R + 1) if r not in self.thetas]
        if missing:
            raise InvalidParameterError(f"no global model recorded for round(s) {missing}")
        times = np.array([self.times[r] for r in range(R + 1)])
        rows = [self.rounds.get(r, {}) for r in range(1, R + 1)]
        n = self.n_clients
        partial = [r for r, row in enumerate(rows, start=1)
                   if row and n is not None and len(set(row["participants"])) < n]
        counts = {k: np.array([row.get(k, 0) for row in rows], int)
                  for k in ("messages_up", "floats_up", "messages_down", "floats_down")}
        info = {"engine": "flower", "recorded_by": "drflmodel.flower.Recorder",
                "participation": [row for row in rows if row], "partial_participation": partial}
        iterates = {}
        if self.client_models_truncated:
            info["client_models"] = (f"recorded for the rounds whose (R+1, n, P) record fits in "
                                     f"{CLIENT_MODELS_MAX_FLOATS} floats; later rounds not kept")
        if self.client_models and n is not None and self.problem is not None:
            kept = min(R, max(self.client_models))       # row r: the replies of round r, r <= the last kept
            models = np.full((kept + 1, n, int(self.problem.dim)), np.nan)
            for r, replies in self.client_models.items():
                for i, theta in replies.items():
                    if 1 <= r < len(models) and 0 <= i < n and theta.shape == (models.shape[2],):
                        models[r, i] = theta
            iterates["client_models"] = models
        dtypes = sorted({d for row in rows for d in row.get("dtypes", [])})
        if dtypes:
            info["dtypes"] = dtypes
        if self.objectives:
            iterates["objective"] = np.array([self.objectives.get(r, np.nan) for r in range(R + 1)])
        if self.solution is not None:
            info["oracle"] = self.solution.to_dict()
            layout = getattr(self.problem, "layout", None)
            if layout is not None:
                info["layout"] = layout.to_dict()
            info["family"] = getattr(self.problem, "family", "")
        if self.parameters is not None:
            info["parameters"] = self.parameters.to_dict()
        if self.strategy_settings:
            info["strategy_settings"] = dict(self.strategy_settings)
        if self.caveats:
            info["caveats"] = list(self.caveats)
        if self.oracle_fault is not None:
            info["oracle_fault"] = dict(self.oracle_fault)
        return Trace(solver=self.strategy_name, params={}, weights=None,
                     theta=np.array([self.thetas[r] for r in range(R + 1)]), iterates=iterates, **counts,
                     round_time=np.diff(times), info=info, expected_rate=None, problem=self.problem)

    def report(self, solution=None, tol: float = 1e-6, **kwargs):
        """:func:`drflmodel.verify` of the run so far against ``solution`` (default: the one given
        at construction), using the objective values measured during the run where the problem's
        rows are remote; ``kwargs`` go to ``verify`` (``expected_rate``, ``error_metric``)."""
        sol = solution if solution is not None else self.solution
        if sol is None and self.oracle_fault is not None:
            return not_graded(self.trace(), tol=tol)
        if sol is None:
            raise InvalidParameterError("report needs a certified solution: Recorder(problem, solution) "
                                        "or report(solution)")
        kwargs.setdefault("expected_rate", None)
        return grade(self.trace(), sol, problem=self.problem, tol=tol, **kwargs)


def _scalars(config) -> dict:
    """A training ``ConfigRecord`` as a JSON-ready dict of its scalar entries (numbers, strings, booleans)."""
    out = {}
    for key, value in dict(config or {}).items():
        if isinstance(value, (bool, np.bool_)):
            out[str(key)] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[str(key)] = int(value)
        elif isinstance(value, (float, np.floating)):
            out[str(key)] = float(value)
        elif isinstance(value, str):
            out[str(key)] = value
    return out


class _Recorded:
    """A problem whose objective is read from the values measured during the run (by the exact
    bytes of each recorded model), delegating everything else to ``problem`` -- or, offline, to a
    layout rebuilt from the trace."""

    def __init__(self, thetas, values, problem=None, layout=None, family=""):
        self._values = {np.asarray(t, float).tobytes(): float(v) for t, v in zip(thetas, values)
                        if np.isfinite(v)}
        self._problem, self._layout = problem, layout
        self.family = getattr(problem, "family", family) or family

    def identifiable(self, theta):
        if self._problem is not None:
            return self._problem.identifiable(theta)
        return self._layout.identifiable(theta) if self._layout is not None else np.asarray(theta, float)

    def objective_for(self, solution):
        def objective(theta):
            key = np.asarray(theta, float).tobytes()
            if key in self._values:
                return self._values[key]
            if self._problem is not None and getattr(self._problem.objectives, "holds_rows", True):
                return self._problem.objective_for(solution)(theta)
            raise InvalidDataError("this model's objective was not measured during the run and the clients "
                                   "who hold the rows are not reachable now")
        return objective

    objective = property(lambda self: self.objective_for(None))


def _solution_from_dict(d: dict) -> Solution:
    return Solution(theta=np.asarray(d["theta"], float), weights=None if d.get("weights") is None
                    else np.asarray(d["weights"], float),
                    client_losses=None if d.get("client_losses") is None else np.asarray(d["client_losses"], float),
                    value=float(d["value"]), lower_bound=float(d["lower_bound"]), upper_bound=float(d["upper_bound"]),
                    status=d["status"], certificate=d["certificate"], duals=d.get("duals", {}), info=d.get("info", {}))


#: what the verdict says of an oracle (and objective values) taken from a file without rows to check them
NOT_RECERTIFIED = "oracle read from file, not re-certified"


def _stored_oracle_faults(stored: Solution, trace) -> list[str]:
    """What is inconsistent inside a trace file's oracle and measured objectives (a forged or
    damaged file): bounds out of order, a value outside them, a model of the wrong size, an objective
    measured during the run below the oracle's certified lower bound."""
    faults = []
    L, U, v = stored.lower_bound, stored.upper_bound, stored.value
    slack = 1e-9 * max(1.0, abs(U) if np.isfinite(U) else 1.0)
    if not (np.isfinite(L) and np.isfinite(U)) and stored.status in ("optimal", "optimal_within_gap"):
        faults.append(f"status {stored.status!r} without finite bounds (L = {L}, U = {U})")
    elif L > U + slack:
        faults.append(f"its lower bound {L:.10g} is above its upper bound {U:.10g}")
    elif not (L - slack <= v <= U + slack):
        faults.append(f"its value {v:.10g} lies outside its bounds [{L:.10g}, {U:.10g}]")
    theta = np.asarray(stored.theta, float)
    if theta.shape != np.shape(trace.theta[0]) or not np.all(np.isfinite(theta)):
        faults.append(f"its theta has shape {theta.shape} or non-finite entries (the run's models: "
                      f"{np.shape(trace.theta[0])})")
    measured = np.asarray((trace.iterates or {}).get("objective", []), float)
    below = np.nonzero(measured < L - slack)[0] if np.isfinite(L) else np.zeros(0, int)
    if below.size:
        k = int(below[0])
        faults.append(f"the objective measured at round {k} ({measured[k]:.10g}) is below the oracle's certified "
                      f"lower bound {L:.10g} ({below.size} round(s))")
    return faults


def _recertify(stored: Solution, problem) -> tuple[Solution, str | None]:
    """Solve ``problem`` (which holds its rows) again and compare with the file's oracle; returns the
    fresh solution and, when the two disagree beyond their certificates, why."""
    fresh = problem.solve()
    if fresh.theta is None or not np.isfinite(fresh.value):
        return fresh, None
    room = (abs(fresh.upper_bound - fresh.lower_bound) + abs(stored.upper_bound - stored.lower_bound)
            + 1e-8 * max(1.0, abs(fresh.value)))
    if not abs(stored.value - fresh.value) <= room:
        return fresh, (f"the oracle in the file (value {stored.value:.10g}, {stored.status}) disagrees with the oracle "
                       f"re-certified from the rows (value {fresh.value:.10g}, {fresh.status}): the file's oracle is "
                       "not this problem's; graded against the re-certified one")
    return fresh, None


def grade(trace, solution=None, problem=None, tol: float = 1e-6, **kwargs):
    """:func:`drflmodel.verify` of a recorded run (a :class:`~drflmodel.solvers.Trace` or the path
    of one saved by ``Trace.save``).

    ``solution`` defaults to the oracle the trace carries (``info["oracle"]``); ``problem`` (with
    rows) to the trace's. What the file claims is re-derived where possible:

    * with a problem holding its rows, the oracle is **re-certified** (solved again; a file whose
      oracle disagrees fails, naming both values) and every round's objective is recomputed;
    * without rows, the file's oracle and the objective values measured during the run
      (``iterates["objective"]``) are all there is: the oracle's internal consistency is checked
      (bounds in order, value inside them, every measured objective at or above the certified lower
      bound -- a violation fails the verdict) and the verdict line says
      ``"oracle read from file, not re-certified"``.
    """
    from ..layout import ParameterLayout
    from ..verification import verify

    if not isinstance(trace, Trace):
        trace = Trace.load(trace)
    info = trace.info or {}
    problem = problem if problem is not None else getattr(trace, "problem", None)
    has_rows = problem is not None and getattr(getattr(problem, "objectives", None), "holds_rows", True)
    faults, note = [], None
    if solution is None:
        if "oracle" not in info and "oracle_fault" in info:
            return not_graded(trace, tol=tol)
        if "oracle" not in info:
            raise InvalidParameterError("the trace carries no oracle solution: pass solution=")
        solution = _solution_from_dict(info["oracle"])
        if has_rows:
            solution, disagreement = _recertify(solution, problem)
            faults = [disagreement] if disagreement else []
            note = "oracle re-certified from the rows"
        else:
            faults = [f"the file's oracle is inconsistent: {f}" for f in _stored_oracle_faults(solution, trace)]
            note = NOT_RECERTIFIED
            unusable = [f for f in faults if "its theta has shape" in f]
            if unusable:                                 # nothing to measure distances against
                raise InvalidDataError(unusable[0])
    kwargs.setdefault("expected_rate", None)
    if has_rows:
        return _annotated(verify(trace, solution, tol=tol, problem=problem, **kwargs), info, note, faults)
    values = np.asarray(trace.iterates.get("objective", np.full(len(trace.theta), np.nan)), float)
    layout = None
    if problem is None and "layout" in info:
        lay = info["layout"]
        layout = ParameterLayout(lay["n_features"], lay["n_outputs"], lay["intercept_column"], lay["unpenalized"])
    recorded = _Recorded(trace.theta, values, problem, layout, info.get("family", ""))
    return _annotated(verify(trace, solution, tol=tol, problem=recorded, **kwargs), info, note, faults)


def not_graded(trace, tol: float = 1e-6):
    """The report of a run recorded without a certified oracle (the federated oracle failed: its fault
    is in ``trace.info["oracle_fault"]``): no distance and no verdict on convergence -- the summary's
    first line says ``NOT GRADED`` and why -- but what needs no oracle is still checked: every round's
    model is finite, which rounds had partial participation, and whether the faulty client took part
    in training. ``passed`` is ``False``."""
    from ..verification import Report

    info = trace.info or {}
    fault = dict(info.get("oracle_fault") or {})
    why = fault.get("message") or "the federated oracle certified nothing"
    theta = np.asarray(trace.theta, float).reshape(len(trace.theta), -1)
    finite = np.all(np.isfinite(theta), axis=1)
    rows = [{"round": r, "model_finite": bool(ok)} for r, ok in enumerate(finite)]
    reasons = [f"no certified oracle: {why}"]
    if not finite.all():
        reasons.append(f"the model is not finite from round {int(np.flatnonzero(~finite)[0])} (diverged)")
    partition = fault.get("partition")
    took_part = [row.get("round") for row in info.get("participation", [])
                 if partition is not None and partition in row.get("participants", [])]
    checked = (f"{len(rows) - 1} rounds recorded; every model finite" if finite.all()
               else f"{len(rows) - 1} rounds recorded")
    if took_part:
        checked += f"; the faulty client (partition {partition}) took part in training in {len(took_part)} round(s)"
    extra = {"not_graded": why, "checked": checked, "oracle_fault": fault,
             "partial_participation": list(info.get("partial_participation", []))}
    if info.get("caveats"):
        extra["caveats"] = list(info["caveats"])
    family = info.get("family") or getattr(getattr(trace, "problem", None), "family", "") or "the federated oracle"
    return Report(rows=rows, rate={}, passed=False, reasons=reasons, tol=float(tol), error_metric="dist_theta_sq",
                  rounds_to_tol=None, solver=trace.solver, family=family, extra=extra)


def _annotated(report, info: dict, note: str | None, faults: list):
    """The report with where its oracle came from (on the verdict line), the faults found in the file
    (each a failed check) and the trace's caveats (e.g. a robust aggregator graded against FedAvg's
    objective)."""
    if note:
        report.extra["oracle_source"] = note
    if faults:
        report.reasons.extend(faults)
        report.passed = False
    if info.get("caveats"):
        report.extra["caveats"] = list(info["caveats"])
    return report
