"""Agent-trace files as tracers really leave them: a Phoenix CSV cut while it was written, span
times in ISO 8601 read to the microsecond, and counts with their nouns in agent-stats and
monitor import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import run_main
from judge_server import server_fixtures

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "agent_example"


def _phoenix_cut(tmp_path: Path, keep: float) -> Path:
    raw = (EXAMPLE / "weather_phoenix.csv").read_bytes()
    p = tmp_path / "spans.csv"
    p.write_bytes(raw[: int(len(raw) * keep)])
    return p


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.999])
def test_a_phoenix_csv_cut_short_is_exit_2_naming_file_and_line(keep, tmp_path):
    """A cut file was read as a whole one: an open quoted cell swallowed the rest, a short last row
    filled with nothing, and the trace scored as if complete."""
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import read_span_file

    p = _phoenix_cut(tmp_path, keep)
    with pytest.raises(DatasetError) as exc:
        read_span_file(p)
    assert exc.value.file == str(p) and exc.value.line is not None and exc.value.line >= 2
    assert "cut short" in str(exc.value)
    code, _, err = run_main("eval", str(p), "--metrics", "tool_choice_correctness", "--db",
                            str(tmp_path / "r.db"), "--option", 'agent={"expected_tools": ["get_weather"]}')
    assert code == 2, err
    assert f"{p}, line {exc.value.line}" in err and "Traceback" not in err


def test_a_phoenix_row_with_more_cells_than_its_header_is_named(tmp_path):
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import read_span_file

    lines = (EXAMPLE / "weather_phoenix.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    p = tmp_path / "spans.csv"
    p.write_text(lines[0] + lines[1].rstrip("\r\n") + ",surplus\n" + "".join(lines[2:]), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 2: a row of \d+ cells under a header of \d+ columns$"):
        read_span_file(p)
    # the whole file still reads
    assert len(read_span_file(EXAMPLE / "weather_phoenix.csv")) == 1


def test_iso_times_give_exact_latencies_and_offsets(tmp_path):
    """Durations were differences of epoch floats: 0.920166015625 ms for a tool call of 920 µs,
    a span 10 ms after the root at 9.999755859375 ms."""
    from ragmeter.io.spans import read_span_file

    spans = [
        {"object": "trace.span", "id": "span_root", "trace_id": "trace_1", "parent_id": None,
         "started_at": "2026-11-28T12:48:37.185854+00:00", "ended_at": "2026-11-28T12:48:37.328978+00:00",
         "span_data": {"type": "agent", "name": "weather_agent", "tools": ["get_weather"]}, "error": None},
        {"object": "trace.span", "id": "span_tool", "trace_id": "trace_1", "parent_id": "span_root",
         "started_at": "2026-11-28T12:48:37.195854+00:00", "ended_at": "2026-11-28T12:48:37.196774+00:00",
         "span_data": {"type": "function", "name": "get_weather", "input": '{"city": "Paris"}',
                       "output": "Sunny"}, "error": None},
    ]
    p = tmp_path / "sdk.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in spans), encoding="utf-8")
    t = read_span_file(p)[0]
    tool = next(s for s in t.spans if s.kind == "tool")
    assert tool.latency_ms == 0.92 and tool.start_ms == 10.0
    assert t.latency_ms == 143.124
    assert t.tool_calls[0].latency_ms == 0.92


def test_iso_ns_is_exact_for_every_time_shape():
    from ragmeter.io.spans.tree import iso_ms, iso_ns

    assert iso_ns("1970-01-01T00:00:00.000001Z", "t") == 1000
    assert iso_ns("2026-11-28T12:48:37.185854", "t") == 1_795_870_117_185_854_000  # naive: UTC
    assert iso_ns(1_795_870_117_185_854_123, "t") == 1_795_870_117_185_854_123  # ns kept whole
    assert iso_ns(1_795_870_117.5, "t") == 1_795_870_117_500_000_000  # seconds
    assert iso_ns(1_795_870_117_500, "t") == 1_795_870_117_500_000_000  # ms
    assert iso_ns(None, "t") is None and iso_ms("", "t") is None
    assert iso_ms("1970-01-01T00:00:01Z", "t") == 1000.0


def test_agent_stats_and_monitor_import_count_with_their_nouns(tmp_path):
    db = str(tmp_path / "r.db")
    code, _, err = run_main("eval", str(EXAMPLE / "weather_agents_sdk.jsonl"), "--db", db, "--no-progress",
                            "--config", str(EXAMPLE / "weather_expectations.yaml"))
    assert code == 0, err
    code, out, err = run_main("agent-stats", "latest", "--db", db)
    assert code == 0, err
    assert out.splitlines()[0].rstrip().endswith("— 1 agent trace")
    code, out, err = run_main("show", "latest", "--db", db)
    assert code == 0, err
    assert "agent execution stats\n1 trace\n" in out and "1 traces" not in out
    code, out, err = run_main("monitor", "import", str(EXAMPLE / "weather_otel_genai.json"), "--db", db)
    assert code == 0, err
    n = len(json.loads((EXAMPLE / "weather_otel_genai.json").read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"])
    assert f"weather_otel_genai.json: {n} spans → 1 call" in " ".join(out.split())  # wrapped at 80
    assert " calls" not in out


judge_server_module, server = server_fixtures()


def test_simulate_counts_with_their_nouns(server, tmp_path):
    """'stored 1 conversation(s), 2 turns': one conversation is one, and the turns say whose."""
    p = tmp_path / "scenarios.yaml"
    p.write_text("scenarios:\n  - persona: Traveller from Zürich 🌧️\n    goal: Know the weather in Paris.\n"
                 "    expected_outcome: The weather is given.\n", encoding="utf-8")
    code, out, err = run_main("simulate", "--target", f"{server.url}/v1", "--target-model", "M", "--scenarios",
                              str(p), "--name", "sim", "--judge", "openai:sim-user", "--judge-base-url",
                              f"{server.url}/v1", "--turns", "1", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "stored 1 conversation, 2 turns (user and assistant), as dataset:sim@1" in text, out
    assert "(s)" not in text


@pytest.mark.parametrize("args", [["agent-stats"], ["composite"], ["consistency", "a", "b"]])
def test_reading_commands_leave_no_database_behind(args, tmp_path):
    """A mistyped --db made an empty store there, then said it held no run."""
    db = tmp_path / "typo.db"
    code, _, err = run_main(*args, "--db", str(db))
    assert code == 2 and f"no database at {db}" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name,what", [("weather_agents_sdk.jsonl", "OpenAI Agents SDK trace export"),
                                       ("weather_phoenix.csv", "Phoenix's get_spans_dataframe()"),
                                       ("weather_langfuse.json", "Langfuse traces"),
                                       ("weather_langsmith.json", "LangChain / LangGraph runs"),
                                       ("weather_mlflow.json", "MLflow traces")])
def test_monitor_import_names_a_span_export_it_does_not_read(name, what, tmp_path):
    """An Agents SDK export was 'neither OTLP/JSON (resourceSpans) nor a ConsoleSpanExporter span',
    a Phoenix CSV 'not valid JSON': the file is named for what it is, with the command that reads it."""
    db = tmp_path / "m.db"
    code, out, err = run_main("monitor", "import", str(EXAMPLE / name), "--db", str(db))
    text = " ".join(err.split())
    assert code == 2 and what in text and f"`ragmeter eval {EXAMPLE / name}`" in text, err
    code, _, err = run_main("monitor", "import", str(EXAMPLE / "weather_pydantic_ai.pb"), "--db", str(db))
    assert code == 0, err


def test_an_agent_option_that_is_not_json_says_where_it_goes_wrong(tmp_path):
    """`--option agent={"expected_tools": [get_weather]}` stayed text and was 'options.agent must be a
    mapping, got str', with nothing said of the unquoted name."""
    code, _, err = run_main("eval", str(EXAMPLE / "weather_agents_sdk.jsonl"), "--metrics", "tool_correctness",
                            "--option", 'agent={"expected_tools": [get_weather]}', "--db", str(tmp_path / "r.db"))
    text = " ".join(err.split())
    assert code == 2 and "options.agent must be a mapping, got str" in text
    assert "not JSON: Expecting value at character 20 (quote every name and text)" in text
    code, _, err = run_main("eval", str(EXAMPLE / "weather_agents_sdk.jsonl"), "--metrics", "tool_correctness",
                            "--option", "agent=get_weather", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "got str 'get_weather'" in err and "not JSON" not in err


def test_monitor_stats_cost_is_unknown_not_zero_when_no_call_has_one(tmp_path):
    """Spans without a recorded cost made 'cost_usd': 0.0 beside 'cost_per_query_usd': null."""
    db = str(tmp_path / "m.db")
    code, _, err = run_main("monitor", "import", str(EXAMPLE / "weather_otel_genai.json"), "--db", db)
    assert code == 0, err
    code, out, err = run_main("monitor", "stats", "--window", "36500d", "--db", db, "--json")
    assert code == 0, err
    st = json.loads(out)
    assert st["calls"] == 1 and st["cost_usd"] is None and st["cost_per_query_usd"] is None


@pytest.mark.parametrize("name", ["weather_agents_sdk.jsonl", "weather_otel_genai.json"])
def test_a_trace_exported_twice_counts_once(name, tmp_path):
    """One export appended twice to a file doubled the trace: 4 steps and 2 tool calls (Agents SDK)
    for an agent that called the model twice and one tool."""
    from ragmeter.io.spans import read_span_file

    src = EXAMPLE / name
    once = read_span_file(src)[0]
    p = tmp_path / name
    if name.endswith(".jsonl"):
        p.write_text(src.read_text(encoding="utf-8") * 2, encoding="utf-8")
    else:
        doc = json.loads(src.read_text(encoding="utf-8"))
        doc["resourceSpans"] = doc["resourceSpans"] * 2
        p.write_text(json.dumps(doc), encoding="utf-8")
    twice = read_span_file(p)
    assert len(twice) == 1
    t = twice[0]
    assert (t.step_count, len(t.spans), len(t.tool_calls), t.trajectory) == \
        (once.step_count, len(once.spans), len(once.tool_calls), once.trajectory) == (2, len(once.spans), 1, ["get_weather"])


def test_a_span_recorded_twice_with_different_content_is_named(tmp_path):
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import read_span_file

    lines = (EXAMPLE / "weather_agents_sdk.jsonl").read_text(encoding="utf-8").splitlines()
    tool = next(o for o in map(json.loads, lines) if (o.get("span_data") or {}).get("type") == "function")
    tool["span_data"]["output"] = "Rain, 9C"
    p = tmp_path / "spans.jsonl"
    p.write_text("\n".join([*lines, json.dumps(tool)]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"{p}.*span {tool['id']} \('get_weather'\) is recorded twice with "
                                           "different content"):
        read_span_file(p)
    code, _, err = run_main("eval", str(p), "--metrics", "tool_correctness", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "recorded twice" in err


@pytest.mark.parametrize("spans,message", [
    ([{"span_id": "1", "kind": "tool"}], "spans: tool_calls.0.name: Field required (a tool span needs its tool_name)"),
    ([{"span_id": "1", "kind": "tool", "tool_name": "get_weather"}, {"span_id": "1", "kind": "llm"}],
     "span 1 ('') is recorded twice with different content"),
])
def test_a_hand_written_span_trace_that_cannot_be_built_names_file_line_and_field(spans, message, tmp_path):
    """A tool span without its tool_name was a pydantic traceback (exit 1)."""
    import ragmeter
    from ragmeter.core.errors import DatasetError

    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q", "trace": {"spans": spans}}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        ragmeter.load(str(p))
    assert (exc.value.file, exc.value.line, exc.value.field) == (str(p), 1, "trace")
    assert message in str(exc.value)


@pytest.mark.parametrize("trace,field", [
    ({"step_count": -1}, "step_count"),
    ({"latency_ms": -5}, "latency_ms"),
    ({"latency_ms": "inf"}, "latency_ms"),
    ({"tool_calls": [{"name": "get_weather", "latency_ms": -3}]}, "tool_calls.0.latency_ms"),
    ({"spans": [{"span_id": "1", "kind": "llm", "input_tokens": -10}]}, "spans.0.input_tokens"),
    ({"spans": [{"span_id": "1", "kind": "llm", "cost_usd": -0.5}]}, "spans.0.cost_usd"),
])
def test_a_negative_or_infinite_duration_count_or_cost_is_refused(trace, field, tmp_path):
    """A trace with a latency of -5 ms or inf, or -1 steps, was read and skewed agent-stats."""
    import ragmeter
    from ragmeter.core.errors import DatasetError

    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q", "trace": trace}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"{field}: Input should be (greater than or equal to 0|a finite number)"):
        ragmeter.load(str(p))


def _oi_span(sid: str, parent: str | None, name: str, start: int, attrs: dict[str, str]) -> dict:
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": sid, "name": name, "kind": 1,
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000),
            "endTimeUnixNano": str(1_700_000_000_000_000_000 + (start + 5) * 1_000_000),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    if parent:
        span["parentSpanId"] = parent
    return span


def _langgraph_like(tmp_path: Path, tool_input: str, with_request: bool = True) -> Path:
    """A LangGraph ReAct agent as openinference-instrumentation-langchain records it: the tool span's
    input.value is the bare text LangChain passes a one-argument tool ("Paris"), the arguments as
    JSON are in the LLM span's tool call."""
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
           "llm.input_messages.0.message.role": "user",
           "llm.input_messages.0.message.content": "What is the weather in Paris?",
           "llm.output_messages.0.message.role": "assistant"}
    if with_request:
        llm |= {"llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_5",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}'}
    spans = [_oi_span("a000000000000001", None, "LangGraph", 0, {"openinference.span.kind": "CHAIN"}),
             _oi_span("a000000000000002", "a000000000000001", "ChatOpenAI", 1, llm),
             _oi_span("a000000000000003", "a000000000000001", "get_weather", 10,
                      {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": tool_input,
                       "output.value": "Sunny, 21C"})]
    p = tmp_path / "langgraph.json"
    p.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                "scopeSpans": [{"scope": {"name": "oi"}, "spans": spans}]}]}))
    return p


