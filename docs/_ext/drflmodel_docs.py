"""Sphinx helpers of the drflmodel documentation, generated from the code so the pages cannot drift.

* ``.. drflmodel-config-reference::`` -- every TOML table and key of ``drflmodel solve`` /
  ``drflmodel verify`` with its type, meaning and default, and the allowed values of the named
  choices (data sources, losses, families, weight sets, solvers, engines) with the options each one
  takes, read from ``drflmodel._config`` and from the signatures of the functions and classes it
  names. A key of ``SCHEMA`` without an entry in ``KEY_HELP`` is a build warning (an error with -W).
* ``.. drflmodel-references::`` -- the papers, from ``drflmodel._references``.
* the API pages (``api/*.rst``), written at ``builder-inited`` from each module's ``__all__``.
* the examples gallery: the command-line arguments of each example (``--quick``), and a scraper
  that puts on the page the PNG files an example writes into its output directory.
"""

from __future__ import annotations

import atexit
import inspect
import re
import shutil
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------- gallery
#: examples left out of the gallery: they need optional peers (skwdro pulls in torch; Fairlearn)
GALLERY_EXCLUDED = ("skwdro_compare", "fairlearn_adult")
#: where the examples that write files put them during the build (one folder per example)
GALLERY_OUTPUT = Path(tempfile.mkdtemp(prefix="drflmodel-gallery-"))
atexit.register(shutil.rmtree, GALLERY_OUTPUT, ignore_errors=True)   # the scraper moves the images out


#: the gallery's sources: the scripts of ``examples/`` staged at ``config-inited`` (see :func:`stage_gallery`)
GALLERY_SOURCE = "_gallery_src"


class GalleryArgv:
    """Command-line arguments of an example in the gallery: its quick mode, output in a temp dir."""

    def __repr__(self) -> str:  # sphinx-gallery caches on the repr of the configuration
        return "GalleryArgv(--quick)"

    def __call__(self, gallery_conf, script_vars) -> list[str]:
        name = Path(script_vars["src_file"]).stem
        argv = ["--quick"]
        if "--out" in Path(script_vars["src_file"]).read_text():      # the example writes its figures there
            argv += ["--out", str(GALLERY_OUTPUT / name)]
        return argv


gallery_argv = GalleryArgv()


class GalleryProgress:
    """A line on the build's output when each example starts and ends (with its time): the full
    build runs every example for several minutes, and sphinx-gallery says nothing in between.
    Used as a ``reset_modules`` entry (called before and after each example)."""

    def __init__(self):
        self.started: dict[str, float] = {}

    def __repr__(self) -> str:  # sphinx-gallery caches on the repr of the configuration
        return "GalleryProgress"

    def __call__(self, gallery_conf, fname, when) -> None:
        import time

        name = Path(fname).stem
        if when == "before":
            self.started[name] = time.perf_counter()
            logger.info(f"[gallery] running examples/{name}.py --quick ...")
        elif name in self.started:
            logger.info(f"[gallery] examples/{name}.py done in {time.perf_counter() - self.started.pop(name):.0f} s")


gallery_progress = GalleryProgress()


def staged_example(text: str) -> str:
    """An example script as the gallery shows it: the first paragraph of its docstring becomes the
    page title (sphinx-gallery needs an underlined title; a first sentence that wraps onto a second
    line is joined, not cut); nothing else changes."""
    head, sep, rest = text.partition('"""')
    paragraph, blank, body = rest.partition("\n\n")
    if '"""' in paragraph:                     # a one-paragraph docstring: the title ends at the quotes
        paragraph, closing, after = paragraph.partition('"""')
        body, blank = closing + after, ""
    title = " ".join(paragraph.split())
    return f'{head}{sep}{title}\n{"=" * len(title)}\n{blank}{body}'


