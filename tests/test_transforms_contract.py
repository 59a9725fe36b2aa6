"""PyG contract of the graph_ops transforms: BaseTransform, copy contract, Compose, datasets,
batches without mixing graphs, HeteroData refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data, HeteroData, InMemoryDataset
from torch_geometric.datasets import FakeDataset
from torch_geometric.transforms import BaseTransform

from gnnaudit.errors import InvalidInputError
from gnnaudit.graph_ops import (
    ConstraintGraph,
    ConstraintGraphTransform,
    CoreGraph,
    CoreGraphTransform,
    DCTree,
    DCTreeTransform,
)

OUTPUTS = {
    CoreGraphTransform: ("core_mask", "cluster", "core_edge_index", "core_edge_weight"),
    DCTreeTransform: ("core_distance", "mst_edge_index", "mst_weight"),
    ConstraintGraphTransform: ("ml_component", "cl_exclusion", "constraints_feasible"),
}


def make_transforms():
    return [
        CoreGraphTransform(eps=0.9, min_samples=4),
        DCTreeTransform(min_samples=3),
        ConstraintGraphTransform(),
    ]


def with_constraints(data: Data, seed: int) -> Data:
    """Random must-link / cannot-link pairs inside the graph (PyG [2, m] layout)."""
    rng = np.random.default_rng(seed)
    n = int(data.num_nodes)
    pairs = rng.integers(0, n, size=(2, 8))
    pairs = pairs[:, pairs[0] != pairs[1]]
    out = data.clone()
    out.must_link_index = torch.as_tensor(pairs[:, :4])
    out.cannot_link_index = torch.as_tensor(pairs[:, 4:])
    return out


@pytest.fixture(scope="module")
def graphs():
    ds = FakeDataset(num_graphs=4, avg_num_nodes=40, avg_degree=4, num_channels=3)
    return [with_constraints(ds[i], seed=i) for i in range(len(ds))]


def snapshot(data: Data) -> dict:
    return {k: v.clone() if torch.is_tensor(v) else v for k, v in data.to_dict().items()}


def assert_same(a: Data, b: Data, keys) -> None:
    for key in keys:
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y), key


# ----------------------------------------------------------------------------- basics


@pytest.mark.parametrize("transform", make_transforms(), ids=lambda t: type(t).__name__)
def test_base_transform_repr_and_copy_contract(transform, graphs):
    data = graphs[0]
    assert isinstance(transform, BaseTransform)
    text = repr(transform)
    assert text.startswith(type(transform).__name__ + "(") and "=" in text
    before = snapshot(data)
    out = transform(data)
    assert out is not data
    assert set(data.to_dict()) == set(before)  # nothing written on the input
    for key, value in before.items():  # no input tensor modified in place
        assert torch.equal(getattr(data, key), value), key
    for key in OUTPUTS[type(transform)]:
        assert hasattr(out, key) and not hasattr(data, key)
    # forward works on the copy __call__ made: it writes there and copies nothing again
    target = data.clone()
    assert transform.forward(target) is target
    assert_same(target, out, OUTPUTS[type(transform)])


def test_core_graph_transform_matches_core_graph(graphs):
    data = graphs[1]
    out = CoreGraphTransform(eps=0.9, min_samples=4)(data)
    cg = CoreGraph.from_dbscan(data.x.double().numpy(), 0.9, 4)
    np.testing.assert_array_equal(out.cluster.numpy(), cg.labels)
    np.testing.assert_array_equal(out.core_mask.numpy(), cg.core_mask)
    np.testing.assert_array_equal(out.core_edge_index.numpy(), cg.edge_index)


def test_dc_tree_transform_matches_dc_tree(graphs):
    data = graphs[2]
    out = DCTreeTransform(min_samples=3)(data)
    tree = DCTree(min_samples=3).fit(data.x.double().numpy())
    n = data.num_nodes
    assert out.mst_edge_index.shape == (2, 2 * (n - 1))
    np.testing.assert_allclose(out.core_distance.numpy(), tree.core_distances_, rtol=1e-6)
    assert float(out.mst_weight.sum()) / 2 == pytest.approx(tree.mst_.total_weight, rel=1e-5)


def test_constraint_graph_transform_matches_constraint_graph(graphs):
    data = graphs[3]
    out = ConstraintGraphTransform()(data)
    g = ConstraintGraph(
        data.num_nodes, data.must_link_index.T.numpy(), data.cannot_link_index.T.numpy()
    )
    np.testing.assert_array_equal(out.ml_component.numpy(), g.components)
    np.testing.assert_array_equal(out.cl_exclusion.numpy(), g.exclusions)
    assert out.constraints_feasible.tolist() == [g.is_feasible]


def test_constraint_graph_transform_feasibility_and_missing_pairs():
    data = Data(x=torch.zeros(5, 2))
    data.must_link_index = torch.tensor([[0, 1], [1, 2]])
    data.cannot_link_index = torch.tensor([[0], [2]])  # inside the ML component 0-1-2
    out = ConstraintGraphTransform()(data)
    assert out.constraints_feasible.tolist() == [False]
    assert out.ml_component.tolist() == [0, 0, 0, 1, 2]
    bare = ConstraintGraphTransform()(Data(x=torch.zeros(3, 2)))  # no pairs at all
    assert bare.ml_component.tolist() == [0, 1, 2] and bare.cl_exclusion.shape == (0, 2)
    bad = Data(x=torch.zeros(3, 2), must_link_index=torch.tensor([[0], [3]]))
    with pytest.raises(InvalidInputError, match="must_link_index"):
        ConstraintGraphTransform()(bad)


# ----------------------------------------------------------------------------- composition


def test_compose_and_fake_dataset_transform(graphs):
    compose = T.Compose(make_transforms())
    ds = FakeDataset(num_graphs=3, avg_num_nodes=30, avg_degree=4, num_channels=3)
    plain = [with_constraints(ds[i], seed=10 + i) for i in range(len(ds))]
    out = compose(plain[0])
    for keys in OUTPUTS.values():
        for key in keys:
            assert hasattr(out, key)
    # transform= of a PyG dataset (applied on access, no download)
    ds_t = FakeDataset(
        num_graphs=3,
        avg_num_nodes=30,
        avg_degree=4,
        num_channels=3,
        transform=T.Compose([CoreGraphTransform(eps=0.9, min_samples=4), DCTreeTransform(3)]),
    )
    item = ds_t[0]
    direct = DCTreeTransform(3)(CoreGraphTransform(eps=0.9, min_samples=4)(ds_t.get(0)))
    assert_same(item, direct, OUTPUTS[CoreGraphTransform] + OUTPUTS[DCTreeTransform])


class _ProcessedFake(InMemoryDataset):
    """A dataset that applies ``pre_transform`` in ``process`` as every PyG dataset does
    (``FakeDataset`` itself generates in memory and ignores ``pre_transform``)."""

    def __init__(self, root, source, pre_transform):
        self.source = source  # the raw graphs (process runs inside the base constructor)
        super().__init__(root, pre_transform=pre_transform)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self):
        return []

    @property
    def processed_file_names(self):
        return ["data.pt"]

    def download(self):  # nothing to download
        pass

    def process(self):
        self.save([self.pre_transform(d) for d in self.source], self.processed_paths[0])


def test_pre_transform_of_a_dataset(tmp_path):
    pre = T.Compose([CoreGraphTransform(eps=0.9, min_samples=4), DCTreeTransform(min_samples=3)])
    fake = FakeDataset(num_graphs=3, avg_num_nodes=30, avg_degree=4, num_channels=3)
    source = [fake[i] for i in range(len(fake))]
    ds = _ProcessedFake(tmp_path, source, pre_transform=pre)
    assert len(ds) == 3
    for i in range(3):
        assert_same(ds[i], pre(source[i]), OUTPUTS[CoreGraphTransform] + OUTPUTS[DCTreeTransform])


# ----------------------------------------------------------------------------- batches


@pytest.mark.parametrize("transform", make_transforms(), ids=lambda t: type(t).__name__)
def test_batch_equals_per_graph_results(transform, graphs):
    batch = Batch.from_data_list(graphs)
    out = transform(batch)
    expected = Batch.from_data_list([transform(g) for g in graphs])
    assert_same(out, expected, OUTPUTS[type(transform)])
    # a plain Data with a batch vector is split the same way
    flat = Data(**{k: v for k, v in batch.to_dict().items() if k != "ptr"})
    assert_same(transform(flat), expected, OUTPUTS[type(transform)])


def test_batch_never_mixes_graphs():
    # two identical graphs on top of each other: any mixing would join their clusters
    g = Data(x=torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.2, 0.0], [5.0, 5.0]]))
    batch = Batch.from_data_list([g, g.clone()])
    out = CoreGraphTransform(eps=0.15, min_samples=2)(batch)
    assert out.cluster.tolist() == [0, 0, 0, -1, 0, 0, 0, -1]
    graph_of = batch.batch[out.core_edge_index]
    assert torch.equal(graph_of[0], graph_of[1])
    tree = DCTreeTransform(min_samples=2)(batch)
    assert torch.equal(batch.batch[tree.mst_edge_index[0]], batch.batch[tree.mst_edge_index[1]])
    crossing = batch.clone()
    crossing.must_link_index = torch.tensor([[0], [5]])  # node 0 of graph 0, node 1 of graph 1
    with pytest.raises(InvalidInputError, match="graphs 0 and 1"):
        ConstraintGraphTransform()(crossing)


@pytest.mark.parametrize("transform", make_transforms(), ids=lambda t: type(t).__name__)
def test_hetero_data_is_refused(transform):
    data = HeteroData()
    data["user"].x = torch.randn(5, 2)
    data["item"].x = torch.randn(4, 2)
    with pytest.raises(InvalidInputError, match="HeteroData"):
        transform(data)


def test_parameter_and_attribute_errors():
    with pytest.raises(InvalidInputError, match="eps"):
        CoreGraphTransform(eps=0.0)
    with pytest.raises(InvalidInputError, match="min_samples"):
        DCTreeTransform(min_samples=0)
    with pytest.raises(InvalidInputError, match="mst_method"):
        DCTreeTransform(mst_method="prim")
    with pytest.raises(InvalidInputError, match="attribute name"):
        ConstraintGraphTransform(must_link=3)
    with pytest.raises(InvalidInputError, match="'pos'"):
        CoreGraphTransform(attr="pos")(Data(x=torch.zeros(3, 2)))
    nan = Data(x=torch.tensor([[0.0, float("nan")], [1.0, 2.0]]))
    with pytest.raises(InvalidInputError, match="finite"):
        DCTreeTransform()(nan)
