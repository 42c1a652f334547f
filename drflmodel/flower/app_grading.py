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


def graded(server_app: ServerApp, oracle=None, *, estimator=None, solution=None, parameters=None,
           n_clients: int | None = None, trace_out=None, tol: float = 1e-6, progress: bool = True,
           live: bool = True, method: str = "auto", run: str = "drflmodel-oracle",
           robust_aggregators: str = "refuse", verbose: bool | None = None, **solve_options) -> ServerApp:
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
    method, run, solve_options : for the federated solve (:func:`~drflmodel.flower.oracle.solve_on_grid`).
    robust_aggregators : ``"refuse"`` (default) -- a strategy that minimizes no objective the oracle
        computes (:func:`unmatched_objective`: Krum, MultiKrum, FedMedian, FedTrimmedAvg with
        ``beta > 0``, Bulyan) is refused by name when it starts; ``"warn"`` records it, logs a warning
        and puts the reason on the report as a ``caveat`` line.
    verbose : Flower's per-round INFO log during the run: ``None`` (default) keeps it off unless you
        configured Flower's logger, ``True`` shows it (drflmodel's lines and Flower's warnings always
        show).
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
    app = ServerApp()
    app.report = app.trace = app.solution = app.recorder = None

    @app.main()
    def main(grid, context) -> None:
        with flower_logs(verbose):
            _graded_main(grid, context)

    def _graded_main(grid, context) -> None:
        n = n_clients if n_clients is not None else len(list(grid.get_node_ids()))
        pmap = parameters
        if holds_rows:
            problem = oracle
            sol = solution if solution is not None else oracle.solve()
        else:
            made = {}

            def factory(federation):
                if estimator is None:
                    return oracle(federation)
                from .._from_sklearn import from_sklearn

                made["objective"] = from_sklearn(estimator, federation=federation)
                return made["objective"].problem

            sol = oracle_or_fault(grid, factory, n, method=method, run=run, **solve_options)
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
