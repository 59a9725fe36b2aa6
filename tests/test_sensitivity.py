"""Counterfactual sensitivity: receptive-field batching, node/graph-scope flips against per-node
oracles, the exactness safeguard, feature ranking and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, SAGEConv, SGConv

from gnnaudit import InvalidInputError
from gnnaudit.audit.interventions import (
    alternatives,
    detect_kind,
    opposite_quantile,
    quantile_bins,
    resolve_feature,
)
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.sensitivity.flip import (
    SENSITIVITY_COLUMNS,
    counterfactual_flip,
    feature_sensitivity,
)
from gnnaudit.audit.sensitivity.node_scope import check_groups, pick_checks
from gnnaudit.audit.sensitivity.receptive_field import (
    hop_adjacency,
    independent_set_colouring,
    infer_num_hops,
    l_hop_ball,
    l_hop_conflicts,
    plan_batches,
)

NAMES = ["b0", "b1", "cat", "c0", "c1", "oh0", "oh1", "oh2", "gender"]


class Stack(torch.nn.Module):
    """A fixed-weight message-passing classifier: ``layers`` convolutions with tanh between."""

    def __init__(self, conv, layers: int, d: int, seed: int = 0, gain: float = 3.0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        dims = [d] + [8] * (layers - 1) + [3]
        self.convs = torch.nn.ModuleList(
            conv(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:], strict=True)
        )
        with torch.no_grad():  # stronger weights: more predictions react to a change
            for p in self.parameters():
                p.mul_(gain)

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = torch.tanh(x)
        return x


def random_graph(n: int, p: float, seed: int) -> Data:
    """Erdos-Renyi graph with binary, categorical, continuous and one-hot columns."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, 1)
    src, dst = np.nonzero(upper | upper.T)
    oh = np.eye(3)[rng.integers(0, 3, n)]
    oh[rng.random(n) < 0.2] = 0  # some rows of the group are all zero
    x = np.column_stack(
        [
            rng.integers(0, 2, n) * 2 - 1,
            rng.random(n) < 0.2,
            rng.integers(0, 4, n) - 1,
            rng.normal(size=n),
            rng.exponential(size=n) - 1,
            oh,
            rng.integers(0, 2, n),
        ]
    ).astype(np.float32)
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, size=n // 2, replace=False)] = True
    return Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(np.stack([src, dst])).long(),
        feature_names=list(NAMES),
        test_mask=torch.from_numpy(mask),
        sensitive=torch.from_numpy(x[:, -1].astype(np.int64)),
        sensitive_name="gender",
        num_nodes=n,
    )


def oracle(model, data, feature, nodes, scope):
    """Per-node (node scope) or all-at-once (graph scope) re-predictions, one pass each."""
    spec = resolve_feature(data, feature)
    alts = alternatives(data, spec)
    adapter = ModelAdapter(model)
    base = adapter.logits(data.x, data.edge_index)
    pred = base.argmax(1)
    prob = torch.softmax(base.double(), 1).gather(1, pred[:, None])[:, 0]
    flipped = np.zeros(nodes.size, dtype=bool)
    delta = np.zeros(nodes.size)
    cols = list(spec.columns)
    for alt in alts:
        if scope == "graph":
            x = data.x.clone()
            ids = np.flatnonzero(alt.changes)
            x[np.ix_(ids, cols)] = torch.tensor(
                np.broadcast_to(alt.values, (data.num_nodes, len(cols)))[ids], dtype=x.dtype
            )
            out = adapter.logits(x, data.edge_index)
        for i, v in enumerate(nodes):
            if scope == "node":
                if not alt.changes[v]:
                    continue
                x = data.x.clone()
                vals = alt.values[v] if alt.values.shape[0] > 1 else alt.values[0]
                x[v, cols] = torch.tensor(vals, dtype=x.dtype)
                out = adapter.logits(x, data.edge_index)
            elif not alt.compares[v]:
                continue
            flipped[i] |= bool(out[v].argmax() != pred[v])
            p = torch.softmax(out[v].double(), 0)[pred[v]]
            delta[i] = max(delta[i], float(abs(p - prob[v])))
    return flipped, delta


