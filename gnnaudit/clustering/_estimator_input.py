"""Input validation of the clustering estimators, through scikit-learn's own checks.

:func:`validate_fit_input` / :func:`validate_predict_input` run
``sklearn.utils.validation.validate_data`` through
:func:`gnnaudit._validation.validate_estimator_data` (dense, finite, 2-D, numeric), so sparse, complex,
object and ragged input get scikit-learn's standard messages, raised as
:class:`~gnnaudit.errors.InvalidInputError` (a ``ValueError``); where scikit-learn raises a
``TypeError`` (sparse matrices, entries that are not numbers) the error is an
:class:`InvalidInputTypeError`, both an ``InvalidInputError`` and a ``TypeError``. Before that a
pandas DataFrame with non-numeric columns is refused with a message that names them, a NaN / inf
is reported with its position, and explicit ``feature_names`` (or a DataFrame's non-string
column labels) become ``feature_names_in_``. :class:`EstimatorNotFittedError` is both
gnnaudit's and scikit-learn's ``NotFittedError``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils import Tags

from gnnaudit._validation import validate_estimator_data
from gnnaudit.errors import InvalidInputError, NotFittedError

__all__ = [
    "InvalidInputTypeError",
    "EstimatorNotFittedError",
    "DenseInputTagsMixin",
    "validate_fit_input",
    "validate_predict_input",
    "check_random_state_param",
]


class InvalidInputTypeError(InvalidInputError, TypeError):
    """Input of the wrong type (sparse matrix, entries that are not numbers): an
    :class:`~gnnaudit.errors.InvalidInputError` that is also the ``TypeError`` scikit-learn
    raises for it."""


class EstimatorNotFittedError(NotFittedError, SklearnNotFittedError):
    """A fitted-only method called before ``fit``: gnnaudit's
    :class:`~gnnaudit.errors.NotFittedError` and scikit-learn's ``NotFittedError``."""


def _sklearn_validate(
    estimator: Any, X: Any, *, reset: bool, name: str, min_samples: int = 1
) -> np.ndarray:
    """:func:`~gnnaudit._validation.validate_estimator_data`, with scikit-learn's TypeErrors
    kept as TypeErrors (:class:`InvalidInputTypeError`)."""
    try:
        return validate_estimator_data(
            estimator, X, reset=reset, name=name, min_samples=min_samples
        )
    except InvalidInputError as exc:
        if isinstance(exc.__cause__, TypeError):
            raise InvalidInputTypeError(str(exc)) from exc.__cause__
        raise


class DenseInputTagsMixin:
    """``__sklearn_tags__`` of the clustering estimators: dense, finite numeric 2-D input (no
    NaN, no sparse matrices), deterministic results (random choices are seeded). Put it before
    ``ClusterMixin`` and ``BaseEstimator`` in the bases."""

    def __sklearn_tags__(self) -> Tags:
        """scikit-learn tags with the input and determinism of these estimators."""
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        tags.non_deterministic = False
        return tags


def _check_frame_columns(X: Any, name: str) -> list[str] | None:
    """Column labels of a DataFrame ``X`` (as strings) after checking that every column is
    numeric; ``None`` for anything else."""
    if not hasattr(X, "columns") or not hasattr(X, "dtypes"):
        return None
    import pandas as pd

    bad = [
        (str(c), str(t))
        for c, t in zip(X.columns, X.dtypes, strict=True)
        if not (pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_complex_dtype(t))
        or pd.api.types.is_bool_dtype(t)
    ]
    if bad:
        cols = ", ".join(f"{c!r} ({t})" for c, t in bad[:5])
        raise InvalidInputError(
            f"{name} must hold numeric features only; column(s) {cols} are not numeric. "
            "Encode them (e.g. one-hot) or drop them before fitting"
        )
    return [str(c) for c in X.columns]


def _check_finite(X: Any, name: str) -> None:
    """A NaN / inf in a float array or DataFrame, reported with its position (scikit-learn's
    own message does not say where)."""
    if not (isinstance(X, np.ndarray) or hasattr(X, "dtypes")):
        return
    arr = np.asarray(X)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InvalidInputError(
            f"{name} must be finite (no NaN or inf); found {arr[tuple(bad)]} at index "
            f"{tuple(bad.tolist())}"
        )


def validate_fit_input(
    estimator: Any,
    X: Any,
    *,
    min_samples: int = 1,
    feature_names: Sequence[Any] | None = None,
    name: str = "X",
) -> np.ndarray:
    """Validate ``X`` in ``fit``: returns a float64 array and records ``n_features_in_`` and,
    when names are known (DataFrame columns or ``feature_names``), ``feature_names_in_``."""
    columns = _check_frame_columns(X, name)
    _check_finite(X, name)
    arr = _sklearn_validate(estimator, X, reset=True, name=name, min_samples=min_samples)
    names = [str(f) for f in feature_names] if feature_names is not None else columns
    if names is not None:
        if len(names) != arr.shape[1]:
            raise InvalidInputError(
                f"feature_names must have {arr.shape[1]} entries (one per column of {name}), "
                f"got {len(names)}"
            )
        estimator.feature_names_in_ = np.asarray(names, dtype=object)
    elif hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_
    return arr


def validate_predict_input(estimator: Any, X: Any, *, name: str = "X") -> np.ndarray:
    """Validate ``X`` after ``fit`` against ``n_features_in_`` (and the fitted feature names)."""
    _check_frame_columns(X, name)
    _check_finite(X, name)
    return _sklearn_validate(estimator, X, reset=False, name=name)


def check_random_state_param(value: Any) -> None:
    """Raise :class:`InvalidInputError` unless ``value`` is ``None``, an int in
    ``[0, 2**32)`` or a ``numpy.random.RandomState`` (what scikit-learn accepts)."""
    if value is None or isinstance(value, np.random.RandomState):
        return
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        if 0 <= int(value) < 2**32:
            return
        raise InvalidInputError(f"random_state must lie in [0, 2**32 - 1], got {int(value)}")
    raise InvalidInputError(
        "random_state must be None, an int seed in [0, 2**32 - 1] or a "
        f"numpy.random.RandomState, got {value!r}"
    )
