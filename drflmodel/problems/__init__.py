"""The exact oracles, one module per formulation family (imported lazily)."""

from __future__ import annotations

import importlib

_LAZY = {
    "Problem": ("drflmodel.problems._base", "Problem"),
    "ClientView": ("drflmodel.problems._base", "ClientView"),
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
