"""One flag convention and one error path for every ``gnnaudit`` command."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from gnnaudit.cli import fairden as fairden_cli
from gnnaudit.cli.main import COMMANDS, build_parser, main

GRAPH_SMALL = ["--num-nodes", "60", "--epochs", "2"]
LONG_RUNNING = ("train", "evidence", "audit", "fairden")


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def command_argv(command: str, table, out) -> list[str]:
    """A small, valid invocation of ``command`` writing to ``out``."""
    if command in ("train", "evidence", "audit"):
        extra = ["--no-finetune"] if command == "audit" else []
        return [command, *GRAPH_SMALL, *extra, "--out", str(out)]
    if command == "fairden":
        return ["fairden", str(table), "--sensitive", "g", "--n-clusters", "2", "--out", str(out)]
    if command == "tree-cluster":
        return ["tree-cluster", str(table), "--ignore", "g", "--n-clusters", "2", "--depth", "1",
                "--out", str(out)]  # fmt: skip
    return ["explain-dbscan", str(table), "--eps", "1", "--min-samples", "3", "--index", "0",
            "--label", "g", "--out", str(out)]  # fmt: skip


def test_every_command_has_out_force_and_says_file_or_folder():
    for name, parser in subparsers().items():
        out = option(parser, "--out")
        assert out is not None, name
        assert out.metavar in ("FILE", "FOLDER"), name
        kind = "folder" if name in ("train", "audit") else "file"
        assert out.metavar == kind.upper(), name
        assert kind in out.help, name
        assert option(parser, "--force") is not None, name


def test_progress_flags_on_long_running_commands():
    parsers = subparsers()
    for name in LONG_RUNNING:
        action = option(parsers[name], "--progress")
        assert isinstance(action, argparse.BooleanOptionalAction), name
        assert "--no-progress" in action.option_strings
        assert action.default is None  # on when stderr is a terminal


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_debug_before_or_after_the_command(command, where, table, tmp_path):
    parser = build_parser()
    base = command_argv(command, table, tmp_path / "o")
    flags = ["-v", "--debug"]
    argv = [*flags, *base] if where == "before" else [*base, *flags]
    args = parser.parse_args(argv)
    assert args.verbose is True and args.debug is True
    plain = parser.parse_args(base)
    assert plain.verbose is False and plain.debug is False


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["before", "after"])
def test_threads_before_or_after_the_command(command, where, table, tmp_path):
    parser = build_parser()
    base = command_argv(command, table, tmp_path / "o")
    argv = ["--threads", "1", *base] if where == "before" else [*base, "--threads", "1"]
    assert parser.parse_args(argv).threads == 1
    assert parser.parse_args(base).threads is None  # the policy decides


@pytest.mark.parametrize("bad", ["0", "-2", "1.5", "many"])
def test_threads_must_be_a_positive_integer(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--threads", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--threads" in err and repr(bad) in err


@pytest.mark.parametrize("command", COMMANDS)
def test_existing_output_needs_force(command, table, tmp_path, capsys):
    out = tmp_path / "out"
    if command in ("train", "audit"):
        out.mkdir()
        (out / "mine.txt").write_text("keep")
    else:
        out.write_text("keep")
    assert main(command_argv(command, table, out)) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err and str(out) in err
    kept = out / "mine.txt" if out.is_dir() else out
    assert kept.read_text() == "keep"
    if command in ("train", "audit"):  # --force replaces gnnaudit's files only
        assert main([*command_argv(command, table, out), "--force"]) == 0
        assert (out / "mine.txt").read_text() == "keep"
        assert len(list(out.iterdir())) > 2
        return
    # a file gnnaudit did not write is never replaced, --force or not (issue 38)
    assert main([*command_argv(command, table, out), "--force"]) == 2
    assert "not written by gnnaudit" in capsys.readouterr().err
    assert out.read_text() == "keep"
    out.unlink()
    assert main(command_argv(command, table, out)) == 0  # now gnnaudit's (its folder's manifest)
    assert main(command_argv(command, table, out)) == 2  # still needs --force
    out.write_text("edited")
    assert main([*command_argv(command, table, out), "--force"]) == 0
    assert out.read_text() != "edited"  # listed: gnnaudit's to replace


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_output_path_fails_before_the_computation(command, table, tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    out = tmp_path / "plain" / "out"
    # the data (or dataset) argument is broken too: the output check must come first
    argv = command_argv(command, table, out)
    if command in ("train", "evidence", "audit"):
        # a dataset that cannot load (no --root); out-of-range sizes are usage errors now
        argv += ["--dataset", "german", "--root", str(tmp_path / "no-such-root")]
    # (a missing input file is named even earlier, before any import: tests/test_cli_pipes.py)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "which is a file" in err


def test_output_alias_is_deprecated_but_works(table, tmp_path, capsys):
    out = tmp_path / "labels.csv"
    argv = ["tree-cluster", str(table), "--ignore", "g", "--n-clusters", "2", "--depth", "1"]
    assert main([*argv, "--output", str(out)]) == 0
    assert len(pd.read_csv(out)) == 40
    err = capsys.readouterr().err
    assert "gnnaudit: FutureWarning: --output is deprecated" in err and "use --out" in err
    assert err.count("--output") == 1  # one line, no source line of argparse


def test_explain_dbscan_out_writes_the_changes(table, tmp_path):
    out = tmp_path / "changes.csv"
    assert main(command_argv("explain-dbscan", table, out)) == 0
    changes = pd.read_csv(out)
    assert list(changes.columns[:3]) == ["counterfactual", "target", "valid"]
    assert set(changes["feature"]) <= {"x", "y"}


def test_unexpected_error_is_one_line_unless_debug(table, tmp_path, capsys, monkeypatch):
    def broken(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(fairden_cli, "run", broken)
    argv = ["fairden", str(table), "--sensitive", "g"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and "rerun with --debug" in err and "ZeroDivisionError" in err
    assert main([*argv, "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_file_errors_escaping_a_command_name_the_argument(table, tmp_path, capsys, monkeypatch):
    out = tmp_path / "labels.csv"

    def denied(args):
        raise PermissionError(13, "Permission denied", str(out))

    monkeypatch.setattr(fairden_cli, "run", denied)
    assert main(["fairden", str(table), "--sensitive", "g", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnnaudit fairden: error: --out: ")
    assert str(out) in err and "Permission denied" in err and "Traceback" not in err

    def undecodable(args):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(fairden_cli, "run", undecodable)
    assert main(["fairden", str(table), "--sensitive", "g"]) == 2
    err = capsys.readouterr().err
    assert "data: cannot read" in err and str(table) in err


def test_warnings_print_as_one_line(table, tmp_path, capsys, monkeypatch):
    import warnings

    def warns(args):
        warnings.warn("something odd\nacross lines", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(fairden_cli, "run", warns)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["fairden", str(table), "--sensitive", "g"]) == 0
    err = capsys.readouterr().err
    assert err == "gnnaudit: UserWarning: something odd across lines\n"


@pytest.mark.parametrize("command", ["evidence", "audit"])
def test_lightning_progress_never_leaks(command, tmp_path, capsys):
    extra = ["--no-finetune"] if command == "audit" else []
    argv = [command, *GRAPH_SMALL, *extra, "--progress", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert "Epoch" not in stream
        assert "GPU available" not in stream
