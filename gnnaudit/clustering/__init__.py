"""Density-based and constrained clustering, explained.

What belongs here: ExDBSCAN counterfactual explanations, FairDen fair density-based
clustering, optimal constrained clustering trees (MaxSAT) and clustering metrics.
Imports from :mod:`gnnaudit.graph_ops` only (never from audit, training or cli).
"""

__all__: list[str] = []

from gnnaudit.clustering.exdbscan import CounterfactualSet, ExDBSCAN  # noqa: E402

__all__ += ["ExDBSCAN", "CounterfactualSet"]

from gnnaudit.clustering.constraints_gen import Constraints, generate_constraints  # noqa: E402
from gnnaudit.clustering.tree_clustering import ClusteringTree, TreeClustering  # noqa: E402

__all__ += ["TreeClustering", "ClusteringTree", "generate_constraints", "Constraints"]

from gnnaudit.clustering.fairden import FairDen  # noqa: E402

__all__ += ["FairDen"]
