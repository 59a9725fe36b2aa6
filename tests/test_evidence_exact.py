"""Exact counterfactual-evidence search against brute force over all pairs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from search_oracles import brute_global, brute_local
from torch_geometric.data import Data

from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.errors import InvalidInputError, NotFittedError

# Backend-level equality with the brute force (ties included, every block size) is checked
# for every backend in test_search_conformance.py; this file checks the estimator.


# -------------------------------------------------------- the estimator


def random_graph(n: int = 60, d: int = 5, classes: int = 3, seed: int = 0, test_frac: float = 0.6):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(size=(n, d)), dtype=torch.float32)
    ei = torch.tensor(rng.integers(0, n, size=(2, 3 * n)))
    test_mask = torch.tensor(rng.random(n) < test_frac)
    pred = rng.integers(0, classes, size=n)
    return Data(x=x, edge_index=ei, test_mask=test_mask), pred


def check_against_oracle(ce: CounterfactualEvidence, df: pd.DataFrame, queries, k: int) -> None:
    """Each query's evidences equal the brute-force top-k over the fitted unit embedding:
    similarities equal rank by rank; node ids equal except inside groups of near-tied
    similarities (float32 products of different shapes may round differently)."""
    emb, pred, ids = ce.space_.embedding, ce.space_.predictions, ce.space_.node_ids
    for node in queries:
        q = int(np.searchsorted(ids, node))
        sims, pos = brute_local(emb, pred, np.array([q]), k)
        sims, pos = sims[0][pos[0] >= 0].tolist(), pos[0][pos[0] >= 0].tolist()
        got = df[df["node_u"] == node].sort_values("rank")
        assert got["rank"].tolist() == list(range(1, len(pos) + 1))
        np.testing.assert_allclose(got["similarity"].to_numpy(), sims, atol=2e-6)
        for r, (s, p) in enumerate(zip(sims, pos, strict=True)):
            ev = int(got["node_v"].iloc[r])
            near_tie = np.sum(np.abs(np.array(sims) - s) < 1e-5) > 1 or (
                len(pos) == k and abs(s - sims[-1]) < 1e-5
            )
            if not near_tie:
                assert ev == ids[p]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(2, 4))
def test_local_and_global_equal_brute_force(seed, k, classes):
    data, pred = random_graph(n=40, seed=seed, classes=classes)
    ce = CounterfactualEvidence(num_hops=2, alpha=0.5).fit(data, predictions=pred)
    queries = ce.node_ids_
    df = ce.local_evidence(queries, k=k)
    assert list(df.columns) == ["node_u", "node_v", "pred_u", "pred_v", "similarity", "rank"]
    check_against_oracle(ce, df, queries, k)
    # evidences never share the query's prediction, never the query itself, are test nodes
    assert (df["pred_u"] != df["pred_v"]).all()
    assert (df["node_u"] != df["node_v"]).all()
    assert df["node_v"].isin(ce.node_ids_).all()
    assert (df["pred_u"].to_numpy() == pred[df["node_u"].to_numpy()]).all()

    g = ce.global_evidence(k=k)
    emb, p = ce.space_.embedding, ce.space_.predictions
    expected = [(-s, u, v) for s, u, v in zip(*brute_global(emb, p, k), strict=True)]
    np.testing.assert_allclose(g["similarity"], [-s for s, _, _ in expected], atol=2e-6)
    assert (g["node_u"] < g["node_v"]).all()
    assert (g["pred_u"] != g["pred_v"]).all()
    assert g["rank"].tolist() == list(range(1, len(expected) + 1))
    sims = np.array([-s for s, _, _ in expected])
    for r, (s, u, v) in enumerate(expected):
        if np.sum(np.abs(sims - (-s)) < 1e-5) == 1 and not (
            len(sims) == k and abs(-s - sims[-1]) < 1e-5
        ):
            assert (g["node_u"].iloc[r], g["node_v"].iloc[r]) == (ce.node_ids_[u], ce.node_ids_[v])


def test_top1_global_is_best_local():
    data, pred = random_graph(n=80, seed=3)
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    local = ce.local_evidence(ce.node_ids_, k=1)
    g = ce.global_evidence(k=1)
    assert g["similarity"].iloc[0] == pytest.approx(local["similarity"].max(), abs=1e-6)


def test_fewer_candidates_than_k_returns_what_exists():
    data, _ = random_graph(n=30, seed=1, test_frac=1.0)
    pred = np.zeros(30, dtype=np.int64)
    pred[[4, 9]] = 1  # two nodes of class 1
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    df = ce.local_evidence([0, 4], k=10)
    assert (df["node_u"] == 0).sum() == 2  # only the two class-1 nodes are candidates
    assert (df["node_u"] == 4).sum() == 10
    assert sorted(df.loc[df["node_u"] == 0, "node_v"]) == [4, 9]
    g = ce.global_evidence(k=1000)
    assert len(g) == 2 * 28  # all pairs of different classes, no padding
    assert not df.isna().any().any() and not g.isna().any().any()


def test_single_predicted_class_gives_empty_result_and_warning():
    data, _ = random_graph(n=20, seed=2)
    ce = CounterfactualEvidence().fit(data, predictions=np.ones(20, dtype=np.int64))
    with pytest.warns(UserWarning, match="one predicted class"):
        df = ce.local_evidence(ce.node_ids_[0], k=5)
    assert df.empty and list(df.columns)[0] == "node_u"
    with pytest.warns(UserWarning, match="one predicted class"):
        g = ce.global_evidence(k=5)
    assert g.empty and "node_u" in g.columns


def test_determinism_and_query_order():
    data, pred = random_graph(n=70, seed=5)
    a = CounterfactualEvidence().fit(data, predictions=pred)
    b = CounterfactualEvidence().fit(data, predictions=pred)
    nodes = a.node_ids_[::-1][:10]
    pd.testing.assert_frame_equal(a.local_evidence(nodes, k=4), b.local_evidence(nodes, k=4))
    pd.testing.assert_frame_equal(a.global_evidence(k=20), b.global_evidence(k=20))
    df = a.local_evidence(nodes, k=4)
    assert df["node_u"].drop_duplicates().tolist() == nodes.tolist()
    single = a.local_evidence(int(nodes[0]), k=4)
    pd.testing.assert_frame_equal(single, df[df["node_u"] == nodes[0]].reset_index(drop=True))


def test_model_predictions_eval_mode_and_mask_default():
    data, _ = random_graph(n=50, seed=6)

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(5, 3)
            self.seen_training = None

        def forward(self, x, edge_index):
            self.seen_training = self.training
            return self.lin(x)

    torch.manual_seed(0)
    model = Linear()
    model.train()
    ce = CounterfactualEvidence().fit(data, model=model)
    assert model.seen_training is False and model.training is True
    expected = model.lin(data.x).argmax(1).numpy()
    np.testing.assert_array_equal(ce.predictions_, expected[data.test_mask.numpy()])
    np.testing.assert_array_equal(ce.node_ids_, np.flatnonzero(data.test_mask.numpy()))
    # a plain callable works too; without test_mask every node is a test node
    bare = Data(x=data.x, edge_index=data.edge_index)
    ce2 = CounterfactualEvidence().fit(bare, model=lambda x, ei: model.lin(x))
    assert ce2.node_ids_.size == 50


def test_mask_as_ids_and_predictions_for_test_nodes_only():
    data, pred = random_graph(n=40, seed=7)
    ids = np.array([30, 2, 17, 5, 9])
    a = CounterfactualEvidence().fit(data, predictions=pred, mask=ids)
    b = CounterfactualEvidence().fit(data, predictions=pred[np.sort(ids)], mask=torch.tensor(ids))
    np.testing.assert_array_equal(a.node_ids_, np.sort(ids))
    pd.testing.assert_frame_equal(a.local_evidence(ids, k=3), b.local_evidence(ids, k=3))
    scores = np.eye(3)[pred]
    c = CounterfactualEvidence().fit(data, predictions=scores, mask=ids)
    np.testing.assert_array_equal(c.predictions_, a.predictions_)


def test_similarity_and_average_similarity():
    data, pred = random_graph(n=40, seed=8)
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    ks = ce.ks_.double().numpy()
    u, v = 3, 11
    expected = ks[u] @ ks[v] / (np.linalg.norm(ks[u]) * np.linalg.norm(ks[v]))
    assert ce.similarity(u, v) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(ce.similarity([u, v], [v, u]), [expected, expected])
    df = ce.local_evidence(ce.node_ids_[:5], k=3)
    np.testing.assert_allclose(
        df["similarity"],
        ce.similarity(df["node_u"].to_numpy(), df["node_v"].to_numpy()),
        atol=1e-6,
    )
    by_query = [df.loc[df["node_u"] == q, "similarity"].mean() for q in ce.node_ids_[:5]]
    assert ce.average_similarity(df) == pytest.approx(np.mean(by_query))
    g = ce.global_evidence(k=7)
    assert ce.average_similarity(g) == pytest.approx(g["similarity"].mean())
    with pytest.raises(InvalidInputError, match="empty"):
        ce.average_similarity(df.iloc[:0])
    with pytest.raises(InvalidInputError, match="result"):
        ce.average_similarity([1, 2])


def test_zero_embedding_rows_have_similarity_zero():
    x = torch.zeros(6, 3)
    x[0, 0] = 1.0
    x[1, 1] = 1.0
    data = Data(x=x, edge_index=torch.empty(2, 0, dtype=torch.long))
    ce = CounterfactualEvidence().fit(data, predictions=np.array([0, 1, 0, 1, 0, 1]))
    assert ce.similarity(2, 3) == 0.0
    df = ce.local_evidence(2, k=3)
    assert df["node_v"].tolist() == [1, 3, 5]  # all ties at 0 -> smaller node id first
    assert np.isfinite(df["similarity"]).all() and (df["similarity"] == 0).all()


# ----------------------------------------------------------------- errors


@pytest.fixture(scope="module")
def fitted():
    data, pred = random_graph(n=40, seed=9)
    return data, pred, CounterfactualEvidence().fit(data, predictions=pred)


def test_query_errors(fitted):
    data, pred, ce = fitted
    outside = int(np.flatnonzero(~data.test_mask.numpy())[0])
    with pytest.raises(InvalidInputError, match="nodes must be test nodes"):
        ce.local_evidence(outside)
    with pytest.raises(InvalidInputError, match="nodes must be test nodes"):
        ce.local_evidence(10_000)
    with pytest.raises(InvalidInputError, match="nodes"):
        ce.local_evidence("a")
    for bad_k in (0, -3, 2.5):
        with pytest.raises(InvalidInputError, match="k must"):
            ce.local_evidence(int(ce.node_ids_[0]), k=bad_k)
        with pytest.raises(InvalidInputError, match="k must"):
            ce.global_evidence(k=bad_k)
    with pytest.raises(InvalidInputError, match="u must"):
        ce.similarity(-1, 0)


def test_fit_errors():
    data, pred = random_graph(n=20, seed=10)
    ok = dict(x=data.x, edge_index=data.edge_index)
    cases = [
        (CounterfactualEvidence(alpha=-0.5), Data(**ok), pred, "alpha"),
        (CounterfactualEvidence(alpha=1.5), Data(**ok), pred, "alpha"),
        (CounterfactualEvidence(num_hops=-1), Data(**ok), pred, "num_hops"),
        (CounterfactualEvidence(backend="hnsw"), Data(**ok), pred, "backend"),
        (CounterfactualEvidence(index_params=[1]), Data(**ok), pred, "index_params"),
        (CounterfactualEvidence(index_params={"nope": 1}), Data(**ok), pred, "index_params"),
        (
            CounterfactualEvidence(),
            Data(x=data.x.clone().fill_(float("nan")), edge_index=data.edge_index),
            pred,
            "x must be finite",
        ),
        (
            CounterfactualEvidence(),
            Data(x=data.x, edge_index=torch.tensor([[0], [99]])),
            pred,
            "edge_index",
        ),
        (CounterfactualEvidence(), Data(x=data.x[0], edge_index=data.edge_index), pred, "data.x"),
        (CounterfactualEvidence(), Data(**ok), pred[:7], "predictions"),
        (CounterfactualEvidence(), Data(**ok), pred.astype(float) + 0.5, "predictions"),
        (CounterfactualEvidence(), Data(**ok), None, "predictions or a model"),
        (
            CounterfactualEvidence(),
            Data(**ok, test_mask=torch.zeros(20, dtype=torch.bool)),
            pred,
            "test_mask",
        ),
        (
            CounterfactualEvidence(),
            Data(**ok, test_mask=torch.ones(5, dtype=torch.bool)),
            pred,
            "test_mask",
        ),
    ]
    for ce, d, p, needle in cases:
        with pytest.raises(InvalidInputError, match=needle):
            ce.fit(d, predictions=p)
    with pytest.raises(InvalidInputError, match="mask"):
        CounterfactualEvidence().fit(Data(**ok), predictions=pred, mask=[0, 25])
    with pytest.raises(InvalidInputError, match="not both"):
        CounterfactualEvidence().fit(Data(**ok), predictions=pred, model=lambda x, e: x)
    with pytest.raises(InvalidInputError, match="logits"):
        CounterfactualEvidence().fit(Data(**ok), model=lambda x, e: x[:3])
    with pytest.raises(InvalidInputError, match="NaN"):
        CounterfactualEvidence().fit(Data(**ok), model=lambda x, e: x * float("nan"))
    with pytest.raises(NotFittedError):
        CounterfactualEvidence().local_evidence(0)
    with pytest.raises(NotFittedError):
        CounterfactualEvidence().global_evidence()


def test_init_only_stores_params():
    ce = CounterfactualEvidence(alpha=-3, backend="nope")  # validated at fit, not here
    assert ce.get_params()["alpha"] == -3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "backend='nope'" in repr(ce)


@pytest.mark.parametrize(
    ("backend", "params"),
    [("faiss", {"index_type": "flat"}), ("index", {"n_partitions": 1, "n_clusters": 1})],
)
def test_approximate_backends_are_wired_by_name(backend, params):
    """Configurations of the approximate backends that are exact must equal the exact one."""
    if backend == "faiss":
        pytest.importorskip("faiss")
    data, pred = random_graph(n=80, seed=11)
    exact = CounterfactualEvidence().fit(data, predictions=pred)
    approx = CounterfactualEvidence(backend=backend, index_params=params, random_state=3)
    approx.fit(data, predictions=pred)
    assert approx.searcher_.name == backend and approx.searcher_.random_state == 3
    nodes = exact.node_ids_[:10]
    a, b = exact.local_evidence(nodes, k=5), approx.local_evidence(nodes, k=5)
    pd.testing.assert_frame_equal(
        a.drop(columns="similarity"), b.drop(columns="similarity"), check_dtype=False
    )
    np.testing.assert_allclose(a["similarity"], b["similarity"], atol=1e-5)
    g = approx.global_evidence(k=8)
    assert g[["node_u", "node_v"]].equals(exact.global_evidence(k=8)[["node_u", "node_v"]])
    with pytest.raises(InvalidInputError, match="index_params"):
        CounterfactualEvidence(backend=backend, index_params={"bogus": 1}).fit(
            data, predictions=pred
        )


def test_invalid_backend_answers_are_refused():
    """The estimator checks every backend answer: no same-class evidence, no node outside the
    test set, the typed result of the asked shape."""
    from gnnaudit.audit.search.exact import ExactSearcher
    from gnnaudit.errors import GnnAuditError

    class SameClass(ExactSearcher):
        def _local_positions(self, queries, k):
            sim, pos = super()._local_positions(queries, k)
            pos[:, 0] = queries  # the query itself
            return sim, pos

        def _global_positions(self, k):
            sim, u, v = super()._global_positions(k)
            same = np.flatnonzero(self.predictions_ == self.predictions_[u[0]])
            v[0] = same[same != u[0]][0]
            return sim, np.minimum(u, v), np.maximum(u, v)

    class WrongShape(ExactSearcher):
        def local(self, queries, k):
            return super().local(queries, k).head(1) if k > 1 else super().local(queries, k)

    data, pred = random_graph(n=60, seed=12)
    ce = CounterfactualEvidence().fit(data, predictions=pred)
    nodes = ce.node_ids_[:5]
    ce.searcher_ = SameClass().build(ce.space_)
    with pytest.raises(GnnAuditError, match="same-class evidence"):
        ce.search_local(nodes, k=3)
    with pytest.raises(GnnAuditError, match="same-class pair"):
        ce.global_evidence(k=3)
    ce.searcher_ = WrongShape().build(ce.space_)
    with pytest.raises(GnnAuditError, match="malformed local result"):
        ce.local_evidence(nodes, k=3)
