"""One call that audits a trained node classifier on a graph and returns the report.

:func:`audit_model` is the user-facing call (any ``nn.Module`` or callable ``(x, edge_index) ->
logits``, any PyG graph, optional report folder). :func:`run_audit` is the same with every
option, including the list of audit units to run. Both build one
:class:`~gnnaudit.audit.context.AuditContext` (one forward pass, one evidence search) and run
the units in order (:func:`~gnnaudit.audit.unit.run_units`); each unit contributes a report
section and findings, and the verdict is composed from the findings.

The default unit list (:func:`default_units`):

1. model quality and the degenerate-model guard;
2. counterfactual sensitivity of the sensitive attribute at node and graph scope, and its rank
   among all features (needs the attribute as a model input);
3. group fairness (needs a sensitive attribute);
4. the evidence contrast of the sensitive attribute (needs it as a model input);
5. discrimination scores (CE paper Eq. 12, descriptive);
6. error verification (Sec. 7.2, needs labels);
7. the top evidence pairs (led by pairs differing in the attribute when the contrast is
   significant);
8. fine-tuning on evidences (Sec. 7.3; only with ``finetune=True`` and a LightningModule;
   ``finetune=None`` = automatic: on for a LightningModule on graphs of at most
   :data:`FINETUNE_MAX_NODES` nodes, skipped above with a note in the report);
9. before / after mitigation (only with ``mitigate=True``: a copy of the model fine-tuned with
   :class:`~gnnaudit.training.FairFinetune` and audited again; its weights are saved beside the
   report as ``mitigated_model.pt``).

``embedding=True`` appends the embedding audit
(:class:`~gnnaudit.audit.EmbeddingStructureUnit`, options in ``embedding_kwargs``); it is not
a default unit.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from gnnaudit._threads import configure_threads
from gnnaudit._validation import check_int
from gnnaudit.audit.context import AuditContext, AuditOptions
from gnnaudit.audit.contrast_unit import EvidenceContrastUnit
from gnnaudit.audit.discrimination import DiscriminationUnit
from gnnaudit.audit.embedding_unit import EmbeddingStructureUnit
from gnnaudit.audit.error_verification import DEFAULT_KS, ErrorVerificationUnit
from gnnaudit.audit.evidence_pairs import EvidencePairsUnit
from gnnaudit.audit.group_fairness import GroupFairnessUnit
from gnnaudit.audit.model_quality import ModelQuality
from gnnaudit.audit.report import AuditReport
from gnnaudit.audit.sensitivity_unit import SensitivityUnit
from gnnaudit.audit.unit import AuditUnit, describe_units, run_units
from gnnaudit.audit.verdict import compose_verdict
from gnnaudit.errors import InvalidInputError

__all__ = ["run_audit", "audit_model", "default_units", "resolve_finetune", "FINETUNE_MAX_NODES"]

logger = logging.getLogger(__name__)

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
    graph of at most ``FINETUNE_MAX_NODES`` nodes (the constant is read at call time).
    """
    if finetune is not None:
        if not isinstance(finetune, bool):
            raise InvalidInputError(f"finetune must be True, False or None, got {finetune!r}")
        return finetune, None
    import lightning as L

    target = getattr(model, "model", model)  # a ModelAdapter wraps the module
    if not isinstance(target, L.LightningModule):
        return False, None
    if num_nodes <= FINETUNE_MAX_NODES:
        return True, None
    return False, (
        f"fine-tuning on evidences skipped: the graph has {num_nodes:,} nodes, more than "
        f"FINETUNE_MAX_NODES = {FINETUNE_MAX_NODES:,} (its cost grows with the graph); pass "
        "finetune=True (CLI: --finetune) to run it anyway"
    )


def default_units(
    *,
    ks: Sequence[int] = DEFAULT_KS,
    top_pairs: int = 10,
    min_support: int = 5,
    bins: int = 4,
    finetune: bool = False,
    finetune_kwargs: Mapping[str, Any] | None = None,
    model_hops: int | None = None,
    embedding: bool = False,
    embedding_kwargs: Mapping[str, Any] | None = None,
    mitigate: bool = False,
    mitigate_kwargs: Mapping[str, Any] | None = None,
) -> list[AuditUnit]:
    """The audit's default statistics, in report order (see the module docstring)."""
    from gnnaudit.training.finetune import EvidenceFinetuneUnit

    units: list[AuditUnit] = [
        ModelQuality(),
        SensitivityUnit(num_hops=model_hops),
        GroupFairnessUnit(),
        EvidenceContrastUnit(),
        DiscriminationUnit(min_support=min_support, bins=bins),
        ErrorVerificationUnit(ks=ks),
        EvidencePairsUnit(top=top_pairs, pool=max(100, top_pairs)),
    ]
    if finetune:
        units.append(EvidenceFinetuneUnit(**dict(finetune_kwargs or {})))
    if embedding:
        units.append(EmbeddingStructureUnit(**dict(embedding_kwargs or {})))
    if mitigate:
        from gnnaudit.training.mitigation import MitigationUnit

        units.append(MitigationUnit(**dict(mitigate_kwargs or {})))
    return units


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

    from gnnaudit import __version__

    return {
        "gnnaudit": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
    }


