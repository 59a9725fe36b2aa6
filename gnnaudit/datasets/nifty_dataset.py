"""PyG ``InMemoryDataset`` of the fair-GNN benchmark graphs (NIFTY and FairGNN layouts).

``NiftyDataset(root, name)`` reads ``<root>/<name>/`` (the layout of :func:`load_nifty`), the raw
folder, and keeps its processed graph in ``<root>/<name>/processed/``. Missing raw files are
downloaded from the reference repositories with a SHA-256 check
(:mod:`gnnaudit.datasets.nifty_download`; ``download=False`` refuses instead). The processed
file name holds the split settings and the csv's SHA-256, so another split or another csv never
reuses a stale file; it is read back through :func:`gnnaudit.safe_io.safe_torch_load` (only
tensors, plain containers and ``Data``), never by full unpickling.
"""

from __future__ import annotations

import os
from typing import Any

from torch_geometric.data import Data, InMemoryDataset

from gnnaudit._validation import check_choice
from gnnaudit.datasets.nifty import NIFTY_DATASETS, NIFTY_SPLITS, load_nifty
from gnnaudit.datasets.nifty_download import DATASET_FILES, ensure_files, sha256_file
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import safe_torch_load

__all__ = ["NiftyDataset"]


class NiftyDataset(InMemoryDataset):
    """One fair-GNN benchmark graph as a PyG dataset of length 1.

    Parameters
    ----------
    root : folder holding ``<name>/`` (created and filled on download).
    name : one of :data:`~gnnaudit.datasets.NIFTY_DATASETS`.
    split, seed, label_number, standardize : as for :func:`load_nifty`.
    transform, pre_transform, pre_filter : PyG's hooks (``pre_transform`` is applied once,
        before the graph is saved).
    download : fetch missing raw files (default true, as PyG datasets do).
    strict_hash : refuse a download whose expected SHA-256 is not recorded.
    force_reload : rebuild the processed file.
    """

    def __init__(  # noqa: PLR0913  # PyG dataset: PyG's hooks plus the documented options
        self,
        root: str | os.PathLike[str],
        name: str,
        *,
        split: str = "stratified",
        seed: int | None = None,
        label_number: int | None = None,
        standardize: bool = True,
        transform: Any = None,
        pre_transform: Any = None,
        pre_filter: Any = None,
        download: bool = True,
        strict_hash: bool = False,
        force_reload: bool = False,
    ) -> None:
        self.name = check_choice("name", name, tuple(NIFTY_DATASETS))
        self.split = check_choice("split", split, NIFTY_SPLITS)
        self.seed = seed
        self.label_number = label_number
        self.standardize = bool(standardize)
        self._download_allowed = bool(download)
        self._strict_hash = bool(strict_hash)
        if not isinstance(root, str | os.PathLike):
            raise InvalidInputError(f"root must be a folder path, got {type(root).__name__}")
        super().__init__(
            os.fspath(root),
            transform,
            pre_transform,
            pre_filter,
            log=False,  # PyG prints; gnnaudit logs (gnnaudit.datasets.nifty)
            force_reload=force_reload,
        )
        self.load(self.processed_paths[0])

    @property
    def raw_dir(self) -> str:
        """``<root>/<name>``: the layout of :func:`load_nifty`, not PyG's ``<root>/raw``."""
        return os.path.join(self.root, self.name)

    @property
    def processed_dir(self) -> str:
        """``<root>/<name>/processed``: the processed graph and the cached NIFTY edges."""
        return os.path.join(self.root, self.name, "processed")

    @property
    def raw_file_names(self) -> list[str]:
        spec = NIFTY_DATASETS[self.name]
        if spec.layout == "fairgnn":
            return [f.name for f in DATASET_FILES[self.name]]
        return [f"{self.name}.csv"]  # the edge file is optional: NIFTY's rule rebuilds it

    @property
    def processed_file_names(self) -> list[str]:
        digest = sha256_file(self.raw_paths[0])[:16]
        seed = "default" if self.seed is None else str(self.seed)
        number = "default" if self.label_number is None else str(self.label_number)
        return [
            f"{self.name}_{self.split}_seed{seed}_n{number}_std{int(self.standardize)}_{digest}.pt"
        ]

    def download(self) -> None:
        ensure_files(
            self.name, self.raw_dir, download=self._download_allowed, strict=self._strict_hash
        )

    def process(self) -> None:
        data = load_nifty(
            self.name,
            self.root,
            self.seed,
            self.standardize,
            split=self.split,
            label_number=self.label_number,
            processed_dir=self.processed_dir,
        )
        if self.pre_filter is not None and not self.pre_filter(data):
            raise InvalidInputError(f"pre_filter rejected the only graph of {self.name!r}")
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

    def load(self, path: str, data_cls: type = Data) -> None:
        """Read a processed file saved by :meth:`save`, through ``safe_torch_load``."""
        out = safe_torch_load(path, (Data,), name="processed file")
        if not (isinstance(out, tuple) and len(out) == 3 and isinstance(out[0], dict)):
            raise InvalidInputError(f"processed file {path!r} is not a saved NiftyDataset")
        data_dict, self.slices, cls = out
        if cls is not Data:
            raise InvalidInputError(f"processed file {path!r} holds {cls!r}, expected Data")
        self.data = Data.from_dict(data_dict)

    def __repr__(self) -> str:
        return f"NiftyDataset({self.name!r}, split={self.split!r})"
