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
* Flags are spelled in full: abbreviations (``--lab`` for ``--label``) are refused
  (``allow_abbrev=False`` on every parser, :class:`OneLineParser`).

Old spellings (``tree-cluster --output``, ``fairden --k`` / ``--min-pts``, ``audit
--lightning-checkpoint``) keep working until 0.3.0 with a one-line :class:`FutureWarning` on
stderr; they are hidden from ``--help``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

#: gnnaudit's backbones, = :data:`gnnaudit.training.BACKBONES` (kept here so ``--help`` stays
#: light; a test checks they agree)
BACKBONES: tuple[str, ...] = ("gcn", "gat", "gin", "sage", "mpnn")
#: evidence search backends, = :data:`gnnaudit.audit.search.evidence.BACKENDS` (a test checks it)
BACKENDS: tuple[str, ...] = ("exact", "sorted", "index", "faiss", "sharded", "auto")

__all__ = [
    "BACKBONES",
    "BACKENDS",
    "OneLineParser",
    "IntRange",
    "FloatRange",
    "SEED",
    "DeprecatedAlias",
    "add_renamed_argument",
    "add_global_options",
    "add_out_argument",
    "add_force_argument",
    "add_progress_argument",
    "progress_enabled",
]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr, exit 2:
    ``gnnaudit train: error: argument --k: ... (see gnnaudit train --help)``.

    (argparse's default prints the whole usage first.) Subparsers made by ``add_parser``
    inherit the class, and with it ``allow_abbrev=False``: a flag must be spelled in full, so
    ``--label`` is never read as a prefix of ``--label-number`` (nor ``--lab`` as either).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        """Print ``message`` as one line naming the command, then exit with status 2."""
        text = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")


def _parse_int(text: str) -> int:
    """An integer literal (``12``, ``-3``, ``1_000``); ``1e9`` / ``2.5`` are refused."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer written in digits, got {text!r}"
        ) from None


class IntRange:
    """argparse ``type`` of an integer flag bounded to ``[minimum, maximum]``.

    ``type=IntRange(1, MAX_K, "evidences per query")``: anything else is a one-line usage
    error naming the flag, the value and the range (and ``why``, the bound's reason), before
    any work starts. No flag of gnnaudit takes an unbounded integer.
    """

    def __init__(self, minimum: int, maximum: int, why: str = "") -> None:
        self.minimum, self.maximum, self.why = int(minimum), int(maximum), why

    def __call__(self, text: str) -> int:
        value = _parse_int(text)
        if not self.minimum <= value <= self.maximum:
            why = f" ({self.why})" if self.why else ""
            raise argparse.ArgumentTypeError(
                f"must be an integer in [{self.minimum}, {self.maximum}]{why}, got {text!r}"
            )
        return value

    def __repr__(self) -> str:
        return f"IntRange({self.minimum}, {self.maximum})"


class FloatRange:
    """argparse ``type`` of a finite float flag in ``[minimum, maximum]`` (``None``: open on
    that side; ``low_open``: exclude ``minimum``)."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
        why: str = "",
    ) -> None:
        self.minimum, self.maximum, self.low_open, self.why = minimum, maximum, low_open, why
        self.high_open = high_open

    def __call__(self, text: str) -> float:
        import math

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        low_ok = self.minimum is None or (
            value > self.minimum if self.low_open else value >= self.minimum
        )
        high_ok = self.maximum is None or (
            value < self.maximum if self.high_open else value <= self.maximum
        )
        if not (math.isfinite(value) and low_ok and high_ok):
            lo = "" if self.minimum is None else f"{'>' if self.low_open else '>='} {self.minimum}"
            hi = "" if self.maximum is None else f"{'<' if self.high_open else '<='} {self.maximum}"
            bounds = " and ".join(b for b in (lo, hi) if b)
            why = f" ({self.why})" if self.why else ""
            raise argparse.ArgumentTypeError(
                f"must be a finite number{' ' + bounds if bounds else ''}{why}, got {text!r}"
            )
        return value

    def __repr__(self) -> str:
        return f"FloatRange({self.minimum}, {self.maximum})"


def _seed_type() -> IntRange:
    from gnnaudit._validation import MAX_SEED

    return IntRange(0, MAX_SEED, "numpy and Lightning seeds lie in [0, 2**32 - 1]")


#: argparse ``type`` of every ``--seed`` flag
SEED = _seed_type()

#: largest value of a count flag that has no tighter bound (``--top``, ``--show``,
#: ``--min-support``, ``--batch-size``): 2**31 - 1, the int32 range; no graph gnnaudit can hold
#: in memory has more nodes than that, so a larger count is a typo
MAX_COUNT = 2**31 - 1


def count_type(minimum: int = 0) -> IntRange:
    """:class:`IntRange` ``[minimum, MAX_COUNT]`` of a count flag without a tighter bound."""
    return IntRange(minimum, MAX_COUNT, "the int32 range")


def epochs_type() -> IntRange:
    """:class:`IntRange` of an epochs flag: ``[1, MAX_EPOCHS]``."""
    from gnnaudit._validation import MAX_EPOCHS

    return IntRange(1, MAX_EPOCHS, "MAX_EPOCHS: 500x the usual 200")


def k_type() -> IntRange:
    """:class:`IntRange` of a top-k flag: ``[1, MAX_K]``."""
    from gnnaudit._validation import MAX_K

    return IntRange(1, MAX_K, "MAX_K; k is also capped at the number of candidates")


def _note_spelling(
    parser: argparse.ArgumentParser, namespace: argparse.Namespace, dest: str, flag: str | None
) -> None:
    """Record which spelling of ``dest`` was given; two different ones are a usage error (the
    mutually exclusive group misses a value equal to the default, argparse compares by
    identity)."""
    seen = namespace.__dict__.setdefault("_spellings", {})
    other = seen.get(dest)
    if other is not None and other != flag:
        parser.error(f"argument {flag}: not allowed with argument {other}")
    seen[dest] = flag


class _RenamedStore(argparse._StoreAction):
    """``store`` of a flag that has deprecated spellings (:func:`add_renamed_argument`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Store ``values`` after checking no other spelling was given."""
        _note_spelling(parser, namespace, self.dest, option_string)
        super().__call__(parser, namespace, values, option_string)


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
        _note_spelling(parser, namespace, self.dest, option_string)
        from gnnaudit._aliases import REMOVAL

        warnings.warn(
            f"{option_string} is deprecated and will be removed in {REMOVAL}; use {self.new}",
            FutureWarning,
            stacklevel=2,
        )
        setattr(namespace, self.dest, values)


def add_renamed_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    new: str,
    *old: str,
    required: bool = False,
    **kwargs: Any,
) -> argparse.Action:
    """Add flag ``new`` (``kwargs`` as for ``add_argument``) and its deprecated spellings
    ``old``, hidden from ``--help``, storing into the same destination with a warning.

    The spellings are mutually exclusive (giving two is a usage error); ``required``: one of
    them must be given (the usage error names only ``new``).
    """
    group = parser.add_mutually_exclusive_group(required=required)
    action = group.add_argument(new, action=_RenamedStore, **kwargs)
    extra = {"type": kwargs["type"]} if "type" in kwargs else {}
    for alias in old:
        group.add_argument(
            alias,
            dest=action.dest,
            action=DeprecatedAlias,
            new=new,
            metavar=action.metavar,
            help=argparse.SUPPRESS,
            **extra,
        )
    return action


