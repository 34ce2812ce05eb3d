"""Agent traces read from spans (ragmeter.io.spans): every source format of the bundled weather agent
scores as its trace written by hand; the OTel GenAI conventions' three ways of recording messages
(gen_ai.input/output.messages JSON, the older gen_ai.prompt.N / gen_ai.completion.N attributes,
span events); OpenInference retriever documents; the Agents SDK's handoffs and failed tools; a
malformed span is exit 2 naming the file, the trace and the span; a trace cut short is kept and
what it lacks has no value; a trace of several user turns is a conversation (traces sharing a session id: tests/test_span_sessions.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import run_main
from ragmeter.io.spans import agent_traces_from_otlp, detect_span_format, read_span_file

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "agent_example"
EXPECTATIONS = EXAMPLE / "weather_expectations.yaml"
T0 = 1_764_300_000_000_000_000
Q = "What is the weather in Paris?"
A = "It is sunny and 21C in Paris."

#: bundled recordings of the weather agent, and the format each is detected as
SOURCES = {"weather_otel_genai.json": "otlp", "weather_openinference.json": "otlp",
           "weather_agents_sdk.jsonl": "agents-sdk", "weather_phoenix.csv": "phoenix",
           "weather_langsmith.json": "langsmith", "weather_mlflow.json": "mlflow",
           "weather_langfuse.json": "langfuse"}


def _value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v if isinstance(v, str) else json.dumps(v)}


def span(sid, name, start, end, attrs, parent="a000000000000001", tid="5b8efff798038103d269b633813fc60c",
         events=(), status=None):
    d = {"traceId": tid, "spanId": sid, "name": name, "startTimeUnixNano": str(T0 + start * 1_000_000),
         "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
         "events": [{"name": n, "timeUnixNano": str(T0), "attributes": [{"key": k, "value": _value(v)}
                                                                         for k, v in a.items()]}
                    for n, a in events]}
    if end is not None:
        d["endTimeUnixNano"] = str(T0 + end * 1_000_000)
    if parent:
        d["parentSpanId"] = parent
    if status:
        d["status"] = status
    return d


def request(*spans):
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "t"}}]},
                               "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}


def root(end=900):
    return span("a000000000000001", "invoke_agent weather", 0, end,
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}, parent=None)


def write(tmp_path, obj, name="spans.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def eval_json(*args):
    code, out, err = run_main("eval", *args, "--json")
    return code, (json.loads(out) if code in (0, 3) and out.strip() else None), err


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory):
    code, out, err = eval_json(str(EXAMPLE / "weather_trace.jsonl"), "--config", str(EXPECTATIONS),
                               "--db", str(tmp_path_factory.mktemp("h") / "r.db"))
    assert code == 0, err
    return {k: v["mean"] for k, v in out["metrics"].items()}


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_source_scores_as_the_trace_written_by_hand(name, by_hand, tmp_path):
    path = EXAMPLE / name
    assert detect_span_format(path) == SOURCES[name]
    (t,) = read_span_file(path)
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("get_weather", {"city": "Paris"}, "Sunny, 21C")]
    assert (t.input_text, t.final_text, t.step_count, t.trajectory) == (Q, A, 2, ["get_weather"])
    assert t.input_tokens == sum(s.input_tokens for s in t.spans if s.kind == "llm") > 0
    code, out, err = eval_json(str(path), "--config", str(EXPECTATIONS), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert {k: v["mean"] for k, v in out["metrics"].items()} == by_hand


def test_the_tree_keeps_order_parents_latency_tokens_and_cost():
    (t,) = read_span_file(EXAMPLE / "weather_langfuse.json")
    assert [s.kind for s in t.spans] == ["agent", "llm", "tool", "llm"]
    assert [s.parent_id for s in t.spans] == [None, "obs-agent", "obs-agent", "obs-agent"]
    assert t.spans[0].start_ms == 0 and t.spans[0].latency_ms == pytest.approx(900)
    assert t.spans[2].latency_ms == pytest.approx(90) and t.tool_calls[0].latency_ms == pytest.approx(90)
    assert [s.model for s in t.spans if s.kind == "llm"] == ["gpt-4o-mini"] * 2
    assert t.cost_usd == pytest.approx(0.0000324) and t.latency_ms == pytest.approx(900)


def test_old_indexed_genai_attributes_give_the_calls_without_tool_spans():
    """OpenLLMetry-style gen_ai.prompt.N.* / gen_ai.completion.N.* attributes and no tool span: the
    calls come from the messages, results from the next call's tool messages."""
    chat1 = span("a000000000000002", "openai.chat", 10, 300, {
        "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 5, "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": Q,
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.id": "c1", "gen_ai.completion.0.tool_calls.0.name": "get_weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
        "gen_ai.completion.0.tool_calls.1.id": "c2", "gen_ai.completion.0.tool_calls.1.name": "get_time",
        "gen_ai.completion.0.tool_calls.1.arguments": '{"tz": "CET"}'})
    chat2 = span("a000000000000003", "openai.chat", 400, 800, {
        "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": Q, "gen_ai.prompt.1.role": "tool", "gen_ai.prompt.1.tool_call_id": "c2",
        "gen_ai.prompt.1.content": "10:00", "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.tool_call_id": "c1",
        "gen_ai.prompt.2.content": '{"error": "weather service down"}',
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "I could not get the weather."})
    (t,) = agent_traces_from_otlp(request(root(), chat1, chat2))
    assert [(c.name, c.arguments, c.turn) for c in t.tool_calls] == [
        ("get_weather", {"city": "Paris"}, 0), ("get_time", {"tz": "CET"}, 0)]
    assert t.tool_calls[0].error == "weather service down" and t.tool_calls[1].result == "10:00"
    assert t.final_text == "I could not get the weather." and t.step_count == 2
    assert [s.input_tokens for s in t.spans if s.kind == "llm"] == [30, None]


