"""Markdown and self-contained HTML rendering of an :class:`~gnnaudit.audit.AuditReport`.

One generic renderer for every section: the summary card first (the verdict, the headline
figures, one chart and the next step: :mod:`gnnaudit.audit.report.summary`), then the full
findings table (flagged rows first), then each section (status, summary, figures, tables,
notes) in the order the statistics ran, then what was audited (dataset, model), the
configuration and the run information. The HTML has inline CSS and
the charts as ``data:image/png;base64`` images, so the single file can be mailed or archived.
Every piece of text coming from the data (feature names, dataset names, values) is escaped: in
the HTML by ``html.escape``, in the Markdown by the same entities for ``<``, ``>`` and ``&``
(and ``|`` in table cells), so a name such as ``<script>`` is shown, never run.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Protocol

import pandas as pd

from gnnaudit.audit.report.plots import NO_PLOTS_NOTE, PNG_KINDS, can_draw, draw_figure
from gnnaudit.audit.report.section import Figure, Finding, ReportSection
from gnnaudit.audit.report.summary import SummaryCard, summary_card


class AuditReport(Protocol):
    """What the renderers read of an :class:`~gnnaudit.audit.AuditReport` (a protocol, so
    that this module does not import the report class, which imports the renderers)."""

    title: str
    dataset: dict[str, Any]
    model: dict[str, Any]
    config: dict[str, Any]
    findings: pd.DataFrame
    verdict: str
    sections: list[ReportSection]
    run_info: dict[str, Any]


__all__ = ["render_markdown", "render_html", "github_anchor"]

#: rows of a table shown in the Markdown report (the JSON keeps every row)
MD_MAX_ROWS = 30

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;line-height:1.4}
h1{border-bottom:2px solid #2c7fb8}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;display:block;max-width:100%;
overflow-x:auto}td{overflow-wrap:anywhere}
.toc{font-size:.9em;columns:2;margin:.8em 0}.toc li{margin:.1em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f2f6fa}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:.9em}.pair{display:inline-block;vertical-align:top;margin:.4em 1em .4em 0}
.kv td{text-align:left}img{max-width:100%}
.verdict{font-size:1.1em;background:#f6f8fa;border-left:4px solid #2c7fb8;padding:.6em 1em}
.flag{color:#c0392b;font-weight:bold}.status{color:#c0392b;font-weight:bold}
.diff td{background:#fff4e5}.sens td{background:#fde2e1;font-weight:bold}
.findings td:last-child{text-align:left;max-width:520px}
.card{border:1px solid #cfd8e3;border-radius:6px;padding:.2em 1.2em 1em;background:#fbfcfe}
.card h2{margin-top:.6em}.card .verdict{margin:.6em 0}
.next pre{background:#f2f6fa;padding:.5em .8em;white-space:pre-wrap;word-break:break-all}
"""


#: floats at least this large (and below 1e15) are written in full, without an exponent
_FULL_FROM = 1e4


