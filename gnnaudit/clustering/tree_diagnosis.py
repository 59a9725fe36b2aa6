"""Why a constrained clustering tree is infeasible, read off the constraint graph.

Before any MaxSAT solving, :func:`diagnose_constraints` looks for the causes no solver time can
change, and names the offending pairs (at most :data:`MAX_PAIRS`):

* ``"contradiction"``: a pair is both must-link and cannot-link, or a must-link chain (a
  connected component of the must-link graph) joins the two points of a cannot-link pair;
* ``"identical-points"`` (trees only): a cannot-link pair whose points (or must-link
  components) hold identical feature vectors; every tree routes equal points to one leaf;
* ``"too-few-groups"``: fewer groups of points that can be apart (must-link components,
  merged over identical points for trees) than ``min_clusters``;
* ``"cannot-link-clique"``: ``q`` mutually cannot-linked groups need ``q`` clusters, more than
  ``c = min(n_clusters, 2^depth)`` (for trees: a depth too small for ``q`` leaves when
  ``n_clusters >= q``);
* ``"cannot-link-odd-cycle"`` (``c = 2``) / ``"cannot-link-colouring"``: the cannot-link graph
  over the groups is not ``c``-colourable (an odd cycle; a set of pairs from an unsatisfiable
  core of the colouring problem).

After a solver proved infeasibility without such a cause, :func:`diagnose_depth` explains it
as ``"depth"``: a clustering honouring the constraints exists, but no tree of this depth
realises one; the pairs come from an unsatisfiable core of the tree model with one selector
per constraint. Remedies name only changes that can help.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from gnnaudit._optional import optional
from gnnaudit.graph_ops.constraints import ConstraintGraph

__all__ = ["Infeasibility", "diagnose_constraints", "diagnose_depth", "MAX_PAIRS"]

logger = logging.getLogger(__name__)

#: At most this many offending pairs are named.
MAX_PAIRS = 10


@dataclass(frozen=True)
class Infeasibility:
    """Why no clustering (tree) honours the constraints.

    Attributes:
        cause: ``"contradiction"``, ``"identical-points"``, ``"too-few-groups"``,
            ``"cannot-link-clique"``, ``"cannot-link-odd-cycle"``, ``"cannot-link-colouring"``
            or ``"depth"``.
        pairs: offending constraint pairs ``(i, j, kind)`` with ``kind`` ``"must-link"`` or
            ``"cannot-link"`` (at most :data:`MAX_PAIRS`).
        remedies: changes that can make the problem feasible.
        detail: one sentence on the cause.
    """

    cause: str
    pairs: tuple[tuple[int, int, str], ...]
    remedies: tuple[str, ...]
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """The full explanation: cause, offending pairs and remedies."""
        shown = ", ".join(f"{kind} ({i}, {j})" for i, j, kind in self.pairs)
        text = f"infeasible ({self.cause}): {self.detail}"
        if shown:
            text += f"; offending pairs: {shown}"
        if self.remedies:
            text += "; remedies: " + "; ".join(self.remedies)
        return text

    def __str__(self) -> str:
        return self.message


def _cl_pairs(cl: np.ndarray, limit: int = MAX_PAIRS) -> tuple[tuple[int, int, str], ...]:
    return tuple((int(i), int(j), "cannot-link") for i, j in cl[:limit])


def _groups(graph: ConstraintGraph, Xs: np.ndarray | None) -> tuple[int, np.ndarray]:
    """Components of must-links plus (when ``Xs`` is given) identical-feature edges."""
    n = graph.n
    ml = graph.must_link
    rows, cols = [ml[:, 0]], [ml[:, 1]]
    if Xs is not None:
        _, inv = np.unique(Xs, axis=0, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)
        first = np.full(int(inv.max()) + 1, n, dtype=np.int64)
        np.minimum.at(first, inv, np.arange(n))
        rows.append(np.arange(n))
        cols.append(first[inv])
    r, c = np.concatenate(rows), np.concatenate(cols)
    g = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
    n_comp, labels = connected_components(g, directed=False)
    return int(n_comp), np.asarray(labels)


def _odd_cycle(adj: dict[int, list[int]], start: int, colour: dict[int, int]) -> list[int] | None:
    """BFS 2-colouring of one component; an odd cycle (list of nodes) if it fails."""
    parent = {start: -1}
    depth = {start: 0}
    colour[start] = 0
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for w in adj[u]:
            if w not in colour:
                colour[w] = 1 - colour[u]
                parent[w], depth[w] = u, depth[u] + 1
                queue.append(w)
            elif colour[w] == colour[u]:
                a, b = [u], [w]
                while a[-1] != b[-1]:  # climb to the lowest common ancestor
                    if depth[a[-1]] >= depth[b[-1]]:
                        a.append(parent[a[-1]])
                    else:
                        b.append(parent[b[-1]])
                return a + b[-2::-1]
    return None


def diagnose_constraints(
    graph: ConstraintGraph,
    Xs: np.ndarray,
    *,
    n_clusters: int,
    min_clusters: int,
    depth: int,
    tree: bool,
    time_budget: float = 2.0,
) -> Infeasibility | None:
    """The causes of infeasibility visible on the constraint graph (see the module doc), or
    ``None`` when none is found (the problem may still be infeasible for the tree depth:
    :func:`diagnose_depth`). Vectorised except the clique / odd-cycle search, which walks only
    the cannot-link graph over must-link components."""
    ml, cl = graph.must_link, graph.cannot_link
    never = "no depth, n_clusters or time_limit can help"
    if not graph.is_feasible:
        comp = graph.components
        both = np.zeros(0, dtype=bool)
        if len(ml) and len(cl):
            key_ml = ml[:, 0] * graph.n + ml[:, 1]
            both = np.isin(cl[:, 0] * graph.n + cl[:, 1], key_ml)
        inner = comp[cl[:, 0]] == comp[cl[:, 1]]
        bad = cl[inner | both] if len(both) else cl[inner]
        return Infeasibility(
            "contradiction",
            _cl_pairs(bad),
            (
                "remove the listed cannot-link pairs or a must-link on the chain joining "
                f"each ({never})",
            ),
            f"{graph.reason} ({int(len(bad))} cannot-link pair(s) inside must-link chains)",
        )
    n_groups, group = _groups(graph, Xs if tree else None)
    if len(cl):
        inner = group[cl[:, 0]] == group[cl[:, 1]]
        if tree and inner.any():
            bad = cl[inner]
            return Infeasibility(
                "identical-points",
                _cl_pairs(bad),
                (
                    f"remove the listed cannot-link pairs ({never}: any tree sends equal "
                    "feature vectors to one leaf)",
                    "or fit tree=False (the CC baseline)",
                ),
                f"{int(len(bad))} cannot-link pair(s) join points that have identical "
                "features (directly or through must-link chains)",
            )
    if n_groups < min_clusters:
        what = "must-link components" + (" merged over identical points" if tree else "")
        return Infeasibility(
            "too-few-groups",
            (),
            (f"use min_clusters <= {n_groups}", "or remove must-links"),
            f"only {n_groups} groups of points can be apart ({what}) but min_clusters="
            f"{min_clusters} clusters must be non-empty",
        )
    if not len(cl):
        return None
    return _cannot_link_structure(
        cl, group, n_groups, n_clusters=n_clusters, depth=depth, tree=tree,
        time_budget=time_budget,
    )  # fmt: skip


@dataclass(frozen=True)
class _CannotLinkGraph:
    """The cannot-link graph over the groups of points: one representative point pair per
    edge (``edge_pair[(a, b)]``, ``a < b``) and the cluster budget it must fit."""

    edge_pair: dict[tuple[int, int], np.ndarray]
    n_clusters: int
    depth: int
    tree: bool

    def pairs_of(self, nodes: list[int], cycle: bool = False) -> np.ndarray:
        """The point pairs of the edges of a cycle (in order) or a clique over ``nodes``."""
        if cycle:
            links = [(nodes[t], nodes[(t + 1) % len(nodes)]) for t in range(len(nodes))]
        else:
            links = [(a, b) for t, a in enumerate(nodes) for b in nodes[t + 1 :]]
        pairs = [self.edge_pair[(min(a, b), max(a, b))] for a, b in links]
        return np.array(pairs, dtype=np.int64)

    def remedies_for(self, q: int, what: str) -> tuple[str, ...]:
        """The changes that let ``q`` mutually separated groups fit."""
        out = []
        need_depth = int(np.ceil(np.log2(q)))
        short_depth = self.tree and 2**self.depth < q
        if self.n_clusters < q:
            out.append(
                f"use n_clusters >= {q}" + (f" and depth >= {need_depth}" if short_depth else "")
            )
        elif short_depth:
            out.append(
                f"use depth >= {need_depth} ({2**self.depth} leaves cannot hold {q} clusters)"
            )
        out.append(f"or remove one of the listed cannot-link pairs (they form {what})")
        out.append("a longer time_limit cannot help")
        return tuple(out)


def _cannot_link_structure(
    cl: np.ndarray, group: np.ndarray, n_groups: int, *, n_clusters: int, depth: int,
    tree: bool, time_budget: float,
) -> Infeasibility | None:  # fmt: skip
    """The cannot-link graph over the groups of points: a clique larger than the clusters
    available, an odd cycle for two clusters, else an uncolourable core within
    ``time_budget`` seconds; ``None`` when none is found."""
    c = min(n_clusters, 2**depth) if tree else n_clusters
    ga, gb = group[cl[:, 0]], group[cl[:, 1]]
    lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
    keys, first = np.unique(lo * n_groups + hi, return_index=True)
    edge_pair = {
        (int(k // n_groups), int(k % n_groups)): cl[f] for k, f in zip(keys, first, strict=True)
    }
    graph = _CannotLinkGraph(edge_pair, n_clusters, depth, tree)
    found = _clique_cause(graph, c, time_budget)
    if found is not None:
        return found
    if c == 2:
        return _odd_cycle_cause(graph)
    return _colouring_core(edge_pair, c, time_budget, graph.remedies_for)


def _clique_cause(graph: _CannotLinkGraph, c: int, time_budget: float) -> Infeasibility | None:
    """A clique of more than ``c`` groups (networkx's maximal cliques, within ``time_budget``
    seconds); without networkx (the ``diagnosis`` extra) ``None``: the odd-cycle and colouring
    checks still find the infeasibility, as a cycle or an unsatisfiable core."""
    nx = optional("networkx")
    if nx is None:
        logger.info("networkx is not installed (pip install 'gnnaudit[diagnosis]'): "
                    "cannot-link cliques are reported as colouring cores")  # fmt: skip
        return None
    G = nx.Graph()
    G.add_edges_from(graph.edge_pair.keys())
    t0 = time.perf_counter()
    for count, clique in enumerate(nx.find_cliques(G)):
        if len(clique) > c:
            q = len(clique)
            bad = graph.pairs_of(sorted(clique))
            where = (
                "depth too small for the leaves" if graph.n_clusters >= q else "too few clusters"
            )
            return Infeasibility(
                "cannot-link-clique",
                _cl_pairs(bad),
                graph.remedies_for(q, f"a clique of {q} mutually cannot-linked groups"),
                f"{q} mutually cannot-linked groups of points need {q} clusters but at most "
                f"{c} are available ({where})",
                {"clique_size": q},
            )
        if count > 100_000 or time.perf_counter() - t0 > time_budget:
            break
    return None


def _odd_cycle_cause(graph: _CannotLinkGraph) -> Infeasibility | None:
    """An odd cycle of cannot-linked groups, which two clusters cannot colour."""
    adj: dict[int, list[int]] = {}
    for a, b in graph.edge_pair:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    colour: dict[int, int] = {}
    for start in adj:
        if start in colour:
            continue
        cyc = _odd_cycle(adj, start, colour)
        if cyc is not None:
            return Infeasibility(
                "cannot-link-odd-cycle",
                _cl_pairs(graph.pairs_of(cyc, cycle=True)),
                graph.remedies_for(3, f"an odd cycle of length {len(cyc)}"),
                f"the cannot-link pairs form an odd cycle of {len(cyc)} groups, which two "
                "clusters cannot colour",
                {"cycle_length": len(cyc)},
            )
    return None


def _colouring_core(
    edge_pair: dict[tuple[int, int], np.ndarray],
    c: int,
    time_budget: float,
    remedies_for: Callable[[int, str], tuple[str, ...]],
) -> Infeasibility | None:
    """c-colourability of the cannot-link graph by SAT (one selector per edge); an
    unsatisfiable core names the pairs. ``None`` when colourable or undecided in time."""
    from pysat.solvers import Solver

    nodes = sorted({v for e in edge_pair for v in e})
    idx = {v: t for t, v in enumerate(nodes)}
    var = np.arange(1, len(nodes) * c + 1).reshape(len(nodes), c)
    top = int(var.max())
    edges = list(edge_pair)
    ends = np.array([[idx[a], idx[b]] for a, b in edges], dtype=np.int64).reshape(-1, 2)
    sel = np.arange(top + 1, top + 1 + len(edges))
    # edge t, colour col: not (selector_t and a has col and b has col)
    clauses = np.stack(
        [
            -np.repeat(sel, c),
            -var[ends[:, 0]].reshape(-1),
            -var[ends[:, 1]].reshape(-1),
        ],
        axis=1,
    )
    with Solver(name="g4") as s:
        s.append_formula(var.tolist())
        s.append_formula(clauses.tolist())
        timer = threading.Timer(time_budget, s.interrupt)
        timer.start()
        try:
            res = s.solve_limited(assumptions=sel.tolist(), expect_interrupt=True)
            core = s.get_core() if res is False else None
        finally:
            timer.cancel()
    if res is not False:
        return None
    used = set(core or [])
    bad = np.array(
        [edge_pair[e] for t, e in enumerate(edges) if int(sel[t]) in used], dtype=np.int64
    )
    return Infeasibility(
        "cannot-link-colouring",
        _cl_pairs(bad),
        remedies_for(c + 1, f"a set of cannot-links that {c} clusters cannot colour"),
        f"the cannot-link graph cannot be coloured with {c} clusters",
    )


def diagnose_depth(
    enc_builder: Callable[[np.ndarray, np.ndarray], Any],
    graph: ConstraintGraph,
    depth: int,
    deadline: float | None,
) -> Infeasibility:
    """A solver proved that no depth-``depth`` tree honours the constraints although the
    constraint graph allows a clustering: the cause is the depth. ``enc_builder(soft_ml,
    soft_cl)`` builds the tree model with the constraints behind selectors; an unsatisfiable
    core under the assumption that all hold names the pairs (when time allows)."""
    pairs: tuple[tuple[int, int, str], ...] = ()
    left = None if deadline is None else deadline - time.perf_counter()
    if left is None or left > 0.5:
        try:
            pairs = _depth_core(enc_builder, graph, deadline)
        except Exception as err:  # pragma: no cover - the explanation is best effort
            logger.info("no core for the depth diagnosis: %s", err)
    return Infeasibility(
        "depth",
        pairs,
        (
            f"use depth >= {depth + 1} (more splits)",
            "or remove one of the listed pairs" if pairs else "or remove constraints",
            "or fit tree=False (the CC baseline)",
        ),
        f"a clustering honouring the constraints exists, but no depth-{depth} tree realises "
        "one (its splits cannot separate the cannot-linked points while keeping the "
        "must-linked ones together)",
    )


def _depth_core(
    enc_builder: Callable[[np.ndarray, np.ndarray], Any],
    graph: ConstraintGraph,
    deadline: float | None,
) -> tuple[tuple[int, int, str], ...]:
    from pysat.solvers import Solver

    ml, cl = graph.must_link, graph.cannot_link
    enc = enc_builder(ml, cl)
    sels = np.r_[enc.sel_ml, enc.sel_cl].astype(np.int64)
    kinds = ["must-link"] * len(ml) + ["cannot-link"] * len(cl)
    both = np.vstack([ml, cl]) if len(ml) + len(cl) else np.zeros((0, 2), np.int64)
    with Solver(name="g4", bootstrap_with=enc.hard) as s:
        timer = None
        if deadline is not None:
            timer = threading.Timer(max(0.0, deadline - time.perf_counter()), s.interrupt)
            timer.start()
        try:
            res = s.solve_limited(assumptions=sels.tolist(), expect_interrupt=True)
            if res is not False:
                return ()
            core = [int(v) for v in s.get_core() or []]
            # deletion-based shrinking while it is cheap
            t = 0
            while t < len(core) and len(core) <= 40:
                if deadline is not None and time.perf_counter() > deadline:
                    break
                trial = core[:t] + core[t + 1 :]
                r = s.solve_limited(assumptions=trial, expect_interrupt=True)
                if r is False:
                    core = [int(v) for v in s.get_core() or trial]
                else:
                    t += 1
        finally:
            if timer is not None:
                timer.cancel()
    pos = {int(v): t for t, v in enumerate(sels)}
    picked = sorted(pos[v] for v in core if v in pos)
    return tuple((int(both[t, 0]), int(both[t, 1]), kinds[t]) for t in picked[:MAX_PAIRS])
