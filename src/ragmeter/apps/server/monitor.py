"""Monitoring routes of the dashboard: call ingest (JSON and OTLP/HTTP), aggregates, the
Prometheus endpoint, and the monitoring and trend pages.

Writes (``POST /api/v1/calls``, ``POST /v1/traces``) need ``Authorization: Bearer TOKEN`` where
TOKEN is the value of ``$RAGMETER_INGEST_TOKEN`` when the server started; without that variable
ingest is switched off (503). Bodies are limited in bytes and calls per request.
"""

# no ``from __future__ import annotations``: FastAPI reads the route signatures at run time
import hmac
import math
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from ragmeter.apps.server.validate import Rejected, in_thread, parse_json, read_body
from ragmeter.core.errors import ConfigError, DatasetError

TOKEN_ENV = "RAGMETER_INGEST_TOKEN"
MAX_BODY_BYTES = int(os.environ.get("RAGMETER_INGEST_MAX_BYTES", str(16 * 1024 * 1024)))
MAX_CALLS_PER_REQUEST = 10_000
#: an OpenTelemetry Collector's batch processor sends 8,192 spans by default
MAX_SPANS_PER_REQUEST = 20_000


def add_monitor_routes(app: FastAPI, store: Any, page: Callable[..., HTMLResponse]) -> None:
    """Add the monitoring routes to the dashboard ``app`` over ``store``."""
    from ragmeter.monitor.calls import Privacy

    token = os.environ.get(TOKEN_ENV) or None
    privacy = Privacy(max_text_chars=_int_env("RAGMETER_MONITOR_MAX_TEXT_CHARS"),
                      redact_pii=os.environ.get("RAGMETER_MONITOR_REDACT_PII", "") in {"1", "true", "yes"})
    counters = {"accepted_calls": 0, "rejected_requests": 0, "accepted_spans": 0}
    lock = threading.Lock()

    def count(key: str, n: int = 1) -> None:
        with lock:
            counters[key] += n

    def authorise(request: Request) -> None:
        if token is None:
            raise Rejected(503, f"ingest is switched off: start `ragmeter serve` with {TOKEN_ENV} set")
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                                                                  token.encode()):
            raise Rejected(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    def rejected(exc: Rejected) -> JSONResponse:
        count("rejected_requests")
        return exc.response()

    @app.post("/api/v1/calls", tags=["monitor"], summary="Log production RAG calls (batch)",
              responses={400: {"description": "The body is not JSON."},
                         401: {"description": "Missing or wrong bearer token."},
                         413: {"description": "Body or batch too large."},
                         422: {"description": "A call has a field of the wrong type (the detail names it)."}})
    async def ingest_calls(request: Request) -> Any:
        """Body: ``{"calls": [{"query", "answer", "contexts", "latency_ms", "cost_usd", "error",
        "timestamp", "feedback", "model", "metadata", "call_id", ...}]}`` (or a bare list).
        ``timestamp`` is ISO 8601 (default: now); ``call_id`` (up to 1,024 characters, kept
        whole) makes a re-sent call idempotent."""
        from ragmeter.monitor.calls import insert_calls, normalise_call

        def rows_of(body: bytes) -> list[dict[str, Any]]:
            payload = parse_json(body)
            calls = payload.get("calls") if isinstance(payload, dict) else payload
            if not isinstance(calls, list):
                raise Rejected(422, 'expected {"calls": [...]} or a JSON list of calls')
            if len(calls) > MAX_CALLS_PER_REQUEST:
                raise Rejected(413, f"{len(calls)} calls in one request; at most {MAX_CALLS_PER_REQUEST}")
            try:
                return [normalise_call(c, where=f"calls[{i}]", privacy=privacy, source="http")
                        for i, c in enumerate(calls)]
            except DatasetError as exc:
                raise Rejected(422, str(exc)) from None

        try:
            authorise(request)
            body = await read_body(request, MAX_BODY_BYTES)
            rows = await in_thread(rows_of, body)  # parsing 16 MiB takes a while: not on the event loop
        except Rejected as exc:
            return rejected(exc)
        await in_thread(insert_calls, store, rows, write=True)
        count("accepted_calls", len(rows))
        return {"accepted": len(rows)}

    @app.post("/v1/traces", tags=["monitor"], summary="OTLP/HTTP trace receiver",
              responses={400: {"description": "Not an OTLP trace export."},
                         401: {"description": "Missing or wrong bearer token."},
                         413: {"description": "Body too large, or a trace waits with too many spans."},
                         422: {"description": "A span has a field of the wrong shape (the detail names it)."}})
    async def otlp_traces(request: Request) -> Any:
        """OpenTelemetry spans (OTLP/HTTP, protobuf or JSON) following the GenAI semantic
        conventions or OpenInference; each finished trace becomes one logged call. Every span is
        stored when it arrives, so spans acknowledged before their root survive a restart."""
        from ragmeter.monitor.otel import spans_from_otlp_json, spans_from_protobuf
        from ragmeter.monitor.otlp import NotOTLPError
        from ragmeter.monitor.spans import PendingLimitError, receive_spans

        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()

        def spans_of(body: bytes) -> list[Any]:
            try:
                if ctype == "application/json":
                    spans = spans_from_otlp_json(parse_json(body))
                else:
                    spans = spans_from_protobuf(body)
            except NotOTLPError as exc:
                raise Rejected(400, str(exc)) from None
            except DatasetError as exc:
                raise Rejected(422, f"OTLP trace export: {exc}") from None
            if len(spans) > MAX_SPANS_PER_REQUEST:
                raise Rejected(413, f"{len(spans)} spans in one request; at most {MAX_SPANS_PER_REQUEST}")
            return spans

        try:
            authorise(request)
            spans = await in_thread(spans_of, await read_body(request, MAX_BODY_BYTES))
            try:
                done = await in_thread(lambda: receive_spans(store, spans, privacy=privacy), write=True)
            except PendingLimitError as exc:
                raise Rejected(413, str(exc)) from None
            except DatasetError as exc:
                raise Rejected(422, str(exc)) from None
        except Rejected as exc:
            return rejected(exc)
        count("accepted_calls", done["calls"])
        count("accepted_spans", done["spans"])
        if ctype == "application/json":
            return JSONResponse({})
        return Response(b"", media_type="application/x-protobuf")

    @app.get("/api/v1/monitor/stats", tags=["monitor"], summary="Aggregates of the logged calls")
    def monitor_stats(window: Annotated[str, Query(max_length=100, description="15m, 1h, 1d, 7d ... "
                                                   "(at most 36525d)")] = "1d",
                      by: Annotated[str | None, Query(max_length=200, description="Group by model or a "
                                                      "metadata key.")] = None,
                      bucket: Annotated[str | None, Query(pattern="^(minute|hour|day)$")] = None) -> Any:
        from ragmeter.monitor.aggregate import parse_duration, series, window_stats

        try:
            span = parse_duration(window, option="window")
        except ConfigError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        out = window_stats(store, span, by=by)
        if bucket:
            out["series"] = series(store, span, bucket)
        return out

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        from ragmeter.monitor.prom import exposition

        with lock:
            snapshot = dict(counters)
        return Response(exposition(store, snapshot), media_type=CONTENT_TYPE_LATEST)

    @app.get("/monitor", response_class=HTMLResponse, include_in_schema=False)
    def monitor_page(window: str = "1d", bucket: str | None = None,
                     max_p95_ms: float | None = None, max_error_rate: float | None = None,
                     min_metric: Annotated[list[str] | None, Query()] = None) -> HTMLResponse:
        from ragmeter.apps.report import monitor_figures as figures
        from ragmeter.monitor.aggregate import auto_bucket, now_utc, parse_duration, series, window_stats
        from ragmeter.monitor.online import monitor_runs

        try:
            span = parse_duration(window, option="window")
            if bucket is not None and bucket not in {"minute", "hour", "day"}:
                raise ConfigError("bucket must be minute, hour or day")
            for name, value in (("max_p95_ms", max_p95_ms), ("max_error_rate", max_error_rate)):
                if value is not None and (not math.isfinite(value) or value < 0):
                    raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
            minimums = _parse_minimums(min_metric or [])
        except ConfigError as exc:
            return page("error.html.j2", status_code=400, title="ragmeter — monitoring", message=str(exc))
        bucket = bucket or auto_bucket(span)
        stats = window_stats(store, span)
        points = series(store, span, bucket)
        since = now_utc() - span
        quality: dict[str, list[dict[str, Any]]] = {}
        for run_id, rec in sorted(monitor_runs(store).items(), key=lambda kv: kv[1]["end"]):
            if rec["end"].rstrip("Z") < since.isoformat():
                continue
            try:
                summary = store.run_summary(run_id)
            except Exception:  # noqa: BLE001 - deleted since
                continue
            for m, agg in summary.items():
                if agg.mean is None:
                    continue
                quality.setdefault(m, []).append({"end": rec["end"], "run_id": run_id, "mean": agg.mean,
                                                  "ci_low": agg.ci_low, "ci_high": agg.ci_high})
        figs: dict[str, Any] = {}
        if points:
            figs["mon-latency"] = figures.latency(points, max_p95_ms)
            figs["mon-traffic"] = figures.traffic(points)
            figs["mon-errors"] = figures.rate(points, "error_rate", "error rate", max_error_rate)
            if any(p["cost_per_query_usd"] is not None for p in points):
                figs["mon-cost"] = figures.rate(points, "cost_per_query_usd", "cost per query (USD)")
        for i, (m, rows) in enumerate(sorted(quality.items())):
            figs[f"mon-quality-{i}"] = figures.quality(rows, m, minimums.get(m))
        return page("monitor.html.j2", title="ragmeter — monitoring", stats=stats, window=window,
                    bucket=bucket, n_points=len(points), quality=sorted(quality), figures=figs,
                    has_cost="mon-cost" in figs,
                    thresholds={"max_p95_ms": max_p95_ms, "max_error_rate": max_error_rate,
                                **{f"min {k}": v for k, v in minimums.items()}})

    @app.get("/trend/{metric}", response_class=HTMLResponse, include_in_schema=False)
    def trend_page(metric: str, name: str | None = None, limit: Annotated[int, Query(ge=2, le=500)] = 50
                   ) -> HTMLResponse:
        from ragmeter.apps.report import monitor_figures as figures
        from ragmeter.monitor.online import trend

        try:
            rows = trend(store, metric, name=name, limit=limit)
        except ConfigError as exc:
            return page("error.html.j2", status_code=404, title="ragmeter — trend", message=str(exc))
        return page("trend.html.j2", title=f"ragmeter — {metric} over runs", metric=metric, rows=rows,
                    figures={"trend-plot": figures.trend(rows, metric)})

    @app.get("/api/v1/trend/{metric}", tags=["monitor"], summary="A metric across stored runs")
    def trend_api(metric: str, name: str | None = None, limit: Annotated[int, Query(ge=2, le=500)] = 50) -> Any:
        from ragmeter.monitor.online import trend

        try:
            return {"metric": metric, "runs": trend(store, metric, name=name, limit=limit)}
        except ConfigError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=404)


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _parse_minimums(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        shown = repr(item) if len(item) <= 60 else repr(item[:57] + "...")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"min_metric expects metric=value, got {shown}") from None
        if not sep or not key.strip() or not math.isfinite(out[key.strip()]):
            raise ConfigError(f"min_metric expects metric=value (a finite number), got {shown}")
    return out
