"""The documentation site (docs/) builds offline with warnings as errors, and its pages hold together.

* ``test_site_builds_offline_without_warnings`` builds the whole site with ``sphinx-build -W`` in a
  copy of the repository's ``docs/``, ``examples/``, ``formulations/`` and ``README.md`` (nothing is
  written into the checkout), with every network connection refused (a connection attempt makes
  intersphinx warn, and the warning fails the build). The gallery runs only the fast examples here
  (``tests/test_examples.py`` runs every example's quick mode); the full build runs all of them.
  Then every internal link and image of the built HTML is checked (``broken_links``).
* The link checker and the build's failure on a broken link or a missing image are tested on small
  sites made here, so they are known to fail when they should.
* The configuration reference is generated from ``drflmodel/_config.py``: every key it accepts is
  documented, and only those.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the examples the site build in this test runs (a few seconds); the others are shown without output
FAST_EXAMPLES = "scaffpd_synthetic|relative_fairness_penguins"

pytest.importorskip("sphinx", reason="the docs extra (in the test extra) provides sphinx")

# Refuse every connection except to the loopback (in-process Flower grids may use it), and count
# the attempts; runs inside the sphinx-build subprocess.
_OFFLINE_BUILD = textwrap.dedent("""
    import socket, sys
    _connect = socket.socket.connect
    def _refuse(self, address, *a, **k):
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(address, tuple) and host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"network access during the docs build: {address!r}")
        return _connect(self, address, *a, **k)
    socket.socket.connect = _refuse
    socket.socket.connect_ex = lambda self, address: _refuse(self, address) or 0
    from sphinx.cmd.build import main
    sys.exit(main(sys.argv[1:]))
