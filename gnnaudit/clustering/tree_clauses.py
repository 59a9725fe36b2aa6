"""The clause families of the MaxSAT encoding of optimal constrained clustering trees (Shati
et al.; the model is assembled in :mod:`gnnaudit.clustering.tree_encoding`): each family one
numpy array of clauses, one clause per row of DIMACS literals, broadcast over points, nodes,
features, clusters and pairs.

* the tree, leaf labels, point labels (Eq. 7-18, :func:`tree_families`);
* symmetry breaking on the point labels and the non-empty clusters (Eq. 19-21,
  :func:`label_families`);
* separation (Eq. 22-24 and 27-29, :func:`separate`) and co-clustering (Eq. 25-26 and 30-31,
  :func:`together`) of pairs, unconditional or guarded by a literal per pair;
* the variable blocks (:class:`VarBlocks`) and the helpers that stack literal arrays into
  clauses (:func:`clause_rows`, :func:`flatten`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "VarBlocks",
    "Families",
    "clause_rows",
    "separate",
    "together",
    "flatten",
    "tree_paths",
    "tree_families",
    "label_families",
]


class VarBlocks:
    """Allocates contiguous blocks of variable ids."""

    def __init__(self) -> None:
        self.top = 0

    def block(self, *shape: int) -> np.ndarray:
        """The next ``prod(shape)`` variable ids, as an array of ``shape``."""
        size = int(np.prod(shape)) if shape else 0
        ids = np.arange(self.top + 1, self.top + 1 + size, dtype=np.int64).reshape(shape)
        self.top += size
        return ids


def clause_rows(*cols: np.ndarray) -> np.ndarray:
    """Stack broadcast literal arrays into clauses, one clause per row."""
    cols = np.broadcast_arrays(*cols)
    return np.stack([c.reshape(-1) for c in cols], axis=1)


def separate(x: np.ndarray, pp: np.ndarray, guard: np.ndarray | None) -> list[np.ndarray]:
    """Eq. (22)-(24) (guard None) or Eq. (27)-(29) (guard = one literal per pair, e.g.
    :math:`b^-_w`): the pairs ``pp`` are in different clusters unless the guard holds."""
    if not len(pp):
        return []
    k1 = x.shape[1]
    xi, xj = x[pp[:, 0]], x[pp[:, 1]]  # (m, k1)
    gcol = [] if guard is None else [guard[:, None]]
    out = [clause_rows(*gcol, xi[:, :1], xj[:, :1]), clause_rows(*gcol, -xi[:, -1:], -xj[:, -1:])]
    if k1 >= 2:
        g2 = [] if guard is None else [np.broadcast_to(guard[:, None], (len(pp), k1 - 1))]
        out.append(clause_rows(*g2, -xi[:, :-1], -xj[:, :-1], xi[:, 1:], xj[:, 1:]))
    return out


def together(x: np.ndarray, pp: np.ndarray, guard: np.ndarray | None) -> list[np.ndarray]:
    """Eq. (25)-(26) (guard None) or Eq. (30)-(31) (guard = one literal per pair, e.g.
    :math:`\\lnot b^+_w`): the pairs ``pp`` share a cluster unless the guard holds."""
    if not len(pp):
        return []
    xi, xj = x[pp[:, 0]], x[pp[:, 1]]
    gcol = [] if guard is None else [np.broadcast_to(guard[:, None], xi.shape)]
    return [clause_rows(*gcol, -xi, xj), clause_rows(*gcol, xi, -xj)]


def flatten(parts: list[np.ndarray]) -> list[list[int]]:
    """The clauses of the families ``parts`` as one list of DIMACS clauses."""
    out: list[list[int]] = []
    for part in parts:
        out.extend(part.tolist())
    return out


def tree_paths(depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Ancestors ``(L, depth)`` of every leaf and the side ``(L, depth)`` (+1 left, -1 right)."""
    n_leaves = 2**depth
    leaf = np.arange(n_leaves)[:, None]
    level = np.arange(depth)[None, :]
    anc = (2**level - 1) + (leaf >> (depth - level))
    right = (leaf >> (depth - 1 - level)) & 1
    return anc, 1 - 2 * right


Families = dict[str, "np.ndarray | list[np.ndarray] | list[list[int]]"]


