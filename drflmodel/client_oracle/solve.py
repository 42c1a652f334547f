"""The federated certified solve: the same dispatch as the centralized solve, over the routes whose
query needs the clients can answer.

:func:`federated_solve` (1) asks every client for its declaration (sizes, features, classes, loss,
the queries it answers) and refuses mismatches before any round; (2) builds the server's problem --
the family's own, on a :class:`~.server.DeclaredFederation` that carries the channel, so its client
objectives ask the clients (``problem.on_federation(declared)``, or a factory ``federation ->
problem``); (3) runs :func:`~drflmodel.problems.engine.route.dispatch` with the query kinds every
client answers (:class:`~drflmodel.problems.engine.queries.Available`, saying which client cannot
answer what). Nothing of the problem is replaced at run time: the routes are the centralized
ones, so the certificate is the centralized one by construction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

import numpy as np

from .._lazy import LiveTable
from ..errors import InvalidDataError, InvalidParameterError
from ..losses import Loss
from ..problems.engine.queries import QUERY_KINDS, ROWS, Available
from ..problems.registry import own_oracle
from .channel import Channel
from .protocol import KIND_OF_ANSWER, NEEDS_ROWS, ClientFault
from .server import DeclaredFederation

__all__ = ["federated_solve", "server_problem", "SUPPORTED"]

class _Supported(LiveTable):
    """The families with a federated solve: class name -> what it does (the registry entry's
    ``federated`` text), derived whenever read from the one answer -- the class's
    ``federated_routes()`` (its routes whose ``needs`` hold no row), which
    ``problem.check_federated`` also reads -- or the family's own oracle (its registry entry's
``federated_oracle``);
    the classes are imported only then (no CVXPY at import time of :mod:`drflmodel.client_oracle`)."""

    _name = "SUPPORTED"

    def _table(self) -> dict:
        from ..problems.registry import FAMILIES

        classes = {f: f.load() for f in FAMILIES.values()}
        return {f.cls: f.federated or "its routes whose query needs the clients answer: " + ", ".join(
                    cls.federated_routes()) for f, cls in classes.items()
                if f.federated_oracle or cls.federated_routes()}



#: what the federated solve supports (class name -> how), from the family registry and each class
SUPPORTED: Mapping[str, str] = _Supported()


#: the query each kind is asked by (the name a refusal shows)
_ASKED_AS = {kind: query for query, kind in KIND_OF_ANSWER.items()}


def _kinds(reply: dict) -> frozenset:
    """The query kinds a client's declaration says it answers."""
    return frozenset(KIND_OF_ANSWER[a] for a in str(reply["answers"]).split(",") if a in KIND_OF_ANSWER)


def available_kinds(replies: list, loss, objectives) -> Available:
    """What the routes may use on the server: the kinds its objectives answer (from the clients'
    declarations, or computed from a quadratic loss's statistics), and, for each other kind, which
    client cannot answer it (``"client 0 cannot answer 'hessian' (its loss Hinge())"``)."""
    missing = {ROWS: f"a federated server holds no row ({NEEDS_ROWS})"}
    for kind in QUERY_KINDS:
        for i, reply in enumerate(replies):
            if kind != ROWS and kind not in _kinds(reply) and kind not in missing:
                missing[kind] = f"client {i} cannot answer {_ASKED_AS[kind]!r} (its loss {loss!r})"
    return Available(objectives.query_kinds, missing)