AGENT_ARGS = 'agent={"expected_tools": ["get_weather"], "expected_tool_calls": [{"name": "get_weather", "arguments": %s}]}'


@pytest.mark.parametrize("expected,trace_value,span_value", [
    ('{"city": "Paris"}', 1.0, 1.0),
    ("{}", 0.0, 0.0),
])
def test_per_span_tool_rows_take_the_arguments_the_llm_sent(expected, trace_value, span_value, tmp_path):
    """The tool span's row (--per-span) had no arguments where the span recorded its input as text:
    argument_correctness 0 on the span beside 1 on the trace (0.5 for a run that did it right)."""
    p = _langgraph_like(tmp_path, "Paris")
    code, out, err = run_main("eval", str(p), "--per-span", "--metrics", "argument_correctness", "--option",
                              AGENT_ARGS % expected, "--db", str(tmp_path / "r.db"), "--out",
                              str(tmp_path / "rows.jsonl"), "--json", "--no-progress")
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    values = {r["metadata"]["span_kind"]: r["argument_correctness"] for r in rows if r["metadata"]["span_kind"] != "llm"}
    assert values == {"trace": trace_value, "tool": span_value}, rows


def test_per_span_tool_text_arguments_match_no_expected_arguments(tmp_path):
    """Without the LLM's request, a span whose input is text keeps it as arguments_raw: it matches no
    expected arguments, not even none ({}), on its own row as on the trace."""
    p = _langgraph_like(tmp_path, "Paris", with_request=False)
    code, out, err = run_main("eval", str(p), "--per-span", "--metrics", "argument_correctness", "--option",
                              AGENT_ARGS % "{}", "--db", str(tmp_path / "r.db"), "--out",
                              str(tmp_path / "rows.jsonl"), "--json", "--no-progress")
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    values = {r["metadata"]["span_kind"]: r["argument_correctness"] for r in rows if r["metadata"]["span_kind"] != "llm"}
    assert values == {"trace": 0.0, "tool": 0.0}, rows


