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
:mod:`.queries`                the federated oracle's client queries, declared for the registry
                               (light: a client process reads it before it answers)
=============================  ================================================================

The names below are imported on first use, so reading :mod:`.queries` imports no CVXPY.
"""

from __future__ import annotations

from ..._lazy import lazy_attributes as _lazy_attributes

__all__ = ["WassersteinDRFL", "ExactDualWAFL", "WassersteinClientView", "ball_support_expr", "erm", "afl",
           "drfa", "wafl"]

__getattr__, __dir__ = _lazy_attributes(
    "drflmodel.problems.wasserstein", {name: ("drflmodel.problems.wasserstein.problem", name) for name in __all__},
    submodules=("problem", "omega", "multiclass", "multiclass_bound", "federated", "trust_region_sqp", "hessian_free",
                "lagrangian_bound", "queries"))
