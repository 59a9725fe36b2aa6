"""Training GNN node classifiers with Lightning.

What belongs here: the ``NodeClassifier`` LightningModule, the ``GraphDataModule``, the
counterfactual-audit callback and fine-tuning on evidences. May import graph_ops, audit and
clustering, never cli.
"""

__all__: list[str] = []
