"""Evidence contrast: exact same-prediction neighbours, the contrast statistic against a direct
computation, planted and null dependence, determinism and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from torch_geometric.data import Data

from gnnaudit import InvalidInputError, NotFittedError
from gnnaudit.audit import CounterfactualEvidence
from gnnaudit.audit.bootstrap import sign_flip_pvalue
from gnnaudit.audit.fairness.evidence_contrast import (
    CONTRAST_COLUMNS,
    evidence_contrast,
    neighbours_by_prediction,
    same_prediction_neighbours,
)
from gnnaudit.audit.interventions import quantile_bins


def brute_same(emb: np.ndarray, pred: np.ndarray, q: int, k: int) -> tuple[list, list]:
    """Sort every same-prediction row except q by (-similarity, position)."""
    e = emb.astype(np.float64)
    scored = sorted((-(e[q] @ e[j]), j) for j in range(len(pred)) if pred[j] == pred[q] and j != q)
    return [-s for s, _ in scored[:k]], [j for _, j in scored[:k]]


@st.composite
def quantised(draw):
    """Entries in {-1, -1/2, 0, 1/2, 1}: every dot product is exact, ties are plentiful."""
    m = draw(st.integers(1, 30))
    d = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    emb = (rng.integers(-2, 3, size=(m, d)) / 2).astype(np.float32)
    if m > 3:
        emb[rng.integers(0, m, size=2)] = emb[0]
    pred = rng.integers(0, draw(st.integers(1, 3)), size=m)
    block = draw(st.sampled_from([4, 64, 1024, 64 * 2**20]))
    return emb, pred, block


@settings(max_examples=80, deadline=None)
@given(quantised(), st.integers(1, 12))
def test_same_prediction_neighbours_equal_brute_force(case, k):
    emb, pred, block = case
    queries = np.arange(len(pred))
    pos, sim = same_prediction_neighbours(emb, pred, queries, k, block_bytes=block)
    # k is capped at the largest class's size - 1 (wider would be padding only)
    width = max(1, min(k, int(np.bincount(pred - pred.min()).max()) - 1))
    assert pos.shape == sim.shape == (len(pred), width)
    for q in queries:
        sims, ids = brute_same(emb, pred, int(q), k)
        assert pos[q, : len(ids)].tolist() == ids
        np.testing.assert_array_equal(sim[q, : len(ids)], np.array(sims, dtype=np.float32))
        assert np.all(pos[q, len(ids) :] == -1) and np.all(np.isneginf(sim[q, len(ids) :]))


def test_same_prediction_neighbours_on_a_query_subset():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(40, 5)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    pred = rng.integers(0, 2, 40)
    queries = np.array([7, 3, 31])
    pos, _ = same_prediction_neighbours(emb, pred, queries, 5)
    for row, q in enumerate(queries):
        assert pos[row].tolist() == brute_same(emb, pred, int(q), 5)[1]


def graph(n: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, 3 * n)
    dst = rng.integers(0, n, 3 * n)
    keep = src != dst
    ei = np.concatenate([np.stack([src, dst])[:, keep], np.stack([dst, src])[:, keep]], axis=1)
    x = np.column_stack(
        [rng.integers(0, 2, n), rng.normal(size=n), rng.normal(size=n), rng.integers(0, 3, n)]
    ).astype(np.float32)
    oh = np.eye(3, dtype=np.float32)[x[:, 3].astype(int)]
    return Data(
        x=torch.from_numpy(np.column_stack([x, oh])),
        edge_index=torch.from_numpy(ei).long(),
        feature_names=["g", "z1", "z2", "cat", "oh0", "oh1", "oh2"],
        num_nodes=n,
    )


def fitted(data: Data, predictions: np.ndarray) -> CounterfactualEvidence:
    return CounterfactualEvidence(num_hops=1).fit(data, predictions=predictions)


def test_planted_dependence_gives_the_largest_contrast():
    data = graph(120, seed=1)
    g = data.x[:, 0].numpy().astype(int)
    res = evidence_contrast(fitted(data, g), data, "g", k=5, n_perm=199)
    # every evidence has another prediction, hence another g; every look-alike the same g
    assert res.evidence_rate == 1.0 and res.matched_rate == 0.0
    assert (res.difference, res.ci_low, res.ci_high) == (1.0, 1.0, 1.0)
    assert res.p_value == pytest.approx(1 / 200)
    assert res.to_frame().columns.tolist() == CONTRAST_COLUMNS


def test_contrast_equals_a_direct_computation():
    data = graph(80, seed=2)
    pred = (data.x[:, 1] + 0.5 * data.x[:, 0] > 0).long().numpy()
    ce = fitted(data, pred)
    for feature in ("g", "z2", "cat", ["oh0", "oh1", "oh2"]):
        res = evidence_contrast(ce, data, feature, k=4, n_perm=50, n_boot=50, similarity="full")
        local = ce.search_local(ce.node_ids_, 4)
        x = data.x.numpy()
        if feature == "z2":
            codes = quantile_bins(x[:, 2], 4)[0]
        elif feature == "cat":
            codes = x[:, 3]
        elif feature == "g":
            codes = x[:, 0]
        else:
            codes = x[:, 4:].argmax(1)
        emb, space_pred = ce.space_.embedding, ce.space_.predictions
        for row, v in enumerate(local.query):
            ev = local.evidence[row][local.evidence[row] >= 0]
            same = ce.node_ids_[brute_same(emb, space_pred, row, 4)[1]]
            i = np.searchsorted(res.nodes, v)
            assert res.evidence_share[i] == pytest.approx(np.mean(codes[ev] != codes[v]))
            assert res.matched_share[i] == pytest.approx(np.mean(codes[same] != codes[v]))
        assert res.difference == pytest.approx(np.mean(res.evidence_share - res.matched_share))


def test_null_feature_gives_valid_pvalues():
    """Predictions drawn independently of everything: the p-value of the one-sided test must
    not fall below alpha more often than alpha (binomial tolerance, 3 sd) and its lower half is
    roughly uniform (the upper tail is heavier than uniform, see the module docstring)."""
    sims = 100
    pvalues = []
    for seed in range(sims):
        data = graph(100, seed=100 + seed)
        pred = np.random.default_rng(seed).integers(0, 2, 100)
        res = evidence_contrast(fitted(data, pred), data, "g", k=5, n_perm=199, random_state=seed)
        pvalues.append(res.p_value)
    pvalues = np.array(pvalues)
    for alpha in (0.05, 0.1, 0.2, 0.5):
        sd = np.sqrt(alpha * (1 - alpha) / sims)
        assert np.mean(pvalues <= alpha) <= alpha + 3 * sd
    assert np.mean(pvalues <= 0.5) >= 0.5 - 3 * np.sqrt(0.25 / sims)
    low = pvalues[pvalues <= 0.5] / 0.5
    assert stats.kstest(low, "uniform").pvalue > 0.01


def test_node_inference_is_the_plain_sign_flip_test():
    data = graph(90, seed=8)
    ce = fitted(data, (data.x[:, 1] > 0).long().numpy())
    res = evidence_contrast(ce, data, "g", k=5, n_perm=99, n_boot=99, inference="node")
    d = res.evidence_share - res.matched_share
    rng = np.random.default_rng([0, 1])
    assert res.p_value == sign_flip_pvalue(d, 99, rng)
    shared = evidence_contrast(ce, data, "g", k=5, n_perm=99, n_boot=99)
    assert shared.difference == res.difference
    # shared units widen the interval: overlapping reference sets are positively correlated
    assert shared.ci_high - shared.ci_low > res.ci_high - res.ci_low


def test_mask_local_reuse_and_determinism():
    data = graph(90, seed=3)
    pred = (data.x[:, 1] > 0).long().numpy()
    ce = fitted(data, pred)
    full = evidence_contrast(ce, data, "z1", k=6, n_perm=100, random_state=4, similarity="full")
    again = evidence_contrast(ce, data, "z1", k=6, n_perm=100, random_state=4, similarity="full")
    assert full.to_frame().equals(again.to_frame())
    np.testing.assert_array_equal(full.evidence_share, again.evidence_share)
    wide = ce.search_local(ce.node_ids_, 9)
    reused = evidence_contrast(
        ce, data, "z1", k=6, n_perm=100, random_state=4, local=wide, similarity="full"
    )
    assert reused.to_frame().equals(full.to_frame())
    sub = evidence_contrast(
        ce, data, "z1", k=6, n_perm=100, mask=ce.node_ids_[:30], similarity="full"
    )
    assert sub.n_nodes == 30
    np.testing.assert_array_equal(sub.evidence_share, full.evidence_share[:30])
    assert full.node_frame().shape == (full.n_nodes, 6)


def test_nodes_with_few_candidates_use_what_exists():
    data = graph(40, seed=5)
    pred = np.zeros(40, dtype=int)
    pred[:3] = 1  # class 1 has 3 members: at most 2 same-prediction neighbours
    res = evidence_contrast(fitted(data, pred), data, "g", k=5, n_perm=20)
    assert res.n_dropped == 0
    assert set(res.n_matched[:3].tolist()) == {2} and set(res.n_evidence[:3].tolist()) == {5}
    assert set(res.n_evidence[3:].tolist()) == {3}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"k": 0}, "k must be >= 1"),
        ({"n_perm": 0}, "n_perm must be >= 1"),
        ({"n_boot": 0}, "n_boot must be >= 1"),
        ({"feature": "income"}, "feature='income' is not a feature"),
        ({"feature": "z1", "kind": "binary"}, "kind='binary' needs exactly 2"),
        ({"mask": np.array([0, 500])}, "must lie in"),
        ({"mask": np.zeros(60, dtype=bool)}, "selects no node"),
        ({"local": "evidences"}, "local must be a LocalEvidence"),
        ({"inference": "iid"}, "inference must be one of"),
        ({"similarity": "kernel"}, "similarity must be one of"),
    ],
)
def test_bad_input_is_named(kwargs, fragment):
    data = graph(60, seed=6)
    ce = fitted(data, (data.x[:, 1] > 0).long().numpy())
    args = {"feature": "g", **kwargs}
    with pytest.raises(InvalidInputError, match=fragment):
        evidence_contrast(ce, data, **args)


def test_unfitted_evidence_and_single_class():
    data = graph(30, seed=7)
    with pytest.raises(NotFittedError):
        evidence_contrast(CounterfactualEvidence(), data, "g")
    ce = fitted(data, np.zeros(30, dtype=int))
    with (
        pytest.warns(UserWarning, match="share one predicted class"),
        pytest.raises(InvalidInputError, match="no audited node has both"),
    ):
        evidence_contrast(ce, data, "g", similarity="full")
    with pytest.raises(InvalidInputError, match="no audited node has both"):
        evidence_contrast(ce, data, "g")
    with pytest.raises(InvalidInputError, match="same number of nodes"):
        evidence_contrast(fitted(data, np.arange(30) % 2), graph(31, seed=7), "g")


def brute_other(emb: np.ndarray, pred: np.ndarray, q: int, k: int) -> list[int]:
    """Sort every other-prediction row by (-similarity, position)."""
    e = emb.astype(np.float64)
    scored = sorted((-(e[q] @ e[j]), j) for j in range(len(pred)) if pred[j] != pred[q])
    return [j for _, j in scored[:k]]


@settings(max_examples=60, deadline=None)
@given(quantised(), st.integers(1, 12))
def test_other_prediction_neighbours_equal_brute_force(case, k):
    emb, pred, block = case
    queries = np.arange(len(pred))
    pos, sim = neighbours_by_prediction(emb, pred, queries, k, same=False, block_bytes=block)
    for q in queries:
        ids = brute_other(emb, pred, int(q), k)
        assert pos[q, : len(ids)].tolist() == ids
        assert np.all(pos[q, len(ids) :] == -1) and np.all(np.isneginf(sim[q, len(ids) :]))


def test_without_feature_equals_a_direct_computation():
    """Evidences and look-alikes by the kernel without the feature's columns, recomputed here
    from ``ks_`` with the columns deleted (the one-hot group loses all three)."""
    data = graph(70, seed=12)
    pred = (data.x[:, 1] + 0.5 * data.x[:, 0] > 0).long().numpy()
    ce = fitted(data, pred)
    for feature, cols in (("g", [0]), (["oh0", "oh1", "oh2"], [4, 5, 6])):
        res = evidence_contrast(ce, data, feature, k=4, n_perm=20, n_boot=20)
        assert res.similarity == "without-feature"
        ks = np.delete(ce.ks_.numpy().astype(np.float64), cols, axis=1)[ce.node_ids_]
        norm = np.linalg.norm(ks, axis=1, keepdims=True)
        emb = np.where(norm > 0, ks / np.where(norm > 0, norm, 1), 0).astype(np.float32)
        x = data.x.numpy()
        codes = x[:, 0] if feature == "g" else x[:, 4:].argmax(1)
        for row, v in enumerate(ce.node_ids_):
            ev = ce.node_ids_[brute_other(emb, pred, row, 4)]
            same = ce.node_ids_[brute_same(emb, pred, row, 4)[1]]
            i = np.searchsorted(res.nodes, v)
            assert res.evidence_share[i] == pytest.approx(np.mean(codes[ev] != codes[v]))
            assert res.matched_share[i] == pytest.approx(np.mean(codes[same] != codes[v]))


def test_a_model_that_never_reads_the_feature_shows_no_contrast():
    """Predictions from z1 and z2 only. With the feature in the kernel the binary column makes
    every look-alike share it, and the contrast is positive in every seed (it measures the
    kernel); without it the contrast is centred on 0 and never significant here."""
    full, without = [], []
    for seed in range(8):
        data = graph(300, seed=200 + seed)
        ce = fitted(data, (data.x[:, 1] + 0.5 * data.x[:, 2] > 0).long().numpy())
        args = {"k": 5, "n_perm": 199, "n_boot": 20, "random_state": seed}
        full.append(evidence_contrast(ce, data, "g", similarity="full", **args))
        without.append(evidence_contrast(ce, data, "g", **args))
    assert all(r.difference > 0.05 and r.p_value < 0.05 for r in full)
    assert abs(np.mean([r.difference for r in without])) < 0.02
    assert sum(r.p_value < 0.05 for r in without) <= 1


def test_a_feature_that_is_the_only_input_is_refused_without_it():
    data = graph(40, seed=9)
    data.x = data.x[:, :1]
    data.feature_names = ["g"]
    ce = fitted(data, np.arange(40) % 2)
    with pytest.raises(InvalidInputError, match="leaves no column"):
        evidence_contrast(ce, data, "g")
    assert evidence_contrast(ce, data, "g", similarity="full", n_perm=10, n_boot=10).n_nodes
