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

**CVaR under the guard** (:func:`_guarded_cvar_solve`, ``min_contributors`` :math:`\ge2`): the
bound above needs :math:`\sum_i\sigma_i'` and the clients' :math:`m_i` at the kink, which only the
clients within a few :math:`t` of :math:`\eta'` hold -- with two clients tied at the CVaR level, often
one alone, and the guard withholds them. So the guarded route asks none of them. **L** is weak
duality at the clients' own weights: each client computes
:math:`\lambda_i=c\,(\sigma(z_i/t)-\kappa)_+/(1-\kappa)\in[0,c]` at the public
:math:`(\hat\theta,\eta_L,t)` (:meth:`~.clients.PrivateClient.cvar_weight`), a secure sum certifies
:math:`s=\sum_i\lambda_i\ge1` (:func:`_weights_level` picks :math:`\eta_L`), so
:math:`\lambda/s\in\Lambda` and

.. math::

    \max_{\lambda\in\Lambda}\sum_i\lambda_if_i(\theta^\star)\ \ge\ \min_\theta\max_{\lambda\in\Lambda}
    \sum_i\lambda_if_i(\theta)\ \ge\ \frac1s\min_\theta\sum_i\lambda_if_i(\theta),

a fixed-weight problem certified from sums of :math:`\lambda_i(f_i,\nabla f_i)` and the weighted
bound terms (:func:`_weighted_bound`, modulus :math:`s\min_jD_{jj}`), divided by
the upper end of :math:`s`. No smoothing floor, no kink term: :math:`t` only decides how close the
weights are to the optimal ones. **U** is the dual at any level: :math:`p(\theta)+\eta'+c\sum_is_t(z_i)`
at its upper end plus :math:`c\sum_ia_i`, at the descent's model and at the weighted problem's
minimizer. The descent (L-BFGS in :math:`\theta`, :math:`\eta'` solved inside each evaluation by
:func:`_root_eta`) uses only the softplus, :math:`\sigma_i` and :math:`\sigma_i\nabla\tilde f_i`,
which every client above :math:`\eta'-20t` holds.

**Per-client caps** (FAFL's ``HCVaR(p, alpha)``, :math:`\Lambda=\{\lambda\in\Delta:\lambda_i\le c_i\}`,
:math:`c_i=p_i/\alpha_i` public): the dual is :math:`\min_\eta\eta+\sum_ic_i(f_i-\eta)_+`. With
:math:`c=\bar c=\max_jc_j` above and each client multiplying its terms and its weight by its own
:math:`r_i=c_i/\bar c\le1` (:attr:`~.clients.PrivateClient.cap_ratio`), every :math:`c\sum_i(\cdot)` of
the server is :math:`\sum_ic_i(\cdot)`: slope :math:`1-\sum_ic_i\sigma_i`, weights
:math:`\lambda_i\le c_i`, the same certificate. The error terms that count clients (:math:`cn\cdot`
a per-client bound) stay upper bounds (:math:`\sum_ir_i\le n`); the allowances are summed at
:math:`\bar c\ge c_i`; one more rounding per term (:math:`r_i\cdot`) is inside the factor 8 of the
softplus bound; the guard's counts stay plain counts, and a withheld probe's sign is certified by
the sums of the largest / smallest caps (:meth:`_DualServer._count_sign`). :func:`private_hcvar_solve`.

**χ²** (``dm.sets.ChiSquare(n, rho)``, :math:`\rho>0`): its exact dual
:math:`\min_\eta\eta+\frac\rho2+\frac1{2n\rho}\sum_i(f_i-\eta)_+^2` (``ChiSquare.support_expr``) is
the same construction with :math:`h(z)=z_+^2/2`, :math:`c=1/(n\rho)` and no smoothing (:math:`h` is
:math:`C^1`, :math:`h'=z_+` monotone and 1-Lipschitz): :func:`private_chi_square_solve`.

The smoothing continues (:math:`t\leftarrow t/10`, warm started) until the gap is within
``gap_tol`` or :math:`t` reaches ``t_min``; the floor :math:`t\log2/\alpha` is reported.

**What the server learns** (:data:`SERVER_LEARNS`, ``reveal_loss_distribution=True`` required): the
sums over the clients of :math:`s_t(z_i)`, :math:`\sigma_i`, :math:`\sigma_i'`, the clients'
:math:`m_i`, :math:`\|\nabla\tilde f_i\|` and :math:`\sigma_i\nabla\tilde f_i` at every probed
:math:`(\theta,\eta')` (never :math:`\sum_i(z_i)_+` or :math:`\sum_i|z_i|`, which would hold the clients
just above or below :math:`\eta` alone); for small :math:`t`, :math:`\sum_i\sigma_i` is the number of
clients above :math:`\eta`, and the sums at many levels give the unlabeled empirical distribution of
the client losses near the levels probed. **The guard** (``min_contributors`` :math:`k`, default 2;
:meth:`~.secure_sum.SumOnlyChannel.sum`): no entry of a released sum holds fewer than :math:`k`
clients' nonzero terms; the sums at other levels are withheld, and the search in :math:`\eta` steers
around them by secure counts (:class:`_DualServer`). It does not stop differencing two released sums
whose holders differ by one client.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ...errors import InvalidParameterError
from ...sets import CVaR, ChiSquare, HCVaR
from .clients import SIGMA_CUT, WEIGHT_CUT, cap_ratios, private_clients
from .fixed_weight import PrivateCertificate, _Server
from .secure_sum import SumOnlyChannel, SumWithheld

__all__ = ["private_cvar_solve", "private_hcvar_solve", "private_chi_square_solve"]

_EPS = np.finfo(float).eps


@dataclass
class _Probe:
    """One probe of the dual at :math:`(\\theta,\\eta')`: the released sums ``s`` (a
    :class:`~.secure_sum.SecureSum`), or ``None`` when the guard withheld them; then ``sign`` is the
    sign of :math:`\\varphi'` the counts certify (0: none) and ``steer`` the sign it is taken to have
    (where the search goes: 0 nowhere)."""

    eta: float
    s: object = None
    sign: int = 0
    steer: int = 0


class Withheld(InvalidParameterError):
    """The dual's optimum in :math:`\\eta` lies where fewer than ``min_contributors`` clients are on
    one side: its sums are never released, so no certificate is possible at that level."""


