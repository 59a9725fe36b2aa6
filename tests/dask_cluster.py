"""A small Dask LocalCluster for the tests (shared by conftest and the test modules)."""

from __future__ import annotations

import contextlib
import importlib
import warnings


@contextlib.contextmanager
def local_dask_client(processes: bool = True):
    """A Dask client on a 2-worker LocalCluster of single-threaded workers (processes, or
    threads of this process with ``processes=False``), closed on exit."""
    import distributed

    with warnings.catch_warnings():
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
