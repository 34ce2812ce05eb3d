"""Agent metrics: trace reading (JSONL and OpenAI chat logs), seed 001's formulas and worked
examples, trajectory match modes against an agentevals transcription, execution stats, CLI."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragmeter import evaluate, load
from ragmeter.apps.cli import app
from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.schema import AgentTrace, Sample
from ragmeter.metrics import agent as A
from ragmeter.metrics.registry import get_spec, resolve

EXAMPLE = Path(str(resources.files("ragmeter"))) / "data" / "agent_example"
CREDIT = {"agent_preset": "credit_risk"}
TRAJ = ["parse_input", "validate_company", "create_plan", "fetch_api_data", "search_web", "synthesize",
        "save_to_database", "evaluate"]


def _sample(sid: str, trace: dict, **meta) -> dict:
    return {"id": sid, "question": f"task {sid}", "trace": trace, **meta}


def _run(rows, metrics, options=None, db=None):
    return evaluate(rows, metrics, options=CREDIT if options is None else options, db=db)


# ---- parse_trace ------------------------------------------------------------------------------

def openai_log() -> list[dict]:
    return [
        {"role": "system", "content": "be useful"},
        {"role": "user", "content": "Analyze credit risk for Apple Inc"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "fetch_sec_data", "arguments": '{"ticker": "AAPL"}'}},
            {"id": "c2", "type": "function", "function": {"name": "fetch_market_data", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": '{"price": 190}'},
        {"role": "tool", "tool_call_id": "c1", "content": "10-K text", "latency_ms": 812},
        {"role": "assistant", "content": "Let me search.", "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "Apple"'}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "timeout", "error": True},
        {"role": "assistant", "content": '```json\n{"risk_level": "low", "credit_score": 88}\n```'},
    ]


def test_parse_openai_messages():
    t = A.parse_trace(openai_log())
    assert [c.name for c in t.tool_calls] == ["fetch_sec_data", "fetch_market_data", "web_search"]
    assert [c.turn for c in t.tool_calls] == [0, 0, 1]
    assert [c.id for c in t.tool_calls] == ["c1", "c2", "c3"]
    sec, market, web = t.tool_calls
    assert sec.arguments == {"ticker": "AAPL"} and sec.result == "10-K text" and sec.latency_ms == 812
    assert market.arguments == {} and market.result == {"price": 190}  # JSON results are parsed
    assert web.arguments == {} and web.model_extra["arguments_raw"] == '{"q": "Apple"'  # invalid JSON kept
    assert web.error == "timeout"
    assert t.step_count == 3
    assert t.input_text == "Analyze credit risk for Apple Inc"
    assert t.final_output == {"risk_level": "low", "credit_score": 88}
    assert t.final_text.startswith("```json")
    assert t.tool_call_count == 3


def test_parse_messages_ending_in_a_tool_call_has_no_final_answer():
    t = A.parse_trace(openai_log()[:-2])
    assert t.final_text is None and t.final_output is None


def test_parse_our_jsonl_format_with_aliases():
    t = A.parse_trace({
        "intent": {"entity": "Apple", "type": "public_us", "confidence": 0.9},
        "task_plan": [{"action": "fetch data"}, "analyze"],
        "tools_used": ["SEC", {"tool": "Web", "args": {"q": "x"}, "output": "r", "latency_ms": 5, "error": {"code": 1}}],
        "executed_nodes": [{"node": "parse_input"}, "evaluate"],
        "assessment": '{"risk_level": "low"}',
        "latency_ms": 1200, "custom": 7})
    assert t.plan == ["fetch data", "analyze"]
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("SEC", {}, None), ("Web", {"q": "x"}, "r")]
    assert t.tool_calls[1].error == '{"code": 1}'
    assert t.trajectory == ["parse_input", "evaluate"]
    assert t.final_output == {"risk_level": "low"}
    assert t.latency_ms == 1200 and t.model_extra["custom"] == 7


def test_parse_object_with_messages_and_overrides_and_json_text():
    t = A.parse_trace(json.dumps({"messages": openai_log(), "intent": {"entity": "Apple"}, "latency_ms": 9}))
    assert t.intent == {"entity": "Apple"} and t.latency_ms == 9 and len(t.tool_calls) == 3
    assert A.parse_trace(t) is t


def test_parse_legacy_function_call_anthropic_blocks_and_langchain_roles():
    legacy = [{"role": "user", "content": "hi"},
              {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": '{"k": 1}'}},
              {"role": "function", "name": "lookup", "content": "v"},
              {"role": "assistant", "content": "done"}]
    t = A.parse_trace(legacy)
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("lookup", {"k": 1}, "v")]
    assert t.final_text == "done"
    anthropic = [{"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                 {"role": "assistant", "content": [{"type": "text", "text": "checking"},
                                                   {"type": "tool_use", "id": "tu1", "name": "get_weather",
                                                    "input": {"city": "SF"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "sunny",
                                               "is_error": False}]},
                 {"role": "assistant", "content": [{"type": "text", "text": "It is sunny."}]}]
    t = A.parse_trace(anthropic)
    assert [(c.name, c.arguments, c.result, c.error) for c in t.tool_calls] == [("get_weather", {"city": "SF"}, "sunny", None)]
    assert t.input_text == "weather?" and t.final_text == "It is sunny."
    lc = [{"type": "human", "content": "q"},
          {"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {"q": "q"}, "id": "x"}]},
          {"type": "tool", "content": "r", "tool_call_id": "x"}, {"type": "ai", "content": "a"}]
    t = A.parse_trace(lc)
    assert [(c.name, c.arguments, c.result) for c in t.tool_calls] == [("search", {"q": "q"}, "r")]


def test_tool_results_without_ids_go_to_the_earliest_unanswered_call():
    msgs = [{"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": ""}},
                                                 {"function": {"name": "b", "arguments": ""}}]},
            {"role": "tool", "content": "ra"}, {"role": "tool", "content": "rb"},
            {"role": "tool", "content": "orphan"}]
    t = A.parse_trace(msgs)
    assert [c.result for c in t.tool_calls] == ["ra", "rb"]


@pytest.mark.parametrize("bad, msg", [
    (42, "expected a trace object"),
    ("{not json", "must be JSON"),
    ({"messages": "hello"}, "must be a list"),
    ([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}], "has no name"),
    (["just text"], "message 0 should be an object"),
    ([{"name": "search"}], "message 0 has no role"),
    ({"intent": "Apple"}, "'intent' must be an object"),
    ({"tool_calls": "search"}, "'tool_calls' must be a list"),
    ({"plan": [["nested"]]}, "'plan' item 0"),
    ({"step_count": "many"}, "step_count"),
])
def test_parse_errors_are_clear(bad, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        A.parse_trace(bad)


def test_reader_turns_trace_errors_into_dataset_errors(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"id": "a", "messages": [{"role": "assistant", "tool_calls": [{"x": 1}]}]}) + "\n")
    with pytest.raises(DatasetError) as exc:
        load(p)
    assert exc.value.line == 1 and exc.value.field == "messages" and "no name" in str(exc.value)


def test_reader_maps_an_openai_log_row():
    ds = load(EXAMPLE / "openai_traces.jsonl")
    apple = ds[0]
    assert apple.id == "apple" and apple.question == "Analyze credit risk for Apple Inc"
    assert json.loads(apple.answer)["risk_level"] == "low"  # the final assistant message
    assert apple.metadata["company"] == "Apple Inc" and apple.metadata["task_type"] == "public_us"
    assert [c.name for c in apple.trace.tool_calls] == ["fetch_sec_data", "fetch_market_data", "web_search",
                                                        "fetch_legal_data"]
    # round trip through the store's JSON keeps the trace
    again = Sample.model_validate(apple.model_dump(mode="json", exclude_none=True))
    assert again.trace == apple.trace


# ---- seed 001's worked examples -----------------------------------------------------------------

def test_seed_worked_examples_exactly():
    rows = [_sample("apple", {"tool_calls": ["SEC", "Market", "Web", "Legal"]}, task_type="public_us"),
            _sample("xyz", {"tool_calls": ["Web", "SEC"]}, task_type="private"),
            # the snippets' examples under the same table
            _sample("snippet-precision", {"tool_calls": ["SEC", "Market", "Legal"]}, task_type="public_us"),
            _sample("snippet-recall", {"tool_calls": ["SEC", "Market"]}, task_type="public_us")]
    res = _run(rows, ["tool_choice_correctness", "tool_completeness"])
    got = {r["id"]: (r["tool_choice_correctness"], r["tool_completeness"]) for r in res.rows()}
    assert got["apple"] == (0.75, 1.0)
    assert got["xyz"] == (0.5, 0.5)
    assert got["snippet-precision"][0] == 2 / 3
    assert got["snippet-recall"] == (1.0, 2 / 3)
    d = res.scores["tool_choice_correctness"][0].details
    assert d["unexpected"] == ["fetch_legal_data"] and d["task_type"] == "public_us"


def test_tool_correctness_is_deepevals_default_on_a_trace_and_a_verdict_on_a_tool_span():
    rows = [_sample("apple", {"tool_calls": ["SEC", "Market", "Web", "Legal"]}, task_type="public_us"),
            _sample("snippet-recall", {"tool_calls": ["SEC", "Market"]}, task_type="public_us"),
            # a --per-span row of one tool span: 1 when its tool was expected, else 0
            _sample("span-ok", {"tool_calls": ["SEC"]}, task_type="public_us", metadata={"span_kind": "tool"}),
            _sample("span-bad", {"tool_calls": ["Legal"]}, task_type="public_us", metadata={"span_kind": "tool"})]
    res = _run(rows, ["tool_correctness", "tool_completeness"])
    got = {r["id"]: (r["tool_correctness"], r["tool_completeness"]) for r in res.rows()}
    assert got["apple"] == (1.0, 1.0) and got["snippet-recall"] == (2 / 3, 2 / 3)
    assert got["span-ok"][0] == 1.0 and got["span-bad"][0] == 0.0
    assert "tool_correctness" not in get_spec("tool_completeness").aliases


def test_openai_log_file_evaluates_without_conversion(tmp_path, db_url):
    """Must-show: an OpenAI tool-calling log file evaluates with no conversion step; the command of
    docs/agent.md (its own config) completes."""
    documented = CliRunner().invoke(app, ["eval", str(EXAMPLE / "openai_traces.jsonl"), "--config",
                                          str(EXAMPLE / "openai_expectations.yaml"), "--db", db_url,
                                          "--no-progress", "--json"])
    assert documented.exit_code == 0, documented.output
    assert json.loads(documented.stdout.splitlines()[0])["status"] == "completed"
    out = tmp_path / "rows.jsonl"
    r = CliRunner().invoke(app, ["eval", str(EXAMPLE / "openai_traces.jsonl"), "--config",
                                 str(EXAMPLE / "expectations.yaml"), "--db", db_url, "--no-progress",
                                 "-o", str(out), "--json"])
    # exit 3 (incomplete): OpenAI logs carry no intent or plan, so those two metrics have no value
    assert r.exit_code == 3, r.output
    assert json.loads(r.stdout.splitlines()[0])["incomplete"] == [
        "intent_correctness: no value on 4 of 4 samples (e.g. the trace has no intent)",
        "plan_quality: no value on 4 of 4 samples (e.g. the trace has no plan)"]
    rows = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert (rows["apple"]["tool_choice_correctness"], rows["apple"]["tool_completeness"]) == (0.75, 1.0)
    assert (rows["xyz-private"]["tool_choice_correctness"], rows["xyz-private"]["tool_completeness"]) == (0.5, 0.5)
    assert rows["apple"]["final_answer_quality"] == 1.0
    assert rows["apple"]["trajectory_match@superset"] == 1.0 and rows["xyz-private"]["trajectory_match@superset"] == 0.0
    # the log has no intent nor plan: no value with the reason, never 0
    assert rows["apple"]["intent_correctness"] is None
    assert rows["apple"]["no_value_reasons"]["plan_quality"] == "the trace has no plan"


def test_both_example_formats_agree_on_the_tool_metrics(db_url):
    ours = _run(str(EXAMPLE / "traces.jsonl"), ["tool_choice_correctness", "tool_completeness"], db=db_url)
    openai = _run(str(EXAMPLE / "openai_traces.jsonl"), ["tool_choice_correctness", "tool_completeness"], db=db_url)
    metric_cols = ["id", "tool_choice_correctness", "tool_completeness", "no_value_reasons"]
    assert [{k: r[k] for k in metric_cols} for r in ours.rows()] == \
        [{k: r[k] for k in metric_cols} for r in openai.rows()]


# ---- seed 001's formulas against transcriptions of its snippets ---------------------------------

def seed_intent(input_company, parsed_company, company_type, confidence):
    score = 0.0
    if input_company.lower() in parsed_company.lower():
        score += 0.4
    if company_type is not None:
        score += 0.3
    if confidence > 0.7:
        score += 0.3
    elif confidence > 0.5:
        score += 0.2
    elif confidence > 0.3:
        score += 0.1
    return score


def seed_plan(plan):
    score = 0.0
    if 3 <= len(plan) <= 10:
        score += 0.3
    if any("data" in step or "fetch" in step or "search" in step for step in plan):
        score += 0.35
    if any("analy" in step or "synthe" in step for step in plan):
        score += 0.35
    return score


def seed_final_answer(assessment):
    required = {"risk_level", "credit_score", "confidence", "reasoning", "recommendations"}
    score = 0.0
    score += sum(1 for f in required if f in assessment) / len(required) * 0.5
    if assessment.get("risk_level") in ["low", "moderate", "high", "critical"]:
        score += 0.15
    cs = assessment.get("credit_score")
    if cs is not None and 0 <= cs <= 100:
        score += 0.15
    c = assessment.get("confidence")
    if c is not None and 0 <= c <= 1:
        score += 0.1
    r = assessment.get("reasoning")
    if r is not None and len(r) > 50:
        score += 0.1
    return score


def original_trajectory(trajectory, expected=TRAJ):
    """The seed project's own implementation (UnifiedAgentEvaluator._evaluate_trajectory)."""
    expected_set, actual_set = set(expected), set(trajectory)
    union = len(expected_set | actual_set)
    jac = len(expected_set & actual_set) / union if union > 0 else 0.0
    order = 0.0
    if len(trajectory) >= 2:
        correct = total = 0
        for i, step in enumerate(trajectory[:-1]):
            if step in expected:
                nxt = trajectory[i + 1]
                if nxt in expected:
                    total += 1
                    correct += expected.index(nxt) > expected.index(step)
        order = correct / total if total else 0.0
    return jac * 0.6 + order * 0.4


