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
which replied and which failed (a ``ClientApp`` error or no reply), and the messages and payload
floats each way; clients are named by the ``partition-id`` metric of their reply when they send
one (drflmodel's clients do), else by node id. :meth:`Recorder.trace` gives a
:class:`~drflmodel.solvers.Trace` (``dm.verify`` grades it; rounds where not every client took
part are listed in ``info["partial_participation"]`` and reported by ``dm.verify``).
"""

from __future__ import annotations

import time

import numpy as np
from flwr.app import MetricRecord

from ..errors import InvalidParameterError
from ..solvers._base import Trace
from ._records import record_floats

__all__ = ["Recorder"]


class Recorder:
    """Record a Flower strategy's global models (see the module docstring).

    Parameters
    ----------
    problem : the drflmodel problem the strategy claims to solve (for the live errors and
        :meth:`report`); optional.
    solution : its certified :class:`~drflmodel.solution.Solution` (``problem.solve()``); with it
        every call returns the live errors.
    n_clients : number of clients (default ``problem.n_clients``), to flag partial participation.
    """

    def __init__(self, problem=None, solution=None, n_clients: int | None = None):
        if solution is not None and problem is None:
            problem = getattr(solution, "problem", None)
        self.problem, self.solution = problem, solution
        self.n_clients = n_clients if n_clients is not None else getattr(problem, "n_clients", None)
        self.thetas: dict[int, np.ndarray] = {}
        self.times: dict[int, float] = {}
        self.rounds: dict[int, dict] = {}
        self.strategy_name = "flower"
        self._t0: float | None = None

    # ------------------------------------------------------------------ evaluate_fn
    def __call__(self, server_round: int, arrays) -> MetricRecord | None:
        theta = np.concatenate([np.asarray(a, float).ravel() for a in arrays.to_numpy_ndarrays()])
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
        r = int(server_round)
        self.thetas[r], self.times[r] = theta, now - self._t0
        if self.solution is None or self.problem is None:
            return None
        return MetricRecord(self.errors(theta))

    def errors(self, theta) -> dict:
        """``dist_theta`` to :math:`\\theta^\\star`, the certified ``objective`` and ``rel_gap``."""
        sol = self.solution
        objective = self.problem.objective_for(sol) if hasattr(self.problem, "objective_for") else self.problem.objective
        g = float(objective(theta))
        return {"dist_theta": float(np.linalg.norm(theta - np.asarray(sol.theta, float))),
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

        def configure_train(server_round, arrays, config, grid):
            messages = list(configure(server_round, arrays, config, grid))
            row = self._row(server_round)
            row["sampled"] = sorted(m.metadata.dst_node_id for m in messages)
            row["messages_down"] = len(messages)
            row["floats_down"] = sum(record_floats(m.content) for m in messages)
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
            for node in set(row["sampled"]) - {m.metadata.src_node_id for m in replies}:
                row["missing"][self._name(node, names)] = "no reply"
            row["participants"].sort()
            return aggregate(server_round, replies)

        strategy.configure_train = configure_train
        strategy.aggregate_train = aggregate_train
        return strategy

    @staticmethod
    def _name(node, names):
        return names.get(node, f"node {node}")

    # ------------------------------------------------------------------ results
    def trace(self) -> Trace:
        """The recorded run as a :class:`~drflmodel.solvers.Trace` (rounds ``0..R``)."""
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
        return Trace(solver=self.strategy_name, params={}, weights=None,
                     theta=np.array([self.thetas[r] for r in range(R + 1)]), **counts,
                     round_time=np.diff(times),
                     info={"engine": "flower", "recorded_by": "drflmodel.flower.Recorder",
                           "participation": [row for row in rows if row],
                           "partial_participation": partial},
                     expected_rate=None, problem=self.problem)

    def report(self, solution=None, tol: float = 1e-6, **kwargs):
        """:func:`drflmodel.verify` of the run so far against ``solution`` (default: the one given
        at construction); ``kwargs`` go to ``verify`` (``expected_rate``, ``error_metric``)."""
        from ..verify import verify

        sol = solution if solution is not None else self.solution
        if sol is None:
            raise InvalidParameterError("report needs a certified solution: Recorder(problem, solution) "
                                        "or report(solution)")
        kwargs.setdefault("expected_rate", None)
        return verify(self.trace(), sol, tol=tol, problem=self.problem, **kwargs)