def stage_gallery(app, config) -> None:
    """Copy ``examples/*.py`` (minus :data:`GALLERY_EXCLUDED`) to ``docs/_gallery_src`` with a title
    line, and the gallery header; files are rewritten only when they change (sphinx-gallery then
    reuses the previous run of an unchanged example when the build directory is kept)."""
    src = Path(app.srcdir)
    examples = src.parent / "examples"
    stage = src / GALLERY_SOURCE
    stage.mkdir(exist_ok=True)
    wanted = {"GALLERY_HEADER.rst": (src / "_gallery_header.rst").read_text()}
    for script in sorted(examples.glob("*.py")):
        if script.stem not in GALLERY_EXCLUDED:
            wanted[script.name] = staged_example(script.read_text())
    for old in stage.iterdir():
        if old.is_file() and old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        path = stage / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


class OutputImageScraper:
    """Put the PNG files an example wrote (into :data:`GALLERY_OUTPUT`) on its gallery page.

    sphinx-gallery's matplotlib scraper sees only figures left open; the examples save their
    figures to files and close them, as a script should.
    """

    def __repr__(self) -> str:  # sphinx-gallery caches on the repr of the configuration
        return "OutputImageScraper"

    def __call__(self, block, block_vars, gallery_conf):
        from sphinx_gallery.scrapers import figure_rst

        folder = GALLERY_OUTPUT / Path(block_vars["src_file"]).stem
        written = sorted(folder.glob("*.png")) if folder.is_dir() else []
        names = []
        for png in written:
            target = next(block_vars["image_path_iterator"])
            shutil.move(str(png), target)
            names.append(target)
        return figure_rst(names, gallery_conf["src_dir"])


# ------------------------------------------------------------------------------------- numpydoc fields
#: numpydoc sections whose entries are ``name : type`` lines followed by an indented description
FIELD_SECTIONS = ("Parameters", "Other Parameters", "Returns", "Yields", "Receives", "Attributes", "Raises",
                  "Warns")
_SECTIONS = ("Parameters", "Other Parameters", "Returns", "Yields", "Receives", "Attributes", "Methods", "Raises",
             "Warns", "Warnings", "See Also", "Notes", "References", "Examples")
_FIELD = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_][\w.]*(?:\s*,\s*\*{0,2}[A-Za-z_][\w.]*)*)(?:\s+:\s*(?P<type>.*))?$")


def is_prose(text: str) -> bool:
    """Whether the text after ``name :`` reads as a description rather than a type: it ends with a
    period or a comma, holds a semicolon or a math role, wraps onto the next line (an open
    parenthesis, a last word such as "or"), or has more than four words outside literals and
    parentheses (``int``, ``str, optional``, ``array of shape (n, d)``, ``float or None`` are types)."""
    text = text.strip()
    if not text:
        return False
    if text.endswith((".", ";", ":", ",")) or ";" in text or ":math:" in text:
        return True
    if text.count("(") != text.count(")") or text.split()[-1] in ("or", "and", "of", "the", "a", "to", "in"):
        return True                                  # a sentence that wraps onto the next line
    bare = re.sub(r"``.*?``|`[^`]*`|\([^()]*\)|\{[^{}]*\}", "X", text)
    return len(bare.split()) > 4


def _is_header(lines: list[str], i: int) -> bool:
    return (lines[i].strip() in _SECTIONS and i + 1 < len(lines)
            and set(lines[i + 1].strip()) == {"-"} and len(lines[i + 1].strip()) >= 3)


def numpydoc_fields(lines: list[str]) -> list[str]:
    """drflmodel's docstrings write a field as ``name : description`` (the description runs on the
    type line). numpydoc renders the text after the colon as the *type* (bold italic), so before
    numpydoc reads a docstring this moves prose off the type line: ``name : text`` becomes ``name``
    with ``text`` as the first line of its description (a real type, e.g. ``tol : float``, stays).
    A paragraph at the left margin after a field section's entries (free text, not a field) is
    moved into the ``Notes`` section, where numpydoc renders it as text instead of as a bogus field.
    """
    out: list[str] = []
    trailing: list[str] = []
    section, i, n = None, 0, len(lines)
    while i < n:
        line = lines[i]
        if _is_header(lines, i):
            section = line.strip()
            out += [line, lines[i + 1]]
            i += 2
            continue
        if section in FIELD_SECTIONS and line and not line[0].isspace():
            match = _FIELD.match(line.rstrip())
            previous_blank = not out or not out[-1].strip()
            if match and match.group("type") is not None and is_prose(match.group("type")):
                out += [match.group("name"), "    " + match.group("type").strip()]
                i += 1
                continue
            if not match and previous_blank and section != "Returns":
                while i < n and not _is_header(lines, i):       # free text: to the Notes section
                    trailing.append(lines[i])
                    i += 1
                continue
        out.append(line)
        i += 1
    if trailing:
        while trailing and not trailing[-1].strip():
            trailing.pop()
        notes = next((k for k in range(len(out) - 1) if out[k].strip() == "Notes" and _is_header(out, k)), None)
        if notes is None:
            while out and not out[-1].strip():
                out.pop()
            out += ["", "Notes", "-----", *trailing, ""]
        else:
            out[notes + 2:notes + 2] = [*trailing, ""]
    return out


