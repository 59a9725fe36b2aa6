"""Readers of text and numpy files: every failure is one InvalidInputError line naming the
argument and the file; numpy files are read with ``allow_pickle=False``."""

from __future__ import annotations

import json
import os
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gnnaudit._validation import check_allocation
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io.paths import PathLike, check_input_file, one_line, os_reason

__all__ = [
    "read_text",
    "read_json",
    "read_csv",
    "load_text_array",
    "load_npz",
    "load_npy",
    "precheck_npz_file",
]


def _looks_binary(path: Path) -> bool:
    with open(path, "rb") as fh:
        return b"\x00" in fh.read(8192)


def read_text(name: str, path: PathLike, *, encoding: str = "utf-8") -> str:
    """The text of a file; a missing, binary or undecodable file raises InvalidInputError."""
    p = check_input_file(name, path)
    try:
        if _looks_binary(p):
            raise InvalidInputError(f"{name}: {str(p)!r} is a binary file, expected text")
        return p.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} is not {encoding} text ({one_line(exc)})"
        ) from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc


def read_json(name: str, path: PathLike) -> Any:
    """Parse a JSON file; any read or syntax error raises InvalidInputError naming the file,
    and so does nesting deeper than the parser's recursion limit (a recursion bomb such as
    ``[[[[...]]]]`` 100,000 levels deep is refused, never a crash)."""
    text = read_text(name, path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{name}: {str(path)!r} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidInputError(
            f"{name}: {str(path)!r} nests JSON arrays / objects deeper than the parser allows "
            f"(about {sys.getrecursionlimit()} levels); refused"
        ) from exc


def read_csv(name: str, path: PathLike, *, min_rows: int = 1, **kwargs: Any) -> Any:
    """Read a CSV file into a :class:`pandas.DataFrame` (``pandas.read_csv(path, **kwargs)``).

    Every way a file can fail to be a table becomes one :class:`InvalidInputError` line naming
    ``name`` and the file: missing, a folder, binary (a NUL byte in the first 8 KiB), empty, not
    decodable, a line with more fields than the header, fewer than ``min_rows`` data rows, or an
    ``OSError`` while reading. (A line with *fewer* fields is padded with missing values by
    pandas; callers reject missing values where they matter.)
    """
    import csv

    import pandas as pd

    p = check_input_file(name, path)
    try:
        if _looks_binary(p):
            raise InvalidInputError(f"{name}: {str(p)!r} is a binary file, expected a CSV table")
        frame = pd.read_csv(p, **kwargs)
    except pd.errors.EmptyDataError as exc:
        raise InvalidInputError(f"{name}: {str(p)!r} is empty, expected a CSV table") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{name}: {str(p)!r} is not {kwargs.get('encoding', 'utf-8')} text ({one_line(exc)})"
        ) from exc
    except (pd.errors.ParserError, csv.Error) as exc:
        raise InvalidInputError(f"{name}: cannot parse {str(p)!r} as CSV: {one_line(exc)}") from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc
    except InvalidInputError:
        raise
    except ValueError as exc:  # dtype=, usecols= ... mismatches
        raise InvalidInputError(f"{name}: cannot read {str(p)!r} as CSV: {one_line(exc)}") from exc
    if len(frame) < min_rows:
        raise InvalidInputError(
            f"{name}: {str(p)!r} must hold at least {min_rows} data row(s), got {len(frame)}"
        )
    return frame


def load_text_array(
    name: str,
    path: PathLike,
    *,
    dtype: Any = np.float64,
    ndmin: Literal[0, 1, 2] = 2,
    comments: str = "#",
) -> np.ndarray:
    """``numpy.loadtxt`` of a whitespace-separated numeric file, errors as InvalidInputError.

    An empty file gives an empty array (shape ``(0,)`` reshaped by ``ndmin``).
    """
    p = check_input_file(name, path)
    try:
        if _looks_binary(p):
            raise InvalidInputError(f"{name}: {str(p)!r} is a binary file, expected numbers")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*input contained no data.*")
            return np.loadtxt(p, dtype=dtype, ndmin=ndmin, comments=comments)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{name}: {str(p)!r} is not text ({one_line(exc)})") from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r}: {os_reason(exc)}") from exc
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(f"{name}: cannot parse {str(p)!r}: {one_line(exc)}") from exc


def _numpy_refusal(name: str, p: Path, exc: ValueError, kind: str) -> str:
    text = str(exc)
    if "Object arrays" in text:
        return (
            f"{name}: {str(p)!r} holds an object array, which needs unpickling; refused (store "
            "numbers, booleans or fixed-width strings only)"
        )
    if "pickled" in text or "allow_pickle" in text:
        return f"{name}: {str(p)!r} is not a {kind} file (numpy would have to unpickle it); refused"
    return f"{name}: cannot read {str(p)!r} as {kind}: {one_line(exc)}"


def _npy_header(fh: Any) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of the ``.npy`` stream ``fh`` from its header (nothing else read)."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(fh)
    else:  # 3.0 (utf-8 field names): numpy's own (private) reader
        shape, _, dtype = fmt._read_array_header(fh, version)  # type: ignore[attr-defined]
    return tuple(int(s) for s in shape), np.dtype(dtype)


