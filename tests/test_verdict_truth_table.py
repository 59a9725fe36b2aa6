"""The verdict's truth table: hand-written models whose mechanism is known exactly, audited end
to end on a graph generated here (not by the library), with every verdict sentence and every
flag asserted.

Each model scores a node as ``base(x, graph) + term`` and decides class 1 when the score is
positive. ``base`` reads ``income``, ``debt`` and the neighbours' mean ``savings``, never
``gender``. The mechanisms:

* **null**: ``term = 0``;
* **direct at r**: ``term = t (2 gender - 1)`` with ``t`` between the ``m``-th and the
  ``m+1``-th smallest ``|base|`` (``m = r n``): changing a node's own gender flips exactly the
  ``m`` nodes with ``|base| < t``, at both scopes (the true rate is known, not estimated);
* **neighbour-only**: the term reads the neighbours' mean gender, never the node's own;
* **proxy-only**: the model reads ``postcode``, a noisy copy of gender, and not gender;
* **base-rate gap**: ``income`` is higher in one group in the data, the model reads income only;
* **degenerate**: decides 1 only for a few nodes, all of one gender;
* **text groups**: the null and the direct model audited with gender given as a text vector;
* **two attributes**: gender (read directly) and region (never read).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import SimpleConv

from gnnaudit.audit.pipeline import run_audit
from gnnaudit.audit.report.summary import mitigation_targets

N = 600
NAMES = ["gender", "income", "debt", "savings", "postcode", "region"]
G, INCOME, DEBT, SAVINGS, POSTCODE, REGION = range(6)


def make_graph(seed: int = 11, income_gap: float = 0.0) -> Data:
    """A random graph with mild homophily; ``income_gap`` shifts income by gender."""
    rng = np.random.default_rng(seed)
    gender = rng.integers(0, 2, N)
    income = rng.normal(size=N) + income_gap * gender
    debt = rng.normal(size=N)
    savings = rng.normal(size=N)
    postcode = np.where(rng.random(N) < 0.85, gender, 1 - gender)  # a proxy of gender
    region = rng.integers(0, 3, N)
    src = rng.integers(0, N, 5 * N)
    dst = rng.integers(0, N, 5 * N)
    keep = (src != dst) & ((gender[src] == gender[dst]) | (rng.random(5 * N) < 0.6))
    src, dst = src[keep], dst[keep]
    edge_index = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    x = np.column_stack([gender, income, debt, savings, postcode, region]).astype(np.float32)
    y = (income - debt + 0.3 * rng.normal(size=N) > 0).astype(np.int64)
    return Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(edge_index).long(),
        y=torch.from_numpy(y),
        feature_names=list(NAMES),
        num_nodes=N,
    )


class Scorer(torch.nn.Module):
    """``score = x w + mean_neighbours(x) v + b + t (2 gender - 1)``; logits ``[0, score]``."""

    def __init__(
        self,
        w: dict[int, float],
        v: dict[int, float],
        b: float = 0.0,
        t: float = 0.0,
        t_neighbours: float = 0.0,
    ):
        super().__init__()
        self.conv = SimpleConv(aggr="mean")  # one hop: the node scope's receptive field
        self.w = torch.zeros(len(NAMES))
        self.v = torch.zeros(len(NAMES))
        for col, val in w.items():
            self.w[col] = val
        for col, val in v.items():
            self.v[col] = val
        self.b, self.t, self.t_neighbours = b, t, t_neighbours

    def base(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return x @ self.w + self.conv(x, edge_index) @ self.v + self.b

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        score = self.base(x, edge_index) + self.t * (2 * x[:, G] - 1)
        if self.t_neighbours:  # the neighbours' mean gender, never the node's own
            score = score + self.t_neighbours * (2 * self.conv(x, edge_index)[:, G] - 1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


NULL_W, NULL_V = {INCOME: 1.0, DEBT: -1.0}, {SAVINGS: 0.4}


def direct(data: Data, rate: float) -> tuple[Scorer, float]:
    """The direct model flipping exactly ``round(rate * N)`` decisions, and that true rate."""
    null = Scorer(NULL_W, NULL_V)
    with torch.no_grad():
        margin = np.sort(np.abs(null.base(data.x, data.edge_index).numpy()))
    m = round(rate * N)
    return Scorer(NULL_W, NULL_V, t=float(margin[m - 1] + margin[m]) / 2), m / N


def audit(model: torch.nn.Module, data: Data, sensitive) -> tuple[str, set[tuple[str, str]], dict]:
    """``(verdict, flagged, values)``: the flagged ``(finding, feature)`` pairs and every
    finding's value. Each figure is said once: the literature rows are AUROC, F1 and
    instability only (never flagged), and NIFTY's names of the gaps and the graph-scope flip
    are aliases of those findings; the card's next step targets the flagged ones."""
    report = run_audit(model, data, sensitive, n_boot=200, k=5, progress=False)
    flagged = {(r.finding, r.feature) for r in report.flagged.itertuples()}
    values = {(r.finding, r.feature): r.value for r in report.findings.itertuples()}
    literature = {f for f, _ in values if f.startswith("literature: ")}
    assert literature <= {"literature: AUROC", "literature: F1", "literature: instability"}
    assert not any(f.startswith("literature: ") for f, _ in flagged)
    for entry in report.aliases.values():
        assert values[(entry["finding"], entry["feature"])] == entry["value"]
    step, name = report.summary_card().next_step, report.dataset["sensitive_name"]
    if step.targets:
        assert step.targets == mitigation_targets(list(report.findings.itertuples()), name)[0]
    return report.verdict, flagged, values


