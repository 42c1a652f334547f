"""The formulation families, each described once.

Every place that lists the families reads :data:`FAMILIES`: the lazy names of ``drflmodel`` and
``drflmodel.problems``, the TOML configuration (``[problem] family``, its weight-set keys, the table
sources' horizontal/vertical keys), the command line's help, the federated solve's
:data:`drflmodel.client_oracle.SUPPORTED`, the Flower deployment's light client path and the
scikit-learn estimators. Adding a family is one :class:`Family` line here and its folder.

This module imports nothing heavy (no CVXPY, no problem class): an entry names its class by module
and name, and :meth:`Family.load` imports it when asked.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Callable

from ..errors import InvalidParameterError

__all__ = ["Family", "ClientQuery", "FAMILIES", "family", "register", "unregister", "by_class", "client_queries",
           "RESERVED_QUERIES",
           "client_query", "own_oracle", "SIZE_SYMBOLS"]

#: what an answer's size may be written in: the model's size :math:`P=dK`, the features :math:`d`
#: and the outputs :math:`K` the client declared (or a fixed count)
SIZE_SYMBOLS = ("P", "d", "K")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")


def _load(ref):
    """``ref`` itself when callable, else the object named ``"module:attribute"`` (imported now)."""
    if callable(ref) or not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class ClientQuery:
    """One query a family's own federated oracle asks every client (module docstring).

    Attributes
    ----------
    name : the query's name on the wire (Flower message type ``query.drflmodel_<name>``):
        lowercase letters, digits and ``_``, starting with a letter.
    answer : ``{array: (size, what it reveals)}``: every array of an answer, in order. ``size`` is a
        count, or ``"P"``, ``"d"``, ``"K"`` (:data:`SIZE_SYMBOLS`: from the client's declaration);
        the server reads exactly that many floats of each (the decoder checks the declared shape
        before it reads a byte), and the reveal ledger names each array by its text.
    handler : ``f(site, query, arrays, options) -> {array: values}``, run on the site on its own rows
        (:class:`~drflmodel.client_oracle.Site`: ``X``, ``y``, ``loss``, ``n_outputs``, ``name``,
        ``memo`` a dict the handler may keep state in) -- a callable or ``"module:function"``,
        imported only when a site answers (the declaration itself imports nothing heavy).
    budget : the answers per run a site's default :class:`~drflmodel.client_oracle.QueryPolicy`
        grants (a site's policy may set its own: ``budgets = {name = n}``).
    floor : a site holding fewer rows than its policy's floor refuses it (answers of :math:`P`
        floats per round could reveal its rows, as per-client gradients do).
    check : the server's check of an answer, ``f(request, options, answer) -> reason | None`` (a
        callable or ``"module:function"``), run after every array was found finite; ``None``: the
        finiteness and sizes only.
    """

    name: str
    answer: dict
    handler: Callable | str
    budget: int
    floor: bool = True
    check: Callable | str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidParameterError(f"a client query's name must match {_NAME.pattern}; got {self.name!r}")
        if not isinstance(self.answer, dict) or not self.answer:
            raise InvalidParameterError(f"{self.name}: answer must be a non-empty dict array -> (size, text)")
        for array, spec in self.answer.items():
            ok = (isinstance(array, str) and _NAME.fullmatch(array) and isinstance(spec, tuple) and len(spec) == 2
                  and isinstance(spec[1], str) and (spec[0] in SIZE_SYMBOLS or (
                      isinstance(spec[0], int) and not isinstance(spec[0], bool) and spec[0] >= 1)))
            if not ok:
                raise InvalidParameterError(f"{self.name}: answer[{array!r}] must be (a count >= 1 or one of "
                                            f"{', '.join(SIZE_SYMBOLS)}, what it reveals); got {spec!r}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 0:
            raise InvalidParameterError(f"{self.name}: budget must be an integer >= 0; got {self.budget!r}")

    @property
    def arrays(self) -> tuple[str, ...]:
        return tuple(self.answer)

    def sizes(self, declared: dict | None) -> dict:
        """``{array: floats}`` of an answer, for a client that declared ``{"features": d,
        "outputs": K}``; a size written in :data:`SIZE_SYMBOLS` is ``None`` without a declaration."""
        declared = declared or {}
        d, K = declared.get("features"), declared.get("outputs")
        K = None if d is None else int(K or 1)
        values = {"d": None if d is None else int(d), "K": K, "P": None if d is None else int(d) * K}
        return {a: spec[0] if isinstance(spec[0], int) else values[spec[0]] for a, spec in self.answer.items()}

    def respond(self, site, arrays: dict, options: dict) -> dict:
        """The site's answer (its handler); exactly the declared arrays, else ``ValueError``."""
        out = _load(self.handler)(site, self.name, arrays, options)
        if set(out) != set(self.answer):
            raise ValueError(f"the handler of {self.name!r} answered {sorted(out)}; declared {sorted(self.answer)}")
        return out

    def validate(self, request: dict, options: dict, answer: dict) -> str | None:
        """The declared check's reason to reject ``answer`` (``None``: accepted)."""
        return None if self.check is None else _load(self.check)(request, options, answer)

