"""Audit unit: the evidence contrast of the sensitive attribute (informational, never flagged).

Runs :func:`~gnnaudit.audit.fairness.evidence_contrast.evidence_contrast` on the sensitive
attribute: do a node's counterfactual evidences (look-alike nodes the model decides
differently) differ in the attribute more often than its equally look-alike nodes with the same
decision? "Look-alike" is the kernel similarity *without the attribute's own columns*, so the
attribute does not decide who looks alike (with it, a binary attribute dominates the kernel and
the contrast is positive for models that never read it).

The result is ``significant`` when the one-sided test rejects at :data:`ALPHA` (5%) with a
positive difference (the evidence-pair cards then lead with pairs that differ in the
attribute). The finding is **never flagged**: the contrast is an association between "decided
differently" and "another group" among nodes alike in every other input, and a model that reads
only a proxy of the attribute produces it too. Whether the model *uses* the attribute is the
counterfactual flip tests' question (:mod:`gnnaudit.audit.sensitivity`); the verdict rests on
those, never on the contrast.

Cost: evidences and look-alikes are exact blocked searches over the fitted nodes in the reduced
space, so the unit audits a seeded sample of at most ``max_nodes`` (default
:data:`MAX_CONTRAST_NODES`) audited nodes: time O(max_nodes x m x d) for m fitted nodes of
dimension d, memory one float32 copy of the search space plus one 64 MiB similarity block.
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
    "MAX_CONTRAST_NODES",
]

#: significance level of the contrast's one-sided test
ALPHA = 0.05
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
        """Always False: the contrast is informational (module docstring)."""
        return False

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
                    f"Among nodes alike in every input but {c.feature} that the model decides "
                    f"differently, {c.evidence_rate:.1%} have another {c.feature}; among equally "
                    f"alike nodes it decides the same way, {c.matched_rate:.1%} do. The "
                    f"difference is {c.difference:+.1%} ({level} CI {c.ci_low:+.1%} to "
                    f"{c.ci_high:+.1%}, p = {c.p_value:.3g}). Informational, never flagged: "
                    f"proxies of {c.feature} produce such a difference too, so it does not show "
                    "that the model reads it (the counterfactual flip tests do)."
                ),
            )
        ]

    def report_section(self) -> ReportSection:
        c = self.contrast
        verdict = (
            f"Significant: among nodes alike apart from {c.feature}, the model's decision "
            f"changes together with {c.feature} (an association: proxies produce it too)."
            if self.significant
            else f"Not significant at {ALPHA}: no association between decisions and "
            f"{c.feature} among nodes alike apart from it."
        )
        notes = [
            f"k = {c.k} evidences and look-alikes per node, by the kernel similarity without "
            f"{c.feature}'s own columns; p-value from {c.n_perm} dependence-aware sign flips "
            "(look-alike nodes share evidences); a continuous attribute is compared by "
            "quartile. Informational: never flagged, as proxies of the attribute produce the "
            "same association."
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
        # evidences and look-alikes are searched in the space without the attribute's columns
        return 0, 0

    def run(self, ctx: AuditContext) -> EvidenceContrastAudit:
        k = self.k or ctx.options.k
        nodes = known = ctx.group_nodes  # the audited nodes of known group
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
        )
        return EvidenceContrastAudit(contrast=contrast, n_audited=int(known.size))
