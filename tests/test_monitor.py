"""Production monitoring: the logging API, HTTP ingest, OpenTelemetry import, aggregates (exact
percentiles), Prometheus exposition, online evaluation, checks, trends and retention."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

import ragmeter.monitor as monitor
from monitor_support import Served
from ragmeter.monitor.calls import count_calls, insert_calls, normalise_call, read_calls
from ragmeter.store import Store

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args, "--db", db],
                          capture_output=True, text=True, timeout=300)


def _seed_calls(db_url: str, n: int = 400, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lat = rng.lognormal(6.0, 0.6, n)
    now = datetime.now(UTC)
    rows = [normalise_call({"query": f"question {i}?", "answer": f"answer {i}",
                            "contexts": [f"context {i}"], "latency_ms": float(lat[i]),
                            "cost_usd": 0.002, "error": "timeout" if i % 40 == 0 else None,
                            "feedback": "up" if i % 4 else "down",
                            "timestamp": (now - timedelta(minutes=i % 600)).isoformat(),
                            "metadata": {"route": "faq" if i % 2 else "chat"}})
            for i in range(n)]
    insert_calls(Store(db_url), rows)
    return lat


# ---- the Python logging API -----------------------------------------------------------------
def test_log_call_writes_in_batches_and_never_raises(db_url):
    log = monitor.CallLogger(db_url, batch_size=7, flush_interval=0.05)
    for i in range(30):
        assert log.log_call(f"q{i}", f"a{i}", ["c"], latency_ms=10.0 + i, cost_usd=0.001,
                            metadata={"route": "r"})
    # wrong types are counted and dropped, not raised into the application
    assert log.log_call("q", "a", latency_ms="fast") is False
    assert log.log_call("q", "a", contexts=42) is False
    assert log.log_call("q", "a", feedback=7) is False
    assert log.flush(10)
    st = log.stats()
    assert st["written"] == 30 and st["invalid"] == 3 and st["dropped"] == 0
    log.close()
    assert count_calls(Store(db_url)) == 30


def test_log_call_drops_and_counts_when_the_queue_is_full(db_url, monkeypatch):
    import threading

    import ragmeter.monitor.logger as logger_mod

    release = threading.Event()

    def stuck_database(store, rows):  # the database hangs, then fails
        release.wait(10)
        raise OSError("database unreachable")

    monkeypatch.setattr(logger_mod, "insert_calls", stuck_database)
    log = monitor.CallLogger(db_url, max_queue=5, batch_size=1, flush_interval=0.01, retries=1)
    # the database hangs: at most one call is in the writer's hands and five are queued; the
    # rest are dropped at once (a blocking put would hang here until the event is released)
    results = [log.log_call("q", "a", latency_ms=1.0) for _ in range(50)]
    assert results.count(False) >= 44 and log.stats()["dropped"] >= 44
    release.set()
    log.close(timeout=5)
    st = log.stats()
    assert st["write_errors"] >= 1 and "database unreachable" in st["last_error"]


def test_async_log_call_and_privacy(db_url):
    log = monitor.CallLogger(db_url, privacy=monitor.Privacy(max_text_chars=40, redact_pii=True),
                             flush_interval=0.05)

    async def app() -> bool:
        return await log.alog_call("mail ana.silva@example.com or call +55 11 91234-5678 now please, thanks",
                                   "ok", ["secret ana.silva@example.com"], latency_ms=5.0, call_id="c-1")

    assert asyncio.run(app())
    log.log_call("same id again", "x", call_id="c-1")  # idempotent by call_id
    assert log.flush(10)
    log.close()
    cols = read_calls(Store(db_url), None, None, columns=("query", "contexts", "call_id"))
    assert cols["call_id"] == ["c-1"]
    q = cols["query"][0]
    assert "example.com" not in q and "91234" not in q and "[email]" in q and "[phone]" in q
    assert len(q) <= 41 and q.endswith("…")
    assert cols["contexts"][0] == ["secret [email]"]


def test_module_level_api_uses_the_configured_store(db_url):
    monitor.configure(db=db_url, flush_interval=0.05)
    assert monitor.log_call("q", "a", latency_ms=3.0)
    assert monitor.flush(10)
    assert monitor.stats()["written"] == 1
    assert count_calls(Store(db_url)) == 1


# ---- aggregates ------------------------------------------------------------------------------
def test_monitor_stats_percentiles_equal_numpy(db_url):
    lat = _seed_calls(db_url)
    out = cli("monitor", "stats", "--window", "1d", "--json", db=db_url)
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["calls"] == 400
    for q in (50, 95, 99):
        assert st["latency_ms"][f"p{q}"] == pytest.approx(float(np.percentile(lat, q)), abs=1e-9)
    assert st["error_rate"] == pytest.approx(10 / 400)
    assert st["cost_per_query_usd"] == pytest.approx(0.002)
    assert st["feedback"]["satisfaction"] == pytest.approx(300 / 400)
    # a narrower window sees only its calls
    narrow = json.loads(cli("monitor", "stats", "--window", "30m", "--json", db=db_url).stdout)
    assert 0 < narrow["calls"] < 400


def test_stats_by_metadata_and_series(db_url):
    _seed_calls(db_url)
    st = monitor.window_stats(Store(db_url), timedelta(days=1), by="route")
    groups = st["by"]["groups"]
    assert set(groups) == {"faq", "chat"} and groups["faq"]["calls"] + groups["chat"]["calls"] == 400
    points = monitor.series(Store(db_url), timedelta(days=1), "hour")
    assert sum(p["calls"] for p in points) == 400 and len(points) >= 7


def test_monitor_check_exit_codes(db_url):
    lat = _seed_calls(db_url)
    recent = np.percentile(lat[[i for i in range(400) if i % 600 < 60]], 95)
    hi = cli("monitor", "check", "--window", "1h", "--max-p95-ms", "1", db=db_url)
    assert hi.returncode == 1 and "FAIL" in hi.stdout and "p95" in hi.stdout
    ok = cli("monitor", "check", "--window", "1h", "--max-p95-ms", str(recent * 100),
             "--max-error-rate", "0.5", db=db_url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = cli("monitor", "check", "--window", "soon", "--max-p95-ms", "1", db=db_url)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_prune_deletes_old_calls(db_url):
    store = Store(db_url)
    old = (datetime.now(UTC) - timedelta(days=120)).isoformat()
    insert_calls(store, [normalise_call({"query": "old", "timestamp": old}),
                         normalise_call({"query": "new"})])
    out = cli("monitor", "prune", "--older-than", "90d", "--yes", db=db_url)
    assert out.returncode == 0 and "deleted 1" in out.stdout
    assert count_calls(store) == 1


def test_normalise_call_errors_name_the_field():
    with pytest.raises(Exception, match=r"calls\[3\]: field 'latency_ms'"):
        normalise_call({"latency_ms": "slow"}, where="calls[3]")
    with pytest.raises(Exception, match="timestamp"):
        normalise_call({"timestamp": "yesterday"})


# ---- HTTP ingest -----------------------------------------------------------------------------
@pytest.fixture
def served(db_url):
    s = Served(db_url)
    yield s
    s.close()


def test_ingest_requires_the_token_and_validates(served, db_url):
    call = {"query": "q", "answer": "a", "contexts": ["c"], "latency_ms": 12.5, "cost_usd": 0.001,
            "error": None, "timestamp": "2026-11-23T10:00:00Z"}
    assert httpx.post(served.url + "/api/v1/calls", json={"calls": [call]}).status_code == 401
    wrong = httpx.post(served.url + "/api/v1/calls", json={"calls": [call]},
                       headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    r = httpx.post(served.url + "/api/v1/calls", json={"calls": [call, {**call, "timestamp": None}]},
                   headers=served.auth)
    assert r.status_code == 200 and r.json() == {"accepted": 2}
    bad = httpx.post(served.url + "/api/v1/calls", json={"calls": [{"latency_ms": "x"}]}, headers=served.auth)
    assert bad.status_code == 422 and "calls[0]" in bad.json()["detail"]
    assert httpx.post(served.url + "/api/v1/calls", content=b"{nope", headers=served.auth).status_code == 400
    too_many = httpx.post(served.url + "/api/v1/calls", json={"calls": [{}] * 10_001}, headers=served.auth)
    assert too_many.status_code == 413
    assert count_calls(Store(db_url)) == 2
    assert "test-token" not in served.output


def test_ingest_disabled_without_token_env(db_url):
    s = Served(db_url, token="")
    try:
        r = httpx.post(s.url + "/api/v1/calls", json={"calls": []}, headers={"Authorization": "Bearer x"})
        assert r.status_code == 503 and "RAGMETER_INGEST_TOKEN" in r.json()["detail"]
    finally:
        s.close()


@pytest.mark.slow
def test_ingest_100k_calls_none_lost(tmp_path):
    db = f"sqlite:///{tmp_path / 'ingest.db'}"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ingest.py"), "--calls", "100000",
                          "--db", db], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["sent"] == 100_000 and figures["stored"] == 100_000 and figures["failed_requests"] == 0
    assert figures["unauthorised_status"] == 401
    assert count_calls(Store(db)) == 100_000
    assert figures["calls_per_s"] > 0 and figures["p99_request_ms"] > 0


def test_prometheus_metrics_parse(served, db_url):
    from prometheus_client.parser import text_string_to_metric_families

    _seed_calls(db_url, n=100)
    text = httpx.get(served.url + "/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["ragmeter_calls"].samples[0].value == 100
    assert fams["ragmeter_call_errors"].samples[0].value == 3
    quant = {s.labels["quantile"] for s in fams["ragmeter_latency_ms"].samples}
    assert quant == {"0.50", "0.95", "0.99"}
    assert "ragmeter_error_rate" in fams and "ragmeter_cost_per_query_usd" in fams


# ---- OpenTelemetry ---------------------------------------------------------------------------
def _instrumented_app(provider):
    """A small RAG function instrumented by hand with OpenInference + GenAI attributes."""
    tracer = provider.get_tracer("rag-app")

    def answer(question: str, fail: bool = False) -> str:
        with tracer.start_as_current_span("rag_pipeline", attributes={
                "openinference.span.kind": "CHAIN", "input.value": json.dumps({"question": question}),
                "input.mime_type": "application/json", "metadata": json.dumps({"route": "faq"})}) as root:
            with tracer.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}) as r:
                for i, (doc_id, text) in enumerate([("d1", "Ferries leave at 7."), ("d2", "Tickets cost 5 EUR.")]):
                    r.set_attribute(f"retrieval.documents.{i}.document.id", doc_id)
                    r.set_attribute(f"retrieval.documents.{i}.document.content", text)
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}) as llm:
                time.sleep(0.02)
                llm.set_attribute("gen_ai.usage.input_tokens", 120)
                llm.set_attribute("gen_ai.usage.output_tokens", 30)
            if fail:
                from opentelemetry.trace import Status, StatusCode

                root.set_status(Status(StatusCode.ERROR, "upstream timeout"))
                return ""
            root.set_attribute("output.value", "The first ferry leaves at 7.")
            return "The first ferry leaves at 7."

    return answer


def test_otlp_http_export_from_the_sdk_becomes_calls(served, db_url):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "ferry-bot", "service.version": "1.4"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=served.url + "/v1/traces", headers=served.auth, timeout=10)))
    app = _instrumented_app(provider)
    app("When does the first ferry leave?")
    app("Broken?", fail=True)
    assert provider.force_flush(20_000)
    provider.shutdown()

    roots = {s.context.trace_id: s for s in memory.get_finished_spans() if s.parent is None}
    cols = read_calls(Store(db_url), None, None, columns=(
        "call_id", "query", "answer", "contexts", "latency_ms", "error", "input_tokens",
        "output_tokens", "model", "meta", "source"))
    assert len(cols["call_id"]) == 2
    by_id = {cid: i for i, cid in enumerate(cols["call_id"])}
    for trace_id, span in roots.items():
        i = by_id[f"otel:{trace_id:032x}"]
        assert cols["latency_ms"][i] == pytest.approx((span.end_time - span.start_time) / 1e6, abs=1e-6)
        assert cols["query"][i] == "When does the first ferry leave?" or cols["query"][i] == "Broken?"
        assert cols["contexts"][i] == [{"id": "d1", "text": "Ferries leave at 7."},
                                       {"id": "d2", "text": "Tickets cost 5 EUR."}]
        assert cols["input_tokens"][i] == 120 and cols["output_tokens"][i] == 30
        assert cols["model"][i] == "gpt-4o-mini" and cols["source"][i] == "otlp"
        assert cols["meta"][i]["service"] == "ferry-bot" and cols["meta"][i]["route"] == "faq"
    ok = cols["query"].index("When does the first ferry leave?")
    assert cols["answer"][ok] == "The first ferry leaves at 7." and cols["error"][ok] is None
    assert cols["error"][cols["query"].index("Broken?")] == "upstream timeout"


def test_import_otlp_json_and_console_exporter_files(tmp_path, db_url):
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    console_file = (tmp_path / "console.txt").open("w")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console_file)))
    app = _instrumented_app(provider)
    for q in ("a?", "b?", "c?"):
        app(q)
    provider.shutdown()
    console_file.close()
    otlp = tmp_path / "traces.json"
    otlp.write_text(MessageToJson(encode_spans(memory.get_finished_spans()), indent=None) + "\n")

    out = cli("monitor", "import", str(otlp), db=db_url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert count_calls(Store(db_url)) == 3
    # the console output of the same spans: same trace ids, so nothing new is stored
    again = cli("monitor", "import", str(tmp_path / "console.txt"), db=db_url)
    assert again.returncode == 0 and "3 calls" in again.stdout
    cols = read_calls(Store(db_url), None, None, columns=("query", "latency_ms"))
    assert sorted(cols["query"]) == ["a?", "b?", "c?"] and count_calls(Store(db_url)) == 3
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [}')
    bad = cli("monitor", "import", str(broken), db=db_url)
    assert bad.returncode == 2 and "broken.json:1:" in bad.stderr and "Traceback" not in bad.stderr


def test_import_of_a_good_and_a_bad_file_stores_nothing(tmp_path, db_url):
    """Every file is checked before any is stored: exit 2 means nothing was stored."""
    span = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7", "name": "rag",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000250000000",
            "attributes": [{"key": "input.value", "value": {"stringValue": "q?"}},
                           {"key": "output.value", "value": {"stringValue": "a."}}]}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"resourceSpans": 5}))
    out = cli("monitor", "import", str(good), str(bad), db=db_url)
    assert out.returncode == 2 and "bad.json" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert count_calls(Store(db_url)) == 0
    both = cli("monitor", "import", str(good), str(good), db=db_url)
    assert both.returncode == 0 and count_calls(Store(db_url)) == 1


# ---- quality over time -----------------------------------------------------------------------
def test_monitor_evaluate_scores_a_sample_and_check_reads_it(db_url):
    _seed_calls(db_url, n=200)
    out = cli("monitor", "evaluate", "--since", "1d", "--sample", "0.25", "--metrics", "correct_keyword,token_f1",
              "--json", "--no-progress", db=db_url)
    # token_f1 needs references, which production calls do not have: no value on every sample, so the
    # run is incomplete (exit 3, as `ragmeter eval`)
    assert out.returncode == 3, out.stderr
    rec = json.loads(out.stdout)
    assert rec["status"] == "incomplete" and any(r.startswith("token_f1: no value") for r in rec["incomplete"])
    assert rec["monitor"]["n_calls"] == 200 and 0 < rec["monitor"]["n_scored"] < 200
    assert rec["monitor"]["n_usable"] == 195  # 5 calls had an error
    run_id = rec["run_id"]
    store = Store(db_url)
    assert store.get_run(run_id).extra["monitor"]["sample_rate"] == 0.25


def test_trend_marks_a_regression(db_url):
    import ragmeter

    good = [{"id": f"s{i}", "answer": "the ferry leaves at seven", "reference": "the ferry leaves at seven"}
            for i in range(40)]
    bad = [{**s, "answer": "no idea"} for s in good]
    ragmeter.evaluate(good, ["token_f1"], db=db_url, name="nightly-1")
    ragmeter.evaluate(good, ["token_f1"], db=db_url, name="nightly-2")
    ragmeter.evaluate(bad, ["token_f1"], db=db_url, name="nightly-3")
    rows = monitor.trend(Store(db_url), "token_f1", name="nightly")
    assert [r["name"] for r in rows] == ["nightly-1", "nightly-2", "nightly-3"]
    assert rows[0]["regression"] is None and rows[1]["regression"] is False and rows[2]["regression"] is True
    out = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "trend", "token_f1", "--db", db_url],
                         capture_output=True, text=True, env={"COLUMNS": "80", **__import__("os").environ})
    assert out.returncode == 0 and "regression" in out.stdout
