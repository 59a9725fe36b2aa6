"""Density-based and constrained clustering, explained.

What belongs here: ExDBSCAN counterfactual explanations, FairDen fair density-based
clustering, optimal constrained clustering trees (MaxSAT) and clustering metrics.
Imports from :mod:`gnnaudit.graph_ops` only (never from audit, training or cli).
"""

from gnnaudit.clustering.constraints_gen import Constraints, generate_constraints
from gnnaudit.clustering.exdbscan import CounterfactualSet, ExDBSCAN
from gnnaudit.clustering.fairden import FairDen
from gnnaudit.clustering.tree_clustering import ClusteringTree, TreeClustering

__all__ = [
    "ExDBSCAN",
    "CounterfactualSet",
    "FairDen",
    "TreeClustering",
    "ClusteringTree",
    "generate_constraints",
    "Constraints",
]
