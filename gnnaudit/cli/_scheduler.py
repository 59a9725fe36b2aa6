"""``gnnaudit audit --scheduler ADDRESS``: run the audit's heavy steps on an existing Dask
cluster (:mod:`gnnaudit.audit.distributed.session`).

The CLI connects a ``dask.distributed.Client`` to the scheduler, writes the graph to
``--shared-dir`` (a folder every worker can read; default a temporary folder, which only
workers on this machine can read) and, with ``--checkpoint``, lets the workers read the
checkpoint from its path themselves (its absolute path must be valid on the workers too).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

from gnnaudit.errors import InvalidInputError

__all__ = ["add_scheduler_arguments", "cluster_options"]


def add_scheduler_arguments(group: Any) -> None:
    """``--scheduler``, ``--shared-dir`` and ``--partition`` on ``group``."""
    group.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the model's forward passes and the KS embedding on the Dask cluster of this "
        "scheduler (e.g. tcp://10.0.0.5:8786; needs gnnaudit[distributed])",
    )
    group.add_argument(
        "--shared-dir",
        default=None,
        metavar="PATH",
        help="with --scheduler: a folder every worker can read, where the graph is written for "
        "them (default: a temporary folder, for workers on this machine)",
    )
    group.add_argument(
        "--partition",
        default=None,
        choices=["contiguous", "metis"],
        help="with --scheduler: how nodes are split among the workers: contiguous ranges of "
        "node ids (default) or a METIS partition (fewer edges between workers on a graph "
        "with locality; needs gnnaudit[metis])",
    )


@contextlib.contextmanager
def cluster_options(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The ``run_audit`` options of ``--scheduler`` (empty without it), with the client
    connected for the duration of the block."""
    address = getattr(args, "scheduler", None)
    if address is None:
        for flag in ("shared_dir", "partition"):
            if getattr(args, flag, None) is not None:
                raise InvalidInputError(f"--{flag.replace('_', '-')} needs --scheduler")
        yield {}
        return
    try:
        from distributed import Client
    except ImportError as exc:
        raise InvalidInputError(
            "--scheduler needs dask.distributed: pip install 'gnnaudit[distributed]'"
        ) from exc
    try:
        client = Client(address, timeout=30)
    except OSError as exc:
        raise InvalidInputError(
            f"--scheduler {address}: cannot connect to a Dask scheduler ({exc})"
        ) from exc
    options: dict[str, Any] = {"client": client, "shared_dir": args.shared_dir}
    if getattr(args, "partition", None) is not None:
        options["partition"] = args.partition
    checkpoint = getattr(args, "checkpoint", None)
    # a gnnaudit NodeClassifier checkpoint (no --model): the workers load it from its path; a
    # Lightning checkpoint of the user's --model is loaded here and its weights shipped
    if checkpoint and ":" not in str(getattr(args, "model", "")):
        from gnnaudit.training import load_node_classifier

        options["model_loader"] = functools.partial(
            load_node_classifier, os.path.abspath(checkpoint)
        )
    try:
        yield options
    finally:
        client.close()
