"""The audit's answer in plain sentences, one per established fact, composed from its findings.

"Do the model's decisions depend on the sensitive attribute, through which mechanism, and how
strongly?" The verdict is derived from the findings table only (never from a section's free
text), so the JSON, Markdown and HTML reports and the command line say the same thing. Each
sentence states one fact and quotes the finding that establishes it; no sentence claims more
than its finding. For every sensitive attribute ``S`` (with ``node`` / ``graph`` the
counterfactual-flip findings at node and graph scope, ``gap`` the flagged group-gap findings):

* **degenerate model** (named first, followed by its likely cause and fix when the audit saw
  one, e.g. inputs on raw, large scales: :func:`~gnnaudit.audit.model_quality.raw_scale_cause`):
  one rule for every sentence that follows: the figures are stated as figures, and *nothing*
  is said about a mechanism (no "directly", "through the neighbours", "not through S itself"
  or proxies), as a near-constant model's figures carry no information about how it decides;
* **direct use**: ``node`` flagged ("changing a node's own S alone changes its decision");
* **use through the neighbours**: ``graph`` flagged while ``node`` is not, or both flagged and
  the graph-scope interval lies entirely above the node-scope interval (graph scope *clearly*
  above node scope); with ``graph`` flagged and node scope not computed the verdict says that
  the two mechanisms cannot be told apart;
* **weak effect**: no flip flagged, but a flip rate above
  :data:`~gnnaudit.audit.report.thresholds.NEGLIGIBLE_FLIP` is observed (and its interval
  excludes 0): stated as a weak use with its interval, below the documented threshold. Any
  observed flip shows that the model reads ``S``, so proxies are never blamed then;
* **group gap without use of the attribute**: ``gap`` flagged, no flip flagged and every flip
  rate at most ``NEGLIGIBLE_FLIP``: the model reaches the difference through other inputs
  (proxies) or the groups differ in the data (with a non-zero negligible flip rate it says
  that the model reads the attribute at that rate and attributes only the rest);
* **group gap** beside a use of ``S``: stated as a gap, without saying where it comes from;
* **no test possible**: ``S`` is not a model input, so a direct test was impossible; the top
  proxies are named when the proxy finding exists;
* **no dependence**: ``S`` is an input, both flip scopes were computed, no flip is flagged or
  weak and no gap is flagged: "No finding shows that the decisions depend on S", with the
  largest flip estimate; when the largest flip rate is exactly 0 the model's decisions never
  changed with ``S`` and the verdict says so;
* **a test that did not run** (``not_run``): one sentence each, with the option that enables
  it (e.g. the node-scope flip test without the model's receptive field, ``model_hops``);
* a flagged error verification adds one sentence. The evidence contrast is informational
  (never flagged; proxies produce it too) and adds none.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from gnnaudit.audit.report.section import Finding, ReportSection
from gnnaudit.audit.report.thresholds import NEGLIGIBLE_FLIP

__all__ = ["compose_verdict", "NEGLIGIBLE_FLIP", "clearly_above", "not_run_sentences"]

#: the units whose statistics the verdict rests on, by the test a reader knows them as
_VERDICT_TESTS = {
    "sensitivity": "the counterfactual flip test",
    "group_fairness": "the group fairness test",
    "proxies": "the proxy analysis",
}
#: skip reasons the verdict already states in its own sentences (no attribute; not an input)
_ALREADY_SAID = ("no sensitive attribute was given", "is not one of the model's input features")

_NODE = "counterfactual flip (node scope)"
_GRAPH = "counterfactual flip (graph scope)"
_GAPS = ("statistical parity", "equal opportunity")
_PROXIES = "proxies"


def _figure(f: Finding) -> str:
    text = f"{f.finding} {f.value:.3g}"
    if math.isfinite(f.ci_low) and math.isfinite(f.ci_high):
        text += f" (CI {f.ci_low:.3g} to {f.ci_high:.3g})"
    elif math.isfinite(f.p_value):
        text += f" (p = {f.p_value:.3g})"
    return text


def clearly_above(high: Finding, low: Finding) -> bool:
    """Whether ``high``'s interval lies entirely above ``low``'s (both finite)."""
    return math.isfinite(high.ci_low) and math.isfinite(low.ci_high) and high.ci_low > low.ci_high


def _weak(f: Finding | None) -> bool:
    """An unflagged flip observed above the negligible level, its interval excluding 0."""
    return (
        f is not None
        and not f.flagged
        and math.isfinite(f.value)
        and f.value > NEGLIGIBLE_FLIP
        and math.isfinite(f.ci_low)
        and f.ci_low > 0
    )


def _use_sentences(name: str, node: Finding | None, graph: Finding | None) -> list[str]:
    """Sentences about the model's use of ``name`` read from its two flip findings."""
    out: list[str] = []
    node_on = node is not None and node.flagged
    graph_on = graph is not None and graph.flagged
    if node_on:
        assert node is not None
        out.append(
            f"Yes: the model's decisions depend on {name} directly: changing a node's own "
            f"{name} alone changes its decision ({_figure(node)})."
        )
        if graph_on and graph is not None and clearly_above(graph, node):
            out.append(
                f"The dependence also runs through the neighbours: changing {name} for every "
                f"node at once changes clearly more decisions ({_figure(graph)})."
            )
    elif graph_on:
        assert graph is not None
        if node is None:
            out.append(
                f"Yes: the model's decisions depend on {name}: changing it for every node at "
                f"once changes decisions ({_figure(graph)}); node scope was not computed, so "
                "direct use and use through the neighbours cannot be told apart."
            )
        else:
            out.append(
                f"Yes: the model's decisions depend on {name} through the neighbours: changing "
                f"it for every node at once changes decisions ({_figure(graph)}), while "
                f"changing a node's own value alone stays below the threshold "
                f"({_figure(node)})."
            )
    else:
        weak = [f for f in (node, graph) if f is not None and _weak(f)]
        if weak:
            how = (
                "through the neighbours"
                if node is not None and graph is not None and clearly_above(graph, node)
                else "directly"
                if weak[0] is node
                else ""
            )
            out.append(
                f"The model reads {name}{' ' + how if how else ''}, but weakly: changing it "
                f"changes some decisions ({'; '.join(_figure(f) for f in weak)}), fewer than "
                "the documented threshold for a dependence."
            )
    return out


