r"""Fine-tuning a node classifier to remove its dependence on a sensitive attribute.

:class:`FairFinetune` is a ``LightningModule`` that wraps any node classifier whose forward
takes ``(x, edge_index)`` (a :class:`~gnnaudit.training.NodeClassifier` or a user's own
``nn.Module``) and fine-tunes it, full batch, on

.. math::

    \mathcal L = \underbrace{\mathrm{CE}\bigl(M(X)_{\mathrm{train}}, y_{\mathrm{train}}\bigr)}_{\text{task}}
      + \lambda_{cf}\, \tfrac{1}{|S|}\sum_{s \in S} \mathcal C_s
      + \lambda_{ev}\, \frac{1}{|P|} \sum_{(u,v) \in P} D\bigl(M(X)_u, M(X)_v\bigr)
      + \lambda_{cov}\, \mathcal R_{cov}(V) + \lambda_{eo}\, \mathcal R_{cov}(T_1),

one term per gap of ``targets`` (:data:`~gnnaudit.training.fair_selection.TARGETS`, default
all): ``"cf"`` (counterfactual unfairness) -> :math:`\mathcal C`, ``"dsp"`` (statistical parity)
-> :math:`\mathcal R_{cov}` over all nodes :math:`V`, ``"deo"`` (equal opportunity) ->
:math:`\mathcal R_{cov}` over the label-1 training nodes :math:`T_1` (both without the nodes
whose group is unknown, ``data.sensitive_mask``). A targeted term's weight
defaults to :data:`DEFAULT_LAMBDA_CF` / :data:`DEFAULT_LAMBDA_COV` / :data:`DEFAULT_LAMBDA_EO`,
an untargeted one's to 0; :meth:`FairFinetune.finetune` picks the result on validation nodes.

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

The changed values and the divergence :math:`D`: :mod:`gnnaudit.training.fair_losses`.

**Evidence term** (optional, ``lambda_ev > 0``): pairs :math:`P` of counterfactual evidences
(CE paper: look-alike nodes the model labels differently) whose sensitive values differ and
whose feature difference lies mostly in the sensitive attribute (its share of the squared
difference of the standardised features at least ``ev_min_share``): their predictions are
pulled together.

**Covariance terms** :math:`\mathcal R_{cov}(U)` (FairGNN's covariance constraint, Dai & Wang
2021, Eq. 7; :func:`~gnnaudit.training.fair_losses.covariance_of`): 0 when the predictions
on :math:`U` are uncorrelated with the attribute. The predictions are the softmax probabilities
(default) or, with ``parity="auto"``, for a two-class model the soft decisions at the threshold
it is decided at (:mod:`~gnnaudit.training.parity_surrogate`: the softmax covariance also falls
when every score moves to one side of the threshold). No extra forward pass.

**Blinding** (``blind=True``; :meth:`FairFinetune.finetune`'s default tries it first): the
weights through which the model reads the attribute's columns are set to 0 before the first
step and get no gradient (:mod:`~gnnaudit.training.input_blinding`), so
:math:`M(X) = M(\tilde X)` for every change of the attribute: counterfactual unfairness and
both consistency terms are 0 by construction; the task loss and the covariance terms then
re-fit the other weights, against the proxies that still carry the attribute.

Dropout: the counterfactual passes replay the random state of the factual pass (same dropout
masks; the random stream after a step is the one a plain step leaves). With every weight 0 no
extra term or pass runs: plain fine-tuning (cross-entropy on the training nodes, Adam at ``lr``
with ``weight_decay``, ``epochs`` full-batch steps, the Trainer and seeding of
:func:`~gnnaudit.training.train_node_classifier`; ``finetune(..., select=False)`` returns it).

Cost per step: ``1 + |S|`` full-graph forward / backward passes (factual plus one per scope;
memory likewise); the node-scope plan keeps one entry per pair of sampled nodes within L hops
(bounded as in :func:`~gnnaudit.audit.sensitivity.receptive_field.plan_batches`).
:meth:`FairFinetune.finetune` runs this once per weight of its grid, then its selection.

Defaults: :data:`DEFAULT_LAMBDA_CF`, :data:`DEFAULT_EPOCHS`, :data:`DEFAULT_LR` from
``benchmarks/bench_mitigation.py``; the covariance weights of ``finetune`` (its grid) from
``benchmarks/bench_fair_selection.py --tune`` (held-out synthetic graphs) and NIFTY credit.
"""