def _number(value: float) -> str:
    """A float in 4 significant digits, or in full (rounded to a whole number) from
    :data:`_FULL_FROM` on, so a value in the user's units reads ``28500``, not ``2.85e+04``."""
    if math.isnan(value):
        return ""
    if _FULL_FROM <= abs(value) < 1e15:
        return f"{value:.0f}"
    return f"{value:.4g}"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _kv_rows(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                rows.append((f"{key}.{sub}", _fmt(v)))
        elif isinstance(value, list):
            rows.append((str(key), ", ".join(_fmt(v) for v in value)))
        else:
            rows.append((str(key), _fmt(value)))
    return rows


def _flagged_first(frame: pd.DataFrame) -> pd.DataFrame:
    """The findings with the flagged rows first, each group in table order."""
    return frame.sort_values("flagged", ascending=False, kind="stable")


def _findings_note(frame: pd.DataFrame) -> str:
    flagged = int(frame["flagged"].sum())
    if flagged == 0:
        return f"All {len(frame)} findings; none crosses its documented threshold."
    return f"All {len(frame)} findings, the {flagged} flagged first."


def _interval_text(f: Finding) -> str:
    if math.isfinite(f.ci_low) and math.isfinite(f.ci_high):
        return f"{f.ci_low:.3g} to {f.ci_high:.3g}"
    return ""


def _headline_frame(card: SummaryCard, flag: str) -> pd.DataFrame:
    """The card's headline figures as a small table (``flag``: the flagged cell's text)."""
    level = f"{card.confidence:.0%} CI" if card.confidence else "CI"
    return pd.DataFrame(
        [
            (f.finding, f.feature, f.statistic, f"{f.value:.3g}", _interval_text(f))
            + (flag if f.flagged else "",)
            for f in card.headline
        ],
        columns=["figure", "feature", "statistic", "value", level, "flag"],
    )


def _status_line(section: ReportSection) -> str:
    if section.status == "ok":
        return ""
    return f"Status: {section.status}."


# ---------------------------------------------------------------------------------- Markdown
def _md(text: Any) -> str:
    """Text from the data made inert in Markdown: ``<``, ``>`` and ``&`` as HTML entities (a
    Markdown viewer renders raw HTML, so a feature named ``<script>`` must not reach it raw)."""
    return html.escape(str(text), quote=False)


def _md_table(frame: pd.DataFrame | None, max_rows: int = MD_MAX_ROWS) -> str:
    if frame is None or frame.empty:
        return "_(empty)_\n"
    cols = [_md(c).replace("|", "\\|") for c in frame.columns]

    def cell(v: Any) -> str:
        return _md(_fmt(v)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.head(max_rows).itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    more = len(frame) - max_rows
    tail = f"\n_({more} more rows in report.json)_\n" if more > 0 else ""
    return "\n".join(lines) + "\n" + tail


def _md_kv(mapping: dict[str, Any]) -> str:
    rows = _kv_rows(mapping)
    if not rows:
        return "_(none)_\n"
    return _md_table(pd.DataFrame(rows, columns=["item", "value"]), max_rows=len(rows))


def _md_findings(report: AuditReport) -> str:
    frame = _flagged_first(report.findings)
    if frame.empty:
        return "_(no finding)_\n"
    note = f"_{_findings_note(frame)}_\n\n"
    frame = frame.assign(flagged=frame["flagged"].map(lambda f: "**FLAG**" if f else ""))
    return note + _md_table(frame, max_rows=len(frame))


def _md_card(report: AuditReport) -> list[str]:
    """The summary card (module docstring) in Markdown."""
    card = summary_card(report)
    parts = ["## Summary\n"]
    if card.verdict:
        parts.append(f"**Verdict.** {_md(card.verdict)}\n")
    if card.headline:
        parts.append(_md_table(_headline_frame(card, "**FLAG**"), max_rows=len(card.headline)))
    if card.chart is not None:
        where = "report.html" if can_draw() else f"report.html as a table ({NO_PLOTS_NOTE})"
        parts.append(f"_Chart in {where}: {_md(card.chart.title)}._\n")
    step = card.next_step
    parts.append(f"**Next step.** {_md(step.text)}\n")
    for code in (step.command, step.python):
        if code:
            parts.append(f"```\n{_md(code)}\n```\n")
    return parts


def _md_section(section: ReportSection) -> list[str]:
    parts = [f"## {_md(section.title)}\n"]
    status = _status_line(section)
    if status:
        parts.append(f"**{_md(status)}**\n")
    if section.summary:
        parts.append(_md(section.summary) + "\n")
    for fig in section.figures:
        if fig.kind in PNG_KINDS and not fig.data.empty:
            where = "report.html" if can_draw() else f"report.html as a table ({NO_PLOTS_NOTE})"
            parts.append(f"_Chart in {where}: {_md(fig.title)}._\n")
    for name, frame in section.tables.items():
        parts += [f"**{_md(name)}**\n", _md_table(frame)]
    if section.notes:
        parts.append("\n".join(f"- {_md(note)}" for note in section.notes) + "\n")
    return parts


#: the closing headings of every report, after the units' sections: (anchor, title)
_TAIL = (
    ("dataset", "Dataset"),
    ("model", "Model"),
    ("configuration", "Configuration"),
    ("run-information", "Run information"),
)


def _contents(report: AuditReport) -> list[tuple[str, str]]:
    """``(anchor, title)`` of every heading after the summary, in order."""
    heads = [("findings", "Findings")]
    heads += [(section.key, section.title) for section in report.sections]
    return heads + list(_TAIL)


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to
    hyphens."""
    kept = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return kept.replace(" ", "-")


def _md_contents(report: AuditReport) -> str:
    items = [f"- [{_md(t)}](#{github_anchor(t)})" for _, t in _contents(report)]
    return "**Contents.**\n\n" + "\n".join(items) + "\n"


def render_markdown(report: AuditReport) -> str:
    """GitHub-flavoured Markdown version of the report (tables only, charts in the HTML)."""
    parts = [f"# {_md(report.title)}\n", *_md_card(report), _md_contents(report)]
    parts += ["## Findings\n", _md_findings(report)]
    for section in report.sections:
        parts += _md_section(section)
    parts += ["## Dataset\n", _md_kv(report.dataset), "## Model\n", _md_kv(report.model)]
    parts += ["## Configuration\n", _md_kv(report.config)]
    parts += ["## Run information\n", _md_kv(report.run_info)]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------- HTML
def _html_table(frame: pd.DataFrame | None, css: str = "") -> str:
    if frame is None or frame.empty:
        return "<p class='note'>(empty)</p>"
    table = frame.to_html(index=False, escape=True, float_format=_number, border=0)
    if css:
        table = table.replace("<table", f"<table class='{css}'", 1)
    return table


def _html_kv(mapping: dict[str, Any]) -> str:
    rows = _kv_rows(mapping)
    if not rows:
        return "<p class='note'>(none)</p>"
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='kv'>{body}</table>"


def _html_findings(report: AuditReport) -> str:
    frame = _flagged_first(report.findings)
    if frame.empty:
        return "<p class='note'>(no finding)</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    rows = []
    for rec in frame.to_dict(orient="records"):
        cells = []
        for col in frame.columns:
            value = rec[col]
            if col == "flagged":
                cells.append("<td class='flag'>FLAG</td>" if value else "<td></td>")
            else:
                cells.append(f"<td>{html.escape(_fmt(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = f"<p class='note'>{html.escape(_findings_note(frame))}</p>"
    return f"{note}<table class='findings'><tr>{head}</tr>{''.join(rows)}</table>"


def _html_card(report: AuditReport) -> str:
    """The summary card (module docstring) in HTML."""
    esc = html.escape
    card = summary_card(report)
    parts = ["<section class='card' id='summary'><h2>Summary</h2>"]
    if card.verdict:
        parts.append(f"<p class='verdict'>{esc(card.verdict)}</p>")
    if card.headline:
        frame = _headline_frame(card, "FLAG")
        table = _html_table(frame, css="headline")
        parts.append(table.replace("<td>FLAG</td>", "<td class='flag'>FLAG</td>"))
    if card.chart is not None:
        parts.append(_chart(card.chart))
    step = card.next_step
    parts.append(f"<div class='next'><p><b>Next step.</b> {esc(step.text)}</p>")
    parts += [f"<pre>{esc(code)}</pre>" for code in (step.command, step.python) if code]
    parts.append("</div></section>")
    return "".join(parts)


def _img(b64: str, alt: str) -> str:
    if not b64:
        return "<p class='note'>(no data to plot)</p>"
    return f"<img alt='{html.escape(alt, quote=True)}' src='data:image/png;base64,{b64}'/>"


def _value_label(value: Any) -> str:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(f)) if f.is_integer() else _number(f)


def _pair_cards(section: ReportSection, fig: Figure) -> str:
    pairs = section.tables.get(str(fig.options.get("pairs_table", "pairs")))
    feats = section.tables.get(str(fig.options.get("features_table", "pair_features")))
    sensitive = fig.options.get("sensitive")
    if pairs is None or pairs.empty:
        return "<p class='note'>(no evidence pairs)</p>"
    esc = html.escape
    blocks = []
    for row in pairs.to_dict(orient="records"):
        head = (
            f"<tr><th>#{int(row['rank'])} similarity {float(row['similarity']):.4f}</th>"
            f"<th>node {esc(str(row['node_u']))}</th><th>node {esc(str(row['node_v']))}</th></tr>"
            f"<tr><td>predicted</td><td>{int(row['pred_u'])}</td><td>{int(row['pred_v'])}</td></tr>"
        )
        if int(row.get("label_u", -1)) >= 0:
            head += (
                f"<tr><td>label</td><td>{int(row['label_u'])}</td>"
                f"<td>{int(row['label_v'])}</td></tr>"
            )
        sub = (
            feats[feats["rank"] == row["rank"]]
            if feats is not None and not feats.empty
            else pd.DataFrame()
        )
        body = "".join(
            f"<tr class='{'sens' if str(f['feature']) == sensitive else 'diff'}'>"
            f"<td>{esc(str(f['feature']))}</td><td>{esc(_value_label(f['value_u']))}</td>"
            f"<td>{esc(_value_label(f['value_v']))}</td></tr>"
            for f in sub.to_dict(orient="records")
        )
        n_diff = int(row["differing_features"])
        more = n_diff - len(sub)
        tail = (
            f"<tr><td colspan='3' class='note'>... {more} more differing feature(s)</td></tr>"
            if more > 0
            else ""
        )
        if n_diff == 0:
            tail = "<tr><td colspan='3' class='note'>identical features</td></tr>"
        blocks.append(f"<div class='pair'><table>{head}{body}{tail}</table></div>")
    return "".join(blocks)


def _html_figure(section: ReportSection, fig: Figure) -> str:
    if fig.kind == "pair_cards":
        return _pair_cards(section, fig)
    return _chart(fig)


def _chart(fig: Figure) -> str:
    """A PNG figure as an embedded image, or its data as a table without matplotlib."""
    if fig.kind in PNG_KINDS and not fig.data.empty and not can_draw():
        note = f"<p class='note'><b>{html.escape(fig.title)}</b>: {html.escape(NO_PLOTS_NOTE)}</p>"
        return note + _html_table(fig.data)
    return _img(draw_figure(fig.kind, fig.data, fig.title, fig.options), fig.title)


def _html_section(section: ReportSection) -> list[str]:
    esc = html.escape
    parts = [f"<h2 id='{esc(section.key, quote=True)}'>{esc(section.title)}</h2>"]
    status = _status_line(section)
    if status:
        parts.append(f"<p class='status'>{esc(status)}</p>")
    if section.summary:
        parts.append(f"<p>{esc(section.summary)}</p>")
    parts += [_html_figure(section, fig) for fig in section.figures]
    for name, frame in section.tables.items():
        if any(
            f.kind == "pair_cards" and name in ("pairs", "pair_features") for f in section.figures
        ):
            continue
        parts += [f"<p class='note'><b>{esc(name)}</b></p>", _html_table(frame)]
    if section.notes:
        items = "".join(f"<li>{esc(note)}</li>" for note in section.notes)
        parts.append(f"<ul class='note'>{items}</ul>")
    return parts


def render_html(report: AuditReport) -> str:
    """Self-contained HTML page with embedded PNG charts; all text is HTML-escaped."""
    esc = html.escape
    toc = "".join(
        f"<li><a href='#{esc(key, quote=True)}'>{esc(title)}</a></li>"
        for key, title in _contents(report)
    )
    parts = [f"<h1>{esc(report.title)}</h1>", _html_card(report)]
    parts += [f"<nav class='toc' aria-label='Contents'><ul>{toc}</ul></nav>"]
    parts += ["<h2 id='findings'>Findings</h2>", _html_findings(report)]
    for section in report.sections:
        parts += _html_section(section)
    tail = (report.dataset, report.model, report.config, report.run_info)
    for (key, title), mapping in zip(_TAIL, tail, strict=True):
        parts += [f"<h2 id='{key}'>{title}</h2>", _html_kv(mapping)]
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'/>"
        f"<title>{esc(report.title)}</title><style>{_CSS}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )
