"""One call that runs every counterfactual-evidence audit of a trained model on a graph.

:func:`run_audit` is what the ``gnnaudit audit`` command and the examples call. Stages (a tqdm bar
runs over them): predictions -> evidence search (KS embedding + backend) -> discrimination scores
(Eq. 12) -> group fairness -> error verification (Sec. 7.2) -> top evidence pairs -> fine-tuning
on evidences (Sec. 7.3, optional). The result is an :class:`~gnnaudit.audit.AuditReport`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from gnnaudit._validation import check_int
from gnnaudit.audit.discrimination import discrimination_scores, feature_rank
from gnnaudit.audit.error_verification import error_verification
from gnnaudit.audit.evidence import CounterfactualEvidence
from gnnaudit.audit.group_fairness import group_fairness
from gnnaudit.audit.report import AuditReport, pair_comparison
from gnnaudit.errors import InvalidInputError

__all__ = ["run_audit", "resolve_sensitive"]

logger = logging.getLogger(__name__)

DEFAULT_KS: tuple[int, ...] = (10, 20, 50, 100, 200, 500)


@contextlib.contextmanager
def _quiet():
    """Silence the per-call "one predicted class" UserWarning (reported once in the notes)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*share one predicted class.*")
        yield


def resolve_sensitive(data: Any, sensitive: Any = None) -> tuple[np.ndarray | None, str | None]:
    """The sensitive attribute of every node and its name.

    ``sensitive``: None (use ``data.sensitive`` / ``data.sensitive_name`` when present), a
    feature name of ``data.feature_names``, or an (n,) array. Returns ``(values, name)``;
    ``(None, None)`` when nothing is available.
    """
    n = int(data.num_nodes)
    names = [str(f) for f in (getattr(data, "feature_names", None) or [])]
    if sensitive is None:
        values = getattr(data, "sensitive", None)
        if values is None:
            return None, None
        name = getattr(data, "sensitive_name", None)
        return np.asarray(values.cpu() if hasattr(values, "cpu") else values).ravel(), name
    if isinstance(sensitive, str):
        if sensitive in names:
            return data.x[:, names.index(sensitive)].cpu().numpy(), sensitive
        if sensitive == getattr(data, "sensitive_name", None) and data.get("sensitive") is not None:
            return data.sensitive.cpu().numpy().ravel(), sensitive
        raise InvalidInputError(
            f"sensitive={sensitive!r} is not a feature name of the data; known: "
            f"{', '.join(names[:20])}{' ...' if len(names) > 20 else ''}"
        )
    arr = np.asarray(sensitive.cpu() if hasattr(sensitive, "cpu") else sensitive).ravel()
    if arr.shape[0] != n:
        raise InvalidInputError(f"sensitive must have one value per node ({n}), got {arr.shape[0]}")
    return arr, "sensitive"


def _dataset_summary(data: Any, name: str | None, sensitive_name: str | None) -> dict[str, Any]:
    ei = data.edge_index
    return {
        "name": name or "graph",
        "nodes": int(data.num_nodes),
        "directed_edges": int(ei.size(1)),
        "features": int(data.x.size(1)),
        "classes": int(data.y.max()) + 1 if data.y.numel() else 0,
        "train_nodes": int(data.train_mask.sum()),
        "val_nodes": int(data.val_mask.sum()),
        "test_nodes": int(data.test_mask.sum()),
        "sensitive_name": sensitive_name,
    }