def _fix_fields(app, what, name, obj, options, lines) -> None:
    lines[:] = numpydoc_fields(list(lines))


# ------------------------------------------------------------------------------------- API pages
#: (page, module, title) of the API reference; each page lists the module's ``__all__``
API_MODULES = [
    ("drflmodel", "drflmodel", "Top level: problems, data, verification"),
    ("data", "drflmodel.data", "Federations"),
    ("datasets", "drflmodel.datasets", "Built-in data sets and partitioners"),
    ("losses", "drflmodel.losses", "Losses"),
    ("sets", "drflmodel.sets", "Client-weight sets"),
    ("problems", "drflmodel.problems", "Problems and solve routes"),
    ("relative", "drflmodel.problems.relative", "Relative fairness: convexity and the choice of phi"),
    ("deo", "drflmodel.problems.deo", "DEO-constrained vertical FL: party and server views"),
    ("solution", "drflmodel.solution", "Solutions and certificates"),
    ("solvers", "drflmodel.solvers", "Distributed solvers"),
    ("verify", "drflmodel.verification", "Verification"),
    ("landing", "drflmodel.landing", "Where a strategy lands: certified fixed points and conformance"),
    ("instances", "drflmodel.instances", "Certified benchmark instances"),
    ("metrics", "drflmodel.metrics", "Fairness and inequality metrics"),
    ("objectives", "drflmodel.objectives", "Client objectives"),
    ("matrix_free", "drflmodel.matrix_free", "Matrix-free client objectives (Hessian-vector products)"),
    ("layout", "drflmodel.layout", "Parameter layout of linear and multi-class models"),
    ("client_oracle", "drflmodel.client_oracle", "The client-oracle interface (in process and federated)"),
    ("plots", "drflmodel.plots", "Figures"),
    ("errors", "drflmodel.errors", "Errors and warnings"),
    ("cli", "drflmodel.cli", "The command line: drflmodel tour, solve, verify"),
    ("flower", "drflmodel.flower", "Flower integration (extra ``flower``)"),
    ("sklearn", "drflmodel.sklearn", "scikit-learn estimators (extra ``sklearn``)"),
]


def _public_names(module, documented: dict) -> list[str]:
    """The module's ``__all__`` minus submodules (documented on their own pages) and minus objects
    already documented on an earlier page (``documented``: id of the object -> its page)."""
    import types

    names = []
    for name in module.__all__:
        obj = getattr(module, name)
        if name.startswith("__") or isinstance(obj, types.ModuleType):
            continue
        if isinstance(obj, (type, types.FunctionType)):
            if id(obj) in documented:
                continue
            documented[id(obj)] = module.__name__
        names.append(name)
    return names


def write_api_pages(app, config=None) -> None:
    """Write ``api/<page>.rst`` with an autosummary of each module's public names."""
    import importlib

    folder = Path(app.srcdir) / "api"
    folder.mkdir(exist_ok=True)
    documented: dict = {}
    for page, modname, title in API_MODULES:
        module = importlib.import_module(modname)
        lines = [f".. This page is generated by docs/_ext/drflmodel_docs.py from {modname}.__all__.", "",
                 title, "=" * len(title), "", f".. automodule:: {modname}", "   :no-members:", "",
                 f".. currentmodule:: {modname}", "", ".. autosummary::", "   :toctree: generated", ""]
        lines += [f"   {name}" for name in _public_names(module, documented)]
        text = "\n".join(lines) + "\n"
        path = folder / f"{page}.rst"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


