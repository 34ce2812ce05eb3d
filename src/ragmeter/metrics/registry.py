"""Metric registry: every metric is registered under its config key with what it needs.

A metric is a *batch* function ``fn(samples, ctx, **params) -> list[Score]``: it receives only the
samples that have every field it requires and returns one ``Score`` per sample, in order. It never
reads files, prints, or touches the store; shared services (embeddings, judge) come from ``ctx``.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.core.context import declare_service
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import FIELD_PRESENT, Sample, Score

# the services that metrics with ``needs_embeddings`` / ``needs_llm`` ask their context for
declare_service("embeddings", "ragmeter.embed")
declare_service("judge", "ragmeter.llm")

BatchFn = Callable[..., list[Score]]
PrepareFn = Callable[..., None]
#: ``corpus(samples, options, params) -> fields | None``: a score of the whole run (e.g. corpus BLEU),
#: computed once the run is summarised; its fields are added to the metric's summary
CorpusFn = Callable[[Sequence[Sample], Mapping[str, Any], Mapping[str, Any]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class WorkerCache:
    """A cache of a metric that a worker process fills and hands back with its scores, so the
    parent does not count the same thing again (e.g. BLEU's n-gram statistics).

    Attributes:
        key: names the cache (several metrics may share one).
        export: ``export() -> state``: what the cache holds, picklable (called in the worker).
        merge: ``merge(state)``: add a worker's state to this process's cache.
    """

    key: str
    export: Callable[[], Any]
    merge: Callable[[Any], None]


@dataclass
class MetricSpec:
    """What the registry knows about a metric.

    Attributes:
        name: config key (e.g. ``rouge1_fmeasure``).
        family: ``lexical``, ``retrieval``, ``semantic``, ``llm``, ``agent``, ...
        fn: the batch scoring function.
        requires: sample fields needed (keys of ``ragmeter.core.schema.FIELD_PRESENT``).
        range: (low, high) of the values: what every check, interval, report and trend reads. A side
            may be infinite when the metric cannot know it before its values are seen (an OpenAI
            python grader without a ``range``): intervals then follow the rule for no declared range
            (docs/statistics.md), and the summary records ``range: null``.
        higher_is_better: direction; ``False`` for hallucination, bias, toxicity.
        needs_embeddings / needs_llm: whether the metric uses those services.
        defaults: default parameters passed to ``fn``.
        param: name of the parameter set by the ``name@value`` shorthand (e.g. ``k`` for ``ndcg@10``).
        prepare: optional ``prepare(samples, ctx, **params)`` called for every metric before any
            scoring, so services can collect work once for the whole run (e.g. texts to embed).
        check: optional ``check(ctx, **params) -> str | None``: a message when the metric cannot
            run in this context (e.g. no judge configured), checked before any work starts.
        batch_size: the runner scores and stores this many samples at a time.
        description: one paragraph with the formula.
        aliases: other names accepted for the metric (results are stored under ``name``).
        equals: the exactness contract of a namespaced metric (``ragas:faithfulness``,
            ``deepeval:bias`` ...): ``{"tool", "version", "metric"}`` -- given the same
            intermediate judge verdicts its number equals that tool's (that version, that class),
            which the differential tests check. ``None`` for ragmeter's own definitions.
        parity: for a judge metric, which tool's number it equals and where it differs (one
            paragraph; ``ragmeter metrics --long`` and ``--json`` show it).
        options: run options (``--option KEY=VALUE``) the metric reads besides its parameters'
            names (``g_eval_criteria``); with them a misspelt option key is refused naming the
            known one (:mod:`ragmeter.run.option_keys`).
        per_sample: each sample's value depends on that sample alone (and the run's options), so
            splitting the samples into batches or reordering them changes no value: what the
            runner's batches, the judge stream and the forked and Ray engines rely on, and what
            tests/test_common_metrics.py checks for every metric. ``False`` for a metric fitted on
            its whole batch (a threshold calibrated on the run's labelled samples), which must
            then declare a ``batch_size`` that keeps the run's samples in one batch.
        corpus: optional corpus-level score of a run (:data:`CorpusFn`), beside the mean of the
            per-sample values; the run calls it through :func:`corpus_scores`.
        worker_cache: optional :class:`WorkerCache` a worker process hands back
            (:func:`export_worker_caches`, :func:`merge_worker_caches`).
        range_for: for a metric whose range is set by its parameters (an OpenAI grader: its
            ``range``, its ``evaluation_metric``, its formula), ``range_for(params) -> (low, high)``;
            :func:`resolve` gives the request a spec with that ``range``, so everything that reads
            ``request.spec.range`` reads the range of this definition.

    Traits: what the run does for a metric, read by the planner, the engines and the aggregation
    instead of its family's name. Left ``None``, a trait takes its family's value
    (:data:`FAMILY_TRAITS`), set once when the spec is made.

    Attributes:
        pure: its values can be computed in another process (the forked worker, a Ray task) with
            no service (no judge, no embeddings, no store) and without its ``prepare``: each
            sample's value from that sample alone. :meth:`is_pure` is what engines read.
        pure_for: ``pure_for(params) -> bool`` for a pure metric whose purity depends on its
            parameters (a retrieval metric matching chunks by embedding similarity is not pure;
            its ``prepare`` then asks for the embeddings).
        scope: what one value describes (:data:`SCOPES`): ``sample`` (in a run of conversations,
            an assistant turn; the interval of its run mean is clustered by conversation),
            ``trace`` (an agent's trace, one per sample), ``conversation`` (a whole conversation:
            the metric scores the conversation samples of a run, :func:`scored_samples`).
        banded: the score bands (Excellent ... Critical, for quality scores on [0, 1]) apply to its
            values (:func:`banded`).
        span_kinds: in a run scored per span (``ragmeter eval --per-span``, :mod:`ragmeter.run.spans`),
            the rows of an agent trace it scores (:data:`SPAN_ROW_KINDS`): ``retriever`` spans (with
            their documents), ``llm`` spans (with the documents retrieved before them), ``tool``
            spans (one call each), the whole ``trace`` and each ``agent`` of a multi-agent trace.
            Left ``None``: its family's, else ``llm`` for a metric that reads contexts and ``trace``
            (the final answer) for the rest.
    """

    name: str
    family: str
    fn: BatchFn
    requires: tuple[str, ...] = ()
    range: tuple[float, float] = (0.0, 1.0)
    higher_is_better: bool = True
    needs_embeddings: bool = False
    needs_llm: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)
    param: str | None = None
    prepare: PrepareFn | None = None
    check: Callable[..., str | None] | None = None
    batch_size: int = 2000
    description: str = ""
    aliases: tuple[str, ...] = ()
    equals: dict[str, str] | None = None
    parity: str = ""
    options: tuple[str, ...] = ()
    per_sample: bool = True
    corpus: CorpusFn | None = None
    worker_cache: WorkerCache | None = None
    range_for: Callable[[Mapping[str, Any]], tuple[float, float]] | None = None
    pure: bool | None = None
    pure_for: Callable[[Mapping[str, Any]], bool] | None = None
    scope: str | None = None
    banded: bool | None = None
    span_kinds: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        self.family = family_name(self.family)
        traits = family_traits(self.family)
        for name, value in traits.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.scope not in SCOPES:
            raise ValueError(f"metric {self.name!r}: scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.span_kinds is None:
            reads_contexts = {"contexts", "context_texts"} & set(self.requires)
            self.span_kinds = ("llm",) if reads_contexts else ("trace",)
        self.span_kinds = tuple(self.span_kinds)
        if not set(self.span_kinds) <= set(SPAN_ROW_KINDS):
            raise ValueError(f"metric {self.name!r}: span_kinds must be among {', '.join(SPAN_ROW_KINDS)}, "
                             f"got {self.span_kinds!r}")

    def is_pure(self, params: Mapping[str, Any]) -> bool:
        """Whether this metric with ``params`` can be scored in another process (see :attr:`pure`):
        never one that asks a service for anything or is fitted on its whole batch
        (``per_sample=False``); with a ``prepare`` hook, only when its :attr:`pure_for` says so."""
        if not self.pure or self.needs_llm or self.needs_embeddings or not self.per_sample:
            return False
        if self.pure_for is not None:
            return bool(self.pure_for(params))
        return self.prepare is None

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "requires": list(self.requires),
            "range": list(declared) if (declared := declared_range(self.range)) is not None else None,
            "range_from_parameters": self.range_for is not None,
            "direction": "higher" if self.higher_is_better else "lower",
            "needs_embeddings": self.needs_embeddings,
            "needs_llm": self.needs_llm,
            "defaults": dict(self.defaults),
            "param": self.param,
            "aliases": list(self.aliases),
            "description": " ".join(inspect.cleandoc(self.description).split("\n\n")[0].split()),
            "equals": dict(self.equals) if self.equals else None,
            "parity": self.parity_text() or None,
            "scope": self.scope,
            "banded": self.banded,
            "span_kinds": list(self.span_kinds or ()),
        }

    def parity_text(self) -> str:
        """:attr:`parity` on one line; for a judge metric without one, that no tool computes it."""
        text = " ".join(self.parity.split())
        if not text and self.needs_llm:
            text = "ragmeter's own definition: no ragas or DeepEval metric computes this number."
        return text


#: what one value of a metric describes (:attr:`MetricSpec.scope`)
SCOPES = ("sample", "trace", "conversation")

#: the rows an agent trace is scored as, per span (:attr:`MetricSpec.span_kinds`, :mod:`ragmeter.run.spans`)
SPAN_ROW_KINDS = ("trace", "agent", "retriever", "llm", "tool")

#: family names of earlier versions, still accepted wherever a family is named (``ragmeter metrics
#: --family``, a plugin's spec, a stored run's summary): the judge family was ``llm``
FAMILY_ALIASES = {"llm": "judge"}

#: the traits of a family's metrics, unless a spec declares its own (:class:`MetricSpec`); a family
#: not listed has the defaults of :data:`_DEFAULT_TRAITS`. The bands were defined (an
#: agent-evaluation guide's table) for judge, agent and composite scores on a 0-1 quality scale; a
#: metric without a family (a custom metric) gets them too.
FAMILY_TRAITS: dict[str, dict[str, Any]] = {
    "lexical": {"pure": True},
    "retrieval": {"pure": True, "span_kinds": ("retriever",)},
    "judge": {"banded": True},
    "agent": {"banded": True, "scope": "trace", "span_kinds": ("trace", "agent")},
    "composite": {"banded": True},
    "conversation": {"scope": "conversation", "span_kinds": ()},
    "": {"banded": True},
}
_DEFAULT_TRAITS: dict[str, Any] = {"pure": False, "scope": "sample", "banded": False, "span_kinds": None}


def family_name(family: str | None) -> str:
    """The family's current name (:data:`FAMILY_ALIASES`: ``llm`` is ``judge``)."""
    name = (family or "").strip()
    return FAMILY_ALIASES.get(name, name)


def family_traits(family: str | None) -> dict[str, Any]:
    """The traits a metric of ``family`` has unless its spec says otherwise."""
    return {**_DEFAULT_TRAITS, **FAMILY_TRAITS.get(family_name(family), {})}


_REGISTRY: dict[str, MetricSpec] = {}
_ALIASES: dict[str, str] = {}
_WORKER_CACHES: dict[str, WorkerCache] = {}


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Add ``spec`` to the registry (its name and aliases must be new)."""
    for key in (spec.name, *spec.aliases):
        if key in _REGISTRY or key in _ALIASES:
            raise ValueError(f"metric name {key!r} is already registered")
    _REGISTRY[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name
    if spec.worker_cache is not None:
        _WORKER_CACHES[spec.worker_cache.key] = spec.worker_cache
    return spec


def corpus_scores(requests: Sequence[MetricRequest], samples: Sequence[Sample],
                  options: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The corpus-level score of every requested metric that declares one (``spec.corpus``), as
    ``{key: summary fields}`` to add beside its mean. A corpus score never fails a finished run:
    its error becomes the field ``corpus_note``."""
    out: dict[str, dict[str, Any]] = {}
    for r in requests:
        hook = r.spec.corpus
        if hook is None:
            continue
        try:
            fields = hook(samples, dict(options or {}), r.params)
        except Exception as exc:  # a corpus score must never fail a finished run
            out[r.key] = {"corpus_note": f"corpus score unavailable: {exc}"}
            continue
        if fields is not None:
            out[r.key] = dict(fields)
    return out


def export_worker_caches() -> dict[str, Any]:
    """The state of every declared worker cache (in a worker process, handed back with its scores)."""
    return {key: cache.export() for key, cache in _WORKER_CACHES.items()}


def merge_worker_caches(states: Mapping[str, Any]) -> None:
    """Add the states a worker exported (:func:`export_worker_caches`) to this process's caches."""
    for key, state in states.items():
        cache = _WORKER_CACHES.get(key)
        if cache is not None:
            cache.merge(state)


def metric(name: str, *, family: str, requires: Iterable[str] = (), **kwargs: Any) -> Callable[[BatchFn], BatchFn]:
    """Decorator form of :func:`register_metric`; the docstring becomes the description."""

    def deco(fn: BatchFn) -> BatchFn:
        register_metric(MetricSpec(name=name, family=family, fn=fn, requires=tuple(requires),
                                   description=kwargs.pop("description", None) or (fn.__doc__ or ""),
                                   **kwargs))
        return fn

    return deco


def all_metrics() -> list[MetricSpec]:
    """Every registered metric, sorted by family then name."""
    _load_families()
    return sorted(_REGISTRY.values(), key=lambda s: (s.family, s.name))


def get_spec(name: str) -> MetricSpec:
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        # families are imported in order until one names the metric (the lexical family alone
        # names most metrics of a run); the rest, and plugins, only for a name none of them has
        import importlib

        # a judge metric's module first (a judged run imports no lexical, retrieval, semantic ...
        # family: 20-40 ms of a fresh process before its first judge request); only a hint, the
        # scan below still finds any name
        hint = _NAME_HOME.get(name.split(":", 1)[0] if ":" in name else name)
        for mod in ((hint,) if hint else ()) + _FAMILY_MODULES:
            importlib.import_module(mod)
            key = _ALIASES.get(name, name)
            if key in _REGISTRY:
                break
    if key not in _REGISTRY:
        _load_families()
        key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise ConfigError(_unknown_message(name))
    return _REGISTRY[key]


def _unknown_message(name: str) -> str:
    names = list(_REGISTRY) + list(_ALIASES)
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (f"unknown metric {name!r}.{hint} Run `ragmeter metrics` to list every metric "
            f"(groups: {', '.join(sorted(GROUPS))}; docs/config-keys.md lists every accepted name).")


#: names that stand for several metrics, in a config's ``metrics`` / ``metric_types`` or ``--metrics``.
#: ``rouge`` is the usual short name for the ROUGE-1/2/L F-measures (rouge-score's default report).
GROUPS: dict[str, tuple[str, ...]] = {
    "rouge": ("rouge1_fmeasure", "rouge2_fmeasure", "rougeL_fmeasure"),
}


def expand_groups(entries: Sequence[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
    """Replace each group name (:data:`GROUPS`, e.g. ``"rouge"``) by its members, in order."""
    out: list[str | dict[str, Any]] = []
    for e in entries:
        name = e.strip() if isinstance(e, str) else None
        out.extend(GROUPS[name] if name in GROUPS and name not in _loaded_names() else [e])
    return out


@dataclass(frozen=True)
class MetricRequest:
    """A metric resolved from a config entry: spec + parameters + the key results are stored under."""

    key: str
    spec: MetricSpec
    params: dict[str, Any]


_SHORTHAND = re.compile(r"^(?P<name>[A-Za-z_][\w.:]*?)@(?P<value>[^@]+)$")


def _coerce(value: str) -> Any:
    for conv in (int, float):
        try:
            return conv(value)
        except ValueError:
            pass
    return value


def _shorthand_value(spec: MetricSpec, raw: str) -> Any:
    """The ``@`` value coerced to the parameter's type: an integer for ``k`` (and for integer
    defaults), a number for float defaults; anything else stays as given."""
    value = _coerce(raw)
    default = spec.defaults.get(spec.param or "")
    wants_int = spec.param == "k" or (isinstance(default, int) and not isinstance(default, bool))
    if wants_int and not isinstance(value, int):
        raise ConfigError(f"{spec.name}@{spec.param} expects an integer {spec.param}, got {raw!r} "
                          f"(e.g. {spec.name}@10)")
    if isinstance(default, float) and not isinstance(value, int | float):
        raise ConfigError(f"{spec.name}@{spec.param} expects a number, got {raw!r} "
                          f"(e.g. {spec.name}@{default:g})")
    return value


def resolve(entry: str | dict[str, Any]) -> MetricRequest:
    """Turn ``"rouge1_fmeasure"``, ``"ndcg@10"`` or ``{"name": ..., "params": {...}, "key": ...}`` into a request.

    Raises:
        ConfigError: unknown name (listing the closest valid names) or unknown parameter.
    """
    params: dict[str, Any] = {}
    key: str | None = None
    if isinstance(entry, dict):
        if "name" not in entry:
            raise ConfigError(f"metric entry {entry!r} has no 'name'")
        name = str(entry["name"])
        params = dict(entry.get("params") or {})
        key = entry.get("key")
    elif isinstance(entry, str):
        name = entry.strip()
    else:
        raise ConfigError(f"metric entry must be a name or a mapping, got {type(entry).__name__}")

    m = _SHORTHAND.match(name)
    if m and m.group("name") in _loaded_names():
        spec = get_spec(m.group("name"))
        if spec.param is None:
            raise ConfigError(f"metric {spec.name!r} takes no '@' parameter (got {name!r})")
        params = {spec.param: _shorthand_value(spec, m.group("value")), **params}
        base_key = name
    else:
        spec = get_spec(name)
        base_key = spec.name if name in _ALIASES else name

    unknown = set(params) - set(spec.defaults) - ({spec.param} if spec.param else set())
    if unknown:
        raise ConfigError(f"metric {spec.name!r} has no parameter(s) {sorted(unknown)}; "
                          f"valid: {sorted(set(spec.defaults) | ({spec.param} if spec.param else set()))}")
    merged = {**spec.defaults, **params}
    spec = _ranged(spec, merged)
    if key is None:
        # the '@' value is already in base_key; a param given in the mapping must show in the key
        extra = {k: v for k, v in params.items()
                 if (k != spec.param or "@" not in base_key) and spec.defaults.get(k) != v}
        key = base_key + ("(" + ",".join(f"{k}={v}" for k, v in sorted(extra.items())) + ")" if extra else "")
    return MetricRequest(key=key, spec=spec, params=merged)


_RANGED: dict[tuple[str, float, float], MetricSpec] = {}


def _ranged(spec: MetricSpec, params: Mapping[str, Any]) -> MetricSpec:
    """``spec`` with the range its parameters set (:attr:`MetricSpec.range_for`); the same object
    for the same range, so a request resolved twice (in a spawned worker too) has the same spec."""
    if spec.range_for is None:
        return spec
    low, high = (float(x) for x in spec.range_for(params))
    if (low, high) == tuple(spec.range):
        return spec
    return _RANGED.setdefault((spec.name, low, high), dataclasses.replace(spec, range=(low, high)))


def declared_range(rng: Sequence[float] | None) -> tuple[float, float] | None:
    """``rng`` when both ends are finite numbers with ``low < high``, else ``None``: the metric
    declares no range (an OpenAI python grader without ``range``), and its intervals follow the
    rule for no declared range (:func:`ragmeter.stats.mean_ci` with ``bounds=None``)."""
    if rng is None:
        return None
    try:
        low, high = (float(x) for x in rng)
    except (TypeError, ValueError):
        return None
    return (low, high) if math.isfinite(low) and math.isfinite(high) and low < high else None


def recorded_range(key: str, request: Mapping[str, Any] | None = None, recorded: Any = None
                   ) -> tuple[float, float] | None:
    """The declared range of metric ``key`` of a stored run (:func:`declared_range`), from the one
    place that decides it: the spec its request resolves to (``{"name", "params"}`` as the run
    stored it, so an OpenAI grader's definition sets it), else the range ``recorded`` in the run's
    summary (a metric this process does not know), else the registry's by the key's name
    (``ndcg@10``, ``faithfulness(judge=...)``). ``None`` when none of them declares one."""
    if isinstance(request, Mapping) and request.get("name"):
        try:
            rng = resolve({"name": request["name"], "params": dict(request.get("params") or {})}).spec.range
        except (ConfigError, ImportError, TypeError, ValueError):
            pass
        else:
            return declared_range(rng)
    if recorded is not None:
        return declared_range(recorded)
    for name in dict.fromkeys((key, key.split("(", 1)[0])):
        try:
            return declared_range(resolve(name).spec.range)
        except (ConfigError, ImportError):
            continue
    return None


def resolve_all(entries: Sequence[str | dict[str, Any]]) -> list[MetricRequest]:
    """Resolve a list of entries, reporting every unknown name at once; duplicates are dropped.

    Group names (:data:`GROUPS`: ``rouge`` = ``rouge1_fmeasure, rouge2_fmeasure, rougeL_fmeasure``)
    expand to their members.
    """
    out: dict[str, MetricRequest] = {}
    errors: list[str] = []
    for e in expand_groups(entries):
        try:
            r = resolve(e)
        except ConfigError as exc:
            errors.append(str(exc))
            continue
        out.setdefault(r.key, r)
    if errors:
        raise ConfigError("\n".join(errors))
    return list(out.values())


def missing_fields(sample: Sample, requires: Iterable[str]) -> list[str]:
    """The required fields ``sample`` lacks."""
    return [f for f in requires if not FIELD_PRESENT[f](sample)]


def banded(key: str, family: str | None = None) -> bool:
    """Whether the score bands apply to metric ``key`` of a stored run: its spec's :attr:`~MetricSpec.banded`
    when this process knows the metric (``ndcg@10``, ``faithfulness(judge=...)`` by their name), else
    the trait of the ``family`` its summary records (a metric of a plugin not loaded here).

    A name already registered cannot be registered again, so the module of the recorded family is
    imported first and the other families only when it does not hold the metric (a report or a
    dashboard of lexical runs does not import every metric family)."""
    candidates = tuple(dict.fromkeys((key, key.split("(", 1)[0], key.split("(", 1)[0].split("@", 1)[0])))
    home = _FAMILY_HOME.get(family or "")
    if not _loaded and home is not None and not any(n in _REGISTRY or n in _ALIASES for n in candidates):
        import importlib

        importlib.import_module(home)
    if not any(n in _REGISTRY or n in _ALIASES for n in candidates):
        _load_families()
    for name in candidates:
        if name in _REGISTRY or name in _ALIASES:
            return bool(_REGISTRY[_ALIASES.get(name, name)].banded)
    return bool(family_traits(family)["banded"])


def scored_samples(scope: str, samples: list[Sample]) -> list[Sample]:
    """The samples of a run a metric of ``scope`` (:attr:`MetricSpec.scope`) scores: every sample,
    except in a run of conversations, where a ``conversation`` metric scores the conversations and
    every other metric the assistant turns (:mod:`ragmeter.conversations.scope`)."""
    from ragmeter.conversations.scope import for_scope

    return for_scope(scope, samples)


def scoped_columns(columns: Mapping[str, tuple[Any, list[str | None]]], requests: Sequence[MetricRequest],
                   samples: Sequence[Sample]) -> dict[str, tuple[Any, list[str | None]]]:
    """``{key: (values, reasons)}`` aligned with ``samples``, keeping per metric only the samples its
    scope covers (:func:`scored_samples`): what its summary is computed over."""
    from ragmeter.conversations.scope import restrict

    return restrict(columns, {r.key: r.spec.scope or "" for r in requests}, samples)


def clustered_intervals(summary: Mapping[str, Any], columns: Mapping[str, tuple[Any, list[str | None]]],
                        requests: Sequence[MetricRequest], samples: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """The intervals a metric's scope calls for instead of the independent one, as ``{key: summary
    fields}``: in a run of conversations, the values of every metric that scores assistant turns are
    clustered by conversation (cluster-robust interval, :mod:`ragmeter.conversations.scope`).
    ``columns`` are every sample's values (aligned with ``samples``); ``{}`` for other runs."""
    from ragmeter.conversations.scope import cluster_intervals

    return cluster_intervals(summary, columns, {r.key: r.spec.scope or "" for r in requests},
                             {r.key: r.spec.range for r in requests}, samples)


def _loaded_names() -> set[str]:
    _load_families()
    return set(_REGISTRY) | set(_ALIASES)


_FAMILY_MODULES = (
    "ragmeter.metrics.lexical",
    "ragmeter.metrics.retrieval.ranking",
    "ragmeter.metrics.semantic",
    "ragmeter.metrics.bertscore",
    "ragmeter.metrics.claims",
    "ragmeter.metrics.quality_model",
    "ragmeter.metrics.judge.registered",
    "ragmeter.metrics.agent",
    "ragmeter.metrics.conversation",
    "ragmeter.metrics.correctness.correct",
    "ragmeter.metrics.openai_evals.graders",
    "ragmeter.metrics.openai_evals.basic",
)
#: names (and the ``ragas:`` / ``deepeval:`` prefixes) whose module :func:`get_spec` imports first;
#: a hint only (tests/test_registry_hints.py checks each module registers its names)
_JUDGE = "ragmeter.metrics.judge."
_NAME_HOME = {**dict.fromkeys(("faithfulness", "hallucination", "answer_relevancy"), _JUDGE + "generation"),
              **dict.fromkeys(("context_precision", "context_recall", "contextual_relevancy"), _JUDGE + "contexts"),
              **dict.fromkeys(("answer_correctness", "bias", "context_relevance_labels", "graded_correctness",
                               "pairwise", "rubric", "toxicity", "ragas", "deepeval"), _JUDGE + "registered")}
_loaded = False
#: the module that registers most of a family's metrics (:func:`banded` tries it first)
_FAMILY_HOME = {"lexical": "ragmeter.metrics.lexical", "retrieval": "ragmeter.metrics.retrieval.ranking",
                "judge": "ragmeter.metrics.judge.registered", "agent": "ragmeter.metrics.agent",
                "correctness": "ragmeter.metrics.correctness.correct"}


def _load_families() -> None:
    """Import every metric family module (each registers its metrics on import). Cheap: heavy
    dependencies are imported only when a metric runs."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib
    import importlib.util

    for mod in _FAMILY_MODULES:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod)
    _load_plugins()


def _load_plugins() -> None:
    """Third-party metrics: modules named in ``$RAGMETER_PLUGINS`` (comma-separated) and the
    ``ragmeter.metrics`` entry-point group are imported, and register their metrics on import."""
    import importlib
    import os
    from importlib.metadata import entry_points

    names = [m.strip() for m in os.environ.get("RAGMETER_PLUGINS", "").split(",") if m.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"cannot import metric plugin {name!r} from $RAGMETER_PLUGINS: {exc}") from exc
    for ep in entry_points(group="ragmeter.metrics"):
        ep.load()
