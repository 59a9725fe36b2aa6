r"""Building blocks of the embedding audit (:class:`~gnnaudit.audit.EmbeddingAudit`).

Each function does one job on arrays of the audited nodes' embeddings ``Z`` (n, d):

* :func:`knee_eps` -- the DBSCAN radius rule: the knee of the sorted k-distance curve;
* :func:`split_eps` -- the fallback radius when the knee finds no two clusters: the largest
  radius of the dc-tree at which two sizeable clusters exist;
* :func:`cluster_table` -- per cluster size, prediction mix, accuracy and sensitive balance;
* :func:`balance_permutation_test` -- the balance under random group labels;
* :func:`nearest_other_cluster` -- the cluster of the nearest core not in a node's own cluster;
* :func:`feature_differences` -- input features of query / counterpart pairs, differences marked.

The readable description (the constrained tree) is in
:mod:`gnnaudit.audit.embedding.description`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gnnaudit.clustering.metrics import balance, group_mix
from gnnaudit.datasets.scaler import to_raw_units
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import CoreGraph, DCTree

__all__ = [
    "knee_eps",
    "split_eps",
    "min_cluster_size",
    "cluster_table",
    "balance_permutation_test",
    "nearest_other_cluster",
    "feature_differences",
    "CLUSTER_COLUMNS",
    "DIFF_SCALE",
]

#: leading columns of :func:`cluster_table` (then ``pred_<class>`` and ``share_<group>``)
CLUSTER_COLUMNS = ["cluster", "size", "core_nodes", "accuracy", "majority_prediction", "balance"]
#: a feature "differs" between two nodes when the gap exceeds this many standard deviations
DIFF_SCALE = 0.5
#: a cluster counts for :func:`split_eps` when it holds at least this share of the nodes
MIN_CLUSTER_SHARE = 0.05
#: candidate radii scanned by :func:`split_eps`
SPLIT_GRID = 128


def knee_eps(Z: np.ndarray, min_samples: int) -> tuple[float, np.ndarray]:
    r"""DBSCAN radius by the knee of the k-distance curve; returns ``(eps, sorted curve)``.

    :math:`k_i` = distance of node ``i`` to its ``min_samples``-th nearest neighbour, the node
    itself counted first (sklearn's ``min_samples`` convention, so with ``eps = k_i`` node
    ``i`` is a core point). Sort ascending, rescale both axes to [0, 1]
    (:math:`x_j = j/(n-1)`, :math:`y_j = (k_{(j)} - k_{(0)}) / (k_{(n-1)} - k_{(0)})`); the knee
    is :math:`\arg\max_j (x_j - y_j)`, the point of the convex curve farthest below its chord
    (Kneedle, Satopaa et al. 2011), and ``eps`` its k-distance. Nodes right of the knee, whose
    k-distance rises steeply, are the candidates for noise. A zero knee (duplicates) falls back
    to the smallest positive k-distance. Memory ``O(n * min_samples)``.
    """
    from sklearn.neighbors import NearestNeighbors

    n = Z.shape[0]
    k = min(min_samples, n)
    dist, _ = NearestNeighbors(n_neighbors=k).fit(Z).kneighbors(Z)
    curve = np.sort(dist[:, -1])
    span = curve[-1] - curve[0]
    if n < 3 or span <= 0:
        eps = float(curve[-1])
    else:
        x = np.arange(n) / (n - 1)
        y = (curve - curve[0]) / span
        eps = float(curve[int(np.argmax(x - y))])
    if eps <= 0:
        positive = curve[curve > 0]
        eps = float(positive[0]) if positive.size else 1e-12
    return eps, curve


def min_cluster_size(n: int, min_samples: int) -> int:
    """Smallest cluster :func:`split_eps` counts: ``max(min_samples, ceil(0.05 n))``."""
    return max(int(min_samples), int(np.ceil(MIN_CLUSTER_SHARE * n)))


def split_eps(tree: DCTree, upper: float, min_size: int) -> float | None:
    r"""The largest radius below ``upper`` at which DBSCAN* finds two sizeable clusters.

    A learned embedding often forms one density-connected set at the knee radius (classes
    joined by a thin bridge of border nodes), although it is clearly split at a smaller radius.
    The dc-tree holds every DBSCAN* clustering at once (:meth:`DCTree.cut`: at radius
    :math:`\varepsilon` the clusters are the groups of points with :math:`cd \le
    \varepsilon` joined at dc-distance :math:`\le \varepsilon`). Candidates: the
    :data:`SPLIT_GRID` quantiles of the tree's merge heights below ``upper``, each taken just
    below its height (where the merge has not yet happened). Returned: the largest candidate
    whose clustering has at least two clusters of at least ``min_size`` points, or None when
    no candidate has. Cost: ``SPLIT_GRID`` cuts of ``O(n)`` each.
    """
    heights = np.asarray(tree.linkage_[:, 2], dtype=np.float64)
    heights = heights[(heights > 0) & (heights <= upper)]
    if heights.size == 0:
        return None
    grid = np.unique(np.quantile(heights, np.linspace(0.0, 1.0, SPLIT_GRID)))
    for h in grid[::-1]:
        eps = float(np.nextafter(h, 0.0))
        labels = tree.cut(eps)
        sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0)
        if int((sizes >= min_size).sum()) >= 2:
            return eps
    return None


def cluster_table(
    labels: np.ndarray,
    core_mask: np.ndarray,
    sensitive: np.ndarray,
    predictions: np.ndarray,
    y_true: np.ndarray | None,
    group_names: dict[object, str] | None = None,
) -> pd.DataFrame:
    """One row per cluster (noise ``-1`` first when present).

    Columns :data:`CLUSTER_COLUMNS`, then ``pred_<c>`` (share of the nodes predicted class
    ``c``) and ``share_<g>`` (share of sensitive group ``g``). ``balance`` is the cluster's
    FairDen balance (Eq. 6, ratios against the non-noise nodes, as in
    :func:`~gnnaudit.clustering.metrics.group_mix`; NaN for noise), so the mean of the cluster
    rows times the non-noise fraction is :func:`~gnnaudit.clustering.metrics.balance`.
    ``accuracy`` is NaN without labels.
    """
    names = group_names or {}
    groups = np.array([names.get(v, str(v)) for v in sensitive.tolist()], dtype=object)
    mix = group_mix(labels, groups).set_index("cluster")
    clusters = mix.index.to_numpy()
    lab_pos = np.searchsorted(clusters, labels)
    size = np.bincount(lab_pos, minlength=clusters.size)
    cores = np.bincount(lab_pos, weights=core_mask.astype(np.float64), minlength=clusters.size)
    classes = np.unique(predictions)
    pred_counts = np.zeros((clusters.size, classes.size))
    np.add.at(pred_counts, (lab_pos, np.searchsorted(classes, predictions)), 1.0)
    table = pd.DataFrame({"cluster": clusters.astype(np.int64), "size": size.astype(np.int64)})
    table["core_nodes"] = cores.astype(np.int64)
    if y_true is None:
        table["accuracy"] = np.nan
    else:
        hits = np.bincount(lab_pos, weights=(predictions == y_true).astype(np.float64))
        table["accuracy"] = hits[: clusters.size] / size
    table["majority_prediction"] = classes[np.argmax(pred_counts, axis=1)].astype(np.int64)
    table["balance"] = mix["balance"].to_numpy(dtype=np.float64)
    for j, c in enumerate(classes.tolist()):
        table[f"pred_{c}"] = pred_counts[:, j] / size
    for col in [c for c in mix.columns if str(c).startswith("share_")]:
        table[str(col)] = mix[col].to_numpy(dtype=np.float64)
    return table


def balance_permutation_test(
    labels: np.ndarray, sensitive: np.ndarray, n_permutations: int, rng: np.random.Generator
) -> tuple[float, float]:
    """``(observed balance, one-sided permutation p-value)``.

    Under the null hypothesis the clusters ignore the sensitive attribute: group labels are
    exchangeable across nodes. The p-value is the share of random relabellings (``sensitive``
    permuted, clusters fixed) whose balance is at most the observed one,
    ``(1 + #{b : balance_b <= observed}) / (1 + n_permutations)``; small = the clusters are
    less balanced than chance. Cost ``O(n_permutations * n)``.
    """
    observed = balance(labels, sensitive)
    perm = np.array([balance(labels, rng.permutation(sensitive)) for _ in range(n_permutations)])
    p = (1.0 + float(np.sum(perm <= observed + 1e-12))) / (1.0 + n_permutations)
    return observed, min(p, 1.0)


def nearest_other_cluster(cg: CoreGraph, positions: np.ndarray) -> np.ndarray:
    """Cluster of the nearest core point outside each node's own cluster (-1 when none).

    Exact distances to every core, ``len(positions)`` x ``n_cores`` at a time in row blocks
    of at most 2**22 entries (memory bound).
    """
    out = np.full(positions.size, -1, dtype=np.int64)
    if cg.n_cores == 0:
        return out
    cores = cg.core_points
    step = max(1, (1 << 22) // cg.n_cores)
    for s in range(0, positions.size, step):  # row blocks (memory bound)
        pos = positions[s : s + step]
        diff = cg.X[pos][:, None, :] - cores[None, :, :]
        dist = np.sqrt(np.einsum("qmd,qmd->qm", diff, diff))
        dist[cg.labels[pos][:, None] == cg.core_labels[None, :]] = np.inf
        best = np.argmin(dist, axis=1)
        ok = np.isfinite(dist[np.arange(pos.size), best])
        out[s : s + step] = np.where(ok, cg.core_labels[best], -1)
    return out


def feature_differences(
    X: np.ndarray,
    names: list[str],
    query: np.ndarray,
    counterpart: np.ndarray,
    scale: np.ndarray,
    units: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Long table of the input features of (query, counterpart) node pairs.

    Columns ``query_node, counterpart_node, feature, query_value, counterpart_value,
    difference, differs``; ``differs`` marks ``|difference| > DIFF_SCALE * scale[f]`` on the
    model inputs ``X`` (scale: the feature's standard deviation over the audited nodes; a
    constant feature differs when the values do). ``units``: ``(mean, scale)`` of the
    standardisation the graph records (:func:`~gnnaudit.datasets.scaler.recorded_inverse`);
    the values and differences are then shown in the table's own units.
    """
    if query.shape != counterpart.shape:
        raise InvalidInputError("query and counterpart must have the same shape")
    p, d = query.size, X.shape[1]
    qv, cv = X[query], X[counterpart]
    differs = np.abs(cv - qv) > np.where(scale > 0, DIFF_SCALE * scale, 0.0)[None, :]
    if units is not None:
        magnitude = np.abs(X).max(axis=0)
        qv = to_raw_units(qv, *units, magnitude=magnitude)
        cv = to_raw_units(cv, *units, magnitude=magnitude)
    diff = cv - qv
    return pd.DataFrame(
        {
            "query_node": np.repeat(query, d),
            "counterpart_node": np.repeat(counterpart, d),
            "feature": np.tile(np.asarray(names, dtype=object), p),
            "query_value": qv.ravel(),
            "counterpart_value": cv.ravel(),
            "difference": diff.ravel(),
            "differs": differs.ravel(),
        }
    )