from __future__ import annotations

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
    MAX_LEARNING_RATE,
    MAX_WEIGHT_DECAY,
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_seed,
)
from gnnaudit.audit.interventions import alternatives, feature_columns
from gnnaudit.audit.model_adapter import trained_module
from gnnaudit.audit.sensitive import known_group_mask
from gnnaudit.errors import InvalidInputError
from gnnaudit.training.data_module import check_node_data
from gnnaudit.training.fair_consistency import ConsistencyTerm
from gnnaudit.training.fair_evidence import global_evidence_pairs, sensitive_evidence_pairs
from gnnaudit.training.fair_losses import consistency_divergence, covariance_of
from gnnaudit.training.fair_runs import finetune_and_select, target_weight
from gnnaudit.training.fair_selection import (
    DEFAULT_LAMBDA_GRID,
    DEFAULT_MAX_AUROC_DROP,
    DEFAULT_N_CANDIDATES,
    TARGETS,
    check_targets,
    resolve_sensitive_feature,
)
from gnnaudit.training.input_blinding import blind_model
from gnnaudit.training.parity_surrogate import DEFAULT_PARITY, ParitySurrogate

__all__ = [
    "FairFinetune",
    "resolve_sensitive_feature",
    "sensitive_evidence_pairs",
    "consistency_divergence",
    "SCOPES",
    "DIVERGENCES",
    "TARGETS",
    "DEFAULT_LAMBDA_CF",
    "DEFAULT_LAMBDA_COV",
    "DEFAULT_LAMBDA_EO",
    "DEFAULT_EPOCHS",
    "DEFAULT_LR",
]

logger = logging.getLogger(__name__)

#: consistency scopes (see the module docstring)
SCOPES: tuple[str, ...] = ("node", "graph")
#: divergences between factual and counterfactual outputs
DIVERGENCES: tuple[str, ...] = ("sym_kl", "logit_l2")
#: default weight of the counterfactual-consistency term (when ``"cf"`` is targeted)
DEFAULT_LAMBDA_CF = 2.0
#: default weight of the covariance term over every node (when ``"dsp"`` is targeted)
DEFAULT_LAMBDA_COV = 20.0
#: default weight of the covariance term over the label-1 training nodes (``"deo"`` targeted)
DEFAULT_LAMBDA_EO = 20.0
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


