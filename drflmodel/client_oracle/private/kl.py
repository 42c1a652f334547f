r"""The private certified solve of the KL-penalized weight set (the tilted risk) from secure sums.

For ``dm.sets.KLPenalty(n, tau)``, :math:`\psi(\lambda)=\tau\sum_i\lambda_i\log(n\lambda_i)`, the inner
maximum is a log-sum-exp (the Donsker-Varadhan formula; T. Li, A. Beirami, M. Sanjabi and V. Smith
2021, "Tilted empirical risk minimization", ICLR, eq. (2), tilt :math:`1/\tau`). With the common
ridge :math:`f_i=\tilde f_i+p(\theta)`, :math:`p(\theta)=\frac12\theta^\top D\theta`, and **any public
shift** :math:`\eta`:

.. math::

    \Phi(\theta)=\max_{\lambda\in\Delta}\sum_i\lambda_if_i-\psi(\lambda)
    =p(\theta)+\eta+\tau\log\frac{S}{n},\qquad S=\sum_ie_i,\quad e_i=e^{(\tilde f_i(\theta)-\eta)/\tau},

    \nabla\Phi(\theta)=D\theta+\frac GS,\qquad G=\sum_ie_i\nabla\tilde f_i(\theta).

So one secure sum per model -- of each client's :math:`(e_i,\ e_i\|\nabla\tilde f_i\|,\ e_i\nabla\tilde
f_i)` -- gives the value and the gradient; the server never needs :math:`\lambda^\star` (the
weights :math:`e_i/S` stay with the clients) and no search in a dual variable: :math:`\eta` only keeps
:math:`e_i` in range (the server sets it to the last model's :math:`\tau\log(S/n)`, so
:math:`e_i\le n`; a larger :math:`e_i` clips and the channel widens its scale, never silently).
:math:`\Phi` is :math:`\mu`-strongly convex, :math:`\mu=\min_jD_{jj}` (the log-sum-exp of convex
:math:`\tilde f_i` is convex; every coordinate penalized), so at the last model :math:`\hat\theta`

.. math::

    \min_\theta\Phi\ \ge\ \Phi(\hat\theta)-\frac{\|\nabla\Phi(\hat\theta)\|^2}{2\mu}
    \quad(=L),\qquad U=\Phi(\hat\theta),

each taken at the end of its interval that keeps it valid:

* **Quantization** (:mod:`.secure_sum`): :math:`|\hat S-S'|\le e_S`, :math:`|\hat G_j-G'_j|\le e_G`
  (per entry; the guard's floor is inside them), :math:`S',G'` the sums of what the clients sent.
* **The clients' floating point**: a client's computed :math:`\tilde f_i` is within :math:`a_i`
  (:meth:`~.clients.PrivateClient.value_allowance`) of the exact one and its gradient within
  :math:`g_i` (the gradient allowance), both summed by :meth:`~.clients.PrivateClient.dual_allowances`
  (rounded up to powers of 256; :math:`A=\sum_ia_i\ge\max_ia_i`, :math:`\Gamma=\sum_ig_i`). The
  computed :math:`e_i` is then within the factor :math:`e^{\pm\delta}` of the exact one,
  :math:`\delta=A/\tau+8u(|\eta|/\tau+746)+8u` (the argument's subtraction and division and
  ``exp``'s own rounding, :math:`u=2^{-53}`; every term sent is a positive normal double, so
  :math:`|(\tilde f_i-\eta)/\tau|\le746`; terms sent as zeros are the guard's floor, inside :math:`e_S`).
  Hence :math:`S\in[e^{-\delta}(\hat S-e_S),
  e^\delta(\hat S+e_S)]`, a shift of at most :math:`\tau\delta` in :math:`\Phi`, and the weights
  :math:`e_i/S` move by at most the factor :math:`e^{\pm2\delta}`, so

  .. math::

      \Big\|\frac GS-\frac{\hat G}{\hat S}\Big\|\le\frac{\sqrt P\,e'_G}{\hat S-e_S}+\frac{\|\hat G\|e_S}
      {\hat S(\hat S-e_S)}+(e^{2\delta}-1)e^{2\delta}\Big(\frac{\hat M+e_M}{\hat S-e_S}+\Gamma\Big)+\Gamma,

  :math:`\hat M\approx\sum_ie_i\|\nabla\tilde f_i\|` (the second summed entry), :math:`e'_G=e_G+u(\hat M+e_M)`
  (the clients' products :math:`e_i\nabla\tilde f_i`).

**What the server learns** (:data:`SERVER_LEARNS`): at each probed model one number about the
losses, :math:`S` -- equivalently the tilted risk :math:`\tau\log\frac1n\sum_ie^{f_i/\tau}`, the value
being certified (the sums at two shifts differ by the public factor :math:`e^{(\eta-\eta')/\tau}`,
so the shift adds nothing) -- a symmetric function of the losses, as ERM's mean is; and the
:math:`e_i`-weighted sums of the gradients and of their norms. It does **not** learn the losses'
distribution as CVaR's dual does (there every level :math:`\eta` is a different function of the
losses; here :math:`\tau` is fixed -- a KL *ball*, whose dual searches :math:`\tau`, would release
:math:`\log\sum_ie^{f_i/\tau}` at many :math:`\tau`, the empirical moment generating function, which
determines the loss distribution; it is not built). The one caveat: :math:`\tau\log\frac Sn` lies
between the losses' mean and their maximum and within :math:`\tau\log n` of the maximum, so for
:math:`\tau` small against the losses' spread it tells the largest client loss (not whose); and a
client whose :math:`e_i` dominates :math:`S` dominates its entries (the guard counts holders, not
shares).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from ...errors import InvalidParameterError
from ...sets import KLPenalty
from .clients import PrivateClient
from .fixed_weight import MAX_RESTARTS, PrivateCertificate, _Server, check_solve_options
from .secure_sum import SumOnlyChannel, SumStillClips, SumWithheld

__all__ = ["KLClient", "kl_clients", "private_kl_solve", "SERVER_LEARNS"]

_U = np.finfo(float).eps / 2
#: the largest |(f_i - eta) / tau| of a term a client sends: exp of it is a positive finite double (module docstring)
_ARG_BOUND = 746.0

#: what the server learns from the KL route (``info["private"]["server_learns"]``)
SERVER_LEARNS = (
    "at every probed model theta: S = sum_i exp((f_i - eta)/tau) with its public shift eta (equivalently the "
    "tilted risk tau log(mean_i exp(f_i/tau)), the value being certified; one number about the losses per model, "
    "a symmetric function of them -- the shift adds nothing), the sums over the clients of exp((f_i - eta)/tau) "
    "times their data-loss gradients and times those gradients' norms, and the clients' floating-point "
    "allowances rounded up to powers of 256; at the start model theta = 0, the clients' mean loss and mean "
    "gradient (to place eta); the total number of rows N; how many clients' entries would clip; "
    "and, per entry, how many clients send a nonzero term (the guard's count). No entry of a released sum is "
    "fewer than min_contributors clients' nonzero terms. The tilted risk lies within tau log n of the largest "
    "client loss: for tau small against the spread of the losses it tells that loss (not whose), and a client "
    "whose term dominates S dominates its entries.")


class KLClient(PrivateClient):
    r"""A :class:`~.clients.PrivateClient` that also answers ``"kl_terms"`` (``theta``, ``eta``,
    ``tau``): :math:`(e_i,\ e_i\|\nabla\tilde f_i\|,\ e_i\nabla\tilde f_i)` with
    :math:`e_i=e^{(\tilde f_i(\theta)-\eta)/\tau}`, :math:`\tilde f_i=f_i-p` its data loss."""

    def contribution(self, query: str, **params) -> np.ndarray:
        if query != "kl_terms":
            return super().contribution(query, **params)
        point = self._at(params["theta"])
        z = (float(point.values[0] - point.penalty) - float(params["eta"])) / float(params["tau"])
        e = float(np.exp(min(z, 700.0)))
        g = point.gradients()[0] - self._mf.penalty_diagonal * point.theta
        return np.concatenate([[e, e * float(np.linalg.norm(g))], e * g])


def kl_clients(problem) -> list:
    """One :class:`KLClient` per client of ``problem``, each holding its own rows only."""
    return [KLClient(i, problem.objectives) for i in range(problem.n_clients)]


class _KLServer:
    """The server's side: the public model description, the channel and the running shift."""

    def __init__(self, problem, channel, tau: float):
        n = problem.n_clients
        self.base = _Server(problem, channel, np.full(n, 1.0))     # N, D; public weights 1: the allowances
        self.D, self.dim, self.n, self.tau, self.channel = self.base.D, self.base.dim, n, tau, channel
        self.mu = float(self.D.min())
        self.eta = 0.0
        self.scale = np.full(self.dim + 2, max(1.0, n / 4.0))
        self.evaluations = 0

    def start(self):
        """The first shift: the clients' mean loss at :math:`\\theta=0` (a secure sum of their
        value and gradient there with the public weights :math:`1/n`), between the smallest and the
        largest client loss, so :math:`|(\\tilde f_i-\\eta)/\\tau|` is at most the losses' spread over
        :math:`\\tau`."""
        s = self.channel.sum("value_gradient", weights=("public", np.full(self.n, 1.0 / self.n)),
                             theta=np.zeros(self.dim))
        self.eta = float(s.value[0])

    def terms(self, theta):
        """The secure sum of the clients' ``"kl_terms"`` at ``theta`` and the current shift (raised by
        :math:`40\\tau` and asked again when some client's term still clips after the channel's
        widenings); sets the next scales and moves the shift to :math:`\\tau\\log(\\hat S/n)`."""
        for _ in range(50):
            eta = self.eta
            try:
                s = self.channel.sum("kl_terms", scale=self.scale, theta=np.asarray(theta, float), eta=eta,
                                     tau=self.tau)
            except SumStillClips:                          # e_i beyond c times the widest scale
                self.eta = eta + 40.0 * self.tau
                continue
            if s.value[0] - s.error[0] > 0:
                break
            self.eta = eta - 20.0 * self.tau               # every e_i below the sum's resolution
        else:
            raise InvalidParameterError("the secure sum of exp((f_i - eta)/tau) was not resolved at any shift eta "
                                        "tried (it clipped or fell below its resolution)")
        self.evaluations += 1
        # the next model's scales from this sum: every client's e_i and e_i |g_ij| are at most the summed
        # e_i resp. e_i |grad f_i| (nonnegative terms), with a factor 2 of room (a miss clips and widens)
        c = self.channel.clipping_range
        top = 2.0 * np.abs(s.value[:2]) / c
        self.scale = np.concatenate([top, np.full(self.dim, top[1])])
        self.scale = np.where(self.scale > 0, self.scale, 1.0)
        self.eta = eta + self.tau * float(np.log(s.value[0] / self.n))
        return s, eta

    def value_gradient(self, theta, s, eta):
        p = 0.5 * float(self.D @ (theta * theta))
        return p + eta + self.tau * float(np.log(s.value[0] / self.n)), self.D * theta + s.value[2:] / s.value[0]

    def certify(self, theta):
        """``(lower, upper, details)`` at ``theta`` (module docstring)."""
        s, eta = self.terms(theta)
        al = self.channel.sum("dual_allowances", theta=theta, weights=1.0, scale=1e-12)
        A, Gam = float(al.upper[0]), float(al.upper[1])
        tau, n, P = self.tau, self.n, self.dim
        delta = A / tau + 8 * _U * (abs(eta) / tau + _ARG_BOUND) + 8 * _U
        S, eS = float(s.value[0]), float(s.error[0])
        M, eM = float(s.value[1]), float(s.error[1])
        M, eM = M, eM + (P + 4) * _U * (M + eM)          # the clients' norms |grad f_i| as computed
        G, eG = s.value[2:], float(s.error[2:].max()) + _U * (M + eM)
        if not S - eS > 0:
            return float("-inf"), float("inf"), {"reason": "the sum S is not resolved above 0"}
        p = 0.5 * float(self.D @ (theta * theta))
        fp = 8 * _U * (abs(p) + abs(eta) + tau * abs(np.log((S + eS) / n)) + tau)
        upper = p + eta + tau * float(np.log((S + eS) / n)) + tau * delta + fp
        value_lower = p + eta + tau * float(np.log((S - eS) / n)) - tau * delta - fp
        grow = float(np.expm1(2 * delta)) * float(np.exp(2 * delta))
        grad_err = (np.sqrt(P) * eG / (S - eS) + float(np.linalg.norm(G)) * eS / (S * (S - eS))
                    + grow * ((M + eM) / (S - eS) + Gam) + Gam)
        g = self.D * theta + G / S
        gnorm = float(np.linalg.norm(g)) * (1 + 8 * _U) + grad_err
        lower = value_lower - gnorm * gnorm / (2 * self.mu) * (1 + 4 * _U)
        return float(lower), float(upper), {
            "gradient_bound": float(gnorm), "gradient_error": float(grad_err), "eta": eta, "delta": float(delta),
            "sum_error": eS, "value_allowance": A, "quantization_value": tau * float(np.log1p(eS / (S - eS)))}


