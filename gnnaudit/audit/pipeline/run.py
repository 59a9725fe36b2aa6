"""One call that audits a trained node classifier on a graph and returns the report.

:func:`audit_model` is the user-facing call (any ``nn.Module`` or callable ``(x, edge_index) ->
logits``, any PyG graph, optional report folder). :func:`run_audit` is the same with the list of
audit units to run. Both take the audit's options as three typed objects:
``config=`` (:class:`~gnnaudit.audit.pipeline.config.AuditConfig`, the default units' options),
``options=`` (:class:`~gnnaudit.audit.AuditOptions`, what every unit shares: the evidence
search, the intervals, the seed, the device, progress bars) and ``settings=``
(:class:`~gnnaudit.audit.pipeline.config.RunSettings`, how the model is called, the report's
labels, the Dask client); their fields are also accepted as flat keywords, a documented
shorthand that builds the objects, and any other keyword raises, naming it and its close
matches. Both build one
:class:`~gnnaudit.audit.context.AuditContext` (one forward pass, one evidence search) and run
the units in order (:func:`~gnnaudit.audit.unit.run_units`); each unit contributes a report
section and findings, and the verdict is composed from the findings.

The default unit list (:func:`default_units`):

1. model quality and the degenerate-model guard;
2. counterfactual sensitivity of the sensitive attribute at node and graph scope, and its rank
   among all features (needs the attribute as a model input);
3. group fairness (needs a sensitive attribute; per class above two classes, per attribute
   and for their intersection with several attributes);
3b. the fair-GNN literature metrics that no other finding gives (needs labels): AUROC, F1 and
   instability under seeded N(0, 1) feature noise (one extra forward pass), each with an
   interval (NIFTY's delta SP, delta EO and counterfactual unfairness are the findings of
   steps 3 and 2, named both ways; ``report.aliases``);
4. the proxies of the attribute (``proxies=True``): inputs ranked by mutual information, their
   flip rates, a probe of the model's hidden layer;
5. the evidence contrast of the sensitive attribute (needs it as a model input);
6. discrimination scores (CE paper Eq. 12, descriptive);
7. error verification (Sec. 7.2, needs labels);
8. the top evidence pairs (led by pairs differing in the attribute when the contrast is
   significant);
9. fine-tuning on evidences (Sec. 7.3; only with ``finetune=True`` and a LightningModule;
   ``finetune=None`` = automatic: on for a LightningModule on graphs of at most
   :data:`FINETUNE_MAX_NODES` nodes, skipped above with a note in the report);
10. before / after mitigation (only with ``mitigate=True``: a copy of the model fine-tuned with
   :class:`~gnnaudit.training.FairFinetune` and audited again; its weights are saved beside the
   report as ``mitigated_model.pt``).

``embedding=True`` appends the embedding audit
(:class:`~gnnaudit.audit.EmbeddingStructureUnit`, options in ``embedding_kwargs``); it is not
a default unit. The audit runs with the thread count of :func:`gnnaudit._threads.thread_limits`
and restores the caller's thread counts afterwards.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from gnnaudit._aliases import renamed_keywords
from gnnaudit._threads import thread_limits
from gnnaudit._validation import check_bool
from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.embedding.unit import EmbeddingStructureUnit
from gnnaudit.audit.fairness.feature_units import drop_units
from gnnaudit.audit.pipeline.assemble import build_report
from gnnaudit.audit.pipeline.config import (
    RUN_AUDIT_PARAMETERS,
    AuditConfig,
    RunSettings,
    build_configs,
    check_keywords,
    default_units,
    option_names,
)
from gnnaudit.audit.report.audit_report import REPORT_FILES, AuditReport
from gnnaudit.audit.sensitivity.unit import receptive_field_unknown
from gnnaudit.audit.unit import AuditUnit, run_units
from gnnaudit.errors import InvalidInputError

__all__ = [
    "run_audit",
    "audit_model",
    "apply_transform",
    "default_units",
    "resolve_finetune",
    "FINETUNE_MAX_NODES",
    "AuditConfig",
    "RunSettings",
]

logger = logging.getLogger(__name__)

#: the KS radius of :class:`~gnnaudit.audit.AuditOptions` when none is given
_DEFAULT_NUM_HOPS = next(
    f.default for f in dataclasses.fields(AuditOptions) if f.name == "num_hops"
)

#: the parameters of :func:`audit_model` besides the shorthand (suggested for a misspelt keyword)
_AUDIT_MODEL_PARAMETERS = (*RUN_AUDIT_PARAMETERS, "out", "force", "transform", "root")

#: every file ``audit_model(out=...)`` may write (checked against ``out`` before the audit)
REPORT_OUTPUTS = (*REPORT_FILES.values(), "mitigated_model.pt")

#: above this many nodes the automatic choice (``finetune=None`` in :func:`run_audit` /
#: :func:`audit_model`, the default of ``gnnaudit audit``) skips fine-tuning on evidences and says
#: so in the report's run notes: its cost grows with the graph (each of the 2 x seeds arms
#: trains a copy of the model for ``epochs`` full passes over the training nodes' receptive
#: field), far beyond the rest of the audit. ``finetune=True`` runs it at any size.
FINETUNE_MAX_NODES = 50_000


def resolve_finetune(finetune: bool | None, model: Any, num_nodes: int) -> tuple[bool, str | None]:
    """Whether to fine-tune on evidences, and the report note when the automatic choice
    (``finetune=None``) skips it because the graph is larger than :data:`FINETUNE_MAX_NODES`.

    ``True`` / ``False`` are kept as given. ``None``: on for a ``LightningModule`` model on a
    graph of at most ``FINETUNE_MAX_NODES`` nodes (the constant is read at call time). Lightning
    is not imported here: a model can only be a ``LightningModule`` once Lightning is loaded.
    """
    if finetune is not None:
        if not isinstance(finetune, bool):
            raise InvalidInputError(f"finetune must be True, False or None, got {finetune!r}")
        return finetune, None
    lightning = sys.modules.get("lightning")
    target = getattr(model, "model", model)  # a ModelAdapter wraps the module
    if lightning is None or not isinstance(target, lightning.LightningModule):
        return False, None
    if num_nodes <= FINETUNE_MAX_NODES:
        return True, None
    return False, (
        f"fine-tuning on evidences skipped: the graph has {num_nodes:,} nodes, more than "
        f"FINETUNE_MAX_NODES = {FINETUNE_MAX_NODES:,} (its cost grows with the graph); pass "
        "finetune=True (CLI: --finetune) to run it anyway"
    )


# long: whole: its docstring documents the three option objects; the body is 30 lines
@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def run_audit(
    model: Any,
    data: Any,
    sensitive: Any = None,
    units: Sequence[AuditUnit] | None = None,
    *,
    mask: Any = None,
    config: AuditConfig | None = None,
    options: AuditOptions | None = None,
    settings: RunSettings | None = None,
    **shorthand: Any,
) -> AuditReport:
    """Audit ``model`` on ``data`` with a list of audit units and return the report.

    Parameters
    ----------
    model : any ``torch.nn.Module`` or callable ``model(x, edge_index) -> logits`` (a
        :class:`~gnnaudit.training.NodeClassifier`, a user's own GNN ...). It is run in eval
        mode without gradients on its own device and never modified; an exception it raises
        propagates as itself, with a note naming the audit stage.
    data : a PyG ``Data`` with ``x`` and ``edge_index``; ``y``, masks, ``feature_names``,
        ``sensitive`` / ``sensitive_name`` optional (units that need a missing input are
        skipped with a note).
    sensitive : the sensitive attribute: a feature name, a column index, an (n,) vector
        (numbers, booleans, text or a categorical; equal to a column of ``x``, also up to a
        relabelling such as ``"F"``/``"M"`` for 1/0, it is audited as that feature), a list of
        these (several attributes and their intersection), or None for
        ``data.sensitive``; a continuous attribute needs ``sensitive_bins=q`` (quantile bins),
        see :mod:`gnnaudit.audit.sensitive`. ``sensitive_features=`` (fairlearn's name) is
        accepted as an alias (both with different values: an ``InvalidInputError``).
    units : the statistics to run, each configured by its own constructor (default:
        :func:`default_units` built from ``config``).
    mask : the audited nodes (default ``data.mask``, else ``data.test_mask``, else all).
    config : :class:`AuditConfig`, the default units' options (``ks``, ``top_pairs``,
        ``proxies``, ``proxy_top``, ``min_support``, ``bins``, ``model_hops``, ``finetune``,
        ``embedding``, ``mitigate`` and their ``*_kwargs``); only without ``units`` (with
        ``units`` given, only ``embedding`` / ``embedding_kwargs``, passed as keywords,
        append the embedding audit). ``finetune=None``: automatic, see
        :func:`resolve_finetune`.
    options : :class:`~gnnaudit.audit.AuditOptions`, what every unit shares: the evidence
        search (``k``, ``backend``, default ``"auto"``, recorded in
        ``run_info["evidence_backend"]``; ``num_hops``, its KS radius, not ``model_hops``;
        ``alpha``, ``index_params``), the intervals (``n_boot``, ``confidence``), the seed of
        every random choice (``random_state``), where the model runs (``device``, ``"auto"``:
        where it already is), tqdm bars (``progress``; None: only when standard error is a
        terminal) and ``sensitive_bins`` (quantile bins of a continuous sensitive attribute;
        by default the ``bins`` given as a keyword, else none: such an attribute is refused
        with a message suggesting bins).
    settings : :class:`RunSettings`, how the model is called (``forward_kwargs``,
        ``predict_fn``), CPU ``threads`` for the duration of the audit (recorded in
        ``run_info["threads"]``, the caller's counts restored afterwards), text for the report
        (``dataset_name``, ``model_info``) and the Dask path: ``client``, a
        ``dask.distributed.Client`` on whose workers the model's forward passes and the KS
        embedding run, with ``shared_dir``, ``num_parts``, ``partition``, ``model_loader``
        (refused without a client), see :mod:`gnnaudit.audit.distributed.session`; the
        findings equal those of the audit in one process, and ``run_info["distributed"]``
        records workers, partitions, passes and bytes moved.
    **shorthand : the fields of the three objects as flat keywords, e.g.
        ``run_audit(model, data, k=5, top_pairs=3, random_state=1, progress=False)``: each
        builds (or updates the given) ``config``, ``options`` or ``settings`` by its name
        (:func:`~gnnaudit.audit.pipeline.config.build_configs`). Any other name is an
        :class:`~gnnaudit.errors.InvalidInputError` naming it and its close matches.
    """
    cfg, opts, run = build_configs(
        shorthand, config=config, options=options, settings=settings, units_given=units is not None
    )
    if units is None:
        _check_model_hops(model, opts, run, cfg, explicit="num_hops" in shorthand)
    with thread_limits(run.threads, num_nodes=getattr(data, "num_nodes", None)) as threads:
        ctx = AuditContext(
            model,
            data,
            mask=mask,
            sensitive=sensitive,
            options=opts,
            forward_kwargs=run.forward_kwargs,
            predict_fn=run.predict_fn,
            # the Dask set-up only with a client: a local audit never imports it (nor dask)
            distributed=None if run.client is None else _distributed(model, data, run, cfg),
        )
        chosen = _choose_units(ctx, units, cfg)
        outcome = run_units(ctx, chosen)
    return build_report(ctx, chosen, outcome, run, threads)


def _distributed(model: Any, data: Any, run: RunSettings, config: AuditConfig) -> Any:
    """The cluster side of an audit given ``client=``
    (:func:`~gnnaudit.audit.distributed.session.setup_distributed`: the graph written to the
    workers' store, the remote forward passes)."""
    from gnnaudit.audit.distributed.session import setup_distributed

    return setup_distributed(
        run.client,
        model,
        data,
        shared_dir=run.shared_dir,
        num_parts=run.num_parts,
        partition="contiguous" if run.partition is None else run.partition,
        model_loader=run.model_loader,
        model_hops=config.model_hops,
        forward_kwargs=run.forward_kwargs,
        predict_fn=run.predict_fn,
    )


def _check_model_hops(
    model: Any, options: AuditOptions, run: RunSettings, config: AuditConfig, *, explicit: bool
) -> None:
    """Refuse ``num_hops`` given without ``model_hops`` for a model whose receptive field cannot
    be inferred: the user most likely meant the model's hops, and the default sensitivity unit
    would skip its node-scope test (it reads ``model_hops``, not the KS radius ``num_hops``).
    ``num_hops`` counts as given when passed as a keyword (``explicit``) or when ``options``
    holds another value than the default."""
    given = explicit or options.num_hops != _DEFAULT_NUM_HOPS
    if not given or config.model_hops is not None:
        return
    why = receptive_field_unknown(model, run.predict_fn)
    if why is None:
        return
    hops = options.num_hops
    raise InvalidInputError(
        f"num_hops={hops!r} sets the evidence search's KS radius (the hops of the "
        "counterfactual-evidence embedding), not the model's receptive field; the node-scope "
        "counterfactual flip test needs the model's receptive field, which cannot be inferred "
        f"({why}). Pass model_hops=L as well, L the number of message-passing hops of the "
        "model (0 for a model that does not pass messages), e.g. model_hops=2 for a two-layer "
        "GNN"
    )


def _choose_units(
    ctx: AuditContext, units: Sequence[AuditUnit] | None, config: AuditConfig
) -> list[AuditUnit]:
    """``units`` (plus the embedding audit with ``config.embedding``), or the default units of
    ``config`` with the automatic fine-tuning choice resolved (its note in ``ctx.notes``)."""
    if units is not None:
        chosen = list(units)
        if config.embedding and not any(u.name == EmbeddingStructureUnit.name for u in chosen):
            chosen.append(EmbeddingStructureUnit(**dict(config.embedding_kwargs or {})))
        return chosen
    finetune, note = resolve_finetune(config.finetune, ctx.adapter.model, ctx.num_nodes)
    if note is not None:
        logger.info(note)
        ctx.notes.append(note)
    return default_units(config, finetune=finetune)


def apply_transform(data: Any, transform: Any) -> Any:
    """``transform`` applied to a shallow copy of ``data`` (the preprocessing the model was
    trained with: a PyG transform such as ``T.NormalizeFeatures()`` or any callable taking and
    returning the graph). The caller's ``data`` keeps its attributes: the copy has its own
    attribute store, so a transform that assigns ``data.x = ...`` changes only the copy (one
    that edits a tensor in place, ``data.x.mul_(2)``, would still reach the caller's tensor).
    A transform that changes ``x`` drops the copy's feature units (``feature_mean`` ...,
    :mod:`gnnaudit.audit.fairness.feature_units`): they no longer describe its inputs."""
    if transform is None:
        return data
    if not callable(transform):
        raise InvalidInputError(
            f"transform must be callable (a PyG transform or a function of the graph), got "
            f"{type(transform).__name__}"
        )
    import copy

    x = getattr(data, "x", None)
    out = transform(copy.copy(data))
    if getattr(out, "x", None) is None or getattr(out, "edge_index", None) is None:
        raise InvalidInputError(
            f"transform {getattr(transform, '__name__', type(transform).__name__)} must return "
            f"the graph (with x and edge_index), got {type(out).__name__}"
        )
    if out.x is not x and not (
        isinstance(x, torch.Tensor) and x.shape == out.x.shape and torch.equal(x, out.x)
    ):
        drop_units(out)
    return out


# long: whole: its docstring documents every parameter; the body is 45 lines of step 1
@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def audit_model(  # noqa: PLR0913  # the entry point: run_audit's parameters plus the report folder's
    model: Any,
    data: Any,
    sensitive: Any = None,
    *,
    units: Sequence[AuditUnit] | None = None,
    mask: Any = None,
    config: AuditConfig | None = None,
    options: AuditOptions | None = None,
    settings: RunSettings | None = None,
    out: str | Path | None = None,
    force: bool = False,
    transform: Any = None,
    root: str | Path | None = None,
    **shorthand: Any,
) -> AuditReport:
    """Audit a user's model on a user's graph in one call; write the report when ``out`` is set.

    ``model``: any ``torch.nn.Module`` or callable ``(x, edge_index) -> logits``; models that
    need more arguments take them through ``forward_kwargs`` (e.g. ``{"edge_weight": w}``) or a
    ``predict_fn(x, edge_index) -> logits``. ``data``: a PyG ``Data`` with ``x``,
    ``edge_index`` and ``test_mask`` or ``mask``; labels (``y``) are optional. ``out``: a folder
    that receives ``report.json``, ``report.md`` and ``report.html`` (existing report files
    are replaced only with ``force=True``); with ``mitigate=True`` it also receives
    ``mitigated_model.pt``, the state_dict of the mitigated copy. ``transform``: the
    preprocessing the model was trained with, applied to a shallow copy of ``data`` before the
    audit (see :func:`apply_transform`; ``data`` itself is not modified). ``sensitive``: as
    in :func:`run_audit` (``sensitive_features=`` is an alias). ``data`` may also
    name a fair-GNN graph (``"credit"``, ``"bail"``, ``"german"``, ``"nba"``, ``"pokec_z"``,
    ``"pokec_n"``), loaded from ``root`` (default ``$GNNAUDIT_DATA``) as ``gnnaudit audit
    --dataset NAME --root DIR`` loads it (:func:`~gnnaudit.audit.pipeline.named_graph.named_graph`;
    the report's dataset name is then that name unless ``settings`` or ``dataset_name=``
    gives one).

    ``units``, ``mask``, ``config`` (:class:`AuditConfig`), ``options``
    (:class:`~gnnaudit.audit.AuditOptions`: ``k``, ``backend``, ``random_state``, ``device``
    (where the model runs and the KS propagation and exact search compute; ``"auto"``: the
    model's device), ``progress`` ...) and ``settings`` (:class:`RunSettings`:
    ``forward_kwargs``, ``predict_fn``, ``threads``, ``client`` ...) are those of
    :func:`run_audit`, and so is the flat-keyword ``**shorthand`` for their fields
    (``audit_model(model, data, finetune=True, k=5)``); an unknown keyword is an
    :class:`~gnnaudit.errors.InvalidInputError` naming it and its close matches, raised before
    any work.

    Example::

        report = gnnaudit.audit_model(my_gcn, data, sensitive="gender", out="audit/")
        print(report.verdict)
        report = gnnaudit.audit_model(credit_gcn, "credit", root="data/nifty")
        report = gnnaudit.audit_model(
            my_gcn, data, config=AuditConfig(mitigate=True), options=AuditOptions(k=5)
        )
    """
    # audit_model's own parameters are among the close matches a misspelt keyword gets
    known = [name for names in option_names().values() for name in names]
    check_keywords(shorthand, [*known, *_AUDIT_MODEL_PARAMETERS])
    force = check_bool("force", force)
    if out is not None:  # a bad destination fails now, not after the audit
        from gnnaudit.safe_io import check_output_dir

        check_output_dir("out", out, force=force, planned=REPORT_OUTPUTS)
    if isinstance(data, str):
        from gnnaudit.audit.pipeline.named_graph import named_graph

        if settings is None or settings.dataset_name is None:
            shorthand.setdefault("dataset_name", data)
        data = named_graph(data, root)
    elif root is not None:
        raise InvalidInputError("root= is for data given as a dataset name, e.g. 'credit'")
    data = apply_transform(data, transform)
    report = run_audit(
        model,
        data,
        sensitive,
        units,
        mask=mask,
        config=config,
        options=options,
        settings=settings,
        **shorthand,
    )
    if out is not None:
        report.save(out, force=force)
    return report