def _declare(channel: Channel, loss: Loss | None) -> tuple[DeclaredFederation, list[dict]]:
    """The setup exchange: every client's declaration; mismatches are refused before any round.
    The declared federation carries the channel and the query kinds every client answers, so the
    problems built on it ask the clients (:meth:`DeclaredFederation.client_objectives`)."""
    options = {} if loss is None else {"loss": json.dumps(loss.to_dict())}
    got = channel.ask("describe", options=options)     # a client failing it: ClientFault, the solve "failed"
    replies = [got[i] for i in range(channel.n_clients)]
    dims = [int(r["features"][0]) for r in replies]
    if len(set(dims)) != 1:
        raise InvalidDataError(f"the clients declare different numbers of features {dims} (client i "
                               "at position i): every client must use the model's columns")
    outputs = [int(r["outputs"][0]) for r in replies]
    if len(set(outputs)) != 1:
        raise InvalidDataError(f"the clients declare different numbers of classes {outputs}")
    losses = {str(r["loss"]) for r in replies}
    if len(losses) != 1:
        raise InvalidParameterError(f"the clients use different losses: {sorted(losses)}")
    site_loss = json.loads(losses.pop())
    task = site_loss["task"]
    ones = None
    for r in replies:
        cols = set(np.asarray(r["ones_columns"], float).astype(int).tolist())
        ones = cols if ones is None else ones & cols
    if len(ones) > 1:
        raise InvalidDataError(f"columns {sorted(ones)} are all constant 1 on every client: the intercept "
                               "column is ambiguous; keep one of them")
    K = outputs[0]
    if task == "multiclass":
        present = np.sum([np.asarray(r["classes_present"], float) for r in replies], axis=0)
        if np.any(present == 0):
            k = int(np.flatnonzero(present == 0)[0])
            raise InvalidDataError(f"class {k} has no row in any client; every one of the {K} classes must "
                                   "be held by some client")
    kinds = frozenset.intersection(*(_kinds(r) for r in replies))
    declared = DeclaredFederation([int(r["rows"][0]) for r in replies], dims[0], task,
                                  n_classes=K if task == "multiclass" else None,
                                  intercept_column=min(ones) if ones else None, channel=channel, kinds=kinds)
    return declared, replies


def server_problem(problem, declared: DeclaredFederation):
    """The server's problem on the declared federation: ``problem`` is a drflmodel problem (its
    family and parameters, ``problem.on_federation(declared)``; its rows are not used) or a
    factory ``federation -> problem`` (the same recipe that builds the centralized problem from a
    real federation). A family without a federated solve is refused with the reason."""
    from ..problems.engine.problem import Problem, ProblemBase

    if isinstance(problem, ProblemBase):
        _check_family(problem)
        return problem.on_federation(declared)
    if not callable(problem):
        raise InvalidParameterError(f"problem must be a drflmodel problem or a factory federation -> problem; "
                                    f"got {type(problem).__name__}")
    built = problem(declared)
    if not isinstance(built, Problem):
        raise InvalidParameterError(f"the problem factory returned {type(built).__name__}, not a drflmodel problem")
    _check_family(built)
    return built


def _check_family(problem) -> None:
    try:
        problem.check_federated()
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{exc}. Supported: {', '.join(SUPPORTED)}") from None


