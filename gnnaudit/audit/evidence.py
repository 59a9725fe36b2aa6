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

from gnnaudit._distributed import check_client
from gnnaudit._validation import (
    MAX_NUM_HOPS,
    check_allocation,
    check_choice,
    check_device,
    check_edge_index,
    check_finite_tensor,
    check_fitted,
    check_float,
    check_int,
)
from gnnaudit.audit.evidence_result import GlobalEvidence, LocalEvidence
from gnnaudit.audit.search_base import EvidenceSearcher, SearchSpace
from gnnaudit.errors import GnnAuditError, InvalidInputError
from gnnaudit.graph_ops.neighbourhood import (
    KSEmbedding,
    ks_embedding,
    ks_input_bound,
    rescale_rows,
)

__all__ = ["CounterfactualEvidence", "make_searcher", "resolve_backend", "BACKENDS"]

logger = logging.getLogger(__name__)

#: Backend names accepted by ``CounterfactualEvidence(backend=...)``.
BACKENDS: tuple[str, ...] = ("exact", "sorted", "index", "faiss", "auto")

#: ``backend="auto"`` picks ``"faiss"`` (IVF, :mod:`~gnnaudit.audit.search_faiss` defaults)
#: from this many test nodes on when the embedding has at least
#: :data:`AUTO_FAISS_MIN_DIMS` dimensions, ``"exact"`` below. Measured crossover
#: (``benchmarks/bench_search_crossover.py`` -> ``benchmarks/results/search_crossover.md``,
#: clustered unit embeddings, 3 classes, one thread, a loaded 2-core machine): the tuned IVF
#: answers batched and single local queries faster than the exact search from 5,000 nodes on,
#: but only 1.3-2.7x (single) / 1.3-2.3x (batch) at 5,000-20,000 nodes and with recall@10
#: 0.92-0.97; at 50,000 x 128 it is 3.1x (batch) / 4.5x (single) faster at recall 1.000 and
#: its build (k-means per class, 2.4 s) is repaid by an audit's all-node queries (17 s vs
#: 46 s); at 100,000 x 128 6.6x / 8.6x at recall 1.000. The paper's index (LocalCE-I) was
#: slower than exact at every measured size (5,000-100,000; 0.07-0.27x batch) and is kept
#: for fidelity only, never chosen by ``"auto"``.
AUTO_FAISS_MIN_NODES: int = 50_000
#: ... in fewer dimensions the IVF lists of clustered data overlap more: recall@10 0.92-0.94
#: up to 50,000 nodes at d = 16, 0.954 at 100,000, so ``"auto"`` waits for
#: :data:`AUTO_FAISS_MIN_NODES_LOW_DIM` nodes there.
AUTO_FAISS_MIN_DIMS: int = 32
AUTO_FAISS_MIN_NODES_LOW_DIM: int = 100_000


def resolve_backend(backend: str, n_nodes: int, n_dims: int) -> str:
    """The backend ``backend`` stands for on ``n_nodes`` test nodes of ``n_dims`` dimensions:
    itself, or for ``"auto"`` ``"faiss"`` from :data:`AUTO_FAISS_MIN_NODES` nodes (with at
    least :data:`AUTO_FAISS_MIN_DIMS` dimensions, else from
    :data:`AUTO_FAISS_MIN_NODES_LOW_DIM` nodes) and ``"exact"`` below."""
    backend = check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        return backend
    wide = n_dims >= AUTO_FAISS_MIN_DIMS
    threshold = AUTO_FAISS_MIN_NODES if wide else AUTO_FAISS_MIN_NODES_LOW_DIM
    return "faiss" if n_nodes >= threshold else "exact"


