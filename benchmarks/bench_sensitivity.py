"""Counterfactual sensitivity and evidence contrast on the planted-bias graph, their cost at
scale, and the calibration of the contrast's p-value.

Usage::

    python benchmarks/bench_sensitivity.py [--sizes 1000] [--seeds 0 1 2 3 4]
        [--backbones gcn sage] [--biases 0 1.5 3] [--epochs 200] [--scale-nodes 100000]
        [--calibration-sims 200] [--out FILE]

Sections (every figure of ``benchmarks/results/sensitivity.md`` comes from one run):

1. Planted bias: ``synthetic_credit_graph(N, bias, seed)`` (homophily 0.8) x backbone,
   ``train_node_classifier(backbone, epochs, seed)``; on the test nodes: the gender flip rate
   at node and graph scope with 95% CIs (``counterfactual_flip``), gender's rank among all 11
   features by ``feature_sensitivity`` at both scopes (and the top feature), the evidence
   contrast of gender (``evidence_contrast``, k = 10, exact evidences; difference, CI and the
   p-values of both inference modes).
2. Cost at ``--scale-nodes`` nodes (bias 1.5, seed 0, a GCN trained 20 epochs: the cost does
   not depend on training): one forward pass, the gender flip at both scopes, the feature
   ranking at both scopes, the evidence search (the audit runs it anyway) and the contrast on
   top of it; forward passes and batches.
3. Calibration of the contrast's p-value under a null (predictions drawn independently of
   everything, 100-node random graphs, k = 5): the share of p-values below 0.05 / 0.10 / 0.20
   / 0.50 for ``inference="shared"`` and ``"node"``.

Threads: ``OMP_NUM_THREADS=1`` and ``torch.set_num_threads(1)`` (set by the script).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_audit import RunHeader, fmt_table, set_threads  # noqa: E402

RESULTS = HERE / "results" / "sensitivity.md"
K = 10


def trained(n: int, bias: float, seed: int, backbone: str, epochs: int):
    from gnnaudit.datasets import synthetic_credit_graph
    from gnnaudit.training import train_node_classifier

    data = synthetic_credit_graph(num_nodes=n, bias=bias, seed=seed)
    module, metrics = train_node_classifier(data, backbone, max_epochs=epochs, seed=seed)
    return data, module, metrics


def sensitivity(module, data, scope: str, base_logits) -> tuple[Any, Any, float]:
    """Every feature's flip at one scope: (gender's FlipResult, ranking table, seconds)."""
    from gnnaudit.audit.interventions import resolve_features
    from gnnaudit.audit.sensitivity.flip import FlipOptions, sensitivity_results, sensitivity_table

    start = time.perf_counter()
    specs = resolve_features(data)
    results, total = sensitivity_results(
        module, data, specs, scope=scope, options=FlipOptions(base_logits=base_logits)
    )
    seconds = time.perf_counter() - start
    table = sensitivity_table(results)
    table.attrs["n_forward_total"] = total
    gender = next(r for r in results if r.feature == "gender")
    return gender, table, seconds


def contrast(module, data, base_logits) -> tuple[Any, float, float, float]:
    """Gender's evidence contrast: (shared result, node-inference p, search s, contrast s)."""
    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.audit.fairness.evidence_contrast import evidence_contrast

    start = time.perf_counter()
    ce = CounterfactualEvidence().fit(data, predictions=base_logits.argmax(1))
    local = ce.search_local(ce.node_ids_, K)
    search_s = time.perf_counter() - start
    start = time.perf_counter()
    shared = evidence_contrast(ce, data, "gender", k=K, local=local)
    contrast_s = time.perf_counter() - start
    node = evidence_contrast(ce, data, "gender", k=K, local=local, inference="node")
    return shared, node.p_value, search_s, contrast_s