def tail(flagged: set[tuple[str, str]], values: dict, name: str = "gender") -> list[str]:
    """The sentences that follow the mechanism: the gap (beside a use), the ranking and the
    error verification, each expected exactly when its finding is flagged."""
    out = []
    if ("statistical parity", name) in flagged or ("equal opportunity", name) in flagged:
        out.append(rf"^Outcomes differ between the {name} groups \([^)]*\)\)?\.$")
    if any(
        f == (f"sensitivity rank ({s} scope)", name) for f in flagged for s in ("node", "graph")
    ):
        out.append(rf"^{name} is the feature whose change alters the most decisions")
    if any(f[0] == "error verification" for f in flagged):
        out.append(r"^The model errs more often on its most similar differently-decided pairs")
    return out


def ranks_first(values: dict, scope: str) -> bool:
    return values.get((f"sensitivity rank ({scope} scope)", "gender")) == 1.0


def sentences(verdict: str) -> list[str]:
    """The verdict cut into sentences (a full stop followed by a space and a capital)."""
    return [s for s in re.split(r"(?<=\.) (?=[A-Z])", verdict) if s]


def assert_sentences(verdict: str, expected: list[str]) -> None:
    """Every sentence matches exactly one expected pattern, in order, and none is missing."""
    got = sentences(verdict)
    assert len(got) == len(expected), f"{len(got)} sentences, expected {len(expected)}: {got}"
    for sentence, pattern in zip(got, expected, strict=True):
        assert re.search(pattern, sentence), f"{sentence!r} does not match {pattern!r}"


MECHANISM_WORDS = ("directly", "through the neighbours", "not through", "proxies", "weakly")


@pytest.fixture(scope="module")
def data() -> Data:
    return make_graph()


def test_null_model_is_cleared(data):
    verdict, flagged, values = audit(Scorer(NULL_W, NULL_V), data, "gender")
    assert not {f for f in flagged if f[1] == "gender"}, flagged
    assert values[("counterfactual flip (node scope)", "gender")] == 0.0
    assert values[("counterfactual flip (graph scope)", "gender")] == 0.0
    assert_sentences(
        verdict,
        [r"^No dependence on gender was found: changing it.*changed no", *tail(flagged, values)],
    )


