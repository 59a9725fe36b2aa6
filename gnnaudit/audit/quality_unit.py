"""The model-quality audit unit (flat: beside model_quality, which the context imports).

:class:`ModelQuality` runs first; the statistic itself is
:func:`~gnnaudit.audit.model_quality.assess_model`, computed once by the context
(``ctx.quality``) because every later unit reads its degenerate-model verdict. A module of its
own because the unit imports the context, and the context imports model_quality: one module
would import the context in a circle."""

from __future__ import annotations

from gnnaudit.audit.context import AuditContext
from gnnaudit.audit.model_quality import UNIT_NAME, UNIT_TITLE, ModelQualityResult
from gnnaudit.audit.unit import AuditUnit

__all__ = ["ModelQuality"]


class ModelQuality(AuditUnit):
    """Audit unit: accuracy against the majority rate and the degenerate-model guard (no
    options). Runs first; later units read ``ctx.degenerate_reason``."""

    name = UNIT_NAME
    title = UNIT_TITLE

    def run(self, ctx: AuditContext) -> ModelQualityResult:
        return ctx.quality
