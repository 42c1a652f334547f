r"""What a client answers for its own Wasserstein ball: the three client queries of the federated
oracle (:mod:`.federated`), declared for :mod:`drflmodel.problems.registry` -- their answers'
arrays and sizes, what each reveals, the site's handler, the default budgets and the server's
checks. Nothing heavy is imported here (a client process reads this before it answers anything).

==================  =========================================  ========================================
query               answer (floats)                            asked
==================  =========================================  ========================================
wasserstein_value   value :math:`z_s(\theta)` 1,               twice per certificate (every
                    multiplier :math:`\lambda_s^\star` 1         ``check_every`` rounds): with the bound
wasserstein_prox    prox point :math:`V_s` :math:`P`,          once per ADMM round
                    :math:`\varpi_s` 1
wasserstein_bound   bound term :math:`b_s` 1, its dual         once per certificate
                    residual 1
==================  =========================================  ========================================

The server's checks (:func:`check_answer`) hold whatever the client's rows are: a worst-case loss
is at least 0 (every loss of the family is non-negative), a multiplier of :math:`\lambda\ge0` is
non-negative, a bound term's dual residual is in :math:`[0,10^{-6}]` (the conic route's acceptance
rule; beyond it the client answers :math:`b_s=-\infty`, which the decoder rejects as non-finite).
What needs the rows -- that :math:`z_s` is the worst case of *these* rows -- cannot be checked:
the certificate holds for the balls the clients answered for.
"""

from __future__ import annotations

import numpy as np

from ..registry import ClientQuery

__all__ = ["QUERIES", "check_answer", "RESIDUAL_TOL"]

#: the largest dual residual of a bound term the server accepts (the conic route's rule)
RESIDUAL_TOL = 1e-6


def _one(answer: dict, key: str) -> float:
    return float(np.asarray(answer[key], float).reshape(-1)[0])


def check_answer(request: dict, options: dict, answer: dict) -> str | None:
    """The server's check of a Wasserstein answer (module docstring): the reason it is rejected, or ``None``."""
    if "lambda" in answer:
        value, lam = _one(answer, "value"), _one(answer, "lambda")
        if lam < 0:
            return f"multiplier lambda_s = {lam:.6g} < 0"
        if value < 0:
            return f"worst-case loss z_s = {value:.6g} < 0 (every loss of the family is non-negative)"
    if "dual_residual" in answer:
        r = _one(answer, "dual_residual")
        if not 0 <= r <= RESIDUAL_TOL:
            return f"the bound term's dual residual {r:.3g} is not in [0, {RESIDUAL_TOL:g}]"
    return None


_HANDLER = "drflmodel.problems.wasserstein.federated:answer"

#: the queries of the federated oracle (:class:`~drflmodel.problems.registry.ClientQuery`)
QUERIES = (
    ClientQuery("wasserstein_value", {"value": (1, "Wasserstein worst-case loss z_s(theta)"),
                                      "lambda": (1, "Wasserstein multiplier lambda_s")},
                _HANDLER, budget=200, floor=False, check=check_answer),
    ClientQuery("wasserstein_prox", {"w_hat": ("P", "Wasserstein prox point V_s"),
                                     "varpi": (1, "Wasserstein varpi_s")},
                _HANDLER, budget=600, floor=True),
    ClientQuery("wasserstein_bound", {"bound": (1, "Wasserstein bound term b_s"),
                                      "dual_residual": (1, "dual residual of b_s")},
                _HANDLER, budget=200, floor=False, check=check_answer),
)
