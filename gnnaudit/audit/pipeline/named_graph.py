"""A fair-GNN benchmark graph named by its dataset name, for ``audit_model(model, "credit",
root=...)``: the graph ``gnnaudit train --dataset NAME --root DIR`` trains on, with the same
default split (stratified 50/25/25, seed 0), so the audit reads that model's test nodes."""

from __future__ import annotations

import os
from typing import Any

from gnnaudit._validation import check_choice
from gnnaudit.errors import InvalidInputError

__all__ = ["DATA_ROOT_ENV", "named_graph"]

#: the environment variable naming the data folder when ``root`` is not given (as the CLI's)
DATA_ROOT_ENV = "GNNAUDIT_DATA"


def named_graph(name: str, root: str | os.PathLike[str] | None = None) -> Any:
    """The graph ``name`` (one of :data:`~gnnaudit.datasets.NIFTY_DATASETS`: ``german``,
    ``bail``, ``credit``, ``nba``, ``pokec_z``, ``pokec_n``) loaded by
    :func:`~gnnaudit.datasets.load_nifty` from ``<root>/<name>/`` (``root`` default
    ``$GNNAUDIT_DATA``) with its default split and preprocessing. Built NIFTY edges are
    cached in ``<root>/<name>/processed/`` (a read-only folder works uncached, with a warning).
    """
    from gnnaudit.datasets import NIFTY_DATASETS, load_nifty

    name = check_choice("data", name, tuple(NIFTY_DATASETS))
    folder = root if root is not None else os.environ.get(DATA_ROOT_ENV)
    if not folder:
        raise InvalidInputError(
            f"data={name!r} names a dataset: give root=DIR (or ${DATA_ROOT_ENV}), the folder "
            f"holding {name}/"
        )
    return load_nifty(name, folder)
