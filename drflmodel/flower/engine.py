"""Running ported algorithms on a Flower engine: in process, or on Flower's simulation engine.

* ``engine="inprocess"`` -- :class:`~drflmodel.flower.grid.LocalGrid`: the ``ServerApp`` logic
  and the ``ClientApp`` in this process, synchronously (milliseconds per round);
* ``engine="ray"`` -- Flower's simulation engine (``flwr.simulation.run_simulation``, Ray
  backend): the ``ServerApp`` in a thread of this process, the ``ClientApp`` in Ray worker
  processes, with :func:`~drflmodel.flower._hygiene.network_hygiene` (telemetry off, every Ray
  listener on 127.0.0.1), one CPU per client actor (``client_resources.num_cpus = 1``), and
  ``ray.shutdown()`` afterwards even if the run fails.

Ray's start-up costs seconds; :func:`run_many` runs several algorithms (on problems with the same
number of clients) in one Flower session, paying it once. The deployment engine (separate
processes: ``flower-superlink``, ``flower-supernode``, ``flwr run``) is ``examples/flower_app``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from flwr.serverapp import ServerApp

from .._validation import check_choice, check_int
from ..errors import InvalidParameterError
from ..solvers import Trace
from ._hygiene import network_hygiene
from ._logs import flower_logs
from .algorithms import port_for
from .client import client_app
from .grid import LocalGrid
from .server import run_on_grid

__all__ = ["FlowerRun", "run", "run_many", "simulate", "compare_traces", "ENGINES"]

ENGINES = ("inprocess", "ray")


class FlowerRun:
    """One ported algorithm on one problem, as a Flower ``ServerApp`` / ``ClientApp`` pair.

    Parameters
    ----------
    problem : a drflmodel problem of the solver's family.
    solver : a simulator solver with a Flower port (``drflmodel.flower.PORTED``): its
        hyperparameters, schedule and initialization are used as they are.
    seed : integer seed (server generator ``default_rng(seed)``; client *i*'s generator from
        ``(seed, i)``), as ``solver.run(problem, seed)``.
    theta0, callback : as in ``Solver.run``.
    key : name of the run (clients keep their state under it; unique within a session).
    timeout, poll_interval, connect_timeout : see :func:`~drflmodel.flower.server.run_on_grid`.

    After a run, :attr:`trace` is the :class:`~drflmodel.solvers.Trace`.
    """

    def __init__(self, problem, solver, seed: int = 0, theta0=None, callback: Callable | None = None,
                 key: str | None = None, timeout: float = 600.0, poll_interval: float = 0.005,
                 connect_timeout: float = 60.0):
        port_for(solver)
        solver.check_problem(problem)
        self.problem, self.solver, self.seed, self.theta0 = problem, solver, seed, theta0
        self.callback, self.key = callback, key
        self.options = {"timeout": timeout, "poll_interval": poll_interval,
                        "connect_timeout": connect_timeout}
        self.trace: Trace | None = None

    def serve(self, grid) -> Trace:
        """Run the server side on ``grid`` (any Flower ``Grid``); sets and returns :attr:`trace`."""
        self.trace = run_on_grid(grid, self.problem, self.solver, seed=self.seed, theta0=self.theta0,
                                 callback=self.callback, run=self.key or "run", **self.options)
        return self.trace

    @property
    def server_app(self) -> ServerApp:
        """A ``ServerApp`` running :meth:`serve`."""
        return _server_app([self])

    @property
    def client_app(self):
        """The ``ClientApp`` holding this problem's client views."""
        return client_app({self.key or "run": self.problem})

    def run(self, engine: str = "inprocess", num_supernodes: int | None = None,
            backend_config: dict | None = None, verbose: bool | None = None) -> Trace:
        """Run on ``engine`` (:data:`ENGINES`) with ``num_supernodes`` (default: one per client);
        ``verbose`` as in :func:`run_many`."""
        return run_many([self], engine, num_supernodes, backend_config, verbose=verbose)[0]

    def __repr__(self) -> str:
        return f"FlowerRun({self.solver!r}, problem={self.problem!r}, seed={self.seed})"


