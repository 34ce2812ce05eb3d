"""Both CPUs for a local run: a second process scores the tail of each pure metric's samples while
this process scores the head.

"Pure" metrics compute each sample's value from that sample alone, in this process, with no model,
judge, store or embedding service: the metrics whose spec says so
(:meth:`ragmeter.metrics.registry.MetricSpec.is_pure`; the lexical family, and the retrieval family
unless it matches chunks by embedding similarity). Their values do not depend on how samples are
grouped into batches, so splitting a column in two gives exactly the values of one pass (the test
suite compares). The store is written by this process only; :func:`start` cuts each pure metric's
samples at :data:`MAIN_SHARE` and starts the worker on the tail.

How the second process starts (:func:`start_method`, ``RAGMETER_START_METHOD``):

* ``fork`` (the default on Linux, when no other thread has started in this process): the worker is
  a copy of this process, so it starts in milliseconds with the samples already in memory; nothing
  is pickled on the way in. Forking a process that runs threads is unsafe (a lock another thread
  held stays locked in the copy; on macOS system libraries may crash), so the default forks only
  while :func:`threading.active_count` is 1.
* ``spawn`` (the default everywhere else, and on Linux once a thread runs): a fresh interpreter
  (:mod:`multiprocessing`'s ``spawn`` context). It imports ragmeter, resolves the metrics again by
  name and receives its samples pickled.
* ``single``: no second process; this process scores everything.

Its scores (and the BLEU statistics it counted, which the run's corpus BLEU reuses) come back in one
pickle. Used when the run is local, has at least :data:`MIN_SAMPLES` samples, the machine more
than one CPU, and ``RAGMETER_WORKERS`` is not ``1``.

The worker never outlives this process: on Linux the kernel kills it when the thread that started
it ends (``PR_SET_PDEATHSIG``); on every platform and with every start method a thread in the worker
reads a pipe whose only write end this process holds, and ends the worker at end-of-file, which the
kernel delivers however this process ends (``kill -9`` and OOM kills included).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: below this many samples a second process costs more than it saves
MIN_SAMPLES = 4000
#: share of each pure metric's samples this process scores when a second process takes the rest: this
#: process also stores the run's samples and every score, so it takes less (30,000 pairs x 5 lexical
#: metrics, RAG-like prose or random words: both processes finish together at 0.28-0.30)
MAIN_SHARE = 0.30
#: a metric with a corpus score (BLEU: ``MetricSpec.corpus``) is scored whole by the second process,
#: which then computes its corpus score too (a bootstrap over every pair's statistics) and hands it
#: back, instead of this process computing it after both are done; the other pure metrics are then
#: split at this share (30,000 pairs x rouge1, rougeL, bleu, token_f1, exact_match: both finish
#: together)
MAIN_SHARE_BESIDE_CORPUS = 0.70

#: one forked worker per process at a time: runs in several threads of one process share the CPUs
#: already, and the worker reads its jobs from the module state below, copied at the fork
_SLOT = threading.Lock()
_JOBS: list[tuple[Any, list[list[Any]]]] = []
_OPTIONS: dict[str, Any] = {}
_RUN: list[Callable[..., list[Any]]] = []
_WHOLE: set[str] = set()  # keys of the metrics whose whole column the worker scores


def is_pure(req: Any) -> bool:
    """Whether a metric request's values can be computed in a forked worker (see the module
    docstring): what its spec declares for its parameters
    (:meth:`~ragmeter.metrics.registry.MetricSpec.is_pure`; a metric fitted on its whole batch,
    ``per_sample=False``, never is)."""
    return bool(req.spec.is_pure(req.params))


#: the values of ``RAGMETER_START_METHOD``
START_METHODS = ("auto", "fork", "spawn", "single")


def start_method() -> str:
    """How a second process starts here: ``"fork"``, ``"spawn"`` or ``"single"`` (none).

    ``RAGMETER_START_METHOD`` chooses (``auto``, the default: ``fork`` on Linux while this process
    runs no other thread, ``spawn`` otherwise).

    Raises:
        ConfigError: an unknown value, or ``fork`` where the platform cannot fork (exit status 2),
            naming the variable.
    """
    from ragmeter.core.errors import ConfigError

    raw = os.environ.get("RAGMETER_START_METHOD", "").strip().lower() or "auto"
    if raw not in START_METHODS:
        raise ConfigError(f"RAGMETER_START_METHOD must be one of {', '.join(START_METHODS)}, got {raw!r}")
    if raw == "fork" and not hasattr(os, "fork"):
        raise ConfigError("RAGMETER_START_METHOD=fork: this platform cannot fork; use spawn or single")
    if raw != "auto":
        return raw
    if sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1:
        return "fork"
    return "spawn"


def usable(n_samples: int) -> bool:
    """Whether a run of ``n_samples`` samples gets a second process here."""
    if os.environ.get("RAGMETER_WORKERS", "").strip() == "1" or start_method() == "single":
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus > 1 and n_samples >= MIN_SAMPLES


def claim() -> bool:
    """Take the process's one worker slot (``False``: another run's worker is running); a
    :class:`SecondHalf` gives it back when it is collected or cancelled."""
    return _SLOT.acquire(blocking=False)


def release() -> None:
    """Give the worker slot back (when no :class:`SecondHalf` was made after :func:`claim`)."""
    _SLOT.release()


def _die_at_kernel_level() -> None:
    """Linux: the kernel kills this process when the thread that started it ends."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not glibc/musl: the pipe below still ends the worker
            pass


