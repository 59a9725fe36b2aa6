"""Run PyGDebias's FairGNN unmodified with its own defaults, then measure its model.

Used by ``bench_fair_gnn.py`` (one subprocess per run, method ``fairgnn``): ``python
fair_gnn_pygdebias.py --dataset credit|bail|german --seed S --package DIR --workdir DIR --out
FILE``. FairGNN (Dai & Wang, WSDM 2021) as users install it: the ``pygdebias`` package of the
package registry (PyGDebias, yushundong/PyGDebias), version 1.1.1, in a benchmark environment of
its own, never a dependency of gnnaudit and never vendored into this repository::

    python -m pip download pygdebias==1.1.1 --no-deps --no-binary :all: -d benchmarks/_env/pygdebias
    tar -xzf benchmarks/_env/pygdebias/pygdebias-1.1.1.tar.gz -C benchmarks/_env/pygdebias

(``bench_fair_gnn.py`` does both when ``--pygdebias`` is missing.) Its ``requirements.txt``
pins torch 1.12 and DGL 1.1 and is **not** installed: the package runs on this repository's
environment (torch, torch_geometric, scikit-learn, pandas, scipy, networkx, tqdm). The
environment is a plain folder holding the unpacked sdist (``benchmarks/_env/``, git-ignored);
the two files used are loaded by file path (:func:`load_file`), so the package ``__init__``
(which imports every method and its dependencies) is never run:

* ``pygdebias/datasets/datasets.py``: its ``Credit`` / ``Bail`` / ``German`` loaders with their
  defaults (``root="./dataset"``, ``is_normalize=False``: the raw features; NIFTY's split: seed
  20, ``label_number`` 6000 for credit, 100 for bail / german; the adjacency symmetrised, self
  loops added, a ``torch.sparse`` float tensor). They read ``<workdir>/dataset/<name>/<name>.csv``
  and ``<name>_edges.txt``, which the benchmark writes from ``load_nifty`` (its edges, each
  unordered pair once), so no download is made. The benchmark checks that the loader's train,
  validation and test nodes are those of ``load_nifty(..., split="nifty")``.
* ``pygdebias/debiasing/FairGNN.py``: ``FairGNN(nfeat)`` with every constructor default
  (``epoch=2000``, ``acc=0.69``; inside: ``num_hidden`` 64, ``alpha`` 4, ``beta`` 0.01, lr 1e-3,
  weight decay 1e-5, a one-layer GCN estimator of the attribute and a one-layer GCN encoder),
  then ``fit(adj, features, labels, idx_train, idx_val, idx_test, sens, idx_train,
  device="cpu")`` as its own test (``pygdebias/tests/test_o.py``) calls it: the attribute known
  on the training nodes (``idx_sens_train`` = ``idx_train``, also ``fit``'s default).

Its constructor reads ``sys.argv`` (``argparse.parse_known_args``); ``sys.argv`` is set to the
file name alone so that its defaults hold. ``--epochs`` (smoke runs only) passes ``epoch=``.

**Shims** (written to ``<workdir>/_shims``, put first on ``sys.path``; nothing inside the
package is patched): ``dgl`` and ``gdown``, empty modules imported by ``datasets.py`` and never
called on the paths run here (DGL has no wheel for torch 2.13 CPU; ``gdown`` downloads the
graphs this benchmark does not load).

**Instrumentation** (reads, changes nothing): ``fit`` keeps the test figures of the epoch it
selects (validation accuracy above ``acc`` and above the best so far) and returns them from
``predict``, but it leaves the *last* epoch's weights in the model. To measure the selected
epoch's model, the instance's ``predict_sens_group`` (which ``fit`` calls exactly when it selects
an epoch) is wrapped to copy the weights first. The record's metrics are those of the selected
epoch's model, measured by :func:`gnnaudit.audit.fairness.literature_metrics.literature_metrics`
(the function that measures every method of the benchmark: scores = the classifier's logit,
``model(edge_index, x)[0]``) on its features and edges; ``last_epoch`` holds the same metrics
of the final weights, ``printed`` what ``predict`` returns (its AUROC is computed on the 0/1
predictions, not on scores) and ``best_epoch`` the epoch ``fit`` printed.

``fit_s``: wall time of ``fit`` (it includes its per-epoch validation and the test evaluation
at each selected epoch); ``load_s``: the loader.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import json
import random
import re
import sys
import time
from pathlib import Path
from types import ModuleType

VERSION = "1.1.1"
LOADERS = {"credit": "Credit", "bail": "Bail", "german": "German"}
SHIMS = {
    "dgl/__init__.py": '"""Shim: imported by pygdebias datasets.py, never called here."""\n',
    "gdown.py": "def download(*args, **kwargs):\n"
    "    raise NotImplementedError('shim: gdown.download is not provided')\n",
}
_PRINTED = (
    "acc", "auroc_hard", "f1", "acc_s0", "auroc_s0", "f1_s0", "acc_s1", "auroc_s1", "f1_s1",
    "dsp", "deo",
)  # fmt: skip


def package_dir(env: Path) -> Path:
    """The unpacked ``pygdebias`` package folder inside the benchmark environment ``env``."""
    return env / f"pygdebias-{VERSION}" / "pygdebias"


def load_file(name: str, path: Path) -> ModuleType:
    """Import the file ``path`` as module ``name`` (no package ``__init__`` is run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_shims(folder: Path) -> Path:
    root = folder / "_shims"
    for rel, text in SHIMS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(dataset: str, seed: int, package: Path, workdir: Path, epochs: int | None) -> dict:
    """Load, fit and measure (module docstring)."""
    import os

    import numpy as np
    import torch

    from gnnaudit.audit.fairness.literature_metrics import literature_metrics

    sys.path.insert(0, str(write_shims(workdir)))
    os.chdir(workdir)
    datasets = load_file("pygdebias_datasets", package / "datasets" / "datasets.py")
    t0 = time.perf_counter()
    ds = getattr(datasets, LOADERS[dataset])()
    load_s = time.perf_counter() - t0
    adj, features, labels = ds.adj(), ds.features(), ds.labels()
    idx_train, idx_val, idx_test, sens = ds.idx_train(), ds.idx_val(), ds.idx_test(), ds.sens()
    sens_idx = int(ds.sens_idx())
    if not torch.equal(features[:, sens_idx], sens.to(features.dtype)):
        raise RuntimeError(f"features[:, {sens_idx}] is not the sensitive attribute")

    torch.manual_seed(seed)  # as its test's setup_seed
    np.random.seed(seed)  # noqa: NPY002  # the global seed its test sets (setup_seed)
    random.seed(seed)
    sys.argv = ["FairGNN.py"]
    fairgnn = load_file("pygdebias_fairgnn", package / "debiasing" / "FairGNN.py")
    kwargs = {} if epochs is None else {"epoch": epochs}
    model = fairgnn.FairGNN(features.shape[-1], **kwargs)

    snapshots: list[dict] = []
    inner = model.predict_sens_group

    def predict_sens_group(*args, **kw):  # instrumentation: copy the selected epoch's weights
        snapshots.append(copy.deepcopy(model.state_dict()))
        return inner(*args, **kw)

    model.predict_sens_group = predict_sens_group
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        model.fit(
            adj, features, labels, idx_train, idx_val, idx_test, sens, idx_train, device="cpu"
        )
    fit_s = time.perf_counter() - t0
    printed = dict(zip(_PRINTED, model.predict(idx_test), strict=True))
    best = re.search(r"Best Epoch: (\d+)", out.getvalue())

    def predict(x, ei):
        return model(ei, x)[0]

    def measure() -> dict:
        return literature_metrics(
            predict, features, model.edge_index, labels, sens, sens_idx, idx_test.numpy(),
            random_state=seed,
        )  # fmt: skip

    model.eval()
    last = measure()
    model.load_state_dict(snapshots[-1])
    return {
        **measure(),
        "fit_s": fit_s,
        "load_s": load_s,
        "best_epoch": int(best.group(1)) if best else None,
        "epochs": model.args.epochs,
        "last_epoch": last,
        "printed": {k: float(v) if not isinstance(v, str) else v for k, v in printed.items()},
        "inputs": "pygdebias loader defaults (is_normalize=False: raw features)",
        "package": f"pygdebias {VERSION}",
        "idx_train": sorted(int(i) for i in idx_train),
        "idx_val": sorted(int(i) for i in idx_val),
        "idx_test": sorted(int(i) for i in idx_test),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=sorted(LOADERS), required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=None, help="default: FairGNN's own (2000)")
    p.add_argument("--package", type=Path, required=True, help="the unpacked pygdebias folder")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    out = a.out.resolve()
    record = run(a.dataset, a.seed, a.package.resolve(), a.workdir.resolve(), a.epochs)
    out.write_text(json.dumps(record))


if __name__ == "__main__":
    main()
