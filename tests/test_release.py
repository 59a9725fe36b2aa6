"""Release habits: one version, a changelog that names it, pre-commit running what CI runs."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

import gnnaudit

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_defined_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("gnnaudit") == gnnaudit.__version__
    hits = [
        p
        for p in (ROOT / "gnnaudit").rglob("*.py")
        if re.search(r"^__version__\s*=", p.read_text(), flags=re.M)
    ]
    assert hits == [ROOT / "gnnaudit" / "_version.py"]


def test_changelog_follows_keep_a_changelog_and_names_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text and "## [Unreleased]" in text
    assert f"## [{gnnaudit.__version__}] - " in text
    sections = set(re.findall(r"^### (\w+)", text, flags=re.M))
    assert sections <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_no_prerelease_floor_in_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    assert not [s for s in specs if re.search(r"\d(\.dev|a|b|rc)\d", s)], specs


def test_pre_commit_runs_what_ci_lint_runs():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    lint = re.search(r"^lint:.*?(?=^\S)", (ROOT / "Makefile").read_text(), flags=re.M | re.S)
    assert lint is not None
    for tool in ("ruff check", "ruff format --check", "mypy gnnaudit"):
        assert tool in lint.group(0) and tool in config, tool