def _watch(read: Callable[[], bytes]) -> None:
    """End this process when ``read`` reports end-of-file (an empty read or ``EOFError``): the
    parent, the only holder of the pipe's write end, is gone."""

    def watch() -> None:
        while True:
            try:
                if not read():
                    break
            except InterruptedError:
                continue
            except (OSError, EOFError):
                break
        os._exit(1)  # the parent is gone: end at once, without running its (copied) exit handlers

    threading.Thread(target=watch, name="ragmeter-parent-watch", daemon=True).start()


def _die_with_parent(parent: int, watch_fd: int, write_fd: int) -> None:
    """The worker's initializer: end this process as soon as ``parent`` is gone.

    Args:
        parent: the pid of the process that forked this one.
        watch_fd: the read end of a pipe whose write end only the parent holds open.
        write_fd: that write end, inherited by the fork: closed here, so end-of-file on
            ``watch_fd`` means the parent is gone.
    """
    os.close(write_fd)
    _die_at_kernel_level()
    if os.getppid() != parent:  # the parent died between the fork and the prctl call
        os._exit(1)
    _watch(lambda: os.read(watch_fd, 1))


def _die_with_parent_spawned(parent: int, conn: Any) -> None:
    """The spawned worker's initializer: as :func:`_die_with_parent`, with the read end of a
    :func:`multiprocessing.Pipe` (a spawned process inherits no other descriptor)."""
    _die_at_kernel_level()
    if os.getppid() != parent:
        os._exit(1)
    _watch(conn.recv_bytes)


def _work() -> tuple[dict[str, Any], dict[Any, Any]]:
    from ragmeter.core.context import ScoringContext
    from ragmeter.core.schema import ScoreColumn
    from ragmeter.metrics.registry import export_worker_caches

    ctx = ScoringContext(dict(_OPTIONS))
    out: dict[str, Any] = {}
    try:
        for req, chunks in _JOBS:
            out[req.key] = ScoreColumn.concat([ScoreColumn.of(_RUN[0](req, chunk, ctx)) for chunk in chunks])
    finally:
        ctx.close()
    _corpus_here()
    return out, export_worker_caches()


def _corpus_here() -> None:
    """The corpus score of every metric the worker scored whole (:data:`MAIN_SHARE_BESIDE_CORPUS`),
    computed here from the statistics its scoring counted: the metric's hook remembers it, and its
    worker cache hands it back with the scores (the parent's summary then finds it)."""
    from ragmeter.metrics.registry import corpus_scores

    for req, chunks in _JOBS:
        if req.key in _WHOLE and getattr(req.spec, "corpus", None) is not None:
            corpus_scores([req], [s for chunk in chunks for s in chunk], dict(_OPTIONS))


