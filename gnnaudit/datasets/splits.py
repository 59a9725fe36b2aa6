"""Seeded train / validation / test node splits and edge clean-up shared by the graph loaders.

Every graph loader of :mod:`gnnaudit.datasets` returns masks that *partition* the nodes (each
node lies in exactly one of ``train_mask``, ``val_mask``, ``test_mask``) and an ``edge_index``
that is undirected (both directions present), free of self loops and of duplicates.

Default fractions are 50 % / 25 % / 25 %, the split commonly used for the NIFTY fairness graphs
(German, Bail, Credit) and large enough that the test set holds many counterfactual-evidence
candidates.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from gnnaudit._validation import check_edge_index, check_float, check_int, check_seed
from gnnaudit.errors import InvalidInputError

__all__ = [
    "DEFAULT_FRACTIONS",
    "NodeSplit",
    "stratified_masks",
    "random_masks",
    "attach_masks",
    "clean_edge_index",
]

#: (train, val, test) fractions used when a loader has to make its own split.
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.5, 0.25, 0.25)


@dataclass(frozen=True)
class NodeSplit:
    """Three boolean masks of length ``num_nodes`` that partition the nodes."""

    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor

    def sizes(self) -> dict[str, int]:
        """Number of nodes in each part."""
        return {
            "train": int(self.train_mask.sum()),
            "val": int(self.val_mask.sum()),
            "test": int(self.test_mask.sum()),
        }


def _check_fractions(train: float, val: float, test: float) -> tuple[float, float, float]:
    fr = tuple(
        check_float(n, v, minimum=0.0, maximum=1.0, inclusive=(False, False))
        for n, v in (("train", train), ("val", val), ("test", test))
    )
    if abs(sum(fr) - 1.0) > 1e-6:
        raise InvalidInputError(
            f"train + val + test must equal 1, got {train} + {val} + {test} = {sum(fr)}"
        )
    return fr  # type: ignore[return-value]


def _split_by_rank(
    rank: np.ndarray, size: np.ndarray, fractions: tuple[float, float, float]
) -> NodeSplit:
    """Assign each node by its rank inside its stratum of ``size`` nodes.

    A stratum of ``s`` nodes gives ``round(train * s)`` nodes to train (at least one),
    ``round(val * s)`` to validation (never more than remain) and the rest to test.
    """
    train, val, _ = fractions
    n_train = np.maximum(np.rint(train * size), 1)
    n_val = np.minimum(np.rint(val * size), np.maximum(size - n_train, 0))
    train_mask = rank < n_train
    val_mask = (rank >= n_train) & (rank < n_train + n_val)
    test_mask = ~(train_mask | val_mask)
    return NodeSplit(
        torch.from_numpy(train_mask), torch.from_numpy(val_mask), torch.from_numpy(test_mask)
    )


def stratified_masks(
    y: torch.Tensor | np.ndarray,
    train: float = DEFAULT_FRACTIONS[0],
    val: float = DEFAULT_FRACTIONS[1],
    test: float = DEFAULT_FRACTIONS[2],
    seed: int = 0,
) -> NodeSplit:
    """Stratified, seeded split of the nodes into train / validation / test.

    Within every class ``c`` with ``n_c`` nodes, a seeded random permutation puts the first
    ``round(train * n_c)`` (at least 1) nodes into train, the next ``round(val * n_c)`` into
    validation and the rest into test, so class proportions are preserved in each part and the
    three masks partition the nodes. Vectorised: one permutation and one stable sort, O(n log n).

    Parameters
    ----------
    y : (n,) integer class labels, all >= 0.
    train, val, test : fractions in (0, 1) summing to 1.
    seed : seed of the numpy generator; the same seed gives the same masks.
    """
    fractions = _check_fractions(train, val, test)
    seed = check_seed("seed", seed)
    labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.ndim != 1 or labels.size == 0:
        raise InvalidInputError(f"y must be a non-empty 1-D array, got shape {labels.shape}")
    if labels.dtype.kind not in "iub":
        raise InvalidInputError(f"y must hold integer class labels, got dtype {labels.dtype}")
    labels = labels.astype(np.int64)
    if labels.min() < 0:
        raise InvalidInputError(f"y must hold labels >= 0, got minimum {labels.min()}")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(labels.size)
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by class, shuffled inside
    counts = np.bincount(labels)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.empty(labels.size, dtype=np.int64)
    rank[order] = np.arange(labels.size) - starts[labels[order]]
    return _split_by_rank(rank, counts[labels], fractions)


def random_masks(
    num_nodes: int,
    train: float = DEFAULT_FRACTIONS[0],
    val: float = DEFAULT_FRACTIONS[1],
    test: float = DEFAULT_FRACTIONS[2],
    seed: int = 0,
) -> NodeSplit:
    """Seeded uniform split of ``num_nodes`` nodes (for multi-label targets, which cannot be
    stratified). Same rounding rule as :func:`stratified_masks` with a single stratum."""
    fractions = _check_fractions(train, val, test)
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    seed = check_seed("seed", seed)
    rank = np.empty(num_nodes, dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(num_nodes)] = np.arange(num_nodes)
    return _split_by_rank(rank, np.full(num_nodes, num_nodes), fractions)


def attach_masks(
    data: Data,
    seed: int = 0,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    overwrite: bool = False,
) -> Data:
    """Give ``data`` train / val / test masks unless it already has all three.

    Existing masks are kept when ``overwrite`` is false (e.g. the split a PyG dataset ships).
    Single-label ``y`` (1-D) gets :func:`stratified_masks`, anything else :func:`random_masks`.
    Returns a shallow copy (tensors are shared, not copied); ``data`` itself is not modified.
    """
    out = copy.copy(data)
    have = all(getattr(out, k, None) is not None for k in ("train_mask", "val_mask", "test_mask"))
    if have and not overwrite:
        return out
    y = getattr(out, "y", None)
    if isinstance(y, torch.Tensor) and y.dim() == 1 and not y.is_floating_point():
        split = stratified_masks(y, *fractions, seed=seed)
    else:
        split = random_masks(out.num_nodes, *fractions, seed=seed)
    out.train_mask, out.val_mask, out.test_mask = split.train_mask, split.val_mask, split.test_mask
    return out


def clean_edge_index(edge_index: torch.Tensor | np.ndarray, num_nodes: int) -> torch.Tensor:
    """Return ``edge_index`` made undirected (both directions), without self loops and duplicates.

    Output columns are sorted (row-major) by PyG's ``coalesce``.
    """
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    ei = check_edge_index("edge_index", edge_index, num_nodes)
    ei, _ = remove_self_loops(ei)
    ei = to_undirected(ei, num_nodes=num_nodes)
    return coalesce(ei, num_nodes=num_nodes)
