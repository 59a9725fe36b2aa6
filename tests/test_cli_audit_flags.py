"""Audit CLI flags checked before any work: ``--mitigate-*`` needs ``--mitigate``; ``--model-hops`` reaches the audit (issues 38, 40)."""

from __future__ import annotations

import pytest

from gnnaudit.cli.main import main


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--mitigate-lambda", "1.0"], "--mitigate-lambda"),
        (["--mitigate-epochs", "5"], "--mitigate-epochs"),
        (["--mitigate-grid", "0", "1"], "--mitigate-grid"),
        (["--mitigate-max-bacc-drop", "0.02"], "--mitigate-max-bacc-drop"),
        (["--mitigate-argmax"], "--mitigate-argmax"),
    ],
)
def test_mitigation_settings_need_mitigate(tmp_path, capsys, flags, named):
    code = main(["audit", "--dataset", "synthetic", "--out", str(tmp_path / "a"), *flags])
    assert code == 2
    err = capsys.readouterr().err
    assert named in err and "--mitigate" in err and "add it" in err
    assert not (tmp_path / "a").exists()  # refused before anything was written


def test_model_hops_flag_is_checked_and_named(tmp_path, capsys):
    out = str(tmp_path / "b")
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        main(["audit", "--dataset", "synthetic", "--model-hops", "-1", "--out", out])
    assert stop.value.code == 2
    assert "--model-hops" in capsys.readouterr().err


def test_model_hops_flag_reaches_the_audit(tmp_path, monkeypatch):
    import gnnaudit.audit.pipeline.run as pipeline

    seen = {}

    def stop(model, data, sensitive=None, *, config=None, **options):
        seen["model_hops"] = config.model_hops
        raise SystemExit(0)  # the flag is what this test checks, not the audit

    monkeypatch.setattr(pipeline, "run_audit", stop)
    args = ["audit", "--dataset", "synthetic", "--num-nodes", "120", "--epochs", "2"]
    with pytest.raises(SystemExit):
        main([*args, "--no-progress", "--model-hops", "2", "--out", str(tmp_path / "c")])
    assert seen == {"model_hops": 2}
