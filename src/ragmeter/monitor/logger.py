"""Logging production calls from inside the application, without ever hurting it.

``log_call`` validates the call, puts it on a bounded in-memory queue and returns at once; a
background thread writes queued calls to the store in batches. If the queue is full the call is
dropped and counted (``stats()["dropped"]``); if the database is unreachable the batch is retried
with backoff and then dropped and counted. Nothing is ever raised into the caller.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.core.redact import redact
from ragmeter.monitor.calls import Privacy, insert_calls, normalise_call

log = logging.getLogger("ragmeter.monitor")


class CallLogger:
    """A non-blocking, never-raising call logger with batched writes.

    Args:
        db: SQLAlchemy URL or SQLite path of the store (default ``$RAGMETER_DB`` or
            ``.ragmeter/ragmeter.db``); or a :class:`ragmeter.store.Store`.
        max_queue: calls held in memory at most; beyond, calls are dropped and counted.
        batch_size: calls written per transaction at most.
        flush_interval: seconds the writer waits to fill a batch.
        privacy: truncation / PII redaction applied before anything is stored.
        retries: write attempts per batch before it is dropped (with backoff 0.2 s, 0.4 s ...).
    """

    def __init__(self, db: Any = None, *, max_queue: int = 10_000, batch_size: int = 500,
                 flush_interval: float = 0.5, privacy: Privacy | None = None, retries: int = 5) -> None:
        self._db = db
        self._store: Any = None
        self.privacy = privacy or Privacy()
        self.batch_size = max(1, int(batch_size))
        self.flush_interval = float(flush_interval)
        self.retries = max(1, int(retries))
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=max(1, int(max_queue)))
        self._lock = threading.Lock()
        self._counts = {"queued": 0, "written": 0, "dropped": 0, "invalid": 0, "write_errors": 0}
        self._last_error: str | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        atexit.register(self.close)

    # ---- the application's side ----------------------------------------------------------
    def log_call(self, query: str | None = None, answer: str | None = None,
                 contexts: Sequence[Any] | None = None, latency_ms: float | None = None,
                 cost_usd: float | None = None, error: Any = None, feedback: Any = None,
                 metadata: Mapping[str, Any] | None = None, **fields: Any) -> bool:
        """Queue one call for storage. Returns ``True`` if queued, ``False`` if it was dropped
        (queue full, or a field of the wrong type: counted as ``invalid``). Never raises.

        Extra keyword fields: ``timestamp`` (ISO 8601 or datetime; default now), ``call_id``
        (makes a re-sent call idempotent), ``input_tokens``, ``output_tokens``, ``model``.
        """
        try:
            row = normalise_call({"query": query, "answer": answer, "contexts": contexts,
                                  "latency_ms": latency_ms, "cost_usd": cost_usd, "error": error,
                                  "feedback": feedback, "metadata": metadata, **fields},
                                 privacy=self.privacy, source="python")
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._bump("invalid", str(exc))
            return False
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self._bump("dropped", "queue full")
            return False
        with self._lock:
            self._counts["queued"] += 1
            self._pending += 1
        self._ensure_thread()
        return True

    async def alog_call(self, *args: Any, **kwargs: Any) -> bool:
        """``log_call`` for async code: it never awaits I/O (the write happens in the writer
        thread), so it is safe to call on the event loop."""
        return self.log_call(*args, **kwargs)

    def stats(self) -> dict[str, Any]:
        """Counters: queued, written, dropped (queue full or write failures), invalid,
        write_errors, and the last error message."""
        with self._lock:
            return {**self._counts, "in_queue": self._queue.qsize(), "last_error": self._last_error}

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued call is written (or dropped). ``False`` on timeout."""
        self._ensure_thread()
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.1))
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued and stop the writer thread."""
        if self._thread is not None and self._thread.is_alive():
            self.flush(timeout)
            self._stop.set()
            self._thread.join(timeout)
        self._thread = None

    # ---- the writer thread -------------------------------------------------------------------
    def _bump(self, counter: str, message: str | None = None, n: int = 1) -> None:
        with self._lock:
            self._counts[counter] += n
            if message:
                self._last_error = message

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._stop.clear()
                    self._thread = threading.Thread(target=self._run, name="ragmeter-monitor",
                                                    daemon=True)
                    self._thread.start()

    def _get_store(self) -> Any:
        if self._store is None:
            from ragmeter.store import Store, open_store

            self._store = self._db if isinstance(self._db, Store) else open_store(self._db)
        return self._store

    def _run(self) -> None:
        while not self._stop.is_set() or not self._queue.empty():
            batch: list[dict[str, Any]] = []
            try:
                batch.append(self._queue.get(timeout=self.flush_interval))
            except queue.Empty:
                continue
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)
            with self._idle:
                self._pending -= len(batch)
                self._idle.notify_all()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        delay = 0.2
        for attempt in range(self.retries):
            try:
                insert_calls(self._get_store(), batch)
                self._bump("written", n=len(batch))
                return
            except Exception as exc:  # noqa: BLE001 - the database may be down; retry, then count
                self._bump("write_errors", redact(f"{type(exc).__name__}: {exc}"))
                log.warning("ragmeter.monitor: write failed (attempt %d of %d)", attempt + 1, self.retries)
                if attempt + 1 < self.retries:
                    time.sleep(delay)
                    delay *= 2
        self._bump("dropped", n=len(batch))


_default: CallLogger | None = None
_default_lock = threading.Lock()


def configure(db: Any = None, **options: Any) -> CallLogger:
    """Replace the process-wide logger used by :func:`log_call` (flushing the old one).

    Options are :class:`CallLogger`'s (``max_queue``, ``batch_size``, ``flush_interval``,
    ``retries``) plus the privacy settings ``max_text_chars``, ``redact_pii``, ``store_text``.
    """
    global _default
    privacy = Privacy(**{k: options.pop(k) for k in ("max_text_chars", "redact_pii", "store_text")
                         if k in options})
    with _default_lock:
        old, _default = _default, CallLogger(db, privacy=privacy, **options)
    if old is not None:
        old.close()
    return _default


def default_logger() -> CallLogger:
    global _default
    with _default_lock:
        if _default is None:
            _default = CallLogger()
        return _default
