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
:math:`G_i=2\,\mathrm{Lip}\max_b\|x_b\|`, computed from the client's rows, for every model.
**Concentration.** When each step draws its batch afresh (uniformly with replacement -- drflmodel's
simulator --, or without replacement within the batch), :math:`n_j` is, given the past, a mean of
:math:`B` centred vectors bounded by :math:`G_i`; Pinelis' inequality for sums in a Hilbert space
(I. Pinelis, "Optimum bounds for the distributions of martingales in Banach spaces", Ann.
Probab. 22(4), 1994, Theorem 3.5: :math:`P(\|S\|\ge r)\le2e^{-r^2/(2\sum_bc_b^2)}`), which holds
for sampling without replacement too (it bounds :math:`E\cosh(\lambda\|S\|)`, a convex function of
the sum, and W. Hoeffding, "Probability inequalities for sums of bounded random variables", JASA
1963, Theorem 4, orders such expectations below those with replacement), gives
:math:`\|n_j\|\le\nu_i=G_i\min\!\big(1,\sqrt{2\log(2/\delta')/B}\big)` with probability
:math:`\ge1-\delta'`; a union bound over the :math:`RJn` steps with :math:`\delta'=\delta/(RJn)` makes
it hold for the whole run with probability :math:`\ge1-\delta`. Batches cut from one shuffled epoch
(a PyTorch ``DataLoader``) are not fresh given the past; for them (``batch_sampling="epoch"``, the
default when the run does not say) :math:`\nu_i=G_i`, with probability 1. A batch of all the rows
drawn without replacement is the full gradient (:math:`\nu_i=0`).

**The region.** The round is :math:`\theta^{r+1}=T_S(\theta^r)+\xi_r` with
:math:`\|\xi_r\|\le\eta_g s_S` (:math:`s_S=\sum_ip_is_i` with every client, :math:`\max_{i\in S}s_i`
for a sampled subset), which enters the bounds of :mod:`drflmodel.landing.participation` exactly like
a subset's pull: :math:`d_{r+1}\le\kappa_rd_r+\eta_g(b_r+s_r)+\varepsilon_r`, and the run ends within
:math:`\max_r(\eta_g(b_r+s_r)+\varepsilon_r)/(1-\kappa_r)` of the full-batch fixed point (the *noise
region*). A run that breaks these bounds is "elsewhere": a correct run does that with probability at
most :math:`\delta` (0 with the worst-case :math:`\nu_i`).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_real
from ..errors import InvalidParameterError

__all__ = ["per_sample_gradient_bounds", "noise_bounds", "BATCH_SAMPLING"]

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
    G = per_sample_gradient_bounds(problem)
    if G is None or fp.info.get("per_client_factors") is None:
        return None
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
