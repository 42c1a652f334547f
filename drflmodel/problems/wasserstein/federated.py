r"""Wasserstein DRFL federated: every client answers for its own ball :math:`\Omega_s`, no row leaves
a site, and the server certifies from the answers.

**What a client answers** (:class:`BallClient`, on its own rows; the ball's parameters
:math:`\rho_s,\kappa`, the norm and the moved columns come with the query, they are the server's):

* ``wasserstein_value`` at :math:`\theta`: its exact worst-case loss :math:`z_s(\theta)` and
  :math:`\lambda_s^\star` (the closed form of :func:`.omega.worst_case_unbounded`);
* ``wasserstein_prox`` at :math:`(W,z_s,\psi_s,\zeta_s,c)`: the client operator of the DRFL paper's
  Algorithm 1 (Appendix E) in consensus form,
  :math:`\arg\min_{(\lambda,\alpha,V)\in\Omega_s}\zeta_s\varpi+\psi_s^\top V+\frac c2\|V-W\|^2+\frac c2(\varpi-z_s)^2`
  with :math:`\varpi=\rho_s\lambda+\frac1{N_s}e^\top\alpha`; it returns :math:`V` and the scalar :math:`\varpi`;
* ``wasserstein_bound`` at :math:`(\zeta_s,\psi_s)`: a certified lower bound of its own term of the
  dual function, :math:`b_s=\min_{(\lambda,\alpha,V)\in\Omega_s}\zeta_s\varpi+\psi_s^\top V` (the conic dual
  objective of that problem, accepted when the solver's dual residual is at most 1e-6, the
  centralized conic route's rule).

**Server** (:func:`federated_solve`): consensus ADMM over :math:`\min_{W,z}\sigma_{\mathcal Q}(z)+r(W)`
subject to :math:`z_s\ge\varpi_s(V_s)`, :math:`V_s=W` (multipliers :math:`\zeta_s`, :math:`\psi_s`), the
ridge :math:`r(W)=\frac12\sum_jp_jW_j^2` on the server: the :math:`W`-step
:math:`W=(\sum_s\psi_s+c\sum_sV_s)/(p+cS)`, the :math:`z`-step the prox of :math:`\sigma_{\mathcal Q}`
(Moreau: :math:`z=v-\mathrm{proj}_{\mathcal Q}(cv)/c`, :math:`v=\varpi+\zeta/c`), then
:math:`\psi_s\mathrel{+}=c(V_s-W)`, :math:`\zeta\mathrel{+}=c(\varpi-z)` -- after which
:math:`\zeta=\mathrm{proj}_{\mathcal Q}(cv)\in\mathcal Q` and :math:`\sum_s\psi_s=p\circ W`.

**Certificate** (weak duality of the same splitting; no row needed). For :math:`\zeta\in\mathcal Q`
and any :math:`\psi` with :math:`(\sum_s\psi_s)_j=0` wherever :math:`p_j=0`,

.. math:: p^\star\ \ge\ \underbrace{\min_z\sigma_{\mathcal Q}(z)-\zeta^\top z}_{=0}
   +\min_W\big(r(W)-(\textstyle\sum_s\psi_s)^\top W\big)+\sum_s b_s(\zeta_s,\psi_s)
   = -\sum_{p_j>0}\frac{(\sum_s\psi_s)_j^2}{2p_j}+\sum_sb_s,

each :math:`b_s` answered by client *s*. Before asking, the server removes from every
:math:`\psi_s` its component along the class-shift directions (the softmax loss is invariant
there, so :math:`b_s=-\infty` otherwise), gives a client with :math:`\zeta_s=0` the multiplier 0
(same reason) and moves the rest of the sum on the unpenalized coordinates to the client with
the largest :math:`\zeta_s`. The upper bound :math:`U=\sigma_{\mathcal Q}(z(W))+r(W)` uses the
clients' exact ``wasserstein_value``. ADMM converges at its usual rate (measured in the tests), so the
answer is ``"optimal"`` only when the certified gap is at most ``gap_tol``, else the status the gap
gives; the rounds, the gap history and the reveal ledger are in ``info``.

Unbounded support (the Lipschitz form), every loss of the family, the softmax loss and the free
intercept included. The three queries are declared in :mod:`.queries` and named in the family's
registry entry (:mod:`drflmodel.problems.registry`): a :class:`~drflmodel.client_oracle.Site`
answers them through :func:`answer` (the :class:`BallClient` of its rows), and
:func:`drflmodel.client_oracle.federated_solve` (so also ``drflmodel.flower.certified_solve``) of a
:class:`~.problem.WassersteinDRFL` runs :func:`federated_oracle` -- the family's declared oracle --
after the clients' declarations.
"""

