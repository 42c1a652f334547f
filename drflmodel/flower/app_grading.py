r"""Grade any Flower app without editing it: :func:`graded` (its ``ServerApp``) and
:func:`answering` (its ``ClientApp``).

:func:`graded` returns a new ``ServerApp`` that, in the same deployment,

1. computes the oracle: the **federated certified solve** of what the app's training minimizes
   (:func:`~drflmodel.flower.oracle.solve_on_grid`: the clients answer from their own rows, the
   server sees no row) -- or uses a centralized problem/solution when you give one;
2. runs the app's own ``main(grid, context)`` unchanged, except that every Message-API strategy
   it starts (``flwr.serverapp.strategy.*``: ``FedAvg``, ``FedProx``, ...; the strategy is
   created inside ``main``, so ``Strategy.start`` is intercepted for the duration of ``main``)
   gets a :class:`~drflmodel.flower.recorder.Recorder` as its ``evaluate_fn`` -- composed with the
   app's own ``evaluate_fn`` when it has one (both metric records are merged) -- which records
   every global model and who took part, and grades each round live (distance to
   :math:`\theta^\star`, objective measured from the clients' values, relative gap; one log line
   per round with ``progress=True``);
3. at the end saves the trace (``trace_out``, or the run config's ``trace-out``; it carries the
   oracle and the measured objectives, so :func:`~drflmodel.flower.recorder.grade` regrades it
   offline) and logs the verdict. ``app.report``, ``app.trace``, ``app.solution`` and
   ``app.recorder`` hold the last run's results.

**Privately** (``private=True``): the oracle is the private certified solve (every answer the
server uses a secure sum over all clients, each one round of Flower's ``SecAggPlusWorkflow`` on an
in-process grid with one supernode per client of the problem, :func:`~drflmodel.flower.secure.private_certified_solve`),
and each round's objective is **one** secure sum over the clients at that round's model (the
fixed-weight route's weighted values, or the KL penalty's log-sum-exp terms;
:class:`~drflmodel.client_oracle.private.objective.PrivateObjective`), never a client's value. The
distance to the oracle's model needs nothing from the clients. What the grading reveals is
``app.trace.info["private_grading"]``: the route's ``server_learns`` at the oracle's models and
at each round's model, the secure sums it took, and that no client's value, loss or weight was
asked. CVaR and χ² are refused (their objective at a model is a dual search of sums per round).

When the oracle fails -- a client whose answers the server's checks reject, a refused query, a
client that stops answering (``solution.info["fault"]`` names the partition, its supernode, the
query, the check and its numbers) -- the run is still recorded and its trace saved, with the fault
(``info["oracle_fault"]``), and ``app.report`` grades what needs no oracle: its first line says
``NOT GRADED`` and why, then whether every round's model is finite, which rounds had partial
participation and whether the faulty client took part in training
(:func:`~drflmodel.flower.recorder.not_graded`; :func:`~drflmodel.flower.recorder.grade` of the
saved trace says the same).

:func:`answering` adds the oracle's query handlers to the app's ``ClientApp`` (its own handlers
are untouched): each supernode answers from the rows the app trains on.

The recipe for a Flower app training a scikit-learn model on data it loads with Flower Datasets
(Flower's scikit-learn quickstart; ``examples/flower_sklearn``), next to the app: the oracle's rows
come from the same partitioner (:class:`~drflmodel.flower.partitions.FlowerDatasets`)::

    from drflmodel import flower as dmf
    from flwr_datasets.partitioner import IidPartitioner
    from sklearnexample import client_app, server_app, task                      # the app, not edited
    rows = dmf.FlowerDatasets("hitorilabs/iris", IidPartitioner, target="species", features=task.FEATURES, take=0.8)
    model = task.create_log_reg_and_instantiate_parameters("l2")                # what each client trains
    server = dmf.graded(server_app.app, estimator=model)                        # run config trace-out: saved
    client = dmf.answering(client_app.app, estimator=model, rows=rows, classes=task.UNIQUE_LABELS)
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from logging import INFO, WARNING
from pathlib import Path

import numpy as np
from flwr.app import MetricRecord
from flwr.common.logger import log
from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import Strategy

from ..errors import InvalidParameterError
from ..verification import ORACLE_GAP_TOL
from ._logs import flower_logs
from .oracle import oracle_or_fault, with_oracle
from .recorder import Recorder

__all__ = ["graded", "answering", "unmatched_objective", "ROBUST_AGGREGATORS"]

_START_LOCK = threading.Lock()


def _lost_oracle(rec: Recorder, fault) -> None:
    """A client faulted on a value query after the oracle was certified (live grading, or the values
    asked at the end): the run is recorded, not graded, with the fault; training goes on."""
    rec.oracle_fault = {**fault.to_dict(), "message": f"after the oracle was certified, {fault}: the rounds are "
                                                     "recorded, not graded"}
    rec.solution = None
    log(WARNING, "[drflmodel] %s", rec.oracle_fault["message"])


def _recorded(rec: Recorder):
    """``rec`` as an ``evaluate_fn`` that a client's fault on a per-round value query cannot crash."""
    from ..client_oracle import ClientFault

    def evaluate(server_round, arrays):
        try:
            return rec(server_round, arrays)
        except ClientFault as fault:
            _lost_oracle(rec, fault)
            return None

    return evaluate


