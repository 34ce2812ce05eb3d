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
from ragmeter.metrics.registry import MetricRequest, missing_fields, resolve_all
from ragmeter.run.engines.checks import checked_column, checked_scores
from ragmeter.run.engines.lifecycle import gc_paused as _gc_paused
from ragmeter.run.engines.lifecycle import heartbeat as _heartbeat
from ragmeter.run.engines.lifecycle import in_background as _in_background
from ragmeter.run.engines.lifecycle import join_writer as _join_writer
from ragmeter.run.provenance import provenance
from ragmeter.stats.intervals import aggregate_many
from ragmeter.store import Store, open_store


@dataclass
class EvaluationResult:
    """What a run produced.

    Attributes:
        run_id: id of the run in the store.
        samples: the evaluated samples, in dataset order.
        scores: ``{metric_key: [Score per sample]}`` aligned with ``samples``.
        summary: ``{metric_key: aggregate}`` (mean, n, n_missing, missing_reasons, ci_low, ci_high ...).
        extra: service figures (embeddings computed/cached, judge calls and cost) and skipped rows.
        status: ``"completed"`` (every metric has values) or ``"incomplete"`` (no samples, or a
            metric without a value on more samples than ``max_missing`` allows).
        incomplete: why the run is incomplete, one line per problem (empty when completed).
    """

    run_id: str
    samples: list[Sample]
    scores: Mapping[str, list[Score]]
    summary: dict[str, dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)
    store_url: str | None = None
    status: str = "completed"
    incomplete: list[str] = field(default_factory=list)

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
        return self.summary[metric]["mean"]

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
        """Per-sample dicts: ``id``, ``question``, ``answer``, ``reference``, ``contexts``,
        ``context_ids``, one key per metric (``None`` = no value), ``METRIC__pass`` for thresholded
        metrics, ``no_value_reasons`` and ``judge`` (verdict summaries)."""
        from ragmeter.run.rows import result_rows

        higher = {k: v.get("direction", "higher") == "higher" for k, v in self.summary.items()}
        return result_rows(self.samples, self.scores, higher, self.extra.get("thresholds"))

    @property
    def passed(self) -> bool | None:
        """Whether every thresholded metric passed its run rule (``None`` without thresholds)."""
        checks = [s["pass"]["ok"] for s in self.summary.values() if "pass" in s]
        return all(checks) if checks else None

    def figure(self, metric: str | None = None) -> Any:
        """A plotly figure (``pip install 'ragmeter-eval[report]'``): the distribution of one
        metric's per-sample values with its threshold marked, or, with no ``metric``, every
        metric's mean with its 95% interval."""
        import plotly.graph_objects as go

        if metric is None:
            keys = [k for k, s in self.summary.items() if s.get("mean") is not None]
            means = [self.summary[k]["mean"] for k in keys]
            err_hi = [self.summary[k]["ci_high"] - m if self.summary[k].get("ci_high") is not None else 0
                      for k, m in zip(keys, means, strict=True)]
            err_lo = [m - self.summary[k]["ci_low"] if self.summary[k].get("ci_low") is not None else 0
                      for k, m in zip(keys, means, strict=True)]
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
        return {"run_id": self.run_id, "status": self.status, "incomplete": self.incomplete,
                "n_samples": len(self.samples), "metrics": self.summary, **self.extra}


ProgressFactory = Callable[[str, int], Callable[[int], None]]


@contextmanager
def _rich_progress(enabled: bool) -> Iterator[ProgressFactory]:
    if not enabled:
        yield lambda desc, total: (lambda n: None)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=False) as prog:
        def factory(desc: str, total: int) -> Callable[[int], None]:
            task = prog.add_task(desc, total=total)
            return lambda n: prog.advance(task, n)

        yield factory


