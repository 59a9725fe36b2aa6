"""Overhead of CounterfactualAuditCallback relative to the epoch time on the demo graph.

    python benchmarks/bench_audit_callback.py [--quick] [--epochs 200] [--repeats 3]

Trains the demo GCN (``synthetic_credit_graph(1000)``, full batch, CPU) with Lightning, without
and with the callback (every epoch, k=10, val nodes), and reports the mean epoch time, the
audit time per epoch (the first audit, which computes and caches the KS embedding, is shown
separately), and the overhead ratio audit / epoch (target <= 20%). A variant that drops the KS
cache every epoch shows what the cache saves. Also times the whole offline audit
(``run_audit``) stages.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
import warnings

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback

from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.training import CounterfactualAuditCallback, GraphDataModule, NodeClassifier


class _EpochTimer(Callback):
    """Wall and thread-CPU time from train-epoch start to the end of validation."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.cpu: list[float] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._t, self._c = time.perf_counter(), time.thread_time()

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        # registered last: runs after the audit callback's hook of the same epoch
        if not trainer.sanity_checking:
            self.times.append(time.perf_counter() - self._t)
            self.cpu.append(time.thread_time() - self._c)


class _NoCache(CounterfactualAuditCallback):
    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        self._cache_key = None
        super().on_validation_epoch_end(trainer, pl_module)


def _run(data, epochs: int, callback: Callback | None) -> tuple[_EpochTimer, Callback | None]:
    L.seed_everything(0, verbose=False)
    module = NodeClassifier(data.x.size(1), 2)
    timer = _EpochTimer()
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=([callback] if callback is not None else []) + [timer],
    )
    trainer.fit(module, datamodule=GraphDataModule(data))
    return timer, callback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 epochs, 1 repeat")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.quick:
        args.epochs, args.repeats = 50, 1
    torch.set_num_threads(args.threads)
    try:
        import faiss

        faiss.omp_set_num_threads(args.threads)
    except ImportError:  # pragma: no cover
        pass
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    data = synthetic_credit_graph(num_nodes=1000, bias=1.5, seed=0)
    rows = []
    for rep in range(args.repeats):
        base, _ = _run(data, args.epochs, None)
        with_cb, cb = _run(data, args.epochs, CounterfactualAuditCallback(k=10, sensitive="gender"))
        no_cache, cb2 = _run(data, args.epochs, _NoCache(k=10, sensitive="gender"))
        audit = np.array([h["seconds"] for h in cb.history_])
        audit_cpu = np.array([h["cpu_seconds"] for h in cb.history_])
        audit_nc = np.array([h["cpu_seconds"] for h in cb2.history_])
        epoch = float(np.median(base.times[1:]))
        epoch_cpu = float(np.median(base.cpu[1:]))
        rows.append(
            {
                "repeat": rep,
                "epoch_ms": epoch * 1e3,
                "epoch_ms_with_cb": float(np.median(with_cb.times[1:])) * 1e3,
                "epoch_cpu_ms": epoch_cpu * 1e3,
                "epoch_cpu_ms_with_cb": float(np.median(with_cb.cpu[1:])) * 1e3,
                "audit_ms_first": audit[0] * 1e3,
                "audit_ms_median": float(np.median(audit[1:])) * 1e3,
                "audit_ms_mean": float(np.mean(audit[1:])) * 1e3,
                "audit_cpu_ms_median": float(np.median(audit_cpu[1:])) * 1e3,
                "audit_cpu_ms_mean": float(np.mean(audit_cpu[1:])) * 1e3,
                "overhead_cpu_%": float(np.mean(audit_cpu[1:])) / epoch_cpu * 100,
                "overhead_wall_%": float(np.mean(audit[1:])) / epoch * 100,
                "no_cache_cpu_ms_mean": float(np.mean(audit_nc[1:])) * 1e3,
                "overhead_no_cache_cpu_%": float(np.mean(audit_nc[1:])) / epoch_cpu * 100,
            }
        )
    table = pd.DataFrame(rows)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, torch threads {args.threads}, "
        f"epochs {args.epochs}, demo graph 1000 nodes / {data.edge_index.size(1)} directed edges, "
        f"{int(data.val_mask.sum())} val nodes"
    )
    print(table.T.to_string(float_format="%.2f"))
    print("\nmedian over repeats:")
    print(table.drop(columns="repeat").median().to_string(float_format="%.2f"))


if __name__ == "__main__":
    main()