from __future__ import annotations

import time

import cvxpy as cp
import numpy as np

from ..._validation import as_finite_array, check_int, check_real
from ...errors import InvalidDataError, InvalidParameterError
from ...sets import WeightSet
from ...solution import Solution, relative_gap, status_from_gap
from ..._solver_sequence import solve_or_raise, solve_with_fallback
from .omega import TransportModel, omega_constraints, worst_case_unbounded
from .problem import RawProblem, conic_dual_bound
from .queries import QUERIES as _DECLARED

__all__ = ["QUERIES", "BallClient", "ServerSpec", "federated_solve", "federated_oracle", "answer"]

#: the queries a client answers for its own ball, and the arrays of each answer (:mod:`.queries`)
QUERIES = {q.name: q.arrays for q in _DECLARED}


def answer(site, query: str, arrays: dict, options: dict) -> dict:
    """The declared handler (:mod:`.queries`): ``site`` (a :class:`~drflmodel.client_oracle.Site`)
    answers ``query`` as the :class:`BallClient` of its own rows, kept in ``site.memo`` (it caches
    its compiled prox problem across rounds)."""
    ball = site.memo.get("wasserstein")
    if ball is None:
        ball = site.memo["wasserstein"] = BallClient(site.X, site.y, site.loss, site.n_outputs, site.name)
    return ball.answer(query, arrays, options)


def _ball_options(model: TransportModel, radius: float) -> dict:
    """The ball's parameters as query options (numbers and a comma-joined string only)."""
    return {"radius": float(radius), "kappa": float(model.kappa), "norm": float(model.norm),
            "moved": "all" if model.moved is None else ",".join(str(j) for j in model.moved)}


