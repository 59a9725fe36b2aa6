"""Run NIFTY's public reference scripts (NIFTY, its FairGNN port) unmodified, then measure them.

Used by ``bench_fair_gnn.py`` (one subprocess per run): ``python fair_gnn_reference.py
--method nifty|fairgnn_port --dataset credit|bail|german --seed S --repo DIR --workdir DIR
--out FILE``.

The reference code is NIFTY's repository (Agarwal et al. 2021), fetched, never vendored::

    git clone https://github.com/chirag126/nifty /work/scratch/nifty

* ``nifty``: ``nifty_sota_gnn.py --model ssf --encoder gcn`` with the README's published
  settings (``--drop_edge_rate_1 0.001 --drop_edge_rate_2 0.001 --drop_feature_rate_1 0.1
  --drop_feature_rate_2 0.1 --dropout 0.5 --hidden 16 --lr 1e-3 --epochs 1000 --sim_coeff 0.6``).
* ``fairgnn_port``: ``baseline_fairGNN.py`` (FairGNN, Dai & Wang 2021, as ported to PyG by NIFTY's
  authors for credit / bail / german: the graphs NIFTY's paper compares FairGNN on) with the
  README's settings (``--dropout 0.5 --hidden 16 --lr 1e-3 --epochs 1000 --model gcn``; its
  defaults ``--num-hidden 32 --alpha 4 --beta 0.01``, ``sens_number`` = ``label_number`` as the
  script sets per dataset). FairGNN's own repository (EnyanDai/FairGNN) loads only NBA and
  Pokec, through DGL; it is not run here. The FairGNN users install, PyGDebias's, is run by
  ``fair_gnn_pygdebias.py`` (method ``fairgnn`` of ``bench_fair_gnn.py``); this port is the
  benchmark's extra row ``fairgnn_port``.

The scripts run in ``--workdir`` (they read ``./dataset/<name>/<name>.csv`` and
``<name>_edges.txt`` and write their checkpoints there) through ``runpy.run_path`` as
``__main__`` with ``sys.argv`` set, so their code runs as written. Afterwards their globals
(``model``, ``features``, ``edge_index``, ``labels``, ``sens``, ``idx_test``, ``sens_idx``)
are measured with :func:`gnnaudit.audit.fairness.literature_metrics.literature_metrics`, the
same function that measures gnnaudit's models. The figures the script printed itself are kept
under ``printed``.

**Shims** (stand-ins for packages today's environment lacks; written to ``<workdir>/_shims``
by :func:`write_shims`, nothing is patched inside the reference code). Each is imported by the
reference code but never called on the paths run here; a call raises ``NotImplementedError``:

* ``dgl``: empty module (``import dgl`` in ``utils.py``, ``fairgnn_utils.py`` and both scripts;
  no DGL call is made; DGL has no wheel for torch 2.13 CPU);
* ``ipdb``: ``set_trace`` (imported by the scripts and models);
* ``aif360.sklearn.metrics``: ``consistency_score``, ``generalized_entropy_error``,
  ``statistical_parity_difference``, ``equal_opportunity_difference`` (imported only);
* ``deeprobust.graph.utils.accuracy``, ``deeprobust.graph.defense.pgd.PGD`` /
  ``prox_operators`` (imported by ``models/prognn.py``, a model not run);
* ``seaborn`` (imported by ``baseline_fairGNN.py``, unused).

One API-drift shim changes behaviour back to the API the code was written for:

* ``torch_geometric.nn.GCNConv`` is replaced, before the scripts import it, by
  :class:`GCNConvV1`: PyG 1.x's ``GCNConv`` whose weight is the ``Parameter`` ``weight`` of
  shape ``(in, out)`` (glorot init, zero bias). Today's ``GCNConv`` keeps it in ``lin.weight``,
  and NIFTY's ``spectral_norm(GCNConv(...))`` (``models/ssf.py``) needs a ``weight``
  parameter. The propagation (``gcn_norm`` with self loops, sum aggregation) is today's.

``fit_s``: wall time of the script minus the time its data loader (``load_credit`` etc.) takes;
it therefore includes the scripts' per-epoch validation and their final evaluation passes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import runpy
import sys
import time
from pathlib import Path

SCRIPTS = {"nifty": "nifty_sota_gnn.py", "fairgnn_port": "baseline_fairGNN.py"}
PUBLISHED_ARGS = {
    "nifty": (
        "--drop_edge_rate_1 0.001 --drop_edge_rate_2 0.001 --drop_feature_rate_1 0.1 "
        "--drop_feature_rate_2 0.1 --dropout 0.5 --hidden 16 --lr 1e-3 --epochs {epochs} "
        "--model ssf --encoder gcn --sim_coeff 0.6"
    ),
    "fairgnn_port": "--dropout 0.5 --hidden 16 --lr 1e-3 --epochs {epochs} --model gcn",
}
_RAISE = (
    "def {0}(*args, **kwargs):\n    raise NotImplementedError('shim: {1}.{0} is not provided')\n"
)
SHIMS = {
    "dgl/__init__.py": '"""Shim: imported by NIFTY\'s code, never called."""\n',
    "ipdb.py": _RAISE.format("set_trace", "ipdb"),
    "seaborn.py": '"""Shim: imported by baseline_fairGNN.py, unused."""\n',
    "aif360/__init__.py": "",
    "aif360/sklearn/__init__.py": "",
    "aif360/sklearn/metrics.py": "".join(
        _RAISE.format(f, "aif360.sklearn.metrics")
        for f in (
            "consistency_score",
            "generalized_entropy_error",
            "statistical_parity_difference",
            "equal_opportunity_difference",
        )
    ),
    "deeprobust/__init__.py": "",
    "deeprobust/graph/__init__.py": "",
    "deeprobust/graph/utils.py": _RAISE.format("accuracy", "deeprobust.graph.utils"),
    "deeprobust/graph/defense/__init__.py": "",
    "deeprobust/graph/defense/pgd.py": _RAISE.format("prox_operators", "deeprobust")
    + "class PGD:\n    def __init__(self, *args, **kwargs):\n"
    "        raise NotImplementedError('shim: deeprobust PGD is not provided')\n",
}
_PRINTED = {
    "auroc": r"AUCROC of estimator: ([0-9.]+)",
    "dsp": r"Parity: ([0-9.eE-]+)",
    "deo": r"Equality: ([0-9.eE-]+)",
    "f1": r"F1-score: ([0-9.eE-]+)",
    "cf": r"CounterFactual Fairness: ([0-9.eE-]+)",
    "instability": r"Robustness Score: ([0-9.eE-]+)",
}