@pytest.mark.parametrize("rate", [0.03, 0.06, 0.10, 0.15])
def test_direct_use_at_known_rates(data, rate):
    model, true_rate = direct(data, rate)
    verdict, flagged, values = audit(model, data, "gender")
    for scope in ("node", "graph"):
        assert values[(f"counterfactual flip ({scope} scope)", "gender")] == pytest.approx(
            true_rate
        )
    flips = {f for f in flagged if f[0].startswith("counterfactual flip")}
    if rate < 0.05:  # a weak use: read, but below the documented threshold
        assert not flips
        assert_sentences(
            verdict, [r"^The model reads gender directly, but weakly", *tail(flagged, values)]
        )
    else:
        assert flips == {
            ("counterfactual flip (node scope)", "gender"),
            ("counterfactual flip (graph scope)", "gender"),
        }
        assert (("sensitivity rank (node scope)", "gender") in flagged) == ranks_first(
            values, "node"
        )
        assert_sentences(
            verdict,
            [
                r"^Yes: the model's decisions depend on gender directly: changing a node's own gender alone",
                *tail(flagged, values),
            ],
        )


def test_neighbour_only_use(data):
    model = Scorer(NULL_W, NULL_V, t_neighbours=1.0)
    verdict, flagged, values = audit(model, data, "gender")
    assert values[("counterfactual flip (node scope)", "gender")] == 0.0
    assert ("counterfactual flip (graph scope)", "gender") in flagged
    assert ("counterfactual flip (node scope)", "gender") not in flagged
    assert_sentences(
        verdict,
        [
            r"^Yes: the model's decisions depend on gender through the neighbours: changing it "
            r"for every node at once.*while changing a node's own value alone stays below",
            *tail(flagged, values),
        ],
    )


GAP_SENTENCE = (
    r"^Outcomes differ between the gender groups \(statistical parity.*, but not through gender "
    r"itself: changing it alters no decision .*proxies of it\) or the groups differ in the "
    r"data; the inputs that best predict gender are {}"
)


def test_proxy_only_use(data):
    verdict, flagged, values = audit(Scorer({**NULL_W, POSTCODE: 2.0}, NULL_V), data, "gender")
    assert values[("counterfactual flip (node scope)", "gender")] == 0.0
    assert values[("counterfactual flip (graph scope)", "gender")] == 0.0
    # the model reads postcode, a strong proxy: the proxies finding is flagged
    assert {f for f in flagged if f[1] == "gender"} == {
        ("statistical parity", "gender"),
        ("proxies", "gender"),
    }
    assert_sentences(verdict, [GAP_SENTENCE.format("postcode"), *tail(flagged, values)[1:]])


def test_base_rate_gap():
    verdict, flagged, values = audit(Scorer(NULL_W, NULL_V), make_graph(income_gap=1.2), "gender")
    assert {f for f in flagged if f[1] == "gender"} == {("statistical parity", "gender")}
    # postcode predicts gender best (a fact of the data, not read by this model): named first
    assert_sentences(verdict, [GAP_SENTENCE.format("postcode"), *tail(flagged, values)[1:]])


def test_degenerate_model_gets_figures_and_no_mechanism(data):
    # decides 1 only for high-income women: about 3% of the nodes, all of gender 1
    model = Scorer({INCOME: 1.0}, {}, b=-2.5, t=1.0)
    verdict, flagged, _ = audit(model, data, "gender")
    # the figures stay (the parity gap is real); every flag of a meaningless section is cleared
    assert {f[0] for f in flagged} == {"degenerate model", "statistical parity"}
    assert_sentences(
        verdict,
        [
            r"^The model is degenerate \(it predicts class 0 for",
            r"^Improve the model before drawing conclusions",
            r"^For gender the figures are counterfactual flip \(node scope\).*for a degenerate "
            r"model they say nothing about how it uses the attribute",
        ],
    )
    assert not [w for w in MECHANISM_WORDS if w in verdict]


