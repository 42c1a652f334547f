r"""The certified oracle computed on Flower from the clients' own answers (the federated
implementation of :mod:`drflmodel.client_oracle`).

The server -- a ``ServerApp`` that never sees a row -- runs a solve route of
:class:`~drflmodel.FederatedDRO` / :class:`~drflmodel.FairnessAwareFL` on a problem built from the
clients' declarations (sizes, number of features, classes, intercept column), and every query of
the route's client-oracle interface becomes one Flower message per client
(``query.drflmodel_<query>``, :data:`~drflmodel.client_oracle.QUERIES`). Each supernode answers
from its own partition only (:class:`~drflmodel.client_oracle.Site`). The route code is the one
of the centralized solve, so the certificate is the centralized one by construction; what a
client reveals is exactly its answers, tabulated in ``solution.info["federated"]["reveals"]``
(quantity, floats per answer, exchanges, answers per client) with the number of exchanges.

* :func:`with_oracle` adds the answering handlers to **any** ``ClientApp`` (yours, Flower's
  quickstart's, drflmodel's own) given where the site's rows come from; :func:`oracle_client_app`
  is a ``ClientApp`` with only those handlers.
* :class:`FlowerChannel` is the server's transport: it waits for one supernode per client,
  learns which node holds which partition from the setup answers, pushes a query to every client
  and pulls the answers (its own polling loop). Every answer is checked before a route uses it. A
  client that fails (its ``ClientApp`` raised), does not answer within ``timeout`` seconds, or
  whose answer fails a check is asked again, at most ``retries`` times (the retry budget); a query
  its policy refused is not. Then the solve ends ``"failed"`` -- a silent client's fault alone may
  return a certificate completed over **every** client before it, with the status its gap gives --
  never ``"optimal"`` over a partial federation or on a rejected answer; ``info["fault"]`` names
  the partition and its supernode (:func:`drflmodel.client_oracle.federated_solve`).
* :func:`solve_on_grid` runs the solve on any Flower ``Grid`` (inside your ``ServerApp``'s
  ``main``); :func:`oracle_server_app` wraps it in a ``ServerApp``; :func:`certified_solve` runs
  it on the in-process grid or on Flower's simulation engine.
"""

from __future__ import annotations

import json
from typing import Callable

from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from .._validation import check_choice, check_int
from ..client_oracle import QUERIES, Channel, ClientFault, Site, federated_solve
from ..client_oracle.decoding import MAX_ANSWER_FLOATS, Malformed, decode_answer
from ..client_oracle.protocol import REJECTED
from ..errors import InvalidParameterError
from ._exchange import Exchange
from ._records import CONFIG, METRICS, PAYLOAD, down_content, payload_arrays, up_content
from .client import partition_of

__all__ = ["with_oracle", "oracle_client_app", "FlowerChannel", "solve_on_grid", "oracle_or_fault", "oracle_server_app",
           "certified_solve", "message_type"]

TEXT = "text"


def message_type(query: str) -> str:
    """The Flower message type of a client-oracle query."""
    return f"query.drflmodel_{query}"


# ---------------------------------------------------------------------------------- client side
class _Sites:
    """Where a supernode finds its :class:`~drflmodel.client_oracle.Site`: from a problem, a dict
    ``{run key: problem}``, or ``factory(context)`` returning a problem (the site takes its own
    partition) or the site itself (a site holding only its own rows). Built once per run and
    process."""

    def __init__(self, sites):
        self._factory, self._problems = None, {}
        if hasattr(sites, "client_view"):          # a problem (duck-typed: importing the problem
            self._problems = {None: sites}          # classes would import CVXPY in every client process)
        elif isinstance(sites, dict):
            self._problems = dict(sites)
        elif callable(sites):
            self._factory = sites
        else:
            raise InvalidParameterError(f"sites must be a drflmodel problem, a dict of problems or a factory "
                                        f"context -> problem | Site; got {type(sites).__name__}")
        self._cache: dict = {}

    def get(self, context: Context, run: str):
        key = (context.run_id, context.node_id, run)
        if key not in self._cache:
            made = (self._factory(context) if self._factory is not None
                    else self._problems.get(run, self._problems.get(None)))
            if made is None:
                raise InvalidParameterError(f"this ClientApp holds no problem for run {run!r}")
            if isinstance(made, Site):
                self._cache[key] = (partition_of(context), made)
            else:
                i = partition_of(context, made.n_clients)
                self._cache[key] = (i, Site.from_problem(made, i))
        return self._cache[key]