@dataclass(frozen=True)
class Family:
    """One formulation family.

    Attributes
    ----------
    name : the family's name: ``[problem] family`` in a TOML file, the class's ``family``
        attribute, reports.
    cls : the class's name, exported by ``drflmodel`` and ``drflmodel.problems``.
    module : the module that defines the class.
    weight_keys : the constructor's weight-set arguments; each is also a ``[problem]`` key of a
        TOML file (a table ``{ name = ..., <options> }``, default ``simplex``).
    weight_sets : the weight-set names those keys accept (:func:`drflmodel.sets.from_name`);
        ``None`` (the default): every one of :data:`drflmodel.sets.WEIGHT_SET_NAMES`
        (:meth:`weight_set_names`).
    vertical : the family's data is a :class:`~drflmodel.data.VerticalFederation` (parties hold
        feature blocks) rather than a :class:`~drflmodel.data.Federation` (clients hold rows).
    light_client : a client of a deployed run computes the plain :math:`f_i` of
        :class:`~drflmodel.objectives.ClientObjectives` (no oracle, no CVXPY in its process).
    federated : what the federated solve does for this family, shown in
        :data:`drflmodel.client_oracle.SUPPORTED` when the class has a federated solve (a route
        whose ``needs`` hold no row, ``federated_routes()``, or its own ``federated_oracle``; the
        class decides, this text only describes).
    estimators : the :mod:`drflmodel.sklearn` estimators over this family.
    summary : one line: the formulation and its paper.
    client_queries : the family's own client queries (:class:`ClientQuery`), or
        ``"module:NAME"`` of a tuple of them (a module importing nothing heavy).
    federated_oracle : the family's own federated solve, ``f(problem, channel, declared,
        method=, gap_tol=, **options) -> Solution`` (a callable or ``"module:function"``), which
        :func:`drflmodel.client_oracle.federated_solve` runs after the clients' declarations
        instead of the engine's routes; ``""``: none.
    """

    name: str
    cls: str
    module: str
    weight_keys: tuple[str, ...] = ()
    weight_sets: tuple[str, ...] | None = None
    vertical: bool = False
    light_client: bool = False
    federated: str = ""
    estimators: tuple[str, ...] = ()
    summary: str = ""
    client_queries: tuple = field(default=(), repr=False)
    federated_oracle: Callable | str = field(default="", repr=False)

    def queries(self) -> tuple[ClientQuery, ...]:
        """The family's :class:`ClientQuery` declarations (imported now when named by module)."""
        got = tuple(_load(self.client_queries)) if isinstance(self.client_queries, str) else tuple(self.client_queries)
        bad = [q for q in got if not isinstance(q, ClientQuery)]
        if bad:
            raise InvalidParameterError(f"family {self.name!r}: client_queries must be ClientQuery entries; got "
                                        f"{type(bad[0]).__name__}")
        return got

    def oracle(self):
        """The family's own federated solve (``None`` without one)."""
        return _load(self.federated_oracle) if self.federated_oracle else None

    def load(self) -> type:
        """The family's problem class (imported now)."""
        return getattr(importlib.import_module(self.module), self.cls)

    def weight_set_names(self) -> tuple[str, ...]:
        """The weight-set names the family's weight-set keys accept (none without such a key)."""
        if not self.weight_keys:
            return ()
        if self.weight_sets is not None:
            return tuple(self.weight_sets)
        from ..sets import WEIGHT_SET_NAMES

        return tuple(WEIGHT_SET_NAMES)


_P = "drflmodel.problems"

