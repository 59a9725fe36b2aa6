r"""Fine-tuning a node classifier to remove its dependence on a sensitive attribute.

:class:`FairFinetune` is a ``LightningModule`` that wraps any node classifier whose forward
takes ``(x, edge_index)`` (a :class:`~gnnaudit.training.NodeClassifier` or a user's own
``nn.Module``) and fine-tunes it, full batch, on

.. math::

    \mathcal L = \underbrace{\mathrm{CE}\bigl(M(X)_{\mathrm{train}}, y_{\mathrm{train}}\bigr)}_{\text{task}}
      + \lambda_{cf}\, \tfrac{1}{|S|}\sum_{s \in S} \mathcal C_s
      + \lambda_{ev}\, \frac{1}{|P|} \sum_{(u,v) \in P} D\bigl(M(X)_u, M(X)_v\bigr)
      + \lambda_{cov}\, \mathcal R_{cov},

**counterfactual consistency** (NIFTY, Agarwal et al. 2021: the model's output must not move
when the sensitive attribute is changed) at the scopes :math:`S \subseteq` {node, graph}:

* graph scope: :math:`\mathcal C_{graph} = \operatorname{mean}_v D(M(X)_v, M(\tilde X)_v)`
  with :math:`\tilde X` = every node's sensitive value changed at once (NIFTY's counterfactual
  view; it also covers what reaches a node from its changed neighbours);
* node scope: :math:`\mathcal C_{node} = \operatorname{mean}_{v \in B_t} D(M(X)_v,
  M(\tilde X^{B_t})_v)` where :math:`\tilde X^{B_t}` changes only the nodes of batch
  :math:`B_t`: a set of nodes no two of which are within L hops (the receptive-field batches of
  :mod:`gnnaudit.audit.sensitivity.receptive_field`), so every :math:`v \in B_t` sees exactly its own
  node-scope counterfactual. Step ``t`` uses the next batch of a seeded order over a seeded
  sample of at most ``max_nodes`` nodes.

The changed values are those of the audit (:func:`gnnaudit.audit.interventions.alternatives`):
a binary attribute is flipped; a categorical / one-hot attribute is moved to one other value per
step (seeded); a continuous one gets the opposite-quantile swap. :math:`D` is the symmetric KL
divergence of the two softmax outputs,
:math:`D(a, b) = \tfrac12 \sum_c (p_c - q_c)(\log p_c - \log q_c)`, ``divergence="sym_kl"``,
or the mean squared difference of the logits, ``divergence="logit_l2"``; both are 0 when the
outputs agree, so a model that ignores the attribute has zero consistency loss.

**Evidence term** (optional, ``lambda_ev > 0``): pairs :math:`P` of counterfactual evidences
(CE paper: look-alike nodes the model labels differently) whose sensitive values differ and
whose feature difference lies mostly in the sensitive attribute (its share of the squared
difference of the standardised features at least ``ev_min_share``): their predictions are
pulled together.

**Covariance term** (optional, ``lambda_cov > 0``; FairGNN's covariance constraint, Dai & Wang
2021, Eq. 7, ``L_R = |Cov(s, \hat y)|``): with :math:`p_{vc}` the softmax probability of class
:math:`c` at node :math:`v` (factual pass, every node of the graph, labelled or not) and
:math:`s_{vj}` the sensitive columns' factual values,

.. math::

    \mathcal R_{cov} = \frac{1}{C k} \sum_{c=1}^{C} \sum_{j=1}^{k}
        \Bigl| \frac1n \sum_v (s_{vj} - \bar s_j)(p_{vc} - \bar p_c) \Bigr|,

which is 0 when the predicted probabilities are uncorrelated with the attribute: it targets
statistical parity (:math:`\Delta_{SP}`), which counterfactual consistency does not (a model
can ignore :math:`s` itself and still follow its proxies). No extra forward pass.

Dropout: the counterfactual passes replay the random state of the factual pass, so both use
the same dropout masks (the consistency term measures the attribute, not dropout noise) and
the random stream after a step is the one a plain step leaves. With ``lambda_cf = 0``,
``lambda_ev = 0`` and ``lambda_cov = 0`` (the default) no extra term or pass runs and the result is plain fine-tuning: cross-entropy on the
training nodes, Adam at ``lr`` with ``weight_decay``, ``epochs`` full-batch steps, the same
``Trainer`` and seeding as :func:`~gnnaudit.training.train_node_classifier`.

Cost per step: one factual pass plus one pass per scope (``1 + |S|`` forward / backward passes
on the full graph). Memory: the factual and counterfactual activations of one step (``1 + |S|``
times plain training); the node-scope plan keeps one entry per pair of sampled nodes within L
hops (bounded as in :func:`~gnnaudit.audit.sensitivity.receptive_field.plan_batches`).

Defaults (tuned on synthetic graphs with seeds and generator settings other than those the
benchmark reports, see ``benchmarks/bench_mitigation.py``): :data:`DEFAULT_LAMBDA_CF`,
:data:`DEFAULT_EPOCHS`, :data:`DEFAULT_LR`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Data

from gnnaudit._aliases import renamed_keywords
from gnnaudit._validation import (
    MAX_EPOCHS,
    MAX_LEARNING_RATE,
    MAX_WEIGHT_DECAY,
    check_choice,
    check_float,
    check_int,
    check_seed,
    resolve_progress,
)
from gnnaudit.audit.interventions import FeatureSpec, alternatives, feature_columns, resolve_feature
from gnnaudit.audit.search.evidence_table import graph_user_ids
from gnnaudit.audit.search.inputs import REQUIRED_GLOBAL_COLUMNS, check_frame, is_estimator
from gnnaudit.audit.search.results import GlobalEvidence
from gnnaudit.audit.sensitivity.receptive_field import hop_adjacency, infer_num_hops, plan_batches
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.data_module import GraphDataModule, check_node_data
from gnnaudit.training.train import make_trainer, quiet_lightning

__all__ = [
    "FairFinetune",
    "resolve_sensitive_feature",
    "sensitive_evidence_pairs",
    "consistency_divergence",
    "SCOPES",
    "DIVERGENCES",
    "DEFAULT_LAMBDA_CF",
    "DEFAULT_EPOCHS",
    "DEFAULT_LR",
]

logger = logging.getLogger(__name__)

#: consistency scopes (see the module docstring)
SCOPES: tuple[str, ...] = ("node", "graph")
#: divergences between factual and counterfactual outputs
DIVERGENCES: tuple[str, ...] = ("sym_kl", "logit_l2")
#: default weight of the counterfactual-consistency term
DEFAULT_LAMBDA_CF = 2.0
#: default fine-tuning epochs (one full-batch step each)
DEFAULT_EPOCHS = 150
#: default Adam learning rate
DEFAULT_LR = 0.005
#: default Adam weight decay
DEFAULT_WEIGHT_DECAY = 5e-4
#: node-scope consistency plans over a seeded sample of at most this many nodes
DEFAULT_MAX_NODES = 2000
#: global evidence pairs searched for the evidence term when none are given
DEFAULT_EV_PAIRS = 500


def consistency_divergence(
    a: torch.Tensor, b: torch.Tensor, divergence: str = "sym_kl"
) -> torch.Tensor:
    """Per-row divergence of two logit matrices ``(m, C)`` (module docstring); ``(m,)``."""
    if divergence == "logit_l2":
        return (a - b).pow(2).mean(dim=1)
    la, lb = F.log_softmax(a, dim=1), F.log_softmax(b, dim=1)
    return 0.5 * ((la.exp() - lb.exp()) * (la - lb)).sum(dim=1)


def resolve_sensitive_feature(data: Any, sensitive: Any) -> FeatureSpec:
    """The sensitive attribute as a model-input feature: a name, a column index or a one-hot
    group of ``data.x`` (None: ``data.sensitive_name``, which must be a feature)."""
    if sensitive is None:
        name = getattr(data, "sensitive_name", None)
        names = [str(f) for f in (getattr(data, "feature_names", None) or [])]
        if name is None or str(name) not in names:
            raise InvalidInputError(
                "sensitive is required: give the sensitive attribute's feature name or column "
                "index (data.sensitive_name is not one of data.feature_names)"
            )
        sensitive = str(name)
    return resolve_feature(data, sensitive, arg="sensitive")


def _global_pairs(evidence: Any, model: nn.Module, data: Data, n_pairs: int) -> GlobalEvidence:
    if evidence is None:
        from gnnaudit.audit.search.evidence import CounterfactualEvidence

        evidence = CounterfactualEvidence(progress=False).fit(data, model=model)
    if is_estimator(evidence):
        return evidence.search_global(k=n_pairs)
    if isinstance(evidence, GlobalEvidence):
        return evidence
    check_frame("evidence", evidence, REQUIRED_GLOBAL_COLUMNS)
    return GlobalEvidence.from_frame(evidence, user_ids=graph_user_ids(data))


def sensitive_evidence_pairs(
    data: Any, pairs: GlobalEvidence, spec: FeatureSpec, min_share: float = 0.5
) -> np.ndarray:
    """``(p, 2)`` evidence pairs whose sensitive values differ and whose squared difference of
    standardised features lies for at least ``min_share`` in the sensitive columns."""
    min_share = check_float("ev_min_share", min_share, minimum=0.0, maximum=1.0)
    u, v = np.asarray(pairs.node_u, np.int64), np.asarray(pairs.node_v, np.int64)
    n = int(data.x.size(0))
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InvalidInputError(f"evidence pairs hold node ids outside [0, {n - 1}]")
    x = data.x.detach().cpu().to(torch.float64).numpy()
    std = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    diff = (z[u] - z[v]) ** 2
    cols = list(spec.columns)
    sens = diff[:, cols].sum(axis=1)
    total = diff.sum(axis=1)
    s = feature_columns(data, spec.columns)
    differs = np.any(s[u] != s[v], axis=1)
    keep = differs & (sens >= min_share * np.maximum(total, 1e-12))
    return np.stack([u[keep], v[keep]], axis=1)


class FairFinetune(L.LightningModule):
    """Fine-tune ``model`` with counterfactual consistency on ``sensitive`` (module docstring).

    Parameters
    ----------
    model : node classifier, ``model(x, edge_index) -> logits``; trained in place (use
        :meth:`finetune` for a copy).
    data : the graph (``x``, ``y``, ``edge_index``, train / val / test masks).
    sensitive : the sensitive attribute: feature name, column index or one-hot group of
        ``data.x`` (None: ``data.sensitive_name``); ``sensitive_features=`` is an alias.
    lambda_cf : weight of the counterfactual-consistency term (0 = off).
    lambda_ev : weight of the evidence term (0 = off).
    lambda_cov : weight of the covariance term (0 = off, the default).
    scopes : consistency scopes, a subset of :data:`SCOPES` (default both).
    divergence : one of :data:`DIVERGENCES`.
    lr, weight_decay : Adam settings.
    num_hops : receptive-field radius L of the node-scope batches (default: inferred from the
        model's message-passing layers).
    max_nodes : node-scope consistency uses a seeded sample of this many nodes (all when fewer).
    evidence, ev_pairs, ev_min_share : evidence term: a fitted
        ``CounterfactualEvidence``, a ``GlobalEvidence`` / global-evidence DataFrame, or None
        (fitted on ``model``'s predictions over ``data.test_mask``); the top ``ev_pairs``
        global pairs are screened with :func:`sensitive_evidence_pairs`.
    random_state : seed of the node sample, the batch order and the category draws.
    """

    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def __init__(  # noqa: PLR0913  # estimator-like trainer: mirrors its documented parameters
        self,
        model: nn.Module,
        data: Data,
        sensitive: Any = None,
        *,
        lambda_cf: float = DEFAULT_LAMBDA_CF,
        lambda_ev: float = 0.0,
        lambda_cov: float = 0.0,
        scopes: Sequence[str] = SCOPES,
        divergence: str = "sym_kl",
        lr: float = DEFAULT_LR,
        weight_decay: float = DEFAULT_WEIGHT_DECAY,
        num_hops: int | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        evidence: Any = None,
        ev_pairs: int = DEFAULT_EV_PAIRS,
        ev_min_share: float = 0.5,
        random_state: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise InvalidInputError(
                f"model must be a torch.nn.Module called as model(x, edge_index), got "
                f"{type(model).__name__}"
            )
        data = check_node_data(data)
        self.model = model
        self.lambda_cf = check_float("lambda_cf", lambda_cf, minimum=0.0)
        self.lambda_ev = check_float("lambda_ev", lambda_ev, minimum=0.0)
        self.lambda_cov = check_float("lambda_cov", lambda_cov, minimum=0.0)
        if isinstance(scopes, str):
            scopes = (scopes,)
        self.scopes = tuple(check_choice("scopes entry", s, SCOPES) for s in scopes)
        if not self.scopes or len(set(self.scopes)) != len(self.scopes):
            raise InvalidInputError(f"scopes must list distinct entries of {SCOPES}, got {scopes}")
        self.divergence = check_choice("divergence", divergence, DIVERGENCES)
        self.lr = check_float(
            "lr", lr, minimum=0.0, maximum=MAX_LEARNING_RATE, inclusive=(False, True)
        )
        self.weight_decay = check_float(
            "weight_decay", weight_decay, minimum=0.0, maximum=MAX_WEIGHT_DECAY
        )
        self.random_state = check_seed("random_state", random_state)
        self.spec = resolve_sensitive_feature(data, sensitive)
        self.alternatives = alternatives(data, self.spec)
        self.columns = torch.tensor(self.spec.columns, dtype=torch.long)
        self.sensitive_values = torch.from_numpy(feature_columns(data, self.spec.columns)).float()
        self.node_batches: list[np.ndarray] = []
        if self.lambda_cf > 0 and "node" in self.scopes:
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
            plan = plan_batches(adj, pool, hops, rng)
            batches = plan.batches()
            self.node_batches = [batches[i] for i in rng.permutation(len(batches))]
        self.ev_pairs = np.zeros((0, 2), dtype=np.int64)
        if self.lambda_ev > 0:
            pairs = _global_pairs(evidence, model, data, check_int("ev_pairs", ev_pairs, minimum=1))
            self.ev_pairs = sensitive_evidence_pairs(data, pairs, self.spec, ev_min_share)
            if self.ev_pairs.shape[0] == 0:
                logger.warning(
                    "no evidence pair differs mostly in %r; the evidence term is 0", self.spec.name
                )

    # ------------------------------------------------------------------ model
    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.model(x, edge_index)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    # ------------------------------------------------------------------ losses
    def _rng_state(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        cuda = self.device.type == "cuda"
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if cuda else None

    def _set_rng_state(self, state: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.device)

    def _changed(
        self, x: torch.Tensor, alt_index: int, nodes: np.ndarray | None
    ) -> tuple[torch.Tensor, np.ndarray]:
        """``x`` with the sensitive value of ``nodes`` (all when None) set to alternative
        ``alt_index``; returns it and the ids of the compared nodes."""
        alt = self.alternatives[alt_index]
        ids = np.flatnonzero(alt.changes) if nodes is None else nodes[alt.changes[nodes]]
        compare = np.flatnonzero(alt.compares) if nodes is None else ids
        x_cf = x.clone()
        values = torch.as_tensor(alt.values if alt.values.shape[0] == 1 else alt.values[ids])
        rows = torch.from_numpy(ids).to(x.device)[:, None]
        x_cf[rows, self.columns.to(x.device)[None, :]] = values.to(x.dtype).to(x.device)
        return x_cf, compare

    def consistency_loss(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        logits: torch.Tensor,
        step: int,
        rng_state: tuple[torch.Tensor, torch.Tensor | None] | None = None,
    ) -> torch.Tensor:
        """Mean over :attr:`scopes` of the counterfactual-consistency terms at step ``step``
        (``logits``: the factual pass; ``rng_state``: the random state before it, restored
        before every counterfactual pass so that all passes share the dropout masks)."""
        rng = np.random.default_rng([self.random_state, 1, step])
        alt_index = int(rng.integers(len(self.alternatives)))
        terms = []
        for scope in self.scopes:
            nodes = None
            if scope == "node":
                nodes = self.node_batches[step % len(self.node_batches)]
            x_cf, compare = self._changed(x, alt_index, nodes)
            if compare.size == 0:
                continue
            if rng_state is not None:
                self._set_rng_state(rng_state)
            out = self.model(x_cf, edge_index)
            idx = torch.from_numpy(compare).to(logits.device)
            terms.append(consistency_divergence(logits[idx], out[idx], self.divergence).mean())
        if not terms:
            return logits.sum() * 0.0
        return torch.stack(terms).mean()

    def evidence_loss(self, logits: torch.Tensor) -> torch.Tensor:
        """Mean divergence of the predictions of the screened evidence pairs (0 when none)."""
        if self.ev_pairs.shape[0] == 0:
            return logits.sum() * 0.0
        pairs = torch.from_numpy(self.ev_pairs).to(logits.device)
        return consistency_divergence(
            logits[pairs[:, 0]], logits[pairs[:, 1]], self.divergence
        ).mean()

    def covariance_loss(self, logits: torch.Tensor) -> torch.Tensor:
        """:math:`\\mathcal R_{cov}` (module docstring) of the factual ``logits`` of every node."""
        p = F.softmax(logits, dim=1)
        s = self.sensitive_values.to(p.device)
        cov = (s - s.mean(dim=0)).T @ (p - p.mean(dim=0)) / p.size(0)
        return cov.abs().mean()

    def training_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        state = self._rng_state() if self.lambda_cf > 0 else None
        logits = self.model(batch.x, batch.edge_index)
        mask = batch.train_mask
        task = F.cross_entropy(logits[mask], batch.y[mask])
        loss = task
        if self.lambda_cf > 0 and state is not None:
            after = self._rng_state()
            step = int(self.global_step)
            cf = self.consistency_loss(batch.x, batch.edge_index, logits, step, state)
            self._set_rng_state(after)
            loss = loss + self.lambda_cf * cf
            self.log("consistency_loss", cf, batch_size=1)
        if self.lambda_ev > 0:
            ev = self.evidence_loss(logits)
            loss = loss + self.lambda_ev * ev
            self.log("evidence_loss", ev, batch_size=1)
        if self.lambda_cov > 0:
            cov = self.covariance_loss(logits)
            loss = loss + self.lambda_cov * cov
            self.log("covariance_loss", cov, batch_size=1)
        self.log("task_loss", task, batch_size=1)
        return loss

    def validation_step(self, batch: Data, batch_idx: int) -> torch.Tensor:
        """Cross-entropy and accuracy on ``batch.val_mask`` (``val_loss``, ``val_acc``)."""
        logits = self.model(batch.x, batch.edge_index)[batch.val_mask]
        y = batch.y[batch.val_mask]
        loss = F.cross_entropy(logits, y)
        self.log("val_loss", loss, batch_size=max(int(y.numel()), 1))
        self.log(
            "val_acc", (logits.argmax(-1) == y).float().mean(), batch_size=max(int(y.numel()), 1)
        )
        return loss

    # ------------------------------------------------------------------ one call
    @classmethod
    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def finetune(
        cls,
        model: nn.Module,
        data: Data,
        sensitive: Any = None,
        *,
        lambda_cf: float = DEFAULT_LAMBDA_CF,
        lambda_ev: float = 0.0,
        epochs: int = DEFAULT_EPOCHS,
        random_state: int = 0,
        trainer_kwargs: dict[str, Any] | None = None,
        progress: bool | None = None,
        **options: Any,
    ) -> nn.Module:
        """A fine-tuned deep copy of ``model`` (in eval mode, on ``model``'s device); ``model``
        itself is never modified.

        ``epochs`` full-batch steps; ``random_state`` seeds Lightning (weights are copied, so it
        drives dropout and the consistency term's draws); ``options``: the other constructor
        arguments (``lambda_cov, scopes, divergence, lr, weight_decay, num_hops, max_nodes,
        evidence, ev_pairs, ev_min_share``); ``trainer_kwargs``: see :func:`make_trainer`;
        ``progress``: a bar over the steps on stderr (``None``: only when stderr is a
        terminal; :mod:`gnnaudit.training.progress`).
        """
        epochs = check_int("epochs", epochs, minimum=1, maximum=MAX_EPOCHS)
        random_state = check_seed("random_state", random_state)
        show = resolve_progress("progress", progress)
        if not isinstance(model, nn.Module):
            raise InvalidInputError(
                f"model must be a torch.nn.Module called as model(x, edge_index), got "
                f"{type(model).__name__}"
            )
        params = list(model.parameters())
        if not params:
            raise InvalidInputError(f"model {type(model).__name__} has no parameters to fine-tune")
        device = params[0].device
        tuned = copy.deepcopy(model)
        try:
            wrapper = cls(
                tuned,
                data,
                sensitive,
                lambda_cf=lambda_cf,
                lambda_ev=lambda_ev,
                random_state=random_state,
                **options,
            )
        except TypeError as exc:
            raise InvalidInputError(f"FairFinetune.finetune: {exc}") from exc
        with quiet_lightning(False):
            L.seed_everything(random_state, workers=True, verbose=False)
            trainer = make_trainer(
                epochs,
                trainer_kwargs,
                limit_val_batches=0,
                progress=show,
                progress_desc="fair fine-tuning",
            )
            tuned.train()
            trainer.fit(wrapper, datamodule=GraphDataModule(data, seed=random_state))
        return tuned.to(device).eval()
