"""Modules imported on first use: keeps CVXPY and SciPy out of code paths that never need them
(a Flower client process answers one message and exits; importing CVXPY costs it seconds)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

__all__ = ["LazyModule", "lazy_attributes"]


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


def lazy_attributes(package: str, names: dict[str, tuple[str, str]], submodules=(), also=()):
    """The PEP 562 ``__getattr__`` and ``__dir__`` of ``package``: ``names`` maps an attribute to
    ``(module, attribute)``, imported on first access and then kept in the package's namespace;
    each of ``submodules`` is ``package.<name>``, imported on first access. Anything else is an
    ``AttributeError`` naming the package; ``__dir__`` lists these and ``also`` (the package's own
    public names). One helper for every package that exports lazily."""
    import sys

    submodules = frozenset(submodules)
    listed = sorted({*names, *submodules, *also})

    def __getattr__(name: str):
        if name in names:
            module, attr = names[name]
            value = getattr(importlib.import_module(module), attr)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return listed

    return __getattr__, __dir__


class LiveTable(Mapping):
    """A read-only mapping recomputed whenever it is read (:meth:`_table`): a table derived from the
    family registry sees a family registered later, and imports nothing until it is read."""

    _name = "table"

    def _table(self) -> dict:
        raise NotImplementedError

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())

    def __repr__(self):
        return f"{self._name}({self._table()!r})"
