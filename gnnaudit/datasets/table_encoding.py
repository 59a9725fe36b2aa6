"""The declared rule that turns a node table's columns into model inputs, labels and splits.

Used by :func:`gnnaudit.datasets.read_graph`; every rule is applied column by column, never
row by row.

* **numeric column** (every non-blank cell a number): kept as it is.
* **text column** (every non-blank cell text), by its number of distinct values ``m``:

  - ``m <= 2``: one 0/1 column under the column's own name, 1 for the later value in sorted
    order (``gender`` with ``F`` / ``M``: 0 = F, 1 = M);
  - ``m > 2``: one-hot, one 0/1 column per value named ``column=value``, values in sorted
    order, placed where the column was;
  - named in ``ordinal``: one column of codes ``0..m-1`` of the sorted values.

  The values of every coded (non one-hot) column are kept in ``data.categories[column]`` in
  code order. A column mixing numbers and text, or with blank cells, is refused naming the rows.
* **sensitive column**: always one column (codes of its sorted values, so ``M`` / ``F``
  becomes 0/1), whatever its number of values: the audit flips that one input. Its group
  names stay in ``data.sensitive_values`` (code order).
* **label**: whole numbers ``>= 0`` as they are; text labels become codes of the sorted
  values, the names kept in ``data.class_names``.
* **split column**: values ``train`` / ``val`` / ``test`` (case and surrounding spaces
  ignored) become ``train_mask`` / ``val_mask`` / ``test_mask`` (one mask per value present);
  any other value is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gnnaudit.datasets.columns import category_codes, column_kind, describe_rows, name_list
from gnnaudit.errors import InvalidInputError

__all__ = ["SPLIT_VALUES", "encode_text_column", "label_codes", "split_masks"]

#: split-column value -> the mask it sets
SPLIT_VALUES: dict[str, str] = {"train": "train_mask", "val": "val_mask", "test": "test_mask"}


def encode_text_column(
    source: str, column: str, series: pd.Series, *, ordinal: bool
) -> tuple[dict[str, pd.Series], list | None]:
    """The model-input columns of one column (see the module rules) and, for a coded column,
    its values in code order (``None`` for a numeric or one-hot column)."""
    if column_kind(source, column, series) == "numeric":
        return {column: series}, None
    codes, values = category_codes(source, column, series)
    if ordinal or len(values) <= 2:
        return {column: pd.Series(codes, index=series.index)}, [_plain(v) for v in values]
    onehot = np.equal.outer(codes, np.arange(len(values))).astype(np.int8)
    return {
        f"{column}={_plain(v)}": pd.Series(onehot[:, j], index=series.index)
        for j, v in enumerate(values)
    }, None


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


def label_codes(source: str, column: str, series: pd.Series) -> tuple[pd.Series, list | None]:
    """A text label as codes of its sorted values and the class names; a numeric label as it
    is (checked later as whole numbers ``>= 0``) and ``None``."""
    if column_kind(source, column, series) == "numeric":
        return series, None
    codes, values = category_codes(source, column, series)
    return pd.Series(codes, index=series.index), [str(_plain(v)) for v in values]


def split_masks(source: str, argument: str, column: str, series: pd.Series) -> dict[str, pd.Series]:
    """``train_mask`` / ``val_mask`` / ``test_mask`` from a split column (module rules)."""
    text = series.astype("string").str.strip().str.lower()
    bad = (~text.isin(list(SPLIT_VALUES)) | text.isna()).to_numpy(dtype=bool)
    if bad.any():
        raise InvalidInputError(
            f"{argument}: column {column!r} of {source} must hold train, val or test; got "
            f"{describe_rows(series, bad)}"
        )
    return {
        mask: pd.Series((text == value).to_numpy(dtype=bool), index=series.index)
        for value, mask in SPLIT_VALUES.items()
        if bool((text == value).any())
    }


def check_columns(
    source: str, available: list[str], wanted: Mapping[str, object], flags: Mapping[str, str]
) -> None:
    """Each column named in ``wanted`` (argument -> name or list of names) exists; else one
    error naming the flag (``flags[argument]``, default the argument) and the columns."""
    for argument, value in wanted.items():
        if value is None:
            continue
        names = [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
        missing = [n for n in names if n not in available]
        if missing:
            raise InvalidInputError(
                f"{flags.get(argument, argument)}: {name_list(missing)} is not a column of "
                f"{source} (columns: {name_list(available)})"
            )
