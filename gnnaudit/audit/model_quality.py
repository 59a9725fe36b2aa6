"""Is the model worth auditing? (flat: the context computes it once for every later unit)
Accuracy against the majority rate, and the degenerate-model guard.

A fairness table computed on a near-constant model is empty of meaning: a model that predicts
one class almost everywhere has (almost) no counterfactual evidence, its discrimination scores
equal their baselines and its parity gaps are small *because it decides nothing*. The audit
therefore checks the model first. A model is **degenerate** when

* its accuracy on the audited nodes is within :data:`ACCURACY_MARGIN` (1 point, either side) of
  the majority rate (the accuracy of always answering the most frequent true class), or
* it predicts a single class on more than :data:`PREDICTION_SHARE` (95%) of the audited nodes,
  or
* the labels of the audited nodes hold a single class (accuracy then cannot tell the model
  from a constant answer).

A degenerate model gets a flagged finding that says so, and the sections whose statistics become
meaningless are marked "not meaningful" (see :class:`~gnnaudit.audit.unit.AuditUnit`).

**A likely cause: inputs on raw, large scales.** A GNN fed raw columns (an income around
30,000 beside 0/1 codes) often learns little more than one class. When the model is
degenerate, :func:`raw_scale_cause` looks at the inputs the model was given: an input column
that is not 0/1 only is **on a raw, large scale** when its absolute mean or its standard
deviation over all nodes exceeds :data:`LARGE_SCALE` (100). Standardized columns (z-scores:
mean 0, sd 1) and min-max scaled ones ([0, 1]) never do, so the rule names only inputs that
were fed unscaled. The finding, the section and the verdict then name those columns (at most
:data:`MAX_NAMED`, largest first, with their mean and standard deviation) and the fix: train
on standardized inputs (gnnaudit's own training does so by default) and audit with the same
transform (``gnnaudit audit --standardize SCALER`` or ``--transform MODULE:FN``; in Python a
standardized graph or ``audit_model(..., transform=...)``). On inputs of comparable, small
scales nothing is added.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gnnaudit.audit.intervals import binomial_interval
from gnnaudit.audit.report.section import Finding, ReportSection, class_label
from gnnaudit.audit.result import AuditResult

__all__ = [
    "ModelQualityResult",
    "assess_model",
    "large_scale_columns",
    "raw_scale_cause",
    "ACCURACY_MARGIN",
    "PREDICTION_SHARE",
    "LARGE_SCALE",
    "MAX_NAMED",
]

#: a model whose accuracy exceeds the majority rate by less than this is degenerate
ACCURACY_MARGIN = 0.01
#: a model predicting one class on more than this share of the audited nodes is degenerate
PREDICTION_SHARE = 0.95
#: a non-0/1 input column whose absolute mean or standard deviation exceeds this is on a raw,
#: large scale (module doc)
LARGE_SCALE = 100.0
#: at most this many raw-scale columns are named in the degenerate finding
MAX_NAMED = 3
#: key and heading of the model-quality report section (:class:`~gnnaudit.audit.ModelQuality`)
UNIT_NAME = "model_quality"
UNIT_TITLE = "Model quality"


@dataclass
class ModelQualityResult(AuditResult):
    """Accuracy of the model on the audited nodes, its majority baseline and its prediction mix.

    Attributes
    ----------
    n_nodes : audited nodes.
    accuracy, ci_low, ci_high : accuracy on the audited nodes with its exact (Clopper-Pearson) interval
        (NaN without labels).
    majority_rate : share of the most frequent true class among the audited nodes (NaN without
        labels).
    top_class, top_share : the most predicted class and its share of the audited nodes.
    classes : DataFrame ``class, predicted, true`` (counts on the audited nodes).
    split_accuracies : accuracy on each train / val / test mask of the data.
    degenerate_reason : why the model is degenerate in plain words, or None.
    class_names : the user's label values by class id (``data.class_names``), or None; the
        sentences then name classes by them.
    degenerate_cause : the likely cause of a degenerate model and its fix, in plain words
        (:func:`raw_scale_cause`: inputs on raw, large scales), or None.
    """

    n_nodes: int
    accuracy: float
    ci_low: float
    ci_high: float
    majority_rate: float
    top_class: int
    top_share: float
    classes: pd.DataFrame
    split_accuracies: dict[str, float] = field(default_factory=dict)
    degenerate_reason: str | None = None
    class_names: list[str] | None = None
    degenerate_cause: str | None = None

    @property
    def degenerate(self) -> bool:
        """Whether the model is degenerate (``degenerate_reason`` says why)."""
        return self.degenerate_reason is not None

    def to_frame(self) -> pd.DataFrame:
        return self.classes

    def findings(self) -> list[Finding]:
        out = []
        if np.isfinite(self.accuracy):
            out.append(
                Finding(
                    finding="model accuracy",
                    feature="",
                    statistic="accuracy on audited nodes",
                    value=self.accuracy,
                    ci_low=self.ci_low,
                    ci_high=self.ci_high,
                    flagged=False,
                    explanation=(
                        f"The model is right on {self.accuracy:.1%} of the {self.n_nodes} audited "
                        f"nodes (95% CI {self.ci_low:.1%} to {self.ci_high:.1%}); always "
                        f"answering the most frequent class would score {self.majority_rate:.1%}."
                    ),
                )
            )
        if self.degenerate_reason is not None:
            out.append(
                Finding(
                    finding="degenerate model",
                    feature="",
                    statistic="share of the most predicted class",
                    value=self.top_share,
                    flagged=True,
                    explanation=(
                        f"The model is degenerate: {self.degenerate_reason}. Statistics built on "
                        "its decisions (evidences, discrimination scores, feature sensitivity "
                        "ranking, error verification) are marked not meaningful; small parity "
                        "gaps here mean the model decides little, not that it is fair."
                        + (f" {self.degenerate_cause}" if self.degenerate_cause else "")
                    ),
                )
            )
        return out

    def _top(self) -> str:
        return _apposition(self.top_class, self.class_names)

    def report_section(self) -> ReportSection:
        if self.degenerate_reason is not None:
            summary = f"The model is degenerate: {self.degenerate_reason}."
            if self.degenerate_cause:
                summary += f" {self.degenerate_cause}"
        elif np.isfinite(self.accuracy):
            summary = (
                f"Accuracy {self.accuracy:.3f} on the audited nodes against a majority rate of "
                f"{self.majority_rate:.3f}; the most predicted class{self._top()} covers "
                f"{self.top_share:.1%} of them."
            )
        else:
            summary = (
                f"No labels: accuracy is unknown. The most predicted class{self._top()} "
                f"covers {self.top_share:.1%} of the audited nodes."
            )
        return ReportSection(
            key=UNIT_NAME,
            title=UNIT_TITLE,
            summary=summary,
            tables={"predicted and true classes": self.classes},
            notes=[
                f"A model is called degenerate when its accuracy is within "
                f"{ACCURACY_MARGIN:.0%} of the majority rate or when one class takes more than "
                f"{PREDICTION_SHARE:.0%} of its predictions on the audited nodes."
            ],
            data={
                "accuracy": self.accuracy,
                "majority_rate": self.majority_rate,
                "top_share": self.top_share,
                "degenerate": self.degenerate,
                "degenerate_cause": self.degenerate_cause,
                **self.split_accuracies,
            },
        )


def assess_model(
    predictions: np.ndarray,
    labels: np.ndarray | None,
    nodes: np.ndarray,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    rng: np.random.Generator | None = None,
    split_accuracies: dict[str, float] | None = None,
    class_names: list[str] | None = None,
) -> ModelQualityResult:
    """Accuracy, majority rate and prediction mix on ``nodes``, and the degenerate verdict.

    ``predictions`` / ``labels``: (n,) classes of every node (``labels`` may be None). The
    accuracy interval is exact (Clopper-Pearson at ``confidence``); ``n_boot`` and ``rng`` are
    accepted for compatibility and unused. ``class_names``: the user's label values by class id
    (the sentences name classes by them), or None.
    """
    pred = np.asarray(predictions, dtype=np.int64)[nodes]
    m = int(pred.size)
    width = int(pred.max()) + 1 if m else 1
    y = None if labels is None else np.asarray(labels, dtype=np.int64)[nodes]
    if y is not None and y.size:
        width = max(width, int(y.max()) + 1)
    pred_counts = np.bincount(pred, minlength=width)
    top_class = int(np.argmax(pred_counts))
    top_share = float(pred_counts[top_class] / max(m, 1))
    table = pd.DataFrame({"class": np.arange(width), "predicted": pred_counts})
    reasons = []
    if y is not None:
        true_counts = np.bincount(y, minlength=width)
        table["true"] = true_counts
        correct = int((pred == y).sum())
        accuracy = correct / m
        lo, hi = binomial_interval(correct, m, confidence)
        majority = float(true_counts.max() / m)
        if np.count_nonzero(true_counts) == 1:
            only = _apposition(int(np.argmax(true_counts)), class_names).rstrip(",")
            reasons.append(
                f"the labels of the {m} audited nodes hold a single class{only}, so no decision "
                "can be told right from a constant answer"
            )
        if abs(accuracy - majority) < ACCURACY_MARGIN:
            reasons.append(
                f"its accuracy {accuracy:.3f} is within {ACCURACY_MARGIN:.0%} of the majority "
                f"rate {majority:.3f} (always answering "
                f"{class_label(int(np.argmax(true_counts)), class_names)})"
            )
    else:
        accuracy = lo = hi = majority = float("nan")
    if top_share > PREDICTION_SHARE:
        reasons.append(
            f"it predicts {class_label(top_class, class_names)} for {top_share:.1%} of the {m} audited nodes "
            f"(more than {PREDICTION_SHARE:.0%})"
        )
    table = table[(table["predicted"] > 0) | (table.get("true", 0) > 0)].reset_index(drop=True)
    return ModelQualityResult(
        n_nodes=m,
        accuracy=float(accuracy),
        ci_low=lo,
        ci_high=hi,
        majority_rate=majority,
        top_class=top_class,
        top_share=top_share,
        classes=table,
        split_accuracies=dict(split_accuracies or {}),
        degenerate_reason="; ".join(reasons) if reasons else None,
        class_names=None if class_names is None else list(class_names),
    )


def _apposition(c: int, class_names: list[str] | None) -> str:
    """``" (1)"``, or ``", 'yes' (class 1),"`` with the user's label values (after "the most
    predicted class")."""
    if class_names is None:
        return f" ({c})"
    return f", {class_label(c, class_names)},"


