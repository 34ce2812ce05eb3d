"""Agent traces in production monitoring: spans made by the real OpenTelemetry SDK and sent by its
OTLP/HTTP exporter to a real `ragmeter serve` are assembled into agent traces, counted by
`monitor stats` (traces, tool calls, tool errors, steps, cost per trace), the trend and the
Prometheus metrics, and scored by `monitor evaluate` (ragmeter.monitor.agents)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from cli_runner import run_main
from monitor_support import Served
from ragmeter.monitor.agents import KV_TRACES, agent_figures, read_traces
from ragmeter.monitor.calls import read_calls
from ragmeter.store import Store

pytestmark = pytest.mark.slow  # a server process and the SDK's exporter


@pytest.fixture
def db_url(tmp_path):
    url = f"sqlite:///{tmp_path}/monitor.db"
    Store(url)  # created before the server opens it
    return url


@pytest.fixture
def served(db_url):
    s = Served(db_url)
    yield s
    s.close()


def _agent(provider):
    """A small weather agent instrumented by hand with the OTel GenAI conventions: invoke_agent,
    chat (asks for a tool), execute_tool, chat (answers). ``fail`` makes the tool fail."""
    from opentelemetry.trace import Status, StatusCode

    tracer = provider.get_tracer("weather-agent")

    def run(city: str, *, fail: bool = False, tools: int = 1) -> None:
        question = f"What is the weather in {city}?"
        with tracer.start_as_current_span("invoke_agent weather_bot", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_bot"}):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 12, "gen_ai.usage.cost": 0.001,
                    "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                        {"type": "text", "content": question}]}]),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                        {"type": "tool_call", "id": f"c{i}", "name": "get_weather", "arguments": {"city": city}}
                        for i in range(tools)]}])}):
                time.sleep(0.005)
            for i in range(tools):
                with tracer.start_as_current_span("execute_tool get_weather", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                        "gen_ai.tool.call.id": f"c{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"city": city})}) as tool:
                    if fail:
                        tool.set_status(Status(StatusCode.ERROR, "weather service timeout"))
                    else:
                        tool.set_attribute("gen_ai.tool.call.result", json.dumps({"temp_c": 21}))
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 60, "gen_ai.usage.output_tokens": 9, "gen_ai.usage.cost": 0.002,
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                        {"type": "text", "content": f"It is 21 C in {city}."}]}])}):
                time.sleep(0.005)

    return run


def _rag(provider):
    """A plain RAG pipeline's trace (retriever, then an LLM): a call, not an agent trace."""
    tracer = provider.get_tracer("rag-app")
    with tracer.start_as_current_span("rag_pipeline", attributes={
            "openinference.span.kind": "CHAIN", "input.value": "When does the ferry leave?",
            "output.value": "At 7."}):
        with tracer.start_as_current_span("retrieve", attributes={
                "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.content": "Ferries leave at 7."}):
            pass


def _export(served, send) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-bot"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=served.url + "/v1/traces", headers=served.auth, timeout=10)))
    send(provider)
    assert provider.force_flush(20_000)
    provider.shutdown()


def _send_three(provider) -> None:
    agent = _agent(provider)
    agent("Paris")                      # 1 tool call, fine
    agent("Oslo", fail=True, tools=2)   # 2 tool calls, both failed
    _rag(provider)


def test_served_agent_traces_are_counted_in_stats_trend_and_prometheus(served, db_url):
    _export(served, _send_three)
    cols = read_calls(Store(db_url), None, None, columns=("call_id", "meta", "cost_usd", "error"))
    assert len(cols["call_id"]) == 3  # every trace is a call; two of them are agent traces
    figs = [m.get("agent_trace") for m in cols["meta"]]
    assert sorted(f["tool_calls"] for f in figs if f) == [1, 2] and figs.count(None) == 1

    code, out, err = run_main("monitor", "stats", "--json", "--db", db_url, "--bucket", "hour")
    assert code == 0, err
    st = json.loads(out)
    assert st["calls"] == 3 and st["traces"] == 2
    assert st["tool_calls"] == 3 and st["tool_errors"] == 2
    assert st["tool_error_rate"] == pytest.approx(2 / 3)
    assert st["steps"] == 4 and st["steps_per_trace"] == pytest.approx(2.0)  # two LLM calls per trace
    assert st["cost_per_trace_usd"] == pytest.approx(0.003)  # the sum of each trace's LLM costs
    assert sum(p["traces"] for p in st["series"]) == 2  # the trend carries them per bucket
    assert sum(p["tool_errors"] for p in st["series"]) == 2

    code, out, err = run_main("monitor", "stats", "--db", db_url)
    assert code == 0, err
    assert "agent traces 2: tool calls 3, tool errors 2" in out

    api = httpx.get(served.url + "/api/v1/monitor/stats", params={"window": "1d"}, headers=served.auth).json()
    assert api["traces"] == 2 and api["tool_errors"] == 2

    text = httpx.get(served.url + "/metrics").text
    from prometheus_client.parser import text_string_to_metric_families

    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert values[("ragmeter_agent_traces_total", ())] == 2
    assert values[("ragmeter_tool_calls_total", ())] == 3
    assert values[("ragmeter_tool_errors_total", ())] == 2
    assert values[("ragmeter_tool_error_rate", (("window", "1h"),))] == pytest.approx(2 / 3)
    assert values[("ragmeter_cost_per_trace_usd", (("window", "1h"),))] == pytest.approx(0.003)


