"""Modules imported on first use: keeps CVXPY and SciPy out of code paths that never need them
(a Flower client process answers one message and exits; importing CVXPY costs it seconds)."""

from __future__ import annotations

import importlib

__all__ = ["LazyModule"]


class LazyModule:
    """A stand-in for module ``name``: the first attribute access imports it and reads through.
    ``cp = LazyModule("cvxpy")`` then ``cp.Variable(3)`` behaves as ``import cvxpy as cp``."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r}, imported={self._module is not None})"
