"""The documented thresholds of the flip and group-gap findings and the flip flag rule.

In the report layer, which imports no other part of the audit: the sensitivity unit, the
proxies unit and the group-fairness unit flag with them, and the verdict
(:mod:`gnnaudit.audit.report.verdict`) and the summary card
(:mod:`gnnaudit.audit.report.summary`) read them. The flip rule is explained in
:mod:`gnnaudit.audit.sensitivity.unit`, the gap rules in
:mod:`gnnaudit.audit.fairness.group_fairness`.
"""

from __future__ import annotations

import math

__all__ = [
    "MIN_FLIP_EFFECT",
    "NEGLIGIBLE_FLIP",
    "FLIP_RULE",
    "FOUR_FIFTHS",
    "EOD_THRESHOLD",
    "flip_flagged",
]

#: the material flip rate: a flip is flagged only when its interval reaches this level
MIN_FLIP_EFFECT = 0.05
#: flip rates at or below this share of the audited decisions are negligible: a flip is flagged
#: only when its interval's lower end lies above it, and a flagged group gap beside negligible
#: flips is attributed to other inputs or the data, not to the attribute itself
NEGLIGIBLE_FLIP = 0.01
#: the four-fifths rule: a disparate-impact ratio below this is adverse impact (a statistical
#: parity gap is flagged when the ratio is below it and the gap's interval lies above 0)
FOUR_FIFTHS = 0.8
#: equal-opportunity differences whose interval lies above this are flagged
EOD_THRESHOLD = 0.1

#: the rule in words, for findings and notes
FLIP_RULE = (
    f"Flagged when the interval's lower end lies above {NEGLIGIBLE_FLIP:.0%} (more than a "
    f"negligible share) and its upper end reaches {MIN_FLIP_EFFECT:.0%}."
)


def flip_flagged(ci_low: float, ci_high: float) -> bool:
    """The flag rule of a flip rate: its interval lies above :data:`NEGLIGIBLE_FLIP` and reaches
    :data:`MIN_FLIP_EFFECT`."""
    return (
        math.isfinite(ci_low)
        and math.isfinite(ci_high)
        and ci_low > NEGLIGIBLE_FLIP
        and ci_high >= MIN_FLIP_EFFECT
    )
