"""Build NIFTY's similarity graph once per csv content and cache it under ``processed/``.

The cache file is ``<processed>/<stem>_edges_<key>.npy``, ``key`` being the first 16 hex digits
of the SHA-256 of the csv's bytes, the threshold, the feature columns and the rule version: a
different csv (or rule) never reuses a stale file. It holds the undirected ``edge_index`` (both
directions, no self loops, sorted), written atomically (:func:`gnnaudit.safe_io.atomic_file`)
and read with ``allow_pickle=False`` (:func:`gnnaudit.safe_io.load_npy`); a cache file that does
not hold a valid edge index for this graph is ignored (with a warning) and rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np
import torch

from gnnaudit.datasets.nifty_edges import nifty_similarity_edges
from gnnaudit.datasets.splits import clean_edge_index
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_file, load_npy

__all__ = ["edge_cache_path", "cached_similarity_edges"]

logger = logging.getLogger(__name__)

_RULE_VERSION = "nifty-similarity-v1"


def edge_cache_path(
    csv_path: str | os.PathLike[str],
    processed_dir: str | os.PathLike[str],
    thresh: float,
    columns: list[str],
) -> Path:
    """Cache file of the graph built from ``csv_path`` (content-keyed, see module docstring)."""
    digest = hashlib.sha256()
    with open(csv_path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    digest.update(f"|{_RULE_VERSION}|{thresh!r}|{columns!r}".encode())
    stem = Path(csv_path).stem
    return Path(processed_dir) / f"{stem}_edges_{digest.hexdigest()[:16]}.npy"


def _read_cache(path: Path, num_nodes: int) -> torch.Tensor | None:
    try:
        arr = load_npy("cache", path)
    except InvalidInputError as exc:
        logger.warning("ignoring edge cache %s: %s", path, exc)
        return None
    ok = (
        arr.ndim == 2
        and arr.shape[0] == 2
        and arr.dtype == np.int64
        and (arr.size == 0 or (arr.min() >= 0 and arr.max() < num_nodes))
    )
    if not ok:
        logger.warning("ignoring edge cache %s: not an edge index of %d nodes", path, num_nodes)
        return None
    return torch.from_numpy(arr)


def cached_similarity_edges(
    csv_path: str | os.PathLike[str],
    features: np.ndarray,
    thresh: float,
    columns: list[str],
    processed_dir: str | os.PathLike[str],
) -> torch.Tensor:
    """Undirected ``edge_index`` of NIFTY's rule on ``features`` (rows of ``csv_path``), from
    the cache when present, else built by :func:`nifty_similarity_edges` and cached."""
    num_nodes = features.shape[0]
    path = edge_cache_path(csv_path, processed_dir, thresh, columns)
    if path.is_file():
        cached = _read_cache(path, num_nodes)
        if cached is not None:
            logger.info("NIFTY edges of %s read from cache %s", csv_path, path)
            return cached
    pairs = nifty_similarity_edges(features, thresh)
    edge_index = clean_edge_index(torch.from_numpy(pairs), num_nodes)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, name="cache", force=True) as tmp:
            np.save(tmp, edge_index.numpy(), allow_pickle=False)
    except (OSError, InvalidInputError) as exc:  # a read-only data folder: work uncached
        logger.warning("cannot cache the NIFTY edges at %s: %s", path, exc)
    return edge_index
