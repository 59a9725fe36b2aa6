"""Every ```python block of README.md runs as written, each on its own, in a fresh folder."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_snippets(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return [match.group(1) for match in FENCE.finditer(text)]


SNIPPETS = python_snippets(README.read_text(encoding="utf-8"))


def test_snippet_extraction():
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny = 2\nz = 3\n```\n"
    assert python_snippets(text) == ["x = 1\n", "y = 2\nz = 3\n"]
    assert len(SNIPPETS) >= 2  # the README's quickstart blocks


@pytest.mark.filterwarnings("error::FutureWarning")  # the README shows the current API only
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch, capsys):
    path = tmp_path / f"readme_snippet_{index}.py"
    path.write_text(SNIPPETS[index], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(path), run_name="__main__")  # its own namespace: no name leaks between
    assert capsys.readouterr().out.strip()  # every snippet prints what it shows
