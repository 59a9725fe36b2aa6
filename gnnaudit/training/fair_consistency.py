r"""The counterfactual-consistency term of :class:`~gnnaudit.training.FairFinetune` (NIFTY,
Agarwal et al. 2021): the divergence between a model's output on the graph as it is and on the
graph with the sensitive attribute changed, at the graph scope (every node changed at once) and
the node scope (seeded batches of nodes no two of which are within L hops, each node compared in
its own counterfactual). :mod:`gnnaudit.training.fair_finetune` documents the formulas;
:mod:`gnnaudit.training.fair_losses` the divergence."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data

from gnnaudit._validation import check_int
from gnnaudit.audit.interventions import Alternative
from gnnaudit.audit.sensitivity.receptive_field import hop_adjacency, infer_num_hops, plan_batches
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.fair_losses import consistency_divergence
from gnnaudit.training.fair_selection import set_sensitive

__all__ = ["ConsistencyTerm"]


class ConsistencyTerm:
    """The term for the changes ``alternatives`` of the sensitive ``columns`` of ``x`` at the
    checked ``scopes`` with the checked ``divergence``; ``random_state`` seeds the node sample,
    the batch order and the draw of the change at each step."""

    def __init__(
        self,
        alternatives: Sequence[Alternative],
        columns: torch.Tensor,
        scopes: tuple[str, ...],
        divergence: str,
        random_state: int,
    ) -> None:
        self.alternatives = alternatives
        self.columns = columns
        self.scopes = scopes
        self.divergence = divergence
        self.random_state = random_state
        self.node_batches: list[np.ndarray] = []

    def plan_node_batches(
        self, model: nn.Module, data: Data, num_hops: int | None, max_nodes: int
    ) -> None:
        """Plan the seeded node-scope batches over a sample of at most ``max_nodes`` nodes
        (L = ``num_hops``, or inferred from the model's message-passing layers)."""
        max_nodes = check_int("max_nodes", max_nodes, minimum=1)
        hops = num_hops if num_hops is not None else infer_num_hops(model)
        if hops is None:
            raise InvalidInputError(
                f"num_hops is required for node-scope consistency: {type(model).__name__} "
                "has no torch_geometric MessagePassing layer to infer its receptive field "
                "from; pass num_hops=L (or scopes=('graph',))"
            )
        hops = check_int("num_hops", hops, minimum=0)
        n = int(data.num_nodes)
        rng = np.random.default_rng([self.random_state, 0])
        pool = np.arange(n) if n <= max_nodes else np.sort(rng.choice(n, max_nodes, False))
        adj = hop_adjacency(data.edge_index.cpu(), n)
        batches = plan_batches(adj, pool, hops, rng).batches()
        self.node_batches = [batches[i] for i in rng.permutation(len(batches))]

    def changed(
        self, x: torch.Tensor, alt_index: int, nodes: np.ndarray | None
    ) -> tuple[torch.Tensor, np.ndarray]:
        """``x`` with the sensitive value of ``nodes`` (all when None) set to alternative
        ``alt_index``; returns it and the ids of the compared nodes."""
        alt = self.alternatives[alt_index]
        ids = np.flatnonzero(alt.changes) if nodes is None else nodes[alt.changes[nodes]]
        compare = np.flatnonzero(alt.compares) if nodes is None else ids
        return set_sensitive(x, alt, self.columns, ids), compare

    def __call__(
        self,
        model: nn.Module,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        logits: torch.Tensor,
        step: int,
        restore_rng: Callable[[], None] | None = None,
    ) -> torch.Tensor:
        """Mean over the scopes of the divergences at step ``step`` (``logits``: the factual
        pass of ``model``; ``restore_rng``, when given, is called before every counterfactual
        pass, so that all passes share the dropout masks); 0 when no node is compared."""
        rng = np.random.default_rng([self.random_state, 1, step])
        alt_index = int(rng.integers(len(self.alternatives)))
        terms = []
        for scope in self.scopes:
            nodes = None
            if scope == "node":
                nodes = self.node_batches[step % len(self.node_batches)]
            x_cf, compare = self.changed(x, alt_index, nodes)
            if compare.size == 0:
                continue
            if restore_rng is not None:
                restore_rng()
            out = model(x_cf, edge_index)
            idx = torch.from_numpy(compare).to(logits.device)
            terms.append(consistency_divergence(logits[idx], out[idx], self.divergence).mean())
        if not terms:
            return logits.sum() * 0.0
        return torch.stack(terms).mean()
