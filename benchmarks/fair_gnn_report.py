"""Tables and Pareto plots of ``bench_fair_gnn.py`` records (mean ± sd over seeds), with the
goal of issue 36 computed from the records."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from provenance import commit

from gnnaudit.training.fair_selection import DEFAULT_MAX_AUROC_DROP
from gnnaudit.training.selection_warnings import warn_if_decisions_worse

METRICS = ("auroc", "f1", "dsp", "deo", "cf", "instability", "fit_s")
ORDER = {
    "vanilla": 0,
    "fairfinetune": 1,
    "nifty": 2,
    "fairgnn": 3,
    "vanilla_raw": 4,
    "fairfinetune_raw": 5,
    "fairgnn_port": 6,
}
#: how each method is labelled in the tables (the records keep the short names)
LABELS = {
    "vanilla": "vanilla (gnnaudit)",
    "fairfinetune": "fairfinetune (default remedy)",
    "nifty": "nifty (NIFTY repo)",
    "fairgnn": "fairgnn (PyGDebias 1.1.1)",
    "fairgnn_port": "fairgnn_port (NIFTY repo's port, extra row)",
    "vanilla_raw": "vanilla (gnnaudit) on raw features, as PyGDebias loads them (extra row)",
    "fairfinetune_raw": "fairfinetune (default remedy) on raw features (extra row)",
}
#: the goal's peers: FairFinetune must be within 1 AUROC point of the best of them and at or
#: below both on ΔSP, ΔEO and CF
PEERS = ("nifty", "fairgnn")
GOAL_SEEDS = 5
AUROC_SLACK = 0.01

#: figures the reference repository publishes (NIFTY README, German, seed 1, one run); the
#: credit / bail tables of the papers were not available to this benchmark's author, so none
#: are shown for them rather than figures from memory.
PUBLISHED = [
    ("german", "vanilla (NIFTY README, GCN)", 0.7605, 0.8078, 0.3952, 0.2731, 0.2960, 0.1160),
    ("german", "nifty (NIFTY README, NIFTY-GCN)", 0.7205, 0.8235, 0.0104, 0.0199, 0.0, 0.0),
    ("german", "fairgnn (NIFTY README, FairGCN)", 0.7549, 0.8251, 0.2763, 0.1723, None, 0.0440),
]

NOTES = """\
## Notes

- **Rows.** `fairfinetune` is FairFinetune's own default remedy:
  `FairFinetune.finetune(model, data, <sensitive column>, random_state=seed,
  trainer_kwargs={"accelerator": "cpu"})` on the vanilla GCN / GIN / SAGE of the same seed; it
  picks its candidate on the validation nodes itself (targets cf, dsp, deo; input blinding
  first; AUROC budget 0.02 as a one-sided 95% bound on the drop; weights 0, 20, 300; since
  2026-12-06 each candidate decided at the threshold that keeps the vanilla model's share of
  class-1 decisions, `keep_rate=True`; since 2026-12-07 each run's weights after steps 1, 2,
  4, 8 are candidates beside every 10th step, `early_snapshots=True`). Each
  record keeps the chosen candidate (`chosen`) and its
  selection table. Its fit s is the whole `finetune` call; `pre-train s` is the vanilla
  model's. `fairgnn` is the FairGNN users install: PyGDebias 1.1.1 (`pygdebias` on the package
  registry), run unmodified with its defaults (2000 epochs, its loaders' raw features, the
  attribute known on the training nodes; shims `dgl` and `gdown`,
  `benchmarks/fair_gnn_pygdebias.py`), measured on the weights of the epoch it selects.
  `fairgnn_port` is **the port** of FairGNN in NIFTY's repository (`baseline_fairGNN.py`),
  kept as an extra row; it is not the goal's FairGNN.
- **Protocol.** NIFTY's split (seed 20) for every method, checked against each reference run;
  the same edges; every model measured by the same function
  (`gnnaudit.audit.fairness.literature_metrics.literature_metrics`) on the test nodes.
- **Instability** adds N(0, 1) noise to the inputs as each model gets them: PyGDebias's raw
  features have large scales, so its instability is not comparable with the scaled rows'.
