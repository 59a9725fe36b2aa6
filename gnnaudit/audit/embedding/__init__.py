"""The embedding audit: node embeddings of a model's last hidden layer, clustered with the
density-based explainers of :mod:`gnnaudit.clustering` (:class:`EmbeddingAudit`), and its
audit unit (:class:`EmbeddingStructureUnit`)."""

from gnnaudit.audit.embedding.audit import EmbeddingAudit
from gnnaudit.audit.embedding.node_embeddings import final_layer_name, node_embeddings
from gnnaudit.audit.embedding.unit import EmbeddingStructureResult, EmbeddingStructureUnit

__all__ = [
    "EmbeddingAudit",
    "EmbeddingStructureResult",
    "EmbeddingStructureUnit",
    "final_layer_name",
    "node_embeddings",
]
