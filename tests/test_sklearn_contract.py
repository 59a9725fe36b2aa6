"""scikit-learn contract of ExDBSCAN, FairDen and TreeClustering beyond scikit-learn's own
checks: clone / get_params / set_params, Pipeline and GridSearchCV, clear errors, FairDen's fit
signature."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gnnaudit.clustering import ExDBSCAN, FairDen, TreeClustering
from gnnaudit.errors import InvalidInputError, NotFittedError

# small, fast instances: k-means restarts and tree depth kept low. scikit-learn's own estimator
# checks run, without expected failures, in tests/test_sklearn_fairden.py (FairDen) and
# tests/test_sklearn_trees_exdbscan.py (ExDBSCAN, TreeClustering)
ESTIMATORS = [ExDBSCAN(), FairDen(n_init=2), TreeClustering(depth=2)]


@pytest.fixture(scope="module")
def small(fair_blobs):
    X, s = fair_blobs
    return X[::4], s[::4]  # 60 points, 3 features


def test_tree_predict_is_subset_invariant_and_needs_2d(small):
    X, _ = small
    m = TreeClustering(depth=2).fit(X)
    whole = m.predict(X)
    parts = np.concatenate([m.predict(X[i : i + 7]) for i in range(0, len(X), 7)])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_array_equal(whole, m.labels_)
    with pytest.raises(InvalidInputError, match="2D array"):
        m.predict(X[0])


@pytest.mark.parametrize("est", ESTIMATORS, ids=repr)
def test_clone_get_set_params(est):
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    assert not hasattr(twin, "labels_")
    name = "eps" if isinstance(est, ExDBSCAN) else "n_clusters"
    value = 0.7 if name == "eps" else 3
    assert twin.set_params(**{name: value}) is twin and getattr(twin, name) == value
    assert type(est)().get_params()  # every parameter has a default
    assert repr(twin).startswith(type(est).__name__ + "(")


@pytest.mark.parametrize("est", ESTIMATORS, ids=repr)
def test_sparse_complex_object_input_give_clear_errors(est, small):
    X, _ = small
    with pytest.raises(InvalidInputError, match="[Ss]parse"):
        clone(est).fit(sparse.csr_matrix(X))
    with pytest.raises(InvalidInputError, match="Complex data not supported"):
        clone(est).fit(X + 1j)
    bad = X.astype(object)
    bad[0, 0] = {"a": 1}
    with pytest.raises(InvalidInputError):
        clone(est).fit(bad)
    with pytest.raises(TypeError):  # the same error is scikit-learn's TypeError
        clone(est).fit(bad)


def test_not_fitted_errors_are_both_libraries_errors():
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    for call in (lambda: TreeClustering().predict(np.zeros((2, 2))), lambda: ExDBSCAN().explain(0)):
        with pytest.raises(NotFittedError):
            call()
        with pytest.raises(SklearnNotFittedError):
            call()


# ----------------------------------------------------------------------------- composition


def _transductive_ari(estimator, X, y):
    """Clustering score of a fitted transductive clusterer: ARI of ``labels_`` against ``y``
    (used with a single split whose test part is the training part)."""
    return adjusted_rand_score(
        y, estimator[-1].labels_ if hasattr(estimator, "steps") else estimator.labels_
    )


@pytest.fixture(scope="module")
def three_blobs():
    from sklearn.datasets import make_blobs

    X, y = make_blobs(150, centers=[[0, 0], [4, 4], [0, 6]], cluster_std=0.6, random_state=0)
    return X * [1.0, 50.0], y  # one feature on another scale: the scaler matters


def test_exdbscan_in_pipeline_and_grid_search(three_blobs):
    X, y = three_blobs
    pipe = make_pipeline(StandardScaler(), ExDBSCAN(eps=0.3, min_samples=5))
    labels = pipe.fit_predict(X)
    assert adjusted_rand_score(y, labels) > 0.8
    whole = [(np.arange(len(X)), np.arange(len(X)))]  # transductive: score the fitted labels
    grid = GridSearchCV(
        pipe, {"exdbscan__eps": [0.05, 0.3, 3.0]}, scoring=_transductive_ari, cv=whole
    )
    with pytest.warns(UserWarning, match="no cluster"):  # eps=0.05: every point is noise
        grid.fit(X, y)
    assert grid.best_params_ == {"exdbscan__eps": 0.3}
    res = grid.best_estimator_[-1].explain(int(np.flatnonzero(labels == 0)[0]), target=1)
    assert res.valid.all()


def test_fairden_in_pipeline_and_grid_search(three_blobs):
    X, y = three_blobs
    s = np.random.default_rng(0).integers(0, 2, len(X))
    pipe = make_pipeline(StandardScaler(), FairDen(n_clusters=2))
    pipe.fit(X, fairden__sensitive_features=s)
    direct = FairDen(n_clusters=2).fit(StandardScaler().fit_transform(X), sensitive_features=s)
    np.testing.assert_array_equal(pipe[-1].labels_, direct.labels_)
    whole = [(np.arange(len(X)), np.arange(len(X)))]
    grid = GridSearchCV(
        FairDen(),
        {"n_clusters": [2, 3]},
        scoring=lambda e, X_, y_: adjusted_rand_score(y_, e.labels_),
        cv=whole,
    ).fit(X, y, sensitive_features=s)
    assert grid.best_params_ == {"n_clusters": 3}
    assert grid.best_estimator_.balance_ > 0.5


def test_tree_clustering_in_pipeline_and_grid_search(three_blobs):
    X, y = three_blobs
    pipe = make_pipeline(StandardScaler(), TreeClustering(n_clusters=3, depth=2))
    assert adjusted_rand_score(y, pipe.fit_predict(X)) > 0.9
    grid = GridSearchCV(
        TreeClustering(depth=2), {"n_clusters": [2, 3]}, scoring="adjusted_rand_score", cv=3
    ).fit(X, y)
    assert grid.best_params_ == {"n_clusters": 3}
    assert np.array_equal(grid.predict(X), grid.best_estimator_.predict(X))


# ----------------------------------------------------------------------------- fit signatures


def test_fairden_sensitive_features_and_the_deprecated_positional_form(fair_blobs):
    X, s = fair_blobs
    cat = (np.arange(len(X)) % 3)[:, None]
    new = FairDen().fit(X, sensitive_features=s, categorical=cat).labels_
    with pytest.warns(FutureWarning, match="sensitive_features"):
        old = FairDen().fit(X, s).labels_
    with pytest.warns(FutureWarning):
        old_cat = FairDen().fit(X, s, cat).labels_
    np.testing.assert_array_equal(old, FairDen().fit(X, sensitive_features=s).labels_)
    np.testing.assert_array_equal(old_cat, new)
    # with sensitive_features given, y is scikit-learn's y: ignored
    np.testing.assert_array_equal(
        FairDen().fit(X, np.arange(len(X)), sensitive_features=s).labels_,
        FairDen().fit(X, sensitive_features=s).labels_,
    )


def test_fairden_without_sensitive_features_is_one_group(fair_blobs):
    X, _ = fair_blobs
    with pytest.warns(UserWarning, match="one group"):
        alone = FairDen().fit(X)
    one = FairDen().fit(X, sensitive_features=np.zeros(len(X), dtype=int))
    np.testing.assert_array_equal(alone.labels_, one.labels_)
    assert np.unique(alone.groups_).tolist() == [0]


def test_tree_clustering_refuses_pairs_in_place_of_y():
    X = np.random.default_rng(0).normal(size=(8, 2))
    with pytest.raises(InvalidInputError, match="must_link="):
        TreeClustering().fit(X, np.array([[0, 1], [2, 3]]))
    with pytest.raises(TypeError):
        TreeClustering().fit(X, None, [(0, 1)])  # keyword-only since the sklearn contract


def _estimator_classes() -> list[type]:
    from gnnaudit.audit import CounterfactualEvidence, EmbeddingAudit
    from gnnaudit.audit.search.exact import ExactSearcher
    from gnnaudit.audit.search.faiss_search import FaissSearcher
    from gnnaudit.audit.search.index import IndexSearcher
    from gnnaudit.audit.search.sharded import ShardedSearcher
    from gnnaudit.audit.search.sorted_scan import SortedSimilaritySearcher
    from gnnaudit.graph_ops import DCTree

    return [
        FairDen,
        ExDBSCAN,
        TreeClustering,
        CounterfactualEvidence,
        EmbeddingAudit,
        DCTree,
        ExactSearcher,
        FaissSearcher,
        IndexSearcher,
        ShardedSearcher,
        SortedSimilaritySearcher,
    ]


@pytest.mark.parametrize("cls", _estimator_classes(), ids=lambda c: c.__name__)
def test_constructor_is_keyword_only_after_the_first_argument(cls):
    """As in scikit-learn (``DBSCAN(eps=0.5, *, min_samples=5, ...)``): one positional
    parameter, the rest by name, so a reordering of parameters never shifts a caller's values."""
    import inspect

    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert len(positional) == 1, positional
    assert all(p.kind is p.KEYWORD_ONLY for p in params[1:] if p.kind is not p.VAR_KEYWORD)
    with pytest.raises(TypeError):
        cls(*[p.default for p in params[:2]])
