"""``--mitigate-*`` settings without ``--mitigate`` are refused before any work (issue 38)."""

from __future__ import annotations

import pytest

from gnnaudit.cli.main import main


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--mitigate-lambda", "1.0"], "--mitigate-lambda"),
        (["--mitigate-epochs", "5"], "--mitigate-epochs"),
        (["--mitigate-grid", "0", "1"], "--mitigate-grid"),
    ],
)
def test_mitigation_settings_need_mitigate(tmp_path, capsys, flags, named):
    code = main(["audit", "--dataset", "synthetic", "--out", str(tmp_path / "a"), *flags])
    assert code == 2
    err = capsys.readouterr().err
    assert named in err and "--mitigate" in err and "add it" in err
    assert not (tmp_path / "a").exists()  # refused before anything was written
