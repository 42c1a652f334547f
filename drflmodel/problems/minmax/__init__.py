r"""The client-weight min-max family, :math:`\min_\theta\max_{\lambda\in\Lambda}\lambda^\top f(\theta)-\psi(\lambda)`
with :math:`\Lambda\subset\mathbb R^n_{\ge0}`: :class:`~.dro.FederatedDRO` (the Scaff-PD paper's
problem (1.1)) and :class:`~.fafl.FairnessAwareFL` (the FAFL paper's HCVaR objective), their
shared machinery :class:`~.dro.WeightedMinMax`, and their routes and helpers:

=========================  =====================================================================
module                     what it is
=========================  =====================================================================
:mod:`.dro`                ``WeightedMinMax`` (epigraph form, fixed-weight certificate) and
                           ``FederatedDRO``
:mod:`.fafl`               ``FairnessAwareFL`` and its smoothed target (route ``"smoothed"``)
:mod:`.lagrangian_sqp`     route ``"sqp"``: SQP with the Lagrangian Hessian (every width, every K)
:mod:`.hessian_sqp`        route ``"hessian_sqp"``: SQP with one dense Hessian factor per client
:mod:`.active_set`         route ``"active_set"``: piecewise-linear losses, smoothing + active set
:mod:`.pieces`             affine pieces of a piecewise-linear loss, Moreau envelope, Lagrangian
                           bound from per-row piece multipliers
:mod:`.level_bundle`       route ``"level_bundle"``: level bundle method (values and subgradients only)
:mod:`.fixed_weight_bound` the numpy fixed-weight lower bound (Newton's method closed by a
                           strong-convexity or self-concordance bound); not a route
:mod:`.hessian_free`       route ``"hessian_free"``: values, gradients and Hessian-vector
                           products only, no P x P array (:mod:`drflmodel.matrix_free`)
:mod:`.hessian_free_steps` its steps: L-BFGS on the smooth composition, a quasi-Newton SQP
:mod:`.hessian_free_bound` the fixed-weight lower bound without the Hessian (strong convexity of
                           the ridge, the intercepts' exact partial minimum); not a route
:mod:`.route_costs`        what the routes cost and allocate (``auto`` ranks them by it); not a
                           route
=========================  =====================================================================
"""

from __future__ import annotations

from .dro import FederatedDRO, WeightedMinMax
from .fafl import FairnessAwareFL

__all__ = ["FederatedDRO", "FairnessAwareFL", "WeightedMinMax"]
