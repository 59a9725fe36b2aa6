"""The audit on a Dask cluster (``run_audit(..., client=...)``): the graph store, the forward
passes and the KS embedding on the workers, and the set-up that ties them to one audit.

Only an audit given a ``dask.distributed.Client`` (``client=``, CLI ``--scheduler``) enters this
package: the pipeline (:mod:`gnnaudit.audit.pipeline`) imports it inside its client branch,
so a local audit never imports it (nor dask). Modules, bottom up:

- :mod:`~gnnaudit.audit.distributed.store`: the graph written once to a folder every worker
  reads, cut into partitions (:class:`GraphStore`, :func:`write_graph_store`, :class:`AddRows`);
- :mod:`~gnnaudit.audit.distributed.block`: one partition held on a worker for layer-by-layer
  passes, and the row chunks a layer runs in;
- :mod:`~gnnaudit.audit.distributed.layers`: layer-by-layer forward passes of a stacked
  message-passing model with a halo exchange per layer;
- :mod:`~gnnaudit.audit.distributed.forward`: the model's forward passes on the workers
  (:class:`RemoteForward`: layered, or one task per partition on its receptive-field ball);
- :mod:`~gnnaudit.audit.distributed.ks`: the KS embedding (CE paper Eq. 5-7) with a per-hop
  halo exchange (:func:`distributed_ks`);
- :mod:`~gnnaudit.audit.distributed.session`: the cluster side of one audit
  (:func:`setup_distributed`, :class:`DistributedAudit`), which the
  :class:`~gnnaudit.audit.context.AuditContext` calls for its forward passes and KS embedding.

Inside the audit this package imports the core (the model adapter) and the sensitivity
subpackage (the model's receptive field); the statistics reach it through the context only.
The flat paths of 0.2 (``gnnaudit.audit.distributed.store`` ...) and
``gnnaudit.training.audit_distributed`` still import, with a DeprecationWarning, until 0.3.0.
"""

from gnnaudit.audit.distributed.forward import RemoteForward
from gnnaudit.audit.distributed.ks import DistributedKS, distributed_ks
from gnnaudit.audit.distributed.session import (
    DistributedAudit,
    default_num_parts,
    setup_distributed,
)
from gnnaudit.audit.distributed.store import AddRows, GraphStore, write_graph_store

__all__ = [
    "DistributedAudit",
    "setup_distributed",
    "default_num_parts",
    "GraphStore",
    "write_graph_store",
    "AddRows",
    "RemoteForward",
    "DistributedKS",
    "distributed_ks",
]
