"""One call that audits a trained node classifier on a graph and returns the report.

:func:`audit_model` is the user-facing call (any ``nn.Module`` or callable ``(x, edge_index) ->
logits``, any PyG graph, optional report folder). :func:`run_audit` is the same with the list of
audit units to run; its signature keeps only what every unit shares (the audited nodes, the
seed, the device, progress bars) and takes the rest as keyword options, the fields of
:class:`~gnnaudit.audit.pipeline.config.AuditConfig` (the default units' options),
:class:`~gnnaudit.audit.AuditOptions` (evidence search, bootstrap) and
:class:`~gnnaudit.audit.pipeline.config.RunSettings` (how the model is called); an option no
unit uses raises, naming it. Both build one
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

import logging
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from gnnaudit._aliases import renamed_keywords
from gnnaudit._threads import ThreadChoice, thread_limits
from gnnaudit._validation import resolve_progress
from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.embedding.unit import EmbeddingStructureUnit
from gnnaudit.audit.fairness.feature_units import drop_units
from gnnaudit.audit.pipeline.config import (
    AuditConfig,
    RunSettings,
    default_units,
    split_options,
)
from gnnaudit.audit.report.audit_report import REPORT_FILES, AuditReport
from gnnaudit.audit.report.verdict import compose_verdict, not_run_sentences
from gnnaudit.audit.sensitivity.unit import receptive_field_unknown
from gnnaudit.audit.unit import AuditUnit, UnitsOutcome, describe_units, run_units
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


def _model_description(ctx: AuditContext, model_info: Mapping[str, Any] | None) -> dict[str, Any]:
    target = ctx.adapter.model
    hp = dict(getattr(target, "hparams", {}) or {})
    desc: dict[str, Any] = {"class": ctx.adapter.name, "device": str(ctx.adapter.device)}
    desc.update({k: v for k, v in hp.items() if isinstance(v, (int, float, str, bool))})
    if isinstance(target, torch.nn.Module):
        desc["parameters"] = int(sum(p.numel() for p in target.parameters()))
    desc.update(dict(model_info or {}))
    desc.update(ctx.accuracies)
    return desc


def _versions() -> dict[str, str]:
    import torch_geometric

    from gnnaudit._version import __version__

    return {
        "gnnaudit": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
    }


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def run_audit(
    model: Any,
    data: Any,
    sensitive: Any = None,
    units: Sequence[AuditUnit] | None = None,
    *,
    mask: Any = None,
    config: AuditConfig | None = None,
    random_state: int = 0,
    progress: bool | None = None,
    device: Any = "auto",
    **options: Any,
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
    config : the default units' options (:class:`AuditConfig`); only without ``units``.
    random_state : seed of every random choice (bootstrap, permutations, approximate search).
    progress : tqdm bars; ``None`` (default): only when standard error is a terminal.
    device : where the model runs (``"auto"``: where it already is).
    **options : by name, the fields of

        * :class:`AuditConfig` (``ks``, ``top_pairs``, ``proxies``, ``proxy_top``,
          ``min_support``, ``bins``, ``model_hops``, ``finetune``, ``finetune_kwargs``,
          ``embedding``, ``embedding_kwargs``, ``mitigate``, ``mitigate_kwargs``): they
          update ``config``; with ``units`` given only ``embedding`` / ``embedding_kwargs``
          (appending the embedding audit), the others raise, as no unit would use them.
          ``finetune=None``: automatic, see :func:`resolve_finetune`;
        * :class:`~gnnaudit.audit.AuditOptions` (``k``, ``backend``, ``num_hops``, ``alpha``,
          ``index_params``: the counterfactual-evidence search, ``backend`` default
          ``"auto"``, recorded in ``run_info["evidence_backend"]``; ``num_hops`` is its KS
          radius, not ``model_hops``, see :class:`~gnnaudit.audit.AuditOptions`; ``n_boot``,
          ``confidence``: the intervals; ``sensitive_bins``: quantile bins of a continuous
          sensitive attribute, by default the ``bins`` given explicitly, else none: such an
          attribute is refused with a message suggesting bins), shared by every unit;
        * :class:`RunSettings` (``forward_kwargs``, ``predict_fn``: how the model is called;
          ``threads``: CPU threads for the duration of the audit, recorded in
          ``run_info["threads"]``, the caller's counts restored afterwards; ``dataset_name``,
          ``model_info``: text for the report; ``client``: a ``dask.distributed.Client`` on
          whose workers the model's forward passes and the KS embedding run, with
          ``shared_dir``, ``num_parts``, ``partition``, ``model_loader``, see
          :mod:`gnnaudit.audit.distributed.session`; the findings equal those of the
          audit in one process, and ``run_info["distributed"]`` records workers,
          partitions, passes and bytes moved).

        Any other name is an :class:`~gnnaudit.errors.InvalidInputError` naming it.
    """
    shared, run, cfg = _parsed_options(model, units, config, options)
    with thread_limits(run.threads, num_nodes=getattr(data, "num_nodes", None)) as threads:
        audit_options = AuditOptions(
            random_state=random_state,
            progress=resolve_progress("progress", progress),
            device=device,
            **shared,
        )
        ctx = AuditContext(
            model,
            data,
            mask=mask,
            sensitive=sensitive,
            options=audit_options,
            forward_kwargs=run.forward_kwargs,
            predict_fn=run.predict_fn,
            # the Dask set-up only with a client: a local audit never imports it (nor dask)
            distributed=None if run.client is None else _distributed(model, data, run, cfg),
        )
        chosen = _choose_units(ctx, units, cfg)
        outcome = run_units(ctx, chosen)
    return _report(ctx, chosen, outcome, run, threads)


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
        partition=run.partition,
        model_loader=run.model_loader,
        model_hops=config.model_hops,
        forward_kwargs=run.forward_kwargs,
        predict_fn=run.predict_fn,
    )


