"""Production monitoring: log every RAG call, aggregate latency, cost, errors and feedback over
time windows, score a sample of calls online, and follow metrics across runs.

From the application::

    import ragmeter.monitor as monitor

    monitor.configure(db="postgresql+psycopg://...", redact_pii=True, max_text_chars=4000)
    monitor.log_call(query, answer, contexts, latency_ms=812.0, cost_usd=0.0021,
                     metadata={"route": "faq", "version": "2.3.1"})
    await monitor.alog_call(...)        # same, from async code

``log_call`` never raises and never blocks: calls go to a bounded queue that a background thread
writes in batches (dropped calls are counted in ``monitor.stats()``).
"""

from __future__ import annotations

from typing import Any

from ragmeter.monitor.aggregate import parse_duration, series, window_stats
from ragmeter.monitor.calls import Privacy, insert_calls, normalise_call, prune_calls, redact_pii
from ragmeter.monitor.logger import CallLogger, configure, default_logger
from ragmeter.monitor.online import evaluate_window, trend

__all__ = ["CallLogger", "Privacy", "alog_call", "configure", "evaluate_window", "flush",
           "insert_calls", "log_call", "normalise_call", "parse_duration", "prune_calls",
           "redact_pii", "series", "stats", "trend", "window_stats"]


def log_call(query: str | None = None, answer: str | None = None, contexts: Any = None,
             latency_ms: float | None = None, cost_usd: float | None = None, error: Any = None,
             feedback: Any = None, metadata: dict[str, Any] | None = None, **fields: Any) -> bool:
    """Log one production call with the process-wide logger (see :class:`CallLogger`).
    Returns ``False`` when the call was dropped; never raises."""
    try:
        return default_logger().log_call(query, answer, contexts, latency_ms, cost_usd, error,
                                         feedback, metadata, **fields)
    except Exception:  # noqa: BLE001 - never raise into the host application
        return False


async def alog_call(query: str | None = None, answer: str | None = None, contexts: Any = None,
                    latency_ms: float | None = None, cost_usd: float | None = None, error: Any = None,
                    feedback: Any = None, metadata: dict[str, Any] | None = None, **fields: Any) -> bool:
    """:func:`log_call` for async code (never awaits I/O)."""
    return log_call(query, answer, contexts, latency_ms, cost_usd, error, feedback, metadata, **fields)


def flush(timeout: float = 10.0) -> bool:
    """Wait until every call logged so far is written."""
    return default_logger().flush(timeout)


def stats() -> dict[str, Any]:
    """The process-wide logger's counters (queued, written, dropped, invalid, write_errors)."""
    return default_logger().stats()
