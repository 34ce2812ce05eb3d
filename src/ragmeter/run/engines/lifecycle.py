"""What a run does around its scoring: renew its lease on the run in the store, and write scores on
a background thread. (The interpreter's garbage collector and allocator are the ``ragmeter``
command's business, :mod:`ragmeter.apps.cli.runtime`; a library run leaves them as they are.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmeter.store import Store

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
