"""KSEmbedding keeps PyG's transform contract: BaseTransform with an informative repr, no
mutation of its input, T.Compose, dataset transform= / pre_transform=, Batch of graphs without
mixing them, a clear error for HeteroData. No download: graphs come from FakeDataset."""

from __future__ import annotations

import copy
import random

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data, HeteroData, InMemoryDataset
from torch_geometric.datasets import FakeDataset

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import KSEmbedding, ks_embedding
from gnnaudit.graph_ops.transforms import KSEmbedding as TransformsKSEmbedding


def fake_graphs(num_graphs: int, seed: int = 0) -> list[Data]:
    random.seed(seed)  # FakeDataset draws sizes with `random` and tensors with torch
    torch.manual_seed(seed)
    ds = FakeDataset(num_graphs=num_graphs, avg_num_nodes=30, avg_degree=4, num_channels=5)
    return [ds[i] for i in range(num_graphs)]


def test_is_a_base_transform_with_informative_repr():
    t = KSEmbedding(num_hops=2, alpha=0.25)
    assert isinstance(t, T.BaseTransform) and TransformsKSEmbedding is KSEmbedding
    assert repr(t) == "KSEmbedding(num_hops=2, alpha=0.25)"
    assert repr(KSEmbedding()) == "KSEmbedding(num_hops=3, alpha=0.5)"


def test_never_mutates_its_input():
    data = fake_graphs(1)[0]
    before = copy.deepcopy(data)
    keys = set(data.keys())
    out = KSEmbedding(num_hops=2)(data)
    assert set(data.keys()) == keys and "ks" not in data and "ks_params" not in data
    for key in keys:
        assert torch.equal(data[key], before[key]), key
    assert out.x is data.x and out.edge_index is data.edge_index  # shallow copy, not a clone
    torch.testing.assert_close(out.ks, ks_embedding(data.x, data.edge_index, 2, 0.5))
    assert KSEmbedding.recorded_params(out) == (2, 0.5)


def test_composes_in_compose():
    data = fake_graphs(1, seed=1)[0]
    data.edge_index = data.edge_index[:, ::2]  # make it directed
    pipeline = T.Compose([T.ToUndirected(), KSEmbedding(num_hops=1, alpha=0.3)])
    assert "KSEmbedding(num_hops=1, alpha=0.3)" in repr(pipeline)
    out = pipeline(data)
    undirected = T.ToUndirected()(data)
    torch.testing.assert_close(out.ks, ks_embedding(undirected.x, undirected.edge_index, 1, 0.3))
    assert "ks" not in data


def test_as_dataset_transform():
    random.seed(2)
    torch.manual_seed(2)
    ds = FakeDataset(num_graphs=3, avg_num_nodes=25, num_channels=4, transform=KSEmbedding(1, 0.5))
    for i in range(3):
        g = ds[i]
        torch.testing.assert_close(g.ks, ks_embedding(g.x, g.edge_index, 1, 0.5))
    assert "ks" not in ds._data  # the stored graphs stay untouched


class FakeGraphs(InMemoryDataset):
    """FakeDataset graphs stored through PyG's processing pipeline, so that ``pre_transform``
    is applied and saved. (``FakeDataset`` itself accepts ``pre_transform=`` but, as of PyG
    2.8, never applies it: it has no processing step.)"""

    def __init__(self, root, pre_transform=None):
        super().__init__(root, pre_transform=pre_transform)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self):
        return []

    @property
    def processed_file_names(self):
        return ["graphs.pt"]

    def download(self):  # nothing to download: the graphs are generated
        pass

    def process(self):
        graphs = fake_graphs(3, seed=3)
        if self.pre_transform is not None:
            graphs = [self.pre_transform(g) for g in graphs]
        self.save(graphs, self.processed_paths[0])


def test_as_dataset_pre_transform(tmp_path):
    ds = FakeGraphs(tmp_path, pre_transform=KSEmbedding(num_hops=2, alpha=0.3))
    again = FakeGraphs(tmp_path, pre_transform=KSEmbedding(num_hops=2, alpha=0.3))  # from disk
    for dataset in (ds, again):
        for i, raw in enumerate(fake_graphs(3, seed=3)):
            g = dataset[i]
            assert torch.equal(g.x, raw.x) and torch.equal(g.edge_index, raw.edge_index)
            torch.testing.assert_close(g.ks, ks_embedding(raw.x, raw.edge_index, 2, 0.3))
            assert KSEmbedding.recorded_params(g) == (2, 0.3)
    # PyG compares the repr stored with the processed files: a changed transform is noticed
    with pytest.warns(UserWarning, match="pre_transform"):
        FakeGraphs(tmp_path, pre_transform=KSEmbedding(num_hops=3, alpha=0.3))


def test_batch_of_graphs_is_not_mixed():
    graphs = fake_graphs(4, seed=4)
    batch = Batch.from_data_list(graphs)
    out = KSEmbedding(num_hops=3, alpha=0.4)(batch)
    assert "ks" not in batch and "ks" not in batch._slice_dict  # the input batch is untouched
    assert isinstance(out, Batch) and out.num_graphs == 4
    expected = [ks_embedding(g.x, g.edge_index, 3, 0.4) for g in graphs]
    torch.testing.assert_close(out.ks, torch.cat(expected), rtol=1e-6, atol=1e-6)
    for i, g in enumerate(out.to_data_list()):
        torch.testing.assert_close(g.ks, expected[i], rtol=1e-6, atol=1e-6)
        assert KSEmbedding.recorded_params(g) == (3, 0.4)
    assert KSEmbedding.recorded_params(out) == (3, 0.4)
    # a batch whose edges join two graphs would mix them: refused
    bad = batch.clone()
    bad.edge_index = torch.cat([bad.edge_index, torch.tensor([[0], [bad.num_nodes - 1]])], 1)
    with pytest.raises(InvalidInputError, match="joins two graphs"):
        KSEmbedding()(bad)


def test_hetero_data_and_missing_attributes_are_refused():
    hetero = HeteroData()
    hetero["user"].x = torch.ones(3, 2)
    hetero["user", "follows", "user"].edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(InvalidInputError, match="HeteroData.*to_homogeneous"):
        KSEmbedding()(hetero)
    with pytest.raises(InvalidInputError, match="data.x and data.edge_index"):
        KSEmbedding()(Data(x=torch.ones(2, 2)))
