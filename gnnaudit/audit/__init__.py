"""The audit package's front door (flat: it re-exports the public names of every part): GNN
audits built on counterfactual evidence, shaped as units that feed one report.

The package is layered by job (each arrow reads "may import"; ``tests/test_base.py`` records
it):

- :mod:`gnnaudit.audit.report` and :mod:`gnnaudit.audit.search` are the bottom: the report
  (sections, findings, renderers, verdict) and the counterfactual-evidence search (exact,
  sorted, the paper's index, faiss, with its results). Neither imports the rest of the audit.
- the core beside this file: :mod:`~gnnaudit.audit.context` (the shared
  :class:`AuditContext`), :mod:`~gnnaudit.audit.unit` (:class:`AuditUnit`, :func:`run_units`),
  :mod:`~gnnaudit.audit.result`, :mod:`~gnnaudit.audit.model_adapter`,
  :mod:`~gnnaudit.audit.model_quality`, :mod:`~gnnaudit.audit.quality_unit`,
  :mod:`~gnnaudit.audit.sensitive`, :mod:`~gnnaudit.audit.bootstrap`,
  :mod:`~gnnaudit.audit.intervals` and :mod:`~gnnaudit.audit.interventions` -> report, search.
  They stay flat because every subpackage above uses them; each says so in its first line.
- the statistics, each a subpackage with its units: :mod:`gnnaudit.audit.sensitivity`,
  :mod:`gnnaudit.audit.fairness`, :mod:`gnnaudit.audit.embedding`,
  :mod:`gnnaudit.audit.proxies` -> core, report, search (never each other, except that
  fairness and proxies read sensitivity's flip test).
- :mod:`gnnaudit.audit.distributed`: the Dask path of ``client=`` -> core, sensitivity;
  imported only when a client is given.
- :mod:`gnnaudit.audit.pipeline`: the entry point (:func:`audit_model`, :func:`run_audit`,
  :class:`AuditConfig`) -> everything above; nothing imports it but this file.

Each statistic is an :class:`AuditUnit` taking the shared :class:`AuditContext` (model, data,
options, cached predictions and evidences) and returning a result with ``to_frame()``, a
report section and findings. Imports from :mod:`gnnaudit.graph_ops`,
:mod:`gnnaudit.clustering` and :mod:`gnnaudit.datasets` only (never from training or cli:
the training layer registers its fine-tuning and mitigation units with
:mod:`gnnaudit.audit.pipeline.registry`). The old module paths (``gnnaudit.audit.evidence``,
``gnnaudit.audit.dist_store``, ``gnnaudit.training.audit_pipeline`` ...) still import, with a
DeprecationWarning, until 0.3.0 (:mod:`gnnaudit.audit._moved`).
"""

from gnnaudit.audit import _moved
from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.embedding.audit import EmbeddingAudit
from gnnaudit.audit.embedding.node_embeddings import final_layer_name, node_embeddings
from gnnaudit.audit.embedding.unit import EmbeddingStructureResult, EmbeddingStructureUnit
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
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.model_quality import ModelQualityResult
from gnnaudit.audit.pipeline import AuditConfig, RunSettings, audit_model, default_units, run_audit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.report.audit_report import AuditReport
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.search.evidence import CounterfactualEvidence
from gnnaudit.audit.search.exact import ExactSearcher
from gnnaudit.audit.search.faiss_search import FaissSearcher
from gnnaudit.audit.search.index import IndexSearcher
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.audit.search.sorted_scan import SortedSimilaritySearcher
from gnnaudit.audit.sensitivity.flip import counterfactual_flip, feature_sensitivity
from gnnaudit.audit.sensitivity.unit import SensitivityAudit, SensitivityUnit
from gnnaudit.audit.unit import AuditResult, AuditUnit, run_units

_moved.install()

__all__ = [
    "audit_model",
    "run_audit",
    "AuditConfig",
    "RunSettings",
    "default_units",
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
    "LiteratureMetricsUnit",
    "LiteratureMetricsResult",
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
