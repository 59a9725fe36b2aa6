"""Training GNN node classifiers with Lightning.

What belongs here: the ``NodeClassifier`` LightningModule, the ``GraphDataModule``, the
counterfactual-audit callback, fine-tuning on evidences and fairness fine-tuning
(``FairFinetune``, the audit's mitigation unit). May import graph_ops, audit and
clustering, never cli.
"""

from typing import TYPE_CHECKING, Any

from gnnaudit.audit import _moved

_moved.install()  # the old paths of what moved to the audit (gnnaudit.training.audit_pipeline ...)

#: public name -> the module that defines it. Imported on first use (PEP 562), so that
#: ``gnnaudit.audit_model`` on a plain PyTorch model never loads Lightning (about 5 s); the
#: Lightning classes come in only when they are used.
_LAZY = {
    "CounterfactualAuditCallback": "audit_callback",
    "AuditConfig": "audit_config",
    "RunSettings": "audit_config",
    "audit_model": "audit_pipeline",
    "default_units": "audit_pipeline",
    "run_audit": "audit_pipeline",
    "GraphDataModule": "data_module",
    "FairFinetune": "fair_finetune",
    "EvidenceFinetuneUnit": "finetune",
    "FinetuneResult": "finetune",
    "finetune_on_evidences": "finetune",
    "MitigationResult": "mitigation",
    "MitigationUnit": "mitigation",
    "mitigation_metrics": "mitigation",
    "BACKBONES": "node_classifier",
    "NodeClassifier": "node_classifier",
    "TrainResult": "train",
    "load_node_classifier": "train",
    "train_node_classifier": "train",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
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
    from gnnaudit.training.mitigation import (
        MitigationResult,
        MitigationUnit,
        mitigation_metrics,
    )
    from gnnaudit.training.node_classifier import BACKBONES, NodeClassifier
    from gnnaudit.training.train import TrainResult, load_node_classifier, train_node_classifier


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gnnaudit.training' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"gnnaudit.training.{module}"), name)
    globals()[name] = value  # cache: the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
