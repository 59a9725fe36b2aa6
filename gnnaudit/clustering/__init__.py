"""Density-based and constrained clustering, explained.

What belongs here: ExDBSCAN counterfactual explanations, FairDen fair density-based
clustering, optimal constrained clustering trees (MaxSAT) and clustering metrics.
Imports from :mod:`gnnaudit.graph_ops` only (never from audit, training or cli).
"""

__all__: list[str] = []
