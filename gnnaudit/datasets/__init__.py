"""Dataset loaders and generators.

Graph loaders return :class:`torch_geometric.data.Data`; tabular loaders return
:class:`~gnnaudit.datasets.tabular.TabularData`. Nothing here downloads at test time.
"""

from gnnaudit.datasets.tabular import TabularData, load_tabular, three_moons

__all__ = ["TabularData", "load_tabular", "three_moons"]
