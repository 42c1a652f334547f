r"""The client-oracle interface: the one narrow door through which a solve route reaches the data.

The fast routes of the client-weight min-max family (:class:`~drflmodel.FederatedDRO`,
:class:`~drflmodel.FairnessAwareFL`) touch the data only through per-client quantities of

.. math::

    f_i(\theta)=h_i(\theta)+\tfrac{\ell_2}2\textstyle\sum_j\omega_j\|W_{j\cdot}\|^2,\qquad
    h_i(\theta)=\tfrac1{N_i}\textstyle\sum_{j}\ell(W^\top x_{ij},y_{ij})

(values, gradients, the Hessians weighted by the client weights, Hessian-vector products; for the
squared loss the sufficient statistics :math:`X_i^\top X_i`, :math:`X_i^\top y_i`,
:math:`y_i^\top y_i`, :math:`N_i`). :class:`ClientOracle` names that interface. It has two
implementations:

* **in process**: :class:`~drflmodel.objectives.ClientObjectives`, which holds every client's rows
  (the centralized solve);
* **federated**: :class:`FederatedObjectives` (and :class:`StatisticsObjectives` for quadratic
  losses), which holds **no row**: each call becomes a query to the clients over a
  :class:`Channel` -- :class:`LocalChannel` (direct calls, for tests) or the Flower channel of
  :mod:`drflmodel.flower.oracle` (one Flower message per client per query) -- and the server adds
  the ridge term, which is not data.

The **same route code** runs on both (``problem.objectives`` is the only thing that differs), so
the federated certificate is the centralized one by construction, and what a client reveals is
exactly the return values of the queries it answers (:class:`Site`, the client side):

.. list-table::
   :header-rows: 1
   :widths: 28 28 44

   * - quantity (client *i*)
     - floats per answer
     - asked
   * - ``rows`` :math:`N_i`
     - 1
     - once (setup)
   * - ``features`` :math:`d`
     - 1 (public: the model's)
     - once (setup)
   * - ``ones_columns``
     - the indices of its all-one columns
     - once (setup; finds the intercept)
   * - ``classes_present``
     - :math:`K` booleans
     - once (setup; multi-class only)
   * - ``max_row_norm``
     - 1: :math:`\max_j\|x_{ij}\|`
     - once, when the self-concordance bound needs it (logistic, softmax)
   * - ``value`` :math:`h_i(\theta)`
     - 1 per point
     - per value query (line searches); grading a run asks all its rounds' models at once
   * - ``gradient``
     - :math:`P` (:math:`P=Kd`)
     - per gradient query
   * - ``hessian``
     - :math:`P(P+1)/2` (upper triangle)
     - per Hessian query, only while :math:`\lambda_i>0`
   * - ``hvp``
     - :math:`P`
     - per Hessian-vector product
   * - ``gram``, ``moment``, ``yy``
     - :math:`d(d+1)/2`, :math:`d`, 1
     - once (squared loss: then no more queries)

A solve records its own table (quantity, floats per answer, exchanges, answers per client) in
``solution.info["federated"]["reveals"]``, with the number of exchanges (rounds of messages).

**Faults never give a wrong claim.** A client that fails or does not answer a query is asked
again, up to ``retries`` times (the stated budget); after that the query raises
:class:`ClientFault` and :func:`federated_solve` ends ``"failed"`` -- or, when a certificate over
**every** client was completed before the fault, returns that certificate with the status its
gap gives and the fault in ``info["fault"]``. A bound is never computed over part of the
federation.

Only the server-side families whose routes need nothing else are supported
(:data:`SUPPORTED`); :func:`federated_solve` refuses the others with the reason.
"""

from __future__ import annotations

import copy
import json
import time
from collections import OrderedDict
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from ._validation import as_finite_array, check_int
from .data import Client, Federation, StackedData
from .errors import DrflmodelError, InvalidDataError, InvalidParameterError
from .layout import ParameterLayout
from .losses import Loss
from .objectives import ClientObjectives

__all__ = ["ClientOracle", "Site", "DeclaredFederation", "Channel", "LocalChannel", "ClientFault",
           "RevealLedger", "FederatedObjectives", "StatisticsObjectives", "federated_solve",
           "server_problem", "SUPPORTED", "QUERIES", "NEEDS_ROWS"]

#: the queries a :class:`Site` answers, and the arrays of each answer
QUERIES = {
    "describe": ("rows", "features", "outputs", "ones_columns", "classes_present"),
    "row_norm": ("max_row_norm",),
    "values": ("value",),
    "evaluate": ("value", "gradient", "hessian"),
    "hvp": ("hvp",),
    "statistics": ("gram", "moment", "yy"),
}

#: why a federated server cannot take the routes that read rows
NEEDS_ROWS = ("the conic route writes each client's rows into the CVXPY model and the 'newton' route "
              "reads them for its per-client cones; a federated server holds no row")

#: what the federated solve supports, and why the other families are refused
SUPPORTED = {
    "FederatedDRO": "every weight set; smooth losses by SQP, the squared loss from sufficient "
                    "statistics, non-smooth losses by a level bundle method",
    "FairnessAwareFL": "as FederatedDRO (its weight set is HCVaR)",
}
_REFUSED = {
    "WassersteinDRFL": (
        "its fast route keeps every sample whose worst-case branch may change inside the trust region "
        "(the 'tied' samples) as an explicit term of the step problem, and its rigorous lower bound "
        "solves a small problem over the near-active samples: both read individual rows (x_ij, y_ij), "
        "which a client would have to send to the server"),
    "RelativeFairness": "its certified routes (SDP relaxations, branch and bound) are written on the "
                        "clients' rows",
    "DEOConstrained": "a vertical federation: its parties hold feature blocks, not rows",
}


class ClientFault(DrflmodelError, RuntimeError):
    """A client failed (error or no answer) on every attempt of a query within the retry budget.

    Attributes ``client`` (index), ``query``, ``attempts`` and ``reasons`` (one per attempt)."""

    def __init__(self, client: int, query: str, reasons: list):
        self.client, self.query, self.reasons = int(client), str(query), list(reasons)
        self.attempts = len(self.reasons)
        super().__init__(f"client {self.client} did not answer the {self.query!r} query in "
                         f"{self.attempts} attempt(s): {self.reasons[-1]}")