class BallClient:
    """One client's rows and what it answers for its own Wasserstein ball (module docstring).

    Parameters: ``X`` (``(N_s, d)``, the model's columns), ``y`` (drflmodel's labels), ``loss``,
    ``n_outputs`` (:math:`K`), ``name``. Every answer is a function of this client's rows and of
    the query only; the rows are never part of an answer."""

    def __init__(self, X, y, loss, n_outputs: int = 1, name: str | None = None):
        self.name = "client" if name is None else str(name)
        self._X = as_finite_array(X, f"X of {self.name}", ndim=2)
        self._y = as_finite_array(y, f"y of {self.name}", ndim=1)
        if self._X.shape[0] != self._y.shape[0] or self._X.shape[0] < 1:
            raise InvalidDataError(f"{self.name}: X has {self._X.shape[0]} rows and y {self._y.shape[0]}; "
                                   "they must be equal and at least 1")
        TransportModel.check_loss(loss)
        self.loss, self.n_outputs = loss, check_int(n_outputs, "n_outputs", low=1)
        self._cache: dict = {}

    @classmethod
    def from_problem(cls, problem, s: int) -> "BallClient":
        """Client *s* of a :class:`~.problem.WassersteinDRFL` (its rows and loss only)."""
        c = problem.federation.clients[s]
        return cls(c.X, c.y, problem.loss, problem.model.n_outputs, name=c.name)

    def _model(self, options: dict) -> tuple[TransportModel, float]:
        moved = str(options.get("moved", "all"))
        moved = None if moved == "all" else [int(j) for j in moved.split(",") if j != ""]
        model = TransportModel.validate(self.loss, float(options["norm"]), float(options["kappa"]), None,
                                        self._X.shape[1], self.n_outputs, moved)
        return model, check_real(float(options["radius"]), "radius", low=0.0)

    def _theta(self, arrays: dict, key: str) -> np.ndarray:
        P = self._X.shape[1] * self.n_outputs
        if key not in arrays:
            raise InvalidParameterError(f"{self.name}: the query carries no {key!r}")
        v = np.asarray(arrays[key], float).reshape(-1)
        if v.shape != (P,):
            raise InvalidDataError(f"{self.name}: {key} has {v.size} entries; the model has P = {P}")
        return v

    def answer(self, query: str, arrays: dict | None = None, options: dict | None = None) -> dict:
        """The arrays answering ``query`` (:data:`QUERIES`)."""
        arrays, options = arrays or {}, options or {}
        if query not in QUERIES:
            raise InvalidParameterError(f"{self.name}: unknown query {query!r}; known: {', '.join(QUERIES)}")
        model, rho = self._model(options)
        if query == "wasserstein_value":
            value, lam = worst_case_unbounded(model, self._theta(arrays, "theta"), self._X, self._y, rho)
            return {"value": [value], "lambda": [lam if rho > 0 else 0.0]}     # rho = 0: lambda is free (nan)
        if query == "wasserstein_prox":
            return self._prox(model, rho, self._theta(arrays, "theta"), float(np.ravel(arrays["z"])[0]),
                              self._theta(arrays, "psi"), float(np.ravel(arrays["zeta"])[0]),
                              check_real(float(np.ravel(arrays["c"])[0]), "c", low=0.0, low_open=True))
        return self._bound(model, rho, float(np.ravel(arrays["zeta"])[0]), self._theta(arrays, "psi"))

    def _omega(self, model, rho, V, lam, alpha) -> list:
        from .omega import empirical_constraints

        cons = [lam >= 0]
        if rho == 0:
            return cons + [lam == 0] + empirical_constraints(model, V, alpha, self._X, self._y)
        return cons + omega_constraints(model, V, lam, alpha, self._X, self._y, np.zeros(self._X.shape[0], int), [0])

    def _prox(self, model, rho, W, z, psi, zeta, c) -> dict:
        key = ("prox", model, rho)
        if key not in self._cache:
            P = W.size
            V, lam, alpha = cp.Variable(P), cp.Variable(1), cp.Variable(self._X.shape[0])
            par = {k: cp.Parameter(shape) for k, shape in (("sw", P), ("sz", ()), ("psi", P), ("zeta", ()))}
            par["sc"] = cp.Parameter(nonneg=True)
            varpi = rho * lam[0] + cp.sum(alpha) / self._X.shape[0]
            # DPP: sqrt(c/2) W and sqrt(c/2) z are parameters of their own (as the client operator of .problem)
            obj = (par["zeta"] * varpi + par["psi"] @ V + cp.sum_squares(par["sw"] - par["sc"] * V)
                   + cp.square(par["sc"] * varpi - par["sz"]))
            self._cache[key] = (cp.Problem(cp.Minimize(obj), self._omega(model, rho, V, lam, alpha)), par, V, varpi)
        prob, par, V, varpi = self._cache[key]
        sc = np.sqrt(c / 2.0)
        par["sc"].value, par["sw"].value, par["sz"].value = sc, sc * W, sc * z
        par["psi"].value, par["zeta"].value = psi, zeta
        _solve(prob, f"{self.name}: the prox step")
        return {"w_hat": np.asarray(V.value, float), "varpi": [float(varpi.value)]}

    def _bound(self, model, rho, zeta, psi) -> dict:
        P = psi.size
        V, lam, alpha = cp.Variable(P), cp.Variable(1), cp.Variable(self._X.shape[0])
        varpi = rho * lam[0] + cp.sum(alpha) / self._X.shape[0]
        prob = RawProblem(cp.Minimize(zeta * varpi + psi @ V), self._omega(model, rho, V, lam, alpha))
        # the documented tolerances (1e-9) of the conic route; no optimal answer: no bound
        if solve_with_fallback(prob, first="CLARABEL") is None:
            return {"bound": [float("-inf")], "dual_residual": [float("inf")]}
        bound, info = conic_dual_bound(prob)
        return {"bound": [bound], "dual_residual": [float(info.get("dual_residual", np.inf))]}


def _solve(prob, what: str) -> None:
    solve_or_raise(prob, "CLARABEL", what)