class _DualServer:
    """The server's side of a 1-D dual in :math:`\\eta'`: :math:`\\varphi(\\eta')=\\eta'+k+c\\sum_ih(z_i)`
    (CVaR: :math:`h=s_t`, :math:`c=1/(\\alpha n)`, :math:`k=0`; :math:`\\chi^2`: :math:`h=z_+^2/2`,
    :math:`c=1/(n\\rho)`, :math:`k=\\rho/2`). Sum layout: :math:`h`, :math:`z_+`, :math:`|z|`, :math:`h'`,
    :math:`h''` (:math:`\\chi^2`: :math:`\\mathbf 1[z>0]`), :math:`\\|\\nabla\\tilde f_i\\|`, :math:`h'\\nabla\\tilde f_i`.

    **The guard** (``min_contributors`` :math:`=k\\ge2`, set on the channel): every dual sum is a
    guarded :meth:`~.secure_sum.SumOnlyChannel.sum` -- a secure count of the clients sending a nonzero
    term in each entry first, the values only when every entry holds 0 or at least :math:`k`
    clients' terms (:class:`~.secure_sum.SumWithheld` otherwise). The clients send their softplus,
    :math:`\\sigma` and gradient terms as exact zeros below :math:`-m_i` and :math:`\\sigma'`, :math:`m_i`
    as zeros beyond :math:`\\pm m_i` (:meth:`PrivateClient.margin`), so the holders are the clients
    near or above :math:`\\eta`. A withheld probe costs one more secure count
    (:meth:`PrivateClient.dual_count`: the clients above :math:`\\eta-m_i` and above
    :math:`\\eta+m_i`), which for CVaR certifies the sign of :math:`\\varphi'` when ``touch``
    :math:`<\\alpha n` or ``above`` :math:`>\\alpha n` (below :math:`-m_i` a client's
    :math:`\\sigma_i<e^{-40}`, above :math:`m_i` it exceeds :math:`1-e^{-40}`), and otherwise steers the
    search; a withheld :math:`\\chi^2` probe is certified only when no client is above
    :math:`\\eta` (:math:`\\varphi'=1`)"""

    def __init__(self, problem, channel, kind: str, c: float, constant: float, min_contributors: int = 2,
                 caps=None):
        n = problem.n_clients
        self.kind, self.c, self.constant, self.n = kind, c, constant, n
        # per-client caps c_i (FAFL, public; c = max c_i and the clients weight their terms by c_i / c):
        # the counts' bounds take the sums of the largest / smallest caps (_count_sign)
        self.caps = None if caps is None else np.sort(np.asarray(caps, float))
        self.k = int(min_contributors)
        self.base = _Server(problem, channel, np.full(n, c))          # public weights c: the allowances
        self.D, self.dim, self.channel = self.base.D, self.base.dim, channel
        self.mu = float(self.D.min())
        self.evaluations = 0
        self.isolating = 0
        self.count_sums = 0
        self.withheld = 0
        # the guarded descent's memory across evaluations: the last released softplus sum (level, value),
        # the secant slope of the dual in eta and the eta grid's width, per smoothing level t
        self.soft_sum = (0.0, 0.0)
        self.psi_slope: dict = {}
        self.grid_width: dict = {}

    def _watch(self, s):
        r"""Count the released sums in which one client stands alone above (or below) :math:`\\eta`
        (the count :math:`\\sum_i\\sigma_i` -- CVaR -- or :math:`\\sum_i\\mathbf 1[z_i>0]` -- :math:`\\chi^2` --
        within 0.01 of 1 or :math:`n-1`) when the guard is off (:math:`k\\le1`): there the dual sum
        is that one client's term, and with :math:`\\eta` public its data loss. With the guard no
        released entry holds fewer than :math:`k` clients' nonzero terms (the channel's holders round),
        so it stays 0."""
        count = s.value[3] if self.kind == "cvar" else s.value[4]
        if self.k <= 1 and min(abs(count - 1), abs(count - (self.n - 1))) < 0.01:
            self.isolating += 1
        return s

    def allowances(self, theta):
        """Upper bounds on :math:`c\\sum_ia_i` and on the clients' summed gradient allowance: a secure
        sum of each client's own, rounded up to a power of 256 (:meth:`PrivateClient.dual_allowances`;
        not the ``"bound_terms"`` magnitudes, which hold each client's loss)."""
        s = self.channel.sum("dual_allowances", theta=theta, weights=self.c, scale=1e-12)   # ~ c n u N_i
        return float(s.upper[0]), float(s.upper[1])

    def counts(self, theta, eta, t):
        """The guard's counts at a withheld probe (:meth:`PrivateClient.dual_count`): how many
        clients' loss is above :math:`\\eta'-m_i` and above :math:`\\eta'+m_i`; a sum of flags,
        itself not guarded."""
        s = self.channel.sum("dual_count", stages=1, min_contributors=0, theta=theta, eta=np.array([eta]), t=t,
                             kind=self.kind)
        self.count_sums += 1
        if np.any(s.error >= 0.5):
            raise InvalidParameterError("the secure count of the dual's guard is not exact; raise quantization_range")
        return tuple(int(x) for x in np.rint(s.value))

    def _count_sign(self, counts):
        """The sign of :math:`\\varphi'` the counts certify (0: none), and where to steer."""
        touch, above = counts
        n, k = self.n, self.k
        if self.kind == "cvar":          # sum_i sigma_i (exact) in [above (1 - e^-40), touch + n e^-40]
            if self.caps is None:
                most, least = self.c * (touch + n * 1e-17), self.c * above
            else:                        # sum_i c_i sigma_i: at most the `touch` largest caps, at least the
                top = float(self.caps[n - touch:].sum()) if touch else 0.0      # `above` smallest
                most, least = top + self.c * n * 1e-17, float(self.caps[:above].sum())
            if most < 1.0 - 1e-12:
                return 1, 1
            if least * (1 - 1e-17) > 1.0 + 1e-12:
                return -1, -1
        elif touch == 0:                 # chi2: every z_i <= 0 (as computed; a_i in the certificate)
            return 1, 1
        if 0 < touch < k:                # few clients above: eta is taken as too high
            return 0, 1
        if 0 < n - touch < k:            # few below: too low
            return 0, -1
        if self.kind == "cvar":          # steer by the estimate sigma_i = 1/2 at the kink
            c = self.c if self.caps is None else float(self.caps.mean())
            guess = 1.0 - c * (above + 0.5 * (touch - above))
            return 0, int(np.sign(guess))
        return 0, 0

    def probe(self, theta, eta, t, gradient: bool = True) -> _Probe:
        """The dual sums at :math:`(\\theta,\\eta')` unless the channel's guard withholds them
        (class docstring)."""
        query, size = (f"{self.kind}_gradient", 8 + self.dim) if gradient else (f"{self.kind}_eta", 6)
        try:
            s = self.channel.sum(query, theta=theta, eta=eta, t=t, scale=self._scale(t, size))
        except SumWithheld:
            self.withheld += 1
            sign, steer = self._count_sign(self.counts(theta, eta, t))
            return _Probe(eta, None, sign, steer)
        if gradient:
            self.evaluations += 1
        return _Probe(eta, self._watch(s))

    def _scale(self, t, size):
        """Public scales: :math:`\\sigma'\\le1/(4t)`; the clients' :math:`m_i\\approx a_i\\sigma_i'` with
        :math:`a_i` of the order of :math:`10^{-13}` (widened when larger)."""
        scale = np.ones(size)
        if self.kind == "cvar":
            scale[4] = 1 / (4 * t)
            scale[5 if size == 6 else 6] = 1e-13 / t
            if size > 6:
                scale[7] = 1e-13 / t
        return scale

    def slope_allowance(self, value_allow, t):
        """The effect of the clients' value errors :math:`a_i` (:math:`c\\sum_ia_i` = ``value_allow``)
        on :math:`\\varphi'=1-c\\sum_ih'(z_i)`, as a function of a sum at the probe. CVaR:
        :math:`\\log\\sigma'` is :math:`1/t`-Lipschitz, so :math:`|\\Delta\\sigma_i|\\le m_i=a_i\\sigma_i'e^{a_i/t}`,
        each client's own, summed: :math:`c\\sum_im_i` (zero where every :math:`\\sigma_i` is
        saturated). :math:`\\chi^2`: :math:`h'=z_+` is 1-Lipschitz: ``value_allow``."""
        if self.kind != "cvar":
            return lambda s: value_allow
        # the terms the clients sent as zeros (PrivateClient.margin): sigma_i < e^-40 below -m_i, and
        # |d sigma_i| <= a_i e^-40 / t beyond +-m_i
        zeros = self.c * self.n * _ZERO + value_allow * _ZERO / t
        return lambda s: self.c * s.upper[5 if s.value.size == 6 else 6] + zeros


#: e^-40 and above: what a term the clients send as zero can be at most (relative; PrivateClient.margin)
_ZERO = 4.3e-18


def _sign(p, slope, err):
    """The certified sign of :math:`\\varphi'` at a probe (0: not certified)."""
    if p.s is None:
        return p.sign
    d, e = slope(p.s), err(p.s)
    return -1 if d + e < 0 else (1 if d - e > 0 else 0)