def threads_argument(text: str) -> int:
    """argparse ``type`` of ``--threads``: an integer in [1, 4096] (else a usage error naming
    it)."""
    from gnnaudit._threads import check_threads
    from gnnaudit.errors import InvalidInputError

    try:
        return check_threads(int(text))
    except (ValueError, InvalidInputError) as exc:
        raise argparse.ArgumentTypeError(
            f"must be an integer in [1, 4096] (the number of CPU threads), got {text!r}"
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
    planned: Sequence[str] = (),
) -> None:
    """Add ``--out`` (``kind`` ``"file"`` or ``"folder"``) and any deprecated aliases of it.

    ``kind`` and ``planned`` (the file names a folder command writes) are kept on the parsed
    namespace (``out_kind``, ``out_planned``), so :func:`gnnaudit.cli.guards.check_out_early`
    checks ``--out`` before the command imports anything heavy.
    """
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    if kind == "file":
        detail = (
            "a file path; its folder must exist; an existing file needs --force and is replaced "
            "only when gnnaudit wrote it"
        )
    else:
        detail = "a folder, created if missing; a folder holding files needs --force"
    parser.add_argument(
        "--out",
        required=required,
        default=None,
        metavar="FILE" if kind == "file" else "FOLDER",
        help=f"{what} ({detail})",
    )
    parser.set_defaults(out_kind=kind, out_planned=tuple(planned))
    for alias in deprecated:
        parser.add_argument(
            alias, dest="out", action=DeprecatedAlias, new="--out", help=argparse.SUPPRESS
        )


def add_force_argument(parser: argparse.ArgumentParser, *, kind: str) -> None:
    """Add ``--force``: replace gnnaudit's own earlier output (a file, or its files in a
    folder); a file gnnaudit did not write is never replaced."""
    text = (
        "replace an existing --out file that gnnaudit wrote (listed in the "
        ".gnnaudit-manifest.json of its folder); any other file is never replaced, nor an input"
        if kind == "file"
        else "write into an existing --out folder, replacing only the files gnnaudit wrote "
        "there (listed in its .gnnaudit-manifest.json); nothing else is touched"
    )
    parser.add_argument("--force", action="store_true", help=text)


def add_progress_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
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