words = st.text(alphabet="abcdefghij ", min_size=1, max_size=8).filter(lambda s: s.strip() == s and s)
plan_words = st.sampled_from(["fetch data", "search web", "analyze", "synthesize report", "review", "plan",
                              "data", "x", "analysis of data"])


@settings(max_examples=300, deadline=None)
@given(company=words, parsed=words, ctype=st.one_of(st.none(), st.sampled_from(["public_us", "private"])),
       conf=st.floats(0, 1))
def test_intent_matches_the_seed_snippet(company, parsed, ctype, conf):
    cfg = A.agent_config(CREDIT)
    got, _ = A.intent_score({"entity": parsed, "type": ctype, "confidence": conf}, company, cfg.intent)
    assert got == pytest.approx(seed_intent(company, parsed, ctype, conf), abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(plan=st.lists(plan_words, max_size=12))
def test_plan_matches_the_seed_snippet(plan):
    got, _ = A.plan_score(plan, A.agent_config(CREDIT).plan)
    assert got == pytest.approx(seed_plan(plan), abs=1e-12)


answer_values = st.fixed_dictionaries({}, optional={
    "risk_level": st.sampled_from(["low", "moderate", "high", "critical", "LOW", "elevated", ""]),
    "credit_score": st.one_of(st.integers(-50, 150), st.floats(-1, 101, allow_nan=False)),
    "confidence": st.floats(-0.5, 1.5, allow_nan=False),
    "reasoning": st.text(max_size=80),
    "recommendations": st.lists(st.text(max_size=5), max_size=2),
})


@settings(max_examples=300, deadline=None)
@given(assessment=answer_values)
def test_final_answer_matches_the_seed_snippet(assessment):
    got, _ = A.final_answer_score(assessment, A.agent_config(CREDIT).final_answer)
    assert got == pytest.approx(seed_final_answer(assessment), abs=1e-12)


@settings(max_examples=400, deadline=None)
@given(traj=st.lists(st.sampled_from(TRAJ + ["human_review", "retry"]), max_size=12))
def test_trajectory_matches_the_seed_implementation(traj):
    assert A.trajectory_score(traj, TRAJ) == pytest.approx(original_trajectory(traj), abs=1e-12)


def test_trajectory_metric_formula_and_details():
    actual = ["parse_input", "create_plan", "validate_company", "fetch_api_data", "human_review", "synthesize"]
    res = _run([_sample("a", {"trajectory": actual})], ["trajectory_match"])
    sc = res.scores["trajectory_match"][0]
    jac = 5 / 9  # {parse, create, validate, fetch, synth} of 9 distinct names
    # pairs: parse->create ok, create->validate no, validate->fetch ok; human_review breaks the rest
    assert sc.details["correct_pairs"] == 2 and sc.details["total_pairs"] == 3
    assert sc.value == pytest.approx(0.6 * jac + 0.4 * 2 / 3)
    assert sc.details["missing"] == ["evaluate", "save_to_database", "search_web"]
    assert sc.details["unexpected"] == ["human_review"]


def test_order_score_edges():
    assert A.order_score([], ["a", "b"]) == 0.0
    assert A.order_score(["a"], ["a", "b"]) == 0.0  # no judgeable pair: no evidence of the order
    assert A.order_score(["a"], ["a"]) == 1.0  # a one-step expectation has no order to keep
    assert A.order_score(["b"], ["a"]) == 0.0
    assert A.order_score(["a", "a"], ["a", "b"]) == 0.0  # a repeated step is a loop, out of order
    assert A.order_score(["b", "x", "a"], ["a", "b"]) == 0.0  # unknown steps do not bridge pairs
    assert A.order_pairs(["a", "b", "c"], ["a", "c", "b"]) == (1, 2)
    assert A.jaccard([], []) == 1.0


def test_tool_precision_recall_edges():
    assert A.tool_precision([], []) == 1.0 and A.tool_recall([], []) == 1.0
    assert A.tool_precision([], ["a"]) == 0.0 and A.tool_recall([], ["a"]) == 0.0
    assert A.tool_precision(["a"], []) == 0.0 and A.tool_recall(["a"], []) == 1.0
    assert A.tool_precision(["a", "a", "b"], ["a"]) == 0.5  # sets: a repeated call counts once


@settings(max_examples=200, deadline=None)
@given(sel=st.lists(st.sampled_from("abcdef"), max_size=8), exp=st.lists(st.sampled_from("abcdef"), max_size=6))
def test_tool_precision_recall_are_set_ratios(sel, exp):
    s, e = set(sel), set(exp)
    p, r = A.tool_precision(sel, exp), A.tool_recall(sel, exp)
    assert 0 <= p <= 1 and 0 <= r <= 1
    if s:
        assert p == len(s & e) / len(s)
    if e:
        assert r == len(s & e) / len(e)


def test_intent_plan_final_answer_metrics_end_to_end():
    rows = [_sample("a", {"intent": {"entity": "Apple Inc.", "type": "public_us", "confidence": 0.6},
                          "plan": ["Fetch SEC data", "Search news", "Analyze"],
                          "final_output": {"risk_level": "high", "credit_score": 101, "confidence": 0.5,
                                           "reasoning": "x" * 51}},
                    company="apple inc"),
            _sample("b", {"intent": {"entity": "Apple"}}, company=None)]
    res = _run(rows, ["intent_correctness", "plan_quality", "final_answer_quality"])
    a, b = res.rows()
    assert a["intent_correctness"] == 0.9  # 0.4 + 0.3 + 0.2
    assert a["plan_quality"] == 1.0
    assert a["final_answer_quality"] == pytest.approx(0.4 + 0.15 + 0.1 + 0.1)  # 4/5 fields, score > 100
    assert res.scores["final_answer_quality"][0].details["checks"]["credit_score"] == "101 > 100"
    assert b["intent_correctness"] is None and "no expected entity" in b["no_value_reasons"]["intent_correctness"]
    assert b["no_value_reasons"]["plan_quality"] == "the trace has no plan"
    assert b["no_value_reasons"]["final_answer_quality"].startswith("the trace has no final_output")


def test_rubric_variants_and_validators():
    cfg = A.agent_config({"agent": {
        "intent": {"entity_match": "exact", "type_check": "match", "entity_points": 1, "type_points": 1,
                   "confidence_points": []},
        "final_answer": {"required_fields": ["a.b"], "validators": {
            "a.b": {"pattern": "[A-Z]{3}", "points": 1},
            "c": {"one_of": ["x"], "case_insensitive": True, "points": 1},
            "d": {"type": "integer", "points": 1},
            "e": {"one_of": [1], "points": 1},
            "f": {"max_length": 2, "points": 1}}}}})
    v, d = A.intent_score({"entity": "apple", "type": "Private"}, "Apple", cfg.intent, "private")
    assert v == 1.0 and d["type_ok"] is True
    v, _ = A.intent_score({"entity": "apple inc", "type": "x"}, "Apple", cfg.intent, "private")
    assert v == 0.0
    out = {"a": {"b": "ABC"}, "c": "X", "d": True, "e": True, "f": [1, 2, 3]}
    v, d = A.final_answer_score(out, cfg.final_answer)
    # completeness 1 * 0.5, pattern ok, case-insensitive one_of ok, True is no integer, True is not 1, too long
    assert d["checks"] == {"a.b": True, "c": True, "d": "not of type integer", "e": "not one of [1]",
                           "f": "length 3 outside the limit 2"}
    assert v == pytest.approx((0.5 + 2) / 5.5)


def test_expectations_from_metadata_and_aliases_and_expected_tools_list():
    rows = [_sample("m", {"tool_calls": ["a", "b"]}, expected_tools=["a", "c"]),
            _sample("n", {"tool_calls": ["Search"]}, task_type="anything")]
    res = _run(rows, ["tool_completeness"], options={"agent": {"expected_tools": ["web_search"],
                                                               "tool_aliases": {"Search": "web_search"}}})
    assert [r["tool_completeness"] for r in res.rows()] == [0.5, 1.0]
    assert res.scores["tool_completeness"][0].details["source"] == "metadata.expected_tools"


def test_missing_expectations_are_no_value_with_a_reason():
    rows = [_sample("u", {"tool_calls": ["Web"]}, task_type="government"),
            _sample("v", {"tool_calls": ["Web"]}),
            _sample("w", {"tool_calls": ["Web"]}, expected_tools="Web")]
    res = _run(rows, ["tool_choice_correctness", "trajectory_match"], options={"agent_preset": "credit_risk"})
    r = res.rows()
    assert all(x["tool_choice_correctness"] is None for x in r)
    assert "no expected tools for task type 'government'" in r[0]["no_value_reasons"]["tool_choice_correctness"]
    assert "no task type" in r[1]["no_value_reasons"]["tool_choice_correctness"]
    assert "must be a list" in r[2]["no_value_reasons"]["tool_choice_correctness"]
    res = _run(rows[:1], ["tool_choice_correctness", "trajectory_match"], options={})
    assert "no expected tools" in res.rows()[0]["no_value_reasons"]["tool_choice_correctness"]
    assert "no expected trajectory" in res.rows()[0]["no_value_reasons"]["trajectory_match"]


@pytest.mark.parametrize("options, msg", [
    ({"agent": {"expected_tool": {}}}, "Did you mean: expected_tools"),
    ({"agent_preset": "nope"}, "unknown agent preset 'nope'; bundled presets: credit_risk"),
    ({"agent": {"final_answer": {"validators": {"x": {"minimum": 1}}}}}, "unknown key 'minimum'"),
    ({"agent": {"final_answer": {"validators": {"x": {"pattern": "(", "points": 1}}}}}, "not a regular expression"),
    ({"agent": {"plan": {"keywords": [{"any": [], "points": 1}]}}}, "is empty"),
    ({"agent": {"plan": {"size": {"min": 1}}}}, "add up to more than 0"),
    ({"agent": {"task_type": ["meta.x"]}}, "unknown source 'meta.x'"),
    ({"agent": {"intent": {"entity_points": -1}}}, "must be >= 0"),
    ({"agent": {"final_answer": {"completeness_points": 1}}}, "needs required_fields"),
])
def test_bad_expectations_fail_before_any_work(options, msg, db_url):
    with pytest.raises(ConfigError, match=msg):
        evaluate([_sample("a", {"tool_calls": []})], ["tool_choice_correctness"], options=options, db=db_url)


def test_preset_overrides_merge(tmp_path):
    cfg = A.agent_config({"agent": {"preset": "credit_risk", "expected_tools": {"public_us": ["only_this"]},
                                    "trajectory": {"order_weight": 0}}})
    assert cfg.expected_tools["public_us"] == frozenset({"only_this"})
    assert cfg.expected_tools["private"] == frozenset({"web_search", "fetch_legal_data"})  # kept from the preset
    assert (cfg.jaccard_weight, cfg.order_weight) == (0.6, 0)
    f = tmp_path / "mine.yaml"
    f.write_text("expected_tools: [a]\nplan: {keywords: [{any: [x], points: 1}]}\n")
    cfg = A.agent_config({"agent_preset": str(f)})
    assert cfg.expected_tools == frozenset({"a"}) and cfg.final_answer is None


def test_param_in_a_mapping_shows_in_the_result_key():
    assert resolve({"name": "trajectory_match", "params": {"mode": "strict"}}).key == "trajectory_match(mode=strict)"
    assert resolve("trajectory_match@strict").key == "trajectory_match@strict"
    assert resolve({"name": "trajectory_match@unordered", "params": {"tool_args": "ignore"}}).key == \
        "trajectory_match@unordered(tool_args=ignore)"
    assert get_spec("tool_precision").name == "tool_choice_correctness"


# ---- trajectory match modes ----------------------------------------------------------------------

def agentevals_superset(outputs, reference, args_mode):
    """agentevals' _is_trajectory_superset (greedy), transcribed; calls are (name, args)."""
    used = set()
    for rname, rargs in reference:
        found = False
        for i, (oname, oargs) in enumerate(outputs):
            if oname != rname or i in used:
                continue
            if args_mode == "ignore" or oargs == rargs:
                used.add(i)
                found = True
                break
        if not found:
            return False
    return True


def agentevals_strict(out_turns, ref_turns, args_mode):
    """agentevals' strict scorer over assistant messages (one per turn), transcribed."""
    if len(out_turns) != len(ref_turns):
        return False
    for o, r in zip(out_turns, ref_turns, strict=True):
        if len(o) != len(r):
            return False
        remaining = list(r)
        for name, args in o:
            hit = next((x for x in remaining if x[0] == name and (args_mode == "ignore" or x[1] == args)), None)
            if hit is None:
                return False
            remaining.remove(hit)
    return True


calls = st.tuples(st.sampled_from("abc"), st.sampled_from([{}, {"q": 1}, {"q": 2}]))


def steps(seq, turns=None):
    return [A.Step(n, a, None if turns is None else t) for (n, a), t in zip(seq, turns or [None] * len(seq), strict=True)]


@settings(max_examples=400, deadline=None)
@given(out=st.lists(calls, max_size=5), ref=st.lists(calls, max_size=5), args=st.sampled_from(["exact", "ignore"]))
def test_unordered_subset_superset_match_agentevals(out, ref, args):
    sup = agentevals_superset(out, ref, args)
    sub = agentevals_superset(ref, out, args)
    assert A.match_trajectory(steps(out), steps(ref), "superset", args)[0] == sup
    assert A.match_trajectory(steps(out), steps(ref), "subset", args)[0] == sub
    assert A.match_trajectory(steps(out), steps(ref), "unordered", args)[0] == (sup and sub)


@settings(max_examples=400, deadline=None)
@given(ref_turns=st.lists(st.lists(calls, min_size=1, max_size=3), max_size=4), data=st.data(),
       args=st.sampled_from(["exact", "ignore"]))
def test_strict_matches_agentevals_for_the_same_turn_structure(ref_turns, data, args):
    out_turns = [data.draw(st.lists(calls, min_size=len(t), max_size=len(t))) for t in ref_turns]
    flat = lambda turns: [c for t in turns for c in t]  # noqa: E731
    tids = lambda turns: [i for i, t in enumerate(turns) for _ in t]  # noqa: E731
    got = A.match_trajectory(steps(flat(out_turns), tids(out_turns)), steps(flat(ref_turns), tids(ref_turns)),
                             "strict", args)[0]
    assert got == agentevals_strict(out_turns, ref_turns, args)


def test_match_modes_examples_and_maximum_matching():
    a = A.Step
    # greedy pairing would give the first expected call the {"q": 1, "r": 2} call and then fail
    out = [a("s", {"q": 1, "r": 2}), a("s", {"q": 1})]
    ref = [a("s", {"q": 1}), a("s", {"q": 1, "r": 2})]
    assert A.match_trajectory(out, ref, "unordered", "superset")[0]
    assert not A.match_trajectory(out, ref, "strict", "superset")[0]  # positions: the second call lacks "r"
    assert A.match_trajectory(out, ref, "strict", "exact")[0] is False
    # parallel calls (same turn) may come in any order under strict
    par = [a("x", {}, 0), a("y", {}, 0)]
    assert A.match_trajectory(par, [a("y", {}), a("x", {})], "strict")[0]
    assert not A.match_trajectory([a("x", {}, 0), a("y", {}, 1)], [a("y", {}), a("x", {})], "strict")[0]
    # an expected call without arguments matches any; per-tool overrides
    assert A.match_trajectory([a("s", {"q": 9})], [a("s", None)], "strict", "exact")[0]
    assert A.match_trajectory([a("s", {"q": 9, "t": 1})], [a("s", {"q": 9, "t": 2})], "strict", "exact",
                              {"s": ["q"]})[0]
    assert A.match_trajectory([a("s", {"u": {"v": 1}})], [a("s", {"u": {"v": 1}, "w": 0})], "strict", "exact",
                              {"s": ["u.v"]})[0]
    assert A.match_trajectory([a("s", {"q": 1})], [a("s", {"q": 2})], "strict", "exact", {"s": "ignore"})[0]
    # invalid JSON arguments match only when arguments are ignored
    bad = [a("s", {}, None, True)]
    assert not A.match_trajectory(bad, [a("s", {})], "strict", "exact")[0]
    assert A.match_trajectory(bad, [a("s", {})], "strict", "ignore")[0]
    ok, why = A.match_trajectory([a("s")], [a("s"), a("t")], "superset")
    assert not ok and "1 expected call" in why
    with pytest.raises(ConfigError):
        A.match_trajectory([], [], "fuzzy")


def test_trajectory_modes_in_a_run():
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "search", "arguments": '{"q": "x"}'}},
                                                 {"id": "2", "function": {"name": "fetch", "arguments": '{"id": 1}'}}]},
            {"role": "assistant", "content": "done"}]
    rows = [{"id": "t", "messages": msgs,
             "expected_tool_calls": [{"name": "fetch", "arguments": {"id": 1}}, {"name": "search"}]}]
    res = evaluate(rows, ["trajectory_match@strict", "trajectory_match@subset",
                          {"name": "trajectory_match", "params": {"mode": "superset", "tool_args": "ignore"}},
                          "trajectory_match"], options={})
    r = res.rows()[0]
    assert r["trajectory_match@strict"] == 1.0  # the two calls were parallel
    assert r["trajectory_match@subset"] == 1.0
    assert r["trajectory_match(mode=superset,tool_args=ignore)"] == 1.0
    assert r["trajectory_match"] == pytest.approx(0.6 * 1 + 0.4 * 0)  # names fetch, search: "search" -> "fetch" reversed
    with pytest.raises(ConfigError, match="mode must be one of"):
        evaluate(rows, ["trajectory_match@fuzzy"], options={})