def _eta_bracket(server, theta, eta, t, slope_fp):
    """Newton on :math:`\\varphi(\\eta')` from ``eta``, then a certified bracket and the lower bound on
    :math:`\\min\\varphi` (module docstring): ``(eta_bar, a, b, phi_lower, slope_bound, probe)``; a
    withheld probe (:class:`_DualServer`) counts in the bracket only where its counts certify the sign."""
    c = server.c
    slope = lambda s: 1 - c * s.value[3]                     # noqa: E731  phi'(eta)
    err = lambda s: c * s.error[3] + slope_fp(s)             # noqa: E731
    lo = hi = None                       # certified: phi'(lo) < 0 < phi'(hi)
    slo, shi = -np.inf, np.inf           # where the search looks (also from withheld probes)

    def record(p):
        nonlocal lo, hi, slo, shi
        sg = _sign(p, slope, err)
        if sg < 0:
            lo = p.eta if lo is None else max(lo, p.eta)
        elif sg > 0:
            hi = p.eta if hi is None else min(hi, p.eta)
        side = sg if sg else (p.steer if p.s is None else 0)
        if side < 0:
            slo = max(slo, p.eta)
        elif side > 0:
            shi = min(shi, p.eta)
        return sg

    p = server.probe(theta, eta, t, gradient=False)
    step = t if server.kind == "cvar" else 1e-3
    for _ in range(200):                                     # expand until the search has two sides
        sg = record(p)
        if np.isfinite(slo) and np.isfinite(shi):
            break
        up = not np.isfinite(shi)
        if sg == 0 and p.s is not None and np.isfinite(slo):
            up = False
        eta = eta + step if up else eta - step
        step *= 2
        p = server.probe(theta, eta, t, gradient=False)
    if not (np.isfinite(slo) and np.isfinite(shi)):
        return eta, None, None, float("-inf"), float("inf"), None
    eta = 0.5 * (slo + shi)
    p = server.probe(theta, eta, t, gradient=False)
    for _ in range(200):                                     # safeguarded Newton inside [slo, shi]
        sg = record(p)
        if p.s is not None and sg == 0:
            break                                            # |phi'| within its error: converged
        if p.s is not None and c * p.s.value[4] > 0:
            trial = eta - slope(p.s) / (c * p.s.value[4])
        else:
            trial = 0.5 * (slo + shi)
        if not slo < trial < shi:
            trial = 0.5 * (slo + shi)
        if trial == eta or shi - slo <= 4 * _EPS * max(abs(eta), 1.0):
            break
        eta = trial
        p = server.probe(theta, eta, t, gradient=False)
    if p.s is None:
        return eta, None, None, float("-inf"), float("inf"), None
    for side in (-1, 1):            # a flat dual (CVaR, alpha n an integer): look further for a certified sign
        far, step = eta, (t if server.kind == "cvar" else 1e-3)
        for _ in range(60):
            if (lo if side < 0 else hi) is not None:
                break
            far, step = far + side * step, 2 * step
            record(server.probe(theta, far, t, gradient=False))
    if lo is None or hi is None:
        return eta, None, None, float("-inf"), float("inf"), None
    s = p.s
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
            sg = _sign(server.probe(theta, mid, t, gradient=False), slope, err)
            if sg == side:
                far = mid
            elif sg == 0 and server.kind != "cvar" and server.k > 1:
                break                                        # a withheld chi-square probe: no sign
            else:
                near = mid
        if side < 0:
            lo = far
        else:
            hi = far
    # phi(eta*) >= phi(eta) + phi'(eta)(eta* - eta) with eta* in [lo, hi] (convexity)
    phi = eta + c * (s.value[0] - s.error[0])
    lower = phi - slope_bound * (hi - lo) - 4 * _EPS * (abs(eta) + abs(phi))
    return eta, lo, hi, float(lower), float(slope_bound), p


def _inner_eta(server, theta, eta, t):
    """The dual's :math:`\\eta'` at ``theta`` for the descent in :math:`\\theta` (no certificate):
    safeguarded Newton from ``eta`` on released gradient sums, withheld probes steering; the last
    released probe (its :math:`\\varphi'` within its error or the steps below rounding), or ``None``."""
    c = server.c
    lo, hi = -np.inf, np.inf
    step = t if server.kind == "cvar" else 1e-3
    last = None
    for _ in range(80):
        p = server.probe(theta, eta, t)
        if p.s is None:
            side = p.steer
            if side == 0:               # withheld, no side known: back towards the last released level
                eta = 0.5 * (eta + last.eta) if last is not None else eta + step
                step *= 2
                continue
        else:
            last = p
            d, e = 1 - c * p.s.value[3], c * p.s.error[3]
            if abs(d) <= max(e, 1e-13):
                return p
            side = -1 if d < 0 else 1
        if side < 0:
            lo = max(lo, eta)
        else:
            hi = min(hi, eta)
        trial = np.nan
        if p.s is not None and c * p.s.value[4] > 0:
            trial = eta - d / (c * p.s.value[4])
        if not lo < trial < hi:
            if np.isfinite(lo) and np.isfinite(hi):
                trial = 0.5 * (lo + hi)
            else:
                trial = eta - side * step
                step *= 2
        if abs(trial - eta) <= 4 * _EPS * max(abs(eta), 1.0):
            break
        eta = trial
    return last if last is not None and last.eta == eta else None


def _certify(server, theta, eta, t):
    c = server.c
    value_allow, grad_allow = server.allowances(theta)          # >= c * sum_i a_i, c * sum_i (gradient's)
    eta, a, b, phi_lower, slope_bound, last = _eta_bracket(server, theta, eta, t,
                                                           server.slope_allowance(value_allow, t))
    if a is None:
        return float("-inf"), float("inf"), {"t": t, "reason": (
            "no certified bracket of eta" if server.k <= 1 else
            f"no certified bracket of eta: the dual's sums near its optimum were withheld (an entry would hold "
            f"fewer than min_contributors={server.k} clients' terms)")}, eta
    s = server.probe(theta, eta, t).s
    if server.kind != "cvar" and not value_allow < 0.5:
        return float("-inf"), float("inf"), {"t": t, "reason": "the clients' floating-point allowance is too large"}, eta
    p = 0.5 * float(server.D @ (theta * theta))
    zplus, norms = s.upper[1], s.upper[5]
    if server.kind == "cvar":       # h = softplus: 1-Lipschitz, h' = sigma in [0, 1], |h''| <= 1/(4t)
        fp = 8 * _EPS * c * (s.upper[0] + server.n * t)      # |fl(s_t(z)) - s_t(z)| <= 4 eps (s_t(z) + t)
        value_err = value_allow + fp + c * server.n * t * _ZERO      # + the softplus terms sent as zeros
        upper = p + eta + c * s.upper[0] + value_err             # s_t >= (.)_+: above the exact dual at eta
        # c sum_i m_i |grad f_i| (slope_allowance), and the terms sent as zeros
        grad_err = grad_allow + c * s.upper[7] + (c * _ZERO + value_allow * _ZERO / t) * norms
        floor = t * np.log(2) / server.alpha
    else:                           # h = z_+^2 / 2: |dh| <= (z_+ + a) a, h' = z_+, h'' in {0, 1}
        fp = 8 * _EPS * c * s.upper[0]                       # below eta the computed term is exactly 0
        value_err = value_allow * zplus + value_allow ** 2 / (2 * c) + fp
        upper = p + eta + server.constant + c * s.upper[0] + value_err
        grad_err = grad_allow * zplus + value_allow * norms
        floor = 0.0
    details = {"t": t, "smoothing_floor": floor, "eta_prime": eta}
    g = server.D * theta + c * s.value[8:]
    e_g = c * float(s.error[8:].max())
    # every h'(z_i) falls as eta grows, so sum_i |h'_i(eta*) - h'_i(eta)| = |phi'(eta)| / c
    shift = slope_bound * norms
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * e_g + shift + grad_err
    lower = p + server.constant + phi_lower - value_err - gnorm * gnorm / (2 * server.mu) * (1 + 4 * _EPS) \
        - floor * (1 + 4 * _EPS)
    return float(lower), float(upper), {**details, "gradient_bound": gnorm, "eta_bracket": float(b - a)}, eta


#: what the server learns from a dual route (``info["private"]["server_learns"]``)
SERVER_LEARNS = (
    "at every probed model theta and level eta: the sums over the clients of the dual's terms (CVaR: the "
    "smoothed excess loss t log(1 + exp((f_i - eta)/t)), its slope sigma_i and curvature; chi-square: "
    "(f_i - eta)_+ and its square), the slope-weighted gradients, the gradient norms, and the clients' "
    "floating-point allowances rounded up to powers of 256; before each sum, per entry, how many clients send "
    "a nonzero term (the guard); where the guard withholds a sum, how many clients' losses lie above "
    "eta -/+ a margin; with the guard, CVaR's descent asks only the smoothed excess loss, sigma_i and the "
    "sigma_i-weighted gradients, and its lower bound the sums of the clients' own weights "
    "lambda_i = c sigma_i (each computed by its client) and of the lambda_i-weighted values, gradients and bound "
    "terms at the certified model; the total number of rows N. FAFL (HCVaR with per-client caps c_i = p_i/alpha_i, "
    "public): the same sums with each client's terms and weight multiplied by its own c_i / max_j c_j, so the "
    "released sums are caps-weighted (sum_i c_i sigma_i, ...) and the counts stay plain counts. No entry of a released sum is fewer than min_contributors "
    "clients' nonzero terms, each above the sum's resolution (a term far larger than the others still "
    "dominates its entry). Taken together, the sums at many levels eta reveal the unlabeled empirical "
    "distribution of the client losses f_i(theta) near the probed levels -- which loss values occur, not "
    "which client has them: two released sums whose holder counts differ by one give one client's term by "
    "differencing, which the guard does not prevent.")


def _opt_in(reveal_loss_distribution, min_contributors, name):
    if reveal_loss_distribution is not True:
        raise InvalidParameterError(
            f"{name} in private mode reveals the unlabeled distribution of the client losses near the dual's "
            f"level eta ({SERVER_LEARNS}); pass reveal_loss_distribution=True to accept that, or certify ERM / "
            f"fixed weights, which reveal no client's loss")
    if isinstance(min_contributors, bool) or int(min_contributors) != min_contributors or min_contributors < 1:
        raise InvalidParameterError(f"min_contributors must be an integer >= 1; got {min_contributors!r}")


