"""Traces of one session joined into a conversation: a chat app writes one trace per user message
and links them by a session id (OpenInference ``session.id``, OTel GenAI ``gen_ai.conversation.id``,
the Agents SDK's ``group_id``, LangSmith thread metadata, MLflow's ``mlflow.trace.session``,
Langfuse's ``sessionId``). Each bundled recording of the weather agent is copied into a second turn
of the same session (a later start, written first in the file): the two traces read as one
conversation in the order they started, each turn with its own answer and tool calls."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runner import run_main
from ragmeter.io.spans import read_span_file
from ragmeter.io.spans.conversation import conversations_of

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "agent_example"
Q, A = "What is the weather in Paris?", "It is sunny and 21C in Paris."
Q2, A2 = "What is the weather in Lyon?", "It is cloudy and 17C in Lyon."


def _later(text: str) -> str:
    """The same recording a day later: ISO dates moved, epoch nanoseconds moved by a day."""
    text = text.replace("2026-11-28T", "2026-11-29T")
    return re.sub(r'("(?:start_time_unix_nano|end_time_unix_nano|startTimeUnixNano|endTimeUnixNano)": )("?)(\d{16,})"?',
                  lambda m: f"{m.group(1)}{m.group(2)}{int(m.group(3)) + 86_400 * 10**9}{m.group(2)}", text)


def _copy(obj, ids: dict[str, str]) -> dict:
    text = json.dumps(obj).replace(Q, Q2).replace(A, A2)
    for old, new in ids.items():
        text = text.replace(old, new)
    return json.loads(_later(text))


def langfuse(sid):
    t = json.loads((EXAMPLE / "weather_langfuse.json").read_text())
    t["sessionId"] = sid
    return [_copy(t, {"lf-trace-1": "lf-trace-2"}), t]


def langsmith(sid):
    t = json.loads((EXAMPLE / "weather_langsmith.json").read_text())
    t.setdefault("extra", {}).setdefault("metadata", {})["thread_id"] = sid
    return [_copy(t, {"9a51-000000000001": "9a51-000000000777"}), t]


def mlflow(sid):
    t = json.loads((EXAMPLE / "weather_mlflow.json").read_text())
    t["info"]["trace_metadata"]["mlflow.trace.session"] = sid
    tid = t["info"]["trace_id"]
    return [_copy(t, {tid: tid[:-4] + "beef", "NBWuc3NsinUGgmLmlOZmug==": "NBWuc3NsinUGgmLmlOZmXX=="}), t]


def agents_sdk(sid):
    items = [json.loads(x) for x in (EXAMPLE / "weather_agents_sdk.jsonl").read_text().splitlines() if x.strip()]
    for x in items:
        if x["object"] == "trace":
            x["group_id"] = sid
    ids = {x["id"]: x["id"] + "b" for x in items if x["object"] == "trace.span"}
    ids["trace_cfb2aa2328a44a34a5ed92c8ad3a246d"] = "trace_00000000000000000000000000000002"
    second = [_copy(x, ids) for x in items]
    return second + items


def openinference(sid):
    req = json.loads((EXAMPLE / "weather_openinference.json").read_text())
    for rs in req["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s.setdefault("attributes", []).append({"key": "session.id", "value": {"stringValue": sid}})
    return [_copy(req, {"j4pXl2TouDLvsNA/U85sCA==": "j4pXl2TouDLvsNA/U85sXX=="}), req]


SOURCES = {"langfuse": langfuse, "langsmith": langsmith, "mlflow": mlflow, "agents-sdk": agents_sdk,
           "openinference": openinference}


def write_jsonl(tmp_path: Path, objs, name="session.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return p


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_traces_of_a_session_are_one_conversation_in_start_order(source, tmp_path):
    p = write_jsonl(tmp_path, SOURCES[source]("chat-42"))
    traces = read_span_file(p)
    assert len(traces) == 2 and {t.session_id for t in traces} == {"chat-42"}
    assert {t.input_text for t in traces} == {Q, Q2}
    first = next(t for t in traces if t.input_text == Q)
    second = next(t for t in traces if t.input_text == Q2)  # written first, started a day later
    (conv,) = conversations_of(traces)
    assert conv.id == "chat-42"
    assert [(t.role, t.content, [c.name for c in t.tool_calls]) for t in conv.turns] == [
        ("user", Q, []), ("assistant", A, ["get_weather"]), ("user", Q2, []), ("assistant", A2, ["get_weather"])]
    assert conv.metadata["trace_ids"] == [first.trace_id, second.trace_id]
    assert [t.metadata.get("trace_id") for t in conv.turns if t.role == "assistant"] == conv.metadata["trace_ids"]


def test_without_a_shared_session_each_trace_stays_a_sample(tmp_path):
    first, second = langfuse("a")
    second["sessionId"] = "b"
    traces = read_span_file(write_jsonl(tmp_path, [first, second]))
    assert conversations_of(traces) is None
    from ragmeter import load

    ds = load(write_jsonl(tmp_path, [first, second], "two.jsonl"))
    assert len(ds) == 2 and {s.metadata["session_id"] for s in ds} == {"a", "b"}


def test_history_sent_again_gives_each_user_message_once():
    from ragmeter.core.schema import AgentTrace, TraceSpan

    def trace(tid, start, users, answer):
        msgs = []
        for u in users[:-1]:
            msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": "ok"}]
        msgs.append({"role": "user", "content": users[-1]})
        llm = TraceSpan(span_id=tid + "-1", kind="llm", input=msgs, output=[{"role": "assistant", "content": answer}])
        return AgentTrace(trace_id=tid, spans=[llm], input_text=users[0], final_text=answer, session_id="s",
                          started_ms=start)

    full = [trace("t1", 1.0, ["hi"], "hello"), trace("t2", 2.0, ["hi", "yes"], "done"),
            trace("t3", 3.0, ["yes"], "again")]  # no history, the same words as the last message: a turn
    (conv,) = conversations_of(full)
    assert [(t.role, t.content) for t in conv.turns] == [
        ("user", "hi"), ("assistant", "hello"), ("user", "yes"), ("assistant", "done"),
        ("user", "yes"), ("assistant", "again")]


def test_a_session_file_scores_per_turn_from_the_command_line(tmp_path):
    p = write_jsonl(tmp_path, langfuse("chat-7"))
    code, out, err = run_main("eval", str(p), "--config", str(EXAMPLE / "weather_expectations.yaml"), "--json",
                              "--db", f"sqlite:///{tmp_path}/s.db", "--no-progress")
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    # each turn is scored as its trace alone is (tests/test_span_readers.py: the same values)
    assert {k: (m["n"], m["mean"]) for k, m in metrics.items()} == {
        "tool_choice_correctness": (2, 1.0), "tool_completeness": (2, 0.5), "trajectory_match": (2, 0.3),
        "trajectory_match@strict": (2, 0.0), "trajectory_match@subset": (2, 1.0),
        "trajectory_match@superset": (2, 0.0)}
