"""Group fairness and the evidence-based fairness statistics: group rates with intervals,
discrimination scores (CE paper Eq. 12) and their feature coding, the evidence contrast of the
sensitive attribute, error verification (Sec. 7.2), the top evidence pairs and the fair-GNN
literature's metrics that no other finding gives (AUROC, F1, instability; NIFTY / FairGNN),
each with its audit unit."""

from gnnaudit.audit.fairness.contrast_unit import EvidenceContrastAudit, EvidenceContrastUnit
from gnnaudit.audit.fairness.discrimination import (
    DiscriminationResult,
    DiscriminationUnit,
    discrimination_scores,
    feature_rank,
)
from gnnaudit.audit.fairness.error_verification import (
    ErrorVerificationResult,
    ErrorVerificationUnit,
    error_verification,
)
from gnnaudit.audit.fairness.evidence_contrast import evidence_contrast
from gnnaudit.audit.fairness.evidence_pairs import (
    EvidencePairsResult,
    EvidencePairsUnit,
    pair_comparison,
)
from gnnaudit.audit.fairness.group_fairness import GroupFairness, GroupFairnessUnit, group_fairness
from gnnaudit.audit.fairness.literature_unit import LiteratureMetricsResult, LiteratureMetricsUnit

__all__ = [
    "DiscriminationResult",
    "DiscriminationUnit",
    "ErrorVerificationResult",
    "ErrorVerificationUnit",
    "EvidenceContrastAudit",
    "EvidenceContrastUnit",
    "EvidencePairsResult",
    "EvidencePairsUnit",
    "GroupFairness",
    "GroupFairnessUnit",
    "LiteratureMetricsResult",
    "LiteratureMetricsUnit",
    "discrimination_scores",
    "error_verification",
    "evidence_contrast",
    "feature_rank",
    "group_fairness",
    "pair_comparison",
]