def private_cvar_solve(problem, gap_tol: float = 1e-6, t_start: float = 1e-2, t_min: float = 1e-10,
                       max_iter: int = 3000, seed: int = 0, channel: SumOnlyChannel | None = None,
                       reveal_loss_distribution: bool = False, min_contributors: int = 2,
                       **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.CVaR(n, alpha)``, every coordinate penalized) from secure sums only (module
    docstring). ``reveal_loss_distribution=True`` is required: the server learns what
    :data:`SERVER_LEARNS` says. ``min_contributors`` :math:`k` (default 2; 1 turns the guard off):
    no entry of a released sum holds fewer than :math:`k` clients' nonzero terms; CVaR needs
    :math:`k\\le\\alpha n\\le n-k`. With the guard the route is :func:`_guarded_cvar_solve` (module
    docstring: L from the clients' own weights), without it the joint descent in
    :math:`(\\theta,\\eta')` and the strong-convexity bound.

    ``weights=dm.sets.HCVaR(p, alpha)`` with every :math:`\\alpha_i<1` (FAFL at a fixed level, per-client
    caps :math:`c_i=p_i/\\alpha_i`, public) runs the same guarded route with
    :func:`private_hcvar_solve`'s caps."""
    if isinstance(getattr(problem, "weights", None), HCVaR):
        return private_hcvar_solve(problem, gap_tol=gap_tol, t_start=t_start, t_min=t_min, max_iter=max_iter,
                                   seed=seed, channel=channel, reveal_loss_distribution=reveal_loss_distribution,
                                   min_contributors=min_contributors, **channel_options)
    if not isinstance(getattr(problem, "weights", None), CVaR):
        raise InvalidParameterError("private_cvar_solve needs problem.weights = drflmodel.sets.CVaR(n, alpha)")
    _opt_in(reveal_loss_distribution, min_contributors, "CVaR")
    min_contributors = int(min_contributors)
    if not 0 < t_min <= t_start:
        raise InvalidParameterError(f"need 0 < t_min <= t_start; got t_min={t_min}, t_start={t_start}")
    alpha = float(problem.weights.alpha)
    if not alpha < 1:
        raise InvalidParameterError("alpha = 1 is the uniform average (the dual's eta runs to -infinity): use "
                                    "private_fixed_weight_solve(problem, weights=[1/n] * n)")
    n = problem.n_clients
    if min_contributors > 1 and not min_contributors <= alpha * n <= n - min_contributors:
        raise InvalidParameterError(
            f"min_contributors={min_contributors} needs min_contributors <= alpha * n <= n - min_contributors "
            f"(alpha * n = {alpha * n:g} clients lie above CVaR's optimal eta); got n = {n}")
    return _dual_solve(problem, "cvar", 1.0 / (alpha * n), 0.0, alpha, gap_tol, float(t_start),
                       t_min, max_iter, seed, channel, channel_options, int(min_contributors))


def private_hcvar_solve(problem, gap_tol: float = 1e-6, t_start: float = 1e-2, t_min: float = 1e-10,
                        max_iter: int = 3000, seed: int = 0, channel: SumOnlyChannel | None = None,
                        reveal_loss_distribution: bool = False, min_contributors: int = 2,
                        **channel_options) -> PrivateCertificate:
    r"""Certify ``problem`` with ``weights=dm.sets.HCVaR(p, alpha)``, every :math:`\alpha_i<1` (FAFL's
    :class:`~drflmodel.problems.minmax.fafl.FairnessAwareFL` at a fixed level; Y. Wang et al.'s
    HCVaR set :math:`\{\lambda\in\Delta:\lambda_i\le c_i\}`, :math:`c_i=p_i/\alpha_i`) on the guarded
    CVaR route with **per-client caps**: its dual (Rockafellar and Uryasev's, with the caps)

    .. math:: \max_{\lambda}\sum_i\lambda_if_i=\min_\eta\ \eta+\sum_ic_i(f_i-\eta)_+ ,

    slope :math:`1-\sum_ic_i\mathbf 1[f_i>\eta]`. The caps are public (the problem's :math:`p` and
    :math:`\alpha`); client *i* multiplies its dual terms and its own weight by :math:`r_i=c_i/\bar c`,
    :math:`\bar c=\max_jc_j` (:func:`~.clients.cap_ratios`), so every sum the server scales by
    :math:`\bar c` is the caps-weighted sum, and the lower bound's weights
    :math:`\lambda_i=c_i\sigma(\cdots)\le c_i` with :math:`\sum_i\lambda_i\ge1` certified are in the set.
    The smoothing floor is :math:`t\log2\sum_ic_i`. The guard (:math:`k` = ``min_contributors`` :math:`\ge2`)
    needs the :math:`k-1` largest caps to sum below 1 (a sum withheld because fewer than :math:`k`
    clients are above :math:`\eta` then certifies the slope positive); whether the optimal
    :math:`\eta` has :math:`k` clients above it depends on the losses (else the solve ends "withheld",
    not certified). Options as in :func:`private_cvar_solve`; a
    ``channel`` must hold the clients of :func:`~drflmodel.client_oracle.private.route_clients`
    (their cap ratios)."""
    w = getattr(problem, "weights", None)
    if not isinstance(w, HCVaR):
        raise InvalidParameterError("private_hcvar_solve needs problem.weights = drflmodel.sets.HCVaR(p, alpha)")
    _opt_in(reveal_loss_distribution, min_contributors, "FAFL (HCVaR with per-client caps)")
    min_contributors = int(min_contributors)
    if min_contributors < 2:
        raise InvalidParameterError(f"min_contributors={min_contributors}: per-client caps run on the guarded "
                                    f"route only (min_contributors >= 2)")
    if not 0 < t_min <= t_start:
        raise InvalidParameterError(f"need 0 < t_min <= t_start; got t_min={t_min}, t_start={t_start}")
    caps = hcvar_caps(w)
    n, k = caps.size, min_contributors
    ordered = np.sort(caps)
    # a withheld descent sum (1..k-1 clients with sigma_i >= SIGMA_CUT) certifies psi > 0: the k - 1 largest
    # caps sum below 1. Whether k clients lie above the optimal eta depends on the losses: else "withheld".
    if not ordered[n - k + 1:].sum() + ordered[-1] * n * SIGMA_CUT < 1.0:
        raise InvalidParameterError(
            f"min_contributors={k} needs the {k - 1} largest caps p_i/alpha_i to sum to less than 1 (fewer than "
            f"{k} clients above eta then certify the dual's slope positive); got caps {np.round(caps, 6).tolist()}")
    return _dual_solve(problem, "cvar", float(caps.max()), 0.0, 1.0 / float(caps.sum()), gap_tol, float(t_start),
                       t_min, max_iter, seed, channel, channel_options, min_contributors, caps=caps)


def _check_cap_ratios(channel, caps) -> None:
    """A channel handed to the per-client-caps route must hold clients that scale their terms by their
    own :math:`c_i/\bar c`: plain clients would make the server certify CVaR at the common cap, a
    different set, with nothing in the sums to tell. Checked wherever the channel shows its clients
    (a Flower channel's clients are built by :func:`~drflmodel.client_oracle.private.route_clients`)."""
    clients = getattr(channel, "clients", None)
    if clients is None:
        return
    expected = cap_ratios(caps)
    held = [getattr(getattr(c, "client", c), "cap_ratio", None) for c in clients]
    if len(held) != expected.size or any(r is None or not np.isclose(r, e, rtol=1e-15, atol=0.0)
                                         for r, e in zip(held, expected)):
        raise InvalidParameterError(
            f"channel: its clients must scale their terms by their caps' ratios c_i / max c "
            f"{np.round(expected, 6).tolist()} (build them with drflmodel.client_oracle.private.route_clients"
            f"(problem)); got cap_ratio {held}")


def hcvar_caps(weights) -> np.ndarray:
    r"""The caps :math:`c_i=p_i/\alpha_i` of ``HCVaR(p, alpha)``; every :math:`\alpha_i<1` and
    :math:`\sum_ic_i>1` (at level 1 the set is the point :math:`p`: the fixed-weight route)."""
    alpha = np.broadcast_to(np.asarray(weights.alpha, float), (weights.n,))
    if not np.all(alpha < 1.0):
        raise InvalidParameterError(f"HCVaR with per-client caps needs every alpha_i < 1; got alpha = "
                                    f"{np.asarray(weights.alpha).tolist()} (level 1: the fixed-weight route)")
    caps = np.asarray(weights.p, float) / alpha
    if not caps.sum() > 1.0:
        raise InvalidParameterError(f"HCVaR caps p_i/alpha_i must sum to more than 1; got {caps.sum():g}")
    return caps


def private_chi_square_solve(problem, gap_tol: float = 1e-6, max_iter: int = 3000, seed: int = 0,
                             channel: SumOnlyChannel | None = None, reveal_loss_distribution: bool = False,
                             min_contributors: int = 2, **channel_options) -> PrivateCertificate:
    """Certify ``problem`` (a :class:`~drflmodel.problems.minmax.dro.FederatedDRO` with
    ``weights=dm.sets.ChiSquare(n, rho)``, :math:`\\rho>0`, every coordinate penalized) from secure sums
    only: the set's exact dual :math:`\\min_\\eta\\,\\eta+\\frac\\rho2+\\frac1{2n\\rho}\\sum_i(f_i-\\eta)_+^2`
    (``ChiSquare.support_expr``) is :math:`C^1`, so no smoothing (module docstring, with
    :math:`h=z_+^2/2`). ``reveal_loss_distribution`` and ``min_contributors`` as in
    :func:`private_cvar_solve`; when fewer than :math:`k` clients lie above the dual's optimal
    :math:`\\eta` (small :math:`\\rho`) the sums there are withheld and the solve says so (status
    ``"not certified to gap_tol"``, ``details["reason"]``)."""
    if not isinstance(getattr(problem, "weights", None), ChiSquare):
        raise InvalidParameterError("private_chi_square_solve needs problem.weights = drflmodel.sets.ChiSquare(n, rho)")
    _opt_in(reveal_loss_distribution, min_contributors, "the chi-square set")
    rho = float(problem.weights.rho)
    if not rho > 0:
        raise InvalidParameterError("rho = 0 makes the chi-square set's value the largest client loss, one "
                                    "client's value: private mode refuses it")
    return _dual_solve(problem, "chi_square", 1.0 / (problem.n_clients * rho), rho / 2, None, gap_tol, None,
                       None, max_iter, seed, channel, channel_options, int(min_contributors))


def _dual_solve(problem, kind, c, constant, alpha, gap_tol, t, t_min, max_iter, seed, channel, channel_options,
                min_contributors, caps=None):
    if not 0 < gap_tol < 1:
        raise InvalidParameterError(f"gap_tol must be in (0, 1); got {gap_tol}")
    start = time.perf_counter()
    if channel is None:
        channel = SumOnlyChannel(private_clients(problem, caps), seed=seed, **channel_options)
    elif caps is not None:
        _check_cap_ratios(channel, caps)
    channel.min_contributors = min_contributors          # the guard of every sum of this solve
    server = _DualServer(problem, channel, kind, c, constant, min_contributors, caps=caps)
    server.alpha = alpha
    if server.mu <= 0:
        raise InvalidParameterError(f"the private {kind} solve needs every coordinate penalized (l2 > 0 and "
                                    f"penalize_intercept=True): its bound is the ridge's strong convexity")
    P = server.dim
    theta = np.zeros(P)
    state = {"eta": 0.0}
    best = None
    withheld_at = None
    value_seen, levels = [None], []
    if server.k <= 1:       # no guard: descend jointly in (theta, eta'), one sum an evaluation
        return _joint_solve(problem, server, kind, c, constant, alpha, gap_tol, t, t_min, max_iter, channel, start)
    if kind == "cvar":      # the guard: the weighted-ERM certificate (_weighted_certificate)
        return _guarded_cvar_solve(server, alpha, gap_tol, t, t_min, max_iter, channel, start)
    for attempt in range(60):
        def fun(theta, t=t):
            p = _inner_eta(server, theta, state["eta"], t)
            if p is None:
                raise Withheld(f"the dual's sums near its optimum in eta at a model of the descent are withheld by "
                               f"the guard (an entry would hold fewer than min_contributors={server.k} clients' terms, "
                               f"e.g. one client alone at the kink)")
            state["eta"] = p.eta
            s = p.s
            value = 0.5 * float(server.D @ (theta * theta)) + p.eta + constant + c * s.value[0]
            value_seen[0] = value
            return value, server.D * theta + c * s.value[8:]

        # stop L-BFGS where the gradient's share of the gap, |g|^2 / (2 mu), is a fifth of the target
        # (or of the smoothing floor, whichever is larger)
        gtol = _gtol(server, kind, t, alpha, gap_tol, value_seen[0], P)
        try:
            res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(max_iter), "gtol": gtol, "ftol": 0.0, "maxcor": 20})
            theta, nit = np.array(res.x), int(res.nit)
        except Withheld as err:
            withheld_at, nit = str(err), -1
            break
        skip = _skip_to(kind, t, t_min, alpha, gap_tol, value_seen[0], levels, jump=True)
        if skip is not None:
            t = skip
            continue
        lower, upper, details, eta = _certify(server, theta, state["eta"], t)
        state["eta"] = eta
        if best is None or upper - lower < best[1] - best[0]:
            best = (lower, upper, details, theta.copy(), nit)
        t = _next_level(kind, t, t_min, gap_tol, lower, upper, attempt, levels)
        if t is None:
            break
    return _result(server, channel, kind, gap_tol, best, theta, nit, withheld_at, start)


