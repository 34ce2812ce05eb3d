"""Streaming evaluation: a large file of plain rows read, scored and stored a chunk at a time.

A run holds in memory one chunk of samples (:data:`CHUNK_ROWS`) with their scores, and per metric
a running summary (:class:`~ragmeter.stats.intervals.Moments`: counts, the no-value reasons counted,
the smallest and largest value, exact running sums); never a value, sample, score object or reason
per row of the whole run. The ids seen, to refuse a duplicate as :func:`ragmeter.load` does, wait on
disk. The file is read twice: once for what the run record needs before any work (the dataset's
fingerprint and size, the field check of every metric, the report's dataset fields), once to store
each chunk's samples and scores. The summary is the in-memory run's: both feed the same
accumulator the same values in the same order, and its figures do not depend on how the values are
cut into chunks, so values, intervals and stored rows are the same.

Used by :func:`ragmeter.run.runner.run` for a new local run of a JSON Lines file of at least
:data:`MIN_BYTES`, one plain row a sample (no conversations, spans or agent traces to expand), whose
metrics are all computed per sample in this process (:meth:`~ragmeter.metrics.registry.MetricSpec.is_pure`),
with no corpus score, ``prepare`` hook or scope other than the sample, each available here, and
with no ``where``, ``--per-span``, thresholds or judge panel. Anything else needs every sample at
once (a metric fitted on its whole batch, corpus BLEU, a conversation's clustered interval, the
threshold check's verdicts) and runs in memory as before. A streamed run uses this process only (no
second process: it would need every sample too). Its result reads its samples and scores back from
the store when asked (:meth:`~ragmeter.run.runner.EvaluationResult.rows`, ``--out``): that step
holds them all.

A streamed run stopped part-way (killed, an error) is resumed like any other (``--resume RUN``, with
the dataset given again): the samples it had not stored yet are stored first.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragmeter.core.schema import Sample, Score, ScoreColumn, ScoreColumns

if TYPE_CHECKING:
    from ragmeter.metrics.registry import MetricRequest
    from ragmeter.run.eval_config import EvalConfig
    from ragmeter.stats.intervals import Moments
    from ragmeter.store import Store

#: samples read, stored and scored at a time
CHUNK_ROWS = 20_000
#: a file smaller than this is read whole (its samples fit in memory many times over, and the
#: in-memory run uses a second process)
MIN_BYTES = 64 * 2**20


def streamable(data: Any, c: EvalConfig, s: Any) -> list[MetricRequest] | None:
    """The run's metric requests when ``data`` is streamed (see the module docstring), else ``None``."""
    from ragmeter.core.errors import ConfigError, DatasetError
    from ragmeter.io.chunks import plain_rows_file
    from ragmeter.metrics.registry import resolve_all

    if (c.resume or c.engine != "local" or c.where or c.per_span or s.thresholds or s.options.get("panel")
            or not s.entries or not isinstance(data, str | Path)):
        return None
    path = Path(data)
    try:
        if path.stat().st_size < MIN_BYTES or not plain_rows_file(path):
            return None
        requests = resolve_all(s.entries)
    except (OSError, ConfigError, DatasetError):  # the in-memory run reports them as it always has
        return None
    for r in requests:
        spec = r.spec
        if (not spec.is_pure(r.params) or spec.corpus is not None or spec.prepare is not None
                or (spec.scope or "sample") != "sample"):
            return None
    from ragmeter.core.context import ScoringContext

    ctx = ScoringContext(dict(s.options))
    try:  # a metric that cannot run here: the in-memory run says so (or skips it) as it always has
        if any(r.spec.check is not None and r.spec.check(ctx, **r.params) for r in requests):
            return None
    finally:
        ctx.close()
    return requests


class StoredSamples(Sequence[Sample]):
    """A streamed run's samples: their number at once, the samples themselves read back from the
    store the first time they are asked for (all of them then)."""

    #: a streamed run has no conversations (:func:`ragmeter.conversations.scope.describe` needs no read)
    plain_rows = True

    def __init__(self, store: Store, run_id: str, n: int) -> None:
        self._store, self._run_id, self._n = store, run_id, n
        self._samples: list[Sample] | None = None

    def _all(self) -> list[Sample]:
        if self._samples is None:
            self._samples = self._store.run_samples(self._run_id)
        return self._samples

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        return self._all()[i]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._all())


class StoredColumns(ScoreColumns):
    """A streamed run's :class:`~ragmeter.core.schema.ScoreColumns`: each metric's column read back
    from the store the first time it is asked for (nothing is kept while the run scores)."""

    def __init__(self, store: Store, run_id: str, samples: Sequence[Sample], keys: Sequence[str]) -> None:
        super().__init__(samples, {k: [] for k in keys})
        self._store, self._run_id = store, run_id

    def column(self, key: str) -> ScoreColumn:
        col = self._columns.get(key)
        if col is None:
            if key not in self._chunks:
                raise KeyError(key)
            rows = self._store.scores(self._run_id, key)  # by sample position
            if len(rows) != len(self._samples) or any(
                    r.sample_id != s.id for r, s in zip(rows, self._samples, strict=True)):
                by_id = {r.sample_id: r for r in rows}
                rows = [by_id.get(s.id) for s in self._samples]
            values = np.array([np.nan if r is None or r.value is None else r.value for r in rows], dtype=np.float64)
            reasons = [("not scored" if r is None else r.reason) for r in rows]
            details = [None if r is None else (r.details or None) for r in rows]
            col = self._columns[key] = ScoreColumn(values, reasons if any(reasons) else None,
                                                   details if any(details) else None)
        return col


