"""Sphinx configuration of the gnnaudit documentation (``make docs``).

Built with ``sphinx-build -W --keep-going -b html docs docs/_build/html``: every warning is an
error. The gallery's outputs and figures come from ``docs/gen_figures.py`` (run by ``make docs``
before Sphinx), written under ``docs/_generated/``.
"""

from __future__ import annotations

import inspect
import re
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
    "sphinx-mathjax-offline",  # MathJax served from _static/mathjax: formulas without a network
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
# "Attributes" rendered like "Parameters" (a field list): the docstrings write several names per
# entry ("labels_, n_clusters_ : ..."), which attribute directives or :ivar: fields would split
# into wrong names, and a property listed there would be described twice
napoleon_custom_sections = [("Attributes", "params_style")]

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


#: numpy-style sections whose entries read "name : type"
_FIELD_SECTIONS = {"Parameters", "Other Parameters", "Attributes", "Keyword Arguments"}
_ENTRY = re.compile(r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:, *\*{0,2}[A-Za-z_]\w*)*) : (?P<rest>.+)$")


def _is_prose(text: str) -> bool:
    """Whether the text after ``name :`` is a description rather than a type: a sentence (ends
    with punctuation) or six words or more. This code base writes ``name : what it is``."""
    return text.rstrip().endswith((".", ",", ";", ":")) or len(text.split()) >= 6


def _prose_entries(app, what, name, obj, options, lines):  # noqa: ARG001, PLR0913 (Sphinx API)
    """Before napoleon: ``name : description`` entries become ``name`` plus an indented
    description, so the description is not shown as the entry's type."""
    section = None
    out: list[str] = []
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following.strip() and set(following.strip()) == {"-"} and line.strip():
            section = line.strip()
        match = _ENTRY.match(line)
        if section in _FIELD_SECTIONS and match and _is_prose(match["rest"]):
            out += [match["names"], "    " + match["rest"]]
        else:
            out.append(line)
    lines[:] = out


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    # napoleon converts the docstring at the default priority 500; this runs first
    app.connect("autodoc-process-docstring", _prose_entries, priority=400)