def test_expected_tool_calls_as_openai_messages_and_per_task_type():
    ref_msgs = [{"role": "assistant", "tool_calls": [{"id": "r", "function": {"name": "search", "arguments": '{"q": "x"}'}}]}]
    assert A.reference_calls(ref_msgs) == [A.Step("search", {"q": "x"}, 0)]
    cfg = A.agent_config({"agent": {"expected_tool_calls": {"qa": [{"name": "search"}]}}})
    s = Sample(id="x", metadata={"task_type": "qa"}, trace=AgentTrace(tool_calls=[{"name": "search"}]))
    ref, kind, _ = A._reference(s, cfg)
    assert kind == "calls" and ref == [A.Step("search", None)]


# ---- LLM trajectory judge ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def judge_server():
    from judge_server import JudgeServer

    srv = JudgeServer().start()
    yield srv
    srv.stop()


def test_trajectory_judge_with_a_local_server(judge_server, db_url):
    from judge_server import Forced

    judge_server.reset()
    judge_server.force(Forced(text='{"reasoning": "sensible and efficient", "score": 0.75}'),
                       Forced(text='{"reasoning": "x", "score": 7}'), Forced(text="not json"),
                       Forced(text="still not json"), Forced(text="nope"), Forced(text="no"))
    rows = [{"id": "a", "messages": openai_log(), "expected_tool_calls": [{"name": "fetch_sec_data"}]},
            {"id": "b", "messages": openai_log()}]
    opts = {"judge": "openai:test-model", "judge_base_url": f"{judge_server.url}/v1", "judge_concurrency": 1,
            "judge_max_retries": 0}
    res = evaluate(rows, ["trajectory_judge"], options=opts, db=db_url)
    a, b = res.scores["trajectory_judge"]
    assert a.value == 0.75 and a.details["reasoning"] == "sensible and efficient"
    assert a.details["with_reference"] is True
    assert b.value is None and b.reason  # a reply that never parses is no value, not 0
    user = judge_server.requests[0]["body"]["messages"][-1]["content"]
    assert "AGENT TRAJECTORY:" in user and "fetch_sec_data" in user and "REFERENCE TRAJECTORY:" in user


