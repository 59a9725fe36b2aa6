"""Offline loaders of PyTorch Geometric benchmark datasets (Planetoid, FacebookPagePage,
AmazonProducts).

Nothing here downloads. Each dataset must already be on disk in PyG's raw format under
``<root>/<Name>/raw`` (for example ``<root>/Cora/raw/ind.cora.x``); a missing raw file raises
:class:`~gnnaudit.errors.InvalidInputError` naming it. PyG writes its processed cache to
``<root>/<Name>/processed``; when ``<root>/<Name>`` is not writable (a shared read-only data
folder) the raw files are first copied to ``$GNNAUDIT_CACHE/<Name>/raw`` (default cache:
``~/.cache/gnnaudit``) and PyG processes them there.

Splits: ``split="stratified"`` (default) replaces the dataset's split by a seeded stratified
50/25/25 partition of all nodes (:func:`~gnnaudit.datasets.splits.stratified_masks`);
``split="public"`` keeps the split the dataset ships (for Planetoid the standard 20 labels per
class / 500 / 1000 split, which does *not* cover every node). A dataset that ships no split
always gets the seeded one.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable

import torch
from torch_geometric.data import Data

from gnnaudit._validation import check_choice, check_int
from gnnaudit.datasets.splits import attach_masks, clean_edge_index
from gnnaudit.errors import InvalidInputError

__all__ = ["PLANETOID_DATASETS", "PYG_DATASETS", "load_planetoid", "load_pyg", "cache_dir"]

logger = logging.getLogger(__name__)

#: lower-case name -> PyG's spelling.
PLANETOID_DATASETS: dict[str, str] = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
#: PyG class name -> raw files it needs.
PYG_DATASETS: dict[str, tuple[str, ...]] = {
    "FacebookPagePage": ("facebook.npz",),
    "AmazonProducts": ("adj_full.npz", "feats.npy", "class_map.json", "role.json"),
}
_SPLITS = ("stratified", "public")


def cache_dir() -> str:
    """Writable cache folder: ``$GNNAUDIT_CACHE`` or ``~/.cache/gnnaudit``."""
    return os.environ.get("GNNAUDIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "gnnaudit"
    )


def _planetoid_raw_files(name: str) -> tuple[str, ...]:
    stem = name.lower()
    return tuple(
        f"ind.{stem}.{part}"
        for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
    )


def _writable(folder: str) -> bool:
    """Writable by us *and* not marked read-only (root ignores permission bits, so
    ``os.access`` alone would let a superuser write into a read-only shared folder)."""
    return os.access(folder, os.W_OK) and bool(os.stat(folder).st_mode & stat.S_IWUSR)


def _dataset_root(root: str | os.PathLike[str], name: str, raw_files: tuple[str, ...]) -> str:
    """Return a writable folder ``R`` with ``R/<name>/raw`` holding ``raw_files``."""
    root = os.fspath(root)
    folder = os.path.join(root, name)
    raw = os.path.join(folder, "raw")
    missing = [f for f in raw_files if not os.path.isfile(os.path.join(raw, f))]
    if missing:
        raise InvalidInputError(
            f"dataset {name!r} is not available offline: missing {', '.join(missing)} in {raw} "
            "(gnnaudit never downloads; place PyG's raw files there)"
        )
    if _writable(folder):
        return root
    cache_root = os.path.join(cache_dir(), "pyg")
    cache_raw = os.path.join(cache_root, name, "raw")
    os.makedirs(cache_raw, exist_ok=True)
    for f in raw_files:
        dst = os.path.join(cache_raw, f)
        src = os.path.join(raw, f)
        if not os.path.isfile(dst) or os.path.getsize(dst) != os.path.getsize(src):
            shutil.copyfile(src, dst)
    logger.info("%s is read-only; processing a copy of its raw files in %s", folder, cache_raw)
    return cache_root


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
    seed = check_int("seed", seed, minimum=0)
    pyg_name = PLANETOID_DATASETS[key]
    from torch_geometric.datasets import Planetoid

    ds_root = _dataset_root(root, pyg_name, _planetoid_raw_files(pyg_name))
    dataset = Planetoid(ds_root, pyg_name, split="public")
    return _finish(dataset[0], split, seed)


def _pyg_class(name: str) -> Callable[..., object]:
    import torch_geometric.datasets as pyg_datasets

    return getattr(pyg_datasets, name)


def load_pyg(
    name: str, root: str | os.PathLike[str], seed: int = 0, split: str = "stratified"
) -> Data:
    """Load ``FacebookPagePage`` or ``AmazonProducts`` through its PyG class, offline.

    The raw files must lie in ``<root>/<name>/raw``. FacebookPagePage ships no split and gets a
    seeded stratified one; AmazonProducts ships a train / val / test role split, kept with
    ``split="public"``. AmazonProducts targets are multi-label (a 0/1 matrix); its seeded split
    is then uniform rather than stratified.
    """
    name = check_choice("name", name, tuple(PYG_DATASETS))
    split = check_choice("split", split, _SPLITS)
    seed = check_int("seed", seed, minimum=0)
    ds_root = _dataset_root(root, name, PYG_DATASETS[name])
    dataset = _pyg_class(name)(os.path.join(ds_root, name))
    data = dataset[0]  # type: ignore[index]
    if not isinstance(data, Data) or not isinstance(data.x, torch.Tensor):
        raise InvalidInputError(f"dataset {name!r} did not yield node features")
    return _finish(data, split, seed)
