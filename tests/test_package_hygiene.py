"""Package hygiene: every module compiles without a warning (an invalid escape such as ``"\\l"`` in a
docstring is a SyntaxWarning on Python >= 3.12 and garbles the math: ``"\\t"`` in ``"\\theta"`` is a
tab), the package is marked typed (PEP 561), and the repository carries its citation file."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for root in ("drflmodel", "examples", "benchmarks", "docs") for p in (ROOT / root).rglob("*.py")
                 if not {"_build", "auto_examples", "_gallery_src", "__pycache__"} & set(p.parts))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_compiles_without_warnings(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_package_is_marked_typed_and_ships_the_marker():
    import tomllib

    assert (ROOT / "drflmodel" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["drflmodel"]


def test_citation_file_names_the_version_and_every_paper():
    yaml = pytest.importorskip("yaml")
    import drflmodel
    from drflmodel._references import PAPERS

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == drflmodel.__version__
    assert cff["authors"] and cff["message"] and cff["title"].startswith("drflmodel")
    cited = {ref["title"]: ref for ref in cff["references"]}
    assert set(cited) == {paper.title for paper in PAPERS.values()}
    for paper in PAPERS.values():
        ref = cited[paper.title]
        assert ref["year"] == paper.year
        assert [a["family-names"] for a in ref["authors"]] == [
            name.strip().rsplit(" ", 1)[1] for name in paper.authors.replace(" and ", ", ").split(",")]


def test_flower_home_of_the_deployment_recipe_is_ignored():
    assert ".flwr/" in (ROOT / ".gitignore").read_text().splitlines()