def make_searcher(
    backend: str,
    random_state: Any = 0,
    index_params: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> EvidenceSearcher:
    """Instantiate the search backend ``backend`` (imports ``index`` / ``faiss`` lazily).

    ``index_params`` are passed as keyword arguments to the backend's constructor
    (``ExactSearcher(block_bytes=...)``, ``SortedSimilaritySearcher(max_nodes=...)``,
    ``IndexSearcher(...)``, ``FaissSearcher(...)``). ``"auto"`` must be resolved first
    (:func:`resolve_backend`): it depends on the search space.
    """
    backend = check_choice("backend", backend, BACKENDS)
    if backend == "auto":
        raise InvalidInputError(
            "backend='auto' depends on the data: resolve it with resolve_backend(backend, "
            "n_nodes, n_dims) before make_searcher"
        )
    params = dict(index_params or {})
    try:
        if backend == "exact":
            from gnnaudit.audit.search_exact import ExactSearcher

            params.setdefault("progress", progress)
            return ExactSearcher(random_state=random_state, **params)
        if backend == "sorted":
            from gnnaudit.audit.search_sorted import SortedSimilaritySearcher

            params.setdefault("progress", progress)
            return SortedSimilaritySearcher(random_state=random_state, **params)
        if backend == "index":
            from gnnaudit.audit.search_index import IndexSearcher

            return IndexSearcher(random_state=random_state, **params)
        from gnnaudit.audit.search_faiss import FaissSearcher

        return FaissSearcher(random_state=random_state, **params)
    except ImportError as exc:
        raise InvalidInputError(f"backend={backend!r} is not available: {exc}") from None
    except TypeError as exc:
        raise InvalidInputError(
            f"index_params={index_params!r} are not accepted by backend {backend!r}: {exc}"
        ) from None


def _node_array(name: str, value: Any) -> np.ndarray:
    """``value`` (an int, a sequence or a tensor of ints) as a 1-D int64 array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        if (
            arr.dtype.kind == "f"
            and arr.size
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            arr = arr.astype(np.int64)
        else:
            raise InvalidInputError(f"{name} must be integer node ids, got {value!r:.80}")
    return arr.astype(np.int64).reshape(-1)


class CounterfactualEvidence:
    """Search counterfactual evidences among the test nodes of a graph (scikit-learn style).

    Parameters
    ----------
    num_hops : L, number of propagation hops of the KS embedding (>= 0, default 3).
    alpha : trade-off of Eq. 5 in ``[0, 1]`` (default 0.5).
    backend : ``"exact"`` (blocked exact search, the oracle), ``"sorted"`` (exact, from a
        similarity order sorted once: for repeated searches with changing predictions, up to
        ``max_nodes`` test nodes), ``"index"`` (the paper's weighted-k-means index,
        approximate), ``"faiss"`` (a faiss index, approximate) or ``"auto"``: ``"exact"``
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
        the single-process CPU results exactly. Other backends do not accept it;
        ``backend="auto"`` with a client is the exact backend.

    Attributes (after ``fit``)
    --------------------------
    ks_ : (n, d) tensor, ``x^agg`` of every node.
    node_ids_ : (m,) int64, the test nodes (ascending global ids).
    predictions_ : (m,) int64, the model's predicted class of each test node.
    classes_ : predicted classes present among the test nodes.
    space_ : the :class:`~gnnaudit.audit.search_base.SearchSpace` given to the backend.
    searcher_ : the built backend.
    backend_ : the backend actually built (``backend``, or what ``"auto"`` resolved to).

    Queries: :meth:`search_local` / :meth:`search_global` return the typed results
    (:class:`~gnnaudit.audit.evidence_result.LocalEvidence` /
    :class:`~gnnaudit.audit.evidence_result.GlobalEvidence`) straight from the backend;
    :meth:`local_evidence` / :meth:`global_evidence` are their DataFrames (``to_frame()``).

    A test set whose nodes all carry the same prediction has no counterfactual evidence: the
    queries then return an empty result and emit a ``UserWarning``.
    """

    def __init__(
        self,
        num_hops: int = 3,
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

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters by name (scikit-learn's ``get_params``; ``deep`` is unused)."""
        return {
            "num_hops": self.num_hops,
            "alpha": self.alpha,
            "backend": self.backend,
            "index_params": self.index_params,
            "random_state": self.random_state,
            "progress": self.progress,
            "device": self.device,
            "client": self.client,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

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
            ``torch.no_grad()``.
        mask : the test nodes: a boolean mask of length n or integer node ids. Default:
            ``data.mask`` (an explicit audit selection) if present, else ``data.test_mask``,
            else every node.
        """
        num_hops = check_int("num_hops", self.num_hops, minimum=0, maximum=MAX_NUM_HOPS)
        alpha = check_float("alpha", self.alpha, minimum=0.0, maximum=1.0)
        check_choice("backend", self.backend, BACKENDS)
        client = check_client(self.client)
        if client is not None and self.backend not in ("exact", "auto"):
            raise InvalidInputError(
                f"client= is supported by backend='exact' only ('auto' then means exact), "
                f"got backend={self.backend!r}"
            )
        if self.index_params is not None and not isinstance(self.index_params, Mapping):
            raise InvalidInputError(
                f"index_params must be a dict or None, got {type(self.index_params).__name__}"
            )
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
        n = int(x.size(0))
        edge_index = check_edge_index("data.edge_index", edge_index, n)
        node_ids = self._resolve_mask(mask, data, n)

        if predictions is not None and model is not None:
            raise InvalidInputError("give either predictions or model, not both")
        if predictions is None and model is None:
            raise InvalidInputError("fit needs predictions or a model to compute them")
        if model is not None:
            pred_test = self._predict(model, x, edge_index, n)[node_ids]
        else:
            pred_test = self._check_predictions(predictions, n, node_ids)

        ks = self._stored_ks(data, n, num_hops, alpha)
        if ks is None:
            x_ks = self._precision_for_ks(x, num_hops)
            ks = ks_embedding(
                x_ks, edge_index, num_hops, alpha, progress=self.progress, device=self.device
            ).cpu()
        emb = _unit_rows(ks, node_ids)
        space = SearchSpace(
            embedding=emb,
            predictions=pred_test,
            node_ids=node_ids,
        )
        params = dict(self.index_params or {})
        backend = resolve_backend(self.backend, int(emb.shape[0]), int(emb.shape[1]))
        if client is not None:
            backend = "exact"  # "auto" with a Dask client: the distributed exact search
        if self.backend == "auto":
            logger.info(
                "backend='auto': %s for %d test nodes x %d dimensions",
                backend,
                emb.shape[0],
                emb.shape[1],
            )
            if backend == "faiss":
                params.setdefault("index_type", "ivf")
        device = check_device("device", self.device, auto=x.device)
        if backend == "exact" and device.type != "cpu" and client is None:
            params.setdefault("device", device)  # similarity products where the data lives
        if client is not None:
            params.setdefault("client", client)
        searcher = make_searcher(backend, self.random_state, params, self.progress)
        searcher.build(space)
        self.backend_ = backend

        self.ks_ = ks
        self.node_ids_ = node_ids
        self.predictions_ = pred_test
        self.classes_ = np.unique(pred_test)
        self.space_ = space
        self.searcher_ = searcher
        if self.classes_.size < 2:
            logger.warning(
                "all %d test nodes share the predicted class %s: there is no counterfactual evidence",
                node_ids.size,
                self.classes_.tolist(),
            )
        return self

    @staticmethod
    def _precision_for_ks(x: torch.Tensor, num_hops: int) -> torch.Tensor:
        """``x``, or ``x`` in float64 when its magnitude would overflow ``x^agg`` in its own
        float dtype (:func:`~gnnaudit.graph_ops.neighbourhood.ks_input_bound`): the search
        needs only cosines, and float64 holds every float32 / float16 value exactly."""
        if not x.is_floating_point() or x.dtype == torch.float64:
            return x
        largest = float(torch.linalg.vector_norm(x.detach(), ord=float("inf")))
        if largest <= ks_input_bound(x.dtype, num_hops) or largest != largest:  # NaN: checked later
            return x
        logger.info(
            "data.x (%s) has entries up to %.3g: the KS embedding would overflow %s, computing "
            "it in float64",
            x.dtype,
            largest,
            x.dtype,
        )
        return x.to(torch.float64)

    @staticmethod
    def _stored_ks(data: Any, n: int, num_hops: int, alpha: float) -> torch.Tensor | None:
        """``data.ks`` when the :class:`~gnnaudit.graph_ops.KSEmbedding` transform wrote it
        with these parameters (validated), else None (logged at INFO when ``data.ks`` exists
        but cannot be used)."""
        if getattr(data, "ks", None) is None:
            return None
        recorded = KSEmbedding.recorded_params(data)
        if recorded != (num_hops, alpha):
            logger.info(
                "data.ks was written with %s, not num_hops=%d, alpha=%s: recomputing the KS "
                "embedding",
                "unrecorded parameters"
                if recorded is None
                else f"num_hops={recorded[0]}, alpha={recorded[1]}",
                num_hops,
                alpha,
            )
            return None
        ks = data.ks
        if not isinstance(ks, torch.Tensor):
            ks = torch.as_tensor(np.asarray(ks))
        if ks.dim() != 2 or ks.size(0) != n or not ks.is_floating_point():
            raise InvalidInputError(
                f"data.ks (written by KSEmbedding) must be a float tensor of shape [{n}, d], got "
                f"{ks.dtype} {tuple(ks.shape)}"
            )
        check_finite_tensor("data.ks", ks)
        logger.info(
            "reusing data.ks written by KSEmbedding(num_hops=%d, alpha=%s)", num_hops, alpha
        )
        return ks.detach().cpu()

    @staticmethod
    def _resolve_mask(mask: Any, data: Any, n: int) -> np.ndarray:
        name = "mask"
        if mask is None:  # data.mask (an explicit audit selection) wins over the test split
            for attr in ("mask", "test_mask"):
                mask, name = getattr(data, attr, None), f"data.{attr}"
                if mask is not None:
                    break
            else:
                return np.arange(n, dtype=np.int64)
        if isinstance(mask, torch.Tensor):
            mask = mask.detach().cpu().numpy()
        arr = np.asarray(mask)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise InvalidInputError(
                    f"{name} as a boolean mask must have shape ({n},), got {arr.shape}"
                )
            ids = np.flatnonzero(arr).astype(np.int64)
        else:
            ids = np.unique(_node_array(name, arr))
            if ids.size and (ids[0] < 0 or ids[-1] >= n):
                raise InvalidInputError(
                    f"{name} holds node ids in [{ids[0]}, {ids[-1]}] but must lie in [0, {n - 1}]"
                )
        if ids.size == 0:
            raise InvalidInputError(f"{name} selects no test node; at least one is required")
        return ids

    @staticmethod
    def _predict(model: Any, x: torch.Tensor, edge_index: torch.Tensor, n: int) -> np.ndarray:
        if not callable(model):
            raise InvalidInputError(
                f"model must be a callable (x, edge_index) -> logits, got {type(model).__name__}"
            )
        was_training = getattr(model, "training", None)
        if hasattr(model, "eval"):
            model.eval()
        try:
            with torch.no_grad():
                out = model(x, edge_index)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:
            raise InvalidInputError(
                f"model failed on data (x {tuple(x.shape)}, edge_index {tuple(edge_index.shape)}): "
                f"{exc}"
            ) from None
        finally:
            if was_training and hasattr(model, "train"):
                model.train(True)
        if not isinstance(out, torch.Tensor):
            raise InvalidInputError(
                f"model must return a tensor of logits, got {type(out).__name__}"
            )
        out = out.detach().cpu()
        if out.dim() != 2 or out.size(0) != n:
            raise InvalidInputError(
                f"model must return logits of shape [{n}, num_classes], got {tuple(out.shape)}"
            )
        if out.is_floating_point() and not bool(torch.isfinite(out).all()):
            raise InvalidInputError("model returned NaN or inf logits")
        return out.argmax(dim=1).numpy().astype(np.int64)

    @staticmethod
    def _check_predictions(predictions: Any, n: int, node_ids: np.ndarray) -> np.ndarray:
        if isinstance(predictions, torch.Tensor):
            predictions = predictions.detach().cpu().numpy()
        arr = np.asarray(predictions)
        if arr.ndim == 2:
            if arr.dtype.kind not in "fiu" or (
                arr.dtype.kind == "f" and not np.isfinite(arr).all()
            ):
                raise InvalidInputError("predictions given as scores must be finite numbers")
            if arr.shape[0] != n:
                raise InvalidInputError(
                    f"predictions as scores must have shape ({n}, num_classes), got {arr.shape}"
                )
            arr = arr.argmax(axis=1)
        elif arr.ndim != 1:
            raise InvalidInputError(
                f"predictions must have shape ({n},), ({node_ids.size},) or ({n}, C), got {arr.shape}"
            )
        arr = _node_array("predictions", arr) if arr.size else arr.astype(np.int64)
        if arr.shape[0] == n:
            return arr[node_ids]
        if arr.shape[0] == node_ids.size:
            return arr
        raise InvalidInputError(
            f"predictions must have length {n} (all nodes) or {node_ids.size} (test nodes), "
            f"got {arr.shape[0]}"
        )

    # ---------------------------------------------------------------- queries
    def _positions(self, nodes: Any) -> np.ndarray:
        ids = _node_array("nodes", nodes)
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

        Returns a :class:`~gnnaudit.audit.evidence_result.LocalEvidence`: one row per query in
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
            )
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
        return res

    def search_global(self, k: int = 100) -> GlobalEvidence:
        """The top-``k`` unordered test-node pairs with different predictions and largest KS.

        Returns a :class:`~gnnaudit.audit.evidence_result.GlobalEvidence` (``node_u <
        node_v``, sorted by similarity descending; ties: smaller ``(node_u, node_v)``); fewer
        than ``k`` pairs when fewer exist.
        """
        return self._search_global(k)

    def _search_global(self, k: int) -> GlobalEvidence:
        check_fitted(self, "searcher_")
        k = check_int("k", k, minimum=1)
        if self._single_class():
            return GlobalEvidence.empty()
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
        return res

    def local_evidence(self, nodes: Any, k: int = 10) -> pd.DataFrame:
        """:meth:`search_local` as a DataFrame.

        Columns ``query, evidence, similarity, query_pred, evidence_pred, rank`` (global node
        ids; ``rank`` 1 = most similar), queries in the given order, no padding.
        """
        return self._search_local(nodes, k).to_frame()

    def global_evidence(self, k: int = 100) -> pd.DataFrame:
        """:meth:`search_global` as a DataFrame.

        Columns ``node_u, node_v, similarity, pred_u, pred_v, rank`` (``node_u < node_v``,
        ``rank`` 1 = most similar; ties: smaller ``(node_u, node_v)``).
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
        uu, vv = _node_array("u", u), _node_array("v", v)
        for name, arr in (("u", uu), ("v", vv)):
            if arr.size and (arr.min() < 0 or arr.max() >= n):
                raise InvalidInputError(f"{name} must be node ids in [0, {n - 1}], got {arr}")
        try:
            uu, vv = np.broadcast_arrays(uu, vv)
        except ValueError:
            raise InvalidInputError(
                f"u and v must have broadcastable shapes, got {uu.shape} and {vv.shape}"
            ) from None
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

        Local result: the mean over queries of the mean KS of the evidences returned for that
        query. Global result: the mean similarity of the returned pairs. Accepts the typed
        results and their DataFrames. An empty result has no AS and raises
        :class:`~gnnaudit.errors.InvalidInputError`.
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
        if "query" in result:
            return float(result.groupby("query", sort=False)["similarity"].mean().mean())
        if "node_u" in result:
            return float(result["similarity"].mean())
        raise InvalidInputError("result must have a 'query' (local) or 'node_u' (global) column")


def _unit_rows(ks: torch.Tensor, node_ids: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Rows ``node_ids`` of ``ks`` divided by their norm (zero rows stay 0), as float32.

    Computed in float64 by blocks of ``chunk`` rows: memory is the float32 output plus one
    float64 block.
    """
    out = np.empty((node_ids.size, ks.size(1)), dtype=np.float32)
    for start in range(0, node_ids.size, chunk):
        block = ks[torch.from_numpy(node_ids[start : start + chunk])].to(torch.float64)
        block = rescale_rows(block)  # exact; norms of rows of any magnitude stay finite
        norm = torch.linalg.vector_norm(block, dim=1, keepdim=True)
        block = torch.where(norm > 0, block / norm.clamp_min(1e-300), 0.0)
        out[start : start + chunk] = block.numpy()
    return out