@runtime_checkable
class ClientOracle(Protocol):
    """What a solve route may ask of the clients (module docstring). Shapes: :math:`\\theta`
    ``(P,)`` with :math:`P=Kd` in the layout of :mod:`drflmodel.layout`; ``n`` clients."""

    loss: Loss
    layout: ParameterLayout
    l2: float
    penalty_diagonal: np.ndarray

    @property
    def n(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def values(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta),\\dots,f_n(\\theta))`."""

    def gradients(self, theta) -> np.ndarray:
        """Rows :math:`\\nabla f_i(\\theta)`, shape ``(n, P)``."""

    def evaluate(self, theta, lam=None, hessian: bool = True):
        """``(values, gradients, sum_i lam_i Hess f_i(theta) or None)``."""

    def weighted_hessian(self, theta, lam) -> np.ndarray:
        """:math:`\\sum_i\\lambda_i\\nabla^2f_i(\\theta)`, shape ``(P, P)``."""

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        """Rows :math:`\\nabla^2f_i(\\theta)v_i`, shape ``(n, P)``."""

    def strong_convexity(self) -> np.ndarray:
        """Per-client strong-convexity moduli."""

    def max_row_norms(self) -> np.ndarray:
        """Per-client :math:`\\max_j\\|x_{ij}\\|` (the self-concordance bound's scale)."""

    def penalty(self, theta) -> np.ndarray:
        """The ridge term (the same for every client; not data)."""


# ==============================================================================================
# the client side
# ==============================================================================================
class _OneSite:
    """The few federation attributes :class:`~drflmodel.objectives.ClientObjectives` reads, for
    one client's rows (a site need not hold every class, which a ``Federation`` requires)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, task: str, n_classes):
        self.task, self.n_classes, self.dim = task, n_classes, X.shape[1]
        self.intercept_column = None
        self.clients = [Client(X, y)]
        self.stacked = StackedData(X=X[None], y=y[None], mask=np.ones((1, X.shape[0])),
                                   sizes=np.array([X.shape[0]]))


def _triu(H: np.ndarray) -> np.ndarray:
    return H[np.triu_indices(H.shape[0])]


def _untriu(v: np.ndarray, P: int) -> np.ndarray:
    H = np.zeros((P, P))
    H[np.triu_indices(P)] = v
    return H + np.triu(H, 1).T


class Site:
    r"""One client: its own rows and what it computes on them -- the client side of the interface.

    Parameters
    ----------
    X : ``(N_i, d)`` design matrix in the model's columns (the intercept column included when the
        model has one).
    y : ``(N_i,)`` labels in drflmodel's form: real targets (regression), :math:`\pm1`
        (binary classification) or class indices :math:`0..K-1` (multi-class).
    loss : the :class:`~drflmodel.losses.Loss`.
    n_outputs : :math:`K` (1 for scalar-score losses).
    name : a label for messages.

    A site answers only the queries of :data:`QUERIES` and only with **data terms**
    :math:`h_i` (its mean loss, its gradient, Hessian, Hessian-vector products, statistics); the
    ridge term belongs to the server. Every answer is a function of the site's own rows only.
    """

    def __init__(self, X, y, loss: Loss, n_outputs: int = 1, name: str | None = None):
        if not isinstance(loss, Loss):
            raise InvalidParameterError(f"loss must be a drflmodel.losses.Loss; got {type(loss).__name__}")
        self.name = "site" if name is None else str(name)
        X = as_finite_array(X, f"X of {self.name}", ndim=2)
        y = as_finite_array(y, f"y of {self.name}", ndim=1)
        if X.shape[0] != y.shape[0] or X.shape[0] < 1:
            raise InvalidDataError(f"{self.name}: X has {X.shape[0]} rows and y has {y.shape[0]}; "
                                   "they must be equal and at least 1")
        K = check_int(n_outputs, "n_outputs", low=1)
        if loss.task == "multiclass":
            if K < 2 or np.any(y != np.round(y)) or y.min() < 0 or y.max() > K - 1:
                raise InvalidDataError(f"{self.name}: multi-class labels must be class indices in "
                                       f"{{0, ..., {K - 1}}} (n_outputs = {K} classes)")
        elif K != 1:
            raise InvalidParameterError(f"n_outputs must be 1 for the scalar-score loss {loss!r}; got {K}")
        if loss.task == "classification" and not np.all(np.isin(y, (-1.0, 1.0))):
            raise InvalidDataError(f"{self.name}: binary labels must be -1 or +1")
        self.loss, self.n_outputs = loss, K
        self._X, self._y = X, y
        self._objective = ClientObjectives(_OneSite(X, y, loss.task, K if K > 1 else None), loss, l2=0.0)

    @classmethod
    def from_problem(cls, problem, i: int) -> "Site":
        """Client *i* of a drflmodel problem (its rows and loss only)."""
        client = problem.federation.clients[i]
        return cls(client.X, client.y, problem.loss, problem.objectives.n_outputs, name=client.name)

    @property
    def size(self) -> int:
        return self._X.shape[0]

    def answers(self) -> list[str]:
        """The queries this site can answer (its loss decides the smooth ones)."""
        out = ["describe", "row_norm", "values", "evaluate"]
        if np.isfinite(self.loss.smoothness):
            out += ["hessian", "hvp"]
        if self.loss.is_quadratic and self.n_outputs == 1:
            out.append("statistics")
        return out

    def _check_theta(self, arrays: dict, key: str = "theta", many: bool = False) -> np.ndarray:
        if key not in arrays:
            raise InvalidParameterError(f"{self.name}: the query carries no {key!r}")
        theta = np.asarray(arrays[key], float).reshape(-1)
        P = self._objective.dim
        if many and theta.size % P == 0 and theta.size > 0:
            return theta.reshape(-1, P)
        if theta.shape != (P,):
            raise InvalidDataError(f"{self.name}: {key} has {theta.size} entries; this site's model has "
                                   f"P = {P} ({self.n_outputs} output(s) x {self._X.shape[1]} features)")
        return theta

    def answer(self, query: str, arrays: dict | None = None, options: dict | None = None) -> dict:
        """The arrays answering ``query`` (:data:`QUERIES`) at the point in ``arrays["theta"]``."""
        arrays, options = arrays or {}, options or {}
        if query not in QUERIES:
            raise InvalidParameterError(f"{self.name}: unknown query {query!r}; known: {', '.join(QUERIES)}")
        if query == "describe":
            return self.describe(options.get("loss"))
        if query == "row_norm":
            return {"max_row_norm": [float(self._objective.max_row_norms()[0])]}
        if query == "statistics":
            self._require("statistics")
            X, y = self._X, self._y
            return {"gram": _triu(X.T @ X), "moment": X.T @ y, "yy": [float(y @ y)]}
        if query == "values":            # one point, or several stacked (one value per point)
            points = self._check_theta(arrays, many=True)
            return {"value": np.array([self._objective.values(t)[0] for t in np.atleast_2d(points)])}
        theta = self._check_theta(arrays)
        if query == "hvp":
            self._require("hvp")
            v = self._check_theta(arrays, "direction")
            return {"hvp": self._objective.hessian_vector_products(theta, v)[0]}
        hessian = bool(options.get("hessian", False))
        if hessian:
            self._require("hessian")
        values, grads, H = self._objective.evaluate(theta, np.ones(1), hessian=hessian)
        out = {"value": values, "gradient": grads[0]}
        if hessian:
            out["hessian"] = _triu(H)
        return out

    def _require(self, quantity: str) -> None:
        if quantity not in self.answers():
            why = (f"its loss {self.loss!r} is not smooth" if quantity in ("hessian", "hvp")
                   else f"its loss {self.loss!r} is not a quadratic of one score")
            raise InvalidParameterError(f"{self.name} cannot answer {quantity!r}: {why}")

    def describe(self, server_loss: str | None = None) -> dict:
        """The setup answer: ``rows``, ``features``, ``outputs`` (:math:`K`), ``ones_columns`` (the
        columns equal to 1 on every row), ``classes_present`` (multi-class), and the site's
        ``loss`` and ``answers`` (protocol text, no data). A server loss (``to_dict`` as JSON)
        different from the site's is refused here, before any round."""
        mine = self.loss.to_dict()
        if server_loss is not None and json.loads(server_loss) != json.loads(json.dumps(mine)):
            raise InvalidParameterError(f"{self.name} computes the loss {mine} but the server's problem "
                                        f"uses {json.loads(server_loss)}: build both from the same loss")
        out = {"rows": [self.size], "features": [self._X.shape[1]], "outputs": [self.n_outputs],
               "ones_columns": np.flatnonzero(np.all(self._X == 1.0, axis=0)).astype(float),
               "loss": json.dumps(mine), "answers": ",".join(self.answers())}
        if self.loss.task == "multiclass":
            present = np.zeros(self.n_outputs)
            present[np.unique(self._y).astype(int)] = 1.0
            out["classes_present"] = present
        return out


# ==============================================================================================
# the server side: declared federation, channel, ledger
# ==============================================================================================
class DeclaredFederation(Federation):
    """A federation the server knows only from the clients' declarations: sizes, the number of
    features, the task and classes, the intercept column -- and **no row**. Problems are built
    on it as on a :class:`~drflmodel.data.Federation` (the same validation); anything that would
    read rows raises :class:`~drflmodel.errors.InvalidDataError`."""

    def __init__(self, sizes, dim: int, task: str, n_classes=None, classes=None, intercept_column=None,
                 names=None):
        self.task = task
        sizes = np.asarray(sizes, int)
        if sizes.ndim != 1 or sizes.size < 1 or np.any(sizes < 1):
            raise InvalidDataError(f"declared sizes must be positive integers, one per client; got {sizes}")
        self._sizes, self._dim = sizes, check_int(dim, "dim", low=1)
        if task == "multiclass":
            K = check_int(n_classes, "n_classes", low=2)
            self.n_classes, self.classes = K, list(range(K)) if classes is None else list(classes)
        else:
            self.n_classes, self.classes = (2, [-1, 1]) if task == "classification" else (None, None)
        self._intercept = intercept_column
        self._names = [f"client{i}" for i in range(sizes.size)] if names is None else list(names)

    @property
    def clients(self):
        raise InvalidDataError("a declared federation holds no rows: the server of a federated solve "
                               "knows only the clients' declared sizes and dimensions")

    @property
    def n_clients(self) -> int:
        return int(self._sizes.size)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def sizes(self) -> np.ndarray:
        return self._sizes.copy()

    @property
    def intercept_column(self):
        return self._intercept

    @property
    def proportions(self) -> np.ndarray:
        return self._sizes / self._sizes.sum()

    @property
    def stacked(self) -> StackedData:
        n, d = self.n_clients, self._dim
        return StackedData(X=np.zeros((n, 0, d)), y=np.zeros((n, 0)), mask=np.zeros((n, 0)),
                           sizes=self._sizes.copy())

    def pooled(self):
        return self.clients

    def subset(self, indices):
        return self.clients

    def __repr__(self) -> str:
        return (f"DeclaredFederation(n_clients={self.n_clients}, dim={self.dim}, task={self.task!r}, "
                f"sizes={self._sizes.tolist()})")


#: reply arrays -> the quantity they reveal (the reveal table's names)
_QUANTITY = {
    "rows": "rows N_i", "features": "features d", "outputs": "outputs K", "ones_columns": "all-one columns",
    "classes_present": "classes present", "max_row_norm": "max_j ||x_ij||", "value": "value h_i(theta)",
    "gradient": "gradient of h_i", "hessian": "Hessian of h_i (upper triangle)",
    "hvp": "Hessian-vector product", "gram": "X_i'X_i (upper triangle)", "moment": "X_i'y_i", "yy": "y_i'y_i",
}


class RevealLedger:
    """What the clients revealed: per quantity, the floats of one answer, the exchanges (rounds of
    messages) that carried it and the answers per client; per query, the exchanges and attempts."""

    def __init__(self):
        self._rows: OrderedDict = OrderedDict()
        self.exchanges = 0
        self.queries: OrderedDict = OrderedDict()
        self.retries = 0

    def record(self, query: str, replies: dict, attempts: int = 1) -> None:
        self.exchanges += attempts
        self.retries += attempts - 1
        q = self.queries.setdefault(query, {"exchanges": 0, "answers": 0})
        q["exchanges"] += attempts
        q["answers"] += len(replies)
        seen = set()
        for i, arrays in replies.items():
            for key, value in arrays.items():
                if key not in _QUANTITY:
                    continue
                row = self._rows.setdefault(key, {"quantity": _QUANTITY[key], "floats": 0, "exchanges": 0,
                                                  "answers": {}})
                row["floats"] = max(row["floats"], int(np.size(value)))
                row["answers"][i] = row["answers"].get(i, 0) + 1
                if key not in seen:
                    row["exchanges"] += 1
                    seen.add(key)

    def table(self) -> list[dict]:
        """One row per quantity: ``quantity``, ``floats`` (one answer), ``exchanges``,
        ``max_answers_per_client``, ``floats_per_client`` (the most any one client sent)."""
        out = []
        for row in self._rows.values():
            most = max(row["answers"].values())
            out.append({"quantity": row["quantity"], "floats": row["floats"], "exchanges": row["exchanges"],
                        "max_answers_per_client": most, "floats_per_client": most * row["floats"]})
        return out

    def to_dict(self) -> dict:
        """A snapshot (later queries do not change it)."""
        return {"exchanges": self.exchanges, "retries": self.retries,
                "queries": {q: dict(v) for q, v in self.queries.items()}, "reveals": self.table()}


class Channel:
    """How the server asks the clients (a transport), with the retry budget.

    Subclasses implement :meth:`_send` ``({client: (arrays, options)}, query) -> (replies,
    errors)``; :meth:`ask` sends, retries the clients that failed up to ``retries`` times, and
    raises :class:`ClientFault` when one still fails. Every exchange is counted in
    :attr:`ledger` (:class:`RevealLedger`)."""

    def __init__(self, n_clients: int, retries: int = 2):
        self.n_clients = check_int(n_clients, "n_clients", low=1)
        self.retries = check_int(retries, "retries", low=0)
        self.ledger = RevealLedger()

    def _send(self, query: str, contents: dict) -> tuple[dict, dict]:
        raise NotImplementedError

    def ask(self, query: str, arrays: dict | None = None, clients=None, per_client: dict | None = None,
            options: dict | None = None, per_client_options: dict | None = None) -> dict[int, dict]:
        """Ask ``clients`` (default: all) ``query`` with ``arrays`` (+ ``per_client[i]``) and
        ``options``; returns ``{client: answer arrays}`` from **every** client asked, or raises
        :class:`ClientFault` after the retry budget."""
        clients = list(range(self.n_clients)) if clients is None else sorted(int(i) for i in clients)
        contents = {i: ({**(arrays or {}), **(per_client or {}).get(i, {})},
                        {**(options or {}), **(per_client_options or {}).get(i, {})}) for i in clients}
        got, reasons, attempts = {}, {i: [] for i in clients}, 0
        pending = dict(contents)
        while pending:
            attempts += 1
            replies, errors = self._send(query, pending)
            got.update(replies)
            for i, why in errors.items():
                reasons[i].append(why)
            pending = {i: pending[i] for i in errors}
            if pending and attempts > self.retries:
                self.ledger.record(query, got, attempts)
                i = min(pending)
                raise ClientFault(i, query, reasons[i])
        self.ledger.record(query, got, attempts)
        return got


class LocalChannel(Channel):
    """The in-process transport: the server calls each :class:`Site` directly (an exception is a
    failed answer, retried like a lost message)."""

    def __init__(self, sites, retries: int = 2):
        self.sites = list(sites)
        super().__init__(len(self.sites), retries)

    @classmethod
    def from_problem(cls, problem, retries: int = 2) -> "LocalChannel":
        return cls([Site.from_problem(problem, i) for i in range(problem.n_clients)], retries)

    def _send(self, query: str, contents: dict):
        replies, errors = {}, {}
        for i, (arrays, options) in contents.items():
            try:
                replies[i] = {k: np.asarray(v, float) if not isinstance(v, str) else v
                              for k, v in self.sites[i].answer(query, arrays, options).items()}
            except Exception as exc:  # noqa: BLE001 - a failed answer, reported with its reason
                errors[i] = f"{type(exc).__name__}: {exc}"
        return replies, errors


# ==============================================================================================
# the server side: the interface over a channel
# ==============================================================================================
class _ServerObjectives:
    """What the federated implementations share: the model's metadata from a row-less
    :class:`~drflmodel.objectives.ClientObjectives` (built on a :class:`DeclaredFederation`) and
    the ridge term, which the server adds itself."""

    #: the conic fallback of ``fixed_weight_minimum`` reads rows: not on a federated server
    holds_rows = False

    def __init__(self, template: ClientObjectives):
        self.template = template
        self.federation = template.federation
        self.loss, self.layout, self.l2 = template.loss, template.layout, template.l2
        self.penalty_weights, self.penalty_diagonal = template.penalty_weights, template.penalty_diagonal
        self.penalize_intercept, self.n_outputs = template.penalize_intercept, template.n_outputs
        self.sizes = np.asarray(self.federation.sizes, float)

    @property
    def n(self) -> int:
        return self.federation.n_clients

    @property
    def n_features(self) -> int:
        return self.template.n_features

    @property
    def dim(self) -> int:
        return self.template.dim

    def penalty(self, theta) -> np.ndarray:
        return self.template.penalty(theta)

    def _shared(self, theta) -> np.ndarray:
        theta = np.asarray(theta, float)
        if theta.shape != (self.dim,):
            raise InvalidDataError(f"a federated oracle evaluates one shared theta of shape ({self.dim},); "
                                   f"got {theta.shape}")
        if not np.all(np.isfinite(theta)):
            raise InvalidDataError("theta contains NaN or infinite values")
        return theta

    def gradients(self, theta) -> np.ndarray:
        return self.evaluate(theta, hessian=False)[1]

    def prefetch_values(self, thetas) -> None:
        """Make :meth:`values` at many points cheap (default: nothing to ask -- the server
        computes them itself, e.g. from sufficient statistics)."""

    def weighted_hessian(self, theta, lam) -> np.ndarray:
        return self.evaluate(theta, lam)[2]

    def _rows_needed(self, what: str):
        raise InvalidDataError(f"{what} needs the clients' rows, which a federated server does not hold "
                               f"({NEEDS_ROWS})")

    def expressions(self, theta):
        self._rows_needed("the conic model (CVXPY expressions of f_i)")

    def minibatch_gradients(self, *args, **kwargs):
        self._rows_needed("a minibatch gradient")

    def hessians(self, theta):
        self._rows_needed("the per-client Hessian array of the 'newton' route")

    def restricted(self, i):
        self._rows_needed("a client view")


class FederatedObjectives(_ServerObjectives):
    """The :class:`ClientOracle` whose every data query goes to the clients over ``channel``
    (module docstring). Answers at recent points are cached (a gradient asked after a value at
    the same :math:`\\theta` costs one exchange, a Hessian for new weights at a point whose
    client Hessians are known costs none)."""

    def __init__(self, template: ClientObjectives, channel: Channel, cache: int = 8):
        super().__init__(template)
        if channel.n_clients != self.n:
            raise InvalidParameterError(f"the channel reaches {channel.n_clients} clients but the problem "
                                        f"has {self.n}")
        self.channel = channel
        self._cache: OrderedDict = OrderedDict()
        self._size = int(cache)
        self._row_norms = None
        self._known: dict = {}                 # data values prefetched at many points

    def prefetch_values(self, thetas) -> None:
        """The clients' values at every row of ``thetas`` in **one** exchange (each client returns
        one float per point); :meth:`values` then answers at those points without a query."""
        T = np.asarray(thetas, float).reshape(-1, self.dim)
        got = self.channel.ask("values", {"theta": T.reshape(-1)})
        for r, theta in enumerate(T):
            self._known[theta.tobytes()] = np.array([float(got[i]["value"][r]) for i in range(self.n)])

    def _entry(self, theta: np.ndarray) -> dict:
        key = theta.tobytes()
        if key not in self._cache:
            self._cache[key] = {"values": None, "grads": None, "hess": {}}
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return self._cache[key]

    def values(self, theta) -> np.ndarray:
        theta = self._shared(theta)
        if theta.tobytes() in self._known:
            return self._known[theta.tobytes()] + self.penalty(theta)
        e = self._entry(theta)
        if e["values"] is None:
            got = self.channel.ask("values", {"theta": theta})
            e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
        return e["values"] + self.penalty(theta)

    def evaluate(self, theta, lam=None, hessian: bool = True):
        theta = self._shared(theta)
        lam = np.ones(self.n) if lam is None else np.asarray(lam, float)
        e = self._entry(theta)
        want = {i for i in range(self.n) if lam[i] > 0} if hessian else set()
        missing_h = sorted(want - set(e["hess"]))
        if e["grads"] is None or missing_h:
            ask = range(self.n) if e["grads"] is None else missing_h
            got = self.channel.ask("evaluate", {"theta": theta}, clients=ask,
                                   per_client_options={i: {"hessian": i in missing_h} for i in ask})
            if e["grads"] is None:
                e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
                e["grads"] = np.stack([got[i]["gradient"] for i in range(self.n)])
            for i in missing_h:
                e["hess"][i] = _untriu(got[i]["hessian"], self.dim)
        values = e["values"] + self.penalty(theta)
        grads = e["grads"] + self.penalty_diagonal * theta[None, :]
        if not hessian:
            return values, grads, None
        H = np.zeros((self.dim, self.dim))
        for i in sorted(want):
            H += lam[i] * e["hess"][i]
        H[np.diag_indices(self.dim)] += float(np.sum(lam)) * self.penalty_diagonal
        return values, grads, H

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        theta = self._shared(theta)
        V = np.broadcast_to(np.asarray(V, float), (self.n, self.dim))
        got = self.channel.ask("hvp", {"theta": theta}, per_client={i: {"direction": V[i]} for i in range(self.n)})
        return np.stack([got[i]["hvp"] for i in range(self.n)]) + self.penalty_diagonal * V

    def strong_convexity(self) -> np.ndarray:
        """:math:`\\ell_2\\min_j\\omega_j` per client (the ridge's modulus; no query). Quadratic
        losses use :class:`StatisticsObjectives`, whose modulus reads the statistics."""
        if self.loss.is_quadratic:
            raise InvalidParameterError("a quadratic loss is solved from sufficient statistics "
                                        "(StatisticsObjectives)")
        return np.full(self.n, float(self.penalty_diagonal.min()))

    def max_row_norms(self) -> np.ndarray:
        """Asked of the clients once (one float each), when the self-concordance bound needs it."""
        if self._row_norms is None:
            got = self.channel.ask("row_norm")
            self._row_norms = np.array([float(got[i]["max_row_norm"][0]) for i in range(self.n)])
        return self._row_norms

    def smoothness(self):
        self._rows_needed("the per-client smoothness constant")


class StatisticsObjectives(_ServerObjectives):
    r"""The :class:`ClientOracle` of a quadratic loss (``Squared``) from each client's sufficient
    statistics :math:`G_i=X_i^\top X_i`, :math:`b_i=X_i^\top y_i`, :math:`c_i=y_i^\top y_i`,
    :math:`N_i`, asked **once**; afterwards everything is computed on the server:
    :math:`h_i(\theta)=(\theta^\top G_i\theta-2b_i^\top\theta+c_i)/N_i`, its gradient
    :math:`2(G_i\theta-b_i)/N_i` and Hessian :math:`2G_i/N_i` (the loss :math:`z^2`). Values are
    exact up to the cancellation of :math:`c_i` against :math:`\theta^\top G_i\theta` (relative
    error :math:`\approx10^{-16}\,c_i/h_i`)."""

    def __init__(self, template: ClientObjectives, channel: Channel):
        super().__init__(template)
        if not (template.loss.is_quadratic and template.n_outputs == 1):
            raise InvalidParameterError(f"sufficient statistics describe a quadratic loss of one score; "
                                        f"got {template.loss!r}")
        got = channel.ask("statistics")
        d = self.n_features
        self.gram = np.stack([_untriu(got[i]["gram"], d) for i in range(self.n)])
        self.moment = np.stack([got[i]["moment"] for i in range(self.n)])
        self.yy = np.array([float(got[i]["yy"][0]) for i in range(self.n)])
        self.channel = channel

    def _data_values(self, theta):
        Gt = self.gram @ theta
        return (Gt @ theta - 2.0 * self.moment @ theta + self.yy) / self.sizes, Gt

    def values(self, theta) -> np.ndarray:
        theta = self._shared(theta)
        return self._data_values(theta)[0] + self.penalty(theta)

    def evaluate(self, theta, lam=None, hessian: bool = True):
        theta = self._shared(theta)
        lam = np.ones(self.n) if lam is None else np.asarray(lam, float)
        h, Gt = self._data_values(theta)
        grads = 2.0 * (Gt - self.moment) / self.sizes[:, None] + self.penalty_diagonal * theta[None, :]
        values = h + self.penalty(theta)
        if not hessian:
            return values, grads, None
        H = 2.0 * np.tensordot(lam / self.sizes, self.gram, axes=(0, 0))
        H[np.diag_indices(self.dim)] += float(np.sum(lam)) * self.penalty_diagonal
        return values, grads, H

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        V = np.broadcast_to(np.asarray(V, float), (self.n, self.dim))
        return 2.0 * np.einsum("ide,ie->id", self.gram, V) / self.sizes[:, None] + self.penalty_diagonal * V

    def strong_convexity(self) -> np.ndarray:
        """:math:`\\lambda_{\\min}(2G_i/N_i+\\ell_2\\mathrm{diag}\\,\\omega)` (as the in-process oracle)."""
        M = self.loss.smoothness * self.gram / self.sizes[:, None, None] + np.diag(self.l2 * self.penalty_weights)[None]
        return np.maximum(np.linalg.eigvalsh(M)[:, 0], 0.0)

    def smoothness(self) -> np.ndarray:
        ev = np.linalg.eigvalsh(self.gram / self.sizes[:, None, None])[:, -1]
        return self.loss.smoothness * ev + float(self.penalty_diagonal.max())

    def max_row_norms(self) -> np.ndarray:
        """Not in the statistics, and not needed: the squared loss has self-concordance constant
        :math:`M=0`, so the bound of :mod:`drflmodel.problems.minmax.fixed_weight_bound` uses :math:`M\\max\\|x\\|=0`
        whatever the norms; zeros keep that product exact."""
        if self.loss.self_concordance != 0:
            raise InvalidParameterError("row norms are not part of the sufficient statistics")
        return np.zeros(self.n)

    def quadratic_forms(self):
        m = self.sizes
        Q = self.gram / m[:, None, None] + 0.5 * np.diag(self.penalty_diagonal)[None]
        return Q, self.moment / m[:, None], self.yy / m


# ==============================================================================================
# the federated solve
# ==============================================================================================
def _declare(channel: Channel, loss: Loss | None) -> tuple[DeclaredFederation, list[dict]]:
    """The setup exchange: every client's declaration; mismatches are refused before any round."""
    options = {} if loss is None else {"loss": json.dumps(loss.to_dict())}
    try:
        got = channel.ask("describe", options=options)
    except ClientFault as fault:
        raise InvalidParameterError(f"client {fault.client} failed during the setup of the federated "
                                    f"solve: {fault.reasons[-1]}") from None
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
    declared = DeclaredFederation([int(r["rows"][0]) for r in replies], dims[0], task,
                                  n_classes=K if task == "multiclass" else None,
                                  intercept_column=min(ones) if ones else None)
    return declared, replies


def _rebuild(problem, declared: DeclaredFederation):
    """The same problem on the declared federation (no rows): FederatedDRO / FairnessAwareFL."""
    from .problems.minmax.dro import FederatedDRO
    from .problems.minmax.fafl import FairnessAwareFL

    if type(problem) is FederatedDRO:
        return FederatedDRO(declared, problem.loss, weights=problem.weights, l2=problem.l2,
                            penalize_intercept=problem.penalize_intercept)
    if type(problem) is FairnessAwareFL:
        return FairnessAwareFL(declared, problem.loss, alpha=problem.alpha, l2=problem.l2,
                               penalize_intercept=problem.penalize_intercept)
    raise _refusal(problem)


def _refusal(problem) -> InvalidParameterError:
    name = type(problem).__name__
    reason = _REFUSED.get(name, "its routes are not written on the client-oracle interface")
    return InvalidParameterError(
        f"{name} has no federated certified solve: {reason}. Supported: {', '.join(SUPPORTED)}")


def server_problem(problem, declared: DeclaredFederation):
    """The server's problem on the declared federation: ``problem`` is a drflmodel problem (its
    family and parameters are rebuilt on ``declared``; its rows are not used) or a factory
    ``federation -> problem`` (the same recipe that builds the centralized problem from a real
    federation)."""
    from .problems.engine.problem import Problem

    if isinstance(problem, Problem):
        return _rebuild(problem, declared)
    if not callable(problem):
        raise InvalidParameterError(f"problem must be a drflmodel problem or a factory federation -> problem; "
                                    f"got {type(problem).__name__}")
    built = problem(declared)
    if not isinstance(built, Problem):
        raise InvalidParameterError(f"the problem factory returned {type(built).__name__}, not a drflmodel problem")
    if type(built).__name__ not in SUPPORTED:
        raise _refusal(built)
    return built


#: the methods a federated server can run (``"auto"`` picks one from the loss)
METHODS = ("auto", "sqp", "bundle")


def _method(problem, method: str) -> str:
    if method not in METHODS:
        raise InvalidParameterError(f"unknown method {method!r} for a federated solve; valid: "
                                    f"{', '.join(map(repr, METHODS))} ({NEEDS_ROWS})")
    if method != "auto":
        return method
    return "sqp" if np.isfinite(problem.loss.smoothness) else "bundle"


def _needs(problem, method: str) -> list[str]:
    if problem.loss.is_quadratic and problem.objectives.n_outputs == 1 and method == "sqp":
        return ["statistics"]
    return ["values", "evaluate"] + (["hessian"] if method == "sqp" else [])


def federated_solve(problem, channel: Channel, method: str = "auto", gap_tol: float = 1e-6,
                    **options):
    """Certify ``problem`` (a problem or a factory, :func:`server_problem`) from the clients'
    answers over ``channel``: setup (declarations checked before any round), then the route
    ``method`` on a server problem whose ``objectives`` is :class:`FederatedObjectives` (or
    :class:`StatisticsObjectives` for the squared loss).

    ``method``: ``"sqp"`` (smooth losses: :mod:`drflmodel.problems.minmax.lagrangian_sqp`),
    ``"bundle"`` (any convex loss: :mod:`drflmodel.problems.minmax.level_bundle`) or ``"auto"`` (by the
    loss). ``options`` go to the route (``max_steps``, ``tol``, ...). Returns a
    :class:`~drflmodel.solution.Solution` whose ``info["federated"]`` holds the exchanges, the
    reveal table and any fault."""
    from .solution import Solution, status_from_gap

    started = time.perf_counter()
    declared, replies = _declare(channel, getattr(problem, "loss", None))
    problem = server_problem(problem, declared)
    method = _method(problem, method)
    needs = _needs(problem, method)
    for i, reply in enumerate(replies):
        answers = str(reply["answers"]).split(",")
        for need in needs:
            if need not in answers:
                raise InvalidParameterError(
                    f"client {i} cannot answer {need!r} (its loss {problem.loss!r}): method {method!r} needs it"
                    + ("; a non-smooth loss takes method='bundle'" if need == "hessian" else ""))
    template = problem.objectives
    best: dict = {}
    try:
        if needs == ["statistics"]:
            problem.objectives = StatisticsObjectives(template, channel)
        else:
            problem.objectives = FederatedObjectives(template, channel)
        certify = problem.certify_at

        def certify_and_keep(*args, **kwargs):            # the best certificate over every client
            sol = certify(*args, **kwargs)
            if not best or sol.relative_gap < best["sol"].relative_gap:
                best["sol"] = copy.copy(sol)
            return sol

        problem.certify_at = certify_and_keep
        sol = problem.solve(method=method, gap_tol=gap_tol, **options)
        fault = None
    except ClientFault as exc:
        fault = {"client": exc.client, "query": exc.query, "attempts": exc.attempts, "reasons": exc.reasons}
        if best:
            sol = best["sol"]
            sol.status = status_from_gap(sol.lower_bound, sol.upper_bound, gap_tol)
            sol.info["method"] = method
        else:
            sol = Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                           lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                           certificate="none", info={"method": method})
        sol.problem = problem
        sol.info["fault"] = (f"client {exc.client} failed the {exc.query!r} query on all {exc.attempts} "
                             f"attempts (retry budget {channel.retries}); "
                             + ("the best certificate computed over every client before the fault is returned"
                                if best else "no certificate over every client was completed"))
    sol.info["federated"] = {"transport": type(channel).__name__, "clients": channel.n_clients,
                             "sizes": declared.sizes.tolist(), "method": method, "queries_needed": needs,
                             **channel.ledger.to_dict(), "fault": fault,
                             "time": time.perf_counter() - started}
    return sol
