"""Training GNN node classifiers with Lightning.

What belongs here: the ``NodeClassifier`` LightningModule, the ``GraphDataModule``, the
counterfactual-audit callback, fine-tuning on evidences and fairness fine-tuning
(``FairFinetune``, the audit's mitigation unit). May import graph_ops, audit and
clustering, never cli.
"""

from gnnaudit.training.audit_callback import CounterfactualAuditCallback
from gnnaudit.training.audit_config import AuditConfig, RunSettings
from gnnaudit.training.audit_pipeline import audit_model, default_units, run_audit
from gnnaudit.training.data_module import GraphDataModule
from gnnaudit.training.fair_finetune import FairFinetune
from gnnaudit.training.finetune import (
    EvidenceFinetuneUnit,
    FinetuneResult,
    finetune_on_evidences,
)
from gnnaudit.training.mitigation import MitigationResult, MitigationUnit, mitigation_metrics
from gnnaudit.training.node_classifier import BACKBONES, NodeClassifier
from gnnaudit.training.train import TrainResult, load_node_classifier, train_node_classifier

__all__ = [
    "BACKBONES",
    "NodeClassifier",
    "GraphDataModule",
    "TrainResult",
    "train_node_classifier",
    "load_node_classifier",
    "CounterfactualAuditCallback",
    "FinetuneResult",
    "finetune_on_evidences",
    "EvidenceFinetuneUnit",
    "FairFinetune",
    "MitigationUnit",
    "MitigationResult",
    "mitigation_metrics",
    "run_audit",
    "audit_model",
    "default_units",
    "AuditConfig",
    "RunSettings",
]