def planted(args) -> Any:
    import pandas as pd

    from gnnaudit.audit.model_adapter import ModelAdapter

    rows = []
    for n in args.sizes:
        for bias in args.biases:
            for seed in args.seeds:
                for backbone in args.backbones:
                    data, module, metrics = trained(n, bias, seed, backbone, args.epochs)
                    base = ModelAdapter(module).logits(data.x, data.edge_index)
                    row: dict[str, Any] = {
                        "n": n,
                        "bias": bias,
                        "seed": seed,
                        "backbone": backbone,
                        "test_acc": metrics["test_acc"],
                    }
                    for scope in ("node", "graph"):
                        g, table, _ = sensitivity(module, data, scope, base)
                        row[f"flip_{scope}"] = g.rate
                        row[f"ci_{scope}"] = f"[{g.ci_low:.3f}, {g.ci_high:.3f}]"
                        row[f"rank_{scope}"] = int(
                            table.loc[table.feature == "gender", "rank"].iloc[0]
                        )
                        row[f"top_{scope}"] = table.iloc[0]["feature"]
                    c, p_node, _, _ = contrast(module, data, base)
                    row.update(
                        D=c.difference,
                        D_ci=f"[{c.ci_low:.3f}, {c.ci_high:.3f}]",
                        p=c.p_value,
                        p_node=p_node,
                    )
                    rows.append(row)
                    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
    return pd.DataFrame(rows)


def summary(frame) -> Any:
    import pandas as pd

    out = []
    for (bias, backbone), g in frame.groupby(["bias", "backbone"], sort=True):
        out.append(
            {
                "bias": bias,
                "backbone": backbone,
                "runs": len(g),
                "flip node": f"{g.flip_node.mean():.3f} ({g.flip_node.std():.3f})",
                "flip graph": f"{g.flip_graph.mean():.3f} ({g.flip_graph.std():.3f})",
                "gender 1st (node)": f"{int((g.rank_node == 1).sum())}/{len(g)}",
                "gender 1st (graph)": f"{int((g.rank_graph == 1).sum())}/{len(g)}",
                "contrast D": f"{g.D.mean():.3f} ({g.D.std():.3f})",
                "p<0.05 shared": f"{int((g.p < 0.05).sum())}/{len(g)}",
                "p<0.05 node": f"{int((g.p_node < 0.05).sum())}/{len(g)}",
            }
        )
    return pd.DataFrame(out)


def cost(n: int) -> Any:
    import pandas as pd

    from gnnaudit.audit.model_adapter import ModelAdapter
    from gnnaudit.audit.sensitivity.flip import counterfactual_flip

    data, module, _ = trained(n, 1.5, 0, "gcn", 20)
    adapter = ModelAdapter(module)
    start = time.perf_counter()
    base = adapter.logits(data.x, data.edge_index)
    forward_s = time.perf_counter() - start
    rows = [{"statistic": "one forward pass", "seconds": forward_s, "passes": 1, "batches": ""}]
    for scope in ("node", "graph"):
        start = time.perf_counter()
        r = counterfactual_flip(module, data, "gender", scope=scope, base_logits=base)
        rows.append(
            {
                "statistic": f"gender flip, {scope} scope ({r.n_nodes} nodes)",
                "seconds": time.perf_counter() - start,
                "passes": r.n_forward,
                "batches": "" if r.n_batches is None else r.n_batches,
            }
        )
    for scope in ("node", "graph"):
        _, table, seconds = sensitivity(module, data, scope, base)
        rows.append(
            {
                "statistic": f"feature ranking, {scope} scope (11 features)",
                "seconds": seconds,
                "passes": table.attrs["n_forward_total"],
                "batches": "",
            }
        )
    c, _, search_s, contrast_s = contrast(module, data, base)
    rows.append(
        {
            "statistic": "evidence search, k=10 (shared)",
            "seconds": search_s,
            "passes": 0,
            "batches": "",
        }
    )
    rows.append(
        {
            "statistic": f"evidence contrast on top ({c.n_nodes} nodes)",
            "seconds": contrast_s,
            "passes": 0,
            "batches": "",
        }
    )
    return pd.DataFrame(rows)