def _parsed_options(
    model: Any, units: Sequence[AuditUnit] | None, config: AuditConfig | None, options: dict
) -> tuple[dict[str, Any], RunSettings, AuditConfig]:
    """``run_audit``'s ``**options`` split by the object they configure (shared audit options,
    run settings, the default units' config) and checked together."""
    if "bins" in options and "sensitive_bins" not in options:
        # an explicit bins= also bins a continuous sensitive attribute (the same meaning:
        # quantile bins of continuous values); without it such an attribute is refused
        options["sensitive_bins"] = options["bins"]
    shared, run, cfg = split_options(options, units_given=units is not None, config=config)
    if units is None:
        _check_model_hops(model, shared, run, cfg)
    return shared, run, cfg


def _check_model_hops(
    model: Any, shared: Mapping[str, Any], run: RunSettings, config: AuditConfig
) -> None:
    """Refuse ``num_hops`` given without ``model_hops`` for a model whose receptive field cannot
    be inferred: the user most likely meant the model's hops, and the default sensitivity unit
    would skip its node-scope test (it reads ``model_hops``, not the KS radius ``num_hops``)."""
    if "num_hops" not in shared or config.model_hops is not None:
        return
    why = receptive_field_unknown(model, run.predict_fn)
    if why is None:
        return
    hops = shared["num_hops"]
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


def _report(
    ctx: AuditContext,
    units: Sequence[AuditUnit],
    outcome: UnitsOutcome,
    run: RunSettings,
    threads: ThreadChoice,
) -> AuditReport:
    """The report of a finished audit: findings, verdict, sections, configuration, run
    information and the checkpoints the units produced."""
    checkpoints: dict[str, Any] = {}
    for result in outcome.results.values():
        checkpoints.update(getattr(result, "checkpoints", {}) or {})
    verdict = compose_verdict(
        outcome.findings,
        sensitive_name=[a.name for a in ctx.attributes],
        degenerate_reason=ctx.degenerate_reason,
        not_inputs=[a.name for a in ctx.attributes if a.column is None],
        not_run=not_run_sentences(outcome.sections) if ctx.attributes else (),
    )
    options = ctx.options
    config = {
        "k": options.k,
        "backend": options.backend,
        "num_hops": options.num_hops,
        "alpha": options.alpha,
        "random_state": options.random_state,
        "n_boot": options.n_boot,
        "confidence": options.confidence,
        "units": [u["unit"] for u in describe_units(units)],
    }
    run_info: dict[str, Any] = {
        "seconds": {key: round(v, 3) for key, v in outcome.seconds.items()},
        "model_calls": {key: w["model_calls"] for key, w in outcome.work.items()},
        "model_passes": {key: w["passes"] for key, w in outcome.work.items()},
        "versions": _versions(),
        "threads": threads.as_dict(),
    }
    if "evidence" in vars(ctx):  # fitted by a unit (a cached property): the backend it built
        run_info["evidence_backend"] = ctx.evidence.backend_
    if ctx.distributed is not None:
        run_info["distributed"] = ctx.distributed.summary()
    if ctx.notes:
        run_info["notes"] = list(ctx.notes)
    return AuditReport(
        title="GNN audit",
        dataset=ctx.dataset_summary(run.dataset_name),
        model=_model_description(ctx, run.model_info),
        config=config,
        findings=outcome.findings,
        verdict=verdict,
        sections=outcome.sections,
        run_info=run_info,
        checkpoints=checkpoints,
    )


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


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def audit_model(
    model: Any,
    data: Any,
    sensitive: Any = None,
    *,
    out: str | Path | None = None,
    force: bool = False,
    transform: Any = None,
    root: str | Path | None = None,
    **options: Any,
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
    --dataset NAME --root DIR`` loads it (:func:`~gnnaudit.audit.pipeline.named_graph.named_graph`).

    Every other keyword is an option of :func:`run_audit`, under the same names: ``mask``,
    ``units``, ``config``, ``random_state``, ``progress``, ``device`` (where the model runs and
    the KS propagation and exact search compute; ``"auto"``: the model's device), and the
    fields of :class:`AuditConfig` (``finetune``, ``mitigate``, ``embedding`` ...),
    :class:`~gnnaudit.audit.AuditOptions` (``k``, ``backend`` ...) and :class:`RunSettings`
    (``forward_kwargs``, ``predict_fn``, ``threads`` ...); an unknown name is an
    :class:`~gnnaudit.errors.InvalidInputError` naming it.

    Example::

        report = gnnaudit.audit_model(my_gcn, data, sensitive="gender", out="audit/")
        print(report.verdict)
        report = gnnaudit.audit_model(credit_gcn, "credit", root="data/nifty")
    """
    if not isinstance(force, bool):
        raise InvalidInputError(f"force must be True or False, got {force!r}")
    if out is not None:  # a bad destination fails now, not after the audit
        from gnnaudit.safe_io import check_output_dir

        check_output_dir("out", out, force=force, planned=REPORT_OUTPUTS)
    if isinstance(data, str):
        from gnnaudit.audit.pipeline.named_graph import named_graph

        options.setdefault("dataset_name", data)
        data = named_graph(data, root)
    elif root is not None:
        raise InvalidInputError("root= is for data given as a dataset name, e.g. 'credit'")
    data = apply_transform(data, transform)
    report = run_audit(model, data, sensitive, **options)
    if out is not None:
        report.save(out, force=force)
    return report