def test_trajectory_judge_without_a_judge_says_how_to_configure(db_url):
    with pytest.raises(ConfigError, match="judge"):
        evaluate([{"id": "a", "messages": openai_log()}], ["trajectory_judge"], db=db_url)
    res = evaluate([{"id": "a", "messages": openai_log()}], ["trajectory_judge"], db=db_url, skip_unavailable=True)
    assert res.scores["trajectory_judge"][0].value is None


# ---- execution stats -----------------------------------------------------------------------------

def test_execution_stats_percentiles_match_numpy():
    rng = np.random.default_rng(3)
    samples = []
    lat, steps_, calls_, tl = [], [], [], []
    for i in range(57):
        n = int(rng.integers(0, 5))
        cl = rng.uniform(1, 100, n).round(2).tolist()
        tc = [{"name": "t", "latency_ms": x, "error": "boom" if j == 0 and i % 7 == 0 else None} for j, x in enumerate(cl)]
        trace = {"tool_calls": tc, "trajectory": ["s"] * (i % 4)}
        if i % 3:
            trace["latency_ms"] = float(rng.uniform(100, 5000))
            lat.append(trace["latency_ms"])
        samples.append(Sample(id=str(i), trace=A.parse_trace(trace)))
        steps_.append(i % 4)
        calls_.append(n)
        tl.extend(cl)
    samples.append(Sample(id="no-trace"))
    st_ = A.execution_stats(samples)
    assert st_["n_traces"] == 57
    for name, vals in (("latency_ms", lat), ("step_count", steps_), ("tool_calls", calls_), ("tool_latency_ms", tl)):
        d = st_[name]
        assert d["n"] == len(vals)
        assert d["mean"] == pytest.approx(np.mean(vals))
        for q in (50, 95, 99):
            assert d[f"p{q}"] == pytest.approx(np.percentile(vals, q))
    n_err = sum(1 for i in range(57) if i % 7 == 0 and any(s.trace.tool_calls for s in samples[i:i + 1]))
    assert st_["tool_errors"] == n_err
    empty = A.execution_stats([])
    assert empty["latency_ms"] == {"n": 0, "mean": None, "p50": None, "p95": None, "p99": None, "min": None, "max": None}
    assert empty["tool_error_rate"] is None