def run_audit(
    model: Any,
    data: Any,
    *,
    units: Sequence[AuditUnit] | None = None,
    sensitive: Any = None,
    mask: Any = None,
    k: int = 10,
    backend: str = "auto",
    num_hops: int = 3,
    alpha: float = 0.5,
    index_params: Mapping[str, Any] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    top_pairs: int = 10,
    min_support: int = 5,
    bins: int = 4,
    finetune: bool | None = False,
    finetune_kwargs: Mapping[str, Any] | None = None,
    model_hops: int | None = None,
    embedding: bool = False,
    embedding_kwargs: Mapping[str, Any] | None = None,
    mitigate: bool = False,
    mitigate_kwargs: Mapping[str, Any] | None = None,
    dataset_name: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    random_state: int = 0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    progress: bool = True,
    forward_kwargs: Mapping[str, Any] | None = None,
    predict_fn: Callable[[torch.Tensor, torch.Tensor], Any] | None = None,
    device: Any = "auto",
    threads: int | None = None,
) -> AuditReport:
    """Audit ``model`` on ``data`` with a list of audit units and return the report.

    Parameters
    ----------
    model : any ``torch.nn.Module`` or callable ``model(x, edge_index) -> logits`` (a
        :class:`~gnnaudit.training.NodeClassifier`, a user's own GNN ...). It is run in eval
        mode without gradients on its own device and never modified.
    data : a PyG ``Data`` with ``x`` and ``edge_index``; ``y``, masks, ``feature_names``,
        ``sensitive`` / ``sensitive_name`` optional (units that need a missing input are
        skipped with a note).
    units : the statistics to run (default :func:`default_units` built from the options
        below).
    sensitive : the sensitive attribute: a feature name, an (n,) array, or None for
        ``data.sensitive``.
    mask : the audited nodes (default ``data.mask``, else ``data.test_mask``, else all).
    k, backend, num_hops, alpha, index_params : counterfactual-evidence search (``backend``
        default ``"auto"``: exact below the measured crossover, faiss above it; the choice is
        ``run_info["evidence_backend"]``).
    ks, top_pairs, min_support, bins, finetune, finetune_kwargs : options of the default units
        (``finetune=None``: automatic, see :func:`resolve_finetune`).
    model_hops : the model's receptive-field radius for node-scope sensitivity (default:
        inferred from its ``MessagePassing`` layers; needed for a ``predict_fn`` or a model
        without them, else node scope is skipped with a note).
    embedding, embedding_kwargs : add the embedding audit
        (:class:`~gnnaudit.audit.EmbeddingStructureUnit`) with these options.
    mitigate, mitigate_kwargs : add the before / after mitigation unit
        (:class:`~gnnaudit.training.mitigation.MitigationUnit` with these keyword arguments);
        the mitigated weights go to ``report.checkpoints`` and are written by ``report.save``.
    dataset_name, model_info : text for the report.
    random_state, n_boot, confidence : seeds and intervals of every statistic.
    progress : tqdm bars.
    forward_kwargs, predict_fn, device : how the model is called (see
        :class:`~gnnaudit.audit.model_adapter.ModelAdapter`).
    threads : CPU threads (torch, BLAS / OpenMP, faiss); default: the policy of
        :func:`gnnaudit._threads.configure_threads` for ``data.num_nodes`` (an earlier explicit
        choice, else ``OMP_NUM_THREADS``, else 1 thread below ``SIZE_THRESHOLD`` nodes and all
        cores above). The choice is in ``report.run_info["threads"]``.
    """
    thread_choice = configure_threads(threads, num_nodes=getattr(data, "num_nodes", None))
    options = AuditOptions(
        k=k,
        backend=backend,
        num_hops=num_hops,
        alpha=alpha,
        index_params=index_params,
        random_state=random_state,
        n_boot=n_boot,
        confidence=confidence,
        progress=progress,
        device=device,
    )
    ctx = AuditContext(
        model,
        data,
        mask=mask,
        sensitive=sensitive,
        options=options,
        forward_kwargs=forward_kwargs,
        predict_fn=predict_fn,
    )
    finetune, finetune_note = resolve_finetune(finetune, ctx.adapter.model, ctx.num_nodes)
    if finetune_note is not None and units is None:
        logger.info(finetune_note)
        ctx.notes.append(finetune_note)
    if units is None:
        units = default_units(
            ks=ks,
            top_pairs=check_int("top_pairs", top_pairs, minimum=1),
            min_support=min_support,
            bins=bins,
            finetune=finetune,
            finetune_kwargs=finetune_kwargs,
            model_hops=model_hops,
            embedding=embedding,
            embedding_kwargs=embedding_kwargs,
            mitigate=mitigate,
            mitigate_kwargs=mitigate_kwargs,
        )
    elif embedding and not any(u.name == EmbeddingStructureUnit.name for u in units):
        units = [*units, EmbeddingStructureUnit(**dict(embedding_kwargs or {}))]
    outcome = run_units(ctx, list(units))
    checkpoints: dict[str, Any] = {}
    for result in outcome.results.values():
        checkpoints.update(getattr(result, "checkpoints", {}) or {})
    verdict = compose_verdict(
        outcome.findings,
        sensitive_name=ctx.sensitive_name,
        degenerate_reason=ctx.degenerate_reason,
    )
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
        "versions": _versions(),
        "threads": thread_choice.as_dict(),
    }
    if "evidence" in vars(ctx):  # fitted by a unit (a cached property): the backend it built
        run_info["evidence_backend"] = ctx.evidence.backend_
    if ctx.notes:
        run_info["notes"] = list(ctx.notes)
    return AuditReport(
        title="GNN audit",
        dataset=ctx.dataset_summary(dataset_name),
        model=_model_description(ctx, model_info),
        config=config,
        findings=outcome.findings,
        verdict=verdict,
        sections=outcome.sections,
        run_info=run_info,
        checkpoints=checkpoints,
    )


