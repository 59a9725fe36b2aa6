"""Checks every command gets before it starts, and the signals that end it cleanly.

* :func:`check_inputs_exist`: every input path named on the command line exists (checked
  before torch is imported, so a typo fails at once);
* :func:`check_out_apart`: ``--out`` must not be, hold or lie inside any input path (graph,
  weights, checkpoints, the ``--model`` module file, data tables, constraint files, the data
  root), so no ``--force`` can ever overwrite or remove an input.
* :func:`terminating_signals_raise`: ``SIGTERM`` and ``SIGHUP`` raise :class:`Terminated`
  inside the command, so every ``finally`` runs and the private temporary outputs are removed,
  as they are on ``Ctrl-C``.

Both are applied by :func:`gnnaudit.cli.failures.run_command` to every command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "INPUT_ARGUMENTS",
    "Terminated",
    "input_paths",
    "check_inputs_exist",
    "check_out_apart",
]

#: ``argparse`` destinations that name input files or folders, with the flag they come from
INPUT_ARGUMENTS: dict[str, str] = {
    "graph": "--graph",
    "weights": "--weights",
    "checkpoint": "--checkpoint",
    "model": "--model",
    "data": "data",
    "csv": "csv",
    "must_link": "--must-link",
    "standardize": "--standardize",
    "cannot_link": "--cannot-link",
}


class Terminated(BaseException):
    """Raised inside a command when the process receives ``SIGTERM`` or ``SIGHUP``.

    A :class:`BaseException` (like ``KeyboardInterrupt``), so only cleanup code sees it.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


def _model_file(value: str) -> str | None:
    """The ``.py`` file of ``--model path/to/file.py:NAME`` (``None`` for other forms)."""
    if ":" not in value:
        return None
    module = value.rsplit(":", 1)[0]
    return module if module.endswith(".py") else None


def input_paths(args: argparse.Namespace) -> dict[str, Any]:
    """``{flag: path}`` of the command's input files and folders that exist."""
    found: dict[str, Any] = {}
    for dest, flag in INPUT_ARGUMENTS.items():
        value = getattr(args, dest, None)
        if dest == "model" and isinstance(value, str):
            value = _model_file(value)
        if isinstance(value, str) and value and os.path.lexists(value):
            found[flag] = value
    return found


def data_root_paths(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--root`` of a named ``--dataset``: the dataset's own folder ``<root>/<dataset>`` is an
    input; the root itself only holds inputs (an output may lie inside it)."""
    root = getattr(args, "root", None)
    if not isinstance(root, str) or not root:
        return {}, {}
    dataset = getattr(args, "dataset", None)
    own = {}
    if isinstance(dataset, str) and dataset and os.path.isdir(os.path.join(root, dataset)):
        own["--root/--dataset"] = os.path.join(root, dataset)
    return own, {"--root": root}


def check_inputs_exist(args: argparse.Namespace) -> None:
    """Refuse, before any heavy import, an input file or folder that does not exist (the
    ``--model`` module file included), naming the flag: an error in well under a second instead
    of after torch, PyG and Lightning have loaded."""
    from gnnaudit.errors import InvalidInputError

    for dest, flag in INPUT_ARGUMENTS.items():
        value = getattr(args, dest, None)
        if dest == "model" and isinstance(value, str):
            value = _model_file(value)
        if isinstance(value, str) and value and not os.path.lexists(value):
            what = "--model file" if dest == "model" else flag
            raise InvalidInputError(f"{what}: {value!r} does not exist")


def check_out_apart(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that is, holds or lies inside one of the command's inputs."""
    out = getattr(args, "out", None)
    if not isinstance(out, str) or not out:
        return
    from gnnaudit.safe_io import check_outputs_apart

    own, containers = data_root_paths(args)
    check_outputs_apart("--out", out, {**input_paths(args), **own}, containers=containers)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminating_signals_raise() -> Iterator[None]:
    """Within the block, ``SIGTERM`` / ``SIGHUP`` raise :class:`Terminated`; the previous
    handlers come back afterwards. Outside the main thread (where handlers cannot be set) the
    block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {}
    for signum in wanted:
        with contextlib.suppress(OSError, ValueError):
            previous[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, handler)
