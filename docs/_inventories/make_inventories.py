"""Write the small intersphinx inventories of docs/_inventories (the build reads them, offline).

Each inventory lists the objects of one project that drflmodel's pages and docstrings reference,
with the object's page in that project's public documentation (relative to the base URL given in
``intersphinx_mapping`` of docs/conf.py). Run ``python docs/_inventories/make_inventories.py``
after adding a reference; the files are in Sphinx's inventory format version 2 (zlib-compressed
lines ``name domain:role priority uri display-name``), which ``sphinx.ext.intersphinx`` and
``sphobjinv`` read.
"""

from __future__ import annotations

import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: project -> [(name, role, uri relative to the project's base URL)]; "$" in a uri stands for the name
OBJECTS: dict[str, list[tuple[str, str, str]]] = {
    "python": [
        ("float", "py:class", "library/functions.html#float"),
        ("int", "py:class", "library/functions.html#int"),
        ("str", "py:class", "library/stdtypes.html#str"),
        ("dict", "py:class", "library/stdtypes.html#dict"),
        ("list", "py:class", "library/stdtypes.html#list"),
        ("bool", "py:class", "library/functions.html#bool"),
        ("StopIteration", "py:exception", "library/exceptions.html#$"),
        ("ValueError", "py:exception", "library/exceptions.html#$"),
        ("UserWarning", "py:exception", "library/exceptions.html#$"),
        ("pathlib.Path", "py:class", "library/pathlib.html#$"),
        # the glossary terms and labels numpydoc's type aliases point to
        ("sequence", "std:term", "glossary.html#term-sequence"),
        ("generator", "std:term", "glossary.html#term-generator"),
        ("mapping", "std:term", "glossary.html#term-mapping"),
        ("iterable", "std:term", "glossary.html#term-iterable"),
        ("callable", "std:term", "glossary.html#term-callable"),
        ("bltin-boolean-values", "std:label", "library/stdtypes.html#bltin-boolean-values"),
    ],
    "numpy": [
        ("numpy.ndarray", "py:class", "reference/generated/$.html#$"),
        ("numpy.random.Generator", "py:class", "reference/random/generator.html#$"),
        ("numpy.random.default_rng", "py:function", "reference/random/generator.html#$"),
        ("numpy.array_split", "py:function", "reference/generated/$.html#$"),
        ("arrays.scalars", "std:label", "reference/arrays.scalars.html#arrays-scalars"),
        ("arrays", "std:label", "reference/arrays.html#arrays"),
    ],
    "scipy": [
        ("scipy.optimize.OptimizeResult", "py:class", "reference/generated/$.html#$"),
        ("scipy.optimize.minimize", "py:function", "reference/generated/$.html#$"),
        ("scipy.optimize.linprog", "py:function", "reference/generated/$.html#$"),
    ],
    "cvxpy": [
        ("cvxpy.Problem", "py:class", "api_reference/cvxpy.problems.html#cvxpy.problems.problem.Problem"),
        ("cvxpy.problems.problem.Problem", "py:class", "api_reference/cvxpy.problems.html#$"),
        ("cvxpy.Parameter", "py:class",
         "api_reference/cvxpy.expressions.html#cvxpy.expressions.constants.parameter.Parameter"),
        ("cvxpy.Variable", "py:class",
         "api_reference/cvxpy.expressions.html#cvxpy.expressions.variable.Variable"),
        ("cvxpy.Expression", "py:class",
         "api_reference/cvxpy.expressions.html#cvxpy.expressions.expression.Expression"),
    ],
    "sklearn": [
        ("sklearn.base.BaseEstimator", "py:class", "modules/generated/$.html#$"),
        ("sklearn.base.ClassifierMixin", "py:class", "modules/generated/$.html#$"),
        ("sklearn.base.RegressorMixin", "py:class", "modules/generated/$.html#$"),
        ("sklearn.base.clone", "py:function", "modules/generated/$.html#$"),
        ("sklearn.set_config", "py:function", "modules/generated/$.html#$"),
        ("sklearn.exceptions.ConvergenceWarning", "py:class", "modules/generated/$.html#$"),
        ("sklearn.pipeline.Pipeline", "py:class", "modules/generated/$.html#$"),
        ("sklearn.model_selection.GridSearchCV", "py:class", "modules/generated/$.html#$"),
        ("sklearn.linear_model.Lasso", "py:class", "modules/generated/$.html#$"),
    ],
    "pandas": [
        ("pandas.DataFrame", "py:class", "reference/api/$.html#$"),
        ("pandas.read_csv", "py:function", "reference/api/$.html#$"),
        ("pandas.read_parquet", "py:function", "reference/api/$.html#$"),
    ],
    "matplotlib": [
        ("matplotlib.figure.Figure", "py:class", "api/figure_api.html#$"),
        ("matplotlib.axes.Axes", "py:class", "api/_as_gen/$.html#$"),
    ],
    "flwr": [
        ("flwr.serverapp.strategy.FedAvg", "py:class", "ref-api/$.html#$"),
        ("flwr.serverapp.strategy.FedProx", "py:class", "ref-api/$.html#$"),
        ("flwr.serverapp.strategy.QFedAvg", "py:class", "ref-api/$.html#$"),
        ("flwr.serverapp.strategy.Strategy", "py:class", "ref-api/$.html#$"),
        ("flwr.serverapp.Grid", "py:class", "ref-api/$.html#$"),
        ("flwr.serverapp.grid.grid.Grid", "py:class", "ref-api/flwr.serverapp.Grid.html#flwr.serverapp.Grid"),
        ("flwr.serverapp.ServerApp", "py:class", "ref-api/$.html#$"),
        ("flwr.clientapp.ClientApp", "py:class", "ref-api/$.html#$"),
        ("flwr.app.ArrayRecord", "py:class", "ref-api/$.html#$"),
        ("flwr.app.Context", "py:class", "ref-api/$.html#$"),
        ("flwr.app.Message", "py:class", "ref-api/$.html#$"),
    ],
}


def inventory_bytes(project: str, objects) -> bytes:
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: \n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    lines = "".join(f"{name} {role} 1 {uri.replace('$', name)} -\n" for name, role, uri in objects)
    return header + zlib.compress(lines.encode())


def main() -> None:
    for project, objects in OBJECTS.items():
        (HERE / f"{project}.inv").write_bytes(inventory_bytes(project, objects))


if __name__ == "__main__":
    main()
