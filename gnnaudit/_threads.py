"""One thread policy for torch, BLAS / OpenMP and faiss.

This is a leaf module (it imports only :mod:`gnnaudit.errors` and :mod:`gnnaudit._validation`;
``torch``, ``threadpoolctl`` and ``faiss`` are imported inside :func:`configure_threads`), so
every layer may use it.

Why: torch, OpenBLAS and faiss each start one thread per core by default. On a small graph the
work per operation is far smaller than the cost of waking and synchronising those threads, and
on a shared machine the threads of several processes oversubscribe the cores: the README
quickstart's training took 4.9 s with one torch thread and 86-179 s with torch's default on a
busy 2-core machine. The policy (:func:`configure_threads`), first rule that applies:

1. an explicit ``n`` (``configure_threads(4)``, ``gnnaudit --threads 4``, ``audit_model(...,
   threads=4)``) wins, and stays *pinned* for the process: later size-based calls keep it;
2. the user's ``OMP_NUM_THREADS`` environment variable is respected;
3. by graph size: 1 thread below :data:`SIZE_THRESHOLD` nodes, all available cores from it on;
4. no graph size given: all available cores (torch's own default).
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from typing import Any

from gnnaudit._validation import check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "ThreadChoice",
    "configure_threads",
    "choose_threads",
    "check_threads",
    "available_cores",
    "SIZE_THRESHOLD",
]

logger = logging.getLogger(__name__)

#: graphs with fewer nodes than this run on 1 thread, larger ones on all cores. Measured by
#: ``benchmarks/bench_threads.py`` (``benchmarks/results/threads.md``) on an idle 2-core
#: machine: 2 threads are no faster than 1 at 1,000 nodes (training 0.95x), gain at most 1.2x at
#: 3,000 and 1.3x (training), 1.1x (forward), 1.3x (KS) from 5,000 on, 1.4-1.8x at 20,000 and
#: 100,000. On the same machine busy with other jobs (load 2-12), 2 threads were 0.08-0.95x as
#: fast at every size: on a shared machine pin ``--threads 1`` or ``OMP_NUM_THREADS=1``.
SIZE_THRESHOLD = 5_000

#: the explicit ``n`` of the last ``configure_threads(n)`` (pinned for the process), or None
_pinned: int | None = None


@dataclass(frozen=True)
class ThreadChoice:
    """What :func:`configure_threads` applied.

    Attributes
    ----------
    threads : the number of threads given to torch, BLAS / OpenMP and faiss.
    source : why: ``"explicit"`` (``n`` given now), ``"pinned"`` (an earlier explicit ``n``),
        ``"env"`` (``OMP_NUM_THREADS``), ``"size"`` (the graph-size threshold) or
        ``"default"`` (no size given: all cores).
    num_nodes : the graph size the choice was made for (None when not given).
    faiss : whether faiss was found and set.
    """

    threads: int
    source: str
    num_nodes: int | None
    faiss: bool

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``report.run_info``)."""
        return asdict(self)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def _env_threads() -> int | None:
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not value:
        return None
    try:
        # OpenMP allows a list ("4,2") for nested levels; the first level is what counts here
        threads = int(value.split(",")[0])
    except ValueError:
        logger.warning("ignoring OMP_NUM_THREADS=%r (not an integer)", value)
        return None
    return threads if threads >= 1 else None


def choose_threads(n: Any = None, *, num_nodes: Any = None) -> tuple[int, str]:
    """The policy of the module docstring, without applying it: ``(threads, source)``."""
    if n is not None:
        return check_threads(n), "explicit"
    if _pinned is not None:
        return _pinned, "pinned"
    env = _env_threads()
    if env is not None:
        return env, "env"
    if num_nodes is None:
        return available_cores(), "default"
    num_nodes = check_int("num_nodes", num_nodes, minimum=0)
    return (1 if num_nodes < SIZE_THRESHOLD else available_cores()), "size"


def check_threads(n: Any) -> int:
    """``n`` as an int if it is a valid thread count (an integer in [1, 4096])."""
    try:
        return check_int("threads", n, minimum=1, maximum=4096)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{exc} (the number of CPU threads, an integer >= 1)") from exc


def configure_threads(n: Any = None, *, num_nodes: Any = None) -> ThreadChoice:
    """Apply one thread count to torch, BLAS / OpenMP and faiss; return what was chosen.

    Parameters
    ----------
    n : the number of threads (an integer >= 1, else
        :class:`~gnnaudit.errors.InvalidInputError` naming ``threads``). Given, it wins and is
        pinned: later calls without ``n`` (``audit_model`` sizing itself to the graph) keep it.
    num_nodes : the size of the graph about to be processed, for the size rule (1 thread below
        :data:`SIZE_THRESHOLD` nodes, all cores from it on).

    What is set: ``torch.set_num_threads`` (intra-op threads),
    ``threadpoolctl.threadpool_limits`` (every BLAS and OpenMP runtime loaded in the process:
    OpenBLAS of numpy / scipy, the OpenMP of torch and faiss) and
    ``faiss.omp_set_num_threads`` when faiss is installed. The change is process-wide.
    """
    global _pinned
    threads, source = choose_threads(n, num_nodes=num_nodes)
    if source == "explicit":
        _pinned = threads
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)  # applied now; not used as a context manager
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass
    has_faiss = False
    loader = logging.getLogger("faiss.loader")  # logs each SIMD variant it tries at INFO
    level = loader.level
    loader.setLevel(max(level, logging.WARNING))
    try:
        import faiss

        faiss.omp_set_num_threads(threads)
        has_faiss = True
    except ImportError:  # pragma: no cover - faiss is optional at runtime
        pass
    finally:
        loader.setLevel(level)
    nodes = None if num_nodes is None else int(num_nodes)
    choice = ThreadChoice(threads=threads, source=source, num_nodes=nodes, faiss=has_faiss)
    logger.info(
        "threads: %d (%s%s)",
        threads,
        source,
        "" if nodes is None else f", {nodes} nodes, threshold {SIZE_THRESHOLD}",
    )
    return choice


def _reset_pin() -> None:
    """Forget a pinned explicit ``n`` (for tests)."""
    global _pinned
    _pinned = None