@pytest.mark.parametrize("labels", [("F", "M"), ("yes", "no")])
def test_text_groups_equal_to_a_column_are_that_column(data, labels):
    text = np.where(data.x[:, G].numpy() == 1, labels[0], labels[1])
    verdict, flagged, values = audit(Scorer(NULL_W, NULL_V), data, text)
    assert "not a model input" not in verdict
    assert_sentences(verdict, [r"^No dependence on gender was found", *tail(flagged, values)])
    model, _ = direct(data, 0.10)
    verdict, flagged, values = audit(model, data, text)
    assert ("counterfactual flip (node scope)", "gender") in flagged
    assert_sentences(
        verdict,
        [r"^Yes: the model's decisions depend on gender directly", *tail(flagged, values)],
    )


def test_two_attributes_each_get_their_own_sentences(data):
    model, _ = direct(data, 0.15)
    verdict, flagged, values = audit(model, data, ["gender", "region"])
    assert ("counterfactual flip (node scope)", "gender") in flagged
    assert values[("counterfactual flip (node scope)", "region")] == 0.0
    assert not {f for f in flagged if f[1] == "region"}
    gender_tail = tail(flagged, values)
    assert_sentences(
        verdict,
        [
            r"^Yes: the model's decisions depend on gender directly",
            *[t for t in gender_tail if "errs" not in t],
            r"^No dependence on region was found",
            *[t for t in gender_tail if "errs" in t],
        ],
    )


def test_a_gap_without_any_strong_proxy_says_so(data):
    """Labels read from income only, income shifted by gender a little: the gap sentence names no
    input as a strong proxy when none explains a fifth of gender's entropy."""
    shifted = make_graph(income_gap=0.9)
    shifted.x[:, POSTCODE] = torch.from_numpy(np.random.default_rng(5).integers(0, 2, N)).float()
    verdict, flagged, values = audit(Scorer(NULL_W, NULL_V), shifted, "gender")
    assert values[("proxies", "gender")] < 0.2
    assert {f for f in flagged if f[1] == "gender"} == {("statistical parity", "gender")}
    assert_sentences(
        verdict,
        [
            GAP_SENTENCE.replace("the inputs that best predict gender are {}", "")
            + r"no input is a strong proxy of gender \(none explains 20% of its entropy\); "
            r"the closest are income",
            *tail(flagged, values)[1:],
        ],
    )


class PlainScorer(torch.nn.Module):
    """The direct model without a PyG layer: its receptive field cannot be inferred."""

    def __init__(self, inner: Scorer) -> None:
        super().__init__()
        self.w, self.v, self.b, self.t = inner.w, inner.v, inner.b, inner.t  # no PyG layer

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index
        total = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(src.numel()))
        mean = total / deg.clamp(min=1)[:, None]
        score = x @ self.w + mean @ self.v + self.b + self.t * (2 * x[:, G] - 1)
        return torch.stack([torch.zeros_like(score), score], dim=1)


def test_a_test_that_could_not_run_is_named_with_its_option(data):
    model, _ = direct(data, 0.10)
    plain = PlainScorer(model)
    verdict, flagged, values = audit(plain, data, "gender")
    assert ("counterfactual flip (node scope)", "gender") not in values
    # the graph scope still runs and finds the use; the missing node scope closes the verdict
    assert sentences(verdict)[-1].startswith(
        "The node-scope flip test did not run: the model's receptive field cannot be inferred "
        "(PlainScorer has no torch_geometric MessagePassing submodule); pass model_hops=L"
    )
    assert "node scope was not computed" in verdict
    report = run_audit(plain, data, "gender", n_boot=200, k=5, progress=False, model_hops=1)
    assert "did not run" not in report.verdict
    node = report.finding("counterfactual flip (node scope)", "gender")
    assert node["value"] == pytest.approx(0.10) and node["flagged"]
