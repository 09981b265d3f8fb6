"""Sphinx configuration of the course's documentation site (built by tools/build_docs.py).

Why Sphinx + MyST-NB (+ autodoc/napoleon), not Jupyter Book or MkDocs:
- the API reference of the practitioner's calculator comes from the docstrings: autodoc imports
  the modules and documents exactly what they export, and Sphinx is where autodoc lives;
- MyST-NB renders notebooks that are already executed (nb_execution_mode = "off"): the build
  runs the student edition itself (tools/docs_notebooks.py) so that it decides, cell by cell,
  which outputs may be shown, instead of a plugin's all-or-nothing error handling;
- MyST-Parser reads the existing docs/*.md (GitHub-flavoured Markdown, pipe tables, $math$)
  unchanged; Jupyter Book 2 moved to a Node.js toolchain, and MkDocs 1.x is no longer
  maintained (its Material theme is in maintenance mode), while Sphinx, MyST-NB and the
  book theme are released regularly;
- `-W --keep-going` turns every warning into a failure: a broken link or a page missing from
  the table of contents fails `make docs`.

This file is read from the staging folder (see tools/build_docs.py): pages/ holds docs/*.md,
theory/ the executed theory notebooks, api/ the API pages.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the checkout whose solutions_lib autodoc imports: tools/build_docs.py says which; a staging
# folder at its default place (build/docs_src/) is two levels below it
REPO = Path(os.environ.get("TAS_DOCS_REPO") or HERE.parents[1])
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

project = "Training LLMs at scale"
author = "the course's authors"
copyright = "2026, the course's authors"

sys.path.insert(0, str(HERE))          # md_docstrings.py, repo_links.py: beside this file
# sphinx-mathjax-offline: MathJax 3 copied into _static/ (the book renders its maths offline and
# asks no CDN); its module name has hyphens, which importlib accepts
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "sphinx-mathjax-offline",
              "md_docstrings", "repo_links"]
root_doc = "index"
exclude_patterns = ["README.md", "_build", "**/.ipynb_checkpoints", "**/__pycache__", ".tas-docs-stage"]

# --- MyST / notebooks
nb_execution_mode = "off"             # executed by tools/docs_notebooks.py (see its docstring)
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 4              # docs/*.md link to sections as on GitHub (#2026-11-27-h200-...)
myst_dmath_double_inline = True

# --- autodoc: the calculator, documented from its docstrings (plain text with Markdown habits:
# md_docstrings.py reads them with MyST)
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = True

# --- HTML
html_theme = "sphinx_book_theme"
html_title = "Training LLMs at scale"
html_theme_options = {"show_navbar_depth": 1, "home_page_in_toc": True, "use_download_button": False,
                      "use_fullscreen_button": False}
html_static_path: list[str] = []
html_show_sourcelink = False          # the notebooks' sources are in release/, the pages' in docs/
html_copy_source = False


# --- optional pages: placed in the table of contents when they exist (e.g. docs/term.md)
#: docs/<name>.md pages named by the front page's "{{optional instructor pages}}" line
OPTIONAL_INSTRUCTOR_PAGES = ("term", "engine")


def _place_optional_pages(app, docname, source):
    if docname != root_doc:
        return
    present = [n for n in OPTIONAL_INSTRUCTOR_PAGES if (Path(app.srcdir) / "pages" / f"{n}.md").is_file()]
    source[0] = source[0].replace("{{optional instructor pages}}", "\n".join(f"/pages/{n}" for n in present))


def _reread_index(app, env, added, changed, removed):
    # which optional pages exist can change without index.md changing: read it on every build
    return [root_doc]


def setup(app):
    app.connect("source-read", _place_optional_pages)
    app.connect("env-get-outdated", _reread_index)
