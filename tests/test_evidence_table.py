"""The one evidence-table schema: local and global tables share ``node_u, node_v, pred_u,
pred_v, similarity, rank``; a graph read with its own ids shows them, and they map back to the
right nodes (oracle: a plain-loop KS top-k over the CSV rows, keyed by id, never by row)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnaudit.audit import CounterfactualEvidence, GlobalEvidence, LocalEvidence
from gnnaudit.audit.fairness.error_verification import error_verification
from gnnaudit.audit.fairness.evidence_pairs import PAIR_COLUMNS, pair_comparison
from gnnaudit.audit.search.evidence_table import (
    EVIDENCE_COLUMNS,
    evidence_frame,
    graph_user_ids,
    is_local_table,
    table_nodes,
)
from gnnaudit.datasets import read_graph
from gnnaudit.errors import InvalidInputError

ALPHA = 0.5
N = 14
D = 3


def id_graph(seed: int = 0, prefix: str = "user_"):
    """Node and edge tables with the user's own ids (rows in a shuffled id order), random
    features and a random prediction per id."""
    rng = np.random.default_rng(seed)
    ids = [f"{prefix}{j}" for j in rng.permutation(np.arange(N) * 7 + 3)]
    x = rng.standard_normal((N, D)).round(3)
    nodes = pd.DataFrame({"id": ids, **{f"f{c}": x[:, c] for c in range(D)}})
    src, dst = rng.integers(0, N, 30), rng.integers(0, N, 30)
    keep = src != dst
    edges = pd.DataFrame(
        {"source": [ids[i] for i in src[keep]], "target": [ids[i] for i in dst[keep]]}
    )
    pred = {i: int(c) for i, c in zip(ids, rng.integers(0, 2, N), strict=True)}
    return nodes, edges, pred


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 0.0 if na == 0 or nb == 0 else float(a @ b / (na * nb))


def oracle_embedding(nodes: pd.DataFrame, edges: pd.DataFrame) -> dict[str, np.ndarray]:
    """x^agg = x^0 + x^1 by id (one hop of Eq. 5, in-neighbour sets), plain loops."""
    x0 = {
        row["id"]: np.array([row[f"f{c}"] for c in range(D)], dtype=np.float64)
        for _, row in nodes.iterrows()
    }
    into: dict[str, set[str]] = {i: set() for i in x0}
    for _, e in edges.iterrows():
        into[e["target"]].add(e["source"])
    agg = {}
    for v, xv in x0.items():
        hop = ALPHA * xv
        if into[v]:
            hop = hop + (1 - ALPHA) / len(into[v]) * sum(cosine(xv, x0[u]) * x0[u] for u in into[v])
        agg[v] = xv + hop
    return agg


def oracle_local(agg, pred, query: str, k: int) -> list[tuple[str, float]]:
    cands = [(cosine(agg[query], agg[u]), u) for u in agg if pred[u] != pred[query]]
    cands.sort(key=lambda t: -t[0])
    return [(u, s) for s, u in cands[:k]]


def oracle_global(agg, pred, k: int) -> list[tuple[frozenset, float]]:
    ids = list(agg)
    pairs = [
        (cosine(agg[a], agg[b]), frozenset((a, b)))
        for i, a in enumerate(ids)
        for b in ids[i + 1 :]
        if pred[a] != pred[b]
    ]
    pairs.sort(key=lambda t: -t[0])
    return [(p, s) for s, p in pairs[:k]]


@pytest.fixture(scope="module")
def fitted():
    nodes, edges, pred = id_graph()
    data = read_graph(nodes, edges)
    pred_rows = np.array([pred[i] for i in data.node_ids])
    ce = CounterfactualEvidence(num_hops=1, alpha=ALPHA).fit(data, predictions=pred_rows)
    return nodes, edges, pred, data, ce


def test_local_and_global_tables_have_exactly_the_schema():
    rng = np.random.default_rng(1)
    data = read_graph(*id_graph(1)[:2])
    del data.node_ids
    pred = rng.integers(0, 3, N)
    ce = CounterfactualEvidence(num_hops=1).fit(data, predictions=pred)
    local, glob = ce.local_evidence([0, 5, 9], k=4), ce.global_evidence(k=6)
    for table in (local, glob):
        assert list(table.columns) == EVIDENCE_COLUMNS
        assert [str(t) for t in table.dtypes.iloc[2:]] == ["int64", "int64", "float64", "int64"]
        assert table["node_u"].dtype == np.int64 and table["node_v"].dtype == np.int64
    # local: rank 1..k within each query (node_u); global: 1..p over the table
    assert local.groupby("node_u", sort=False)["rank"].apply(list).tolist() == [[1, 2, 3, 4]] * 3
    assert glob["rank"].tolist() == list(range(1, 7))
    assert is_local_table(local) and not is_local_table(glob)
    assert (local["pred_u"].to_numpy() == pred[local["node_u"].to_numpy()]).all()
    assert (glob["pred_v"].to_numpy() == pred[glob["node_v"].to_numpy()]).all()
    with pytest.warns(UserWarning, match="one predicted class"):
        empty = CounterfactualEvidence().fit(data, predictions=np.zeros(N, int)).global_evidence()
    assert list(empty.columns) == EVIDENCE_COLUMNS and empty.empty


def test_local_table_shows_the_user_ids_of_the_brute_force_top_k(fitted):
    nodes, edges, pred, data, ce = fitted
    agg = oracle_embedding(nodes, edges)
    k = 4
    queries = ["user_10", "user_94", "user_59"]
    rows = [data.node_ids.index(q) for q in queries]
    table = ce.local_evidence(rows, k=k)
    pd.testing.assert_frame_equal(ce.local_evidence(queries, k=k), table)  # queries by id
    pd.testing.assert_frame_equal(
        ce.local_evidence(queries[1], k=k),
        table[table["node_u"] == queries[1]].reset_index(drop=True),
    )
    assert list(table.columns) == EVIDENCE_COLUMNS
    assert table["node_u"].drop_duplicates().tolist() == queries
    for q in queries:
        got = table[table["node_u"] == q]
        want = oracle_local(agg, pred, q, k)
        assert got["node_v"].tolist() == [u for u, _ in want]
        np.testing.assert_allclose(got["similarity"], [s for _, s in want], atol=1e-5)
        assert got["rank"].tolist() == list(range(1, len(want) + 1))
        assert (got["pred_u"] == pred[q]).all()
        assert got["pred_v"].tolist() == [pred[u] for u, _ in want]


def test_global_table_shows_the_user_ids_of_the_brute_force_top_k(fitted):
    nodes, edges, pred, data, ce = fitted
    want = oracle_global(oracle_embedding(nodes, edges), pred, 8)
    table = ce.global_evidence(k=8)
    assert list(table.columns) == EVIDENCE_COLUMNS
    got = [frozenset(p) for p in zip(table["node_u"], table["node_v"], strict=True)]
    assert got == [p for p, _ in want]
    np.testing.assert_allclose(table["similarity"], [s for _, s in want], atol=1e-5)
    assert table["pred_u"].tolist() == [pred[u] for u in table["node_u"]]
    assert table["pred_v"].tolist() == [pred[v] for v in table["node_v"]]
    assert table["rank"].tolist() == list(range(1, len(want) + 1))


def test_tables_with_user_ids_map_back_to_the_typed_results(fitted, tmp_path):
    _, _, _, data, ce = fitted
    ids = graph_user_ids(data)
    glob, local = ce.search_global(k=10), ce.search_local(ce.node_ids_, k=3)
    path = tmp_path / "global.csv"
    glob.to_frame().to_csv(path, index=False)
    back = GlobalEvidence.from_frame(pd.read_csv(path), user_ids=ids)
    np.testing.assert_array_equal(back.node_u, glob.node_u)
    np.testing.assert_array_equal(back.node_v, glob.node_v)
    np.testing.assert_array_equal(back.pred_v, glob.pred_v)
    again = LocalEvidence.from_frame(
        local.to_frame().sample(frac=1.0, random_state=0), user_ids=ids
    )
    np.testing.assert_array_equal(again.query, local.query)  # node_ids_ ascend
    np.testing.assert_array_equal(again.evidence, local.evidence)
    # the audits that take a table find the same nodes as from the typed result
    labels = np.zeros(N, dtype=np.int64)
    pred = ce.predictions_
    kwargs = {"y_true": labels, "y_pred": pred, "ks": [3, 10], "mask": ce.node_ids_}
    pd.testing.assert_frame_equal(
        error_verification(glob.to_frame(), node_ids=data.node_ids, **kwargs),
        error_verification(glob, **kwargs),
    )
    with pytest.raises(InvalidInputError, match="integer node indices"):
        error_verification(glob.to_frame(), **kwargs)
    table, _ = pair_comparison(data, glob.to_frame(), pred, top=5)
    assert list(table.columns) == PAIR_COLUMNS and PAIR_COLUMNS[:6] == EVIDENCE_COLUMNS
    assert table["node_u"].tolist() == glob.to_frame()["node_u"].head(5).tolist()


def test_numeric_looking_ids_survive_a_csv_round_trip(tmp_path):
    nodes, edges, pred = id_graph(2, prefix="")
    data = read_graph(nodes, edges)
    pred_rows = np.array([pred[i] for i in data.node_ids])
    ce = CounterfactualEvidence(num_hops=1).fit(data, predictions=pred_rows)
    table = ce.global_evidence(k=5)
    assert table["node_u"].isin(nodes["id"]).all()  # the ids as read (text), not row numbers
    path = tmp_path / "g.csv"
    table.to_csv(path, index=False)
    read = pd.read_csv(path)
    assert read["node_u"].dtype.kind == "i"  # pandas turned the ids into numbers
    back = GlobalEvidence.from_frame(read, user_ids=ce.user_ids_)
    np.testing.assert_array_equal(back.node_u, ce.search_global(k=5).node_u)


def test_bad_ids_are_clear_errors(fitted):
    _, _, _, data, ce = fitted
    table = ce.global_evidence(k=3)
    table.loc[0, "node_v"] = "nobody"
    with pytest.raises(InvalidInputError, match="'nobody'"):
        GlobalEvidence.from_frame(table, user_ids=ce.user_ids_)
    with pytest.raises(InvalidInputError, match="nodes holds 1 id.*'user_0'"):
        ce.local_evidence(["user_10", "user_0"])
    with pytest.raises(InvalidInputError, match="node_u.*integer node indices"):
        table_nodes(table, "node_u", None)
    with pytest.raises(InvalidInputError, match="14 entries but the graph has 13 nodes"):
        graph_user_ids(data, num_nodes=13)
    with pytest.raises(InvalidInputError, match="repeats"):
        graph_user_ids(type("G", (), {"node_ids": ["a", "b", "a"], "x": np.zeros((3, 1))})())
    with pytest.raises(InvalidInputError, match="repeat"):
        evidence_frame([0], [1], [0], [1], [0.5], [1], extra={"rank": [1]})


def test_report_pair_cards_name_nodes_by_the_users_ids(fitted, tmp_path):
    from gnnaudit.audit.report.audit_report import AuditReport
    from gnnaudit.audit.report.section import Figure, ReportSection

    _, _, _, data, ce = fitted
    glob = ce.global_evidence(k=3)
    top, feats = pair_comparison(data, ce.search_global(k=3), ce.predictions_, top=3)
    assert top[EVIDENCE_COLUMNS].equals(glob)  # the report's table is the evidence table
    section = ReportSection(
        key="pairs",
        title="Pairs",
        tables={"pairs": top, "pair_features": feats},
        figures=[Figure("pair_cards", "pairs")],
    )
    report = AuditReport(dataset={"name": "ids"}, model={}, config={}, sections=[section])
    assert f"node {glob['node_u'].iloc[0]}</th>" in report.to_html()
    report.to_json(tmp_path / "r.json")
    back = AuditReport.from_json(tmp_path / "r.json").sections[0].tables["pairs"]
    assert back["node_u"].tolist() == top["node_u"].tolist()
