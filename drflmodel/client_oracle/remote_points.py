r"""The Hessian-free route on a federated server: the matrix-free objectives'
(:class:`~drflmodel.matrix_free.MatrixFreeObjectives`) interface, answered by the clients with
:math:`O(P)` floats per answer -- never a Hessian on the wire.

What the ``hessian_free`` route (:mod:`drflmodel.problems.minmax.hessian_free`) reads at a point
:math:`\theta`, and the answer that carries it (client :math:`i`, :math:`P=Kd` parameters):

* :math:`f_i(\theta)` and :math:`\nabla f_i(\theta)`: the ``evaluate`` query without Hessian
  (:math:`P+1` floats; the server adds the ridge);
* the bound's per-client means (:meth:`~drflmodel.client_oracle.site.Site.bound_terms`): four
  magnitudes for the floating-point allowance, the mean :math:`\|\tilde x_{ij}\|`, and, with an
  unpenalized intercept, the mean loss with its gradient and Hessian in the :math:`K` intercepts
  (:math:`6+K+K(K+1)/2` floats) -- asked only when a certificate is attempted;
* once, at :math:`\theta=0`, the mean of every squared column over the client's rows (``bound_terms``
  with ``columns``; :math:`d` floats, sums of the client's rows): the route's diagonal preconditioner
  (:meth:`RemoteMatrixFree.column_second_moments`);
* the mean loss with the intercepts moved (the intercepts' Newton polish of the bound): the
  ``values`` query at the moved point (one float).

**Bound terms riding on evaluations** (:attr:`RemoteMatrixFree.ride`, set by a route whose answers
have room for them: the ``block_newton`` route when :math:`(q+1)P+1+6+K+K(K+1)/2\le4P`): every
``evaluate`` query asks the bound terms at its point too (the option ``bound_terms``: the same
arrays, checked against that answer's value and gradient), so a certificate attempt costs no
exchange of its own, and the polish's moved points are asked with ``evaluate`` (value, gradient
and bound terms at once; kept, so the polish's value, point and bound terms there are one exchange
instead of three).

With these, the lower bound of :mod:`drflmodel.problems.minmax.hessian_free_bound` is computed on
the server exactly as in process (the same formulas on the clients' means; each client sums its
own rows, which the bound's :math:`\gamma_{N+d+16}` allowance covers).
"""

from __future__ import annotations

import numpy as np

from .protocol import unpack_symmetric

__all__ = ["RemoteMatrixFree", "RemotePoint"]