def run(problem, solver, seed: int = 0, engine: str = "inprocess", num_supernodes: int | None = None,
        backend_config: dict | None = None, verbose: bool | None = None, **options) -> Trace:
    """``FlowerRun(problem, solver, seed, **options).run(engine, num_supernodes, verbose=verbose)``."""
    return FlowerRun(problem, solver, seed=seed, **options).run(engine, num_supernodes, backend_config, verbose)


def _server_app(runs) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        for r in runs:
            r.serve(grid)

    return app


def run_many(runs, engine: str = "inprocess", num_supernodes: int | None = None,
             backend_config: dict | None = None, verbose: bool | None = None) -> list[Trace]:
    """Run several :class:`FlowerRun` s one after the other in **one** Flower session (one Ray
    start-up). Their problems must have the same number of clients; runs without a ``key`` get
    ``"run0"``, ``"run1"``, ... Returns their traces in order. Flower's per-round INFO log stays
    off the terminal unless you configured Flower's logger or pass ``verbose=True``
    (Flower's warnings and drflmodel's own lines always show)."""
    runs = list(runs)
    if not runs:
        raise InvalidParameterError("run_many needs at least one FlowerRun")
    engine = check_choice(engine, "engine", ENGINES)
    sizes = {r.problem.n_clients for r in runs}
    if len(sizes) > 1:
        raise InvalidParameterError(f"runs in one Flower session need the same number of clients; got {sorted(sizes)}")
    for j, r in enumerate(runs):
        if r.key is None:
            r.key = f"run{j}" if len(runs) > 1 else "run"
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise InvalidParameterError(f"run keys must be unique in a session; got {keys}")
    n = sizes.pop()
    nodes = n if num_supernodes is None else check_int(num_supernodes, "num_supernodes", low=1)
    capp = client_app({r.key: r.problem for r in runs})
    if engine == "inprocess":
        with LocalGrid(capp, nodes, verbose=verbose) as grid:
            return [r.serve(grid) for r in runs]
    for r in runs:
        r.trace = None
    simulate(_server_app(runs), capp, nodes, backend_config, verbose=verbose)
    missing = [r.key for r in runs if r.trace is None]
    if missing:
        raise RuntimeError(f"Flower's simulation ended without finishing the run(s) {missing}")
    return [r.trace for r in runs]


def simulate(server_app, client_app, num_supernodes: int, backend_config: dict | None = None,
             verbose: bool | None = None) -> None:
    """Flower's simulation engine (Ray) with drflmodel's defaults: network hygiene, one CPU per
    client actor, Flower's INFO log off the terminal unless you configured Flower's logger or pass
    ``verbose=True`` (Flower's warnings always show), and Ray shut down afterwards.

    ``backend_config`` is merged over ``{"client_resources": {"num_cpus": 1, "num_gpus": 0}}``.
    An exception raised by the ``ServerApp`` is raised here."""
    network_hygiene()
    from flwr.simulation import run_simulation

    config = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}}
    for key, value in (backend_config or {}).items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    try:
        with flower_logs(verbose):
            run_simulation(server_app=server_app, client_app=client_app,
                           num_supernodes=check_int(num_supernodes, "num_supernodes", low=1),
                           backend_name="ray", backend_config=config)
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def compare_traces(a: Trace, b: Trace) -> dict:
    """How far two traces of the same algorithm are apart (e.g. simulator vs Flower):
    ``theta`` / ``weights`` / ``iterates`` -- the largest absolute difference over rounds and
    coordinates (``weights`` is ``None`` without client weights); ``communication`` -- whether
    the per-round message and float counts are equal; ``comm_schedule`` -- whether the
    first-round ledgers (names, messages, floats) are equal."""
    def gap(x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        if x.shape != y.shape:
            return float("inf")
        return float(np.max(np.abs(x - y))) if x.size else 0.0

    weights = None
    if a.weights is not None or b.weights is not None:
        weights = gap(a.weights, b.weights) if a.weights is not None and b.weights is not None else float("inf")
    keys = sorted(set(a.iterates) | set(b.iterates))
    return {"theta": gap(a.theta, b.theta), "weights": weights,
            "iterates": max((gap(a.iterates.get(k, []), b.iterates.get(k, [])) for k in keys), default=0.0),
            "communication": all(np.array_equal(getattr(a, k), getattr(b, k))
                                 for k in ("messages_up", "floats_up", "messages_down", "floats_down")),
            "comm_schedule": a.info.get("comm_schedule") == b.info.get("comm_schedule")}
