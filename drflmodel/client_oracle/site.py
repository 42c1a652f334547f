"""The client side of the client oracle: :class:`Site`, one client's rows and what it computes on
them -- the only code that touches a client's data."""

from __future__ import annotations

import json

import numpy as np

from .._validation import as_finite_array, check_int
from ..data import Client, StackedData
from ..errors import InvalidDataError, InvalidParameterError
from ..losses import Loss
from ..objectives import ClientObjectives
from ..problems.registry import client_query
from .protocol import QUERIES, pack_symmetric

__all__ = ["Site"]


class _OneSite:
    """The few federation attributes :class:`~drflmodel.objectives.ClientObjectives` reads, for
    one client's rows (a site need not hold every class, which a ``Federation`` requires)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, task: str, n_classes):
        self.task, self.n_classes, self.dim = task, n_classes, X.shape[1]
        self.intercept_column = None
        self.clients = [Client(X, y)]
        self.stacked = StackedData(X=X[None], y=y[None], mask=np.ones((1, X.shape[0])),
                                   sizes=np.array([X.shape[0]]))


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

    A query a family declared (:class:`~drflmodel.problems.registry.ClientQuery`) is answered by its
    handler on this site (``X``, ``y``, ``loss``, ``n_outputs``, ``name``; ``memo``, a dict the
    handler keeps its state in across queries), and must hold exactly the declared arrays.
    """

    def __init__(self, X, y, loss: Loss, n_outputs: int = 1, name: str | None = None):
        if not isinstance(loss, Loss):
            raise InvalidParameterError(f"loss must be a drflmodel.losses.Loss; got {type(loss).__name__}")
        self.name = "site" if name is None else str(name)
        # float32 features stay float32 (no float64 copy of the rows): the products accumulate in float64
        # (drflmodel.objectives / matrix_free), so the answers are the float64 ones on the same values
        X = as_finite_array(X, f"X of {self.name}", ndim=2,
                            dtype=np.float32 if getattr(X, "dtype", None) == np.float32 else float)
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
        self._matrix_free = None                 # the site's own matrix-free objectives (bound_terms)
        self.memo: dict = {}                     # what a family's declared handler keeps across queries

    @classmethod
    def from_problem(cls, problem, i: int) -> "Site":
        """Client *i* of a drflmodel problem (its rows and loss only)."""
        client = problem.federation.clients[i]
        return cls(client.features, client.y, problem.loss, problem.objectives.n_outputs, name=client.name)

    @property
    def X(self) -> np.ndarray:
        """The site's rows (read-only: for the handlers of declared queries, which run on the site)."""
        view = self._X.view()
        view.flags.writeable = False
        return view

    @property
    def y(self) -> np.ndarray:
        """The site's labels (read-only)."""
        view = self._y.view()
        view.flags.writeable = False
        return view

    @property
    def size(self) -> int:
        return self._X.shape[0]

    @property
    def dim(self) -> int:
        """The model's size :math:`P=dK` (features times outputs)."""
        return int(self._objective.dim)

    def answers(self) -> list[str]:
        """The queries this site can answer (its loss decides the smooth ones)."""
        out = ["describe", "row_norm", "values", "evaluate"]
        if np.isfinite(self.loss.smoothness):
            out += ["hessian", "hvp", "bound_terms"]
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
        declared = client_query(query)
        if declared is not None:                  # a family's own query, answered by its declared handler
            return declared.respond(self, arrays, options)
        if query == "describe":
            return self.describe(options.get("loss"))
        if query == "row_norm":
            return {"max_row_norm": [float(self._objective.max_row_norms()[0])]}
        if query == "statistics":
            self._require("statistics")
            X, y = np.asarray(self._X, float), self._y        # asked once; float64 sums for float32 rows too
            return {"gram": pack_symmetric(X.T @ X), "moment": X.T @ y, "yy": [float(y @ y)]}
        if query == "values":            # one point, or several stacked (one value per point)
            points = self._check_theta(arrays, many=True)
            return {"value": np.array([self._objective.values(t)[0] for t in np.atleast_2d(points)])}
        theta = self._check_theta(arrays)
        if query == "bound_terms":
            self._require("bound_terms")
            return self.bound_terms(theta, options.get("intercept_column"), bool(options.get("columns", False)))
        if query == "hvp":
            self._require("hvp")
            v = self._check_theta(arrays, "direction")
            return {"hvp": self._objective.hessian_vector_products(theta, v)[0]}
        hessian = bool(options.get("hessian", False))
        if hessian:
            self._require("hessian")
        values, grads, H = self._objective.evaluate(theta, np.ones(1), hessian=hessian)
        out = {"value": values, "gradient": grads[0]}
        if "directions" in arrays:        # Hessian-vector products along server-chosen directions, same exchange
            self._require("hvp")
            V = self._check_theta(arrays, "directions", many=True).reshape(-1, self._objective.dim)
            out["hvp"] = np.concatenate([self._objective.hessian_vector_products(theta, v)[0] for v in V])
        if hessian:
            out["hessian"] = pack_symmetric(H)
        if options.get("bound_terms"):    # the bound's per-client means at the same point, same exchange
            self._require("bound_terms")
            out.update(self.bound_terms(theta, options.get("intercept_column"), bool(options.get("columns", False))))
        return out

    def bound_terms(self, theta, intercept_column=None, columns: bool = False) -> dict:
        """What the Hessian-free bound (:mod:`drflmodel.problems.minmax.hessian_free_bound`) reads of
        this site at ``theta``: the means over its rows of :math:`|\\ell_j|`,
        :math:`\\|x_j\\|\\|\\nabla_s\\ell_j\\|`, :math:`\\|x_j\\|^2`, :math:`\\|s_j\\|_1` (``allowance``, 4
        floats) and of :math:`\\|\\tilde x_j\\|` (``feature_norm``); with an intercept column, the mean
        loss, its gradient and Hessian in the :math:`K` intercepts (``intercept_*``; :math:`1+K+K(K+1)/2`
        floats); with ``columns``, the mean of every squared column :math:`x_{jk}^2` (``column_squares``,
        :math:`d` floats, asked once: the route's diagonal preconditioner). :math:`O(K^2+d)` floats, no row."""
        from ..matrix_free import MatrixFreeObjectives

        mf = self._matrix_free
        if mf is None:
            mf = self._matrix_free = MatrixFreeObjectives(self._objective)
        point = mf.at(theta)
        out = {"allowance": point.allowance_terms()[0]}
        if columns:
            out["column_squares"] = mf.column_second_moments()[0]
        if intercept_column is not None and int(intercept_column) >= 0:
            j0 = int(intercept_column)
            idx = j0 + self._X.shape[1] * np.arange(self.n_outputs)
            value, grad, hess = point.intercept_terms(idx)
            out.update(feature_norm=mf.feature_norm_means(j0), intercept_value=value, intercept_gradient=grad[0],
                       intercept_hessian=pack_symmetric(hess[0]))
        return out

    def _require(self, quantity: str) -> None:
        if quantity not in self.answers():
            why = (f"its loss {self.loss!r} is not smooth" if quantity in ("hessian", "hvp", "bound_terms")
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
