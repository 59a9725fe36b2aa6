"""Graph-native primitives every method is built on.

What belongs here: objects that turn raw data into a graph and answer queries on it, with no
knowledge of the audits or clusterings built on top: L-hop kernel-similarity propagation
(a PyG ``MessagePassing``), the DBSCAN core graph, the dc-distance ultrametric tree, the
must-link / cannot-link constraint graph, and PyG ``BaseTransform`` wrappers of them.

Layer rule: this package imports nothing else from gnnaudit but :mod:`gnnaudit.safe_io` and the
leaf modules (:mod:`gnnaudit.errors`, ``_validation``, ``_optional``, ``_aliases``, ``_lazy``).

Import cost: the numpy / scipy primitives (:class:`CoreGraph`, :class:`DCTree`,
:class:`ConstraintGraph`, :func:`distance_classes`) load eagerly; the names that need ``torch``
/ ``torch_geometric`` (:func:`ks_embedding`, :class:`KSEmbedding` and the transforms) load on
first access, so ``import gnnaudit.clustering`` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnaudit._lazy import lazy_names
from gnnaudit.graph_ops.constraints import ConstraintGraph
from gnnaudit.graph_ops.core_graph import CoreGraph
from gnnaudit.graph_ops.dc_tree import DCTree
from gnnaudit.graph_ops.distance_classes import DistanceClasses, distance_classes

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.graph_ops.neighbourhood import KSEmbedding, ks_embedding
    from gnnaudit.graph_ops.partitioned import partitioned_ks
    from gnnaudit.graph_ops.transforms import (
        ConstraintGraphTransform,
        CoreGraphTransform,
        DCTreeTransform,
    )

__all__ = [
    "ks_embedding",
    "KSEmbedding",
    "partitioned_ks",
    "CoreGraph",
    "CoreGraphTransform",
    "DCTree",
    "DCTreeTransform",
    "ConstraintGraph",
    "ConstraintGraphTransform",
    "DistanceClasses",
    "distance_classes",
]

#: names imported on first access (they import torch / torch_geometric)
_LAZY = {
    "ks_embedding": "gnnaudit.graph_ops.neighbourhood",
    "KSEmbedding": "gnnaudit.graph_ops.neighbourhood",
    "partitioned_ks": "gnnaudit.graph_ops.partitioned",
    "CoreGraphTransform": "gnnaudit.graph_ops.transforms",
    "DCTreeTransform": "gnnaudit.graph_ops.transforms",
    "ConstraintGraphTransform": "gnnaudit.graph_ops.transforms",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
