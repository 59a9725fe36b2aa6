"""Time and process helpers of the MaxSAT searches (:mod:`~gnnaudit.clustering.tree_search`):
deadlines, interrupt timers, and a forked child process streaming progress through a pipe."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["remaining", "expired", "with_timer", "can_fork", "forked", "unpack_model"]


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.perf_counter()


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def with_timer(deadline: float | None, interrupt: Any) -> threading.Timer | None:
    if deadline is None:
        return None
    timer = threading.Timer(max(0.0, deadline - time.perf_counter()), interrupt)
    timer.daemon = True
    timer.start()
    return timer


def can_fork() -> bool:
    """A child process is possible (not inside a daemonic process, e.g. a Dask worker)."""
    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


@contextlib.contextmanager
def forked(target: Callable[..., None], *args: Any) -> Iterator[Any]:
    """Run ``target(*args, conn)`` in a forked child; yield the reading end of its pipe. On
    exit the child is killed if still running and reaped."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    child.close()
    try:
        yield parent
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
        parent.close()


def unpack_model(packed: bytes, n_vars: int) -> np.ndarray:
    """Truth values sent by a child as packed bits (index 0 unused)."""
    return np.unpackbits(np.frombuffer(packed, dtype=np.uint8))[: n_vars + 1].astype(bool)