def _gtol(server, kind, t, alpha, gap_tol, value, P) -> float:
    """L-BFGS's gradient tolerance: where the gradient's share of the gap, :math:`|g|^2/(2\\mu)`, is
    a fifth of the target (or of the smoothing floor, whichever is larger)."""
    floor = t * np.log(2) / alpha if kind == "cvar" else 0.0
    target = gap_tol * abs(value) if value is not None else 0.0
    return float(np.sqrt(0.4 * server.mu * max(target, floor) / P)) if max(target, floor) > 0 else 1e-8


def _skip_to(kind, t, t_min, alpha, gap_tol, value, levels, jump=False):
    """CVaR before its first certificate: when the smoothing floor :math:`t\\log2/\\alpha` alone exceeds
    half the target, the next smoothing level (``t / 10``, not below the one whose floor is a quarter
    of the target; with ``jump``, that one at once -- the guarded descent, where the intermediate
    levels put more clients at the kink and their sums are withheld), with no certificate at ``t``;
    else ``None``."""
    target = gap_tol * abs(value)
    if kind == "cvar" and not levels and t * np.log(2) / alpha > 0.5 * target and t > t_min:
        final = 0.25 * target * alpha / np.log(2)
        return max(t_min, final if jump else max(t / 10, final))       # continuation: tenfold steps
    return None


def _next_level(kind, t, t_min, gap_tol, lower, upper, attempt, levels):
    """The next smoothing level after a certificate at ``t`` that missed the target (``None``:
    stop): CVaR ``t / 10`` down to ``t_min``; :math:`\\chi^2` L-BFGS restarts only (4)."""
    levels.append(t)
    if upper - lower <= gap_tol * abs(upper):
        return None
    if kind != "cvar":
        return t if attempt < 3 else None
    return t / 10 if t / 10 >= t_min else None


def _result(server, channel, kind, gap_tol, best, theta, nit, withheld_at, start):
    if best is None:
        best = (float("-inf"), float("inf"), {"reason": withheld_at}, theta, nit)
    lower, upper, details, theta, nit = best
    status = ("optimal" if np.isfinite(upper - lower) and upper - lower <= gap_tol * max(abs(upper), 1e-12)
              else "not certified to gap_tol")
    saw = {}
    for s in channel.seen:
        saw[s.query] = saw.get(s.query, 0) + 1
    what = ("CVaR: smoothed Rockafellar-Uryasev dual" if kind == "cvar" else "chi-square: its exact dual")
    return PrivateCertificate(
        theta=theta, upper_bound=float(upper), lower_bound=float(lower), status=status,
        kind=f"{what}, strong convexity (private sums)",
        secure_sums=channel.secure_sums, evaluations=server.evaluations,
        bytes_per_client=channel.bytes_per_client, seconds=time.perf_counter() - start,
        quantization={"quantum": channel.quantum, "stages": int(channel.stages)},
        server_saw={"sums_by_query": saw, "total_rows": server.base.N,
                    "per_client_values": f"none sent; {server.isolating} released sum(s) had one client alone above "
                                         f"or below eta (min_contributors={server.k})",
                    "server_learns": SERVER_LEARNS},
        details={**details, "lbfgs_iterations": nit, "isolating_sums": server.isolating,
                 "min_contributors": server.k, "guard_count_sums": server.count_sums,
                 "withheld_probes": server.withheld, **({"withheld": withheld_at} if withheld_at else {})})


