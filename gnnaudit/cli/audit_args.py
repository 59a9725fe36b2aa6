"""The options of ``gnnaudit audit``: your graph, the model and what the audit computes
(registered by :mod:`gnnaudit.cli.audit`)."""

from __future__ import annotations

import argparse

from gnnaudit._validation import MAX_NUM_CLASSES, MAX_NUM_HOPS
from gnnaudit.cli._graph_input import add_table_file_arguments
from gnnaudit.cli._scheduler import add_scheduler_arguments
from gnnaudit.cli._tables import add_table_arguments
from gnnaudit.cli.options import (
    BACKENDS,
    DeprecatedAlias,
    FloatRange,
    IntRange,
    add_progress_argument,
    count_type,
    epochs_type,
    k_type,
)

__all__ = [
    "add_audit_graph_arguments",
    "add_model_arguments",
    "add_audit_arguments",
    "add_mitigation_arguments",
]


def add_audit_graph_arguments(p: argparse.ArgumentParser) -> None:
    """Your graph: ``--graph`` and its table options (instead of ``--dataset``)."""
    own = p.add_argument_group("your graph (instead of --dataset)")
    own.add_argument(
        "--graph",
        default=None,
        help="a .pt file (dict of tensors or a saved PyG Data), an .npz of arrays, or a folder "
        "with nodes.csv and edges.csv; tables under other names: --nodes FILE --edges FILE",
    )
    add_table_file_arguments(own)
    own.add_argument(
        "--label",
        default=None,
        help="label column of nodes (default: the one column named y, label, target or class, "
        "any case; two such columns are refused); text labels are coded by sorted value, the "
        "names kept",
    )
    own.add_argument(
        "--mask-column",
        default=None,
        help="boolean / 0-1 column of nodes.csv selecting the audited nodes",
    )
    add_table_arguments(p)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The model: a gnnaudit backbone to train or yours (``MODULE:NAME`` with weights)."""
    model = p.add_argument_group("model")
    model.add_argument(
        "--model",
        default="gcn",
        help="a gnnaudit backbone to train (gcn, gat, gin, sage, mpnn; default gcn) or your "
        "model as MODULE:NAME (an importable module or path/to/file.py, imported with its own "
        "folder on the import path so its sibling modules import; and a class or factory "
        "called as NAME(in_channels, out_channels) or NAME())",
    )
    weights = model.add_mutually_exclusive_group()
    weights.add_argument("--weights", default=None, help="state dict of your --model")
    weights.add_argument(
        "--checkpoint",
        default=None,
        help="a Lightning checkpoint: of your LightningModule with --model MODULE:NAME, else "
        "of a gnnaudit NodeClassifier (gnnaudit train); read as data only",
    )
    weights.add_argument(
        "--lightning-checkpoint",
        dest="checkpoint",
        action=DeprecatedAlias,
        new="--checkpoint",
        help=argparse.SUPPRESS,
    )
    model.add_argument(
        "--num-classes",
        type=IntRange(2, MAX_NUM_CLASSES, "MAX_NUM_CLASSES"),
        default=None,
        help="out_channels for your factory (default: number of label classes)",
    )
    model.add_argument(
        "--epochs", type=epochs_type(), default=200, help="training epochs (default 200)"
    )
    model.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="where the model runs and the search computes (default auto: a GPU when torch sees one, else the CPU)",
    )


# long: whole: a flat table of argparse calls, one per documented flag
def add_audit_arguments(p: argparse.ArgumentParser) -> None:
    """What the audit computes: the sensitive attribute, the search, mitigation."""
    audit = p.add_argument_group("audit")
    audit.add_argument(
        "--sensitive",
        default=None,
        help="sensitive attribute: a feature or column name (default: the dataset's, if any)",
    )
    audit.add_argument(
        "--sensitive-bins",
        type=IntRange(2, 100, "quantile bins"),
        default=None,
        help="cut a continuous sensitive attribute into this many quantile bins (default: a "
        "continuous attribute is refused)",
    )
    audit.add_argument(
        "--k", type=k_type(), default=10, help="local evidences per audited node (10)"
    )
    audit.add_argument(
        "--model-hops",
        type=IntRange(0, MAX_NUM_HOPS, "hops"),
        default=None,
        help="the model's receptive field L (its message-passing hops) for the node-scope flip "
        "test (default: inferred from its torch_geometric layers; a model without them needs "
        "it, else node scope is skipped and the verdict says so)",
    )
    audit.add_argument("--backend", default="auto", choices=BACKENDS, help="evidence search")
    add_scheduler_arguments(audit)
    audit.add_argument(
        "--min-support",
        type=count_type(1),
        default=5,
        help="score only feature values held by at least this many audited nodes (default 5: "
        "a value held by one or two nodes scores 1.0 by chance; 1 = every value, as in the "
        "paper)",
    )
    audit.add_argument(
        "--top", type=count_type(0), default=5, help="discrimination scores printed (5)"
    )
    ft = audit.add_mutually_exclusive_group()
    ft.add_argument(
        "--finetune",
        dest="finetune",
        action="store_true",
        default=None,
        help="the CE paper's test of the evidences, not a fairness fix (that is --mitigate): "
        "fine-tune on evidence nodes and on random nodes and compare the accuracy gained, at "
        "any graph size (default: on for Lightning models on graphs of at most "
        "FINETUNE_MAX_NODES = 50,000 nodes, skipped with a report note above)",
    )
    ft.add_argument("--no-finetune", dest="finetune", action="store_false")
    audit.add_argument("--finetune-m", type=k_type(), default=50, help="fine-tuning budget m (50)")
    audit.add_argument(
        "--finetune-epochs", type=epochs_type(), default=30, help="fine-tuning epochs (30)"
    )
    add_progress_argument(audit)
    audit.add_argument(
        "--embedding",
        action="store_true",
        help="add the embedding audit: density clusters of the model's representation, their "
        "balance beside FairDen's, a readable tree on the input features, ExDBSCAN counterparts",
    )
    add_mitigation_arguments(audit)


def add_mitigation_arguments(audit: argparse._ArgumentGroup) -> None:
    """The ``--mitigate*`` flags of the audit group ``audit``: the fairness fix and its settings
    (:class:`~gnnaudit.training.MitigationUnit`, :meth:`FairFinetune.finetune
    <gnnaudit.training.FairFinetune.finetune>`)."""
    audit.add_argument(
        "--mitigate",
        action="store_true",
        help="the fairness fix: fine-tune a copy of the model against what the audit flagged "
        "(parity gap -> dsp, equal-opportunity gap -> deo, a flip -> cf; FairFinetune's "
        "default remedy, input blinding first, selected on the validation nodes), audit it "
        "again, add a before/after section and save its weights as mitigated_model.pt beside "
        "the report (not --finetune, the CE paper's test of the evidences)",
    )
    audit.add_argument(
        "--mitigate-lambda",
        type=FloatRange(0.0),
        default=None,
        help="weight lambda_cf of the consistency term; given, the consistency runs replace "
        "the default remedy (default: FairFinetune's)",
    )
    audit.add_argument(
        "--mitigate-epochs",
        type=epochs_type(),
        default=None,
        help="fine-tuning epochs of the mitigation (default: FairFinetune's)",
    )
    audit.add_argument(
        "--mitigate-max-bacc-drop",
        type=FloatRange(0.0, 1.0),
        default=None,
        help="keep only fine-tuned candidates whose validation balanced accuracy is at most "
        "this below the model's (FairFinetune's max_bacc_drop; default: no such bound, a "
        "warning in the report when the chosen one decides worse)",
    )
    audit.add_argument(
        "--mitigate-argmax",
        action="store_const",
        const=False,
        default=None,
        dest="mitigate_keep_rate",
        help="decide the fine-tuned candidates by argmax instead of at the threshold that keeps "
        "the model's share of class-1 decisions (FairFinetune's keep_rate=False; default: the "
        "share is kept)",
    )
    audit.add_argument(
        "--mitigate-grid",
        type=FloatRange(0.0),
        nargs="*",
        default=None,
        help="lambda_cf values of the trade-off figure (default 0 0.5 1 4)",
    )
