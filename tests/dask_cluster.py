"""A small Dask LocalCluster for the tests (shared by conftest and the test modules)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import warnings

#: Dask's diagnostics off or slowed: the workers' statistical profiler (a stack sample every
#: 10 ms), the event-loop tick check (20 ms) and the system monitor (500 ms). None changes what
#: a task computes; together they cost an idle cluster about 10 % of a core (measured: 4.6 s
#: of CPU in 40 s against 0.7 s without them) and busy workers a sampling thread each.
QUIET = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "1s",
}


#: what the Dask test modules import (torch, PyG, Lightning, gnnaudit): the fork server that
#: starts the worker processes (:func:`fork_server_settings`) imports it once for all of them
PRELOAD = [
    "distributed",
    "numpy",
    "pandas",
    "scipy.sparse",
    "sklearn",
    "torch",
    "torch_geometric",
    "lightning",
    "gnnaudit.audit",
    "gnnaudit.cli.main",
    "gnnaudit.clustering",
    "gnnaudit.training.node_classifier",
]


def fork_server_settings() -> dict:
    """Dask settings that start the worker processes from a fork server preloading
    :data:`PRELOAD` (on Linux; elsewhere Dask's default, spawn: macOS does not fork safely
    after such imports). Each worker is still a process of its own (tasks and results pickled
    as before); it forks from a clean single-threaded server that has imported torch, PyG and
    gnnaudit, instead of importing them itself: a spawned worker costs about 5 s of CPU to
    import them and 1-2 s to close, two of them at once on CI's two cores."""
    if not sys.platform.startswith("linux"):
        return {}
    import dask
    from distributed.utils import get_mp_context

    method = {"distributed.worker.multiprocessing-method": "forkserver"}
    with dask.config.set(method):
        # Dask sets its own preload list on first use: set it first, then this one (the fork
        # server starts with the first worker and keeps its list until this process ends)
        get_mp_context().set_forkserver_preload(PRELOAD)
    return method


@contextlib.contextmanager
def local_dask_client(processes: bool = True):
    """A Dask client on a 2-worker LocalCluster of single-threaded workers (processes, or
    threads of this process with ``processes=False``) with :data:`QUIET` diagnostics, closed
    on exit; worker processes fork from a server that has imported :data:`PRELOAD`."""
    import dask
    import distributed

    config = {**QUIET, **(fork_server_settings() if processes else {})}
    with warnings.catch_warnings(), dask.config.set(config):  # the workers get it from the nanny
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, processes=processes, threads_per_worker=1, dashboard_address=None
        )
        dask_client = distributed.Client(cluster)
    try:
        yield dask_client
    finally:
        dask_client.close()
        cluster.close()


def _import(name: str) -> None:
    importlib.import_module(name)


def import_on_workers(client, name: str) -> None:
    """Import module ``name`` in every worker of ``client``, all at the same time."""
    client.run(_import, name)
