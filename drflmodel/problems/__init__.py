"""The exact oracles, one folder per formulation family (imported lazily).

* :mod:`.engine` -- the solve engine every family shares: the route contract and ``dispatch``,
  the solver sequence, the conic route, the problem base classes;
* :mod:`.minmax` -- the client-weight min-max family (``FederatedDRO``, ``FairnessAwareFL``)
  with its routes;
* :mod:`.wasserstein` -- Wasserstein DRFL;
* :mod:`.relative` -- relative fairness;
* :mod:`.deo` -- DEO-constrained vertical FL.

The family classes are those of :mod:`.registry` (one entry per family). The former public module
paths ``drflmodel.problems.dro`` and ``drflmodel.problems.fafl`` still import, with a
:class:`DeprecationWarning`, until the release after 0.1.0 (:mod:`._moved`).
"""

from __future__ import annotations

from .._lazy import lazy_attributes as _lazy_attributes
from . import _moved
from .registry import FAMILIES as _FAMILIES

_moved.install()          # the deprecated old paths (an import finder; nothing else runs here)

_LAZY = {
    "Problem": ("drflmodel.problems.engine.problem", "Problem"),
    "ClientView": ("drflmodel.problems.engine.problem", "ClientView"),
    "ProblemBase": ("drflmodel.problems.engine.problem", "ProblemBase"),
    "VerticalProblem": ("drflmodel.problems.engine.problem", "VerticalProblem"),
    "Route": ("drflmodel.problems.engine.route", "Route"),
    "SolveRequest": ("drflmodel.problems.engine.route", "SolveRequest"),
    "ConicRoute": ("drflmodel.problems.engine.conic", "ConicRoute"),
    **{f.cls: (f.module, f.cls) for f in _FAMILIES.values()},
}
__all__ = sorted(_LAZY)

__getattr__, __dir__ = _lazy_attributes("drflmodel.problems", _LAZY, also=["registry"])
