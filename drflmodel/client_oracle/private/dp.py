r"""Differentially private certificate (first cut): fixed public weights, the logistic loss, clients'
rows of norm at most a public :math:`R`; every sum the server receives is noised, and the bound holds
with probability :math:`\ge1-\beta` over the noise.

**Sensitivity** (one client's rows replaced, client-level privacy). With
:math:`F(\theta)=\sum_i\lambda_if_i(\theta)`, :math:`f_i=h_i+p` (:math:`h_i` the mean logistic loss
on client *i*'s rows, :math:`p` the public ridge) and :math:`\|x_{ij}\|\le R`:
:math:`0\le h_i(\theta)\le\log2+R\|\theta\|` and :math:`\|\nabla h_i\|\le R` (:math:`|\ell'|\le1`), so
replacing client *i*'s rows moves the summed value by at most :math:`\Delta_f=\max_i\lambda_i(\log2+
R\|\theta\|)` and the summed gradient by at most :math:`\Delta_g=2R\max_i\lambda_i`.

**Mechanism.** Each query adds :math:`\mathcal N(0,\sigma_f^2)` to the value and
:math:`\mathcal N(0,\sigma_g^2I)` to the gradient, split over the clients (each adds its share with
variance :math:`\sigma^2/n` inside the secure sum, so the server never holds a noise-free sum while
the clients follow the protocol). With :math:`\sigma_f=\Delta_f/\sqrt{\rho_q}`,
:math:`\sigma_g=\Delta_g/\sqrt{\rho_q}` each query is :math:`\rho_q`-zCDP (Gaussian mechanism, M. Bun
and T. Steinke 2016, "Concentrated differential privacy: simplifications, extensions, and lower
bounds", TCC, Prop. 1.6); :math:`k` queries compose to :math:`k\rho_q` (Lemma 1.7), and
:math:`\rho`-zCDP gives :math:`(\rho+2\sqrt{\rho\log(1/\delta)},\delta)`-DP (Prop. 1.3): the
:math:`\rho` of a target :math:`(\varepsilon,\delta)` is :math:`(\sqrt{\log(1/\delta)+\varepsilon}-
\sqrt{\log(1/\delta)})^2`. A widened re-ask of the same query redraws the same noise (seeded by the
query's public number), so it releases nothing new.

**Optimization and bound.** ``steps`` noisy gradient steps of length :math:`1/L`
(:math:`L=\Lambda R^2/4+\max_jD_{jj}\Lambda`, :math:`\Lambda=\sum_i\lambda_i`), then one more noisy
query at the last point :math:`\hat\theta`. With probability :math:`\ge1-\beta`,
:math:`|\xi_f|\le\sigma_f\sqrt{2\log(4/\beta)}` and :math:`\|\xi_g\|\le\sigma_g(\sqrt P+\sqrt{2\log(2/\beta)})`
(Gaussian concentration of a 1-Lipschitz function); then
:math:`U=\hat v+t_f+e_f+a_f` and :math:`L=\hat v-t_f-e_f-a_f-(\|\hat g\|+t_g+\sqrt Pe_g+a_g)^2/(2\mu)`
(strong convexity, :math:`\mu=\Lambda\min_jD_{jj}`), :math:`e` the secure sum's quantization error and
:math:`a` a public floating-point allowance (:math:`10^{-8}` times the public magnitude bounds, far
above :math:`\gamma_m` for :math:`m<10^7` rows). Both are then clipped to the public interval
:math:`[0,\Lambda\log2]` (:math:`F\ge0`, :math:`F(0)=\Lambda\log2`), which costs no privacy;
``raw_width`` is the width before, ``beats_trivial`` says whether the noised bound improved on it.
On breast cancer over 4 clients it does not (the noise of a client-level release dominates):
``benchmarks/bench_private_sums.py --dp``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...errors import InvalidParameterError
from ...losses import Logistic
from .clients import private_clients
from .secure_sum import SumOnlyChannel

__all__ = ["dp_fixed_weight_solve", "zcdp_rho"]

#: the public floating-point allowance, relative to the public magnitude bounds (module docstring)
FLOAT_ALLOWANCE = 1e-8


def zcdp_rho(epsilon: float, delta: float) -> float:
    r""":math:`\rho` with :math:`\rho+2\sqrt{\rho\log(1/\delta)}=\varepsilon` (Bun and Steinke 2016, Prop. 1.3)."""
    a = math.log(1.0 / delta)
    return (math.sqrt(a + epsilon) - math.sqrt(a)) ** 2


class _NoisyClient:
    """A client that checks its rows against the public ``row_norm`` and adds its share of the noise
    to each ``"dp_value_gradient"`` answer (seeded by its index and the query's public number)."""

    def __init__(self, client, seed: int, n: int, row_norm: float):
        self.client, self.seed, self.n = client, int(seed), int(n)
        largest = client.max_row_norm()
        if largest > row_norm:
            raise InvalidParameterError(f"row_norm={row_norm} is below a client's largest row norm: every row "
                                        f"must satisfy ||x|| <= row_norm for the sensitivity to hold")

    def contribution(self, query, weights=None, theta=None, sigma_f=0.0, sigma_g=0.0, draw=0, **params):
        v = np.asarray(self.client.contribution("value_gradient", weights=weights, theta=theta), float)
        rng = np.random.default_rng([self.seed, self.client.index, int(draw)])
        sigma = np.full(v.size, float(sigma_g))
        sigma[0] = float(sigma_f)
        return v + rng.normal(size=v.size) * sigma / math.sqrt(self.n)


def dp_fixed_weight_solve(problem, epsilon: float, delta: float = 1e-5, beta: float = 0.05, row_norm: float | None = None,
                          steps: int = 0, seed: int = 0, **channel_options) -> dict:
    """Certify :math:`\\min_\\theta\\sum_ip_if_i(\\theta)` of ``problem`` (``FederatedDRO`` with
    ``weights=HCVaR(p, 1)``, public :math:`p`; logistic loss; every coordinate penalized) from
    noised secure sums, :math:`(\\varepsilon,\\delta)`-differentially private at the client level;
    the bound holds with probability :math:`\\ge1-\\beta` (module docstring). ``row_norm``: the
    public :math:`R` (each client checks its rows against it; default: the largest row norm,
    which is then not private). Returns a dict with ``lower_bound``, ``upper_bound``, ``width``,
    ``epsilon``, ``delta``, ``beta``, ``rho``, the noise scales and the queries. ``steps`` noisy
    gradient steps before the certified query (default 0: each step costs privacy and, at these
    noise levels, moves away from the optimum)."""
    from ...problems.minmax.dro import FederatedDRO
    from ...sets import HCVaR

    if type(problem) is not FederatedDRO or not isinstance(problem.weights, HCVaR) or \
            not np.all(np.asarray(problem.weights.alpha, float) == 1.0):
        raise InvalidParameterError("dp_fixed_weight_solve needs a FederatedDRO with weights=HCVaR(p, 1) (public p)")
    if not isinstance(problem.objectives.loss, Logistic):
        raise InvalidParameterError(f"dp_fixed_weight_solve needs the logistic loss (|l'| <= 1 bounds the "
                                    f"sensitivity); got {problem.objectives.loss.name!r}")
    for name, value, lo, hi in (("epsilon", epsilon, 0, math.inf), ("delta", delta, 0, 1), ("beta", beta, 0, 1)):
        if not lo < float(value) < hi:
            raise InvalidParameterError(f"{name} must be in ({lo}, {hi}); got {value}")
    if int(steps) < 0:
        raise InvalidParameterError(f"steps must be >= 0; got {steps}")
    D = np.asarray(problem.objectives.penalty_diagonal, float)
    if not D.min() > 0:
        raise InvalidParameterError("the DP bound needs every coordinate penalized (l2 > 0, penalize_intercept=True)")
    start = time.perf_counter()
    clients = private_clients(problem)
    if row_norm is None:
        row_norm = max(c.max_row_norm() for c in clients)
    R = float(row_norm)
    n = len(clients)
    channel = SumOnlyChannel([_NoisyClient(c, seed, n, R) for c in clients], seed=seed, **channel_options)
    lam = np.asarray(problem.weights.p, float)
    Lam, lam_max, P = float(lam.sum()), float(lam.max()), D.size
    rho = zcdp_rho(float(epsilon), float(delta))
    rho_q = rho / (int(steps) + 1)
    mu = Lam * float(D.min())
    smooth = Lam * (R * R / 4 + float(D.max()))

    def query(theta, draw):
        sigma_f = lam_max * (math.log(2) + R * float(np.linalg.norm(theta))) / math.sqrt(rho_q)
        sigma_g = 2 * R * lam_max / math.sqrt(rho_q)
        s = channel.sum("dp_value_gradient", weights=("public", lam), theta=theta, sigma_f=sigma_f,
                        sigma_g=sigma_g, draw=draw)
        return s, sigma_f, sigma_g

    theta = np.zeros(P)
    for k in range(int(steps)):
        s, _, _ = query(theta, k)
        theta = theta - s.value[1:] / smooth
    s, sigma_f, sigma_g = query(theta, int(steps))
    t_f = sigma_f * math.sqrt(2 * math.log(4 / beta))
    t_g = sigma_g * (math.sqrt(P) + math.sqrt(2 * math.log(2 / beta)))
    wnorm = float(np.linalg.norm(theta))
    a_f = FLOAT_ALLOWANCE * Lam * (math.log(2) + R * wnorm + 0.5 * float(D @ (theta * theta)) + 1)
    a_g = FLOAT_ALLOWANCE * Lam * (R + float(np.linalg.norm(D * theta)) + 1)
    v, g = float(s.value[0]), s.value[1:]
    upper = v + t_f + float(s.error[0]) + a_f
    lower = v - t_f - float(s.error[0]) - a_f - (float(np.linalg.norm(g)) + t_g + math.sqrt(P) * float(s.error[1:].max())
                                                 + a_g) ** 2 / (2 * mu)
    # public and free: F >= 0 (nonnegative loss and ridge) and F(0) = Lambda log 2 (the logistic loss at score 0)
    trivial = (0.0, Lam * math.log(2))
    return {"theta": theta, "lower_bound": max(lower, trivial[0]), "upper_bound": min(upper, trivial[1]),
            "width": min(upper, trivial[1]) - max(lower, trivial[0]), "raw_width": upper - lower, "trivial": trivial,
            "beats_trivial": lower > trivial[0] or upper < trivial[1],
            "epsilon": float(epsilon), "delta": float(delta), "beta": float(beta), "rho": rho,
            "queries": int(steps) + 1, "sigma_value": sigma_f, "sigma_gradient": sigma_g, "row_norm": R,
            "noise_bounds": {"value": t_f, "gradient_norm": t_g}, "secure_sums": channel.secure_sums,
            "seconds": time.perf_counter() - start,
            "holds": f"with probability >= {1 - beta} over the noise (clients following the protocol)"}
