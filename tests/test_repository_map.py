"""docs/repository-map.md is true to the code: every module of the package appears in it (by its
path, or by its file name in its folder's row), and every package path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "repository-map.md"


def _rows(text: str) -> list[tuple[list[str], str]]:
    """``(paths of the first cell, the whole row)`` for each table row."""
    out = []
    for line in text.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ", 1)[0]
            out.append((re.findall(r"`([^`]+)`", first), line))
    return out


def _covered(rel: Path, rows) -> bool:
    folder = rel.parent.as_posix()
    for paths, line in rows:
        if f"drflmodel/{rel.as_posix()}" in paths:
            return True
        head = paths[0] if paths else ""
        if folder == ".":
            # a root module: a root row lists it (`drflmodel/x.py`, `y.py`) or mentions it in backticks
            if head.startswith("drflmodel/") and head.count("/") == 1 and not head.endswith("/") \
                    and f"`{rel.name}`" in line:
                return True
        elif head == f"drflmodel/{folder}/" and f"`{rel.name}`" in line:
            return True
    return False


def missing_modules(package: Path, text: str) -> list[str]:
    rows = _rows(text)
    return [p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
            if p.name != "__init__.py" and not _covered(p.relative_to(package), rows)]


def test_every_module_appears_in_the_repository_map():
    assert missing_modules(ROOT / "drflmodel", MAP.read_text(encoding="utf-8")) == []


def test_every_package_path_the_map_names_exists():
    text = MAP.read_text(encoding="utf-8")
    named = set(re.findall(r"`(drflmodel/[^`\s]*)`", text))
    assert named and not sorted(p for p in named if not (ROOT / p).exists())


def test_every_file_a_folder_row_names_is_in_that_folder():
    """A folder's row names its files as they are (no file that moved away or was renamed)."""
    stale = []
    for paths, line in _rows(MAP.read_text(encoding="utf-8")):
        head = paths[0] if paths else ""
        if head.startswith("drflmodel/") and head.endswith("/"):
            for name in re.findall(r"`([A-Za-z_0-9]+\.py)`", line):
                if not (ROOT / head / name).exists():
                    stale.append(f"{head}{name}")
    assert not stale


def test_the_map_check_finds_a_missing_module(tmp_path):
    pkg = tmp_path / "drflmodel"
    (pkg / "flower").mkdir(parents=True)
    for rel in ("data.py", "flower/grid.py", "flower/engine.py"):
        (pkg / rel).write_text("")
    text = "| `drflmodel/data.py` | data |\n| `drflmodel/flower/` | `grid.py` (the grid) |\n"
    assert missing_modules(pkg, text) == ["flower/engine.py"]
