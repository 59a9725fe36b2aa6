"""What configures an audit, in three small dataclasses, and the default list of audit units.

Options live where they act:

* each audit unit takes its own options in its constructor (``SensitivityUnit(scopes=...)``,
  ``EvidencePairsUnit(top=...)`` ...);
* :class:`AuditConfig` holds the options of the *default* units, one field per option, each
  naming the unit it configures (``metadata["unit"]``); :func:`default_units` builds the list
  from it;
* :class:`~gnnaudit.audit.AuditOptions` holds what every unit shares through the context (the
  evidence search, the bootstrap, the seed, the device, progress bars);
* :class:`RunSettings` holds how the model is called, how the report is labelled and, with a
  Dask client, how the cluster is used.

:func:`~gnnaudit.audit.pipeline.run_audit` and :func:`~gnnaudit.audit.pipeline.audit_model`
take the three as the parameters ``config=``, ``options=`` and ``settings=``. Their fields are
also accepted as flat keywords, a shorthand that :func:`build_configs` turns into the three
objects (:func:`option_names` lists them); a keyword none of them has is an
:class:`~gnnaudit.errors.InvalidInputError` naming it and its close matches
(:func:`check_keywords`), and so is a default-unit option given together with an explicit
``units=`` list (no unit in the list would use it). The two units that need Lightning
(fine-tuning on evidences, mitigation) come from :mod:`gnnaudit.training` through
:mod:`~gnnaudit.audit.pipeline.registry`, imported only when asked for.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gnnaudit._validation import check_bool, check_int
from gnnaudit.audit.context import AuditOptions
from gnnaudit.audit.embedding.unit import EmbeddingStructureUnit
from gnnaudit.audit.fairness.contrast_unit import EvidenceContrastUnit
from gnnaudit.audit.fairness.discrimination import DiscriminationUnit
from gnnaudit.audit.fairness.error_verification import DEFAULT_KS, ErrorVerificationUnit
from gnnaudit.audit.fairness.evidence_pairs import EvidencePairsUnit
from gnnaudit.audit.fairness.group_fairness import GroupFairnessUnit
from gnnaudit.audit.fairness.literature_unit import LiteratureMetricsUnit
from gnnaudit.audit.pipeline.registry import build_unit
from gnnaudit.audit.proxies import ProxyUnit
from gnnaudit.audit.quality_unit import ModelQuality
from gnnaudit.audit.sensitivity.unit import SensitivityUnit
from gnnaudit.audit.unit import AuditUnit
from gnnaudit.errors import InvalidInputError

__all__ = [
    "AuditConfig",
    "RunSettings",
    "default_units",
    "option_names",
    "check_keywords",
    "build_configs",
    "SHARED_OPTIONS",
    "CLIENT_SETTINGS",
    "ALWAYS_USED_UNIT_OPTIONS",
]

#: the fields of :class:`~gnnaudit.audit.AuditOptions` accepted as flat keywords (``extra`` is
#: internal)
SHARED_OPTIONS = tuple(f.name for f in dataclasses.fields(AuditOptions) if f.name != "extra")

#: the parameters of ``run_audit`` besides the shorthand
RUN_AUDIT_PARAMETERS = ("sensitive", "units", "mask", "config", "options", "settings")

#: the :class:`RunSettings` that act only with a Dask ``client``: refused without one
CLIENT_SETTINGS = ("shared_dir", "num_parts", "partition", "model_loader")

#: default-unit options that also act on an explicit ``units=`` list (``embedding=True``
#: appends the embedding audit to it)
ALWAYS_USED_UNIT_OPTIONS = ("embedding", "embedding_kwargs")


def _unit(name: str) -> dict[str, str]:
    return {"unit": name}


@dataclass(frozen=True)
class AuditConfig:
    """Options of the default audit units (:func:`default_units`); each field's
    ``metadata["unit"]`` names the unit it configures.

    Attributes
    ----------
    model_hops : the model's receptive-field radius for node-scope sensitivity
        (``SensitivityUnit(num_hops=...)``; default: inferred from its ``MessagePassing``
        layers).
    min_support, bins : ``DiscriminationUnit`` (values held by at least ``min_support`` audited
        nodes; continuous features in ``bins`` quantile bins).
    ks : ``ErrorVerificationUnit`` (global evidence budgets).
    top_pairs : ``EvidencePairsUnit(top=top_pairs, pool=max(100, top_pairs))``.
    proxies, proxy_top : append ``ProxyUnit(top=proxy_top, num_hops=model_hops)`` after group
        fairness (the inputs that carry the sensitive attribute and their flip rates).
    finetune, finetune_kwargs : append ``EvidenceFinetuneUnit(**finetune_kwargs)`` (from
        :mod:`gnnaudit.training`, built by ``registry.build_unit``);
        ``finetune=None`` is the automatic choice of ``run_audit``
        (:func:`~gnnaudit.audit.pipeline.run.resolve_finetune`), False here.
    embedding, embedding_kwargs : append ``EmbeddingStructureUnit(**embedding_kwargs)``.
    mitigate, mitigate_kwargs : append ``MitigationUnit(**mitigate_kwargs)`` (from
        :mod:`gnnaudit.training`, likewise).
    """

    model_hops: int | None = field(default=None, metadata=_unit("SensitivityUnit"))
    min_support: int = field(default=5, metadata=_unit("DiscriminationUnit"))
    bins: int = field(default=4, metadata=_unit("DiscriminationUnit"))
    ks: Sequence[int] = field(default=DEFAULT_KS, metadata=_unit("ErrorVerificationUnit"))
    top_pairs: int = field(default=10, metadata=_unit("EvidencePairsUnit"))
    proxies: bool = field(default=True, metadata=_unit("ProxyUnit"))
    proxy_top: int = field(default=3, metadata=_unit("ProxyUnit"))
    finetune: bool | None = field(default=False, metadata=_unit("EvidenceFinetuneUnit"))
    finetune_kwargs: Mapping[str, Any] | None = field(
        default=None, metadata=_unit("EvidenceFinetuneUnit")
    )
    embedding: bool = field(default=False, metadata=_unit("EmbeddingStructureUnit"))
    embedding_kwargs: Mapping[str, Any] | None = field(
        default=None, metadata=_unit("EmbeddingStructureUnit")
    )
    mitigate: bool = field(default=False, metadata=_unit("MitigationUnit"))
    mitigate_kwargs: Mapping[str, Any] | None = field(
        default=None, metadata=_unit("MitigationUnit")
    )

    def __post_init__(self) -> None:
        if self.model_hops is not None:
            check_int("model_hops", self.model_hops, minimum=0)
        check_int("top_pairs", self.top_pairs, minimum=1)
        check_int("proxy_top", self.proxy_top, minimum=1, maximum=50)
        if self.finetune is not None and not isinstance(self.finetune, bool):
            raise InvalidInputError(f"finetune must be True, False or None, got {self.finetune!r}")
        for name in ("embedding", "mitigate", "proxies"):
            check_bool(name, getattr(self, name))
        for name in ("finetune_kwargs", "embedding_kwargs", "mitigate_kwargs"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise InvalidInputError(
                    f"{name} must be a dict of keyword arguments or None, got "
                    f"{type(value).__name__}"
                )


@dataclass(frozen=True)
class RunSettings:
    """How ``run_audit`` calls the model and labels the report (options of no unit).

    Attributes
    ----------
    forward_kwargs, predict_fn : how the model is called (see
        :class:`~gnnaudit.audit.model_adapter.ModelAdapter`).
    threads : CPU threads for the duration of the audit (default: the policy of
        :func:`gnnaudit._threads.thread_limits` for the graph's size).
    dataset_name, model_info : text for the report.
    client : a ``dask.distributed.Client``: the model's forward passes and the KS embedding
        run on its workers (:mod:`gnnaudit.audit.distributed.session`); None: here.
    shared_dir : with ``client``, a folder every worker can read, where the graph is written
        for them (default: a temporary folder, for workers on this machine).
    num_parts : with ``client``, graph partitions (default: the same number per worker, at
        most 16M edges each: one per worker below that; see
        :func:`~gnnaudit.audit.distributed.session.default_num_parts`).
    partition : with ``client``, how nodes are assigned to partitions: ``"contiguous"`` (ranges
        of node ids; None, the default, means it), ``"metis"`` (a METIS k-way partition, the
        ``metis`` extra) or one partition id per node.
    model_loader : with ``client``, a picklable function the workers call to build the model
        (e.g. ``functools.partial(load_node_classifier, path)`` with a checkpoint on the shared
        path); default: the model is sent to each worker once.

    The four settings that act only with ``client`` (:data:`CLIENT_SETTINGS`) are refused
    without one, naming them: they would otherwise be silently ignored.
    """

    forward_kwargs: Mapping[str, Any] | None = None
    predict_fn: Callable[..., Any] | None = None
    threads: int | None = None
    dataset_name: str | None = None
    model_info: Mapping[str, Any] | None = None
    client: Any = None
    shared_dir: Any = None
    num_parts: int | None = None
    partition: Any = None
    model_loader: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.client is not None:
            return
        given = [name for name in CLIENT_SETTINGS if getattr(self, name) is not None]
        if given:
            raise InvalidInputError(
                f"{', '.join(given)} act only with client= (a dask.distributed.Client: the "
                "audit on a cluster) and no client was given; pass client=... or leave "
                f"{'it' if len(given) == 1 else 'them'} out"
            )


def _field_names(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def option_names() -> dict[str, tuple[str, ...]]:
    """The keyword shorthand of ``run_audit`` / ``audit_model`` by the parameter it builds
    (derived from the dataclasses' fields): ``"config"`` (:class:`AuditConfig`),
    ``"options"`` (:class:`~gnnaudit.audit.AuditOptions`) and ``"settings"``
    (:class:`RunSettings`)."""
    return {
        "config": _field_names(AuditConfig),
        "options": SHARED_OPTIONS,
        "settings": _field_names(RunSettings),
    }


def check_keywords(
    given: Iterable[str], known: Iterable[str], *, what: str = "audit option", hint: str = ""
) -> None:
    """Raise :class:`~gnnaudit.errors.InvalidInputError` naming every name of ``given`` not in
    ``known``, each with its close matches among ``known`` (a misspelt keyword is never
    silently dropped)."""
    candidates = sorted(set(known))
    unknown = sorted(set(given) - set(candidates))
    if not unknown:
        return
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
        named.append(f"{name!r}" + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    raise InvalidInputError(
        f"unknown {what}(s) {', '.join(named)}; known: {', '.join(candidates)}{hint}"
    )


def _checked(name: str, value: Any, cls: type) -> Any:
    if value is not None and not isinstance(value, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise InvalidInputError(
            f"{name} must be {article} {cls.__name__}, got {type(value).__name__}"
        )
    return value


def build_configs(
    shorthand: Mapping[str, Any],
    *,
    config: AuditConfig | None = None,
    options: AuditOptions | None = None,
    settings: RunSettings | None = None,
    units_given: bool = False,
) -> tuple[AuditConfig, AuditOptions, RunSettings]:
    """The ``(config, options, settings)`` of one audit: the objects given (default: each
    class's defaults), updated by the flat keywords of ``shorthand`` naming their fields
    (:func:`option_names`).

    An explicit ``bins=`` also sets ``sensitive_bins`` when neither names it (quantile bins of
    a continuous sensitive attribute, the same meaning). Raises
    :class:`~gnnaudit.errors.InvalidInputError` naming every unknown keyword (with its close
    matches), an object of the wrong class, and every default-unit option (also ``config=``)
    given with an explicit unit list, which no unit in it would use.
    """
    groups = option_names()
    check_keywords(
        shorthand,
        # run_audit's own parameters are among the close matches a misspelt keyword gets
        [*(name for names in groups.values() for name in names), *RUN_AUDIT_PARAMETERS],
        hint=" (unit options go to the unit's constructor, e.g. SensitivityUnit(scopes=...))",
    )
    _checked("config", config, AuditConfig)
    _checked("options", options, AuditOptions)
    _checked("settings", settings, RunSettings)
    flat = dict(shorthand)
    bins_set = options is not None and options.sensitive_bins is not None
    if "bins" in flat and "sensitive_bins" not in flat and not bins_set:
        flat["sensitive_bins"] = flat["bins"]
    unit_options = {k: v for k, v in flat.items() if k in groups["config"]}
    if units_given:
        unused = sorted(k for k in unit_options if k not in ALWAYS_USED_UNIT_OPTIONS)
        if unused or config is not None:
            fields = {f.name: f.metadata["unit"] for f in dataclasses.fields(AuditConfig)}
            named = ", ".join(f"{k} ({fields[k]})" for k in unused) or "config="
            raise InvalidInputError(
                f"option(s) {named} configure the default units, but units= was given and no "
                "unit in it uses them: configure the units themselves"
            )
    return (
        dataclasses.replace(config or AuditConfig(), **unit_options),
        dataclasses.replace(
            options or AuditOptions(), **{k: v for k, v in flat.items() if k in groups["options"]}
        ),
        dataclasses.replace(
            settings or RunSettings(),
            **{k: v for k, v in flat.items() if k in groups["settings"]},
        ),
    )


def default_units(config: AuditConfig | None = None, **options: Any) -> list[AuditUnit]:
    """The audit's default statistics, in report order, configured by ``config`` (default
    :class:`AuditConfig()`) updated by ``options`` (its field names; another name is an
    :class:`~gnnaudit.errors.InvalidInputError` naming it).

    Model quality, sensitivity, group fairness, the fair-GNN literature metrics, proxies
    (``proxies=True``), evidence contrast, discrimination, error verification and evidence
    pairs; then fine-tuning on evidences (``finetune=True``), the
    embedding audit (``embedding=True``) and the mitigation (``mitigate=True``).
    """
    if config is not None and not isinstance(config, AuditConfig):
        raise InvalidInputError(f"config must be an AuditConfig, got {type(config).__name__}")
    check_keywords(options, _field_names(AuditConfig), what="default_units option")
    cfg = dataclasses.replace(config or AuditConfig(), **options)
    units: list[AuditUnit] = [
        ModelQuality(),
        SensitivityUnit(num_hops=cfg.model_hops, hops_option="model_hops"),
        GroupFairnessUnit(),
        LiteratureMetricsUnit(),
        *(
            [ProxyUnit(top=cfg.proxy_top, num_hops=cfg.model_hops, hops_option="model_hops")]
            if cfg.proxies
            else []
        ),
        EvidenceContrastUnit(),
        DiscriminationUnit(min_support=cfg.min_support, bins=cfg.bins),
        ErrorVerificationUnit(ks=cfg.ks),
        EvidencePairsUnit(top=cfg.top_pairs, pool=max(100, cfg.top_pairs)),
    ]
    if cfg.finetune:  # registered by gnnaudit.training (Lightning), imported only now
        units.append(build_unit("finetune", **dict(cfg.finetune_kwargs or {})))
    if cfg.embedding:
        units.append(EmbeddingStructureUnit(**dict(cfg.embedding_kwargs or {})))
    if cfg.mitigate:
        units.append(build_unit("mitigate", **dict(cfg.mitigate_kwargs or {})))
    return units
