"""Vectorised MaxSAT encoding of optimal constrained clustering trees (Shati et al., Eq. 7-39).

Variables (Table 1; all indices 0-based here):

* :math:`a_{t,j}` feature ``j`` is chosen at branch node ``t`` (heap order, root 0, children
  ``2t+1`` and ``2t+2``);
* :math:`s_{i,t}` point ``i`` goes left at branch node ``t`` (defined for every point);
* :math:`z_{i,t}` point ``i`` ends at leaf ``t``;
* :math:`g_{t,c}` the cluster of leaf ``t`` is :math:`\\ge c + 1` (unary, ``c < k - 1``);
* :math:`x_{i,c}` the cluster of point ``i`` is :math:`\\ge c + 1` (unary);
* :math:`b^-_w`, :math:`b^+_w` one per distance class ``w``.

Hard clauses (paper numbering): the tree, Eq. (7)-(15)

.. math::

    (\\lnot a_{t,j} \\lor \\lnot a_{t,j'}),\\quad (\\textstyle\\bigvee_j a_{t,j}),\\quad
    (\\lnot a_{t,j} \\lor s_{i,t} \\lor \\lnot s_{i',t})\\ \\forall (i,i') \\in O_j(X),\\quad
    (\\lnot a_{t,j} \\lor \\lnot s_{i,t} \\lor s_{i',t})\\ \\text{if } x_i[j] = x_{i'}[j],

    (\\lnot z_{i,t} \\lor s_{i,t'})\\ t' \\in A_l(t),\\quad
    (\\lnot z_{i,t} \\lor \\lnot s_{i,t'})\\ t' \\in A_r(t),\\quad
    (z_{i,t} \\lor \\textstyle\\bigvee_{A_l(t)} \\lnot s_{i,t'} \\lor \\bigvee_{A_r(t)} s_{i,t'}),

    (\\lnot a_{t,j} \\lor s_{\\#^1_j,t}),\\quad (\\lnot a_{t,j} \\lor \\lnot s_{\\#^{|X|}_j,t});

leaf labels and point labels, Eq. (16)-(18); symmetry breaking and non-empty clusters,
Eq. (19)-(21); unconditional separation / co-clustering of CL / ML pairs, Eq. (22)-(26);
conditional separation :math:`(b^-_w \\lor \\dots)` and co-clustering
:math:`(\\lnot b^+_w \\lor \\dots)` of the pairs of class :math:`D_w`, Eq. (27)-(31); the class
chains :math:`b^-_w \\to b^-_{w-1}`, :math:`b^+_w \\to b^+_{w-1}`, :math:`b^+_w \\to b^-_w`,
Eq. (32)-(34). Soft unit clauses :math:`(\\lnot b^-_w)` (Eq. 37) and, for the [MD, MS]
objective, :math:`(b^+_w)` (Eq. 38). The CC baseline drops :math:`a, s, z, g` and Eq. (7)-(18)
and adds the unary well-formedness of :math:`x`, Eq. (39).

The clause families are in :mod:`gnnaudit.clustering.tree_clauses`; this module assembles
them into the model (:func:`build_encoding`, :class:`TreeEncoding`). Every fixed-width clause
family is generated as one numpy array (broadcasting over points,
nodes, features, clusters and pairs); only Eq. (20) and (21), whose width varies, are built per
(point, cluster). Memory is that of the clause list itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gnnaudit._validation import check_array
from gnnaudit.clustering.tree_clauses import (
    Families,
    VarBlocks,
    clause_rows,
    flatten,
    label_families,
    separate,
    together,
    tree_families,
)
from gnnaudit.clustering.tree_pairs import SmartPairs
from gnnaudit.graph_ops.distance_classes import DistanceClasses

__all__ = ["TreeEncoding", "SoftPairs", "build_encoding"]


@dataclass
class TreeEncoding:
    r"""A partial MaxSAT model with its variable layout.

    Attributes:
        hard: hard clauses (lists of DIMACS literals).
        soft: unit soft clauses (weights in ``soft_weights``; the objective ones weigh
            ``unit_weight``).
        n_vars: number of variables.
        a, s, z, g, x: variable ids, shapes ``(B, F)``, ``(n, B)``, ``(n, L)``, ``(L, k-1)``,
            ``(n, k-1)`` (the tree blocks are empty for the CC baseline).
        b_minus, b_plus: ``(mu,)`` class variables (``b_plus`` empty for the MD objective).
        counts: number of hard clauses per equation family.
        lower_bound: a lower bound on :meth:`cost` implied by the forced literals
            (:math:`\lambda^- \ge` forced :math:`b^-`, :math:`\lambda^+ \le` forced
            :math:`\lnot b^+`, :math:`\lambda^+ \le \lambda^-`); the soft clauses these
            literals falsify are not in ``soft`` (a constant part of the cost).
        u: ``(n, k-2)`` prefix-or variables of Eq. (20) (row 0 unused).
        soft_ml, soft_cl: the soft pairs behind ``sel_ml`` / ``sel_cl``.
        phases: preferred literals for the SAT oracles (a warm start; empty: none).
    """

    hard: list[list[int]]
    soft: list[list[int]]
    n_vars: int
    a: np.ndarray
    s: np.ndarray
    z: np.ndarray
    g: np.ndarray
    x: np.ndarray
    b_minus: np.ndarray
    b_plus: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)
    lower_bound: int = 0
    soft_weights: list[int] = field(default_factory=list)
    unit_weight: int = 1
    sel_ml: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sel_cl: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    w_ml: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    w_cl: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lazy_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    lazy_class: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lazy_added: int = 0
    u: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    soft_ml: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    soft_cl: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    phases: list[int] = field(default_factory=list)

    @property
    def weighted(self) -> bool:
        """Soft must-link / cannot-link clauses are present (weighted cost)."""
        return bool(len(self.sel_ml) or len(self.sel_cl))

    @property
    def lazy(self) -> bool:
        """Some conditional separating clauses (Eq. 27-29) are still pending."""
        return bool(len(self.lazy_pairs))

    def lazy_check(self, values: np.ndarray, batch: int = 20000) -> list[list[int]]:
        """Lazy clause generation for Eq. (27)-(29) (exact): the pending pairs of class
        :math:`w \\ge \\lambda^-` that ``values`` puts in one cluster violate their clause
        :math:`(b^-_w \\lor \\text{separate})`. Their clauses (the ``batch`` longest) are
        returned and leave the pending pool; ``values`` is repaired in place into a model of
        the full formula (:math:`b^-_w` set for every class below the longest violated pair's
        class + 1, which keeps Eq. 32 and 34). An empty list: ``values`` satisfies every
        pending clause, so it is a model of the full formula."""
        if not self.lazy:
            return []
        lab = values[self.x].sum(axis=1)
        lam = int(values[self.b_minus].sum())
        # pool sorted by class, descending: candidates are a prefix
        m = int(np.searchsorted(-self.lazy_class, -lam, side="right"))
        pp = self.lazy_pairs[:m]
        viol = np.flatnonzero(lab[pp[:, 0]] == lab[pp[:, 1]])
        if not len(viol):
            return []
        top = int(self.lazy_class[viol[0]]) + 1
        values[self.b_minus[:top]] = True
        take = viol[:batch]
        clauses = flatten(separate(self.x, pp[take], self.b_minus[self.lazy_class[take]]))
        keep = np.ones(len(self.lazy_pairs), dtype=bool)
        keep[take] = False
        self.lazy_pairs = self.lazy_pairs[keep]
        self.lazy_class = self.lazy_class[keep]
        self.lazy_added += len(take)
        return clauses

    def violated(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Masks of the soft must-link and cannot-link selectors that ``values`` falsifies."""
        return ~values[self.sel_ml], ~values[self.sel_cl]

    @property
    def n_clauses(self) -> int:
        """Hard plus soft clauses."""
        return len(self.hard) + len(self.soft)

    def cost(self, values: np.ndarray) -> int:
        """MaxSAT cost of an assignment (``values[v]`` is variable ``v``'s truth value):
        :math:`\\lambda^-` for MD, :math:`\\lambda^- + \\mu - \\lambda^+` for [MD, MS]."""
        cost = int(values[self.b_minus].sum())
        if len(self.b_plus):
            cost += int(len(self.b_plus) - values[self.b_plus].sum())
        cost *= self.unit_weight
        if self.weighted:
            vml, vcl = self.violated(values)
            cost += int(self.w_ml[vml].sum() + self.w_cl[vcl].sum())
        return cost

    def bound_clauses(self, max_cost: int) -> list[list[int]]:
        """Clauses enforcing ``cost <= max_cost`` (an empty clause when impossible).

        Thanks to the chains Eq. (32)-(33), :math:`\\lambda^- \\ge q \\iff b^-_q`, so for MD the
        bound is the unit :math:`\\lnot b^-_{c+1}` and for [MD, MS]
        (:math:`\\lambda^- - \\lambda^+ \\le D`, :math:`D = c - \\mu`) it is
        :math:`b^-_q \\to b^+_{q-D}` for every ``q``: binary clauses, no totalizer.
        """
        mu = len(self.b_minus)
        if max_cost < 0:
            return [[]]
        if not len(self.b_plus):
            return [[-int(self.b_minus[max_cost])]] if max_cost < mu else []
        d = max_cost - mu
        if d < 0:
            return [[]]
        out: list[list[int]] = []
        q = np.arange(1, mu + 1)
        p = q - d  # required lambda+ when lambda- >= q
        need = p >= 1
        over = need & (p > mu)
        ok = need & ~over
        out += np.stack([-self.b_minus[q[ok] - 1], self.b_plus[p[ok] - 1]], axis=1).tolist()
        out += (-self.b_minus[q[over] - 1])[:, None].tolist()
        return out


