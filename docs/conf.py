"""Sphinx configuration of the gnnaudit documentation (``make docs``).

Built with ``sphinx-build -W --keep-going -b html docs docs/_build/html``: every warning is an
error. The gallery's outputs and figures come from ``docs/gen_figures.py`` (run by ``make docs``
before Sphinx), written under ``docs/_generated/``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnaudit._version import __version__  # noqa: E402

project = "gnnaudit"
author = "gnnaudit contributors"
copyright = "2026, gnnaudit contributors"  # noqa: A001  (Sphinx's name)
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# _generated holds fragments included by the gallery pages, never pages of their own
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
napoleon_numpy_docstring = True
napoleon_google_docstring = True
napoleon_use_rtype = False
# attributes as fields of their class, so a property documented in "Attributes" is not a
# second object description
napoleon_use_ivar = True

html_theme = "furo"
html_title = f"gnnaudit {release}"

# "more than one target found" for the dimension names in types (``n``, ``k``), not a defect
suppress_warnings = ["ref.python"]


def _documented_elsewhere(obj: object) -> bool:
    """A method without a docstring of its own that inherits one from a class outside gnnaudit
    (a Lightning hook, a scikit-learn method): documented by that library, in its own markup."""
    if not inspect.isfunction(obj) or (obj.__doc__ or "").strip():
        return False
    owner = sys.modules.get(obj.__module__)
    for part in obj.__qualname__.split(".")[:-1]:
        owner = getattr(owner, part, None)
    if not inspect.isclass(owner):
        return False
    for base in owner.__mro__[1:]:
        doc = getattr(base.__dict__.get(obj.__name__), "__doc__", None)
        if doc and doc.strip():
            return not base.__module__.startswith("gnnaudit")
    return False


def _skip_member(app, what, name, obj, skip, options):  # noqa: ARG001, PLR0913 (Sphinx API)
    """Skip scikit-learn's generated metadata-routing methods (``set_fit_request`` ...) and the
    overrides that only inherit a third-party docstring."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if _documented_elsewhere(obj):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
