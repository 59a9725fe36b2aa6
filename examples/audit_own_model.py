"""Audit your own model on your own graph: a plain PyTorch GCN, a CSV graph, a state dict.

    python examples/audit_own_model.py [--out out/own_model] [--nodes 1000] [--bias 3.0]

1. Writes a graph as a user would have it: ``nodes.csv`` (id, features, label, gender, split
   columns) and ``edges.csv`` (source, target ids).
2. Reads it back with :func:`gnnaudit.datasets.load_graph`, trains the plain GCN of
   ``examples/own_gcn.py`` with a plain PyTorch loop (no gnnaudit) and saves its state dict.
3. Audits it twice, with the same seed: through the command line
   (``gnnaudit audit --graph ... --model examples/own_gcn.py:GCN --weights ...``) and through
   :func:`gnnaudit.audit_model`, and checks that both give the same findings.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from own_gcn import GCN, train  # noqa: E402  (the user's own code, next to this file)

import gnnaudit  # noqa: E402
from gnnaudit.audit import AuditReport  # noqa: E402
from gnnaudit.datasets import load_graph, save_graph, synthetic_credit_graph  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/own_model", help="working folder")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--bias", type=float, default=3.0, help="planted gender bias")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. the user's graph, as CSV files
    source = synthetic_credit_graph(num_nodes=args.nodes, bias=args.bias, seed=args.seed)
    graph_dir = out / "graph"
    save_graph(source, graph_dir, force=True)
    print(f"graph written to {graph_dir}/nodes.csv and edges.csv")

    # 2. the user's model, trained outside gnnaudit
    data = load_graph(graph_dir, sensitive="gender")
    model = train(GCN(data.num_features, int(data.y.max()) + 1), data, seed=args.seed)
    weights = out / "gcn_state_dict.pt"
    torch.save(model.state_dict(), weights)
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    accuracy = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    print(f"own GCN: test accuracy {accuracy:.3f}; state dict {weights}")

    # 3a. the command line
    cli_out = out / "report_cli"
    command = [
        sys.executable,
        "-m",
        "gnnaudit",
        "audit",
        "--graph",
        str(graph_dir),
        "--model",
        f"{HERE / 'own_gcn.py'}:GCN",
        "--weights",
        str(weights),
        "--sensitive",
        "gender",
        "--seed",
        str(args.seed),
        "--no-progress",
        "--force",
        "--out",
        str(cli_out),
    ]
    print("\n$ gnnaudit " + " ".join(command[3:]))
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(HERE.parent)})

    # 3b. one call in Python
    report = gnnaudit.audit_model(
        model, data, sensitive="gender", random_state=args.seed, out=out / "report_api", force=True
    )
    via_cli = AuditReport.from_json(cli_out)
    same = via_cli.findings.equals(report.findings)
    print(f"\nPython API: {report.verdict}")
    print(
        f"test accuracy in the report {report.model['test_accuracy']:.3f} (computed: {accuracy:.3f})"
    )
    print(f"CLI and audit_model findings identical: {same}")


if __name__ == "__main__":
    main()