@pytest.fixture(scope="module")
def sparse_graph():
    return random_graph(70, 0.04, seed=1)


@pytest.fixture(scope="module")
def dense_graph():
    return random_graph(50, 0.2, seed=2)


# ------------------------------------------------------------------------ receptive field
def test_infer_num_hops_counts_message_passing_layers():
    assert infer_num_hops(Stack(GCNConv, 3, 4)) == 3
    assert infer_num_hops(Stack(SAGEConv, 2, 4)) == 2
    assert infer_num_hops(SGConv(4, 2, K=4)) == 4
    assert infer_num_hops(torch.nn.Linear(4, 2)) is None
    assert infer_num_hops(lambda x, ei: x) is None


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    p=st.floats(0.0, 0.4),
    hops=st.integers(0, 4),
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([1, 7, 2**24]),
)
def test_conflicts_are_pairs_within_l_hops_and_colouring_is_proper(n, p, hops, seed, budget):
    rng = np.random.default_rng(seed)
    a = np.triu(rng.random((n, n)) < p, 1)
    src, dst = np.nonzero(a)  # one direction only: the plan must treat edges as undirected
    ei = torch.from_numpy(np.stack([src, dst])).long()
    nodes = np.flatnonzero(rng.random(n) < 0.6)
    if nodes.size == 0:
        nodes = np.array([0])
    adj = hop_adjacency(ei, n)
    conflicts = l_hop_conflicts(adj, nodes, hops, max_entries=budget).toarray()
    dist = shortest_path(sp.csr_matrix(a.astype(float)), directed=False, unweighted=True)
    expected = dist[np.ix_(nodes, nodes)] <= hops
    np.fill_diagonal(expected, False)
    np.testing.assert_array_equal(conflicts, expected)
    plan = plan_batches(adj, nodes, hops, random_state=seed)
    same = plan.colours[:, None] == plan.colours[None, :]
    assert not np.any(same & expected)  # no conflicting pair shares a batch
    assert plan.n_batches <= plan.max_conflicts + 1
    assert sorted(np.concatenate(plan.batches()).tolist()) == nodes.tolist()


def test_colouring_is_maximal_and_seeded():
    upper = sp.triu(sp.random(200, 200, density=0.05, random_state=0), 1)
    conflicts = ((upper + upper.T) > 0).tocsr()
    a = independent_set_colouring(conflicts, random_state=3)
    b = independent_set_colouring(conflicts, random_state=3)
    np.testing.assert_array_equal(a, b)
    dense = conflicts.toarray()
    for c in range(a.max() + 1):
        # every node of a later colour has a neighbour of colour c (each class is maximal)
        later = np.flatnonzero(a > c)
        assert np.all(dense[np.ix_(later, np.flatnonzero(a == c))].any(axis=1))
        assert not dense[np.ix_(a == c, a == c)].any()


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), p=st.floats(0.0, 1.0), seed=st.integers(0, 10_000))
def test_colouring_is_first_fit_in_priority_order(m, p, seed):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((m, m)) < p, 1)
    dense = upper | upper.T
    got = independent_set_colouring(sp.csr_matrix(dense), random_state=seed)
    priority = np.random.default_rng(seed).permutation(m)
    expected = np.full(m, -1)
    for v in np.argsort(-priority):  # sequential oracle: highest priority first
        used = set(expected[dense[v] & (expected >= 0)].tolist())
        expected[v] = next(c for c in range(m + 1) if c not in used)
    np.testing.assert_array_equal(got, expected)


# ------------------------------------------------------------------------ interventions
def test_opposite_quantile_swap():
    np.testing.assert_array_equal(opposite_quantile([0, 1, 1, 0, 1, 0]), [1, 0, 0, 1, 0, 1])
    values = np.array([5.0, -1.0, 3.0, 10.0, 0.0])
    np.testing.assert_array_equal(opposite_quantile(values), [0.0, 10.0, 3.0, -1.0, 5.0])
    swapped = opposite_quantile(np.random.default_rng(0).normal(size=101))
    assert np.isin(swapped, np.random.default_rng(0).normal(size=101)).all()


