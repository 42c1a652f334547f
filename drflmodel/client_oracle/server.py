"""The server side of the client oracle: :class:`DeclaredFederation` (what the server knows of the
clients: their declarations, no row) and the objectives a route reads on a federated server --
:class:`FederatedObjectives`, whose every data query goes to the clients over a channel, and
:class:`StatisticsObjectives` for quadratic losses (the clients' sufficient statistics, asked once).
A :class:`DeclaredFederation` built with a channel supplies them to any problem built on it
(``federation.client_objectives``), so the server's problem is the family's own, built as usual."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .._memory import HESSIAN_POINTS
from .._validation import check_int
from ..data import Federation, StackedData
from ..errors import InvalidDataError, InvalidParameterError
from ..objectives import ClientObjectives
from ..problems.engine.queries import (EVERY_KIND, GRADIENTS, HESSIAN_VECTOR_PRODUCTS, HESSIANS, ROWS, STATISTICS,
                                       VALUES)
from .protocol import NEEDS_ROWS, ClientFault, unpack_symmetric

__all__ = ["DeclaredFederation", "FederatedObjectives", "StatisticsObjectives"]



class DeclaredFederation(Federation):
    """A federation the server knows only from the clients' declarations: sizes, the number of
    features, the task and classes, the intercept column -- and **no row**. Problems are built
    on it as on a :class:`~drflmodel.data.Federation` (the same validation); anything that would
    read rows raises :class:`~drflmodel.errors.InvalidDataError`.

    With a ``channel`` (and the query ``kinds`` every client answers), it supplies the client
    objectives of the problems built on it (:meth:`client_objectives`): the objectives that ask the
    clients, so that ``FederatedDRO(declared, ...)`` *is* the server's problem."""

    def __init__(self, sizes, dim: int, task: str, n_classes=None, classes=None, intercept_column=None,
                 names=None, channel=None, kinds=None):
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
        self.channel = channel
        self.kinds = frozenset(EVERY_KIND - {ROWS} if kinds is None else kinds)

    def client_objectives(self, loss, l2: float, penalize_intercept=True):
        """The client objectives of a problem built on this federation: without a channel, the
        row-less :class:`~drflmodel.objectives.ClientObjectives` (the model's metadata); with one,
        :class:`StatisticsObjectives` for a quadratic loss of one score whose clients all answer
        their statistics, else :class:`FederatedObjectives` (every data query to the clients)."""
        template = ClientObjectives(self, loss, l2, penalize_intercept)
        if self.channel is None:
            return template
        if loss.is_quadratic and template.n_outputs == 1 and STATISTICS in self.kinds:
            return StatisticsObjectives(template, self.channel)
        return FederatedObjectives(template, self.channel, kinds=self.kinds)

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


class _ServerObjectives:
    """What the federated implementations share: the model's metadata from a row-less
    :class:`~drflmodel.objectives.ClientObjectives` (built on a :class:`DeclaredFederation`) and
    the ridge term, which the server adds itself."""

    #: the conic fallback of ``fixed_weight_minimum`` reads rows: not on a federated server
    holds_rows = False
    #: the query kinds these objectives answer (:mod:`drflmodel.problems.engine.queries`)
    query_kinds = frozenset({VALUES, GRADIENTS})

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

    def max_row_norms(self) -> np.ndarray:
        """:math:`\\max_j\\|x_{ij}\\|_2` per client, asked of the clients once (the ``row_norm``
        query, one float each) when first needed: the sufficient statistics do not determine it
        (:math:`X_i^\\top X_i` bounds it only by :math:`\\sqrt{\\lambda_{\\max}}`)."""
        if getattr(self, "_row_norms", None) is None:
            got = self.channel.ask("row_norm")
            self._row_norms = np.array([float(got[i]["max_row_norm"][0]) for i in range(self.n)])
        return self._row_norms

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
        self._rows_needed("the per-client Hessian array of the 'hessian_sqp' route")

    def restricted(self, i):
        self._rows_needed("a client view")