def summarise(columns: Mapping[str, Any], requests: Sequence[MetricRequest]) -> dict[str, dict[str, Any]]:
    """A run's summary (:func:`ragmeter.stats.aggregate_many`), each interval within its metric's ``range``."""
    summary = aggregate_many(columns, bounds={r.key: r.spec.range for r in requests})
    for r in requests:
        summary[r.key].update(direction="higher" if r.spec.higher_is_better else "lower", family=r.spec.family,
                              range=[float(r.spec.range[0]), float(r.spec.range[1])])
    return summary


def evaluate(data: Any, metrics: Sequence[str | dict[str, Any]] | None = None, *,
             config: str | Path | dict[str, Any] | None = None,
             max_missing: float | None = None,
             mapping: Mapping[str, str] | Sequence[str] | None = None,
             on_error: str = "raise", db: str | Store | None = None, resume: str | None = None,
             name: str | None = None, options: dict[str, Any] | None = None,
             progress: bool = False, skip_unavailable: bool = False,
             where: Mapping[str, str] | Sequence[str] | None = None,
             engine: str = "local", ray_address: str | None = None,
             thresholds: Mapping[str, Any] | Sequence[str] | None = None,
             pass_rule: Any = None) -> EvaluationResult:
    """Score every sample of ``data`` with every metric and store the run.

    Args:
        data: anything :func:`ragmeter.load` accepts (path, ``"example"``, pandas DataFrame,
            ``datasets.Dataset``, an iterable of dicts, a list of Samples).
        metrics: metric names (``"rouge1_fmeasure"``, ``"ndcg@10"``) or ``{"name", "params"}``
            mappings. Added to the config file's metrics, if any.
        config: a config file path or mapping (``metrics``/``metric_types``, ``options`` ...).
        max_missing: the share of samples (0 to 1) a metric may lack a value on before the run
            counts as incomplete. Default: a run is incomplete only when a metric has no value on
            any sample (or there are no samples); ``0.2`` also flags a metric missing on more than
            20% of the samples.
        mapping: ``{field: column}`` for columns the aliases do not cover.
        on_error: ``"raise"`` or ``"skip"`` bad dataset rows.
        db: a store, or a SQLAlchemy URL (default ``$RAGMETER_DB`` or ``.ragmeter/ragmeter.db``).
        resume: a run id to finish; only pairs not yet stored are computed.
        name: a name for the run.
        options: run-wide options passed to metrics (``embedding_model``, ``judge`` ...).
        progress: show progress bars on stderr.
        skip_unavailable: when a metric cannot run here (no judge configured ...), record no value
            for it and go on instead of failing before any work.
        where: keep only samples whose metadata match, e.g. ``{"type": "multi_hop"}`` or
            ``["type=multi_hop"]``.
        engine: ``"local"`` (this process) or ``"ray"``: metrics scored in blocks, embeddings encoded
            and judge calls sent (under one limit and budget) on a Ray runtime
            (:mod:`ragmeter.run.engines.ray_engine`, ``ray_embed``, ``ray_judge``), same values, same
            store, caches and resume.
        ray_address: ``ray://HOST:PORT`` of a Ray cluster (default: a local Ray runtime).
        thresholds: per-metric thresholds, ``{"token_f1": 0.3, "hallucination": "<=0.2"}`` or
            ``["faithfulness=0.7"]``; stored in ``Run.extra["thresholds"]`` (pass/fail is derived
            from value + threshold by :func:`ragmeter.core.thresholds.passes`, never stored per score).
        pass_rule: when a thresholded metric passes for the run: ``"all"`` samples (default) or a
            pass-rate target its Wilson lower bound must reach (``0.8``).

    ``data`` may also be ``"dataset:NAME"`` (or ``NAME@VERSION``, ``NAME@TAG``): a dataset stored
    by ``ragmeter golden generate`` / ``ragmeter dataset``.

    Returns:
        An :class:`EvaluationResult`. An incomplete run is stored with status ``incomplete`` and
        returned like any other (``result.status``, ``result.incomplete`` say why);
        ``result.raise_for_status()`` turns it into an :class:`~ragmeter.core.errors.IncompleteRunError`.

    Raises:
        DatasetError: a bad row (with ``on_error="raise"``), or a row that gives none of the
            fields a requested metric needs (listing the columns found and a ``--map`` to use).
        ConfigError: unknown metric names (listing the closest), unavailable metrics, a bad
            ``max_missing``.
        JudgeError: the judge did not answer its pre-flight request (unreachable, key refused,
            unknown model); raised before any run is stored.
    """
    with _gc_paused():
        return _evaluate(data, metrics, config=config, max_missing=max_missing, mapping=mapping,
                         on_error=on_error, db=db, resume=resume, name=name, options=options,
                         progress=progress, skip_unavailable=skip_unavailable, where=where, engine=engine,
                         ray_address=ray_address, thresholds=thresholds, pass_rule=pass_rule)


