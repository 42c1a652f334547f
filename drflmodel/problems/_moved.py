"""The two public import paths of ``drflmodel.problems`` before the families got their own folders,
kept until the release after 0.1.0 as deprecated re-export shims (docs/changes.md).

``import drflmodel.problems.dro`` (or ``.fafl``) still works: it issues a :class:`DeprecationWarning`
naming the new path and returns a module whose every attribute is the **same object** as in the
new module (looked up on access). New code imports the new paths. The private paths of the
unreleased layout (``drflmodel.problems._base``, ``._sqp``, ...) are gone.

The shims are made by one import finder (:class:`MovedFinder`, installed by
``drflmodel/problems/__init__.py``) rather than one file per old path. The finder sits at the end
of ``sys.meta_path``: it answers only for the names of :data:`MOVED`, which no file provides.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

__all__ = ["MOVED", "MovedFinder", "install"]

_P = "drflmodel.problems"

#: old module path -> the module(s) its names now live in (looked up in this order)
MOVED: dict[str, tuple[str, ...]] = {
    f"{_P}.dro": (f"{_P}.minmax.dro",),
    f"{_P}.fafl": (f"{_P}.minmax.fafl",),
}


class _ShimLoader(importlib.abc.Loader):
    """Fills a fresh module with a forwarding ``__getattr__`` over the new modules."""

    def __init__(self, targets: tuple[str, ...]):
        self.targets = targets

    def create_module(self, spec):
        return None                     # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        old, targets = module.__name__, self.targets
        warnings.warn(f"{old} is deprecated and will be removed in the next release; import from "
                      f"{' and '.join(targets)} instead", DeprecationWarning, stacklevel=2)   # the import statement: warnings skips the import machinery's frames
        modules = [importlib.import_module(t) for t in targets]

        def __getattr__(name):
            for m in modules:
                if hasattr(m, name):
                    return getattr(m, name)
            raise AttributeError(f"module {old!r} (moved to {' and '.join(targets)}) has no attribute {name!r}")

        names: list[str] = []
        for m in modules:
            names += [n for n in getattr(m, "__all__", ()) if n not in names]
        module.__getattr__ = __getattr__
        module.__all__ = names
        module.__doc__ = f"Deprecated alias of {' and '.join(targets)} (re-exports their names)."


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (and nothing else)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _ShimLoader(MOVED[fullname]))


def install() -> None:
    """Put one :class:`MovedFinder` at the end of ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
