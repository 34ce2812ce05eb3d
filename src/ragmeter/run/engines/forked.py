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

The worker never outlives this process: on Linux the kernel kills it when the thread that forked it
ends (``PR_SET_PDEATHSIG``); on every platform a thread in the worker reads a pipe whose only write
end this process holds, and ends the worker at end-of-file, which the kernel delivers however this
process ends (``kill -9`` and OOM kills included).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

#: below this many samples a second process costs more than it saves
MIN_SAMPLES = 4000
PURE_FAMILIES = frozenset({"lexical", "retrieval"})

#: one forked worker per process at a time: runs in several threads of one process share the CPUs
#: already, and the worker reads its jobs from the module state below, copied at the fork
_SLOT = threading.Lock()
_JOBS: list[tuple[Any, list[list[Any]]]] = []
_OPTIONS: dict[str, Any] = {}
_RUN: list[Callable[..., list[Any]]] = []


def is_pure(req: Any) -> bool:
    """Whether a metric request's values can be computed in a forked worker (see the module
    docstring). Retrieval metrics are, unless they match chunks by embedding similarity; a metric
    fitted on its whole batch (``per_sample=False``) never is."""
    spec = req.spec
    if spec.family not in PURE_FAMILIES or spec.needs_llm or spec.needs_embeddings or not spec.per_sample:
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


def claim() -> bool:
    """Take the process's one worker slot (``False``: another run's worker is running); a
    :class:`SecondHalf` gives it back when it is collected or cancelled."""
    return _SLOT.acquire(blocking=False)


def release() -> None:
    """Give the worker slot back (when no :class:`SecondHalf` was made after :func:`claim`)."""
    _SLOT.release()


def _die_with_parent(parent: int, watch_fd: int, write_fd: int) -> None:
    """The worker's initializer: end this process as soon as ``parent`` is gone.

    Args:
        parent: the pid of the process that forked this one.
        watch_fd: the read end of a pipe whose write end only the parent holds open.
        write_fd: that write end, inherited by the fork: closed here, so end-of-file on
            ``watch_fd`` means the parent is gone.
    """
    os.close(write_fd)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not glibc/musl: the pipe below still ends the worker
            pass
    if os.getppid() != parent:  # the parent died between the fork and the prctl call
        os._exit(1)

    def watch() -> None:
        while True:
            try:
                if not os.read(watch_fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os._exit(1)

    threading.Thread(target=watch, name="ragmeter-parent-watch", daemon=True).start()


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
    return out, export_worker_caches()


class SecondHalf:
    """The worker's share of a run: started at construction, collected by :meth:`result`. Made only
    after :func:`claim`; it releases the slot when collected or cancelled.

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
        self._alive_fd = -1
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
        if fd >= 0:
            os.close(fd)
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
        merge_worker_caches(memo)
        return scores

    def cancel(self) -> None:
        self._future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._release()  # a worker still scoring ends at once instead of finishing unwanted work
        _JOBS.clear()
