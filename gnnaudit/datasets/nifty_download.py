"""Download the NIFTY / FairGNN files from their public repositories, checked by SHA-256.

:data:`DATASET_FILES` maps each dataset to its files: the name in ``<root>/<name>/``, the
canonical URL (the reference repositories on GitHub, raw files of their default branch ``main``)
and the expected SHA-256. The hashes of the NIFTY files and of NBA were computed from the
repositories' snapshots (NIFTY commit ``6c270c5``, FairGNN commit ``13cdca7``); the Pokec files
could not be read from here, so their hash is ``None``: the computed hash is then logged with a
warning and the file is kept (pass ``strict=True`` to refuse instead).

A file is downloaded to a temporary sibling, hashed, and moved into place only if its hash
matches (:func:`gnnaudit.safe_io.atomic_file`): a wrong hash raises and leaves no file behind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_file

__all__ = ["RemoteFile", "DATASET_FILES", "ensure_files", "download_file", "sha256_file"]

logger = logging.getLogger(__name__)

_NIFTY = "https://raw.githubusercontent.com/chirag126/nifty/main/dataset"
_FAIRGNN = "https://raw.githubusercontent.com/EnyanDai/FairGNN/main/dataset"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset: local name, URL, expected SHA-256 (``None``: not known)."""

    name: str
    url: str
    sha256: str | None


#: Files each dataset needs, in ``<root>/<dataset>/``. Credit's and Bail's edge files are not
#: fetched (NIFTY's repository holds Credit's only zipped); they are built from the features.
DATASET_FILES: dict[str, tuple[RemoteFile, ...]] = {
    "credit": (
        RemoteFile(
            "credit.csv",
            f"{_NIFTY}/credit/credit.csv",
            "5d7a93f25a09dd1648c78b5e0c6a883ca832ee88259d89dfe1062e8c848bfe5d",
        ),
    ),
    "bail": (
        RemoteFile(
            "bail.csv",
            f"{_NIFTY}/bail/bail.csv",
            "11a7c62be2b7aed7cb069624789755d5f57acc8b69580564e2401b084e2d5faf",
        ),
    ),
    "german": (
        RemoteFile(
            "german.csv",
            f"{_NIFTY}/german/german.csv",
            "49cc549b1ca3f1650e3bdcd8cfce62313c763abfbcbf785d32b07fb76ae078ca",
        ),
        RemoteFile(
            "german_edges.txt",
            f"{_NIFTY}/german/german_edges.txt",
            "404d107384e05a14ce9befe04a710d7df0a7492095569dc35ffb5d47742ee300",
        ),
    ),
    "nba": (
        RemoteFile(
            "nba.csv",
            f"{_FAIRGNN}/NBA/nba.csv",
            "fe295195cff01f20b785fe9de1e24062123cb146bdae080ce8b3ea8315d45b80",
        ),
        RemoteFile(
            "nba_relationship.txt",
            f"{_FAIRGNN}/NBA/nba_relationship.txt",
            "14c73245e5d6b6457cce7504e2bb0ded6b81155e25bf0e7d23793df7c01b4873",
        ),
    ),
    "pokec_z": (
        RemoteFile("region_job.csv", f"{_FAIRGNN}/pokec/region_job.csv", None),
        RemoteFile(
            "region_job_relationship.txt", f"{_FAIRGNN}/pokec/region_job_relationship.txt", None
        ),
    ),
    "pokec_n": (
        RemoteFile("region_job_2.csv", f"{_FAIRGNN}/pokec/region_job_2.csv", None),
        RemoteFile(
            "region_job_2_relationship.txt",
            f"{_FAIRGNN}/pokec/region_job_2_relationship.txt",
            None,
        ),
    ),
}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(remote: RemoteFile, target: Path, *, strict: bool = False) -> Path:
    """Fetch ``remote.url`` into ``target`` atomically; the file appears only if its SHA-256
    matches (or, with an unknown expected hash and ``strict=False``, with a warning)."""
    if remote.sha256 is None and strict:
        raise InvalidInputError(
            f"no SHA-256 is known for {remote.url}; download it yourself into {target.parent} "
            "or pass strict=False to accept it with the computed hash logged"
        )
    logger.info("downloading %s -> %s", remote.url, target)
    with atomic_file(target, name="root", force=True) as tmp:
        try:
            with urllib.request.urlopen(remote.url, timeout=60) as response, open(tmp, "wb") as out:
                for chunk in iter(lambda: response.read(_CHUNK), b""):
                    out.write(chunk)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot download {remote.url}: {exc}") from exc
        got = sha256_file(tmp)
        if remote.sha256 is None:
            logger.warning(
                "%s: no expected SHA-256 is recorded; downloaded file has SHA-256 %s (check it "
                "against a trusted copy)",
                remote.url,
                got,
            )
        elif got != remote.sha256:
            raise InvalidInputError(
                f"{remote.url}: SHA-256 {got} does not match the expected {remote.sha256}; "
                "the file was not kept"
            )
    return target


def ensure_files(
    dataset: str, folder: str | os.PathLike[str], *, download: bool = True, strict: bool = False
) -> list[Path]:
    """Make sure ``folder`` holds every file of ``dataset``; download the missing ones.

    Files already present are used as they are (not re-hashed). With ``download=False`` a
    missing file raises :class:`InvalidInputError` naming it and its URL.
    """
    files = DATASET_FILES[dataset]
    base = Path(folder)
    missing = [f for f in files if not (base / f.name).is_file()]
    if missing and not download:
        raise InvalidInputError(
            f"dataset {dataset!r}: missing file(s) "
            + ", ".join(f"{base / f.name} (from {f.url})" for f in missing)
        )
    if missing:
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInputError(f"root: cannot create {str(base)!r}: {exc}") from exc
    for remote in missing:
        download_file(remote, base / remote.name, strict=strict)
    return [base / f.name for f in files]