@pytest.mark.parametrize("minimum,message", [
    ("trajectory_macth=0.9", "unknown metric 'trajectory_macth'. Did you mean: trajectory_match"),
    ("tool_correctness=2", "tool_correctness=2: outside the metric's range [0, 1]"),
    ("faithfulness=80", "faithfulness=80: outside the metric's range [0, 1]"),
    ("tool_correctness=nan", "tool_correctness=nan: the value must be a finite number"),
])
def test_monitor_check_refuses_a_minimum_it_could_never_check(minimum, message, tmp_path):
    """A misspelt metric was 'no data' (exit 3), nan passed every check, 80 failed every one."""
    db = str(tmp_path / "m.db")
    code, _, err = run_main("monitor", "import", str(EXAMPLE / "weather_otel_genai.json"), "--db", db)
    assert code == 0, err
    code, out, err = run_main("monitor", "check", "--window", "36500d", "--min-metric", minimum, "--db", db)
    assert code == 2 and message in " ".join(err.split()), err
    code, out, err = run_main("monitor", "check", "--window", "36500d", "--max-p95-ms", "1e9", "--db", db)
    assert code == 0 and out.startswith("1 call in the last 36500d"), out + err
    code, out, err = run_main("monitor", "stats", "--window", "36500d", "--db", db)
    assert code == 0 and out.startswith("1 call from "), out + err
    code, out, err = run_main("monitor", "prune", "--older-than", "1s", "--yes", "--db", db)
    assert code == 0 and "deleted 1 call\n" in out, out + err


