"""``gnnaudit audit --sensitive-bins``: a continuous attribute is refused without it (exit 2,
naming the flag) and binned into quantile groups with it."""

from __future__ import annotations

import logging

from gnnaudit.audit import AuditReport
from gnnaudit.cli.main import main

SMALL = ["audit", "--dataset", "synthetic", "--num-nodes", "200", "--epochs", "5"]
FAST = ["--no-progress", "--no-finetune", "--sensitive", "income"]


def test_continuous_sensitive_is_refused_then_binned(tmp_path, capsys):
    logging.getLogger("lightning").setLevel(logging.ERROR)
    assert main([*SMALL, *FAST, "--out", str(tmp_path / "a")]) == 2
    assert "--sensitive-bins" in capsys.readouterr().err
    assert main([*SMALL, *FAST, "--sensitive-bins", "3", "--out", str(tmp_path / "b")]) == 0
    report = AuditReport.from_json(tmp_path / "b" / "report.json")
    assert len(report.table("group_fairness", "groups")) == 3
    assert not report.findings["value"].isna().any()
