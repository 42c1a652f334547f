"""The module paths of ``drflmodel.problems`` before the family folders still import for one release:
each warns (DeprecationWarning naming the new path) and re-exports the very objects of the new
modules."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

# old public path -> (new module, names that must come through the old path unchanged); written out
# here, not read from drflmodel.problems._moved, so that a wrong table there fails this test
OLD_PATHS = {
    "drflmodel.problems.dro": ("drflmodel.problems.minmax.dro", ["FederatedDRO", "WeightedMinMax"]),
    "drflmodel.problems.fafl": ("drflmodel.problems.minmax.fafl", ["FairnessAwareFL", "SmoothedRoute"]),
}
#: the private paths of the unreleased layout: gone (issue 42), no shim answers for them
GONE = ["drflmodel.problems._base", "drflmodel.problems._routes", "drflmodel.problems._conic",
        "drflmodel.problems._newton", "drflmodel.problems._sqp", "drflmodel.problems._lagrangian_sqp",
        "drflmodel.problems._active_set", "drflmodel.problems._pieces", "drflmodel.problems._bundle",
        "drflmodel.problems._quadratic", "drflmodel.problems._omega", "drflmodel.problems._wasserstein_sqp",
        "drflmodel.problems._wasserstein_bound"]


def _fresh_import(name: str):
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    if child in vars(sys.modules[parent]):
        delattr(sys.modules[parent], child)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_path_warns_and_re_exports_the_same_objects(old):
    import drflmodel.problems  # noqa: F401  (installs the finder of the old paths)

    new, names = OLD_PATHS[old]
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        shim = _fresh_import(old)
    target = importlib.import_module(new)
    for name in names:
        assert getattr(shim, name) is getattr(target, name), name
    assert set(getattr(target, "__all__", ())) <= set(shim.__all__)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        shim.no_such_name


@pytest.mark.parametrize("old", GONE)
def test_a_private_path_of_the_unreleased_layout_is_gone(old):
    import drflmodel.problems  # noqa: F401

    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_from_import_of_an_old_path_names_the_import_line():
    import drflmodel.problems  # noqa: F401

    sys.modules.pop("drflmodel.problems.dro", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from drflmodel.problems.dro import FederatedDRO  # noqa: F401
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert moved and moved[0].filename == __file__      # the user's import line, not importlib's


def test_the_new_paths_import_without_a_deprecation_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for new, _ in OLD_PATHS.values():
            importlib.import_module(new)


def test_the_problems_root_holds_the_family_folders_and_few_files():
    from pathlib import Path

    import drflmodel.problems as P

    root = Path(P.__file__).parent
    files = sorted(p.name for p in root.glob("*.py"))
    assert len(files) <= 4, files
    folders = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    assert {"engine", "minmax", "wasserstein", "relative", "deo"} <= folders
