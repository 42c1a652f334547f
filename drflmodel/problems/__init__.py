"""The exact oracles, one module (or subpackage) per formulation family (imported lazily).

``_base`` (``ProblemBase``, the horizontal ``Problem``, ``VerticalProblem``), ``_routes`` (the
solve contract: ``Route``, ``SolveRequest``, dispatch), ``_conic`` (solver names and settings, the
solver sequence, ``ConicRoute``); ``dro``, ``fafl``, ``wasserstein``, ``relative/``, ``deo/``.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Problem": ("drflmodel.problems._base", "Problem"),
    "ClientView": ("drflmodel.problems._base", "ClientView"),
    "ProblemBase": ("drflmodel.problems._base", "ProblemBase"),
    "VerticalProblem": ("drflmodel.problems._base", "VerticalProblem"),
    "Route": ("drflmodel.problems._routes", "Route"),
    "SolveRequest": ("drflmodel.problems._routes", "SolveRequest"),
    "ConicRoute": ("drflmodel.problems._conic", "ConicRoute"),
    "FederatedDRO": ("drflmodel.problems.dro", "FederatedDRO"),
    "FairnessAwareFL": ("drflmodel.problems.fafl", "FairnessAwareFL"),
    "WassersteinDRFL": ("drflmodel.problems.wasserstein", "WassersteinDRFL"),
    "RelativeFairness": ("drflmodel.problems.relative", "RelativeFairness"),
    "DEOConstrained": ("drflmodel.problems.deo", "DEOConstrained"),
}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'drflmodel.problems' has no attribute {name!r}")
