r"""The private certified solve of a fixed-weight objective (ERM or public weights) from secure sums.

The server minimizes :math:`F(\theta)=\sum_i\lambda_if_i(\theta)` by L-BFGS (SciPy), each value and
gradient one :meth:`~.secure_sum.SumOnlyChannel.sum` of the clients' :math:`\lambda_i(f_i,\nabla
f_i)`, then certifies the last point with the Hessian-free fixed-weight bound of
:mod:`drflmodel.problems.minmax.hessian_free_bound` (its formulas, every input a secure sum, every
sum taken at the end of its interval that keeps the bound valid):

* every coordinate penalized: :math:`L=\underline F-(\|\hat g\|+\sqrt P\,e_g+a_g)^2/(2\mu)` with
  :math:`\mu=\min_{D_{jj}>0}D_{jj}\sum_i\lambda_i` (:math:`\ell_2\sum_i\lambda_i` for unit penalty weights), :math:`\underline F` the value minus its quantization error
  and the clients' floating-point allowance, :math:`e_g` the largest per-entry error of the summed
  gradient (:math:`\|E\|_2\le\sqrt P\max|E_j|`) and :math:`a_g` the gradient's allowance;
* a free intercept: the intercepts' partial minimum :math:`\varphi(b)=\sum_i\lambda_i\varphi_i(b)`
  by the generalized self-concordance bound (F. Bach 2010, "Self-concordant analysis for logistic
  regression", Electronic Journal of Statistics 4, Prop. 1), with the summed :math:`K\times K`
  Hessian's smallest eigenvalue lowered by :math:`K\max|E_{kl}|` (:math:`\|E\|_2\le\|E\|_F`) and
  :math:`\nabla\varphi^\top H^{-1}\nabla\varphi` replaced by its upper bound
  :math:`(\|\nabla\varphi\|+\sqrt K e)^2/\lambda_{\min}`; the shift term
  :math:`\beta r\sum_i\lambda_i\,\mathrm{mean}_j\|\tilde x_j\|` from a secure sum.

The upper bound :math:`U` is the summed value plus its quantization error plus the clients'
floating-point allowance: the true :math:`F(\hat\theta)` is below it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ...errors import InvalidParameterError
from ...losses import Multinomial
from ...problems.minmax.fixed_weight_bound import concordance_radius
from .clients import private_clients
from .secure_sum import SumOnlyChannel

__all__ = ["PrivateCertificate", "private_fixed_weight_solve", "SERVER_LEARNS"]

#: what the server learns from the fixed-weight route (``info["private"]["server_learns"]``)
SERVER_LEARNS = (
    "at every probed model theta: the sums over all clients of their weighted values, gradients and bound terms "
    "(and, with a free intercept, of the intercepts' values, gradients and Hessians); the total number of rows N; "
    "how many clients' entries would clip; and, per entry, how many clients send a nonzero term (the guard's "
    "count). No entry of a released sum is fewer than min_contributors clients' nonzero terms.")

_EPS = np.finfo(float).eps
#: L-BFGS runs after the first when the bound is not yet within gap_tol
MAX_RESTARTS = 3


@dataclass
class PrivateCertificate:
    """``lower_bound`` :math:`\\le\\min_\\theta F\\le F(\\theta)\\le` ``upper_bound``, certified from
    secure sums only. ``server_saw`` lists what the server received (sums over all clients, by
    query); ``quantization`` the largest per-entry error of the value and gradient sums."""

    theta: np.ndarray
    upper_bound: float
    lower_bound: float
    status: str
    kind: str
    secure_sums: int
    evaluations: int
    bytes_per_client: int
    seconds: float
    quantization: dict
    server_saw: dict
    details: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return self.upper_bound - self.lower_bound

    @property
    def relative_gap(self) -> float:
        return self.gap / max(abs(self.upper_bound), 1e-12)

    def to_dict(self) -> dict:
        return {"theta": self.theta.tolist(), "upper_bound": self.upper_bound, "lower_bound": self.lower_bound,
                "gap": self.gap, "relative_gap": self.relative_gap, "status": self.status, "kind": self.kind,
                "secure_sums": self.secure_sums, "evaluations": self.evaluations,
                "bytes_per_client": self.bytes_per_client, "seconds": self.seconds,
                "quantization": dict(self.quantization), "server_saw": dict(self.server_saw), **self.details}


def _gamma(m: int) -> float:
    u = _EPS / 2
    return m * u / (1.0 - m * u)


class _Server:
    """What the server holds: the public description of the model and the channel."""

    def __init__(self, problem, channel: SumOnlyChannel, weights):
        ob = problem.objectives
        if not np.isfinite(ob.loss.smoothness):
            raise InvalidParameterError(f"the loss {ob.loss.name!r} is not smooth: the private solve needs "
                                        f"gradients (logistic, multinomial, squared, huber, smooth_hinge)")
        self.loss, self.layout, self.K = ob.loss, ob.layout, ob.n_outputs
        self.D, self.l2 = np.asarray(ob.penalty_diagonal, float), float(ob.l2)
        self.dim, self.d, self.n = self.D.size, self.D.size // ob.n_outputs, problem.n_clients
        self.channel = channel
        size = channel.sum("size")
        self.N = int(np.rint(size.value[0]))
        if size.error[0] >= 0.5:
            raise InvalidParameterError("the secure sum of the client sizes is not exact; raise stages")
        if isinstance(weights, str) and weights in ("size", "erm"):
            self.weights, self.lam_sum = ("size", self.N), 1.0
        else:
            lam = np.asarray(weights, float)
            if lam.shape != (self.n,) or not np.all(np.isfinite(lam) & (lam >= 0)) or lam.sum() <= 0:
                raise InvalidParameterError(
                    f"weights must be 'size' (ERM) or {self.n} public nonnegative numbers, not all zero; got {weights!r}")
            if np.count_nonzero(lam) < 2:
                raise InvalidParameterError(
                    "weights must give at least 2 clients a positive weight: a sum with one nonzero term is "
                    "that client's own value, gradient and bound terms, which private mode never reveals")
            self.weights, self.lam_sum = ("public", lam), float(lam.sum())
        penalized = self.D[self.D > 0]
        # the ridge's modulus on the penalized coordinates (l2 where the penalty weights are 1)
        self.mu = float(penalized.min()) * self.lam_sum if penalized.size else 0.0
        self.evaluations = 0

    def value_gradient(self, theta):
        s = self.channel.sum("value_gradient", weights=self.weights, theta=theta)
        self.evaluations += 1
        return s

    def allowances(self, theta, intercept_column):
        """The clients' floating-point allowance (``hessian_free_bound._allowances``) from a secure
        sum of their magnitudes (upper ends), and the summed mean feature norm."""
        s = self.channel.sum("bound_terms", weights=self.weights, theta=theta, intercept_column=intercept_column)
        loss_size, xr, x2, score_size, feature_norm = s.upper
        gamma = _gamma(self.N + self.d + 16)
        wnorm = float(np.linalg.norm(theta))
        penalty = 0.5 * float(self.D @ (theta * theta))
        value = gamma * (loss_size + xr * wnorm + score_size + self.lam_sum * penalty) * (1 + 4 * _EPS)
        ridge = self.lam_sum * float(np.linalg.norm(self.D * theta))
        grad = gamma * (xr + self.loss.smoothness * wnorm * x2 + ridge) * (1 + 4 * _EPS)
        return float(value), float(grad), float(feature_norm)


def _free_intercept_column(server) -> int | None:
    omega = server.D.reshape(server.K, -1)[0]
    free = np.flatnonzero(omega == 0)
    if free.size == 0:
        return None
    if free.size > 1 or server.layout.intercept_column != int(free[0]):
        raise InvalidParameterError("the private solve needs every coordinate penalized but, at most, the intercept")
    if server.loss.self_concordance is None:
        raise InvalidParameterError(f"the loss {server.loss.name!r} has no self-concordance constant, so a free "
                                    f"intercept cannot be certified; use penalize_intercept=True")
    return int(free[0])


def _penalized_bound(server, theta, vg):
    value_allow, grad_allow, _ = server.allowances(theta, None)
    g, e = vg.value[1:], vg.error[1:]
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * float(e.max()) + grad_allow
    lower = float(vg.value[0] - vg.error[0]) - value_allow - gnorm * gnorm / (2 * server.mu) * (1 + 4 * _EPS)
    upper = float(vg.value[0] + vg.error[0]) + value_allow
    return lower, upper, "strong convexity (private sums)", {"gradient_bound": gnorm, "value_allowance": value_allow}


def _intercept_terms(server, theta, idx):
    s = server.channel.sum("intercept_terms", weights=server.weights, theta=theta, idx=idx)
    K = idx.size
    return s.value[0], s.value[1:K + 1], s.value[K + 1:].reshape(K, K), s.error


def _intercept_bound(server, theta, vg, j0):
    """The free-intercept bound (module docstring): polish the intercepts by damped Newton on
    secure sums, then bound."""
    K = server.K
    idx = j0 + server.d * np.arange(K)
    softmax = isinstance(server.loss, Multinomial)
    project = (lambda v: v - v.mean()) if softmax else (lambda v: v)
    theta = np.array(theta, float)
    value, grad, H, err = _intercept_terms(server, theta, idx)
    steps = 0
    for steps in range(1, 31):
        Hd = H + (np.full((K, K), float(np.abs(H).max()) / K) if softmax else 0.0)
        try:
            step = -project(np.linalg.solve(Hd, project(grad)))
        except np.linalg.LinAlgError:
            break
        decrement = -float(project(grad) @ step)
        if decrement > 10 * err[0] + 1e-15 * max(1.0, abs(value)):
            for _ in range(20):                       # Armijo on values while they resolve the decrease
                trial = server.channel.sum("intercept_values", weights=server.weights, theta=theta, idx=idx,
                                           b=theta[idx] + step)
                if trial.value[0] <= value - 1e-4 * decrement:
                    break
                step, decrement = 0.5 * step, 0.5 * decrement
            else:
                break
            theta[idx] = theta[idx] + step
            value, grad, H, err = _intercept_terms(server, theta, idx)
            continue
        # below the values' resolution: full Newton steps, kept while the gradient norm falls
        trial_theta = theta.copy()
        trial_theta[idx] = theta[idx] + step
        trial = _intercept_terms(server, trial_theta, idx)
        if not np.linalg.norm(project(trial[1])) < np.linalg.norm(project(grad)):
            break
        theta = trial_theta
        value, grad, H, err = trial
    # the bound at b_bar = theta[idx]
    e_val, e_grad, e_hess = err[0], float(err[1:K + 1].max()), float(err[K + 1:].max())
    Hd = H + (np.full((K, K), float(np.abs(H).max()) / K) if softmax else 0.0)
    eigs = np.linalg.eigvalsh(Hd)
    lam_min = float(eigs[0]) - K * e_hess - K * _EPS * max(abs(float(eigs[-1])), 1.0)
    gb = float(np.linalg.norm(project(grad))) + np.sqrt(K) * e_grad
    found = concordance_radius(server.loss.self_concordance, gb / lam_min) if lam_min > 0 else None
    if found is None:
        return float("-inf"), None, "none", {"reason": "the intercepts' partial minimum could not be bounded"}, theta
    radius, psi = found
    q = gb * gb / lam_min
    phi_lower = value - e_val - q / (4 * psi)
    vgb = server.value_gradient(theta)                       # grad_W g(W, b_bar) and g there
    value_allow, grad_allow, feature_norm = server.allowances(theta, j0)
    g = np.array(vgb.value[1:])
    g[idx] = 0.0
    e = vgb.error[1:].copy()
    e[idx] = 0.0
    shift = server.loss.smoothness * radius * feature_norm
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * float(e.max()) + shift + grad_allow
    ridge = server.lam_sum * 0.5 * float(server.D @ (theta * theta))
    lower = phi_lower + ridge - value_allow - gnorm * gnorm / (2 * server.mu) * (1 + 4 * _EPS)
    upper = float(vgb.value[0] + vgb.error[0]) + value_allow
    return lower, upper, "strong convexity in W + intercepts' partial minimum (private sums)", \
        {"intercept_radius": radius, "intercept_newton_steps": steps, "gradient_bound": gnorm,
         "value_allowance": value_allow}, theta


def check_solve_options(min_contributors, gap_tol, max_iter) -> None:
    """The options every private route shares, each named with its allowed range on bad input."""
    if isinstance(min_contributors, bool) or int(min_contributors) != min_contributors or min_contributors < 0:
        raise InvalidParameterError(f"min_contributors must be an integer >= 0; got {min_contributors!r}")
    if not 0 < gap_tol < 1:
        raise InvalidParameterError(f"gap_tol must be in (0, 1); got {gap_tol}")
    if int(max_iter) < 1:
        raise InvalidParameterError(f"max_iter must be >= 1; got {max_iter}")


def private_fixed_weight_solve(problem, weights="size", gap_tol: float = 1e-6, max_iter: int = 2000,
                               seed: int = 0, channel: SumOnlyChannel | None = None, min_contributors: int = 2,
                               **channel_options) -> PrivateCertificate:
    """Certify :math:`\\min_\\theta\\sum_i\\lambda_if_i(\\theta)` of ``problem``'s client objectives
    (its loss, ``l2`` and intercept) from secure sums only (module docstring).

    ``weights``: ``"size"`` (ERM, :math:`\\lambda_i=N_i/N`; only :math:`N` is revealed) or
    :math:`n` public nonnegative weights. ``channel``: a :class:`~.secure_sum.SumOnlyChannel`
    over the problem's clients (default: one built with ``seed`` and ``channel_options``).
    ``min_contributors`` :math:`k` (default 2; 0 or 1: off) is the channel's guard
    (:meth:`~.secure_sum.SumOnlyChannel.sum`, set on ``channel``): no entry of a sum is fewer than
    :math:`k` clients' nonzero terms -- e.g. a feature nonzero at one client only would make that
    gradient coordinate its own, and the solve stops with
    :class:`~.secure_sum.SumWithheld` naming the entries."""
    check_solve_options(min_contributors, gap_tol, max_iter)
    start = time.perf_counter()
    if channel is None:
        channel = SumOnlyChannel(private_clients(problem), seed=seed, **channel_options)
    channel.min_contributors = int(min_contributors)          # the guard of every sum of this solve
    server = _Server(problem, channel, weights)
    if server.mu <= 0:
        raise InvalidParameterError("l2 must be > 0: the private bound needs the ridge's strong convexity")
    j0 = _free_intercept_column(server)
    last = {}

    def fun(theta):
        vg = server.value_gradient(theta)
        last["theta"], last["vg"] = np.array(theta), vg
        return float(vg.value[0]), np.array(vg.value[1:])

    theta = np.zeros(server.dim)
    restarts = 0
    for restarts in range(MAX_RESTARTS + 1):    # L-BFGS stops on the sums' noise: restart from its point
        gtol = np.sqrt(0.2 * server.mu * gap_tol * max(abs(last["vg"].value[0]), 1e-12) / server.dim) \
            if last else 1e-8
        res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                       options={"maxiter": int(max_iter), "gtol": gtol, "ftol": 0.0, "maxcor": 20})
        theta = np.array(res.x)
        vg = last["vg"] if np.array_equal(last["theta"], theta) else server.value_gradient(theta)
        if j0 is None:
            lower, upper, kind, details = _penalized_bound(server, theta, vg)
        else:
            lower, upper, kind, details, theta = _intercept_bound(server, theta, vg, j0)
        if upper - lower <= gap_tol * max(abs(upper), 1e-12):
            break
    details["restarts"] = restarts
    gap = upper - lower
    status = "optimal" if gap <= gap_tol * max(abs(upper), 1e-12) else "not certified to gap_tol"
    saw = {}
    for s in channel.seen:
        saw[s.query] = saw.get(s.query, 0) + 1
    return PrivateCertificate(
        theta=theta, upper_bound=float(upper), lower_bound=float(lower), status=status, kind=kind,
        secure_sums=channel.secure_sums, evaluations=server.evaluations,
        bytes_per_client=channel.bytes_per_client, seconds=time.perf_counter() - start,
        quantization={"value": float(vg.error[0]), "gradient": float(vg.error[1:].max()),
                      "quantum": channel.quantum, "stages": int(channel.stages)},
        server_saw={"sums_by_query": saw, "total_rows": server.N,
                    "per_client_values": f"none: no entry of a sum held fewer than min_contributors={int(min_contributors)} "
                                         f"clients' nonzero terms" if min_contributors >= 2 else
                                         "not guarded (min_contributors < 2): an entry nonzero at one client only is its own",
                    "server_learns": SERVER_LEARNS},
        details={**details, "lbfgs_message": str(res.message), "lbfgs_iterations": int(res.nit),
                 "min_contributors": int(min_contributors)})