def _joint_solve(problem, server, kind, c, constant, alpha, gap_tol, t, t_min, max_iter, channel, start):
    """Without the guard: L-BFGS jointly in :math:`(\\theta,\\eta')` on one gradient sum an evaluation
    (cheaper than solving :math:`\\eta'` inside each evaluation), the same certificate."""
    P = server.dim
    x = np.zeros(P + 1)
    best, nit, value_seen, levels = None, 0, [None], []
    for attempt in range(60):
        def fun(x, t=t):
            s = server.probe(x[:P], x[P], t).s
            theta = x[:P]
            value = 0.5 * float(server.D @ (theta * theta)) + x[P] + constant + c * s.value[0]
            value_seen[0] = value
            return value, np.concatenate([server.D * theta + c * s.value[8:], [1 - c * s.value[3]]])

        res = minimize(fun, x, jac=True, method="L-BFGS-B",
                       options={"maxiter": int(max_iter), "gtol": _gtol(server, kind, t, alpha, gap_tol, value_seen[0], P),
                                "ftol": 0.0, "maxcor": 20})
        x, nit = np.array(res.x), int(res.nit)
        skip = _skip_to(kind, t, t_min, alpha, gap_tol, value_seen[0], levels)
        if skip is not None:
            t = skip
            continue
        lower, upper, details, eta = _certify(server, x[:P], x[P], t)
        x[P] = eta
        if best is None or upper - lower < best[1] - best[0]:
            best = (lower, upper, details, x[:P].copy(), nit)
        t = _next_level(kind, t, t_min, gap_tol, lower, upper, attempt, levels)
        if t is None:
            break
    return _result(server, channel, kind, gap_tol, best, x[:P], nit, None, start)


# ---- CVaR under the guard: a descent on the kink-free sums, a certificate from the clients' own weights ----

def _descent_probe(server, theta, eta, t, gradient=True):
    """``(sum, None)``: the kink-free CVaR sums at :math:`(\\theta,\\eta')` (``"cvar_descent"`` /
    ``"cvar_value"``: softplus, :math:`\\sigma`, :math:`\\sigma\\nabla\\tilde f_i`), or ``(None,
    None)`` when the guard withheld their value or slope entry: then between 1 and :math:`k-1`
    clients have :math:`\\sigma_i\\ge` ``SIGMA_CUT``, so :math:`c\\sum_i\\sigma_i\\le c(k-1+n\\,
    \\mathrm{SIGMA\\_CUT})<1` (:math:`k\\le\\alpha n`): :math:`\\eta'` is above the root (no count
    needed)."""
    query, size = ("cvar_descent", 2 + server.dim) if gradient else ("cvar_value", 2)
    scale = np.ones(size)
    # every client's softplus term is below their sum S (all are >= 0): the last S, doubled, within
    # the clipping range; small enough that the terms of the clients near the level stay above the floor
    scale[0] = _soft_scale(server, eta, t)
    s = _dropping_sum(server, query, (0, 1), theta=theta, eta=eta, t=t, scale=scale)
    if s is not None:
        server.soft_sum = (float(eta), float(s.value[0]))
    return s, None


def _soft_scale(server, eta, t):
    """The public scale of the softplus entries at the levels ``eta``: every client's term is
    below their sum, which at a lower level grows by at most :math:`n` times the step (each term
    is 1-Lipschitz); the last sum so moved, doubled, within the clipping range (a quarter of it)."""
    level, total = server.soft_sum
    return np.maximum(t, (total + server.n * np.maximum(level - np.asarray(eta, float), 0.0)) / 4)


def _dropping_sum(server, query, needed, drop=(), **params):
    """A guarded sum; when the guard withholds it only for entries outside ``needed`` (e.g. a
    gradient coordinate that one client's features alone make nonzero), asked again with those
    entries sent as zeros by every client (``drop``): the sum's ``dropped`` lists them (the server
    learnt only their holders' counts). ``None`` when a needed entry is withheld."""
    drop = np.asarray(drop, int)
    for _ in range(4):              # a widened scale (clipping) can zero more entries under the floor
        try:
            s = server.channel.sum(query, **params, **({"drop": drop.tolist()} if drop.size else {}))
            s.dropped = drop
            return s
        except SumWithheld as err:
            server.withheld += 1
            few = np.flatnonzero((err.holders >= 1) & (err.holders < err.k))
            if np.isin(few, needed).any():
                return None
            drop = np.union1d(drop, few)
    return None


def _root_eta(server, theta, eta, t, tol):
    r"""The level :math:`\eta'` at ``theta`` where :math:`\psi(\eta')=1-c\sum_i\sigma_i` (increasing
    in :math:`\eta'`; a staircase where the clients are saturated) is within ``tol`` of 0 (or of its
    error), from the 2-entry sums (softplus, :math:`\sigma`; the gradient is asked once, after): first the secant step with the slope kept from the last call (the descent moves
    :math:`\theta` a little; at most :math:`16t`), then steps growing fourfold until the root is
    bracketed, then secant steps of the last two probes while they stay inside the bracket, else
    regula falsi with the Illinois rule (the end kept twice has its value halved) or bisection; a withheld probe is above the root (:func:`_descent_probe`). Returns the released
    ``(eta, sum)`` with the smallest :math:`|\psi|` (``None``: none within ``1e-3``)."""
    c = server.c
    lo = hi = None                     # [eta, psi or None]: psi(lo) < 0 < psi(hi)
    step, best, prev, kept = None, None, None, 0
    slopes = server.psi_slope
    for _ in range(100):
        s, _ = _descent_probe(server, theta, eta, t, gradient=False)     # 2 entries: softplus, sigma
        psi = None
        if s is not None:
            server.evaluations += 1
            psi = 1.0 - c * s.value[1]
            if best is None or abs(psi) < best[2]:
                best = (eta, s, abs(psi))
            if abs(psi) <= max(tol, 2 * c * s.error[1]):
                return eta, s
            if prev is not None and eta != prev[0] and (psi - prev[1]) / (eta - prev[0]) > 0:
                slopes[t] = (psi - prev[1]) / (eta - prev[0])
            prev = (eta, psi)
        side = -1 if psi is not None and psi < 0 else 1     # withheld: fewer than k clients above
        if lo is not None and hi is not None:
            kept = kept + side if kept * side > 0 else side  # consecutive moves of the same end
            if kept >= 2 and lo[1] is not None:              # hi moved twice: halve the kept lo's value
                lo[1] *= 0.5
            elif kept <= -2 and hi[1] is not None:
                hi[1] *= 0.5
        if side < 0:
            lo = [eta, psi]
        else:
            hi = [eta, psi]
        if lo is not None and hi is not None:
            (a, fa), (b, fb) = lo, hi
            if b - a <= 4 * _EPS * max(abs(a), abs(b), 1.0):
                break                   # psi jumps across (a client crossing SIGMA_CUT): the best probe
            # the secant of the last two probes when it stays inside (superlinear), else Illinois
            trial = eta - psi / slopes[t] if psi is not None and t in slopes else np.nan
            if not a < trial < b:
                trial = a - fa * (b - a) / (fb - fa) if fa is not None and fb is not None else 0.5 * (a + b)
            if not a < trial < b:
                trial = 0.5 * (a + b)
        else:                           # one side only
            up = hi is None
            d = abs(psi / slopes[t]) if psi is not None and t in slopes else 0.0
            dist = min(max(d, 0.25 * t), 16 * t) if step is None else 4 * step
            trial = eta + (dist if up else -dist)
            step = dist
        eta = trial
    return None if best is None or best[2] > 1e-3 else best[:2]


#: levels per secure sum of the grid search in eta (:func:`_grid_eta`)
GRID_LEVELS = 8


