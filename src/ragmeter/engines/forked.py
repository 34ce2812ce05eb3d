"""Both CPUs for a local run: a forked worker scores the second half of each pure metric's samples
while this process scores the first half.

"Pure" metrics compute each sample's value from that sample alone, in this process, with no model,
judge, store or embedding service: the lexical and retrieval families. Their values do not depend on
how samples are grouped into batches, so splitting a column in two gives exactly the values of one
pass (the test suite compares). The worker is a ``fork`` of this process (POSIX only), so it starts
in milliseconds with the samples already in memory: nothing is pickled on the way in; its scores
(and the BLEU statistics it counted, which the run's corpus BLEU reuses) come back in one pickle.
The store is written by this process only.

Used when the run is local, has at least :data:`MIN_SAMPLES` samples, the machine more than one CPU,
and ``RAGMETER_WORKERS`` is not ``1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

#: below this many samples a second process costs more than it saves
MIN_SAMPLES = 4000
PURE_FAMILIES = frozenset({"lexical", "retrieval"})

_JOBS: list[tuple[Any, list[list[Any]]]] = []
_OPTIONS: dict[str, Any] = {}
_RUN: list[Callable[..., list[Any]]] = []


def is_pure(req: Any) -> bool:
    """Whether a metric request's values can be computed in a forked worker (see the module
    docstring). Retrieval metrics are, unless they match chunks by embedding similarity."""
    spec = req.spec
    if spec.family not in PURE_FAMILIES or spec.needs_llm or spec.needs_embeddings:
        return False
    if spec.family == "retrieval":
        return req.params.get("match") != "similarity"
    return spec.prepare is None


def usable(n_samples: int) -> bool:
    """Whether a run of ``n_samples`` samples gets a second process here."""
    if not hasattr(os, "fork") or os.environ.get("RAGMETER_WORKERS", "").strip() == "1":
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus > 1 and n_samples >= MIN_SAMPLES


def _work() -> tuple[dict[str, Any], dict[Any, Any]]:
    from ragmeter.context import ScoringContext
    from ragmeter.metrics import _lexical_mt
    from ragmeter.schema import ScoreColumn

    ctx = ScoringContext(dict(_OPTIONS))
    out: dict[str, Any] = {}
    try:
        for req, chunks in _JOBS:
            out[req.key] = ScoreColumn.concat([ScoreColumn.of(_RUN[0](req, chunk, ctx)) for chunk in chunks])
    finally:
        ctx.close()
    return out, _lexical_mt.export_memo()


class SecondHalf:
    """The worker's share of a run: started at construction, collected by :meth:`result`.

    Args:
        jobs: ``(metric request, batches of samples)`` for the worker to score.
        options: the run options (the worker builds its own scoring context from them).
        run_metric: the runner's checked call of a metric on one batch.
    """

    def __init__(self, jobs: Sequence[tuple[Any, list[list[Any]]]], options: dict[str, Any],
                 run_metric: Callable[..., list[Any]]) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _JOBS[:] = list(jobs)
        _OPTIONS.clear()
        _OPTIONS.update(options)
        _RUN[:] = [run_metric]
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
        self._future = self._pool.submit(_work)

    def result(self) -> dict[str, Any]:
        """The worker's scores per metric key (a :class:`~ragmeter.schema.ScoreColumn`, in the order of
        its batches; re-raises its error)."""
        from ragmeter.metrics import _lexical_mt

        try:
            scores, memo = self._future.result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            _JOBS.clear()
        _lexical_mt.merge_memo(memo)
        return scores

    def cancel(self) -> None:
        self._future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        _JOBS.clear()
