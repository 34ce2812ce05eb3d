"""Conversations: readers of every format, conversation metrics through the scripted judge,
per-turn metrics, intervals clustered by conversation, `show --json`, dry runs, judge garbage."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from judge_server import judge_options, server_fixtures
from ragmeter.apps.cli import app
from ragmeter.conversations import Conversation, parse_conversation
from ragmeter.conversations.model import to_samples
from ragmeter.conversations.readers import looks_like_conversation
from ragmeter.conversations.scope import cluster_ci
from ragmeter.conversations.writers import to_deepeval, to_openai, to_ragas
from ragmeter.core.errors import DatasetError
from ragmeter.io.readers import bundled_path, load
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from references import require_reference

runner = CliRunner()
judge_server_module, server = server_fixtures()
CONV_METRICS = ["knowledge_retention", "role_adherence", "conversation_relevancy", "conversation_completeness"]


def example_conversations() -> list[Conversation]:
    return [parse_conversation(json.loads(line)) for line in bundled_path("example-chat").read_text().splitlines()]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=True)


# ---- the bundled example -----------------------------------------------------------------------
def test_example_chat_has_twenty_conversations_of_three_to_eight_turns_with_faults():
    convs = example_conversations()
    assert len(convs) >= 20
    assert all(3 <= len(c.turns) <= 8 for c in convs)
    kinds = [c.metadata["kind"] for c in convs]
    assert kinds.count("forgetting") >= 3 and kinds.count("role_break") >= 3
    assert all(t.reference and t.contexts for c in convs for t in c.turns if t.role == "assistant")
    ds = load("example-chat")
    n_turns = sum(len(c.assistant_positions()) for c in convs)
    assert len(ds.samples) == len(convs) + n_turns


# ---- readers -----------------------------------------------------------------------------------
@pytest.mark.contract
def test_the_three_tools_formats_read_back_to_the_same_conversation():
    ConversationalTestCase = require_reference("deepeval.test_case").ConversationalTestCase
    MultiTurnSample = require_reference("ragas.dataset_schema").MultiTurnSample

    for conv in example_conversations():
        de = ConversationalTestCase(**to_deepeval(conv))  # the tools accept what we write
        de_json = json.loads(de.model_dump_json(by_alias=True))
        rg = to_ragas(conv)
        extra = {k: rg.pop(k) for k in ("id", "chatbot_role", "metadata") if k in rg}
        rg_json = {**MultiTurnSample(**rg).model_dump(), **extra}
        back = [parse_conversation(x, default_id=conv.id) for x in (de_json, rg_json, to_openai(conv))]
        for b in back:
            assert [(t.role, t.content, t.reference, [c.text for c in t.contexts or []]) for t in b.turns] == \
                   [(t.role, t.content, t.reference, [c.text for c in t.contexts or []]) for t in conv.turns]
            assert b.chatbot_role == conv.chatbot_role


def test_anthropic_messages_with_tool_use_and_results():
    msgs = {"id": "a1", "system": "You are a ferry assistant.", "messages": [
        {"role": "user", "content": "When is the next ferry?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                          {"type": "tool_use", "id": "t1", "name": "timetable", "input": {"route": "halden"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "10:00"}]},
        {"role": "assistant", "content": "The next ferry leaves at 10:00."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."}]}
    assert looks_like_conversation(msgs)
    conv = parse_conversation(msgs)
    assert conv.chatbot_role == "You are a ferry assistant."
    assert [t.role for t in conv.turns] == ["user", "assistant", "user", "assistant"]
    assert conv.turns[1].content == "Let me check.\nThe next ferry leaves at 10:00."
    assert conv.turns[1].tool_calls[0].name == "timetable" and conv.turns[1].tool_calls[0].result == "10:00"


def test_openai_tool_calls_attach_results_and_one_trace_message_list_is_not_a_conversation():
    msgs = [{"role": "user", "content": "Book a ticket"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{\"n\": 1}"}}],
             "metadata": {"expected_tools": ["book"]}},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "Booked."}]
    conv = parse_conversation(msgs)
    t = conv.turns[1]
    assert t.tool_calls[0].arguments == {"n": 1} and t.tool_calls[0].result == "ok" and t.expected_tools == ["book"]
    assert not looks_like_conversation({"messages": msgs})  # one user message: an agent trace


@pytest.mark.parametrize("row, field", [
    ({"turns": [{"role": "robot", "content": "x"}]}, "turns[0].role"),
    ({"turns": [{"role": "user", "content": 3}]}, "turns[0].content"),
    ({"turns": []}, "turns"),
    ({"user_input": [{"type": "alien", "content": "x"}]}, "user_input[0].type"),
    ({"user_input": [{"type": "ai", "content": "x", "tool_calls": [{"args": {}}]}]}, "user_input[0].tool_calls[0].name"),
    ([{"role": "user", "content": {"a": 1}}], "messages[0].content"),
    ([{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}],
     "messages[0].tool_calls[0].arguments"),
    ({"turns": [{"role": "assistant", "content": "x", "contexts": 5}]}, "turns[0].contexts"),
    ({"turns": [{"role": "user", "content": "x"}], "reference_topics": "ferries"}, "reference_topics"),
])
def test_malformed_conversations_name_the_field(row, field):
    with pytest.raises(DatasetError) as exc:
        parse_conversation(row, file="f.jsonl", line=3)
    assert exc.value.field == field and "f.jsonl" in str(exc.value) and "line 3" in str(exc.value)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                     max_leaves=20)
_msg = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool", "system", "x", None])},
                             optional={"content": _json, "tool_calls": _json, "metadata": _json, "type": _json})


@settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(row=st.one_of(_json, st.lists(_msg, max_size=5),
                     st.fixed_dictionaries({"turns": st.lists(_msg | _json, max_size=4)}, optional={"id": _json}),
                     st.fixed_dictionaries({"user_input": st.lists(_msg | _json, max_size=4)}),
                     st.fixed_dictionaries({"messages": st.lists(_msg, max_size=5)}, optional={"system": _json})))
def test_fuzz_readers_give_a_conversation_or_a_dataset_error(row):
    try:
        conv = parse_conversation(row)
    except DatasetError:
        return
    to_samples(conv)  # what a reader accepts can be scored


def test_a_file_of_each_format_loads_and_bad_lines_are_dataset_errors(tmp_path):
    convs = example_conversations()[:3]
    for name, write in (("de", to_deepeval), ("ragas", to_ragas), ("openai", to_openai)):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(json.dumps(write(c)) + "\n" for c in convs))
        ds = load(p)
        assert sum(1 for s in ds.samples if "conversation" in s.metadata) == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(to_deepeval(convs[0])) + "\n" + '{"turns": [{"role": "user"}]}\n')
    with pytest.raises(DatasetError) as exc:
        load(bad)
    assert exc.value.line == 2 and exc.value.field == "turns[0].content"
    assert len(load(bad, on_error="skip").skipped) == 1


# ---- metrics -----------------------------------------------------------------------------------
def test_eval_example_chat_cli_then_show_json_has_a_value_per_conversation_and_per_turn(server, db_url):
    r = invoke("eval", "example-chat", "--metrics", ",".join([*CONV_METRICS, "token_f1"]), "--judge", "openai:m",
               "--judge-base-url", f"{server.url}/v1", "--db", db_url, "--no-progress")
    assert r.exit_code == 0, r.output
    shown = invoke("show", "latest", "--json", "--db", db_url)
    assert shown.exit_code == 0, shown.output
    info = json.loads(shown.output)
    convs = example_conversations()
    n_turns = sum(len(c.assistant_positions()) for c in convs)
    for m in CONV_METRICS:
        assert info["metrics"][m]["n"] == len(convs) and info["metrics"][m]["n_missing"] == 0
    assert info["metrics"]["token_f1"]["n"] == n_turns and info["metrics"]["token_f1"]["n_missing"] == 0
    assert info["metrics"]["token_f1"]["ci_method"] == "cluster_robust"
    section = info["sections"]["conversations"]
    assert set(section) == {c.id for c in convs}
    for c in convs:
        assert set(section[c.id]["metrics"]) == set(CONV_METRICS)
        assert len(section[c.id]["turns"]) == len(c.assistant_positions())
        assert all(set(v) == {"token_f1"} for v in section[c.id]["turns"].values())
    # the faults the example holds are found by the scripted judge
    kr = {cid: e["metrics"]["knowledge_retention"] for cid, e in section.items()}
    ra = {cid: e["metrics"]["role_adherence"] for cid, e in section.items()}
    assert kr["chat-saltmere-car"] == pytest.approx(2 / 3) and kr["chat-halden-trip"] == 1.0
    assert ra["chat-pirate"] == pytest.approx(2 / 3) and ra["chat-wifi"] == 1.0


def real(sid: str, convs: list[Conversation]) -> str:
    """A bare message list has no id: the n-th line is conversation-n."""
    rename = {f"conversation-{i}": c.id for i, c in enumerate(convs, 1)}
    head, sep, tail = sid.partition("#")
    return rename.get(head, head) + sep + tail


def test_the_same_conversations_in_every_format_give_identical_values(server, tmp_path):
    convs = example_conversations()[:6]
    tables = []
    for name, write in (("native", lambda c: c.model_dump(mode="json")), ("deepeval", to_deepeval),
                        ("ragas", to_ragas), ("openai", to_openai)):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(json.dumps(write(c)) + "\n" for c in convs))
        db = f"sqlite:///{tmp_path / name}.db"
        # a message list has no place for reference topics (ragas and DeepEval JSON do)
        metrics = [*CONV_METRICS, "token_f1", "faithfulness", *(["topic_adherence"] if name != "openai" else [])]
        res = evaluate(str(p), metrics, db=db, options=judge_options(server))
        assert res.status == "completed", res.incomplete
        tables.append({k: {real(sid, convs): sc.value for sid, sc in col.items()}
                       for k, col in open_store(db).score_table(res.run_id).items()})
    assert all(t == tables[0] for t in tables[1:3])
    assert tables[3] == {k: v for k, v in tables[0].items() if k != "topic_adherence"}
    assert len(tables[0]["knowledge_retention"]) == 6 and len(tables[0]["faithfulness"]) > 6


def test_judge_garbage_for_one_turn_is_no_value_for_that_conversation_never_zero(server, tmp_path, db_url):
    convs = example_conversations()[:4]
    broken = convs[1].model_copy(deep=True)
    broken.turns[3] = broken.turns[3].model_copy(update={"content": "GARBLE " + broken.turns[3].content})
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps(c.model_dump(mode="json")) + "\n" for c in [convs[0], broken, *convs[2:]]))
    res = evaluate(str(p), ["knowledge_retention", "role_adherence"], db=db_url,
                   options=judge_options(server, judge_parse_retries=0))
    table = open_store(db_url).score_table(res.run_id)
    for m in ("knowledge_retention", "role_adherence"):
        bad = table[m][broken.id]
        assert bad.value is None and bad.reason.startswith("judge failure: invalid reply — ")
        assert "not valid JSON" in bad.reason  # what was wrong with the reply
        assert all(table[m][c.id].value is not None for c in convs if c.id != broken.id)
    # a conversation judged in several requests names the one that failed
    assert table["knowledge_retention"][broken.id].reason.startswith("judge failure: invalid reply — on turn 4: ")
    assert "— on " not in table["role_adherence"][broken.id].reason  # judged in one request
    assert res.summary["knowledge_retention"]["n"] == 3 and res.summary["knowledge_retention"]["n_missing"] == 1


def test_dry_run_estimates_the_calls_and_makes_none(server, db_url):
    r = invoke("eval", "example-chat", "--metrics", ",".join(CONV_METRICS), "--judge", "openai:m",
               "--judge-base-url", f"{server.url}/v1", "--db", db_url, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output.strip().splitlines()[-1])
    convs = example_conversations()
    turns = sum(len(c.assistant_positions()) for c in convs)
    # one call per assistant turn (retention, relevancy), one per conversation (role, completeness)
    assert plan["planned_calls"] == 2 * turns + 2 * len(convs)
    assert server.requests == [] and server.pings == []


def test_turn_metrics_see_the_conversation_history(server, db_url):
    evaluate("example-chat", ["faithfulness"], db=db_url, options=judge_options(server))
    users = [json.loads(json.dumps(r["body"]))["messages"][-1]["content"] for r in server.requests]
    later = [u for u in users if "CONVERSATION HISTORY:" in u]
    assert later and "Turn 1 (user): How long is the crossing to Halden Isle?" in "\n".join(later)


def test_turn_tool_correctness(db_url):
    conv = {"id": "agent", "turns": [
        {"role": "user", "content": "book"},
        {"role": "assistant", "content": "done", "expected_tools": ["search", "book"],
         "tool_calls": [{"name": "book"}, {"name": "search"}]},
        {"role": "user", "content": "and pay"},
        {"role": "assistant", "content": "paid", "expected_tools": ["pay"], "tool_calls": [{"name": "refund"}]},
        {"role": "user", "content": "bye"}, {"role": "assistant", "content": "bye"}]}
    res = evaluate([conv], ["turn_tool_correctness", {"name": "turn_tool_correctness", "params": {"ordered": True},
                                                      "key": "ordered"}], db=db_url)
    assert res.scores["turn_tool_correctness"][0].value == pytest.approx((1.0 + 0.0) / 2)
    assert res.scores["ordered"][0].value == pytest.approx((0.5 + 0.0) / 2)


def test_cluster_robust_interval_matches_the_sandwich_formula():
    from scipy import stats

    rng = np.random.default_rng(3)
    clusters = [f"c{i // 4}" for i in range(40)]
    x = rng.uniform(size=40)
    got = cluster_ci(x, clusters)
    m = x.mean()
    g = 10
    sums = np.array([np.sum(x[i * 4:(i + 1) * 4] - m) for i in range(g)])
    se = np.sqrt(g / (g - 1) * np.sum(sums ** 2) / 40 ** 2)
    t = stats.t.ppf(0.975, g - 1)
    assert got["ci_low"] == pytest.approx(m - t * se) and got["ci_high"] == pytest.approx(m + t * se)
    assert cluster_ci(x, ["one"] * 40) is None


def test_compare_and_gate_on_conversation_metrics(server, tmp_path, db_url):
    from cli_runner import run_main

    convs = example_conversations()
    worse = []
    for i, c in enumerate(convs):
        c = c.model_copy(deep=True)
        if i % 2 == 0:  # half the conversations break the role in every assistant turn
            c.turns = [t.model_copy(update={"content": t.content + " Arr, I am a pirate now."})
                       if t.role == "assistant" else t for t in c.turns]
        worse.append(c)
    p = tmp_path / "worse.jsonl"
    p.write_text("".join(json.dumps(c.model_dump(mode="json")) + "\n" for c in worse))
    metrics = ["role_adherence", "token_f1"]
    base = evaluate("example-chat", metrics, db=db_url, options=judge_options(server), name="base")
    cand = evaluate(str(p), metrics, db=db_url, options=judge_options(server), name="cand")
    code, out, err = run_main("compare", base.run_id, cand.run_id, "--json", "--db", db_url)
    assert code == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["comparisons"]}
    n_turns = sum(len(c.assistant_positions()) for c in convs)
    # conversation metrics pair conversation by conversation, per-turn metrics turn by turn
    assert rows["role_adherence"]["n"] == len(convs) and rows["token_f1"]["n"] == n_turns
    # the turns of one conversation move together: token_f1 is compared per conversation
    assert rows["token_f1"]["n_clusters"] == len(convs) and rows["role_adherence"]["n_clusters"] is None
    assert rows["token_f1"]["wilcoxon_pvalue"] is None and "conversations" in rows["token_f1"]["note"]
    assert rows["role_adherence"]["diff"] < 0 and rows["role_adherence"]["winner"] == "a"
    code, out, err = run_main("gate", cand.run_id, "--baseline", base.run_id, "--metric", "role_adherence",
                              "--max-drop", "0.05", "--db", db_url)
    assert code == 1, out + err
    code, out, err = run_main("gate", cand.run_id, "--baseline", base.run_id, "--metric", "token_f1",
                              "--max-drop", "0.5", "--db", db_url)
    assert code == 0, out + err
    code, out, err = run_main("gate", cand.run_id, "--baseline", base.run_id, "--metric", "token_f1",
                              "--max-drop", "0.5", "--db", db_url, "--json")
    assert code == 0, out + err
    (row,) = json.loads(out)["rows"]
    assert f"{len(convs)} conversations: tested per conversation" in row["note"]


def test_python_api_takes_conversation_objects(db_url):
    convs = example_conversations()[:3]
    res = evaluate(convs, ["token_f1", "turn_tool_correctness"], db=db_url, skip_unavailable=True)
    n_turns = sum(len(c.assistant_positions()) for c in convs)
    assert res.summary["token_f1"]["n"] == n_turns
    # no turn states expected tools: no value for each conversation, with the reason, never 0
    assert res.summary["turn_tool_correctness"]["n"] == 0 and res.summary["turn_tool_correctness"]["n_missing"] == 3
    assert res.status == "incomplete"


def test_a_json_file_holding_one_message_list_is_one_conversation(tmp_path):
    conv = example_conversations()[0]
    p = tmp_path / "one.json"
    p.write_text(json.dumps(to_openai(conv)))
    ds = load(p)
    assert [s.id for s in ds.samples][:2] == ["conversation-1", "conversation-1#t1"]
    assert len(ds.samples) == 1 + len(conv.assistant_positions())


def test_show_prints_the_conversations_as_a_table_not_json(db_url):
    from cli_runner import run_main

    res = evaluate("example-chat", ["token_f1"], db=db_url, name="chat")
    code, out, err = run_main("show", res.run_id, "--db", db_url)
    assert code == 0, err
    section = out.split("conversations (per-turn metrics")[1]
    assert "token_f1 (turn mean)" in " ".join(section.split()) or "token_f1 (turn" in section
    first = example_conversations()[0]
    row = next(line for line in section.splitlines() if first.id in line)
    turns = [t for t in res.samples if t.metadata.get("conversation_id") == first.id and t.id != first.id]
    vals = [res.scores["token_f1"][res.samples.index(t)].value for t in turns]
    assert f"{sum(vals) / len(vals):.3f}" in row and f" {len(turns)} " in row
    assert '"turns":' not in out  # the section is no longer dumped as JSON


def test_the_report_says_when_turns_are_compared_per_conversation(db_url, tmp_path):
    from ragmeter.apps.report import write_report
    from ragmeter.apps.report.data import compare_view
    from ragmeter.store import open_store

    a = evaluate("example-chat", ["token_f1"], db=db_url, name="a")
    b = evaluate("example-chat", ["token_f1"], db=db_url, name="b")
    store = open_store(db_url)
    (d,) = compare_view(store, [a.run_id, b.run_id])["differences"]
    n_convs = len(example_conversations())
    assert d["metric"] == "token_f1" and d["n_clusters"] == n_convs and d["diff"] == 0
    html = write_report(store, [a.run_id, b.run_id], tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"in {n_convs} conversations" in html