def _grid_eta(server, theta, eta, t, tol):
    r"""The level :math:`\eta'` at ``theta`` with :math:`|\psi(\eta')|\le` ``tol``, :math:`\psi=1-c
    \sum_i\sigma_i` (increasing), from secure sums of the softplus and :math:`\sigma` terms at
    :data:`GRID_LEVELS` levels at once (``"cvar_levels"``): a grid centred on ``eta`` (its width
    from the last call), shifted and widened fourfold while :math:`\psi` keeps one sign on it; once
    a bracket is known, the next grid spans 4% of it around the secant root of its ends. A
    level the guard drops (fewer than :math:`k` clients above it) has :math:`\psi>0`. Returns the
    level or ``None``."""
    c, m = server.c, GRID_LEVELS
    widths = server.grid_width
    width = widths.get(t, 4 * t)
    lo, hi = (-np.inf, None), (np.inf, None)          # (level, psi): psi(lo) < 0 < psi(hi)
    grid = eta + width * np.linspace(-1, 1, m)
    for _ in range(40):
        scale = np.ones(2 * m)
        scale[0::2] = _soft_scale(server, grid, t)
        s = _dropping_sum(server, "cvar_levels", (), theta=theta, eta=grid, t=t, scale=scale)
        if s is None:
            return None
        server.soft_sum = (float(grid[0]), float(s.value[0]))
        psi = 1.0 - c * s.value[1::2]
        err = 2 * c * s.error[1::2]
        dropped = np.zeros(m, bool)
        dropped[np.asarray(s.dropped, int) // 2] = True
        ok = (np.abs(psi) <= np.maximum(tol, err)) & ~dropped
        if ok.any():
            j = int(np.flatnonzero(ok)[np.argmin(np.abs(psi[ok]))])
            widths[t] = min(max(4 * abs(grid[j] - eta), 1e-9 * t), 4 * t)
            server.level_softplus = float(s.value[2 * j])        # the dual's softplus sum there
            return float(grid[j])
        for j in range(m):
            if dropped[j] or psi[j] > 0:
                if grid[j] < hi[0]:
                    hi = (float(grid[j]), None if dropped[j] else float(psi[j]))
            elif grid[j] > lo[0]:
                lo = (float(grid[j]), float(psi[j]))
        (a, fa), (b, fb) = lo, hi
        if np.isfinite(a) and np.isfinite(b):
            if b - a <= 4 * _EPS * max(abs(a), abs(b), 1.0):
                return None
            root = a - fa * (b - a) / (fb - fa) if fb is not None else 0.5 * (a + b)
            half = 0.02 * (b - a)                         # the secant root is close: a narrow grid
            centre = min(max(root, a + half), b - half)
            grid = centre + half * np.linspace(-1, 1, m + 2)[1:-1] * (m + 1) / m
            grid = np.clip(grid, a + 0.01 * (b - a) / m, b - 0.01 * (b - a) / m)
        else:
            width *= 4
            centre = grid[-1] + width if not np.isfinite(b) else grid[0] - width
            grid = centre + width * np.linspace(-1, 1, m)
    return None


def _upper(server, theta, eta, t):
    r"""The certified upper bound at ``theta`` (any :math:`\eta'` and :math:`t` give one): the
    smallest over :math:`t,t/10,t/100,t/1000` at ``eta`` of
    :math:`p(\theta)+\eta'+c\sum_is_t(z_i)`, at its upper end, plus :math:`c\sum_ia_i` (:math:`s_t`
    is 1-Lipschitz), its floating point and the terms sent as zeros; withheld levels skipped."""
    c = server.c
    try:
        value_allow, _ = server.allowances(theta)
    except SumWithheld:
        return float("inf")
    p = 0.5 * float(server.D @ (theta * theta))
    best = float("inf")
    for tu in (t, t / 10, t / 100, t / 1000):
        s, _ = _descent_probe(server, theta, eta, tu, gradient=False)
        if s is None:
            continue
        fp = 8 * _EPS * c * (s.upper[0] + server.n * tu)
        # the terms sent as zeros (sigma < SIGMA_CUT): s_t(z) <= t e^{z/t} <= 2 t sigma each
        u = p + eta + c * s.upper[0] + value_allow + fp + c * server.n * tu * 2 * SIGMA_CUT
        best = min(best, float(u) * (1 + 4 * _EPS))
    return best


def _weights_level(server, theta, eta, t, excess):
    r"""A level :math:`\eta_L` where the secure sum :math:`s(\eta_L)=\sum_i\lambda_i`
    (:meth:`PrivateClient.cvar_weight`, continuous and falling in :math:`\eta'`) is certified
    :math:`\ge1` with :math:`s-1` at most about ``excess`` (each unit of :math:`s-1` costs the
    bound a relative unit): regula falsi on :math:`s-1-e` (:math:`e` a few errors of the sum)
    from ``eta``, steps growing while one side is missing. ``(eta_L, sum, weights)`` with the
    smallest certified :math:`s`, or ``None``."""
    c, channel = server.c, server.channel
    slope = server.psi_slope.get(t, 1.0 / t)     # -d s / d eta, the descent's secant
    lo = hi = None                  # (eta, r): r(lo) > 0 > r(hi), r = s - 1 - e
    best, step, same, same_side = None, None, 0, 0
    for _ in range(80):
        arg = np.concatenate([[c, t, eta], theta])
        try:
            s = channel.sum("weight", weights=("cvar_sigma", arg))
        except SumWithheld:         # between 1 and k - 1 clients with a weight: s < 1, eta too high
            server.withheld += 1
            s = None
        if s is not None:
            r = s.value[0] - 1.0 - 3 * s.error[0]
            if s.lower[0] >= 1.0 and (best is None or s.upper[0] < best[1].upper[0]):
                best = (eta, s, arg)
                if s.upper[0] - 1.0 <= excess:
                    break
        else:
            r = None
        side = 1 if r is not None and r > 0 else -1
        same = same + 1 if side == same_side else 0
        same_side = side
        if side > 0:
            lo = (eta, r)
        else:
            hi = (eta, r)
        if lo is not None and hi is not None:
            (a, ra), (b, rb) = lo, hi
            # regula falsi; bisection after two steps on the same side (s is flat where no client is
            # near the level: falsi would creep)
            trial = a + ra * (b - a) / (ra - rb) if rb is not None and same < 2 else 0.5 * (a + b)
            if not a < trial < b:
                trial = 0.5 * (a + b)
            if b - a <= 4 * _EPS * max(abs(a), abs(b), 1.0):
                break
        else:
            d = abs(r) / slope if r is not None else t
            step = max(d, 8 * step) if step is not None else max(min(d, t), 1e-6 * t)   # s may be flat here
            trial = eta - step if lo is None else eta + step
        eta = trial
    return best


def _weighted_bound(ws, theta, vg):
    r"""The strong-convexity bound of the weighted problem :math:`F_\lambda=\sum_i\lambda_if_i` at
    ``theta`` from its summed value and gradient ``vg``: :math:`F_\lambda(\theta)` lies within the
    sum's error plus the clients' floating-point allowance (the weighted bound terms,
    ``ws.allowances``), and :math:`\min F_\lambda\ge\underline F-(\|\hat g\|+\sqrt P\,e_g+a_g)^2/(2\mu)`
    with :math:`\mu=s\min_jD_{jj}` at the lower end of :math:`s` (``ws.mu``). ``(lower, upper, details)``."""
    value_allow, grad_allow, _ = ws.allowances(theta, None)
    g, e = vg.value[1:], vg.error[1:]
    gnorm = float(np.linalg.norm(g)) * (1 + 4 * _EPS) + np.sqrt(g.size) * float(e.max()) + grad_allow
    lower = float(vg.value[0] - vg.error[0]) - value_allow - gnorm * gnorm / (2 * ws.mu) * (1 + 4 * _EPS)
    upper = float(vg.value[0] + vg.error[0]) + value_allow
    return lower, upper, {"gradient_bound": gnorm}


def _weighted_certificate(server, theta, eta, t, gap_tol, max_iter, value):
    r"""The lower bound from the clients' own weights (module docstring of the guarded route):
    :math:`\lambda_i=c\,\sigma((\tilde f_i(\hat\theta)-\eta_L)/t)` at a level :math:`\eta_L\le\eta'`
    where the secure sum :math:`s=\sum_i\lambda_i` is certified :math:`\ge1`, so
    :math:`\lambda/s\in\Lambda` and :math:`\min_\theta\sum_i\lambda_if_i(\theta)/s` is below the
    CVaR optimum (weak duality). The weighted problem is a fixed-weight one: L-BFGS and the
    fixed-weight bound (:func:`_weighted_bound`) on sums of :math:`\lambda_i(f_i,\nabla f_i)` and
    the weighted bound terms. Returns ``(lower, details)``."""
    import copy

    c, channel = server.c, server.channel
    found = _weights_level(server, theta, eta, t, 1e-3 * gap_tol)
    if found is None:
        return float("-inf"), {"reason": "no level with the weights' sum certified >= 1 was released"}
    eta_l, s, arg = found
    ws = copy.copy(server.base)
    ws.weights = ("cvar_sigma", arg)
    ws.lam_sum = float(s.upper[0])                     # the weighted ridge's allowance: upper end
    ws.mu = float(server.D.min()) * float(s.lower[0]) * (1 - 4 * _EPS)    # its modulus: lower end
    last = {}

    def fun(th):
        vg = _dropping_sum(server, "value_gradient", (0,), weights=ws.weights, theta=th)
        if vg is None:
            raise SumWithheld("value_gradient", np.zeros(1), server.k)
        ws.evaluations += 1
        last["theta"], last["vg"] = np.array(th), vg
        return float(vg.value[0]), np.array(vg.value[1:])

    th = np.array(theta, float)
    lower_w = float("-inf")
    details = {}
    for restart in range(3):
        scale = abs(last["vg"].value[0]) if last else abs(value)
        gtol = float(np.sqrt(0.1 * ws.mu * gap_tol * max(scale, 1e-12) / th.size))
        try:
            res = minimize(fun, th, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(max_iter), "gtol": gtol, "ftol": 0.0, "maxcor": 20})
        except SumWithheld as err:
            return float("-inf"), {"reason": str(err)}
        th = np.array(res.x)
        vg = last["vg"] if np.array_equal(last["theta"], th) else fun(th) and last["vg"]
        if vg.dropped.size:
            return float("-inf"), {"reason": f"the weighted gradient's entries {vg.dropped[:8].tolist()} are held by "
                                             f"fewer than min_contributors={server.k} clients: withheld"}
        try:
            lower_w, upper_w, details = _weighted_bound(ws, th, vg)
        except SumWithheld as err:              # the weighted bound terms
            return float("-inf"), {"reason": str(err)}
        if upper_w - lower_w <= 0.25 * gap_tol * abs(upper_w):
            break
    lower = lower_w / float(s.upper[0]) if lower_w >= 0 else lower_w / float(s.lower[0])
    return lower * (1 - 4 * _EPS) if lower >= 0 else lower * (1 + 4 * _EPS), {
        "eta_lower_level": float(eta_l), "weights_sum": [float(s.lower[0]), float(s.upper[0])],
        "weighted_gap": float(upper_w - lower_w), "weighted_gradient_bound": details.get("gradient_bound"),
        "weighted_iterations": int(res.nit), "weighted_theta": th}


