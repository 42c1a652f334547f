"""The server side on Flower: run a ported algorithm on any ``Grid``, return its ``Trace``.

:func:`run_on_grid` is ``Solver.run`` with the client work done by Flower supernodes: it builds the
solver's initial state with the solver's own public :meth:`~drflmodel.solvers.Solver.start`
(server-side setup: the checks of ``seed`` and ``theta0``, the schedule constants, computed once
before the first round and not counted as communication -- the simulator's own code), connects (:meth:`~drflmodel.flower._exchange.Exchange.connect`: one supernode
per client, else an error before any round), runs the rounds of the port
(:mod:`drflmodel.flower.algorithms`) and records a :class:`~drflmodel.solvers.Trace` with the
simulator's fields plus ``info["engine"] = "flower"``, ``info["participation"]`` (per round: the
participants, and why any client failed), ``info["partial_participation"]`` (rounds in which not
every client took part: the algorithm's own sampling or delays, or failures) and
``info["failed_rounds"]`` (rounds with a failed client; the paper's rate claim is then dropped).

The server's random generator is ``numpy.random.default_rng(seed)`` (DRFA's snapshot step,
rFedFair's client sampling -- the simulator's order); client *i*'s generator is created on the
client from ``(seed, i)``.

:func:`server_app` wraps it in a ``ServerApp``; the problem and solver may be given as objects or
as factories of the ``Context`` (a deployment builds them from its run config).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from flwr.serverapp import ServerApp

from ..errors import InvalidParameterError
from ..solvers import RoundLog, Trace
from ._exchange import Exchange
from .algorithms import port_for

__all__ = ["run_on_grid", "server_app"]



def _start(problem, solver, seed, theta0):
    """Validate like ``Solver.run`` and build the solver's initial state (server-side setup):
    ``Solver.check_problem`` and ``Solver.start``, with an integer seed (clients derive theirs
    from it). Returns ``(port, seed, server generator, state)``."""
    port = port_for(solver)
    solver.check_problem(problem)
    if isinstance(seed, (bool, np.random.Generator)) or seed is None:
        raise InvalidParameterError(
            "seed must be an integer >= 0 on Flower (each client derives its own generator from it)")
    runtime, state = solver.start(problem, seed, theta0)
    return port, int(seed), runtime.rng, state


def run_on_grid(grid, problem, solver, seed: int = 0, theta0=None, callback: Callable | None = None,
                run: str = "run", timeout: float = 600.0, poll_interval: float = 0.005,
                connect_timeout: float = 60.0) -> Trace:
    """Run ``solver`` (a ported simulator solver) on ``problem`` over a Flower ``grid``.

    ``callback(intermediate_result)`` is called after every round with a
    :class:`~drflmodel.solvers.RoundResult` (raise ``StopIteration`` to stop), as in the
    simulator. ``timeout`` bounds the wait for one exchange's replies; ``poll_interval`` is the
    time between pulls. Returns the :class:`~drflmodel.solvers.Trace`.
    """
    port, seed, rng, state = _start(problem, solver, seed, theta0)
    if callback is not None and not callable(callback):
        raise InvalidParameterError(f"callback must be callable; got {type(callback).__name__}")
    t_start = time.perf_counter()
    ex = Exchange(grid, problem.n_clients, run=run, timeout=timeout, poll_interval=poll_interval,
                  connect_timeout=connect_timeout)
    ex.connect(seed)
    port.setup(state, ex, solver, problem)
    setup_time = time.perf_counter() - t_start
    log = RoundLog(state, solver.record)

    def step(r, state):
        ex.begin_round()
        state = port.round(r, state, ex, solver, rng)
        return state, ex.end_round()

    state = log.run(solver.rounds, state, step, callback, t_start)
    partial = [p["round"] for p in ex.participation if len(p["participants"]) < problem.n_clients]
    failed = [p["round"] for p in ex.participation if p["missing"]]
    info = log.info(seed, problem, ex.gradient_evaluations)
    info.update(engine="flower", setup_time=setup_time, participation=ex.participation,
                partial_participation=partial, failed_rounds=failed)
    info.update(state.get("info", {}))
    info["gradient_evaluations"] = ex.gradient_evaluations
    rate = state.get("expected_rate", solver.expected_rate)
    return log.trace(solver, problem, info, None if failed else rate)


def _resolve(obj, context, is_ready: Callable):
    return obj if is_ready(obj) else obj(context)


def server_app(problem, solver, seed: int = 0, theta0=None, on_trace: Callable | None = None,
               **options) -> ServerApp:
    """A ``ServerApp`` that runs :func:`run_on_grid` and hands the trace to ``on_trace(trace)``.

    ``problem`` and ``solver`` may be factories ``f(context)`` (called in the ``ServerApp``'s
    process, e.g. to build them from ``context.run_config``); ``options`` go to
    :func:`run_on_grid`.
    """
    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        prob = _resolve(problem, context, lambda p: hasattr(p, "client_view"))
        solv = _resolve(solver, context, lambda s: hasattr(s, "params"))
        trace = run_on_grid(grid, prob, solv, seed=seed, theta0=theta0, **options)
        if on_trace is not None:
            on_trace(trace)

    return app