def _compose(ours, theirs):
    def evaluate(server_round, arrays):
        mine = ours(server_round, arrays)
        other = theirs(server_round, arrays) if theirs is not None else None
        if mine is None or other is None:
            return other if mine is None else mine
        return MetricRecord({**dict(mine), **dict(other)})

    return evaluate


#: robust aggregators: ``(class name, what its aggregate is, the paper)``
_ROBUST = (
    ("Bulyan", "keeps the client models Krum selects repeatedly, then averages a trimmed set per coordinate",
     "El Mhamdi, Guerraoui, Rouault, \"The Hidden Vulnerability of Distributed Learning in Byzantium\", ICML 2018"),
    ("FedMedian", "takes the coordinate-wise median of the client models",
     "Yin, Chen, Ramchandran, Bartlett, \"Byzantine-Robust Distributed Learning\", ICML 2018"),
    ("FedTrimmedAvg", "averages each coordinate after dropping its beta largest and smallest client values",
     "Yin, Chen, Ramchandran, Bartlett, \"Byzantine-Robust Distributed Learning\", ICML 2018"),
    ("MultiKrum", "keeps the client model(s) closest to the others and averages only those",
     "Blanchard, El Mhamdi, Guerraoui, Stainer, \"Machine Learning with Adversaries\", NeurIPS 2017"),
)
ROBUST_AGGREGATORS = ("refuse", "warn")


def unmatched_objective(strategy) -> str | None:
    """Why ``strategy`` minimizes no objective the oracle computes (``None`` when it aggregates by a
    weighted mean, as FedAvg, FedProx, FedAdam, ... do): the robust aggregators of Flower's
    ``flwr.serverapp.strategy`` (Krum and MultiKrum, FedMedian, FedTrimmedAvg with ``beta > 0``,
    Bulyan) land where a median, a trimmed mean or a selection of clients puts them, which is no
    weighted sum of the clients' objectives."""
    import flwr.serverapp.strategy as flower_strategies

    for name, what, paper in _ROBUST:
        cls = getattr(flower_strategies, name, None)
        if cls is None or not isinstance(strategy, cls):
            continue
        if name == "FedTrimmedAvg" and not getattr(strategy, "beta", 1.0) > 0:
            return None
        shown = type(strategy).__name__
        return (f"{shown} {what} ({paper}): it minimizes no weighted sum of the clients' objectives, so the "
                "oracle's optimum is not where it lands and the distances measure how far it lands from the "
                "oracle's (e.g. FedAvg's) optimum")
    return None