def audit_model(
    model: Any,
    data: Any,
    *,
    sensitive: Any = None,
    mask: Any = None,
    k: int = 10,
    backend: str = "auto",
    finetune: bool | None = False,
    mitigate: bool = False,
    out: str | Path | None = None,
    random_state: int = 0,
    progress: bool = True,
    force: bool = False,
    forward_kwargs: Mapping[str, Any] | None = None,
    predict_fn: Callable[[torch.Tensor, torch.Tensor], Any] | None = None,
    device: Any = "auto",
    **options: Any,
) -> AuditReport:
    """Audit a user's model on a user's graph in one call; write the report when ``out`` is set.

    ``model``: any ``torch.nn.Module`` or callable ``(x, edge_index) -> logits``; models that
    need more arguments take them through ``forward_kwargs`` (e.g. ``{"edge_weight": w}``) or a
    ``predict_fn(x, edge_index) -> logits``. ``data``: a PyG ``Data`` with ``x``,
    ``edge_index`` and ``test_mask`` or ``mask``; labels (``y``) are optional. ``out``: a folder
    that receives ``report.json``, ``report.md`` and ``report.html`` (existing report files
    are replaced only with ``force=True``); with ``mitigate=True`` it also receives
    ``mitigated_model.pt``, the state_dict of the mitigated copy. ``device``: where the model
    runs and the KS propagation and exact search compute (``"auto"``: the model's device).
    Further keyword arguments go to :func:`run_audit` (e.g. ``embedding=True`` for the
    embedding audit section).

    Example::

        report = gnnaudit.audit_model(my_gcn, data, sensitive="gender", out="audit/")
        print(report.verdict)
    """
    unknown = set(options) - {
        "units",
        "num_hops",
        "alpha",
        "index_params",
        "ks",
        "top_pairs",
        "min_support",
        "bins",
        "finetune_kwargs",
        "model_hops",
        "embedding",
        "embedding_kwargs",
        "mitigate_kwargs",
        "dataset_name",
        "model_info",
        "n_boot",
        "confidence",
        "threads",
    }
    if unknown:
        raise InvalidInputError(f"audit_model got unknown option(s): {sorted(unknown)}")
    report = run_audit(
        model,
        data,
        sensitive=sensitive,
        mask=mask,
        k=k,
        backend=backend,
        finetune=finetune,
        mitigate=mitigate,
        random_state=random_state,
        progress=progress,
        forward_kwargs=forward_kwargs,
        predict_fn=predict_fn,
        device=device,
        **options,
    )
    if out is not None:
        report.save(out, force=force)
    return report
