"""The one error path of every ``gnnaudit`` command.

:func:`run_command` runs a parsed command and turns every failure into an exit code and one
line on stderr:

* a :class:`~gnnaudit.errors.GnnAuditError` (bad input, infeasible request, a malformed
  model output) -> exit 2, its parameters named by the command's flags
  (:mod:`gnnaudit.cli.flag_names`);
* an exception raised by the user's model (marked by
  :func:`~gnnaudit.errors.note_model_error` with the audit stage) -> exit 2 and the line
  ``your model raised RuntimeError: boom during <stage>``: not a gnnaudit bug;
* a file-boundary failure that escaped the command's own checks - an ``OSError`` and its
  relatives, ``UnicodeError``, pandas' parser errors, ``csv.Error``, a broken zip or a
  truncated file - -> exit 2, naming the argument and the file when they can be told;
* ``KeyboardInterrupt`` -> exit 130; ``SIGTERM`` / ``SIGHUP`` -> exit 128 + the signal number,
  after the command's cleanup ran (:mod:`gnnaudit.cli.guards`);
* anything else is a bug: exit 1 with one line asking to rerun with ``--debug``.

With ``--debug`` the traceback is printed as well. Warnings raised while a command runs are
printed as one line each.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import stat
import sys
import traceback
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any, TextIO

from gnnaudit.cli.flag_names import flag_message
from gnnaudit.cli.guards import (
    Terminated,
    check_input_files,
    check_inputs_exist,
    check_out_apart,
    check_out_early,
    terminating_signals_raise,
)
from gnnaudit.errors import GnnAuditError, model_error_stage

__all__ = ["run_command", "file_error_message", "one_line_warnings"]


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _file_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [
        OSError,
        UnicodeError,
        csv.Error,
        zipfile.BadZipFile,
        EOFError,
    ]
    pandas = sys.modules.get("pandas")  # its errors cannot occur unless it was imported
    if pandas is not None:
        types += [pandas.errors.ParserError, pandas.errors.EmptyDataError]
    return tuple(types)


#: namespace entries that are not arguments (the command line as typed repeats every path)
_NOT_ARGUMENTS = ("command_line",)


def _path_arguments(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(flag, value)`` for every string argument that names an existing path."""
    found = []
    for dest, value in vars(args).items():
        if dest in _NOT_ARGUMENTS:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, str) and item and os.path.lexists(item):
                found.append((_flag(dest), item))
    return found


def _flag(dest: str) -> str:
    """``out`` -> ``--out``; positional destinations (``data``, ``csv``) stay as they are."""
    return dest if dest in ("data", "csv") else "--" + dest.replace("_", "-")


def _argument_for(args: argparse.Namespace, filename: Any) -> str | None:
    """The flag whose value is ``filename`` or a folder holding it."""
    if not isinstance(filename, str | os.PathLike):
        return None
    target = os.path.abspath(os.fspath(filename))
    best: tuple[int, str] | None = None
    for dest, value in vars(args).items():
        if dest in _NOT_ARGUMENTS:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if not isinstance(item, str) or not item:
                continue
            path = os.path.abspath(item)
            if target == path or target.startswith(path.rstrip(os.sep) + os.sep):
                if best is None or len(path) > best[0]:
                    best = (len(path), _flag(dest))
    return None if best is None else best[1]


def file_error_message(exc: BaseException, args: argparse.Namespace) -> str:
    """One line naming the argument and the file of a file-boundary failure ``exc``."""
    if isinstance(exc, OSError):
        reason = exc.strerror or _one_line(str(exc)) or type(exc).__name__
        filename = exc.filename
        if filename is not None:
            flag = _argument_for(args, filename)
            where = f"{flag}: " if flag else ""
            return f"{where}cannot access {os.fspath(filename)!r}: {reason}"
        return f"input/output error: {reason}"
    reason = f"{type(exc).__name__}: {_one_line(str(exc))}"
    candidates = _path_arguments(args)
    if len(candidates) == 1:
        flag, path = candidates[0]
        return f"{flag}: cannot read {path!r}: {reason}"
    if candidates:
        listed = ", ".join(f"{flag} {path!r}" for flag, path in candidates)
        return f"cannot read one of the input files ({listed}): {reason}"
    return f"cannot read an input file: {reason}"


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    stream = sys.stderr if file is None else file
    try:
        print(f"gnnaudit: {category.__name__}: {_one_line(str(message))}", file=stream)
    except OSError:  # stderr closed: nothing sensible left to do
        pass


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Inside the block, every warning shown is printed as one line ``gnnaudit: Category: ...``
    on stderr (no source line); the previous behaviour is restored afterwards."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        yield


def _stdout_closed() -> bool:
    """Whether standard output is a pipe (whose reader went away, as the ``BrokenPipeError``
    says); if so, point it at the null device so the interpreter's final flush cannot fail."""
    try:
        if not stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode):
            return False
    except (OSError, ValueError, AttributeError):
        return False
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return True


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.func(args)`` and map any failure to an exit code and one line on stderr."""
    command = getattr(args, "command", None) or ""
    prefix = f"gnnaudit {command}".rstrip()
    debug = bool(getattr(args, "debug", False))
    with one_line_warnings(), terminating_signals_raise():
        try:
            check_inputs_exist(args)  # before any heavy import: a typo fails at once
            check_input_files(args)  # a torch / .npz file refused from its headers, no torch
            check_out_apart(args)  # before any work: an output never goes where an input is
            check_out_early(args)  # before any heavy import: a taken --out fails at once
            return int(args.func(args) or 0)
        except GnnAuditError as exc:
            if debug:
                traceback.print_exc()
            text = flag_message(str(exc), args)  # the flag the user typed, not the parameter
            print(f"{prefix}: error: {_one_line(text, 2000)}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            if _stdout_closed():  # `gnnaudit ... | head`: the reader has all it wanted
                return 0
            raise
        except KeyboardInterrupt:
            print(f"{prefix}: interrupted", file=sys.stderr)
            return 130
        except Terminated as exc:
            print(f"{prefix}: {exc}; partial outputs removed", file=sys.stderr)
            return 128 + exc.signum
        except Exception as exc:
            if debug:
                traceback.print_exc()
            stage = model_error_stage(exc)
            if stage is not None:
                print(
                    f"{prefix}: error: your model raised {type(exc).__name__}: "
                    f"{_one_line(str(exc))} during {stage}",
                    file=sys.stderr,
                )
                return 2
            if isinstance(exc, _file_error_types()):
                print(f"{prefix}: error: {file_error_message(exc, args)}", file=sys.stderr)
                return 2
            print(
                f"{prefix}: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
                "(a bug in gnnaudit; rerun with --debug to see the traceback and report it)",
                file=sys.stderr,
            )
            return 1
