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
    "TrainingDivergedError",
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


class TrainingDivergedError(InvalidInputError):
    """Training (or fine-tuning) produced a non-finite loss or non-finite weights: the
    learning rate is too large for the data's scale. Nothing (no checkpoint) is written."""
