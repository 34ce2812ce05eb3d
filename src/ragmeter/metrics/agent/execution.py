"""Per-run execution statistics of agent traces: step counts, latencies (p50/p95/p99), tool errors.

Figures of the samples given; a stored run's are :func:`ragmeter.analysis.agent_execution.run_execution_stats`,
and ``ragmeter show`` / ``ragmeter agent-stats`` print them (:mod:`ragmeter.apps.cli.agent`)."""

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


def scores_traces(summary: Mapping[str, Any]) -> bool:
    """Whether a run scored agent traces (a metric of the agent family in its summary): what the
    execution statistics of its samples describe."""
    return any(isinstance(v, Mapping) and v.get("family") == "agent" for v in summary.values())
