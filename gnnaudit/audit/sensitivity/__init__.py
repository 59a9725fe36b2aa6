"""Counterfactual sensitivity: flip a feature, re-predict, count the changed predictions.

The function API (:func:`counterfactual_flip`, :func:`feature_sensitivity`), the batched engine
behind it (receptive-field batches, node and graph scope), the feature interventions it applies
and the :class:`SensitivityUnit` of the audit. ``gnnaudit.audit.sensitivity`` was one module
before 0.2; its public names are still importable from here.
"""

from gnnaudit.audit.sensitivity.flip import (
    MAX_NODES,
    SAFEGUARD_NODES,
    SCOPES,
    SENSITIVITY_COLUMNS,
    FlipOptions,
    FlipResult,
    counterfactual_flip,
    feature_sensitivity,
    sensitivity_results,
    sensitivity_table,
)
from gnnaudit.audit.sensitivity.unit import SensitivityAudit, SensitivityUnit

__all__ = [
    "FlipResult",
    "counterfactual_flip",
    "sensitivity_results",
    "sensitivity_table",
    "feature_sensitivity",
    "SCOPES",
    "MAX_NODES",
    "SAFEGUARD_NODES",
    "SENSITIVITY_COLUMNS",
    "FlipOptions",
    "SensitivityUnit",
    "SensitivityAudit",
]
