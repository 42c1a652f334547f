"""Client sampling by the server (partial participation), drawn from the run's server generator
``runtime.rng`` so that a run is reproducible from its seed (``drflmodel.solvers._base``, "Seeding").

Two laws, as the papers use them:

* :func:`sample_by_weights` -- :math:`m` i.i.d. draws **with replacement** from a probability
  vector (FAFL Strategy 2 draws by :math:`p`; DRFA's :math:`D^{(s)}` and Stochastic-AFL's primal
  client by the current weights :math:`\\lambda`). The average :math:`\\frac1m\\sum_{k\\in D}u_k`
  is unbiased for :math:`\\sum_i\\lambda_iu_i`; a client drawn twice counts twice.
* :func:`sample_uniform` -- a uniformly random subset of :math:`m` distinct clients (DRFA's
  :math:`U`, Stochastic-AFL's dual client); :math:`v_i=\\frac nm f_i\\mathbb 1[i\\in U]` is
  unbiased for :math:`f`.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["sample_by_weights", "sample_uniform", "sampling_probabilities"]


def sampling_probabilities(weights, name: str = "clients_per_round") -> np.ndarray:
    """``weights`` as a probability vector for :func:`sample_by_weights`.

    Raises :class:`InvalidParameterError` (naming ``name``) unless every entry is
    :math:`\\ge -10^{-12}` and the sum is within :math:`10^{-9}` of 1; round-off below these
    tolerances is removed (negative zeros set to 0, then renormalized)."""
    w = np.asarray(weights, float)
    if not np.all(np.isfinite(w)) or np.any(w < -1e-12) or abs(w.sum() - 1.0) > 1e-9:
        raise InvalidParameterError(
            f"{name}: sampling clients by their weights needs weights in the simplex (>= 0, sum 1); "
            f"got {np.array2string(w, precision=4)} (sum {w.sum():.6g}); use a weight set inside the "
            "simplex or full participation (clients_per_round=None)")
    w = np.maximum(w, 0.0)
    return w / w.sum()


def sample_by_weights(rng: np.random.Generator, probabilities, m: int):
    """``m`` draws with replacement by ``probabilities`` (one ``rng.choice`` call).

    Returns ``(multiplicity, members)``: ``multiplicity[i]`` is how often client *i* was drawn
    (shape ``(n,)``, float) and ``members`` the distinct drawn clients, ascending."""
    p = np.asarray(probabilities, float)
    draws = rng.choice(p.size, size=m, replace=True, p=p)
    mult = np.bincount(draws, minlength=p.size).astype(float)
    return mult, np.flatnonzero(mult)


def sample_uniform(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """``m`` distinct clients out of ``n``, uniformly at random (ascending indices)."""
    return np.sort(rng.choice(n, size=m, replace=False))
