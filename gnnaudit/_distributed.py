"""Optional Dask support: run independent blocks of work on a ``dask.distributed.Client``.

A leaf module like :mod:`gnnaudit._validation` (it imports only :mod:`gnnaudit.errors`); dask is
imported lazily, so gnnaudit works without the ``gnnaudit[distributed]`` extra until a
``client=`` is actually passed.

The parts of gnnaudit that split into independent blocks accept ``client=`` (exact evidence
search, per-feature sensitivity, many-query ExDBSCAN explanations) and use :func:`map_blocks`:
the shared inputs are scattered to the workers once, one task runs per block, and the results
come back in block order. Every distributed path computes each block with exactly the same
operations as the single-process path and reduces the partial results with the same rule, so
its results are equal to the single-process results bit for bit (the tests assert it).

Functions sent to workers must be picklable: module-level functions, not closures or lambdas.

Alignment: dask may deserialise a numpy array into a buffer at any byte offset; numpy then
computes ``matmul`` of views of such an (unaligned) array with its own loops instead of BLAS,
which rounds differently. :func:`map_blocks` therefore hands each task aligned copies of
unaligned shared arrays (:func:`aligned`), so a block computes exactly as it would here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from gnnaudit.errors import InvalidInputError, WorkerLostError

__all__ = [
    "check_client",
    "map_blocks",
    "split_blocks",
    "worker_addresses",
    "transferred_bytes",
    "worker_peak_rss",
]

logger = logging.getLogger(__name__)

_INSTALL = "pip install 'gnnaudit[distributed]'"


def check_client(client: Any, name: str = "client") -> Any:
    """``client`` if it is a ``dask.distributed.Client`` (or None); else
    :class:`~gnnaudit.errors.InvalidInputError` naming the argument. Also raised when
    ``client`` is given but dask.distributed is not installed."""
    if client is None:
        return None
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the test environment has dask
        raise InvalidInputError(
            f"{name}={client!r:.60} needs dask.distributed, which is not installed ({_INSTALL}); "
            f"pass {name}=None to run in this process"
        ) from exc
    if not isinstance(client, Client):
        raise InvalidInputError(
            f"{name} must be a dask.distributed.Client or None, got {type(client).__name__} "
            f"({client!r:.60})"
        )
    if client.status not in ("running", "connecting", "newly-created"):
        raise InvalidInputError(f"{name} is not connected (status {client.status!r})")
    return client


def split_blocks(items: Sequence[Any], n_blocks: int) -> list[list[Any]]:
    """``items`` in at most ``n_blocks`` contiguous, near-equal, non-empty blocks (order kept)."""
    n = len(items)
    n_blocks = max(1, min(int(n_blocks), n))
    bounds = [(i * n) // n_blocks for i in range(n_blocks + 1)]
    return [list(items[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def n_workers(client: Any) -> int:
    """Number of workers of ``client``'s cluster (at least 1)."""
    info = client.scheduler_info()
    return max(1, len(info.get("workers", {})))


def aligned(value: Any) -> Any:
    """``value``, or a C-contiguous aligned copy of it when it is a numpy array that is not
    (see the module docstring); other objects unchanged."""
    import numpy as np

    if isinstance(value, np.ndarray) and not (value.flags.aligned and value.flags.c_contiguous):
        out = np.empty_like(value, order="C")
        out[...] = value
        return out
    return value


def _run_block(fn: Callable[..., Any], block: Any, *shared: Any) -> Any:
    """Worker side of :func:`map_blocks`: ``fn(block, *shared)`` with aligned shared arrays."""
    return fn(block, *(aligned(obj) for obj in shared))


def map_blocks(
    client: Any,
    fn: Callable[..., Any],
    blocks: Sequence[Any],
    *shared: Any,
) -> list[Any]:
    """``[fn(block, *shared) for block in blocks]`` computed on ``client``'s workers.

    ``shared`` objects (large arrays, a model, a fitted estimator) are scattered to every
    worker once (``broadcast``) instead of being sent with each task; ``fn`` must be a
    module-level (picklable) function. The results are returned in the order of ``blocks``;
    an exception raised in a task is re-raised here. With ``client=None`` the blocks run here,
    in order (the single-process path).
    """
    if client is None:
        return [fn(block, *shared) for block in blocks]
    if not blocks:
        return []
    futures_shared = [client.scatter([obj], broadcast=True, hash=False)[0] for obj in shared]
    futures = [
        client.submit(_run_block, fn, block, *futures_shared, pure=False) for block in blocks
    ]
    logger.debug("submitted %d blocks of %s to the dask client", len(futures), fn.__name__)
    try:
        return list(client.gather(futures))
    finally:
        for fut in futures + futures_shared:
            fut.release()


def worker_addresses(client: Any) -> list[str]:
    """Addresses of ``client``'s workers, sorted (a stable partition -> worker assignment)."""
    workers = sorted(client.scheduler_info().get("workers", {}))
    if not workers:
        raise InvalidInputError("the dask cluster has no workers")
    return workers


#: per worker process: bytes of the halo pieces its tasks have cut for other partitions (the
#: rows and positions sent worker to worker by the KS hops and the layered forward passes)
_HALO_BYTES = [0]


