"""PyG ``BaseTransform`` wrappers of the graph primitives, in one place.

Each transform takes a :class:`torch_geometric.data.Data`, returns a copy with new attributes and
never mutates its input:

* :class:`KSEmbedding` writes ``data.ks`` (aggregated kernel-similarity features, CE Eq. 5-7);
* :class:`CoreGraphTransform` writes ``data.core_mask``, ``data.cluster``,
  ``data.core_edge_index`` and ``data.core_edge_weight`` (DBSCAN core graph);
* :class:`DCTreeTransform` writes ``data.core_distance``, ``data.mst_edge_index`` and
  ``data.mst_weight`` (mutual-reachability MST behind the dc-distance tree).
"""

from gnnaudit.graph_ops.core_graph import CoreGraphTransform
from gnnaudit.graph_ops.dc_tree import DCTreeTransform
from gnnaudit.graph_ops.neighbourhood import KSEmbedding

__all__ = ["KSEmbedding", "CoreGraphTransform", "DCTreeTransform"]
