"""Can the audit clear an innocent model? Seeded null models, known direct use, and the
evidence contrast with and without the attribute's own column in the kernel.

Usage::

    python benchmarks/bench_verdict_truth.py [--nulls 100] [--direct-seeds 20]
        [--nodes 1000] [--out FILE]

The generator and the models are this script's own (not the test suite's truth table, not the
library's generators): a four-block stochastic block model (``p_in = 0.02``, ``p_out =
0.002``), features ``gender`` (Bernoulli 1/2), ``age`` (shifted by block), ``income``, ``debt``,
``hours`` (``hours`` shifted by 0.4 sd with gender in the *proxy* family, independent in the
*independent* family), labels from income, debt and age. Models are two-layer GCNs
(``GCNConv``, 16 hidden) trained 100 seeded Adam steps on the non-test nodes with their input
row for ``gender`` held at zero: useful models that never read it (**nulls**). A **direct** model adds ``t (2 gender - 1)`` to the class-1 logit margin of
a null, ``t`` set between the ``m``-th and ``m+1``-th smallest ``|margin|`` of the audited nodes
so that exactly ``m = r n`` node-scope decisions flip (a known true rate).

Sections:

1. Nulls (``--nulls`` seeds per family): the share of audits with any flag about gender
   (``use flags``: flips, rank, proxies; ``gap flags``: parity, equal opportunity), the share
   whose verdict says "No dependence on gender", and how often the parity interval contains 0.
2. Direct use at true node-scope rates 3, 4, 5, 7 and 10% (``--direct-seeds`` each): the
   share flagged at node scope.
3. The evidence contrast on the independent nulls: significant (p < 0.05) with the search's
   kernel (``similarity="full"``) against the kernel without gender (the default).

Threads: one (set by the script).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table, set_threads  # noqa: E402

NAMES = ["gender", "age", "income", "debt", "hours"]


def make_graph(n: int, seed: int, proxy: bool):
    import numpy as np
    import torch
    from torch_geometric.data import Data

    rng = np.random.default_rng([seed, 1])
    block = rng.integers(0, 4, n)
    same = block[:, None] == block[None, :]
    upper = np.triu(rng.random((n, n)) < np.where(same, 0.02, 0.002), 1)
    src, dst = np.nonzero(upper)
    gender = rng.integers(0, 2, n)
    age = rng.normal(size=n) + 0.5 * block
    income, debt = rng.normal(size=n), rng.normal(size=n)
    hours = rng.normal(size=n) + (0.8 * gender if proxy else 0.0)
    x = np.column_stack([gender, age, income, debt, hours]).astype(np.float32)
    y = (income - debt + 0.3 * age + 0.5 * rng.normal(size=n) > 0.2).astype(np.int64)
    test = np.zeros(n, dtype=bool)
    test[rng.permutation(n)[: n // 2]] = True
    return Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(np.concatenate([[src, dst], [dst, src]], axis=1)).long(),
        y=torch.from_numpy(y),
        test_mask=torch.from_numpy(test),
        feature_names=list(NAMES),
        num_nodes=n,
    )


def null_gcn(seed: int):
    import torch
    from torch_geometric.nn import GCNConv

    class NullGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(seed)
            self.conv1, self.conv2 = GCNConv(len(NAMES), 16), GCNConv(16, 2)
            with torch.no_grad():
                self.conv1.lin.weight[:, 0] = 0.0  # gender's input weights: never read
            self.shift = 0.0

        def forward(self, x, edge_index):
            h = torch.relu(self.conv1(x, edge_index))
            out = self.conv2(h, edge_index)
            if self.shift:
                out = out + torch.stack(
                    [torch.zeros_like(x[:, 0]), self.shift * (2 * x[:, 0] - 1)], dim=1
                )
            return out

    model = NullGCN().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def trained(model, data, seed: int):
    """``model`` fitted (100 Adam steps, seeded) on the labels of the nodes outside the test
    mask, gender's input weights held at zero throughout: a useful model that never reads it."""
    import torch

    torch.manual_seed(seed)
    params = [p for p in model.parameters()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=0.02)
    train = ~data.test_mask
    model.train()
    for _ in range(100):
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        torch.nn.functional.cross_entropy(out[train], data.y[train]).backward()
        model.conv1.lin.weight.grad[:, 0] = 0.0
        opt.step()
    model.eval()
    for p in params:
        p.requires_grad_(False)
    assert bool((model.conv1.lin.weight[:, 0] == 0).all())
    return model