class FederatedObjectives(_ServerObjectives):
    """The :class:`ClientOracle` whose every data query goes to the clients over ``channel``
    (module docstring). Answers at recent points are cached (a gradient asked after a value at
    the same :math:`\\theta` costs one exchange, a Hessian for new weights at a point whose
    client Hessians are known costs none)."""

    def __init__(self, template: ClientObjectives, channel, cache: int = 8, kinds=None):
        super().__init__(template)
        if kinds is not None:       # what every client declared it answers (values and gradients at least)
            self.query_kinds = frozenset(kinds) & (EVERY_KIND - {ROWS})
        if channel.n_clients != self.n:
            raise InvalidParameterError(f"the channel reaches {channel.n_clients} clients but the problem "
                                        f"has {self.n}")
        self.channel = channel
        self._cache: OrderedDict = OrderedDict()
        self._size = int(cache)
        self._known: dict = {}                 # data values prefetched at many points
        self.plan = None                       # a route's QueryPlan (announce), counted per exchange
        self._unannounced: set = set()         # clients the plan has not reached yet

    def announce(self, plan) -> None:
        """State a route's :class:`~drflmodel.problems.engine.plan.QueryPlan` to every client with the next
        query each is asked (the client's policy admits or refuses it then, by name, before answering
        anything of the route); from now on every value, evaluation and Hessian exchange is counted
        against it (:meth:`QueryPlan.spend`) before it is sent. ``None``: no plan (the route is done)."""
        self.plan = plan
        self._unannounced = set(range(self.n)) if plan is not None else set()

    def _planned(self, kinds, clients) -> dict:
        """Count one exchange of every budget in ``kinds`` against the plan (raising
        :class:`~drflmodel.problems.engine.plan.PlanExhausted` before anything is sent) and return the
        per-client options carrying the plan to ``clients`` it has not reached yet."""
        if self.plan is None:
            return {}
        self.plan.spend(*kinds)
        first = self._unannounced.intersection(clients)
        self._unannounced -= first
        return {i: {"plan": self.plan.wire()} for i in first}

    def prefetch_values(self, thetas) -> None:
        """The clients' values at every row of ``thetas`` in **one** exchange (each client returns
        one float per point); :meth:`values` then answers at those points without a query. A client
        whose policy refuses that many points at once (the default allows one) refuses it by name;
        then nothing is prefetched and :meth:`values` asks one point at a time, within the clients'
        budgets (the refusal is in ``prefetch_refused``)."""
        from .protocol import ClientFault

        T = np.asarray(thetas, float).reshape(-1, self.dim)
        try:
            got = self.channel.ask("values", {"theta": T.reshape(-1)},
                                   per_client_options=self._planned(("values",), range(self.n)))
        except ClientFault as fault:
            if fault.kind != "refused" or T.shape[0] == 1:
                raise
            self.prefetch_refused = str(fault)
            return
        for r, theta in enumerate(T):
            self._known[theta.tobytes()] = np.array([float(got[i]["value"][r]) for i in range(self.n)])

    def _entry(self, theta: np.ndarray) -> dict:
        key = theta.tobytes()
        if key not in self._cache:
            self._cache[key] = {"values": None, "grads": None, "hess": {}}
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        held = 0                                  # client Hessians at the HESSIAN_POINTS latest points only:
        for entry in reversed(self._cache.values()):   # n P x P matrices per point (a dropped one is re-asked)
            if entry["hess"]:
                held += 1
                if held > HESSIAN_POINTS:
                    entry["hess"] = {}
        return self._cache[key]

    def values(self, theta) -> np.ndarray:
        theta = self._shared(theta)
        if theta.tobytes() in self._known:
            return self._known[theta.tobytes()] + self.penalty(theta)
        e = self._entry(theta)
        if e["values"] is None:
            self._declare_magnitudes()
            got = self.channel.ask("values", {"theta": theta},
                                   per_client_options=self._planned(("values",), range(self.n)))
            e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
        return e["values"] + self.penalty(theta)

    def evaluate(self, theta, lam=None, hessian: bool = True):
        theta = self._shared(theta)
        lam = np.ones(self.n) if lam is None else np.asarray(lam, float)
        e = self._entry(theta)
        want = {i for i in range(self.n) if lam[i] > 0} if hessian else set()
        missing_h = sorted(want - set(e["hess"]))
        if e["grads"] is None or missing_h:
            self._declare_magnitudes()
            ask = range(self.n) if e["grads"] is None else missing_h
            planned = self._planned(("evaluations", "hessians") if missing_h else ("evaluations",), ask)
            got = self.channel.ask("evaluate", {"theta": theta}, clients=ask,
                                   per_client_options={i: {"hessian": i in missing_h, **planned.get(i, {})}
                                                       for i in ask})
            if e["grads"] is None:
                e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
                e["grads"] = np.stack([got[i]["gradient"] for i in range(self.n)])
            for i in missing_h:
                e["hess"][i] = unpack_symmetric(got[i]["hessian"], self.dim)
        values = e["values"] + self.penalty(theta)
        grads = e["grads"] + self.penalty_diagonal * theta[None, :]
        if not hessian:
            return values, grads, None
        H = np.zeros((self.dim, self.dim))
        for i in sorted(want):
            H += lam[i] * e["hess"][i]
        H[np.diag_indices(self.dim)] += float(np.sum(lam)) * self.penalty_diagonal
        return values, grads, H

    def evaluate_with_terms(self, theta, V, bound_options: dict) -> tuple:
        """``(values, gradients, products, terms)``: :meth:`evaluate_with_products` with every client's
        ``bound_terms`` answer at the same point carried by the same exchange (``terms``, one dict per
        client; ``bound_options`` the options of that query, e.g. ``{"intercept_column": j0}``), or without
        products for an empty ``V``. :math:`(q+1)P+1` floats plus the bound terms' :math:`6+K+K(K+1)/2`
        per answer."""
        theta = self._shared(theta)
        V = np.asarray(V, float).reshape(-1, self.dim)
        self._declare_magnitudes()
        arrays = {"theta": theta} if V.shape[0] == 0 else {"theta": theta, "directions": V.reshape(-1)}
        got = self.channel.ask("evaluate", arrays, options={**bound_options, "bound_terms": 1})
        e = self._entry(theta)
        e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
        e["grads"] = np.stack([got[i]["gradient"] for i in range(self.n)])
        products = (np.stack([np.asarray(got[i]["hvp"], float).reshape(V.shape) for i in range(self.n)])
                    if V.shape[0] else np.zeros((self.n, 0, self.dim)))
        keys = ("allowance", "feature_norm", "intercept_value", "intercept_gradient", "intercept_hessian",
                "column_squares")
        terms = [{k: got[i][k] for k in keys if k in got[i]} for i in range(self.n)]
        return (e["values"] + self.penalty(theta), e["grads"] + self.penalty_diagonal * theta[None, :],
                products + (self.penalty_diagonal * V)[None], terms)

    def evaluate_with_products(self, theta, V) -> tuple:
        """``(values, gradients, products)``: every client's value and gradient at ``theta`` and its
        Hessian-vector products along the rows of ``V`` (``(q, P)``, the same directions for every
        client; ``products`` ``(n, q, P)``, ridge included), in **one** exchange (the ``evaluate``
        query with ``directions``; :math:`(q+1)P+1` floats per answer). Without directions, the
        plain ``evaluate``."""
        theta = self._shared(theta)
        V = np.asarray(V, float).reshape(-1, self.dim)
        if V.shape[0] == 0:
            values, grads, _ = self.evaluate(theta, hessian=False)
            return values, grads, np.zeros((self.n, 0, self.dim))
        self._declare_magnitudes()
        got = self.channel.ask("evaluate", {"theta": theta, "directions": V.reshape(-1)})
        e = self._entry(theta)
        e["values"] = np.array([float(got[i]["value"][0]) for i in range(self.n)])
        e["grads"] = np.stack([got[i]["gradient"] for i in range(self.n)])
        products = np.stack([np.asarray(got[i]["hvp"], float).reshape(V.shape) for i in range(self.n)])
        return (e["values"] + self.penalty(theta), e["grads"] + self.penalty_diagonal * theta[None, :],
                products + (self.penalty_diagonal * V)[None])

    def hessian_vector_products(self, theta, V) -> np.ndarray:
        theta = self._shared(theta)
        V = np.broadcast_to(np.asarray(V, float), (self.n, self.dim))
        got = self.channel.ask("hvp", {"theta": theta}, per_client={i: {"direction": V[i]} for i in range(self.n)},
                               per_client_options=self._planned(("hvps",), range(self.n)))
        return np.stack([got[i]["hvp"] for i in range(self.n)]) + self.penalty_diagonal * V

    def matrix_free(self):
        """The matrix-free objectives of the ``hessian_free`` route on this server: answers of
        :math:`O(P)` floats, never a Hessian (:mod:`.remote_points`)."""
        from .remote_points import RemoteMatrixFree

        return RemoteMatrixFree(self)

    def strong_convexity(self) -> np.ndarray:
        """:math:`\\ell_2\\min_j\\omega_j` per client (the ridge's modulus; no query): a modulus of
        every loss, since each client's data term is convex. For a quadratic loss it can be below
        the in-process one, :math:`\\lambda_{\\min}(\\beta_\\ell X_i^\\top X_i/N_i+\\ell_2\\mathrm{diag}\\,\\omega)`,
        which needs the data: :class:`StatisticsObjectives` reads it from the statistics (what a
        federated server builds when every client answers them)."""
        return np.full(self.n, float(self.penalty_diagonal.min()))

    def _declare_magnitudes(self) -> None:
        """Before the first checked value or gradient: the clients' row norms (one float each, asked
        once; the self-concordance bounds ask them anyway), from which the answer checks derive their
        rounding allowances (:class:`~drflmodel.client_oracle.checks.Magnitudes`: a value errs by
        :math:`\\gamma_m(|h|+GR\\|\\theta\\|)`; without :math:`R` the checks fall back to a fixed multiple of
        the visible scale, which rejected honest tiny and saturated clients). A client whose policy
        refuses the row norm is asked nothing more about it; its checks use the fallback."""
        if getattr(self, "_row_norms", None) is not None or getattr(self, "_magnitudes_asked", False) or not hasattr(self.channel, "books"):
            return
        self._magnitudes_asked = True
        try:
            self.max_row_norms()
        except ClientFault as fault:
            if fault.kind != "refused":
                raise

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

    #: everything but the rows is computed on the server from the statistics
    query_kinds = frozenset({VALUES, GRADIENTS, HESSIANS, HESSIAN_VECTOR_PRODUCTS, STATISTICS})

    def __init__(self, template: ClientObjectives, channel):
        super().__init__(template)
        if not (template.loss.is_quadratic and template.n_outputs == 1):
            raise InvalidParameterError(f"sufficient statistics describe a quadratic loss of one score; "
                                        f"got {template.loss!r}")
        got = channel.ask("statistics")
        d = self.n_features
        self.gram = np.stack([unpack_symmetric(got[i]["gram"], d) for i in range(self.n)])
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

    def quadratic_forms(self):
        m = self.sizes
        Q = self.gram / m[:, None, None] + 0.5 * np.diag(self.penalty_diagonal)[None]
        return Q, self.moment / m[:, None], self.yy / m
