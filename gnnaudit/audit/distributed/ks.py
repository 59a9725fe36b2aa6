r"""The KS embedding (CE paper Eq. 5-7) computed on the workers of a Dask cluster, partition by
partition, with a per-hop halo exchange between workers.

:func:`distributed_ks` runs, on the partitions of a :class:`~gnnaudit.audit.distributed.store.GraphStore`:

1. **load** (one task per partition, pinned to its worker): the worker reads its partition file
   (own rows, the edges into them) from the shared folder and builds its
   :class:`~gnnaudit.graph_ops.ks_halo.HaloBlock` (the 1-hop in-halo and the local CSR graph);
2. **pair plans** (setup, once): for every ordered pair of partitions ``(p, q)`` the positions
   of the rows ``q`` owns among ``p``'s halo and among ``q``'s rows;
3. **hops** ``l = 0..L-1`` (bulk-synchronous): every partition ``q`` cuts from its current rows
   :math:`\mathbf{x}^l` the block each other partition needs (a task on ``q``'s worker);
   the partition ``p`` receives these blocks (dask moves them worker to worker, never through
   the client or the scheduler) and computes :math:`\mathbf{x}^{l+1}` of its rows and the
   running sum :math:`\mathbf{x}^{agg}` on its own worker.

The result stays on the workers (:class:`DistributedKS`): one block of rows per partition, as
a Dask array (:meth:`DistributedKS.to_dask_array`) or gathered in node order
(:meth:`DistributedKS.gather`). It is equal to :func:`~gnnaudit.graph_ops.ks_embedding` bit for
bit (see :mod:`gnnaudit.graph_ops.ks_halo`; the tests assert ``torch.equal``).

Data moved between workers per hop: :math:`\sum_P |H_1(P)|\, d` values (``halo_rows``); at
setup each partition's id list goes to the others (8 bytes per node and other partition).
On a small-world graph the 1-hop halo is most of the graph (docs/scaling.md), so each hop
moves about ``(P - 1) / P`` of the rows per partition at worst.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from gnnaudit._distributed import check_client, count_halo, gather_pinned, worker_addresses
from gnnaudit._validation import MAX_NUM_HOPS, check_float, check_int
from gnnaudit.audit.distributed.store import GraphStore, load_part
from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops.ks_halo import HaloBlock, add_hop, first_sum, take_rows
from gnnaudit.graph_ops.ks_propagation import ks_input_bound

__all__ = ["DistributedKS", "distributed_ks"]

logger = logging.getLogger(__name__)


def _load_block(store: GraphStore, p: int, num_hops: int) -> tuple[HaloBlock, torch.Tensor, Any]:
    """Worker task: partition ``p``'s plan, its feature rows (propagated in float32 for half
    inputs, as :func:`ks_embedding`) and the dtype of the result."""
    part = load_part(store, p)
    x = part["x"]
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    if x.numel() and float(x.abs().max()) > ks_input_bound(x.dtype, num_hops):
        raise InvalidInputError(
            f"x has entries above ks_input_bound({x.dtype}, {num_hops}) in partition {p}; "
            "rescale x or store float64 features"
        )
    out_dtype = x.dtype
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float32)
    own, edges = part["own"], part.pop("edge_index")
    del part
    return HaloBlock.build(own, edges), x, out_dtype


def _own(block: HaloBlock) -> torch.Tensor:
    return block.own


def _halo_size(block: HaloBlock) -> int:
    return int(block.halo.numel())


def _pair_plan(block: HaloBlock, other_own: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return block.pair_plan(other_own)


def _step(
    block: HaloBlock, alpha: float, cur: torch.Tensor, *pieces: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    return block.step(alpha, cur, list(pieces))


def _halo_piece(plan: tuple[torch.Tensor, torch.Tensor], rows: torch.Tensor) -> Any:
    """Worker task on the sending partition: ``(positions in the receiver's halo, rows)``."""
    return count_halo((plan[0], take_rows(rows, plan[1])))


def _finish(total: torch.Tensor, dtype: torch.dtype) -> Any:
    return total.to(dtype).numpy()


def _clone(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@dataclass
class DistributedKS:
    """The KS embedding held by the workers, one block of rows per partition.

    Attributes
    ----------
    blocks : per partition, a future of its rows of ``x^agg`` (a numpy array).
    owns : per partition, a future of its sorted node ids (a torch tensor).
    part_sizes, halo_rows : per partition, owned rows and 1-hop halo rows (received per hop).
    num_nodes, num_features, num_hops : sizes; ``dtype``: numpy dtype of the blocks.
    workers : the worker address of each partition.
    """

    client: Any
    blocks: list[Any]
    owns: list[Any]
    part_sizes: list[int]
    halo_rows: list[int]
    num_nodes: int
    num_features: int
    num_hops: int
    dtype: Any
    workers: list[str] = field(default_factory=list)

    @property
    def halo_bytes(self) -> int:
        """Bytes of halo rows received by all partitions over all hops (computed from the
        halo sizes: rows x d x item size x hops)."""
        item = torch.empty(0, dtype=self.dtype).element_size()
        return sum(self.halo_rows) * self.num_features * item * self.num_hops

    def to_dask_array(self) -> Any:
        """A ``dask.array`` of the blocks stacked in partition order (node order for
        contiguous partitions); computing it gathers the rows."""
        import dask
        import dask.array as da

        np_dtype = torch.empty(0, dtype=self.dtype).numpy().dtype
        parts = [
            da.from_delayed(dask.delayed(f), shape=(size, self.num_features), dtype=np_dtype)
            for f, size in zip(self.blocks, self.part_sizes, strict=True)
        ]
        return da.concatenate(parts, axis=0)

    def gather(self) -> torch.Tensor:
        """The whole ``(num_nodes, d)`` embedding here, rows in node order."""
        blocks = gather_pinned(self.client, self.blocks, "the KS embedding")
        owns = gather_pinned(self.client, self.owns, "the KS embedding")
        out = torch.empty((self.num_nodes, self.num_features), dtype=self.dtype)
        for own, rows in zip(owns, blocks, strict=True):
            out[own] = torch.from_numpy(rows)
        return out

    def release(self) -> None:
        """Free the blocks on the workers."""
        for fut in self.blocks + self.owns:
            fut.release()


def distributed_ks(
    client: Any, store: GraphStore, num_hops: int = 3, alpha: float = 0.5
) -> DistributedKS:
    """``ks_embedding(x, edge_index, num_hops, alpha)`` of the graph in ``store``, computed on
    ``client``'s workers with one partition per task (module docstring). Partition ``p`` runs
    on worker ``p mod W`` (workers sorted by address). Memory per worker: its partitions'
    working sets (:mod:`gnnaudit.graph_ops.ks_halo`)."""
    client = check_client(client)
    if client is None:
        raise InvalidInputError("distributed_ks needs a dask.distributed.Client")
    if not isinstance(store, GraphStore):
        raise InvalidInputError(f"store must be a GraphStore, got {type(store).__name__}")
    num_hops = check_int("num_hops", num_hops, minimum=0, maximum=MAX_NUM_HOPS)
    alpha = check_float("alpha", alpha, minimum=0.0, maximum=1.0)
    addrs = worker_addresses(client)
    where = [addrs[p % len(addrs)] for p in range(store.num_parts)]

    def on(p: int, fn: Any, *args: Any) -> Any:
        return client.submit(fn, *args, workers=[where[p]], allow_other_workers=False, pure=False)

    loaded = [on(p, _load_block, store, p, num_hops) for p in range(store.num_parts)]
    blocks = [on(p, operator.getitem, f, 0) for p, f in enumerate(loaded)]
    xs = [on(p, operator.getitem, f, 1) for p, f in enumerate(loaded)]
    owns = [on(p, _own, b) for p, b in enumerate(blocks)]
    out_dtype = gather_pinned(
        client, on(0, operator.getitem, loaded[0], 2), "loading the KS partitions"
    )
    del loaded
    halo = gather_pinned(
        client, [on(p, _halo_size, b) for p, b in enumerate(blocks)], "loading the KS partitions"
    )
    sizes = gather_pinned(client, [on(p, len, o) for p, o in enumerate(owns)], "the KS partitions")
    # plans[p][q]: on p's worker (own ids of q move there once), then sent to q for cutting
    pairs = [(p, q) for p in range(store.num_parts) for q in range(store.num_parts) if q != p]
    plans = {(p, q): on(p, _pair_plan, blocks[p], owns[q]) for p, q in pairs}
    totals = [on(p, _clone, x) for p, x in enumerate(xs)] if num_hops == 0 else []
    cur = xs
    for hop in range(num_hops):
        pieces = {(p, q): on(q, _halo_piece, plans[p, q], cur[q]) for p, q in pairs}
        nxt = [
            on(
                p,
                _step,
                blocks[p],
                alpha,
                cur[p],
                *[pieces[p, q] for q in range(store.num_parts) if q != p],
            )
            for p in range(store.num_parts)
        ]
        if hop == 0:
            totals = [on(p, first_sum, xs[p], nxt[p]) for p in range(store.num_parts)]
        else:
            totals = [on(p, add_hop, totals[p], nxt[p]) for p in range(store.num_parts)]
        cur = nxt
        del pieces
    results = [on(p, _finish, t, out_dtype) for p, t in enumerate(totals)]
    del totals, cur, xs, plans
    result = DistributedKS(
        client=client,
        blocks=results,
        owns=owns,
        part_sizes=[int(s) for s in sizes],
        halo_rows=[int(h) for h in halo],
        num_nodes=store.num_nodes,
        num_features=store.num_features,
        num_hops=num_hops,
        dtype=out_dtype,
        workers=where,
    )
    logger.info(
        "distributed KS: %d partitions on %d workers, %d halo rows per hop",
        store.num_parts,
        len(addrs),
        sum(result.halo_rows),
    )
    return result
