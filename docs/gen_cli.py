"""Write the command-line reference fragment, ``docs/_generated/cli/reference.md``, from the
parsers themselves (``gnnaudit.cli.main.build_parser``): the top-level help and each
subcommand's ``--help``, so the page can never disagree with the program. Run by ``make docs``
before Sphinx; ``docs/guide/cli.md`` includes the fragment."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "_generated" / "cli" / "reference.md"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of ``parser``, in the order they were added."""
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main() -> None:
    os.environ.setdefault("COLUMNS", "100")  # the same line width on every machine
    from gnnaudit.cli.main import build_parser

    parser = build_parser()
    parts = ["## `gnnaudit`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, sub in _subcommands(parser).items():
        parts += [f"## `gnnaudit {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(parts))
    print(f"written {OUT.relative_to(ROOT)} ({len(parts)} lines)")


if __name__ == "__main__":
    main()
