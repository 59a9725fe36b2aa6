"""The verdict states one fact per finding: every combination of flip, gap, input and proxy
findings against the sentences it must (and must not) produce."""

from __future__ import annotations

import itertools
import re

import pytest

from gnnaudit.audit.report.section import Finding
from gnnaudit.audit.report.thresholds import flip_flagged
from gnnaudit.audit.report.verdict import NEGLIGIBLE_FLIP, compose_verdict

NAME = "gender"
# flip states: (value, ci_low, ci_high)
FLIPS = {
    "absent": None,
    "zero": (0.0, 0.0, 0.0015),
    "negligible": (0.005, 0.002, 0.009),
    "weak": (0.03, 0.022, 0.039),
    "borderline": (0.05, 0.038, 0.064),
    "strong": (0.30, 0.27, 0.33),
    "stronger": (0.50, 0.45, 0.55),
}
PROXY_TEXT = "The inputs that best predict gender are savings (0.41 bits). More text"

#: phrase that marks each mechanism's sentence in the verdict
PHRASES = {
    "degenerate": "The model is degenerate",
    "direct": f"depend on {NAME} directly",
    "also_neighbours": "also runs through the neighbours",
    "neighbours_only": f"depend on {NAME} through the neighbours",
    "unresolved": "cannot be told apart",
    "weak": "but weakly",
    "gap": f"Outcomes differ between the {NAME} groups",
    "not_through": f"not through {NAME} itself",
    "no_test": "a direct test of its use was impossible",
    "proxies": "the inputs that best predict gender are savings",
    "not_computed": "No counterfactual flip",
    "nothing": "No finding shows|No dependence on",
    "figures": "say nothing about how it uses",
}
#: words that name a mechanism: never said about a degenerate model
MECHANISM = ("directly", "through the neighbours", "not through", "proxies", "weakly")


def _flip(scope: str, state: str) -> list[Finding]:
    values = FLIPS[state]
    if values is None:
        return []
    value, lo, hi = values
    return [
        Finding(
            f"counterfactual flip ({scope} scope)",
            NAME,
            "flip rate",
            value,
            lo,
            hi,
            flagged=flip_flagged(lo, hi),
        )
    ]


def _gap(flagged: bool) -> list[Finding]:
    return [
        Finding(
            "statistical parity",
            NAME,
            "statistical parity difference",
            0.2 if flagged else 0.019,
            0.15 if flagged else -0.01,
            0.25 if flagged else 0.05,
            flagged=flagged,
        )
    ]


def _expected(node, graph, gap, is_input, proxies, degenerate) -> set[str]:
    """The mechanisms the spec (issue 25) asks the verdict to state, restated independently."""
    vals = {s: FLIPS[v] for s, v in (("node", node), ("graph", graph)) if FLIPS[v] is not None}
    on = {s: flip_flagged(v[1], v[2]) for s, v in vals.items()}
    weak = {s for s, v in vals.items() if not on[s] and v[0] > NEGLIGIBLE_FLIP and v[1] > 0}
    tags = {"degenerate"} if degenerate else set()
    if not is_input:
        tags.add("no_test")
        tags |= {"proxies"} if proxies and not degenerate else set()
    elif not vals:
        tags.add("not_computed")
    if degenerate:  # one rule: the figures (a gap finding is always present), no mechanism
        return tags | {"figures"}
    if on.get("node"):
        tags.add("direct")
        if on.get("graph") and vals["graph"][1] > vals["node"][2]:
            tags.add("also_neighbours")
    elif on.get("graph"):
        tags.add("unresolved" if "node" not in vals else "neighbours_only")
    elif weak:
        tags.add("weak")
    if gap:
        tags.add("gap")
        used = any(on.values()) or any(v[0] > NEGLIGIBLE_FLIP for v in vals.values())
        if is_input and vals and not used:
            tags.add("not_through")
            tags |= {"proxies"} if proxies else set()
    if not any(on.values()) and not weak and not gap and vals:
        tags.add("nothing")
    return tags


def _found(verdict: str) -> set[str]:
    return {tag for tag, phrase in PHRASES.items() if re.search(phrase, verdict)}


CASES = [
    (node, graph, gap, is_input, proxies, degenerate)
    for node, graph in itertools.product(FLIPS, FLIPS)
    for gap, is_input, proxies, degenerate in itertools.product([False, True], repeat=4)
    if is_input or (node == graph == "absent")
]


@pytest.mark.parametrize(("node", "graph", "gap", "is_input", "proxies", "degenerate"), CASES)
def test_every_combination_states_exactly_its_mechanisms(
    node, graph, gap, is_input, proxies, degenerate
):
    findings = _flip("node", node) + _flip("graph", graph) + _gap(gap)
    if proxies:
        findings.append(
            Finding("proxies", NAME, "mutual information", 0.41, explanation=PROXY_TEXT)
        )
    verdict = compose_verdict(
        findings,
        sensitive_name=NAME,
        degenerate_reason="it predicts class 0 for 99% of the nodes" if degenerate else None,
        not_inputs=() if is_input else [NAME],
    )
    assert _found(verdict) == _expected(node, graph, gap, is_input, proxies, degenerate), verdict
    if degenerate:
        after = verdict.split("Improve the model before drawing conclusions.")[1]
        assert not [w for w in MECHANISM if w in after], verdict
    # every weak effect is stated with its interval
    if "weak" in _found(verdict):
        for state in {node, graph}:
            values = FLIPS[state]
            if values and not flip_flagged(values[1], values[2]) and values[0] > NEGLIGIBLE_FLIP:
                assert f"CI {values[1]:.3g} to {values[2]:.3g}" in verdict


def test_the_issue_scenarios_read_as_their_mechanism():
    # neighbour-only dependence: node scope exactly 0, graph scope 0.19-0.26
    v = compose_verdict(
        _flip("node", "zero")
        + [
            Finding(
                "counterfactual flip (graph scope)",
                NAME,
                "flip rate",
                0.22,
                0.19,
                0.26,
                flagged=True,
            )
        ],
        sensitive_name=NAME,
    )
    assert "through the neighbours" in v and "directly" not in v
    assert "changing it alone" not in v
    # weak direct dependence with a flagged gap: no proxy blamed
    v = compose_verdict(
        _flip("node", "weak") + _flip("graph", "weak") + _gap(True), sensitive_name=NAME
    )
    assert "but weakly" in v and "proxies" not in v and "Outcomes differ" in v
    # NIFTY German: unflagged parity gap of 1.9%, nothing flagged: no "Outcomes differ"
    v = compose_verdict(
        _flip("node", "zero") + _flip("graph", "zero") + _gap(False), sensitive_name=NAME
    )
    assert "Outcomes differ" not in v and v.startswith("No dependence on gender was found")


def test_several_attributes_and_an_intersection_get_their_own_sentences():
    findings = (
        _flip("node", "strong")
        + [
            Finding(
                "statistical parity",
                "gender & age",
                "statistical parity difference",
                0.4,
                0.3,
                0.5,
                flagged=True,
            )
        ]
        + [Finding("statistical parity", "age", "statistical parity difference", 0.02, -0.01, 0.05)]
    )
    v = compose_verdict(findings, sensitive_name=["gender", "age"], not_inputs=["age"])
    assert "depend on gender directly" in v
    assert "age is not a model input" in v
    assert "Outcomes differ between the gender & age groups" in v
    assert "Outcomes differ between the age groups" not in v
