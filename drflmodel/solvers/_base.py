"""Common machinery of the distributed solvers.

Four pieces, shared by every algorithm in :mod:`drflmodel.solvers`:

:class:`Solver`
    The base class. ``Solver(**hyperparameters)`` only stores and validates (scikit-learn style;
    bad values raise :class:`~drflmodel.errors.InvalidParameterError` at construction);
    ``Solver.run(problem, seed=0, callback=None) -> Trace`` runs the simulated federation.
    A subclass implements three hooks::

        class MySolver(Solver):
            problem_types = ("drflmodel.problems.minmax.dro:FederatedDRO",)   # accepted families
            expected_rate = "linear"        # what the paper proves (read by dm.verify)

            def _validate(self):            # called by __init__; check self.params / attributes
                ...
            def _initialize(self, problem, runtime, theta0):   # -> state (a dict)
                return {"theta": theta0, "weights": lam0, ...}
            def _round(self, r, state, runtime):               # one communication round
                ...                                            # update state in place / return it
                return state

    ``state["theta"]`` (shape ``(d,)``) and, if present, ``state["weights"]`` (shape ``(n,)``, the
    client weights :math:`\\lambda`) are recorded after every round; the keys listed in
    ``record`` (a class attribute or ``self.record``) are recorded too, in ``Trace.iterates``.
    ``state["info"]`` (a dict, optional) is copied into ``Trace.info`` at the end, and
    ``state["expected_rate"]`` (optional) overrides the class's ``expected_rate`` for this run
    (e.g. ``None`` with minibatch gradients). Optional overrides: :meth:`Solver.check_problem`
    (extra family checks; call ``super()`` first) and :meth:`Solver.minibatch_size` (the
    runtime's minibatch size, default ``self.params.get("batch_size")``).

    **Public per-round hooks** (one run, written once for every engine). ``run`` is
    ``check_problem`` → :meth:`Solver.start` (validates ``seed`` and ``theta0`` -- shape
    ``(problem.dim,)``, default zeros --, builds the :class:`ClientRuntime` and calls
    ``_initialize``) → the rounds (:class:`RoundLog`) → :meth:`RoundLog.info`. The Flower port
    (:mod:`drflmodel.flower.server`) calls the same ``check_problem``, ``start``,
    ``minibatch_size`` and ``RoundLog.info``, and in its rounds each solver's public server step
    (``ScaffPD.server_step``, ``DRFA.server_step``, ``StochasticAFL.server_step``,
    ``RFedFair.sample_clients`` / ``server_step``, ``FairVFL.server_dual_step`` /
    ``server_step``), which the simulator's ``_round`` calls too: only the client work and the
    aggregation (counted here by :meth:`ClientRuntime.aggregate`, over Flower replies with
    fault handling there) differ between the engines.

:class:`ClientRuntime`
    The simulated federation. It is the *only* way a solver touches client data:

    * client side, **vectorized across clients** -- :meth:`ClientRuntime.losses`,
      :meth:`ClientRuntime.gradients` (exact or minibatch), :meth:`ClientRuntime.local_sgd`
      return stacked ``(n, ...)`` arrays computed from ``problem.objectives``
      (:class:`~drflmodel.objectives.ClientObjectives`), where row *i* reads only client *i*'s
      data and the arguments given for row *i* (its own iterate, the broadcast server values);
      :meth:`ClientRuntime.view` returns ``problem.client_view(i)`` for per-client computations
      that do not vectorize (e.g. a local subproblem);
    * server side -- :meth:`ClientRuntime.broadcast` (server → every client, one value),
      :meth:`ClientRuntime.scatter` (server → clients, row *i* to client *i*) and
      :meth:`ClientRuntime.upload` (every client → server) are the crossings of the
      privacy boundary; all are **counted** (messages and floats, per round, per direction).
      Anything combined *across* clients must first be uploaded; :meth:`ClientRuntime.aggregate`
      (:math:`\\sum_i w_i\\,v_i`, any real weights, negative allowed) only accepts arrays returned
      by :meth:`upload` in the current round, so an uncounted cross-client sum raises.

    Counting convention: one ``upload(...)`` call is one message per participating client whose
    size is the total number of floats of that client's rows (several named arrays sent together
    form one message); one ``broadcast(...)`` or ``scatter(...)`` call is one message per
    receiving client (a broadcast sends the whole value to each, a scatter its own row). A round's
    totals go into ``Trace.messages_up/floats_up/messages_down/floats_down``; the named ledger of
    the first round is kept in ``Trace.info["comm_schedule"]``.

:class:`Trace`
    Per-round record: ``theta`` (``(R+1, d)``; ``theta[k]`` is the model after *k* rounds,
    ``theta[0]`` the starting point -- in the papers' indexing, where the loop starts at
    :math:`r = 1` with :math:`x^1 = x^0`, ``theta[k]`` is :math:`x^{k+1}`), ``weights``
    (``(R+1, n)`` or ``None``), ``iterates`` (dict of arrays, leading axis = round), per-round
    communication counts and wall time (``round_time``, and cumulative ``times`` of length
    ``R+1`` for :func:`drflmodel.verify`). ``to_dict()`` is JSON-safe; ``save(path)`` writes a
    ``.npz`` and :meth:`Trace.load` reads it back.

Callbacks (SciPy style)
    ``callback(intermediate_result)`` is called after every round with a
    :class:`RoundResult` (``round``, ``theta``, ``weights``, ``iterates``, ``elapsed``, and the
    round's communication). Raising ``StopIteration`` stops the run cleanly; the trace then ends
    at that round and ``trace.info["stopped_by_callback"]`` is ``True``.

Seeding: ``run(problem, seed)`` creates two kinds of generators once. The **server's**
``runtime.rng = numpy.random.default_rng(seed)`` makes every server-side choice (client sampling,
random snapshot steps, delays) in a fixed order. **Client i's own** generator
``runtime.client_rngs[i]`` (:func:`client_generators`: ``default_rng(SeedSequence(seed,
spawn_key=(i,)))``) draws that client's minibatches, as a real client would from its own state; so
a client that runs on another engine (e.g. a Flower ``ClientApp`` holding partition *i*) draws the
same rows from the same seed. A run is reproducible from ``seed``.
"""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .._progress import progress_callback
from .._validation import as_finite_array, check_int, check_real
from ..errors import InvalidDataError, InvalidParameterError
from ..solution import jsonable

