"""Loader of the fair-GNN benchmark graphs: NIFTY's German, Bail, Credit; FairGNN's NBA, Pokec.

Layouts::

    NIFTY (german, bail, credit; Agarwal et al. 2021)
    <root>/<name>/<name>.csv          one row per node, a header line, label + features
    <root>/<name>/<name>_edges.txt    pairs of 0-based row numbers (optional, see below)

    FairGNN (nba, pokec_z, pokec_n; Dai & Wang 2021), see :mod:`gnnaudit.datasets.fairgnn`
    <root>/<name>/<stem>.csv, <root>/<name>/<stem>_relationship.txt   (stem: nba, region_job,
    region_job_2)

NIFTY edge files may write ids as floats and list an edge in one or both directions. When a
NIFTY ``<name>_edges.txt`` is absent, the graph is built from the features by NIFTY's published
rule (:mod:`gnnaudit.datasets.nifty_edges`, thresholds german 0.8, credit 0.7, bail 0.6; for
German over the features with ``LoanAmount``, ``Age`` and ``LoanDuration`` scaled to [-1, 1],
which reproduces German's distributed edge file pair for pair) and cached in ``<root>/<name>/processed/`` keyed by the csv's SHA-256
(:mod:`gnnaudit.datasets.nifty_cache`). Every loader returns an undirected ``edge_index``
without self loops or duplicates, and logs its node and edge counts.

**Counting convention.** The loader counts unordered pairs ``{i, j}``, ``i != j``, each once
(``edge_index.size(1) // 2``). From the csv files alone this gives the published credit
30,000 nodes / 137,377 edges and bail 18,876 / 311,870 exactly. German's edge file holds 21,742
such pairs; its published 22,242 is the other count NIFTY's code suggests, the non-zeros of its
symmetric adjacency *with* the ``n`` self loops it adds, halved: ``(2 * 21,742 + 1,000) / 2``.
Both numbers are logged (under the second count credit and bail would be 152,377 and 321,308).

=========  ======================  ==========  ============================================
name       label                   sensitive   notes
=========  ======================  ==========  ============================================
german     GoodCustomer (-1 -> 0)  Gender      ``Female`` = 1; drops ``PurposeOfLoan`` and
                                               ``OtherLoansAtStore``
bail       RECID                   WHITE       --
credit     NoDefaultNextMonth      Age         group = ``Age > 25`` unless Age is 0/1
                                               already; drops ``Single`` as NIFTY does
nba        SALARY                  country     FairGNN layout, ``-1`` = unknown label
pokec_z    I_am_working_in_field   region      FairGNN layout (``region_job``)
pokec_n    I_am_working_in_field   region      FairGNN layout (``region_job_2``)
=========  ======================  ==========  ============================================

The label column (and ``user_id``) is removed from the features; the sensitive column stays a
feature and holds exactly the group id (``x[:, sensitive_index] == sensitive``; FairGNN's own
loader drops it, NIFTY's keeps it). With ``standardize=True`` (default) every non-binary feature
column is z-scored (the inverse kept in ``data.feature_mean`` / ``data.feature_scale``); 0/1
columns stay 0/1. Pandas index artefacts (``Unnamed: ...``) are ignored.

Splits: ``"stratified"`` (default, seeded 50/25/25 by label over the evaluable nodes),
``"nifty"`` and ``"fairgnn"`` (the published splits, :mod:`gnnaudit.datasets.nifty_splits`).
A split whose validation and test masks share nodes (NBA's published FairGNN split reuses its
test nodes for validation) is returned as published with a ``UserWarning`` naming the count.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from gnnaudit._validation import as_float32, check_choice, check_int, check_seed
from gnnaudit.datasets.columns import name_list
from gnnaudit.datasets.fairgnn import read_fairgnn_labels, read_relationships
from gnnaudit.datasets.nifty_cache import cached_similarity_edges
from gnnaudit.datasets.nifty_columns import (
    encode_label,
    encode_sensitive,
    feature_matrices,
    read_edge_file,
    standardise_non_binary,
)
from gnnaudit.datasets.nifty_download import ensure_files
from gnnaudit.datasets.nifty_edges import NIFTY_THRESHOLDS
from gnnaudit.datasets.nifty_splits import (
    NIFTY_LABEL_NUMBER,
    PUBLISHED_SPLIT_SEED,
    fairgnn_split,
    nifty_split,
    warn_overlap,
)
from gnnaudit.datasets.splits import DEFAULT_FRACTIONS, NodeSplit, stratified_masks
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import read_csv

__all__ = ["NIFTY_DATASETS", "NIFTY_SPLITS", "load_nifty"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _NiftySpec:
    label: str
    sensitive: str
    drop: tuple[str, ...] = ()
    layout: str = "nifty"
    stem: str = ""
    edge_rescale: tuple[str, ...] = ()


#: Columns NIFTY min-max scaled to [-1, 1] when it built German's distributed edge file (its
#: loader holds the scaling commented out): with them the rule reproduces that file pair for pair.
_GERMAN_EDGE_RESCALE = ("LoanAmount", "Age", "LoanDuration")


NIFTY_DATASETS: dict[str, _NiftySpec] = {
    "german": _NiftySpec(
        "GoodCustomer",
        "Gender",
        ("PurposeOfLoan", "OtherLoansAtStore"),
        edge_rescale=_GERMAN_EDGE_RESCALE,
    ),
    "bail": _NiftySpec("RECID", "WHITE"),
    "credit": _NiftySpec("NoDefaultNextMonth", "Age", ("Single",)),
    "nba": _NiftySpec("SALARY", "country", ("user_id",), "fairgnn", "nba"),
    "pokec_z": _NiftySpec("I_am_working_in_field", "region", ("user_id",), "fairgnn", "region_job"),
    "pokec_n": _NiftySpec(
        "I_am_working_in_field", "region", ("user_id",), "fairgnn", "region_job_2"
    ),
}

#: Split rules :func:`load_nifty` knows.
NIFTY_SPLITS = ("stratified", "nifty", "fairgnn")


@dataclass(frozen=True)
class _Targets:
    y: np.ndarray
    sensitive: np.ndarray
    label_mask: np.ndarray | None = None
    sensitive_mask: np.ndarray | None = None


def _read_frame(csv_path: str, spec: _NiftySpec, name: str) -> pd.DataFrame:
    frame = read_csv("root", csv_path)
    frame = frame.loc[:, [c for c in frame.columns if not str(c).startswith("Unnamed:")]]
    needed = [spec.label, spec.sensitive] + (["user_id"] if spec.layout == "fairgnn" else [])
    absent = [c for c in needed if c not in frame.columns]
    if absent:
        raise InvalidInputError(
            f"dataset {name!r}: {csv_path} lacks column(s) {', '.join(absent)} "
            f"(has {name_list(frame.columns)})"
        )
    if len(frame) < 2:
        raise InvalidInputError(f"{csv_path} must hold at least 2 rows, got {len(frame)}")
    return frame


def _targets(frame: pd.DataFrame, spec: _NiftySpec, name: str, csv_path: str) -> _Targets:
    # np.array copies: pandas may hand out read-only buffers, which torch cannot wrap.
    if spec.layout == "fairgnn":
        t = read_fairgnn_labels(frame, csv_path, spec.label, spec.sensitive)
        return _Targets(t.y, t.sensitive, t.label_mask, t.sensitive_mask)
    y = np.array(encode_label(frame[spec.label], csv_path, spec.label), dtype=np.int64)
    s = encode_sensitive(frame[spec.sensitive], name, csv_path, spec.sensitive)
    return _Targets(y, np.array(s, dtype=np.int64))


def _split(
    name: str, split: str, targets: _Targets, seed: int | None, label_number: int | None
) -> NodeSplit:
    """The masks of rule ``split``; warns when validation and test nodes overlap (NBA under
    ``"fairgnn"``, as published)."""
    masks = _split_masks(name, split, targets, seed, label_number)
    warn_overlap(masks, split, stacklevel=4)  # user -> load_nifty -> _split -> warn_overlap
    return masks


def _split_masks(
    name: str, split: str, targets: _Targets, seed: int | None, label_number: int | None
) -> NodeSplit:
    n = targets.y.size
    labelled = np.ones(n, bool) if targets.label_mask is None else targets.label_mask
    sens_known = np.ones(n, bool) if targets.sensitive_mask is None else targets.sensitive_mask
    number = NIFTY_LABEL_NUMBER[name] if label_number is None else label_number
    published = PUBLISHED_SPLIT_SEED if seed is None else seed
    if split == "nifty":
        return nifty_split(targets.y, number, published, labelled=labelled)
    if split == "fairgnn":
        return fairgnn_split(
            targets.y,
            sens_known,
            number,
            published,
            test_after_label_number=name == "nba",
            labelled=labelled,
        )
    evaluable = np.flatnonzero(labelled & sens_known)
    inner = stratified_masks(targets.y[evaluable], *DEFAULT_FRACTIONS, seed=seed or 0)
    masks = []
    for part in (inner.train_mask, inner.val_mask, inner.test_mask):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(evaluable)[part]] = True
        masks.append(mask)
    return NodeSplit(*masks)


def _edges(
    spec: _NiftySpec,
    name: str,
    folder: str,
    processed: str | os.PathLike[str],
    frame: pd.DataFrame,
    raw: np.ndarray,
    feature_names: list[str],
) -> tuple[torch.Tensor, str]:
    n = len(frame)
    if spec.layout == "fairgnn":
        path = os.path.join(folder, f"{spec.stem}_relationship.txt")
        return read_relationships(path, frame["user_id"].to_numpy(), path), path
    edge_path = os.path.join(folder, f"{name}_edges.txt")
    if os.path.isfile(edge_path):
        return read_edge_file(edge_path, n), edge_path
    csv_path = os.path.join(folder, f"{name}.csv")
    thresh = NIFTY_THRESHOLDS[name]
    raw = raw.copy()
    for col in spec.edge_rescale:
        if col in feature_names:
            v = raw[:, feature_names.index(col)]
            span = v.max() - v.min()
            if span > 0:  # as NIFTY: 2 * (v - min) / (max - min) - 1
                raw[:, feature_names.index(col)] = ((v - v.min()) / span) * 2 - 1
    key = [*feature_names, f"rescaled:{','.join(spec.edge_rescale)}"]
    edge_index = cached_similarity_edges(csv_path, raw, thresh, key, processed)
    return edge_index, f"NIFTY's similarity rule (thresh {thresh})"


# long: whole: 31 docstring lines document the published splits; the body is one flat load
def load_nifty(
    name: str,
    root: str | os.PathLike[str],
    seed: int | None = None,
    standardize: bool = True,
    *,
    split: str = "stratified",
    label_number: int | None = None,
    download: bool = False,
    strict_hash: bool = False,
    processed_dir: str | os.PathLike[str] | None = None,
) -> Data:
    """Load one of :data:`NIFTY_DATASETS` from ``<root>/<name>/`` (layouts in the module doc).

    Parameters
    ----------
    name : ``"german"``, ``"bail"``, ``"credit"``, ``"nba"``, ``"pokec_z"`` or ``"pokec_n"``.
    root : folder holding ``<name>/``.
    seed : seed of the split. Default: 0 for ``"stratified"``, 20 (the published scripts' seed)
        for ``"nifty"`` and ``"fairgnn"``.
    standardize : z-score the non-binary feature columns (0/1 columns are kept).
    split : ``"stratified"`` (50/25/25 by label), ``"nifty"`` or ``"fairgnn"``
        (:mod:`gnnaudit.datasets.nifty_splits`); a ``UserWarning`` names the nodes shared by
        validation and test, if any (NBA under ``"fairgnn"``: validation is its test set).
    label_number : training cap of the published splits; default the published value
        (:data:`~gnnaudit.datasets.nifty_splits.NIFTY_LABEL_NUMBER`).
    download : fetch missing files from the reference repositories, checked by SHA-256
        (:mod:`gnnaudit.datasets.nifty_download`); off by default (nothing is fetched silently).
    strict_hash : with ``download``, refuse files whose expected SHA-256 is not recorded.
    processed_dir : where built edges are cached; default ``<root>/<name>/processed``.

    Returns
    -------
    Data with ``x`` (float32), ``y`` (0/1), undirected ``edge_index``, ``feature_names``,
    ``train_mask`` / ``val_mask`` / ``test_mask``, ``sensitive`` (group ids),
    ``sensitive_name`` and ``sensitive_index``; FairGNN graphs add ``label_mask`` and
    ``sensitive_mask`` (known values; unknown ones are 0 and in no evaluation mask).

    Raises
    ------
    InvalidInputError : unknown name or split, missing file or column, unparsable or
        out-of-range edges, a failed download or hash check.
    """
    name = check_choice("name", name, tuple(NIFTY_DATASETS))
    split = check_choice("split", split, NIFTY_SPLITS)
    if seed is not None:
        seed = check_seed("seed", seed)
    if label_number is not None:
        label_number = check_int("label_number", label_number, minimum=2)
    spec = NIFTY_DATASETS[name]
    if not isinstance(root, str | os.PathLike):
        raise InvalidInputError(f"root must be a folder path, got {type(root).__name__}")
    folder = os.path.join(os.fspath(root), name)
    stem = spec.stem or name
    csv_path = os.path.join(folder, f"{stem}.csv")
    if spec.layout == "fairgnn" or not os.path.isfile(csv_path):
        ensure_files(name, folder, download=download, strict=strict_hash)

    frame = _read_frame(csv_path, spec, name)
    targets = _targets(frame, spec, name, csv_path)
    features = frame.drop(columns=[spec.label, *[c for c in spec.drop if c in frame.columns]])
    x, raw = feature_matrices(features, name, csv_path, spec.sensitive, targets.sensitive)
    feature_names = [str(c) for c in features.columns]
    processed = os.path.join(folder, "processed") if processed_dir is None else processed_dir
    edge_index, source = _edges(spec, name, folder, processed, frame, raw, feature_names)
    num_nodes = len(frame)
    pairs = edge_index.size(1) // 2
    logger.info(
        "%s: %d nodes, %d undirected edges (unordered pairs i != j; %g counting NIFTY's self "
        "loops as (2 * pairs + nodes) / 2) from %s",
        name,
        num_nodes,
        pairs,
        (2 * pairs + num_nodes) / 2,
        source,
    )
    units: dict[str, list[float]] = {}
    if standardize:
        x, mean, scale = standardise_non_binary(x)
        units = {"feature_mean": mean.tolist(), "feature_scale": scale.tolist()}
    masks = _split(name, split, targets, seed, label_number)
    data = Data(
        x=torch.from_numpy(as_float32(str(csv_path), x, columns=feature_names)),
        y=torch.from_numpy(targets.y),
        edge_index=edge_index,
        feature_names=feature_names,
        train_mask=masks.train_mask,
        val_mask=masks.val_mask,
        test_mask=masks.test_mask,
        sensitive=torch.from_numpy(targets.sensitive),
        sensitive_name=spec.sensitive,
        sensitive_index=feature_names.index(spec.sensitive),
        num_nodes=num_nodes,
        **units,
    )
    if targets.label_mask is not None and targets.sensitive_mask is not None:
        data.label_mask = torch.from_numpy(targets.label_mask)
        data.sensitive_mask = torch.from_numpy(targets.sensitive_mask)
    return data
