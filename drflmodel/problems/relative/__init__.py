r"""Relative fairness with the integrated ambiguity set :math:`\Lambda_\varphi(A,B)`, certified.

The relative-fairness paper's problem (6) (Nakakita et al. 2024, §3.2), with drflmodel's exact
reformulations:

.. math::

    \min_{\theta\in\Theta}\ \max_{\lambda\in\Lambda_\varphi(A,B)}\ \lambda^\top f(\theta)
    \;=\;\min_{\theta\in\Theta}\ \frac{F_{A,\max}(\theta)-\varphi F_{B,\min}(\theta)}{1-\varphi},
    \qquad \Lambda_\varphi(A,B)=\Big\{\tfrac{a-\varphi b}{1-\varphi}: a\in A,\ b\in B\Big\},

with :math:`A, B` polytopes inside the simplex (``Simplex``, ``CVaR``, ``HCVaR``, ``LpBall`` with
:math:`p\in\{1,\infty\}`), :math:`\varphi\in[0,1)` and :math:`\Theta=\mathbb R^d` or a box.
For :math:`\varphi>0` the weights can be negative: the problem is **not convex in general and not
DCP even when it is convex**. What the oracle proves depends on the case
(``solution.info["method"]`` records which route was taken; :mod:`.routes`):

=====================  ============================================================================
``"FederatedDRO"``     :math:`\varphi=0`, :math:`\Theta=\mathbb R^d`: the problem *is* federated DRO
                       over :math:`A`; delegated (same answer, same certificate).
``"R1"``               quadratic losses, every vertex matrix :math:`Q(\lambda_v)\succeq0` (exact
                       convexity test) and few vertices: vertex-enumeration SOCP. Lower bound by
                       weak duality at :math:`\bar\lambda=\sum_v\mu_v\lambda_v` (the constraint
                       multipliers): :math:`L=\min_{\theta\in\Theta}\bar\lambda^\top f(\theta)`.
``"R3"``               quadratic, convex, :math:`\Theta=\mathbb R^d`: matrix-fractional dual; same
                       weak-duality bound at the dual optimum :math:`\lambda^\star`.
``"R2"``               quadratic otherwise: lifted Shor SDP with the sets' LP duals (+ RLT cuts on
                       a box). The SDP value is a valid lower bound; :math:`U=` objective at the
                       extracted (box-feasible) :math:`\hat\theta`, improved by a local refinement.
                       ``"optimal"`` only if the lifted matrix is numerically rank one **and**
                       :math:`U` equals the bound to tolerance. Otherwise, with a box, a spatial
                       branch-and-bound (SDP + RLT bound on every leaf) may close the gap
                       (``"optimal"`` with that certificate); else ``"optimal_within_gap"``.
``"local"``            non-quadratic losses, :math:`\varphi>0` (or a box at :math:`\varphi=0`): the
                       convex--concave procedure from several seeded starts, with the best valid
                       lower bound of :meth:`RelativeFairness.lower_bounds`; status ``"local"``
                       unless the bound closes the gap.
=====================  ============================================================================

The convexity tests are exposed as :meth:`RelativeFairness.convexity_report` (the exact
vertex PSD test for quadratics and the three :math:`\|\Lambda_\varphi\|_1` conditions of
Prop 10, Theorem 3 and Assumption 8, separately) and :meth:`RelativeFairness.max_convex_phi`.
:func:`select_phi` implements the paper's rule (8) of §5.3 in a numerically stable form.

Modules: :mod:`.problem` (the formulation and its numpy objective), :mod:`.convexity` (every
convexity test, ``max_convex_phi``), :mod:`.phi_selection` (:func:`select_phi`, the paper's rule
(8)), :mod:`.routes` (one :class:`Route` per row above, each with ``applies`` and its own
certificate), :mod:`.local` (the convex--concave local search and its lower bounds: Kelley cuts,
strong convexity), :mod:`.quadratic` (the R1/R2/R3 models of quadratic losses).
"""

from __future__ import annotations

from .convexity import MAX_VERTEX_PAIRS, Condition, ConvexityReport  # noqa: F401
from .phi_selection import PhiSelection, select_phi
from .problem import RelativeFairness
from .routes import RANK_TOL  # noqa: F401

__all__ = ["RelativeFairness", "ConvexityReport", "Condition", "PhiSelection", "select_phi"]

#: the values of ``solve(method=...)``
METHODS = ("auto", "FederatedDRO", "R1", "R2", "R3", "local")