__all__ = ["Solver", "Trace", "RoundResult", "RoundLog", "ClientRuntime", "CommLedger",
           "check_step", "check_rounds", "client_generators"]


def client_generators(seed, n: int) -> list[np.random.Generator]:
    """Client *i*'s own generator for a run seeded with ``seed`` (module docstring, "Seeding").

    For an integer ``seed`` client *i* gets ``default_rng(SeedSequence(seed, spawn_key=(i,)))`` --
    the *i*-th child of ``SeedSequence(seed)``, independent of the server's
    ``default_rng(seed)`` and computable by client *i* alone from ``(seed, i)``. A
    ``numpy.random.Generator`` seed spawns ``n`` children of its seed sequence; ``None`` fresh
    entropy.
    """
    if isinstance(seed, np.random.Generator):
        children = seed.bit_generator.seed_seq.spawn(n)
    elif seed is None:
        children = np.random.SeedSequence().spawn(n)
    else:
        children = [np.random.SeedSequence(seed, spawn_key=(i,)) for i in range(n)]
    return [np.random.default_rng(c) for c in children]


# ---------------------------------------------------------------------------------- validation
def check_step(value, name: str) -> float:
    """A step size: a finite real number > 0 (raises :class:`InvalidParameterError`)."""
    return check_real(value, name, low=0.0, low_open=True)


def check_rounds(value, name: str = "rounds") -> int:
    """A number of rounds / local steps: an integer >= 1."""
    return check_int(value, name, low=1)


def check_batch_size(value, name: str = "batch_size"):
    """``None`` (exact gradients) or an integer >= 1."""
    return None if value is None else check_int(value, name, low=1)


# ---------------------------------------------------------------------------------- ledger
class CommLedger:
    """Counts what crosses the client/server boundary, per round and direction."""

    def __init__(self):
        self.rows: list[dict] = []           # one dict per round
        self._current: dict | None = None

    def begin_round(self) -> None:
        self._current = {"messages_up": 0, "floats_up": 0, "messages_down": 0,
                         "floats_down": 0, "log": []}

    def record(self, direction: str, name: str, messages: int, floats: int) -> None:
        if self._current is None:
            raise RuntimeError("communication outside a round")
        key = "up" if direction == "up" else "down"
        self._current[f"messages_{key}"] += int(messages)
        self._current[f"floats_{key}"] += int(floats)
        self._current["log"].append({"direction": key, "name": name,
                                     "messages": int(messages), "floats": int(floats)})

    def end_round(self) -> dict:
        row, self._current = self._current, None
        self.rows.append(row)
        return row


