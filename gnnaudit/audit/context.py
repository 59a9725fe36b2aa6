"""The shared input of every audit unit (flat: the units of every subpackage read it): the
model, the graph, the audited nodes, the options, and what is computed once from them
(predictions, counterfactual evidences).

:class:`AuditContext` is built once per audit. Expensive pieces are computed lazily on first use
and cached: the model's logits (one forward pass through :class:`ModelAdapter`), the fitted
:class:`~gnnaudit.audit.CounterfactualEvidence`, and the local / global evidences (fetched once
at the largest ``k`` any unit needs, see :func:`~gnnaudit.audit.unit.run_units`; smaller
requests are slices of that result).

Labels are optional: an auditor may have a model and a graph without ground truth; units that
need labels declare it and are skipped with a note.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import (
    MAX_RESAMPLES,
    check_choice,
    check_edge_index,
    check_float,
    check_int,
    check_seed,
    resolve_progress,
)
from gnnaudit.audit.model_adapter import ModelAdapter
from gnnaudit.audit.search.evidence import BACKENDS
from gnnaudit.audit.search.fit_inputs import resolve_mask
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.audit.sensitive import (
    SensitiveAttribute,
    known_group_nodes,
    resolve_attributes,
    resolve_sensitive,
    unknown_group_note,
)
from gnnaudit.errors import InvalidInputError

__all__ = ["AuditOptions", "AuditContext", "resolve_sensitive", "resolve_nodes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditOptions:
    """Options every audit unit shares (unit-specific options go to the unit's constructor).

    Attributes
    ----------
    k : local counterfactual evidences per audited node (the CE paper uses 10).
    backend, num_hops, alpha, index_params : the evidence search
        (:class:`~gnnaudit.audit.CounterfactualEvidence`). ``num_hops`` is the KS radius of
        that search, not the model's receptive field (``model_hops`` of the audit): with the
        default units, ``num_hops`` given without ``model_hops`` for a model whose receptive
        field cannot be inferred (no torch_geometric ``MessagePassing`` layer, or a
        ``predict_fn``) is refused, as its node-scope flip test would silently not run.
    random_state : seed of every random choice (bootstrap, permutations, approximate search).
    n_boot : bootstrap resamples for confidence intervals.
    confidence : confidence level of the intervals (0.95 = 95%).
    progress : tqdm progress bars; ``None`` (the default): only when standard error is a
        terminal (resolved to True / False when the options are built).
    device : where the model runs (``"auto"``: where it already is).
    sensitive_bins : quantile bins for a continuous sensitive attribute (None: a continuous
        attribute is refused; see :mod:`gnnaudit.audit.sensitive`).
    """

    k: int = 10
    backend: str = "auto"
    num_hops: int = 3
    alpha: float = 0.5
    index_params: Mapping[str, Any] | None = None
    random_state: int = 0
    n_boot: int = 1000
    confidence: float = 0.95
    progress: bool | None = None
    device: Any = "auto"
    sensitive_bins: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        check_choice("backend", self.backend, BACKENDS)
        check_int("num_hops", self.num_hops, minimum=0)
        check_float("alpha", self.alpha, minimum=0.0, maximum=1.0)
        check_seed("random_state", self.random_state)
        check_int("n_boot", self.n_boot, minimum=1, maximum=MAX_RESAMPLES)
        check_float(
            "confidence", self.confidence, minimum=0.5, maximum=1.0, inclusive=(True, False)
        )
        if self.sensitive_bins is not None:
            check_int("sensitive_bins", self.sensitive_bins, minimum=2, maximum=100)
        # frozen: the automatic choice is resolved once, here
        object.__setattr__(self, "progress", resolve_progress("progress", self.progress))

    def rng(self, offset: int = 0) -> np.random.Generator:
        """A fresh generator seeded by ``random_state`` (+ ``offset`` for independent streams)."""
        return np.random.default_rng([self.random_state, offset])


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def resolve_nodes(data: Any, mask: Any = None, *, name: str = "mask") -> np.ndarray:
    """Ascending ids of the audited nodes.

    ``mask``: a boolean mask of length n or integer node ids; default ``data.mask`` (an
    explicit audit selection, e.g. ``load_graph(mask_column=...)``), else ``data.test_mask``,
    else every node. An empty selection raises :class:`InvalidInputError`.
    """
    return resolve_mask(mask, data, int(data.num_nodes), name=name, purpose="the audit")


class AuditContext:
    """Model, graph, audited nodes and options, with the shared computations cached.

    Parameters
    ----------
    model : the model (any ``nn.Module`` / callable ``(x, edge_index) -> logits``) or a
        :class:`ModelAdapter`.
    data : a PyG ``Data`` with ``x`` and ``edge_index``; ``y``, masks, ``feature_names``,
        ``sensitive`` / ``sensitive_name`` optional.
    mask : audited nodes (see :func:`resolve_nodes`).
    sensitive : the sensitive attribute(s) (see :mod:`gnnaudit.audit.sensitive`).
    options : :class:`AuditOptions`.
    forward_kwargs, predict_fn : passed to :class:`ModelAdapter`.
    distributed : the audit's heavy steps on a Dask cluster (None: in this process), an object
        with ``remote`` (a :class:`~gnnaudit.audit.distributed.forward.RemoteForward`: the model's
        forward passes), ``ks(num_hops, alpha)`` (the KS embedding computed on the workers,
        gathered) and ``client``; built by :func:`~gnnaudit.audit.pipeline.run_audit` from its
        ``client=`` option.
    """

    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def __init__(
        self,
        model: Any,
        data: Any,
        *,
        mask: Any = None,
        sensitive: Any = None,
        options: AuditOptions | None = None,
        forward_kwargs: Mapping[str, Any] | None = None,
        predict_fn: Callable[[torch.Tensor, torch.Tensor], Any] | None = None,
        distributed: Any = None,
    ) -> None:
        self.distributed = distributed
        self.options = options if options is not None else AuditOptions()
        if not isinstance(self.options, AuditOptions):
            raise InvalidInputError(
                f"options must be an AuditOptions, got {type(options).__name__}"
            )
        self.data = self._check_data(data)
        self.adapter = ModelAdapter.wrap(
            model, forward_kwargs=forward_kwargs, predict_fn=predict_fn, device=self.options.device
        )
        self.nodes = resolve_nodes(self.data, mask)
        #: every sensitive attribute (the first is the primary one, :attr:`sensitive`)
        self.attributes: list[SensitiveAttribute] = resolve_attributes(
            self.data, sensitive, bins=self.options.sensitive_bins
        )
        first = self.attributes[0] if self.attributes else None
        self.sensitive = None if first is None else first.values
        self.sensitive_name = None if first is None else first.name
        self.sensitive_column = None if first is None else first.column
        names = [a.name for a in self.attributes]
        #: the audited nodes of known group (:func:`known_group_nodes`): the group figures' nodes
        self.group_nodes = known_group_nodes(self.data, self.nodes, names)
        for attr in self.attributes:
            if np.unique(attr.values[self.group_nodes]).size < 2:
                held = "a single value" if self.group_nodes.size else "no known value"
                raise InvalidInputError(
                    f"sensitive attribute {attr.name!r} takes {held} on the {self.nodes.size} "
                    "audited nodes; a fairness audit needs at least two groups"
                )
        self.notes: list[str] = [a.note for a in self.attributes if a.note]
        unknown = unknown_group_note(self.nodes, self.group_nodes, names)
        if unknown is not None:
            logger.warning(unknown)
            self.notes.append(unknown)
        #: results of the units that already ran, by unit name (filled by ``run_units``)
        self.results: dict[str, Any] = {}
        self._local: LocalEvidence | None = None
        self._global: GlobalEvidence | None = None
        #: layer -> rows whose input the factual pass keeps (:meth:`keep_factual_input`)
        self._keep: dict[torch.nn.Module, np.ndarray] = {}
        self._kept: dict[torch.nn.Module, torch.Tensor | None] = {}

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def _check_data(data: Any) -> Any:
        x = getattr(data, "x", None)
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.size(0) == 0:
            raise InvalidInputError(
                "data.x must be a 2-D tensor [num_nodes, num_features] with at least one node, "
                f"got {type(x).__name__ if not isinstance(x, torch.Tensor) else tuple(x.shape)}"
            )
        if not x.is_floating_point():
            raise InvalidInputError(f"data.x must be a floating-point tensor, got {x.dtype}")
        if not bool(torch.isfinite(x).all()):
            raise InvalidInputError("data.x holds NaN or inf values")
        if getattr(data, "edge_index", None) is None:
            raise InvalidInputError("data.edge_index is missing")
        check_edge_index("data.edge_index", data.edge_index, int(x.size(0)))
        y = getattr(data, "y", None)
        if y is not None:
            n = int(x.size(0))
            if not isinstance(y, torch.Tensor) or y.dim() != 1 or y.size(0) != n:
                raise InvalidInputError(f"data.y must be a 1-D tensor of length {n} (or absent)")
            if y.is_floating_point() and not bool(torch.equal(y, y.round())):
                raise InvalidInputError("data.y must hold integer class ids, got fractional values")
            if n and int(y.min()) < 0:
                raise InvalidInputError(f"data.y must hold class ids >= 0, got {int(y.min())}")
        return data

    @property
    def num_nodes(self) -> int:
        """Number of nodes of the audited graph."""
        return int(self.data.x.size(0))

    @cached_property
    def features(self) -> tuple[np.ndarray, list[str]]:
        """``(x, names)``: node features as float64 numpy and their names (``x0, x1 ...`` when
        the data has no ``feature_names``)."""
        x = self.data.x.detach().cpu().numpy().astype(np.float64)
        names = getattr(self.data, "feature_names", None)
        if names is None or len(names) != x.shape[1]:
            names = [f"x{i}" for i in range(x.shape[1])]
        return x, [str(nm) for nm in names]

    @cached_property
    def labels(self) -> np.ndarray | None:
        """True class of every node (int64), or None when the data has no ``y``."""
        y = getattr(self.data, "y", None)
        return None if y is None else y.detach().cpu().numpy().astype(np.int64)

    @cached_property
    def class_names(self) -> list[str] | None:
        """The user's label values by class id (``data.class_names``, set by
        :func:`~gnnaudit.datasets.read_graph` for a text label), or None."""
        names = getattr(self.data, "class_names", None)
        return None if names is None else [str(n) for n in names]

    # ------------------------------------------------------------------ model
    @property
    def remote(self) -> Any:
        """The forward passes on a Dask cluster's partitions (None: in this process)."""
        return None if self.distributed is None else self.distributed.remote

    @cached_property
    def logits(self) -> torch.Tensor:
        """``(n, C)`` logits of the model on the graph (one forward pass, CPU; with
        ``distributed``, one pass per partition on the workers)."""
        if self.remote is not None:
            logits = self.remote()
            self.remote.set_fill(logits)
        else:
            handles = [layer.register_forward_hook(self._keeper(layer)) for layer in self._keep]
            try:
                logits = self.adapter.logits(
                    self.data.x, self.data.edge_index, stage="the audit's predictions"
                )
            finally:
                for handle in handles:
                    handle.remove()
        self._check_outputs(int(logits.shape[1]))
        return logits

    def keep_factual_input(self, layer: torch.nn.Module, rows: np.ndarray) -> None:
        """Ask the factual pass (:attr:`logits`, before it runs) to keep the input of ``layer``
        at ``rows`` (:meth:`factual_input`), so a unit that reads a hidden representation of
        the factual graph needs no pass of its own. Memory: ``rows`` x the layer's width. On a
        cluster the request goes to the remote forward
        (:meth:`~gnnaudit.audit.distributed.forward.RemoteForward.keep_hidden`), whose
        ``hidden`` then answers from the factual pass."""
        if "logits" in self.__dict__:
            return
        if self.remote is None:
            self._keep[layer] = np.asarray(rows, dtype=np.int64)
        elif hasattr(self.remote, "keep_hidden"):  # the cluster's factual pass probes it
            name = self.module_name(layer)
            if name is not None:
                self.remote.keep_hidden(name, rows)

    def module_name(self, layer: torch.nn.Module) -> str | None:
        """``layer``'s name in the audited model's ``named_modules()`` (None: not one of its
        modules, or the model is not a torch module)."""
        model = self.adapter.model
        named = model.named_modules() if isinstance(model, torch.nn.Module) else ()
        return next((n for n, m in named if m is layer), None)

    def _keeper(self, layer: torch.nn.Module) -> Callable[..., None]:
        rows = torch.from_numpy(self._keep[layer])

        def hook(_module: Any, inputs: Any, _output: Any) -> None:
            first = inputs[0] if inputs else None
            if (
                isinstance(first, torch.Tensor)
                and first.dim() == 2
                and first.size(0) == self.num_nodes
            ):
                self._kept[layer] = first.detach()[rows.to(first.device)].cpu()
            else:  # the last call decides, as a hook on a separate pass would see it
                self._kept[layer] = None

        return hook

    def factual_input(self, layer: torch.nn.Module) -> tuple[bool, torch.Tensor | None]:
        """``(seen, rows)``: whether the factual pass ran ``layer`` with a kept input, and its
        input at the rows asked for (None when that input was not one row per node)."""
        if layer not in self._kept:
            return False, None
        return True, self._kept[layer]

    def _check_outputs(self, width: int) -> None:
        """Refuse a model whose number of outputs differs from the number of label classes
        (``max(y) + 1``); labels of a single class are left to the degenerate-model guard."""
        if self.labels is None or not self.labels.size or np.unique(self.labels).size < 2:
            return
        classes = int(self.labels.max()) + 1
        if width != classes:
            raise InvalidInputError(
                f"the model outputs {width} scores per node but the labels (data.y) hold "
                f"{classes} classes (0 to {classes - 1}); audit a model with one output per "
                "class, or relabel the data"
            )

    @cached_property
    def predictions(self) -> np.ndarray:
        """Predicted class of every node, ``(n,)`` int64."""
        return self.logits.argmax(dim=1).numpy().astype(np.int64)

    @cached_property
    def accuracies(self) -> dict[str, float]:
        """Accuracy on each non-empty train / val / test mask and on the audited nodes (empty
        without labels)."""
        if self.labels is None:
            return {}
        correct = self.predictions == self.labels
        out = {}
        for split in ("train", "val", "test"):
            mask = getattr(self.data, f"{split}_mask", None)
            if mask is not None and bool(mask.any()):
                out[f"{split}_accuracy"] = float(correct[_to_numpy(mask).astype(bool)].mean())
        out["audited_accuracy"] = float(correct[self.nodes].mean())
        return out

    @cached_property
    def quality(self) -> Any:
        """:class:`~gnnaudit.audit.model_quality.ModelQualityResult` of the model on the audited
        nodes (accuracy, majority rate, degenerate verdict; for a degenerate model, the likely
        cause read from its inputs: :func:`~gnnaudit.audit.model_quality.raw_scale_cause`)."""
        from gnnaudit.audit.model_quality import assess_model, raw_scale_cause

        quality = assess_model(
            self.predictions,
            self.labels,
            self.nodes,
            n_boot=self.options.n_boot,
            confidence=self.options.confidence,
            rng=self.options.rng(1),
            split_accuracies={k: v for k, v in self.accuracies.items() if k != "audited_accuracy"},
            class_names=self.class_names,
        )
        if quality.degenerate:  # only then: the inputs' scales are read once, as the model saw them
            quality.degenerate_cause = raw_scale_cause(*self.features)
        return quality

    @property
    def degenerate_reason(self) -> str | None:
        """Why the model is degenerate (near-constant), in plain words; None when it is not."""
        return self.quality.degenerate_reason

    @property
    def degenerate_cause(self) -> str | None:
        """The likely cause of a degenerate model and its fix (inputs on raw, large scales), in
        plain words; None when the model is not degenerate or no cause is seen."""
        return self.quality.degenerate_cause

    # ------------------------------------------------------------------ requirements
    def missing(self, requires: Sequence[str]) -> str | None:
        """Why a unit with these requirements cannot run, in plain words (None: it can)."""
        for req in requires:
            if req == "labels" and self.labels is None:
                return (
                    "the graph has no labels (data.y), so accuracy-based statistics are undefined"
                )
            if req == "sensitive" and self.sensitive is None:
                return "no sensitive attribute was given (sensitive=...) or attached to the data"
            if req == "sensitive_feature" and self.sensitive_column is None:
                if self.sensitive is None:
                    return (
                        "no sensitive attribute was given (sensitive=...) or attached to the data"
                    )
                return (
                    f"the sensitive attribute {self.sensitive_name!r} is not one of the model's "
                    "input features, so it cannot be flipped"
                )
            if req == "evidence" and np.unique(self.predictions[self.nodes]).size < 2:
                return (
                    "the model predicts one class on every audited node, so no node has a "
                    "counterfactual evidence"
                )
            if req == "train_mask" and getattr(self.data, "train_mask", None) is None:
                return "the graph has no train_mask"
            if req not in ("labels", "sensitive", "sensitive_feature", "evidence", "train_mask"):
                raise InvalidInputError(f"unknown audit requirement {req!r}")
        return None

    # ------------------------------------------------------------------ evidences
    @cached_property
    def evidence(self) -> Any:
        """:class:`~gnnaudit.audit.CounterfactualEvidence` fitted on the audited nodes with the
        model's predictions (reuses ``data.ks`` when the ``KSEmbedding`` transform wrote it with
        the same parameters)."""
        from gnnaudit.audit.search.evidence import CounterfactualEvidence

        opts = self.options
        data, client = self.data, None
        if self.distributed is not None:  # the KS embedding from the workers, then the search
            data = copy.copy(self.data)
            data.ks = self.distributed.ks(opts.num_hops, opts.alpha)
            data.ks_params = {
                "num_hops": torch.tensor(opts.num_hops, dtype=torch.int64),
                "alpha": torch.tensor(opts.alpha, dtype=torch.float64),
            }
            client = (
                self.distributed.client if opts.backend in ("exact", "auto", "sharded") else None
            )
        return CounterfactualEvidence(
            num_hops=opts.num_hops,
            alpha=opts.alpha,
            backend=opts.backend,
            index_params=opts.index_params,
            random_state=opts.random_state,
            progress=bool(opts.progress),
            client=client,
        ).fit(data, predictions=self.predictions, mask=self.nodes)

    def prefetch(self, *, local_k: int = 0, global_k: int = 0) -> None:
        """Search the local top-``local_k`` evidences of every audited node and the global
        top-``global_k`` pairs once; later :meth:`local_evidence` / :meth:`global_evidence`
        calls with smaller ``k`` are slices of these."""
        if local_k > 0 and (self._local is None or self._local.k < local_k):
            self._local = self.evidence.search_local(self.nodes, k=local_k)
        if global_k > 0 and (self._global is None or len(self._global) < global_k):
            self._global = self.evidence.search_global(k=global_k)

    def local_evidence(self, k: int | None = None) -> LocalEvidence:
        """Top-``k`` (default ``options.k``) local evidences of every audited node."""
        k = self.options.k if k is None else check_int("k", k, minimum=1)
        self.prefetch(local_k=k)
        assert self._local is not None
        return self._local.head(k)

    def global_evidence(self, k: int) -> GlobalEvidence:
        """Top-``k`` global evidence pairs among the audited nodes."""
        k = check_int("k", k, minimum=1)
        self.prefetch(global_k=k)
        assert self._global is not None
        return self._global.head(k)

    # ------------------------------------------------------------------ report pieces
    def dataset_summary(self, name: str | None = None) -> dict[str, Any]:
        """Size of the graph and of its splits, for the report."""
        data = self.data
        summary: dict[str, Any] = {
            "name": name or "graph",
            "nodes": self.num_nodes,
            "directed_edges": int(data.edge_index.size(1)),
            "features": int(data.x.size(1)),
            "classes": int(self.labels.max()) + 1
            if self.labels is not None and self.labels.size
            else None,
            "audited_nodes": int(self.nodes.size),
            "sensitive_name": self.sensitive_name,
        }
        for split in ("train", "val", "test"):
            mask = getattr(data, f"{split}_mask", None)
            if mask is not None:
                summary[f"{split}_nodes"] = int(_to_numpy(mask).astype(bool).sum())
        return summary
