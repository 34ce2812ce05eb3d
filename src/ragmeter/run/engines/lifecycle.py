"""What a run does around its scoring: pause the cyclic garbage collector, renew its lease on the
run in the store, and write scores on a background thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmeter.store import Store

_GC_LOCK = threading.Lock()
_GC_STATE: list[Any] = [0, False]  # runs in progress, whether collection was enabled before the first
_FREEZE_AFTER_RUNS = [False]


def freeze_after_runs(on: bool = True) -> None:
    """Declare that this process ends with its runs (the ``ragmeter`` command says so in its entry
    point): the objects of a finished run are then moved out of the collector's sight
    (``gc.freeze``, see :func:`gc_paused`). A library caller's process goes on, so by default its
    objects stay collectable."""
    _FREEZE_AFTER_RUNS[0] = on


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during a run: it allocates millions of small acyclic objects
    (samples, chunks, scores, token lists), and each collection pass would walk all of them again
    (reading 100,000 rows with ten chunk ids each: 14.8 s with collection, 8.0 s without).
    Collection resumes, as it was, when the run ends. In the ``ragmeter`` command, whose process ends
    with the run (:func:`freeze_after_runs`), the run's objects are first moved out of the collector's
    sight (``gc.freeze``): otherwise the first collection after the run walks them all once more
    (80 ms at 30,000 samples)."""
    import gc

    with _GC_LOCK:  # runs in several threads: the first pauses collection, the last restores it
        if not _GC_STATE[0]:
            _GC_STATE[1] = gc.isenabled()
            gc.disable()
        _GC_STATE[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE[0] -= 1
            if not _GC_STATE[0] and _GC_STATE[1]:
                if _FREEZE_AFTER_RUNS[0]:  # the command's process (:func:`freeze_after_runs`)
                    gc.freeze()
                gc.enable()


@contextmanager
def heartbeat(store: Store, run_id: str, every_s: float = 10.0) -> Iterator[None]:
    """Renew this process's lease on the run while it scores (see ``Store.acquire_lease``)."""
    import threading

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                store.heartbeat(run_id)
            except Exception:  # noqa: BLE001 - a missed beat only makes the lease look older
                continue

    thread = threading.Thread(target=beat, name=f"ragmeter-lease-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def in_background(fn: Callable[[], Any]) -> Any:
    """``fn`` running on a thread: a future whose ``result()`` waits and re-raises its error."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmeter-score-writer")
    future = pool.submit(fn)
    pool.shutdown(wait=False)  # the submitted call still runs to its end
    return future


def join_writer(writer: Any, store: Store, run_id: str) -> None:
    try:
        writer.result()
    except BaseException:
        store.update_run(run_id, status="failed", heartbeat_at=None)
        raise
