"""The audit's answer in a few plain sentences, composed from its findings.

"Do the model's decisions depend on the sensitive attribute, how strongly, and where are the
cases?" The verdict is derived from the findings table only (never from a section's free text),
so the JSON, Markdown and HTML reports and the command line say the same thing:

* a degenerate model is named first: its fairness figures carry no information;
* otherwise a flagged counterfactual flip (the decision changes when the attribute alone
  changes) answers "yes, the decisions depend on it", with its values and intervals, and lists
  the other flagged findings beside it;
* flagged group gaps or evidence contrast without a flagged flip answer "outcomes differ between
  the groups, but not through the attribute itself": the model reaches the difference through
  other inputs (proxies) or the data's groups differ;
* none flagged answers "no" at the documented thresholds, with the largest estimated flip
  effect so the reader sees how close it came;
* a flagged error verification adds where the model errs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gnnaudit.audit.report.section import Finding

__all__ = ["compose_verdict"]


def _figure(f: Finding) -> str:
    text = f"{f.finding} {f.value:.3g}"
    if math.isfinite(f.ci_low) and math.isfinite(f.ci_high):
        text += f" (CI {f.ci_low:.3g} to {f.ci_high:.3g})"
    elif math.isfinite(f.p_value):
        text += f" (p = {f.p_value:.3g})"
    return text


def compose_verdict(
    findings: Sequence[Finding],
    *,
    sensitive_name: str | None,
    degenerate_reason: str | None = None,
) -> str:
    """The verdict for ``findings`` (see the module docstring)."""
    parts: list[str] = []
    if degenerate_reason is not None:
        parts.append(
            f"The model is degenerate ({degenerate_reason}): its decisions carry too little "
            "information for a fairness reading, and the evidence-based sections are marked "
            "not meaningful. Improve the model before drawing conclusions."
        )
    about = [f for f in findings if sensitive_name is not None and f.feature == sensitive_name]
    if sensitive_name is None:
        parts.append(
            "No sensitive attribute was given, so the audit cannot say whether decisions depend "
            "on one; it reports model quality, evidences and errors."
        )
    elif about:
        flagged = [f for f in about if f.flagged]
        flips = [f for f in flagged if "flip" in f.finding]
        others = [f for f in flagged if "flip" not in f.finding]
        if flips:
            text = (
                f"Yes: the model's decisions depend on {sensitive_name}: changing it alone "
                "changes decisions. Flagged: " + "; ".join(_figure(f) for f in flips) + "."
            )
            if others:
                text += " Also flagged: " + "; ".join(_figure(f) for f in others) + "."
            parts.append(text)
        elif others:
            computed = any("flip" in f.finding for f in about)
            how = (
                f"changing {sensitive_name} alone does not change decisions above the "
                "documented threshold, so the model reaches the difference through other "
                "inputs (proxies of it) or the groups differ in the data"
                if computed
                else f"{sensitive_name} is not a model input, so the difference comes through "
                "other inputs (proxies of it) or from the data"
            )
            parts.append(
                f"Outcomes differ between the {sensitive_name} groups, but not through the "
                f"attribute itself: {how}. Flagged: " + "; ".join(_figure(f) for f in others) + "."
            )
        elif degenerate_reason is None:
            effects = [f for f in about if math.isfinite(f.value) and "flip" in f.finding]
            largest = max(effects, key=lambda f: f.value) if effects else None
            text = (
                f"No finding shows that decisions depend on {sensitive_name} at the documented "
                "thresholds"
            )
            if largest is not None:
                text += f"; the largest estimated effect is {_figure(largest)}"
            parts.append(text + ".")
    else:
        parts.append(
            f"No statistic about {sensitive_name} could be computed (see the sections' notes)."
        )
    errors = [f for f in findings if f.finding == "error verification" and f.flagged]
    if errors:
        parts.append(
            "The model errs more often on its most similar differently-decided pairs "
            f"({_figure(errors[0])}); the evidence pairs section lists them."
        )
    return " ".join(parts)
