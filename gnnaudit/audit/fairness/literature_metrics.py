r"""The fair-GNN literature's evaluation metrics, as NIFTY and FairGNN compute them.

NIFTY (Agarwal, Lakkaraju & Zitnik, *Towards a Unified Framework for Fair and Stable Graph
Representation Learning*, UAI 2021) and FairGNN (Dai & Wang, *Say No to the Discrimination*,
WSDM 2021) report six figures on the test nodes :math:`T` of a binary node classifier with
predictions :math:`\hat y_v \in \{0, 1\}`, scores :math:`r_v`, labels :math:`y_v` and a binary
sensitive attribute :math:`s_v \in \{0, 1\}`:

* **AUROC** of the scores (:func:`auroc`, ``sklearn.metrics.roc_auc_score``) and **F1** of the
  predictions, class 1 positive (:func:`f1`, ``sklearn.metrics.f1_score``);
* **statistical parity difference** (:func:`statistical_parity_difference`)
  :math:`\Delta_{SP} = |P(\hat y = 1 \mid s = 0) - P(\hat y = 1 \mid s = 1)|`;
* **equal opportunity difference** (:func:`equal_opportunity_difference`)
  :math:`\Delta_{EO} = |P(\hat y = 1 \mid y = 1, s = 0) - P(\hat y = 1 \mid y = 1, s = 1)|`;
* **counterfactual unfairness** (:func:`counterfactual_unfairness`, NIFTY Sec. 5, "unfairness")
  :math:`\frac{1}{|T|} \sum_{v \in T} \mathbb I[\hat y_v(X) \ne \hat y_v(\tilde X)]` where
  :math:`\tilde X` is :math:`X` with the sensitive column replaced by :math:`1 - s` for **every**
  node of the graph at once (``counter_features[:, sens_idx] = 1 - counter_features[:,
  sens_idx]`` in NIFTY's ``nifty_sota_gnn.py``). This is exactly gnnaudit's graph-scope flip
  rate of the sensitive feature on the test nodes,
  ``counterfactual_flip(model, data, sensitive_column, mask=test_mask, scope="graph").rate``
  (:mod:`gnnaudit.audit.sensitivity`; a binary feature is swapped between its two values),
  which the tests check;
* **instability** (:func:`instability`, NIFTY's "instability" / ``robustness_score``)
  :math:`\frac{1}{|T|} \sum_{v \in T} \mathbb I[\hat y_v(X) \ne \hat y_v(X + E)]` with
  :math:`E_{ij} \sim \mathcal N(0, \sigma^2)` i.i.d. for **every** entry of the feature matrix,
  the sensitive column included, and :math:`\sigma = 1` (NIFTY adds
  ``torch.ones(features.shape).normal_(0, 1)`` to the features it feeds the model: credit and
  bail min-max scaled to [-1, 1] except the sensitive column, German raw). Here :math:`E` is
  drawn from a ``torch.Generator`` seeded with ``random_state`` (NIFTY draws from the global
  stream), so the figure is reproducible; ``noise_std`` scales :math:`\sigma`.

Predictions and scores from logits (:func:`binary_outputs`): a single logit column (NIFTY's and
FairGNN's heads) gives :math:`\hat y = \mathbb I[z > 0]` and score :math:`z`; two columns give
:math:`\hat y = \arg\max` and score :math:`z_1 - z_0` (monotone in the softmax probability of
class 1, so the AUROC is the same).

Every function is vectorised (one or two forward passes, then array reductions); memory is that
of the model's forward pass plus one copy of the feature matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from sklearn.metrics import f1_score, roc_auc_score
from torch import nn

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "binary_outputs",
    "auroc",
    "f1",
    "statistical_parity_difference",
    "equal_opportunity_difference",
    "counterfactual_unfairness",
    "instability",
    "literature_metrics",
    "METRICS",
]

#: the keys of :func:`literature_metrics`, fractions in [0, 1]
METRICS: tuple[str, ...] = ("auroc", "f1", "dsp", "deo", "cf", "instability")

Predictor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _vector(name: str, value: Any) -> np.ndarray:
    arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(f"{name} must be a non-empty 1-d array, got shape {arr.shape}")
    return arr


def _binary(name: str, value: Any) -> np.ndarray:
    arr = _vector(name, value)
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][:3]
        raise InvalidInputError(f"{name} must hold only 0 and 1, found e.g. {bad.tolist()}")
    return arr.astype(np.int64)


def _aligned(**arrays: np.ndarray) -> None:
    sizes = {k: v.size for k, v in arrays.items()}
    if len(set(sizes.values())) != 1:
        raise InvalidInputError(f"arrays must have the same length, got {sizes}")


def binary_outputs(logits: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(predictions, scores)`` of ``(n,)``, ``(n, 1)`` or ``(n, 2)`` logits (module doc)."""
    z = logits.detach().cpu().to(torch.float64) if isinstance(logits, torch.Tensor) else None
    z = torch.as_tensor(np.asarray(logits, dtype=np.float64)) if z is None else z
    if z.ndim == 1:
        z = z[:, None]
    if z.ndim != 2 or z.size(1) not in (1, 2):
        raise InvalidInputError(
            f"logits must be (n,), (n, 1) or (n, 2) for a binary task, got {tuple(z.shape)}"
        )
    if not torch.isfinite(z).all():
        raise InvalidInputError("logits hold NaN or inf values")
    if z.size(1) == 1:
        score = z[:, 0]
        pred = (score > 0).long()
    else:
        score = z[:, 1] - z[:, 0]
        pred = z.argmax(dim=1)
    return pred.numpy(), score.numpy()


