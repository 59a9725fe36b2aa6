"""Atomic writers: a file or a folder appears whole, or not at all.

Files go through a temporary sibling moved into place with ``os.replace`` (or a no-clobber hard
link when ``force=False``); folders are filled privately and renamed into place, and ``force``
replaces only the files gnnaudit wrote there (:mod:`gnnaudit.safe_io.manifest`). Temporaries
are removed on every failure path; those of runs that were killed outright are removed by the
next run writing to the same place.
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
from gnnaudit.safe_io.manifest import (
    MANIFEST_NAME,
    ForcedCommit,
    foreign_manifest,
    manifest_text,
    plan_forced_commit,
    read_manifest,
    written_files,
)
from gnnaudit.safe_io.paths import (
    PathLike,
    check_output_dir,
    check_output_file,
    create_sibling_file,
    os_reason,
    refuse_unowned_file,
    remove_stale_temporaries,
    temporary_name,
)

__all__ = ["atomic_file", "atomic_write_bytes", "atomic_write_text", "atomic_output_dir"]


def _commit_file(tmp: Path, target: Path, name: str, force: bool, owned_only: bool) -> None:
    try:
        if force:
            if owned_only and os.path.lexists(target):
                refuse_unowned_file(name, target)  # again: a file may have appeared meanwhile
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


def record_file(target: Path, producer: str) -> bool:
    """Add the file ``target`` to the manifest of its folder as ``producer``'s (the manifest
    is replaced atomically; entries whose files are gone are dropped). A manifest entry that
    gnnaudit cannot read is left alone, and so is any failure to write: the file then simply
    counts as not gnnaudit's (the safe reading). Returns whether it was recorded."""
    folder = target.absolute().parent
    if foreign_manifest(folder):
        return False
    files = {
        rel: made_by for rel, made_by in read_manifest(folder).items() if (folder / rel).is_file()
    }
    files[target.name] = producer
    manifest = folder / MANIFEST_NAME
    try:
        tmp = create_sibling_file(manifest)
    except OSError:
        return False
    try:
        tmp.write_text(manifest_text(files), encoding="utf-8")
        os.replace(tmp, manifest)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def atomic_file(
    path: PathLike, *, name: str = "out", force: bool = False, producer: str | None = None
) -> Iterator[Path]:
    """Context manager: write a file through a temporary sibling, then move it into place.

    The destination is checked first (:func:`check_output_file`). The block receives the
    temporary path (it ends with the destination's name, so suffix-based writers such as
    ``DataFrame.to_csv`` or ``torch.save`` behave as for the destination) and writes it. When
    the block succeeds the file is moved onto ``path`` in one step (``os.replace``; with
    ``force=False`` a hard link, which fails rather than clobber a file that appeared
    meanwhile). When the block raises, the temporary file is removed and ``path`` is untouched.

    With ``producer`` (the CLI's ``--out FILE``) the written file is added to the manifest of
    its folder (:mod:`gnnaudit.safe_io.manifest`), and ``force`` replaces an existing file only
    when that manifest lists it: a file gnnaudit did not write is refused, force or not.

    Example::

        with atomic_file(args.output, name="--output", force=args.force) as tmp:
            frame.to_csv(tmp, index=False)
    """
    owned_only = producer is not None
    target = check_output_file(name, path, force=force, owned_only=owned_only)
    remove_stale_temporaries(target)
    try:
        tmp = create_sibling_file(target)
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot write {str(target)!r}: {os_reason(exc)}") from exc
    try:
        yield tmp
        _commit_file(tmp, target, name, force, owned_only)
        if producer is not None:
            record_file(target, producer)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def atomic_write_bytes(
    path: PathLike,
    data: bytes,
    *,
    name: str = "out",
    force: bool = False,
    producer: str | None = None,
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`, ``producer`` too);
    return the path."""
    with atomic_file(path, name=name, force=force, producer=producer) as tmp:
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            raise InvalidInputError(
                f"{name}: cannot write {str(path)!r}: {os_reason(exc)}"
            ) from exc
    return Path(path)


def atomic_write_text(
    path: PathLike,
    text: str,
    *,
    name: str = "out",
    force: bool = False,
    encoding: str = "utf-8",
    producer: str | None = None,
) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_file`, ``producer`` too);
    return the path."""
    data = text.encode(encoding)
    return atomic_write_bytes(path, data, name=name, force=force, producer=producer)


def _make_temp_dir(target: Path, name: str) -> Path:
    """A fresh private folder next to ``target`` (see :func:`temporary_name`)."""
    try:
        target.absolute().parent.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            candidate = target.absolute().parent / temporary_name(target.name)
            try:
                os.mkdir(candidate, 0o777)
            except FileExistsError:
                continue
            return candidate
        raise OSError(errno.EEXIST, "could not create a unique temporary folder")
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot create {str(target)!r}: {os_reason(exc)}") from exc


def _keep_results(tmp: Path, target: Path) -> Path:
    """Give the finished results of a run that cannot move them into ``target`` a visible
    name beside it (``<target>.run-<random>``) and return it."""
    for _ in range(100):
        kept = target.absolute().parent / f"{target.name}.run-{secrets.token_hex(4)}"
        try:
            os.rename(tmp, kept)
        except OSError:
            continue
        return kept
    return tmp


def _swap_folder(tmp: Path, target: Path, name: str) -> bool:
    """Replace the folder ``target`` by ``tmp`` (old one moved aside, then deleted); False when
    another run got in between and the caller should try again."""
    old = target.parent / f".old-{secrets.token_hex(6)}-{target.name}"
    try:
        os.rename(target, old)
    except FileNotFoundError:
        return False  # someone removed it meanwhile: retry the plain rename
    except OSError as exc:
        raise InvalidInputError(
            f"{name}: cannot replace {str(target)!r}: {os_reason(exc)}"
        ) from exc
    try:
        os.rename(tmp, target)
    except OSError:
        if not os.path.lexists(target):
            with contextlib.suppress(OSError):
                os.rename(old, target)  # put the earlier results back
        return False
    finally:
        if os.path.lexists(old):
            shutil.rmtree(old, ignore_errors=True)
    return True


def _merge_into(tmp: Path, target: Path, plan: ForcedCommit) -> None:
    """Move the new files one by one onto ``target``, remove the same producer's stale files
    and write the manifest last; everything else in ``target`` stays as it was."""
    for rel in plan.stale:
        with contextlib.suppress(FileNotFoundError):
            (target / rel).unlink()
    for rel in plan.new:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, target / rel)
    (tmp / MANIFEST_NAME).write_text(manifest_text(plan.manifest), encoding="utf-8")
    os.replace(tmp / MANIFEST_NAME, target / MANIFEST_NAME)
    shutil.rmtree(tmp, ignore_errors=True)


def _commit_dir(tmp: Path, target: Path, name: str, force: bool, producer: str) -> None:
    files = written_files(tmp)
    (tmp / MANIFEST_NAME).write_text(
        manifest_text(dict.fromkeys(files, producer)), encoding="utf-8"
    )
    for _ in range(5):
        if _rename_onto(tmp, target, name):
            return
        if not force:
            kept = _keep_results(tmp, target)
            raise InvalidInputError(
                f"{name}: folder {str(target)!r} was filled by another run while this one was "
                f"working; this run's results are in {str(kept)!r}"
            )
        if target.is_symlink():
            raise InvalidInputError(
                f"{name}: {str(target)!r} became a symbolic link while this run was writing"
            )
        if _forced_commit(tmp, target, name, files, producer):
            return
    raise InvalidInputError(
        f"{name}: folder {str(target)!r} keeps being replaced by other runs; try again"
    )


def _rename_onto(tmp: Path, target: Path, name: str) -> bool:
    """Move ``tmp`` onto ``target`` in one rename: True when done, False when ``target`` is a
    folder holding files; any other failure raises naming ``name``."""
    try:
        os.rename(tmp, target)  # succeeds onto a missing or empty folder
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        if os.path.lexists(target) and not target.is_dir():
            raise InvalidInputError(
                f"{name}: {str(target)!r} became a file while this run was writing"
            ) from exc
        raise InvalidInputError(
            f"{name}: cannot move the results into {str(target)!r}: {os_reason(exc)}"
        ) from exc


def _forced_commit(tmp: Path, target: Path, name: str, files: list[str], producer: str) -> bool:
    """One try of a forced commit onto the folder ``target`` holding files (file by file, or
    by swapping the whole folder): True when done, False when another run changed the folder
    meanwhile (look again)."""
    try:
        plan = plan_forced_commit(name, target, files, producer)
    except FileNotFoundError:
        return False  # another run swapped the folder meanwhile
    if not plan.whole_folder:
        try:
            _merge_into(tmp, target, plan)
        except FileNotFoundError:
            if not target.is_dir():
                return False  # the folder went away meanwhile: try the plain rename again
            raise
        except OSError as exc:
            raise InvalidInputError(
                f"{name}: cannot write the results into {str(target)!r}: {os_reason(exc)}"
            ) from exc
        return True
    (tmp / MANIFEST_NAME).write_text(manifest_text(plan.manifest), encoding="utf-8")
    return _swap_folder(tmp, target, name)


@contextlib.contextmanager
def atomic_output_dir(
    path: PathLike,
    force: bool = False,
    *,
    name: str = "out",
    producer: str = "output",
    planned: tuple[str, ...] = (),
) -> Iterator[Path]:
    """Context manager: fill a private temporary folder, then move it onto ``path``.

    On entry the destination is checked (:func:`check_output_dir`: a missing or empty folder is
    fine; a file or a link is refused; a folder holding files is refused unless ``force``;
    with ``force``, any of the ``planned`` file names that exists there and was not written by
    gnnaudit is refused now), temporaries that dead gnnaudit runs left beside it are removed,
    missing parent folders are created and a fresh folder ``.tmp-<host>-<pid>-<random>-<name>``
    is made next to ``path``. The block writes its outputs into that folder.

    When the block succeeds, the folder's manifest (:mod:`gnnaudit.safe_io.manifest`) records
    the files as ``producer``'s and the results move onto ``path``: in one rename onto a
    missing or empty folder; with ``force`` onto a folder holding only this producer's earlier
    files, by swapping the whole folder; otherwise file by file, **replacing only files
    gnnaudit wrote** (earlier files of the same producer that this run did not write again are
    removed; the user's own files are never touched, and one in the way of a new file stops the
    commit with an error naming it).

    When the block raises - any exception, ``KeyboardInterrupt`` and the CLI's termination
    signals included - the temporary folder is deleted and ``path`` is untouched. A run that
    finishes second without ``force`` keeps its results in a visible sibling folder and says so.

    Example::

        with atomic_output_dir(args.out, force=args.force, name="--out", producer="audit") as tmp:
            report.save_files(tmp)
    """
    target = check_output_dir(name, path, force=force, planned=planned)
    remove_stale_temporaries(target)
    tmp = _make_temp_dir(target, name)
    try:
        yield tmp
        _commit_dir(tmp, target, name, force, producer)
    finally:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
