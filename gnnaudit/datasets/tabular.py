"""Tabular data for the clustering methods: a csv / DataFrame loader and the FairDen moons.

The clustering estimators take plain arrays; :class:`TabularData` carries those arrays with their
names so that command-line tools and examples can print readable results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import check_float, check_int, check_seed
from gnnaudit.datasets.columns import category_codes, column_kind, numeric_column
from gnnaudit.errors import InvalidInputError
from gnnaudit.safe_io import read_csv

__all__ = ["TabularData", "load_tabular", "three_moons"]


@dataclass
class TabularData:
    """A table split into the parts the clustering methods use.

    Attributes
    ----------
    X : (n, d) float64 array of the numeric feature columns.
    categorical : (n, c) int64 array of category codes (0..m-1 per column), or ``None``.
    sensitive : (n,) or (n, s) int64 array of sensitive-group codes, or ``None``.
    labels : (n,) array of labels (int64 codes), or ``None``.
    feature_names : names of the columns of ``X``.
    categorical_names, sensitive_names : names of the columns of ``categorical`` / ``sensitive``.
    categories : for every categorical and sensitive column, the original values in code order.
    """

    X: np.ndarray
    categorical: np.ndarray | None = None
    sensitive: np.ndarray | None = None
    labels: np.ndarray | None = None
    feature_names: list[str] = field(default_factory=list)
    categorical_names: list[str] = field(default_factory=list)
    sensitive_names: list[str] = field(default_factory=list)
    categories: dict[str, list] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])


def _as_list(name: str, value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    items = list(value)
    if not all(isinstance(v, str) for v in items):
        raise InvalidInputError(f"{name} must be a column name or a list of names, got {value!r}")
    return items


def _codes(
    source: str, frame: pd.DataFrame, columns: list[str], categories: dict[str, list]
) -> np.ndarray:
    out = np.empty((len(frame), len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        out[:, j], categories[col] = category_codes(source, col, frame[col])
    return out


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def load_tabular(
    source: str | os.PathLike | pd.DataFrame,
    label: str | None = None,
    sensitive: str | Sequence[str] | None = None,
    categorical: str | Sequence[str] | None = None,
    *,
    name: str = "source",
) -> TabularData:
    """Load a csv file or a DataFrame into :class:`TabularData`.

    ``name`` is how error messages call ``source`` (a command-line tool passes its argument's
    name).

    Every column that is not the label, a sensitive column or a categorical column must be
    numeric and becomes a column of ``X``. Sensitive and categorical columns are factorised to
    integer codes (sorted values; the originals are kept in ``categories``). Sensitive columns are
    not features here: clustering methods take them separately.

    Cells follow the rules of :mod:`gnnaudit.datasets.columns`: a feature column mixing numbers
    and text is refused naming the text cells; missing values in any used column are refused
    naming the column and rows.

    Raises
    ------
    InvalidInputError
        missing, empty, binary or unparsable file, missing column, a non-numeric feature column,
        missing or infinite values.
    """
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
        where = name
    else:
        frame = read_csv(name, source, min_rows=0)
        where = f"{name} {os.fspath(source)!r}"
    if frame.shape[0] == 0:
        raise InvalidInputError(f"{where}: the table has no rows")
    repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if repeated:
        raise InvalidInputError(f"{where}: column name(s) {repeated} appear more than once")
    sens_cols = _as_list("sensitive", sensitive)
    cat_cols = _as_list("categorical", categorical)
    named = ([label] if label is not None else []) + sens_cols + cat_cols
    missing = [c for c in named if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"column(s) {missing} not found; available columns: {list(map(str, frame.columns))}"
        )
    feature_cols = [c for c in frame.columns if c not in set(named)]
    non_numeric = [c for c in feature_cols if column_kind(where, str(c), frame[c]) == "categorical"]
    if non_numeric:
        raise InvalidInputError(
            f"{where}: feature column(s) {non_numeric} are not numeric; declare them with "
            "categorical=..."
        )
    X = np.empty((len(frame), len(feature_cols)), dtype=np.float64)
    for j, col in enumerate(feature_cols):
        X[:, j] = numeric_column(where, str(col), frame[col])
    categories: dict[str, list] = {}
    cat = _codes(where, frame, cat_cols, categories) if cat_cols else None
    sens = _codes(where, frame, sens_cols, categories) if sens_cols else None
    if sens is not None and sens.shape[1] == 1:
        sens = sens[:, 0]
    labels = None
    if label is not None:
        labels = _codes(where, frame, [label], categories)[:, 0]
    return TabularData(
        X=X,
        categorical=cat,
        sensitive=sens,
        labels=labels,
        feature_names=[str(c) for c in feature_cols],
        categorical_names=cat_cols,
        sensitive_names=sens_cols,
        categories=categories,
    )


def three_moons(n_per_moon: int = 500, noise: float = 0.05, seed: int = 0) -> TabularData:
    """The three-moons data of the FairDen paper (Figure 1).

    Three half circles in 2-D: the two interleaved moons of ``sklearn.datasets.make_moons`` and a
    third upper moon to their right, each separated from its neighbour by a gap of about 0.5. The binary sensitive attribute is split half/half in
    moon 0, all group 0 in moon 1 and all group 1 in moon 2, so density-based clusters (the
    moons) are unbalanced while a fair clustering must mix moons. ``labels`` is the moon id.
    Gaussian noise with standard deviation ``noise`` is added to both coordinates.
    """
    n_per_moon = check_int("n_per_moon", n_per_moon, minimum=2)
    noise = check_float("noise", noise, minimum=0.0)
    seed = check_seed("seed", seed)
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, np.pi, n_per_moon)
    upper = np.column_stack([np.cos(t), np.sin(t)])
    lower = np.column_stack([1.0 - np.cos(t), 0.5 - np.sin(t)])
    # an upper half circle right of the second moon, with the same gap (about 0.5) as the
    # first two moons, so the three moons are three density-connected clusters
    third = np.column_stack([3.5 + np.cos(t), np.sin(t)])
    X = np.vstack([upper, lower, third]) + rng.normal(scale=noise, size=(3 * n_per_moon, 2))
    labels = np.repeat(np.arange(3, dtype=np.int64), n_per_moon)
    half = np.zeros(n_per_moon, dtype=np.int64)
    half[rng.permutation(n_per_moon)[: n_per_moon // 2]] = 1
    sensitive = np.concatenate(
        [half, np.zeros(n_per_moon, dtype=np.int64), np.ones(n_per_moon, dtype=np.int64)]
    )
    return TabularData(
        X=X,
        sensitive=sensitive,
        labels=labels,
        feature_names=["x0", "x1"],
        sensitive_names=["group"],
        categories={"group": [0, 1]},
    )