def test_genai_span_events_give_the_messages():
    chat1 = span("a000000000000002", "chat gpt-4o", 10, 300, {"gen_ai.operation.name": "chat"}, events=[
        ("gen_ai.user.message", {"content": Q}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls", "message": json.dumps(
            {"tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]})})])
    chat2 = span("a000000000000003", "chat gpt-4o", 400, 800, {"gen_ai.operation.name": "chat"}, events=[
        ("gen_ai.user.message", {"content": Q}), ("gen_ai.tool.message", {"id": "c1", "content": "Sunny, 21C"}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": json.dumps({"content": A})})])
    (t,) = agent_traces_from_otlp(request(root(), chat1, chat2))
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("get_weather", {"city": "Paris"}, "Sunny, 21C")]
    assert (t.input_text, t.final_text) == (Q, A)


def test_openinference_retriever_documents_become_the_contexts(tmp_path):
    ret = span("a000000000000002", "retrieve", 10, 50, {
        "openinference.span.kind": "RETRIEVER", "input.value": "Paris weather",
        "retrieval.documents.0.document.id": "d1", "retrieval.documents.0.document.content": "Paris is sunny.",
        "retrieval.documents.0.document.score": 0.9, "retrieval.documents.1.document.content": "Lyon rains."})
    llm = span("a000000000000003", "ChatCompletion", 60, 200, {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.cost.total": 0.002,
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": Q,
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": A})
    top = span("a000000000000001", "rag", 0, 210, {"openinference.span.kind": "CHAIN", "input.value": Q,
                                                   "output.value": A}, parent=None)
    p = write(tmp_path, request(top, ret, llm))
    (t,) = read_span_file(p)
    (r,) = [s for s in t.spans if s.kind == "retriever"]
    assert r.query == "Paris weather" and [(d.id, d.text, d.score) for d in r.documents] == [
        ("d1", "Paris is sunny.", 0.9), (None, "Lyon rains.", None)]
    assert t.cost_usd == pytest.approx(0.002) and t.tool_calls == []
    from ragmeter import load

    (s,) = load(p)
    assert (s.question, s.answer) == (Q, A) and [c.text for c in s.contexts] == ["Paris is sunny.", "Lyon rains."]
    assert s.metadata["trace_id"] == "5b8efff798038103d269b633813fc60c" and s.trace.spans


def test_agents_sdk_handoff_and_a_failed_tool(tmp_path):
    base = {"object": "trace.span", "trace_id": "trace_1", "error": None}
    items = [
        {"object": "trace", "id": "trace_1", "workflow_name": "support", "group_id": None},
        {**base, "id": "span_a", "parent_id": None, "started_at": "2026-01-01T00:00:00+00:00",
         "ended_at": "2026-01-01T00:00:01+00:00", "span_data": {"type": "agent", "name": "triage"}},
        {**base, "id": "span_h", "parent_id": "span_a", "started_at": "2026-01-01T00:00:00.100+00:00",
         "ended_at": "2026-01-01T00:00:00.101+00:00",
         "span_data": {"type": "handoff", "from_agent": "triage", "to_agent": "billing"}},
        {**base, "id": "span_b", "parent_id": None, "started_at": "2026-01-01T00:00:00.200+00:00",
         "ended_at": "2026-01-01T00:00:01+00:00", "span_data": {"type": "agent", "name": "billing"}},
        {**base, "id": "span_f", "parent_id": "span_b", "started_at": "2026-01-01T00:00:00.300+00:00",
         "ended_at": "2026-01-01T00:00:00.400+00:00",
         "span_data": {"type": "function", "name": "refund", "input": '{"order": 7}', "output": None},
         "error": {"message": "Error running tool", "data": {"error": "order 7 not found"}}},
    ]
    p = tmp_path / "sdk.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in items))
    (t,) = read_span_file(p)
    assert t.trajectory == ["handoff:billing", "refund"]
    assert [(c.name, c.arguments, c.error) for c in t.tool_calls] == [("refund", {"order": 7}, "Error running tool")]
    assert t.workflow == "support" and t.agent == "triage"
    # each span is the work of the agent it ran under (per-agent scoring groups by it)
    assert {s.span_id: s.agent for s in t.spans} == {"span_a": "triage", "span_h": "triage",
                                                     "span_b": "billing", "span_f": "billing"}


@pytest.mark.parametrize("bad, where", [
    ({"gen_ai.usage.input_tokens": "many"}, "gen_ai.usage.input_tokens"),
    ({"gen_ai.usage.output_tokens": -3}, "gen_ai.usage.output_tokens"),
    ({"gen_ai.request.model": 7}, "gen_ai.request.model"),
    ({"gen_ai.input.messages": "[{not json"}, "gen_ai.input.messages"),
])
def test_a_malformed_span_is_exit_2_naming_file_trace_and_span(bad, where, tmp_path):
    chat = span("a000000000000002", "chat", 10, 300, {"gen_ai.operation.name": "chat", **bad})
    p = write(tmp_path, request(root(), chat))
    code, _, err = eval_json(str(p), "-m", "tool_choice_correctness", "--db", str(tmp_path / "r.db"))
    assert code == 2, err
    flat = " ".join(err.split())
    assert str(p.name) in flat and "5b8efff798038103d269b633813fc60c" in flat and "a000000000000002" in flat
    assert where in flat
    assert "Traceback" not in err


def test_a_span_without_an_id_is_refused_not_dropped(tmp_path):
    chat = span("a000000000000002", "chat", 10, 300, {"gen_ai.operation.name": "chat"})
    del chat["spanId"]
    p = write(tmp_path, request(root(), chat))
    code, _, err = eval_json(str(p), "-m", "tool_choice_correctness", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "spanId" in " ".join(err.split()) and p.name in " ".join(err.split())


def test_a_trace_cut_short_is_kept_and_what_it_lacks_has_no_value(tmp_path):
    """The agent asked for a tool and the trace ends there (the root never ended): the call is
    scored, the answer is missing, so a metric of the answer has no value."""
    call = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
    chat = span("a000000000000002", "chat gpt-4o", 10, 300, {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": Q}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [call]}]})
    tool = span("a000000000000003", "execute_tool get_weather", 310, None, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": {"city": "Paris"}})
    done = json.loads((EXAMPLE / "weather_otel_genai.json").read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    p = write(tmp_path, request(root(end=None), chat, tool, *[{**x, "traceId": "7" * 32} for x in done]))
    t, complete = read_span_file(p)
    assert t.incomplete is True and t.final_text is None and t.latency_ms is None
    assert [s.status for s in t.spans] == ["unfinished", "ok", "unfinished"]
    assert [(c.name, c.result) for c in t.tool_calls] == [("get_weather", None)]
    assert complete.final_text == A and not getattr(complete, "incomplete", False)
    code, out, err = eval_json(str(p), "--config", str(EXPECTATIONS), "-m", "correct_keyword",
                               "--db", str(tmp_path / "r.db"))
    assert code == 3, err  # correct_keyword has no value at all: the complete trace has no keywords
    m = out["metrics"]
    assert m["tool_choice_correctness"]["n"] == 2 and m["tool_choice_correctness"]["mean"] == 1.0
    assert m["correct_keyword"]["missing_reasons"] == {"missing field: answer": 1,
                                                       "no expected keyword (metadata.keywords or a reference)": 1}


def test_protobuf_file(tmp_path):
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    obj = json.loads((EXAMPLE / "weather_otel_genai.json").read_text())
    for rs in obj["resourceSpans"]:  # protobuf JSON carries ids as base64 bytes
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        import base64

                        sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
    p = tmp_path / "spans.pb"
    p.write_bytes(ParseDict(obj, ExportTraceServiceRequest()).SerializeToString())
    assert detect_span_format(p) == "otlp-proto"
    (t,) = read_span_file(p)
    assert t.trace_id == "5b8efff798038103d269b633813fc60c"
    assert [(c.name, c.arguments) for c in t.tool_calls] == [("get_weather", {"city": "Paris"})]
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\x00not protobuf")
    code, _, err = eval_json(str(bad), "-m", "tool_choice_correctness", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "bad.pb" in err


def test_several_user_turns_make_a_conversation(tmp_path):
    def chat(sid, start, msgs, out):
        return span(sid, "chat gpt-4o", start, start + 50, {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": [{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in msgs],
            "gen_ai.output.messages": [{"role": "assistant", "parts": out}]})

    call = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
    spans = [root(), chat("a000000000000002", 10, [("user", Q)], [call]),
             span("a000000000000003", "execute_tool get_weather", 70, 80, {
                 "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                 "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": {"city": "Paris"},
                 "gen_ai.tool.call.result": "Sunny, 21C"}),
             chat("a000000000000004", 100, [("user", Q)], [{"type": "text", "content": A}]),
             chat("a000000000000005", 200, [("user", Q), ("assistant", A), ("user", "And tomorrow?")],
                  [{"type": "text", "content": "I only know today's weather."}])]
    p = write(tmp_path, request(*spans))
    from ragmeter import load
    from ragmeter.io.spans.conversation import conversation_of

    (t,) = read_span_file(p)
    conv = conversation_of(t)
    assert [(x.role, x.content, [c.name for c in x.tool_calls]) for x in conv.turns] == [
        ("user", Q, []), ("assistant", A, ["get_weather"]), ("user", "And tomorrow?", []),
        ("assistant", "I only know today's weather.", [])]
    ds = load(p)
    assert any("conversation" in s.metadata for s in ds)


def test_not_spans_stay_datasets(tmp_path):
    """A dataset (JSONL samples, a CSV) is not taken for spans: load reads it as before."""
    assert detect_span_format(EXAMPLE / "weather_trace.jsonl") is None
    assert detect_span_format(EXAMPLE / "traces.jsonl") is None
    csv = tmp_path / "d.csv"
    csv.write_text("question,answer\nq,a\n")
    assert detect_span_format(csv) is None


def test_llm_calls_without_a_recorded_cost_are_priced_with_the_judge_price_list():
    from ragmeter.llm.prices import PriceTable
    from ragmeter.llm.span_prices import price_trace

    def chat(sid, start, model, cost=None):
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": "openai",
                 "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 200}
        if cost is not None:
            attrs["gen_ai.usage.cost"] = cost
        return span(sid, f"chat {model}", start, start + 10, attrs)

    (t,) = agent_traces_from_otlp(request(root(), chat("a000000000000002", 10, "gpt-4o-mini"),
                                          chat("a000000000000003", 30, "gpt-4o-mini", cost=0.5),
                                          chat("a000000000000004", 50, "my-local-llama")))
    price_trace(t)
    a, b, c = (s for s in t.spans if s.kind == "llm")
    assert a.cost_usd == pytest.approx(PriceTable.load().get("openai", "gpt-4o-mini").cost(1000, 200))
    assert a.cost_source == "genai-prices"
    assert b.cost_usd == 0.5 and getattr(b, "cost_source", None) is None  # recorded: kept
    assert c.cost_usd is None and t.unpriced_llm_calls == 1
    assert t.cost_usd == pytest.approx(a.cost_usd + 0.5)


def test_a_span_file_is_recognised_from_its_head(tmp_path, monkeypatch):
    """Recognising a file reads its first bytes only (a large dataset is not read twice); a span
    export whose first value is longer than that is recognised by its keys."""
    from ragmeter.io.spans import detect

    monkeypatch.setattr(detect, "HEAD_BYTES", 1500)
    for name in ("weather_langsmith.json", "weather_mlflow.json", "weather_langfuse.json", "weather_otel_genai.json"):
        assert (EXAMPLE / name).stat().st_size > 1500
        assert detect_span_format(EXAMPLE / name) == SOURCES[name]
    ds = tmp_path / "samples.json"
    ds.write_text(json.dumps([{"id": i, "question": '"observations": "run_type": ' * 40} for i in range(50)]))
    assert detect_span_format(ds) is None


def test_a_langgraph_message_list_as_langchain_serializes_it(tmp_path, by_hand):
    """``messages_to_dict(result["messages"])`` of the LangGraph agent, as a row's ``messages``."""
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    msgs = [{"type": "human", "data": {"content": Q, "type": "human"}},
            {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [call]}},
            {"type": "tool", "data": {"content": "Sunny, 21C", "type": "tool", "tool_call_id": "call_1",
                                      "name": "get_weather", "status": "success"}},
            {"type": "ai", "data": {"content": A, "type": "ai", "tool_calls": []}}]
    p = tmp_path / "langgraph.jsonl"
    p.write_text(json.dumps({"id": "weather-paris", "messages": msgs}) + "\n")
    from ragmeter import load

    (s,) = load(p)
    assert [(c.name, c.arguments, c.result) for c in s.trace.tool_calls] == [("get_weather", {"city": "Paris"}, "Sunny, 21C")]
    assert (s.question, s.answer, s.trace.step_count) == (Q, A, 2)
    code, out, err = eval_json(str(p), "--config", str(EXPECTATIONS), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert {k: v["mean"] for k, v in out["metrics"].items()} == by_hand


def test_phoenix_parquet(tmp_path):
    """The dataframe saved with to_parquet: lists of dicts stay lists, times are timestamps."""
    import pandas as pd

    df = pd.read_csv(EXAMPLE / "weather_phoenix.csv")
    for col in ("start_time", "end_time"):
        df[col] = pd.to_datetime(df[col])
    import ast

    for col in [c for c in df.columns if c.startswith("attributes.llm.")]:
        df[col] = [ast.literal_eval(v) if isinstance(v, str) and v.startswith("[") else v for v in df[col]]
    df["events"] = [[] for _ in range(len(df))]
    p = tmp_path / "spans.parquet"
    df.to_parquet(p)
    assert detect_span_format(p) == "phoenix"
    (t,) = read_span_file(p)
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("get_weather", {"city": "Paris"}, "Sunny, 21C")]
    assert (t.input_text, t.final_text) == (Q, A) and t.spans[0].latency_ms > 0


def _mutations(obj, rng, n):
    """``n`` copies of ``obj``, each with one value somewhere inside replaced by another type's."""
    import copy

    paths = []

    def walk(x, path):
        paths.append(path)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, (*path, k))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, (*path, i))

    walk(obj, ())
    for _ in range(n):
        o = copy.deepcopy(obj)
        path = rng.choice(paths[1:])
        node = o
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = rng.choice([None, 7, -1, 1.5, "x", "", [], {}, [1], {"a": 1}, True, "{not json", "[1,"])
        yield o


@pytest.mark.parametrize("name", [n for n in SOURCES if not n.endswith(".csv")])
def test_a_mangled_export_is_read_or_refused_never_a_crash(name, tmp_path):
    """Values of the wrong type anywhere in an export: the trace is read (what was mangled stays
    missing) or the file is refused with a DatasetError naming it, never another exception."""
    import random

    from ragmeter.core.errors import DatasetError

    text = (EXAMPLE / name).read_text()
    objs = [json.loads(x) for x in text.splitlines() if x.strip()] if name.endswith(".jsonl") else [json.loads(text)]
    rng = random.Random(41)
    p = tmp_path / name
    for _ in range(60):
        k = rng.randrange(len(objs))
        mangled = next(_mutations(objs[k], rng, 1))
        rows = [*objs[:k], mangled, *objs[k + 1:]]
        p.write_text("\n".join(json.dumps(r) for r in rows) if name.endswith(".jsonl") else json.dumps(rows[0]))
        try:
            read_span_file(p, SOURCES[name])
        except DatasetError as exc:
            assert str(p) in str(exc) or p.name in str(exc), str(exc)
