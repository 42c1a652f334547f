r"""DEO-constrained learning for fair vertical FL, with honest certificates (fair-VFL paper, Liu et al. 2021).

Modules: :mod:`.problem` (:class:`DEOConstrained`: the formulation, its numpy side and CVXPY
programs), :mod:`.views` (:class:`PartyView`, :class:`ServerView`), :mod:`.lagrangian` (the
Lagrangian (6), the server's quantities and the Lagrangian bounds), :mod:`.routes` (the convex
route and the shared route base), :mod:`.sdp` (the squared-loss QCQP: Shor SDP, extraction,
S-lemma certificate, the ``"sdp"`` route) and :mod:`.local` (the non-convex ``"dc"`` and
``"penalty_local"`` routes).
"""

from __future__ import annotations

from .problem import FAIRNESS_LOSSES, TOLERANCE_CONVENTIONS, DEOConstrained, LinearFairnessLoss
from .views import PartyView, ServerView

__all__ = ["DEOConstrained", "PartyView", "ServerView", "LinearFairnessLoss", "FAIRNESS_LOSSES",
           "TOLERANCE_CONVENTIONS"]
