"""FairDen under scikit-learn's estimator checks, with no expected failures (issue 28):
``n_clusters=1`` is accepted (one cluster, as KMeans), parameters are validated
declaratively at ``fit`` and ``fit`` sets only trailing-underscore attributes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from gnnaudit.clustering import FairDen
from gnnaudit.errors import InvalidInputError


@parametrize_with_checks([FairDen(n_init=2)])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        # FairDen without sensitive_features (or with the deprecated positional y) warns
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        check(estimator)


def test_one_cluster_is_every_point(fair_blobs):
    X, s = fair_blobs
    model = FairDen(n_clusters=1).fit(X, sensitive_features=s)
    assert np.array_equal(model.labels_, np.zeros(len(X)))
    assert model.n_clusters_ == 1 and model.balance_ == 1.0
    # with a small group excluded, its points are noise: the balance of the clustered points
    # is 1, the noise share is reported apart (issue 38)
    s2 = s.copy()
    s2[:3] = 9
    model = FairDen(n_clusters=1, min_group_size=5).fit(X, sensitive_features=s2)
    assert (model.labels_[:3] == -1).all() and (model.labels_[3:] == 0).all()
    assert model.balance_ == 1.0 and model.min_cluster_balance_ == 1.0
    assert model.noise_ratio_ == pytest.approx(3 / len(X))


def test_fit_sets_only_fitted_attributes_and_set_params_works(fair_blobs):
    X, s = fair_blobs
    est = FairDen(n_init=2)
    before = dict(vars(est))
    est.fit(X, sensitive_features=s)
    added = set(vars(est)) - set(before)
    assert added and all(k.endswith("_") and not k.startswith("_") for k in added)
    assert {k: vars(est)[k] for k in before} == before
    assert est.set_params(n_clusters=3, rounding="pareto") is est
    assert est.fit(X, sensitive_features=s).n_clusters_ == 3
    assert clone(est).get_params() == est.get_params()


@pytest.mark.parametrize(
    ("param", "value", "allowed"),
    [
        ("n_clusters", 0, "an integer >= 1"),
        ("n_clusters", 2.0, "an integer >= 1"),
        ("min_samples", 0, "an integer >= 1 or None"),
        ("solver", "qr", "one of 'auto', 'dense', 'matrix_free'"),
        ("rounding", "greedy", "one of 'repair', 'pareto', 'kmeans', 'balanced'"),
        ("min_balance", 1.5, "a finite number >= 0.0 and <= 1.0"),
        ("min_dcsi_share", -0.1, "a finite number >= 0.0 and <= 1.0"),
        ("max_noise", 2, "a finite number >= 0.0 and <= 1.0"),
        ("n_init", 0, "an integer >= 1"),
        ("random_state", -1, "None, an integer seed"),
        ("progress", "yes", "True or False"),
        ("min_group_size", 0, "an integer >= 1 or None"),
    ],
)
def test_parameters_are_validated_at_fit_naming_what_is_allowed(fair_blobs, param, value, allowed):
    X, s = fair_blobs
    est = FairDen(**{param: value})  # __init__ validates nothing (scikit-learn's contract)
    with pytest.raises(InvalidInputError, match=f"FairDen: {param} must be {allowed}") as info:
        est.fit(X, sensitive_features=s)
    assert repr(value) in str(info.value)
    assert not hasattr(est, "labels_")