def test_a_langfuse_traces_list_with_observation_ids_says_how_to_export_them(tmp_path):
    """GET /api/public/traces lists each trace's observations as ids: 'observations[0] must be an
    object' left the user guessing."""
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import read_span_file

    doc = json.loads((EXAMPLE / "weather_langfuse.json").read_text(encoding="utf-8"))
    doc["observations"] = [o["id"] for o in doc["observations"]]
    p = tmp_path / "traces.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"observations\[0\] is an id \('obs-agent'\), as the traces list gives "
                                           r"them: export each trace with its observations \(GET /api/public/traces/"):
        read_span_file(p)


@pytest.mark.parametrize("command", [["eval", "{p}", "--metrics", "tool_correctness"], ["monitor", "import", "{p}"]])
def test_a_gzipped_span_file_cut_short_is_named_not_aborted(command, tmp_path):
    """The recogniser's EOFError reached the CLI as an interrupted prompt: 'aborted', exit 130."""
    import gzip

    whole = gzip.compress((EXAMPLE / "weather_otel_genai.json").read_bytes())
    p = tmp_path / "spans.json.gz"
    p.write_bytes(whole[: len(whole) // 2])
    code, _, err = run_main(*[a.format(p=p) for a in command], "--db", str(tmp_path / "r.db"))
    assert code == 2 and f"{p}: not a readable gzip file (Compressed file ended" in err, err


def test_composite_without_a_value_names_its_missing_components_once():
    code, out, err = run_main("composite", "--value", "tool_choice_correctness=0.9", "--value",
                              "trajectory_match=0.3", "--preset", "openevals")
    text = " ".join(out.split())
    assert code == 0 and "openevals: — (no value) — missing component(s): intent_correctness" in text
    assert text.count("intent_correctness") == 1, out


def test_consistency_of_runs_that_pair_no_sample_is_incomplete(tmp_path):
    """Two runs of an agent (new trace ids each time) paired nothing: a table of dashes, exit 0."""
    db = str(tmp_path / "r.db")
    cfg = str(EXAMPLE / "weather_expectations.yaml")
    for name, f in (("a1", "weather_agents_sdk.jsonl"), ("a2", "weather_otel_genai.json")):
        code, _, err = run_main("eval", str(EXAMPLE / f), "--config", cfg, "--name", name, "--db", db, "--no-progress")
        assert code == 0, err
    code, out, err = run_main("consistency", "a1", "a2", "--db", db)
    assert code == 3 and "nothing to measure (exit 3): samples pair by id" in " ".join(err.split()), out + err
    code, out, err = run_main("consistency", "a1", "a2", "--db", db, "--json")
    assert code == 3 and json.loads(out)["n_samples"] == 0


def test_monitor_stats_by_service_at_80_columns_reads_whole(tmp_path, monkeypatch):
    """Beside a service name the figure headers were cut to 'cal…', 'USD/qu…', 'satis…'."""
    db = str(tmp_path / "m.db")
    doc = json.loads((EXAMPLE / "weather_otel_genai.json").read_text(encoding="utf-8"))
    for rs in doc["resourceSpans"]:
        rs.setdefault("resource", {}).setdefault("attributes", []).append(
            {"key": "service.name", "value": {"stringValue": "openai-loop-openinference-production"}})
    p = tmp_path / "spans.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = run_main("monitor", "import", str(p), "--db", db)
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_main("monitor", "stats", "--window", "36500d", "--by", "service", "--db", db)
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in out, out
    header = next(line for line in lines if line.startswith("service"))
    assert header.split() == ["service", "calls", "p50", "ms", "p95", "ms", "p99", "ms", "errors", "USD/query",
                              "satisf."], header
    assert "openai-loop-" in out and "production" in out  # the long name folds, it is not cut


def test_argument_correctness_without_expected_calls_names_what_it_reads(tmp_path):
    """Its reason was 'no expected trajectory: set options.agent.expected_trajectory ...'."""
    import ragmeter

    res = ragmeter.evaluate(str(EXAMPLE / "weather_trace.jsonl"), ["argument_correctness", "trajectory_match"],
                            db=str(tmp_path / "r.db"), progress=False)
    reasons = res.rows()[0]["no_value_reasons"]
    assert reasons["argument_correctness"].startswith("no expected tool calls with arguments: set "
                                                      "metadata.expected_tool_calls, options.agent.expected_tool_calls")
    assert reasons["trajectory_match"].startswith("no expected trajectory")


def test_agent_stats_of_a_run_without_traces_is_incomplete(tmp_path):
    """A table of dashes and exit 0 for a run that had no agent trace to measure."""
    import ragmeter

    db = str(tmp_path / "r.db")
    rid = ragmeter.evaluate([{"id": "1", "answer": "a", "reference": "a"}], ["token_f1"], db=db, progress=False).run_id
    code, out, err = run_main("agent-stats", rid, "--db", db)
    assert code == 3 and f"run {rid} has no agent traces" in err and out == ""
    code, out, _ = run_main("agent-stats", rid, "--db", db, "--json")
    assert code == 3 and json.loads(out)["n_traces"] == 0