def with_oracle(app: ClientApp, sites, policy=None) -> ClientApp:
    """Register the client-oracle handlers (``query.drflmodel_*``) on ``app`` and return it.

    ``sites``: a drflmodel problem (each supernode answers for its ``partition-id``), a dict
    ``{run key: problem}``, or ``factory(context) -> problem | Site`` called in the client's
    process -- e.g. ``lambda ctx: Site(X, y, loss)`` from the rows the app loads for its
    partition. Nothing else of the app changes; its own handlers keep working.

    ``policy``: the app's :class:`~drflmodel.client_oracle.QueryPolicy`, or ``f(context)``
    returning one (default: the one a certified solve needs and no more: one point per value query,
    budgets per run, no per-client gradients from a site with fewer than :math:`P+1` rows); a query
    it does not allow is refused with a message naming the rule, which the server reports.

    **The site's own policy binds.** A supernode started with ``--node-config
    "query-policy='/path/on/the/site/policy.toml'"`` answers under that file's policy
    (:func:`~drflmodel.client_oracle.policy.site_policy`; it replaces the default), made only stricter
    by ``policy`` when the app passes one: neither the app's code nor its run config can loosen it. The answers are counted per Flower run and supernode
    (``context.run_id``, ``context.node_id``: what the SuperLink assigns) in the supernode's
    ``Context.state`` (it outlives Flower's per-message process) -- never by the ``run`` label the
    server writes into its messages, so a server cannot reset a budget by renaming its queries."""
    from ..client_oracle import PolicySite, QueryPolicy
    from ..client_oracle.policy import site_policy

    resolve = _Sites(sites)
    if not (policy is None or isinstance(policy, QueryPolicy) or callable(policy)):
        raise InvalidParameterError(f"policy must be a QueryPolicy or a function context -> QueryPolicy; "
                                    f"got {type(policy).__name__}")

    def policy_of(context):
        site = site_policy(context.node_config)
        if policy is None:                          # the site's file, else the default
            return QueryPolicy() if site is None else site
        made = policy if isinstance(policy, QueryPolicy) else policy(context)
        if not isinstance(made, QueryPolicy):
            raise InvalidParameterError(f"the policy function returned {type(made).__name__}, not a QueryPolicy")
        return made if site is None else site.stricter(made)

    def register(query: str):
        def handler(msg: Message, context: Context) -> Message:
            config = msg.content.config_records[CONFIG]
            run = str(config["run"])
            i, site = resolve.get(context, run)
            options = json.loads(str(config.get("options", "{}")))
            key = f"drflmodel.policy.run{int(context.run_id)}.node{int(context.node_id)}"
            counts = dict(context.state[key]) if key in context.state else {}
            answer = PolicySite(site, policy_of(context), counts).answer(query, payload_arrays(msg.content), options)
            context.state[key] = ConfigRecord({k: int(v) for k, v in counts.items()})
            text = {k: v for k, v in answer.items() if isinstance(v, str)}
            content = up_content({k: v for k, v in answer.items() if not isinstance(v, str)},
                                 {"partition-id": i})
            if text:
                content[TEXT] = ConfigRecord(text)
            return Message(content, reply_to=msg)

        app.query(message_type(query).split(".", 1)[1])(handler)

    for query in QUERIES:
        register(query)
    return app


def oracle_client_app(sites, policy=None) -> ClientApp:
    """A ``ClientApp`` that answers the client-oracle queries only (:func:`with_oracle`)."""
    return with_oracle(ClientApp(), sites, policy)


