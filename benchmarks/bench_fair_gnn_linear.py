"""What FairGNN's bail lead is made of, and what the trainer says of a short run (issue 36).

Three checks on NIFTY's graphs and split (``bench_fair_gnn.load``), printed as tables and
written to ``benchmarks/results/fair_gnn_linear.md``:

* **the labels' own gap**: ΔSP of the test labels themselves, |P(y=1 | s=0) - P(y=1 | s=1)|,
  what a model that decides exactly as the labels do would show;
* **a linear model fit to convergence**: scikit-learn's ``LogisticRegression`` (inputs
  standardised on the non-test nodes, trained on the training nodes) on bail's raw features
  ``X`` and on the once-propagated ones ``ÂX`` (GCN normalisation with self loops), the
  function class of PyGDebias FairGNN's classifier (one ``GCNConv``, then a linear layer): test
  AUROC for each ``C``;
* ``--late-rise-seeds S ...`` (long: about 15 min a seed here): the one-layer GCN on raw
  features trained by ``train_node_classifier`` with NIFTY's lr 1e-3 for 2000 epochs, as
  ``bench_fair_gnn.py --features raw --layers 1`` trains it: ``metrics["late_rise"]``, the best
  epoch, test AUROC and whether the trainer warned that the model was still improving.

Usage::

    python benchmarks/bench_fair_gnn_linear.py
    python benchmarks/bench_fair_gnn_linear.py --late-rise-seeds 0 1 --jobs 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from bench_evidence import md_table
from bench_fair_gnn import SHARED_DATA, VANILLA, load, stage_data
from bench_fair_heldout import group_gap
from provenance import commit, commit_line
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from torch_geometric.nn.conv.gcn_conv import gcn_norm

HERE = Path(__file__).resolve().parent
C_GRID = (1.0, 10.0, 100.0, 1000.0)


def label_gaps(datasets: list[str], scratch: Path) -> pd.DataFrame:
    """Per graph: the test labels' class-1 share in each group and their ΔSP."""
    rows = []
    for name in datasets:
        data = load(name, stage_data(name, SHARED_DATA, scratch))
        mask = data.test_mask.numpy()
        y, s = data.y.numpy()[mask], data.sensitive.numpy()[mask]
        rows.append(
            {
                "graph": name,
                "test nodes": int(mask.sum()),
                "class-1 share, s=0": float(y[s == 0].mean()),
                "class-1 share, s=1": float(y[s == 1].mean()),
                "labels' ΔSP": group_gap(y, s),
            }
        )
    return pd.DataFrame(rows)


def propagated(data) -> np.ndarray:
    """``ÂX``: GCN's symmetric normalisation with self loops, applied once (sparse)."""
    edge_index, weight = gcn_norm(data.edge_index, None, data.num_nodes, add_self_loops=True)
    adj = torch.sparse_coo_tensor(edge_index, weight, (data.num_nodes, data.num_nodes))
    return torch.sparse.mm(adj, data.x).numpy()


def linear_fits(scratch: Path) -> pd.DataFrame:
    """Bail, raw features: test AUROC of logistic regression on X and on ÂX for each C."""
    data = load("bail", stage_data("bail", SHARED_DATA, scratch), "raw")
    y = data.y.numpy()
    train, test = data.train_mask.numpy(), data.test_mask.numpy()
    rows = []
    for inputs, z in (("X", data.x.numpy()), ("ÂX", propagated(data))):
        z = (z - z[~test].mean(0)) / (z[~test].std(0) + 1e-12)
        for c in C_GRID:
            fit = LogisticRegression(C=c, max_iter=20_000).fit(z[train], y[train])
            auroc = roc_auc_score(y[test], fit.predict_proba(z[test])[:, 1])
            rows.append({"inputs": inputs, "C": c, "test AUROC": float(auroc)})
    return pd.DataFrame(rows)


def late_rise_run(seed: int, scratch: str) -> dict[str, object]:
    """One run of the one-layer GCN at NIFTY's lr for 2000 epochs (module docstring)."""
    from gnnaudit.training import train_node_classifier

    torch.set_num_threads(1)
    data = load("bail", Path(scratch), "raw")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, m = train_node_classifier(
            data, "gcn", 2000, seed, num_layers=1, trainer_kwargs={"accelerator": "cpu"}, **VANILLA
        )
    return {
        "seed": seed,
        "late_rise": m["late_rise"],
        "best_epoch": m["best_epoch"],
        "epochs_run": m["epochs_run"],
        "test_auroc": m.get("test_auroc"),
        "warned": any("still improving" in str(w.message) for w in caught),
        "fit_s": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["credit", "bail"])
    ap.add_argument("--late-rise-seeds", type=int, nargs="*", default=[])
    ap.add_argument("--jobs", type=int, default=1, help="late-rise runs in parallel")
    ap.add_argument("--scratch", type=Path, default=HERE / "_data")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "fair_gnn_linear.md")
    args = ap.parse_args(argv)
    started, code = dt.datetime.now(dt.timezone.utc), commit()
    scratch = args.scratch.resolve()
    sections = [
        ("The labels' own gap (NIFTY's split, test nodes)", label_gaps(args.datasets, scratch)),
        ("Logistic regression on bail's raw features", linear_fits(scratch)),
    ]
    if args.late_rise_seeds:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(late_rise_run, args.late_rise_seeds, repeat(str(scratch))))
        sections.append(("One-layer GCN, raw features, lr 1e-3, 2000 epochs", pd.DataFrame(runs)))
    text = [
        "# What FairGNN's bail lead is made of (`bench_fair_gnn_linear.py`)",
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.platform()}, {platform.processor() or 'cpu'}, 2 cores",
        "- command: `python "
        + " ".join(["benchmarks/bench_fair_gnn_linear.py", *sys.argv[1:]])
        + "`",
        commit_line(code),
        "",
    ]
    for title, table in sections:
        print(f"\n{title}\n{table.to_string(index=False)}")
        text += [f"## {title}", "", md_table(table.round(4), index=False), ""]
    args.out.write_text("\n".join(text))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