def _evaluate(data: Any, metrics: Sequence[str | dict[str, Any]] | None, *,
              config: str | Path | dict[str, Any] | None, max_missing: float | None,
              mapping: Mapping[str, str] | Sequence[str] | None, on_error: str, db: str | Store | None,
              resume: str | None, name: str | None, options: dict[str, Any] | None, progress: bool,
              skip_unavailable: bool, where: Mapping[str, str] | Sequence[str] | None, engine: str,
              ray_address: str | None, thresholds: Mapping[str, Any] | Sequence[str] | None,
              pass_rule: Any) -> EvaluationResult:
    if max_missing is not None and not (isinstance(max_missing, int | float) and 0 <= max_missing <= 1):
        raise ConfigError(f"max_missing must be a share of the samples between 0 and 1, got {max_missing!r}")
    cfg = load_config(config)
    thr = {**th.parse_thresholds(cfg.get("thresholds")), **th.parse_thresholds(thresholds)}
    rule = th.parse_rule(pass_rule if pass_rule is not None else cfg.get("pass_rule"))
    entries = list(cfg.get("metrics") or []) + list(metrics or [])
    opts = {**cfg.get("options", {}), **(options or {})}
    store = db if isinstance(db, Store) else open_store(db)
    t0 = time.perf_counter()
    if engine not in {"local", "ray"}:
        raise ConfigError(f"unknown engine {engine!r}: use local or ray")
    if engine == "ray":
        from ragmeter.run.engines.ray_engine import init

        init(ray_address)

    early: tuple[list[Plan], dict[str, tuple[list[Sample], list[Sample]]], Any] | None = None
    if resume:
        run_id = store.resolve_run(resume)
        run = store.get_run(run_id)
        stored = store.run_samples(run_id)
        dataset = load(data, mapping=mapping or cfg.get("map"),
                       on_error=on_error) if data is not None else Dataset(stored, run.dataset_source or "")
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
        unavailable = _preflight(requests, opts, store, skip_unavailable, dataset.samples, done)
        if not store.acquire_lease(run_id):
            raise RunLeaseError(f"run {run_id} is still running (its writer {run.owner} beat "
                                f"{run.heartbeat_at:%H:%M:%S} UTC); resume it after that process ends")
        done = store.scored_pairs(run_id)
    else:
        if not entries:
            raise ConfigError("no metrics given: pass metrics=[...] / --metrics, or a config "
                              "with 'metrics' (see `ragmeter metrics`)")
        if isinstance(data, str) and data.startswith("dataset:"):
            from ragmeter.io.stored import as_dataset

            data = as_dataset(store, data.removeprefix("dataset:"))
        dataset = load(data, mapping=mapping or cfg.get("map"), on_error=on_error)  # type: ignore[arg-type]
        if where:
            from ragmeter.io.stored import parse_where, select_where

            dataset = select_where(dataset, where if isinstance(where, Mapping) else parse_where(list(where)))
        requests = resolve_all(entries)
        th.check_known(thr, [r.key for r in requests])
        _check_fields(dataset, requests)
        unavailable = _preflight(requests, opts, store, skip_unavailable, dataset.samples)
        if engine == "local":  # the worker scores while this process stores the samples
            plans = _plan(dataset.samples, requests, set(), unavailable)
            early = (plans, *_fork_second(plans, len(dataset.samples), opts))
        try:
            run_id = store.create_run(
                dataset_source=dataset.source, fingerprint=dataset.fingerprint,
                samples=dataset.samples,
                metrics=[{"name": r.spec.name, "params": _jsonable(r.params), "key": r.key} for r in requests],
                config={"options": _jsonable(_public_options(opts)), "source": cfg.get("source"),
                        "extra": _jsonable(cfg.get("extra", {})), "provenance": provenance()},
                version=__version__, name=name or cfg.get("name"))
        except BaseException:
            if early is not None and early[2] is not None:
                early[2].cancel()
            raise
        done = set()

    samples = dataset.samples
    deferred: list[Callable[[], Any]] = []
    collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None = None if resume else {}
    with _rich_progress(progress) as prog:
        ctx = ScoringContext(opts, store=store, run_id=run_id, progress=prog)
        try:
            with _heartbeat(store, run_id):
                timings = _score_all(samples, requests, ctx, store, run_id, done, unavailable,
                                     engine=(engine, ray_address), collected=collected, early=early,
                                     deferred=deferred)
        except BaseException:
            if early is not None and early[2] is not None:
                early[2].cancel()
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
    from ragmeter.conversations import scope as conv_scope

    families = {r.key: r.spec.family for r in requests}
    summary = summarise(conv_scope.restrict(scores.for_aggregate(), families, samples), requests)
    conv_scope.cluster_intervals(summary, scores.for_aggregate(), families,
                                 {r.key: r.spec.range for r in requests}, samples)
    from ragmeter.metrics.registry import add_corpus_scores

    if writes is not None:
        writer = _in_background(writes)
    add_corpus_scores(summary, requests, samples, opts)  # declared corpus scores (BLEU, chrF) beside the means
    if thr:
        extra["thresholds"] = th.record(thr, rule)
        higher = {r.key: r.spec.higher_is_better for r in requests}
        applied = th.apply(thr, rule, {k: scores.column(k).value_list() for k in scores}, higher)
        for k, rec in applied.items():
            summary[k]["pass"] = {kk: vv for kk, vv in rec.items() if kk != "verdicts"}
            summary[k]["pass_rate"] = rec["rate"]  # the share of samples that pass (also pass.rate)
    if dataset.skipped:
        extra["skipped_rows"] = dataset.skipped_summary()
    if writer is not None:
        _join_writer(writer, store, run_id)
    previous = store.get_run(run_id)
    total = time.perf_counter() - t0
    timings["total_s"] = round(total + (previous.timings or {}).get("total_s", 0.0), 4)
    problems = incomplete_reasons(len(samples), summary, max_missing)
    status = "incomplete" if problems else "completed"
    run_extra = {k: v for k, v in (previous.extra or {}).items() if k != "incomplete"}
    if problems:
        extra["incomplete"] = problems
    store.finish_run(run_id, status=status, summary=summary, timings=timings,
                     extra={**run_extra, **extra})
    return EvaluationResult(run_id=run_id, samples=samples, scores=scores, summary=summary,
                            extra=extra, store_url=store.url, status=status, incomplete=problems)