# ------------------------------------------------------------------------------------- config reference
def _signature_options(obj, skip: int) -> str:
    """``name=default`` of the keyword parameters of a callable after the first ``skip``."""
    params = list(inspect.signature(obj).parameters.values())[skip:]
    shown = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name.startswith("return_"):
            continue             # return_* changes what the function returns: not a configuration option
        shown.append(f"``{p.name}``" if p.default is p.empty else f"``{p.name} = {p.default!r}``")
    return ", ".join(shown) if shown else "none"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", "   :class: config-table", ""]
    for row in [header, *rows]:
        out.append(f"   * - {row[0]}")
        out += [f"     - {cell}" for cell in row[1:]]
    return out + [""]


def config_reference_rst() -> list[str]:
    """The configuration reference as reStructuredText lines (see the module docstring)."""
    import drflmodel as dm
    from drflmodel import _config, datasets, losses, sets, solvers
    from drflmodel.solvers import Solver
    from drflmodel.verification import RATE_KINDS

    lines: list[str] = []
    for table, keys in _config.SCHEMA.items():
        help_ = _config.KEY_HELP.get(table, {})
        required = _config._REQUIRED.get(table, ())
        title = f"[{table}]"
        lines += [title, "-" * len(title), ""]
        if table == "solver":
            lines += ["Optional for ``drflmodel solve``; required by ``drflmodel verify``.", ""]
        rows = []
        for key, types in keys.items():
            if key not in help_:
                logger.warning(f"drflmodel._config.KEY_HELP has no entry for '{table}.{key}'",
                               type="drflmodel", subtype="config")
            kind = " or ".join(_config._TYPE_NAMES[t] for t in types)
            rows.append([f"``{key}``", kind, "yes" if key in required else "no", help_.get(key, "")])
        lines += _table(["key", "TOML type", "required", "meaning (default)"], rows)
        for key in help_:
            if key not in keys:
                logger.warning(f"drflmodel._config.KEY_HELP documents '{table}.{key}', which SCHEMA does not "
                               "accept", type="drflmodel", subtype="config")

    lines += ["Allowed values", "--------------", ""]
    # data sources
    rows = []
    for source in _config.DATA_SOURCES:
        if hasattr(datasets, source):
            rows.append([f'``"{source}"``', f":func:`drflmodel.datasets.{source}`",
                         _signature_options(getattr(datasets, source), 0)])
        elif source == "npz":
            rows.append(['``"npz"``', "arrays ``X0, y0, X1, y1, ...`` in ``path``", "``path``, ``task``"])
        else:
            rows.append([f'``"{source}"``', "one table in ``path`` (pandas"
                         + ("; pyarrow" if source == "parquet" else "") + ")",
                         ", ".join(f"``{k}``" for k in ("path", *_config.TABLE_KEYS, "task"))])
    lines += ["``data.source``", "~~~~~~~~~~~~~~~", ""]
    lines += _table(["value", "what", "options"], rows)
    # losses
    rows = [[f'``"{name}"``', f":class:`drflmodel.losses.{cls.__name__}`", _signature_options(cls, 0)]
            for name, cls in losses.ALL_LOSSES.items()]
    lines += ["``loss.name``", "~~~~~~~~~~~~~", ""]
    lines += _table(["value", "class", "``loss.options``"], rows)
    # families
    rows = []
    from drflmodel.problems.registry import FAMILIES

    for family, entry in FAMILIES.items():       # the registry: each family's class and weight-set keys
        opts = _signature_options(entry.load(), 2)   # after (federation, loss)
        for key in entry.weight_keys:
            opts = opts.replace(f"``{key}``, ", "")
        keys = f" (weight-set keys: {', '.join(f'``problem.{k}``' for k in entry.weight_keys)})" if entry.weight_keys else ""
        rows.append([f'``"{family}"``', f":class:`drflmodel.{entry.cls}`{keys}", opts])
    lines += ["``problem.family``", "~~~~~~~~~~~~~~~~~~", ""]
    lines += _table(["value", "class", "``problem.options``"], rows)
    # weight sets
    rows = []
    for name, clsname in _config.WEIGHT_SETS.items():
        cls = getattr(sets, clsname)
        first = 0 if name == "lp_ball" else 1     # n (or p) comes from the federation
        opts = _signature_options(cls, first)
        note = {"hcvar": " (``p`` = the clients' sample proportions)",
                "lp_ball": ' (``center``: ``"proportions"`` (default), ``"uniform"`` or an array)'}.get(name, "")
        rows.append([f'``"{name}"``', f":class:`drflmodel.sets.{clsname}`", opts + note])
    lines += ["``problem.weights.name`` (also ``problem.A``, ``problem.B``)",
              "~" * 62, ""]
    lines += _table(["value", "class", "other keys of the table"], rows)
    # solvers
    rows = []
    for name in solvers.__all__:
        obj = getattr(solvers, name)
        if isinstance(obj, type) and issubclass(obj, Solver) and obj is not Solver:
            rows.append([f'``"{name}"``', f":class:`drflmodel.solvers.{name}`", _signature_options(obj, 0)])
    lines += ["``solver.name``", "~~~~~~~~~~~~~~~", ""]
    lines += _table(["value", "class", "``solver.options``"], rows)
    # engines, rates
    lines += ["``solver.engine`` and ``solver.expected_rate``", "~" * 46, ""]
    lines += _table(["key", "allowed values"], [
        ["``solver.engine``", ", ".join(f'``"{e}"``' for e in _config.ENGINES)
         + " (the Flower engines need the ``flower`` extra)"],
        ["``solver.expected_rate``", ", ".join(f'``"{r}"``' for r in RATE_KINDS if r is not None)],
    ])
    return lines


