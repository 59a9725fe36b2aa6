"""The audit's entry point: :func:`audit_model` / :func:`run_audit` from a model and a graph to
the report, with its options as typed objects (``config=`` :class:`AuditConfig`, ``options=``
:class:`AuditOptions`, ``settings=`` :class:`RunSettings`, or their fields as flat keywords).

- :mod:`~gnnaudit.audit.pipeline.run`: :func:`audit_model` (a dataset name or a graph, the
  model's preprocessing, the report folder) and :func:`run_audit` (options, the shared
  context, the units in order);
- :mod:`~gnnaudit.audit.pipeline.config`: :class:`AuditConfig` (the default units' options),
  :class:`RunSettings` (how the model is called, the Dask client), :func:`default_units`, the
  flat-keyword shorthand (:func:`~gnnaudit.audit.pipeline.config.build_configs`);
- :mod:`~gnnaudit.audit.pipeline.assemble`: the report of a finished audit (verdict,
  configuration, run information);
- :mod:`~gnnaudit.audit.pipeline.registry`: the units another package provides by name
  (:mod:`gnnaudit.training` registers fine-tuning on evidences and the mitigation, which
  need Lightning; the pipeline imports training only when one of them is asked for);
- :mod:`~gnnaudit.audit.pipeline.named_graph`: the fair-GNN graphs by name (``"credit"`` ...).

The pipeline sits on top of the audit: it may import every other part of it (the core, the
report, the search, the statistics' subpackages and, with a client only,
:mod:`gnnaudit.audit.distributed`); nothing in the audit imports the pipeline. Its old paths
(``gnnaudit.training.audit_pipeline``, ``audit_config``, ``named_graph``, and the names
``gnnaudit.training.run_audit`` ...) still work, with a DeprecationWarning, until 0.3.0.
"""

from gnnaudit.audit.context import AuditOptions
from gnnaudit.audit.pipeline.config import AuditConfig, RunSettings, default_units
from gnnaudit.audit.pipeline.registry import build_unit, register_unit, registered_units
from gnnaudit.audit.pipeline.run import (
    FINETUNE_MAX_NODES,
    apply_transform,
    audit_model,
    resolve_finetune,
    run_audit,
)

__all__ = [
    "audit_model",
    "run_audit",
    "AuditConfig",
    "AuditOptions",
    "RunSettings",
    "default_units",
    "apply_transform",
    "resolve_finetune",
    "FINETUNE_MAX_NODES",
    "register_unit",
    "build_unit",
    "registered_units",
]
