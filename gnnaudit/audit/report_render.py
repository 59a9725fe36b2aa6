"""Markdown and self-contained HTML rendering of an :class:`~gnnaudit.audit.AuditReport`.

The HTML has inline CSS and the plots as ``data:image/png;base64`` images, so the single file can
be mailed or archived. Every piece of text coming from the data (feature names, dataset names,
values) is HTML-escaped.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pandas as pd

from gnnaudit.audit.report_plots import discrimination_chart, error_curve_chart

if TYPE_CHECKING:  # pragma: no cover
    from gnnaudit.audit.report import AuditReport

__all__ = ["render_markdown", "render_html"]

_MD_TOP = 20

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;line-height:1.4}
h1{border-bottom:2px solid #2c7fb8}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f2f6fa}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:.9em}.pair{display:inline-block;vertical-align:top;margin:.4em 1em .4em 0}
.kv td{text-align:left}img{max-width:100%}
"""


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _value_label(value: Any) -> str:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(f)) if f.is_integer() else f"{f:.4g}"


def _kv_rows(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                rows.append((f"{key}.{sub}", _fmt(v)))
        else:
            rows.append((str(key), _fmt(value)))
    return rows


def _md_table(frame: pd.DataFrame) -> str:
    if frame is None or frame.empty:
        return "_(empty)_\n"
    cols = [str(c) for c in frame.columns]

    def cell(v: Any) -> str:
        return _fmt(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _md_kv(mapping: dict[str, Any]) -> str:
    rows = _kv_rows(mapping)
    if not rows:
        return "_(none)_\n"
    return _md_table(pd.DataFrame(rows, columns=["item", "value"]))


def _sensitive(report: AuditReport) -> str | None:
    return report.dataset.get("sensitive_name") or report.summary.get("sensitive_feature")


def render_markdown(report: AuditReport) -> str:
    """GitHub-flavoured markdown version of the report (tables only, no plots)."""
    parts = [f"# {report.title}\n"]
    if report.summary:
        parts += ["## Summary\n", _md_kv(report.summary)]
    parts += ["## Dataset\n", _md_kv(report.dataset), "## Model\n", _md_kv(report.model)]
    if report.group_fairness is not None:
        gf = report.group_fairness
        parts += [
            f"## Group fairness (sensitive: {gf.sensitive_name or 'n/a'}, positive class = "
            f"{gf.positive_class})\n",
            _md_table(gf.groups),
            "\n",
            _md_table(gf.summary()),
        ]
    parts += [
        f"## Discrimination scores (Eq. 12, top {_MD_TOP})\n",
        "baseline = expected score with evidences drawn uniformly from the candidates; "
        "lift = score - baseline.\n\n",
        _md_table(report.discrimination.head(_MD_TOP)),
        "## Error verification (accuracy within the top-k global evidences)\n",
        _md_table(report.error_verification),
        "## Top global counterfactual evidences\n",
        _md_table(report.top_pairs),
        "\nDiffering features per pair (largest standardised difference first):\n\n",
        _md_table(report.pair_features),
    ]
    if report.finetune is not None:
        parts += ["## Fine-tuning on evidences (CE paper Sec. 7.3)\n", _md_table(report.finetune)]
    parts += ["## Configuration\n", _md_kv(report.config)]
    return "\n".join(parts)


def _html_table(frame: pd.DataFrame | None) -> str:
    if frame is None or frame.empty:
        return "<p class='note'>(empty)</p>"
    return frame.to_html(index=False, escape=True, float_format=lambda v: f"{v:.4g}", border=0)


def _html_kv(mapping: dict[str, Any]) -> str:
    rows = _kv_rows(mapping)
    if not rows:
        return "<p class='note'>(none)</p>"
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='kv'>{body}</table>"


def _img(b64: str, alt: str) -> str:
    if not b64:
        return "<p class='note'>(no data to plot)</p>"
    return f"<img alt='{html.escape(alt, quote=True)}' src='data:image/png;base64,{b64}'/>"


def _pairs_html(report: AuditReport) -> str:
    if report.top_pairs is None or report.top_pairs.empty:
        return "<p class='note'>(no evidence pairs)</p>"
    blocks = []
    feats = report.pair_features
    for row in report.top_pairs.itertuples(index=False):
        head = (
            f"<tr><th>#{int(row.rank)} similarity {row.similarity:.4f}</th>"
            f"<th>node {int(row.node_u)}</th><th>node {int(row.node_v)}</th></tr>"
            f"<tr><td>predicted</td><td>{int(row.pred_u)}</td><td>{int(row.pred_v)}</td></tr>"
            f"<tr><td>label</td><td>{int(row.label_u)}</td><td>{int(row.label_v)}</td></tr>"
        )
        sub = feats[feats["rank"] == row.rank] if feats is not None else pd.DataFrame()
        body = "".join(
            f"<tr><td>{html.escape(str(f.feature))}</td><td>{html.escape(_value_label(f.value_u))}"
            f"</td><td>{html.escape(_value_label(f.value_v))}</td></tr>"
            for f in sub.itertuples(index=False)
        )
        more = int(row.differing_features) - len(sub)
        tail = (
            f"<tr><td colspan='3' class='note'>... {more} more differing feature(s)</td></tr>"
            if more > 0
            else ""
        )
        if int(row.differing_features) == 0:
            tail = "<tr><td colspan='3' class='note'>identical features</td></tr>"
        blocks.append(f"<div class='pair'><table>{head}{body}{tail}</table></div>")
    return "".join(blocks)


def render_html(report: AuditReport) -> str:
    """Self-contained HTML page with embedded PNG plots; all text is HTML-escaped."""
    esc = html.escape
    sensitive = _sensitive(report)
    ds_png = discrimination_chart(report.discrimination, highlight=sensitive)
    ev_png = error_curve_chart(report.error_verification)
    sections = [f"<h1>{esc(report.title)}</h1>"]
    if report.summary:
        sections += ["<h2>Summary</h2>", _html_kv(report.summary)]
    sections += [
        "<h2>Dataset</h2>",
        _html_kv(report.dataset),
        "<h2>Model</h2>",
        _html_kv(report.model),
    ]
    if report.group_fairness is not None:
        gf = report.group_fairness
        sections += [
            f"<h2>Group fairness</h2><p class='note'>sensitive attribute: "
            f"{esc(str(gf.sensitive_name or 'n/a'))}; positive class = {gf.positive_class}; "
            "differences are max minus min over groups.</p>",
            _html_table(gf.groups),
            _html_table(gf.summary()),
        ]
    sections += [
        "<h2>Discrimination scores (Eq. 12)</h2>",
        "<p class='note'>score: share of a node's top-k local counterfactual evidences that "
        "carry a different value, averaged over the test nodes with the value; baseline: the "
        "same share if evidences were drawn uniformly from the node's candidates; lift = score "
        "- baseline. A score equal to its baseline says nothing about the model.</p>",
        _img(ds_png, "discrimination score bar chart"),
        _html_table(report.discrimination),
        "<h2>Error verification</h2>",
        _img(ev_png, "accuracy in evidence vs k"),
        _html_table(report.error_verification),
        "<h2>Top global counterfactual evidences</h2>",
        "<p class='note'>pairs of similar test nodes predicted differently, with the features "
        "on which they differ (largest standardised difference first).</p>",
        _pairs_html(report),
    ]
    if report.finetune is not None:
        sections += [
            "<h2>Fine-tuning on evidences</h2>",
            "<p class='note'>accuracy on the test nodes used by neither fine-tuning set.</p>",
            _html_table(report.finetune),
        ]
    sections += ["<h2>Configuration</h2>", _html_kv(report.config)]
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'/>"
        f"<title>{esc(report.title)}</title><style>{_CSS}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )
