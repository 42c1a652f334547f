r"""Wasserstein distributionally robust federated learning (the DRFL paper of Bai, Wong, Qiao & Ho,
problem (4)): per-client type-1 Wasserstein balls and a client-weight set.

=============================  ================================================================
module                         what it is
=============================  ================================================================
:mod:`.problem`                ``WassersteinDRFL``, ``ExactDualWAFL``, the client view and the
                               special cases (``erm``, ``afl``, ``drfa``, ``wafl``)
:mod:`.omega`                  the per-loss constraint sets :math:`\Omega_s` (Proposition 4.2,
                               Appendix B) and the exact per-client worst case
:mod:`.multiclass`             the softmax loss: the K-class cost and its exact reformulation
                               (:math:`\lambda_s\ge\max_{j<k}\|w_k-w_j\|_*`), derived and cited
:mod:`.multiclass_bound`       the rigorous numpy lower bound of the softmax loss (tangents, label
                               multipliers, flows over the class pairs)
:mod:`.federated`              the federated oracle: each client answers for its own ball;
                               consensus ADMM and a dual-decomposition certificate on the server
:mod:`.trust_region_sqp`       route ``"trust_region_sqp"``: trust-region SQP on the exact objective
:mod:`.hessian_free`           route ``"hessian_free"``: matrix-free, for smooth worst cases
:mod:`.lagrangian_bound`       the rigorous numpy Lagrangian lower bound (unbounded support)
=============================  ================================================================
"""

from __future__ import annotations

from .problem import (ExactDualWAFL, WassersteinClientView, WassersteinDRFL, afl, ball_support_expr, drfa, erm,
                      wafl)

__all__ = ["WassersteinDRFL", "ExactDualWAFL", "WassersteinClientView", "ball_support_expr", "erm", "afl",
           "drfa", "wafl"]