def count_halo(piece: Any) -> Any:
    """Worker side: add the bytes of ``piece`` (tensors, or a tuple of them) to this process's
    halo counter and return it unchanged."""
    items = piece if isinstance(piece, tuple) else (piece,)
    _HALO_BYTES[0] += sum(int(t.numel()) * t.element_size() for t in items if hasattr(t, "numel"))
    return piece


def _halo_bytes(dask_worker: Any = None) -> int:
    return _HALO_BYTES[0]


def halo_bytes_sent(client: Any) -> int:
    """Bytes of halo pieces the workers have cut for one another so far (gnnaudit's own count,
    summed over the workers; what moves between them, whichever transport dask uses)."""
    return int(sum(client.run(_halo_bytes).values()))


def _outgoing_bytes(dask_worker: Any) -> int:
    return int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0))


def transferred_bytes(client: Any) -> int:
    """Bytes the workers have sent to other workers so far (dask's own counters, summed)."""
    return int(sum(client.run(_outgoing_bytes).values()))


def _peak_rss(dask_worker: Any) -> int:
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def worker_peak_rss(client: Any) -> dict[str, int]:
    """Peak resident memory (bytes, ``ru_maxrss``) of each worker process so far (with
    in-process workers, ``processes=False``, this is the whole process's peak)."""
    return {addr: int(v) for addr, v in client.run(_peak_rss).items()}


#: the exceptions dask raises to a client whose task lost its worker or its inputs (matched by
#: name: dask is imported lazily, and these live in different modules across versions)
_LOST = {"FutureCancelledError", "CancelledError", "KilledWorker", "CommClosedError"}


def _memory_limits(client: Any) -> str:
    try:
        workers = client.scheduler_info().get("workers", {})
        limits = sorted({int(w.get("memory_limit") or 0) for w in workers.values()})
    except Exception:  # noqa: BLE001  # the cluster may be gone: no figure, still an error
        return "unknown"
    if not limits or limits == [0]:
        return "none set"
    return ", ".join(f"{b / 2**30:.2f} GiB" for b in limits)


#: seconds between two checks, while a pinned gather waits, that its workers are still there
PINNED_POLL_SECONDS = 5.0


def _unrunnable(keys: list[Any], dask_scheduler: Any = None) -> int:
    """Scheduler side: how many of the tasks ``keys`` and of their dependencies wait with no
    worker allowed to run them (state ``no-worker``: pinned to a worker that is gone)."""
    seen: set[Any] = set()
    stack = [dask_scheduler.tasks[k] for k in keys if k in dask_scheduler.tasks]
    stuck = 0
    while stack:
        ts = stack.pop()
        if ts.key in seen:
            continue
        seen.add(ts.key)
        stuck += ts.state == "no-worker"
        stack.extend(ts.dependencies)
    return stuck


def _lost(step: str, cause: str, limits: str) -> WorkerLostError:
    return WorkerLostError(
        f"a dask worker was lost during {step} ({cause}). Workers' memory limit: {limits}; a "
        "dask nanny restarts a worker above 95% of its limit. Give each worker more memory, add "
        "workers, or lower gnnaudit.audit.distributed.block.FORWARD_CHUNK_BYTES; the workers' "
        "logs say why it died."
    )


def gather_pinned(client: Any, futures: Any, step: str) -> Any:
    """``client.gather(futures)`` for tasks pinned to workers (a partition's data lives on one
    worker). A lost worker raises :class:`~gnnaudit.errors.WorkerLostError` naming ``step``
    and the workers' memory limits (read before gathering: a restarting worker has none yet):
    when dask reports it (cancelled futures, ``KilledWorker``), and when the tasks or their
    inputs wait for a worker that is gone (state ``no-worker``, checked on the scheduler every
    :data:`PINNED_POLL_SECONDS`: a restarted worker comes back under a new address, and tasks
    pinned to the old one would wait forever)."""
    import time

    limits = _memory_limits(client)
    pending = futures if isinstance(futures, list) else [futures]
    keys = [f.key for f in pending]
    try:
        checked, delay = time.monotonic(), 0.001
        while not all(f.done() for f in pending):  # the client's own view: no round trip
            # back off from 1 ms to 50 ms: a short task (one forward pass of a small
            # partition) is gathered within a few ms, not on a fixed 50 ms tick (~25 ms
            # average wait per pass, hundreds of passes per distributed audit)
            time.sleep(delay)
            delay = min(2 * delay, 0.05, PINNED_POLL_SECONDS)
            if time.monotonic() - checked >= PINNED_POLL_SECONDS:
                checked = time.monotonic()
                stuck = client.run_on_scheduler(_unrunnable, keys)
                if stuck:
                    cause = f"{stuck} tasks pinned to a worker that is gone"
                    raise _lost(step, cause, limits)
        return client.gather(futures)
    except Exception as exc:
        if not {c.__name__ for c in type(exc).__mro__} & _LOST:
            raise
        cause = f"{type(exc).__name__}: the tasks pinned to it were cancelled"
        raise _lost(step, cause, limits) from exc
