"""GNN audits built on counterfactual evidence, shaped as units that feed one report.

What belongs here: counterfactual-evidence search (exact, sorted, the paper's index, faiss), the audit
statistics (each one module: model quality, group fairness, discrimination scores, error
verification, evidence pairs, the embedding audit ...), the shared audit context, and the report with its findings.
Each statistic is an :class:`AuditUnit` taking the shared :class:`AuditContext` (model, data,
options, cached predictions and evidences) and returning a result with ``to_frame()``, a
report section and findings. Imports from :mod:`gnnaudit.graph_ops` and
:mod:`gnnaudit.clustering` only (never from training or cli).
"""

from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.contrast_unit import EvidenceContrastAudit, EvidenceContrastUnit
from gnnaudit.audit.discrimination import (
    DiscriminationResult,
    DiscriminationUnit,
    discrimination_scores,
    feature_rank,
)
from gnnaudit.audit.embedding_audit import EmbeddingAudit
from gnnaudit.audit.embedding_unit import EmbeddingStructureResult, EmbeddingStructureUnit
from gnnaudit.audit.embeddings import final_layer_name, node_embeddings
from gnnaudit.audit.error_verification import (
    ErrorVerificationResult,
    ErrorVerificationUnit,
    error_verification,
)
from gnnaudit.audit.evidence import CounterfactualEvidence
from gnnaudit.audit.evidence_contrast import evidence_contrast
from gnnaudit.audit.evidence_pairs import EvidencePairsResult, EvidencePairsUnit, pair_comparison
from gnnaudit.audit.evidence_result import GlobalEvidence, LocalEvidence
from gnnaudit.audit.group_fairness import GroupFairness, GroupFairnessUnit, group_fairness
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.model_quality import ModelQuality, ModelQualityResult
from gnnaudit.audit.report import AuditReport
from gnnaudit.audit.report_section import Figure, Finding, ReportSection
from gnnaudit.audit.search_exact import ExactSearcher
from gnnaudit.audit.search_faiss import FaissSearcher
from gnnaudit.audit.search_index import IndexSearcher
from gnnaudit.audit.search_sorted import SortedSimilaritySearcher
from gnnaudit.audit.sensitivity import counterfactual_flip, feature_sensitivity
from gnnaudit.audit.sensitivity_unit import SensitivityAudit, SensitivityUnit
from gnnaudit.audit.unit import AuditResult, AuditUnit, run_units

__all__ = [
    "CounterfactualEvidence",
    "LocalEvidence",
    "GlobalEvidence",
    "ExactSearcher",
    "SortedSimilaritySearcher",
    "IndexSearcher",
    "FaissSearcher",
    "AuditContext",
    "AuditOptions",
    "AuditUnit",
    "AuditResult",
    "run_units",
    "ModelAdapter",
    "ModelQuality",
    "ModelQualityResult",
    "discrimination_scores",
    "feature_rank",
    "DiscriminationUnit",
    "DiscriminationResult",
    "group_fairness",
    "GroupFairness",
    "GroupFairnessUnit",
    "error_verification",
    "ErrorVerificationUnit",
    "ErrorVerificationResult",
    "pair_comparison",
    "EvidencePairsUnit",
    "counterfactual_flip",
    "feature_sensitivity",
    "SensitivityUnit",
    "SensitivityAudit",
    "evidence_contrast",
    "EvidenceContrastUnit",
    "EvidenceContrastAudit",
    "EvidencePairsResult",
    "node_embeddings",
    "final_layer_name",
    "EmbeddingAudit",
    "EmbeddingStructureUnit",
    "EmbeddingStructureResult",
    "AuditReport",
    "Finding",
    "ReportSection",
    "Figure",
]
