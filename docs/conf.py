"""Sphinx configuration of the dppca_dask documentation site.

Build it from the repository root (what ``tests/test_docs_site.py`` does, into a temporary
directory)::

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

The pages are MyST markdown (myst-parser); the API reference is autodoc over the numpydoc
docstrings (read by napoleon), the CLI reference is generated from the click group
``dppca_dask.cli:main`` by sphinx-click. Pages added later under ``docs/`` (one ``NAME.md`` at
the top level) are picked up by the glob toctree at the end of ``index.md``: no edit needed
here (list the page explicitly in ``index.md`` to give it a place in the guide).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The package as checked out here (an editable install of another checkout must not win).
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

import dppca_dask

project = "dppca_dask"
author = "dppca_dask developers"
copyright = "dppca_dask developers"
release = dppca_dask.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx_click",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# _build: the output; spec/seeds: the seed API texts (plain .txt, linked, not pages).
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "spec/seeds"]

# --- MyST ------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "attrs_inline"]
# Anchors for "## Heading" (h1-h4), so [text](page.md#a-heading) links resolve as on GitHub.
myst_heading_anchors = 4

# --- autodoc / napoleon ----------------------------------------------------------------------
# The docstrings are numpydoc-style; napoleon reads them (parameters without types, as here).
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_preprocess_types = False
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
# No stub pages are generated: the API pages list their objects themselves (nothing is written
# into the source tree, so a build leaves the checkout as it was).
autosummary_generate = False

# --- cross-references ------------------------------------------------------------------------
# nitpicky is off: the docstrings name many internal helpers and third-party types
# (xarray.DataArray, numpy.random.Generator, ...) that have no page here and intersphinx is not
# used offline; an unresolved :func:/:class: then renders as plain code instead of a warning.
nitpicky = False
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
# Third-party noise only (never our own pages or docstrings):
# - myst.xref_missing: links in the design notes and specs to repository files outside docs/
#   (benchmarks/results/*.md, configs/*.yaml) that are not pages of this site.
suppress_warnings: list[str] = []

# --- HTML --------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"dppca_dask {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
