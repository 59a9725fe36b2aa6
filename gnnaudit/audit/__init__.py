"""GNN audits built on counterfactual evidence.

What belongs here: counterfactual-evidence search (exact, sorted, the paper's index, faiss),
discrimination scores, group fairness, error verification and the audit report.
Imports from :mod:`gnnaudit.graph_ops` only (never from clustering, training or cli).
"""

from gnnaudit.audit.discrimination import discrimination_scores, feature_rank
from gnnaudit.audit.error_verification import error_verification
from gnnaudit.audit.evidence import CounterfactualEvidence
from gnnaudit.audit.group_fairness import GroupFairness, group_fairness
from gnnaudit.audit.report import AuditReport, pair_comparison
from gnnaudit.audit.search_exact import ExactSearcher
from gnnaudit.audit.search_faiss import FaissSearcher
from gnnaudit.audit.search_index import IndexSearcher
from gnnaudit.audit.search_sorted import SortedSimilaritySearcher

__all__ = [
    "CounterfactualEvidence",
    "ExactSearcher",
    "SortedSimilaritySearcher",
    "IndexSearcher",
    "FaissSearcher",
    "discrimination_scores",
    "feature_rank",
    "group_fairness",
    "GroupFairness",
    "error_verification",
    "AuditReport",
    "pair_comparison",
]
