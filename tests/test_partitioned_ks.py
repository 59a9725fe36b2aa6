"""partitioned_ks equals ks_embedding on small random graphs, for random and contiguous
partitions, both modes and L = 0..3 (the partitioned run reorders no floating-point work)."""

from __future__ import annotations

import pytest
import torch

from gnnaudit import InvalidInputError
from gnnaudit.graph_ops import ks_embedding
from gnnaudit.graph_ops.partitioned import contiguous_partition, partitioned_ks


def random_graph(seed: int, n: int = 60, m: int = 240, d: int = 5):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    x[::7] = 0.0  # zero rows: cosine 0
    edge_index = torch.randint(0, n, (2, m), generator=gen)  # directed, duplicates, self loops
    return x, edge_index


def partitions(n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return {
        "contiguous-4": contiguous_partition(n, 4),
        "random-5": torch.randint(0, 5, (n,), generator=gen),
        "one": torch.zeros(n, dtype=torch.long),
        "singletons": torch.arange(n),
        "with-empty": torch.randint(0, 3, (n,), generator=gen) * 2,  # ids 1, 3 unused
    }


@pytest.mark.parametrize("mode", ["halo", "exchange"])
@pytest.mark.parametrize("num_hops", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_partitioned_equals_unpartitioned(mode, num_hops, seed):
    x, edge_index = random_graph(seed)
    full = ks_embedding(x, edge_index, num_hops=num_hops, alpha=0.3)
    for name, parts in partitions(x.size(0), seed).items():
        res = partitioned_ks(x, edge_index, parts, num_hops=num_hops, alpha=0.3, mode=mode)
        assert res.embedding.dtype == full.dtype
        torch.testing.assert_close(res.embedding, full, rtol=0, atol=1e-12, msg=name)
        assert sum(res.part_sizes) == x.size(0)


def test_float32_undirected_graph_is_exact():
    x, edge_index = random_graph(3, n=200, m=600, d=8)
    x = x.float()
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    full = ks_embedding(x, edge_index, num_hops=3)
    for mode in ("halo", "exchange"):
        res = partitioned_ks(x, edge_index, contiguous_partition(200, 8), num_hops=3, mode=mode)
        assert torch.equal(res.embedding, full), mode


def test_halo_sizes_on_a_path():
    # path 0 - 1 - ... - 9 (both directions), two halves: the L-hop halo is L nodes
    src = torch.arange(9)
    edge_index = torch.cat([torch.stack([src, src + 1]), torch.stack([src + 1, src])], dim=1)
    x = torch.rand(10, 3, generator=torch.Generator().manual_seed(0))
    parts = contiguous_partition(10, 2)
    for hops in (1, 2, 3):
        res = partitioned_ks(x, edge_index, parts, num_hops=hops)
        assert res.halo_sizes == [hops, hops]
        assert torch.equal(res.embedding, ks_embedding(x, edge_index, num_hops=hops))
    ex = partitioned_ks(x, edge_index, parts, num_hops=3, mode="exchange")
    assert ex.halo_sizes == [1, 1] and ex.edges == [9, 9]
    assert all(b > 0 for b in ex.working_set_bytes(3))


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        (torch.zeros(5, dtype=torch.long), "one partition id per node"),
        (torch.zeros(10), "integer"),
        (-torch.ones(10, dtype=torch.long), ">= 0"),
    ],
)
def test_bad_parts_are_named(parts, match):
    x, edge_index = torch.rand(10, 2), torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(InvalidInputError, match=match):
        partitioned_ks(x, edge_index, parts)


def test_bad_mode_is_named():
    with pytest.raises(InvalidInputError, match="mode"):
        partitioned_ks(torch.rand(3, 2), torch.tensor([[0], [1]]), [0, 0, 1], mode="fast")
