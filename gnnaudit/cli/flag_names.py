"""Errors that name the flag the user typed, not the Python parameter behind it.

The estimators and loaders the commands call speak Python: ``TreeClustering: min_clusters must
be <= n_clusters=2; got 5``, ``x_or_index: index 1000 is outside [0, 39]``,
``model.ckpt is not a NodeClassifier checkpoint``. Each command declares, with
:func:`set_parameter_flags`, which flag sets which parameter (and which estimator names may
prefix a message); :func:`flag_message`, applied by :func:`gnnaudit.cli.failures.run_command`
to every :class:`~gnnaudit.errors.GnnAuditError` it prints, rewrites

* a leading ``Owner: `` (an estimator's name) away;
* a parameter at the start of the message (``min_clusters must ...``, ``checkpoint: ...``) and
  every ``parameter=value`` into the flag (``--min-clusters must ...``, ``--n-clusters 2``);
* a parameter after "lower", "raise", "use" or "set" (``lower m`` -> ``lower --finetune-m``);
* a message that starts with the value of an input flag (a path) into ``--flag path ...``.

Words in running prose are left alone (``depth >= 7`` stays as it is), and so are names inside
quotes or joined to other words (``epsilon-optimal``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence

__all__ = ["set_parameter_flags", "flag_message"]

#: a parameter named right after one of these verbs is a flag to change
_AFTER_VERB = (
    "(?:" + "|".join(rf"(?<=\b{verb} )" for verb in ("lower", "raise", "use", "set")) + ")"
)


def set_parameter_flags(
    parser: argparse.ArgumentParser, flags: Mapping[str, str], owners: Sequence[str] = ()
) -> None:
    """Record on ``parser``'s namespace which flag sets each parameter (``{"min_clusters":
    "--min-clusters"}``) and the estimator names (``owners``) that may prefix its errors."""
    parser.set_defaults(parameter_flags=dict(flags), parameter_owners=tuple(owners))


def _input_prefix(message: str, args: argparse.Namespace) -> str:
    """``--flag PATH ...`` for a message that starts with the value of an input flag."""
    from gnnaudit.cli.guards import INPUT_ARGUMENTS

    for dest, flag in INPUT_ARGUMENTS.items():
        value = getattr(args, dest, None)
        if (
            isinstance(value, str)
            and len(value) > 1
            and message.startswith(value)
            and message[len(value) : len(value) + 1] in (":", " ")
        ):
            return f"{flag} {message}"
    return message


def _escaped(flag: str) -> str:
    """``flag`` as a literal in a :func:`re.sub` replacement."""
    return flag.replace("\\", "\\\\")


def flag_message(message: str, args: argparse.Namespace) -> str:
    """``message`` with the parameters of ``args``' command named by their flags (module
    doc); unchanged when the command declared none."""
    flags: Mapping[str, str] = getattr(args, "parameter_flags", None) or {}
    owners: Sequence[str] = getattr(args, "parameter_owners", None) or ()
    text = message
    for owner in owners:
        if text.startswith(f"{owner}: "):
            text = text[len(owner) + 2 :]
            break
    for param, flag in flags.items():
        name = re.escape(param)
        text = re.sub(rf"(?<![\w\-.'\"/]){name}=([^\s;,)]+)", rf"{_escaped(flag)} \1", text)
        text = re.sub(rf"^{name}(?=[\s:])", flag, text)
        text = re.sub(rf"{_AFTER_VERB}{name}(?![\w\-'\"/])", flag, text)
    return _input_prefix(text, args)