def _declared_bytes(
    name: str, p: Path, member: str, fh: Any, stored: int
) -> tuple[tuple[int, ...], int]:
    """Shape and data bytes an ``.npy`` header declares; refuses a header claiming more data
    than the ``stored`` bytes hold (a crafted or truncated file), before any allocation."""
    shape, dtype = _npy_header(fh)
    if any(s < 0 for s in shape):
        raise InvalidInputError(f"{name}: {str(p)!r}{member} declares a negative shape {shape}")
    count = 1
    for s in shape:
        count *= s
    n_bytes = count * (dtype.itemsize if not dtype.hasobject else 8)
    if fh.tell() + n_bytes > stored:
        raise InvalidInputError(
            f"{name}: {str(p)!r}{member} declares an array of shape {shape} ({dtype}, "
            f"{n_bytes:.3g} bytes) but holds only {stored} bytes; refused (a crafted or "
            "truncated file)"
        )
    return shape, n_bytes


#: an ``.npz`` member that decompresses to more than ``BOMB_BYTES`` (1 GiB) at a ratio above
#: ``BOMB_RATIO`` (100:1) is refused as a decompression bomb: data that compressible is nearly
#: constant, not a graph (deflate tops out near 1032:1 on constant bytes; real feature
#: matrices compress far less). Genuine data of that kind can be saved with ``np.savez``.
BOMB_BYTES = 2**30
BOMB_RATIO = 100


def check_npz_sizes(name: str, p: Path) -> int:
    """Read only the headers of the arrays of the ``.npz`` ``p`` and refuse, before
    decompressing anything, a member whose header claims more data than the member holds,
    a decompression bomb (:data:`BOMB_BYTES`, :data:`BOMB_RATIO`) or arrays that together
    cannot fit in memory (:func:`~gnnaudit._validation.check_allocation`). Returns the total
    data bytes."""
    total = 0
    if not zipfile.is_zipfile(p):  # not an archive: numpy's own refusal names it
        return total
    with zipfile.ZipFile(p) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > BOMB_BYTES and ratio > BOMB_RATIO:
                raise InvalidInputError(
                    f"{name}: {str(p)!r} (array {info.filename[:-4]!r}) decompresses to "
                    f"{info.file_size:.3g} bytes from {info.compress_size} ({ratio:.0f}:1); "
                    f"refused as a decompression bomb (over {BOMB_BYTES:.3g} bytes at over "
                    f"{BOMB_RATIO}:1); save genuine data with np.savez (uncompressed)"
                )
            with archive.open(info) as fh:
                _, n_bytes = _declared_bytes(
                    name, p, f" (array {info.filename[:-4]!r})", fh, info.file_size
                )
            total += n_bytes
    check_allocation(name, total, f"the arrays of {str(p)!r}")
    return total


def precheck_npz_file(name: str, path: PathLike) -> Path:
    """Refuse, from the archive's directory and the arrays' headers only (nothing is
    decompressed), what :func:`load_npz` would refuse for what it is: not a regular file, not a
    zip archive, a bomb or a header claiming more than the member holds
    (:func:`check_npz_sizes`), an object array (which needs unpickling). Returns the path."""
    p = check_input_file(name, path)
    try:
        if not zipfile.is_zipfile(p):
            raise InvalidInputError(
                f"{name}: cannot read {str(p)!r} as .npz: it is not a zip archive (np.savez "
                "writes one)"
            )
        check_npz_sizes(name, p)
        with zipfile.ZipFile(p) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as fh:
                    _, dtype = _npy_header(fh)
                if dtype.hasobject:
                    raise InvalidInputError(
                        f"{name}: {str(p)!r} (array {info.filename[:-4]!r}) holds an object "
                        "array, which needs unpickling; refused (store numbers, booleans or "
                        "fixed-width strings only)"
                    )
    except InvalidInputError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r} as .npz: {one_line(exc)}") from exc
    return p


def load_npz(name: str, path: PathLike) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` file, read with ``allow_pickle=False``.

    An object array (which only pickling can store) is refused with InvalidInputError, as is a
    file that is not an npz archive, and (from the headers alone, before decompressing) a
    member whose header claims more data than it holds or arrays larger than the memory
    (:func:`check_npz_sizes`: a decompression bomb).
    """
    p = check_input_file(name, path)
    try:
        check_npz_sizes(name, p)
        archive = np.load(p, allow_pickle=False)
        if isinstance(archive, np.ndarray):
            raise InvalidInputError(f"{name}: {str(p)!r} is a single .npy array, not an .npz")
        with archive:
            return {key: archive[key] for key in archive.files}
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(_numpy_refusal(name, p, exc, ".npz")) from exc
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r} as .npz: {one_line(exc)}") from exc


def load_npy(name: str, path: PathLike) -> np.ndarray:
    """One ``.npy`` array, read with ``allow_pickle=False`` (object arrays are refused)."""
    p = check_input_file(name, path)
    try:
        if p.suffix.lower() != ".npz" and not zipfile.is_zipfile(p):
            with open(p, "rb") as fh:
                _, n_bytes = _declared_bytes(name, p, "", fh, os.fstat(fh.fileno()).st_size)
            check_allocation(name, n_bytes, f"the array of {str(p)!r}")
        arr = np.load(p, allow_pickle=False)
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(_numpy_refusal(name, p, exc, ".npy")) from exc
    except (OSError, EOFError) as exc:
        raise InvalidInputError(f"{name}: cannot read {str(p)!r} as .npy: {one_line(exc)}") from exc
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InvalidInputError(f"{name}: {str(p)!r} is an .npz archive, expected one .npy array")
    return arr