def tree_families(
    Xs: np.ndarray, a: np.ndarray, s: np.ndarray, z: np.ndarray, g: np.ndarray, x: np.ndarray,
    depth: int,
) -> Families:  # fmt: skip
    """Eq. (7)-(18): the tree, the leaf labels, the point labels, and the leaf-label symmetry
    breaking (a leaf no point reaches has cluster 0: :math:`g_{t,0} \\to \\bigvee_i z_{i,t}`,
    sound because such a leaf's cluster changes no point's label)."""
    n_feat = Xs.shape[1]
    k1 = x.shape[1]
    fam: Families = {}
    # Eq. (7)-(8): exactly one feature per branch node
    ja, jb = np.triu_indices(n_feat, 1)
    fam["7"] = clause_rows(-a[:, ja], -a[:, jb])
    fam["8"] = a
    # Eq. (9)-(10), (14)-(15): the s pattern along each feature order is a threshold
    order = np.argsort(Xs, axis=0, kind="stable").T  # (F, n)
    prev, nxt = order[:, :-1], order[:, 1:]  # consecutive pairs O_j(X)
    a_tj = a[:, :, None]  # (B, F, 1)
    s_prev = np.transpose(s[prev], (2, 0, 1))  # (B, F, n-1)
    s_next = np.transpose(s[nxt], (2, 0, 1))
    fam["9"] = clause_rows(-a_tj, s_prev, -s_next)
    feat = np.arange(n_feat)[:, None]
    equal = Xs[prev, feat] == Xs[nxt, feat]  # (F, n-1)
    fam["10"] = clause_rows(-a_tj, -s_prev, s_next)[
        np.broadcast_to(equal, s_prev.shape).reshape(-1)
    ]
    first, last = order[:, 0], order[:, -1]
    fam["14"] = clause_rows(-a, s[first].T)
    fam["15"] = clause_rows(-a, -s[last].T)
    # Eq. (11)-(13): a point reaches a leaf iff it follows the leaf's path
    anc, side = tree_paths(depth)  # (L, d)
    path_lit = side[None] * s[:, anc]  # (n, L, d): s for left turns, -s for right turns
    fam["11-12"] = clause_rows(-z[:, :, None], path_lit)
    fam["13"] = np.concatenate([z.reshape(-1, 1), -path_lit.reshape(-1, depth)], axis=1)
    # Eq. (16)-(18): unary leaf labels, point label = label of its leaf
    if k1 >= 2:
        fam["16"] = clause_rows(g[:, :-1], -g[:, 1:])
    z3, g3, x3 = z[:, :, None], g[None, :, :], x[:, None, :]
    fam["17"] = clause_rows(-z3, -g3, x3)
    fam["18"] = clause_rows(-z3, g3, -x3)
    if k1 >= 1:
        fam["leaf symmetry"] = np.concatenate([-g[:, :1], z.T], axis=1)
    return fam


def label_families(x: np.ndarray, v: VarBlocks, min_clusters: int) -> tuple[Families, np.ndarray]:
    """Eq. (19)-(21): symmetry breaking on the point labels and the non-empty clusters; returns
    the families and the prefix-or variables ``u``.

    Point p opens at most cluster max(previous) + 1. Eq. (20) as written has clauses of width p
    (O(k n^2) literals); here it goes through prefix-or variables u_{p,c} ("some point before p
    is in cluster >= c+1"), O(n k) ternary clauses: x_{p,c} -> u_{p,c-1},
    u_{p,c} -> u_{p-1,c} v x_{p-1,c}, u_{1,c} -> x_{0,c}. Any model of Eq. (20) extends by u =
    the prefix or, and u only weakens towards it, so the solutions on x are those of Eq. (20).
    """
    n, k1 = x.shape
    fam: Families = {}
    p19 = np.arange(min(k1, n))
    fam["19"] = (-x[p19, p19])[:, None]
    u = np.zeros((0, 0), np.int64)
    if k1 >= 2 and n >= 3:
        u = v.block(n, k1 - 1)  # u[p, c] for p >= 1 (row 0 unused), c < k1 - 1
        fam["20"] = [
            clause_rows(-x[1:, 1:], u[1:, :]),  # x_{p,c} -> u_{p,c-1}
            clause_rows(-u[2:, :], u[1:-1, :], x[1:-1, :-1]),  # u_{p,c} -> u_{p-1,c} v x_{p-1,c}
            clause_rows(-u[1, :], x[0, :-1]),  # u_{1,c} -> x_{0,c}
        ]
    else:
        fam["20"] = []
    # Eq. (21): at least min_clusters clusters are used
    fam["21"] = [x[:, min_clusters - 2].tolist()] if min_clusters >= 2 else []
    return fam, u