class ServerSpec:
    """What the server knows of the problem: the ball parameters, the weight set :math:`\\mathcal Q`
    and the ridge -- no row. ``from_problem`` copies them from a
    :class:`~.problem.WassersteinDRFL` (its federation is not kept)."""

    def __init__(self, model: TransportModel, radius, weights, penalty_diagonal, n_clients: int):
        self.model = model
        self.n_clients = check_int(n_clients, "n_clients", low=1)
        self.radius = np.asarray(radius, float).reshape(-1)
        if self.radius.shape != (self.n_clients,):
            raise InvalidParameterError(f"radius must have one entry per client ({self.n_clients}); "
                                        f"got {self.radius.shape}")
        self.weights = weights
        self.penalty_diagonal = np.asarray(penalty_diagonal, float)
        if model.support.bounded:
            raise InvalidParameterError("the federated Wasserstein solve covers unbounded support only "
                                        f"(support=None); got {model.support.kind!r}")

    @classmethod
    def from_problem(cls, problem) -> "ServerSpec":
        if getattr(problem, "shared_multiplier", False):
            raise InvalidParameterError("WAFL shares one multiplier across clients: its ball is not a "
                                        "client's own; the federated Wasserstein solve covers WassersteinDRFL")
        return cls(problem.model, problem.radius, problem.weights, problem.objectives.penalty_diagonal,
                   problem.n_clients)

    @property
    def dim(self) -> int:
        return self.model.n_features * self.model.n_outputs

    def outer(self, z) -> tuple[float, np.ndarray]:
        """:math:`(\\sigma_{\\mathcal Q}(z), q^\\star)`."""
        z = np.asarray(z, float)
        if isinstance(self.weights, WeightSet):
            val, q = self.weights.worst_case(z)
            return float(val), np.asarray(q, float)
        q = np.asarray(self.weights, float)
        return float(q @ z), q.copy()

    def project(self, v) -> np.ndarray:
        if isinstance(self.weights, WeightSet):
            return np.asarray(self.weights.project(v), float)
        return np.asarray(self.weights, float).copy()

    def penalty(self, W) -> float:
        return 0.5 * float(np.sum(self.penalty_diagonal * W * W))

    def invariant_directions(self) -> np.ndarray:
        """Orthonormal columns spanning the class shifts :math:`e_j\\otimes\\mathbf 1_K` (softmax only)."""
        K, d = self.model.n_outputs, self.model.n_features
        if K == 1:
            return np.zeros((self.dim, 0))
        B = np.zeros((self.dim, d))
        for j in range(d):
            B[j + d * np.arange(K), j] = 1.0 / np.sqrt(K)
        return B


