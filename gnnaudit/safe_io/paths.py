"""Checks of input and output paths, and the one-line wording of OS errors.

Output checks run *before* a long computation, so a bad ``--out`` fails at once.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from gnnaudit.errors import InvalidInputError

__all__ = [
    "PathLike",
    "check_input_file",
    "check_input_dir",
    "check_output_file",
    "check_output_dir",
    "create_sibling_file",
    "one_line",
    "os_reason",
]

PathLike = str | os.PathLike


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 300 characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def os_reason(exc: OSError) -> str:
    """``'Permission denied'`` rather than ``[Errno 13] Permission denied: '/x'``."""
    return exc.strerror or one_line(exc)


def check_input_file(name: str, path: PathLike) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` if it names an existing regular file.

    Raises :class:`InvalidInputError` naming ``name`` when the path is missing, is a folder or
    is not a regular file (a device, a fifo).
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a file path, got {type(path).__name__}")
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError as exc:
        raise InvalidInputError(f"{name}: file {str(p)!r} does not exist") from exc
    except OSError as exc:  # NotADirectoryError (a parent is a file), permission, loops
        raise InvalidInputError(f"{name}: cannot access {str(p)!r}: {os_reason(exc)}") from exc
    if p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a folder, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInputError(f"{name}: {str(p)!r} is not a regular file")
    return p


def check_input_dir(name: str, path: PathLike) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` if it names an existing folder."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a folder path, got {type(path).__name__}")
    p = Path(path)
    if not p.exists():
        raise InvalidInputError(f"{name}: folder {str(p)!r} does not exist")
    if not p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a file, expected a folder")
    return p


def _existing_ancestor(p: Path) -> Path:
    """The nearest ancestor of ``p`` that exists (as anything)."""
    for parent in p.absolute().parents:
        if os.path.lexists(parent):
            return parent
    return Path(p.absolute().anchor)


def _check_parent(name: str, target: Path, *, must_exist: bool) -> None:
    """The folder that will hold ``target`` exists (or can be created) and is writable."""
    parent = target.absolute().parent
    if parent.is_dir():
        probe_dir = parent
    else:
        ancestor = _existing_ancestor(target)
        if not ancestor.is_dir():
            raise InvalidInputError(
                f"{name}: {str(target)!r} lies under {str(ancestor)!r}, which is a file, not a "
                "folder"
            )
        if must_exist:
            raise InvalidInputError(
                f"{name}: the folder {str(parent)!r} of {str(target)!r} does not exist"
            )
        probe_dir = ancestor
    # a real write test: permission bits alone mislead (root, read-only mounts, ACLs)
    try:
        probe = create_sibling_file(probe_dir / "probe")
    except OSError as exc:
        raise InvalidInputError(
            f"{name}: cannot write in folder {str(probe_dir)!r}: {os_reason(exc)}"
        ) from exc
    probe.unlink(missing_ok=True)


def check_output_file(name: str, path: PathLike, *, force: bool = False) -> Path:
    """Check, before any work is done, that ``path`` can be written as a file.

    Refused with :class:`InvalidInputError` naming ``name``: a path that is a folder or another
    non-regular file (a device, a fifo), an existing file when ``force`` is false, a path whose
    folder does not exist or lies under a regular file, a folder we cannot write in.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a file path, got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a folder, expected a file path")
    if os.path.lexists(p):
        if not p.is_file():
            raise InvalidInputError(f"{name}: {str(p)!r} exists and is not a regular file")
        if not force:
            raise InvalidInputError(
                f"{name}: {str(p)!r} already exists; pass force=True (--force) to overwrite it"
            )
    _check_parent(name, p, must_exist=True)
    return p


def check_output_dir(name: str, path: PathLike, *, force: bool = False) -> Path:
    """Check, before any work is done, that ``path`` can become an output folder.

    A missing folder (and missing parents) is fine: :func:`atomic_output_dir` creates them. An
    existing empty folder is fine. Refused with :class:`InvalidInputError` naming ``name``: a
    path that is a file, a path under a regular file, an existing folder holding files when
    ``force`` is false, a place we cannot write in, and - because an output folder is replaced
    as a whole - the current folder, any of its parents and the home folder, force or not.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a folder path, got {type(path).__name__}")
    p = Path(path)
    if os.path.lexists(p) and not p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a file, expected a folder")
    if p.is_dir():
        resolved = p.resolve()
        cwd = Path.cwd().resolve()
        if resolved in {cwd, *cwd.parents, Path.home().resolve()}:
            raise InvalidInputError(
                f"{name}: {str(p)!r} is the current folder, one of its parents or the home "
                "folder; choose a dedicated output folder (it is replaced as a whole)"
            )
    if p.is_dir() and not force:
        held = sorted(os.listdir(p))
        if held:
            shown = ", ".join(held[:5]) + (" ..." if len(held) > 5 else "")
            raise InvalidInputError(
                f"{name}: folder {str(p)!r} already holds files ({shown}); pass force=True "
                "(--force) to replace it"
            )
    _check_parent(name, p, must_exist=False)
    return p


def create_sibling_file(target: Path) -> Path:
    """Create an empty private file next to ``target`` (mode 0666 & ~umask, like ``open``)."""
    for _ in range(100):
        tmp = target.parent / f".tmp-{secrets.token_hex(6)}-{target.name}"
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise OSError(errno.EEXIST, "could not create a unique temporary file", str(target.parent))
