"""Graph-native primitives every method is built on.

What belongs here: objects that turn raw data into a graph and answer queries on it, with no
knowledge of the audits or clusterings built on top: L-hop kernel-similarity propagation
(a PyG ``MessagePassing``), the DBSCAN core graph, the dc-distance ultrametric tree, the
must-link / cannot-link constraint graph, and PyG ``BaseTransform`` wrappers of them.

Layer rule: this package imports nothing else from gnnaudit except the leaf modules
:mod:`gnnaudit.errors` and :mod:`gnnaudit._validation`.
"""

from gnnaudit.graph_ops.constraints import ConstraintGraph, DistanceClasses, distance_classes
from gnnaudit.graph_ops.core_graph import CoreGraph, CoreGraphTransform
from gnnaudit.graph_ops.dc_tree import DCTree, DCTreeTransform
from gnnaudit.graph_ops.neighbourhood import KSEmbedding, ks_embedding

__all__ = [
    "ks_embedding",
    "KSEmbedding",
    "CoreGraph",
    "CoreGraphTransform",
    "DCTree",
    "DCTreeTransform",
    "ConstraintGraph",
    "DistanceClasses",
    "distance_classes",
]