class RemoteMatrixFree:
    """The matrix-free objectives of a federated server (module docstring), over the
    :class:`~drflmodel.client_oracle.server.FederatedObjectives` ``objectives`` (its channel and
    its cache of answers)."""

    def __init__(self, objectives):
        self.oracle = ob = objectives
        self.loss, self.layout, self.l2 = ob.loss, ob.layout, ob.l2
        self.penalty_diagonal, self.n_outputs = ob.penalty_diagonal, ob.n_outputs
        self.sizes = np.asarray(ob.sizes, float).astype(int)
        self._bound_terms: dict = {}
        self._feature_norms = None
        self._mean_squared_norm = None
        self._column_moments = None
        self.plan = None                             # the route's QueryPlan, once announced
        self.ride = False                            # bound terms asked with every evaluation (module docstring)
        self._points: dict = {}                      # the latest points asked with their bound terms

    @property
    def n(self) -> int:
        return self.oracle.n

    @property
    def n_features(self) -> int:
        return self.oracle.n_features

    @property
    def dim(self) -> int:
        return self.oracle.dim

    @property
    def n_rows(self) -> int:
        return int(self.sizes.sum())

    def announce(self, plan) -> None:
        """State the route's :class:`~drflmodel.problems.engine.plan.QueryPlan` to every client with the
        route's first query (the bound terms and column statistics at :math:`\theta=0`, asked anyway):
        a client whose policy does not admit it refuses there, by name, before answering anything of
        the route. Every later query is counted against the plan (:meth:`QueryPlan.spend`) before it is
        sent."""
        self.plan = plan
        if self.ride:                                # with the first evaluation (value, gradient, bound terms)
            self._riding(np.zeros(self.dim), None, {"columns": 1, "plan": plan.wire()})
            return
        self.bound_terms(np.zeros(self.dim), columns=True, announce=True)

    def _spend(self, kind: str) -> None:
        if self.plan is not None:
            self.plan.spend(kind)

    def at(self, theta) -> "RemotePoint":
        """The clients' values and gradients at ``theta`` (one exchange; with :attr:`ride`, the bound terms
        too, and a point asked so before is not asked again)."""
        theta = np.array(theta, float)
        if self.ride:
            return self._riding(theta, None)[0]
        self._spend("evaluations")
        values, grads, _ = self.oracle.evaluate(theta, hessian=False)
        return RemotePoint(self, theta, values, grads)

    def _bound_options(self) -> dict:
        j0 = self.layout.intercept_column
        return {"intercept_column": -1 if j0 is None else int(j0)}

    def _riding(self, theta, V, extra: dict | None = None) -> tuple:
        """``(point, products)`` at ``theta`` with the bound terms in the same exchange (kept with the
        point: the bound terms and a later :meth:`at` there ask nothing more); ``extra``: more options
        (the column statistics and the plan, with the route's first query)."""
        key = theta.tobytes()
        q = 0 if V is None else V.shape[0]
        if q == 0 and key in self._points and not extra:
            return self._points[key], np.zeros((self.n, 0, self.dim))
        self._spend("evaluations")
        for _ in range(q):
            self._spend("hvps")
        self._spend("bound_terms")
        values, grads, products, terms = self.oracle.evaluate_with_terms(
            theta, np.zeros((0, self.dim)) if V is None else V, {**self._bound_options(), **(extra or {})})
        self._keep_terms(key, terms)
        if (extra or {}).get("columns") and all("column_squares" in a for a in terms):
            self._column_moments = np.stack([np.asarray(a["column_squares"], float).reshape(-1) for a in terms])
        point = RemotePoint(self, theta, values, grads)
        while len(self._points) >= 4:
            self._points.pop(next(iter(self._points)))
        self._points[key] = point
        return point, products

    def _keep_terms(self, key: bytes, answers: list) -> None:
        while len(self._bound_terms) >= 4:           # a few recent points
            self._bound_terms.pop(next(iter(self._bound_terms)))
        self._bound_terms[key] = answers
        if self._feature_norms is None and "feature_norm" in answers[0]:
            self._feature_norms = np.array([float(a["feature_norm"][0]) for a in answers])
        if self._mean_squared_norm is None:
            x2 = np.array([float(a["allowance"][2]) for a in answers])
            self._mean_squared_norm = float(self.sizes @ x2) / self.n_rows

    def at_with_products(self, theta, directions) -> tuple:
        """``(point, products)``: the clients' values and gradients at ``theta`` and their Hessian-vector
        products along the ``(q, P)`` ``directions`` (ridge included; ``(n, q, P)``), in one exchange of
        :math:`(q+1)P+1` floats per client (the ``evaluate`` query with ``directions``)."""
        theta = np.array(theta, float)
        V = np.zeros((0, self.dim)) if directions is None else np.asarray(directions, float).reshape(-1, self.dim)
        if self.ride:
            return self._riding(theta, V)
        self._spend("evaluations")
        for _ in range(V.shape[0]):
            self._spend("hvps")
        values, grads, products = self.oracle.evaluate_with_products(theta, V)
        return RemotePoint(self, theta, values, grads), products

    def shifted(self, point: "RemotePoint", idx: np.ndarray, b: np.ndarray) -> "RemotePoint":
        """The point with the intercepts (coordinates ``idx``) set to ``b`` (one exchange)."""
        theta = point.theta.copy()
        theta[idx] = b
        return self.at(theta)

    def values(self, theta) -> np.ndarray:
        self._spend("values")
        return self.oracle.values(theta)

    def bound_terms(self, theta: np.ndarray, columns: bool = False, announce: bool = False) -> dict:
        """The clients' ``bound_terms`` answers at ``theta`` (one exchange per point, kept); ``columns``
        asks the column statistics with them (at :math:`\theta=0`, once)."""
        key = theta.tobytes()
        if key not in self._bound_terms or (columns and self._column_moments is None) or announce:
            j0 = self.layout.intercept_column
            options = {"intercept_column": -1 if j0 is None else int(j0)}
            if columns:
                options["columns"] = 1
            if announce and self.plan is not None:
                options["plan"] = self.plan.wire()
            self._spend("bound_terms")
            got = self.oracle.channel.ask("bound_terms", {"theta": theta}, options=options)
            answers = [got[i] for i in range(self.n)]
            self._keep_terms(key, answers)
            if columns and all("column_squares" in a for a in answers):
                self._column_moments = np.stack([np.asarray(a["column_squares"], float).reshape(-1)
                                                 for a in answers])
        return self._bound_terms[key]

    def column_second_moments(self) -> np.ndarray | None:
        """Per client, the mean of every squared column over its rows, ``(n, d)`` (asked once with the
        bound terms at :math:`\theta=0`; ``None`` if a client's answer does not carry them)."""
        if self._column_moments is None:
            self.bound_terms(np.zeros(self.dim), columns=True)
        return self._column_moments

    def feature_norm_means(self, intercept_column: int) -> np.ndarray:
        """Per client, the mean :math:`\\|\\tilde x_{ij}\\|` (from the first ``bound_terms`` answers; a
        constant of the client's rows)."""
        if self._feature_norms is None:                # asked once, with the bound terms at theta = 0
            self.bound_terms(np.zeros(self.dim))
        return self._feature_norms

    def mean_squared_row_norm(self) -> float:
        """:math:`\\frac1N\\sum_j\\|x_j\\|^2` (asked with the bound terms at :math:`\\theta=0` if not known)."""
        if self._mean_squared_norm is None:
            self.bound_terms(np.zeros(self.dim))
        return self._mean_squared_norm


