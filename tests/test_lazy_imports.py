"""Lightning is imported only for training: auditing a plain PyTorch model never loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CODE = """
import sys, torch, gnnaudit
gnnaudit.audit_model
assert "lightning" not in sys.modules, "import gnnaudit; gnnaudit.audit_model loaded lightning"
from torch_geometric.nn import GCNConv
from gnnaudit.datasets import synthetic_credit_graph
data = synthetic_credit_graph(num_nodes=120, seed=0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = GCNConv(data.num_features, 2)
    def forward(self, x, edge_index):
        return self.conv(x, edge_index)
gnnaudit.audit_model(M().eval(), data, sensitive="gender", progress=False, n_boot=20)
assert "lightning" not in sys.modules, "auditing a plain model loaded lightning"
from gnnaudit.training import NodeClassifier  # the Lightning classes still come on use
assert "lightning" in sys.modules
print("ok")
"""


def test_audit_of_a_plain_model_never_imports_lightning():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_training_exports_resolve_lazily():
    import gnnaudit.training as training

    for name in training.__all__:
        assert getattr(training, name) is not None, name
    assert set(training.__all__) <= set(dir(training))