def _gap_sentences(
    name: str,
    gaps: list[Finding],
    flips: list[Finding],
    is_input: bool,
    proxies: Finding | None,
) -> list[str]:
    """Sentences about flagged group gaps (``gaps``) of ``name``."""
    if not gaps:
        return []
    text = f"Outcomes differ between the {name} groups ({'; '.join(_figure(f) for f in gaps)})"
    used = any(f.flagged for f in flips) or any(
        math.isfinite(f.value) and f.value > NEGLIGIBLE_FLIP for f in flips
    )
    if is_input and flips and not used:
        largest = max(flips, key=lambda f: f.value if math.isfinite(f.value) else -1.0)
        if largest.value > 0:
            text += (
                f", mostly not through {name} itself: the model reads it, but changing it "
                f"alters only {largest.value:.1%} of the decisions ({_figure(largest)}), a "
                f"negligible share (at most {NEGLIGIBLE_FLIP:.0%}), so the rest of the "
                "difference comes through other inputs (proxies of it) or from the data"
            )
        else:
            text += (
                f", but not through {name} itself: changing it alters no decision "
                f"({_figure(largest)}), so the model reaches the difference through other "
                "inputs (proxies of it) or the groups differ in the data"
            )
        if proxies is not None:
            text += f"; {_proxy_clause(proxies)}"
    return [text + "."]


def _proxy_clause(proxies: Finding) -> str:
    """The proxy finding's first sentence, lower-cased at its start, without its full stop."""
    first = proxies.explanation.split(". ")[0].rstrip(".")
    return first[:1].lower() + first[1:] if first else "see the proxies finding"


def _figures_only(name: str, about: list[Finding]) -> list[str]:
    """A degenerate model's figures about ``name``, stated as figures with no mechanism."""
    shown = [f for f in about if f.finding in (_NODE, _GRAPH, *_GAPS)]
    if not shown:
        return []
    return [
        f"For {name} the figures are {'; '.join(_figure(f) for f in shown)}; for a degenerate "
        "model they say nothing about how it uses the attribute."
    ]


def _no_dependence(name: str, flips: list[Finding]) -> str:
    """The sentence of an attribute that no finding shows the model depends on."""
    largest = max(flips, key=lambda f: f.value if math.isfinite(f.value) else -1.0)
    if len(flips) == 2 and largest.value == 0:
        return (
            f"No dependence on {name} was found: changing it, for a node alone or for every "
            f"node at once, changed no decision ({'; '.join(_figure(f) for f in flips)})."
        )
    return (
        f"No finding shows that decisions depend on {name} at the documented thresholds; "
        f"the largest estimated effect is {_figure(largest)}."
    )


