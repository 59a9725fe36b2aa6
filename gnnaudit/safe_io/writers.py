"""Atomic writers: a file or a folder appears whole, or not at all.

Files go through a temporary sibling moved into place with ``os.replace`` (or a no-clobber hard
link when ``force=False``); folders are filled privately and renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io.paths import (
    PathLike,
    check_output_dir,
    check_output_file,
    create_sibling_file,
    os_reason,
)

__all__ = ["atomic_file", "atomic_write_bytes", "atomic_write_text", "atomic_output_dir"]


def _commit_file(tmp: Path, target: Path, name: str, force: bool) -> None:
    try:
        if force:
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)  # atomic no-clobber: fails if the target appeared meanwhile
        except FileExistsError as exc:
            raise InvalidInputError(
                f"{name}: {str(target)!r} was created by someone else while this run was "
                "writing; pass force=True (--force) to overwrite it"
            ) from exc
        except OSError as exc:  # file system without hard links
            if os.path.lexists(target):
                raise InvalidInputError(
                    f"{name}: {str(target)!r} already exists; pass force=True (--force) to "
                    "overwrite it"
                ) from exc
            os.replace(tmp, target)
            return
        tmp.unlink()
    except IsADirectoryError as exc:
        raise InvalidInputError(f"{name}: {str(target)!r} is a folder, expected a file") from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot write {str(target)!r}: {os_reason(exc)}") from exc


@contextlib.contextmanager
def atomic_file(path: PathLike, *, name: str = "out", force: bool = False) -> Iterator[Path]:
    """Context manager: write a file through a temporary sibling, then move it into place.

    The destination is checked first (:func:`check_output_file`). The block receives the
    temporary path (it ends with the destination's name, so suffix-based writers such as
    ``DataFrame.to_csv`` or ``torch.save`` behave as for the destination) and writes it. When
    the block succeeds the file is moved onto ``path`` in one step (``os.replace``; with
    ``force=False`` a hard link, which fails rather than clobber a file that appeared
    meanwhile). When the block raises, the temporary file is removed and ``path`` is untouched.

    Example::

        with atomic_file(args.output, name="--output", force=args.force) as tmp:
            frame.to_csv(tmp, index=False)
    """
    target = check_output_file(name, path, force=force)
    try:
        tmp = create_sibling_file(target)
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot write {str(target)!r}: {os_reason(exc)}") from exc
    try:
        yield tmp
        _commit_file(tmp, target, name, force)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def atomic_write_bytes(
    path: PathLike, data: bytes, *, name: str = "out", force: bool = False
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`); return the path."""
    with atomic_file(path, name=name, force=force) as tmp:
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            raise InvalidInputError(
                f"{name}: cannot write {str(path)!r}: {os_reason(exc)}"
            ) from exc
    return Path(path)


def atomic_write_text(
    path: PathLike, text: str, *, name: str = "out", force: bool = False, encoding: str = "utf-8"
) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_file`); return the path."""
    return atomic_write_bytes(path, text.encode(encoding), name=name, force=force)


def _commit_dir(tmp: Path, target: Path, name: str, force: bool) -> None:
    for _ in range(5):
        try:
            os.rename(tmp, target)  # succeeds onto a missing or empty folder
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                if os.path.lexists(target) and not target.is_dir():
                    raise InvalidInputError(
                        f"{name}: {str(target)!r} became a file while this run was writing; "
                        f"its results are in {str(tmp)!r}"
                    ) from exc
                raise InvalidInputError(
                    f"{name}: cannot move the results into {str(target)!r}: {os_reason(exc)}; "
                    f"they are in {str(tmp)!r}"
                ) from exc
        if not force:
            raise InvalidInputError(
                f"{name}: folder {str(target)!r} was filled by another run while this one was "
                f"working; this run's results are in {str(tmp)!r}"
            )
        old = target.parent / f".old-{secrets.token_hex(6)}-{target.name}"
        try:
            os.rename(target, old)
        except FileNotFoundError:
            continue  # someone removed it meanwhile: retry the plain rename
        except OSError as exc:
            raise InvalidInputError(
                f"{name}: cannot replace {str(target)!r}: {os_reason(exc)}; results are in "
                f"{str(tmp)!r}"
            ) from exc
        try:
            os.rename(tmp, target)
        except OSError:
            continue  # another run got in between: try again
        finally:
            if old.is_symlink():
                old.unlink()
            else:
                shutil.rmtree(old, ignore_errors=True)
        return
    raise InvalidInputError(
        f"{name}: folder {str(target)!r} keeps being replaced by other runs; this run's results "
        f"are in {str(tmp)!r}"
    )


@contextlib.contextmanager
def atomic_output_dir(path: PathLike, force: bool = False, *, name: str = "out") -> Iterator[Path]:
    """Context manager: fill a private temporary folder, then move it onto ``path``.

    On entry the destination is checked (:func:`check_output_dir`: a missing or empty folder is
    fine, a file is refused, a folder holding files is refused unless ``force``), missing parent
    folders are created and a fresh folder ``.tmp-<random>-<name>`` is made next to ``path``.
    The block writes its outputs into that folder. When the block succeeds the folder is renamed
    onto ``path`` in one step; with ``force=True`` an existing ``path`` is first moved aside and
    then deleted, so **the whole previous folder is replaced** (files gnnaudit did not write
    included). When the block raises, the temporary folder is deleted and ``path`` is untouched.

    Concurrent runs into the same ``path`` never mix: each writes its own folder and the last
    rename wins whole (with ``force``), or the later run stops with an error that says where its
    results are (without ``force``).

    Example::

        with atomic_output_dir(args.out, force=args.force, name="--out") as tmp:
            report.save(tmp)
    """
    target = check_output_dir(name, path, force=force)
    try:
        target.absolute().parent.mkdir(parents=True, exist_ok=True)
        tmp = None
        for _ in range(100):
            candidate = target.absolute().parent / f".tmp-{secrets.token_hex(6)}-{target.name}"
            try:
                os.mkdir(candidate, 0o777)
            except FileExistsError:
                continue
            tmp = candidate
            break
        if tmp is None:
            raise OSError(errno.EEXIST, "could not create a unique temporary folder")
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot create {str(target)!r}: {os_reason(exc)}") from exc
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _commit_dir(tmp, target, name, force)
