"""Old module paths of the audit, kept importable until 0.3.0 (flat: installed by the package).

Until 0.2 every audit module sat flat in ``gnnaudit/audit/``; they now live in subpackages by
job (``search``, ``sensitivity``, ``fairness``, ``report``, ``embedding``). Since 0.2 the Dask
path (``gnnaudit.audit.dist_*``, ``gnnaudit.training.audit_distributed``) lives in
``gnnaudit.audit.distributed``, and the audit's pipeline (``gnnaudit.training.audit_pipeline``,
``audit_config``, ``named_graph``) in ``gnnaudit.audit.pipeline``. ``import
gnnaudit.audit.evidence`` (or ``from gnnaudit.audit.search_exact import ExactSearcher``) still
works: it emits a :class:`DeprecationWarning` naming the new path and the removal version, and
yields the new module itself (one module object, so ``isinstance`` and monkeypatching behave).
``gnnaudit.audit.report`` and ``gnnaudit.audit.sensitivity`` are the new subpackages of the same
name and re-export the old modules' public names, so they need no alias.

The import hook (:class:`_MovedModuleFinder`) answers only for the names in :data:`MOVED`; it is
stateless and installed once by :mod:`gnnaudit.audit` (which :mod:`gnnaudit.training` imports,
so the old training paths resolve too).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "REMOVAL_VERSION", "install"]

#: the release that removes the old paths
REMOVAL_VERSION = "0.3.0"

#: old module path -> new module path
MOVED: dict[str, str] = {
    f"gnnaudit.audit.{old}": f"gnnaudit.audit.{new}"
    for old, new in {
        "evidence": "search.evidence",
        "evidence_result": "search.results",
        "evidence_inputs": "search.inputs",
        "search_base": "search.base",
        "search_exact": "search.exact",
        "search_faiss": "search.faiss_search",
        "search_index": "search.index",
        "search_sorted": "search.sorted_scan",
        "similarity_blocks": "search.similarity_blocks",
        "spherical_caps": "search.spherical_caps",
        "spherical_kmeans": "search.spherical_kmeans",
        "topk": "search.topk",
        "global_pairs": "search.global_pairs",
        "sensitivity_engine": "sensitivity.engine",
        "sensitivity_unit": "sensitivity.unit",
        "receptive_field": "sensitivity.receptive_field",
        "group_fairness": "fairness.group_fairness",
        "discrimination": "fairness.discrimination",
        "feature_coding": "fairness.feature_coding",
        "evidence_contrast": "fairness.evidence_contrast",
        "contrast_unit": "fairness.contrast_unit",
        "error_verification": "fairness.error_verification",
        "evidence_pairs": "fairness.evidence_pairs",
        "report_render": "report.render",
        "report_plots": "report.plots",
        "report_section": "report.section",
        "verdict": "report.verdict",
        "embedding_audit": "embedding.audit",
        "embedding_parts": "embedding.parts",
        "embedding_unit": "embedding.unit",
        "embeddings": "embedding.node_embeddings",
        # moved after 0.2.0: the Dask path in its own subpackage
        "dist_store": "distributed.store",
        "dist_block": "distributed.block",
        "dist_layers": "distributed.layers",
        "dist_forward": "distributed.forward",
        "dist_ks": "distributed.ks",
    }.items()
}
# moved after 0.2.0: the audit's pipeline from the training layer into the audit
MOVED.update(
    {
        "gnnaudit.training.audit_distributed": "gnnaudit.audit.distributed.session",
        "gnnaudit.training.audit_pipeline": "gnnaudit.audit.pipeline.run",
        "gnnaudit.training.audit_config": "gnnaudit.audit.pipeline.config",
        "gnnaudit.training.named_graph": "gnnaudit.audit.pipeline.named_graph",
    }
)


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old path as the new module, with a :class:`DeprecationWarning`."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} is deprecated and will be removed in gnnaudit {REMOVAL_VERSION}; "
            f"import {new} instead (or the name from gnnaudit.audit)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already imported."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of :data:`MOVED` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader())


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (idempotent)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