# ---------------------------------------------------------------------------------- server side
class FlowerChannel(Channel):
    """The client-oracle transport over a Flower ``Grid`` (module docstring).

    Every reply is read inside the checked region (:mod:`drflmodel.client_oracle.decoding`): its
    ``metrics`` record must name the partition the node holds, its arrays exactly those the query
    asks and of the sizes it asks (checked from the declared shapes before any byte is copied, at
    most ``max_answer_floats`` each), NumPy arrays of real numbers, finite and bounded; a reply that
    is not is a rejected answer (reason ``"answer rejected by the server's check 'decode' | 'size' |
    'finite' | 'magnitude' | 'declaration' | 'identity': ..."``), retried like a garbled message and
    then a :class:`~drflmodel.client_oracle.ClientFault` naming the client, its node, the query and
    what was wrong -- never a raw exception.

    Parameters
    ----------
    grid : the ``Grid`` the ``ServerApp`` received.
    n_clients : the number of clients (one supernode each).
    run : the run key the clients' sites are stored under.
    timeout : seconds to wait for the answers of one exchange (then the missing clients count as
        failed and are asked again).
    retries : how many times a failed query is asked again (the retry budget).
    poll_interval, connect_timeout : seconds between pulls; to wait for the supernodes.
    max_answer_floats : the most floats one answer may hold (:data:`~drflmodel.client_oracle.decoding.MAX_ANSWER_FLOATS`).
    """

    def __init__(self, grid, n_clients: int, run: str = "oracle", timeout: float = 60.0, retries: int = 2,
                 poll_interval: float = 0.005, connect_timeout: float = 60.0,
                 max_answer_floats: int = MAX_ANSWER_FLOATS):
        super().__init__(n_clients, retries)
        self.run = str(run)
        self.max_answer_floats = check_int(max_answer_floats, "max_answer_floats", low=1)
        self.exchange = Exchange(grid, self.n_clients, run=self.run, timeout=timeout,
                                 poll_interval=poll_interval, connect_timeout=connect_timeout)
        self.exchange.connect(0)                   # exactly one supernode per client, else an error
        self.node_of: dict[int, int] = {}
        self.declared: dict[int, dict] = {}        # partition -> {"features": d, "outputs": K}
        self.rejections: list[dict] = []           # replies that could not be read (client, query, check, ...)
        self._group = 0

    def _content(self, arrays: dict, options: dict):
        return down_content(arrays, {"run": self.run, "options": json.dumps(options)})

    def _answer(self, query: str, msg: Message, request: dict, options: dict, partition: int | None) -> dict:
        """The decoded answer of one reply (:func:`~drflmodel.client_oracle.decoding.decode_answer`);
        raises :class:`~drflmodel.client_oracle.decoding.Malformed`."""
        content = msg.content
        if partition is not None:
            metrics = content.metric_records.get(METRICS)
            if metrics is None or "partition-id" not in metrics:
                raise Malformed("identity", "the reply has no metrics record naming its partition-id")
            claimed = metrics["partition-id"]
            if not isinstance(claimed, (int, float)) or claimed != partition:
                raise Malformed("identity", f"the reply claims partition-id {str(claimed)[:40]} from the node holding "
                                            f"partition {partition}")
        declared = self.declared.get(partition) if partition is not None else None
        return decode_answer(query, content.array_records.get(PAYLOAD), content.config_records.get(TEXT),
                             request, options, declared, cap=self.max_answer_floats)

    def _read(self, query: str, node: int, msg: Message, request: dict, options: dict, partition):
        """``(answer, None)`` or ``(None, reason)``: a reply that cannot be read is a rejected answer."""
        try:
            answer = self._answer(query, msg, request, options, partition)
        except Malformed as bad:
            self.rejections.append({"client": partition, "node": int(node), "query": query, "check": bad.check,
                                    "detail": bad.detail, "numbers": dict(bad.numbers)})
            return None, f"{REJECTED} {bad.check!r}: {bad.detail}"
        except Exception as exc:  # noqa: BLE001 - whatever else a reply can do wrong is the same fault, named
            self.rejections.append({"client": partition, "node": int(node), "query": query, "check": "decode",
                                    "detail": f"{type(exc).__name__}: {str(exc)[:200]}", "numbers": {}})
            return None, f"{REJECTED} 'decode': the reply cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        if query == "describe" and partition is not None:
            self.declared[partition] = {"features": int(answer["features"][0]), "outputs": int(answer["outputs"][0])}
        return answer, None

    def _push(self, query: str, by_node: dict):
        self._group += 1
        return self.exchange._exchange({node: message_type(query) for node in by_node}, by_node,
                                       group=f"{self.run}-{self._group}")

    def _partition_of(self, msg: Message):
        """The partition a setup reply claims, or ``(None, why)``."""
        metrics = msg.content.metric_records.get(METRICS)
        claimed = None if metrics is None else metrics.get("partition-id")
        if isinstance(claimed, bool) or not isinstance(claimed, int) or not 0 <= claimed < self.n_clients:
            return None, (f"{REJECTED} 'identity': the reply names partition-id {str(claimed)[:40]}; the federation "
                          f"has partitions 0..{self.n_clients - 1}")
        return int(claimed), None

    def _identify(self, query: str, contents: dict) -> dict:
        """The setup query to every node; its answers carry the partition ids (nodes are random ids).
        A node whose reply names no valid partition, or cannot be read, is asked again and then is a
        :class:`~drflmodel.client_oracle.ClientFault` of that supernode (with the partition it claimed,
        if it named a valid one)."""
        arrays, options = next(iter(contents.values()))
        pending, answers, reasons, claimed = list(self.exchange.nodes), {}, {}, {}
        for _ in range(self.retries + 1):
            got, errors = self._push(query, {node: self._content(arrays, options) for node in pending})
            for node, msg in got.items():
                i, why = self._partition_of(msg)
                answer = None
                if why is not None:
                    self.rejections.append({"client": None, "node": int(node), "query": query, "check": "identity",
                                            "detail": why.split(": ", 1)[-1], "numbers": {}})
                else:
                    claimed[node] = i
                    answer, why = self._read(query, node, msg, arrays, options, None)
                if why is None:
                    answers[node] = (i, answer)
                else:
                    errors[node] = why
            for node, why in errors.items():
                reasons.setdefault(node, []).append(why)
            pending = list(errors)
            if not pending:
                break
        if pending:
            node = pending[0]
            last = next((r for r in reversed(self.rejections) if r["node"] == node), None)
            raise ClientFault(claimed.get(node), query, reasons[node], node=node, check=None if last is None else last["check"],
                              numbers=None if last is None else last["numbers"])
        seen: dict[int, int] = {}
        for node, (i, _) in answers.items():
            if i in seen:
                raise InvalidParameterError(f"supernodes {seen[i]} and {node} both hold partition-id {i}: give "
                                            f"each of the {self.n_clients} supernodes its own partition-id")
            seen[i] = node
        self.node_of = dict(sorted(seen.items()))
        out = {i: answers[node][1] for i, node in self.node_of.items()}
        if query == "describe":
            self.declared = {i: {"features": int(a["features"][0]), "outputs": int(a["outputs"][0])}
                             for i, a in out.items()}
        return out

    def _send(self, query: str, contents: dict):
        if not self.node_of:
            return self._identify(query, contents), {}
        by_node = {self.node_of[i]: self._content(*contents[i]) for i in contents}
        got, errors = self._push(query, by_node)
        part = {node: i for i, node in self.node_of.items()}
        replies, failed = {}, {part[node]: why for node, why in errors.items()}
        for node, msg in got.items():
            i = part[node]
            answer, why = self._read(query, node, msg, *contents[i], i)
            if why is None:
                replies[i] = answer
            else:
                failed[i] = why
        return replies, failed

    def fault(self, client, query: str, reasons: list) -> ClientFault:
        fault = super().fault(client, query, reasons)
        last = next((r for r in reversed(self.rejections) if r["client"] == client and r["query"] == query), None)
        if fault.kind == "rejected" and last is not None and reasons and reasons[-1].startswith(REJECTED):
            fault.check, fault.numbers = last["check"], dict(last["numbers"])
        return fault