@contextmanager
def _recording(recorder: Recorder, robust_aggregators: str = "refuse"):
    """While active, the first ``Strategy.start`` called gets ``recorder`` composed into its
    ``evaluate_fn`` and its participation watched; a robust aggregator (:func:`unmatched_objective`)
    is refused, or with ``robust_aggregators="warn"`` recorded with a warning (``used[1]``)."""
    with _START_LOCK:
        original = Strategy.start
        used = []

        def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, train_config=None,
                  evaluate_config=None, evaluate_fn=None):
            if not used:
                why = unmatched_objective(self)
                if why and robust_aggregators == "refuse":
                    raise InvalidParameterError(
                        f"graded() does not grade {type(self).__name__}: {why}. Pass robust_aggregators='warn' "
                        "to record the run against the oracle anyway (the report then says so)")
                used.append(type(self).__name__)
                if why:
                    log(WARNING, "[drflmodel] %s", why)
                    used.append(why)
                recorder.watch(self)
                evaluate_fn = _compose(_recorded(recorder), evaluate_fn)
            return original(self, grid, initial_arrays, num_rounds=num_rounds, timeout=timeout,
                            train_config=train_config, evaluate_config=evaluate_config, evaluate_fn=evaluate_fn)

        Strategy.start = start
        try:
            yield used
        finally:
            Strategy.start = original


class _SecAggPerSum:
    """A sum-only channel for grading inside a running Flower app: each secure sum opens an
    in-process SecAgg+ grid over the problem's clients (:func:`~drflmodel.flower.secure.secagg_channel`),
    runs its rounds and closes it (the app's own grid is untouched between its rounds)."""

    def __init__(self, problem, verbose=None):
        from ..client_oracle.private.secure_sum import FLOWER_CLIPPING_RANGE

        self.problem, self.verbose = problem, verbose
        self.min_contributors, self.secure_sums, self.bytes_per_client = 0, 0, 0
        self.clipping_range = FLOWER_CLIPPING_RANGE
        self.sums_by_query: dict[str, int] = {}

    def sum(self, query, scale=1.0, stages=None, min_contributors=None, **params):
        from .secure import secagg_channel

        with secagg_channel(self.problem, verbose=self.verbose) as channel:
            channel.min_contributors = self.min_contributors
            try:
                return channel.sum(query, scale=scale, stages=stages, min_contributors=min_contributors, **params)
            finally:
                self.secure_sums += channel.secure_sums
                self.bytes_per_client += channel.bytes_per_client
                for seen in channel.seen:
                    self.sums_by_query[seen.query] = self.sums_by_query.get(seen.query, 0) + 1


class _NoRows:
    """``problem.objectives`` as the grading sees it privately: the rows are not reachable."""

    holds_rows = False


class _PrivatelyGraded:
    """The problem as private grading sees it: its public description (layout, dimension, family)
    from ``problem``; its objective at a model only from one secure sum (``objective``, a
    :class:`~drflmodel.client_oracle.private.objective.PrivateObjective`); no rows."""

    objectives = _NoRows()

    def __init__(self, problem, objective, channel):
        self._problem, self._objective, self._channel = problem, objective, channel
        self.family = getattr(problem, "family", "")

    def __getattr__(self, name):            # the public description: dim, layout, n_clients, identifiable, ...
        if name in ("solve", "objective_for_rows", "client_losses", "federation"):
            raise AttributeError(f"private grading does not reach the rows ({name})")
        return getattr(self._problem, name)

    def objective_for(self, solution):
        return self._objective

    @property
    def objective(self):
        return self._objective

    def reveals(self, sol) -> dict:
        """What the server learnt while grading: the oracle's sums and one sum per graded round."""
        private = (sol.info or {}).get("private", {})
        return {"route": private.get("route"), "oracle_server_learns": private.get("server_learns"),
                "oracle_secure_sums": private.get("secure_sums"),
                "per_round": f"one secure sum over all clients at each graded model ({self._objective.route} route: "
                             + ("the clients' weighted values and gradients" if self._objective.route == "fixed_weight"
                                else "their exp((f_i - eta)/tau) terms, those times their gradients and gradient norms")
                             + "), each an in-process SecAgg+ run; no client's value, loss or weight was asked",
                "graded_models": self._objective.evaluations, "grading_secure_sums": self._channel.secure_sums,
                "grading_sums_by_query": dict(self._channel.sums_by_query),
                "grading_bytes_per_client": self._channel.bytes_per_client,
                "min_contributors": private.get("min_contributors"),
                "quantization_error_max": max(self._objective.errors.values(), default=0.0)}