def run_audit(
    data: Any,
    module: Any,
    k: int = 10,
    *,
    sensitive: Any = None,
    ks: Sequence[int] = DEFAULT_KS,
    top_pairs: int = 10,
    finetune: bool = True,
    finetune_kwargs: Mapping[str, Any] | None = None,
    backend: str = "exact",
    num_hops: int = 3,
    alpha: float = 0.5,
    min_support: int = 1,
    dataset_name: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    random_state: int = 0,
    progress: bool = True,
) -> AuditReport:
    """Run every audit of ``module`` on ``data`` and return the report.

    Parameters
    ----------
    data : graph with ``x``, ``y``, ``edge_index``, train / val / test masks (optionally
        ``feature_names``, ``sensitive``, ``sensitive_name``).
    module : trained model callable as ``module(x, edge_index) -> logits``; fine-tuning needs a
        LightningModule such as :class:`~gnnaudit.training.NodeClassifier`.
    k : local evidences per test node for the discrimination scores.
    sensitive : see :func:`resolve_sensitive` (drives group fairness and the rank summary).
    ks : error-verification cut-offs.
    top_pairs : global pairs shown side by side in the report.
    finetune : run :func:`~gnnaudit.training.finetune_on_evidences` (keyword arguments in
        ``finetune_kwargs``); skipped with a warning when ``module`` is not a LightningModule.
    backend, num_hops, alpha, random_state : :class:`~gnnaudit.audit.CounterfactualEvidence`.
    min_support : passed to :func:`~gnnaudit.audit.discrimination_scores`.
    dataset_name, model_info : text for the report.
    progress : tqdm bar over the stages.
    """
    from tqdm.auto import tqdm

    from gnnaudit.training.data_module import check_node_data

    data = check_node_data(data)
    k = check_int("k", k, minimum=1)
    top_pairs = check_int("top_pairs", top_pairs, minimum=0)
    if not callable(module):
        raise InvalidInputError(f"module must be callable as module(x, edge_index), got {module!r}")
    sens_values, sens_name = resolve_sensitive(data, sensitive)
    stages = [
        "predict",
        "evidence search",
        "discrimination scores",
        "group fairness",
        "error verification",
        "evidence pairs",
    ] + (["fine-tuning"] if finetune else [])
    timings: dict[str, float] = {}
    bar = tqdm(stages, desc="audit", disable=not progress, leave=False)

    def stage(name: str) -> float:
        bar.set_postfix_str(name)
        return time.perf_counter()

    t = stage("predict")
    was = getattr(module, "training", False)
    if hasattr(module, "eval"):
        module.eval()
    with torch.no_grad():
        logits = module(data.x, data.edge_index)
    if was and hasattr(module, "train"):
        module.train(True)
    pred = logits.argmax(-1).cpu().numpy().astype(np.int64)
    y = data.y.cpu().numpy()
    accs = {
        f"{s}_accuracy": float((pred[m] == y[m]).mean())
        for s in ("train", "val", "test")
        if (m := getattr(data, f"{s}_mask").cpu().numpy()).any()
    }
    timings["predict"] = time.perf_counter() - t
    bar.update(1)

    t = stage("evidence search")
    ce = CounterfactualEvidence(
        num_hops=num_hops, alpha=alpha, backend=backend, random_state=random_state
    ).fit(data, predictions=pred)
    timings["evidence_search"] = time.perf_counter() - t
    bar.update(1)
    notes: list[str] = []
    single_class = np.unique(pred[data.test_mask.cpu().numpy()]).size < 2
    if single_class:
        notes.append(
            "the model predicts one class on every test node: there is no counterfactual "
            "evidence, so the evidence-based audits are empty and fine-tuning is skipped"
        )
        logger.warning(notes[-1])

    t = stage("discrimination scores")
    with _quiet():
        disc = discrimination_scores(data, ce, k=k, min_support=min_support)
    timings["discrimination"] = time.perf_counter() - t
    bar.update(1)

    t = stage("group fairness")
    gf = None
    if sens_values is not None:
        gf = group_fairness(pred, y, sens_values, data.test_mask, sensitive_name=sens_name)
    else:
        logger.warning("no sensitive attribute given or attached to the data: no group fairness")
    timings["group_fairness"] = time.perf_counter() - t
    bar.update(1)

    t = stage("error verification")
    with _quiet():
        ev = error_verification(ce, pred, y, ks=ks)
    timings["error_verification"] = time.perf_counter() - t
    bar.update(1)

    t = stage("evidence pairs")
    with _quiet():
        global_pairs = ce.global_evidence(k=max(top_pairs, 1))
    pairs, pair_feats = pair_comparison(data, global_pairs, pred, y, top=top_pairs)
    timings["evidence_pairs"] = time.perf_counter() - t
    bar.update(1)

    ft_frame = None
    ft_info: dict[str, Any] = {}
    if finetune:
        t = stage("fine-tuning")
        import lightning as L

        if single_class:
            pass
        elif isinstance(module, L.LightningModule):
            from gnnaudit.errors import InfeasibleError
            from gnnaudit.training.finetune import finetune_on_evidences

            try:
                res = finetune_on_evidences(module, data, ce, **dict(finetune_kwargs or {}))
            except InfeasibleError as exc:
                notes.append(f"fine-tuning skipped: {exc}")
                logger.warning(notes[-1])
            else:
                ft_frame = res.to_frame()
                ft_info = {
                    "m": res.m,
                    "epochs": res.epochs,
                    "lr": res.lr,
                    "keep_train": res.keep_train,
                    "seeds": res.runs["seed"].tolist(),
                }
        else:
            notes.append("fine-tuning skipped: module is not a LightningModule")
            logger.warning(notes[-1])
        timings["finetune"] = time.perf_counter() - t
        bar.update(1)
    bar.close()

    summary: dict[str, Any] = {"test_accuracy": accs.get("test_accuracy")}
    if len(disc):
        top = disc.iloc[0]
        summary["top_discrimination"] = f"{top['feature']} = {top['value']:g} ({top['score']:.3f})"
    if sens_name is not None and sens_name in set(disc["feature"]):
        summary["sensitive_feature"] = sens_name
        summary["sensitive_rank_by_score"] = feature_rank(disc, sens_name, by="score")
        summary["sensitive_rank_by_lift"] = feature_rank(disc, sens_name, by="lift")
        summary["features_ranked"] = int(disc["feature"].nunique())
    if gf is not None:
        summary["statistical_parity_difference"] = gf.statistical_parity_difference
        summary["equal_opportunity_difference"] = gf.equal_opportunity_difference
    if len(ev):
        first = ev.iloc[0]
        summary[f"accuracy_in_top_{int(first['k'])}_evidences"] = float(
            first["accuracy_in_evidence"]
        )
    if notes:
        summary["notes"] = " | ".join(notes)
    summary["seconds"] = {key: round(v, 3) for key, v in timings.items()}

    hp = dict(getattr(module, "hparams", {}) or {})
    model = {key: hp[key] for key in hp if isinstance(hp[key], (int, float, str, bool))}
    model.update(model_info or {})
    model.update(accs)
    config = {
        "k": k,
        "ks": list(ks),
        "backend": backend,
        "num_hops": num_hops,
        "alpha": alpha,
        "min_support": min_support,
        "top_pairs": top_pairs,
        "random_state": random_state,
        "finetune": ft_info or bool(finetune),
    }
    return AuditReport(
        dataset=_dataset_summary(data, dataset_name, sens_name),
        model=model,
        config=config,
        discrimination=disc,
        error_verification=ev,
        top_pairs=pairs,
        pair_features=pair_feats,
        group_fairness=gf,
        finetune=ft_frame,
        summary=summary,
    )
