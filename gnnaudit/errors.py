"""Error classes raised by gnnaudit's public entry points.

Every public function validates its input and raises one of these with a message that names
the argument, the offending value and what is allowed.
"""

from __future__ import annotations

__all__ = [
    "GnnAuditError",
    "InvalidInputError",
    "InfeasibleError",
    "NotFittedError",
    "MODEL_ERROR_NOTE",
    "note_model_error",
    "model_error_stage",
    "TrainingDivergedError",
    "MissingDependencyError",
    "WorkerLostError",
]


class GnnAuditError(Exception):
    """Base class of every error gnnaudit raises on purpose."""


class InvalidInputError(GnnAuditError, ValueError):
    """An argument has the wrong type, shape, range or content (NaN, inf, out of range ...)."""


class InfeasibleError(GnnAuditError):
    """The request is well formed but cannot be satisfied (contradictory constraints, no
    eligible reference point, ...)."""


class NotFittedError(GnnAuditError, RuntimeError):
    """A method that needs a fitted estimator was called before ``fit``."""


#: start of the note added to an exception raised by the user's model (see
#: :func:`note_model_error`); the CLI looks for it to print one line instead of a traceback
MODEL_ERROR_NOTE = "gnnaudit: raised by your model during "


def note_model_error(exc: BaseException, stage: str) -> BaseException:
    """Mark ``exc``, raised by the user's model, with a note naming the audit ``stage`` (once:
    the innermost stage is kept) and return it; the caller re-raises it unchanged, so the
    user sees their own exception and its traceback, never an "invalid input".

    The note reads ``"gnnaudit: raised by your model during <stage>"``
    (:data:`MODEL_ERROR_NOTE`); :func:`model_error_stage` reads it back.
    """
    if model_error_stage(exc) is None:
        note = MODEL_ERROR_NOTE + stage
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        else:  # pragma: no cover - Python 3.10 has no add_note
            exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined,unused-ignore]
    return exc


def model_error_stage(exc: BaseException) -> str | None:
    """The audit stage named by :func:`note_model_error` on ``exc``, or None when ``exc`` was
    not raised by the user's model."""
    for note in getattr(exc, "__notes__", None) or ():
        if isinstance(note, str) and note.startswith(MODEL_ERROR_NOTE):
            return note[len(MODEL_ERROR_NOTE) :]
    return None


class TrainingDivergedError(InvalidInputError):
    """Training (or fine-tuning) produced a non-finite loss or non-finite weights: the
    learning rate is too large for the data's scale. Nothing (no checkpoint) is written."""


class MissingDependencyError(GnnAuditError, ImportError):
    """A feature that needs an optional dependency was asked for explicitly, and the
    dependency is not installed; the message names the ``pip install 'gnnaudit[<extra>]'``
    that provides it."""


class WorkerLostError(GnnAuditError, RuntimeError):
    """A worker of the Dask cluster running the audit's distributed steps died or was
    restarted while it held a partition (most often killed by its nanny above 95% of its
    memory limit); the message names the step and the workers' memory limits."""