def incomplete_reasons(n_samples: int, summary: Mapping[str, Mapping[str, Any]],
                       max_missing: float | None = None) -> list[str]:
    """Why a finished run is incomplete (empty list: it is complete).

    A run is incomplete when it has no samples, when a metric has no value on any sample, or
    when a metric lacks a value on more than ``max_missing`` (a share, 0 to 1) of the samples.
    Each reason names the metric, the count and its most common missing-value reason.
    """
    if n_samples == 0:
        return ["no samples: the dataset is empty"]
    out = []
    for key, agg in summary.items():
        missing = int(agg.get("n_missing") or 0)
        has = int(agg.get("n") or 0)
        total = missing + has
        if total == 0 or (has > 0 and (max_missing is None or missing <= max_missing * total)):
            continue
        reasons = agg.get("missing_reasons") or {}
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
    # API keys never reach the database: secret-named options are dropped, the rest redacted
    from ragmeter.core.redact import is_secret_name, redact_obj

    return redact_obj({k: v for k, v in opts.items() if not is_secret_name(k)})


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


Plan = tuple[MetricRequest, list[Sample], list[tuple[Sample, str]], str | None]
#: share of each pure metric's samples this process scores when a forked worker takes the rest: this
#: process also stores the run's samples and every score, so it takes less (30,000 RAG pairs x 5 lexical
#: metrics: both processes finish together at 0.38)
MAIN_SHARE = 0.38