def private_kl_solve(problem, gap_tol: float = 1e-6, max_iter: int = 2000, seed: int = 0,
                     channel: SumOnlyChannel | None = None, min_contributors: int = 2,
                     **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.KLPenalty(n, tau)``, every coordinate penalized) from secure sums only: L-BFGS
    on :math:`\\Phi` (one secure sum per model), then the bound of the module docstring at the last
    model, restarted from it while the gap misses ``gap_tol``. ``channel``: a
    :class:`~.secure_sum.SumOnlyChannel` whose clients answer ``"kl_terms"`` (:func:`kl_clients`;
    default: the simulated one with ``seed`` and ``channel_options``). ``min_contributors`` :math:`k`
    (default 2; 0 or 1: off): the channel's guard, no entry of a released sum is fewer than
    :math:`k` clients' nonzero terms. No opt-in is needed: the server learns one symmetric number
    about the losses per model (:data:`SERVER_LEARNS`)."""
    if not isinstance(getattr(problem, "weights", None), KLPenalty):
        raise InvalidParameterError("private_kl_solve needs problem.weights = drflmodel.sets.KLPenalty(n, tau)")
    check_solve_options(min_contributors, gap_tol, max_iter)
    start = time.perf_counter()
    if channel is None:
        channel = SumOnlyChannel(kl_clients(problem), seed=seed, **channel_options)
    channel.min_contributors = int(min_contributors)
    server = _KLServer(problem, channel, float(problem.weights.tau))
    if server.mu <= 0:
        raise InvalidParameterError("the private KL solve needs every coordinate penalized (l2 > 0 and "
                                    "penalize_intercept=True): its bound is the ridge's strong convexity")
    server.start()
    last = {}

    def fun(theta):
        s, eta = server.terms(theta)
        value, grad = server.value_gradient(theta, s, eta)
        last["value"] = value
        return value, grad

    theta = np.zeros(server.dim)
    lower, upper, details, nit, message = float("-inf"), float("inf"), {}, 0, ""
    restarts = 0
    try:
        for restarts in range(MAX_RESTARTS + 1):     # L-BFGS stops on the sums' noise: restart from its point
            gtol = np.sqrt(0.2 * server.mu * gap_tol * max(abs(last["value"]), 1e-12) / server.dim) if last else 1e-8
            res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(max_iter), "gtol": gtol, "ftol": 0.0, "maxcor": 20})
            theta, nit, message = np.array(res.x), int(res.nit), str(res.message)
            lower, upper, details = server.certify(theta)
            if upper - lower <= gap_tol * max(abs(upper), 1e-12):
                break
    except SumWithheld as err:        # e.g. one client's e_i dominates: the others' terms fall below the floor
        details = {"withheld": str(err), "reason": (
            f"a sum was withheld by the guard (an entry would hold fewer than min_contributors="
            f"{int(min_contributors)} clients' nonzero terms: at tau = {server.tau:g} the other clients' "
            f"exp((f_i - eta)/tau) fall below the sum's floor, so one client's term would be the entry)")}
    certified = np.isfinite(upper - lower) and upper - lower <= gap_tol * max(abs(upper), 1e-12)
    status = "optimal" if certified else "not certified to gap_tol"
    saw = {}
    for s in channel.seen:
        saw[s.query] = saw.get(s.query, 0) + 1
    k = int(min_contributors)
    return PrivateCertificate(
        theta=theta, upper_bound=float(upper), lower_bound=float(lower), status=status,
        kind="KL penalty: log-sum-exp of the clients' terms, strong convexity (private sums)",
        secure_sums=channel.secure_sums, evaluations=server.evaluations,
        bytes_per_client=channel.bytes_per_client, seconds=time.perf_counter() - start,
        quantization={"value": details.get("quantization_value", float("nan")),
                      "sum_error": details.get("sum_error", float("nan")), "quantum": channel.quantum,
                      "stages": int(channel.stages)},
        server_saw={"sums_by_query": saw, "total_rows": server.base.N,
                    "per_client_values": f"none: no entry of a sum held fewer than min_contributors={k} clients' "
                                         f"nonzero terms" if k >= 2 else
                                         "not guarded (min_contributors < 2): an entry nonzero at one client only is its own",
                    "server_learns": SERVER_LEARNS},
        details={**details, "restarts": restarts, "lbfgs_message": message,
                 "lbfgs_iterations": nit, "min_contributors": k, "tau": server.tau})
