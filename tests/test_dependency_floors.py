"""Supply-chain floors and generated code (issue 39): the dependency floors exclude the releases with
known CVEs (cryptography 42.0.0-44.0.0: CVE-2024-12797; tqdm < 4.66.3: CVE-2024-34062), an old pyarrow
is refused when a Parquet file is read (CVE-2023-47248), and the benchopt export writes the instance's
strings as Python literals (a name cannot inject code)."""

import ast
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from drflmodel._tabular import check_pyarrow
from drflmodel.errors import InvalidParameterError
from drflmodel.instances.benchopt_export import dataset_source, objective_source

ROOT = Path(__file__).resolve().parents[1]


def _requirements(name: str):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    every = list(project.get("dependencies", [])) + [r for extra in project["optional-dependencies"].values()
                                                     for r in extra]
    return [Requirement(r) for r in every if Requirement(r).name == name]


@pytest.mark.parametrize("name, bad, good", [("cryptography", "44.0.0", "44.0.1"), ("cryptography", "42.0.0", "44.0.1"),
                                             ("tqdm", "4.66.2", "4.66.3")])
def test_dependency_floors_exclude_the_vulnerable_releases(name, bad, good):
    found = _requirements(name)
    assert found, f"no {name} requirement in pyproject.toml"
    for req in found:
        assert not req.specifier.contains(Version(bad)) and req.specifier.contains(Version(good)), str(req)


@pytest.mark.parametrize("version, ok", [("13.0.0", False), ("14.0.0", False), ("14.0.1", True), ("21.0.0", True),
                                         ("14.0.1.dev3", True), ("9.0", False)])
def test_an_old_pyarrow_is_refused_when_parquet_is_read(version, ok):
    if ok:
        check_pyarrow(version)
    else:
        with pytest.raises(InvalidParameterError, match=re.escape(f"pyarrow {version} is installed") + ".*CVE-2023-47248"):
            check_pyarrow(version)


HOSTILE = 'x"""\nimport os; os.system("touch /tmp/pwned")  # \'\'\' {} \\'


def test_the_benchopt_export_escapes_the_instances_strings():
    code = objective_source(title=HOSTILE, formula="f", loss="logistic", lower=0.1, upper=0.2, source=HOSTILE,
                            name=HOSTILE + " erm (certified)")
    tree = ast.parse(code)
    assert HOSTILE in ast.get_docstring(tree)
    assert not any(isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Call)
                   for node in tree.body), "the name injected a statement"
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Objective")
    name = next(n for n in cls.body if isinstance(n, ast.Assign) and n.targets[0].id == "name")
    assert ast.literal_eval(name.value) == HOSTILE + " erm (certified)"
    data = ast.parse(dataset_source("iris_3"))
    cls = next(n for n in data.body if isinstance(n, ast.ClassDef))
    assert ast.literal_eval(next(n for n in cls.body if isinstance(n, ast.Assign)).value) == "iris_3"