def _plan(samples: list[Sample], requests: list[MetricRequest], done: set[tuple[str, str]],
          unavailable_by_key: dict[str, str]) -> list[Plan]:
    """Per metric: (request, samples to score, samples lacking a field and why, why it is unavailable)."""
    from ragmeter.conversations.scope import FAMILY, for_metric

    plans: list[Plan] = []
    lacks: dict[tuple[tuple[str, ...], bool], tuple[list[Sample], dict[int, str]]] = {}  # same fields
    everything = samples
    pools: dict[bool, list[Sample]] = {}
    for req in requests:
        # a conversation run: conversation metrics score conversations, the others assistant turns
        kind = req.spec.family == FAMILY
        if kind not in pools:
            pools[kind] = for_metric(FAMILY if kind else "", everything)
        samples = pools[kind]
        need = tuple(req.spec.requires)
        cache = (need, req.spec.family == FAMILY)
        if cache not in lacks:
            why = {}
            for i, s in enumerate(samples):
                miss = missing_fields(s, need)
                if miss:
                    why[i] = "missing field: " + ", ".join(miss)
            lacks[cache] = ([s for i, s in enumerate(samples) if i not in why] if why else samples, why)
        ok, why = lacks[cache]
        if done:
            ok = [s for s in ok if (s.id, req.key) not in done]
            lacking = [(samples[i], r) for i, r in why.items() if (samples[i].id, req.key) not in done]
        else:
            lacking = [(samples[i], r) for i, r in why.items()]
        if not ok and not lacking:
            continue
        plans.append((req, ok, lacking, unavailable_by_key.get(req.key)))
    return plans


def _fork_second(plans: list[Plan], n_samples: int, options: dict[str, Any]
                 ) -> tuple[dict[str, tuple[list[Sample], list[Sample]]], Any]:
    """Start a forked worker on the tail of each pure metric's samples (engines/forked.py): ``(halves,
    worker)``, ``({}, None)`` when there is no second CPU or too little work. Values of pure metrics do
    not depend on how the samples are cut or batched, so the split is by :data:`MAIN_SHARE`."""
    from ragmeter.run.engines import forked

    halves: dict[str, tuple[list[Sample], list[Sample]]] = {}
    if not forked.usable(n_samples):
        return halves, None
    for req, eligible, _lacking, unavailable in plans:
        if forked.is_pure(req) and not unavailable and len(eligible) >= forked.MIN_SAMPLES:
            cut = round(len(eligible) * MAIN_SHARE)
            halves[req.key] = (eligible[:cut], eligible[cut:])
    if not halves or not forked.claim():  # no work for it, or another run's worker is running
        return {}, None
    # one sample through each metric first: the imports and caches a metric makes on its first call
    # (Arrow, the stemmer, compiled expressions) are then made once, before the fork, and shared
    warm = ScoringContext(dict(options))
    try:
        for req, eligible, *_ in plans:
            if req.key in halves:
                with contextlib.suppress(ConfigError, MetricError):
                    _run_metric(req, eligible[:1], warm)
    except BaseException:
        forked.release()
        raise
    finally:
        warm.close()
    jobs = [(req, [halves[req.key][1][i:i + max(1, req.spec.batch_size)]
                   for i in range(0, len(halves[req.key][1]), max(1, req.spec.batch_size))])
            for req, *_ in plans if req.key in halves]
    return halves, forked.SecondHalf(jobs, dict(options), _run_metric)  # releases the slot on failure


