"""One validated description of a run: :class:`EvalConfig`.

``ragmeter.evaluate(data, metrics, **options)`` builds one :class:`EvalConfig` from its options (or
takes one as ``config=``); the runner, the engines, the ``ragmeter eval`` command, the testing
helpers and the cost estimate all pass this object instead of a list of keyword arguments. Each
field is checked once, here, and a bad value is a :class:`~ragmeter.core.errors.ConfigError` that
names the field (exit status 2 in the CLI), before any run is stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError

#: where a run's metric batches are computed (:mod:`ragmeter.run.engines`)
ENGINES = ("local", "ray")
ON_ERROR = ("raise", "skip")


@dataclass(frozen=True)
class EvalConfig:
    """Everything ``evaluate`` needs besides the data.

    Attributes:
        metrics: metric names (``"rouge1_fmeasure"``, ``"ndcg@10"``) or ``{"name", "params"}``
            mappings; added to the config file's metrics, if any.
        file: a config file path or mapping (``metrics``/``metric_types``, ``options``,
            ``thresholds`` ...), read by :func:`ragmeter.core.config.load_config`.
        max_missing: the share of samples (0 to 1) a metric may lack a value on before the run
            counts as incomplete (default: incomplete only when a metric has no value at all).
        mapping: ``{field: column}`` (or ``["field=column"]``) for columns the aliases miss.
        on_error: ``"raise"`` or ``"skip"`` bad dataset rows.
        db: a store, or a SQLAlchemy URL (default ``$RAGMETER_DB`` or ``.ragmeter/ragmeter.db``).
        resume: a run id to finish; only pairs not yet stored are computed.
        name: a name for the run.
        options: run-wide options passed to metrics (``embedding_model``, ``judge`` ...).
        progress: show progress bars on stderr.
        skip_unavailable: record no value for metrics that cannot run here instead of failing.
        where: keep only samples whose metadata match (``{"type": "multi_hop"}``, ``["type=multi_hop"]``).
        engine: ``"local"`` (this process, and a second one for large runs) or ``"ray"``.
        ray_address: ``ray://HOST:PORT`` of a Ray cluster (default: a local Ray runtime).
        thresholds: per-metric thresholds (``{"token_f1": 0.3}`` or ``["faithfulness=0.7"]``).
        pass_rule: ``"all"`` samples (default) or a pass-rate target for the Wilson lower bound.
        per_span: score each sample's agent trace per span (:mod:`ragmeter.run.spans`): retriever,
            LLM and tool spans and each agent as rows linked to their trace, intervals clustered by trace.
    """

    metrics: tuple[str | dict[str, Any], ...] = ()
    file: str | Path | Mapping[str, Any] | None = None
    max_missing: float | None = None
    mapping: Mapping[str, str] | Sequence[str] | None = None
    on_error: str = "raise"
    db: Any = None
    resume: str | None = None
    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    progress: bool = False
    skip_unavailable: bool = False
    where: Mapping[str, str] | Sequence[str] | None = None
    engine: str = "local"
    ray_address: str | None = None
    thresholds: Mapping[str, Any] | Sequence[str] | None = None
    pass_rule: Any = None
    per_span: bool = False

    def __post_init__(self) -> None:
        metrics = self.metrics
        if metrics is None:
            metrics = ()
        elif isinstance(metrics, str | Mapping):
            metrics = (metrics,)
        elif not isinstance(metrics, Sequence):
            raise ConfigError(f"metrics must be a list of metric names or {{name, params}} mappings, "
                              f"got {type(metrics).__name__}")
        object.__setattr__(self, "metrics", tuple(metrics))
        bad = [m for m in self.metrics if not isinstance(m, str | Mapping)]
        if bad:
            raise ConfigError(f"metrics: each entry is a metric name or a {{name, params}} mapping, got {bad[0]!r}")
        mm = self.max_missing
        if mm is not None and (isinstance(mm, bool) or not isinstance(mm, int | float) or not 0 <= mm <= 1):
            raise ConfigError(f"max_missing must be a share of the samples between 0 and 1, got {mm!r}")
        if self.on_error not in ON_ERROR:
            raise ConfigError(f"on_error must be 'raise' or 'skip', got {self.on_error!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}: use local or ray")
        if self.options is None:
            object.__setattr__(self, "options", {})
        elif not isinstance(self.options, Mapping):
            raise ConfigError(f"options must be a mapping of option names to values, got {type(self.options).__name__}")
        for flag in ("progress", "skip_unavailable", "per_span"):
            value = getattr(self, flag)
            if not isinstance(value, bool | int):
                raise ConfigError(f"{flag} must be true or false, got {value!r}")
        for name in ("resume", "name", "ray_address"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name} must be a string, got {type(value).__name__}")
        if self.file is not None and not isinstance(self.file, str | Path | Mapping):
            raise ConfigError(f"config must be a file path, a mapping or an EvalConfig, got {type(self.file).__name__}")

    @classmethod
    def of(cls, config: EvalConfig | str | Path | Mapping[str, Any] | None = None,
           metrics: Sequence[str | dict[str, Any]] | None = None, **options: Any) -> EvalConfig:
        """The one config of a run: ``config`` (an :class:`EvalConfig`, or a config file path or
        mapping as before) with ``metrics`` added and ``options`` (field names) set.

        Raises:
            ConfigError: an option that is not a field (naming it and the fields), or a bad value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown or "file" in options and isinstance(config, str | Path | Mapping):
            raise ConfigError(f"unknown option {', '.join(map(repr, unknown or ['file']))} for evaluate; "
                              f"the options are: {', '.join(sorted(names - {'file', 'metrics'}))}")
        if isinstance(config, EvalConfig):
            base = config
        else:
            base = cls(file=config) if config is not None else cls()
        extra = tuple(metrics or ())
        if extra:
            options["metrics"] = base.metrics + extra
        return dataclasses.replace(base, **options) if options else base

    def replace(self, **changes: Any) -> EvalConfig:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)