def federated_solve(problem, channel: Channel, method: str = "auto", gap_tol: float = 1e-6,
                    check_answers: bool = True, **options):
    """Certify ``problem`` (a problem or a factory, :func:`server_problem`) from the clients'
    answers over ``channel`` (module docstring): the family's routes, chosen by ``dispatch`` among
    those whose needs the clients answer -- ``"sqp"`` for smooth losses (values, gradients,
    Hessians; for the squared loss all from the clients' statistics), ``"level_bundle"`` for the others
    (values and subgradients). ``method`` forces one; ``options`` go to the route (``max_steps``,
    ``tol``, ...). Returns a :class:`~drflmodel.solution.Solution` whose ``info["federated"]``
    holds the exchanges, the reveal table, the rejected answers and any fault.

    ``check_answers`` (default ``True``): every answer is validated before a route uses it
    (:class:`~.validation.CheckedChannel` around ``channel``, unless it is one already); the
    rejected answers are listed in ``info["federated"]["rejections"]`` (client, query, check, numbers).

    **Faults never give a wrong claim.** ``info["fault"]`` names the client (``partition``, the
    transport's ``node``), the ``query``, the ``kind`` of fault, the ``check`` and its ``numbers``,
    and says what was returned (``message``):

    * a client whose answers the checks rejected on every attempt (it lies, or its answers are not
      those of a convex data term), or that **refused** a query (its policy; not retried): the
      solve ends ``"failed"``, with no model and no bound -- an earlier certificate used that
      client's answers, so it is not returned;
    * a client that did not answer within the retry budget (an error, a lost message, a timeout):
      ``"failed"`` -- or, when a certificate over **every** client was completed before the fault,
      that certificate (the best one: ``server.best_certificate()``, which the client-weight
      min-max families keep) with the status its gap gives;
    * a client whose declaration (``describe``) could not be read or was impossible (no rows, a count
      beyond the caps of :mod:`.decoding`, a supernode whose partition is unknown): ``"failed"`` before
      any round, with no server problem (``sol.problem`` is ``None``).

    A bound is never computed over part of the federation."""
    from ..problems.engine.route import dispatch
    from ..solution import Solution, status_from_gap
    from .validation import CheckedChannel

    if not (callable(getattr(channel, "ask", None)) and hasattr(channel, "n_clients")):
        raise InvalidParameterError(
            "channel must be a drflmodel.client_oracle.Channel (e.g. LocalChannel.from_problem(problem), or "
            f"drflmodel.flower.certified_solve / solve_on_grid over Flower); got {type(channel).__name__}")
    if not isinstance(check_answers, bool):
        raise InvalidParameterError(f"check_answers must be True or False; got {check_answers!r}")
    started = time.perf_counter()
    if check_answers and not isinstance(channel, CheckedChannel):
        channel = CheckedChannel(channel, getattr(problem, "loss", None))
    server, available, declared = None, None, None
    try:
        declared, replies = _declare(channel, getattr(problem, "loss", None))
        own = own_oracle(type(problem))       # the family's own oracle, declared in its registry entry
        if own is not None:
            sol = own(problem, channel, declared, method=method, gap_tol=gap_tol, **options)
        else:
            server = server_problem(problem, declared)      # a quadratic loss asks the statistics here
            available = available_kinds(replies, server.loss, server.objectives)
            if hasattr(server, "forget_certificates"):
                server.forget_certificates()                 # this solve's certificates only
            sol = dispatch(server, server.routes(), method=method, gap_tol=gap_tol, options=options,
                           available=available)
        fault = None
    except ClientFault as exc:
        fault = exc.to_dict()
        keeps = exc.kind == "no answer" and server is not None and hasattr(server, "best_certificate")
        best = server.best_certificate() if keeps else None
        if best is not None:
            sol = best
            sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, gap_tol)
        else:
            sol = Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                           lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                           certificate="none", info={})
        sol.info["method"] = method
        sol.problem = server
        fault["message"] = _fault_message(exc, channel.retries, best is not None)
        sol.info["fault"] = fault
    routes = server.routes() if server is not None else []
    route = next((r for r in routes if r.name == sol.info.get("method")), None)
    sol.info["federated"] = {"transport": type(getattr(channel, "inner", channel)).__name__,
                             "clients": channel.n_clients,
                             "sizes": None if declared is None else declared.sizes.tolist(),
                             "method": sol.info.get("method"),
                             "queries_needed": sorted(route.needs) if route is not None else None,
                             "queries_available": sorted(available or ()),
                             **channel.ledger.to_dict(), "fault": fault,
                             "checked": isinstance(channel, CheckedChannel),
                             "rejections": list(getattr(channel, "rejections", [])),
                             "time": time.perf_counter() - started}
    return sol


def _fault_message(fault: ClientFault, retries: int, returned_earlier: bool) -> str:
    """One sentence: who failed what, how, and what the solve returns."""
    node = "" if fault.node is None else f"; supernode {fault.node}"
    if fault.kind == "refused":
        what = (f"{fault.who} refused the {fault.query!r} query (its policy; not retried{node}): "
                f"{fault.reasons[-1]}")
    else:
        what = (f"{fault.who} failed the {fault.query!r} query on all {fault.attempts} attempts "
                f"(retry budget {retries}{node})")
        what += f": {fault.reasons[-1]}"          # a rejection's reason names the check and its numbers
    if returned_earlier:
        return what + "; the best certificate computed over every client before the fault is returned"
    if fault.kind == "no answer":
        return what + "; no certificate over every client was completed"
    if fault.kind == "refused":
        if "per run (" in fault.reasons[-1]:           # a budget met mid-solve: the server's demand
            what += (" -- a budget reached mid-solve: the server's route asked more than this client's policy "
                     "allows, which an honest client refuses too (the server's own limit, not a fault of the client; "
                     "a route that states its plan up front is refused before any answer instead)")
        return what + "; a refused query ends the solve: no certificate is returned"
    return what + "; no certificate is returned (any earlier one used this client's answers)"