def _parsed(directive: SphinxDirective, lines: list[str], source: str) -> list:
    """The nodes of reStructuredText ``lines`` generated by ``directive`` (titles allowed)."""
    container = nodes.section()
    container.document = directive.state.document
    directive.state.nested_parse(StringList(lines, source=source), directive.content_offset, container,
                                 match_titles=True)
    return container.children


class ConfigReference(SphinxDirective):
    """``.. drflmodel-config-reference::`` (see :func:`config_reference_rst`)."""

    has_content = False

    def run(self):
        from drflmodel import _config

        self.env.note_dependency(inspect.getsourcefile(_config))
        return _parsed(self, config_reference_rst(), "drflmodel._config")


class References(SphinxDirective):
    """``.. drflmodel-references::`` -- the bibliography of ``drflmodel._references``."""

    has_content = False

    def run(self):
        from drflmodel import _references

        lines = []
        for key, paper in _references.PAPERS.items():
            lines += [f".. _ref-{key}:", "", f"**{paper.short}** -- {paper.full()}", ""]
        return _parsed(self, lines, "drflmodel._references")


class ExamplesTable(SphinxDirective):
    """``.. drflmodel-examples-table::`` -- one row per script of ``examples/``: its first docstring
    line and its gallery page (or why it is not in the gallery)."""

    has_content = False

    def run(self):
        import ast

        root = Path(self.env.srcdir).parent / "examples"
        rows = []
        for script in sorted(root.glob("*.py")):
            self.env.note_dependency(str(script))
            doc = ast.get_docstring(ast.parse(script.read_text())) or ""
            first = doc.strip().splitlines()[0] if doc.strip() else ""
            if script.stem in GALLERY_EXCLUDED:
                where = "not in the gallery: needs the ``peers`` extra (see ``pyproject.toml``)"
            else:
                where = f":doc:`gallery page </auto_examples/{script.stem}>`"
            rows.append([f"``{script.name}``", first.replace("|", "\\|"), where])
        return _parsed(self, _table(["script", "what it reproduces", "output"], rows), "examples/")


def setup(app):
    app.add_directive("drflmodel-examples-table", ExamplesTable)
    app.add_directive("drflmodel-config-reference", ConfigReference)
    app.add_directive("drflmodel-references", References)
    app.connect("config-inited", write_api_pages)      # before the sources are listed
    app.connect("config-inited", stage_gallery)
    app.connect("autodoc-process-docstring", _fix_fields, priority=400)   # before numpydoc (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
