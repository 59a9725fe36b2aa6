"""scikit-learn tags of the audit estimators, whose ``fit`` takes a model and a graph."""

from __future__ import annotations

from sklearn.utils import Tags

__all__ = ["GraphInputTagsMixin"]


class GraphInputTagsMixin:
    """``__sklearn_tags__`` of :class:`~gnnaudit.audit.CounterfactualEvidence` and
    :class:`~gnnaudit.audit.EmbeddingAudit`: ``fit`` takes a model and a PyG graph, not a 2-D
    array ``X``, so scikit-learn's array-based estimator checks do not apply (they are skipped,
    as scikit-learn does for any estimator declaring other input); the API checks that need no
    ``fit`` run in tests/test_sklearn_audit_estimators.py. Put it before ``BaseEstimator``."""

    def __sklearn_tags__(self) -> Tags:
        """scikit-learn tags: no 2-D array input, deterministic (random choices are seeded)."""
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.two_d_array = False
        tags.non_deterministic = False
        return tags
