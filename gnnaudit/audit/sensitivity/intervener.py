"""The shared part of the counterfactual passes: the audited inputs (:class:`AuditedGraph`,
built once by :func:`prepare`) and the :class:`Intervener` that runs forward passes with some
feature values changed and restores them (see :mod:`gnnaudit.audit.sensitivity.engine`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_edge_index, check_finite_tensor
from gnnaudit.audit.context import resolve_nodes
from gnnaudit.audit.interventions import MAX_CATEGORIES, Alternative, detect_kind, quantile_bins
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.sensitive import resolve_sensitive
from gnnaudit.audit.sensitivity.options import MAX_NODES, FlipOptions
from gnnaudit.errors import InvalidInputError

__all__ = [
    "MAX_NODES",
    "SAFEGUARD_NODES",
    "SAFEGUARD_RTOL",
    "STAGE",
    "AuditedGraph",
    "Intervener",
    "alt_values",
    "prepare",
    "seeded",
]

logger = logging.getLogger(__name__)

#: nodes re-predicted one at a time by the exactness safeguard (node scope)
SAFEGUARD_NODES = 3
#: relative tolerance of the safeguard's comparisons of logits
SAFEGUARD_RTOL = 1e-5
#: the audit stage named on an exception raised by the user's model during the flips
STAGE = "the counterfactual sensitivity test"
#: seed streams of one random_state (the bootstrap uses streams >= 3)
SAMPLE_STREAM, PLAN_STREAM, CHECK_STREAM = 0, 1, 2


def _check_graph(data: Any) -> tuple[torch.Tensor, torch.Tensor]:
    x = getattr(data, "x", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(0) == 0:
        raise InvalidInputError(
            "data.x must be a 2-D tensor [num_nodes, num_features] with at least one node"
        )
    if not x.is_floating_point():
        raise InvalidInputError(f"data.x must be a floating-point tensor, got {x.dtype}")
    check_finite_tensor("data.x", x)
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None:
        raise InvalidInputError("data.edge_index is missing")
    return x, check_edge_index("data.edge_index", edge_index, int(x.size(0)))


def seeded(random_state: int, stream: int) -> np.random.Generator:
    """An independent generator for ``stream`` of one ``random_state``."""
    return np.random.default_rng([random_state, stream])


def _group_labels(values: np.ndarray) -> np.ndarray:
    """Sensitive values as group labels; a continuous attribute in quartile bins."""
    if values.dtype.kind in "OUS" or detect_kind(values, MAX_CATEGORIES) != "continuous":
        return values
    codes, edges = quantile_bins(values, 4)
    bounds = np.concatenate([[-np.inf], edges, [np.inf]])
    labels = np.array([f"[{bounds[b]:.4g}, {bounds[b + 1]:.4g})" for b in range(edges.size + 1)])
    return labels[codes]


@dataclass
class AuditedGraph:
    """What every counterfactual pass shares: the model adapter, ``x`` and ``edge_index`` on its
    device, the audited node ids (ascending, sampled at node scope above ``max_nodes``) and how
    many there were before sampling, the factual logits (and whether computing them cost a
    pass), and the sensitive group of each audited node."""

    adapter: ModelAdapter
    x: torch.Tensor
    edge_index: torch.Tensor
    nodes: np.ndarray
    n_audited: int
    base_logits: torch.Tensor
    n_forward: int
    groups: np.ndarray | None
    sensitive_name: str | None
    remote: Any = None


def prepare(
    model: Any, data: Any, mask: Any, scope: str, random_state: int, options: FlipOptions
) -> AuditedGraph:
    """Validate the inputs and build the :class:`AuditedGraph` (module docstring of
    :mod:`~gnnaudit.audit.sensitivity.engine`): the model is called as ``options`` say
    (``forward_kwargs``, ``predict_fn``, ``device``), node scope samples ``options.max_nodes``
    nodes, and the factual logits are computed here unless ``options.base_logits`` gives them."""
    x, edge_index = _check_graph(data)
    n = int(x.size(0))
    adapter = ModelAdapter.wrap(
        model,
        forward_kwargs=options.forward_kwargs,
        predict_fn=options.predict_fn,
        device=options.device,
    )
    max_nodes = options.max_nodes
    nodes = resolve_nodes(data, mask)
    n_audited = nodes.size
    if scope == "node" and nodes.size > max_nodes:
        pick = seeded(random_state, SAMPLE_STREAM).choice(nodes.size, size=max_nodes, replace=False)
        nodes = np.sort(nodes[pick])
        logger.info("auditing a seeded sample of %d of %d nodes", max_nodes, n_audited)
    x_dev = x.to(adapter.device)
    ei_dev = edge_index.to(adapter.device)
    n_forward = 0
    base_logits = options.base_logits
    if base_logits is None:
        if options.remote is not None:
            base = options.remote().to(adapter.device)
        else:
            base = adapter.logits(x_dev, ei_dev, to_cpu=False, stage=STAGE)
        n_forward = 1
    else:
        base = base_logits if torch.is_tensor(base_logits) else torch.as_tensor(base_logits)
        if base.dim() != 2 or base.size(0) != n or not base.is_floating_point():
            raise InvalidInputError(
                f"base_logits must be float logits of shape [{n}, num_classes], got "
                f"{tuple(base.shape)} {base.dtype}"
            )
        check_finite_tensor("base_logits", base)
        base = base.to(adapter.device)
    values, name, _ = resolve_sensitive(data, options.sensitive, bins=4)
    groups = None if values is None else _group_labels(values[nodes])
    return AuditedGraph(
        adapter, x_dev, ei_dev, nodes, n_audited, base, n_forward, groups, name, options.remote
    )


class Intervener:
    """Runs forward passes with some rows of some columns of ``x`` replaced, then restores."""

    def __init__(self, setup: AuditedGraph, progress: bool, total: int) -> None:
        from tqdm.auto import tqdm

        self.setup = setup
        self.work = setup.x.clone()
        self.passes = 0
        self.bar = tqdm(
            total=total, desc="counterfactual passes", disable=not progress, leave=False
        )
        base = setup.base_logits
        self.base_pred = base.argmax(dim=1)
        self.base_prob = torch.softmax(base.to(torch.float64), dim=1)
        self.base_prob = self.base_prob.gather(1, self.base_pred[:, None])[:, 0]

    def logits(
        self,
        changes: list[tuple[np.ndarray, tuple[int, ...], np.ndarray]],
        rows: np.ndarray | None = None,
    ) -> torch.Tensor:
        """Full logits with ``x[ids, cols] = values`` for every ``(ids, cols, values)``.

        With a remote forward (:attr:`AuditedGraph.remote`) the pass runs there; ``rows``
        (optional) are the rows the caller reads: a remote pass computes only those (the
        others keep the factual logits)."""
        dev = self.work.device
        if self.setup.remote is not None:
            out: torch.Tensor = self.setup.remote(changes, rows).to(dev)
            self.passes += 1
            self.bar.update(1)
            return out
        saved = []
        for ids, cols, vals in changes:
            idx = torch.from_numpy(ids).to(dev)[:, None]
            cidx = torch.tensor(cols, device=dev)[None, :]
            saved.append((idx, cidx, self.work[idx, cidx].clone()))
            v = torch.as_tensor(
                np.array(np.broadcast_to(vals, (ids.size, len(cols)))),
                dtype=self.work.dtype,
            )
            self.work[idx, cidx] = v.to(dev)
        try:
            out = self.setup.adapter.logits(
                self.work, self.setup.edge_index, to_cpu=False, stage=STAGE
            )
        finally:
            for idx, cidx, old in reversed(saved):
                self.work[idx, cidx] = old
        self.passes += 1
        self.bar.update(1)
        return out

    def effect(self, out: torch.Tensor, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flip indicator and probability change at ``ids``."""
        idx = torch.from_numpy(ids).to(out.device)
        rows = out[idx]
        pred = rows.argmax(dim=1)
        base_pred = self.base_pred[idx]
        prob = torch.softmax(rows.to(torch.float64), dim=1).gather(1, base_pred[:, None])[:, 0]
        flip = (pred != base_pred).cpu().numpy()
        delta = (prob - self.base_prob[idx]).abs().cpu().numpy()
        return flip, delta


def alt_values(alt: Alternative, ids: np.ndarray) -> np.ndarray:
    """The values ``alt`` gives nodes ``ids`` (one shared value or one per node)."""
    return alt.values[ids] if alt.values.shape[0] > 1 else alt.values
