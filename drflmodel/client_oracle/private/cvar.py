r"""The private certified solve of a CVaR weight set from secure sums: the Rockafellar--Uryasev dual,
smoothed, with a rigorous smoothing allowance.

For :math:`\Lambda=\{\lambda\in\Delta:\lambda_i\le1/(\alpha n)\}` (``dm.sets.CVaR(n, alpha)``) the
objective is (R. T. Rockafellar and S. Uryasev 2000, "Optimization of conditional value-at-risk",
Journal of Risk 2(3), Theorem 1)

.. math::

    \max_{\lambda\in\Lambda}\sum_i\lambda_if_i(\theta)=\min_\eta\ \eta+c\sum_i(f_i(\theta)-\eta)_+,
    \qquad c=\frac1{\alpha n},

a sum over clients once :math:`\eta` is public. Write :math:`f_i=\tilde f_i+p(\theta)` with the common
ridge :math:`p(\theta)=\frac12\theta^\top D\theta` and substitute :math:`\eta'=\eta-p(\theta)`:

.. math::

    G(\theta,\eta')=p(\theta)+\eta'+c\sum_i(\tilde f_i(\theta)-\eta')_+ ,

jointly convex in :math:`(\theta,\eta')` plus :math:`p`, so :math:`\mu=\min_jD_{jj}`-strongly convex in
:math:`\theta` (every coordinate penalized). Replace :math:`x_+` by the softplus
:math:`s_t(x)=t\log(1+e^{x/t})`, :math:`x_+\le s_t(x)\le x_++t\log2`: :math:`G\le G_t\le G+t\log2/\alpha`,
and :math:`G_t` is smooth, its value and gradient sums of each client's
:math:`(s_t(z_i),\ \sigma(z_i/t)(\nabla\tilde f_i,-1))`, :math:`z_i=\tilde f_i-\eta'`.

* **U** at :math:`\hat\theta`: the dual at :math:`\bar\eta'` (any :math:`\eta` gives an upper bound):
  :math:`p(\hat\theta)+\bar\eta'+c\sum_i(z_i)_+`, a secure sum, at its upper end.
* **L**: :math:`h(\theta)=\min_{\eta'}G_t(\theta,\eta')` keeps the modulus :math:`\mu` (a partial
  minimum of a jointly convex function plus :math:`p`), so :math:`\min G_t\ge h(\hat\theta)-\|\nabla
  h(\hat\theta)\|^2/(2\mu)`. :math:`\varphi(\eta')=\eta'+c\sum_is_t(z_i)` is 1-D and strictly convex:
  an expansion, then safeguarded Newton on secure sums of :math:`\sigma_i` and :math:`\sigma_i'`,
  give :math:`\bar\eta'` and a bracket :math:`[a,b]\ni\eta'^\star` whose derivative signs the sums
  certify (:math:`\varphi'=1-c\sum_i\sigma_i`, :math:`\sigma_i=\sigma(z_i/t)`), and
  :math:`\min\varphi\ge\varphi(\bar\eta')-|\varphi'(\bar\eta')|(b-a)` (convexity).
  :math:`\nabla h(\hat\theta)=\nabla_\theta G_t(\hat\theta,\eta'^\star)` (Danskin); every
  :math:`\sigma_i` falls as :math:`\eta'` grows, so
  :math:`\sum_i|\sigma_i(\eta'^\star)-\sigma_i(\bar\eta')|=|\sum_i\sigma_i(\bar\eta')-1/c|=|\varphi'(\bar\eta')|/c`
  and the gradient at :math:`\bar\eta'` is within :math:`|\varphi'(\bar\eta')|\sum_i\|\nabla\tilde f_i\|`
  of :math:`\nabla h` (a secure sum bounds the max).  Finally :math:`L=\min G_t-t\log2/\alpha\le\min G`.

The smoothing continues (:math:`t\leftarrow t/10`, warm started) until the gap is within
``gap_tol`` or :math:`t` reaches ``t_min``; the floor :math:`t\log2/\alpha` is reported.

**What the server learns**: the sums :math:`\sum_is_t(z_i)`, :math:`\sum_i(z_i)_+`,
:math:`\sum_i|z_i|`, :math:`\sum_i\sigma_i`, :math:`\sum_i\sigma_i'`, :math:`\sum_i\|\nabla\tilde f_i\|`
and :math:`\sum_i\sigma_i\nabla\tilde f_i` at every probed :math:`(\theta,\eta')`. For small
:math:`t`, :math:`\sum_i\sigma_i` is the number of clients whose loss exceeds :math:`\eta`, and the
1-D search probes it near the :math:`\alpha`-quantile: the server learns that quantile of the
clients' losses (to the search's precision) and how many clients are near it -- no client's own
value, but any exact CVaR certificate carries this much about the loss distribution. **Measured
leak**: when a probe puts exactly one client above :math:`\eta` (or one below),
:math:`\sum_i(z_i)_+` (or :math:`\sum_i|z_i|-\sum_i(z_i)_+`) is that one client's term and, with
:math:`\eta` public, reveals its data loss (not which client it is). The server counts such sums from
their soft count (``details['isolating_sums']``); on breast cancer (4 sites, :math:`\alpha=0.5`) a few
of the solve's sums are such. A count-first guard (a secure sum of :math:`\mathbf 1[z_i>0]` before
each probe, skipping probes with a count of 1 or :math:`n-1`) would close it; not built in this cut.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from ...errors import InvalidParameterError
from ...sets import CVaR
from .clients import private_clients
from .fixed_weight import PrivateCertificate, _Server
from .secure_sum import SumOnlyChannel

__all__ = ["private_cvar_solve"]

_EPS = np.finfo(float).eps


class _CVaRServer:
    def __init__(self, problem, channel, alpha):
        n = problem.n_clients
        self.c = 1.0 / (alpha * n)
        self.alpha = alpha
        self.base = _Server(problem, channel, np.full(n, self.c))     # public weights c: the allowances
        self.D, self.dim, self.channel = self.base.D, self.base.dim, channel
        self.mu = float(self.D.min())
        self.evaluations = 0

        self.isolating = 0
        self.n = problem.n_clients

    def _watch(self, s):
        r"""Count the sums in which one client stands alone above (or below) :math:`\eta` (its soft
        count :math:`\sum_i\sigma_i` within 0.01 of 1 or :math:`n-1`): there :math:`\sum_i(z_i)_+`
        (or :math:`\sum_i|z_i|-\sum_i(z_i)_+`) is that one client's term, and with :math:`\eta`
        public its data loss (module docstring)."""
        count = s.value[3]
        if min(abs(count - 1), abs(count - (self.n - 1))) < 0.01:
            self.isolating += 1
        return s

    def eta_sums(self, theta, eta, t):
        return self._watch(self.channel.sum("cvar_eta", theta=theta, eta=eta, t=t, scale=[1, 1, 1, 1, 1 / (4 * t)]))

    def gradient_sums(self, theta, eta, t):
        self.evaluations += 1
        scale = np.ones(6 + self.dim)
        scale[4] = 1 / (4 * t)
        return self._watch(self.channel.sum("cvar_gradient", theta=theta, eta=eta, t=t, scale=scale))


def _eta_bracket(server, theta, eta, t):
    """Newton on :math:`\\varphi(\\eta')` from ``eta``, then a certified bracket and the lower bound on
    :math:`\\min\\varphi` (module docstring): ``(eta_bar, a, b, phi_lower)``."""
    c = server.c
    slope = lambda s: 1 - c * s.value[3]                     # noqa: E731  phi'(eta)
    err = lambda s: c * s.error[3]                           # noqa: E731
    lo = hi = None                   # phi'(lo) < 0 < phi'(hi), each certified by its sum's error
    s_lo = s_hi = None
    s = server.eta_sums(theta, eta, t)
    step = t
    for _ in range(200):                                     # expand until both signs are certified
        d = slope(s)
        if d + err(s) < 0:
            lo, s_lo = eta, s
        elif d - err(s) > 0:
            hi, s_hi = eta, s
        if lo is not None and hi is not None:
            break
        eta = eta + step if hi is None else eta - step
        step *= 2
        s = server.eta_sums(theta, eta, t)
    if lo is None or hi is None:
        return eta, None, None, float("-inf"), float("inf")
    eta = 0.5 * (lo + hi)
    s = server.eta_sums(theta, eta, t)
    for _ in range(200):                                     # safeguarded Newton inside [lo, hi]
        d, e_d, h = slope(s), err(s), c * s.value[4]
        if d + e_d < 0:
            lo, s_lo = eta, s
        elif d - e_d > 0:
            hi, s_hi = eta, s
        else:
            break                                            # |phi'| within its error: converged
        trial = eta - d / h if h > 0 else 0.5 * (lo + hi)
        if not lo < trial < hi:
            trial = 0.5 * (lo + hi)
        if trial == eta or hi - lo <= 4 * _EPS * max(abs(eta), 1.0):
            break
        eta = trial
        s = server.eta_sums(theta, eta, t)
    # phi(eta*) >= phi(eta) + phi'(eta)(eta* - eta) with eta* in [lo, hi] (convexity)
    slope_bound = abs(slope(s)) + err(s)
    phi = eta + c * (s.value[0] - s.error[0])
    lower = phi - slope_bound * (hi - lo) - 4 * _EPS * (abs(eta) + abs(phi))
    return eta, lo, hi, float(lower), float(slope_bound)


def _certify(server, theta, eta, t):
    c = server.c
    eta, a, b, phi_lower, slope_bound = _eta_bracket(server, theta, eta, t)
    s = server.gradient_sums(theta, eta, t)
    value_allow, grad_allow, _ = server.base.allowances(theta, None)
    fp = 8 * _EPS * c * (s.upper[2] + server.base.n * t)              # the clients' softplus / (z)_+
    p = 0.5 * float(server.D @ (theta * theta))
    upper = p + eta + c * s.upper[1] + value_allow + fp
    details = {"t": t, "smoothing_floor": t * np.log(2) / server.alpha, "eta_prime": eta}
    if a is None:
        return float("-inf"), upper, {**details, "reason": "no certified bracket of eta"}, eta
    g = server.D * theta + c * s.value[6:]
    e_g = c * float(s.error[6:].max())
    # every sigma_i falls as eta grows, so sum_i |sigma_i(eta*) - sigma_i(eta)| = |phi'(eta)| / c
    shift = slope_bound * s.upper[5]
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * e_g + shift + grad_allow
    lower = p + phi_lower - value_allow - fp - gnorm * gnorm / (2 * server.mu) * (1 + 4 * _EPS) \
        - t * np.log(2) / server.alpha * (1 + 4 * _EPS)
    return float(lower), float(upper), {**details, "gradient_bound": gnorm, "eta_bracket": float(b - a)}, eta


def private_cvar_solve(problem, gap_tol: float = 1e-6, t_start: float = 1e-2, t_min: float = 1e-10,
                       max_iter: int = 3000, seed: int = 0, channel: SumOnlyChannel | None = None,
                       **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.CVaR(n, alpha)``, every coordinate penalized) from secure sums only (module
    docstring)."""
    if not isinstance(getattr(problem, "weights", None), CVaR):
        raise InvalidParameterError("private_cvar_solve needs problem.weights = drflmodel.sets.CVaR(n, alpha)")
    if not 0 < gap_tol < 1:
        raise InvalidParameterError(f"gap_tol must be in (0, 1); got {gap_tol}")
    if not 0 < t_min <= t_start:
        raise InvalidParameterError(f"need 0 < t_min <= t_start; got t_min={t_min}, t_start={t_start}")
    if not problem.weights.alpha < 1:
        raise InvalidParameterError("alpha = 1 is the uniform average (the dual's eta runs to -infinity): use "
                                    "private_fixed_weight_solve(problem, weights=[1/n] * n)")
    start = time.perf_counter()
    if channel is None:
        channel = SumOnlyChannel(private_clients(problem), seed=seed, **channel_options)
    server = _CVaRServer(problem, channel, float(problem.weights.alpha))
    if server.mu <= 0:
        raise InvalidParameterError("the private CVaR solve needs every coordinate penalized (l2 > 0 and "
                                    "penalize_intercept=True): its bound is the ridge's strong convexity")
    c, P = server.c, server.dim
    x = np.zeros(P + 1)
    t = float(t_start)
    best = None
    while True:
        def fun(x, t=t):
            s = server.gradient_sums(x[:P], x[P], t)
            theta = x[:P]
            value = 0.5 * float(server.D @ (theta * theta)) + x[P] + c * s.value[0]
            grad = np.concatenate([server.D * theta + c * s.value[6:], [1 - c * s.value[3]]])
            return value, grad

        res = minimize(fun, x, jac=True, method="L-BFGS-B",
                       options={"maxiter": int(max_iter), "gtol": 1e-12, "ftol": 0.0, "maxcor": 20})
        x = np.array(res.x)
        lower, upper, details, eta = _certify(server, x[:P], x[P], t)
        x[P] = eta
        if best is None or upper - lower < best[1] - best[0]:
            best = (lower, upper, details, x.copy(), int(res.nit))
        if upper - lower <= gap_tol * abs(upper) or t / 10 < t_min:
            break
        t /= 10
    lower, upper, details, x, nit = best
    status = "optimal" if upper - lower <= gap_tol * max(abs(upper), 1e-12) else "not certified to gap_tol"
    saw = {}
    for s in channel.seen:
        saw[s.query] = saw.get(s.query, 0) + 1
    return PrivateCertificate(
        theta=x[:P], upper_bound=float(upper), lower_bound=float(lower), status=status,
        kind="CVaR: smoothed Rockafellar-Uryasev dual, strong convexity (private sums)",
        secure_sums=channel.secure_sums, evaluations=server.evaluations,
        bytes_per_client=channel.bytes_per_client, seconds=time.perf_counter() - start,
        quantization={"quantum": channel.quantum, "stages": int(channel.stages)},
        server_saw={"sums_by_query": saw, "total_rows": server.base.N, "per_client_values": "none"},
        details={**details, "lbfgs_iterations": nit, "isolating_sums": server.isolating})