#: the families, in the order documentation and help list them
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("dro", "FederatedDRO", f"{_P}.minmax.dro", weight_keys=("weights",), light_client=True,
           federated="every weight set; smooth losses by SQP, the squared loss from sufficient statistics, "
                     "non-smooth losses by a level bundle method",
           estimators=("FederatedDROClassifier", "FederatedDRORegressor"),
           summary="federated DRO over client weights (Scaff-PD; AFL, CVaR, chi-square, q-FFL, KL, ...)"),
    Family("fafl", "FairnessAwareFL", f"{_P}.minmax.fafl", light_client=True,
           federated="as FederatedDRO (its weight set is HCVaR)",
           estimators=("FairnessAwareClassifier",),
           summary="fairness-aware FL: HCVaR of the client losses (FedFair / rFedFair)"),
    Family("wasserstein", "WassersteinDRFL", f"{_P}.wasserstein.problem", weight_keys=("weights",),
           client_queries=f"{_P}.wasserstein.queries:QUERIES",
           federated_oracle=f"{_P}.wasserstein.federated:federated_oracle",
           federated="its own oracle, problems.wasserstein.federated.federated_solve: each client answers for "
                     "its own ball, consensus ADMM and a dual-decomposition certificate (unbounded support)",
           estimators=("WassersteinDRClassifier", "WassersteinDRRegressor"),
           summary="Wasserstein DRFL: a transport ball around each client's empirical distribution"),
    Family("relative", "RelativeFairness", f"{_P}.relative.problem", weight_keys=("A", "B"), light_client=True,
           estimators=("RelativeFairRegressor",),
           summary="relative fairness over an integrated weight set (A, B, phi)"),
    Family("deo", "DEOConstrained", f"{_P}.deo.problem", vertical=True, estimators=("DEOClassifier",),
           summary="vertical FL with a difference-of-equal-opportunity constraint"),
)}


def family(name: str) -> Family:
    """The :class:`Family` named ``name``; an unknown name raises
    :class:`~drflmodel.errors.InvalidParameterError` listing the families."""
    if name not in FAMILIES:
        raise InvalidParameterError(f"family must be one of {', '.join(FAMILIES)}; got {name!r}")
    return FAMILIES[name]


def by_class(cls_name: str) -> Family | None:
    """The family whose class is named ``cls_name`` (``None`` if none is)."""
    return next((f for f in FAMILIES.values() if f.cls == cls_name), None)


def register(entry: Family) -> None:
    """Add a family (tests and extensions; the built-in ones are the literal above). Its class name
    must be new (the lazy names of ``drflmodel`` are keyed by it), and so must its client queries'
    names (one wire name, one meaning)."""
    if not isinstance(entry, Family):
        raise InvalidParameterError(f"entry must be a Family; got {type(entry).__name__}")
    if entry.name in FAMILIES or by_class(entry.cls) is not None:
        raise InvalidParameterError(f"a family named {entry.name!r} or with class {entry.cls!r} is registered")
    taken = set(client_queries()) | set(RESERVED_QUERIES)
    clash = sorted(q.name for q in entry.queries() if q.name in taken)
    if clash:
        raise InvalidParameterError(f"family {entry.name!r}: client quer{'y' if len(clash) == 1 else 'ies'} "
                                    f"{clash} already declared")
    FAMILIES[entry.name] = entry


#: the names of the client-oracle protocol's own queries (:data:`drflmodel.client_oracle.QUERIES`),
#: which no family may declare
RESERVED_QUERIES = ("describe", "row_norm", "values", "evaluate", "hessian", "hvp", "statistics", "bound_terms")


def client_queries() -> dict[str, ClientQuery]:
    """Every family's own client queries, name -> :class:`ClientQuery` (read now: a family added
    by :func:`register` is seen at once)."""
    out: dict[str, ClientQuery] = {}
    for entry in FAMILIES.values():
        for q in entry.queries():
            if q.name in out or q.name in RESERVED_QUERIES:
                raise InvalidParameterError(f"client query {q.name!r} of family {entry.name!r} is declared twice")
            out[q.name] = q
    return out


def client_query(name: str) -> ClientQuery | None:
    """The :class:`ClientQuery` named ``name`` (``None``: no family declares it)."""
    return client_queries().get(name)


def own_oracle(cls: type):
    """The own federated solve of the family of ``cls`` or of its nearest registered base class
    (``None`` if that family has none, or no family is found)."""
    for klass in getattr(cls, "__mro__", ()):
        entry = by_class(klass.__name__)
        if entry is not None and entry.module == klass.__module__:
            return entry.oracle()
    return None


def unregister(name: str) -> None:
    """Remove a family added by :func:`register`."""
    family(name)
    del FAMILIES[name]
