"""Audit unit: the evidence contrast of the sensitive attribute.

Runs :func:`~gnnaudit.audit.fairness.evidence_contrast.evidence_contrast` on the sensitive attribute
with the audit's local evidences: do a node's counterfactual evidences (look-alike nodes the
model decides differently) differ in the attribute more often than its equally look-alike nodes
with the same decision? The result is ``significant`` when the one-sided test rejects at
:data:`ALPHA` (5%) with a positive difference (the evidence-pair cards then lead with pairs that
differ in the attribute); the finding is *flagged* when it is significant and the difference is
at least :data:`MIN_CONTRAST_EFFECT` (5 percentage points), so that a negligible difference on
a large graph is not reported as a finding.

Cost: the same-prediction neighbours are an exact blocked search over the fitted nodes, so the
unit audits a seeded sample of at most ``max_nodes`` (default :data:`MAX_CONTRAST_NODES`)
audited nodes: time O(max_nodes x m x d) for m fitted nodes of dimension d, memory one 64 MiB
similarity block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gnnaudit._validation import MAX_RESAMPLES, check_int
from gnnaudit.audit.fairness.evidence_contrast import ContrastResult, evidence_contrast
from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.audit.unit import AuditResult, AuditUnit

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.context import AuditContext

__all__ = [
    "EvidenceContrastUnit",
    "EvidenceContrastAudit",
    "ALPHA",
    "MIN_CONTRAST_EFFECT",
    "MAX_CONTRAST_NODES",
]

#: significance level of the contrast's one-sided test
ALPHA = 0.05
#: smallest difference (evidence minus look-alike mismatch rate) the audit flags
MIN_CONTRAST_EFFECT = 0.05
#: default sample of audited nodes the contrast uses
MAX_CONTRAST_NODES = 5000


@dataclass
class EvidenceContrastAudit(AuditResult):
    """The contrast of the sensitive attribute (:class:`ContrastResult`) with the unit's
    reading of it."""

    contrast: ContrastResult
    n_audited: int

    @property
    def significant(self) -> bool:
        """True when the difference is positive and its p-value below :data:`ALPHA`."""
        c = self.contrast
        return bool(c.difference > 0 and c.p_value < ALPHA)

    @property
    def flagged(self) -> bool:
        """Significant and at least :data:`MIN_CONTRAST_EFFECT`."""
        return self.significant and self.contrast.difference >= MIN_CONTRAST_EFFECT

    def to_frame(self) -> pd.DataFrame:
        return self.contrast.to_frame()

    def findings(self) -> list[Finding]:
        c = self.contrast
        level = f"{c.confidence:.0%}"
        return [
            Finding(
                finding="evidence contrast",
                feature=c.feature,
                statistic="evidence minus look-alike mismatch rate",
                value=c.difference,
                ci_low=c.ci_low,
                ci_high=c.ci_high,
                p_value=c.p_value,
                flagged=self.flagged,
                explanation=(
                    f"Among look-alike nodes that the model decides differently, "
                    f"{c.evidence_rate:.1%} have another {c.feature}; among equally look-alike "
                    f"nodes it decides the same way, {c.matched_rate:.1%} do. The difference is "
                    f"{c.difference:+.1%} ({level} CI {c.ci_low:+.1%} to {c.ci_high:+.1%}, "
                    f"p = {c.p_value:.3g}). Flagged when p < {ALPHA} and the difference is at least "
                    f"{MIN_CONTRAST_EFFECT:.0%}: then the decision changes together with "
                    f"{c.feature} among similar nodes."
                ),
            )
        ]

    def report_section(self) -> ReportSection:
        c = self.contrast
        verdict = (
            f"Significant: among similar nodes, the model's decision changes together with "
            f"{c.feature}."
            if self.significant
            else f"Not significant at {ALPHA}: no evidence that decisions change with {c.feature} "
            "among similar nodes."
        )
        notes = [
            f"k = {c.k} evidences and look-alikes per node; p-value from {c.n_perm} "
            "dependence-aware sign flips (look-alike nodes share evidences); a continuous "
            "attribute is compared by quartile."
        ]
        if c.n_nodes + c.n_dropped < self.n_audited:
            notes.append(
                f"A seeded sample of {c.n_nodes + c.n_dropped} of {self.n_audited} audited nodes "
                "was used."
            )
        if c.n_dropped:
            notes.append(f"{c.n_dropped} nodes without evidence or look-alike were left out.")
        return ReportSection(
            key=EvidenceContrastUnit.name,
            title=f"{EvidenceContrastUnit.title} (sensitive: {c.feature})",
            summary=(
                f"Evidences differ in {c.feature} for {c.evidence_rate:.1%} of pairs, same-decision "
                f"look-alikes for {c.matched_rate:.1%}: difference {c.difference:+.3f} "
                f"(p = {c.p_value:.3g}). {verdict}"
            ),
            tables={"contrast": self.to_frame()},
            notes=notes,
            data={
                "difference": c.difference,
                "p_value": c.p_value,
                "significant": self.significant,
            },
        )


class EvidenceContrastUnit(AuditUnit):
    """Audit unit: evidence contrast of the sensitive attribute (module docstring).

    Parameters
    ----------
    k : evidences and look-alikes per node (default: the audit's ``k``).
    n_perm : sign flips of the test.
    max_nodes : sample cap (default :data:`MAX_CONTRAST_NODES`).
    """

    name = "evidence_contrast"
    title = "Evidence contrast"
    requires = ("sensitive_feature", "evidence")
    meaningless_when_degenerate = True

    def __init__(
        self, k: int | None = None, n_perm: int = 1000, max_nodes: int = MAX_CONTRAST_NODES
    ) -> None:
        self.k = None if k is None else check_int("k", k, minimum=1)
        self.n_perm = check_int("n_perm", n_perm, minimum=1, maximum=MAX_RESAMPLES)
        self.max_nodes = check_int("max_nodes", max_nodes, minimum=2)

    def evidence_needed(self, ctx: AuditContext) -> tuple[int, int]:
        return (self.k or ctx.options.k), 0

    def run(self, ctx: AuditContext) -> EvidenceContrastAudit:
        k = self.k or ctx.options.k
        nodes = ctx.nodes
        if nodes.size > self.max_nodes:
            rng = ctx.options.rng(7)
            nodes = np.sort(rng.choice(nodes, self.max_nodes, replace=False))
        column = ctx.sensitive_column
        assert column is not None  # guaranteed by requires
        contrast = evidence_contrast(
            ctx.evidence,
            ctx.data,
            int(column),
            k=k,
            n_perm=self.n_perm,
            random_state=ctx.options.random_state,
            mask=nodes,
            confidence=ctx.options.confidence,
            n_boot=ctx.options.n_boot,
            local=ctx.local_evidence(k),
        )
        return EvidenceContrastAudit(contrast=contrast, n_audited=int(ctx.nodes.size))
