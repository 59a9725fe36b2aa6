"""The published node splits of NIFTY and FairGNN, reproduced index for index.

Both reference loaders shuffle node indices with Python's ``random`` module (Mersenne Twister,
``random.seed(seed)`` then ``random.shuffle``); the same permutation is obtained here from a
private ``random.Random(seed)``, so the masks equal the published ones for the same seed (20 in
both papers' scripts). Unlike :func:`gnnaudit.datasets.stratified_masks`, these masks do *not*
partition the nodes: nodes between the training cap and the validation share belong to no mask.

**NIFTY** (Agarwal et al. 2021), per label ``c`` in {0, 1} with shuffled indices ``I_c``
(``I_0`` shuffled first, then ``I_1``, from one generator):

* train: ``I_c[: min(floor(|I_c| / 2), label_number // 2)]``, i.e. balanced and capped;
* validation: ``I_c[floor(|I_c| / 2) : floor(3 |I_c| / 4)]``;
* test: ``I_c[floor(3 |I_c| / 4) :]``.

Published ``label_number``: german 100, bail 100, credit 6000.

**FairGNN** (Dai & Wang 2021), with ``I`` the shuffled labelled nodes (label >= 0):

* train: ``I[: min(floor(|I| / 2), label_number)]``;
* validation: ``I[floor(|I| / 2) : floor(3 |I| / 4)]``, test ``I[floor(3 |I| / 4) :]``;
* NBA's script passes ``test_idx=True``: test is ``I[label_number :]`` and validation is the
  same set as test (kept as published; ``val_mask == test_mask``, a leak of the test nodes into
  any selection on validation: :func:`warn_overlap` warns, ``split="stratified"`` avoids it);
* test keeps only nodes with a known sensitive value (>= 0).

Published ``label_number``: pokec_z / pokec_n 500, nba 100.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import torch

from gnnaudit._validation import check_int
from gnnaudit.datasets.splits import NodeSplit
from gnnaudit.errors import InvalidInputError

__all__ = [
    "NIFTY_LABEL_NUMBER",
    "PUBLISHED_SPLIT_SEED",
    "nifty_split",
    "fairgnn_split",
    "warn_overlap",
]

#: ``label_number`` of the reference scripts (NIFTY's nifty_sota_gnn.py, FairGNN's
#: train_fairGNN.py).
NIFTY_LABEL_NUMBER: dict[str, int] = {
    "german": 100,
    "bail": 100,
    "credit": 6000,
    "nba": 100,
    "pokec_z": 500,
    "pokec_n": 500,
}

#: Seed both reference loaders pass to ``random.seed``.
PUBLISHED_SPLIT_SEED = 20


def _shuffled(rng: random.Random, idx: np.ndarray) -> np.ndarray:
    # Python's shuffle on a list gives the permutation the references get on their numpy array;
    # its loop runs inside the standard library (O(n), once per load), not in a hot path.
    items = idx.tolist()
    rng.shuffle(items)
    return np.asarray(items, dtype=np.int64)


def _masks(num_nodes: int, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> NodeSplit:
    out = []
    for idx in (train, val, test):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[torch.from_numpy(np.asarray(idx, dtype=np.int64))] = True
        out.append(mask)
    return NodeSplit(*out)


def _labels(y: torch.Tensor | np.ndarray) -> np.ndarray:
    labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.ndim != 1 or labels.size == 0 or labels.dtype.kind not in "iub":
        raise InvalidInputError(
            f"y must be a non-empty 1-D integer array, got shape {labels.shape}, dtype "
            f"{labels.dtype}"
        )
    return labels.astype(np.int64)


def nifty_split(
    y: torch.Tensor | np.ndarray,
    label_number: int,
    seed: int = PUBLISHED_SPLIT_SEED,
    labelled: torch.Tensor | np.ndarray | None = None,
) -> NodeSplit:
    """NIFTY's label-balanced split (module docstring) of binary labels ``y``.

    ``labelled`` (bool, optional) restricts the split to those nodes (the others are in no
    mask); NIFTY's own graphs are fully labelled.
    """
    labels = _labels(y)
    label_number = check_int("label_number", label_number, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    known = np.ones(labels.size, bool) if labelled is None else np.asarray(labelled, dtype=bool)
    rng = random.Random(seed)
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in (0, 1):
        idx = _shuffled(rng, np.flatnonzero((labels == c) & known))
        half, three_q = int(0.5 * idx.size), int(0.75 * idx.size)
        parts[0].append(idx[: min(half, label_number // 2)])
        parts[1].append(idx[half:three_q])
        parts[2].append(idx[three_q:])
    if not all(p.size for p in parts[0]):
        raise InvalidInputError("split='nifty' needs both labels 0 and 1 among the labelled nodes")
    return _masks(labels.size, *(np.concatenate(p) for p in parts))


def fairgnn_split(
    y: torch.Tensor | np.ndarray,
    sensitive_known: torch.Tensor | np.ndarray,
    label_number: int,
    seed: int = PUBLISHED_SPLIT_SEED,
    *,
    test_after_label_number: bool = False,
    labelled: torch.Tensor | np.ndarray | None = None,
) -> NodeSplit:
    """FairGNN's split (module docstring): ``labelled`` marks nodes with a label (default: all);
    ``test_after_label_number`` is the NBA variant."""
    labels = _labels(y)
    label_number = check_int("label_number", label_number, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    known = np.ones(labels.size, bool) if labelled is None else np.asarray(labelled, dtype=bool)
    idx = _shuffled(random.Random(seed), np.flatnonzero(known))
    half, three_q = int(0.5 * idx.size), int(0.75 * idx.size)
    train = idx[: min(half, label_number)]
    if test_after_label_number:
        test = idx[label_number:]
        val = test
    else:
        val, test = idx[half:three_q], idx[three_q:]
    test = test[np.asarray(sensitive_known, dtype=bool)[test]]
    if train.size == 0 or test.size == 0:
        raise InvalidInputError(
            f"split='fairgnn' left an empty train or test set ({idx.size} labelled nodes, "
            f"label_number={label_number})"
        )
    return _masks(labels.size, train, val, test)


def warn_overlap(split: NodeSplit, rule: str, *, stacklevel: int = 2) -> int:
    """Warn (``UserWarning``) when ``split``'s validation and test masks share nodes: a model
    chosen or tuned on validation nodes has then seen test nodes, and its test figures are
    optimistic. Returns the number of shared nodes (0: no warning)."""
    shared = int((split.val_mask & split.test_mask).sum())
    if shared:
        n_val, n_test = int(split.val_mask.sum()), int(split.test_mask.sum())
        warnings.warn(
            f"split={rule!r}: {shared} node(s) are both validation and test nodes "
            f"({n_val} validation, {n_test} test): selecting or tuning a model on the "
            "validation nodes leaks the test nodes, so test figures are optimistic; use "
            "split='stratified' for disjoint validation and test nodes",
            UserWarning,
            stacklevel=stacklevel,
        )
    return shared
