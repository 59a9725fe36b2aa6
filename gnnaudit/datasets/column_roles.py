"""Which column of a node table is the node id, the label and the split: the naming convention.

Used by :func:`gnnaudit.datasets.read_graph` (and so by :func:`~gnnaudit.datasets.load_graph`
on a folder and by ``gnnaudit audit`` / ``gnnaudit train --graph``). Names are compared after
stripping spaces and lower-casing, so ``Split``, ``TARGET`` and `` id`` match.

=========  ======================================  ==============================================
role       conventional names                      the argument that names it (CLI flag)
=========  ======================================  ==============================================
id         ``id``, ``node_id``                     ``id_column`` (``--id-column``)
label      ``y``, ``label``, ``target``, ``class``  ``label`` (``--label``)
split      ``split``, ``set``, ``fold``            ``split_column`` (``--split-column``)
=========  ======================================  ==============================================

* A role whose argument is ``None`` (the default) takes the one column with a conventional
  name. Two such columns (``label`` and ``target``) are refused, naming both and the
  arguments that choose (the role's argument, or ``ignore`` to leave the other out).
* A column name given for a role wins; other columns named like that role are then ordinary
  columns (features), and a warning names them (``ignore`` leaves them out).
* ``label=False`` / ``split_column=False``: no label / no split column; conventionally named
  columns are ordinary columns. An ignored column never takes a role (``ignore=["label"]``
  with a single label-like column means no label).
* A split-like column holding none of the split values is no split: it stays an ordinary
  column, with a warning. Split values: ``train``, ``val``, ``test`` (any case, surrounding
  spaces ignored; ``validation``, ``valid`` and ``dev`` also mean ``val``). They become
  ``train_mask``, ``val_mask`` and ``test_mask``; any other value is refused naming the rows.
* A text column that would be one-hot encoded into more than ``max_categories`` features
  (default :data:`DEFAULT_MAX_CATEGORIES`) is refused, naming it and its number of distinct
  values, unless it is declared in ``categorical`` (or coded with ``ordinal``, or ignored).

The roles taken are logged (one INFO line) and kept in ``data.column_roles``
(role -> column name: ``id``, ``label``, ``split``, and ``sensitive`` / ``mask`` when given).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from gnnaudit.datasets.columns import column_kind, describe_rows, name_list
from gnnaudit.errors import InvalidInputError

__all__ = [
    "ID_NAMES",
    "LABEL_NAMES",
    "SPLIT_NAMES",
    "SPLIT_WORDS",
    "DEFAULT_MAX_CATEGORIES",
    "ColumnRoles",
    "named_like",
    "role_argument",
    "say",
    "log_roles",
    "find_id_column",
    "resolve_roles",
    "split_masks",
    "check_cardinality",
]

logger = logging.getLogger(__name__)

#: conventional names of the node-id column (compared lower-cased, stripped)
ID_NAMES: tuple[str, ...] = ("id", "node_id")
#: conventional names of the label column
LABEL_NAMES: tuple[str, ...] = ("y", "label", "target", "class")
#: conventional names of the split column
SPLIT_NAMES: tuple[str, ...] = ("split", "set", "fold")
#: split value (lower-cased, stripped) -> the mask it sets
SPLIT_WORDS: dict[str, str] = {
    "train": "train_mask",
    "val": "val_mask",
    "validation": "val_mask",
    "valid": "val_mask",
    "dev": "val_mask",
    "test": "test_mask",
}
#: most one-hot features one undeclared text column may become
DEFAULT_MAX_CATEGORIES = 50
_SPLIT_MASKS = ("train_mask", "val_mask", "test_mask")
_ALLOWED_SPLIT = "train, val or test (any case; validation, valid and dev also mean val)"


@dataclass(frozen=True)
class ColumnRoles:
    """The columns that play a role (``None``: no such column)."""

    id: str
    label: str | None
    split: str | None

    def as_dict(self, sensitive: str | None, mask: str | None) -> dict[str, str]:
        """``data.column_roles``: role -> column name, for the roles that are filled."""
        roles = {"id": self.id, "label": self.label, "split": self.split}
        roles.update(sensitive=sensitive, mask=mask)
        return {role: column for role, column in roles.items() if column is not None}


def named_like(columns: Iterable[str], names: Sequence[str]) -> list[str]:
    """The columns whose stripped, lower-cased name is one of ``names``, in table order."""
    wanted = set(names)
    return [c for c in columns if str(c).strip().lower() in wanted]


def say(flags: Mapping[str, str], argument: str, value: Any) -> str:
    """How to pass ``value`` to ``argument``: ``label='target'`` in Python, ``--label target``
    on the command line (``flags`` maps arguments to CLI flags)."""
    flag = flags.get(argument, argument)
    if flag.startswith("-"):
        shown = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        return f"{flag} {shown}"
    return f"{flag}={value!r}"


def role_argument(
    argument: str, value: Any, flags: Mapping[str, str]
) -> str | Literal[False] | None:
    """A role argument: a column name, ``None`` (the convention) or ``False`` (none)."""
    if value is None or value is False or isinstance(value, str):
        return value
    raise InvalidInputError(
        f"{flags.get(argument, argument)} must be a column name, None (the naming convention) "
        f"or False (no such column), got {value!r}"
    )


def _two_candidates(
    source: str, role: str, names: Sequence[str], found: list[str], argument: str, flags: Mapping
) -> InvalidInputError:
    conventional = ", ".join(names)
    return InvalidInputError(
        f"{source}: {len(found)} columns could be the {role}: {name_list(found)} (a column "
        f"named {conventional}, any case, is the {role}); choose one with "
        f"{say(flags, argument, found[0])} or leave the others out with "
        f"{say(flags, 'ignore', found[1:])}"
    )


def find_id_column(
    source: str,
    columns: Sequence[str],
    id_column: str | None,
    ignore: Sequence[str],
    flags: Mapping[str, str],
) -> str:
    """The node-id column: ``id_column`` when given, else the one column named ``id`` or
    ``node_id`` (any case); none or two are refused naming the columns and the argument."""
    if id_column is not None:
        if not isinstance(id_column, str):
            raise InvalidInputError(
                f"{flags.get('id_column', 'id_column')} must be a column name, got {id_column!r}"
            )
        _warn_others(source, "node id", ID_NAMES, columns, {id_column, *ignore}, id_column)
        return id_column
    found = [c for c in named_like(columns, ID_NAMES) if c not in ignore]
    if len(found) > 1:
        raise _two_candidates(source, "node id", ID_NAMES, found, "id_column", flags)
    if not found:
        raise InvalidInputError(
            f"{flags.get('id_column', 'id_column')}: {source} has no node-id column (none is "
            f"named id or node_id, any case); name it with {say(flags, 'id_column', 'COLUMN')} "
            f"(columns: {name_list(columns)})"
        )
    return found[0]


def _warn_others(
    source: str,
    role: str,
    names: Sequence[str],
    columns: Iterable[str],
    excluded: set[str],
    chosen: str,
) -> None:
    others = [c for c in named_like(columns, names) if c not in excluded]
    if others:
        logger.warning(
            "%s: column(s) %s are named like the %s but %r was chosen: they are ordinary "
            "columns (model inputs) unless you ignore them",
            source,
            name_list(others),
            role,
            chosen,
        )


def _split_words(series: pd.Series) -> pd.Series:
    """The mask name of each cell (``<NA>`` where the cell is no split value)."""
    return series.astype("string").str.strip().str.lower().map(SPLIT_WORDS)


def _pick(
    source: str,
    frame: pd.DataFrame,
    role: str,
    value: str | Literal[False] | None,
    excluded: set[str],
    flags: Mapping[str, str],
) -> str | None:
    """The column of ``role`` (``"label"`` or ``"split"``) by the module rules."""
    names, argument = (LABEL_NAMES, "label") if role == "label" else (SPLIT_NAMES, "split_column")
    if value is False:
        return None
    if isinstance(value, str):
        _warn_others(source, role, names, frame.columns, excluded | {value}, value)
        return value
    found = [c for c in named_like(frame.columns, names) if c not in excluded]
    if role == "split":
        holds = {c: bool(_split_words(frame[c]).notna().any()) for c in found}
        for column in (c for c in found if not holds[c]):
            logger.warning(
                "%s: column %r is named like a split column but holds none of %s; it is an "
                "ordinary column (model input) unless you ignore it",
                source,
                column,
                _ALLOWED_SPLIT,
            )
        found = [c for c in found if holds[c]]
    if len(found) > 1:
        raise _two_candidates(source, role, names, found, argument, flags)
    return found[0] if found else None


def resolve_roles(
    source: str,
    frame: pd.DataFrame,
    *,
    id_column: str,
    label: Any,
    split_column: Any,
    sensitive: str | None,
    mask_column: str | None,
    ignore: Sequence[str],
    flags: Mapping[str, str],
) -> ColumnRoles:
    """The label and split columns of ``frame`` (the id column already chosen) by the module
    rules; also refuses a split column beside ``train_mask`` / ``val_mask`` / ``test_mask``."""
    label = role_argument("label", label, flags)
    split_column = role_argument("split_column", split_column, flags)
    explicit = {v for v in (label, split_column) if isinstance(v, str)}
    excluded = {id_column, *ignore, *explicit}
    excluded |= {c for c in (sensitive, mask_column) if c is not None}
    label_name = _pick(source, frame, "label", label, excluded, flags)
    split_name = _pick(source, frame, "split", split_column, excluded, flags)
    if split_name is not None:
        clash = [m for m in _SPLIT_MASKS if m in frame.columns and m not in ignore]
        if clash:
            what = (
                say(flags, "split_column", split_name)
                if isinstance(split_column, str)
                else f"column {split_name!r} (a split column by its name)"
            )
            raise InvalidInputError(
                f"{what}: {source} also holds {clash}; keep one of them (leave the other out "
                f"with {say(flags, 'ignore', [split_name])} or {say(flags, 'ignore', clash)})"
            )
    return ColumnRoles(id=id_column, label=label_name, split=split_name)


def split_masks(source: str, argument: str, column: str, series: pd.Series) -> dict[str, pd.Series]:
    """``train_mask`` / ``val_mask`` / ``test_mask`` from a split column (one mask per value
    present); a cell that is no split value (blank included) is refused naming the rows."""
    masks = _split_words(series)
    bad = masks.isna().to_numpy(dtype=bool)
    if bad.any():
        raise InvalidInputError(
            f"{argument}: column {column!r} of {source} must hold {_ALLOWED_SPLIT}; got "
            f"{describe_rows(series, bad)}"
        )
    return {
        mask: pd.Series((masks == mask).to_numpy(dtype=bool), index=series.index)
        for mask in _SPLIT_MASKS
        if bool((masks == mask).any())
    }


def check_cardinality(
    source: str,
    frame: pd.DataFrame,
    *,
    categorical: Sequence[str],
    max_categories: int,
    flags: Mapping[str, str],
) -> None:
    """Refuse a text column of ``frame`` (the columns that will be one-hot encoded) with more
    than ``max_categories`` distinct values, unless it is in ``categorical``."""
    for column in frame.columns:
        if column in categorical:
            continue
        series = frame[column]
        if column_kind(source, column, series) != "categorical":
            continue
        distinct = int(series.nunique())
        if distinct > max(max_categories, 2):
            raise InvalidInputError(
                f"{source}: text column {column!r} holds {distinct} distinct values; one-hot "
                f"encoding would make {distinct} model inputs, more than "
                f"{say(flags, 'max_categories', max_categories)}. Declare it with "
                f"{say(flags, 'categorical', [column])} to one-hot encode it anyway, code it "
                f"0..m-1 with {say(flags, 'ordinal', [column])}, or leave it out with "
                f"{say(flags, 'ignore', [column])}"
            )


def log_roles(source: str, roles: Mapping[str, str], features: Sequence[str]) -> None:
    """One INFO line: which column took which role, and the model inputs."""
    shown = ", ".join(f"{role}={column!r}" for role, column in roles.items())
    logger.info(
        "%s: column roles %s; %d model input(s): %s",
        source,
        shown,
        len(features),
        name_list(features),
    )
