"""The paired bootstrap of FairFinetune's validation gain (``selection_gain_``)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import FairFinetune, train_node_classifier
from gnnaudit.training.fair_selection import group_gap
from gnnaudit.training.selection_gain import (
    GAIN_COLUMNS,
    GAIN_CONFIDENCE,
    gain_table,
    warn_if_gain_uncertain,
)

TARGETS = ("cf", "dsp", "deo")


def _oracle(vanilla, chosen, groups, label1, n_boot, seed):
    """Materialise every resample (the same multinomial counts, stratum by stratum) and compute
    the gaps on it with group_gap: the reductions' intervals, per gap and for the sum."""
    rng = np.random.default_rng(seed)
    strata = []
    for g in np.unique(groups):
        for pos in (False, True):
            nodes = np.flatnonzero((groups == g) & (label1 == pos))
            if nodes.size:
                counts = rng.multinomial(nodes.size, np.full(nodes.size, 1 / nodes.size), n_boot)
                strata.append((nodes, counts))
    deltas = {t: [] for t in (*TARGETS, "sum")}
    for b in range(n_boot):
        idx = np.concatenate([np.repeat(nodes, counts[b]) for nodes, counts in strata])
        l1 = label1[idx]
        total = 0.0
        for t in TARGETS:
            pair = []
            for m in (vanilla, chosen):
                dec, changed = m[idx, 0], m[idx, 1]
                if t == "cf":
                    pair.append(changed.mean())
                elif t == "dsp":
                    pair.append(group_gap(dec, groups[idx]))
                else:
                    pair.append(group_gap(dec[l1], groups[idx][l1]))
            deltas[t].append(pair[0] - pair[1])  # NaN when the gap is undefined
            both = np.nan_to_num(pair, nan=0.0)  # counted 0 in the sum, as gap_sum does
            total += both[0] - both[1]
        deltas["sum"].append(total)
    alpha = (1 - GAIN_CONFIDENCE) / 2
    return {
        t: np.full(2, np.nan) if np.isnan(v).all() else np.quantile(v, [alpha, 1 - alpha])
        for t, v in deltas.items()
    }


def _models(rng, n, flip):
    """Two (n, 2) decision arrays: ``chosen`` is ``vanilla`` with a share ``flip`` changed."""
    vanilla = np.stack([rng.integers(0, 2, n), rng.integers(0, 2, n)], axis=1).astype(float)
    chosen = vanilla.copy()
    moved = rng.random((n, 2)) < flip
    chosen[moved] = 1 - chosen[moved]
    return vanilla, chosen


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(8, 40),
    n_groups=st.integers(2, 3),
    flip=st.floats(0.0, 0.6),
    seed=st.integers(0, 10_000),
)
def test_intervals_match_materialised_resamples(n, n_groups, flip, seed):
    rng = np.random.default_rng(seed)
    vanilla, chosen = _models(rng, n, flip)
    groups = np.arange(n) % n_groups  # every group present
    label1 = rng.random(n) < 0.5
    table = gain_table(vanilla, chosen, groups, label1, TARGETS, n_boot=40, random_state=seed)
    assert list(table.columns) == GAIN_COLUMNS
    assert table["gap"].tolist() == [*TARGETS, "sum"]
    oracle = _oracle(vanilla, chosen, groups, label1, 40, seed)
    for row in table.itertuples():
        np.testing.assert_allclose([row.ci_low, row.ci_high], oracle[row.gap], atol=1e-12)
        assert row.established == (row.ci_low > 0)
    # the point estimates are the observed gaps
    assert table.loc[1, "vanilla"] == pytest.approx(np.nan_to_num(group_gap(vanilla[:, 0], groups)))
    assert table.loc[0, "chosen"] == pytest.approx(chosen[:, 1].mean())
    observed = table.loc[:2, "reduction"].sum()
    assert table.loc[3, "reduction"] == pytest.approx(observed)