def _private_oracle(problem, solution, verbose, solve_options):
    """``(graded problem, oracle)`` for ``graded(..., private=True)``: the private certified solve
    over Flower's SecAgg+ (unless a private ``solution`` is given) and the per-round objective from
    one secure sum each."""
    from ..client_oracle.private.objective import PrivateObjective
    from .secure import private_certified_solve

    sol = solution if solution is not None else private_certified_solve(problem, verbose=verbose, **solve_options)
    log(INFO, "[drflmodel] private oracle (secure sums only): %s (%s secure sums)", sol.summary(),
        sol.info["private"]["secure_sums"])
    channel = _SecAggPerSum(problem, verbose)
    k = int(sol.info["private"].get("min_contributors", solve_options.get("min_contributors", 2)))
    eta = (sol.info.get("private_certificate") or {}).get("eta")
    objective = PrivateObjective(problem, channel, min_contributors=k, eta=eta)
    return _PrivatelyGraded(problem, objective, channel), sol


def graded(server_app: ServerApp, oracle=None, *, estimator=None, solution=None, parameters=None,
           n_clients: int | None = None, trace_out=None, tol: float = 1e-6, progress: bool = True,
           live: bool = True, method: str = "auto", run: str = "drflmodel-oracle",
           robust_aggregators: str = "refuse", verbose: bool | None = None, private: bool = False,
           **solve_options) -> ServerApp:
    """A ``ServerApp`` running ``server_app`` graded against a certified oracle (module docstring).

    Parameters
    ----------
    server_app : a Flower ``ServerApp`` whose ``@app.main()`` starts a Message-API strategy.
    oracle : what its training minimizes -- a problem factory ``federation -> problem`` (the
        federated oracle is computed from the clients' answers), or a drflmodel problem holding
        rows (solved here, centrally, unless ``solution`` is given).
    estimator : instead of ``oracle``: the scikit-learn estimator the clients train (the oracle
        is ``dm.from_sklearn(estimator, federation=...)``, FedAvg's objective, and its parameter
        map reads the strategy's ``[coef_, intercept_]``).
    solution : a certified solution of ``oracle`` (centralized grading).
    parameters : the map from the strategy's arrays to theta (default: the estimator's, or one
        1-D array in drflmodel's layout).
    n_clients : the number of supernodes (default: those connected when the app starts -- all of
        them in a simulation; in a deployment pass it, the oracle then waits for every supernode;
        a run that ends with another number connected is refused, not graded).
    trace_out : where to save the trace (default: the run config's ``trace-out``, if any).
    tol, progress : the verdict's tolerance; one log line per round.
    live : grade every round as it ends (against a federated oracle the objective at each round's
        model costs one exchange: each client's value); ``False`` records the rounds and asks the
        clients for all the values in **one** exchange at the end.
    method, run, solve_options : for the federated solve (:func:`~drflmodel.flower.oracle.solve_on_grid`);
        the oracle (federated or holding the rows) is asked ``gap_tol = 1e-10``
        (:data:`~drflmodel.verification.ORACLE_GAP_TOL`: the grading measures distances to its point)
        unless ``solve_options`` sets one.
    robust_aggregators : ``"refuse"`` (default) -- a strategy that minimizes no objective the oracle
        computes (:func:`unmatched_objective`: Krum, MultiKrum, FedMedian, FedTrimmedAvg with
        ``beta > 0``, Bulyan) is refused by name when it starts; ``"warn"`` records it, logs a warning
        and puts the reason on the report as a ``caveat`` line.
    verbose : Flower's per-round INFO log during the run: ``None`` (default) keeps it off unless you
        configured Flower's logger, ``True`` shows it (drflmodel's lines and Flower's warnings always
        show).
    private : grade from secure sums only (module docstring): ``oracle`` must be a problem holding
        the clients' rows (each becomes a supernode of an in-process SecAgg+ grid) whose private
        route is ERM / fixed weights or the KL penalty; ``solution`` (optional) a private solution
        (``private_solve`` or ``certified_solve(problem, private=True)``); ``solve_options`` go to
        the private solve (e.g. ``min_contributors``).
    """
    if not isinstance(server_app, ServerApp):
        raise InvalidParameterError(f"server_app must be a Flower ServerApp; got {type(server_app).__name__}")
    if getattr(server_app, "_main", None) is None:
        raise InvalidParameterError(
            "graded() wraps ServerApps whose @app.main() starts a Message-API strategy "
            "(flwr.serverapp.strategy); this app has no main (it uses server_fn, Flower's legacy strategies)")
    if (oracle is None) == (estimator is None):
        raise InvalidParameterError("pass exactly one of oracle= (a problem or a factory) and estimator=")
    from .._validation import check_choice
    from ..problems.engine.problem import Problem

    robust_aggregators = check_choice(robust_aggregators, "robust_aggregators", ROBUST_AGGREGATORS)
    holds_rows = isinstance(oracle, Problem)
    if solution is not None and not holds_rows:
        raise InvalidParameterError("solution= grades against a centralized oracle: pass the problem as oracle=")
    if private is not False:
        if private is not True:
            raise InvalidParameterError(f"private must be True or False; got {private!r}")
        if not holds_rows:
            raise InvalidParameterError(
                "private=True grades against a problem holding the clients' rows (each client a supernode of an "
                "in-process SecAgg+ grid that answers secure sums only): pass the problem as oracle=")
        if solution is not None and "private" not in (solution.info or {}):
            raise InvalidParameterError("private=True: solution= must be a private solution (private_solve or "
                                        "certified_solve(problem, private=True)); this one was certified from "
                                        "per-client answers")
        from ..client_oracle.private import private_route
        from ..client_oracle.private.objective import GRADED_ROUTES

        route = private_route(oracle)[0]         # refusals before the run
        if route not in GRADED_ROUTES:
            raise InvalidParameterError(
                f"private=True grades ERM / fixed weights and KLPenalty (each round's objective one secure sum); "
                f"the {route} route's objective at a model is a minimum over its dual's eta, a search of sums per "
                f"round: not graded privately")
    app = ServerApp()
    app.report = app.trace = app.solution = app.recorder = None

    @app.main()
    def main(grid, context) -> None:
        with flower_logs(verbose):
            _graded_main(grid, context)

    def _graded_main(grid, context) -> None:
        n = n_clients if n_clients is not None else len(list(grid.get_node_ids()))
        pmap = parameters
        if private:
            problem, sol = _private_oracle(oracle, solution, verbose, solve_options)
        elif holds_rows:
            problem = oracle
            sol = solution if solution is not None else oracle.solve(**{"gap_tol": ORACLE_GAP_TOL, **solve_options})
        else:
            made = {}

            def factory(federation):
                if estimator is None:
                    return oracle(federation)
                from .._from_sklearn import from_sklearn

                made["objective"] = from_sklearn(estimator, federation=federation)
                return made["objective"].problem

            sol = oracle_or_fault(grid, factory, n, method=method, run=run, **{"gap_tol": ORACLE_GAP_TOL, **solve_options})
            problem = sol.problem
            if pmap is None and "objective" in made:
                pmap = made["objective"].parameters
            log(INFO, "[drflmodel] federated oracle: %s (%d exchanges)", sol.summary(),
                sol.info.get("federated", {}).get("exchanges", 0))
        certified = sol.theta is not None
        fault = sol.info.get("fault") if not certified else None
        if not certified:
            log(WARNING, "[drflmodel] the oracle failed (%s): the run is recorded, not graded",
                (fault or {}).get("message", sol.status))
        rec = Recorder(problem, sol if certified and live else None, n_clients=n, parameters=pmap,
                       progress=progress)
        if not certified:
            rec.oracle_fault = fault or {"message": f"the oracle's status is {sol.status!r}"}
        with _recording(rec, robust_aggregators) as used:
            server_app(grid, context)
        if not used:
            raise InvalidParameterError(
                "the app's main() started no Message-API strategy (or its strategy overrides start() without "
                "calling Strategy.start): nothing was recorded")
        now = len(list(grid.get_node_ids()))
        if now != n:                               # the oracle must cover the federation that trained
            raise InvalidParameterError(
                f"the oracle covers {n} supernodes but {now} are connected after the run: pass "
                "n_clients= (the number of supernodes) to graded() so that the oracle waits for all of them")
        if certified and not live:                   # every round's values in one exchange
            from ..client_oracle import ClientFault

            rounds = sorted(rec.thetas)
            try:
                getattr(problem.objectives, "prefetch_values", lambda t: None)(np.array([rec.thetas[r] for r in rounds]))
                rec.solution = sol
                rec.objectives = {r: rec.errors(rec.thetas[r])["objective"] for r in rounds}
            except ClientFault as fault:
                _lost_oracle(rec, fault)
        if len(used) > 1:                              # a robust aggregator recorded with robust_aggregators="warn"
            rec.caveats.append(used[1])
        app.recorder, app.solution, app.trace = rec, sol, rec.trace()
        if private:
            app.trace.info["private_grading"] = problem.reveals(sol)
        channel = getattr(getattr(problem, "objectives", None), "channel", None)
        if channel is not None:               # the oracle's queries and the per-round value queries
            app.trace.info["federated_ledger"] = channel.ledger.to_dict()
        out = trace_out if trace_out is not None else context.run_config.get("trace-out", "")
        if out:
            Path(str(out)).parent.mkdir(parents=True, exist_ok=True)
            app.trace.save(str(out))
        app.report = rec.report(tol=tol)         # without an oracle: NOT GRADED, the fault, what was checked
        log(INFO if certified else WARNING, "[drflmodel] %s", app.report.summary().replace("\n", " | "))

    return app


