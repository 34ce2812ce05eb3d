"""Scoring agent traces per span (``ragmeter eval --per-span``, ragmeter.run.spans): rows linked to
their trace, each metric on the rows of its span kinds, intervals clustered by trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_runner import run_main
from judge_server import judge_options, server_fixtures
from ragmeter.core.schema import AgentTrace, Sample, TraceSpan
from ragmeter.io.readers import load
from ragmeter.io.traces import parse_trace
from ragmeter.run.runner import evaluate
from ragmeter.run.spans import expand, output_text, tree_order
from ragmeter.stats.clustered import cluster_interval
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()

HEIGHT = "The Eiffel Tower is 330 metres tall."


def eiffel(sid: str = "t1", trace_id: str = "abc123") -> dict:
    """Two retriever spans and two LLM spans: the first LLM span states the height before the
    document that says it is retrieved (unsupported there), the second after it (supported)."""
    return {"id": sid, "question": "Where is the Eiffel Tower and how tall is it?", "answer": HEIGHT,
            "references": [HEIGHT], "relevant": [{"id": "d1"}, {"id": "d3"}],
            "metadata": {"expected_tools": ["search"]},
            "trace": {"trace_id": trace_id, "spans": [
                {"span_id": "root", "kind": "agent", "name": "invoke_agent", "start_ms": 0, "latency_ms": 900},
                {"span_id": "r1", "parent_id": "root", "kind": "retriever", "name": "retrieve", "start_ms": 10,
                 "query": "Eiffel Tower location",
                 "documents": [{"id": "d2", "text": "Rome has the Colosseum."},
                               {"id": "d1", "text": "The Eiffel Tower is in Paris."}]},
                {"span_id": "l1", "parent_id": "root", "kind": "llm", "name": "chat", "start_ms": 100,
                 "model": "gpt-x", "input_tokens": 50, "output_tokens": 10, "output": HEIGHT},
                {"span_id": "x1", "parent_id": "root", "kind": "tool", "name": "execute_tool", "start_ms": 320,
                 "tool_name": "search", "tool_arguments": {"q": "Eiffel height"}, "tool_result": "330 m"},
                {"span_id": "r2", "parent_id": "root", "kind": "retriever", "name": "retrieve", "start_ms": 400,
                 "query": "Eiffel Tower height",
                 "documents": [{"id": "d3", "text": "The Eiffel Tower is 330 metres tall."}]},
                {"span_id": "l2", "parent_id": "root", "kind": "llm", "name": "chat", "start_ms": 500,
                 "output": [{"role": "assistant", "content": HEIGHT}]},
            ]}}


@pytest.fixture
def traces(tmp_path):
    p = tmp_path / "traces.jsonl"
    second = eiffel("t2", "def456")
    second["trace"]["spans"][1]["documents"].reverse()  # the second trace ranks d1 first
    p.write_text("\n".join(json.dumps(r) for r in (eiffel("t1", "abc123"), second)) + "\n")
    return p


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


def rows_of(result, key, kind=None):
    """``[(sample, score)]`` of metric ``key`` that were scored (not "not scored")."""
    out = []
    for s, sc in zip(result.samples, result.scores[key], strict=True):
        if sc.reason == "not scored":
            continue
        out.append((s, sc))
    return [(s, sc) for s, sc in out if kind is None or s.metadata["span_kind"] == kind]


def test_two_retriever_and_two_llm_spans_give_two_rows_each_linked_to_the_trace(traces, server, tmp_path):
    res = evaluate(str(traces), ["mrr", "faithfulness"], per_span=True, db=f"sqlite:///{tmp_path}/r.db",
                   options=judge_options(server))
    mrr = rows_of(res, "mrr")
    faith = rows_of(res, "faithfulness")
    assert len(mrr) == 4 and len(faith) == 4  # two of each per trace, two traces
    for tid, sid in (("abc123", "t1"), ("def456", "t2")):
        ret = [(s, sc) for s, sc in mrr if s.metadata["trace_id"] == tid]
        llm = [(s, sc) for s, sc in faith if s.metadata["trace_id"] == tid]
        assert [s.metadata["span_id"] for s, _ in ret] == ["r1", "r2"]
        assert [s.metadata["span_id"] for s, _ in llm] == ["l1", "l2"]
        assert {s.metadata["span_kind"] for s, _ in ret} == {"retriever"}
        assert {s.metadata["span_kind"] for s, _ in llm} == {"llm"}
        assert all(s.metadata["trace_sample"] == sid for s, _ in ret + llm)
        # retrieval against the trace's qrels: d1 at rank 2 (t1) or 1 (t2) in r1, d3 at rank 1 in r2
        assert [sc.value for _, sc in ret] == ([0.5, 1.0] if sid == "t1" else [1.0, 1.0])
        # the first LLM span saw only r1's documents (height unsupported), the second r1's and r2's
        first = ["d2", "d1"] if sid == "t1" else ["d1", "d2"]
        assert [[c.id for c in s.contexts] for s, _ in llm] == [first, first + ["d3"]]
        assert [sc.value for _, sc in llm] == [0.0, 1.0]
    # the trace rows are not scored by these metrics: neither values nor missing values
    summary = res.summary
    assert summary["mrr"].n == 4 and summary["mrr"].n_missing == 0
    assert summary["faithfulness"].n == 4 and summary["faithfulness"].n_missing == 0
    # the interval is clustered by trace: two clusters, the CR1 interval of the four values
    for key, values in (("mrr", [0.5, 1.0, 1.0, 1.0]), ("faithfulness", [0.0, 1.0, 0.0, 1.0])):
        m = summary[key]
        assert m["n_clusters"] == 2
        want = cluster_interval(np.array(values), ["t1", "t1", "t2", "t2"], bounds=(0.0, 1.0))
        assert (m.ci_low, m.ci_high) == pytest.approx(want[:2]) and m.ci_method == want[2]
    # the store keeps the rows and their links
    store = open_store(f"sqlite:///{tmp_path}/r.db")
    stored = {s.id: s for s in store.run_samples(res.run_id)}
    assert stored["t1#r2"].metadata["span_id"] == "r2" and stored["t1#r2"].metadata["trace_id"] == "abc123"


def test_interval_differs_from_the_independent_one(traces, tmp_path):
    """Four rows from two traces carry the information of two clusters, not four samples."""
    clustered = evaluate(str(traces), ["mrr"], per_span=True, db=f"sqlite:///{tmp_path}/c.db").summary["mrr"]
    values = np.array([0.5, 1.0, 1.0, 1.0])
    cr1 = cluster_interval(values, ["a", "a", "b", "b"], bounds=(0.0, 1.0))
    assert (clustered.ci_low, clustered.ci_high) == pytest.approx(cr1[:2])
    assert clustered.ci_method == cr1[2] == "cluster_robust" and clustered["n_clusters"] == 2
    independent = evaluate([s for s in expand_rows(traces) if s.metadata["span_kind"] == "retriever"], ["mrr"],
                           db=f"sqlite:///{tmp_path}/i.db").summary["mrr"]
    assert independent.mean == clustered.mean and independent.ci_method != "cluster_robust"


def expand_rows(path):
    from ragmeter.io.readers import load

    return [s.model_copy(update={"metadata": {"span_kind": s.metadata["span_kind"]}})
            for s in expand(load(str(path)).samples)]


def test_without_per_span_a_trace_is_one_sample(traces, tmp_path):
    res = evaluate(str(traces), ["mrr", "tool_choice_correctness"], db=f"sqlite:///{tmp_path}/p.db",
                   options={"agent": {"expected_tools": ["search"]}})
    assert [s.id for s in res.samples] == ["t1", "t2"]
    assert "n_clusters" not in res.summary["mrr"].to_dict()
    # a JSONL trace written as spans: what its fields do not say, its spans do (as for span files)
    trace = res.samples[0].trace
    assert [c.name for c in trace.tool_calls] == ["search"] and trace.trajectory == ["search"]
    assert trace.step_count == 2 and trace.latency_ms == 900 and trace.trace_id == "abc123"
    failed = load([{"id": "f", "trace": {"spans": [{"span_id": "a", "kind": "tool", "tool_name": "f",
                                                    "status": "error"}], "step_count": 7}}]).samples[0].trace
    assert failed.tool_calls[0].error == "error" and failed.step_count == 7  # a field given wins
    assert failed.trace_id is None


def test_argument_correctness_on_each_tool_span_and_on_the_trace(tmp_path):
    first, second = eiffel("t1"), eiffel("t2")
    second["trace"]["spans"][3]["tool_arguments"] = {"q": "Eiffel size"}  # not the expected argument
    second["trace"]["spans"].append({"span_id": "x2", "parent_id": "root", "kind": "tool", "start_ms": 600,
                                     "tool_name": "search", "tool_arguments": {"q": "Eiffel height", "lang": "en"}})
    for row in (first, second):
        row["metadata"]["expected_tool_calls"] = [{"name": "search", "arguments": {"q": "Eiffel height"}}]
    p = tmp_path / "args.jsonl"
    p.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    res = evaluate(str(p), ["argument_correctness"], per_span=True, db=f"sqlite:///{tmp_path}/a.db")
    got = {s.id: sc.value for s, sc in rows_of(res, "argument_correctness")}
    assert got == {"t1": 1.0, "t1#x1": 1.0, "t2": 0.0, "t2#x1": 0.0, "t2#x2": 0.0}
    sup = evaluate(str(p), ["argument_correctness@superset"], per_span=True, db=f"sqlite:///{tmp_path}/b.db")
    got = {s.id: sc.value for s, sc in rows_of(sup, "argument_correctness@superset")}
    assert got == {"t1": 1.0, "t1#x1": 1.0, "t2": 0.5, "t2#x1": 0.0, "t2#x2": 1.0}  # x2 has every expected argument
    assert sup.summary["argument_correctness@superset"]["n_clusters"] == 2


def test_tool_spans_and_the_trace_rows_of_agent_metrics(traces, tmp_path):
    res = evaluate(str(traces), ["tool_choice_correctness", "trajectory_match"], per_span=True,
                   db=f"sqlite:///{tmp_path}/t.db",
                   options={"agent": {"expected_trajectory": ["search"]}})
    tool = rows_of(res, "tool_choice_correctness", "tool")
    assert [(s.metadata["span_id"], s.trace.tool_calls[0].arguments, sc.value) for s, sc in tool] == [
        ("x1", {"q": "Eiffel height"}, 1.0)] * 2
    trace_rows = rows_of(res, "tool_choice_correctness", "trace")
    assert [s.id for s, _ in trace_rows] == ["t1", "t2"] and all(sc.value == 1.0 for _, sc in trace_rows)
    traj = rows_of(res, "trajectory_match")
    assert [s.metadata["span_kind"] for s, _ in traj] == ["trace", "trace"]  # once per trace, not per span
    assert all(sc.value == 1.0 for _, sc in traj)
    assert res.summary["trajectory_match"]["n_clusters"] == 2


def test_each_agent_of_a_multi_agent_trace_is_scored_with_its_own_expectations(tmp_path):
    row = eiffel()
    for sp in row["trace"]["spans"]:
        sp["agent"] = "writer" if sp["span_id"] in ("r2", "l2") else "planner"
    row["trace"]["spans"].append({"span_id": "h1", "parent_id": "root", "kind": "handoff", "agent": "planner",
                                  "to_agent": "writer", "start_ms": 350})
    row["metadata"]["agents"] = {"writer": {"expected_tools": ["lookup"]}}
    p = tmp_path / "multi.jsonl"
    p.write_text(json.dumps(row) + "\n")
    res = evaluate(str(p), ["tool_completeness"], per_span=True, db=f"sqlite:///{tmp_path}/m.db")
    got = {s.id: (s.metadata.get("agent"), sc.value, sc.reason) for s, sc in rows_of(res, "tool_completeness")}
    assert got == {"t1": (None, 1.0, None),                     # the whole trace called search
                   "t1#agent:planner": ("planner", 1.0, None),  # the planner called search
                   "t1#agent:writer": ("writer", 0.0, None)}    # the writer was expected to call lookup
    assert res.summary["tool_completeness"]["n_clusters"] == 1


def test_a_span_without_what_a_metric_needs_has_no_value(tmp_path):
    row = eiffel()
    row["trace"]["spans"][1]["documents"] = None  # r1 recorded no documents
    row["trace"]["spans"][2]["output"] = [{"role": "assistant", "tool_calls": [{"id": "c1"}]}]  # l1: tools only
    p = tmp_path / "cut.jsonl"
    p.write_text(json.dumps(row) + "\n")
    res = evaluate(str(p), ["mrr", "context_similarity"], per_span=True, db=f"sqlite:///{tmp_path}/x.db",
                   skip_unavailable=True)
    assert [(s.metadata["span_id"], sc.reason) for s, sc in rows_of(res, "mrr")] == [
        ("r1", "missing field: contexts"), ("r2", None)]
    llm = {s.metadata["span_id"]: s for s, _ in rows_of(res, "context_similarity")}
    assert llm["l1"].answer is None and llm["l2"].answer == HEIGHT
    assert [c.id for c in llm["l2"].contexts] == ["d3"]  # the documents recorded before it


def test_tree_order_puts_children_after_their_parent_and_siblings_by_start():
    spans = [TraceSpan(span_id="l", parent_id="a", kind="llm", start_ms=5),
             TraceSpan(span_id="a", kind="agent", start_ms=0),
             TraceSpan(span_id="r", parent_id="c", kind="retriever", start_ms=2),
             TraceSpan(span_id="c", parent_id="a", kind="chain", start_ms=1)]
    assert [s.span_id for s in tree_order(spans)] == ["a", "c", "r", "l"]
    # a cycle of parents is not an endless loop, and no span is lost
    loop = [TraceSpan(span_id="x", parent_id="y"), TraceSpan(span_id="y", parent_id="x")]
    assert sorted(s.span_id for s in tree_order(loop)) == ["x", "y"]


def test_rows_of_a_sample_without_spans_and_output_texts():
    plain = Sample(id="s", question="q", answer="a")
    assert [r.metadata["span_kind"] for r in expand([plain])] == ["sample"]  # scored by every metric
    trace = AgentTrace(spans=[TraceSpan(span_id="1", kind="llm", output="hi")])
    rows = expand([Sample(id="s", trace=trace)])
    assert [r.id for r in rows] == ["s", "s#1"] and rows[1].contexts is None
    assert output_text({"role": "assistant", "parts": [{"type": "text", "content": "x"},
                                                       {"type": "tool_call", "name": "f"}]}) == "x"
    assert output_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) == "a"
    assert output_text({"choices": [{"message": {"role": "assistant", "content": "c"}}]}) == "c"
    assert output_text(None) is None and output_text([{"role": "assistant", "tool_calls": []}]) is None
    assert parse_trace({"spans": [{"span_id": "a", "kind": "tool", "tool_name": "f"}]}).spans[0].tool_name == "f"


def test_cli_per_span_json_and_table(traces, tmp_path):
    db = f"sqlite:///{tmp_path}/cli.db"
    code, out, err = run_main("eval", str(traces), "--metrics", "mrr,recall", "--per-span", "--db", db, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["metrics"]["mrr"]["n_clusters"] == 2 and info["metrics"]["mrr"]["n"] == 4
    assert info["metrics"]["mrr"]["ci_method"] == "cluster_robust"
    code, out, err = run_main("eval", str(traces), "--metrics", "mrr", "--per-span", "--db", db, "--no-progress")
    assert code == 0, err
    assert "2 traces, 10 span rows" in out
    # a resumed per-span run keeps its rows
    run_id = open_store(db).resolve_run("latest")
    code, out, err = run_main("eval", str(traces), "--resume", run_id, "--db", db, "--json")
    assert code == 0, err


def test_samples_without_spans_are_scored_as_they_are_and_a_metric_without_rows_is_incomplete(tmp_path):
    code, out, err = run_main("eval", "example", "--metrics", "mrr", "--per-span", "--json",
                              "--db", f"sqlite:///{tmp_path}/e.db")
    assert code == 0, err
    assert json.loads(out)["metrics"]["mrr"]["n"] == 145  # each sample's own contexts
    row = {"id": "a", "question": "q", "answer": "x", "contexts": [{"id": "d1", "text": "x"}],
           "relevant": [{"id": "d1"}], "trace": {"spans": [{"span_id": "1", "kind": "llm", "output": "x"}]}}
    p = tmp_path / "noretriever.jsonl"
    p.write_text(json.dumps(row) + "\n")
    code, out, err = run_main("eval", str(p), "--metrics", "mrr", "--per-span", "--json",
                              "--db", f"sqlite:///{tmp_path}/n.db")
    assert code == 3
    assert json.loads(out)["incomplete"] == ["mrr: no row of the kinds it scores per span (retriever) in any trace"]


def test_per_span_refuses_conversations(tmp_path):
    code, out, err = run_main("eval", "example-chat", "--metrics", "token_f1", "--per-span",
                              "--db", f"sqlite:///{tmp_path}/c.db", "--no-progress")
    assert code == 2 and "--per-span scores agent traces" in err


def test_two_per_span_runs_are_compared_and_gated_per_trace(traces, tmp_path):
    db = f"sqlite:///{tmp_path}/cmp.db"
    for name in ("base", "cand"):
        code, out, err = run_main("eval", str(traces), "--metrics", "mrr", "--per-span", "--db", db,
                                  "--name", name, "--json")
        assert code == 0, err
    code, out, err = run_main("compare", "base", "cand", "--db", db, "--json")
    assert code == 0, err
    row = json.loads(out)["comparisons"][0]
    assert row["n"] == 4 and row["n_clusters"] == 2
    assert row["note"] == "4 rows of 2 traces: interval and test per trace"
    code, out, err = run_main("gate", "cand", "--baseline", "base", "--db", db, "--json")
    assert code == 0, err
    assert "4 rows of 2 traces: tested per trace" in out
    page = tmp_path / "cmp.html"
    code, out, err = run_main("report", "base", "cand", "--db", db, "-o", str(page))
    assert code == 0, err
    html = page.read_text()
    assert "in 2 traces" in html and "in 2 conversations" not in html
