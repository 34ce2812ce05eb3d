"""A Prometheus text-format exposition of the logged calls, for Grafana and Datadog users.

Counters cover every call stored (and every agent trace: traces, tool calls, tool errors); gauges
describe the last hour (latency percentiles computed exactly on the stored values, error rate, cost
per query, queries per hour; the agents' tool error rate, steps, tool calls and cost per trace) and
the newest online quality run per metric. Computed at scrape time from the store.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def agent_counters(store: Any) -> list[tuple[str, int, str]]:
    """Counters of every stored agent trace (:mod:`ragmeter.monitor.agents`): traces, tool calls,
    tool errors, summed in the database from the figures on each trace's call."""
    from sqlalchemy import func, select

    from ragmeter.monitor.agents import FIGURES_KEY
    from ragmeter.store.models import CallRow

    fig = CallRow.meta[FIGURES_KEY]
    with store.session() as s:
        traces, calls, errors = s.execute(select(
            func.count(fig["tool_calls"].as_integer()),
            func.coalesce(func.sum(fig["tool_calls"].as_integer()), 0),
            func.coalesce(func.sum(fig["tool_errors"].as_integer()), 0)).select_from(CallRow)).one()
    return [("ragmeter_agent_traces", int(traces), "Agent traces received (tool, agent or handoff spans)."),
            ("ragmeter_tool_calls", int(calls), "Tool calls of the agent traces."),
            ("ragmeter_tool_errors", int(errors), "Tool calls of the agent traces that failed.")]


def exposition(store: Any, counters: dict[str, int] | None = None) -> bytes:
    """The ``/metrics`` body (Prometheus text format 0.0.4)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from ragmeter.monitor.aggregate import now_utc, window_stats
    from ragmeter.monitor.online import monitor_runs
    from ragmeter.monitor.spans import pending_spans

    class _Collector:
        def collect(self) -> Any:
            from sqlalchemy import func, select

            from ragmeter.store.models import CallRow

            with store.session() as s:
                total, errors, cost = s.execute(select(
                    func.count(), func.count(CallRow.error), func.coalesce(func.sum(CallRow.cost_usd), 0.0)
                ).select_from(CallRow)).one()
            yield CounterMetricFamily("ragmeter_calls", "RAG calls logged.", value=int(total))
            yield CounterMetricFamily("ragmeter_call_errors", "RAG calls that ended in an error.",
                                      value=int(errors))
            yield CounterMetricFamily("ragmeter_cost_usd", "Cost of the logged calls (USD).",
                                      value=float(cost))
            for name, value in (counters or {}).items():
                yield CounterMetricFamily(f"ragmeter_ingest_{name}", f"Ingest requests: {name}.",
                                          value=int(value))
            yield GaugeMetricFamily("ragmeter_otlp_pending_spans", "OpenTelemetry spans stored while "
                                    "their trace waits for its root span.", value=pending_spans(store))
            st = window_stats(store, timedelta(hours=1), until=now_utc())
            lat = GaugeMetricFamily("ragmeter_latency_ms", "Latency percentile of the calls of the "
                                    "last hour (exact, numpy linear method).", labels=["quantile", "window"])
            for q in ("p50", "p95", "p99"):
                if st["latency_ms"][q] is not None:
                    lat.add_metric([f"0.{q[1:]}", "1h"], st["latency_ms"][q])
            yield lat
            for name, value, help_text in agent_counters(store):
                yield CounterMetricFamily(name, help_text, value=value)
            for key, help_text in (("error_rate", "Share of calls with an error, last hour."),
                                   ("cost_per_query_usd", "Mean cost per call (USD), last hour."),
                                   ("queries_per_hour", "Calls per hour, last hour."),
                                   ("tool_error_rate", "Share of the agents' tool calls that failed, last hour."),
                                   ("steps_per_trace", "Mean LLM calls per agent trace, last hour."),
                                   ("tool_calls_per_trace", "Mean tool calls per agent trace, last hour."),
                                   ("cost_per_trace_usd", "Mean cost per agent trace (USD), last hour.")):
                g = GaugeMetricFamily(f"ragmeter_{key}", help_text, labels=["window"])
                if st[key] is not None:
                    g.add_metric(["1h"], st[key])
                yield g
            quality = GaugeMetricFamily("ragmeter_quality_mean", "Mean of a metric in the newest "
                                        "online evaluation run.", labels=["metric", "run_id"])
            newest: dict[str, tuple[str, str]] = {}
            for run_id, rec in monitor_runs(store).items():
                for m in rec.get("metrics", []):
                    if m not in newest or rec["end"] > newest[m][1]:
                        newest[m] = (run_id, rec["end"])
            for m, (run_id, _) in sorted(newest.items()):
                try:
                    agg = store.run_summary(run_id).get(m)
                except Exception:  # noqa: BLE001 - run deleted since
                    continue
                if agg is not None and agg.mean is not None:
                    quality.add_metric([m, run_id], agg.mean)
            yield quality

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry)