class Scan:
    """What the first pass over the file finds: the fingerprint (as :attr:`Dataset.fingerprint`),
    the sample count, each metric's first sample with one of its fields, the report's dataset fields."""

    def __init__(self, path: Path, c: EvalConfig, s: Any, requests: list[MetricRequest]) -> None:
        from ragmeter.io.chunks import sample_chunks
        from ragmeter.llm.span_prices import price_samples
        from ragmeter.metrics.registry import missing_fields
        from ragmeter.store.columns import FieldCounts

        self.mapping = c.mapping or s.file.get("map")
        chunks, self.reader = sample_chunks(path, mapping=self.mapping, on_error=c.on_error, chunk_rows=CHUNK_ROWS)
        h = hashlib.sha256()
        self.n, self.first, self.fields = 0, None, FieldCounts()
        self.has_fields = {r.key: not r.spec.requires for r in requests}
        for samples, lines in chunks:
            price_samples(samples)  # agent traces' LLM spans that recorded no cost, as load() is followed
            if self.first is None:
                self.first = (samples[0], lines[0])
            for x in samples:
                h.update(x.model_dump_json(exclude_none=True).encode())
                h.update(b"\n")
            for r in requests:
                if not self.has_fields[r.key]:
                    need = r.spec.requires
                    self.has_fields[r.key] = any(len(missing_fields(x, need)) < len(need) for x in samples)
            self.fields.add(samples)
            self.n += len(samples)
        self.fingerprint = h.hexdigest()


def _add_stats(total: dict[str, Any], stats: dict[str, Any]) -> None:
    """Add one chunk's service figures to the run's: counts summed, anything else the last chunk's."""
    for name, figures in stats.items():
        mine = total.setdefault(name, {})
        for k, v in (figures or {}).items():
            both = isinstance(v, int | float) and not isinstance(v, bool) and isinstance(mine.get(k), int | float)
            mine[k] = mine[k] + v if both else v


def score_chunks(path: Path, scan: Scan, requests: list[MetricRequest], moments: dict[str, Moments],
                 store: Store, run_id: str, new_context: Any, stats: dict[str, Any]) -> Any:
    """The second pass: each chunk's samples stored, then scored metric by metric in the metric's
    batches and stored (a batch's scores are in the store before the next batch is scored), then
    each metric's values and reasons of the chunk added to its running summary (``moments``, in
    sample order) and let go. Each chunk has its own scoring context (``new_context()``), closed
    after it, so what a service remembers for the run (the ROUGE rows shared by the ROUGE keys of a
    sample) is one chunk's; its figures are added up in ``stats`` (a count of distinct texts is then
    summed over chunks)."""
    from ragmeter.io.chunks import sample_chunks
    from ragmeter.llm.span_prices import price_samples
    from ragmeter.run.scoring import RunTimings

    timings = RunTimings()
    seconds = dict.fromkeys((r.key for r in requests), 0.0)
    first = new_context()
    advance = {r.key: first.progress(r.key, scan.n) for r in requests}
    first.close()
    chunks, _ = sample_chunks(path, mapping=scan.mapping, on_error=scan.reader.on_error, chunk_rows=CHUNK_ROWS,
                              skipped={e.line: e for e in scan.reader.skipped if e.line is not None})
    start = 0
    for samples, _lines in chunks:
        price_samples(samples)
        store.add_samples(run_id, samples, start)
        at = {id(x): i for i, x in enumerate(samples)}
        columns = {r.key: ChunkColumn(len(samples)) for r in requests}
        ctx = new_context()
        try:
            _score_chunk(samples, start, at, requests, columns, ctx, store, run_id, advance, seconds)
            _add_stats(stats, ctx.stats())
        finally:
            ctx.close()
        for key, col in columns.items():
            moments[key].add(col.values, col.reasons)
        start += len(samples)
    timings.metrics.update({k: round(v, 4) for k, v in seconds.items()})
    return timings


class ChunkColumn:
    """One metric's values and no-value reasons for the samples of one chunk, by their place in it."""

    def __init__(self, n: int) -> None:
        self.values = np.full(n, np.nan)
        self.reasons: list[str | None] | None = None

    def put(self, places: Sequence[int], col: ScoreColumn) -> None:
        self.values[np.asarray(places, dtype=np.int64)] = col.values
        if col.reasons is not None:
            if self.reasons is None:
                self.reasons = [None] * len(self.values)
            for p, r in zip(places, col.reasons, strict=True):
                self.reasons[p] = r


def _score_chunk(samples: list[Sample], start: int, at: dict[int, int], requests: list[MetricRequest],
                 columns: dict[str, ChunkColumn], ctx: Any, store: Store, run_id: str, advance: dict[str, Any],
                 seconds: dict[str, float]) -> None:
    """Score one chunk (``at``: a sample's place in it, ``start``: the chunk's first position in the run)."""
    from ragmeter.run.engines.checks import run_metric
    from ragmeter.run.plan import make_plans

    for p in make_plans(samples, requests, (), {}):
        t = time.perf_counter()
        col = columns[p.key]
        if p.lacking:
            places = [at[id(x)] for x, _ in p.lacking]
            missing = ScoreColumn.of([Score.missing(r) for _, r in p.lacking])
            store.add_scores_at(run_id, p.key, [start + i for i in places], missing)
            col.put(places, missing)
        bs = max(1, p.request.spec.batch_size)
        for i in range(0, len(p.eligible), bs):
            batch = p.eligible[i:i + bs]
            places = [at[id(x)] for x in batch]
            scored = run_metric(p.request, batch, ctx)
            store.add_scores_at(run_id, p.key, [start + i for i in places], scored)
            col.put(places, scored)
            advance[p.key](len(batch))
        if p.lacking:
            advance[p.key](len(p.lacking))
        seconds[p.key] += time.perf_counter() - t
