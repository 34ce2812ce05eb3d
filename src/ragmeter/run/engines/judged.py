"""Judge metrics in a run: scores stored as verdicts arrive, and a pre-flight only when a request
will really be sent.

The runner queues every judge metric's requests (``prepare``) and the judge service answers them
concurrently. A metric built as a :class:`~ragmeter.metrics.judge._common.JudgedMetric` scores a
sample from that sample's verdict alone, so each sample is scored and stored as soon as its
verdicts are in (every 0.1 s at most), not when the last call of the run returns: a run killed
half-way keeps every score it paid for, and ``--resume`` sends only the calls that were in
flight (the verdicts themselves are in the judge cache before their scores are stored). Other
judge metrics (those that score a batch together) are scored after the calls, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import MetricRequest, missing_fields

if TYPE_CHECKING:
    from ragmeter.run.plan import MetricPlan

Put = Callable[[str, list[str], Any], None]
RunMetric = Callable[[MetricRequest, list[Sample], Any], Any]


def _per_sample(req: MetricRequest) -> Any:
    """The metric's :class:`JudgedMetric` (one request per sample, one score from its verdict),
    or ``None`` for a judge metric that scores samples together."""
    from ragmeter.metrics.judge._common import JudgedMetric

    return req.spec.fn if isinstance(req.spec.fn, JudgedMetric) else None


def calls_needed(requests: Sequence[MetricRequest], samples: Sequence[Sample],
                 done: Collection[tuple[str, str]], ctx: Any) -> bool:
    """Whether scoring ``samples`` with ``requests`` would send the judge anything: ``False`` only
    when every judge metric builds its requests per sample and each request's verdict is in the
    store's judge cache (a re-run of a finished evaluation), so no pre-flight request is needed.

    Args:
        requests: the run's metric requests.
        samples: the samples to score.
        done: ``(sample_id, metric_key)`` pairs already stored (a resumed run).
        ctx: a scoring context with the run's options and store.
    """
    judged = [r for r in requests if r.spec.needs_llm]
    if not judged:
        return False
    try:
        service = ctx.service("judge")
    except (ConfigError, MetricError):
        return True  # no judge configured: the metric's check says how to set one up
    cached = getattr(service, "all_cached", None)
    if cached is None:
        return True
    todo: list[tuple[Any, MetricRequest, list[Sample]]] = []
    for r in judged:
        jm = _per_sample(r)
        if jm is None:
            return True
        todo.append((jm, r, [s for s in samples if (s.id, r.key) not in done
                             and not missing_fields(s, r.spec.requires)]))
    try:
        # a first run misses at once: one sample's requests, one cache query, before building them all
        first = next(((jm, r, rest[:1]) for jm, r, rest in todo if rest), None)
        if first is not None and not cached(_queued(*first)):
            return True
        return not cached([q for jm, r, rest in todo for q in _queued(jm, r, rest)])
    except (ConfigError, MetricError):
        return True  # invalid parameters: the run reports them


def _queued(jm: Any, req: MetricRequest, samples: list[Sample]) -> list[Any]:
    """The judge requests ``jm`` would queue for ``samples`` (a sample it scores without one left out)."""
    return [q for q in jm.requests(samples, req.params) if not isinstance(q, Score)]


def stream_scores(plans: Sequence[MetricPlan], ctx: Any,
                  put: Put, run_metric: RunMetric, advancers: dict[str, Callable[[int], None]]
                  ) -> dict[str, set[str]]:
    """Run the queued judge requests and score each per-sample judge metric's samples as their
    verdicts arrive; returns the sample ids scored (and stored through ``put``) per metric key.
    The samples not returned are left to the runner's ordinary batches.

    Args:
        plans: the judge metrics' plans.
        ctx: the run's scoring context (its queued judge requests are run here).
        put: stores ``(metric key, sample ids, scores)``.
        run_metric: the runner's checked call of a metric on a batch of samples.
        advancers: progress per metric key (created here for the streamed metrics).
    """
    ctx.flush(skip=("judge",))
    flush_stream = getattr(ctx.service("judge"), "flush_stream", None) if ctx.has_service("judge") else None
    if flush_stream is None:
        return {}
    waiting: dict[tuple[str, str], list[tuple[MetricRequest, Sample]]] = {}
    for plan in plans:
        req, eligible = plan.request, plan.eligible
        jm = _per_sample(req)
        if jm is None or plan.unavailable or not eligible:
            continue
        if req.key not in advancers:
            advancers[req.key] = ctx.progress(req.key, len(eligible))
        for s in eligible:
            waiting.setdefault((jm.name, s.id), []).append((req, s))
    scored: dict[str, set[str]] = {}
    for ready in flush_stream():
        batches: dict[str, tuple[MetricRequest, list[Sample]]] = {}
        for pair in ready:
            for req, s in waiting.pop(pair, ()):  # type: ignore[arg-type]
                batches.setdefault(req.key, (req, []))[1].append(s)
        for key, (req, samples) in batches.items():
            ids = [s.id for s in samples]
            put(key, ids, run_metric(req, samples, ctx))
            advancers[key](len(samples))
            scored.setdefault(key, set()).update(ids)
    return scored
