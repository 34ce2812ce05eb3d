"""The runner: load -> plan -> score -> aggregate -> store.

Scores are written to the store as each batch finishes, so an interrupted run keeps everything it
computed and ``resume`` finishes it without recomputing (and without storing any pair twice).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ragmeter.core.thresholds as th
from ragmeter._version import __version__
from ragmeter.core.config import load_config
from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import (
    ConfigError,
    DatasetError,
    IncompleteRunError,
    JudgeError,
    RunLeaseError,
    StoreError,
)
from ragmeter.core.schema import Sample, Score, ScoreColumn, ScoreColumns
from ragmeter.io.deepeval_files import FILE_OPTIONS, resolve_options
from ragmeter.io.readers import REQUIREMENT_TARGET, Dataset, load
from ragmeter.metrics.registry import MetricRequest, declared_range, missing_fields, resolve_all
from ragmeter.run import spans, stream
from ragmeter.run.engines import open_engine
from ragmeter.run.engines.base import Engine
from ragmeter.run.engines.lifecycle import heartbeat as _heartbeat
from ragmeter.run.engines.lifecycle import in_background as _in_background
from ragmeter.run.engines.lifecycle import join_writer as _join_writer
from ragmeter.run.eval_config import EvalConfig
from ragmeter.run.option_keys import check_option_keys
from ragmeter.run.plan import Started, make_plans
from ragmeter.run.provenance import provenance
from ragmeter.run.scoring import RunTimings, score_all
from ragmeter.stats.intervals import aggregate_many
from ragmeter.store import Store, open_store
from ragmeter.store.records import MetricSummary, RunSummary


@dataclass
class EvaluationResult:
    """What a run produced.

    Attributes:
        run_id: id of the run in the store.
        samples: the evaluated samples, in dataset order.
        scores: ``{metric_key: [Score per sample]}`` aligned with ``samples``.
        summary: the run's :class:`~ragmeter.store.records.RunSummary`, the record the store keeps:
            one :class:`~ragmeter.store.records.MetricSummary` per metric key (``.mean``, ``.n``,
            ``.n_missing``, ``.missing_reasons``, ``.ci_low``, ``.ci_high`` ...), which also reads
            as the stored JSON (``summary["token_f1"]["mean"]``).
        extra: service figures (embeddings computed/cached, judge calls and cost) and skipped rows.
        status: ``"completed"`` (every metric has values) or ``"incomplete"`` (no samples, or a
            metric without a value on more samples than ``max_missing`` allows).
        incomplete: why the run is incomplete, one line per problem (empty when completed).
    """

    run_id: str
    samples: list[Sample]
    scores: Mapping[str, list[Score]]
    summary: RunSummary
    extra: dict[str, Any] = field(default_factory=dict)
    store_url: str | None = None
    status: str = "completed"
    incomplete: list[str] = field(default_factory=list)

    @property
    def record(self) -> RunSummary:
        """:attr:`summary`, the typed, versioned record the store keeps
        (:class:`~ragmeter.store.records.RunSummary`)."""
        return self.summary

    @property
    def complete(self) -> bool:
        """Whether there were samples and every metric has values (``status == "completed"``)."""
        return self.status == "completed"

    def raise_for_status(self) -> EvaluationResult:
        """Raise :class:`~ragmeter.core.errors.IncompleteRunError` when the run is incomplete.

        Returns:
            The result itself, so ``evaluate(...).raise_for_status()`` reads as one step.
        """
        if not self.complete:
            raise IncompleteRunError(self.run_id, self.incomplete, result=self)
        return self

    def __getitem__(self, metric: str) -> float | None:
        return self.summary[metric].mean

    @property
    def metrics(self) -> list[str]:
        return list(self.scores)

    def to_pandas(self, columns: Sequence[str] | None = None) -> Any:
        """One row per sample, as :meth:`rows` (inputs, values with ``NaN`` where no value, pass/fail,
        no-value reasons, judge verdicts); ``columns`` chooses and orders them."""
        import pandas as pd

        from ragmeter.run.rows import select_columns

        df = pd.DataFrame(select_columns(self.rows(), columns))
        for m in self.scores:
            if m in df.columns:
                df[m] = df[m].astype(float)
        return df

    def rows(self) -> list[dict[str, Any]]:
        """Per-sample dicts: the sample's inputs as the readers read them back (``id``, ``question``,
        ``answer``, ``references``, ``contexts``, and ``negative_references``, ``relevant``,
        ``label``, ``metadata``, ``trace`` when a sample has them), one key per metric (``None`` = no
        value), ``METRIC__pass`` for thresholded metrics, ``no_value_reasons`` and ``judge``
        (verdict summaries)."""
        from ragmeter.run.rows import result_rows

        higher = {k: m.direction == "higher" for k, m in self.summary.items()}
        return result_rows(self.samples, self.scores, higher, self.extra.get("thresholds"))

    @property
    def passed(self) -> bool | None:
        """Whether every thresholded metric passed its run rule (``None`` without thresholds)."""
        checks = [m.check["ok"] for m in self.summary.values() if m.check is not None]
        return all(checks) if checks else None

    def figure(self, metric: str | None = None) -> Any:
        """A plotly figure (``pip install 'ragmeter-eval[report]'``; :mod:`ragmeter.core.figures`):
        the distribution of one metric's per-sample values with its threshold marked, or, with no
        ``metric``, every metric's mean with its 95% interval."""
        from ragmeter.core.figures import means_figure, values_figure

        if metric is None:
            return means_figure({k: (m.mean, m.ci_low, m.ci_high) for k, m in self.summary.items()
                                 if m.mean is not None}, title=f"run {self.run_id}: means with 95% CI")
        if metric not in self.scores:
            raise ConfigError(f"no metric {metric!r} in this result; it has {', '.join(self.scores)}")
        rec = th.from_record(self.extra.get("thresholds"))[0].get(metric)
        return values_figure([s.value for s in self.scores[metric] if s.value is not None], metric,
                             threshold=rec.value if rec is not None else None)

    def _repr_html_(self) -> str:
        from ragmeter.run.rows import summary_html

        return summary_html(self.summary, title=f"ragmeter run {self.run_id} ({len(self.samples)} samples)")

    def write_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for r in self.rows():
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON (``ragmeter eval --json``): id, status, sample count, the summary's
        stored JSON under ``metrics``, and the service figures."""
        return {"run_id": self.run_id, "status": self.status, "incomplete": self.incomplete,
                "n_samples": len(self.samples), "metrics": self.summary.to_dict(), **self.extra}


ProgressFactory = Callable[[str, int], Callable[[int], None]]


@contextmanager
def _rich_progress(enabled: bool) -> Iterator[ProgressFactory]:
    if not enabled:
        yield lambda desc, total: (lambda n: None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ragmeter.core.terminal import console as escaping_console

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(),
                  console=escaping_console(stderr=True), transient=False) as prog:
        def factory(desc: str, total: int) -> Callable[[int], None]:
            task = prog.add_task(desc, total=total)
            return lambda n: prog.advance(task, n)

        yield factory


def summarise(columns: Mapping[str, Any], requests: Sequence[MetricRequest],
              samples: Sequence[Sample] | None = None, options: Mapping[str, Any] | None = None,
              checks: Mapping[str, Mapping[str, Any]] | None = None) -> RunSummary:
    """A run's complete summary record, each metric's aggregate built once, never patched.

    Per metric: the aggregate of its values (:func:`ragmeter.stats.aggregate_many`), its interval
    within its ``range`` (its request's spec: for a metric built from a definition, the
    definition's range), and its direction, family and range, recorded (``null`` when it declares
    none) for every later reader. Given the run's ``samples`` (aligned with ``columns``), also:
    only the samples a metric's scope covers, with the intervals its scope calls for
    (:func:`~ragmeter.metrics.registry.scoped_columns`,
    :func:`~ragmeter.metrics.registry.clustered_intervals`: in a run of conversations, the turns'
    clustered by conversation; in a run scored per span, the rows of each metric's span kinds,
    clustered by trace: :mod:`ragmeter.run.spans`); the corpus scores a metric declares (``options``: the run's);
    and ``checks``, the threshold check of each thresholded metric
    (:func:`ragmeter.core.thresholds.apply`), stored as ``pass`` and ``pass_rate``.
    """
    from ragmeter.metrics.registry import clustered_intervals, corpus_scores, scoped_columns

    ranges = {r.key: r.spec.range for r in requests}
    per_span = samples is not None and spans.is_span_run(samples)
    scoped = (columns if samples is None else spans.restrict(columns, requests, samples) if per_span
              else scoped_columns(columns, requests, samples))
    aggregates = aggregate_many(scoped, bounds=ranges)
    spec = {r.key: {"direction": "higher" if r.spec.higher_is_better else "lower", "family": r.spec.family,
                    "range": list(rng) if (rng := declared_range(r.spec.range)) is not None else None}
            for r in requests}
    record = RunSummary({k: MetricSummary.from_dict({**a, **spec.get(k, {})}) for k, a in aggregates.items()})
    if samples is None:
        return record
    clustered = (spans.cluster_intervals(record, columns, requests, samples) if per_span
                 else clustered_intervals(record, columns, requests, samples))
    corpus = ({k: v for r in requests for k, v in corpus_scores([r], spans.rows_for(r.spec.span_kinds or (), samples),
                                                                 options).items()} if per_span
              else corpus_scores(requests, samples, options))  # declared corpus scores (BLEU, chrF) beside the means
    passed = {k: {"pass": {kk: vv for kk, vv in rec.items() if kk != "verdicts"},
                  "pass_rate": rec["rate"]}  # the share of samples that pass (also pass.rate)
              for k, rec in (checks or {}).items()}
    return record.updated({k: {**clustered.get(k, {}), **corpus.get(k, {}), **passed.get(k, {})}
                           for k in record})


def evaluate(data: Any, metrics: Sequence[str | dict[str, Any]] | None = None, *,
             config: EvalConfig | str | Path | dict[str, Any] | None = None, **options: Any) -> EvaluationResult:
    """Score every sample of ``data`` with every metric and store the run.

    Args:
        data: anything :func:`ragmeter.load` accepts (path, ``"example"``, pandas DataFrame,
            ``datasets.Dataset``, an iterable of dicts, a list of Samples). ``data`` may also be
            ``"dataset:NAME"`` (or ``NAME@VERSION``, ``NAME@TAG``): a dataset stored by
            ``ragmeter golden generate`` / ``ragmeter dataset``.
        metrics: metric names (``"rouge1_fmeasure"``, ``"ndcg@10"``) or ``{"name", "params"}``
            mappings. Added to the config's metrics, if any.
        config: an :class:`~ragmeter.run.eval_config.EvalConfig`, or a config file path or mapping
            (``metrics``/``metric_types``, ``options``, ``thresholds`` ...).
        **options: the fields of :class:`~ragmeter.run.eval_config.EvalConfig` (``max_missing``,
            ``mapping``, ``on_error``, ``db``, ``resume``, ``name``, ``options``, ``progress``,
            ``skip_unavailable``, ``where``, ``engine``, ``ray_address``, ``thresholds``,
            ``pass_rule``), each described there; they override ``config``'s.

    Returns:
        An :class:`EvaluationResult`. An incomplete run is stored with status ``incomplete`` and
        returned like any other (``result.status``, ``result.incomplete`` say why);
        ``result.raise_for_status()`` turns it into an :class:`~ragmeter.core.errors.IncompleteRunError`.

    Raises:
        DatasetError: a bad row (with ``on_error="raise"``), or a row that gives none of the
            fields a requested metric needs (listing the columns found and a ``--map`` to use).
        ConfigError: an unknown option or a bad value (naming the field), unknown metric names
            (listing the closest), unavailable metrics.
        JudgeError: the judge did not answer its pre-flight request (unreachable, key refused,
            unknown model); raised before any run is stored.
    """
    return run(data, EvalConfig.of(config, metrics, **options))


def price_samples(samples: Sequence[Sample]) -> None:
    """Price the LLM spans of the samples' agent traces that recorded no cost
    (:func:`ragmeter.llm.span_prices.price_samples`); rows without a trace (a lexical run) do not
    import the judge package."""
    if any(s.trace is not None for s in samples):
        from ragmeter.llm.span_prices import price_samples as price

        price(samples)


def run(data: Any, config: EvalConfig) -> EvaluationResult:
    """:func:`evaluate` with its :class:`~ragmeter.run.eval_config.EvalConfig` built: load, plan,
    score on the config's engine, aggregate, store. The interpreter's state (garbage collector,
    allocator) is left as it is: that policy belongs to the ``ragmeter`` command
    (:mod:`ragmeter.apps.cli.runtime`)."""
    settings = _Settings.of(config)
    if settings.options.get("judge"):  # its client opens in the background while the store opens, the data loads
        from ragmeter.llm.runtime import warm_judge

        warm_judge(settings.options)
    store = config.db if isinstance(config.db, Store) else open_store(config.db)
    t0 = time.perf_counter()
    engine = open_engine(config.engine, config.ray_address, store.url)
    if (requests := stream.streamable(data, config, settings)) is not None:  # a large file, chunk by chunk
        streamed = _streamed(data, config, settings, requests, store)
        if streamed is not None:
            return streamed
    begun = _resume(data, config, settings, store, engine) if config.resume else _create(
        data, config, settings, store, engine)
    scored = _score(begun, store, engine, config.progress)
    return _finish(begun, scored, settings, config, store, t0)


@dataclass(frozen=True)
class _Settings:
    """A run's settings: the config file's (``EvalConfig.file``) under the call's own.

    Attributes:
        file: the config file's contents (its ``source``, ``extra``, ``name``, ``map`` are read as given).
        thresholds: per-sample thresholds by metric key; ``rule``: the run's pass rule.
        entries: the metric entries to resolve (the file's, then the call's).
        options: the run options (a judge setting is checked when one is given).
    """

    file: dict[str, Any]
    thresholds: dict[str, Any]
    rule: Any
    entries: list[Any]
    options: dict[str, Any]

    @classmethod
    def of(cls, c: EvalConfig) -> _Settings:
        cfg = load_config(c.file)
        check_option_keys(cfg.get("options", {}), f"{cfg.get('source') or 'config'}: options")
        check_option_keys(c.options, "run options")  # a misspelt key would be ignored, the run done without it
        opts = {**cfg.get("options", {}), **c.options}
        if any(isinstance(opts.get(k), str) for k in FILE_OPTIONS):
            opts = resolve_options(opts)  # --option dag=FILE: the metric gets the parsed document
        if any(k == "judge" or k.startswith("judge_") for k in opts):
            from ragmeter.llm.config import check_judge_keys

            check_judge_keys(opts)  # an unknown judge setting is refused before anything is stored
        return cls(file=cfg,
                   thresholds={**th.parse_thresholds(cfg.get("thresholds")), **th.parse_thresholds(c.thresholds)},
                   rule=th.parse_rule(c.pass_rule if c.pass_rule is not None else cfg.get("pass_rule")),
                   entries=list(cfg.get("metrics") or []) + list(c.metrics), options=opts)


@dataclass
class _Begun:
    """A run stored (or taken over to resume) and planned, its engine's work started ahead.

    Attributes:
        done: the ``(sample id, metric key)`` pairs already stored (a resumed run's).
        options: the run options (a resumed run's stored ones under the call's).
    """

    run_id: str
    dataset: Dataset
    requests: list[MetricRequest]
    options: dict[str, Any]
    started: Started
    done: Collection[tuple[str, str]]
    resumed: bool


@dataclass
class _Scored:
    """What scoring left: the service figures, the time it took, the scores kept for the summary
    (``None``: a resumed run, summarised from the store) and the writes left to run."""

    extra: dict[str, Any]
    timings: RunTimings
    collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None
    deferred: list[Callable[[], Any]]


def _resume(data: Any, c: EvalConfig, s: _Settings, store: Store, engine: Engine) -> _Begun:
    """Take over a stored run (its lease) to finish it: the same dataset and metrics, the pairs
    it stored left out of the plans."""
    run_id = store.resolve_run(c.resume)
    run = store.get_run(run_id)
    stored = store.run_samples(run_id)
    dataset = load(data, mapping=c.mapping or s.file.get("map"), on_error=c.on_error) if data is not None else (
        Dataset(stored, run.dataset_source or ""))
    if data is not None:
        price_samples(dataset.samples)  # agent traces' LLM spans that recorded no cost (llm/span_prices.py)
    if data is not None and (c.per_span or run.config.get("per_span")):
        dataset = spans.expand_dataset(dataset)
    if data is None and len(stored) < run.n_samples:
        raise StoreError(f"cannot resume run {run_id} without its dataset: it stopped after storing {len(stored)} "
                         f"of its {run.n_samples} samples; give the dataset again ({run.dataset_source})")
    if dataset.fingerprint != run.dataset_fingerprint:
        raise StoreError(f"cannot resume run {run_id}: the dataset differs from the one it "
                         f"started with ({run.dataset_source})")
    requests = resolve_all([{"name": m["name"], "params": m["params"], "key": m["key"]}
                            for m in run.metrics])
    if s.entries and {r.key for r in resolve_all(s.entries)} != {r.key for r in requests}:
        raise ConfigError(f"run {run_id} was started with metrics "
                          f"{[r.key for r in requests]}; resume it without --metrics or with the same list")
    opts = {**run.config.get("options", {}), **s.options}
    if opts.get("panel"):
        from ragmeter.run.panel import wrap

        requests = wrap(requests, opts, engine=c.engine)
    done = store.scored_pairs(run_id)
    unavailable = _preflight(requests, opts, store, c.skip_unavailable, dataset.samples, done)
    if not store.acquire_lease(run_id):
        raise RunLeaseError(f"run {run_id} is still running (its writer {run.owner} beat "
                            f"{run.heartbeat_at:%H:%M:%S} UTC); resume it after that process ends")
    done = store.scored_pairs(run_id)
    if len(stored) < len(dataset.samples):  # a streamed run stopped before it stored every sample (run/stream.py)
        store.add_samples(run_id, dataset.samples[len(stored):], len(stored))
    # work started ahead starts before the lease's heartbeat thread
    started = engine.start(make_plans(dataset.samples, requests, done, unavailable), len(dataset.samples), opts)
    return _Begun(run_id, dataset, requests, opts, started, done, resumed=True)


def _create(data: Any, c: EvalConfig, s: _Settings, store: Store, engine: Engine) -> _Begun:
    """Load the dataset, resolve and check the metrics, start the engine's work ahead (it scores
    while this process stores the samples) and store the new run."""
    if not s.entries:
        raise ConfigError("no metrics given: pass metrics=[...] / --metrics, or a config "
                          "with 'metrics' (see `ragmeter metrics`)")
    if isinstance(data, str) and data.startswith("dataset:"):
        from ragmeter.io.stored import as_dataset

        data = as_dataset(store, data.removeprefix("dataset:"))
    dataset = load(data, mapping=c.mapping or s.file.get("map"), on_error=c.on_error)  # type: ignore[arg-type]
    price_samples(dataset.samples)  # agent traces' LLM spans that recorded no cost (llm/span_prices.py)
    if c.where:
        from ragmeter.io.stored import parse_where, select_where

        dataset = select_where(dataset, c.where if isinstance(c.where, Mapping) else parse_where(list(c.where)))
    if c.per_span:  # each trace's spans become rows linked to it (ragmeter.run.spans)
        dataset = spans.expand_dataset(dataset)
    requests = resolve_all(s.entries)
    if s.options.get("panel"):  # each judge metric computed by every judge of the panel (run/panel.py)
        from ragmeter.run.panel import wrap

        requests = wrap(requests, s.options, engine=c.engine)
    th.check_known(s.thresholds, [r.key for r in requests])
    th.check_in_range(s.thresholds, {r.key: declared_range(r.spec.range) for r in requests})
    _check_fields(dataset, requests)
    opts = s.options
    unavailable = _preflight(requests, opts, store, c.skip_unavailable, dataset.samples)
    started = engine.start(make_plans(dataset.samples, requests, set(), unavailable), len(dataset.samples), opts)
    try:
        run_id = store.create_run(
            dataset_source=dataset.source, fingerprint=dataset.fingerprint,
            samples=dataset.samples,
            metrics=[{"name": r.spec.name, "params": _jsonable(r.params), "key": r.key} for r in requests],
            config={"options": _jsonable(_public_options(opts)), "source": s.file.get("source"),
                    "extra": _jsonable(s.file.get("extra", {})), "provenance": provenance(),
                    **({"per_span": True} if c.per_span else {})},
            version=__version__, name=c.name or s.file.get("name"))
    except BaseException:
        started.cancel()
        raise
    return _Begun(run_id, dataset, requests, opts, started, set(), resumed=False)


def _score(begun: _Begun, store: Store, engine: Engine, progress: bool) -> _Scored:
    """Score the run's plans on ``engine`` while holding its lease (:func:`ragmeter.run.scoring.score_all`);
    a failure marks the run failed (when this process still holds it) and stops the work started ahead."""
    deferred: list[Callable[[], Any]] = []
    collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None = None if begun.resumed else {}
    with _rich_progress(progress) as prog:
        ctx = ScoringContext(begun.options, store=store, run_id=begun.run_id, progress=prog)
        try:
            with _heartbeat(store, begun.run_id):
                timings = score_all(ctx, store, begun.run_id, engine, begun.started, collected, deferred)
        except BaseException as exc:
            begun.started.cancel()
            if store.owns_lease(begun.run_id):  # never mark a run another process now writes
                # "pending": its judge batch is submitted (--no-wait), --resume collects it
                store.update_run(begun.run_id, status=getattr(exc, "run_status", "failed"), heartbeat_at=None)
            ctx.close()
            raise
        extra = ctx.stats()
        ctx.close()
    return _Scored(extra, timings, collected, deferred)


def _finish(begun: _Begun, scored: _Scored, s: _Settings, c: EvalConfig, store: Store, t0: float) -> EvaluationResult:
    """Summarise the run (thresholds checked), wait for its last writes and store it as completed
    or incomplete."""
    run_id, samples, requests, extra = begun.run_id, begun.dataset.samples, begun.requests, scored.extra
    # a new run holds exactly what this process scored (no other writer has its lease); a resumed
    # run also holds what earlier processes stored
    writes = scored.deferred[0] if scored.deferred else None
    writer = None
    collected = scored.collected
    if collected is None and writes is not None:  # a resumed run is summarised from the store
        _join_writer(_in_background(writes), store, run_id)
        writes = None
    if collected is None:
        collected = {k: [(list(t), ScoreColumn.of(list(t.values())))] for k, t in store.score_table(run_id).items()}
    scores = ScoreColumns(samples, {r.key: collected.get(r.key, []) for r in requests})
    if writes is not None:  # the worker's scores are written while the run is summarised
        writer = _in_background(writes)
    checks = {}
    if s.thresholds:
        extra["thresholds"] = th.record(s.thresholds, s.rule)
        higher = {r.key: r.spec.higher_is_better for r in requests}
        checks = th.apply(s.thresholds, s.rule, {k: scores.column(k).value_list() for k in scores}, higher)
    summary = summarise(scores.for_aggregate(), requests, samples, begun.options, checks)
    if begun.dataset.skipped:
        extra["skipped_rows"] = begun.dataset.skipped_summary()
    if writer is not None:
        _join_writer(writer, store, run_id)
    if begun.options.get("panel"):  # the judges' values, their agreement, self-preference
        from ragmeter.run.panel_record import finish as finish_panel

        extra.update(finish_panel(store, run_id, samples, requests, begun.options, extra.pop("judge_panel", None)))
    previous = store.get_run(run_id)
    total = time.perf_counter() - t0
    scored.timings.total_s = round(total + (previous.timings or {}).get("total_s", 0.0), 4)
    problems = incomplete_reasons(len(samples), summary, c.max_missing)
    status = "incomplete" if problems else "completed"
    run_extra = {k: v for k, v in (previous.extra or {}).items() if k != "incomplete"}
    if problems:
        extra["incomplete"] = problems
    store.finish_run(run_id, status=status, summary=summary, timings=scored.timings.to_dict(),
                     extra={**run_extra, **extra})
    return EvaluationResult(run_id=run_id, samples=samples, scores=scores, summary=summary,
                            extra=extra, store_url=store.url, status=status, incomplete=problems)


def _streamed(data: str | Path, c: EvalConfig, s: _Settings, requests: list[MetricRequest], store: Store
              ) -> EvaluationResult | None:
    """Evaluate a large file of plain rows a chunk at a time (:mod:`ragmeter.run.stream`); ``None``
    when it turns out to have no samples (the in-memory run then records that)."""
    from ragmeter.stats.intervals import Moments
    from ragmeter.store.columns import DATASET_NAMESPACE

    t0 = time.perf_counter()
    path = Path(data)
    scan = stream.Scan(path, c, s, requests)
    if scan.n == 0 or scan.first is None:
        return None
    dataset = scan.reader.dataset([], [], True)  # the columns and skipped rows, for errors and the record
    lacking = [r for r in requests if not scan.has_fields[r.key]]
    if lacking:  # no row gives any of a metric's fields: the error the in-memory run gives
        first, line = scan.first
        _check_fields(Dataset([first], dataset.source, dataset.skipped, dataset.columns, dataset.unused_columns,
                              [line]), lacking)
    opts = s.options
    run_id = store.create_run(
        dataset_source=dataset.source, fingerprint=scan.fingerprint, samples=(), n_samples=scan.n,
        metrics=[{"name": r.spec.name, "params": _jsonable(r.params), "key": r.key} for r in requests],
        config={"options": _jsonable(_public_options(opts)), "source": s.file.get("source"),
                "extra": _jsonable(s.file.get("extra", {})), "provenance": provenance()},
        version=__version__, name=c.name or s.file.get("name"))
    if scan.n > 20_000:  # what a large run's report shows of its data (as Store.create_run keeps it)
        store.kv_put(DATASET_NAMESPACE, run_id, scan.fields.result())
    moments = {r.key: Moments() for r in requests}  # each metric's running summary: no column of values
    extra: dict[str, Any] = {}
    with _rich_progress(c.progress) as prog:
        try:
            with _heartbeat(store, run_id):
                timings = stream.score_chunks(path, scan, requests, moments, store, run_id, lambda: ScoringContext(
                    opts, store=store, run_id=run_id, progress=prog), extra)
        except BaseException as exc:
            if store.owns_lease(run_id):
                store.update_run(run_id, status=getattr(exc, "run_status", "failed"), heartbeat_at=None)
            raise
    samples = stream.StoredSamples(store, run_id, scan.n)
    scores = stream.StoredColumns(store, run_id, samples, list(moments))
    summary = summarise(moments, requests, None, opts)
    if dataset.skipped:
        extra["skipped_rows"] = dataset.skipped_summary()
    timings.total_s = round(time.perf_counter() - t0, 4)
    problems = incomplete_reasons(scan.n, summary, c.max_missing)
    status = "incomplete" if problems else "completed"
    if problems:
        extra["incomplete"] = problems
    store.finish_run(run_id, status=status, summary=summary, timings=timings.to_dict(), extra=dict(extra))
    return EvaluationResult(run_id=run_id, samples=samples, scores=scores, summary=summary, extra=extra,
                            store_url=store.url, status=status, incomplete=problems)


def incomplete_reasons(n_samples: int, summary: RunSummary, max_missing: float | None = None) -> list[str]:
    """Why a finished run is incomplete (empty list: it is complete).

    A run is incomplete when it has no samples, when a metric has no value on any sample, or
    when a metric lacks a value on more than ``max_missing`` (a share, 0 to 1) of the samples.
    Each reason names the metric, the count and its most common missing-value reason.
    """
    if n_samples == 0:
        return ["no samples: the dataset is empty"]
    out = []
    for key, agg in summary.items():
        missing, has = agg.n_missing, agg.n
        total = missing + has
        if total == 0 and agg.extra.get("nothing_to_score"):  # a run scored per span (run/spans.py)
            out.append(f"{key}: {agg.extra['nothing_to_score']}")
            continue
        if total == 0 or (has > 0 and (max_missing is None or missing <= max_missing * total)):
            continue
        reasons = agg.missing_reasons
        top = max(reasons.items(), key=lambda kv: kv[1])[0] if reasons else None
        limit = "" if has == 0 else f", more than the {max_missing:.0%} allowed (max_missing)"
        out.append(f"{key}: no value on {missing} of {total} samples{limit}"
                   + (f" (e.g. {top})" if top else ""))
    return out


def _check_fields(dataset: Dataset, requests: list[MetricRequest]) -> None:
    """A metric none of whose fields any row gives is an input error (wrong column names), not a
    column of missing values; a row that lacks them among rows that have them is "no value"."""
    if not dataset.samples:
        return
    for r in requests:
        need = r.spec.requires
        if need and all(len(missing_fields(s, need)) == len(need) for s in dataset.samples):
            targets = list(dict.fromkeys(REQUIREMENT_TARGET.get(f, f) for f in need))
            cols = ", ".join(dataset.columns) or "none"
            raise DatasetError(
                f"{r.key} needs {', '.join(targets)} and no row has any of them (columns: {cols}); "
                f"try {dataset.map_hint(targets)}",
                file=dataset.source, line=dataset.lines[0] if dataset.lines else None)


def _preflight(requests: list[MetricRequest], opts: dict[str, Any], store: Store,
               skip_unavailable: bool, samples: Sequence[Sample] = (),
               done: Collection[tuple[str, str]] = ()) -> dict[str, str]:
    """Ask every metric whether it can run here, before any run is created or work is done. The
    judge gets its pre-flight request only when scoring ``samples`` will send it something."""
    from ragmeter.run.engines.judged import calls_needed

    ctx = ScoringContext(opts, store=store)
    try:
        if any(r.spec.needs_llm for r in requests) and opts.get("judge"):
            from ragmeter.llm.runtime import warm_judge

            warm_judge(opts)  # the client opens while the cache is looked up and the metrics checked
        if any(r.spec.needs_llm for r in requests) and not calls_needed(requests, samples, done, ctx):
            ctx.service("judge").nothing_to_send = True
        found = {r.key: msg for r in requests
                 if r.spec.check is not None and (msg := r.spec.check(ctx, **r.params))}
        if found and not skip_unavailable:
            raise ConfigError("cannot run:\n  " + "\n  ".join(f"{k}: {m}" for k, m in found.items())
                              + "\n(--skip-unavailable records no value for these and runs the rest)")
        judged = [r for r in requests if r.spec.needs_llm and r.key not in found]
        if judged:
            problem = _judge_preflight(ctx)
            if problem and not skip_unavailable:
                raise problem
            if problem:
                found.update({r.key: str(problem) for r in judged})
    finally:
        ctx.close()
    return found


def _judge_preflight(ctx: ScoringContext) -> JudgeError | ConfigError | None:
    """Ask the judge service to prove it can answer (reachable, key accepted, model known) with
    one small request, so a dead endpoint stops the run in seconds instead of after every
    sample's retries. Services without a ``preflight()`` are trusted as they are."""
    try:
        svc = ctx.service("judge")
        if getattr(getattr(svc, "cfg", None), "dry_run", False):
            return None
        preflight = getattr(svc, "preflight", None)
        if callable(preflight):
            preflight()
    except (JudgeError, ConfigError) as exc:
        return exc
    return None


def _public_options(opts: dict[str, Any]) -> dict[str, Any]:
    # API keys never reach the database: secret-named options are dropped, the rest redacted; a
    # permission (python graders) is this process's only: a resume must be given it again
    from ragmeter.core.config import GRANT_OPTIONS
    from ragmeter.core.redact import is_secret_name, redact_obj

    return redact_obj({k: v for k, v in opts.items() if not is_secret_name(k) and k not in GRANT_OPTIONS})


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))
