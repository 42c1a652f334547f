r"""Where a federated strategy lands, certified -- and whether a run landed there.

A strategy with local steps (FedAvg, FedProx) does not converge to the optimum of the objective
it claims to minimize: it lands on its own fixed point (client drift). This package computes that
point with a certificate, for each strategy whose landing point is characterized in the literature,
and grades runs against it:

* :func:`fixed_point` -- the certified landing point of a strategy on a problem
  (:class:`FixedPoint`: the point, a certified radius, the published result it comes from);
  strategies without a characterization (FedMedian, Krum, ...) are refused by name with the reason
  (:class:`StrategyNotCharacterized`; the catalogue is :data:`CHARACTERIZED` / :data:`REFUSED`);
* :func:`conformance` -- a run (simulator trace, recorded Flower run, graded Flower app, iterates)
  graded against both the optimum and that point: "landed on its fixed point (drift from the
  optimum: ..., expected)" or "landed elsewhere: not the strategy it claims to be"
  (:class:`Conformance`).

The mathematics of each kind of point is in :mod:`drflmodel.landing.contraction` (FedAvg /
FedProx with local steps: Banach's fixed-point bound), :mod:`drflmodel.landing.moreau` (FedProx
with exact local solves: the Moreau-envelope problem with lower and upper bounds) and
:mod:`drflmodel.landing.points` (strategies that land on the optimum).
"""

from __future__ import annotations

from .verdict import VERDICTS, Conformance, conformance
from .points import fixed_point
from .result import FIXED_POINT_STATUSES, FixedPoint
from .strategies import CHARACTERIZED, REFUSED, Characterization, StrategyNotCharacterized

__all__ = ["fixed_point", "FixedPoint", "FIXED_POINT_STATUSES", "conformance", "Conformance", "VERDICTS",
           "CHARACTERIZED", "REFUSED", "Characterization", "StrategyNotCharacterized"]
