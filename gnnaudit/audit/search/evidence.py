r"""Counterfactual evidences of a node classifier (CE paper, Sec. 3 and 5).

A *counterfactual evidence* of a test node ``v`` is a test node ``u != v`` that the model labels
differently (``M(u) != M(v)``) although its L-hop neighbourhood looks alike, measured by the
kernel similarity :math:`KS(v, u) = \cos(\mathbf{x}^{agg}_v, \mathbf{x}^{agg}_u)` of
:func:`~gnnaudit.graph_ops.ks_embedding`:

.. math::

    LCE^k(v) = \operatorname{top-}k_{u \in V_{test},\, M(u) \neq M(v)} KS(v, u), \qquad
    GCE^k = \operatorname{top-}k_{\{v,u\} \subseteq V_{test},\, M(u) \neq M(v)} KS(v, u).

Ties are broken by the smaller node id (local) and the smaller ``(node_u, node_v)`` pair
(global). The average similarity of a local result (Eq. 11) is

.. math::

    AS = \frac{1}{|Q|} \sum_{v \in Q} \frac{1}{|LCE(v)|} \sum_{u \in LCE(v)} KS(v, u).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator

from gnnaudit._distributed import check_client
from gnnaudit._params import RANDOM_STATE, InstanceOf, Integer, Options, Real, validate_parameters
from gnnaudit._validation import (
    MAX_NUM_HOPS,
    check_allocation,
    check_device,
    check_edge_index,
    check_fitted,
    check_int,
)
from gnnaudit.audit.search.backends import (
    AUTO_FAISS_MIN_DIMS,
    AUTO_FAISS_MIN_NODES,
    AUTO_FAISS_MIN_NODES_LOW_DIM,
    BACKENDS,
    make_searcher,
    resolve_backend,
)
from gnnaudit.audit.search.base import EvidenceSearcher, SearchSpace
from gnnaudit.audit.search.estimator_tags import GraphInputTagsMixin
from gnnaudit.audit.search.evidence_table import (
    NODE_U,
    graph_user_ids,
    is_local_table,
    user_id_indices,
)
from gnnaudit.audit.search.fit_inputs import (
    check_predictions,
    model_predictions,
    node_array,
    precision_for_ks,
    resolve_mask,
    stored_ks,
    unit_rows,
)
from gnnaudit.audit.search.results import GlobalEvidence, LocalEvidence
from gnnaudit.errors import GnnAuditError, InvalidInputError
from gnnaudit.graph_ops.neighbourhood import ks_embedding, rescale_rows

__all__ = [
    "CounterfactualEvidence",
    "make_searcher",
    "resolve_backend",
    "BACKENDS",
    "AUTO_FAISS_MIN_NODES",
    "AUTO_FAISS_MIN_DIMS",
    "AUTO_FAISS_MIN_NODES_LOW_DIM",
]

logger = logging.getLogger(__name__)


class CounterfactualEvidence(GraphInputTagsMixin, BaseEstimator):
    """Search counterfactual evidences among the test nodes of a graph (scikit-learn style).

    Parameters
    ----------
    num_hops : L, number of propagation hops of the KS embedding (>= 0, default 3).
    alpha : trade-off of Eq. 5 in ``[0, 1]`` (default 0.5).
    backend : ``"exact"`` (blocked exact search, the oracle), ``"sorted"`` (exact, from a
        similarity order sorted once: for repeated searches with changing predictions, up to
        ``max_nodes`` test nodes), ``"index"`` (the paper's weighted-k-means index,
        approximate), ``"faiss"`` (a faiss index, approximate), ``"sharded"`` (faiss IVF per
        row shard, exact merge and re-rank: :mod:`~gnnaudit.audit.search.sharded`) or ``"auto"``: ``"exact"``
        below the measured crossover (:func:`resolve_backend`: 50,000 test nodes, 100,000
        under 32 dimensions), above it ``"faiss"`` with an IVF index (``index_type="ivf"`` unless
        ``index_params`` name another), the measured crossover. The choice is ``backend_``.
    index_params : keyword arguments of the backend's constructor (with ``"auto"``: of the
        backend it resolves to).
    random_state : seed of the approximate backends' random choices.
    progress : show tqdm progress bars for long work.
    device : where the KS propagation and the exact backend's similarity products run
        (``"auto"``: the device of ``data.x``; ``"cpu"``, ``"cuda"`` ...). The other backends
        search on the CPU.
    client : a ``dask.distributed.Client`` (optional extra ``gnnaudit[distributed]``): the
        exact backend runs its similarity blocks on the client's workers (CPU); results equal
        the single-process CPU results exactly; the sharded backend builds and searches its
        shards there. Other backends do not accept it;
        ``backend="auto"`` with a client is the distributed exact backend where ``"auto"``
        alone would be exact, and the distributed sharded backend (faiss shards on the
        workers, re-ranked exactly here) where it would be faiss (above the crossover).

    Attributes (after ``fit``)
    --------------------------
    ks_ : (n, d) tensor, ``x^agg`` of every node.
    node_ids_ : (m,) int64, the test nodes (ascending integer node indices).
    user_ids_ : the graph's own node ids (``data.node_ids``, object array of text, one per
        node) or None; the evidence tables name nodes by them.
    predictions_ : (m,) int64, the model's predicted class of each test node.
    classes_ : predicted classes present among the test nodes.
    space_ : the :class:`~gnnaudit.audit.search.base.SearchSpace` given to the backend.
    searcher_ : the built backend.
    backend_ : the backend actually built (``backend``, or what ``"auto"`` resolved to).

    Notes
    -----
    Queries: :meth:`search_local` / :meth:`search_global` return the typed results
    (:class:`~gnnaudit.audit.search.results.LocalEvidence` /
    :class:`~gnnaudit.audit.search.results.GlobalEvidence`) straight from the backend;
    :meth:`local_evidence` / :meth:`global_evidence` are their DataFrames (``to_frame()``), in
    the one evidence-table schema ``node_u, node_v, pred_u, pred_v, similarity, rank``
    (:mod:`gnnaudit.audit.search.evidence_table`): ``node_u`` / ``node_v`` hold the graph's
    own ids when it came with them (``data.node_ids``), else the integer node indices.

    A scikit-learn estimator: ``get_params`` / ``set_params`` / ``clone`` work, the parameters
    are checked at the start of :meth:`fit` (:attr:`_parameter_constraints`, an
    :class:`~gnnaudit.errors.InvalidInputError` naming the parameter), and ``fit`` sets only
    the trailing-underscore attributes above.

    A test set whose nodes all carry the same prediction has no counterfactual evidence: the
    queries then return an empty result and emit a ``UserWarning``.
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "num_hops": [Integer(0, MAX_NUM_HOPS)],
        "alpha": [Real(0.0, 1.0)],
        "backend": [Options(*BACKENDS)],
        "index_params": [InstanceOf(Mapping, "a dict of backend keyword arguments"), None],
        "random_state": [RANDOM_STATE],
        "progress": [InstanceOf((bool, np.bool_), "True or False")],
        "device": [InstanceOf((str, torch.device), "'auto', a device string or a torch.device")],
    }
    # ``client`` is checked by :func:`gnnaudit._distributed.check_client` (it imports dask)

    def __init__(
        self,
        num_hops: int = 3,
        *,
        alpha: float = 0.5,
        backend: str = "exact",
        index_params: Mapping[str, Any] | None = None,
        random_state: Any = 0,
        progress: bool = False,
        device: Any = "auto",
        client: Any = None,
    ) -> None:
        self.num_hops = num_hops
        self.alpha = alpha
        self.backend = backend
        self.index_params = index_params
        self.random_state = random_state
        self.progress = progress
        self.device = device
        self.client = client

    # -------------------------------------------------------------------- fit
    def fit(
        self,
        data: Any,
        predictions: Any = None,
        model: Any = None,
        mask: Any = None,
    ) -> CounterfactualEvidence:
        """Compute the KS embedding and build the search backend over the test nodes.

        Parameters
        ----------
        data : a PyG ``Data`` with ``x`` (n, d) and ``edge_index`` (2, E). When the
            :class:`~gnnaudit.graph_ops.KSEmbedding` transform wrote ``data.ks`` with this
            estimator's ``num_hops`` and ``alpha`` (``data.ks_params``), that embedding is used
            as is; with other or unrecorded parameters it is recomputed (logged at INFO).
        predictions : predicted classes, (n,) integers for all nodes or (m,) for the masked
            nodes in ascending id order; or (n, C) scores (argmax is taken).
        model : alternatively, a callable ``model(x, edge_index) -> logits`` (n, C); it is put
            in eval mode (``.eval()`` if it has it, mode restored afterwards) and run under
            ``torch.no_grad()``. An exception it raises propagates as itself, with a note
            naming the stage.
        mask : the test nodes: a boolean mask of length n or integer node ids. Default:
            ``data.mask`` (an explicit audit selection) if present, else ``data.test_mask``,
            else every node.
        """
        validate_parameters(self)
        client = check_client(self.client)
        if client is not None and self.backend not in ("exact", "sharded", "auto"):
            raise InvalidInputError(
                f"client= is supported by backend='exact' and 'sharded' only ('auto' then "
                f"means exact), got backend={self.backend!r}"
            )
        x, edge_index = self._graph(data)
        n = int(x.size(0))
        node_ids = resolve_mask(mask, data, n)
        if predictions is not None and model is not None:
            raise InvalidInputError("give either predictions or model, not both")
        if predictions is None and model is None:
            raise InvalidInputError("fit needs predictions or a model to compute them")
        if model is not None:
            pred_test = model_predictions(model, x, edge_index, n)[node_ids]
        else:
            pred_test = check_predictions(predictions, n, node_ids)
        ks = stored_ks(data, n, self.num_hops, self.alpha)
        if ks is None:
            ks = ks_embedding(
                precision_for_ks(x, self.num_hops),
                edge_index,
                self.num_hops,
                self.alpha,
                progress=self.progress,
                device=self.device,
            ).cpu()
        space = SearchSpace(
            embedding=unit_rows(ks, node_ids), predictions=pred_test, node_ids=node_ids
        )
        self.backend_, self.searcher_ = self._build_searcher(space, x.device, client)
        self.ks_ = ks
        self.node_ids_ = node_ids
        self.user_ids_ = graph_user_ids(data, n)
        self.predictions_ = pred_test
        self.classes_ = np.unique(pred_test)
        self.space_ = space
        if self.classes_.size < 2:
            logger.warning(
                "all %d test nodes share the predicted class %s: there is no counterfactual evidence",
                node_ids.size,
                self.classes_.tolist(),
            )
        return self

    @staticmethod
    def _graph(data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``data.x`` as a 2-D tensor and ``data.edge_index``, validated."""
        x = getattr(data, "x", None)
        edge_index = getattr(data, "edge_index", None)
        if x is None or edge_index is None:
            raise InvalidInputError("data must carry node features data.x and data.edge_index")
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(np.asarray(x))
        if x.dim() != 2 or x.size(0) == 0:
            raise InvalidInputError(
                f"data.x must have shape [num_nodes, num_features], got {tuple(x.shape)}"
            )
        return x, check_edge_index("data.edge_index", edge_index, int(x.size(0)))

    def _build_searcher(
        self, space: SearchSpace, data_device: torch.device, client: Any
    ) -> tuple[str, EvidenceSearcher]:
        """``(backend, searcher)``: the backend ``backend`` resolves to on ``space``, built."""
        emb = space.embedding
        params = dict(self.index_params or {})
        backend = resolve_backend(self.backend, int(emb.shape[0]), int(emb.shape[1]))
        if client is not None and backend != "sharded":
            # "auto" with a Dask client: the approximate search on the workers where "auto"
            # would be approximate, else the distributed exact search
            backend = "sharded" if self.backend == "auto" and backend == "faiss" else "exact"
        if self.backend == "auto":
            logger.info(
                "backend='auto': %s for %d test nodes x %d dimensions",
                backend,
                emb.shape[0],
                emb.shape[1],
            )
            if backend == "faiss":
                params.setdefault("index_type", "ivf")
        device = check_device("device", self.device, auto=data_device)
        if backend == "exact" and device.type != "cpu" and client is None:
            params.setdefault("device", device)  # similarity products where the data lives
        if client is not None:
            params.setdefault("client", client)
        searcher = make_searcher(backend, self.random_state, params, self.progress)
        searcher.build(space)
        return backend, searcher

    # ---------------------------------------------------------------- queries
    def _positions(self, nodes: Any) -> np.ndarray:
        text = not isinstance(nodes, torch.Tensor) and np.asarray(nodes).dtype.kind in "USO"
        if text and self.user_ids_ is not None:  # the graph's own ids, as the tables show them
            ids = user_id_indices("nodes", nodes, self.user_ids_)
        else:
            ids = node_array("nodes", nodes)
        pos = np.searchsorted(self.node_ids_, ids)
        pos_c = np.minimum(pos, self.node_ids_.size - 1)
        bad = self.node_ids_[pos_c] != ids
        if bad.any():
            first = int(ids[np.flatnonzero(bad)[0]])
            raise InvalidInputError(
                f"nodes must be test nodes (the fit mask); node {first} is not one "
                f"({int(bad.sum())} of {ids.size} queries are outside the test set)"
            )
        return pos_c.astype(np.int64)

    def _test_predictions(self, ids: np.ndarray) -> np.ndarray:
        """Predictions of test nodes ``ids`` (a backend's answer); raises if one is not a
        test node."""
        pos = np.searchsorted(self.node_ids_, ids)
        pos = np.minimum(pos, self.node_ids_.size - 1)
        if np.any(self.node_ids_[pos] != ids):
            raise GnnAuditError(f"backend {self.backend_!r} returned a node outside the test set")
        return self.predictions_[pos]

    def _single_class(self) -> bool:
        """Warn (pointing at the caller of the public query method) if there is one class."""
        if self.classes_.size < 2:
            warnings.warn(
                "the test nodes all share one predicted class; there is no counterfactual "
                "evidence, the result is empty",
                UserWarning,
                stacklevel=4,  # _single_class <- _search_* <- public method <- caller
            )
            return True
        return False

    def search_local(self, nodes: Any, k: int = 10) -> LocalEvidence:
        """Top-``k`` counterfactual evidences of each query node (one id or many, batched).

        ``nodes``: integer node indices, or, when the graph has its own ids (``user_ids_``),
        those ids as text (e.g. ``"user_17"``, as the tables show them).

        Returns a :class:`~gnnaudit.audit.search.results.LocalEvidence`: one row per query in
        the given order, padded arrays of width ``min(k, most candidates of any query)``
        (padding: node ``-1``, similarity ``-inf``). A query with fewer than ``k`` candidates
        gets what exists.
        """
        return self._search_local(nodes, k)

    def _search_local(self, nodes: Any, k: int) -> LocalEvidence:
        check_fitted(self, "searcher_")
        k = check_int("k", k, minimum=1)
        pos = self._positions(nodes)
        if self._single_class() or pos.size == 0:
            return LocalEvidence.from_positions(
                self.space_, pos, np.full((pos.size, 0), -1), np.full((pos.size, 0), -np.inf)
            ).named(self.user_ids_)
        counts = np.bincount(np.searchsorted(self.classes_, self.predictions_))
        query_class = np.searchsorted(self.classes_, self.predictions_[pos])
        kk = min(k, int((self.node_ids_.size - counts[query_class]).max()))
        # node, similarity, prediction per entry (+ the backend's own copy): ~32 bytes
        check_allocation("k", 32.0 * pos.size * kk, "the (queries x k) evidence arrays")
        res = self.searcher_.local(pos, kk)
        if not isinstance(res, LocalEvidence) or res.evidence.shape != (pos.size, kk):
            raise GnnAuditError(f"backend {self.backend_!r} returned a malformed local result")
        valid = res.valid
        query_pred = np.broadcast_to(self.predictions_[pos][:, None], valid.shape)[valid]
        if not np.array_equal(res.query, self.node_ids_[pos]) or np.any(
            self._test_predictions(res.evidence[valid]) == query_pred
        ):
            raise GnnAuditError(f"backend {self.backend_!r} returned same-class evidence")
        return res.named(self.user_ids_)

    def search_global(self, k: int = 100) -> GlobalEvidence:
        """The top-``k`` unordered test-node pairs with different predictions and largest KS.

        Returns a :class:`~gnnaudit.audit.search.results.GlobalEvidence` (``node_u <
        node_v``, sorted by similarity descending; ties: smaller ``(node_u, node_v)``); fewer
        than ``k`` pairs when fewer exist.
        """
        return self._search_global(k)

    def _search_global(self, k: int) -> GlobalEvidence:
        check_fitted(self, "searcher_")
        k = check_int("k", k, minimum=1)
        if self._single_class():
            return GlobalEvidence.empty().named(self.user_ids_)
        counts = np.unique(self.predictions_, return_counts=True)[1].astype(object)
        total = (int(counts.sum()) ** 2 - int((counts * counts).sum())) // 2
        check_allocation("k", 48.0 * min(k, total), "the top-k global pair arrays")
        res = self.searcher_.global_pairs(min(k, total))
        if not isinstance(res, GlobalEvidence) or len(res) > min(k, total):
            raise GnnAuditError(f"backend {self.backend_!r} returned a malformed global result")
        if np.any(res.node_u >= res.node_v) or np.any(
            self._test_predictions(res.node_u) == self._test_predictions(res.node_v)
        ):
            raise GnnAuditError(f"backend {self.backend_!r} returned a same-class pair")
        return res.named(self.user_ids_)

    def local_evidence(self, nodes: Any, k: int = 10) -> pd.DataFrame:
        """:meth:`search_local` as an evidence table.

        Columns ``node_u, node_v, pred_u, pred_v, similarity, rank``: ``node_u`` the query,
        ``node_v`` its evidence (the graph's own ids when it has them, else node indices),
        ``rank`` 1 = most similar within the query; queries in the given order, no padding.
        """
        return self._search_local(nodes, k).to_frame()

    def global_evidence(self, k: int = 100) -> pd.DataFrame:
        """:meth:`search_global` as an evidence table.

        Columns ``node_u, node_v, pred_u, pred_v, similarity, rank`` (node index of ``node_u``
        < that of ``node_v``; the graph's own ids when it has them; ``rank`` 1 = most similar
        over the table; ties: smaller ``(node_u, node_v)`` indices).
        """
        return self._search_global(k).to_frame()

    # ------------------------------------------------------------- similarity
    def similarity(self, u: Any, v: Any) -> float | np.ndarray:
        """``KS(u, v)`` (Eq. 7) of any nodes, computed in float64 from ``ks_``.

        Scalars give a float; arrays (broadcast) give an array. May differ from the float32
        similarities of the search results by about 1e-7.
        """
        check_fitted(self, "ks_")
        n = self.ks_.size(0)
        scalar = np.ndim(u) == 0 and np.ndim(v) == 0
        uu, vv = node_array("u", u), node_array("v", v)
        for name, arr in (("u", uu), ("v", vv)):
            if arr.size and (arr.min() < 0 or arr.max() >= n):
                raise InvalidInputError(f"{name} must be node ids in [0, {n - 1}], got {arr}")
        try:
            uu, vv = np.broadcast_arrays(uu, vv)
        except ValueError as exc:
            raise InvalidInputError(
                f"u and v must have broadcastable shapes, got {uu.shape} and {vv.shape}"
            ) from exc
        # rows rescaled by powers of two: exact, and safe for embeddings of any magnitude
        a = rescale_rows(self.ks_[torch.from_numpy(uu.copy())].to(torch.float64))
        b = rescale_rows(self.ks_[torch.from_numpy(vv.copy())].to(torch.float64))
        na = torch.linalg.vector_norm(a, dim=1)
        nb = torch.linalg.vector_norm(b, dim=1)
        denom = na * nb
        cos = torch.where(denom > 0, (a * b).sum(1) / denom.clamp_min(1e-300), 0.0)
        out = cos.clamp(-1.0, 1.0).numpy()
        return float(out[0]) if scalar else out

    @staticmethod
    def average_similarity(result: pd.DataFrame | LocalEvidence | GlobalEvidence) -> float:
        """Average similarity AS (Eq. 11) of a result.

        Local result: the mean over queries (``node_u``) of the mean KS of the evidences
        returned for that query. Global result: the mean similarity of the returned pairs.
        Accepts the typed results and their evidence tables (a table is local when its
        ``rank`` values repeat; with one query the two means agree). An empty result has no AS
        and raises :class:`~gnnaudit.errors.InvalidInputError`.
        """
        if isinstance(result, (LocalEvidence, GlobalEvidence)):
            result = result.to_frame()
        if not isinstance(result, pd.DataFrame) or "similarity" not in result:
            raise InvalidInputError(
                "result must be a LocalEvidence / GlobalEvidence or a DataFrame from "
                "local_evidence or global_evidence"
            )
        if len(result) == 0:
            raise InvalidInputError("result is empty: the average similarity is undefined")
        if not np.isfinite(result["similarity"].to_numpy(dtype=np.float64)).all():
            raise InvalidInputError("result['similarity'] must be finite (no NaN or inf)")
        if NODE_U not in result or "rank" not in result:
            raise InvalidInputError("result must be an evidence table with node_u and rank columns")
        if is_local_table(result):
            return float(result.groupby(NODE_U, sort=False)["similarity"].mean().mean())
        return float(result["similarity"].mean())