def auroc(y_true: Any, scores: Any) -> float:
    """Area under the ROC curve of ``scores`` for binary ``y_true`` (both classes needed)."""
    y, s = _binary("y_true", y_true), _vector("scores", scores).astype(np.float64)
    _aligned(y_true=y, scores=s)
    if np.unique(y).size < 2:
        raise InvalidInputError("auroc needs both classes 0 and 1 in y_true")
    return float(roc_auc_score(y, s))


def f1(y_true: Any, y_pred: Any) -> float:
    """F1 score of binary predictions, class 1 positive (0 when nothing is predicted 1)."""
    y, p = _binary("y_true", y_true), _binary("y_pred", y_pred)
    _aligned(y_true=y, y_pred=p)
    return float(f1_score(y, p, zero_division=0.0))


def _rate(pred: np.ndarray, mask: np.ndarray, what: str) -> float:
    if not mask.any():
        raise InvalidInputError(f"no node has {what}: the difference is undefined")
    return float(pred[mask].mean())


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def statistical_parity_difference(y_pred: Any, sensitive: Any) -> float:
    r""":math:`|P(\hat y = 1 \mid s = 0) - P(\hat y = 1 \mid s = 1)|` (both groups needed)."""
    p, s = _binary("y_pred", y_pred), _binary("sensitive", sensitive)
    _aligned(y_pred=p, sensitive=s)
    return abs(_rate(p, s == 0, "s = 0") - _rate(p, s == 1, "s = 1"))


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def equal_opportunity_difference(y_pred: Any, y_true: Any, sensitive: Any) -> float:
    r""":math:`|P(\hat y = 1 \mid y = 1, s = 0) - P(\hat y = 1 \mid y = 1, s = 1)|`."""
    p, y = _binary("y_pred", y_pred), _binary("y_true", y_true)
    s = _binary("sensitive", sensitive)
    _aligned(y_pred=p, y_true=y, sensitive=s)
    pos = y == 1
    return abs(_rate(p, pos & (s == 0), "y = 1, s = 0") - _rate(p, pos & (s == 1), "y = 1, s = 1"))


def _node_ids(nodes: Any, n: int) -> torch.Tensor:
    arr = _vector("nodes", nodes)
    if arr.dtype == np.bool_:
        if arr.size != n:
            raise InvalidInputError(f"a boolean nodes mask must have length {n}, got {arr.size}")
        arr = np.flatnonzero(arr)
    elif not np.issubdtype(arr.dtype, np.integer):
        raise InvalidInputError(f"nodes must be a boolean mask or node ids, got {arr.dtype}")
    if arr.size == 0 or arr.min() < 0 or arr.max() >= n:
        raise InvalidInputError(f"nodes must be non-empty ids in [0, {n - 1}]")
    return torch.as_tensor(arr, dtype=torch.long)


def _predict(model: Predictor, x: torch.Tensor, edge_index: torch.Tensor) -> np.ndarray:
    """Predictions of ``model`` on ``x`` in eval mode and without gradients (the model's
    train / eval mode is restored afterwards)."""
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        with torch.no_grad():
            return binary_outputs(model(x, edge_index))[0]
    finally:
        if was_training and isinstance(model, nn.Module):
            model.train()


def _check_x(x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise InvalidInputError(f"x must be a 2-d float tensor, got {type(x).__name__}")
    return x


def counterfactual_unfairness(
    model: Predictor,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    sensitive_index: int,
    nodes: Any,
    base_predictions: Any = None,
) -> float:
    r"""NIFTY's counterfactual unfairness: share of ``nodes`` whose prediction changes when
    column ``sensitive_index`` (0/1) becomes :math:`1 - s` for every node of the graph at once.

    Equals ``counterfactual_flip(model, data, sensitive_index, mask=nodes, scope="graph").rate``
    (module docstring). ``base_predictions``: the factual predictions of all nodes, if known.
    """
    x = _check_x(x)
    col = check_int("sensitive_index", sensitive_index, minimum=0, maximum=x.size(1) - 1)
    _binary("x[:, sensitive_index]", x[:, col])
    ids = _node_ids(nodes, x.size(0)).numpy()
    base = _predict(model, x, edge_index) if base_predictions is None else base_predictions
    base = _binary("base_predictions", base)
    x_cf = x.clone()
    x_cf[:, col] = 1 - x_cf[:, col]
    counter = _predict(model, x_cf, edge_index)
    return float((base[ids] != counter[ids]).mean())


def instability(
    model: Predictor,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    nodes: Any,
    noise_std: float = 1.0,
    random_state: int = 0,
    base_predictions: Any = None,
) -> float:
    r"""NIFTY's instability: share of ``nodes`` whose prediction changes when i.i.d.
    :math:`\mathcal N(0, \text{noise\_std}^2)` noise is added to every entry of ``x`` (the
    sensitive column included), drawn on the CPU from ``torch.Generator().manual_seed(
    random_state)`` in ``x``'s shape and dtype."""
    x = _check_x(x)
    noise_std = check_float("noise_std", noise_std, minimum=0.0)
    random_state = check_int("random_state", random_state, minimum=0)
    ids = _node_ids(nodes, x.size(0)).numpy()
    base = _predict(model, x, edge_index) if base_predictions is None else base_predictions
    base = _binary("base_predictions", base)
    gen = torch.Generator().manual_seed(random_state)
    noise = torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype) * noise_std
    noisy = _predict(model, x + noise.to(x.device), edge_index)
    return float((base[ids] != noisy[ids]).mean())


@renamed_keywords(aliases={"sensitive_features": "sensitive"})
def literature_metrics(
    model: Predictor,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    y: Any,
    sensitive: Any,
    sensitive_index: int,
    nodes: Any,
    *,
    noise_std: float = 1.0,
    random_state: int = 0,
) -> dict[str, float]:
    """All of :data:`METRICS` on ``nodes`` (three forward passes): AUROC, F1, ΔSP, ΔEO,
    counterfactual unfairness (``cf``) and instability, as fractions in [0, 1].

    ``y`` and ``sensitive``: labels and group ids (0/1) of every node.
    """
    x = _check_x(x)
    ids = _node_ids(nodes, x.size(0)).numpy()
    y_all, s_all = _binary("y", y), _binary("sensitive", sensitive)
    _aligned(y=y_all, sensitive=s_all, x=np.empty(x.size(0)))
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        with torch.no_grad():
            pred, score = binary_outputs(model(x, edge_index))
    finally:
        if was_training and isinstance(model, nn.Module):
            model.train()
    yt, st, pt = y_all[ids], s_all[ids], pred[ids]
    return {
        "auroc": auroc(yt, score[ids]),
        "f1": f1(yt, pt),
        "dsp": statistical_parity_difference(pt, st),
        "deo": equal_opportunity_difference(pt, yt, st),
        "cf": counterfactual_unfairness(model, x, edge_index, sensitive_index, ids, pred),
        "instability": instability(model, x, edge_index, ids, noise_std, random_state, pred),
    }