class RemotePoint:
    """A point of :class:`RemoteMatrixFree`: the clients' values and gradients (ridge included)
    and, on demand, their bound terms -- the :class:`~drflmodel.matrix_free.RowPoint` interface
    the Hessian-free route and bound read."""

    def __init__(self, objectives: RemoteMatrixFree, theta, values, grads):
        self.remote, self.theta = objectives, theta
        self.values, self._gradients = values, grads
        self.penalty = 0.5 * float(objectives.penalty_diagonal @ (theta * theta))

    def gradients(self) -> np.ndarray:
        return self._gradients

    def weighted_gradient(self, lam) -> np.ndarray:
        return np.asarray(lam, float) @ self._gradients

    def allowance_terms(self) -> np.ndarray:
        answers = self.remote.bound_terms(self.theta)
        return np.stack([np.asarray(a["allowance"], float) for a in answers])

    def intercept_values(self, idx: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per client, the mean data loss with the intercepts set to ``b`` (the ``values`` query;
        the intercepts carry no ridge, so the penalty is this point's)."""
        theta = self.theta.copy()
        theta[idx] = b
        if self.remote.ride:                         # value, gradient and bound terms there at once (kept)
            return self.remote.at(theta).values - self.penalty
        return self.remote.values(theta) - self.penalty

    def intercept_terms(self, idx: np.ndarray):
        answers = self.remote.bound_terms(self.theta)
        K = idx.size
        values = np.array([float(a["intercept_value"][0]) for a in answers])
        grads = np.stack([np.asarray(a["intercept_gradient"], float) for a in answers])
        hess = np.stack([unpack_symmetric(np.asarray(a["intercept_hessian"], float), K) for a in answers])
        return values, grads, hess
