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
    "ACCURACY_MARGIN",
    "PREDICTION_SHARE",
]

#: a model whose accuracy exceeds the majority rate by less than this is degenerate
ACCURACY_MARGIN = 0.01
#: a model predicting one class on more than this share of the audited nodes is degenerate
PREDICTION_SHARE = 0.95
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
                    ),
                )
            )
        return out

    def _top(self) -> str:
        return _apposition(self.top_class, self.class_names)

    def report_section(self) -> ReportSection:
        if self.degenerate_reason is not None:
            summary = f"The model is degenerate: {self.degenerate_reason}."
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
