"""A synthetic credit-risk graph with a planted, tunable gender bias (the demo's default data).

Generative model, seeded by ``seed``:

* ``gender`` ~ Bernoulli(1/2), drawn **independently** of everything else (1 = female).
* Ten non-sensitive credit features, drawn independently of ``gender``: six numeric
  (``age``, ``income``, ``debt_ratio``, ``credit_history_years``, ``loan_amount``,
  ``late_payments``) and four binary (``homeowner``, ``employed``, ``has_guarantor``,
  ``savings_account``). Numeric columns are standardised (z-scores); binary columns stay 0/1.
* Label (1 = good credit):

  .. math:: s_v = w^\\top z_v + \\varepsilon_v + \\text{bias} \\cdot g_v, \\qquad
            y_v = [\\, s_v > \\operatorname{median}(s) \\,],\\qquad \\varepsilon_v \\sim N(0, 0.5^2)

  with fixed weights ``w`` on the non-sensitive features ``z``. With ``bias = 0`` the label is
  a function of ``z`` and independent noise only, hence independent of ``gender`` given ``z``.
* Edges: each individual links to its ``k = 4`` nearest neighbours in the non-sensitive feature
  space (similar people know each other) plus ``4`` random acquaintances, each of the same
  gender with probability ``homophily`` and of the other gender otherwise
  (``homophily = 0.5`` is gender-blind mixing, ``1`` only same-gender, ``0`` only cross-gender).
  The graph is then symmetrised, self loops and duplicates removed.

``gender`` is both a feature column (so a GNN can learn the planted effect and a counterfactual
audit can detect it) and ``data.sensitive``.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch_geometric.data import Data

from gnnaudit._validation import MAX_SYNTHETIC_NODES, check_float, check_int, check_seed
from gnnaudit.datasets.splits import DEFAULT_FRACTIONS, stratified_masks

__all__ = ["synthetic_credit_graph", "SYNTHETIC_FEATURES"]

#: Feature columns of :func:`synthetic_credit_graph`, in order (``gender`` last).
SYNTHETIC_FEATURES: tuple[str, ...] = (
    "age",
    "income",
    "debt_ratio",
    "credit_history_years",
    "loan_amount",
    "late_payments",
    "homeowner",
    "employed",
    "has_guarantor",
    "savings_account",
    "gender",
)

# Weights of the (standardised) non-sensitive features in the credit score, same column order.
_WEIGHTS = np.array([0.3, 0.9, -0.8, 0.5, -0.4, -0.9, 0.5, 0.7, 0.4, 0.5])
_NOISE_STD = 0.5
_KNN = 4
_RANDOM_EDGES = 4
_MIN_NODES = 20


def _credit_features(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ten non-sensitive columns (raw units), none of which depends on gender."""
    age = rng.uniform(18, 75, n)
    income = rng.lognormal(mean=10.5, sigma=0.5, size=n)
    debt_ratio = rng.beta(2.0, 5.0, n)
    history = np.minimum(rng.exponential(8.0, n), age - 18)
    loan = rng.lognormal(mean=9.0, sigma=0.8, size=n)
    late = rng.poisson(1.0, n).astype(np.float64)
    homeowner = rng.random(n) < 0.45
    employed = rng.random(n) < 0.8
    guarantor = rng.random(n) < 0.2
    savings = rng.random(n) < 0.6
    return np.column_stack(
        [age, income, debt_ratio, history, loan, late, homeowner, employed, guarantor, savings]
    ).astype(np.float64)