def _collect(fam: Families) -> tuple[list[list[int]], dict[str, int]]:
    """All clause families as one list of DIMACS clauses, and the count per family."""
    hard: list[list[int]] = []
    counts: dict[str, int] = {}
    for name, clauses in fam.items():
        parts = clauses if isinstance(clauses, list) and clauses and isinstance(
            clauses[0], np.ndarray) else [clauses]  # fmt: skip
        c = 0
        for part in parts:
            if isinstance(part, np.ndarray):
                part = part if part.ndim == 2 else part.reshape(-1, 1)
                lst = part.tolist()
            else:
                lst = part
            hard.extend(lst)
            c += len(lst)
        counts[name] = c
    return hard, counts


def _soft_clauses(
    pairs: SmartPairs, bm: np.ndarray, bp: np.ndarray, sel_ml: np.ndarray, sel_cl: np.ndarray,
    w_ml: np.ndarray, w_cl: np.ndarray, unit_weight: int,
) -> tuple[list[list[int]], list[int], int]:  # fmt: skip
    """Soft units Eq. (37)-(38) and the soft-constraint selectors, their weights, and the
    constant lower bound. Soft clauses falsified by a forced literal are constant cost: they
    are left out of the soft list (RC2 would spend one trivial core on each) and counted in
    the bound."""
    mu, pareto = len(bm), len(bp) > 0
    fm = -1 if pairs.forced_minus is None else pairs.forced_minus
    fnp = mu if (pairs.forced_not_plus is None or not pareto) else pairs.forced_not_plus
    soft = (-bm[fm + 1 :])[:, None].tolist()
    lower = fm + 1
    if pareto:
        soft += bp[:fnp][:, None].tolist()
        lower = max(mu, lower + mu - fnp)
    weights = [int(unit_weight)] * len(soft)
    soft += sel_ml[:, None].tolist() + sel_cl[:, None].tolist()
    weights += w_ml.tolist() + w_cl.tolist()
    return soft, weights, lower * int(unit_weight)


