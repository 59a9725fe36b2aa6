"""The record of what gnnaudit wrote into an output folder, and the rule ``force`` follows.

Every output folder gnnaudit fills holds a small JSON file, :data:`MANIFEST_NAME`, listing
the files gnnaudit wrote there and which kind of output wrote each (``"audit"``, ``"train"``,
``"graph"`` ...)::

    {"format": 1, "tool": "gnnaudit", "files": {"report.json": "audit", ...}}

``force`` **replaces only files gnnaudit itself wrote** (:func:`plan_forced_commit`):

* a file the new run writes may replace an existing file of the same name only when the
  manifest lists it; any other existing entry of that name *blocks* the write, and the error
  names it (nothing is deleted to make room);
* files an earlier run of the same kind wrote and this run does not write again are removed,
  so a folder never mixes two runs' results;
* everything else in the folder (the user's notes, data, sub-folders, other kinds' outputs)
  is left exactly as it was.

**One-file outputs** (``--out FILE`` of ``evidence``, ``fairden``, ``tree-cluster``,
``explain-dbscan``) follow the same rule through the manifest of the file's folder: a file
written with ``producer`` (:func:`gnnaudit.safe_io.atomic_file`) is added to it, and ``force``
replaces an existing file only when that manifest lists it (:func:`lists_file`); a file
gnnaudit did not write is never overwritten.

The manifest is data: it is read with :func:`json.loads` only, and an unreadable or malformed
manifest counts as "gnnaudit wrote nothing here" (the safe reading); such a file is never
overwritten either (:func:`foreign_manifest`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from gnnaudit.errors import InvalidInputError

__all__ = [
    "MANIFEST_NAME",
    "read_manifest",
    "foreign_manifest",
    "lists_file",
    "manifest_text",
    "written_files",
    "blocking_entries",
    "raise_if_blocked",
    "ForcedCommit",
    "plan_forced_commit",
]

#: file name of the manifest inside an output folder
MANIFEST_NAME = ".gnnaudit-manifest.json"
_FORMAT = 1
#: a manifest larger than this is not one of ours (it is read whole)
_MAX_MANIFEST_BYTES = 1 << 20


def _load(folder: Path) -> dict[str, str] | None:
    """The manifest of ``folder``: ``{}`` when there is none, ``None`` when an entry of that
    name exists but is not a manifest gnnaudit can read (a link, a folder, oversized,
    malformed, another tool's)."""
    path = folder / MANIFEST_NAME
    if not os.path.lexists(path):
        return {}
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_MANIFEST_BYTES:
            return None
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, ValueError, RecursionError):
        return None
    files = payload.get("files") if isinstance(payload, dict) else None
    if payload.get("tool") != "gnnaudit" or not isinstance(files, dict):
        return None
    return {
        name: producer
        for name, producer in files.items()
        if isinstance(name, str) and isinstance(producer, str) and _is_plain_relative(name)
    }


def read_manifest(folder: Path) -> dict[str, str]:
    """``{relative file name: producer}`` of the files gnnaudit wrote into ``folder``.

    A missing, oversized, unreadable or malformed manifest gives ``{}``: then nothing in the
    folder is taken to be gnnaudit's, so nothing there will be replaced or removed.
    """
    return _load(folder) or {}


def foreign_manifest(folder: Path) -> bool:
    """Whether ``folder`` holds an entry named :data:`MANIFEST_NAME` that is not a manifest
    gnnaudit can read (it is then never written over)."""
    return _load(folder) is None


def lists_file(path: Path) -> bool:
    """Whether the manifest of the folder of ``path`` lists it: gnnaudit wrote that file, so
    ``force`` may replace it."""
    folder = path.absolute().parent
    return path.name != MANIFEST_NAME and path.name in read_manifest(folder)


def _is_plain_relative(name: str) -> bool:
    """A relative path inside the folder (no ``..``, not absolute, not the manifest)."""
    parts = Path(name).parts
    return (
        bool(parts)
        and not Path(name).is_absolute()
        and ".." not in parts
        and (name != MANIFEST_NAME)
    )


def manifest_text(files: dict[str, str]) -> str:
    """The manifest's JSON text for ``files`` (``{relative name: producer}``)."""
    payload = {"format": _FORMAT, "tool": "gnnaudit", "files": dict(sorted(files.items()))}
    return json.dumps(payload, indent=1) + "\n"


