"""The audit report: every audit result of one model on one graph, saved as JSON / MD / HTML.

:class:`AuditReport` is a plain container; :func:`gnnaudit.training.run_audit` fills it. It
writes ``report.json`` (lossless; :meth:`AuditReport.from_json` reads it back), ``report.md``
and a self-contained ``report.html`` (inline CSS, plots embedded as base64 PNG, every text
HTML-escaped).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import check_int
from gnnaudit.audit.evidence_inputs import REQUIRED_GLOBAL_COLUMNS, check_frame, node_features
from gnnaudit.audit.group_fairness import GroupFairness
from gnnaudit.errors import InvalidInputError

__all__ = ["AuditReport", "pair_comparison", "PAIR_COLUMNS", "PAIR_FEATURE_COLUMNS"]

logger = logging.getLogger(__name__)

PAIR_COLUMNS = [
    "rank",
    "node_u",
    "node_v",
    "similarity",
    "pred_u",
    "pred_v",
    "label_u",
    "label_v",
    "differing_features",
]
PAIR_FEATURE_COLUMNS = ["rank", "feature", "value_u", "value_v", "std_difference"]
FORMAT_VERSION = 1


def pair_comparison(
    data: Any,
    pairs: pd.DataFrame,
    predictions: Any,
    labels: Any = None,
    *,
    top: int = 10,
    max_features: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The top global evidence pairs side by side with the features on which they differ.

    Returns ``(pairs_table, features_table)``: ``pairs_table`` has columns
    :data:`PAIR_COLUMNS` (``differing_features`` = number of feature columns where the two nodes
    differ); ``features_table`` (long form, :data:`PAIR_FEATURE_COLUMNS`) lists for each pair up
    to ``max_features`` differing features, largest standardised difference
    ``|x_u[f] - x_v[f]| / std(x[f])`` first (std over all nodes; 1 for constant columns).
    ``labels`` may be None (label columns then hold -1).
    """
    top = check_int("top", top, minimum=0)
    max_features = check_int("max_features", max_features, minimum=1)
    check_frame("pairs", pairs, REQUIRED_GLOBAL_COLUMNS)
    x, names = node_features(data)
    n = x.shape[0]
    pred = np.asarray(getattr(predictions, "cpu", lambda: predictions)(), dtype=np.int64).ravel()
    y = (
        np.full(n, -1, dtype=np.int64)
        if labels is None
        else np.asarray(getattr(labels, "cpu", lambda: labels)(), dtype=np.int64).ravel()
    )
    if pred.shape[0] != n or y.shape[0] != n:
        raise InvalidInputError(
            f"predictions and labels must have one entry per node ({n}), got "
            f"{pred.shape[0]} and {y.shape[0]}"
        )
    head = pairs.head(top)
    u = head["node_u"].to_numpy(dtype=np.int64)
    v = head["node_v"].to_numpy(dtype=np.int64)
    ranks = np.arange(1, u.size + 1)
    std = x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    diff = np.abs(x[u] - x[v]) / std  # (p, d)
    differs = x[u] != x[v]
    table = pd.DataFrame(
        {
            "rank": ranks,
            "node_u": u,
            "node_v": v,
            "similarity": head["similarity"].to_numpy(dtype=np.float64),
            "pred_u": pred[u],
            "pred_v": pred[v],
            "label_u": y[u],
            "label_v": y[v],
            "differing_features": differs.sum(axis=1).astype(np.int64),
        }
    )
    order = np.argsort(-np.where(differs, diff, -1.0), axis=1, kind="stable")[:, :max_features]
    rows_i = np.repeat(np.arange(u.size), order.shape[1])
    cols_i = order.ravel()
    keep = differs[rows_i, cols_i]
    rows_i, cols_i = rows_i[keep], cols_i[keep]
    features = pd.DataFrame(
        {
            "rank": ranks[rows_i],
            "feature": [names[c] for c in cols_i],
            "value_u": x[u[rows_i], cols_i],
            "value_v": x[v[rows_i], cols_i],
            "std_difference": diff[rows_i, cols_i],
        }
    )
    return table, features


