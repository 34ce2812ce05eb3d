"""The runner: load -> plan -> score -> aggregate -> store.

Scores are written to the store as each batch finishes, so an interrupted run keeps everything it
computed and ``resume`` finishes it without recomputing (and without storing any pair twice).
"""

from __future__ import annotations

import contextlib
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
    MetricError,
    RunLeaseError,
    StoreError,
)
from ragmeter.core.schema import Sample, Score, ScoreColumn, ScoreColumns
from ragmeter.io.readers import REQUIREMENT_TARGET, Dataset, load
from ragmeter.metrics.registry import MetricRequest, declared_range, missing_fields, resolve_all
from ragmeter.run.engines.base import Engine, LocalEngine
from ragmeter.run.engines.checks import run_metric
from ragmeter.run.engines.lifecycle import heartbeat as _heartbeat
from ragmeter.run.engines.lifecycle import in_background as _in_background
from ragmeter.run.engines.lifecycle import join_writer as _join_writer
from ragmeter.run.eval_config import EvalConfig
from ragmeter.run.plan import MetricPlan, Split, Started, make_plans
from ragmeter.run.provenance import provenance
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
        """A plotly figure (``pip install 'ragmeter-eval[report]'``): the distribution of one
        metric's per-sample values with its threshold marked, or, with no ``metric``, every
        metric's mean with its 95% interval."""
        import plotly.graph_objects as go

        if metric is None:
            shown = {k: m for k, m in self.summary.items() if m.mean is not None}
            keys, means = list(shown), [m.mean for m in shown.values()]
            err_hi = [m.ci_high - m.mean if m.ci_high is not None else 0 for m in shown.values()]
            err_lo = [m.mean - m.ci_low if m.ci_low is not None else 0 for m in shown.values()]
            return go.Figure(go.Bar(x=keys, y=means, error_y={"type": "data", "array": err_hi,
                                                              "arrayminus": err_lo}),
                             layout={"title": f"run {self.run_id}: means with 95% CI"})
        if metric not in self.scores:
            raise ConfigError(f"no metric {metric!r} in this result; it has {', '.join(self.scores)}")
        values = [s.value for s in self.scores[metric] if s.value is not None]
        fig = go.Figure(go.Histogram(x=values, nbinsx=20, name=metric),
                        layout={"title": f"{metric}: per-sample values (n={len(values)})",
                                "xaxis_title": metric, "yaxis_title": "samples"})
        rec = th.from_record(self.extra.get("thresholds"))[0].get(metric)
        if rec is not None:
            fig.add_vline(x=rec.value, line_dash="dash", annotation_text=f"threshold {rec.value:g}")
        return fig

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
    only the samples a metric applies to in a run of conversations, with the intervals of per-turn
    metrics clustered by conversation; the corpus scores a metric declares (``options``: the run's);
    and ``checks``, the threshold check of each thresholded metric
    (:func:`ragmeter.core.thresholds.apply`), stored as ``pass`` and ``pass_rate``.
    """
    from ragmeter.conversations import scope as conv_scope
    from ragmeter.metrics.registry import corpus_scores

    ranges = {r.key: r.spec.range for r in requests}
    families = {r.key: r.spec.family for r in requests}
    scoped = columns if samples is None else conv_scope.restrict(columns, families, samples)
    aggregates = aggregate_many(scoped, bounds=ranges)
    spec = {r.key: {"direction": "higher" if r.spec.higher_is_better else "lower", "family": r.spec.family,
                    "range": list(rng) if (rng := declared_range(r.spec.range)) is not None else None}
            for r in requests}
    record = RunSummary({k: MetricSummary.from_dict({**a, **spec.get(k, {})}) for k, a in aggregates.items()})
    if samples is None:
        return record
    clustered = conv_scope.cluster_intervals(record, columns, families, ranges, samples)
    corpus = corpus_scores(requests, samples, options)  # declared corpus scores (BLEU, chrF) beside the means
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


def run(data: Any, config: EvalConfig) -> EvaluationResult:
    """:func:`evaluate` with its :class:`~ragmeter.run.eval_config.EvalConfig` built: load, plan,
    score on the config's engine, aggregate, store. The interpreter's state (garbage collector,
    allocator) is left as it is: that policy belongs to the ``ragmeter`` command
    (:mod:`ragmeter.apps.cli.runtime`)."""
    c = config
    cfg = load_config(c.file)
    thr = {**th.parse_thresholds(cfg.get("thresholds")), **th.parse_thresholds(c.thresholds)}
    rule = th.parse_rule(c.pass_rule if c.pass_rule is not None else cfg.get("pass_rule"))
    entries = list(cfg.get("metrics") or []) + list(c.metrics)
    opts = {**cfg.get("options", {}), **c.options}
    if any(k == "judge" or k.startswith("judge_") for k in opts):
        from ragmeter.llm.config import check_judge_keys

        check_judge_keys(opts)  # an unknown judge setting is refused before anything is stored
    store = c.db if isinstance(c.db, Store) else open_store(c.db)
    t0 = time.perf_counter()
    if c.engine == "local":
        from ragmeter.run.engines.forked import start_method

        start_method()  # a bad RAGMETER_START_METHOD stops the run before any work
    engine: Engine = LocalEngine()
    if c.engine == "ray":
        from ragmeter.run.engines.ray_engine import RayEngine

        engine = RayEngine(c.ray_address, store.url)

    early: Started | None = None
    mapping, on_error = c.mapping or cfg.get("map"), c.on_error
    if c.resume:
        run_id = store.resolve_run(c.resume)
        run = store.get_run(run_id)
        stored = store.run_samples(run_id)
        dataset = load(data, mapping=mapping, on_error=on_error) if data is not None else Dataset(
            stored, run.dataset_source or "")
        if dataset.fingerprint != run.dataset_fingerprint:
            raise StoreError(f"cannot resume run {run_id}: the dataset differs from the one it "
                             f"started with ({run.dataset_source})")
        requests = resolve_all([{"name": m["name"], "params": m["params"], "key": m["key"]}
                                for m in run.metrics])
        if entries and {r.key for r in resolve_all(entries)} != {r.key for r in requests}:
            raise ConfigError(f"run {run_id} was started with metrics "
                              f"{[r.key for r in requests]}; resume it without --metrics or with the same list")
        opts = {**run.config.get("options", {}), **opts}
        done = store.scored_pairs(run_id)
        unavailable = _preflight(requests, opts, store, c.skip_unavailable, dataset.samples, done)
        if not store.acquire_lease(run_id):
            raise RunLeaseError(f"run {run_id} is still running (its writer {run.owner} beat "
                                f"{run.heartbeat_at:%H:%M:%S} UTC); resume it after that process ends")
        done = store.scored_pairs(run_id)
        if c.engine == "local":  # the worker starts before the lease's heartbeat thread
            early = _start_worker(make_plans(dataset.samples, requests, done, unavailable),
                                  len(dataset.samples), opts)
    else:
        if not entries:
            raise ConfigError("no metrics given: pass metrics=[...] / --metrics, or a config "
                              "with 'metrics' (see `ragmeter metrics`)")
        if isinstance(data, str) and data.startswith("dataset:"):
            from ragmeter.io.stored import as_dataset

            data = as_dataset(store, data.removeprefix("dataset:"))
        dataset = load(data, mapping=mapping, on_error=on_error)  # type: ignore[arg-type]
        if c.where:
            from ragmeter.io.stored import parse_where, select_where

            dataset = select_where(dataset, c.where if isinstance(c.where, Mapping) else parse_where(list(c.where)))
        requests = resolve_all(entries)
        th.check_known(thr, [r.key for r in requests])
        _check_fields(dataset, requests)
        unavailable = _preflight(requests, opts, store, c.skip_unavailable, dataset.samples)
        if c.engine == "local":  # the worker scores while this process stores the samples
            early = _start_worker(make_plans(dataset.samples, requests, set(), unavailable),
                                  len(dataset.samples), opts)
        try:
            run_id = store.create_run(
                dataset_source=dataset.source, fingerprint=dataset.fingerprint,
                samples=dataset.samples,
                metrics=[{"name": r.spec.name, "params": _jsonable(r.params), "key": r.key} for r in requests],
                config={"options": _jsonable(_public_options(opts)), "source": cfg.get("source"),
                        "extra": _jsonable(cfg.get("extra", {})), "provenance": provenance()},
                version=__version__, name=c.name or cfg.get("name"))
        except BaseException:
            if early is not None:
                early.cancel()
            raise
        done = set()

    samples = dataset.samples
    deferred: list[Callable[[], Any]] = []
    collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None = None if c.resume else {}
    with _rich_progress(c.progress) as prog:
        ctx = ScoringContext(opts, store=store, run_id=run_id, progress=prog)
        try:
            with _heartbeat(store, run_id):
                timings = _score_all(ctx, store, run_id, engine, early or Started(
                    make_plans(samples, requests, done, unavailable), {}), collected, deferred)
        except BaseException:
            if early is not None:
                early.cancel()
            if store.owns_lease(run_id):  # never mark a run another process now writes
                store.update_run(run_id, status="failed", heartbeat_at=None)
            ctx.close()
            raise
        extra = ctx.stats()
        ctx.close()

    # a new run holds exactly what this process scored (no other writer has its lease); a resumed
    # run also holds what earlier processes stored
    writes = deferred[0] if deferred else None
    writer = None
    if collected is None and writes is not None:  # a resumed run is summarised from the store
        _join_writer(_in_background(writes), store, run_id)
        writes = None
    if collected is None:
        collected = {k: [(list(t), ScoreColumn.of(list(t.values())))] for k, t in store.score_table(run_id).items()}
    scores = ScoreColumns(samples, {r.key: collected.get(r.key, []) for r in requests})
    if writes is not None:  # the worker's scores are written while the run is summarised
        writer = _in_background(writes)
    checks = {}
    if thr:
        extra["thresholds"] = th.record(thr, rule)
        higher = {r.key: r.spec.higher_is_better for r in requests}
        checks = th.apply(thr, rule, {k: scores.column(k).value_list() for k in scores}, higher)
    summary = summarise(scores.for_aggregate(), requests, samples, opts, checks)
    if dataset.skipped:
        extra["skipped_rows"] = dataset.skipped_summary()
    if writer is not None:
        _join_writer(writer, store, run_id)
    previous = store.get_run(run_id)
    total = time.perf_counter() - t0
    timings["total_s"] = round(total + (previous.timings or {}).get("total_s", 0.0), 4)
    problems = incomplete_reasons(len(samples), summary, c.max_missing)
    status = "incomplete" if problems else "completed"
    run_extra = {k: v for k, v in (previous.extra or {}).items() if k != "incomplete"}
    if problems:
        extra["incomplete"] = problems
    store.finish_run(run_id, status=status, summary=summary, timings=timings, extra={**run_extra, **extra})
    return EvaluationResult(run_id=run_id, samples=samples, scores=scores, summary=summary,
                            extra=extra, store_url=store.url, status=status, incomplete=problems)


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


#: share of each pure metric's samples this process scores when a second process takes the rest: this
#: process also stores the run's samples and every score, so it takes less (30,000 RAG pairs x 5 lexical
#: metrics: both processes finish together at 0.38)
MAIN_SHARE = 0.38


def _start_worker(plans: list[MetricPlan], n_samples: int, options: dict[str, Any]) -> Started:
    """The run's plans, with a second process started on the tail of each pure metric's samples
    (engines/forked.py) when there is a second CPU and enough work. Values of pure metrics do not
    depend on how the samples are cut or batched, so the split is by :data:`MAIN_SHARE`."""
    from ragmeter.run.engines import forked

    started = Started(plans, {})
    if not forked.usable(n_samples):
        return started
    method = forked.start_method()
    splits: dict[str, Split] = {}
    for p in plans:
        if (forked.is_pure(p.request) and not p.unavailable and len(p.eligible) >= forked.MIN_SAMPLES
                and (method != "spawn" or forked.spawnable(p.request))):
            cut = round(len(p.eligible) * MAIN_SHARE)
            splits[p.key] = Split(p.eligible[:cut], p.eligible[cut:])
    if not splits or not forked.claim():  # no work for it, or another run's worker is running
        return started
    if method == "fork":
        # one sample through each metric first: the imports and caches a metric makes on its first call
        # (Arrow, the stemmer, compiled expressions) are then made once, before the fork, and shared
        warm = ScoringContext(dict(options))
        try:
            for p in plans:
                if p.key in splits:
                    with contextlib.suppress(ConfigError, MetricError):
                        run_metric(p.request, p.eligible[:1], warm)
        except BaseException:
            forked.release()
            raise
        finally:
            warm.close()
    jobs = []
    for p in plans:
        if p.key in splits:
            rest, bs = splits[p.key].worker, max(1, p.request.spec.batch_size)
            jobs.append((p.request, [rest[i:i + bs] for i in range(0, len(rest), bs)]))
    started.splits = splits
    started.worker = forked.WorkerEngine(jobs, dict(options), run_metric)  # releases the slot on failure
    return started


def _score_all(ctx: ScoringContext, store: Store, run_id: str, engine: Engine, started: Started,
               collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None,
               deferred: list[Callable[[], Any]]) -> dict[str, Any]:
    """Score every plan of ``started`` and store the scores (``started.worker``: a second process
    already scoring its share); the writing of the worker's scores goes to ``deferred`` for the
    caller to run later when no judge stage follows (else they are written here)."""
    timings: dict[str, Any] = {"metrics": {}}

    def put(key: str, ids: list[str], scores: list[Score] | ScoreColumn) -> None:
        col = ScoreColumn.of(scores)
        store.add_scores(run_id, key, ids, col)
        if collected is not None:
            collected.setdefault(key, []).append((ids, col))

    # metrics without a judge are scored and stored first, before the first judge call is made
    judged = [p for p in started.plans if p.needs_llm]
    plans = [p for p in started.plans if not p.needs_llm]
    if engine.name == "ray":  # embeddings encoded and judge calls sent on the cluster too
        from ragmeter.run.engines.ray_embed import attach

        attach(ctx, getattr(engine, "address", None))
    t = time.perf_counter()
    _prepare(plans, ctx)
    ctx.flush()
    timings["prepare_s"] = round(time.perf_counter() - t, 4)

    if engine.name == "ray":
        plans = _ray_pure_together(plans, ctx, put, engine, timings)
    # a second process scores the tail of each pure metric's samples (engines/forked.py)
    splits, worker = started.splits, started.worker
    local = LocalEngine()
    try:
        advancers: dict[str, Callable[[int], None]] = {}
        _score_plans(plans, ctx, put, engine, local, timings, splits, advancers)
        if worker is not None:
            t = time.perf_counter()
            worker.collect()
            timings["worker_wait_s"] = round(time.perf_counter() - t, 4)
            writes = []
            for p in plans:
                for batch in worker.run(p, ctx):
                    ids = [s.id for s in batch.samples]
                    if collected is not None:
                        collected.setdefault(p.key, []).append((ids, batch.scores))
                    writes.append((p.key, ids, batch.scores))
                    advancers[p.key](len(batch.samples))
            worker = None
            # the worker's scores go to the store on a thread while the corpus scores are computed
            # (SQLite and numpy release the GIL); the run is finished only after they are written.
            # Before a judge stage they are written at once: nothing computed waits on the judge
            if not judged:
                deferred.append(lambda: [store.add_scores(run_id, *w) for w in writes])
            else:
                for w in writes:
                    store.add_scores(run_id, *w)
    finally:
        if worker is not None:
            worker.close()
    if judged:
        from ragmeter.run.engines.judged import stream_scores

        t = time.perf_counter()
        _prepare(judged, ctx)
        # per-sample judge metrics are stored as their verdicts arrive (engines/judged.py)
        streamed = stream_scores(judged, ctx, put, run_metric, advancers)
        ctx.flush()
        timings["judge_s"] = round(time.perf_counter() - t, 4)
        judged = [MetricPlan(p.request, [s for s in p.eligible if s.id not in streamed.get(p.key, ())],
                             p.lacking, p.unavailable) for p in judged]
        _score_plans(judged, ctx, put, local, local, timings, {}, advancers)  # judge metrics stay here
    return timings


def _prepare(plans: list[MetricPlan], ctx: ScoringContext) -> None:
    for p in plans:
        if p.eligible and not p.unavailable and p.request.spec.prepare is not None:
            p.request.spec.prepare(p.eligible, ctx, **p.request.params)


def _ray_pure_together(plans: list[MetricPlan], ctx: ScoringContext, put: Callable[[str, list[str], Any], None],
                       engine: Any, timings: dict[str, Any]) -> list[MetricPlan]:
    """On Ray, the pure metrics (engines/forked.py) that score the same samples go to the workers
    together, one task per block for all of them; returns the plans left for metric-by-metric work."""
    from ragmeter.run.engines import forked

    group = [p for p in plans if forked.is_pure(p.request) and not p.unavailable and p.eligible]
    if len(group) < 2:
        return plans
    first = group[0].eligible
    group = [p for p in group if len(p.eligible) == len(first)
             and all(a is b for a, b in zip(p.eligible, first, strict=True))]
    if len(group) < 2:
        return plans
    t = time.perf_counter()
    for p in group:
        if p.lacking:
            put(p.key, [s.id for s, _ in p.lacking], [Score.missing(r) for _, r in p.lacking])
    advance = ctx.progress(", ".join(p.key for p in group), len(first))
    for block, per_metric in engine.run_together(group, ctx):
        ids = [s.id for s in block]
        for p, scores in zip(group, per_metric, strict=True):
            put(p.key, ids, scores)
        advance(len(block))
    spent = round(time.perf_counter() - t, 4)
    for p in group:
        timings["metrics"][p.key] = spent
    keys = {p.key for p in group}
    return [p for p in plans if p.key not in keys]


def _score_plans(plans: list[MetricPlan], ctx: ScoringContext, put: Callable[[str, list[str], Any], None],
                 engine: Engine, local: Engine, timings: dict[str, Any], splits: Mapping[str, Split],
                 advancers: dict[str, Callable[[int], None]]) -> None:
    """Each plan on ``engine`` (judge metrics on ``local``, this process); of a split metric, this
    process scores its ``here`` share (the worker's share is collected by the caller)."""
    for p in plans:
        rest = 0
        if p.key in splits:
            p, rest = MetricPlan(p.request, splits[p.key].here, p.lacking, p.unavailable), len(splits[p.key].worker)
        t = time.perf_counter()
        if p.lacking:
            put(p.key, [s.id for s, _ in p.lacking], [Score.missing(r) for _, r in p.lacking])
        if p.unavailable:
            put(p.key, [s.id for s in p.eligible], [Score.missing(f"unavailable: {p.unavailable}")] * len(p.eligible))
            continue
        advance = advancers.get(p.key) or advancers.setdefault(p.key, ctx.progress(p.key, len(p.eligible) + rest))
        on = local if p.needs_llm or not p.eligible else engine  # nothing to send: no remote work
        for batch in on.run(p, ctx):
            put(p.key, [s.id for s in batch.samples], batch.scores)
            advance(len(batch.samples))
        timings["metrics"][p.key] = round(time.perf_counter() - t, 4)
