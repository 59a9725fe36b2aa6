"""GNN audits built on counterfactual evidence.

What belongs here: counterfactual-evidence search (exact, the paper's index, faiss),
discrimination scores, group fairness, error verification and the audit report.
Imports from :mod:`gnnaudit.graph_ops` only (never from clustering, training or cli).
"""

__all__: list[str] = []
