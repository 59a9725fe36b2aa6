"""The documentation sources cover the examples and the public API (no Sphinx build here:
``make docs`` builds the site with warnings as errors)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path

import gnnaudit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _gen_figures():
    spec = importlib.util.spec_from_file_location("gen_figures", DOCS / "gen_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _toctree_entries(page: Path) -> set[str]:
    text = page.read_text()
    blocks = re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S)
    return {
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.strip().startswith(":")
    }


def test_every_example_has_a_gallery_page_and_a_run():
    gen = _gen_figures()
    examples = sorted(p.stem for p in (ROOT / "examples").glob("*.py"))
    assert examples, "no examples found"
    listed = _toctree_entries(DOCS / "gallery" / "index.md")
    for name in examples:
        page = DOCS / "gallery" / f"{name}.md"
        assert page.is_file(), f"examples/{name}.py has no gallery page docs/gallery/{name}.md"
        assert f"../../examples/{name}.py" in page.read_text(), f"{page} does not show the script"
        assert name in listed, f"docs/gallery/index.md does not list {name}"
        assert (name in gen.EXAMPLES) != (name in gen.MODULES), (
            f"docs/gen_figures.py must run examples/{name}.py (EXAMPLES) or name it a module"
        )
    assert set(gen.EXAMPLES) | set(gen.MODULES) == set(examples)


def test_every_public_package_has_an_api_page():
    packages = [
        m.name
        for m in pkgutil.iter_modules(gnnaudit.__path__)
        if m.ispkg and not m.name.startswith("_") and m.name != "cli"
    ]
    listed = _toctree_entries(DOCS / "api" / "index.md")
    for name in packages:
        module = importlib.import_module(f"gnnaudit.{name}")
        assert getattr(module, "__all__", None), f"gnnaudit.{name} has no __all__"
        page = DOCS / "api" / f"{name}.rst"
        assert page.is_file(), f"gnnaudit.{name} has no API page {page}"
        assert f".. automodule:: gnnaudit.{name}\n" in page.read_text()
        assert name in listed, f"docs/api/index.md does not list {name}"


def test_every_top_level_name_is_documented():
    import gnnaudit.errors

    page = (DOCS / "api" / "gnnaudit.rst").read_text()
    for name in gnnaudit.__all__:
        if name == "__version__":
            continue
        documented = f"gnnaudit.{name}\n" in page or (
            name in gnnaudit.errors.__all__ and ".. automodule:: gnnaudit.errors\n" in page
        )
        assert documented, f"gnnaudit.{name} is not in docs/api/gnnaudit.rst"


def test_guide_pages_are_in_the_site():
    listed = _toctree_entries(DOCS / "index.md")
    pages = {
        p.relative_to(DOCS).with_suffix("").as_posix()
        for p in [*DOCS.glob("*.md"), *(DOCS / "guide").glob("*.md")]
        if p.name != "index.md"
    }
    assert pages <= listed, f"pages missing from docs/index.md: {sorted(pages - listed)}"