def solve_on_grid(grid, problem, n_clients: int | None = None, method: str = "auto", gap_tol: float = 1e-6,
                  run: str = "oracle", timeout: float = 60.0, retries: int = 2, poll_interval: float = 0.005,
                  connect_timeout: float = 60.0, check_answers: bool = True, **options):
    """The federated certified solve of ``problem`` over ``grid`` (call it in a ``ServerApp``'s
    ``main``): ``problem`` is a drflmodel problem (only its family and parameters are used: the
    server rebuilds it on the clients' declarations) or a factory ``federation -> problem``
    (then ``n_clients`` is required). ``method``, ``gap_tol`` and ``options`` as in
    :func:`drflmodel.client_oracle.federated_solve`; ``timeout``, ``retries`` as in
    :class:`FlowerChannel`. ``check_answers`` (default ``True``): every answer is validated before
    the route uses it (:class:`~drflmodel.client_oracle.CheckedChannel`; the rejections are in
    ``info["federated"]["rejections"]``, a fault in ``info["fault"]`` names the partition and its
    node). Returns the :class:`~drflmodel.solution.Solution`."""
    if n_clients is None:
        if not hasattr(problem, "n_clients"):
            raise InvalidParameterError("n_clients is required when problem is a problem factory")
        n_clients = problem.n_clients
    channel = FlowerChannel(grid, check_int(n_clients, "n_clients", low=1), run=run, timeout=timeout,
                            retries=retries, poll_interval=poll_interval, connect_timeout=connect_timeout)
    sol = federated_solve(problem, channel, method=method, gap_tol=gap_tol, check_answers=check_answers, **options)
    sol.info["federated"]["transport"] = "flower"
    return sol


