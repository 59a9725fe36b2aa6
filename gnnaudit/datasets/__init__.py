"""Dataset loaders and generators.

Graph loaders return :class:`torch_geometric.data.Data`; tabular loaders return
:class:`~gnnaudit.datasets.tabular.TabularData`. Nothing downloads unless asked
(:class:`NiftyDataset`, ``load_nifty(..., download=True)``: SHA-256-checked files from the
reference repositories). Every file is read through :mod:`gnnaudit.safe_io` (no code from data
files, one-line errors).

* :func:`load_graph` / :func:`save_graph`: a user's own graph as a ``.pt`` file, an ``.npz``
  file or a folder with ``nodes.csv`` and ``edges.csv`` (formats in
  :mod:`gnnaudit.datasets.graph_files`).
* :func:`read_graph`: any node table and edge table (CSV, Parquet or DataFrames) with named
  id / edge / label / split columns and text columns encoded by a declared rule
  (:mod:`gnnaudit.datasets.graph_read`).
* :func:`load_nifty` / :class:`NiftyDataset`: the fair-GNN graphs (NIFTY's German, Bail,
  Credit, whose missing edges are built by NIFTY's rule; FairGNN's NBA, Pokec-z/n), with the
  published splits on request; :func:`nifty_similarity_edges`: that rule, exact and blockwise.
* :func:`load_planetoid`, :func:`load_pyg`: benchmark graphs from their raw files; :func:`synthetic_credit_graph`: the demo graph.
* :func:`load_tabular`, :func:`three_moons`: tables for the clustering methods.

Importing the package imports no loader: each name loads its module on first use (PEP 562,
:func:`gnnaudit._lazy.lazy_names`), so the tabular commands (``tree-cluster``, ``fairden``,
``explain-dbscan``) and ``from gnnaudit.datasets import load_tabular`` never import torch or PyG
(4-5 s of a command's start here: ``benchmarks/results/cli_start.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnaudit._lazy import lazy_names

#: public name -> the module of this package that defines it (imported on first use)
_LAZY = {
    "load_graph": "graph_files",
    "save_graph": "graph_files",
    "read_graph": "graph_read",
    "NIFTY_DATASETS": "nifty",
    "NIFTY_SPLITS": "nifty",
    "load_nifty": "nifty",
    "NiftyDataset": "nifty_dataset",
    "NIFTY_THRESHOLDS": "nifty_edges",
    "nifty_similarity_edges": "nifty_edges",
    "PLANETOID_DATASETS": "pyg",
    "PYG_DATASETS": "pyg",
    "load_planetoid": "pyg",
    "load_pyg": "pyg",
    "NodeSplit": "splits",
    "attach_masks": "splits",
    "clean_edge_index": "splits",
    "random_masks": "splits",
    "stratified_masks": "splits",
    "SYNTHETIC_FEATURES": "synthetic",
    "synthetic_credit_graph": "synthetic",
    "TabularData": "tabular",
    "load_tabular": "tabular",
    "three_moons": "tabular",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from gnnaudit.datasets.graph_files import load_graph, save_graph
    from gnnaudit.datasets.graph_read import read_graph
    from gnnaudit.datasets.nifty import NIFTY_DATASETS, NIFTY_SPLITS, load_nifty
    from gnnaudit.datasets.nifty_dataset import NiftyDataset
    from gnnaudit.datasets.nifty_edges import NIFTY_THRESHOLDS, nifty_similarity_edges
    from gnnaudit.datasets.pyg import PLANETOID_DATASETS, PYG_DATASETS, load_planetoid, load_pyg
    from gnnaudit.datasets.splits import (
        NodeSplit,
        attach_masks,
        clean_edge_index,
        random_masks,
        stratified_masks,
    )
    from gnnaudit.datasets.synthetic import SYNTHETIC_FEATURES, synthetic_credit_graph
    from gnnaudit.datasets.tabular import TabularData, load_tabular, three_moons


__getattr__, __dir__ = lazy_names(__name__, _LAZY)

__all__ = [
    "TabularData",
    "load_tabular",
    "three_moons",
    "NIFTY_DATASETS",
    "NIFTY_SPLITS",
    "NIFTY_THRESHOLDS",
    "NiftyDataset",
    "nifty_similarity_edges",
    "PLANETOID_DATASETS",
    "PYG_DATASETS",
    "SYNTHETIC_FEATURES",
    "NodeSplit",
    "attach_masks",
    "clean_edge_index",
    "load_graph",
    "read_graph",
    "load_nifty",
    "load_planetoid",
    "load_pyg",
    "random_masks",
    "save_graph",
    "stratified_masks",
    "synthetic_credit_graph",
]
