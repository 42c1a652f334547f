r"""The private certified solve of a CVaR or :math:`\chi^2` weight set from secure sums: a 1-D dual
in :math:`\eta` whose terms are the clients' (CVaR's smoothed, with a rigorous smoothing allowance).

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

**The clients' floating-point errors** :math:`a_i` on :math:`f_i` (the allowance of
:mod:`drflmodel.problems.minmax.hessian_free_bound`, summed as :math:`c\sum_ia_i`) enter the value
(:math:`s_t` is 1-Lipschitz) and, through :math:`\sigma_i`, the slope and the gradient: since
:math:`\log\sigma'` is :math:`1/t`-Lipschitz, :math:`|\Delta\sigma_i|\le a_i\sigma_i'e^{a_i/t}`, so the
error is proportional to the summed :math:`\sum_i\sigma_i'` -- zero where every :math:`\sigma_i` is
saturated. Each client sums its own :math:`m_i=a_i\sigma_i'e^{a_i/t}` and :math:`m_i\|\nabla\tilde f_i\|`
(its own :math:`a_i`), so only the clients at the kink count. The error still grows like
:math:`a_i/t` for a client sitting at the kink: the smoothing floor :math:`t\log2/\alpha` and this
term trade off (the gap is the best over the :math:`t` tried).

**χ²** (``dm.sets.ChiSquare(n, rho)``, :math:`\rho>0`): its exact dual
:math:`\min_\eta\eta+\frac\rho2+\frac1{2n\rho}\sum_i(f_i-\eta)_+^2` (``ChiSquare.support_expr``) is
the same construction with :math:`h(z)=z_+^2/2`, :math:`c=1/(n\rho)` and no smoothing (:math:`h` is
:math:`C^1`, :math:`h'=z_+` monotone and 1-Lipschitz): :func:`private_chi_square_solve`.

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
from ...sets import CVaR, ChiSquare
from .clients import private_clients
from .fixed_weight import PrivateCertificate, _Server
from .secure_sum import SumOnlyChannel

__all__ = ["private_cvar_solve", "private_chi_square_solve"]

_EPS = np.finfo(float).eps


class _DualServer:
    """The server's side of a 1-D dual in :math:`\\eta'`: :math:`\\varphi(\\eta')=\\eta'+k+c\\sum_ih(z_i)`
    (CVaR: :math:`h=s_t`, :math:`c=1/(\\alpha n)`, :math:`k=0`; :math:`\\chi^2`: :math:`h=z_+^2/2`,
    :math:`c=1/(n\\rho)`, :math:`k=\\rho/2`). Sum layout: :math:`h`, :math:`z_+`, :math:`|z|`, :math:`h'`,
    :math:`h''` (:math:`\\chi^2`: :math:`\\mathbf 1[z>0]`), :math:`\\|\\nabla\\tilde f_i\\|`, :math:`h'\\nabla\\tilde f_i`."""

    def __init__(self, problem, channel, kind: str, c: float, constant: float):
        n = problem.n_clients
        self.kind, self.c, self.constant, self.n = kind, c, constant, n
        self.base = _Server(problem, channel, np.full(n, c))          # public weights c: the allowances
        self.D, self.dim, self.channel = self.base.D, self.base.dim, channel
        self.mu = float(self.D.min())
        self.evaluations = 0
        self.isolating = 0

    def _watch(self, s):
        r"""Count the sums in which one client stands alone above (or below) :math:`\eta` (the
        count :math:`\sum_i\sigma_i` -- CVaR -- or :math:`\sum_i\mathbf 1[z_i>0]` -- :math:`\chi^2` --
        within 0.01 of 1 or :math:`n-1`): there :math:`\sum_i(z_i)_+` (or
        :math:`\sum_i|z_i|-\sum_i(z_i)_+`) is that one client's term, and with :math:`\eta` public its
        data loss (module docstring)."""
        count = s.value[3] if self.kind == "cvar" else s.value[4]
        if min(abs(count - 1), abs(count - (self.n - 1))) < 0.01:
            self.isolating += 1
        return s

    def _scale(self, t, size):
        scale = np.ones(size)
        if self.kind == "cvar":
            scale[4] = 1 / (4 * t)
        return scale

    def eta_sums(self, theta, eta, t):
        return self._watch(self.channel.sum(f"{self.kind}_eta", theta=theta, eta=eta, t=t, scale=self._scale(t, 6)))

    def gradient_sums(self, theta, eta, t):
        self.evaluations += 1
        return self._watch(self.channel.sum(f"{self.kind}_gradient", theta=theta, eta=eta, t=t,
                                            scale=self._scale(t, 8 + self.dim)))

    def slope_allowance(self, value_allow, t):
        """The effect of the clients' value errors :math:`a_i` (:math:`c\\sum_ia_i` = ``value_allow``)
        on :math:`\\varphi'=1-c\\sum_ih'(z_i)`, as a function of a sum at the probe. CVaR:
        :math:`\\log\\sigma'` is :math:`1/t`-Lipschitz, so :math:`|\\Delta\\sigma_i|\\le m_i=a_i\\sigma_i'e^{a_i/t}`,
        each client's own, summed: :math:`c\\sum_im_i` (zero where every :math:`\\sigma_i` is
        saturated). :math:`\\chi^2`: :math:`h'=z_+` is 1-Lipschitz: ``value_allow``."""
        if self.kind != "cvar":
            return lambda s: value_allow
        return lambda s: self.c * s.upper[5 if s.value.size == 6 else 6]


def _eta_bracket(server, theta, eta, t, slope_fp):
    """Newton on :math:`\\varphi(\\eta')` from ``eta``, then a certified bracket and the lower bound on
    :math:`\\min\\varphi` (module docstring): ``(eta_bar, a, b, phi_lower)``."""
    c = server.c
    slope = lambda s: 1 - c * s.value[3]                     # noqa: E731  phi'(eta)
    err = lambda s: c * s.error[3] + slope_fp(s)             # noqa: E731
    lo = hi = None                   # phi'(lo) < 0 < phi'(hi), each certified by its sum's error
    s_lo = s_hi = None
    s = server.eta_sums(theta, eta, t)
    step = t if server.kind == "cvar" else 1e-3
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
    slope_bound = abs(slope(s)) + err(s)
    # shrink the certified bracket towards eta by bisection (the uncertain band around eta* is narrow)
    phi_scale = max(1.0, abs(eta + c * s.value[0]))
    for side in (-1, 1):
        far = lo if side < 0 else hi
        near = eta
        for _ in range(60):
            if slope_bound * abs(far - near) <= 1e-13 * phi_scale:
                break
            mid = 0.5 * (far + near)
            if mid in (far, near):
                break
            sm = server.eta_sums(theta, mid, t)
            if (side < 0 and slope(sm) + err(sm) < 0) or (side > 0 and slope(sm) - err(sm) > 0):
                far = mid
            else:
                near = mid
        if side < 0:
            lo = far
        else:
            hi = far
    # phi(eta*) >= phi(eta) + phi'(eta)(eta* - eta) with eta* in [lo, hi] (convexity)
    phi = eta + c * (s.value[0] - s.error[0])
    lower = phi - slope_bound * (hi - lo) - 4 * _EPS * (abs(eta) + abs(phi))
    return eta, lo, hi, float(lower), float(slope_bound)


def _certify(server, theta, eta, t):
    c = server.c
    value_allow, grad_allow, _ = server.base.allowances(theta, None)   # c * sum_i a_i, c * sum_i (gradient's)
    eta, a, b, phi_lower, slope_bound = _eta_bracket(server, theta, eta, t, server.slope_allowance(value_allow, t))
    s = server.gradient_sums(theta, eta, t)
    p = 0.5 * float(server.D @ (theta * theta))
    zplus, norms = s.upper[1], s.upper[5]
    if server.kind == "cvar":       # h = softplus: 1-Lipschitz, h' = sigma in [0, 1], |h''| <= 1/(4t)
        fp = 8 * _EPS * c * (s.upper[2] + server.n * t)
        value_err = value_allow + fp
        upper = p + eta + c * zplus + value_err                      # the exact dual at eta
        grad_err = grad_allow + c * s.upper[7]            # c sum_i m_i |grad f_i| (slope_allowance)
        floor = t * np.log(2) / server.alpha
    else:                           # h = z_+^2 / 2: |dh| <= (z_+ + a) a, h' = z_+, h'' in {0, 1}
        fp = 8 * _EPS * c * (s.upper[0] + s.upper[2])
        value_err = value_allow * zplus + value_allow ** 2 / (2 * c) + fp
        upper = p + eta + server.constant + c * s.upper[0] + value_err
        grad_err = grad_allow * zplus + value_allow * norms
        floor = 0.0
    details = {"t": t, "smoothing_floor": floor, "eta_prime": eta}
    if a is None:
        return float("-inf"), upper, {**details, "reason": "no certified bracket of eta"}, eta
    g = server.D * theta + c * s.value[8:]
    e_g = c * float(s.error[8:].max())
    # every h'(z_i) falls as eta grows, so sum_i |h'_i(eta*) - h'_i(eta)| = |phi'(eta)| / c
    shift = slope_bound * norms
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * e_g + shift + grad_err
    lower = p + server.constant + phi_lower - value_err - gnorm * gnorm / (2 * server.mu) * (1 + 4 * _EPS) \
        - floor * (1 + 4 * _EPS)
    return float(lower), float(upper), {**details, "gradient_bound": gnorm, "eta_bracket": float(b - a)}, eta


def private_cvar_solve(problem, gap_tol: float = 1e-6, t_start: float = 1e-2, t_min: float = 1e-10,
                       max_iter: int = 3000, seed: int = 0, channel: SumOnlyChannel | None = None,
                       **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.CVaR(n, alpha)``, every coordinate penalized) from secure sums only (module
    docstring)."""
    if not isinstance(getattr(problem, "weights", None), CVaR):
        raise InvalidParameterError("private_cvar_solve needs problem.weights = drflmodel.sets.CVaR(n, alpha)")
    if not 0 < t_min <= t_start:
        raise InvalidParameterError(f"need 0 < t_min <= t_start; got t_min={t_min}, t_start={t_start}")
    alpha = float(problem.weights.alpha)
    if not alpha < 1:
        raise InvalidParameterError("alpha = 1 is the uniform average (the dual's eta runs to -infinity): use "
                                    "private_fixed_weight_solve(problem, weights=[1/n] * n)")
    return _dual_solve(problem, "cvar", 1.0 / (alpha * problem.n_clients), 0.0, alpha, gap_tol, float(t_start),
                       t_min, max_iter, seed, channel, channel_options)