def _certificate_multipliers(spec: ServerSpec, zeta: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """The :math:`\\psi` the bound is evaluated with (module docstring, Certificate)."""
    psi = psi.copy()
    B = spec.invariant_directions()
    if B.shape[1]:
        psi -= (psi @ B) @ B.T
    psi[zeta <= 0] = 0.0
    free = spec.penalty_diagonal <= 0
    if free.any():
        top = int(np.argmax(zeta))
        others = np.delete(np.arange(spec.n_clients), top)
        psi[top, free] = -psi[others][:, free].sum(axis=0)
    return psi


def certified_bounds(spec: ServerSpec, channel, W, zeta, psi) -> tuple[float, float, dict]:
    """``(L, U, info)`` at the server's point ``W`` with multipliers ``(zeta, psi)``: two queries
    of every client (``wasserstein_value``, ``wasserstein_bound``)."""
    S = spec.n_clients
    opts = {s: _ball_options(spec.model, spec.radius[s]) for s in range(S)}
    got = channel.ask("wasserstein_value", {"theta": W}, per_client_options=opts)
    z = np.array([float(np.ravel(got[s]["value"])[0]) for s in range(S)])
    U = spec.outer(z)[0] + spec.penalty(W)
    psi_c = _certificate_multipliers(spec, zeta, psi)
    got = channel.ask("wasserstein_bound", per_client={s: {"zeta": [float(zeta[s])], "psi": psi_c[s]} for s in range(S)},
                      per_client_options=opts)
    b = np.array([float(np.ravel(got[s]["bound"])[0]) for s in range(S)])
    total = psi_c.sum(axis=0)
    pen = spec.penalty_diagonal
    server = -float(np.sum(total[pen > 0] ** 2 / (2.0 * pen[pen > 0])))
    L = float(b.sum() + server) if np.all(np.isfinite(b)) else float("-inf")
    return L, U, {"client_values": z, "client_bounds": b, "server_term": server,
                  "dual_residuals": [float(np.ravel(got[s]["dual_residual"])[0]) for s in range(S)]}


def federated_solve(problem, channel, rounds: int = 300, c: float = 1.0, check_every: int = 10,
                    gap_tol: float = 1e-6) -> Solution:
    """Consensus ADMM over the clients' own balls and its certificate (module docstring).

    ``problem`` is a :class:`~.problem.WassersteinDRFL` (only its parameters are read:
    :meth:`ServerSpec.from_problem`) or a :class:`ServerSpec`; ``channel`` any transport with
    ``ask(query, arrays, per_client=..., per_client_options=...)`` to :class:`BallClient` s (e.g.
    ``drflmodel.client_oracle.LocalChannel([BallClient.from_problem(problem, s) for s in ...])``).
    ``rounds`` bounds the ADMM rounds, ``c`` is its penalty, the certificate is computed every
    ``check_every`` rounds and the solve stops when its relative gap is at most ``gap_tol``."""
    spec = problem if isinstance(problem, ServerSpec) else ServerSpec.from_problem(problem)
    rounds = check_int(rounds, "rounds", low=1)
    check_every = check_int(check_every, "check_every", low=1)
    c = check_real(c, "c", low=0.0, low_open=True)
    gap_tol = check_real(gap_tol, "gap_tol", low=0.0)
    started = time.perf_counter()
    S, P = spec.n_clients, spec.dim
    opts = {s: _ball_options(spec.model, spec.radius[s]) for s in range(S)}
    W, z = np.zeros(P), np.zeros(S)
    psi, zeta = np.zeros((S, P)), spec.project(np.full(S, 1.0 / S))
    best, history = None, []
    pen = spec.penalty_diagonal
    for k in range(1, rounds + 1):
        per = {s: {"theta": W, "z": [z[s]], "psi": psi[s], "zeta": [zeta[s]], "c": [c]} for s in range(S)}
        got = channel.ask("wasserstein_prox", per_client=per, per_client_options=opts)
        V = np.array([np.asarray(got[s]["w_hat"], float).reshape(-1) for s in range(S)])
        varpi = np.array([float(np.ravel(got[s]["varpi"])[0]) for s in range(S)])
        W = (psi.sum(axis=0) + c * V.sum(axis=0)) / (pen + c * S)
        v = varpi + zeta / c
        q = spec.project(c * v)
        z = v - q / c
        psi = psi + c * (V - W)
        zeta = q                                            # = zeta + c (varpi - z), in Q
        if k % check_every and k != rounds:
            continue
        L, U, parts = certified_bounds(spec, channel, W, zeta, psi)
        gap = relative_gap(L, U)
        history.append({"round": k, "lower_bound": L, "upper_bound": U, "relative_gap": gap,
                        "consensus_residual": float(np.abs(V - W).max())})
        if best is None or gap < best[0]:
            best = (gap, L, U, W.copy(), zeta.copy(), parts)
        if gap <= gap_tol:
            break
    gap, L, U, W, q, parts = best
    info = {"method": "federated_admm", "rounds": history[-1]["round"], "history": history,
            "certificate_parts": parts, "time": time.perf_counter() - started,
            "federated": getattr(getattr(channel, "ledger", None), "to_dict", lambda: None)()}
    return Solution(theta=W, weights=q, client_losses=parts["client_values"], value=U, lower_bound=L,
                    upper_bound=U, status=status_from_gap(L, U, gap_tol),
                    certificate="dual decomposition: the clients' local conic dual bounds (ADMM multipliers)",
                    duals={"psi": None, "zeta": q}, info=info)


OPTIONS = ("rounds", "c", "check_every")


def federated_oracle(problem, channel, declared=None, method: str = "auto", gap_tol: float = 1e-6, **options):
    """The family's own federated certified solve (its registry entry's ``federated_oracle``, which
    :func:`drflmodel.client_oracle.federated_solve` runs after the clients' declarations):
    :func:`federated_solve` of ``problem`` (a :class:`~.problem.WassersteinDRFL`) over ``channel``.
    ``declared``: the clients' declarations (:class:`~drflmodel.client_oracle.server.DeclaredFederation`),
    checked against the problem's clients, columns and classes; ``method`` ``"auto"`` or
    ``"federated_admm"``; ``options``: ``rounds``, ``c``, ``check_every`` of :func:`federated_solve`."""
    if method not in ("auto", "federated_admm"):
        raise InvalidParameterError(f"method must be 'auto' or 'federated_admm' for the federated "
                                    f"Wasserstein solve (its own oracle); got {method!r}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidParameterError(f"unknown option(s) {unknown} of the federated Wasserstein solve "
                                    f"(allowed: {', '.join(OPTIONS)})")
    if declared is not None:
        mine = (problem.n_clients, problem.layout.n_features, problem.layout.n_outputs)
        theirs = (declared.n_clients, declared.dim, declared.n_classes if problem.layout.n_outputs > 1 else 1)
        if mine != theirs:
            raise InvalidDataError(f"the clients declare (clients, features, outputs) = {theirs}; this "
                                   f"problem has {mine}")
        if not problem.penalize_intercept and declared.intercept_column != problem.federation.intercept_column:
            raise InvalidDataError(f"the free intercept is column {problem.federation.intercept_column} of this "
                                   f"problem; the clients' all-one column is {declared.intercept_column}")
    sol = federated_solve(problem, channel, gap_tol=gap_tol, **options)
    sol.problem = problem
    return sol
