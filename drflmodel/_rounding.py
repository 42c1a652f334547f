r"""Penalties :math:`\psi(\lambda)` rounded **up** past their exact value, by proved floating-point
error bounds.

A certificate's lower bound is :math:`L=v-\psi(\lambda)` with :math:`v` a certified lower bound on
:math:`\min_\theta\lambda^\top f(\theta)`; it may exceed the optimum only if :math:`\psi` is
evaluated *below* its exact value. Each function here returns a float :math:`\ge` the exact
:math:`\psi(\lambda)` of the float input (the weights are taken as exact). Notation (N. J. Higham,
"Accuracy and Stability of Numerical Algorithms", 2nd ed., §2.2 and Lemma 3.1): :math:`u=2^{-53}`
the unit round-off, :math:`\mathrm{fl}(a\circ b)=(a\circ b)(1+\epsilon)` with :math:`|\epsilon|\le u`
for every basic operation, ``math.fsum`` correctly rounded (one :math:`u`), and numpy's ``power`` /
``log`` within one ulp (:math:`2u` relative) of the exact value (glibc's documented accuracy).
A product of :math:`k` factors :math:`(1-u)^{-1}` is at most :math:`1+2ku` for :math:`ku\le 1/2`,
which is how the final safety factors below are sized. The :class:`~drflmodel.sets.KLPenalty`'s
bound is in its :meth:`~drflmodel.sets.KLPenalty.psi`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["UNIT_ROUNDOFF", "upper_psi_chi_square", "upper_psi_qffl"]

UNIT_ROUNDOFF = np.finfo(float).eps / 2


def upper_psi_chi_square(lam: np.ndarray, rho: float) -> float:
    r"""An upper bound on :math:`\psi(\lambda)=\frac\rho{2n}\sum_i(n\lambda_i-1)^2` (the
    :math:`\chi^2` penalty of the Scaff-PD paper, (B.2)); it exceeds :math:`\psi` by at most about
    :math:`\frac{2u\rho}n\sum_i|d_i|(|d_i|+n\lambda_i)+12u\psi`.

    With :math:`p_i=\mathrm{fl}(n\lambda_i)=n\lambda_i(1+\epsilon_1)` and
    :math:`\hat d_i=\mathrm{fl}(p_i-1)=(p_i-1)(1+\epsilon_2)`, the exact :math:`d_i=n\lambda_i-1`
    satisfies :math:`|d_i-\hat d_i|\le u|\hat d_i|/(1-u)+u\,n|\lambda_i|\le e_i:=\mathrm{fl}(2u(|\hat d_i|+|p_i|))`
    (the factor 2 covers :math:`|p_i|\ge n|\lambda_i|(1-u)` and the two roundings of :math:`e_i`).
    So :math:`d_i^2\le t_i=(|\hat d_i|+e_i)^2`, computed as :math:`\hat t_i\ge t_i(1-u)^2`; the sum
    by ``math.fsum`` (:math:`\ge(1-u)\sum\hat t_i`), :math:`\hat c=\mathrm{fl}(\rho/(2n))\ge(1-u)\rho/(2n)`
    and :math:`\hat\psi=\mathrm{fl}(\hat c S)`: :math:`\psi\le\hat\psi(1-u)^{-5}\le\mathrm{fl}(\hat\psi(1+12u))`."""
    u = UNIT_ROUNDOFF
    lam = np.asarray(lam, float)
    n = lam.size
    p = n * lam
    d = np.abs(p - 1.0)
    e = 2.0 * u * (d + np.abs(p))
    value = (rho / (2 * n)) * math.fsum((d + e) ** 2)
    return float(value * (1.0 + 12.0 * u))


def upper_psi_qffl(lam: np.ndarray, q: float) -> float:
    r"""An upper bound on the q-FFL penalty :math:`\psi_q(\lambda)=\frac q{q+1}\sum_i\lambda_i^{1+1/q}`
    (Li, Sanjabi, Beirami and Smith, ICLR 2020) for :math:`\lambda\ge0`, within about
    :math:`(20u+8u\,e\max_i|\log\lambda_i|)\psi` of it, :math:`e=1+1/q`.

    The exponent is rounded: :math:`\hat e=\mathrm{fl}(1+\mathrm{fl}(1/q))` has
    :math:`|\hat e-e|\le u/q+u\hat e\le 3u\hat e`. For :math:`\lambda_i>0`,
    :math:`\lambda_i^{e}=\lambda_i^{\hat e}\exp((e-\hat e)\log\lambda_i)\le\lambda_i^{\hat e}e^{\delta_i}`,
    :math:`\delta_i=3u\hat e|\log\lambda_i|`, computed as
    :math:`\hat\delta_i=\mathrm{fl}(4u\hat e|\hat\ell_i|)\ge\delta_i`
    (the factor 4/3 covers the log's two ulps and three roundings). :math:`e^{\delta}\le1+2\delta`
    for :math:`\delta\le1` (else ``exp`` is used, its ulp counted below). The power is within
    :math:`2u`, the factor, the product, the ``math.fsum``, :math:`\mathrm{fl}(q/\mathrm{fl}(q+1))` and
    the last product each within :math:`u` or :math:`2u`, at most :math:`9` roundings of
    :math:`(1-u)^{-1}` in all: :math:`\psi_q\le\mathrm{fl}(\hat\psi(1+20u))`."""
    u = UNIT_ROUNDOFF
    lam = np.asarray(lam, float)
    e_hat = 1.0 + 1.0 / q
    pos = lam > 0
    terms = np.zeros_like(lam)
    terms[pos] = lam[pos] ** e_hat
    delta = 4.0 * u * e_hat * np.abs(np.log(lam[pos]))
    with np.errstate(over="ignore"):
        factor = np.where(delta <= 1.0, 1.0 + 2.0 * delta, np.exp(np.minimum(delta, 709.0)) * (1.0 + 4.0 * u))
    factor = np.where(delta > 709.0, np.inf, factor)
    terms[pos] = terms[pos] * factor
    value = (q / (q + 1.0)) * math.fsum(terms)
    return float(value * (1.0 + 20.0 * u))