# ----------------------------------------------------------------------------------------------
# JSON helpers
# ----------------------------------------------------------------------------------------------
def _clean(value: Any) -> Any:
    """Make a value JSON-safe: numpy scalars -> python, NaN / inf -> None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _frame_to_json(frame: pd.DataFrame | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "data": _clean(frame.to_numpy(dtype=object).tolist()),
    }


def _frame_from_json(payload: dict[str, Any] | None) -> pd.DataFrame | None:
    if payload is None:
        return None
    frame = pd.DataFrame(payload["data"], columns=payload["columns"])
    for col, dtype in zip(payload["columns"], payload["dtypes"], strict=True):
        try:
            frame[col] = frame[col].astype(dtype)  # None -> NaN for float columns
        except (TypeError, ValueError):
            frame[col] = frame[col].astype(object)
    return frame


# ----------------------------------------------------------------------------------------------
# the report
# ----------------------------------------------------------------------------------------------
@dataclass
class AuditReport:
    """Results of a counterfactual-evidence audit of one node classifier on one graph.

    Attributes
    ----------
    dataset : summary (name, nodes, edges, features, classes, split sizes, sensitive name).
    model : model description and metrics (backbone, accuracies ...).
    config : audit parameters (k, backend, num_hops, alpha, seeds ...).
    discrimination : :func:`~gnnaudit.audit.discrimination_scores` table.
    error_verification : :func:`~gnnaudit.audit.error_verification` table.
    top_pairs, pair_features : :func:`pair_comparison` tables of the top global evidences.
    group_fairness : :class:`~gnnaudit.audit.GroupFairness` or None (no sensitive attribute).
    finetune : fine-tuning result as a table (``FinetuneResult.to_frame()``) or None.
    summary : headline figures (sensitive feature rank by score and lift, timings ...).
    """

    dataset: dict[str, Any]
    model: dict[str, Any]
    config: dict[str, Any]
    discrimination: pd.DataFrame
    error_verification: pd.DataFrame
    top_pairs: pd.DataFrame
    pair_features: pd.DataFrame
    group_fairness: GroupFairness | None = None
    finetune: pd.DataFrame | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    title: str = "GNN counterfactual-evidence audit"

    # -------------------------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN / inf become null)."""
        return {
            "format_version": FORMAT_VERSION,
            "title": self.title,
            "dataset": _clean(self.dataset),
            "model": _clean(self.model),
            "config": _clean(self.config),
            "summary": _clean(self.summary),
            "group_fairness": None
            if self.group_fairness is None
            else self.group_fairness.to_dict(),
            "discrimination": _frame_to_json(self.discrimination),
            "error_verification": _frame_to_json(self.error_verification),
            "top_pairs": _frame_to_json(self.top_pairs),
            "pair_features": _frame_to_json(self.pair_features),
            "finetune": _frame_to_json(self.finetune),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> AuditReport:
        if not isinstance(payload, dict) or "discrimination" not in payload:
            raise InvalidInputError("payload is not an audit report (no 'discrimination' entry)")
        version = payload.get("format_version")
        if version != FORMAT_VERSION:
            raise InvalidInputError(
                f"report format_version {version!r} is not supported (expected {FORMAT_VERSION})"
            )
        gf = payload.get("group_fairness")
        return cls(
            title=payload.get("title", cls.title),
            dataset=payload.get("dataset", {}),
            model=payload.get("model", {}),
            config=payload.get("config", {}),
            summary=payload.get("summary", {}),
            group_fairness=None if gf is None else GroupFairness.from_dict(gf),
            discrimination=_frame_from_json(payload["discrimination"]),
            error_verification=_frame_from_json(payload["error_verification"]),
            top_pairs=_frame_from_json(payload["top_pairs"]),
            pair_features=_frame_from_json(payload["pair_features"]),
            finetune=_frame_from_json(payload.get("finetune")),
        )

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON text; also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_json(cls, path: str | Path) -> AuditReport:
        """Read a ``report.json`` written by :meth:`save` / :meth:`to_json`."""
        path = Path(path)
        if path.is_dir():
            path = path / "report.json"
        if not path.is_file():
            raise InvalidInputError(f"path {str(path)!r} is not a report.json file")
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"path {str(path)!r} is not valid JSON: {exc}") from None
        return cls.from_dict(payload)

    # -------------------------------------------------------------------------------- render
    def to_markdown(self) -> str:
        from gnnaudit.audit.report_render import render_markdown

        return render_markdown(self)

    def to_html(self) -> str:
        from gnnaudit.audit.report_render import render_html

        return render_html(self)

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``report.json``, ``report.md`` and ``report.html`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": out / "report.json",
            "markdown": out / "report.md",
            "html": out / "report.html",
        }
        self.to_json(paths["json"])
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        paths["html"].write_text(self.to_html(), encoding="utf-8")
        logger.info("audit report written to %s", out)
        return paths

    def summary_table(self, top: int = 5) -> pd.DataFrame:
        """The ``top`` highest discrimination scores (what the CLI prints)."""
        return self.discrimination.head(top).reset_index(drop=True)