def _attribute_sentences(
    name: str, about: list[Finding], is_input: bool, degenerate: bool
) -> list[str]:
    """Every sentence about one sensitive attribute ``name`` (see the module docstring)."""
    by_name = {f.finding: f for f in about}
    node, graph = by_name.get(_NODE), by_name.get(_GRAPH)
    flips = [f for f in (node, graph) if f is not None]
    gaps = [f for f in about if f.finding in _GAPS and f.flagged]
    proxies = by_name.get(_PROXIES)
    out: list[str] = []
    if not is_input:
        text = f"{name} is not a model input, so a direct test of its use was impossible"
        if proxies is not None and not degenerate:
            text += f"; {_proxy_clause(proxies)}"
        out.append(text + ".")
    elif not flips:
        out.append(
            f"No counterfactual flip of {name} was computed (see the sensitivity section's "
            "notes), so the audit cannot say whether the model uses it."
        )
    if degenerate:  # one rule: figures only, nothing about a mechanism
        return out + _figures_only(name, about)
    out += _use_sentences(name, node, graph)
    out += _gap_sentences(name, gaps, flips, is_input, proxies)
    rank = [f for f in about if f.finding.startswith("sensitivity rank") and f.flagged]
    if rank:
        out.append(
            f"{name} is the feature whose change alters the most decisions "
            f"({'; '.join(f.finding for f in rank)})."
        )
    established = any(f.flagged for f in about if f.finding != _PROXIES) or any(
        _weak(f) for f in flips
    )
    if not established and flips:
        out.append(_no_dependence(name, flips))
    elif not established and is_input is False and not gaps:
        out.append(f"No group gap of {name} crosses its documented threshold.")
    return out


def not_run_sentences(sections: Sequence[ReportSection]) -> list[str]:
    """One sentence per test of the verdict that the audit could not run, with its reason and
    the option that enables it: a skipped flip, group-fairness or proxy section, and each flip
    scope the sensitivity section skipped (``data["skipped_scopes"]``). Reasons the verdict
    states anyway (no sensitive attribute; the attribute is not a model input) are left out."""
    out: list[str] = []
    for section in sections:
        test = _VERDICT_TESTS.get(section.key)
        if test is None:
            continue
        reason = section.data.get("skipped_reason") if section.status == "skipped" else None
        if reason and not any(said in reason for said in _ALREADY_SAID):
            out.append(f"{test[:1].upper()}{test[1:]} did not run: {reason}.")
        for scope, why in (section.data.get("skipped_scopes") or {}).items():
            why = str(why).removeprefix(f"{scope.capitalize()} scope skipped: ")
            out.append(f"The {scope}-scope flip test did not run: {why}")
    return out


def compose_verdict(
    findings: Sequence[Finding],
    *,
    sensitive_name: str | Sequence[str] | None,
    degenerate_reason: str | None = None,
    degenerate_cause: str | None = None,
    not_inputs: Collection[str] = (),
    not_run: Sequence[str] = (),
) -> str:
    """The verdict for ``findings`` (see the module docstring).

    ``sensitive_name``: the sensitive attribute's name, or the names of several (each gets its
    own sentences; intersectional group findings name their feature ``"A & B"`` and get the
    group-gap sentence). ``not_inputs``: the attributes that are not model inputs (no direct
    test possible); the others are inputs. ``not_run``: one sentence per test the audit could
    not run, each naming the option that enables it; they close the verdict.
    ``degenerate_cause``: the likely cause of a degenerate model and its fix, in plain words
    (stated right after the degenerate sentence; ignored when the model is not degenerate).
    """
    parts: list[str] = []
    if degenerate_reason is not None:
        parts.append(
            f"The model is degenerate ({degenerate_reason}): its decisions carry too little "
            "information for a fairness reading, and the evidence-based sections are marked "
            "not meaningful. Improve the model before drawing conclusions."
        )
        if degenerate_cause:
            parts.append(degenerate_cause)
    names = [sensitive_name] if isinstance(sensitive_name, str) else list(sensitive_name or [])
    if not names:
        parts.append(
            "No sensitive attribute was given, so the audit cannot say whether decisions depend "
            "on one; it reports model quality, evidences and errors."
        )
    for name in names:
        about = [f for f in findings if f.feature == name]
        if not about:
            parts.append(f"No statistic about {name} could be computed (see the sections' notes).")
            continue
        parts += _attribute_sentences(
            name, about, name not in not_inputs, degenerate_reason is not None
        )
    known = set(names)
    for joint in dict.fromkeys(f.feature for f in findings if " & " in f.feature):
        if joint not in known:
            gaps = [f for f in findings if f.feature == joint and f.finding in _GAPS and f.flagged]
            parts += _gap_sentences(joint, gaps, [], False, None)
    errors = [f for f in findings if f.finding == "error verification" and f.flagged]
    if errors:
        parts.append(
            "The model errs more often on its most similar differently-decided pairs "
            f"({_figure(errors[0])}); the evidence pairs section lists them."
        )
    parts += [t if t.endswith(".") else t + "." for t in not_run]
    return " ".join(parts)