def private_chi_square_solve(problem, gap_tol: float = 1e-6, max_iter: int = 3000, seed: int = 0,
                             channel: SumOnlyChannel | None = None, **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.ChiSquare(n, rho)``, :math:`\\rho>0`, every coordinate penalized) from secure sums
    only: the set's exact dual :math:`\\min_\\eta\\,\\eta+\\frac\\rho2+\\frac1{2n\\rho}\\sum_i(f_i-\\eta)_+^2`
    (``ChiSquare.support_expr``) is :math:`C^1`, so no smoothing (module docstring, with
    :math:`h=z_+^2/2`)."""
    if not isinstance(getattr(problem, "weights", None), ChiSquare):
        raise InvalidParameterError("private_chi_square_solve needs problem.weights = drflmodel.sets.ChiSquare(n, rho)")
    rho = float(problem.weights.rho)
    if not rho > 0:
        raise InvalidParameterError("rho = 0 makes the chi-square set's value the largest client loss, one "
                                    "client's value: private mode refuses it")
    return _dual_solve(problem, "chi_square", 1.0 / (problem.n_clients * rho), rho / 2, None, gap_tol, None,
                       None, max_iter, seed, channel, channel_options)


def _dual_solve(problem, kind, c, constant, alpha, gap_tol, t, t_min, max_iter, seed, channel, channel_options):
    if not 0 < gap_tol < 1:
        raise InvalidParameterError(f"gap_tol must be in (0, 1); got {gap_tol}")
    start = time.perf_counter()
    if channel is None:
        channel = SumOnlyChannel(private_clients(problem), seed=seed, **channel_options)
    server = _DualServer(problem, channel, kind, c, constant)
    server.alpha = alpha
    if server.mu <= 0:
        raise InvalidParameterError(f"the private {kind} solve needs every coordinate penalized (l2 > 0 and "
                                    f"penalize_intercept=True): its bound is the ridge's strong convexity")
    P = server.dim
    x = np.zeros(P + 1)
    best = None
    for attempt in range(60):
        def fun(x, t=t):
            s = server.gradient_sums(x[:P], x[P], t)
            theta = x[:P]
            value = 0.5 * float(server.D @ (theta * theta)) + x[P] + constant + c * s.value[0]
            grad = np.concatenate([server.D * theta + c * s.value[8:], [1 - c * s.value[3]]])
            return value, grad

        res = minimize(fun, x, jac=True, method="L-BFGS-B",
                       options={"maxiter": int(max_iter), "gtol": 1e-12, "ftol": 0.0, "maxcor": 20})
        x = np.array(res.x)
        lower, upper, details, eta = _certify(server, x[:P], x[P], t)
        x[P] = eta
        if best is None or upper - lower < best[1] - best[0]:
            best = (lower, upper, details, x.copy(), int(res.nit))
        if upper - lower <= gap_tol * abs(upper):
            break
        if kind == "cvar":
            if t / 10 < t_min:
                break
            t /= 10
        elif attempt >= 3:               # chi-square: L-BFGS restarts only
            break
    lower, upper, details, x, nit = best
    status = "optimal" if upper - lower <= gap_tol * max(abs(upper), 1e-12) else "not certified to gap_tol"
    saw = {}
    for s in channel.seen:
        saw[s.query] = saw.get(s.query, 0) + 1
    what = ("CVaR: smoothed Rockafellar-Uryasev dual" if kind == "cvar" else "chi-square: its exact dual")
    return PrivateCertificate(
        theta=x[:P], upper_bound=float(upper), lower_bound=float(lower), status=status,
        kind=f"{what}, strong convexity (private sums)",
        secure_sums=channel.secure_sums, evaluations=server.evaluations,
        bytes_per_client=channel.bytes_per_client, seconds=time.perf_counter() - start,
        quantization={"quantum": channel.quantum, "stages": int(channel.stages)},
        server_saw={"sums_by_query": saw, "total_rows": server.base.N,
                    "per_client_values": f"none sent; {server.isolating} sum(s) had one client alone above or below "
                                         f"eta (its data loss follows from the public eta)"},
        details={**details, "lbfgs_iterations": nit, "isolating_sums": server.isolating})