def _standardise(cols: np.ndarray) -> np.ndarray:
    std = cols.std(axis=0)
    return (cols - cols.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _exact_knn(z: np.ndarray, binary: np.ndarray, k: int) -> np.ndarray:
    """Exact Euclidean ``k`` nearest neighbours (self excluded) of every row of ``z``.

    The same neighbours as a brute-force or kd-tree search over all columns (up to exact
    distance ties), found faster by splitting on the two-valued columns ``binary`` (``b`` of
    them, here 4): rows with the same binary pattern form one of at most ``2^b`` groups, and
    the squared distance between rows of groups ``g`` and ``h`` is

    .. math:: d^2(u, v) = \\lVert c_u - c_v \\rVert^2 + o_{gh}, \\qquad
              o_{gh} = \\sum_{j \\text{ binary}, g_j \\ne h_j} (\\text{hi}_j - \\text{lo}_j)^2

    over the continuous columns ``c``. Each group gets a kd-tree on ``c`` alone (low
    dimension, so queries are fast); a row first takes its ``k`` nearest rows of its own group,
    then queries another group ``h`` only while ``o_gh`` is below its current ``k``-th squared
    distance (any row of ``h`` is at least that far), so the result stays exact. Loops run
    over groups and group pairs, never over rows. Memory: O(n k) for the result plus the
    trees (O(n)).
    """
    n = z.shape[0]
    cont = np.ascontiguousarray(z[:, ~binary])
    bits = z[:, binary]
    lo, hi = bits.min(axis=0), bits.max(axis=0)
    pattern = bits > (lo + hi) / 2
    code = pattern.astype(np.int64) @ (1 << np.arange(bits.shape[1], dtype=np.int64))
    groups, inverse = np.unique(code, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(inverse))))
    members = [order[bounds[i] : bounds[i + 1]] for i in range(groups.size)]
    gap2 = (hi - lo) ** 2
    differs = pattern[order[bounds[:-1]]]  # one binary pattern per group
    offset2 = (differs[:, None, :] != differs[None, :, :]) @ gap2  # (groups, groups)
    trees = [cKDTree(cont[m]) for m in members]

    def query(tree_id: int, rows: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        size = members[tree_id].size
        if kk > size:  # pad with "no neighbour" (inf distance)
            d, j = query(tree_id, rows, size)
            pad = kk - size
            return (
                np.hstack([d, np.full((rows.size, pad), np.inf)]),
                np.hstack([j, np.full((rows.size, pad), -1, dtype=np.int64)]),
            )
        d, j = trees[tree_id].query(cont[rows], k=kk)
        d, j = d.reshape(rows.size, kk), j.reshape(rows.size, kk)
        return d * d, members[tree_id][j]

    best_d = np.full((n, k), np.inf)
    best_i = np.full((n, k), -1, dtype=np.int64)
    for g, rows in enumerate(members):
        d2, nbr = query(g, rows, k + 1)
        # drop the row itself (normally first; the last one if duplicates hide it)
        is_self = nbr == rows[:, None]
        is_self[~is_self.any(axis=1), -1] = True
        keep = np.argsort(is_self, axis=1, kind="stable")[:, :k]
        d2 = np.take_along_axis(d2, keep, axis=1)
        nbr = np.take_along_axis(nbr, keep, axis=1)
        for h in np.argsort(offset2[g], kind="stable"):
            if h == g:
                continue
            need = np.flatnonzero(d2[:, -1] > offset2[g, h])
            if need.size == 0:
                continue
            dh, ih = query(int(h), rows[need], k)
            cand_d = np.hstack([d2[need], dh + offset2[g, h]])
            cand_i = np.hstack([nbr[need], ih])
            top = np.argsort(cand_d, axis=1, kind="stable")[:, :k]
            d2[need] = np.take_along_axis(cand_d, top, axis=1)
            nbr[need] = np.take_along_axis(cand_i, top, axis=1)
        best_d[rows], best_i[rows] = d2, nbr
    return best_i


def _edges(
    rng: np.random.Generator,
    z: np.ndarray,
    gender: np.ndarray,
    homophily: float,
    binary: np.ndarray,
) -> torch.Tensor:
    n = z.shape[0]
    # kNN on the non-sensitive features (exact; split by the binary columns for speed).
    k = min(_KNN, n - 1)
    nbr = _exact_knn(z, binary, k)
    knn_src = np.repeat(np.arange(n), k)
    knn_dst = nbr.reshape(-1)
    valid = knn_dst >= 0
    knn_src, knn_dst = knn_src[valid], knn_dst[valid]
    # Random acquaintances: same gender with probability `homophily`.
    src = np.repeat(np.arange(n), _RANDOM_EDGES)
    same = rng.random(src.size) < homophily
    target_group = np.where(same, gender[src], 1 - gender[src])
    by_group = np.argsort(gender, kind="stable")
    group_size = np.bincount(gender, minlength=2)
    group_start = np.array([0, group_size[0]])
    pos = np.floor(rng.random(src.size) * group_size[target_group]).astype(np.int64)
    dst = by_group[group_start[target_group] + pos]
    return _undirected_unique(np.concatenate([knn_src, src]), np.concatenate([knn_dst, dst]), n)


def _undirected_unique(src: np.ndarray, dst: np.ndarray, n: int) -> torch.Tensor:
    """The edges ``src -> dst`` made undirected, without self loops and duplicates, sorted by
    (row, column): the same tensor as :func:`~gnnaudit.datasets.splits.clean_edge_index`,
    computed with one numpy sort of the ``row * n + column`` keys (numpy's vectorised sort is
    several times faster than the torch sort behind PyG's ``coalesce`` on millions of edges).
    Memory: O(E) int64."""
    keep = src != dst
    src, dst = src[keep].astype(np.int64), dst[keep].astype(np.int64)
    key = np.empty(2 * src.size, dtype=np.int64)
    np.multiply(src, n, out=key[: src.size])
    key[: src.size] += dst
    np.multiply(dst, n, out=key[src.size :])
    key[src.size :] += src
    del src, dst, keep
    key.sort()
    if key.size:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    out = torch.empty((2, key.size), dtype=torch.long)
    np.floor_divide(key, n, out=out[0].numpy())
    np.remainder(key, n, out=out[1].numpy())
    return out


def synthetic_credit_graph(
    num_nodes: int = 1000,
    bias: float = 1.5,
    homophily: float = 0.8,
    seed: int = 0,
) -> Data:
    """Generate the synthetic credit-risk graph (see the module docstring for the model).

    Parameters
    ----------
    num_nodes : number of individuals, 20 to ``MAX_SYNTHETIC_NODES`` (10^7).
    bias : weight of ``gender`` in the credit score (finite, may be negative; 0 = no bias).
        The non-sensitive part of the score has standard deviation about 2, so ``bias = 1.5``
        is a strong effect.
    homophily : probability in [0, 1] that a random acquaintance has the same gender.
    seed : seed of every random draw; the same arguments give the same graph.

    Returns
    -------
    Data with ``x`` (float32, ``num_nodes x 11``), ``y`` (0/1, 1 = good credit), undirected
    ``edge_index``, ``feature_names``, ``train_mask`` / ``val_mask`` / ``test_mask``
    (stratified 50/25/25, seeded), ``sensitive`` (LongTensor, 1 = female),
    ``sensitive_name = "gender"`` and ``sensitive_index`` (the column of ``gender`` in ``x``).
    """
    num_nodes = check_int("num_nodes", num_nodes, minimum=_MIN_NODES, maximum=MAX_SYNTHETIC_NODES)
    bias = check_float("bias", bias)
    homophily = check_float("homophily", homophily, minimum=0.0, maximum=1.0)
    seed = check_seed("seed", seed)

    rng = np.random.default_rng(seed)
    gender = (rng.random(num_nodes) < 0.5).astype(np.int64)
    raw = _credit_features(rng, num_nodes)
    binary = np.zeros(raw.shape[1], dtype=bool)
    binary[6:] = True
    z = raw.copy()
    z[:, ~binary] = _standardise(raw[:, ~binary])
    # The score uses standardised versions of every non-sensitive column.
    score = _standardise(z) @ _WEIGHTS + rng.normal(0.0, _NOISE_STD, num_nodes) + bias * gender
    y = (score > np.median(score)).astype(np.int64)
    edge_index = _edges(rng, _standardise(z), gender, homophily, binary)

    x = np.column_stack([z, gender]).astype(np.float32)
    split = stratified_masks(torch.from_numpy(y), *DEFAULT_FRACTIONS, seed=seed)
    return Data(
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        edge_index=edge_index,
        feature_names=list(SYNTHETIC_FEATURES),
        train_mask=split.train_mask,
        val_mask=split.val_mask,
        test_mask=split.test_mask,
        sensitive=torch.from_numpy(gender),
        sensitive_name="gender",
        sensitive_index=len(SYNTHETIC_FEATURES) - 1,
        num_nodes=num_nodes,
    )
