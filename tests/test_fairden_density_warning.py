"""FairDen keeps the density structure or says why not (issues 29, 38): the 70% rule, its
warning with both figures and the parameters that force the other candidate, and the warning
when a forced choice gives the density up."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from gnnaudit.clustering import FairDen
from gnnaudit.clustering.fairden_candidates import choose_candidate


def _separated_blobs(seed: int = 1, n: int = 300):
    """Two far-apart blobs whose group shares differ (85% vs 15%): balance and density conflict."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(0, 0.4, (n // 2, 2)), rng.normal(4, 0.4, (n // 2, 2))]
    s = np.r_[rng.random(n // 2) < 0.85, rng.random(n // 2) < 0.15].astype(int)
    return X, s


def _fit_recording(X, s, **kw):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = FairDen(n_clusters=2, **kw).fit(X, sensitive_features=s)
    return model, [str(w.message) for w in record if issubclass(w.category, UserWarning)]


def test_density_fallback_warns_with_both_figures_and_how_to_force_the_other():
    """85/15 against 15/85 in two separated blobs: balance 0.8 needs about 60 points inside the
    other blob (DCSI 0.999 -> 0.002) or 70% of the points dropped. The default returns the
    most balanced candidate that keeps 70% of the DCSI (0.74 at 0.997) and says so; the
    parameters the warning names return the other one."""
    X, s = _separated_blobs()
    model, messages = _fit_recording(X, s)
    assert model.balance_ < 0.8 and model.dcsi_ >= 0.7 * model.paper_dcsi_
    c = model.candidates_
    assert not (c["reaches"] & c["keeps_density"]).any()
    other = c[c["reaches"]].sort_values(["dcsi", "balance"], ascending=False).iloc[0]
    (text,) = [m for m in messages if "no repair candidate reaches" in m]
    for figure in (model.balance_, model.dcsi_, other["balance"], other["dcsi"]):
        assert f"{figure:.3f}" in text
    assert f"{model.paper_dcsi_:.3f}" in text and "pareto" not in text
    need = re.search(r"To force the other, pass min_balance=([0-9.]+) with min_dcsi_share=0", text)
    assert need is not None
    forced, forced_messages = _fit_recording(
        X, s, min_balance=float(need.group(1)), min_dcsi_share=0.0
    )
    assert forced.balance_ == pytest.approx(other["balance"])
    assert forced.dcsi_ == pytest.approx(other["dcsi"])
    assert any("cost most of the density structure" in m for m in forced_messages)
    lower = re.search(r"with min_balance <= ([0-9.]+) the target is met", text)
    assert lower is not None
    quiet, quiet_messages = _fit_recording(X, s, min_balance=float(lower.group(1)))
    assert not [m for m in quiet_messages if "density" in m or "no repair candidate" in m]
    assert quiet.balance_ >= float(lower.group(1))


def test_under_pareto_the_warning_does_not_suggest_pareto():
    X, s = _separated_blobs()
    model, messages = _fit_recording(X, s, rounding="pareto")
    assert messages and not any("pareto" in m for m in messages)
    assert model.pareto_front_ is model.candidates_
    assert model.candidates_.loc[model.candidates_["chosen"], "pareto"].all()


def test_no_density_warning_when_the_paper_rounding_is_kept():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 0.4, (150, 2)), rng.normal(4, 0.4, (150, 2))]
    s = rng.integers(0, 2, 300)  # the same shares everywhere: the paper's rounding is fair
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fd = FairDen(n_clusters=2).fit(X, sensitive_features=s)
    np.testing.assert_array_equal(fd.labels_, fd.paper_labels_)
    assert len(fd.candidates_) == 1 and fd.candidates_["chosen"].all()


def test_paper_rounding_never_gives_the_density_warning():
    X, s = _separated_blobs()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        FairDen(n_clusters=2, rounding="kmeans").fit(X, sensitive_features=s)
    assert not [w for w in record if "density" in str(w.message)]


# --------------------------------------------------------------------------- the rule alone


def _table(rows, min_balance=0.8, share=0.7):
    """A candidate table as :func:`score_candidates` builds it; row 0 is the paper's."""
    frame = pd.DataFrame(rows, columns=["path", "balance", "dcsi", "noise_ratio", "n_moved"])
    paper = frame.loc[0, "dcsi"]
    frame["reaches"] = frame["balance"] >= min_balance
    frame["keeps_density"] = frame["dcsi"] >= share * paper
    return frame


def test_rule_highest_dcsi_among_those_reaching_the_target():
    f = _table(
        [
            ("paper", 0.60, 0.50, 0.0, 0),
            ("exchange", 0.81, 0.40, 0.0, 10),
            ("exchange", 0.90, 0.45, 0.0, 20),  # the highest DCSI reaching 0.8
            ("min_moves", 0.79, 0.49, 0.0, 8),
        ]
    )
    choice = choose_candidate(f)
    assert (choice.index, choice.fallback, choice.reached) == (2, False, True)


def test_rule_ties_prefer_balance_then_less_noise_then_fewer_moves():
    f = _table(
        [
            ("paper", 0.60, 0.50, 0.0, 0),
            ("exchange", 0.81, 0.45, 0.0, 10),
            ("exchange", 0.85, 0.45, 0.0, 20),  # same DCSI, more balanced
            ("noise", 0.85, 0.45, 0.05, 0),
        ]
    )
    assert choose_candidate(f).index == 2
    f.loc[2, "noise_ratio"] = 0.1
    assert choose_candidate(f).index == 3


def test_rule_the_70_percent_fallback():
    f = _table(
        [
            ("paper", 0.688, 0.422, 0.0, 0),
            ("exchange", 0.791, 0.422, 0.0, 30),  # keeps the density, just short of 0.8
            ("exchange", 0.811, 0.011, 0.0, 40),
            ("min_moves", 0.821, 0.025, 0.0, 35),
            ("exchange", 0.750, 0.300, 0.0, 25),  # keeps 71%, less balanced
        ]
    )
    choice = choose_candidate(f)
    assert (choice.index, choice.fallback, choice.other, choice.reached) == (1, True, 3, True)
    # exactly 70% keeps it
    f.loc[3, "dcsi"] = 0.7 * 0.422
    f["keeps_density"] = f["dcsi"] >= 0.7 * 0.422
    assert choose_candidate(f).index == 3 and not choose_candidate(f).fallback


def test_rule_when_nothing_reaches_the_target():
    f = _table([("paper", 0.5, 0.4, 0.0, 0), ("exchange", 0.7, 0.1, 0.0, 9)])
    f2 = _table([("paper", 0.5, 0.4, 0.0, 0), ("exchange", 0.7, 0.35, 0.0, 9)])
    choice = choose_candidate(f)
    assert (choice.index, choice.fallback, choice.other, choice.reached) == (0, True, 1, False)
    choice = choose_candidate(f2)
    assert (choice.index, choice.fallback, choice.reached) == (1, False, False)
