"""Checks every command gets before it starts, and the signals that end it cleanly.

* :func:`check_inputs_exist`: every input path named on the command line exists (checked
  before torch is imported, so a typo fails at once);
* :func:`check_input_files`: a ``--weights`` / ``--checkpoint`` / ``--graph`` torch file and
  an ``.npz`` graph or scaler that the safe loaders would refuse for what it is (not a
  ``torch.save`` zip, a pickle naming code, an object array ...) is refused from its archive
  and headers alone, before torch is imported;
* :func:`check_out_apart`: ``--out`` must not be, hold or lie inside any input path (graph,
  weights, checkpoints, the ``--model`` module file, data tables, constraint files, the data
  root), so no ``--force`` can ever overwrite or remove an input.
* :func:`check_out_early`: ``--out`` can be written (a file or a folder as the command's
  ``--help`` says; an existing one needs ``--force``, which replaces only gnnaudit's own
  files), checked before any heavy import, so a taken ``--out`` fails at once.
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
    "check_input_files",
    "check_out_apart",
    "check_out_early",
]

#: ``argparse`` destinations that name input files or folders, with the flag they come from
INPUT_ARGUMENTS: dict[str, str] = {
    "graph": "--graph",
    "nodes": "--nodes",
    "edges": "--edges",
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
            raise InvalidInputError(f"{what}: {value!r} does not exist{_near_names(value)}")


def check_input_files(args: argparse.Namespace) -> None:
    """Refuse, before torch is imported, a torch or ``.npz`` input file the loaders would
    refuse for what it is (:func:`gnnaudit.safe_io.precheck_torch_file`,
    :func:`gnnaudit.safe_io.precheck_npz_file`), naming its flag."""
    from gnnaudit.safe_io import precheck_npz_file, precheck_torch_file
    from gnnaudit.safe_io.torch_files import PYG_DATA_PREFIX

    def given(dest: str) -> str | None:
        value = getattr(args, dest, None)
        return value if isinstance(value, str) and value and os.path.lexists(value) else None

    for dest in ("weights", "checkpoint"):
        path = given(dest)
        if path is not None:
            precheck_torch_file(INPUT_ARGUMENTS[dest], path)
    for dest in ("graph", "standardize"):
        path = given(dest)
        if path is None or os.path.isdir(path):
            continue
        suffix = os.path.splitext(path)[1].lower()
        if suffix == ".npz":
            precheck_npz_file(INPUT_ARGUMENTS[dest], path)
        elif suffix == ".pt" and dest == "graph":
            precheck_torch_file("--graph", path, allowed_prefixes=(PYG_DATA_PREFIX,))


def _near_names(path: str) -> str:
    """`` (did you mean 'people.csv'?)`` naming the entries of the folder of ``path`` whose
    names are close to its name, or ``""``."""
    import difflib

    folder, name = os.path.split(path)
    try:
        entries = [e for e in os.listdir(folder or ".") if not e.startswith(".")]
    except OSError:
        return ""
    close = difflib.get_close_matches(name, entries, n=3, cutoff=0.6)
    if not close:
        return ""
    shown = " or ".join(repr(os.path.join(folder, c)) for c in close)
    return f" (did you mean {shown}?)"


def check_out_apart(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that is, holds or lies inside one of the command's inputs."""
    out = getattr(args, "out", None)
    if not isinstance(out, str) or not out:
        return
    from gnnaudit.safe_io import check_outputs_apart

    own, containers = data_root_paths(args)
    check_outputs_apart("--out", out, {**input_paths(args), **own}, containers=containers)


def check_out_early(args: argparse.Namespace) -> None:
    """Check ``--out`` as the command will write it (``out_kind`` / ``out_planned`` that
    :func:`gnnaudit.cli.options.add_out_argument` set), before any heavy import."""
    out = getattr(args, "out", None)
    kind = getattr(args, "out_kind", None)
    if not isinstance(out, str) or not out or kind is None:
        return
    from gnnaudit.safe_io import check_output_dir, check_output_file

    force = bool(getattr(args, "force", False))
    if kind == "file":
        check_output_file("--out", out, force=force, owned_only=True)
    else:
        planned = tuple(getattr(args, "out_planned", ()) or ())
        check_output_dir("--out", out, force=force, planned=planned)


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
