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
from gnnaudit.errors import GnnAuditError

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
    parser = argparse.ArgumentParser(
        prog="gnnaudit",
        description="Audit GNN node classifiers and explain density-based clusterings.",
    )
    parser.add_argument("--version", action="version", version=f"gnnaudit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"gnnaudit.cli.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except GnnAuditError as exc:
        print(f"gnnaudit {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