def direct_model(data, seed: int, rate: float):
    import numpy as np
    import torch

    model = trained(null_gcn(seed), data, seed)
    with torch.no_grad():
        logits = model(data.x, data.edge_index)
    margin = np.sort(np.abs((logits[:, 1] - logits[:, 0]).numpy()[data.test_mask.numpy()]))
    m = round(rate * margin.size)
    model.shift = float(margin[m - 1] + margin[m]) / 2
    return model, m / margin.size


def audit(model, data):
    from gnnaudit.audit.pipeline import run_audit

    return run_audit(model, data, "gender", n_boot=200, k=5, progress=False)


def nulls(args) -> list[dict]:

    rows = []
    for family in ("independent", "proxy"):
        use = gap = clear = covers = 0
        for seed in range(args.nulls):
            data = make_graph(args.nodes, 1000 + seed, family == "proxy")
            report = audit(trained(null_gcn(seed), data, seed), data)
            flagged = report.flagged
            about = flagged[flagged["feature"] == "gender"]["finding"].tolist()
            use += any(
                f.startswith(("counterfactual", "sensitivity rank", "proxies")) for f in about
            )
            gap += any(("parity" in f or "opportunity" in f) for f in about)
            clear += "No dependence on gender" in report.verdict
            if "No dependence on gender" not in report.verdict:
                print(f"  {family} seed {seed}: {report.verdict}", flush=True)
            parity = report.finding("statistical parity", "gender")
            covers += bool(parity["ci_low"] <= 0 <= parity["ci_high"])
        rows.append(
            {
                "family": family,
                "nulls": args.nulls,
                "with a use flag": use,
                "with a gap flag": gap,
                "verdict 'No dependence'": clear,
                "parity CI contains 0": covers,
            }
        )
        print(rows[-1], flush=True)
    return rows


def direct(args) -> list[dict]:
    rows = []
    for rate in (0.03, 0.04, 0.05, 0.07, 0.10):
        flagged = 0
        for seed in range(args.direct_seeds):
            data = make_graph(args.nodes, 2000 + seed, False)
            model, true_rate = direct_model(data, seed, rate)
            report = audit(model, data)
            flip = report.finding("counterfactual flip (node scope)", "gender")
            flagged += bool(flip["flagged"])
            if not flip["flagged"] and rate >= 0.05:
                print(f"  rate {rate} seed {seed}: {report.verdict}", flush=True)
        rows.append({"true node-scope rate": rate, "audits": args.direct_seeds, "flagged": flagged})
        print(rows[-1], flush=True)
    return rows


def contrast(args) -> list[dict]:
    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.audit.fairness.evidence_contrast import evidence_contrast

    rows = []
    counts = {"full": 0, "without-feature": 0}
    means = {"full": 0.0, "without-feature": 0.0}
    for seed in range(args.nulls):
        data = make_graph(args.nodes, 1000 + seed, False)
        ce = CounterfactualEvidence().fit(data, model=trained(null_gcn(seed), data, seed))
        for sim in counts:
            res = evidence_contrast(
                ce, data, "gender", k=10, n_perm=499, n_boot=100, random_state=seed, similarity=sim
            )
            counts[sim] += res.p_value < 0.05
            means[sim] += res.difference / args.nulls
    for sim in counts:
        rows.append(
            {
                "similarity": sim,
                "nulls": args.nulls,
                "significant (p < 0.05)": counts[sim],
                "mean difference": means[sim],
            }
        )
    print(rows, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nulls", type=int, default=100)
    parser.add_argument("--direct-seeds", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="10 nulls, 5 direct seeds")
    parser.add_argument("--out", default=str(HERE / "results" / "verdict_truth.md"))
    args = parser.parse_args()
    if args.quick:
        args.nulls, args.direct_seeds = 10, 5
    header = RunHeader("bench_verdict_truth.py")
    set_threads()
    import pandas as pd

    sections = [
        ("Null models (gender never read)", nulls(args)),
        ("Direct use at known node-scope flip rates", direct(args)),
        ("Evidence contrast on the independent nulls", contrast(args)),
    ]
    lines = header.lines("Verdict truth: null models, known direct use, evidence contrast", "1")
    for title, rows in sections:
        lines += [f"## {title}", "", fmt_table(pd.DataFrame(rows)), ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