def _score_all(samples: list[Sample], requests: list[MetricRequest], ctx: ScoringContext,
               store: Store, run_id: str, done: set[tuple[str, str]],
               unavailable_by_key: dict[str, str],
               engine: tuple[str, str | None] = ("local", None),
               collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None = None,
               early: tuple[list[Plan], dict[str, tuple[list[Sample], list[Sample]]], Any] | None = None,
               deferred: list[Callable[[], Any]] | None = None) -> dict[str, Any]:
    """Score every plan and store the scores; ``early``: plans and a worker already started (a new
    local run forks its worker before it stores the samples); ``deferred``: where to put the writing
    of the worker's scores for the caller to run later (else they are written here)."""
    timings: dict[str, Any] = {"metrics": {}}
    plans = early[0] if early is not None else _plan(samples, requests, done, unavailable_by_key)

    def put(key: str, ids: list[str], scores: list[Score] | ScoreColumn) -> None:
        col = ScoreColumn.of(scores)
        store.add_scores(run_id, key, ids, col)
        if collected is not None:
            collected.setdefault(key, []).append((ids, col))

    # metrics without a judge are scored and stored first, before the first judge call is made
    judged = [p for p in plans if p[0].spec.needs_llm]
    plans = [p for p in plans if not p[0].spec.needs_llm]
    if engine[0] == "ray":  # embeddings encoded and judge calls sent on the cluster too
        from ragmeter.run.engines.ray_embed import attach

        attach(ctx, engine[1])
    t = time.perf_counter()
    _prepare(plans, ctx)
    ctx.flush()
    timings["prepare_s"] = round(time.perf_counter() - t, 4)

    if engine[0] == "ray":
        plans = _ray_pure_together(plans, ctx, put, engine[1], timings)
    # a second process scores the tail of each pure metric's samples (engines/forked.py)
    halves: dict[str, tuple[list[Sample], list[Sample]]] = {}
    second = None
    if early is not None:
        halves, second = early[1], early[2]
    elif engine[0] == "local":
        halves, second = _fork_second(plans, len(samples), dict(ctx.options))
    try:
        advancers: dict[str, Callable[[int], None]] = {}
        _score_plans(plans, ctx, store, put, engine, timings, halves, advancers)
        if second is not None:
            t = time.perf_counter()
            results = second.result()
            second = None
            timings["worker_wait_s"] = round(time.perf_counter() - t, 4)
            writes = []
            for key, scores in results.items():
                rest = halves[key][1]
                ids = [s.id for s in rest]
                if collected is not None:
                    collected.setdefault(key, []).append((ids, scores))
                writes.append((key, ids, scores))
                advancers[key](len(rest))
            # the worker's scores go to the store on a thread while the corpus scores are computed
            # (SQLite and numpy release the GIL); the run is finished only after they are written.
            # Before a judge stage they are written at once: nothing computed waits on the judge
            if deferred is not None and not judged:
                deferred.append(lambda: [store.add_scores(run_id, *w) for w in writes])
            else:
                for w in writes:
                    store.add_scores(run_id, *w)
    finally:
        if second is not None:
            second.cancel()
    if judged:
        from ragmeter.run.engines.judged import stream_scores

        t = time.perf_counter()
        _prepare(judged, ctx)
        # per-sample judge metrics are stored as their verdicts arrive (engines/judged.py)
        streamed = stream_scores(judged, ctx, put, _run_metric, advancers)
        ctx.flush()
        timings["judge_s"] = round(time.perf_counter() - t, 4)
        judged = [(req, [s for s in ok if s.id not in streamed.get(req.key, ())], lacking, unavailable)
                  for req, ok, lacking, unavailable in judged]
        _score_plans(judged, ctx, store, put, engine, timings, {}, advancers)
    return timings


def _prepare(plans: list[Plan], ctx: ScoringContext) -> None:
    for req, eligible, _lacking, unavailable in plans:
        if eligible and not unavailable and req.spec.prepare is not None:
            req.spec.prepare(eligible, ctx, **req.params)


