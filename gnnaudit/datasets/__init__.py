"""Dataset loaders and generators.

Graph loaders return :class:`torch_geometric.data.Data`; tabular loaders return
:class:`~gnnaudit.datasets.tabular.TabularData`. Nothing here downloads at test time.
"""

from gnnaudit.datasets.graph_files import load_graph, save_graph
from gnnaudit.datasets.nifty import NIFTY_DATASETS, load_nifty
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

__all__ = [
    "TabularData",
    "load_tabular",
    "three_moons",
    "NIFTY_DATASETS",
    "PLANETOID_DATASETS",
    "PYG_DATASETS",
    "SYNTHETIC_FEATURES",
    "NodeSplit",
    "attach_masks",
    "clean_edge_index",
    "load_graph",
    "load_nifty",
    "load_planetoid",
    "load_pyg",
    "random_masks",
    "save_graph",
    "stratified_masks",
    "synthetic_credit_graph",
]
