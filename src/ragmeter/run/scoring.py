"""Scoring a planned run: every metric's plan on the run's engine, each batch stored as it is done.

Metrics without a judge are scored first (pure metrics that score the same samples together where
the engine can, :meth:`~ragmeter.run.engines.base.Engine.run_together`; the second process's share
collected after this process's), then the judge's queued requests are sent and each judge metric is
stored as its verdicts arrive (:mod:`ragmeter.run.engines.judged`). Every step returns the seconds
it spent; :func:`score_all` gathers them into the run's :class:`RunTimings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Score, ScoreColumn
from ragmeter.run.engines.base import Engine
from ragmeter.run.engines.checks import run_metric
from ragmeter.run.engines.local import LocalEngine
from ragmeter.run.plan import MetricPlan, Split, Started
from ragmeter.store import Store

#: ``put(metric key, sample ids, scores)``: store a batch's scores (and keep them for the summary)
Put = Callable[[str, list[str], Any], None]


@dataclass
class RunTimings:
    """Where a run's time went, in seconds, stored with the run (``runs.timings``, :meth:`to_dict`).

    Attributes:
        metrics: per metric key, the time its scoring took in this process (for metrics scored
            together on Ray, the time of the group).
        prepare_s: every metric's ``prepare`` and the services' flush (embeddings) before scoring.
        worker_wait_s: the wait for the second process's scores (``None``: no second process).
        judge_s: the judge stage (``None``: no judge metric).
        total_s: the whole run, summed over the processes that resumed it (``None`` until finished).
    """

    metrics: dict[str, float] = field(default_factory=dict)
    prepare_s: float = 0.0
    worker_wait_s: float | None = None
    judge_s: float | None = None
    total_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON: ``metrics`` and ``prepare_s``, then the stages the run had, then ``total_s``."""
        out: dict[str, Any] = {"metrics": dict(self.metrics), "prepare_s": self.prepare_s}
        for key in ("worker_wait_s", "judge_s", "total_s"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        return out


def _since(t: float) -> float:
    return round(time.perf_counter() - t, 4)


def score_all(ctx: ScoringContext, store: Store, run_id: str, engine: Engine, started: Started,
              collected: dict[str, list[tuple[list[str], ScoreColumn]]] | None,
              deferred: list[Callable[[], Any]]) -> RunTimings:
    """Score every plan of ``started`` on ``engine`` and store the scores (``started.worker``: a
    second process already scoring its share); the writing of the worker's scores goes to
    ``deferred`` for the caller to run later when no judge stage follows (else they are written
    here). ``collected`` (when not ``None``) receives every stored batch, for the summary."""
    timings = RunTimings()

    def put(key: str, ids: list[str], scores: list[Score] | ScoreColumn) -> None:
        col = ScoreColumn.of(scores)
        store.add_scores(run_id, key, ids, col)
        if collected is not None:
            collected.setdefault(key, []).append((ids, col))

    # metrics without a judge are scored and stored first, before the first judge call is made
    judged = [p for p in started.plans if p.needs_llm]
    plans = [p for p in started.plans if not p.needs_llm]
    engine.attach(ctx)
    t = time.perf_counter()
    prepare(plans, ctx)
    ctx.flush()
    timings.prepare_s = _since(t)

    plans, seconds = _score_together(plans, ctx, put, engine)
    timings.metrics.update(seconds)
    # a second process scores the tail of each pure metric's samples (engines/forked.py)
    splits, worker = started.splits, started.worker
    local = LocalEngine()
    advancers: dict[str, Callable[[int], None]] = {}
    try:
        timings.metrics.update(_score_plans(plans, ctx, put, engine, local, splits, advancers))
        if worker is not None:
            t = time.perf_counter()
            worker.wait()
            timings.worker_wait_s = _since(t)
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
        prepare(judged, ctx)
        # per-sample judge metrics are stored as their verdicts arrive (engines/judged.py)
        streamed = stream_scores(judged, ctx, put, run_metric, advancers)
        ctx.flush()
        timings.judge_s = _since(t)
        judged = [MetricPlan(p.request, [s for s in p.eligible if s.id not in streamed.get(p.key, ())],
                             p.lacking, p.unavailable) for p in judged]
        # judge metrics stay in this process
        timings.metrics.update(_score_plans(judged, ctx, put, local, local, {}, advancers))
    return timings


def prepare(plans: list[MetricPlan], ctx: ScoringContext) -> None:
    """Call every available metric's ``prepare`` hook on its eligible samples (services collect
    their work for the whole run: texts to embed, judge requests)."""
    for p in plans:
        if p.eligible and not p.unavailable and p.request.spec.prepare is not None:
            p.request.spec.prepare(p.eligible, ctx, **p.request.params)


def _score_together(plans: list[MetricPlan], ctx: ScoringContext, put: Put,
                    engine: Engine) -> tuple[list[MetricPlan], dict[str, float]]:
    """The pure metrics that score the same samples, in one pass where the engine can
    (:meth:`~ragmeter.run.engines.base.Engine.run_together`: on Ray, one task per block for all of
    them). Returns the plans left for metric-by-metric work and the seconds spent per metric."""
    group = [p for p in plans if p.pure and not p.unavailable and p.eligible]
    if len(group) < 2:
        return plans, {}
    first = group[0].eligible
    group = [p for p in group if len(p.eligible) == len(first)
             and all(a is b for a, b in zip(p.eligible, first, strict=True))]
    if len(group) < 2:
        return plans, {}
    blocks = engine.run_together(group, ctx)
    if blocks is None:
        return plans, {}
    t = time.perf_counter()
    for p in group:
        if p.lacking:
            put(p.key, [s.id for s, _ in p.lacking], [Score.missing(r) for _, r in p.lacking])
    advance = ctx.progress(", ".join(p.key for p in group), len(first))
    for block, per_metric in blocks:
        ids = [s.id for s in block]
        for p, scores in zip(group, per_metric, strict=True):
            put(p.key, ids, scores)
        advance(len(block))
    spent = _since(t)
    keys = {p.key for p in group}
    return [p for p in plans if p.key not in keys], dict.fromkeys((p.key for p in group), spent)


def _score_plans(plans: list[MetricPlan], ctx: ScoringContext, put: Put, engine: Engine, local: Engine,
                 splits: Mapping[str, Split], advancers: dict[str, Callable[[int], None]]) -> dict[str, float]:
    """Each plan on ``engine`` (judge metrics on ``local``, this process); of a split metric, this
    process scores its ``here`` share (the worker's share is collected by the caller). Returns the
    seconds spent per metric (none for an unavailable one)."""
    seconds: dict[str, float] = {}
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
        seconds[p.key] = _since(t)
    return seconds