""")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []   # (tag, url)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script", "source", "image"):
                self.links.append((tag, attrs[key]))


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(site: Path) -> list[str]:
    """Every relative ``href``/``src`` of the HTML pages under ``site`` whose file does not exist,
    and every ``page.html#anchor`` whose anchor is not an ``id`` of that page (the vendored files
    in ``_static/`` are not pages of the site and are skipped)."""
    problems, parsed = [], {}

    def parsed_page(path: Path) -> _Links:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    site = site.resolve()
    for page in sorted(site.rglob("*.html")):
        if page.relative_to(site).parts[0] == "_static":    # the theme's and MathJax's own files
            continue
        links = parsed_page(page)
        for tag, url in links.links:
            parts = urlsplit(url)
            if parts.scheme or url.startswith(("//", "mailto:", "javascript:", "data:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{page.relative_to(site)}: <{tag}> {url} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed_page(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{page.relative_to(site)}: <{tag}> {url} (no such anchor)")
    return problems


def _copy_sources(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("_build", "auto_examples", "_gallery_src", "generated", "__pycache__")
    shutil.copytree(DOCS, dest / "docs", ignore=ignore)
    for sub in ("examples", "formulations"):
        shutil.copytree(ROOT / sub, dest / sub, ignore=ignore)
    shutil.copy(ROOT / "README.md", dest / "README.md")
    for generated in (dest / "docs" / "api").glob("*.rst"):
        generated.unlink()
    return dest / "docs"


def _sphinx(srcdir: Path, outdir: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CI": "1", "DRFLMODEL_DOCS_GALLERY": FAST_EXAMPLES, **(env_extra or {})}
    cmd = [sys.executable, "-c", _OFFLINE_BUILD, "-W", "--keep-going", "-q", "-b", "html",
           str(srcdir), str(outdir / "html"), "-d", str(outdir / "doctrees")]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    srcdir = _copy_sources(work / "src")
    result = _sphinx(srcdir, work / "out")
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stderr[-6000:]}"
    return work / "out" / "html"


def test_site_builds_offline_without_warnings(site):
    for page in ("index.html", "getting-started.html", "configuration.html", "references.html",
                 "formulations/federated-dro.html", "tutorials/validate-your-solver.html",
                 "auto_examples/index.html", "auto_examples/scaffpd_synthetic.html",
                 "api/generated/drflmodel.FederatedDRO.html", "performance.html", "reproductions.html"):
        assert (site / page).is_file(), page


def test_built_site_has_no_broken_internal_link_or_missing_image(site):
    assert broken_links(site) == []


def test_pages_carry_their_content(site):
    """The math is in MathJax's delimiters and MathJax is served by the site itself; the gallery
    page shows the example's printed output; the API page shows the docstring."""
    page = (site / "formulations" / "federated-dro.html").read_text()
    assert "\\(" in page or "\\[" in page
    assert "mathjax/tex-chtml.js" in page and (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    gallery = (site / "auto_examples" / "scaffpd_synthetic.html").read_text()
    assert "sphx-glr-script-out" in gallery             # the output block of the run
    assert (site / "_downloads").is_dir() and list((site / "_downloads").rglob("scaffpd_synthetic.ipynb"))
    api = (site / "api" / "generated" / "drflmodel.FederatedDRO.html").read_text()
    assert "Scaff-PD" in api or "weights" in api
    config = (site / "configuration.html").read_text()
    assert "chi_square" in config and "synthetic_regression" in config and "ScaffPD" in config
    assert "<table" in config                              # the reference's tables are tables
    from drflmodel._references import PAPERS

    references = (site / "references.html").read_text()
    assert all(paper.title in references for paper in PAPERS.values())


# ------------------------------------------------------------------------------ the checks fail
def test_link_checker_reports_missing_file_and_anchor(tmp_path):
    (tmp_path / "a.html").write_text('<p id="here">x</p><a href="b.html#there">b</a>'
                                     '<a href="a.html#here">ok</a><img src="img/missing.png">'
                                     '<a href="https://example.org/x">external</a>')
    (tmp_path / "b.html").write_text('<p id="elsewhere">y</p>')
    problems = broken_links(tmp_path)
    assert len(problems) == 2
    assert any("b.html#there" in p and "anchor" in p for p in problems)
    assert any("img/missing.png" in p and "no such file" in p for p in problems)


def _tiny_site(tmp_path: Path, page: str) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["myst_parser"]\nproject = "t"\n')
    (src / "index.md").write_text("# Home\n\n```{toctree}\nother\n```\n")
    (src / "other.md").write_text(page)
    return src


@pytest.mark.parametrize("page, reason", [
    ("# Other\n\nSee [the missing page](missing.md).\n", "broken internal link"),
    ("# Other\n\n![a figure](figures/missing.png)\n", "missing image"),
])
def test_sphinx_w_fails_on_broken_link_and_missing_image(tmp_path, page, reason):
    src = _tiny_site(tmp_path, page)
    result = _sphinx(src, tmp_path / "out")
    assert result.returncode != 0, reason
    assert "missing" in result.stderr


# ------------------------------------------------------------------------------ configuration reference
def test_key_help_documents_exactly_the_accepted_keys():
    from drflmodel import _config

    assert {t: set(k) for t, k in _config.KEY_HELP.items()} == {t: set(k) for t, k in _config.SCHEMA.items()}
    assert all(text.strip() for keys in _config.KEY_HELP.values() for text in keys.values())


def test_config_reference_lists_every_key_and_allowed_name():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from drflmodel_docs import config_reference_rst
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    from drflmodel import _config, losses, solvers
    from drflmodel.solvers import Solver

    text = "\n".join(config_reference_rst())
    for table, keys in _config.SCHEMA.items():
        assert f"[{table}]" in text
        for key in keys:
            assert f"``{key}``" in text, (table, key)
    names = [*_config.DATA_SOURCES, *losses.ALL_LOSSES, *_config.FAMILIES, *_config.WEIGHT_SETS, *_config.ENGINES]
    for name in names:
        assert f'``"{name}"``' in text, name
    solver_classes = [n for n in solvers.__all__
                      if isinstance(getattr(solvers, n), type) and issubclass(getattr(solvers, n), Solver)
                      and getattr(solvers, n) is not Solver]
    for name in solver_classes:
        assert f'``"{name}"``' in text, name
    assert '``"Trace"``' not in text                  # a result class, not a solver
    assert "``l2 = 0.0``" in text and "``rounds = 300``" in text    # defaults from the signatures


def test_weight_set_names_all_build():
    """Every name the configuration accepts for a weight set builds that set."""
    import drflmodel as dm
    from drflmodel import _config

    fed = dm.datasets.synthetic_regression(n_clients=3, dim=2, samples=10, seed=0)
    options = {"cvar": {"alpha": 0.5}, "chi_square": {"rho": 0.1}, "qffl": {"q": 1.0},
               "hcvar": {"alpha": 1.0}, "lp_ball": {"radius": 0.1}, "kl_penalty": {"tau": 0.5}}
    for name, cls in _config.WEIGHT_SETS.items():
        built = _config._weight_set({"name": name, **options.get(name, {})}, 3, fed, "problem.weights")
        assert type(built).__name__ == cls


def test_cli_help_points_to_the_configuration_reference():
    from drflmodel import _config

    for command in ("solve", "verify"):
        out = subprocess.run([sys.executable, "-m", "drflmodel.cli", command, "--help"],
                             capture_output=True, text=True, check=True).stdout
        assert "docs/configuration.md" in out
        for name in (*_config.FAMILIES, *_config.WEIGHT_SETS, "csv"):
            assert name in out, (command, name)
        assert max(map(len, out.splitlines())) <= 100


# ------------------------------------------------------------------------------ figure file names
def test_tour_figure_file_names_have_no_spaces_or_equals(tmp_path, monkeypatch):
    """Solver variants are named like "RFedFair b=16"; the figure files must not carry that."""
    from types import SimpleNamespace

    from drflmodel import _tour, plots

    paths = []
    monkeypatch.setattr(plots, "plot_convergence", lambda reports, path=None, **kw: paths.append(path))
    solution = SimpleNamespace(client_losses=None)
    legs = [SimpleNamespace(solution=solution, report=object(), solver=name, family="FAFL smoothed (mu=0.05)",
                            data="d", problem=object()) for name in ("RFedFair", "RFedFair b=16")]
    _tour._figures(None, {"FAFL": legs}, tmp_path)
    assert len(paths) == 1
    assert " " not in paths[0].name and "=" not in paths[0].name, paths[0].name


# ------------------------------------------------------------------------------ internal citations
#: references to documents a user does not have: the project's internal specification (sections,
#: errata, notes), its design notes and its issue tracker. Cite the papers instead
#: (drflmodel/_references.py).
INTERNAL_CITATION = re.compile("|".join([
    r"\bspec\s*(§|[0-9]|N[0-9]|note|`|\(|fact|alg)",
    r"\bspec\s+(scaffpd|fafl-hcvar|drfl-admm|relative-fairness|fair-vfl-deo|experiments|convention)\b",
    r"\berrat(a|um)\b",
    r"\bspecs\b",
    r"\bspec's\b",
    r"DESIGN\.md",
    r"\bissues? #?[0-9]+",
    r"\[(derived|corrected)\]",
]), re.IGNORECASE)
GENERATED = {"_build", "auto_examples", "_gallery_src", "generated", "__pycache__"}


def _user_facing_files():
    for root in ("drflmodel", "examples", "formulations", "docs"):
        for path in sorted((ROOT / root).rglob("*")):
            if path.suffix in (".py", ".md", ".rst") and not GENERATED & set(path.parts):
                if not (path.parent.name == "api" and path.suffix == ".rst"):     # generated pages
                    yield path
    yield ROOT / "README.md"


@pytest.mark.parametrize("text", ["stops by the spec 6.7 rule", "minibatch (batch 16, errata 10)",
                                  "3 local steps (spec N19)", "Spec scaffpd §4.4", "spec ``drfl-admm`` §8",
                                  "(DESIGN.md §4.1)", "(issue 13 item 3)", "the spec's convention"])
def test_internal_citation_pattern_catches(text):
    assert INTERNAL_CITATION.search(text)


@pytest.mark.parametrize("text", ["Scaff-PD paper, Condition 3.1", "importlib.util.find_spec(name)",
                                  "for spec in self.problem_types:", "the DRFL paper's Lemma C.1"])
def test_internal_citation_pattern_spares(text):
    assert not INTERNAL_CITATION.search(text)


def test_no_internal_citations_in_package_docs_examples():
    """User-facing text (docstrings, messages, comments, pages, examples) cites papers, never the
    internal specification, errata, design notes or issue numbers."""
    hits = []
    for path in _user_facing_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INTERNAL_CITATION.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == [], "\n".join(hits)


def test_api_pages_cover_every_public_name():
    """Every name in the ``__all__`` of drflmodel, of its public submodules, of the optional
    integrations and of the problem subpackages is listed on one API page (a new public module
    without a page fails here)."""
    import importlib
    import types

    import drflmodel

    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from drflmodel_docs import API_MODULES, _public_names
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    documented: dict = {}
    listed = {(mod, name) for _, mod, _ in API_MODULES
              for name in _public_names(importlib.import_module(mod), documented)}
    listed_objects = {id(getattr(importlib.import_module(mod), name)) for mod, name in listed}
    modules = ["drflmodel", *(f"drflmodel.{m}" for m in sorted(drflmodel._SUBMODULES)),
               "drflmodel.layout", "drflmodel.flower", "drflmodel.sklearn",
               "drflmodel.problems.relative", "drflmodel.problems.deo"]
    missing = []
    for modname in modules:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if name.startswith("__") or isinstance(obj, types.ModuleType):
                continue
            if (modname, name) not in listed and id(obj) not in listed_objects:
                missing.append(f"{modname}.{name}")
    assert missing == []


def test_the_full_gallery_runs_every_example(monkeypatch):
    """With the default setting every staged example is executed (a name with a digit, such as
    scaffpd_table1, was shown without its output by an earlier pattern)."""
    import runpy

    monkeypatch.delenv("DRFLMODEL_DOCS_GALLERY", raising=False)
    monkeypatch.syspath_prepend(str(DOCS / "_ext"))
    conf = runpy.run_path(str(DOCS / "conf.py"))
    from drflmodel_docs import GALLERY_EXCLUDED

    pattern = conf["sphinx_gallery_conf"]["filename_pattern"]
    names = [p.name for p in (ROOT / "examples").glob("*.py") if p.stem not in GALLERY_EXCLUDED]
    assert any(any(c.isdigit() for c in n) for n in names)
    assert [n for n in names if not re.search(pattern, f"docs/_gallery_src/{n}")] == []


def test_examples_survive_the_galleries_empty_docstring():
    """sphinx-gallery runs each script with ``__doc__ == ""`` (the docstring becomes the page's
    text): ``"".splitlines()[0]`` raises, ``"".split("\\n")[0]`` does not."""
    offenders = [p.name for p in (ROOT / "examples").glob("*.py") if "__doc__.splitlines()[" in p.read_text()]
    assert offenders == []


def test_the_architecture_page_names_only_modules_that_exist():
    """docs/architecture.md and its figure name the engine's modules; each one must exist (a module
    moved or renamed makes the page wrong, and this test fails)."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    figure = (DOCS / "architecture.svg").read_text(encoding="utf-8")
    assert "architecture.svg" in page and "architecture" in (DOCS / "index.md").read_text(encoding="utf-8")
    package = ROOT / "drflmodel"
    named = set(re.findall(r"drflmodel/[\w/]+(?:\.py|/)", page))
    assert len(named) >= 15, named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    # the figure abbreviates: a path there is under drflmodel/ or drflmodel/problems/ (engine/...)
    drawn = set(re.findall(r"(?<![\w/])((?:[a-z_]+/)*[a-z_]+\.py)", figure))
    assert len(drawn) >= 10, drawn
    missing += sorted(p for p in drawn if not ((package / p).exists() or (package / "problems" / p).exists()))
    assert not missing, missing
    for name in re.findall(r"`(drflmodel(?:\.\w+)+)`", page):      # dotted names, if any
        module, _, attr = name.rpartition(".")
        assert hasattr(__import__(module, fromlist=[attr]), attr), name
    assert (package / "problems" / "engine" / "route.py").is_file()


# ------------------------------------------------------------------------------ API pages read right
class _Classifiers(HTMLParser):
    """The text of numpydoc's type spans (``<span class="classifier">``) of a page."""

    def __init__(self):
        super().__init__()
        self.depth, self.texts = 0, []

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += 1
        elif tag == "span" and "classifier" in (dict(attrs).get("class") or "").split():
            self.depth = 1
            self.texts.append("")

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.texts[-1] += data


def test_api_pages_keep_descriptions_off_the_type_line(site):
    """numpydoc renders the text after ``name :`` as the type (bold italic): a description there
    reads as a shout. On every API page each type is short and is not a sentence."""
    offenders = []
    for page in sorted((site / "api" / "generated").glob("*.html")):
        parser = _Classifiers()
        parser.feed(page.read_text(encoding="utf-8"))
        offenders += [f"{page.name}: {t.strip()!r}" for t in parser.texts
                      if len(t.strip()) > 40 or t.strip().endswith(".")]
    assert offenders == [], "\n".join(offenders[:20])


def test_api_pages_say_what_verify_returns_and_name_no_private_module(site):
    page = (site / "api" / "generated" / "drflmodel.verify_iterates.html").read_text()
    assert "Returns" in page and "Report" in page
    for name in ("times", "solver", "require_rate", "prediction"):
        assert f"<strong>{name}</strong>" in page, name
    rates = (site / "api" / "generated" / "drflmodel.verification.RATE_KINDS.html").read_text()
    assert "Built-in immutable sequence" not in rates and "contraction factor" in rates
    leaks = [p.name for p in (site / "api").rglob("*.html")
             if re.search(r"drflmodel\.(_rates|_diagnosis|flower\._logs)\b", p.read_text(encoding="utf-8"))]
    assert leaks == []


def test_gallery_pages_show_their_figures_and_whole_titles(site):
    for name in FAST_EXAMPLES.split("|"):
        page = (site / "auto_examples" / f"{name}.html").read_text()
        assert re.search(r'<img[^>]+src="[^"]*images/sphx_glr_' + name, page), name
    table1 = (site / "auto_examples" / "scaffpd_table1.html").read_text()
    assert "relative-fairness paper" in table1.split("</h1>")[0]          # the title is not cut


def test_numpydoc_fields_move_prose_off_the_type_line():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from drflmodel_docs import numpydoc_fields
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    doc = ["Summary.", "", "Parameters", "----------", "tol : float", "    The tolerance.",
           "X : array of shape (N, d), finite.", "task : ``\"a\"`` (binary, labels in {-1, +1}) or",
           "    ``\"b\"``.", "", "Free text after the fields.", "", "Returns", "-------", "Report", "    The report."]
    out = numpydoc_fields(doc)
    assert out[4:10] == ["tol : float", "    The tolerance.", "X", "    array of shape (N, d), finite.", "task",
                         '    ``"a"`` (binary, labels in {-1, +1}) or']
    assert out[10] == '    ``"b"``.'
    assert out[out.index("Notes") + 2] == "Free text after the fields."
    assert "Returns" in out and out[out.index("Returns") + 2] == "Report"