def test_feature_kinds_and_bins(sparse_graph):
    kinds = {n: resolve_feature(sparse_graph, n).kind for n in ("b0", "b1", "cat", "c0", "c1")}
    assert kinds == {
        "b0": "binary",
        "b1": "binary",
        "cat": "categorical",
        "c0": "continuous",
        "c1": "continuous",
    }
    assert resolve_feature(sparse_graph, ["oh0", "oh1", "oh2"]).kind == "one-hot"
    assert detect_kind(np.array([0.5, 1.5, 2.5])) == "continuous"  # not integer-valued
    codes, edges = quantile_bins(np.arange(100), 4)
    assert edges.size == 3 and np.bincount(codes).tolist() == [25, 25, 25, 25]


# ------------------------------------------------------------------------ node scope = oracle
@pytest.mark.parametrize(
    ("conv", "layers"), [(GCNConv, 2), (SAGEConv, 2), (GCNConv, 3), (SAGEConv, 3)]
)
@pytest.mark.parametrize("graph", ["sparse_graph", "dense_graph"])
def test_node_scope_equals_per_node_oracle(conv, layers, graph, request):
    data = request.getfixturevalue(graph)
    model = Stack(conv, layers, data.x.size(1), seed=layers)
    nodes = np.flatnonzero(data.test_mask.numpy())
    flips = 0
    for feature in ("b0", "cat", "c0", ["oh0", "oh1", "oh2"]):
        res = counterfactual_flip(model, data, feature, n_boot=50)
        flipped, delta = oracle(model, data, feature, nodes, "node")
        np.testing.assert_array_equal(res.nodes, nodes)
        np.testing.assert_array_equal(res.flipped, flipped)
        np.testing.assert_allclose(res.prob_delta, delta, atol=1e-6)
        np.testing.assert_array_equal(res.changed, nodes[flipped])
        assert res.num_hops == layers
        n_alt = len(alternatives(data, resolve_feature(data, feature)))
        expected = 1 + res.n_batches * n_alt - _skipped(res, data, feature)
        expected += _safeguard_passes(res, data, feature)
        assert res.n_forward - expected in (0, 1)  # 1: the subgraph passes' one-node check
        # the probability comparison is informative: most nodes' probabilities move
        assert np.mean(delta > 1e-4) > 0.5
        flips += int(flipped.sum())
    # the class comparison too, except where GCN over-smooths a dense graph into one class
    assert flips > 0 or (conv is GCNConv and graph == "dense_graph")


