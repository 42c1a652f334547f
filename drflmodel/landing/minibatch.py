r"""Minibatch local steps: a certified landing *region* around the full-batch point.

With minibatch gradients a FedAvg / FedProx run has no fixed point: its iterates keep moving with
the gradient noise. What can be certified is a region. Client :math:`i`'s local step from the same
server model with a minibatch :math:`B_j` instead of all its rows is

.. math::

    u^s_j=u^s_{j-1}-\eta\big(\nabla f_i(u^s_{j-1})+\mu(u^s_{j-1}-\theta)+n_j\big),\qquad
    n_j=\frac1B\sum_{b\in B_j}\big(\nabla\ell_b(u^s_{j-1})-\overline{\nabla\ell}(u^s_{j-1})\big),

and since the full-batch step is an :math:`a_i`-contraction (:mod:`drflmodel.landing.contraction`),
:math:`\|u^s_j-u_j\|\le a_i\|u^s_{j-1}-u_{j-1}\|+\eta\|n_j\|`, so after :math:`J` steps

.. math:: \|u^s_{i,J}(\theta)-u_{i,J}(\theta)\|\le s_i:=\eta\,\nu_i\,\frac{1-a_i^J}{1-a_i}

whenever every :math:`\|n_j\|\le\nu_i`. **Per-sample gradient bound.** For a loss
:math:`\ell(z)` with :math:`|\ell'|\le\mathrm{Lip}` in the score (the loss's ``lipschitz``:
logistic 1, softmax :math:`\sqrt2` in the score vector), a row's data gradient is at most
:math:`\mathrm{Lip}\,\|x_b\|`, so each centred term is at most
:math:`\bar G_i=\mathrm{Lip}(\max_b\|x_b\|+\frac1{N_i}\sum_b\|x_b\|)\le G_i=2\,\mathrm{Lip}\max_b\|x_b\|`,
computed from the client's rows, for every model (:math:`\bar G_i` stands for the centred bound below).
**Concentration.** When each step draws its batch afresh (uniformly with replacement -- drflmodel's
simulator --, or without replacement within the batch), :math:`n_j` is, given the past, a mean of
:math:`B` centred vectors bounded by :math:`G_i`; Pinelis' inequality for sums in a Hilbert space
(I. Pinelis, "Optimum bounds for the distributions of martingales in Banach spaces", Ann.
Probab. 22(4), 1994, Theorem 3.5: :math:`P(\|S\|\ge r)\le2e^{-r^2/(2\sum_bc_b^2)}`), which holds
for sampling without replacement too (it bounds :math:`E\cosh(\lambda\|S\|)`, a convex function of
the sum, and W. Hoeffding, "Probability inequalities for sums of bounded random variables", JASA
1963, Theorem 4, orders such expectations below those with replacement), gives
:math:`\|n_j\|\le\nu_i=\bar G_i\min\!\big(1,\sqrt{2\log(2/\delta')/B}\big)` with probability
:math:`\ge1-\delta'`; a union bound over the :math:`RJn` steps with :math:`\delta'=\delta/(RJn)` makes
it hold for the whole run with probability :math:`\ge1-\delta`. Batches cut from one shuffled epoch
(a PyTorch ``DataLoader``) are not fresh given the past; for them (``batch_sampling="epoch"``, the
default when the run does not say) :math:`\nu_i=\bar G_i`, with probability 1. A batch of all the rows
drawn without replacement is the full gradient (:math:`\nu_i=0`).

**The region.** The round is :math:`\theta^{r+1}=T_S(\theta^r)+\xi_r` with
:math:`\|\xi_r\|\le\eta_g s_S` (:math:`s_S=\sum_ip_is_i` with every client, :math:`\max_{i\in S}s_i`
for a sampled subset), which enters the bounds of :mod:`drflmodel.landing.participation` exactly like
a subset's pull: :math:`d_{r+1}\le\kappa_rd_r+\eta_g(b_r+s_r)+\varepsilon_r`, and the run ends within
:math:`\max_r(\eta_g(b_r+s_r)+\varepsilon_r)/(1-\kappa_r)` of the full-batch fixed point (the *noise
region*). A run that breaks these bounds is "elsewhere": a correct run does that with probability at
most :math:`\delta` (0 with the worst-case :math:`\nu_i`). This per-step bound adds the noise of every
step in norm; it is the fallback where the cross-round bound below does not apply (epoch batches, a
server step :math:`\eta_g\ne1`).

**Cross-round bound** (fresh batches, :math:`\eta_g=1`). Compare the run with the *full-batch* run
from the same start, with the same subsets and in exact arithmetic, and let :math:`D_k` be the
difference of the two states after step :math:`k` -- the clients' local models
:math:`(u_i)_{i\in S}` during a round, in the norm :math:`\|U\|_w^2=\sum_{i\in S}w_i\|u_i\|^2`
(:math:`w` the round's aggregation weights; a broadcast model :math:`\theta` has norm
:math:`\|\theta\|`, and by Jensen the average :math:`\sum_iw_iu_i` is 1-Lipschitz). A local step is
:math:`D_{k+1}=A_k+\zeta_k` with :math:`A_k` the full-batch step's difference, predictable, and
:math:`\|A_k\|_w\le a\|D_k\|_w+\eta\mu\Delta` (:math:`a=\max_{i\in S}a_i`, :math:`\Delta` the round's
starting difference: the proximal anchor, :mod:`drflmodel.landing.contraction`), and the noise
:math:`\zeta_k=-\eta(n_i)_{i\in S}` mean zero given the past. Expanding the square with
:math:`(x+y)^2\le(1+t)x^2+(1+1/t)y^2`,

.. math::

    V_{k+1}:=\|D_{k+1}\|^2\le\lambda V_k+\gamma V_0+\eta^2\textstyle\sum_iw_i\nu_i^2+M_k,\qquad
    \lambda=(1+t)a^2,\ \gamma=(1+1/t)\eta^2\mu^2,\ M_k=2\langle A_k,\zeta_k\rangle,

(:math:`t=\infty`, :math:`\lambda=a^2`, :math:`\gamma=0` for FedAvg; for FedProx :math:`\lambda=a^{2s}`
with :math:`s` the best of a fixed grid, chosen from the constants alone) on the event that every
:math:`\|n_{i,j}\|\le\nu_i` (Pinelis per step as above, probability :math:`\ge1-\delta/2` over the
:math:`RJn` steps). Unrolled within a round (all coefficients are nonnegative) and across rounds,
:math:`V_k\le C_k+\sum_{l<k}c_{l,k}M_l` with deterministic weights: :math:`c=\lambda^j+\gamma
\frac{1-\lambda^j}{1-\lambda}` on the round's start and :math:`\lambda^{j-l}` on its own steps. The
rounding of round :math:`r` adds :math:`(\sqrt V+\varepsilon_r)^2\le V+2\rho\varepsilon_r+\varepsilon_r^2`.
**Concentration.** :math:`M_k` is a martingale difference whose conditional law is sub-Gaussian with
variance proxy :math:`4\eta^2\big(\max_{i\in S}w_iG_i^2/B\big)\|A_k\|_w^2` (Hoeffding's lemma for each
of the :math:`B` bounded centred terms :math:`\langle A_i,\nabla\ell_b-\overline{\nabla\ell}\rangle/B`,
independent with replacement, and through Hoeffding 1963, Theorem 4, without); stopped at the first
step :math:`\tau` with :math:`\|D_k\|>\rho`, :math:`\|A_k\|_w\le(a+\eta\mu)\rho` before it, and the
Azuma-Hoeffding inequality for martingales with sub-Gaussian increments (K. Azuma, "Weighted sums of
certain dependent random variables", Tohoku Math. J. 19, 1967; e.g. M. Wainwright,
*High-Dimensional Statistics*, 2019, Theorem 2.19) bounds each weighted sum by
:math:`\rho\sqrt{2W_k\log(2K/\delta)}` with probability :math:`\ge1-\delta/(2K)`
(:math:`W_k=\sum_lc_{l,k}^2\cdot` proxy, :math:`K=R(J+1)` steps). The proxy comes from the range of
one row's term: :math:`\langle A_i,\nabla\ell_b\rangle` lies in an interval of width
:math:`\|A_i\|\,G_i` (:math:`|\langle A_i,\nabla\ell_b\rangle|\le\mathrm{Lip}\|A_i\|\|x_b\|`), so
:math:`M_k` has proxy :math:`\frac{\eta^2}B\sum_iw_i^2G_i^2\|A_i\|^2\le\eta^2\frac{\max_iw_iG_i^2}B\|A_k\|_w^2`. On both events no :math:`\tau\le K`
exists when :math:`\rho^2\ge\max_kC_k+\rho\max_k(C'_k+\sqrt{2W_k\log(2K/\delta)})` (:math:`C'` the
rounding's :math:`2\varepsilon` terms), the smallest such :math:`\rho` being the root of that quadratic.
**Variance form.** Instead of bounding :math:`\|\zeta_k\|^2` on Pinelis' event, write
:math:`\|\zeta_k\|_w^2=E_k\|\zeta_k\|_w^2+N_k`: with replacement (and, by Hoeffding 1963, Theorem 4,
without) :math:`E_k\|n_i\|^2\le\frac1BE\|\nabla\ell_b\|^2\le\sigma_i^2/B`,
:math:`\sigma_i^2=\mathrm{Lip}^2\frac1{N_i}\sum_b\|x_b\|^2` (the rows' mean square norm instead of
the worst row's, and no logarithm), and :math:`N_k` is a martingale difference in an interval of width
:math:`\eta^2\sum_iw_i\bar G_i^2`, :math:`\bar G_i=\mathrm{Lip}(\max_b\|x_b\|+\frac1{N_i}\sum_b\|x_b\|)`
bounding every centred row gradient, hence sub-Gaussian with proxy
:math:`(\eta^2\sum_iw_i\bar G_i^2)^2/4`. The sum :math:`M_k+N_k` of two sub-Gaussian variables has
proxy at most :math:`(\rho\sqrt{s_M}+\sqrt{s_N})^2` (Hölder's inequality on the moment generating
function), and by Minkowski's inequality the weighted sums are bounded by
:math:`\sqrt{2\log(K/\delta)}(\rho\sqrt{W_k}+\sqrt{W^N_k})` with probability :math:`\ge1-\delta/K`
each (no Pinelis event needed). The form with the smaller :math:`\rho` is chosen, like the split,
from the constants alone. On the 4-client problem named below (FedProx, mu 1, J 5, 150 rounds) the
radius goes from 24.1 to 11.8 (batch 1), 10.9 to 5.0 (batch 8) and 5.7 to 3.1 (batch 64) with this
form and the proxy above.
So with probability :math:`\ge1-\delta`, :math:`\|\theta_r-\bar\theta_r\|\le\rho` at every round, and
the distance to the full-batch point obeys :math:`d_r\le\bar d_r+\rho` with :math:`\bar d` the
noiseless recursion :math:`\bar d_{r+1}=\kappa_r\bar d_r+b_{S_r}`. The noise now enters through its
variance (:math:`G^2/B` summed with the squared weights, about :math:`1/(1-a^2)` steps) instead of
its worst case summed in norm (about :math:`1/(1-a)` steps, times the union bound's log): on a
4-client logistic problem with :math:`\ell_2=0.1` the region shrinks from 78 to 30 (batch 1), 78 to 13
(batch 8) and 55 to 7 (batch 64), and with the variance form to 11.8, 5.0 and 3.1. It stays
conservative: :math:`G_i` is the worst row's gradient at any model (not at the models the run visits),
:math:`m_i` the regularization only, the union bound costs :math:`\sqrt{2\log(K/\delta)}`, and the
observed deviations are 0.02-0.2 there.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_real
from ..errors import InvalidParameterError

__all__ = ["per_sample_gradient_bounds", "row_moments", "noise_bounds", "martingale_radius", "BATCH_SAMPLING"]

#: how each local step's batch is drawn (module docstring)
BATCH_SAMPLING = ("fresh", "epoch")


def per_sample_gradient_bounds(problem) -> np.ndarray | None:
    r""":math:`G_i=2\,\mathrm{Lip}\max_b\|x_b\|` per client (module docstring); ``None`` when the loss
    is not Lipschitz in the score (e.g. squared loss: no bound holds for every model) or the rows
    are not at hand."""
    lip = float(getattr(getattr(problem, "loss", None), "lipschitz", np.inf))
    fed = getattr(problem, "federation", None)
    if not np.isfinite(lip) or fed is None or not hasattr(fed, "clients"):
        return None
    return np.array([2.0 * lip * float(np.max(np.linalg.norm(c.X, axis=1))) for c in fed.clients])


def noise_bounds(problem, fp, batch_size, rounds: int, delta: float, batch_sampling: str):
    r"""``(s, statement)``: the per-client bounds :math:`s_i` on a round's deviation from the
    full-batch local steps (module docstring) and the probability they hold with; ``None`` when no
    bound applies."""
    B = check_int(batch_size, "batch_size", low=1)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    if batch_sampling not in BATCH_SAMPLING:
        raise InvalidParameterError(f"batch_sampling must be one of {BATCH_SAMPLING}; got {batch_sampling!r}")
    moments = row_moments(problem)
    if moments is None or fp.info.get("per_client_factors") is None:
        return None
    G = moments[1]                                   # every centred row gradient is at most G-bar
    J, eta, mu = fp.config["local_steps"], fp.config["step_size"], fp.config.get("mu") or 0.0
    L, m = np.asarray(fp.info["smoothness"], float), np.asarray(fp.info["strong_convexity"], float)
    a = np.maximum(np.abs(1.0 - eta * (m + mu)), np.abs(1.0 - eta * (L + mu)))
    if np.any(a >= 1.0):
        return None
    sizes = np.array([c.X.shape[0] for c in problem.federation.clients])
    if batch_sampling == "fresh":
        n = int(problem.n_clients)
        per_step = delta / (max(int(rounds), 1) * int(J) * n)
        nu = G * min(1.0, float(np.sqrt(2.0 * np.log(2.0 / per_step) / B)))
        statement = f"probability >= 1 - {delta:g}"
    else:
        nu = G.copy()
        statement = "probability 1 (worst-case noise: batches from a shuffled epoch)"
    nu = np.where(B >= sizes, 0.0, nu) if batch_sampling == "epoch" else nu
    s = eta * nu * (1.0 - a ** J) / (1.0 - a)
    return s, statement



def martingale_radius(problem, fp, batch_size, subsets, eps, delta: float, aggregation="examples") -> float | None:
    r"""The cross-round radius :math:`\rho` (module docstring, *cross-round bound*): with probability
    :math:`\ge1-\delta` a correct run with fresh minibatches stays within :math:`\rho` of the
    full-batch run from the same start and with the same subsets, at every round. ``subsets``: per
    round ``"all"``, ``"unknown"`` or an index array (:mod:`drflmodel.landing.participation`);
    ``eps``: the per-round rounding allowances; ``aggregation``: how a recorded subset is averaged
    (``"examples"``: the weights renormalized over it, ``"uniform"``, or ``None``: unknown, the
    worst client of the subset). ``None`` where the bound's assumptions fail (some
    :math:`a_i\ge1`, no per-sample bound): then only the per-step bound applies. The split
    parameter :math:`t` is chosen on a fixed grid from the constants alone (rounding left out), so the
    choice does not depend on the run."""
    B = check_int(batch_size, "batch_size", low=1)
    G = per_sample_gradient_bounds(problem)
    if G is None or fp.info.get("smoothness") is None or len(subsets) == 0:
        return None
    eta, mu = float(fp.config["step_size"]), float(fp.config.get("mu") or 0.0)
    L, m = np.asarray(fp.info["smoothness"], float), np.asarray(fp.info["strong_convexity"], float)
    a = np.maximum(np.abs(1.0 - eta * (m + mu)), np.abs(1.0 - eta * (L + mu)))
    if np.any(a >= 1.0):
        return None
    moments = row_moments(problem)
    splits = [1.0] if mu == 0.0 else [0.1 * k for k in range(1, 10)]
    choices = [(s, mode) for s in splits for mode in ("worst", "variance")]
    radii = [_radius(problem, fp, B, G, a, subsets, np.zeros(len(subsets)), delta, s, aggregation, mode, moments)
             for s, mode in choices]
    if all(r is None for r in radii):
        return None
    best, mode = choices[int(np.argmin([np.inf if r is None else r for r in radii]))]
    return _radius(problem, fp, B, G, a, subsets, eps, delta, best, aggregation, mode, moments)


def row_moments(problem) -> tuple[np.ndarray, np.ndarray] | None:
    r"""Per client :math:`(\sigma_i^2, ar G_i)`: :math:`\sigma_i^2=\mathrm{Lip}^2\,rac1{N_i}\sum_b\|x_b\|^2`
    bounds the variance :math:`E\|
abla\ell_b-\overline{
abla\ell}\|^2\le E\|
abla\ell_b\|^2` of one
    uniformly drawn row's gradient at every model, and :math:`ar G_i=\mathrm{Lip}(\max_b\|x_b\|+
    rac1{N_i}\sum_b\|x_b\|)` bounds every centred row gradient (module docstring, *variance form*)."""
    lip = float(getattr(getattr(problem, "loss", None), "lipschitz", np.inf))
    fed = getattr(problem, "federation", None)
    if not np.isfinite(lip) or fed is None or not hasattr(fed, "clients"):
        return None
    norms = [np.linalg.norm(c.X, axis=1) for c in fed.clients]
    return (np.array([lip ** 2 * float(np.mean(x ** 2)) for x in norms]),
            np.array([lip * (float(np.max(x)) + float(np.mean(x))) for x in norms]))


def _radius(problem, fp, B, G, a, subsets, eps, delta, split, aggregation="examples", mode="worst",
            moments=None) -> float | None:
    r""":math:`\rho` for one split :math:`\lambda=a^{2\,\mathrm{split}}` (module docstring); ``mode``
    ``"worst"`` (the noise's square bounded on Pinelis' event) or ``"variance"`` (its conditional mean
    plus a martingale term)."""
    if mode == "variance" and moments is None:
        return None
    J, eta, mu = int(fp.config["local_steps"]), float(fp.config["step_size"]), float(fp.config.get("mu") or 0.0)
    p = np.asarray(fp.config["weights"], float)
    n, R = p.size, len(subsets)
    K = R * (J + 1)                                   # local steps and aggregations: the stopping targets
    Gc = G if moments is None else moments[1]         # centred row gradients: at most G-bar <= G
    nu2 = (Gc * min(1.0, float(np.sqrt(2.0 * np.log(4.0 * R * J * n / delta) / B)))) ** 2
    variance = mode == "variance"
    if variance:                                      # E|n|^2 <= sigma^2 / B; |n| <= Gbar always; no Pinelis event
        nu2, Gbar2 = moments[0] / B, moments[1] ** 2
    log_k = float(np.log((1.0 if variance else 2.0) * K / delta))
    Ca = Cb = W = WN = 0.0                            # V_k <= Ca + rho Cb + (martingale, proxy (rho sqrt W + sqrt WN)^2)
    A_max = B_max = 0.0
    for S, e in zip(subsets, np.asarray(eps, float)):
        if isinstance(S, str) and S == "all":
            idx, w = np.arange(n), p / p.sum()
        elif isinstance(S, str):                      # a strict subset, not recorded: any weights
            idx, w = np.arange(n), None
        else:
            idx = np.asarray(S, int)
            w = (None if aggregation is None else p[idx] / p[idx].sum() if aggregation == "examples"
                 else np.full(idx.size, 1.0 / idx.size))
        aS = float(np.max(a[idx]))
        noise2 = float(np.max(nu2[idx])) if w is None else float(w @ nu2[idx])
        g2 = float(np.max(G[idx] ** 2 if w is None else w * G[idx] ** 2)) / B
        sN2 = 0.0 if not variance else (eta ** 2 * (float(np.max(Gbar2[idx])) if w is None
                                                    else float(w @ Gbar2[idx]))) ** 2 / 4.0
        if mu == 0.0 or aS == 0.0:
            lam, gam = aS ** 2, (eta * mu) ** 2 * (0.0 if mu == 0.0 else 1.0)
        else:
            lam = aS ** (2.0 * split)
            t = lam / aS ** 2 - 1.0
            gam = (1.0 + 1.0 / t) * (eta * mu) ** 2
        if lam >= 1.0 or (gam > 0 and gam / (1.0 - lam) > 1.0):
            return None
        s2 = eta ** 2 * g2 * (aS + eta * mu) ** 2
        Ca0, Cb0, W0, WN0 = Ca, Cb, W, WN             # the round's start: V_0 <= Ca0 + rho Cb0 + ...
        inner_a = inner_w = inner_n = 0.0
        for j in range(1, J + 1):                     # V_j <= lam V_{j-1} + gam V_0 + eta^2 nu^2 + M
            c = lam ** j + (gam * (1.0 - lam ** j) / (1.0 - lam) if gam > 0 else 0.0)
            inner_a = lam * inner_a + eta ** 2 * noise2
            inner_w = lam ** 2 * inner_w + s2
            inner_n = lam ** 2 * inner_n + sN2
            Ca, Cb, W, WN = c * Ca0 + inner_a, c * Cb0, c ** 2 * W0 + inner_w, c ** 2 * WN0 + inner_n
            A_max = max(A_max, Ca + float(np.sqrt(2.0 * WN * log_k)))
            B_max = max(B_max, Cb + float(np.sqrt(2.0 * W * log_k)))
        Ca, Cb = Ca + float(e) ** 2, Cb + 2.0 * float(e)   # the round's rounding: (|D| + eps)^2
        A_max = max(A_max, Ca + float(np.sqrt(2.0 * WN * log_k)))
        B_max = max(B_max, Cb + float(np.sqrt(2.0 * W * log_k)))
    return float((B_max + np.sqrt(B_max ** 2 + 4.0 * A_max)) / 2.0)   # rho^2 >= A + rho B
