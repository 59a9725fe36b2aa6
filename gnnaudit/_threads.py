"""One thread policy for torch, BLAS / OpenMP and faiss.

This is a leaf module (it imports only :mod:`gnnaudit.errors` and :mod:`gnnaudit._validation`;
``torch``, ``threadpoolctl`` and ``faiss`` are imported inside :func:`configure_threads`), so
every layer may use it.

Why: torch, OpenBLAS and faiss each start one thread per core by default. On a small graph the
work per operation is far smaller than the cost of waking and synchronising those threads, and
on a shared machine the threads of several processes oversubscribe the cores: the README
quickstart's training took 4.9 s with one torch thread and 86-179 s with torch's default on a
busy 2-core machine. The policy (:func:`configure_threads`), first rule that applies:

1. an explicit ``n`` (``thread_limits(4)``, ``audit_model(..., threads=4)``) wins;
2. inside an enclosing ``with thread_limits(n):`` block with an explicit ``n`` (``gnnaudit
   --threads 4`` runs its command in one), that ``n``: size-based calls inside keep it;
3. the user's ``OMP_NUM_THREADS`` environment variable is respected;
4. by graph size: 1 thread below :data:`SIZE_THRESHOLD` nodes, all available cores from it on;
5. no graph size given: all available cores (torch's own default).

No hidden global state: library calls (``run_audit``, ``train_node_classifier``) apply the
choice with the context manager :func:`thread_limits`, for the duration of the call only; the
previous torch, BLAS / OpenMP and faiss thread counts are restored afterwards, also when the
call raises. The enclosing explicit ``n`` of rule 2 lives in a :class:`contextvars.ContextVar`
set and reset by that ``with`` block. :func:`configure_threads` applies a choice process-wide,
for scripts that want exactly that.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from gnnaudit._validation import check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "ThreadChoice",
    "thread_limits",
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

#: the explicit ``n`` of the innermost enclosing ``with thread_limits(n):`` block (scoped by
#: that block: set on entry, reset on exit), or None
_scoped: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "gnnaudit_thread_limit", default=None
)


@dataclass(frozen=True)
class ThreadChoice:
    """What :func:`configure_threads` applied.

    Attributes
    ----------
    threads : the number of threads given to torch, BLAS / OpenMP and faiss.
    source : why: ``"explicit"`` (``n`` given now), ``"scoped"`` (the explicit ``n`` of an
        enclosing :func:`thread_limits` block),
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
    scoped = _scoped.get()
    if scoped is not None:
        return scoped, "scoped"
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


def _current() -> tuple[int, list[tuple[Any, int]], int | None]:
    """The thread counts in force now: torch's, each loaded BLAS / OpenMP runtime's (its
    ``threadpoolctl`` controller and count, one per library file) and faiss's (None without
    faiss)."""
    import torch

    pools: list[tuple[Any, int]] = []
    try:
        from threadpoolctl import ThreadpoolController

        pools = [(lib, int(lib.num_threads)) for lib in ThreadpoolController().lib_controllers]
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass
    faiss_threads = None
    faiss = _faiss()
    if faiss is not None:
        faiss_threads = int(faiss.omp_get_max_threads())
    return torch.get_num_threads(), pools, faiss_threads


def _faiss() -> Any:
    """The faiss module when installed (its loader's INFO chatter silenced), else None."""
    loader = logging.getLogger("faiss.loader")  # logs each SIMD variant it tries at INFO
    level = loader.level
    loader.setLevel(max(level, logging.WARNING))
    try:
        import faiss

        return faiss
    except ImportError:  # pragma: no cover - faiss is optional at runtime
        return None
    finally:
        loader.setLevel(level)


def _apply(threads: int) -> bool:
    """Give ``threads`` to torch, every BLAS / OpenMP runtime and faiss; whether faiss was set."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass
    faiss = _faiss()
    if faiss is not None:
        faiss.omp_set_num_threads(threads)
    return faiss is not None


def _choice(n: Any, num_nodes: Any) -> ThreadChoice:
    threads, source = choose_threads(n, num_nodes=num_nodes)
    nodes = None if num_nodes is None else int(num_nodes)
    has_faiss = _apply(threads)
    logger.info(
        "threads: %d (%s%s)",
        threads,
        source,
        "" if nodes is None else f", {nodes} nodes, threshold {SIZE_THRESHOLD}",
    )
    return ThreadChoice(threads=threads, source=source, num_nodes=nodes, faiss=has_faiss)


@contextlib.contextmanager
def thread_limits(n: Any = None, *, num_nodes: Any = None) -> Iterator[ThreadChoice]:
    """Apply the thread policy (module docstring) for the duration of the ``with`` block and
    restore the previous thread counts afterwards, also when the block raises.

    Parameters
    ----------
    n : the number of threads (an integer >= 1, else
        :class:`~gnnaudit.errors.InvalidInputError` naming ``threads``). Given, it wins, and
        size-based calls nested in the block keep it.
    num_nodes : the size of the graph about to be processed, for the size rule.

    Yields the :class:`ThreadChoice` applied. What is set and restored:
    ``torch.set_num_threads`` (intra-op threads), every BLAS and OpenMP runtime loaded in the
    process (``threadpoolctl``: OpenBLAS of numpy / scipy, the OpenMP of torch and faiss) and
    ``faiss.omp_set_num_threads`` when faiss is installed.
    """
    import torch

    torch_before, pools_before, faiss_before = _current()
    token = None
    try:
        choice = _choice(n, num_nodes)
        if choice.source == "explicit":
            token = _scoped.set(choice.threads)
        yield choice
    finally:
        if token is not None:
            _scoped.reset(token)
        if torch.get_num_threads() != torch_before:
            torch.set_num_threads(torch_before)
        for lib, count in pools_before:  # each runtime back to its own count
            lib.set_num_threads(count)
        faiss = _faiss() if faiss_before is not None else None
        if faiss is not None:
            faiss.omp_set_num_threads(faiss_before)


def configure_threads(n: Any = None, *, num_nodes: Any = None) -> ThreadChoice:
    """Apply one thread count to torch, BLAS / OpenMP and faiss process-wide, and return what
    was chosen (the policy of the module docstring). For scripts and benchmarks that want
    exactly that; library calls use :func:`thread_limits`, which restores the previous counts.

    Parameters
    ----------
    n : the number of threads (an integer >= 1, else
        :class:`~gnnaudit.errors.InvalidInputError` naming ``threads``).
    num_nodes : the size of the graph about to be processed, for the size rule.
    """
    return _choice(n, num_nodes)
