"""Which counterfactual-evidence backend to build: the names, the measured ``"auto"``
crossover (:func:`resolve_backend`) and the factory (:func:`make_searcher`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gnnaudit._optional import available, require
from gnnaudit._validation import check_choice
from gnnaudit.audit.search.base import EvidenceSearcher
from gnnaudit.errors import InvalidInputError

__all__ = [
    "BACKENDS",
    "AUTO_FAISS_MIN_NODES",
    "AUTO_FAISS_MIN_DIMS",
    "AUTO_FAISS_MIN_NODES_LOW_DIM",
    "resolve_backend",
    "make_searcher",
]

#: Backend names accepted by ``CounterfactualEvidence(backend=...)``. Each is kept because a
#: measurement shows it ahead somewhere (``benchmarks/results/``):
#:
#: * ``"exact"``: the reference, and the fastest below the faiss crossover (``"auto"`` below
#:   :data:`AUTO_FAISS_MIN_NODES`; ``search_crossover.md``);
#: * ``"faiss"``: an IVF / HNSW index per class, 3-18x faster per query than exact from 50,000
#:   nodes at recall@10 >= 0.95 (``search_crossover.md``, ``faiss_tuning.md``);
#: * ``"sorted"``: one sort of the similarity order answers every later search with new
#:   predictions: an audit-callback epoch (new predictions, local top-10 of every node, global
#:   top-10) took 1.7 / 9.7 / 20 ms against 44 / 144 / 509 ms for a fresh exact search at
#:   679 / 2,000 / 4,000 nodes (``epoch_times`` of ``benchmarks/bench_evidence.py``, clustered
#:   unit vectors, one thread); the callback's overhead is 17 % of an epoch (``audit.md``);
#: * ``"sharded"``: faiss shards for 1M nodes and Dask workers, recall@10 0.9997 against
#:   0.9925 for ``"faiss"``, and 23 MB of IVF-PQ index against 252 MB
#:   (``sharded_search.md``);
#: * ``"index"``: the paper's index (LocalCE-I), slower than exact at every measured size and
#:   kept as the paper's method, with its measured recall in
#:   :mod:`~gnnaudit.audit.search.index`.
BACKENDS: tuple[str, ...] = ("exact", "sorted", "index", "faiss", "sharded", "auto")

#: ``backend="auto"`` picks ``"faiss"`` (IVF, :mod:`~gnnaudit.audit.search.faiss_search` defaults)
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
    :data:`AUTO_FAISS_MIN_NODES_LOW_DIM` nodes) and ``"exact"`` below. Without faiss
    installed (the ``faiss`` extra) ``"auto"`` is always ``"exact"``."""
    backend = check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        return backend
    wide = n_dims >= AUTO_FAISS_MIN_DIMS
    threshold = AUTO_FAISS_MIN_NODES if wide else AUTO_FAISS_MIN_NODES_LOW_DIM
    return "faiss" if n_nodes >= threshold and available("faiss") else "exact"


def make_searcher(
    backend: str,
    random_state: Any = 0,
    index_params: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> EvidenceSearcher:
    """Instantiate the search backend ``backend`` (imports ``index`` / ``faiss`` lazily).

    ``index_params`` are passed as keyword arguments to the backend's constructor
    (``ExactSearcher(block_bytes=...)``, ``SortedSimilaritySearcher(max_nodes=...)``,
    ``IndexSearcher(...)``, ``FaissSearcher(...)``, ``ShardedSearcher(...)``). ``"auto"`` must be resolved first
    (:func:`resolve_backend`): it depends on the search space.
    """
    backend = check_choice("backend", backend, BACKENDS)
    if backend == "auto":
        raise InvalidInputError(
            "backend='auto' depends on the data: resolve it with resolve_backend(backend, "
            "n_nodes, n_dims) before make_searcher"
        )
    if backend in ("faiss", "sharded", "index"):  # a missing faiss names its extra
        require("faiss", f"backend={backend!r} (a faiss index or faiss k-means)")
    params = dict(index_params or {})
    try:
        if backend == "exact":
            from gnnaudit.audit.search.exact import ExactSearcher

            params.setdefault("progress", progress)
            return ExactSearcher(random_state=random_state, **params)
        if backend == "sorted":
            from gnnaudit.audit.search.sorted_scan import SortedSimilaritySearcher

            params.setdefault("progress", progress)
            return SortedSimilaritySearcher(random_state=random_state, **params)
        if backend == "index":
            from gnnaudit.audit.search.index import IndexSearcher

            params.setdefault("progress", progress)
            return IndexSearcher(random_state=random_state, **params)
        if backend == "sharded":
            from gnnaudit.audit.search.sharded import ShardedSearcher

            return ShardedSearcher(random_state=random_state, **params)
        from gnnaudit.audit.search.faiss_search import FaissSearcher

        return FaissSearcher(random_state=random_state, **params)
    except ImportError as exc:
        raise InvalidInputError(f"backend={backend!r} is not available: {exc}") from exc
    except TypeError as exc:
        raise InvalidInputError(
            f"index_params={index_params!r} are not accepted by backend {backend!r}: {exc}"
        ) from exc