#: the guarded CVaR route's descent at a smoothing level :math:`t` stops at :math:`|g|\le` this
#: times :math:`t` (or the final tolerance, if larger; only then is the level certified)
COARSE_GTOL = 1e-1


class _Converged(Exception):
    """The guarded descent's stopping rule met at ``theta`` (ends the L-BFGS run there)."""

    def __init__(self, theta):
        super().__init__("converged")
        self.theta = np.array(theta, float)


def _guarded_cvar_solve(server, alpha, gap_tol, t, t_min, max_iter, channel, start):
    r"""CVaR under the guard (``min_contributors`` :math:`\ge2`). **Descent**: L-BFGS in
    :math:`\theta` on :math:`h_t(\theta)=\min_{\eta'}G_t(\theta,\eta')`, the level solved inside
    each evaluation (:func:`_grid_eta`) from the kink-free sums -- softplus, :math:`\sigma`,
    :math:`\sigma\nabla\tilde f_i`, whose holders are all the clients above :math:`\eta'-m_i`
    (at least :math:`\alpha n\ge k` near the optimum), never :math:`\sigma'` or the clients' error
    terms, which only the clients at the kink hold (two clients tied at the level: one alone).
    Each evaluation: the multi-level sums of the softplus and :math:`\sigma` (their entry at the
    level found is the value), then one sum of :math:`\sigma\nabla\tilde f_i` there. At the
    certified levels the descent also stops once :math:`\|g\|_2^2/(2\mu)\le2\epsilon|U|`
    (:math:`\mu=\min_jD_{jj}`), the 2-norm form of its final tolerance (the bound holds at any
    model: only how soon the gap is reached depends on it).
    **Certificate**: U at :math:`\hat\theta` (:func:`_upper`), L from the clients' own weights
    (:func:`_weighted_certificate`) -- no smoothing floor and no per-client error term at the kink:
    the smoothing only decides how good the weights are. Continuation :math:`t\leftarrow t/10`
    (warm started; the smoother levels, whose descent tolerance :data:`COARSE_GTOL` :math:`t` is
    above the final one, are not certified) until the gap is within ``gap_tol`` or :math:`t<`
    ``t_min``."""
    c, P = server.c, server.dim
    theta, eta = np.zeros(P), 0.0
    best, nit, withheld_at, value = None, 0, None, None
    state, gaps = {"eta": eta, "value": None}, []
    while t >= t_min:
        target = gap_tol * abs(state["value"]) if state["value"] is not None else gap_tol
        # the descent's stopping rule (the bound holds at any model): |g|^2 P / (2 mu) at twice the target,
        # the weighted problem's curvature being at least the ridge's (measured: digits 7,260 -> 5,805
        # rounds against 0.4, gap 7.6e-7 -> 7.7e-7; 40: 5,193 rounds but 9.0e-7); also met, and the
        # descent stopped, when |g|_2^2 / (2 mu) is (digits: 4,791 rounds against 5,232, gap 8.9e-7)
        final = float(np.sqrt(4.0 * server.mu * target / P))
        # the smoother levels only warm-start the next: their descent stops at |g| <= t / 10 (digits:
        # 5,232 rounds against 5,805 at t / 100; 6,132 at 3 t / 10), and they are not certified
        gtol = max(final, COARSE_GTOL * t)

        # |psi| moves the gradient by at most |psi| max_i |grad f_i|: a tenth of gtol
        def fun(theta, t=t, tol=min(1e-6, 0.1 * gtol)):
            found = _grid_eta(server, theta, state["eta"], t, tol)
            if found is None:
                raise Withheld(f"the dual's sums near its level eta at a model of the descent are withheld by the "
                               f"guard (an entry would hold fewer than min_contributors={server.k} clients' terms)")
            state["eta"] = found
            # the value from the grid's sum at the level found (same terms); the gradient, once, at that
            # level, without the value and slope entries (every client sends 0 there)
            s = _dropping_sum(server, "cvar_descent", (), theta=theta, eta=found, t=t, scale=1.0,
                              drop=(0, 1))
            if s is None:
                raise Withheld(f"the dual's gradient sum at its level eta is withheld by the guard (fewer than "
                               f"min_contributors={server.k} clients' terms in some coordinate after dropping)")
            value = 0.5 * float(server.D @ (theta * theta)) + found + c * server.level_softplus
            state["value"] = value
            grad = server.D * theta + c * s.value[2:]     # dropped coordinates: 0 (ridge only)
            if gtol <= final and float(grad @ grad) <= 4.0 * server.mu * target:
                raise _Converged(theta)   # the stopping rule in the 2-norm: |g|^2 / (2 mu) <= 2 target
            return value, grad

        try:
            res = minimize(fun, theta, jac=True, method="L-BFGS-B",
                           options={"maxiter": int(max_iter), "gtol": gtol, "ftol": 0.0, "maxcor": 20})
            theta, nit = np.array(res.x), int(res.nit)
        except _Converged as done:             # the 2-norm stopping rule (nit: the last completed run's)
            theta = np.array(done.theta, float)
        except Withheld as err:
            withheld_at = str(err)
            break
        if gtol > final:
            t = t / 10
            continue
        found = _root_eta(server, theta, state["eta"], t, 1e-9)
        if found is not None:
            state["eta"] = found[0]
        lower, details = _weighted_certificate(server, theta, state["eta"], t, gap_tol, max_iter, state["value"])
        # U at the descent's model and at the weighted problem's minimizer: the smaller
        candidates = [(_upper(server, theta, state["eta"], t), theta.copy())]
        if "weighted_theta" in details:
            th_w = details.pop("weighted_theta")
            candidates.append((_upper(server, th_w, state["eta"], t), th_w))
        upper, th_u = min(candidates, key=lambda u: u[0])
        # any valid L and any valid U combine: keep the best of each over the levels
        if best is None or upper < best[1]:
            best = (best[0] if best is not None else float("-inf"), upper, best[2] if best else {}, th_u, nit)
        if lower > best[0]:
            best = (lower, best[1], {"t": t, "eta_prime": state["eta"], **details}, best[3], nit)
        gaps.append(best[1] - best[0])
        if best[1] - best[0] <= gap_tol * abs(best[1]):
            break
        if len(gaps) >= 3 and gaps[-1] >= gaps[-3]:
            break                       # two smaller levels without progress: the descent's limit
        t = t / 10
    if best is not None:
        best[2]["smoothing_floor"] = 0.0
    return _result(server, channel, "cvar", gap_tol, best, theta, nit, withheld_at, start)
