"""Private mode's secure sums through **Flower's own SecAgg+** (``SecAggPlusWorkflow`` on the server,
``secaggplus_mod`` on the clients; no home-made cryptography): the channel of
:mod:`drflmodel.client_oracle.private.secure_sum` with its transport replaced.

Each secure sum is one SecAgg+ round (setup, key sharing, masked vectors, unmasking). The server's
query (name, stage, public parameters as JSON, the public scale as an array) goes out as the round's
fit instructions; each client answers with :meth:`~drflmodel.client_oracle.private.secure_sum.SumClient.answer`
(its vector scaled, rounded to Flower's grid, with the clipping flag) and ``num_examples =
max_weight``, so SecAgg+'s weight factor is exactly 1 and the workflow hands the server
:math:`\\frac1n\\sum_id_i`, which the channel multiplies by the :math:`n` clients that took part.
The grid values pass Flower's quantization exactly (see the channel's module docstring), so the
error bound is the channel's own.

**Dropout.** A client that drops out after sharing its keys is recovered by SecAgg+ while at least
``reconstruction_threshold`` shares survive: the sum then covers the clients that stayed. A
certificate needs every client's term, so by default (``require_all=True``) the channel then raises
:class:`~drflmodel.errors.InvalidParameterError` naming the node(s) that dropped (the server sees who
answered; SecAgg+ hides only the values); ``require_all=False`` returns the survivors' sum with their
number (a refinement stage whose number differs still fails by name). When the protocol halts (too
few clients), the channel raises naming the sum and the threshold.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from flwr.app import ConfigRecord
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.compat.common import recorddict_compat as compat
from flwr.server.client_manager import SimpleClientManager
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key

from ..client_oracle.private.secure_sum import SumClient, SumOnlyChannel
from ..errors import InvalidParameterError

__all__ = ["secure_sum_client_app", "FlowerSecAggChannel", "MAX_WEIGHT", "private_certified_solve", "secagg_channel"]

#: every client's num_examples and the workflow's max_weight: the weight factor is exactly 1
MAX_WEIGHT = 1000


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value


class _SumNumPyClient(NumPyClient):
    def __init__(self, sum_client: SumClient):
        self.sum_client = sum_client

    def fit(self, parameters, config):
        stage = int(config["stage"])
        params = json.loads(str(config["params"]))
        scale = parameters[0] if stage == 0 else None
        floor = float(config["floor"]) if float(config["floor"]) > 0 else None
        answer = self.sum_client.answer(str(config["query"]), stage, scale, params, floor, int(config["holders"]))
        return [answer], MAX_WEIGHT, {}


def secure_sum_client_app(clients, clipping_range: float = 8.0, quantization_range: int = 2 ** 22) -> ClientApp:
    """A ``ClientApp`` with ``secaggplus_mod`` whose node ``partition-id`` = *i* answers as
    ``clients[i]`` (each a :class:`~drflmodel.client_oracle.private.clients.PrivateClient` or
    anything with ``contribution``); its :class:`SumClient` (and residual) lives with the node."""
    sum_clients = [SumClient(c, clipping_range, quantization_range) for c in clients]

    def client_fn(context):
        return _SumNumPyClient(sum_clients[int(context.node_config["partition-id"])]).to_client()

    return ClientApp(client_fn=client_fn, mods=[secaggplus_mod])


class _QueryStrategy(FedAvg):
    """Sends the pending query to every client and keeps the unmasked aggregate."""

    def __init__(self):
        super().__init__(min_fit_clients=2, min_available_clients=2, fraction_evaluate=0.0)
        self.pending = None
        self.result = None

    def configure_fit(self, server_round, parameters, client_manager):
        config = dict(self.pending)
        clients = client_manager.all().values()
        return [(proxy, FitIns(parameters, config)) for proxy in clients]

    def aggregate_fit(self, server_round, results, failures):
        if not results:
            return None, {}
        parameters = results[0][1].parameters          # SecAgg+ put the unmasked aggregate in every result
        self.result = (parameters_to_ndarrays(parameters)[0], [proxy.node_id for proxy, _ in results])
        return parameters, {}


@dataclass
class FlowerSecAggChannel(SumOnlyChannel):
    """A :class:`~drflmodel.client_oracle.private.secure_sum.SumOnlyChannel` whose rounds run
    Flower's ``SecAggPlusWorkflow`` on ``grid`` (a Flower ``Grid`` whose ``ClientApp`` is
    :func:`secure_sum_client_app`); ``clients`` are the grid's node ids (the server holds nothing
    else of them). ``context`` is the server's Flower ``Context``."""

    grid: object = None
    context: object = None
    num_shares: int | float = 1.0
    reconstruction_threshold: int | float = 1.0
    timeout: float | None = None
    require_all: bool = True
    _rounds: int = field(default=0, init=False)

    def __post_init__(self):
        super().__post_init__()
        if self.grid is None or self.context is None:
            raise InvalidParameterError("FlowerSecAggChannel needs grid and context")
        manager = SimpleClientManager()
        for node_id in self.clients:
            manager.register(GridClientProxy(node_id=node_id, grid=self.grid, run_id=self.grid.run.run_id))
        self._strategy = _QueryStrategy()
        self._legacy = LegacyContext(self.context, strategy=self._strategy, client_manager=manager)
        self._workflow = SecAggPlusWorkflow(num_shares=self.num_shares,
                                            reconstruction_threshold=self.reconstruction_threshold,
                                            max_weight=MAX_WEIGHT, clipping_range=self.clipping_range,
                                            quantization_range=int(self.quantization_range),
                                            modulus_range=int(self.modulus_range), timeout=self.timeout)

    def _transport(self, query, stage, scale, params, floor=None, holders=False):
        self._rounds += 1
        arrays = [np.atleast_1d(np.asarray(scale, float))] if stage == 0 else [np.zeros(1)]
        self._strategy.pending = {"query": query, "stage": int(stage), "holders": int(holders),
                                  "floor": float(floor) if floor is not None else 0.0,
                                  "params": json.dumps({k: _jsonable(v) for k, v in params.items()})}
        self._strategy.result = None
        state = self._legacy.state
        state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({Key.CURRENT_ROUND: self._rounds})
        state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
            ndarrays_to_parameters(arrays), keep_input=True)
        self._workflow(self.grid, self._legacy)
        if self._strategy.result is None:
            raise InvalidParameterError(
                f"Flower's SecAgg+ halted the secure sum of {query!r} (stage {stage}): fewer clients than its "
                f"reconstruction_threshold ({self.reconstruction_threshold}) completed the protocol")
        mean, active = self._strategy.result
        missing = sorted(set(self.clients) - set(active))
        if missing and self.require_all:
            raise InvalidParameterError(
                f"node(s) {missing} dropped out of the secure sum of {query!r} (stage {stage}); SecAgg+ completed "
                f"with the other {len(active)} (its threshold was met), but that sum leaves their terms out, so it "
                f"is not the objective being certified (require_all=False returns such sums)")
        return np.asarray(mean, float) * len(active), len(active)


