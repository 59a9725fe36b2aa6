"""Offline loaders of PyTorch Geometric benchmark datasets (Planetoid, FacebookPagePage,
AmazonProducts).

Nothing here downloads. Each dataset must already be on disk in PyG's raw format under
``<root>/<Name>/raw`` (for example ``<root>/Cora/raw/ind.cora.x``); a missing raw file raises
:class:`~gnnaudit.errors.InvalidInputError` naming it.

The raw files are read with the safe readers of :mod:`gnnaudit.safe_io` (a restricted
unpickler for Planetoid's pickles, ``allow_pickle=False`` for npz / npy) and the graph is
built by :mod:`gnnaudit.datasets.pyg_raw`. gnnaudit never reads a ``processed/`` folder (PyG
loads those with a fallback to full unpickling, so a planted file could run code) and never
writes anything: the data folder may be read-only, and there is no cache that two folders could
share.

Splits: ``split="stratified"`` (default) replaces the dataset's split by a seeded stratified
50/25/25 partition of all nodes (:func:`~gnnaudit.datasets.splits.stratified_masks`);
``split="public"`` keeps the split the dataset ships (for Planetoid the standard 20 labels per
class / 500 / 1000 split, which does *not* cover every node). A dataset that ships no split
always gets the seeded one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from torch_geometric.data import Data

from gnnaudit._validation import check_choice, check_seed
from gnnaudit.datasets.pyg_raw import (
    PLANETOID_PARTS,
    read_amazon_raw,
    read_facebook_raw,
    read_planetoid_raw,
)
from gnnaudit.datasets.splits import attach_masks, clean_edge_index
from gnnaudit.errors import InvalidInputError

__all__ = ["PLANETOID_DATASETS", "PYG_DATASETS", "load_planetoid", "load_pyg"]

#: lower-case name -> PyG's spelling.
PLANETOID_DATASETS: dict[str, str] = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
#: PyG class name -> raw files it needs.
PYG_DATASETS: dict[str, tuple[str, ...]] = {
    "FacebookPagePage": ("facebook.npz",),
    "AmazonProducts": ("adj_full.npz", "feats.npy", "class_map.json", "role.json"),
}
_PYG_READERS: dict[str, Callable[[Path], Data]] = {
    "FacebookPagePage": read_facebook_raw,
    "AmazonProducts": read_amazon_raw,
}
_SPLITS = ("stratified", "public")


def _raw_dir(root: str | os.PathLike[str], name: str, raw_files: tuple[str, ...]) -> Path:
    """``<root>/<name>/raw``, checked to hold every file of ``raw_files``."""
    if not isinstance(root, str | os.PathLike):
        raise InvalidInputError(f"root must be a folder path, got {type(root).__name__}")
    raw = Path(root) / name / "raw"
    missing = [f for f in raw_files if not (raw / f).is_file()]
    if missing:
        raise InvalidInputError(
            f"root: dataset {name!r} is not available offline: missing {', '.join(missing)} in "
            f"{raw} (gnnaudit never downloads; place PyG's raw files there)"
        )
    return raw


def _finish(data: Data, split: str, seed: int) -> Data:
    out = Data(
        x=data.x.float(),
        y=data.y,
        edge_index=clean_edge_index(data.edge_index, data.num_nodes),
        num_nodes=data.num_nodes,
    )
    out.feature_names = [f"x{i}" for i in range(out.x.size(1))]
    if split == "public":
        for key in ("train_mask", "val_mask", "test_mask"):
            if getattr(data, key, None) is not None:
                out[key] = data[key]
    return attach_masks(out, seed=seed)


def load_planetoid(
    name: str, root: str | os.PathLike[str], seed: int = 0, split: str = "stratified"
) -> Data:
    """Load Cora, CiteSeer or PubMed (case-insensitive) from PyG raw files under ``root``.

    Parameters
    ----------
    name : ``cora``, ``citeseer`` or ``pubmed``.
    root : folder holding ``<Name>/raw/ind.<name>.*`` (e.g. ``.../planetoid`` for
        ``.../planetoid/Cora/raw``).
    seed : seed of the stratified split (``split="stratified"``).
    split : ``"stratified"`` (50/25/25 partition) or ``"public"`` (the Planetoid split).
    """
    key = check_choice("name", str(name).lower(), tuple(PLANETOID_DATASETS))
    split = check_choice("split", split, _SPLITS)
    seed = check_seed("seed", seed)
    pyg_name = PLANETOID_DATASETS[key]
    raw = _raw_dir(root, pyg_name, tuple(f"ind.{key}.{part}" for part in PLANETOID_PARTS))
    return _finish(read_planetoid_raw(raw, key), split, seed)


def load_pyg(
    name: str, root: str | os.PathLike[str], seed: int = 0, split: str = "stratified"
) -> Data:
    """Load ``FacebookPagePage`` or ``AmazonProducts`` from its raw files, offline.

    The raw files must lie in ``<root>/<name>/raw``. FacebookPagePage ships no split and gets a
    seeded stratified one; AmazonProducts ships a train / val / test role split, kept with
    ``split="public"``. AmazonProducts targets are multi-label (a 0/1 matrix); its seeded split
    is then uniform rather than stratified.
    """
    name = check_choice("name", name, tuple(PYG_DATASETS))
    split = check_choice("split", split, _SPLITS)
    seed = check_seed("seed", seed)
    raw = _raw_dir(root, name, PYG_DATASETS[name])
    return _finish(_PYG_READERS[name](raw), split, seed)
