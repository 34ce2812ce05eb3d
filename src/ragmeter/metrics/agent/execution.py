"""Per-run execution statistics of agent traces: step counts, latencies (p50/p95/p99), tool errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter.core.schema import Sample

STAT_FIGURES = ("step_count", "tool_calls", "latency_ms", "tool_latency_ms")


def describe(values: Sequence[float]) -> dict[str, Any]:
    """``n, mean, p50, p95, p99, min, max`` of some values (percentiles by linear interpolation,
    numpy's default); all ``None`` but ``n`` when there is none."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "p99": None, "min": None, "max": None}
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    return {"n": int(x.size), "mean": float(x.mean()), "p50": float(p50), "p95": float(p95),
            "p99": float(p99), "min": float(x.min()), "max": float(x.max())}


def _num_or_none(v: Any) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def execution_stats(samples: Iterable[Sample]) -> dict[str, Any]:
    """Execution statistics of a run's agent traces (the agent-evaluation guide's step count, tool calls, latency).

    Per figure (``step_count``, ``tool_calls``, ``latency_ms`` per sample; ``tool_latency_ms`` per
    tool call): :func:`describe` — n, mean, p50, p95, p99, min, max. Where each comes from:

    - step_count: the trace's ``step_count``, else the length of its ``trajectory``, else (chat
      logs) the number of assistant messages, recorded at parse time;
    - tool_calls: the number of tool calls of the trace;
    - latency_ms: the trace's ``latency_ms``, else the sample's ``metadata.latency_ms``.

    Also ``n_traces`` (samples with a trace), ``tool_errors`` (calls with an error) and
    ``tool_error_rate`` (errors / calls; ``None`` without calls). Samples without a trace are
    left out.
    """
    steps: list[float] = []
    calls: list[float] = []
    latency: list[float] = []
    tool_lat: list[float] = []
    errors = n_calls = n = 0
    for s in samples:
        t = s.trace
        if t is None:
            continue
        n += 1
        sc = t.step_count if t.step_count is not None else (len(t.trajectory) if t.trajectory is not None else None)
        if sc is not None:
            steps.append(float(sc))
        calls.append(float(len(t.tool_calls)))
        lat = _num_or_none(t.latency_ms)
        if lat is None:
            lat = _num_or_none(s.metadata.get("latency_ms"))
        if lat is not None:
            latency.append(lat)
        for c in t.tool_calls:
            n_calls += 1
            errors += c.error is not None
            cl = _num_or_none(c.latency_ms)
            if cl is not None:
                tool_lat.append(cl)
    return {"n_traces": n, "step_count": describe(steps), "tool_calls": describe(calls),
            "latency_ms": describe(latency), "tool_latency_ms": describe(tool_lat),
            "tool_errors": errors, "tool_error_rate": (errors / n_calls) if n_calls else None}


def run_execution_stats(store: Any, run_id: str) -> dict[str, Any]:
    """:func:`execution_stats` of a stored run (its samples as evaluated)."""
    return execution_stats(store.run_samples(store.resolve_run(run_id)))


def stats_table_text(stats: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`execution_stats` (used by ``ragmeter show``)."""
    head = f"{'figure':<16}{'n':>6}{'mean':>12}{'p50':>12}{'p95':>12}{'p99':>12}"
    lines = [f"{stats.get('n_traces', 0)} traces", head]
    for name in STAT_FIGURES:
        d = stats.get(name) or {}
        cells = "".join(f"{'—' if d.get(k) is None else format(d[k], '.2f'):>12}"
                        for k in ("mean", "p50", "p95", "p99"))
        lines.append(f"{name:<16}{d.get('n', 0):>6}{cells}")
    rate = stats.get("tool_error_rate")
    lines.append(f"tool errors: {stats.get('tool_errors', 0)}"
                 + (f" ({rate:.1%} of calls)" if rate is not None else ""))
    return "\n".join(lines)


def show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` hook: execution stats when the run scored agent metrics."""
    summary = run.summary or {}
    if not any(isinstance(v, Mapping) and v.get("family") == "agent" for v in summary.values()):
        return {}
    stats = execution_stats(store.run_samples(run.id))
    if not stats["n_traces"]:
        return {}
    return {"agent execution stats": stats_table_text(stats)}
