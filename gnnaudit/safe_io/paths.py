"""Checks of input and output paths, and the one-line wording of OS errors.

Output checks run *before* a long computation, so a bad ``--out`` fails at once.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io.manifest import MANIFEST_NAME, lists_file

__all__ = [
    "PathLike",
    "check_input_file",
    "check_input_dir",
    "check_output_file",
    "check_output_dir",
    "check_outputs_apart",
    "refuse_unowned_file",
    "create_sibling_file",
    "temporary_name",
    "remove_stale_temporaries",
    "one_line",
    "os_reason",
]

PathLike = str | os.PathLike[str]


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


def check_output_file(
    name: str, path: PathLike, *, force: bool = False, owned_only: bool = False
) -> Path:
    """Check, before any work is done, that ``path`` can be written as a file.

    Refused with :class:`InvalidInputError` naming ``name``: a path that is a folder or another
    non-regular file (a device, a fifo), an existing file when ``force`` is false, a path whose
    folder does not exist or lies under a regular file, a folder we cannot write in. With
    ``owned_only`` (the CLI's one-file outputs), ``force`` replaces an existing file only when
    the manifest of its folder lists it (:func:`~gnnaudit.safe_io.manifest.lists_file`): a
    file gnnaudit did not write is refused, force or not.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a file path, got {type(path).__name__}")
    p = Path(path)
    if p.is_symlink():
        raise InvalidInputError(
            f"{name}: {str(p)!r} is a symbolic link; give the path of a real file (a link is "
            "never written through)"
        )
    if p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a folder, expected a file path")
    if owned_only and p.name == MANIFEST_NAME:
        raise InvalidInputError(
            f"{name}: {MANIFEST_NAME} is the name of gnnaudit's record of the files it wrote; "
            "choose another file name"
        )
    if os.path.lexists(p):
        if not p.is_file():
            raise InvalidInputError(f"{name}: {str(p)!r} exists and is not a regular file")
        if owned_only:
            refuse_unowned_file(name, p)
        if not force:
            raise InvalidInputError(
                f"{name}: {str(p)!r} already exists; pass force=True (--force) to overwrite it"
            )
    _check_parent(name, p, must_exist=True)
    return p


def refuse_unowned_file(name: str, p: Path) -> None:
    """Refuse, naming ``name``, to replace the existing file ``p`` unless the manifest of its
    folder lists it (gnnaudit wrote it)."""
    if p.name == MANIFEST_NAME or not lists_file(p):
        raise InvalidInputError(
            f"{name}: {str(p)!r} already exists and was not written by gnnaudit (the "
            f"{MANIFEST_NAME} of its folder does not list it); --force replaces only files "
            "gnnaudit wrote. Move it away or choose another file"
        )


def check_output_dir(
    name: str, path: PathLike, *, force: bool = False, planned: tuple[str, ...] = ()
) -> Path:
    """Check, before any work is done, that ``path`` can become an output folder.

    A missing folder (and missing parents) is fine: :func:`atomic_output_dir` creates them. An
    existing empty folder is fine. Refused with :class:`InvalidInputError` naming ``name``: a
    path that is a file or a symbolic link, a path under a regular file, an existing folder
    holding files when ``force`` is false, a place we cannot write in, and the current folder,
    any of its parents and the home folder, force or not. With ``force``, each of ``planned``
    (file names the run will write) that exists there but was not written by gnnaudit is
    refused now, naming it (see :mod:`gnnaudit.safe_io.manifest`): ``force`` replaces only
    gnnaudit's own files and never deletes anything else.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a folder path, got {type(path).__name__}")
    p = Path(path)
    if p.is_symlink():
        raise InvalidInputError(
            f"{name}: {str(p)!r} is a symbolic link; give the path of a real folder (a link is "
            "never written through)"
        )
    if os.path.lexists(p) and not p.is_dir():
        raise InvalidInputError(f"{name}: {str(p)!r} is a file, expected a folder")
    if p.is_dir():
        resolved = p.resolve()
        cwd = Path.cwd().resolve()
        if resolved in {cwd, *cwd.parents, Path.home().resolve()}:
            raise InvalidInputError(
                f"{name}: {str(p)!r} is the current folder, one of its parents or the home "
                "folder; choose a dedicated output folder"
            )
        held = sorted(os.listdir(p))
        if held and not force:
            listed = [h for h in held if h != ".gnnaudit-manifest.json"] or held
            shown = ", ".join(listed[:5]) + (" ..." if len(listed) > 5 else "")
            raise InvalidInputError(
                f"{name}: folder {str(p)!r} already holds files ({shown}); pass force=True "
                "(--force) to replace the files gnnaudit wrote there (nothing else is touched)"
            )
        if held and planned:
            from gnnaudit.safe_io.manifest import raise_if_blocked

            raise_if_blocked(name, p, list(planned))
    _check_parent(name, p, must_exist=False)
    return p


def _real(path: PathLike) -> str:
    """``path`` made absolute with every link of its existing part resolved."""
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _inside(inner: str, outer: str) -> bool:
    """Whether the (real, absolute) path ``inner`` lies strictly inside ``outer``."""
    return inner != outer and inner.startswith(outer.rstrip(os.sep) + os.sep)


def check_outputs_apart(
    name: str,
    out: PathLike | None,
    inputs: Mapping[str, PathLike | None],
    *,
    containers: Mapping[str, PathLike | None] | None = None,
) -> None:
    """Refuse, before any work, an output ``out`` that is, holds or lies inside an input.

    ``inputs`` maps each input's argument name (``"--graph"``, ``"--weights"`` ...) to its
    path (``None`` and paths that do not exist are skipped). Paths are compared after
    resolving links, and an existing output file that is the same file as an input under
    another name (a hard link) is refused too. ``containers`` are folders that hold inputs
    among other things (a data root): ``out`` may lie inside one but may not be or hold it.
    Raises :class:`InvalidInputError` naming both arguments and both paths.
    """
    if out is None:
        return
    for flag, path in (containers or {}).items():
        if path is None or not os.fspath(path) or not os.path.lexists(path):
            continue
        out_real, in_real = _real(out), _real(path)
        if out_real == in_real or _inside(in_real, out_real):
            relation = "is" if out_real == in_real else "holds"
            raise InvalidInputError(
                f"{name} {str(out)!r} {relation} the input folder {flag} {str(path)!r}; "
                f"outputs are never written over inputs: choose another {name}"
            )
    out_real = _real(out)
    for flag, path in inputs.items():
        if path is None or not isinstance(path, str | os.PathLike) or not os.fspath(path):
            continue
        if not os.path.lexists(path):
            continue
        meets = _relation(out, out_real, path)
        if meets is not None:
            raise InvalidInputError(
                f"{name} {str(out)!r} {meets} the input {flag} {str(path)!r}; outputs are "
                f"never written where inputs are: choose another {name}"
            )


def _relation(out: PathLike, out_real: str, path: PathLike) -> str | None:
    """How the output ``out`` (real path ``out_real``) meets the existing input ``path``: it
    ``"is"``, ``"holds"``, ``"lies inside"`` or ``"is (as a hard link)"`` it; ``None``: apart."""
    in_real = _real(path)
    if out_real == in_real:
        return "is"
    if _inside(in_real, out_real):
        return "holds"
    if _inside(out_real, in_real):
        return "lies inside"
    try:
        same = os.path.exists(out) and os.path.samefile(out, path)
    except OSError:
        same = False
    return "is (as a hard link)" if same else None


#: a short tag of this machine in temporary names, so a cleanup never judges another
#: machine's process (shared network folders)
_HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_TEMP_RE = re.compile(r"^\.tmp-([0-9a-f]{8})-(\d+)-[0-9a-f]{12}-(.+)$")


def temporary_name(target_name: str) -> str:
    """A fresh name ``.tmp-<host>-<pid>-<random>-<target_name>`` for a temporary sibling."""
    return f".tmp-{_HOST_TAG}-{os.getpid()}-{secrets.token_hex(6)}-{target_name}"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists (another user's) or cannot tell: keep its files
    return True


def remove_stale_temporaries(target: Path) -> list[str]:
    """Remove the temporary siblings of ``target`` left by gnnaudit runs of this machine that
    died without cleaning up (``kill -9``, a power cut); return their names.

    Only entries named by :func:`temporary_name` for ``target``'s own name, made on this
    machine by a process that no longer exists, are removed; anything else is left alone.
    """
    parent = target.absolute().parent
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_RE.match(entry.name)
        if match is None or match.group(1) != _HOST_TAG or match.group(3) != target.name:
            continue
        if _process_alive(int(match.group(2))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.name)
        except OSError:
            continue
    return removed


def create_sibling_file(target: Path) -> Path:
    """Create an empty private file next to ``target`` (mode 0666 & ~umask, like ``open``)."""
    for _ in range(100):
        tmp = target.parent / temporary_name(target.name)
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise OSError(errno.EEXIST, "could not create a unique temporary file", str(target.parent))
