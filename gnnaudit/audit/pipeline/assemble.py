"""The report of a finished audit: the verdict composed from the findings, the configuration,
the dataset and model descriptions, the run information (seconds, model calls, versions,
threads, the Dask figures with a client) and the units' checkpoints
(:func:`build_report`, the last step of :func:`~gnnaudit.audit.pipeline.run.run_audit`)."""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gnnaudit._threads import ThreadChoice
from gnnaudit.audit.context import AuditContext
from gnnaudit.audit.pipeline.config import RunSettings
from gnnaudit.audit.report.audit_report import AuditReport
from gnnaudit.audit.report.verdict import compose_verdict, not_run_sentences
from gnnaudit.audit.unit import AuditUnit, UnitsOutcome, describe_units

__all__ = ["build_report", "model_description", "versions"]


def model_description(ctx: AuditContext, model_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report's ``model`` entry: class, device, the scalar hyper-parameters, the parameter
    count, the caller's ``model_info`` and the accuracies on the graph's masks."""
    target = ctx.adapter.model
    hp = dict(getattr(target, "hparams", {}) or {})
    desc: dict[str, Any] = {"class": ctx.adapter.name, "device": str(ctx.adapter.device)}
    desc.update({k: v for k, v in hp.items() if isinstance(v, (int, float, str, bool))})
    if isinstance(target, torch.nn.Module):
        desc["parameters"] = int(sum(p.numel() for p in target.parameters()))
    desc.update(dict(model_info or {}))
    desc.update(ctx.accuracies)
    return desc


def versions() -> dict[str, str]:
    """The versions of gnnaudit, Python, torch and torch_geometric, for the run information."""
    import torch_geometric

    from gnnaudit._version import __version__

    return {
        "gnnaudit": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
    }


def build_report(
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
        degenerate_cause=ctx.degenerate_cause,
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
        "versions": versions(),
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
        model=model_description(ctx, run.model_info),
        config=config,
        findings=outcome.findings,
        verdict=verdict,
        sections=outcome.sections,
        run_info=run_info,
        checkpoints=checkpoints,
    )