def _work_spawned(jobs: Sequence[tuple[Any, list[list[Any]]]], options: dict[str, Any],
                  run_metric: Callable[..., Any], whole: Sequence[str] = ()) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The spawned worker's call: its jobs arrive pickled, each metric as its ``{name, params, key}``
    entry, resolved here again from the registry (a metric's function need not pickle)."""
    from ragmeter.metrics.registry import resolve

    _JOBS[:] = [(resolve(req) if isinstance(req, dict) else req, chunks) for req, chunks in jobs]
    _OPTIONS.clear()
    _OPTIONS.update(options)
    _RUN[:] = [run_metric]
    _WHOLE.clear()
    _WHOLE.update(whole)
    return _work()


def spawnable(req: Any) -> bool:
    """Whether a spawned worker resolves ``req`` by name to the very same metric (a metric
    registered by the caller's own code at run time is not known there)."""
    from ragmeter.core.errors import ConfigError
    from ragmeter.metrics.registry import resolve

    try:
        return resolve(_entry(req)).spec is req.spec
    except ConfigError:
        return False


def _entry(req: Any) -> Any:
    return {"name": req.spec.name, "params": dict(req.params), "key": req.key} if hasattr(req, "spec") else req


class SecondHalf:
    """The worker's share of a run: started at construction, collected by :meth:`result`. Made only
    after :func:`claim`; it releases the slot when collected or cancelled.

    Args:
        jobs: ``(metric request, batches of samples)`` for the worker to score.
        options: the run options (the worker builds its own scoring context from them).
        run_metric: the checked call of a metric on one batch
            (:func:`~ragmeter.run.engines.checks.run_metric`); importable by name when spawned.
        method: ``"fork"`` or ``"spawn"`` (default: :func:`start_method`).
        whole: keys of the metrics whose whole column ``jobs`` hold: the worker also computes their
            corpus scores (:data:`MAIN_SHARE_BESIDE_CORPUS`).
    """

    def __init__(self, jobs: Sequence[tuple[Any, list[list[Any]]]], options: dict[str, Any],
                 run_metric: Callable[..., Any], method: str | None = None, whole: Sequence[str] = ()) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.method = method or start_method()
        self._alive_fd = -1
        self._alive_conn: Any = None
        if self.method == "spawn":
            ctx = multiprocessing.get_context("spawn")
            try:
                read_conn, self._alive_conn = ctx.Pipe(duplex=False)
            except OSError:
                release()
                raise
            try:
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_die_with_parent_spawned,
                                                 initargs=(os.getpid(), read_conn))
                # starts the worker (a fresh interpreter): the jobs are pickled, each metric by name
                self._future = self._pool.submit(_work_spawned, [(_entry(r), c) for r, c in jobs],
                                                 dict(options), run_metric, list(whole))
            except BaseException:
                self._release()
                raise
            finally:
                read_conn.close()  # the worker holds its own copy
            return
        _JOBS[:] = list(jobs)
        _OPTIONS.clear()
        _OPTIONS.update(options)
        _RUN[:] = [run_metric]
        _WHOLE.clear()
        _WHOLE.update(whole)
        try:
            read_fd, self._alive_fd = os.pipe()
        except OSError:
            release()
            raise
        try:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                             initializer=_die_with_parent,
                                             initargs=(os.getpid(), read_fd, self._alive_fd))
            self._future = self._pool.submit(_work)  # forks the worker (fork start method)
        except BaseException:
            self._release()
            raise
        finally:
            os.close(read_fd)  # the worker's copy stays open in the worker

    def _release(self) -> None:
        """Close the pipe end that keeps the worker alive (it ends at end-of-file)."""
        fd, self._alive_fd = self._alive_fd, -1
        conn, self._alive_conn = self._alive_conn, None
        if fd >= 0:
            os.close(fd)
        if conn is not None:
            conn.close()
        if fd >= 0 or conn is not None:
            release()

    def result(self) -> dict[str, Any]:
        """The worker's scores per metric key (a :class:`~ragmeter.core.schema.ScoreColumn`, in the order of
        its batches; re-raises its error)."""
        from ragmeter.metrics.registry import merge_worker_caches

        try:
            scores, memo = self._future.result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._release()
            _JOBS.clear()
            _WHOLE.clear()
        merge_worker_caches(memo)
        return scores

    def cancel(self) -> None:
        self._future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._release()  # a worker still scoring ends at once instead of finishing unwanted work
        _JOBS.clear()
        _WHOLE.clear()