@dataclass(frozen=True)
class SoftPairs:
    """Must-link / cannot-link pairs made soft (``(m, 2)`` arrays; ``None``: none), their
    integer weights (``None``: 1 each) and the integer weight of each objective soft clause
    (Eq. 37-38) next to them."""

    must_link: np.ndarray | None = None
    cannot_link: np.ndarray | None = None
    w_ml: np.ndarray | None = None
    w_cl: np.ndarray | None = None
    unit_weight: int = 1


def _pair_families(
    x: np.ndarray,
    pairs: SmartPairs,
    apart: np.ndarray,
    apart_cls: np.ndarray,
    bm: np.ndarray,
    bp: np.ndarray,
) -> Families:
    r"""Eq. (22)-(31): the cannot-link and must-link pairs, the separating pairs ``apart`` of
    distance classes ``apart_cls`` guarded by :math:`b^-`, and (``md-ms``: ``bp`` not empty)
    the co-clustered pairs guarded by :math:`\lnot b^+`."""
    fam: Families = {}
    fam["22-24"] = separate(x, pairs.cannot_link, None)
    fam["25-26"] = together(x, pairs.must_link, None)
    fam["27-29"] = separate(x, apart, bm[apart_cls])
    if len(bp):
        fam["30-31"] = together(x, pairs.together, -bp[pairs.together_class])
    return fam


def _class_families(pairs: SmartPairs, bm: np.ndarray, bp: np.ndarray) -> Families:
    """Eq. (32)-(34), the class chains, and the literals the smart pairs force."""
    pareto = len(bp) > 0
    fam: Families = {"32": clause_rows(-bm[1:], bm[:-1])}
    if pareto:
        fam["33"] = clause_rows(-bp[1:], bp[:-1])
        fam["34"] = clause_rows(-bp, bm)
    units: list[list[int]] = []
    if pairs.forced_minus is not None:
        units.append([int(bm[pairs.forced_minus])])
    if pareto and pairs.forced_not_plus is not None:
        units.append([-int(bp[pairs.forced_not_plus])])
    fam["smart-pairs units"] = units
    return fam


