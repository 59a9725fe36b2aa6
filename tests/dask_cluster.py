"""A small Dask LocalCluster for the tests (shared by conftest and the test modules)."""

from __future__ import annotations

import contextlib
import importlib
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


@contextlib.contextmanager
def local_dask_client(processes: bool = True):
    """A Dask client on a 2-worker LocalCluster of single-threaded workers (processes, or
    threads of this process with ``processes=False``) with :data:`QUIET` diagnostics, closed
    on exit."""
    import dask
    import distributed

    with warnings.catch_warnings(), dask.config.set(QUIET):  # the workers get it from the nanny
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
