"""The audit report: findings first, then one section per audit statistic.

An :class:`AuditReport` holds

* ``findings``: a DataFrame with one row per decision-relevant statement (columns
  :data:`~gnnaudit.audit.report.section.FINDING_COLUMNS`: value, CI, p-value, ``flagged`` by a
  documented threshold, and a plain-words explanation) and ``verdict``, the answer to "do the
  model's decisions depend on the sensitive attribute?" in a few sentences;
* ``sections``: one :class:`~gnnaudit.audit.report.section.ReportSection` per audit statistic,
  in the order the statistics ran;
* ``dataset``, ``model``, ``config``: what was audited and how;
* ``run_info``: stage timings, versions and run notes (never mixed into the findings).

It writes ``report.json`` (lossless; :meth:`AuditReport.from_json` reads it back),
``report.md`` and a self-contained ``report.html``. Markdown and HTML open with the summary
card (the verdict, three to five headline figures, one chart and the next step:
:mod:`gnnaudit.audit.report.summary`) and the full findings table, flagged rows first; the
JSON leads with the verdict and the findings, then ``aliases`` (the fair-GNN literature's
``dsp``, ``deo`` and ``cf`` as references to their findings, with value and interval:
:mod:`gnnaudit.audit.report.literature`) and ``summary`` (the card without its chart). Both
are derived from the findings, so :meth:`AuditReport.from_dict` does not read them back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gnnaudit.audit.report.literature import alias_table
from gnnaudit.audit.report.section import (
    FINDING_COLUMNS,
    Finding,
    ReportSection,
    clean_json,
    findings_frame,
)
from gnnaudit.audit.report.summary import SummaryCard, summary_card
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import atomic_write_text, read_json

__all__ = ["AuditReport", "FORMAT_VERSION"]

logger = logging.getLogger(__name__)

#: version of the ``report.json`` layout; :meth:`AuditReport.from_dict` refuses other versions
FORMAT_VERSION = 2

REPORT_FILES = {"json": "report.json", "markdown": "report.md", "html": "report.html"}


@dataclass
class AuditReport:
    """Results of one audit of one node classifier on one graph (see the module docstring).

    Attributes
    ----------
    dataset : what was audited (name, nodes, edges, features, classes, audited nodes,
        sensitive attribute).
    model : model description and accuracies.
    config : audit options (units, k, backend, seeds ...).
    findings : DataFrame (:data:`FINDING_COLUMNS`), one row per finding, in unit order.
    verdict : the findings summed up in plain words.
    sections : one :class:`ReportSection` per statistic.
    run_info : stage timings in seconds, versions, notes.
    title : the report's heading.
    checkpoints : model weights produced by the audit (e.g. the mitigated model), by file
        name: ``{name: state_dict}``; :meth:`save` writes each beside the report with
        ``torch.save`` (readable with ``torch.load(path, weights_only=True)``). Not part of the
        JSON.
    """

    dataset: dict[str, Any]
    model: dict[str, Any]
    config: dict[str, Any]
    findings: pd.DataFrame = field(default_factory=lambda: findings_frame([]))
    verdict: str = ""
    sections: list[ReportSection] = field(default_factory=list)
    run_info: dict[str, Any] = field(default_factory=dict)
    title: str = "GNN audit"
    checkpoints: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.findings, (list, tuple)):
            self.findings = findings_frame(list(self.findings))
        if not isinstance(self.findings, pd.DataFrame) or list(self.findings.columns) != list(
            FINDING_COLUMNS
        ):
            raise InvalidInputError(
                f"findings must be a DataFrame with columns {FINDING_COLUMNS} or a list of Finding"
            )
        keys = [s.key for s in self.sections]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise InvalidInputError(f"report sections must have distinct keys; repeated {repeated}")

    # ---------------------------------------------------------------------------- access
    @property
    def section_keys(self) -> list[str]:
        """Keys of the sections, in report order."""
        return [s.key for s in self.sections]

    def has_section(self, key: str) -> bool:
        """Whether the report holds the section ``key``."""
        return key in self.section_keys

    def section(self, key: str) -> ReportSection:
        """The section ``key`` (e.g. ``"group_fairness"``); raises when absent."""
        for sec in self.sections:
            if sec.key == key:
                return sec
        raise InvalidInputError(
            f"the report has no section {key!r}; sections: {', '.join(self.section_keys)}"
        )

    def table(self, section: str, name: str) -> pd.DataFrame:
        """Table ``name`` of section ``section``; raises when absent."""
        sec = self.section(section)
        if name not in sec.tables:
            raise InvalidInputError(
                f"section {section!r} has no table {name!r}; tables: {', '.join(sec.tables)}"
            )
        return sec.tables[name]

    def finding(self, finding: str, feature: str | None = None) -> pd.Series:
        """The first findings row named ``finding`` (and about ``feature`` when given)."""
        rows = self.findings[self.findings["finding"] == finding]
        if feature is not None:
            rows = rows[rows["feature"] == feature]
        if rows.empty:
            raise InvalidInputError(
                f"no finding {finding!r}{'' if feature is None else f' for {feature!r}'}; "
                f"findings: {sorted(set(self.findings['finding']))}"
            )
        return rows.iloc[0]

    @property
    def flagged(self) -> pd.DataFrame:
        """The findings whose threshold was crossed."""
        return self.findings[self.findings["flagged"]].reset_index(drop=True)

    @property
    def aliases(self) -> dict[str, Any]:
        """The fair-GNN literature's figures as references to their findings: ``{"dsp" |
        "deo" | "cf": {row, finding, feature, statistic, value, ci_low, ci_high, flagged}}``
        (``row``: the index in :attr:`findings`), for the primary sensitive attribute; a key
        is absent when its finding is (:mod:`gnnaudit.audit.report.literature`)."""
        return alias_table(self.findings, self.dataset.get("sensitive_name"))

    def alias(self, key: str) -> pd.Series:
        """The findings row that is the literature's ``key`` (``"dsp"``, ``"deo"``, ``"cf"``)."""
        aliases = self.aliases
        if key not in aliases:
            raise InvalidInputError(
                f"the report has no finding for the literature's {key!r}; present: "
                f"{', '.join(aliases) or 'none'} (dsp: statistical parity, deo: equal "
                "opportunity, cf: counterfactual flip (graph scope), of the sensitive attribute)"
            )
        return self.findings.iloc[aliases[key]["row"]]

    def summary_card(self) -> SummaryCard:
        """The card that opens report.md and report.html: verdict, headline figures, chart,
        next step (:mod:`gnnaudit.audit.report.summary`)."""
        return summary_card(self)

    # ---------------------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``verdict`` and ``findings`` come first, then the derived
        ``aliases`` and ``summary`` (module docstring; NaN / inf become null)."""
        return {
            "format_version": FORMAT_VERSION,
            "title": self.title,
            "verdict": self.verdict,
            "findings": clean_json(
                [
                    {c: row[c] for c in FINDING_COLUMNS}
                    for row in self.findings.to_dict(orient="records")
                ]
            ),
            "aliases": clean_json(self.aliases),
            "summary": self.summary_card().to_dict(),
            "dataset": clean_json(self.dataset),
            "model": clean_json(self.model),
            "sections": [s.to_dict() for s in self.sections],
            "config": clean_json(self.config),
            "run_info": clean_json(self.run_info),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> AuditReport:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(payload, dict) or "sections" not in payload:
            raise InvalidInputError("payload is not an audit report (no 'sections' entry)")
        version = payload.get("format_version")
        if version != FORMAT_VERSION:
            raise InvalidInputError(
                f"report format_version {version!r} is not supported (expected {FORMAT_VERSION})"
            )
        return cls(
            title=str(payload.get("title", cls.title)),
            verdict=str(payload.get("verdict", "")),
            findings=findings_frame([Finding.from_dict(f) for f in payload.get("findings") or []]),
            dataset=dict(payload.get("dataset") or {}),
            model=dict(payload.get("model") or {}),
            sections=[ReportSection.from_dict(s) for s in payload["sections"]],
            config=dict(payload.get("config") or {}),
            run_info=dict(payload.get("run_info") or {}),
        )

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON text; also written to ``path`` (atomically) when given."""
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        if path is not None:
            atomic_write_text(path, text, name="path", force=True)
        return text

    @classmethod
    def from_json(cls, path: str | Path) -> AuditReport:
        """Read a ``report.json`` written by :meth:`save` / :meth:`to_json` (or its folder)."""
        path = Path(path)
        if path.is_dir():
            path = path / REPORT_FILES["json"]
        if not path.is_file():
            raise InvalidInputError(f"path {str(path)!r} is not a report.json file")
        return cls.from_dict(read_json("path", path))

    # ---------------------------------------------------------------------------- render
    def to_markdown(self) -> str:
        """The report as a Markdown document (what ``report.md`` holds)."""
        from gnnaudit.audit.report.render import render_markdown

        return render_markdown(self)

    def to_html(self) -> str:
        """The report as a self-contained HTML page (what ``report.html`` holds)."""
        from gnnaudit.audit.report.render import render_html

        return render_html(self)

    def file_names(self) -> tuple[str, ...]:
        """The files :meth:`save` writes: the three reports and every checkpoint's name."""
        for name in self.checkpoints:
            if Path(name).name != name or not name.endswith(".pt"):
                raise InvalidInputError(
                    f"checkpoint name {name!r} must be a plain '*.pt' file name"
                )
        return (*REPORT_FILES.values(), *self.checkpoints)

    def save(self, out_dir: str | Path, *, force: bool = False) -> dict[str, Path]:
        """Write ``report.json``, ``report.md`` and ``report.html`` (and every entry of
        :attr:`checkpoints`) into ``out_dir``, as the CLI's ``--out`` does.

        The files are written into a private temporary folder that moves onto ``out_dir`` only
        when all of them are written (:func:`~gnnaudit.safe_io.atomic_output_dir`), so a failed
        render never leaves a half-written or mixed report behind. A folder that already holds
        files is refused unless ``force``; with ``force`` only files gnnaudit wrote there are
        replaced (they are listed in the folder's manifest) and nothing else is touched.
        """
        from gnnaudit.safe_io import atomic_output_dir

        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise InvalidInputError(f"out_dir must be a folder, got the file {str(out)!r}")
        names = self.file_names()
        with atomic_output_dir(out, force, name="out_dir", producer="audit", planned=names) as tmp:
            self.write_files(tmp)
        logger.info("audit report written to %s", out)
        return {kind: out / name for kind, name in REPORT_FILES.items()} | {
            name: out / name for name in self.checkpoints
        }

    def write_files(self, folder: str | Path) -> None:
        """Write the reports and checkpoints into ``folder``, a private folder the caller
        owns (use :meth:`save` for a user's folder)."""
        folder = Path(folder)
        self.file_names()  # checks the checkpoint names
        texts = {
            "json": self.to_json(),
            "markdown": self.to_markdown(),
            "html": self.to_html(),
        }  # rendered before anything is written
        for kind, text in texts.items():
            (folder / REPORT_FILES[kind]).write_text(text, encoding="utf-8")
        if self.checkpoints:
            import torch

            for name, state in self.checkpoints.items():
                torch.save(state, folder / name)

    def summary_lines(self) -> list[str]:
        """The verdict, one line per finding (flagged first, as in report.md) and the summary
        card's next step, for a terminal."""
        lines = [self.verdict] if self.verdict else []
        frame = self.findings.sort_values("flagged", ascending=False, kind="stable")
        for row in frame.itertuples(index=False):
            mark = "FLAG" if row.flagged else "    "
            lines.append(f"[{mark}] {row.explanation}")
        step = self.summary_card().next_step
        lines.append(f"Next step: {step.text}")
        lines += [f"    {code}" for code in (step.command, step.python) if code]
        return lines