class FairFinetune(L.LightningModule):
    """Fine-tune ``model`` against the targeted gaps on ``sensitive`` (module docstring); as a
    ``LightningModule`` it trains the weighted loss, :meth:`finetune` adds the selection.

    Parameters
    ----------
    model : node classifier, ``model(x, edge_index) -> logits``, or the ``(module, metrics)``
        result of :func:`~gnnaudit.training.train_node_classifier` (its module is taken,
        :func:`~gnnaudit.audit.model_adapter.trained_module`); trained in place (use
        :meth:`finetune` for a copy).
    data : the graph (``x``, ``y``, ``edge_index``, train / val / test masks).
    sensitive : the sensitive attribute: feature name, column index or one-hot group of
        ``data.x`` (None: ``data.sensitive_name``); ``sensitive_features=`` is an alias.
    targets : gaps to lower, a subset of :data:`TARGETS` (default all); sets the weights' defaults.
    lambda_cf : consistency weight (None: :data:`DEFAULT_LAMBDA_CF` if ``"cf"`` targeted, else 0).
    lambda_ev : weight of the evidence term (0 = off).
    lambda_cov, lambda_eo : weights of the covariance terms over every node / the label-1
        training nodes (None: :data:`DEFAULT_LAMBDA_COV` / :data:`DEFAULT_LAMBDA_EO` if
        ``"dsp"`` / ``"deo"`` is targeted, else 0).
    scopes : consistency scopes, a subset of :data:`SCOPES` (default both).
    divergence : one of :data:`DIVERGENCES`.
    lr, weight_decay : Adam settings.
    num_hops : radius L of the node-scope batches (default: from the message-passing layers).
    max_nodes : node-scope consistency uses a seeded sample of this many nodes (all when fewer).
    evidence, ev_pairs, ev_min_share : evidence term: a fitted ``CounterfactualEvidence``, a
        ``GlobalEvidence`` / its DataFrame, or None (fitted on ``data.test_mask``); the top
        ``ev_pairs`` global pairs are screened with :func:`sensitive_evidence_pairs`.
    parity : what the covariance terms correlate with the attribute
        (:mod:`~gnnaudit.training.parity_surrogate`): ``"softmax"`` (default, FairGNN's
        probabilities), ``"rate"`` (two classes: soft decisions at the threshold that keeps the
        model's share of class 1), ``"argmax"`` (soft decisions at margin 0) or ``"auto"``
        (``"rate"`` for two classes, else ``"softmax"``).
    blind : zero the model's input weights of the attribute first and keep them 0
        (:mod:`~gnnaudit.training.input_blinding`; the consistency term is then 0 and not
        computed); refused for a model that reads the attribute otherwise.
    random_state : seed of the node sample, the batch order and the category draws.
    """

    @renamed_keywords(aliases={"sensitive_features": "sensitive"})
    def __init__(  # noqa: PLR0913  # estimator-like trainer: mirrors its documented parameters
        self,
        model: nn.Module,
        data: Data,
        sensitive: Any = None,
        *,
        targets: str | Sequence[str] = TARGETS,
        lambda_cf: float | None = None,
        lambda_ev: float = 0.0,
        lambda_cov: float | None = None,
        lambda_eo: float | None = None,
        scopes: Sequence[str] = SCOPES,
        divergence: str = "sym_kl",
        lr: float = DEFAULT_LR,
        weight_decay: float = DEFAULT_WEIGHT_DECAY,
        num_hops: int | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        evidence: Any = None,
        ev_pairs: int = DEFAULT_EV_PAIRS,
        ev_min_share: float = 0.5,
        blind: bool = False,
        parity: str = DEFAULT_PARITY,
        random_state: int = 0,
    ) -> None:
        super().__init__()
        model = trained_module(model)
        if not isinstance(model, nn.Module):
            raise InvalidInputError(
                f"model must be a torch.nn.Module called as model(x, edge_index), got "
                f"{type(model).__name__}"
            )
        data = check_node_data(data)
        self.model = model
        t = self.targets = check_targets(targets)
        self.lambda_cf = target_weight("lambda_cf", lambda_cf, "cf" in t, DEFAULT_LAMBDA_CF)
        self.lambda_ev = check_float("lambda_ev", lambda_ev, minimum=0.0)
        self.lambda_cov = target_weight("lambda_cov", lambda_cov, "dsp" in t, DEFAULT_LAMBDA_COV)
        self.lambda_eo = target_weight("lambda_eo", lambda_eo, "deo" in t, DEFAULT_LAMBDA_EO)
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
        blind = check_bool("blind", blind)
        # of the model as given: before blinding
        self.parity = ParitySurrogate(model, data, parity, self.spec.name)
        self.input_slices = (
            blind_model(model, data, self.spec, self.alternatives) if blind else None
        )
        if self.input_slices is not None:  # the model cannot read the attribute any more
            self.lambda_cf = 0.0
        known = known_group_mask(data, int(data.y.numel()), self.spec.name)
        self.known_rows = None if known.all() else torch.from_numpy(np.flatnonzero(known))
        label1 = (data.train_mask & (data.y == 1)).detach().cpu().numpy() & known
        self.eo_rows = torch.from_numpy(np.flatnonzero(label1))
        self.consistency = ConsistencyTerm(
            self.alternatives, self.columns, self.scopes, self.divergence, self.random_state
        )
        if self.lambda_cf > 0 and "node" in self.scopes:
            self.consistency.plan_node_batches(model, data, num_hops, max_nodes)
        self.ev_pairs = np.zeros((0, 2), dtype=np.int64)
        if self.lambda_ev > 0:
            pairs = global_evidence_pairs(
                evidence, model, data, check_int("ev_pairs", ev_pairs, minimum=1)
            )
            self.ev_pairs = sensitive_evidence_pairs(data, pairs, self.spec, ev_min_share)
            if self.ev_pairs.shape[0] == 0:
                logger.warning(
                    "no evidence pair differs mostly in %r; the evidence term is 0", self.spec.name
                )

    @property
    def node_batches(self) -> list[np.ndarray]:
        """The node-scope batches (module docstring; empty unless the node scope runs)."""
        return self.consistency.node_batches

    # ------------------------------------------------------------------ model
    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.model(x, edge_index)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Blinded: the zeroed input weights get no gradient (Adam then leaves them 0, its
        weight decay of a 0 weight included)."""
        if self.input_slices is not None:
            self.input_slices.zero_grad_of(self.model)

    # ------------------------------------------------------------------ losses
    def _rng_state(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        cuda = self.device.type == "cuda"
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if cuda else None

    def _set_rng_state(self, state: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.device)

    def consistency_loss(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        logits: torch.Tensor,
        step: int,
        rng_state: tuple[torch.Tensor, torch.Tensor | None] | None = None,
    ) -> torch.Tensor:
        """Mean over :attr:`scopes` of the counterfactual-consistency terms at step ``step``
        (:class:`~gnnaudit.training.fair_consistency.ConsistencyTerm`; ``logits``: the factual
        pass; ``rng_state``: the random state before it, restored before every counterfactual
        pass so that all passes share the dropout masks)."""
        restore = None if rng_state is None else (lambda: self._set_rng_state(rng_state))
        return self.consistency(self.model, x, edge_index, logits, step, restore)

    def evidence_loss(self, logits: torch.Tensor) -> torch.Tensor:
        """Mean divergence of the predictions of the screened evidence pairs (0 when none)."""
        if self.ev_pairs.shape[0] == 0:
            return logits.sum() * 0.0
        pairs = torch.from_numpy(self.ev_pairs).to(logits.device)
        return consistency_divergence(
            logits[pairs[:, 0]], logits[pairs[:, 1]], self.divergence
        ).mean()

    def covariance_loss(
        self, logits: torch.Tensor, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """:math:`\\mathcal R_{cov}(U)` (module docstring) of the factual ``logits``; ``U`` =
        the node ids ``rows`` (None: every node whose group is known,
        :func:`~gnnaudit.audit.sensitive.known_group_mask`); 0 when ``U`` holds fewer
        than 2 nodes."""
        rows = self.known_rows if rows is None else rows
        return covariance_of(self.parity(logits), self.sensitive_values, rows)

    def equal_opportunity_loss(self, logits: torch.Tensor) -> torch.Tensor:
        """:math:`\\mathcal R_{cov}(T_1)`: the covariance term over the label-1 training nodes."""
        return self.covariance_loss(logits, self.eo_rows)

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
        terms = (
            ("evidence_loss", self.lambda_ev, self.evidence_loss),
            ("covariance_loss", self.lambda_cov, self.covariance_loss),
            ("equal_opportunity_loss", self.lambda_eo, self.equal_opportunity_loss),
        )
        for name, weight, term in terms:
            if weight > 0:
                value = term(logits)
                loss = loss + weight * value
                self.log(name, value, batch_size=1)
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
    def finetune(  # noqa: PLR0913  # one-call recipe: each keyword is a documented setting
        cls,
        model: nn.Module,
        data: Data,
        sensitive: Any = None,
        *,
        targets: str | Sequence[str] = TARGETS,
        lambda_cf: float | None = None,
        lambda_ev: float = 0.0,
        epochs: int = DEFAULT_EPOCHS,
        max_auroc_drop: float = DEFAULT_MAX_AUROC_DROP,
        max_bacc_drop: float | None = None,
        n_candidates: int = DEFAULT_N_CANDIDATES,
        early_snapshots: bool = True,
        lambda_grid: Sequence[float] | None = DEFAULT_LAMBDA_GRID,
        select: bool = True,
        blind: bool | str = "auto",
        keep_rate: bool = True,
        random_state: int = 0,
        trainer_kwargs: dict[str, Any] | None = None,
        progress: bool | None = None,
        **options: Any,
    ) -> nn.Module:
        """A fine-tuned deep copy of ``model`` (eval mode, on ``model``'s device), chosen on the
        validation nodes (:mod:`gnnaudit.training.fair_selection`); ``model`` is not modified.

        One run of ``epochs`` full-batch steps of the loss for ``targets`` per weight of
        ``lambda_grid`` (given to the targeted covariance terms whose ``lambda_cov`` /
        ``lambda_eo`` is not set; ``None``: one run at the constructor's defaults).

        ``blind`` (default ``"auto"``): with ``"cf"`` targeted, ``lambda_cf`` not given and a
        model that reads the attribute through input weights
        (:mod:`~gnnaudit.training.input_blinding`: any architecture whose first operation on
        ``x`` is linear, e.g. GCN, GIN, SAGE, GAT), the runs first zero those weights and keep
        them 0 (the model cannot read the attribute: counterfactual unfairness 0 by
        construction) and fine-tune the rest for the task and the covariance terms; only when
        no blinded candidate is chosen (all beyond the AUROC budget, say) do consistency runs
        (the loss above) follow. ``True``: blinded runs only (refused
        for a model without such weights); ``False``: consistency runs only.

        Candidates: the model as given and each run's weights after every ``epochs //
        n_candidates`` steps and, with ``early_snapshots`` (default), after steps 1, 2, 4, ...
        below the first of those (:func:`~gnnaudit.training.fair_runs.candidate_steps`: a
        penalised run moves fastest at its start, where the partial cuts of the gaps lie);
        returned: the lowest sum of the targeted gaps (ΔEO on the validation nodes; ΔSP and
        counterfactual unfairness, which need no label, on every node outside the test mask:
        :func:`~gnnaudit.training.fair_selection.label_free_nodes`) among those whose validation
        AUROC is at most ``max_auroc_drop`` below the model as given's with 95% confidence
        (the drop plus 1.645 paired standard errors, DeLong's), whose decisions have not
        collapsed to one class and, when ``max_bacc_drop`` is given, whose validation balanced
        accuracy is at most that below the model as given's (``select=False``: one run's final
        weights). A ``UserWarning`` says when it lowers no targeted gap, another when the
        returned candidate decides worse (balanced accuracy down by more than
        ``max_bacc_drop``, or ``max_auroc_drop`` when that is None: the AUROC budget bounds the
        ranking, not the decision threshold). The module carries ``selection_``, a DataFrame,
        one row per candidate: ``candidate`` (``"vanilla"``, ``"[blind ][cov=<w> ]step <k>"``),
        ``step``, ``offset`` (keep_rate), ``val_auroc``, ``val_auroc_se``, ``val_bacc``, ``val_top_share``,
        ``val_dsp``, ``val_deo``, ``val_cf``, ``gap_sum`` (targeted), ``within_budget``,
        ``no_worse``, ``chosen`` (one row); and ``selection_gain_``, a DataFrame with the
        chosen candidate's reduction of each targeted gap (on the same nodes) and of their sum,
        each with a 95% paired bootstrap interval (:mod:`~gnnaudit.training.selection_gain`,
        seeded by ``random_state``): a third ``UserWarning`` names each gap it lowered by no more than
        chance could on those nodes (the interval reaches 0).

        ``keep_rate`` (default True; two-class models with an output bias): every fine-tuned
        candidate is decided, and the returned one is left deciding, at the threshold that gives
        class 1 to the same share of the label-free nodes as the model as given: a constant
        ``offset`` on its class-1 margin, folded into its output bias
        (:mod:`~gnnaudit.training.decision_offset`). The remedy may change who gets class 1,
        not how many; AUROC is unchanged by it. ``False`` (and ``select=False``, which returns
        the final weights as trained): argmax decisions of the fine-tuned
        weights (their parity gaps may then fall because they decide fewer nodes positive).

        ``random_state`` seeds Lightning (dropout, the consistency draws); ``options``: the
        other constructor arguments (the class's Parameters; ``parity="auto"`` follows how
        candidates are decided, :func:`.decision_parity`); ``trainer_kwargs``: see
        :func:`make_trainer`; ``progress``: a bar on stderr (``None``: only when stderr is a
        terminal).
        """
        options = {"lambda_cf": lambda_cf, "lambda_ev": lambda_ev, **options}
        return finetune_and_select(
            cls,
            model,
            data,
            sensitive,
            targets=targets,
            epochs=epochs,
            max_auroc_drop=max_auroc_drop,
            max_bacc_drop=max_bacc_drop,
            n_candidates=n_candidates,
            early_snapshots=early_snapshots,
            lambda_grid=lambda_grid,
            select=select,
            blind=blind,
            keep_rate=keep_rate,
            random_state=random_state,
            trainer_kwargs=trainer_kwargs,
            progress=progress,
            options=options,
        )
