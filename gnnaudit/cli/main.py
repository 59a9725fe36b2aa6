"""Entry point of the ``gnnaudit`` command.

Each subcommand is a module of :mod:`gnnaudit.cli` exposing ``register(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code).
Heavy imports happen inside ``func`` so that ``gnnaudit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from gnnaudit import __version__
from gnnaudit.cli.failures import one_line_warnings, run_command
from gnnaudit.cli.options import OneLineParser, add_global_options

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "train",
    "evidence",
    "explain-dbscan",
    "tree-cluster",
    "fairden",
    "audit",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``gnnaudit`` parser with every subcommand of :data:`COMMANDS` registered.

    ``-v/--verbose``, ``--debug`` and ``--threads N`` are accepted before and after the
    subcommand.
    """
    parser = OneLineParser(
        prog="gnnaudit",
        allow_abbrev=False,  # flags in full: --label is never taken for --label-number
        description="Audit GNN node classifiers and explain density-based clusterings. "
        "Conventions: --out is a file or a folder as each command's --help says, is checked "
        "before any work starts, written atomically and replaced only with --force; "
        "--progress/--no-progress on long-running commands. Exit codes: 0 success, 2 bad "
        "input or no result, 1 a bug (rerun with --debug).",
    )
    parser.add_argument("--version", action="version", version=f"gnnaudit {__version__}")
    add_global_options(parser, in_subcommand=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"gnnaudit.cli.{name.replace('-', '_')}").register(sub)
    for subparser in sub.choices.values():
        add_global_options(subparser, in_subcommand=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gnnaudit`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    0 on success, 2 for bad input or no result (one line on stderr naming the argument), 1 for
    an unexpected error (a bug; ``--debug`` shows its traceback). argparse itself exits with 2
    (``SystemExit``) on an unknown flag.
    """
    parser = build_parser()
    with one_line_warnings():  # deprecated flag spellings warn while parsing
        args = parser.parse_args(argv)
    # the command as typed, for the report (its next step repeats it with --mitigate)
    args.command_line = ["gnnaudit", *(sys.argv[1:] if argv is None else argv)]
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    if getattr(args, "threads", None) is None:
        return run_command(args)
    from gnnaudit._threads import thread_limits

    with thread_limits(args.threads):  # the command's own size rule yields to it
        return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
