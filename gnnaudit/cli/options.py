"""The flag conventions every ``gnnaudit`` command follows.

* ``--out PATH``: where results go. A **folder** for commands that write several files
  (``train``, ``audit``), a **file** for one-file commands (``evidence``, ``fairden``,
  ``tree-cluster``, ``explain-dbscan``); each ``--help`` says which. The path is checked before
  any computation starts (it may not be, hold or lie inside an input: :mod:`gnnaudit.cli.guards`),
  the output is written atomically (it appears whole or not at all) and an existing output is
  replaced only with ``--force``, which in a folder replaces only gnnaudit's own files.
* ``--progress / --no-progress`` on every long-running command (default: on when stderr is a
  terminal).
* ``-v/--verbose``, ``--debug`` and ``--threads N`` are accepted before and after the
  subcommand.

Old spellings (``tree-cluster --output``) keep working for one release with a
:class:`FutureWarning`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

#: gnnaudit's backbones, = :data:`gnnaudit.training.BACKBONES` (kept here so ``--help`` stays
#: light; a test checks they agree)
BACKBONES: tuple[str, ...] = ("gcn", "gat", "gin", "sage", "mpnn")
#: evidence search backends, = :data:`gnnaudit.audit.search.evidence.BACKENDS` (a test checks it)
BACKENDS: tuple[str, ...] = ("exact", "sorted", "index", "faiss", "auto")

__all__ = [
    "BACKBONES",
    "BACKENDS",
    "DeprecatedAlias",
    "add_global_options",
    "add_out_argument",
    "add_force_argument",
    "add_progress_argument",
    "progress_enabled",
]


class DeprecatedAlias(argparse.Action):
    """An old flag spelling: stores into the new flag's ``dest`` and warns once per use.

    ``parser.add_argument("--output", dest="out", action=DeprecatedAlias, new="--out")``
    """

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any):
        self.new = new
        kwargs.setdefault("help", f"deprecated spelling of {new}")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Store ``values`` as the new flag would and emit a :class:`FutureWarning`."""
        warnings.warn(
            f"{option_string} is deprecated and will be removed in the next release; use "
            f"{self.new}",
            FutureWarning,
            stacklevel=2,
        )
        setattr(namespace, self.dest, values)


def threads_argument(text: str) -> int:
    """argparse ``type`` of ``--threads``: an integer >= 1 (else a usage error naming it)."""
    from gnnaudit._threads import check_threads
    from gnnaudit.errors import InvalidInputError

    try:
        return check_threads(int(text))
    except (ValueError, InvalidInputError) as exc:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1 (the number of CPU threads), got {text!r}"
        ) from exc


def add_global_options(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    """Add ``-v/--verbose``, ``--debug`` and ``--threads N`` to ``parser``.

    On a subcommand parser the defaults are suppressed, so a flag given before the subcommand
    is not reset by the subcommand's parser.
    """
    default: Any = argparse.SUPPRESS if in_subcommand else False
    group = parser.add_argument_group("global options")
    group.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log progress details"
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show the full traceback of any error (for bug reports)",
    )
    group.add_argument(
        "--threads",
        type=threads_argument,
        default=argparse.SUPPRESS if in_subcommand else None,
        metavar="N",
        help="CPU threads for torch, BLAS/OpenMP and faiss (default: OMP_NUM_THREADS if set, "
        "else 1 thread for small graphs and all cores for large ones)",
    )


def add_out_argument(
    parser: argparse.ArgumentParser,
    *,
    kind: str,
    what: str,
    required: bool = False,
    deprecated: Sequence[str] = (),
) -> None:
    """Add ``--out`` (``kind`` ``"file"`` or ``"folder"``) and any deprecated aliases of it."""
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    if kind == "file":
        detail = "a file path; its folder must exist; an existing file needs --force"
    else:
        detail = "a folder, created if missing; a folder holding files needs --force"
    parser.add_argument(
        "--out",
        required=required,
        default=None,
        metavar="FILE" if kind == "file" else "FOLDER",
        help=f"{what} ({detail})",
    )
    for alias in deprecated:
        parser.add_argument(
            alias, dest="out", action=DeprecatedAlias, new="--out", help=argparse.SUPPRESS
        )


def add_force_argument(parser: argparse.ArgumentParser, *, kind: str) -> None:
    """Add ``--force`` (replace an existing ``--out`` file, or gnnaudit's files in a folder)."""
    text = (
        "replace an existing --out file (never an input)"
        if kind == "file"
        else "write into an existing --out folder, replacing only the files gnnaudit wrote "
        "there (listed in its .gnnaudit-manifest.json); nothing else is touched"
    )
    parser.add_argument("--force", action="store_true", help=text)


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--progress / --no-progress`` (default: on when stderr is a terminal)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress bars on stderr (default: when stderr is a terminal)",
    )


def progress_enabled(args: argparse.Namespace) -> bool:
    """``--progress`` / ``--no-progress`` if given, else whether stderr is a terminal."""
    value = getattr(args, "progress", None)
    if value is None:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(isatty()) if callable(isatty) else False
    return bool(value)