def test_agent_stats_cli_and_show_section(db_url):
    res = _run(str(EXAMPLE / "openai_traces.jsonl"), ["tool_completeness"], db=db_url)
    r = CliRunner().invoke(app, ["agent-stats", res.run_id, "--db", db_url, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["n_traces"] == 4
    assert data["step_count"]["mean"] == pytest.approx(np.mean([4, 2, 2, 2]))  # assistant messages
    assert data["latency_ms"]["p50"] == pytest.approx(np.percentile([15000, 9800, 11200, 7300], 50))  # from metadata
    assert data["tool_calls"]["mean"] == pytest.approx((4 + 2 + 2 + 1) / 4)
    r = CliRunner().invoke(app, ["show", res.run_id, "--db", db_url])
    assert r.exit_code == 0 and "agent execution stats" in r.output and "tool_latency_ms" in r.output


def test_all_agent_values_in_range_on_random_traces():
    rng = np.random.default_rng(0)
    names = ["SEC", "Market", "Web", "Legal", "other"]
    rows = []
    for i in range(60):
        k = int(rng.integers(0, 6))
        rows.append(_sample(str(i), {
            "intent": {"entity": str(rng.choice(["Apple", "apple inc", "", "XYZ"])),
                       "type": rng.choice(["public_us", None]), "confidence": float(rng.uniform(-1, 2))},
            "plan": [str(x) for x in rng.choice(["fetch data", "analyze", "noop"], int(rng.integers(0, 12)))],
            "tool_calls": [str(x) for x in rng.choice(names, k)],
            "trajectory": [str(x) for x in rng.choice(TRAJ + ["zz"], int(rng.integers(0, 10)))],
            "final_output": {"risk_level": "low", "credit_score": float(rng.uniform(-10, 110))}},
            company="Apple", task_type=str(rng.choice(["public_us", "private", "public_non_us"]))))
    res = _run(rows, ["intent_correctness", "plan_quality", "tool_choice_correctness", "tool_completeness",
                      "trajectory_match", "final_answer_quality"])
    for key, scores in res.scores.items():
        for s in scores:
            assert s.value is not None and 0 <= s.value <= 1 and not math.isnan(s.value), (key, s)


def test_config_expected_tool_calls_with_arguments_and_aliases():
    opts = {"agent": {"tool_aliases": {"Search": "search"},
                      "expected_tool_calls": [{"name": "Search", "arguments": {"q": "x"}}]}}
    rows = [{"id": "a", "trace": {"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}},
            {"id": "b", "trace": {"tool_calls": [{"name": "Search", "arguments": {"q": "y"}}]}}]
    res = evaluate(rows, ["trajectory_match@strict", "trajectory_match"], options=opts)
    assert [r["trajectory_match@strict"] for r in res.rows()] == [1.0, 0.0]
    assert [r["trajectory_match"] for r in res.rows()] == [1.0, 1.0]  # names only


def _call_then(result_message: dict) -> list[dict]:
    return [{"role": "user", "content": "Apple's revenue?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "sec_search", "arguments": "{}"}}]},
            result_message,
            {"role": "assistant", "content": "I could not find it."}]


@pytest.mark.parametrize(("message", "error"), [
    # OpenAI tool-call logs: the tool reports its failure as a JSON object in the content
    ({"role": "tool", "tool_call_id": "c1", "content": '{"error": "rate limited"}'}, "rate limited"),
    ({"role": "tool", "tool_call_id": "c1", "content": '{"error": {"message": "timeout", "code": 504}}'},
     "timeout"),
    # Anthropic tool_result block flagged is_error (text content and block content)
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": True,
                                   "content": "upstream 500"}]}, "upstream 500"),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": True,
                                   "content": [{"type": "text", "text": "no such filing"}]}]}, "no such filing"),
    # LangChain ToolMessage
    ({"role": "tool", "tool_call_id": "c1", "status": "error", "content": "bad ticker"}, "bad ticker"),
])
def test_tool_failures_in_chat_logs_count_as_tool_errors(message, error):
    trace = A.parse_trace(_call_then(message))
    assert [c.error for c in trace.tool_calls] == [error]
    stats = A.execution_stats([Sample(id="1", trace=trace)])
    assert stats["tool_errors"] == 1 and stats["tool_error_rate"] == 1.0


@pytest.mark.parametrize("content", ['{"error": null, "revenue": 391}', '{"error": 0.02, "estimate": 5}',
                                     '{"revenue": 391}', "error budget is fine"])
def test_tool_results_that_are_not_failures_are_not_tool_errors(content):
    trace = A.parse_trace(_call_then({"role": "tool", "tool_call_id": "c1", "content": content}))
    assert trace.tool_calls[0].error is None
    assert A.execution_stats([Sample(id="1", trace=trace)])["tool_errors"] == 0


def test_tool_errors_in_our_jsonl_tool_calls():
    trace = A.parse_trace({"tool_calls": [
        {"name": "a", "result": {"error": "quota exceeded"}},
        {"name": "b", "result": "ok", "is_error": True},
        {"name": "c", "result": "fine", "error": False},
        {"name": "d", "result": {"rows": 3}},
        {"name": "e", "error": "boom"}]})
    assert [c.error for c in trace.tool_calls] == ["quota exceeded", "ok", None, None, "boom"]
    assert A.execution_stats([Sample(id="1", trace=trace)])["tool_errors"] == 3
