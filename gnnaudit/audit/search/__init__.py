"""Counterfactual-evidence search: the :class:`CounterfactualEvidence` estimator, its five
backends (exact, sorted similarity, the paper's index, faiss, sharded faiss) with their shared pieces
(similarity blocks, top-k selection, spherical k-means and caps), and the evidence results.

Imports nothing else of :mod:`gnnaudit.audit` (the bottom layer of the audit, beside
:mod:`gnnaudit.audit.report`).
"""

from gnnaudit.audit.search.evidence import BACKENDS, CounterfactualEvidence
from gnnaudit.audit.search.exact import ExactSearcher
from gnnaudit.audit.search.faiss_search import FaissSearcher
from gnnaudit.audit.search.index import IndexSearcher
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.audit.search.sharded import ShardedSearcher
from gnnaudit.audit.search.sorted_scan import SortedSimilaritySearcher

__all__ = [
    "BACKENDS",
    "CounterfactualEvidence",
    "ExactSearcher",
    "FaissSearcher",
    "GlobalEvidence",
    "IndexSearcher",
    "LocalEvidence",
    "ShardedSearcher",
    "SortedSimilaritySearcher",
]