def _safeguard_passes(res, data, feature, random_state: int = 0) -> int:
    """Oracle of the safeguard's passes: its check nodes, taken in order, each join the first
    group whose members are all more than L hops away (shortest paths on the whole graph)."""
    n = data.num_nodes
    adj = hop_adjacency(data.edge_index, n)
    alts = [alternatives(data, resolve_feature(data, feature))]
    checks = pick_checks(adj, res.nodes, alts, random_state)
    dist = shortest_path(adj, unweighted=True, indices=checks)[:, checks]
    groups: list[list[int]] = []
    for i in range(checks.size):
        home = next((g for g in groups if all(dist[i, j] > res.num_hops for j in g)), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return len(groups)


def test_safeguard_groups_checks_more_than_l_hops_apart():
    """check_groups against pairwise shortest-path distances on random graphs: every group's
    members are more than L hops apart, and a node opens a new group only when it is within L
    hops of a member of every earlier group."""
    for seed in range(6):
        data = random_graph(60, 0.04, seed=seed)
        adj = hop_adjacency(data.edge_index, data.num_nodes)
        checks = np.sort(np.random.default_rng(seed).choice(60, size=3, replace=False))
        for hops in (1, 2, 3):
            balls = [l_hop_ball(adj, int(v), hops) for v in checks]
            groups = check_groups(checks, balls)
            dist = shortest_path(adj, unweighted=True, indices=checks)[:, checks]
            pos = {int(v): i for i, v in enumerate(checks)}
            assert sorted(v for g in groups for v in g) == [int(v) for v in checks]
            for g, group in enumerate(groups):
                idx = [pos[v] for v in group]
                assert all(dist[a, b] > hops for a in idx for b in idx if a != b)
                first = pos[group[0]]
                for earlier in groups[:g]:
                    assert any(dist[first, pos[u]] <= hops for u in earlier)


def _skipped(res, data, feature) -> int:
    """Batch x value passes skipped because the value changes no node of the batch."""
    plan_nodes = [res.nodes[res.extra["batch"] == c] for c in range(res.n_batches)]
    alts = alternatives(data, resolve_feature(data, feature))
    return sum(not alt.changes[b].any() for b in plan_nodes for alt in alts)


def test_batching_saves_passes_on_sparse_graphs_and_not_on_dense_ones(sparse_graph, dense_graph):
    sparse = counterfactual_flip(Stack(GCNConv, 2, 9), sparse_graph, "b0", n_boot=10)
    dense = counterfactual_flip(Stack(GCNConv, 2, 9), dense_graph, "b0", n_boot=10)
    assert sparse.n_batches < sparse.n_nodes / 3
    assert dense.n_batches > dense.n_nodes / 2  # dense neighbourhoods: many batches
    extra = sparse.n_forward - 1 - sparse.n_batches - _safeguard_passes(sparse, sparse_graph, "b0")
    assert extra in (0, 1)  # 1: the subgraph passes' one-node check


def test_graph_scope_equals_one_all_changed_pass(sparse_graph):
    model = Stack(SAGEConv, 2, 9, seed=4)
    nodes = np.flatnonzero(sparse_graph.test_mask.numpy())
    for feature in ("b0", "cat", "c1"):
        res = counterfactual_flip(model, sparse_graph, feature, scope="graph", n_boot=50)
        flipped, delta = oracle(model, sparse_graph, feature, nodes, "graph")
        np.testing.assert_array_equal(res.flipped, flipped)
        np.testing.assert_allclose(res.prob_delta, delta, atol=1e-6)
        n_alt = len(alternatives(sparse_graph, resolve_feature(sparse_graph, feature)))
        assert res.n_forward == 1 + n_alt and res.n_batches is None


def test_safeguard_fires_when_num_hops_is_too_small(dense_graph):
    model = Stack(GCNConv, 3, 9)
    with pytest.raises(InvalidInputError, match="receptive field exceeds num_hops=1"):
        counterfactual_flip(model, dense_graph, "b0", num_hops=1)
    with pytest.raises(InvalidInputError, match="receptive field exceeds num_hops=2"):
        feature_sensitivity(model, dense_graph, num_hops=2, n_boot=10)
    # a larger num_hops than needed stays exact
    res = counterfactual_flip(model, dense_graph, "b0", num_hops=4, n_boot=10)
    nodes = np.flatnonzero(dense_graph.test_mask.numpy())
    np.testing.assert_array_equal(res.flipped, oracle(model, dense_graph, "b0", nodes, "node")[0])


# ------------------------------------------------------------------------ planted effects
class Planted(torch.nn.Module):
    """Logits [0, w * (x[:, col] - 0.5) + neighbour mean of x[:, 0]] through one GCN hop."""

    def __init__(self, col: int, weight: float) -> None:
        super().__init__()
        self.col, self.weight = col, weight
        self.conv = GCNConv(1, 1, bias=False)
        with torch.no_grad():
            self.conv.lin.weight.fill_(0.1)

    def forward(self, x, edge_index):
        score = self.weight * (x[:, self.col] - 0.5) + self.conv(x[:, :1], edge_index)[:, 0]
        return torch.stack([torch.zeros_like(score), score], dim=1)


def test_planted_dependence_and_ignored_feature(sparse_graph):
    gender = NAMES.index("gender")
    strong = counterfactual_flip(Planted(gender, 5.0), sparse_graph, "gender", n_boot=200)
    n = strong.n_nodes  # exact Clopper-Pearson bounds at the boundary
    assert strong.rate == 1.0 and strong.ci_high == 1.0
    assert strong.ci_low == pytest.approx(0.025 ** (1 / n))
    ignored = counterfactual_flip(Planted(gender, 5.0), sparse_graph, "b1", n_boot=200)
    assert ignored.rate == 0.0 and ignored.prob_change == 0.0
    assert ignored.ci_low == 0.0 and ignored.changed.size == 0
    assert ignored.ci_high == pytest.approx(1 - 0.025 ** (1 / n))  # no flip: still a bound
    table = feature_sensitivity(Planted(gender, 5.0), sparse_graph, n_boot=100)
    assert table.columns.tolist() == SENSITIVITY_COLUMNS
    assert table.iloc[0]["feature"] == "gender" and table.iloc[0]["rank"] == 1
    assert table["rank"].tolist() == list(range(1, len(table) + 1))
    others = table[~table["feature"].isin(["gender", "b0"])]
    assert (others["effect"] == 0).all()  # the model reads only gender and b0


def test_by_group_and_frame(sparse_graph):
    res = counterfactual_flip(Stack(GCNConv, 2, 9), sparse_graph, "b0", n_boot=100)
    groups = res.by_group
    assert groups["group"].tolist() == [0, 1]
    assert groups["size"].sum() == res.n_nodes
    sens = sparse_graph.sensitive.numpy()[res.nodes]
    for _, row in groups.iterrows():
        assert row["rate"] == pytest.approx(res.flipped[sens == row["group"]].mean())
    frame = res.to_frame()
    assert frame["group"].tolist() == ["all", "0", "1"]
    assert frame.loc[0, "rate"] == res.rate


def test_feature_sensitivity_matches_single_flips_and_is_deterministic(sparse_graph):
    model = Stack(SAGEConv, 2, 9, seed=7)
    kwargs = dict(n_boot=100, random_state=3)
    table = feature_sensitivity(model, sparse_graph, features=["b0", "c0", "cat"], **kwargs)
    again = feature_sensitivity(model, sparse_graph, features=["b0", "c0", "cat"], **kwargs)
    assert table.equals(again)
    for _, row in table.iterrows():
        single = counterfactual_flip(model, sparse_graph, row["feature"], n_boot=100)
        assert row["effect"] == single.rate
    assert table.attrs["n_forward_total"] < table["n_forward"].sum() + 1 + 3 + 1
    cat = table[table["feature"] == "cat"].iloc[0]
    assert cat["n_alternatives"] == 4
    forced = feature_sensitivity(
        model, sparse_graph, features=["cat"], kinds={"cat": "continuous"}, n_boot=10
    )
    assert forced["kind"].tolist() == ["continuous"]


def test_max_nodes_samples_deterministically(sparse_graph):
    model = Stack(GCNConv, 2, 9)
    res = counterfactual_flip(model, sparse_graph, "b0", max_nodes=10, random_state=5, n_boot=20)
    again = counterfactual_flip(model, sparse_graph, "b0", max_nodes=10, random_state=5, n_boot=20)
    assert res.n_nodes == 10 and res.sampled and res.n_audited == 35
    np.testing.assert_array_equal(res.nodes, again.nodes)
    assert np.isin(res.nodes, np.flatnonzero(sparse_graph.test_mask.numpy())).all()
    np.testing.assert_array_equal(
        res.flipped, oracle(model, sparse_graph, "b0", res.nodes, "node")[0]
    )


def test_plain_callable_needs_num_hops(sparse_graph):
    model = Stack(GCNConv, 2, 9)

    def fn(x, ei):
        return model(x, ei)

    with pytest.raises(InvalidInputError, match="num_hops is required"):
        counterfactual_flip(fn, sparse_graph, "b0")
    with pytest.raises(InvalidInputError, match="num_hops is required.*predict_fn"):
        counterfactual_flip(model, sparse_graph, "b0", predict_fn=fn)
    ok = counterfactual_flip(fn, sparse_graph, "b0", num_hops=2, n_boot=10)
    assert ok.rate == counterfactual_flip(model, sparse_graph, "b0", n_boot=10).rate
    assert counterfactual_flip(fn, sparse_graph, "b0", scope="graph", n_boot=10).n_forward == 2


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"feature": "salary"}, "feature='salary' is not a feature"),
        ({"feature": 42}, "feature must be <= 8"),
        ({"feature": "c0", "kind": "binary"}, "kind='binary' needs exactly 2"),
        ({"feature": "cat", "kind": "binary"}, "has 4 distinct values"),
        ({"feature": ["b0", "cat"]}, "one-hot group 'b0\\+cat' must hold only 0/1"),
        ({"feature": "b0", "mask": np.zeros(70, dtype=bool)}, "selects no node"),
        ({"feature": "b0", "n_boot": 0}, "n_boot must be >= 1"),
        ({"feature": "b0", "scope": "world"}, "scope must be one of"),
        ({"feature": "b0", "max_nodes": 0}, "max_nodes must be >= 1"),
        ({"feature": "b0", "num_hops": -1}, "num_hops must be >= 0"),
        ({"feature": "b0", "confidence": 1.5}, "confidence"),
    ],
)
def test_bad_input_is_named(sparse_graph, kwargs, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        counterfactual_flip(Stack(GCNConv, 2, 9), sparse_graph, **kwargs)


def test_inputs_are_not_modified_and_bad_tensors_are_named(sparse_graph):
    x = sparse_graph.x.clone()
    model = Stack(GCNConv, 2, 9)
    counterfactual_flip(model, sparse_graph, "cat", n_boot=10)
    feature_sensitivity(model, sparse_graph, scope="graph", n_boot=10)
    assert torch.equal(sparse_graph.x, x)
    bad = sparse_graph.clone()
    bad.x = bad.x.clone()
    bad.x[0, 3] = float("nan")
    with pytest.raises(InvalidInputError, match="data.x must be finite"):
        counterfactual_flip(model, bad, "b0")
    with pytest.raises(InvalidInputError, match="base_logits must be float logits of shape"):
        counterfactual_flip(model, sparse_graph, "b0", base_logits=torch.zeros(3, 2))
    nan_logits = torch.full((70, 3), float("nan"))
    with pytest.raises(InvalidInputError, match="base_logits must be finite"):
        counterfactual_flip(model, sparse_graph, "b0", base_logits=nan_logits)


def test_model_with_wrong_output_shape_is_rejected(sparse_graph):
    with pytest.raises(InvalidInputError, match="logits of shape"):
        counterfactual_flip(lambda x, ei: x[:, 0], sparse_graph, "b0", num_hops=0)


def test_feature_sensitivity_bad_input(sparse_graph):
    model = Stack(GCNConv, 2, 9)
    with pytest.raises(InvalidInputError, match="features='nope' is not a feature"):
        feature_sensitivity(model, sparse_graph, features=["nope"])
    with pytest.raises(InvalidInputError, match="empty list"):
        feature_sensitivity(model, sparse_graph, features=[])
    with pytest.raises(InvalidInputError, match="kinds names features"):
        feature_sensitivity(model, sparse_graph, features=["b0"], kinds={"c0": "continuous"})
    with pytest.raises(InvalidInputError, match=r"unknown option\(s\) \['hops'\]"):
        feature_sensitivity(model, sparse_graph, hops=2)


def _ring(n: int) -> Data:
    """A ring of ``n`` nodes with the columns of :func:`random_graph` (large L-hop distances)."""
    data = random_graph(n, 0.0, seed=5)
    src = np.arange(n)
    dst = (src + 1) % n
    data.edge_index = torch.from_numpy(np.stack([np.r_[src, dst], np.r_[dst, src]])).long()
    return data


def test_safeguard_shares_one_pass_when_balls_are_disjoint(monkeypatch):
    """On a long ring the safeguard's nodes are far apart: one shared pass, and it still
    catches a receptive field larger than num_hops."""
    from gnnaudit.audit.sensitivity import node_scope as sensitivity_engine

    monkeypatch.setattr(sensitivity_engine, "LOCAL_MAX_FRACTION", 0.0)  # whole-graph passes
    ring = _ring(400)
    model = Stack(GCNConv, 2, 9, seed=3)
    res = counterfactual_flip(model, ring, "b0", n_boot=10)
    assert res.n_forward == 1 + res.n_batches + 1
    nodes = np.flatnonzero(ring.test_mask.numpy())
    flipped, _ = oracle(model, ring, "b0", nodes, "node")
    np.testing.assert_array_equal(res.flipped, flipped)
    with pytest.raises(InvalidInputError, match="receptive field exceeds num_hops=1"):
        counterfactual_flip(model, ring, "b0", num_hops=1, n_boot=10)
