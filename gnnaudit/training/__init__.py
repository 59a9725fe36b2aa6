"""Training GNN node classifiers with Lightning.

What belongs here: the ``NodeClassifier`` LightningModule, the ``GraphDataModule``, the
counterfactual-audit callback, fine-tuning on evidences and fairness fine-tuning
(``FairFinetune``, the audit's mitigation unit). May import graph_ops, audit and
clustering, never cli.

The audit's pipeline (``run_audit``, ``audit_model``, ``AuditConfig``) lives in
:mod:`gnnaudit.audit.pipeline`; this package registers the two units of the default audit that
need Lightning (``"finetune"``: :class:`EvidenceFinetuneUnit`, ``"mitigate"``:
:class:`MitigationUnit`) with :func:`~gnnaudit.audit.pipeline.registry.register_unit` when it is
imported. ``gnnaudit.training.run_audit`` and the other old names still resolve, with a
DeprecationWarning, until 0.3.0.
"""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from gnnaudit._lazy import lazy_names
from gnnaudit.audit import _moved
from gnnaudit.audit.pipeline.registry import register_unit

_moved.install()  # the old paths of what moved to the audit (gnnaudit.training.audit_pipeline ...)

#: public name -> the module that defines it. Imported on first use (PEP 562), so that
#: ``gnnaudit.audit_model`` on a plain PyTorch model never loads Lightning (about 5 s); the
#: Lightning classes come in only when they are used.
_LAZY = {
    "CounterfactualAuditCallback": "audit_callback",
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


#: names that moved to :mod:`gnnaudit.audit.pipeline` (issue 39), kept here until 0.3.0
MOVED_NAMES = ("run_audit", "audit_model", "default_units", "AuditConfig", "RunSettings")


def _evidence_finetune_unit(**options: Any) -> Any:
    from gnnaudit.training.finetune import EvidenceFinetuneUnit

    return EvidenceFinetuneUnit(**options)


def _mitigation_unit(**options: Any) -> Any:
    from gnnaudit.training.mitigation import MitigationUnit

    return MitigationUnit(**options)


# the audit's units that need Lightning, built (and Lightning imported) only when asked for
register_unit("finetune", _evidence_finetune_unit)
register_unit("mitigate", _mitigation_unit)


_load_lazy, __dir__ = lazy_names(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    if name in MOVED_NAMES:  # not cached: every use of the old spelling warns
        warnings.warn(
            f"gnnaudit.training.{name} is deprecated and will be removed in gnnaudit "
            f"{_moved.REMOVAL_VERSION}; import it from gnnaudit.audit.pipeline (or gnnaudit)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("gnnaudit.audit.pipeline"), name)
    return _load_lazy(name)


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
]