def answering(client_app, sites=None, *, estimator=None, rows=None, classes=None, policy=None):
    """``client_app`` with the oracle's query handlers added (:func:`~drflmodel.flower.oracle.with_oracle`).

    Either ``sites`` (a problem, or ``factory(context) -> problem | Site``), or ``estimator`` with
    ``rows(context) -> (X, y)`` -- the rows the app trains on at that supernode, in scikit-learn's
    form, e.g. a :class:`~drflmodel.flower.partitions.FlowerDatasets` describing how the app loads
    its partitions -- and ``classes`` (classifiers: every class label, in ``classes_`` order;
    default the estimator's ``classes_``). ``policy``: the supernode's
    :class:`~drflmodel.client_oracle.QueryPolicy` (default: what a certified solve and live grading
    ask, one point per value query; grading every round at the end, ``graded(..., live=False)``,
    needs ``QueryPolicy(points_per_values=rounds + 1)``)."""
    if (sites is None) == (estimator is None):
        raise InvalidParameterError("pass exactly one of sites= and estimator= (with rows=)")
    if estimator is not None:
        if not callable(rows):
            raise InvalidParameterError("estimator= needs rows=, a function context -> (X, y)")
        from .._from_sklearn import sklearn_site

        def sites(context):
            X, y = rows(context)
            return sklearn_site(estimator, np.asarray(X), np.asarray(y), classes=classes,
                                name=f"partition {context.node_config.get('partition-id')}")

    return with_oracle(client_app, sites, policy)