@contextmanager
def secagg_channel(problem, num_shares: int | float = 1.0, reconstruction_threshold: int | float = 1.0,
                   timeout: float | None = None, verbose: bool | None = None, **channel_options):
    """A :class:`FlowerSecAggChannel` over an in-process grid with one supernode per client of
    ``problem``, each answering from its own rows as its private route's client
    (:func:`~drflmodel.client_oracle.private.route_clients`) through ``secaggplus_mod``; the grid is
    open inside the ``with`` block (it may be opened inside another Flower run: the grid restores
    Flower's task identity when it closes). ``channel_options`` go to the channel (``stages``, ...)."""
    from flwr.app import Context, RecordDict

    from ..client_oracle.private import route_clients
    from .grid import LocalGrid

    clients = route_clients(problem)             # refusals before the grid starts
    with LocalGrid(secure_sum_client_app(clients), problem.n_clients, verbose=verbose) as grid:
        context = Context(run_id=grid.run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config={})
        yield FlowerSecAggChannel(clients=sorted(grid.get_node_ids()), grid=grid, context=context,
                                  num_shares=num_shares, reconstruction_threshold=reconstruction_threshold,
                                  timeout=timeout, **channel_options)


def private_certified_solve(problem, num_shares: int | float = 1.0, reconstruction_threshold: int | float = 1.0,
                            timeout: float | None = None, verbose: bool | None = None, gap_tol: float = 1e-6,
                            **options):
    """:func:`drflmodel.client_oracle.private.private_solve` with every secure sum a round of Flower's
    ``SecAggPlusWorkflow`` on the in-process grid (one supernode per client of ``problem``, each
    answering from its own rows through ``secaggplus_mod``; :func:`secagg_channel`): the same
    certificate as the simulated channel, bit for bit (the grid values pass Flower's quantization
    exactly). ``num_shares`` and ``reconstruction_threshold`` are SecAgg+'s (a count, or a fraction of
    the clients); a client that drops out fails the solve naming its node. The route is refused by
    name before any round when the problem has no private route. ``options`` go to the route."""
    from ..client_oracle.private import private_solve

    with secagg_channel(problem, num_shares, reconstruction_threshold, timeout, verbose) as channel:
        return private_solve(problem, channel=channel, gap_tol=gap_tol, **options)