def build_encoding(
    Xs: np.ndarray,
    classes: DistanceClasses,
    pairs: SmartPairs,
    *,
    n_clusters: int,
    min_clusters: int,
    depth: int,
    objective: str,
    tree: bool = True,
    soft: SoftPairs | None = None,
    max_apart: int | None = None,
) -> TreeEncoding:
    """Build the hard and soft clauses of Eq. (7)-(38) (``tree=True``) or of the CC baseline
    Eq. (16)-(39) without the tree (``tree=False``); ``n_clusters >= 2``.

    Args:
        Xs: ``(n, F)`` features (already scaled to [0, 100]); only their order per feature is used.
        classes: the distance classes of ``Xs``.
        pairs: the pairs that need clauses and the forced literals (smart pairs or all pairs).
        n_clusters, min_clusters: ``k`` (the largest number of clusters) and ``k'`` (the number
            that must be non-empty, Eq. 21).
        depth: tree depth ``d`` (ignored when ``tree=False``).
        objective: ``"md"`` (soft Eq. 37) or ``"md-ms"`` (soft Eq. 37 and 38).
        soft: must-link / cannot-link pairs made soft (:class:`SoftPairs`): a selector
            :math:`r_p` with hard clauses :math:`r_p \\to` (Eq. 25-26 / 22-24) and a soft unit
            :math:`(r_p)` of integer weight ``soft.w_ml`` / ``soft.w_cl``; ``soft.unit_weight``
            weighs each objective soft clause (Eq. 37-38) next to them. ``None``: no soft pairs.
        max_apart: encode only the first ``max_apart`` conditional separating pairs
            (``pairs.apart``, sorted by class, descending) now; the rest go to the lazy pool
            (:meth:`TreeEncoding.lazy_check`). ``None``: all now.
    """
    soft = SoftPairs() if soft is None else soft
    none = np.zeros((0, 2), np.int64)
    soft_ml = none if soft.must_link is None else soft.must_link
    soft_cl = none if soft.cannot_link is None else soft.cannot_link
    w_ml = np.ones(len(soft_ml), np.int64) if soft.w_ml is None else np.asarray(soft.w_ml, np.int64)
    w_cl = np.ones(len(soft_cl), np.int64) if soft.w_cl is None else np.asarray(soft.w_cl, np.int64)
    unit_weight = soft.unit_weight
    Xs = check_array("Xs", Xs, ndim=2, min_rows=2)
    n, n_feat = Xs.shape
    mu = classes.n_classes
    pareto = objective == "md-ms"
    v = VarBlocks()
    B, L = (2**depth - 1, 2**depth) if tree else (0, 0)
    a, s, z = v.block(B, n_feat), v.block(n, B), v.block(n, L)
    g, x = v.block(L, n_clusters - 1), v.block(n, n_clusters - 1)
    bm = v.block(mu)
    bp = v.block(mu) if pareto else v.block(0)
    fam: Families = {}
    if tree:
        fam.update(tree_families(Xs, a, s, z, g, x, depth))
    elif n_clusters >= 3:
        fam["39"] = clause_rows(x[:, :-1], -x[:, 1:])  # Eq. (39): unary point labels (CC baseline)
    labels_fam, u = label_families(x, v, min_clusters)
    fam.update(labels_fam)
    apart, apart_cls = pairs.apart, pairs.apart_class
    if max_apart is not None and len(apart) > max_apart:
        # lazy mode: the longest pairs now, the rest on demand (TreeEncoding.lazy_check)
        apart, apart_cls = apart[:max_apart], apart_cls[:max_apart]
    # soft must-link / cannot-link: selector r_p, hard (r_p -> constraint), soft (r_p)
    sel_ml, sel_cl = v.block(len(soft_ml)), v.block(len(soft_cl))
    fam.update(_pair_families(x, pairs, apart, apart_cls, bm, bp))
    fam["soft ML"] = together(x, soft_ml, -sel_ml)
    fam["soft CL"] = separate(x, soft_cl, -sel_cl)
    fam.update(_class_families(pairs, bm, bp))
    hard, counts = _collect(fam)
    clauses, weights, lower = _soft_clauses(pairs, bm, bp, sel_ml, sel_cl, w_ml, w_cl, unit_weight)
    counts["soft 37-38"] = len(clauses) - len(sel_ml) - len(sel_cl)
    counts["soft ML/CL"] = len(sel_ml) + len(sel_cl)
    return TreeEncoding(
        hard=hard, soft=clauses, n_vars=v.top, a=a, s=s, z=z, g=g, x=x, b_minus=bm, b_plus=bp,
        counts=counts, lower_bound=lower, soft_weights=weights,
        unit_weight=int(unit_weight), sel_ml=sel_ml, sel_cl=sel_cl, w_ml=w_ml, w_cl=w_cl,
        lazy_pairs=pairs.apart[len(apart) :].astype(np.int64),
        lazy_class=pairs.apart_class[len(apart) :].astype(np.int64),
        u=u, soft_ml=soft_ml, soft_cl=soft_cl,
    )  # fmt: skip
