"""FairDen says so when meeting ``min_balance`` cost the density structure (issue 29)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gnnaudit.clustering import FairDen


def _separated_blobs(seed: int = 1, n: int = 300):
    """Two far-apart blobs whose group shares differ (85% vs 15%): balance and density conflict."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(0, 0.4, (n // 2, 2)), rng.normal(4, 0.4, (n // 2, 2))]
    s = np.r_[rng.random(n // 2) < 0.85, rng.random(n // 2) < 0.15].astype(int)
    return X, s


def test_repair_that_destroys_density_warns_with_both_figures():
    X, s = _separated_blobs()
    with pytest.warns(UserWarning, match="cost most of the density structure") as record:
        fd = FairDen(n_clusters=2).fit(X, sensitive_features=s)
    assert fd.balance_ >= 0.8 > fd.paper_balance_
    assert fd.dcsi_ < 0.7 * fd.paper_dcsi_
    text = str(record[-1].message)
    assert f"{fd.dcsi_:.3f}" in text and f"{fd.paper_dcsi_:.3f}" in text


def test_no_density_warning_when_the_paper_rounding_is_kept():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 0.4, (150, 2)), rng.normal(4, 0.4, (150, 2))]
    s = rng.integers(0, 2, 300)  # the same shares everywhere: the paper's rounding is fair
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fd = FairDen(n_clusters=2).fit(X, sensitive_features=s)
    np.testing.assert_array_equal(fd.labels_, fd.paper_labels_)


def test_paper_rounding_never_gives_the_density_warning():
    X, s = _separated_blobs()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        FairDen(n_clusters=2, rounding="kmeans").fit(X, sensitive_features=s)
    assert not [w for w in record if "density structure" in str(w.message)]