def large_scale_columns(x: np.ndarray, names: list[str]) -> pd.DataFrame:
    """The input columns of ``x`` ``(n, d)`` (named by ``names``) on a raw, large scale (module
    doc): ``feature, mean, std`` over all rows, largest ``max(|mean|, std)`` first (ties in
    column order); empty when there is none."""
    x = np.asarray(x, dtype=np.float64)
    columns = ["feature", "mean", "std"]
    if x.ndim != 2 or not x.size:
        return pd.DataFrame(columns=columns)
    binary = ((x == 0) | (x == 1)).all(axis=0)
    mean, std = x.mean(axis=0), x.std(axis=0)
    size = np.maximum(np.abs(mean), std)
    large = np.flatnonzero(~binary & (size > LARGE_SCALE))
    large = large[np.argsort(-size[large], kind="stable")]
    return pd.DataFrame(
        {
            "feature": [str(names[j]) for j in large],
            "mean": mean[large],
            "std": std[large],
        },
        columns=columns,
    )


def _figure(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def raw_scale_cause(x: np.ndarray, names: list[str]) -> str | None:
    """The likely cause of a degenerate model fed inputs ``x`` (columns named by ``names``) and
    its fix, when some of them are on a raw, large scale (module doc); None otherwise."""
    found = large_scale_columns(x, names)
    if found.empty:
        return None
    shown = ", ".join(
        f"{row.feature} (mean {_figure(row.mean)}, sd {_figure(row.std)})"
        for row in found.head(MAX_NAMED).itertuples()
    )
    if len(found) > MAX_NAMED:
        shown += f" and {len(found) - MAX_NAMED} more"
    return (
        "Likely cause: the model's inputs include columns on raw, large scales (mean or "
        f"standard deviation above {LARGE_SCALE:g}): {shown}; a GNN fed such inputs often "
        "learns little more than one class. Fix: train the model on standardized inputs (z-scores of the numeric "
        "columns; gnnaudit's own training standardizes them by default, unless "
        "--no-standardize) and audit it with the same transform: gnnaudit audit --standardize "
        "SCALER (the fitted scaler's mean_ and scale_ saved as .npz or .json) or --transform "
        "MODULE:FN; in Python a standardized graph or audit_model(..., transform=...). If the "
        "model was trained on standardized inputs, this audit fed it raw values: give it that "
        "same transform."
    )
