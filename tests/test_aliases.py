"""One vocabulary (issue 26): ``n_clusters``, ``min_samples``, ``n_counterfactuals``,
``sensitive_features``. Every deprecated spelling warns and gives the same result until 0.3.0;
both spellings with different values raise, naming both; ``get_params`` lists the new names."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import make_blobs

from gnnaudit._aliases import (
    REMOVAL,
    deprecated_attribute,
    renamed_keywords,
    resolve_alias,
    same_value,
)
from gnnaudit.audit.embedding.audit import EmbeddingAudit
from gnnaudit.audit.fairness.literature_metrics import (
    equal_opportunity_difference,
    statistical_parity_difference,
)
from gnnaudit.clustering import FairDen
from gnnaudit.clustering.metrics import balance, dcsi, group_mix
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import DCTree
from gnnaudit.graph_ops.mst import core_distances
from gnnaudit.graph_ops.transforms import DCTreeTransform

# --- the mechanism -------------------------------------------------------------------------


class _Est:
    @renamed_keywords(deprecated={"min_pts": "min_samples"})
    def __init__(self, n_clusters=2, min_samples=None):
        self.n_clusters, self.min_samples = n_clusters, min_samples

    min_pts = deprecated_attribute("min_pts", "min_samples")


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def _scores(y, sensitive, *, k=1):
    return sensitive


def test_renamed_keyword_warns_names_the_release_and_moves_the_value():
    with pytest.deprecated_call(
        match=f"_Est: min_pts= is deprecated .* {REMOVAL}; use min_samples="
    ):
        est = _Est(min_pts=4)
    assert est.min_samples == 4
    with pytest.deprecated_call():
        assert _Est(2, None, min_pts=3).min_samples == 3  # the new name positional, None
    with pytest.deprecated_call():
        assert _Est(2, 5, min_pts=5).min_samples == 5  # both, equal: accepted
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _Est(min_samples=6, min_pts=None).min_samples == 6  # None: not given
    assert list(inspect.signature(_Est.__init__).parameters) == [
        "self",
        "n_clusters",
        "min_samples",
    ]


@pytest.mark.parametrize(
    "call",
    [lambda: _Est(min_samples=4, min_pts=5), lambda: _Est(2, 4, min_pts=5)],
)
def test_both_spellings_with_different_values_raise_naming_both(call):
    with (
        pytest.raises(InvalidInputError, match="min_samples=4 and min_pts=5"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", DeprecationWarning)
        call()


def test_alias_is_silent_and_conflicts_raise():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _scores([1], sensitive_features=[0, 1]) == [0, 1]
        assert _scores([1], [0, 1], sensitive_features=np.array([0, 1])) == [0, 1]
    with pytest.raises(InvalidInputError, match=r"sensitive=\[0, 1\] and sensitive_features="):
        _scores([1], [0, 1], sensitive_features=[1, 0])


def test_resolve_alias_and_same_value():
    assert resolve_alias("a", None, "b", 3) == 3 and resolve_alias("a", 3, "b", None) == 3
    with pytest.deprecated_call(match="b= is deprecated"):
        assert resolve_alias("a", None, "b", 3, deprecated=True) == 3
    with pytest.raises(InvalidInputError, match="got a=2 and b=3"):
        resolve_alias("a", 2, "b", 3)
    assert same_value(np.arange(3), [0, 1, 2]) and same_value("g", "g")
    assert same_value(5, np.int64(5)) and same_value(0.5, np.float32(0.5))
    assert not same_value(1, True) and not same_value([1, 2], [1, 2, 3])
    assert not same_value(pd.Series([1, 2]), pd.Series([1, 3]))


def test_deprecated_attribute_warns_and_reads_the_new_one():
    est = _Est(min_samples=7)
    with pytest.deprecated_call(match="_Est.min_pts is deprecated .* use min_samples$"):
        assert est.min_pts == 7


# --- min_pts -> min_samples ------------------------------------------------------------------


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(120, centers=3, n_features=2, random_state=0)
    s = np.random.default_rng(0).integers(0, 2, size=120)
    return X, s


@pytest.fixture(scope="module")
def fairden_new(blobs):
    """FairDen fitted with the current spellings, the reference of the two alias tests below
    (read only)."""
    X, s = blobs
    return FairDen(n_clusters=3, min_samples=5).fit(X, sensitive_features=s)


def test_fairden_min_pts_alias(blobs, fairden_new):
    X, s = blobs
    new = fairden_new
    with pytest.deprecated_call(match="FairDen: min_pts= is deprecated"):
        est = FairDen(n_clusters=3, min_pts=5)
    old = est.fit(X, sensitive_features=s)
    np.testing.assert_array_equal(new.labels_, old.labels_)
    params = est.get_params()
    assert params["min_samples"] == 5 and "min_pts" not in params
    assert clone(est).min_samples == 5
    assert new.min_samples_ == 5
    with pytest.deprecated_call(match="min_pts_ is deprecated"):
        assert new.min_pts_ == 5
    with pytest.raises(InvalidInputError, match="min_samples=4 and min_pts=5"), pytest.warns():
        FairDen(min_samples=4, min_pts=5)


def test_fairden_fit_accepts_sensitive_as_an_alias(blobs, fairden_new):
    X, s = blobs
    new = fairden_new
    alias = FairDen(n_clusters=3, min_samples=5).fit(X, sensitive=s)
    np.testing.assert_array_equal(new.labels_, alias.labels_)
    with pytest.raises(InvalidInputError, match="sensitive_features=.* and sensitive="):
        FairDen(n_clusters=3).fit(X, sensitive_features=s, sensitive=1 - s)


def test_dc_tree_and_core_distances_min_pts_alias(blobs):
    X, _ = blobs
    new = DCTree(min_samples=4).fit(X)
    with pytest.deprecated_call(match="DCTree: min_pts="):
        old = DCTree(min_pts=4).fit(X)
    np.testing.assert_array_equal(new.core_distances_, old.core_distances_)
    np.testing.assert_array_equal(new.linkage_, old.linkage_)
    with pytest.deprecated_call(match="DCTree.min_pts is deprecated"):
        assert old.min_pts == 4
    with pytest.deprecated_call(match="core_distances: min_pts="):
        cd = core_distances(X, min_pts=4)
    np.testing.assert_array_equal(cd, core_distances(X, 4))
    with pytest.deprecated_call(match="from_mst: min_pts="):
        again = DCTree.from_mst(new.core_distances_, new.mst_, min_pts=4)
    assert again.min_samples == 4
    np.testing.assert_array_equal(again.linkage_, new.linkage_)


def test_dcsi_and_transform_min_pts_alias(blobs):
    from torch_geometric.data import Data

    X, _ = blobs
    lab = make_blobs(120, centers=3, n_features=2, random_state=0)[1]
    with pytest.deprecated_call(match="dcsi: min_pts="):
        old = dcsi(X, lab, min_pts=3)
    assert old == dcsi(X, lab, min_samples=3)
    data = Data(x=torch.tensor(X, dtype=torch.float32))
    with pytest.deprecated_call(match="DCTreeTransform: min_pts="):
        old_t = DCTreeTransform(min_pts=3)
    assert old_t.min_samples == 3
    assert torch.equal(old_t(data).mst_weight, DCTreeTransform(min_samples=3)(data).mst_weight)


def test_embedding_audit_k_counterfactuals_alias():
    with pytest.deprecated_call(match="k_counterfactuals= is deprecated"):
        old = EmbeddingAudit(k_counterfactuals=2)
    params = old.get_params()
    assert params == EmbeddingAudit(n_counterfactuals=2).get_params()
    assert "k_counterfactuals" not in params


# --- sensitive_features= for sensitive= ------------------------------------------------------


def test_clustering_metrics_accept_sensitive_features():
    lab = np.array([0, 0, 1, 1, -1])
    s = np.array([0, 1, 0, 1, 0])
    assert balance(lab, sensitive_features=s) == balance(lab, s)
    assert group_mix(lab, sensitive_features=s).equals(group_mix(lab, s))
    with pytest.raises(InvalidInputError, match="sensitive=.* and sensitive_features="):
        balance(lab, s, sensitive_features=1 - s)


def test_literature_metrics_accept_sensitive_features():
    pred, y, s = [1, 0, 1, 1], [1, 1, 1, 0], [0, 0, 1, 1]
    assert statistical_parity_difference(pred, sensitive_features=s) == 0.5
    assert equal_opportunity_difference(pred, y, sensitive_features=s) == (
        equal_opportunity_difference(pred, y, s)
    )
    with pytest.raises(InvalidInputError, match="sensitive_features"):
        statistical_parity_difference(pred, s, sensitive_features=[1, 1, 0, 0])


def test_run_audit_accepts_sensitive_features():
    from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
    from gnnaudit.audit.pipeline import run_audit
    from gnnaudit.audit.quality_unit import ModelQuality
    from gnnaudit.datasets import synthetic_credit_graph

    data = synthetic_credit_graph(num_nodes=200, bias=2.0, seed=5)

    def model(x, edge_index):
        score = 3.0 * x[:, 10] - 1.0
        return torch.stack([torch.zeros_like(score), score], dim=1)

    def audit(**kw):
        units = [ModelQuality(), GroupFairnessUnit()]
        return run_audit(model, data, units=units, n_boot=50, progress=False, **kw)

    new, alias = audit(sensitive="gender"), audit(sensitive_features="gender")
    pd.testing.assert_frame_equal(new.findings, alias.findings)
    with pytest.raises(InvalidInputError, match="sensitive='gender' and sensitive_features='age'"):
        audit(sensitive="gender", sensitive_features="age")


def _entry_points():
    from gnnaudit.audit.context import AuditContext
    from gnnaudit.audit.fairness.literature_metrics import literature_metrics
    from gnnaudit.audit.pipeline import audit_model, run_audit
    from gnnaudit.datasets import load_graph, load_tabular
    from gnnaudit.training.audit_callback import CounterfactualAuditCallback
    from gnnaudit.training.fair_finetune import FairFinetune
    from gnnaudit.training.mitigation import mitigation_metrics

    return [
        lambda **kw: run_audit(None, None, **kw),
        lambda **kw: audit_model(None, None, **kw),
        lambda **kw: AuditContext(None, None, **kw),
        lambda **kw: EmbeddingAudit().fit(None, None, **kw),
        lambda **kw: FairFinetune(None, None, **kw),
        lambda **kw: FairFinetune.finetune(None, None, **kw),
        lambda **kw: mitigation_metrics(None, None, **kw),
        lambda **kw: CounterfactualAuditCallback(**kw),
        lambda **kw: literature_metrics(None, None, None, None, sensitive_index=0, nodes=0, **kw),
        lambda **kw: load_tabular(None, **kw),
        lambda **kw: load_graph(None, **kw),
        lambda **kw: group_mix([0], **kw),
    ]


@pytest.mark.parametrize("index", range(12))
def test_every_entry_point_refuses_two_different_sensitive_values_before_any_work(index):
    """The wrapper checks the two names first, so even placeholder inputs fail on that."""
    call = _entry_points()[index]
    with pytest.raises(InvalidInputError, match="sensitive='a' and sensitive_features='b'"):
        call(sensitive="a", sensitive_features="b")
