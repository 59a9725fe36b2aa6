"""gnnaudit: audit graph neural networks and explain density-based clusterings.

Subpackages
-----------
graph_ops
    graph-native primitives (kernel-similarity propagation, DBSCAN core graph,
    dc-distance tree, must-link / cannot-link constraint graph) and PyG transforms.
audit
    counterfactual-evidence search, the fairness / error audits built on it, and the audit's
    entry point (``audit_model`` / ``run_audit``, also here at the top level).
clustering
    ExDBSCAN, FairDen, constrained clustering trees and clustering metrics.
training
    Lightning node classifier, data module, audit callback and fine-tuning.
datasets
    graph and tabular loaders and generators.
"""

from gnnaudit._version import __version__
from gnnaudit.errors import GnnAuditError, InfeasibleError, InvalidInputError, NotFittedError

__all__ = [
    "audit_model",
    "run_audit",
    "GnnAuditError",
    "InvalidInputError",
    "InfeasibleError",
    "NotFittedError",
    "__version__",
]


def __getattr__(name: str):  # lazy: ``import gnnaudit`` must not import torch
    if name in ("audit_model", "run_audit"):
        from gnnaudit.audit import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'gnnaudit' has no attribute {name!r}")