def written_files(folder: Path) -> list[str]:
    """Relative names of the regular files under ``folder`` (the manifest excluded)."""
    names = []
    for root, _dirs, files in os.walk(folder):
        for file in files:
            rel = os.path.relpath(os.path.join(root, file), folder)
            if rel != MANIFEST_NAME:
                names.append(Path(rel).as_posix())
    return sorted(names)


def blocking_entries(target: Path, names: list[str], owned: dict[str, str]) -> list[str]:
    """The names among ``names`` that a write into ``target`` may not replace: an existing
    entry the manifest ``owned`` does not list, or one that is not a plain file (a folder, a
    link), or a path whose parent exists as something other than a folder."""
    blockers = []
    for rel in names:
        dest = target / rel
        if os.path.lexists(dest):
            if owned.get(rel) is None or dest.is_symlink() or not dest.is_file():
                blockers.append(rel)
            continue
        for parent in list(Path(rel).parents)[:-1]:  # "a/b/c" -> a/b, a (not ".")
            entry = target / parent
            if os.path.lexists(entry) and (entry.is_symlink() or not entry.is_dir()):
                blockers.append(rel)
                break
    return blockers


def raise_if_blocked(
    name: str, target: Path, names: list[str], owned: dict[str, str] | None = None
) -> None:
    """Raise :class:`InvalidInputError` naming ``name`` and each entry of ``target`` that
    blocks writing ``names`` there (see :func:`blocking_entries`)."""
    if not target.is_dir():
        return
    blockers = blocking_entries(target, names, read_manifest(target) if owned is None else owned)
    if blockers:
        one = len(blockers) == 1
        shown = ", ".join(repr(str(target / b)) for b in blockers[:5])
        raise InvalidInputError(
            f"{name}: {shown} {'is' if one else 'are'} in the way and not written by gnnaudit "
            f"(not listed in the folder's {MANIFEST_NAME}); --force replaces only gnnaudit's "
            f"own files. Move {'it' if one else 'them'} away or choose another output folder"
        )


@dataclass(frozen=True)
class ForcedCommit:
    """What a forced write into an existing folder will do (see :func:`plan_forced_commit`)."""

    #: files of the new run (relative names), each moved onto the folder
    new: tuple[str, ...]
    #: earlier files of the same producer that the new run does not write: removed
    stale: tuple[str, ...]
    #: the manifest after the commit
    manifest: dict[str, str]
    #: whether the folder holds nothing but this producer's files, so the whole folder can be
    #: swapped in one rename
    whole_folder: bool


def plan_forced_commit(
    name: str, target: Path, new_files: list[str], producer: str
) -> ForcedCommit:
    """Plan a ``force`` write of ``new_files`` into the existing folder ``target``.

    Raises :class:`InvalidInputError` naming ``name`` and every blocking entry when a file of
    the new run would replace something gnnaudit did not write (or a folder, a link ...), and
    ``FileNotFoundError`` when another run replaced or removed the folder while it was being
    read (the manifest and the listing must come from one folder): the caller looks again.
    """
    before = os.stat(target)  # FileNotFoundError: the folder went away, look again
    owned = read_manifest(target)
    blockers = blocking_entries(target, new_files, owned) if target.is_dir() else []
    plan = _plan(target, new_files, producer, owned)
    after = os.stat(target)
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
        raise FileNotFoundError(f"{target} was replaced by another run while being read")
    if blockers:
        raise_if_blocked(name, target, new_files, owned)
    return plan


def _plan(target: Path, new_files: list[str], producer: str, owned: dict[str, str]) -> ForcedCommit:
    """The commit of ``new_files`` into ``target`` given its manifest ``owned``."""
    new_set = set(new_files)
    stale = tuple(
        rel
        for rel, made_by in sorted(owned.items())
        if made_by == producer and rel not in new_set and (target / rel).is_file()
    )
    manifest = {rel: made_by for rel, made_by in owned.items() if (target / rel).is_file()}
    for rel in stale:
        manifest.pop(rel, None)
    manifest.update(dict.fromkeys(new_files, producer))
    # one rename can swap the whole folder only when it holds nothing but plain files this
    # producer wrote (anything else would be lost with the old folder)
    whole = all(
        entry.is_file()
        and not entry.is_symlink()
        and (entry.name == MANIFEST_NAME or owned.get(entry.name) == producer)
        for entry in target.iterdir()
    )
    return ForcedCommit(tuple(new_files), stale, manifest, whole)
