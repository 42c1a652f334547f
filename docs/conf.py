"""Sphinx configuration of the drflmodel documentation.

Build (offline, warnings are errors)::

    python -m pip install -e ".[docs]" && sphinx-build -W -b html docs docs/_build/html

The examples gallery runs ``examples/*.py --quick`` at build time, one after the other: about 80 s of
CPU in all (measured with one BLAS thread; ``drfl_paper_figures`` 48 s of it), several times that in
wall time on a busy machine (383 s for ``drfl_paper_figures`` alone at a load of 11 on 2 cores);
``DRFLMODEL_DOCS_GALLERY=0`` builds without running them (the pages then show the scripts without
their output), and a regular expression of example names runs only those.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

import drflmodel  # noqa: E402

project = "drflmodel"
author = "the drflmodel authors"
copyright = "the drflmodel authors, MIT license"
release = version = drflmodel.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "drflmodel_docs",
]

# MathJax is served from the built site itself (sphinx-mathjax-offline ships MathJax 3.2.2), so the
# math renders without a CDN; when that package is absent the reader's browser loads it from the CDN.
try:
    import importlib.util as _util

    if _util.find_spec("sphinx-mathjax-offline") is not None:
        extensions.append("sphinx-mathjax-offline")
except ValueError:  # pragma: no cover
    pass

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_gallery_src", "_gallery_header.rst", "**.ipynb_checkpoints", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json", "auto_examples/*.md5",
                    "auto_examples/*.codeobj.json"]
root_doc = "index"

# ---------------------------------------------------------------------------------------- theme
# The PyData theme: the look NumPy, SciPy, pandas and CVXPY readers know (top navigation by section,
# an API tree in the sidebar, good math), and it builds without network access.
html_theme = "pydata_sphinx_theme"
html_title = "drflmodel"
html_static_path = ["_static"]
html_css_files = ["drflmodel.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 8,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = True
html_sidebars = {"index": [], "getting-started": [], "configuration": [], "performance": [],
                 "reproductions": [], "references": []}

# ---------------------------------------------------------------------------------------- MyST
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "attrs_inline"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# ---------------------------------------------------------------------------------------- API
autosummary_generate = True
autodoc_default_options = {
    "members": True, "inherited-members": False, "show-inheritance": True,
    # scikit-learn adds these metadata-routing methods to every estimator; they are documented there
    "exclude-members": "set_fit_request,set_score_request,set_predict_request,set_transform_request",
}
templates_path = ["_templates"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"          # numpydoc's "Parameters" sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = True     # parameter types link to NumPy, pandas, CVXPY, ... objects
numpydoc_xref_aliases = {"array": "numpy.ndarray", "ndarray": "numpy.ndarray", "DataFrame": "pandas.DataFrame",
                         "Generator": "numpy.random.Generator", "Solution": "drflmodel.Solution",
                         "Federation": "drflmodel.Federation", "Trace": "drflmodel.solvers.Trace"}
numpydoc_xref_ignore = "all"
numpydoc_validation_checks: set = set()

# ---------------------------------------------------------------------------------------- links
# Intersphinx without network: small inventories shipped in docs/_inventories list the NumPy,
# SciPy, CVXPY, scikit-learn, pandas, matplotlib and Flower objects these pages reference, with
# their public URLs (written by docs/_inventories/make_inventories.py). Nothing is fetched.
_INV = DOCS / "_inventories"
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", str(_INV / "python.inv")),
    "numpy": ("https://numpy.org/doc/stable", str(_INV / "numpy.inv")),
    "scipy": ("https://docs.scipy.org/doc/scipy", str(_INV / "scipy.inv")),
    "cvxpy": ("https://www.cvxpy.org", str(_INV / "cvxpy.inv")),
    "sklearn": ("https://scikit-learn.org/stable", str(_INV / "sklearn.inv")),
    "pandas": ("https://pandas.pydata.org/docs", str(_INV / "pandas.inv")),
    "matplotlib": ("https://matplotlib.org/stable", str(_INV / "matplotlib.inv")),
    "flwr": ("https://flower.ai/docs/framework", str(_INV / "flwr.inv")),
}
intersphinx_timeout = 1

# ---------------------------------------------------------------------------------------- gallery
from drflmodel_docs import GALLERY_SOURCE, OutputImageScraper, gallery_argv, gallery_progress  # noqa: E402

# DRFLMODEL_DOCS_GALLERY: unset or "1" runs every example; "0" runs none (the pages show the code);
# otherwise a regular expression of the example names to run (tests/test_docs.py runs the fast ones).
_GALLERY = os.environ.get("DRFLMODEL_DOCS_GALLERY", "1")
sphinx_gallery_conf = {
    "examples_dirs": GALLERY_SOURCE,                # examples/*.py, staged with a title line
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/[^/]+\.py$" if _GALLERY in ("0", "1") else rf"/({_GALLERY})\.py$",
    "plot_gallery": "False" if _GALLERY == "0" else "True",
    "reset_argv": gallery_argv,                     # each script runs with --quick (and --out: its figures)
    "reset_modules": ("matplotlib", gallery_progress),   # a line when each example starts and ends
    "reset_modules_order": "both",
    "image_scrapers": ("matplotlib", OutputImageScraper()),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "min_reported_time": 1,
    "capture_repr": (),
    "show_memory": False,
    "show_signature": False,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "reference_url": {"drflmodel": None},
    "first_notebook_cell": None,
    "line_numbers": False,
}