def start(plans: list[Any], n_samples: int, options: dict[str, Any]) -> Any:
    """The run's plans (a :class:`~ragmeter.run.plan.Started`), with a second process started on the
    tail of each pure metric's samples when there is a second CPU and enough work (:func:`usable`).
    Values of pure metrics do not depend on how the samples are cut or batched, so the split is by
    :data:`MAIN_SHARE`; a metric with a corpus score goes whole to the worker, the others are then
    split by :data:`MAIN_SHARE_BESIDE_CORPUS`."""
    import contextlib

    from ragmeter.core.context import ScoringContext
    from ragmeter.core.errors import ConfigError, MetricError
    from ragmeter.run.engines.checks import run_metric
    from ragmeter.run.plan import Split, Started

    started = Started(plans, {})
    if not usable(n_samples):
        return started
    method = start_method()
    splits: dict[str, Split] = {}
    movable = [p for p in plans if p.pure and not p.unavailable and len(p.eligible) >= MIN_SAMPLES
               and (method != "spawn" or spawnable(p.request))]
    whole = [p.key for p in movable if p.request.spec.corpus is not None]
    share = MAIN_SHARE_BESIDE_CORPUS if whole else MAIN_SHARE
    for p in movable:
        cut = 0 if p.key in whole else round(len(p.eligible) * share)
        splits[p.key] = Split(p.eligible[:cut], p.eligible[cut:])
    if not splits or not claim():  # no work for it, or another run's worker is running
        return started
    if method == "fork":
        # one sample through each metric first: the imports and caches a metric makes on its first call
        # (Arrow, the stemmer, compiled expressions) are then made once, before the fork, and shared
        warm = ScoringContext(dict(options))
        try:
            for p in plans:
                if p.key in splits and splits[p.key].here:  # (a metric the worker scores whole warms there)
                    with contextlib.suppress(ConfigError, MetricError):
                        run_metric(p.request, p.eligible[:1], warm)
        except BaseException:
            release()
            raise
        finally:
            warm.close()
    jobs = []
    for p in plans:
        if p.key in splits:
            rest, bs = splits[p.key].worker, max(1, p.request.spec.batch_size)
            jobs.append((p.request, [rest[i:i + bs] for i in range(0, len(rest), bs)]))
    started.splits = splits
    started.worker = WorkerEngine(jobs, dict(options), run_metric, whole)  # releases the slot on failure
    return started


class WorkerEngine:
    """The second process as an :class:`~ragmeter.run.engines.base.Engine`: started with its share
    of each split metric (:class:`SecondHalf`); :meth:`wait` waits for its scores, and :meth:`run`
    yields a metric's worker share (waiting for the worker the first time)."""

    name = "worker"

    def __init__(self, jobs: Sequence[tuple[Any, list[list[Any]]]], options: dict[str, Any],
                 run_metric: Callable[..., Any], whole: Sequence[str] = ()) -> None:
        self._half: SecondHalf | None = SecondHalf(jobs, options, run_metric, whole=whole)
        self.method = self._half.method
        self._results: dict[str, Any] | None = None
        self._samples = {getattr(req, "key", None): [s for chunk in chunks for s in chunk] for req, chunks in jobs}

    def start(self, plans: list[Any], n_samples: int, options: dict[str, Any]) -> Any:
        """The plans as they are: this engine is the share another engine started."""
        from ragmeter.run.plan import Started

        return Started(plans, {})

    def attach(self, ctx: Any) -> None:
        """Nothing: the worker has no services."""

    def wait(self) -> None:
        """Wait for the worker's scores (re-raises its error)."""
        self._scores()

    def _scores(self) -> dict[str, Any]:
        if self._results is None:
            half, self._half = self._half, None
            if half is None:
                raise RuntimeError("the worker was closed before its scores were collected")
            self._results = half.result()
        return self._results

    def run(self, plan: Any, ctx: Any) -> Iterator[Any]:
        from ragmeter.run.engines.base import Batch

        scores = self._scores().get(plan.key)
        if scores is not None:
            yield Batch(self._samples[plan.key], scores)

    def run_together(self, plans: Sequence[Any], ctx: Any) -> None:
        """``None``: the worker's share is yielded metric by metric (:meth:`run`)."""
        return None

    def close(self) -> None:
        """Stop the worker if its scores were not collected (a failed run)."""
        half, self._half = self._half, None
        if half is not None:
            half.cancel()