def oracle_or_fault(grid, problem, n_clients: int | None = None, **options):
    """:func:`solve_on_grid`, or -- when its setup is refused (two supernodes claiming one partition,
    clients declaring different models, ...) or anything a client's reply causes escapes the solve's
    own fault handling -- a ``"failed"`` solution whose ``info["fault"]`` says why (``kind``
    ``"setup"``, or ``"error"`` for an exception that is no named fault, logged as an error to be
    reported). What a graded app and the example's ``ServerApp`` call: a reply never takes them
    down, their own training runs and the report says NOT GRADED."""
    from logging import ERROR, WARNING

    from flwr.common.logger import log

    from ..errors import DrflmodelError
    from ..solution import Solution

    try:
        return solve_on_grid(grid, problem, n_clients, **options)
    except Exception as exc:  # noqa: BLE001 - reported as the oracle's fault, with its type and message
        named = isinstance(exc, DrflmodelError)
        message = (f"the federated oracle's setup was refused: {exc}" if named else
                   f"the federated oracle raised {type(exc).__name__}: {exc} (not a named fault: please report it)")
        log(WARNING if named else ERROR, "[drflmodel] %s", message)
        sol = Solution(theta=None, weights=None, client_losses=None, value=float("nan"), lower_bound=float("-inf"),
                       upper_bound=float("inf"), status="failed", certificate="none", info={})
        sol.problem = None
        sol.info["fault"] = {"client": None, "partition": None, "node": None, "query": None,
                             "kind": "setup" if named else "error", "check": None, "numbers": {},
                             "attempts": 0, "reasons": [f"{type(exc).__name__}: {exc}"], "message": message}
        sol.info["federated"] = {"exchanges": 0, "fault": sol.info["fault"]}
        return sol


def oracle_server_app(problem, n_clients: int | None = None, on_solution: Callable | None = None,
                      from_context: bool = False, **options) -> ServerApp:
    """A ``ServerApp`` running :func:`solve_on_grid` and handing the solution to
    ``on_solution(solution)``. With ``from_context=True``, ``problem`` is ``f(context)`` returning
    the problem (or factory) in the server's process, e.g. from its run config."""
    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        sol = solve_on_grid(grid, problem(context) if from_context else problem, n_clients, **options)
        if on_solution is not None:
            on_solution(sol)

    return app


ENGINES = ("inprocess", "ray")


def certified_solve(problem, engine: str = "inprocess", num_supernodes: int | None = None,
                    backend_config: dict | None = None, verbose: bool | None = None, private: bool = False,
                    **options):
    """The federated certified solve of a problem whose rows this process holds, on the in-process
    grid (``engine="inprocess"``: Flower's messages and serialization, milliseconds each) or on
    Flower's simulation engine (``"ray"``): the clients answer from their own partitions of
    ``problem``, the server sees only their answers. ``options`` go to :func:`solve_on_grid`;
    ``verbose=True`` shows Flower's INFO log (quiet by default unless you configured Flower's logger).

    ``private=True``: the server sees only secure sums over all clients, each one round of Flower's
    SecAgg+ (:func:`drflmodel.flower.secure.private_certified_solve`; in-process grid only, one
    supernode per client; ``options`` go there)."""
    if private is not False:
        if private is not True:
            raise InvalidParameterError(f"private must be True or False; got {private!r}")
        if engine != "inprocess" or num_supernodes not in (None, problem.n_clients):
            raise InvalidParameterError(
                "private=True runs on the in-process grid with one supernode per client (engine='inprocess', "
                f"num_supernodes=None); got engine={engine!r}, num_supernodes={num_supernodes!r}")
        from .secure import private_certified_solve

        return private_certified_solve(problem, verbose=verbose, **options)
    from .engine import simulate
    from .grid import LocalGrid

    engine = check_choice(engine, "engine", ENGINES)
    n = problem.n_clients if num_supernodes is None else check_int(num_supernodes, "num_supernodes", low=1)
    run = options.setdefault("run", "oracle")
    # every row is in this process already: the simulated clients answer without the row floor (a
    # floor protects a site's rows from a server that does not hold them)
    from ..client_oracle import QueryPolicy

    capp = oracle_client_app({run: problem}, policy=QueryPolicy(rows_above_parameters=False))
    if engine == "inprocess":
        with LocalGrid(capp, n, verbose=verbose) as grid:
            return solve_on_grid(grid, problem, **options)
    out: dict = {}
    simulate(oracle_server_app(problem, on_solution=lambda s: out.setdefault("solution", s), **options),
             capp, n, backend_config, verbose=verbose)
    if "solution" not in out:
        raise RuntimeError("Flower's simulation ended without the federated solve's answer")
    return out["solution"]