class _GCNConvShim:
    """Factory of :class:`GCNConvV1` (built lazily so that importing this file needs no PyG)."""

    cls: type | None = None

    @classmethod
    def get(cls) -> type:
        if cls.cls is None:
            from torch.nn import Parameter
            from torch_geometric.nn import GCNConv
            from torch_geometric.nn.inits import glorot, zeros

            class GCNConvV1(GCNConv):
                """PyG 1.x ``GCNConv`` API: ``weight`` is a ``(in, out)`` Parameter."""

                def __init__(self, in_channels: int, out_channels: int, **kwargs) -> None:
                    super().__init__(in_channels, out_channels, **kwargs)
                    weight = self.lin.weight.detach().t().contiguous()
                    del self.lin
                    self.weight = Parameter(weight)
                    object.__setattr__(self, "lin", self._project)

                def _project(self, x):
                    return x @ self.weight

                def reset_parameters(self) -> None:
                    if "weight" in self._parameters or "weight_orig" in self._parameters:
                        glorot(self._parameters.get("weight", self._parameters.get("weight_orig")))
                        zeros(self.bias)
                    else:
                        super().reset_parameters()

            cls.cls = GCNConvV1
        return cls.cls


def install_gcnconv_shim() -> None:
    """Make ``from torch_geometric.nn import GCNConv`` return :class:`GCNConvV1`."""
    import torch_geometric.nn as pyg_nn

    pyg_nn.GCNConv = _GCNConvShim.get()


def write_shims(folder: Path) -> Path:
    """Write the shim packages (module docstring) under ``folder/_shims``; returns it."""
    root = folder / "_shims"
    for rel, text in SHIMS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _timed_loaders(module_name: str, spent: list[float]) -> None:
    """Wrap the data loaders of ``module_name`` (``utils`` / ``fairgnn_utils``) to time them;
    the scripts' ``from utils import *`` then picks the wrapped names up."""
    module = __import__(module_name)
    for name in ("load_credit", "load_bail", "load_german"):
        inner = getattr(module, name)

        def timed(*args, _inner=inner, **kwargs):
            t0 = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - t0)

        setattr(module, name, timed)


def run(method: str, dataset: str, seed: int, repo: Path, workdir: Path, epochs: int) -> dict:
    """Run one reference script and measure its model (module docstring)."""
    import torch

    from gnnaudit.audit.fairness.literature_metrics import literature_metrics

    shims = write_shims(workdir)
    install_gcnconv_shim()
    sys.path[:0] = [str(shims), str(repo)]
    os.chdir(workdir)
    spent: list[float] = []
    _timed_loaders("fairgnn_utils" if method == "fairgnn_port" else "utils", spent)
    argv = PUBLISHED_ARGS[method].format(epochs=epochs).split()
    sys.argv = [SCRIPTS[method], *argv, "--dataset", dataset, "--seed", str(seed)]
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        g = runpy.run_path(str(repo / SCRIPTS[method]), run_name="__main__")
    fit_s = time.perf_counter() - t0 - sum(spent)
    model = g["model"]
    if method == "nifty":

        def predict(x, ei):
            return model.predict(model(x, ei))
    else:

        def predict(x, ei):
            return model(x, ei)[0]

    metrics = literature_metrics(
        predict,
        g["features"],
        g["edge_index"],
        g["labels"],
        torch.as_tensor(g["sens"]),
        int(g["sens_idx"]),
        g["idx_test"].cpu().numpy(),
        random_state=seed,
    )
    model.eval()
    printed = {}
    for key, pattern in _PRINTED.items():
        found = re.search(pattern, out.getvalue())
        if found:
            printed[key] = float(found.group(1))
    return {
        **metrics,
        "fit_s": fit_s,
        "load_s": sum(spent),
        "printed": printed,
        "idx_test": sorted(int(i) for i in g["idx_test"]),
        "command": " ".join(sys.argv),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", choices=sorted(SCRIPTS), required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    out = a.out.resolve()
    record = run(a.method, a.dataset, a.seed, a.repo.resolve(), a.workdir.resolve(), a.epochs)
    out.write_text(json.dumps(record))


if __name__ == "__main__":
    main()