def test_served_agent_traces_are_stored_whole_and_scored_by_monitor_evaluate(served, db_url):
    _export(served, _send_three)
    store = Store(db_url)
    kept = store.kv_list(KV_TRACES)
    assert len(kept) == 2
    traces = read_traces(store, kept)
    paris = next(t for t in traces.values() if t.final_text == "It is 21 C in Paris.")
    assert [(c.name, c.arguments, c.error) for c in paris.tool_calls] == [("get_weather", {"city": "Paris"}, None)]
    assert [sp.kind for sp in paris.spans] == ["agent", "llm", "tool", "llm"]
    oslo = next(t for t in traces.values() if t.final_text == "It is 21 C in Oslo.")
    assert [c.error for c in oslo.tool_calls] == ["weather service timeout"] * 2

    agent_opt = json.dumps({"expected_tools": ["get_weather"], "expected_trajectory": ["get_weather"]})
    code, out, err = run_main("monitor", "evaluate", "--metrics", "tool_choice_correctness,trajectory_match",
                              "--option", f"agent={agent_opt}", "--db", db_url, "--json", "--no-progress")
    assert code == 0, err
    res = json.loads(out)
    assert res["monitor"]["n_agent_traces"] == 2 and res["monitor"]["n_scored"] == 3
    summary = res["summary"]
    assert summary["tool_choice_correctness"]["n"] == 2 and summary["tool_choice_correctness"]["mean"] == 1.0
    # trajectory_match: Paris called get_weather once (1.0); Oslo twice where once was expected (< 1)
    assert summary["trajectory_match"]["n"] == 2 and summary["trajectory_match"]["max"] == 1.0
    assert summary["trajectory_match"]["min"] < 1.0
    # the RAG call has no trace: no value for the agent metrics, with the reason
    assert summary["trajectory_match"]["missing_reasons"] == {"missing field: trace": 1}


def test_agent_figures_of_calls_without_traces():
    assert agent_figures([None, {"route": "x"}], [0.1, None]) == {
        "traces": 0, "tool_calls": 0, "tool_errors": 0, "tool_error_rate": None, "steps": 0,
        "steps_per_trace": None, "tool_calls_per_trace": None, "cost_per_trace_usd": None}
    got = agent_figures([{"agent_trace": {"tool_calls": 2, "tool_errors": 1, "steps": 3, "cost_usd": None}}],
                        [0.5])
    assert got["cost_per_trace_usd"] == 0.5 and got["tool_error_rate"] == 0.5  # the call's cost when no span has one


def test_prune_deletes_the_stored_traces(db_url):
    from datetime import timedelta

    from ragmeter.core.schema import AgentTrace, TraceSpan
    from ragmeter.monitor.agents import attach, insert_trace_rows
    from ragmeter.monitor.calls import Privacy, insert_call_rows, normalise_call, prune_calls

    store = Store(db_url)
    trace = AgentTrace(trace_id="t1", spans=[TraceSpan(span_id="a", kind="tool", tool_name="f",
                                                       tool_arguments={"q": "mail me at a@b.example"})],
                       tool_calls=[{"name": "f", "arguments": {"q": "mail me at a@b.example"}}])
    rows = [normalise_call({"call_id": "otel:t1", "timestamp": "2020-01-01T00:00:00Z"})]
    kv = attach(rows, {"t1": trace}, Privacy(redact_pii=True))
    with store.session() as s, s.begin():
        insert_call_rows(s, rows)
        insert_trace_rows(s, kv)
        insert_trace_rows(s, kv)  # a re-sent request stores it once
    kept = read_traces(store, ["otel:t1"])["otel:t1"]
    assert kept.spans[0].tool_arguments == {"q": "mail me at [email]"}  # the receiver's privacy options
    assert prune_calls(store, timedelta(days=1)) == 1
    assert store.kv_list(KV_TRACES) == {}


def test_dashboard_monitor_page_shows_the_agent_figures(served, db_url):
    _export(served, _send_three)
    page = httpx.get(served.url + "/monitor", params={"window": "1d"}).text
    table = page.split('id="monitor-agents"', 1)[1].split("</table>", 1)[0]
    cells = [c.split(">", 1)[1] for c in table.split("<td")[1:]]
    assert [c.split("<", 1)[0] for c in cells[:3]] == ["2", "3", "2"]  # traces, tool calls, tool errors


def test_a_trace_no_convention_reads_as_an_agents_is_still_a_call_and_says_why(db_url):
    """A tool span without a tool name: the call is stored (its root is never refused for it, which
    would leave the children waiting for ever) with the reader's message, and no agent trace."""
    from ragmeter.io.spans.otlp import decode_export
    from ragmeter.monitor.spans import receive_spans

    def span(sid, parent, name, attrs):
        return {"traceId": "ab" * 16, "spanId": sid, "parentSpanId": parent, "name": name,
                "startTimeUnixNano": str(time.time_ns() - 10**9), "endTimeUnixNano": str(time.time_ns()),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}

    export = {"resourceSpans": [{"scopeSpans": [{"spans": [
        span("00000000000000a1", "", "agent", {"openinference.span.kind": "AGENT", "input.value": "hi",
                                                "output.value": "done"}),
        span("00000000000000a2", "00000000000000a1", "execute_tool ", {"openinference.span.kind": "TOOL"})]}]}]}
    store = Store(db_url)
    done = receive_spans(store, decode_export(export))
    assert done["calls"] == 1 and done["agent_traces"] == 0
    meta = read_calls(store, None, None, columns=("meta",))["meta"][0]
    assert "tool name" in meta["agent_trace_error"] and "agent_trace" not in meta