def calibration(sims: int) -> Any:
    import numpy as np
    import pandas as pd
    import torch
    from torch_geometric.data import Data

    from gnnaudit.audit import CounterfactualEvidence
    from gnnaudit.audit.fairness.evidence_contrast import evidence_contrast

    n = 100
    pvalues: dict[str, list[float]] = {"shared": [], "node": []}
    for seed in range(sims):
        rng = np.random.default_rng(10_000 + seed)
        src, dst = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
        keep = src != dst
        ei = np.concatenate([np.stack([src, dst])[:, keep], np.stack([dst, src])[:, keep]], 1)
        x = np.column_stack([rng.integers(0, 2, n), rng.normal(size=(n, 3))]).astype(np.float32)
        data = Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(ei).long(), num_nodes=n)
        pred = rng.integers(0, 2, n)
        ce = CounterfactualEvidence(num_hops=1).fit(data, predictions=pred)
        for mode in pvalues:
            res = evidence_contrast(ce, data, 0, k=5, n_perm=499, random_state=seed, inference=mode)
            pvalues[mode].append(res.p_value)
    rows = []
    for mode, ps in pvalues.items():
        arr = np.array(ps)
        rows.append(
            {
                "inference": mode,
                **{f"P(p<={a})": float(np.mean(arr <= a)) for a in (0.05, 0.1, 0.2, 0.5)},
            }
        )
    return pd.DataFrame(rows)


def write(out: Path, args, parts: dict[str, Any], header: RunHeader) -> None:
    lines = header.lines(
        "Counterfactual sensitivity and evidence contrast",
        "`OMP_NUM_THREADS=1`, `torch.set_num_threads(1)` (set by the script)",
    )
    if "planted" in parts:
        lines += [
            "## Planted bias",
            "",
            f"`synthetic_credit_graph(N, bias, seed)`, N = {', '.join(map(str, args.sizes))}, "
            f"seeds {', '.join(map(str, args.seeds))}; `train_node_classifier(backbone, "
            f"{args.epochs} epochs)`; test nodes. flip = gender flip rate (95% CI), rank = "
            "gender's rank among the 11 features by `feature_sensitivity` (top = rank-1 "
            f"feature), D = evidence contrast of gender (k = {K}), p = its p-value "
            "(`inference='shared'`), p_node = the plain sign-flip p-value.",
            "",
            "Summary (mean (std) over seeds):",
            "",
            fmt_table(parts["summary"]),
            "",
            "Every run:",
            "",
            fmt_table(parts["planted"]),
            "",
        ]
    if "cost" in parts:
        lines += [
            f"## Cost at {args.scale_nodes:,} nodes",
            "",
            "`synthetic_credit_graph(N, 1.5, seed=0)`, GCN (3 layers, 20 epochs), test nodes "
            "(node scope: a seeded sample of `max_nodes = 2000`); seconds of wall time.",
            "",
            fmt_table(parts["cost"]),
            "",
        ]
    if "calibration" in parts:
        lines += [
            "## Calibration of the evidence-contrast p-value under a null",
            "",
            f"{args.calibration_sims} random graphs of 100 nodes (3n random undirected edges, "
            "features: a binary column and 3 normal ones), predictions drawn independently of "
            "everything, contrast of the binary column (k = 5, 499 draws). A valid one-sided "
            "test has P(p <= a) <= a.",
            "",
            fmt_table(parts["calibration"]),
            "",
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--backbones", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--biases", type=float, nargs="+", default=[0.0, 1.5, 3.0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--scale-nodes", type=int, default=100_000, help="0 skips the cost part")
    parser.add_argument("--calibration-sims", type=int, default=200, help="0 skips it")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    set_threads()
    import pandas as pd

    pd.set_option("display.width", 200)
    header = RunHeader("bench_sensitivity.py")
    parts: dict[str, Any] = {}
    if args.sizes and args.seeds:
        parts["planted"] = planted(args)
        parts["summary"] = summary(parts["planted"])
        print(parts["summary"].to_string(index=False))
    if args.scale_nodes:
        parts["cost"] = cost(args.scale_nodes)
        print(parts["cost"].to_string(index=False))
    if args.calibration_sims:
        parts["calibration"] = calibration(args.calibration_sims)
        print(parts["calibration"].to_string(index=False))
    write(args.out, args, parts, header)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
