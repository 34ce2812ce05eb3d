"""Aggregates of logged calls over a time window and per bucket (minute, hour, day).

Percentiles are exact on the stored latencies: ``numpy.percentile`` with its default
``method="linear"`` (Hyndman and Fan's definition 7, the one Excel's PERCENTILE.INC, pandas and
Prometheus' ``histogram_quantile``-free summaries use); no sketch or histogram approximation.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError
from ragmeter.monitor.agents import agent_figures

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
BUCKETS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
QUANTILES = (50, 95, 99)


#: the longest duration a window may span (100 years: longer reaches before any logged call, and
#: far longer overflows the date arithmetic)
MAX_DURATION = timedelta(days=36_525)


def parse_duration(text: str, *, option: str = "--window") -> timedelta:
    """``"90s"``, ``"15m"``, ``"1h"``, ``"1d"``, ``"2w"`` as a :class:`timedelta` (at most 100 years)."""
    shown = repr(text) if len(str(text)) <= 40 else repr(str(text)[:37] + "...")
    m = _DURATION.match(str(text)) if len(str(text)) <= 100 else None
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"{option} expects a duration such as 15m, 1h, 1d or 90d, got {shown}")
    seconds = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if seconds > MAX_DURATION.total_seconds():
        raise ConfigError(f"{option} is at most {MAX_DURATION.days}d (100 years), got {shown}")
    return timedelta(seconds=seconds)


def now_utc() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {f"p{q}": None for q in QUANTILES}
    arr = np.asarray(values, dtype=float)
    qs = np.percentile(arr, QUANTILES)  # method="linear" (numpy's default)
    return {f"p{q}": float(v) for q, v in zip(QUANTILES, qs, strict=True)}


def summarise(cols: Mapping[str, list[Any]], window: timedelta | None = None) -> dict[str, Any]:
    """Aggregates of the calls in ``cols`` (column lists as returned by ``read_calls``)."""
    n = len(cols.get("ts", []))
    lat = [float(v) for v in cols.get("latency_ms", []) if v is not None]
    cost = [float(v) for v in cols.get("cost_usd", []) if v is not None]
    errors = sum(1 for e in cols.get("error", []) if e)
    fb = [float(v) for v in cols.get("feedback", []) if v is not None]
    tin = [int(v) for v in cols.get("input_tokens", []) if v is not None]
    tout = [int(v) for v in cols.get("output_tokens", []) if v is not None]
    hours = window.total_seconds() / 3600 if window else None
    return {
        "calls": n,
        "queries_per_hour": (n / hours) if hours else None,
        "errors": errors,
        "error_rate": (errors / n) if n else None,
        "latency_ms": {**_quantiles(lat), "mean": float(np.mean(lat)) if lat else None,
                       "max": max(lat) if lat else None, "n": len(lat)},
        "cost_usd": float(sum(cost)) if cost else None,  # no call recorded a cost: unknown, not 0
        "cost_per_query_usd": (float(sum(cost)) / len(cost)) if cost else None,
        "feedback": {"n": len(fb), "rate": (len(fb) / n) if n else None,
                     "satisfaction": float(np.mean(fb)) if fb else None},
        "tokens": {"input": int(sum(tin)), "output": int(sum(tout)),
                   "per_query": ((sum(tin) + sum(tout)) / n) if n and (tin or tout) else None},
        # agent traces among the calls: traces, tool calls and errors, steps, cost per trace
        **agent_figures(cols.get("meta", [None] * n), cols.get("cost_usd", [None] * n)),
    }


def _group_key(model: Any, meta: Any, by: str) -> str:
    if by == "model":
        return str(model) if model is not None else "—"
    value = (meta or {}).get(by) if isinstance(meta, Mapping) else None
    return "—" if value is None else str(value)


def window_stats(store: Any, window: timedelta, *, until: datetime | None = None,
                 by: str | None = None) -> dict[str, Any]:
    """Aggregates of the calls logged in the last ``window`` (up to ``until``, default now),
    optionally also per value of ``by`` (``model`` or any metadata key such as ``route``)."""
    from ragmeter.monitor.calls import read_calls

    until = until or now_utc()
    since = until - window
    cols = read_calls(store, since, until)
    out = {"window": {"start": since.isoformat() + "Z", "end": until.isoformat() + "Z",
                      "seconds": window.total_seconds()},
           "percentile_method": "numpy.percentile, method='linear' (Hyndman-Fan type 7)",
           **summarise(cols, window)}
    if by:
        groups: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for i in range(len(cols["ts"])):
            key = _group_key(cols["model"][i], cols["meta"][i], by)
            for c, values in cols.items():
                groups[key][c].append(values[i])
        out["by"] = {"field": by,
                     "groups": {k: summarise(v, window) for k, v in sorted(groups.items())}}
    return out


def series(store: Any, window: timedelta, bucket: str = "hour", *,
           until: datetime | None = None) -> list[dict[str, Any]]:
    """Per-bucket aggregates over the last ``window``: one row per minute/hour/day that had calls."""
    from ragmeter.monitor.calls import read_calls

    if bucket not in BUCKETS:
        raise ConfigError(f"bucket must be one of {', '.join(BUCKETS)}, got {bucket!r}")
    until = until or now_utc()
    cols = read_calls(store, until - window, until)
    step = BUCKETS[bucket]
    buckets: dict[datetime, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for i, ts in enumerate(cols["ts"]):
        start = _floor(ts, bucket)
        for c, values in cols.items():
            buckets[start][c].append(values[i])
    return [{"start": k.isoformat() + "Z", **summarise(v, step)} for k, v in sorted(buckets.items())]


def _floor(ts: datetime, bucket: str) -> datetime:
    if bucket == "minute":
        return ts.replace(second=0, microsecond=0)
    if bucket == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)


def auto_bucket(window: timedelta) -> str:
    """The bucket that gives a readable number of points for ``window``."""
    if window <= timedelta(hours=3):
        return "minute"
    if window <= timedelta(days=7):
        return "hour"
    return "day"
