"""Lightning is imported only for training: auditing a plain PyTorch model never loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: run_audit in a fresh interpreter: neither Lightning nor Dask is loaded (prints "local ok")
LOCAL_AUDIT = """
import sys, torch, gnnaudit
from torch_geometric.nn import GCNConv
from gnnaudit.datasets import synthetic_credit_graph
data = synthetic_credit_graph(num_nodes=120, seed=0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = GCNConv(data.num_features, 2)
    def forward(self, x, edge_index):
        return self.conv(x, edge_index)
report = gnnaudit.run_audit(M().eval(), data, "gender", progress=False, n_boot=20)
assert len(report.findings) and report.verdict
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in {"lightning", "pytorch_lightning", "dask", "distributed"}
    or m.startswith(("gnnaudit.training", "gnnaudit.audit.distributed"))
)
assert not loaded, loaded
print("local ok")
"""

#: then, in the same interpreter (Lightning still not loaded: LOCAL_AUDIT checked it),
#: gnnaudit.audit_model on a plain model loads no Lightning, and the training classes do
#: (prints "plain ok")
CODE = """
gnnaudit.audit_model
assert "lightning" not in sys.modules, "import gnnaudit; gnnaudit.audit_model loaded lightning"
gnnaudit.audit_model(M().eval(), data, sensitive="gender", progress=False, n_boot=20)
assert "lightning" not in sys.modules, "auditing a plain model loaded lightning"
from gnnaudit.training import NodeClassifier  # the Lightning classes still come on use
assert "lightning" in sys.modules
print("plain ok")
"""


@pytest.fixture(scope="module")
def fresh_interpreter() -> subprocess.CompletedProcess:
    """LOCAL_AUDIT then CODE in one fresh interpreter: starting one (torch, PyG, gnnaudit)
    costs seconds of CPU, so both tests below read this one run."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(
        [sys.executable, "-c", LOCAL_AUDIT + CODE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_audit_of_a_plain_model_never_imports_lightning(fresh_interpreter):
    proc = fresh_interpreter
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["local", "ok", "plain", "ok"], proc.stderr[-2000:]


def test_local_audit_imports_neither_lightning_nor_dask(fresh_interpreter):
    """``run_audit`` without ``client=`` imports neither Lightning (the training layer) nor
    dask / distributed, nor gnnaudit's own Dask path (``gnnaudit.audit.distributed``)."""
    proc = fresh_interpreter
    assert proc.stdout.startswith("local ok\n"), proc.stderr[-2000:]


def test_training_exports_resolve_lazily():
    import gnnaudit.training as training

    for name in training.__all__:
        assert getattr(training, name) is not None, name
    assert set(training.__all__) <= set(dir(training))


def test_training_units_come_from_the_registry():
    """The audit builds training's units by name; ``gnnaudit.training`` registers them."""
    from gnnaudit.audit.pipeline import build_unit, default_units, registered_units
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.training import EvidenceFinetuneUnit, MitigationUnit

    assert {"finetune", "mitigate"} <= set(registered_units())
    assert isinstance(build_unit("finetune"), EvidenceFinetuneUnit)
    units = default_units(finetune=True, mitigate=True, mitigate_kwargs={"epochs": 3})
    assert isinstance(units[-2], EvidenceFinetuneUnit) and isinstance(units[-1], MitigationUnit)
    assert units[-1].epochs == 3
    with pytest.raises(InvalidInputError, match="no audit unit is registered as 'nope'"):
        build_unit("nope")


def test_old_pipeline_names_warn_and_resolve(monkeypatch):
    """``gnnaudit.training.run_audit`` and the other moved names still work until 0.3.0."""
    import importlib

    import gnnaudit
    import gnnaudit.training as training
    from gnnaudit.audit import pipeline

    for name in training.MOVED_NAMES:
        with pytest.warns(DeprecationWarning, match=rf"gnnaudit.training.{name} is deprecated"):
            assert getattr(training, name) is getattr(pipeline, name)
        assert name not in training.__all__
    assert gnnaudit.run_audit is pipeline.run_audit and "run_audit" in gnnaudit.__all__
    monkeypatch.delitem(sys.modules, "gnnaudit.training.audit_pipeline", raising=False)
    with pytest.warns(DeprecationWarning, match="import gnnaudit.audit.pipeline.run instead"):
        old = importlib.import_module("gnnaudit.training.audit_pipeline")
    assert old.run_audit is pipeline.run_audit


#: the clustering side in a fresh interpreter: its modules, the tabular loaders and the three
#: tabular commands run without torch or PyG (prints "tabular ok")
TABULAR = """
import sys
import numpy as np, pandas as pd
import gnnaudit.clustering, gnnaudit.graph_ops
from gnnaudit.datasets import load_tabular, three_moons
from gnnaudit.cli.main import main
rng = np.random.default_rng(0)
table = sys.argv[1]
pd.DataFrame({"x": rng.normal(size=60), "y": rng.normal(size=60),
              "g": rng.integers(0, 2, 60)}).to_csv(table, index=False)
assert load_tabular(table, sensitive="g").X.shape == (60, 2)
assert main(["tree-cluster", table, "--n-clusters", "2", "--depth", "1", "--ignore", "g"]) == 0
assert main(["fairden", table, "--sensitive", "g", "--no-progress"]) == 0
assert main(["explain-dbscan", table, "--eps", "0.8", "--min-samples", "3", "--index", "0"]) == 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "torch_geometric"})
assert not loaded, loaded[:5]
print("tabular ok")
"""


def test_tabular_commands_never_import_torch(tmp_path):
    """``gnnaudit.clustering``, ``gnnaudit.graph_ops``, ``gnnaudit.datasets.load_tabular`` and
    the ``tree-cluster`` / ``fairden`` / ``explain-dbscan`` commands load neither torch nor PyG
    (each would add seconds to a command's start)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", TABULAR, str(tmp_path / "t.csv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0 and "tabular ok" in proc.stdout, proc.stderr[-3000:]