- **Earlier records.** The `nifty` and `fairgnn_port` records of seeds 0-1 (credit `nifty`:
  0-2) come from the run of 2026-11-27 (same scripts, split and metric function); the
  `fairgnn_port` seeds 2-4 were run on 2026-11-29. Its
  `vanilla` and `fairfinetune` records were dropped: the trainer now keeps the epoch of the
  best validation AUROC, and `fairfinetune` is now FairFinetune's own default remedy instead
  of the benchmark's grid. The GCN `vanilla` / `fairfinetune` records of seeds 0-4 were run
  again on 2026-11-29 (commit 27e5429: the AUROC budget as a 95% bound, the weight 0 added to
  the grid, from issue 36's held-out check): the same chosen candidates and figures as before
  on all 10 runs (thousands of validation nodes: a paired AUROC error below 0.005), fit s
  longer by the extra run.
- **GIN and SAGE** rows (vanilla and the default remedy) were run on 2026-11-29 after the
  trainer's collapse guard (commit 49228e4: an epoch whose validation decisions are more than
  95% one class ranks after the others; the cached GCNs' kept epochs are not affected), 5
  seeds each on both graphs.
- **Extra rows of 2026-11-29** (commit 80e66ed's library: the decision warning and
  `max_bacc_drop`). `fairfinetune variant {"max_bacc_drop":0.02}`: the default remedy with the
  opt-in bound on lost validation balanced accuracy (`--ff-options`), on the same cached GCNs.
  `vanilla_raw` / `fairfinetune_raw` (`--features raw`): the GCN trained and fine-tuned on
  bail's raw features, the inputs PyGDebias's loaders give FairGNN, instead of NIFTY's scaling;
  on raw features the vanilla GCN alone reaches 92.5 AUROC (89.7 scaled), part of FairGNN's
  lead on bail. `fairfinetune_raw variant` adds the bound. None of them is the goal's row.
- **Re-run of 2026-12-05** (library of commit d6c0d06: the selection measures ΔSP and CF on
  every node outside the test mask, ΔEO and AUROC on the validation nodes): every `vanilla`,
  `fairfinetune`, variant and raw-feature record of GCN, GIN and SAGE on both graphs, 5 seeds
  each. The vanilla models were retrained on this machine (AMD EPYC; the earlier records ran
  on an Intel Xeon) with the same seeds and trainer: AUROC within 0.001, CF within 3 points.
  The `nifty`, `fairgnn` and `fairgnn_port` records are those described above.
- **keep_rate, 2026-12-06** (commit cb3f23f's library: `FairFinetune.finetune(...,
  keep_rate=True)` by default, each fine-tuned candidate decided at the offset of its class-1
  margin that keeps the vanilla model's share of class-1 decisions on the nodes outside the test
  set, folded into its output bias; AUROC unchanged by it). The `fairfinetune` and
  `fairfinetune_raw` records are that default, run on 2026-12-06 on GCNs retrained with the
  same seeds and trainer (same vanilla AUROC within 0.001). The records of the re-run of
  2026-12-05 decided by argmax, which is what `keep_rate=False` computes today (the same
  candidates, the same rule): they are kept, relabelled `fairfinetune:{"keep_rate":false}`
  (and `...,"max_bacc_drop":0.02}` for the bounded variant), each with a `note`. SAGE with
  `keep_rate` has all 5 seeds on both graphs (credit seeds 0-2 and bail seed 0 run on
  2026-12-06, the rest on 2026-12-06/07 with the same library, note `run 2026-12-06/07`; the
  vanilla SAGE models retrained for them gave the same metrics to 1e-9). GIN with `keep_rate`
  (same note): 5 seeds on both graphs (bail seed 4 run on 2026-12-07 with the same library; its
  vanilla GIN decides every node negative, and the remedy keeps it as given). The
  `keep_rate=false` rows of both have all 5 seeds.
- **Early snapshots, 2026-12-07** (`FairFinetune.finetune(..., early_snapshots=True)` by
  default: each run's weights after steps 1, 2, 4, 8 are candidates too, beside every 10th
  step). The `fairfinetune` and `fairfinetune_raw` records of every earlier run, and the
  `keep_rate=false` variants, were selected without them, which `early_snapshots=False`
  reproduces (a snapshot is a copy: the runs do not depend on it); they are kept, relabelled
  `fairfinetune:{"early_snapshots":false,...}`, each with a `note`. The default rows
  (`fairfinetune`, note `run 2026-12-07`) were re-run with the same seeds on vanilla models
  retrained (GCN) or cached (SAGE, GIN) with the same trainer: identical vanilla metrics to
  1e-9. Every default row has been re-run: GIN bail and the raw-feature GCN rows
  (`fairfinetune_raw`, vanilla GCNs retrained on raw features: identical metrics) last, on
  2026-12-07 with the library of commits b56605d to e30a764 (those changed imports only, not
  the remedy); GIN: the same picks in 5 of 5 runs; raw: 2 of 5 picks changed to early candidates).
- **64 hidden units, 2026-12-07** (`--features raw --hidden 64 --epochs 2000`, records
  `vanilla_raw_h64` / `fairfinetune_raw_h64`, one seed): the GCN with PyGDebias FairGNN's body
  size and epochs on its inputs, to ask whether FairGNN's bail AUROC is its model's capacity. Its
  vanilla model was trained by the same `train_node_classifier` call in a one-off run beside
  other jobs (its fit time) and read from the cache by the benchmark.
- **FairGNN's function class, 2026-12-07** (`--features raw --layers 1 --epochs 2000`, records
  `..._raw_l1`, 2 seeds, and with `--lr 0.01`, records `..._raw_l1_lr0.01`, 5 seeds; library
  of commit 4b5a95b): PyGDebias FairGNN's classifier is one `GCNConv` (64 units) followed by a
  linear layer with no activation between (`pygdebias/debiasing/FairGNN.py`), a linear map of
  the once-propagated features; `--layers 1` is the same function class in gnnaudit's
  `NodeClassifier` (one `GCNConv`, no hidden layer). Trained with NIFTY's lr 1e-3 it stops
  short (best epoch the last of 2000; the trainer now warns, `metrics["late_rise"]`,
  measured by `bench_fair_gnn_linear.py --late-rise-seeds 0 1`); at lr
  1e-2 it is FairGNN's bail model without the adversary, and the default remedy runs on it
  (and, as `fairfinetune_raw_l1_lr0.01:{"keep_rate":false}`, the same remedy decided by argmax:
  every column of the goal met, with decisions collapsed, F1 59, a decision warning in 5 of 5
  runs). Neither is the protocol's model: the goal's row stays the default remedy on the
  protocol's GCN.
- **The labels' own gap.** On NIFTY's split the test labels of both graphs differ between the
  groups by 5.37 points (credit: 78.4% of class 1 where the attribute is 0, 73.0% where it is 1;
  bail: 40.4% and 35.0%): a model that decides exactly as the labels has ΔSP 5.37 (and ΔEO 0).
  A ΔSP below that is bought by deciding against the labels, which a weaker model does by its
  errors (NIFTY on bail: ΔSP 2.7 at F1 68.9) and a remedy by moving decisions across the groups
  (`keep_rate=False` on bail: ΔSP 1.5 at F1 68.4). Computed by `bench_fair_gnn_linear.py`
  (`results/fair_gnn_linear.md`), with logistic regression on bail's propagated raw features
  (test AUROC 95.7 at C = 1000).
- **Compacted tables, 2026-12-07.** The selection tables of the superseded records (methods
  with `"early_snapshots":false`) keep the two rows this report reads, the model as given and
  the chosen candidate (key `selection_kept`); their full tables are in `fair_gnn.json` at
  commit 4b5a95b (tracked files stay under 2 MB).
- **Anchored covariance terms, 2026-12-07** (`FairFinetune(..., parity="auto")`: for a
  two-class model the covariance terms correlate the attribute with soft decisions at the
  threshold that keeps the model's share of class 1, not with the softmax probabilities;
  `gnnaudit.training.parity_surrogate`). It was the default between commits 8ae7856 and
  41395ff; its runs, GCN on both graphs and the one-layer raw-feature GCN, 5 seeds each, are
  the `...:{"parity":"auto"}` rows, which `--ff-options '{"parity":"auto"}'` reproduces. It
  did better on credit and on the raw-feature model and worse on bail's protocol GCN, so the
  default stays FairGNN's softmax form. The same commits compute a candidate's validation
  AUROC on its class-1 log-odds (float32 probabilities tie every margin above about 17). The
  GCN default rows `fairfinetune` were re-run with it on the cached vanilla models: the same
  pick and metrics in 10 of 10 runs. The one-layer raw-feature row
  `fairfinetune_raw_l1_lr0.01`, whose margins are large, was re-run too and changed (its
  earlier records: AUROC 96.20, F1 91.1, ΔSP 6.56, ΔEO 3.67; commit 0053b66). The GIN and SAGE
  rows (vanilla and the default remedy, both graphs, 5 seeds) were re-run with it at commit
  e02425a, whose trainer also takes its validation AUROC from mid-ranks instead of
  scikit-learn's `roc_auc_score` (equal values): the same vanilla models, picks and metrics in
  40 of 40 records. The raw-feature row `fairfinetune_raw` was re-run with it on 2026-12-08
  (commit 5e62866, vanilla GCNs retrained on raw features with the same seeds: identical
  metrics): the same picks and metrics in 5 of 5 runs. The GCN variants
  `{"early_snapshots":false}`, `{"early_snapshots":false,"keep_rate":false}` and
  `{"early_snapshots":false,"keep_rate":false,"max_bacc_drop":0.02}` (credit and bail, 5 seeds
  each) were re-run with it on 2026-12-08 (commit 5db1c8a): the same picks in 30 of 30 runs and
  the same decisions (F1, ΔSP, ΔEO and CF equal, test AUROC within 2e-5) in 29; in the 30th
  (credit seed 4, `{"early_snapshots":false}`, the last step of the weight-20 run) AUROC 69.67
  -> 69.75, F1 76.43 -> 76.30, ΔSP 0.46 -> 0.42, ΔEO 1.44 -> 0.08 (the record's note); their
  records replace the earlier ones, with their full selection tables. The raw-feature
  variants `fairfinetune_raw:{...}` (bail, 5 seeds each) were re-run with it on 2026-12-08
  (commit c71f182, the cached vanilla GCNs: identical metrics): the same picks and metrics in
  14 of 15 runs; in the 15th (seed 3, `{"early_snapshots":false}`) it picks another candidate
  (the weight-20 run's step 70 for the weight-300 run's step 20): AUROC 96.03 -> 93.98, F1
  89.16 -> 88.02, ΔSP 6.63 -> 5.07, ΔEO 3.30 -> 3.40. The GIN and SAGE variants
  `{"early_snapshots":false}` and `{"early_snapshots":false,"keep_rate":false}` (credit and
  bail, 5 seeds each) were re-run with it the same day (commit c71f182; every vanilla GIN and
  SAGE retrained with the same seeds gave identical metrics): the same picks in 38 of 40 runs
  and the same decisions in 34 (`python benchmarks/fair_gnn_rerun_diff.py c71f182` lists every
  re-run row against its records of that commit). Credit GIN `{"early_snapshots":false}` picks another step of
  the weight-20 run in seeds 2 and 3 (its means: AUROC 62.08 -> 62.33, ΔSP 1.23 -> 1.13, ΔEO
  0.79 -> 0.86); in 4 runs (bail SAGE seeds 0-2, credit SAGE seed 1) the same candidate decides
  a few nodes differently (ΔSP and ΔEO within 0.15 points). Their fit times were measured beside
  a second queue (a note in each record). `parity="auto"` got GIN and SAGE rows on credit and
  a SAGE row on bail (5 seeds each, first runs); GIN on bail was not run. The `_raw_l1` (lr
  1e-3) and `_raw_h64` rows were selected before the fix and were not re-run (a note in each
  record).
- **Fit times** are wall seconds on 2 CPU cores shared with other jobs (one thread per run,
  `nice`): indicative only. The bail `nifty` seeds 2-4 and `fairgnn` seeds 3-4 ran two at a
  time beside other benchmarks (about 50 min each).
"""


def method_label(method: str) -> str:
    if ":" in method:
        base, variant = method.split(":", 1)
        return f"{base} variant `{variant}`"
    base, setting = split_setting(method)
    label = LABELS.get(base, base)
    if not setting:
        return label
    parts = []
    if "h" in setting:
        parts.append(f"{setting['h']} hidden units")
    if "l" in setting:
        n = setting["l"]
        parts.append(
            "one GCN layer, linear (FairGNN's classifier)"
            if n == 1
            else f"{n} message-passing layers"
        )
    if "lr" in setting:
        parts.append(f"Adam lr {setting['lr']:g}")
    return f"{label.removesuffix(' (extra row)')}, {', '.join(parts)} (extra row)"


def split_setting(method: str) -> tuple[str, dict[str, float]]:
    """``vanilla_raw_h64_l1_lr0.01`` -> (``vanilla_raw``, {"h": 64, "l": 1, "lr": 0.01}): the
    record of a ``--hidden`` / ``--layers`` / ``--lr`` other than the protocol's
    (``bench_fair_gnn.setting_suffix``); (method, {}) for the protocol's model."""
    setting: dict[str, float] = {}
    base = method
    while (m := _SETTING.search(base)) is not None:
        value = float(m.group(2))
        setting[m.group(1)] = int(value) if value.is_integer() and m.group(1) != "lr" else value
        base = base[: m.start()]
    return base, setting


#: one trailing setting of a record name: ``_h64``, ``_l1``, ``_lr0.01``, ``_lr1e-05``
_SETTING = re.compile(r"_(lr|h|l)(\d+(?:\.\d+)?(?:e[-+]?\d+)?)$")


def _seeds(values: Any) -> str:
    """``0-4`` / ``0,2,3``: the seeds of a row."""
    s = sorted({int(v) for v in values})
    if s and s == list(range(s[0], s[-1] + 1)) and len(s) > 2:
        return f"{s[0]}-{s[-1]}"
    return ",".join(map(str, s))


def summary(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per dataset / method / backbone: runs, seeds and mean ± sd of every metric."""
    df = pd.DataFrame(records)
    rows = []
    for (d, m, b), g in df.groupby(["dataset", "method", "backbone"], sort=False):
        row: dict[str, Any] = {
            "dataset": d,
            "method": m,
            "backbone": b,
            "runs": len(g),
            "seeds": _seeds(g["seed"]),
        }
        for k in (*METRICS, "pretrain_s"):
            v = g[k].to_numpy(dtype=float) if k in g else np.full(len(g), np.nan)
            row[k] = np.nanmean(v) if np.isfinite(v).any() else float("nan")
            row[k + "_sd"] = np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else float("nan")
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_o"] = out["method"].map(
        lambda m: ORDER.get(split_setting(m.split(":")[0])[0], len(ORDER))
    )
    return out.sort_values(["dataset", "_o", "backbone", "method"]).drop(columns="_o")


def _cell(mean: float, sd: float, pct: bool) -> str:
    if np.isnan(mean):
        return ""
    f = 100.0 if pct else 1.0
    fmt = "{:.2f}" if pct else "{:.0f}"
    if np.isnan(sd):
        return fmt.format(mean * f)
    return f"{fmt.format(mean * f)} ± {fmt.format(sd * f)}"


def markdown_table(table: pd.DataFrame) -> str:
    head = (
        "| dataset | method | backbone | runs | seeds | AUROC | F1 | ΔSP | ΔEO | CF | instab. "
        "| fit s | pre-train s |"
    )
    lines = [head, "|" + "---|" * 13]
    for _, r in table.iterrows():
        cells = [_cell(r[k], r[k + "_sd"], k != "fit_s") for k in METRICS]
        cells.append(_cell(r["pretrain_s"], r["pretrain_s_sd"], False))
        lines.append(
            f"| {r['dataset']} | {method_label(r['method'])} | {r['backbone']} | {r['runs']} | "
            f"{r['seeds']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def selection_frame(table: dict[str, Any] | list[dict[str, Any]]) -> pd.DataFrame:
    """A record's ``selection`` table as a DataFrame: ``{"columns": [...], "data": [...]}``
    (pandas' "split" orientation, what ``bench_fair_gnn.py`` writes) or a list of row dicts
    (the records written before 2026-12-08)."""
    if isinstance(table, dict):
        return pd.DataFrame(table["data"], columns=table["columns"])
    return pd.DataFrame(table)


def chosen_table(records: list[dict[str, Any]]) -> str:
    """Per graph, FairFinetune row and backbone: the chosen candidates, the validation balanced
    accuracies (vanilla -> chosen), the validation ΔSP (vanilla -> chosen, and the lowest of any
    candidate within the AUROC budget: how far a selection rule could go with these candidates)
    and the runs where ``finetune``'s decision warning fires
    (:func:`~gnnaudit.training.selection_warnings.warn_if_decisions_worse` on the record's table,
    with the row's ``max_bacc_drop`` if it set one)."""
    df = pd.DataFrame(records)
    if "chosen" not in df:
        return "(no FairFinetune record yet)"
    df = df[df["method"].str.startswith("fairfinetune")]
    if df.empty:
        return "(no FairFinetune record yet)"
    lines = [
        "| dataset | row | backbone | chosen candidate (seed) | validation balanced accuracy, "
        "vanilla -> chosen (seed) | validation ΔSP, vanilla -> chosen / lowest within the "
        "AUROC budget (seed) | decision warnings |",
        "|---|---|---|---|---|---|---|",
    ]
    for (d, m, b), g in df.groupby(["dataset", "method", "backbone"], sort=True):
        picks = ", ".join(f"{c} ({s})" for c, s in zip(g["chosen"], g["seed"], strict=True))
        tables = [selection_frame(t) for t in g["selection"]]
        bacc = ", ".join(
            f"{t['val_bacc'].iloc[0]:.3f} -> {t.loc[t['chosen'], 'val_bacc'].iloc[0]:.3f} ({s})"
            for t, s in zip(tables, g["seed"], strict=True)
        )
        dsp = ", ".join(
            f"{t['val_dsp'].iloc[0]:.3f} -> {t.loc[t['chosen'], 'val_dsp'].iloc[0]:.3f} / "
            f"{t.loc[t['within_budget'], 'val_dsp'].min():.3f} ({s})"
            for t, s in zip(tables, g["seed"], strict=True)
        )
        warned = _warned_runs(g)
        lines.append(
            f"| {d} | {method_label(m)} | {b} | {picks} | {bacc} | {dsp} | {warned} of {len(g)} |"
        )
    return "\n".join(lines)


def _decision_warning(table: pd.DataFrame, max_bacc_drop: float | None) -> bool:
    """Whether ``finetune``'s decision warning fires on one record's selection table."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        drop = warn_if_decisions_worse(table, DEFAULT_MAX_AUROC_DROP, max_bacc_drop=max_bacc_drop)
    return drop is not None


def write_markdown(records: list[dict[str, Any]], path: Path, command: str) -> None:
    """``path``: machine, date, command, the summary table (metrics in %), the goal, the chosen
    candidates, published figures and notes."""
    pub = ["| dataset | source | AUROC | F1 | ΔSP | ΔEO | CF | instab. |", "|" + "---|" * 8]
    for d, src, *vals in PUBLISHED:
        pub.append(
            f"| {d} | {src} | "
            + " | ".join("n/a" if v is None else f"{100 * v:.2f}" for v in vals)
            + " |"
        )
    text = [
        "# Fair GNNs side by side on NIFTY's graphs (`bench_fair_gnn.py`)",
        "",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.platform()}, {platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} cores (shared with other jobs: fit times are indicative)",
        f"- command: `{command}`",
        f"- commit: `{commit()}` (where this report was written; the records come from "
        "resumed runs over several sessions, each in the history of fair_gnn.json)",
        f"- records: {len(records)}",
        "",
        "Metrics in % of the test nodes (mean ± sd over the seeds listed; one value when one "
        "run); fit s = seconds of training (fairfinetune: the `finetune` call, its own "
        "validation selection included; pre-train s: its vanilla model).",
        "",
        markdown_table(summary(records)) if records else "(no records)",
        "",
        "## Goal (issue 36), computed from the records",
        "",
        goal_text(records),
        "",
        "## FairFinetune's chosen candidates",
        "",
        "Decision warnings: runs where the chosen candidate's validation balanced accuracy is "
        f"more than max_auroc_drop ({DEFAULT_MAX_AUROC_DROP:g}) below the vanilla model's, the "
        "case in which `FairFinetune.finetune` now warns that the remedy ranks as well but "
        "decides worse (its decision threshold moved).",
        "",
        chosen_table(records) if records else "(no records)",
        "",
        "## Published figures",
        "",
        "\n".join(pub),
        "",
        NOTES,
    ]
    path.write_text("\n".join(text))


def _verdict(ours: float, target: float, lower_is_better: bool) -> tuple[bool, str]:
    ok = ours <= target if lower_is_better else ours >= target
    sign = "≤" if lower_is_better else "≥"
    word = "met" if ok else "**not met**"
    return ok, f"{word} ({100 * ours:.2f} {sign} {100 * target:.2f})"


def goal_text(records: list[dict[str, Any]]) -> str:
    """Per graph: FairFinetune (GCN) against the goal of issue 36, from whatever seeds exist.

    AUROC at least the best peer's (NIFTY, PyGDebias FairGNN) minus 1 point; ΔSP, ΔEO and CF at
    or below the lower of the two; means over the seeds each row has (the goal asks for 5).
    The default remedy's row is the goal's; variants and the raw-feature row follow, marked
    extra. F1 is shown beside (not part of the goal)."""
    head = [
        "Goal: on credit and bail, FairFinetune (GCN, default remedy) has AUROC within 1 point of "
        "the best peer and ΔSP, ΔEO and CF at or below both NIFTY and PyGDebias FairGNN "
        f"(means over {GOAL_SEEDS} seeds). Computed here with the seeds each row has; a row with "
        f"fewer than {GOAL_SEEDS} is provisional. Rows marked *extra* (a variant of the remedy, "
        "or the remedy on another model) are measured against the same peers for comparison; "
        "the goal is the default remedy's row. F1 (FairFinetune's / the best-AUROC peer's) is "
        "not part of the goal: it shows what the decisions cost. The goal column names the runs "
        "in which `finetune`'s decision warning fires (validation balanced accuracy more than "
        "0.02 below the model's): a row can meet every column by deciding nearly every node "
        "the same way, and such a row is no fairer model.",
        "",
        "| graph | row | seeds (row / nifty / fairgnn) | AUROC ≥ best peer − 1 pt | ΔSP ≤ both "
        "| ΔEO ≤ both | CF ≤ both | F1 | goal |",
        "|" + "---|" * 9,
    ]
    if not records:
        return "\n".join([*head, "| (no records) | | | | | | | | |"])
    df = pd.DataFrame(records)
    df = df[df["backbone"] == "gcn"]
    rows = sorted(
        {m for m in df["method"] if m.startswith("fairfinetune")},
        key=lambda m: (m != "fairfinetune", m),
    )
    lines = list(head)
    for d in sorted(df["dataset"].unique()):
        g = df[df["dataset"] == d]
        for row in rows:
            if (g["method"] == row).any():
                lines.append(_goal_line(d, row, g))
    return "\n".join(lines)


def _goal_line(dataset: str, row: str, g: pd.DataFrame) -> str:
    """One line of :func:`goal_text`: FairFinetune's ``row`` on ``dataset`` (records ``g``)."""
    label = "default remedy" if row == "fairfinetune" else f"*extra*: {method_label(row)}"
    by = {m: g[g["method"] == m] for m in (row, *PEERS)}
    counts = " / ".join(str(sub["seed"].nunique()) for sub in by.values())
    missing = [m for m, sub in by.items() if sub.empty]
    if missing:
        return (
            f"| {dataset} | {label} | {counts} | no {', '.join(missing)} record | | | | | "
            "not computed |"
        )
    mean = {m: sub[["auroc", "dsp", "deo", "cf", "f1"]].mean() for m, sub in by.items()}
    ff = mean[row]
    best = max(PEERS, key=lambda m: mean[m]["auroc"])
    cells, oks = [], []
    ok, txt = _verdict(ff["auroc"], mean[best]["auroc"] - AUROC_SLACK, False)
    cells.append(f"{txt}, best: {best}")
    oks.append(ok)
    for k in ("dsp", "deo", "cf"):
        low = min(PEERS, key=lambda m, k=k: mean[m][k])
        ok, txt = _verdict(ff[k], mean[low][k], True)
        cells.append(f"{txt}, lower: {low}")
        oks.append(ok)
    cells.append(f"{100 * ff['f1']:.1f} / {100 * mean[best]['f1']:.1f}")
    n_min = min(sub["seed"].nunique() for sub in by.values())
    verdict = "**met**" if all(oks) else "not met"
    warned = _warned_runs(by[row])
    if warned:
        # the figures can be met by decisions that collapsed towards one class: say so
        verdict += (
            f"; but its decisions got worse in {warned} of {len(by[row])} runs (the decision "
            "warning, next section): not a model to deploy"
            if all(oks)
            else f"; decision warning in {warned} of {len(by[row])} runs"
        )
    if n_min < GOAL_SEEDS:
        verdict += f" (provisional: {n_min} of {GOAL_SEEDS} seeds)"
    return f"| {dataset} | {label} | {counts} | " + " | ".join(cells) + f" | {verdict} |"


def _warned_runs(g: pd.DataFrame) -> int:
    """How many of a FairFinetune row's runs ``finetune``'s decision warning fires on (their
    records' selection tables, with the row's ``max_bacc_drop`` if it set one)."""
    if "selection" not in g:
        return 0
    options = g["ff_options"].iloc[0] if "ff_options" in g else None
    bound = (options or {}).get("max_bacc_drop") if isinstance(options, dict) else None
    return sum(
        _decision_warning(selection_frame(t), bound)
        for t in g["selection"]
        if isinstance(t, list | dict)
    )


def write_pareto(records: list[dict[str, Any]], path: Path) -> None:
    """AUROC against ΔSP and against counterfactual unfairness, one panel row per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not records:
        return
    table = summary(records)
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(10, 4 * len(datasets)), squeeze=False)
    colours = {"vanilla": "C0", "fairfinetune": "C1", "nifty": "C2", "fairgnn": "C3"}
    colours.update({"fairgnn_port": "C4", "vanilla_raw": "C5", "fairfinetune_raw": "C6"})
    markers = {"gcn": "o", "gin": "D", "sage": "^"}
    for i, d in enumerate(datasets):
        sub = table[table["dataset"] == d]
        for j, (k, label) in enumerate((("dsp", "ΔSP"), ("cf", "counterfactual unfairness"))):
            ax = axes[i][j]
            for _, r in sub.iterrows():
                ax.errorbar(
                    100 * r[k],
                    100 * r["auroc"],
                    xerr=None if np.isnan(r[k + "_sd"]) else 100 * r[k + "_sd"],
                    yerr=None if np.isnan(r["auroc_sd"]) else 100 * r["auroc_sd"],
                    marker=markers.get(r["backbone"], "x"),
                    color=colours.get(r["method"].split(":")[0], "k"),
                    fillstyle="none" if ":" in r["method"] else "full",  # a variant: hollow
                    markersize=10,
                    linestyle="none",
                    label=f"{r['method']} ({r['backbone']}, {r['runs']} seeds)",
                )
            ax.set_xlabel(f"{label} (%), lower is better")
            ax.set_ylabel("AUROC (%)")
            ax.set_title(d)
            ax.grid(alpha=0.3)
        axes[i][1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
