"""The exact oracles, one folder per formulation family (imported lazily).

* :mod:`.engine` -- the solve engine every family shares: the route contract and ``dispatch``,
  the solver sequence, the conic route, the problem base classes;
* :mod:`.minmax` -- the client-weight min-max family (``FederatedDRO``, ``FairnessAwareFL``)
  with its routes;
* :mod:`.wasserstein` -- Wasserstein DRFL;
* :mod:`.relative` -- relative fairness;
* :mod:`.deo` -- DEO-constrained vertical FL.

The former module paths (``drflmodel.problems.dro``, ``._base``, ``._sqp``, ...) still import, with
a :class:`DeprecationWarning`, for one release (:mod:`._moved`).
"""

from __future__ import annotations

import importlib

from . import _moved

_moved.install()          # the deprecated old paths (an import finder; nothing else runs here)

_LAZY = {
    "Problem": ("drflmodel.problems.engine.problem", "Problem"),
    "ClientView": ("drflmodel.problems.engine.problem", "ClientView"),
    "ProblemBase": ("drflmodel.problems.engine.problem", "ProblemBase"),
    "VerticalProblem": ("drflmodel.problems.engine.problem", "VerticalProblem"),
    "Route": ("drflmodel.problems.engine.route", "Route"),
    "SolveRequest": ("drflmodel.problems.engine.route", "SolveRequest"),
    "ConicRoute": ("drflmodel.problems.engine.conic", "ConicRoute"),
    "FederatedDRO": ("drflmodel.problems.minmax.dro", "FederatedDRO"),
    "FairnessAwareFL": ("drflmodel.problems.minmax.fafl", "FairnessAwareFL"),
    "WassersteinDRFL": ("drflmodel.problems.wasserstein.problem", "WassersteinDRFL"),
    "RelativeFairness": ("drflmodel.problems.relative", "RelativeFairness"),
    "DEOConstrained": ("drflmodel.problems.deo", "DEOConstrained"),
}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'drflmodel.problems' has no attribute {name!r}")