def test_identical_models_gain_nothing_and_are_not_warned_about():
    rng = np.random.default_rng(0)
    vanilla, _ = _models(rng, 60, 0.0)
    groups, label1 = np.arange(60) % 2, rng.random(60) < 0.4
    table = gain_table(vanilla, vanilla.copy(), groups, label1, TARGETS)
    assert (table[["reduction", "ci_low", "ci_high"]].to_numpy() == 0).all()
    assert not table["established"].any()
    # no resample is drawn for them: a billion would not fit in memory
    huge = gain_table(vanilla, vanilla.copy(), groups, label1, TARGETS, n_boot=10**9)
    assert huge.equals(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_gain_uncertain(table, 60, chosen_name="vanilla") == []


def test_the_interval_narrows_with_the_square_root_of_the_nodes():
    rng = np.random.default_rng(1)
    vanilla, chosen = _models(rng, 80, 0.3)
    groups, label1 = np.arange(80) % 2, rng.random(80) < 0.5
    small = gain_table(vanilla, chosen, groups, label1, ("dsp",), random_state=0)
    big = gain_table(
        np.tile(vanilla, (16, 1)),
        np.tile(chosen, (16, 1)),
        np.tile(groups, 16),
        np.tile(label1, 16),
        ("dsp",),
        random_state=0,
    )
    width = (small["ci_high"] - small["ci_low"]).iloc[0]
    ratio = (big["ci_high"] - big["ci_low"]).iloc[0] / width
    assert 0.15 < ratio < 0.4  # 16x the nodes: about 1/4 the width
    assert big["reduction"].iloc[0] == pytest.approx(small["reduction"].iloc[0])


def test_only_uncertain_reductions_are_named():
    rng = np.random.default_rng(2)
    n = 400
    groups, label1 = np.arange(n) % 2, rng.random(n) < 0.5
    vanilla = np.zeros((n, 2))
    vanilla[:, 1] = rng.random(n) < 0.3  # 30% of decisions read the attribute
    vanilla[:, 0] = (groups == 1) & (rng.random(n) < 0.6)  # a large parity gap
    chosen = vanilla.copy()
    chosen[:, 1] = 0  # counterfactual unfairness removed: a certain gain
    few = np.flatnonzero(groups == 1)[:3]
    chosen[few, 0] = 0  # parity barely moved: an uncertain one
    table = gain_table(vanilla, chosen, groups, label1, ("cf", "dsp"), random_state=0)
    assert table.set_index("gap").loc["cf", "established"]
    assert not table.set_index("gap").loc["dsp", "established"]
    with pytest.warns(UserWarning, match=r"on 400 validation nodes") as rec:
        named = warn_if_gain_uncertain(table, 400, chosen_name="blind step 3", stacklevel=2)
    assert named == ["dsp"]
    text = str(rec[0].message)
    assert "ΔSP" in text and "counterfactual" not in text.split("The reduction")[0]
    assert "blind step 3" in text and "optimistic" in text
    assert rec[0].filename == __file__
    # the label-free gaps counted on more nodes than the validation ones: both counts named
    with pytest.warns(
        UserWarning, match=r"on 400 nodes outside the test set for ΔSP and CF and 90 "
    ):
        warn_if_gain_uncertain(table, 90, chosen_name="blind step 3", n_free=400)


def test_finetune_carries_the_gain_of_its_chosen_candidate():
    logging.getLogger("lightning").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    graph = synthetic_credit_graph(num_nodes=300, bias=2.0, seed=1)
    model, _ = train_node_classifier(graph, "gcn", max_epochs=40, seed=0, num_layers=2)
    runs = []
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            runs.append(FairFinetune.finetune(model, graph, "gender", epochs=10, random_state=3))
    tuned = runs[0]
    gain, table = tuned.selection_gain_, tuned.selection_
    assert gain.equals(runs[1].selection_gain_)  # seeded
    chosen, vanilla = table[table["chosen"]].iloc[0], table.iloc[0]
    per_gap = gain.set_index("gap")
    for t in TARGETS:
        assert per_gap.loc[t, "vanilla"] == pytest.approx(float(vanilla[f"val_{t}"]))
        assert per_gap.loc[t, "chosen"] == pytest.approx(float(chosen[f"val_{t}"]))
    assert per_gap.loc["sum", "chosen"] == pytest.approx(float(chosen["gap_sum"]))
    assert per_gap.loc["sum", "vanilla"] == pytest.approx(float(vanilla["gap_sum"]))
