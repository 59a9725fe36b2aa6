r"""The fair-GNN literature's names of three findings, and the alias table of ``report.json``.

NIFTY (Agarwal, Lakkaraju & Zitnik, UAI 2021) and FairGNN (Dai & Wang, WSDM 2021) report three
fairness figures that gnnaudit computes as findings of its own units; each is computed and
reported **once**, under gnnaudit's name, with the literature's name beside it:

* ``dsp``: the ``statistical parity`` finding of the group-fairness unit (positive class 1),
  NIFTY's :math:`\Delta_{SP} = |P(\hat y = 1 \mid s = 0) - P(\hat y = 1 \mid s = 1)|`;
* ``deo``: its ``equal opportunity`` finding, :math:`\Delta_{EO} = |P(\hat y = 1 \mid y = 1,
  s = 0) - P(\hat y = 1 \mid y = 1, s = 1)|`;
* ``cf``: the ``counterfactual flip (graph scope)`` finding of the sensitivity unit, NIFTY's
  counterfactual unfairness: the share of audited nodes whose decision changes when
  :math:`s \mapsto 1 - s` for every node at once.

The units write :func:`literature_statistic` into the finding's ``statistic`` (e.g.
``"statistical parity difference (NIFTY's ΔSP)"``), so the row names both vocabularies, and
:func:`alias_table` finds the rows again for ``report.json``'s ``aliases`` entry:
``{"dsp": {"row": i, "finding": ..., "feature": ..., "value": ..., "ci_low": ...,
"ci_high": ..., "flagged": ...}, ...}``, ``row`` being the finding's index in ``findings``. A
key is absent when its finding is (e.g. ``deo`` without labels, ``cf`` when the attribute is
not a model input). With several sensitive attributes the aliases point at the primary one's
findings (the dataset's ``sensitive_name``), as the literature reports one attribute.

Beyond NIFTY's binary case the findings keep their own conventions (stated in their
explanations): with more than two classes or groups the gaps are the largest over classes and
group pairs, and the flip of a categorical attribute moves a node to every other value.
AUROC, F1 and instability, which no finding repeats, are rows of the literature unit
(:mod:`gnnaudit.audit.fairness.literature_unit`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["LITERATURE_ALIASES", "literature_statistic", "literature_label", "alias_table"]

#: key -> (finding, gnnaudit's statistic, the literature's name)
LITERATURE_ALIASES: dict[str, tuple[str, str, str]] = {
    "dsp": ("statistical parity", "statistical parity difference", "NIFTY's ΔSP"),
    "deo": ("equal opportunity", "equal opportunity difference", "NIFTY's ΔEO"),
    "cf": ("counterfactual flip (graph scope)", "flip rate", "NIFTY's counterfactual unfairness"),
}
#: the literature's names in ASCII, for explanations printed on a terminal
_ASCII = {"dsp": "delta SP", "deo": "delta EO", "cf": "counterfactual unfairness"}


def literature_statistic(key: str) -> str:
    """The ``statistic`` of the finding that is the literature's ``key`` (module docstring),
    e.g. ``"flip rate (NIFTY's counterfactual unfairness)"``."""
    _, statistic, name = LITERATURE_ALIASES[key]
    return f"{statistic} ({name})"


def literature_label(key: str) -> str:
    """One ASCII sentence naming the literature's figure, for a finding's explanation."""
    return (
        f"NIFTY and FairGNN report this figure as {_ASCII[key]} ({key} in report.json's aliases)."
    )


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def alias_table(findings: pd.DataFrame, sensitive_name: str | None = None) -> dict[str, Any]:
    """``{key: {row, finding, feature, statistic, value, ci_low, ci_high, flagged}}`` for each
    literature figure present in ``findings`` (a findings DataFrame), the row about
    ``sensitive_name`` first, else the first labelled row (module docstring)."""
    out: dict[str, Any] = {}
    for key, (finding, _, _) in LITERATURE_ALIASES.items():
        rows = findings[
            (findings["finding"] == finding) & (findings["statistic"] == literature_statistic(key))
        ]
        if sensitive_name is not None and (rows["feature"] == sensitive_name).any():
            rows = rows[rows["feature"] == sensitive_name]
        if rows.empty:
            continue
        index = rows.index[0]
        row = rows.loc[index]
        out[key] = {
            "row": int(findings.index.get_loc(index)),
            "finding": str(row["finding"]),
            "feature": str(row["feature"]),
            "statistic": str(row["statistic"]),
            "value": _number(row["value"]),
            "ci_low": _number(row["ci_low"]),
            "ci_high": _number(row["ci_high"]),
            "flagged": bool(row["flagged"]),
        }
    return out