# ---------------------------------------------------------------------------------- runtime
class ClientRuntime:
    """The simulated federation: batched client computations + counted server crossings.

    Parameters
    ----------
    problem : the problem; ``problem.objectives`` (a
        :class:`~drflmodel.objectives.ClientObjectives`) is used for the vectorized client side
        when it exists (horizontal federations). Vertical solvers may ignore the client-side
        helpers and use only the ledger (``broadcast`` / ``upload``) and :meth:`view`.
    rng : the server's ``numpy.random.Generator`` of the run.
    client_rngs : one generator per client (:func:`client_generators`); default: derived from
        ``rng``'s seed sequence.
    batch_size : ``None`` for exact local gradients, else the minibatch size of every stochastic
        gradient (client *i* samples its own rows uniformly with replacement).
    """

    def __init__(self, problem, rng: np.random.Generator, batch_size: int | None = None,
                 client_rngs=None):
        self.problem = problem
        self.rng = rng
        self.client_rngs = (client_generators(rng, int(problem.n_clients)) if client_rngs is None
                            else list(client_rngs))
        self.batch_size = batch_size
        self.objectives = getattr(problem, "objectives", None)
        self.ledger = CommLedger()
        self._uploaded: dict[int, np.ndarray] = {}
        self.gradient_evaluations = 0     # per-client gradient calls (rows), for cost accounting
        self._scratch_rng = np.random.default_rng(0)   # placeholder rows of non-participants

    # ------------------------------------------------------------------ shape
    @property
    def n(self) -> int:
        return int(self.problem.n_clients)

    @property
    def dim(self) -> int:
        return int(self.problem.dim)

    # ------------------------------------------------------------------ rounds
    def begin_round(self) -> None:
        self._uploaded.clear()
        self.ledger.begin_round()

    def end_round(self) -> dict:
        self._uploaded.clear()
        return self.ledger.end_round()

    # ------------------------------------------------------------------ client side (batched)
    def losses(self, theta) -> np.ndarray:
        """Client *i* computes :math:`f_i(\\theta_i)` on its own data; ``theta`` is ``(d,)``
        (the broadcast model) or ``(n, d)`` (per-client iterates). Shape ``(n,)``."""
        return self.objectives.values(theta)

    def gradients(self, theta, batch_size: int | None | str = "default", clients=None) -> np.ndarray:
        """Row *i* is client *i*'s gradient at ``theta`` (shared ``(d,)`` or row *i* of ``(n, d)``):
        exact when the batch size is ``None``, else an unbiased minibatch gradient with a fresh,
        independent sample per call, drawn from client *i*'s own
        generator ``client_rngs[i]``.

        ``clients`` (partial participation): the indices of the clients that take part. Only
        they draw minibatches from their own generators (as a real client that is not selected
        draws nothing); the other rows are placeholders, computed from a scratch generator, that
        the caller discards. ``None``: every client takes part."""
        bs = self.batch_size if batch_size == "default" else batch_size
        self.gradient_evaluations += self.n
        if bs is None:
            return self.objectives.gradients(theta)
        return self.objectives.minibatch_gradients(theta, bs, self._generators(clients))

    def _generators(self, clients) -> list:
        """``client_rngs``, with a scratch generator in the rows of clients not in ``clients``."""
        if clients is None:
            return self.client_rngs
        taking_part = set(np.atleast_1d(clients).tolist())
        return [g if i in taking_part else self._scratch_rng for i, g in enumerate(self.client_rngs)]

    def local_sgd(self, start, steps: int, step_size, correction=None,
                  snapshot: int | None = None, clients=None):
        """``steps`` local (stochastic) gradient steps run by every client in parallel:

        .. math:: u_{i,j} = u_{i,j-1} - \\eta_i\\,\\big(g_i(u_{i,j-1}) + \\text{correction}_i\\big),
                  \\quad u_{i,0} = \\text{start}_i .

        One array operation per step for all clients. ``start`` is ``(d,)`` (the broadcast model)
        or ``(n, d)``; ``step_size`` a scalar or an ``(n,)`` vector; ``correction`` ``None``,
        ``(d,)`` or ``(n, d)`` (e.g. SCAFFOLD's :math:`-c_i + c`). Returns ``u_J`` (``(n, d)``),
        or ``(u_J, u_snapshot)`` when ``snapshot = t`` in ``[0, steps]`` is given (the local
        iterate after *t* steps, as DRFA needs). ``clients``: as in :meth:`gradients` (only the
        rows of these clients are meaningful).
        """
        n, d = self.n, self.dim
        U = np.array(np.broadcast_to(np.asarray(start, float), (n, d)))
        eta = np.asarray(step_size, float)
        eta = eta[:, None] if eta.ndim == 1 else eta
        snap = U.copy() if snapshot == 0 else None
        for j in range(1, steps + 1):
            G = self.gradients(U, clients=clients)
            if correction is not None:
                G = G + correction
            U = U - eta * G
            if snapshot == j:
                snap = U.copy()
        return (U, snap) if snapshot is not None else U

    def view(self, i: int):
        """``problem.client_view(i)``: what client *i* may compute on its own data only."""
        return self.problem.client_view(i)

    # ------------------------------------------------------------------ crossings (counted)
    def broadcast(self, name: str, value, receivers: int | None = None) -> np.ndarray:
        """Server → clients: every receiving client gets ``value`` (one message each)."""
        value = np.asarray(value, float)
        m = self.n if receivers is None else int(receivers)
        self.ledger.record("down", name, m, m * value.size)
        return value

    def scatter(self, name: str, rows, receivers=None) -> np.ndarray:
        """Server → clients, a *different* message per client: client *i* receives row *i* of
        ``rows`` (leading axis ``n``, or ``len(receivers)`` when only the clients at indices
        ``receivers`` receive). One message per receiving client, ``rows[i].size`` floats each."""
        rows = np.asarray(rows, float)
        m = self.n if receivers is None else len(np.atleast_1d(receivers))
        if rows.shape[:1] != (m,):
            raise ValueError(f"scattered array {name!r} must have leading axis {m}; got {rows.shape}")
        self.ledger.record("down", name, m, rows.size)
        return rows

    def upload(self, senders=None, **arrays):
        """Clients → server: client *i* sends row *i* of each named array, as one message.

        Each array has leading axis ``n`` (or ``len(senders)`` when only the clients at indices
        ``senders`` send). Returns the arrays (read-only) in the order given, registered as
        *uploaded this round* so that :meth:`aggregate` accepts them.
        """
        if not arrays:
            raise ValueError("upload() needs at least one named array")
        m = self.n if senders is None else len(np.atleast_1d(senders))
        out, floats = [], 0
        for name, a in arrays.items():
            a = np.array(a, float)
            if a.shape[:1] != (m,):
                raise ValueError(f"uploaded array {name!r} must have leading axis {m}; got {a.shape}")
            floats += a.size
            a.setflags(write=False)
            self._uploaded[id(a)] = a
            out.append(a)
        self.ledger.record("up", "+".join(arrays), m, floats)
        return out[0] if len(out) == 1 else tuple(out)

    def aggregate(self, weights, uploaded) -> np.ndarray:
        """Server step :math:`\\sum_i w_i\\,v_i` over uploaded rows ``v_i`` (weights may be negative).

        Raises ``RuntimeError`` if ``uploaded`` was not returned by :meth:`upload` this round,
        i.e. if a solver tries to combine client quantities without counting the communication.
        """
        if id(uploaded) not in self._uploaded or self._uploaded[id(uploaded)] is not uploaded:
            raise RuntimeError("aggregate() accepts only arrays returned by upload() in this round")
        w = np.asarray(weights, float)
        return np.tensordot(w, uploaded, axes=(0, 0))