def _ray_pure_together(plans: list[Plan],
                       ctx: ScoringContext, put: Callable[[str, list[str], Any], None],
                       address: str | None, timings: dict[str, Any]
                       ) -> list[Plan]:
    """On Ray, the pure metrics (engines/forked.py) that score the same samples go to the workers
    together, one task per block for all of them; returns the plans left for metric-by-metric work."""
    from ragmeter.run.engines import forked

    group = [p for p in plans if forked.is_pure(p[0]) and not p[3] and p[1]]
    if len(group) < 2:
        return plans
    first = group[0][1]
    group = [p for p in group if len(p[1]) == len(first) and all(a is b for a, b in zip(p[1], first, strict=True))]
    if len(group) < 2:
        return plans
    from ragmeter.run.engines.ray_engine import score_blocks_all

    t = time.perf_counter()
    for req, _eligible, lacking, _u in group:
        if lacking:
            put(req.key, [s.id for s, _ in lacking], [Score.missing(r) for _, r in lacking])
    advance = ctx.progress(", ".join(p[0].key for p in group), len(first))
    for block, per_metric in score_blocks_all([p[0] for p in group], first, dict(ctx.options), _run_metric,
                                              address=address):
        ids = [s.id for s in block]
        for (req, *_), scores in zip(group, per_metric, strict=True):
            put(req.key, ids, scores)
        advance(len(block))
    spent = round(time.perf_counter() - t, 4)
    for req, *_ in group:
        timings["metrics"][req.key] = spent
    keys = {p[0].key for p in group}
    return [p for p in plans if p[0].key not in keys]


def _score_plans(plans: list[Plan],
                 ctx: ScoringContext, store: Store, put: Callable[[str, list[str], Any], None],
                 engine: tuple[str, str | None], timings: dict[str, Any],
                 halves: dict[str, tuple[list[Sample], list[Sample]]],
                 advancers: dict[str, Callable[[int], None]]) -> None:
    for req, eligible, lacking, unavailable in plans:
        rest = 0
        if req.key in halves:
            eligible, rest = halves[req.key][0], len(halves[req.key][1])
        t = time.perf_counter()
        if lacking:
            put(req.key, [s.id for s, _ in lacking], [Score.missing(r) for _, r in lacking])
        if unavailable:
            put(req.key, [s.id for s in eligible], [Score.missing(f"unavailable: {unavailable}")] * len(eligible))
            continue
        advance = advancers.get(req.key) or advancers.setdefault(req.key, ctx.progress(req.key, len(eligible) + rest))
        bs = max(1, req.spec.batch_size)
        if engine[0] == "ray" and not req.spec.needs_llm and eligible:  # judge metrics: calls on Ray, scores here
            from ragmeter.run.engines.ray_engine import score_blocks

            for chunk, scores in score_blocks(req, eligible, bs, dict(ctx.options), store.url, _run_metric,
                                              address=engine[1]):
                put(req.key, [s.id for s in chunk], scores)
                advance(len(chunk))
            timings["metrics"][req.key] = round(time.perf_counter() - t, 4)
            continue
        for i in range(0, len(eligible), bs):
            chunk = eligible[i:i + bs]
            scores = _run_metric(req, chunk, ctx)
            put(req.key, [s.id for s in chunk], scores)
            advance(len(chunk))
        timings["metrics"][req.key] = round(time.perf_counter() - t, 4)


def _run_metric(req: MetricRequest, chunk: list[Sample], ctx: ScoringContext) -> ScoreColumn:
    try:
        scores = req.spec.fn(chunk, ctx, **req.params)
    except (ConfigError, MetricError):
        raise
    except Exception as exc:  # noqa: BLE001 - one metric's crash must not lose the run
        reason = f"error in {req.spec.name}: {type(exc).__name__}: {exc}"
        return ScoreColumn.of([Score.missing(reason)] * len(chunk))
    if len(scores) != len(chunk):
        raise MetricError(f"metric {req.spec.name} returned {len(scores)} scores for {len(chunk)} samples")
    if isinstance(scores, ScoreColumn):
        return checked_column(req, scores)
    return ScoreColumn.of(checked_scores(req, scores))
