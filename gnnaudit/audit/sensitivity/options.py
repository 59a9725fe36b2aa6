"""The one option object of the counterfactual sensitivity test (:class:`FlipOptions`), used by
the function API (:func:`~gnnaudit.audit.counterfactual_flip`,
:func:`~gnnaudit.audit.feature_sensitivity`), the audit unit
(:class:`~gnnaudit.audit.SensitivityUnit`) and the Dask path (``client``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gnnaudit.errors import InvalidInputError

__all__ = ["FlipOptions", "MAX_NODES"]

#: default largest number of audited nodes at node scope (a seeded sample above it)
MAX_NODES = 2000


@dataclass(frozen=True)
class FlipOptions:
    """How the counterfactual passes run (the same names are keyword options of
    :func:`~gnnaudit.audit.counterfactual_flip` and :func:`~gnnaudit.audit.feature_sensitivity`).

    Attributes
    ----------
    num_hops : receptive-field radius L for node scope (default: inferred, see
        :func:`~gnnaudit.audit.sensitivity.receptive_field.infer_num_hops`; required for a plain
        callable or ``predict_fn``).
    max_nodes : node scope audits a seeded sample of this many nodes when there are more.
    sensitive : the sensitive attribute for ``by_group`` (default ``data.sensitive``).
    forward_kwargs, predict_fn, device : how the model is called (see
        :class:`~gnnaudit.audit.model_adapter.ModelAdapter`).
    confidence : level of the bootstrap intervals.
    base_logits : the model's factual logits ``(n, C)`` if already computed (saves one pass).
    progress : tqdm bar over the forward passes.
    client : a ``dask.distributed.Client`` (optional extra ``gnnaudit[distributed]``): with two
        or more features each feature's passes are one task on its workers; the results equal
        the single-process ones exactly (the model and graph are scattered to the workers once,
        so they must be picklable).
    remote : whole-graph passes computed elsewhere: a callable ``remote(changes, rows=None) ->
        (n, C) logits`` (:class:`~gnnaudit.audit.distributed.forward.RemoteForward`, the model's
        passes on the partitions of a Dask cluster); the factual logits, the graph-scope
        passes and node scope's whole-graph passes (only the batch's ``rows``) go through
        it. Node scope's small subgraph passes still run here.
    """

    num_hops: int | None = None
    max_nodes: int = MAX_NODES
    sensitive: Any = None
    forward_kwargs: Mapping[str, Any] | None = None
    predict_fn: Callable[..., Any] | None = None
    device: Any = "auto"
    confidence: float = 0.95
    base_logits: Any = None
    progress: bool = False
    client: Any = None
    remote: Any = None

    @classmethod
    def resolve(
        cls,
        caller: str,
        options: FlipOptions | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> FlipOptions:
        """``options`` (default ``FlipOptions()``) with the keyword ``overrides`` of ``caller``
        applied; an unknown name or an ``options`` that is not a FlipOptions raises
        :class:`~gnnaudit.errors.InvalidInputError` naming it."""
        if options is not None and not isinstance(options, FlipOptions):
            raise InvalidInputError(
                f"{caller}: options must be a FlipOptions, got {type(options).__name__}"
            )
        overrides = dict(overrides or {})
        allowed = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(overrides) - set(allowed))
        if unknown:
            raise InvalidInputError(f"{caller} got unknown option(s) {unknown}; allowed: {allowed}")
        return dataclasses.replace(options or cls(), **overrides)

    @classmethod
    def from_kwargs(cls, caller: str, options: Mapping[str, Any]) -> FlipOptions:
        """Options from keyword arguments (:meth:`resolve` without a base)."""
        return cls.resolve(caller, None, options)