# ---------------------------------------------------------------------------------- results
@dataclass
class RoundResult:
    """What ``callback(intermediate_result)`` receives after each round (SciPy style)."""

    round: int                    # number of completed rounds (1 after the first round)
    theta: np.ndarray
    weights: np.ndarray | None
    iterates: dict
    elapsed: float                # seconds since the start of the run
    messages_up: int
    floats_up: int
    messages_down: int
    floats_down: int

    def __getitem__(self, key):   # dict-style access, as scipy's OptimizeResult allows
        return getattr(self, key)


_COMM = ("messages_up", "floats_up", "messages_down", "floats_down")


@dataclass
class Trace:
    """The record of one solver run (see the module docstring for the indexing convention).

    Attributes
    ----------
    solver : solver class name.
    params : the solver's hyperparameters.
    theta : ``(R+1, d)`` models; ``theta[0]`` is the start, ``theta[k]`` after *k* rounds.
    weights : ``(R+1, n)`` client weights :math:`\\lambda` (``None`` if the algorithm has none).
    iterates : algorithm-specific per-round arrays (leading axis = round).
    messages_up, floats_up, messages_down, floats_down : ``(R,)`` integer counts per round.
    round_time : ``(R,)`` wall time of each round (seconds).
    info : schedule constants, seed, stop reason, first-round communication ledger, ...
    expected_rate : ``"linear"``, ``"sublinear"`` or ``None`` -- the rate the paper proves for
        the configuration run (read by :func:`drflmodel.verify`).
    """

    solver: str
    params: dict
    theta: np.ndarray
    weights: np.ndarray | None
    iterates: dict = field(default_factory=dict)
    messages_up: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    floats_up: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    messages_down: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    floats_down: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    round_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    info: dict = field(default_factory=dict)
    expected_rate: str | None = None
    problem: Any = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ views
    @property
    def rounds(self) -> int:
        """Number of completed rounds."""
        return int(self.theta.shape[0] - 1)

    @property
    def final_theta(self) -> np.ndarray:
        return self.theta[-1]

    @property
    def final_weights(self) -> np.ndarray | None:
        return None if self.weights is None else self.weights[-1]

    @property
    def times(self) -> np.ndarray:
        """Cumulative wall time, length ``R+1`` (``times[0] = 0``), aligned with ``theta``."""
        return np.concatenate([[0.0], np.cumsum(self.round_time)])

    @property
    def thetas(self) -> np.ndarray:  # alias used by drflmodel.verify
        return self.theta

    def total_communication(self) -> dict:
        """Totals over the run: messages and floats, up and down."""
        return {k: int(np.sum(getattr(self, k))) for k in _COMM}

    def objective_values(self, problem=None) -> np.ndarray:
        """Exact robust objective ``problem.objective(theta[k])`` for every recorded model."""
        problem = problem if problem is not None else self.problem
        if problem is None:
            raise InvalidParameterError("pass the problem: this trace has none attached")
        return np.array([problem.objective(t) for t in self.theta])

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        """JSON-safe dict (numpy arrays become nested lists)."""
        return jsonable({
            "solver": self.solver, "params": self.params, "theta": self.theta,
            "weights": self.weights, "iterates": self.iterates,
            **{k: getattr(self, k) for k in _COMM}, "round_time": self.round_time,
            "info": self.info, "expected_rate": self.expected_rate})

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "Trace":
        """Inverse of :meth:`to_dict` (arrays come back as float/int numpy arrays)."""
        return cls(solver=d["solver"], params=d.get("params", {}),
                   theta=np.asarray(d["theta"], float),
                   weights=None if d.get("weights") is None else np.asarray(d["weights"], float),
                   iterates={k: np.asarray(v, float) for k, v in d.get("iterates", {}).items()},
                   **{k: np.asarray(d.get(k, []), int) for k in _COMM},
                   round_time=np.asarray(d.get("round_time", []), float),
                   info=d.get("info", {}), expected_rate=d.get("expected_rate"))

    def save(self, path) -> None:
        """Write the trace to a ``.npz`` file (arrays stored natively, metadata as JSON)."""
        arrays = {"theta": self.theta, "round_time": self.round_time,
                  **{k: getattr(self, k) for k in _COMM}}
        if self.weights is not None:
            arrays["weights"] = self.weights
        for k, v in self.iterates.items():
            arrays[f"iterates/{k}"] = np.asarray(v)
        meta = {"solver": self.solver, "params": self.params, "info": self.info,
                "expected_rate": self.expected_rate}
        arrays["meta"] = np.array(json.dumps(jsonable(meta)))
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path) -> "Trace":
        """Read a trace written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            iterates = {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith("iterates/")}
            return cls(solver=meta["solver"], params=meta["params"], theta=z["theta"],
                       weights=z["weights"] if "weights" in z.files else None,
                       iterates=iterates, **{k: z[k] for k in _COMM},
                       round_time=z["round_time"], info=meta["info"],
                       expected_rate=meta["expected_rate"])


# ---------------------------------------------------------------------------------- the round loop
class RoundLog:
    """The round loop of a run, written once for the simulator (:meth:`Solver.run`) and Flower
    (:func:`drflmodel.flower.server.run_on_grid`), and what it records: every round's model (and
    weights, and the solver's recorded iterates), communication row and wall time.

    ``step(r, state) -> (state, communication row)`` runs round ``r``; after each round
    ``callback`` gets a :class:`RoundResult` (``StopIteration`` stops the run)."""

    def __init__(self, state: dict, record=()):
        self.record = tuple(record)
        self.thetas = [np.array(state["theta"], float)]
        self.weights = [np.array(state["weights"], float)] if state.get("weights") is not None else None
        self.iterates: dict[str, list] = {k: [] for k in self.record}
        self.comm_rows: list[dict] = []
        self.round_time: list[float] = []
        self.stopped = False

    def run(self, rounds: int, state: dict, step, callback, t_start: float) -> dict:
        """Run up to ``rounds`` rounds from ``state``; return the last state."""
        for r in range(rounds):
            t0 = time.perf_counter()
            state, row = step(r, state)
            self.round_time.append(time.perf_counter() - t0)
            self.comm_rows.append(row)
            self.thetas.append(np.array(state["theta"], float))
            if self.weights is not None:
                self.weights.append(np.array(state["weights"], float))
            for k in self.record:
                self.iterates[k].append(np.array(state[k], float))
            if callback is not None:
                res = RoundResult(round=r + 1, theta=self.thetas[-1].copy(),
                                  weights=None if self.weights is None else self.weights[-1].copy(),
                                  iterates={k: self.iterates[k][-1] for k in self.record},
                                  elapsed=time.perf_counter() - t_start, **{k: row[k] for k in _COMM})
                try:
                    callback(res)
                except StopIteration:
                    self.stopped = True
                    break
        return state

    def info(self, seed, problem, gradient_evaluations: int) -> dict:
        """The run's ``Trace.info`` common to every engine (the engine and the solver's
        ``state["info"]`` add theirs): ``seed``, ``stopped_by_callback``, ``rounds_run``,
        ``gradient_evaluations``, ``comm_schedule`` (the first round's ledger), ``problem``."""
        return {"seed": seed, "stopped_by_callback": self.stopped, "rounds_run": len(self.comm_rows),
                "gradient_evaluations": gradient_evaluations,
                "comm_schedule": self.comm_rows[0]["log"] if self.comm_rows else [],
                "problem": repr(problem)}

    def trace(self, solver, problem, info: dict, expected_rate) -> "Trace":
        """The :class:`Trace` of the rounds run."""
        return Trace(solver=type(solver).__name__, params=dict(solver.params),
                     theta=np.array(self.thetas), weights=None if self.weights is None else np.array(self.weights),
                     iterates={k: np.array(v) for k, v in self.iterates.items()},
                     **{k: np.array([row[k] for row in self.comm_rows], int) for k in _COMM},
                     round_time=np.array(self.round_time), info=info, expected_rate=expected_rate,
                     problem=problem)


# ---------------------------------------------------------------------------------- solver
def _resolve(spec: str):
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


class Solver:
    """Base class of the distributed solvers (see the module docstring for the subclass hooks).

    Parameters
    ----------
    rounds : number of communication rounds :math:`R \\ge 1` (common to all solvers).
    """

    #: accepted problem classes, as ``"module:Class"`` strings (resolved lazily at ``run``)
    problem_types: tuple[str, ...] = ()
    #: names of state entries recorded every round into ``Trace.iterates``
    record: tuple[str, ...] = ()
    #: rate proved by the paper (``"linear"``, ``"sublinear"`` or ``None``)
    expected_rate: str | None = None

    #: hooks renamed public; a subclass still defining the old name is refused
    _RENAMED = {"_check_problem": "check_problem", "_batch_size": "minibatch_size"}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for old, new in Solver._RENAMED.items():
            if old in vars(cls):
                raise TypeError(f"{cls.__name__}.{old} is no longer called: the hook is public now, "
                                f"rename it {new}")

    def __init__(self, rounds: int = 100, **params):
        self.rounds = check_rounds(rounds, "rounds")
        self.params = {"rounds": self.rounds, **params}
        self._validate()

    # ------------------------------------------------------------------ hooks
    def _validate(self) -> None:
        """Check ``self.params``; raise :class:`InvalidParameterError` naming the argument."""

    def check_problem(self, problem) -> None:
        """Raise :class:`InvalidParameterError` if ``problem`` is not an accepted family."""
        if not self.problem_types:
            return
        classes = []
        for spec in self.problem_types:
            try:
                classes.append(_resolve(spec))
            except (ImportError, AttributeError):
                continue
        if not any(isinstance(problem, c) for c in classes):
            names = ", ".join(s.split(":")[1] for s in self.problem_types)
            raise InvalidParameterError(
                f"{type(self).__name__} runs on {names} problems; got {type(problem).__name__}")

    def _initialize(self, problem, runtime: ClientRuntime, theta0: np.ndarray) -> dict:
        raise NotImplementedError

    def _round(self, r: int, state: dict, runtime: ClientRuntime) -> dict:
        raise NotImplementedError

    def minibatch_size(self) -> int | None:
        """The clients' minibatch size (``None``: exact gradients); default the ``batch_size``
        parameter."""
        return self.params.get("batch_size")

    def start(self, problem, seed: int | np.random.Generator | None = 0,
              theta0=None) -> tuple[ClientRuntime, dict]:
        """The run's server-side setup, before any round and not counted as communication:
        validate ``seed`` and ``theta0``, create the server's generator ``default_rng(seed)`` and
        the clients' (:func:`client_generators`), the :class:`ClientRuntime`, and the initial
        state (the subclass's ``_initialize``: schedule constants, :math:`\\lambda^0`, steps).
        Call :meth:`check_problem` first. Returns ``(runtime, state)``; ``runtime.rng`` is the
        server's generator."""
        if seed is not None and not isinstance(seed, np.random.Generator):
            seed = check_int(seed, "seed", low=0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        client_rngs = client_generators(seed, int(problem.n_clients))
        d = int(problem.dim)
        if theta0 is None:
            theta0 = np.zeros(d)
        else:
            theta0 = as_finite_array(theta0, "theta0", ndim=1)
            if theta0.shape != (d,):
                raise InvalidDataError(f"theta0 must have shape ({d},); got {theta0.shape}")
        runtime = ClientRuntime(problem, rng, batch_size=self.minibatch_size(), client_rngs=client_rngs)
        return runtime, self._initialize(problem, runtime, theta0.copy())

    # ------------------------------------------------------------------ driver
    def run(self, problem, seed: int | None = 0, callback: Callable | None = None,
            theta0=None, progress: bool | None = None) -> Trace:
        """Run :attr:`rounds` communication rounds on ``problem`` and return the :class:`Trace`.

        Parameters
        ----------
        problem : a problem of one of :attr:`problem_types`.
        seed : seed of ``numpy.random.default_rng`` (every random choice of the run).
        callback : ``callback(intermediate_result)`` after each round; raise ``StopIteration``
            to stop.
        theta0 : starting model (default: zeros).
        progress : show rounds done, the callback's current error and the elapsed time on a
            terminal (``None``: automatic, never in CI; see :mod:`drflmodel._progress`).
        """
        self.check_problem(problem)
        if callback is not None and not callable(callback):
            raise InvalidParameterError(f"callback must be callable; got {type(callback).__name__}")
        runtime, state = self.start(problem, seed, theta0)
        log = RoundLog(state, self.record)
        callback = progress_callback(callback, self.rounds, type(self).__name__, progress)

        def step(r, state):
            runtime.begin_round()
            state = self._round(r, state, runtime)
            return state, runtime.end_round()

        state = log.run(self.rounds, state, step, callback, time.perf_counter())
        info = log.info(seed if not isinstance(seed, np.random.Generator) else None, problem,
                        runtime.gradient_evaluations)
        info.update(state.get("info", {}))
        return log.trace(self, problem, info, state.get("expected_rate", self.expected_rate))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
