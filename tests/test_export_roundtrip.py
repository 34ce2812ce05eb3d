"""``ragmeter export RUN -f FMT -o x.FMT && ragmeter eval x.FMT`` scores what the run scored: every
value (within 1e-9), every no-value reason, every summary count, for the bundled example (lexical,
retrieval, semantic, context metrics), example-chat and a conversation with tool calls
(conversation metrics), the agent example (agent metrics) and a set of edge cases (several
references, graded relevance by id, spans, an empty retrieval, missing fields, JSON-looking texts)."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import pytest

from cli_runner import run_main
from ragmeter.io import load
from ragmeter.store import Store

AGENT = Path(str(resources.files("ragmeter") / "data" / "agent_example"))
RAG_METRICS = ("token_f1,rouge1_fmeasure,bleu,exact_match,precision@5,recall@5,mrr,ndcg@10,map,hit_rate,"
               "span_iou,hybrid_log_rank,semantic_similarity,context_similarity,correct_keyword")

EDGE_ROWS = [
    {"id": "many-refs", "question": "Capital of France?", "answer": "Paris is the capital.",
     "references": ["Paris", "The capital is Paris."], "label": 1, "metadata": {"keywords": ["Paris"], "topic": "geo"},
     "contexts": [{"id": "d1", "text": "Paris is the capital of France.", "source": "geo.md", "start": 0, "end": 31,
                   "score": 0.91},
                  {"id": "d2", "text": "Lyon is a city.", "source": "geo.md", "start": 40, "end": 55, "score": 0.5}],
     "relevant_ids": {"d1": 3, "d9": 1}},
    {"id": "empty-retrieval", "question": "Who wrote it?", "answer": "Nobody knows.", "reference": "Ann Smith",
     "contexts": [], "relevant": ["Ann Smith wrote the report."]},
    {"id": "no-answer", "question": "When?", "reference": "In 2019", "label": 0},
    {"id": "json-texts", "question": "[1, 2] or {\"a\": 1}?", "answer": "{\"risk\": \"low\", \"score\": 0.9}",
     "reference": "{\"risk\": \"low\"}", "contexts": ["[see the table]", "{\"note\": \"x\"}"],
     "relevant": ["{\"note\": \"x\"}"]},
    {"id": "spans", "question": "Where is the head office?", "answer": "At 14 Quayside Row, Port Averly.",
     "reference": "14 Quayside Row", "metadata": {"nested": {"a": [1, 2.5, None]}, "note": "ünïcødé\nline"},
     "contexts": [{"id": "c1", "text": "The head office is at 14 Quayside Row.", "source": "company.md", "start": 600,
                   "end": 640}],
     "relevant": [{"source": "company.md", "start": 610, "end": 635}]},
]

CONVERSATIONS = [
    {"id": "conv-tools", "chatbot_role": "You book ferry tickets.", "turns": [
        {"role": "user", "content": "Book me a ticket to Halden Isle."},
        {"role": "assistant", "content": "Booked: one adult return.", "expected_tools": ["search", "book"],
         "reference": "Booked one adult return.",
         "tool_calls": [{"name": "search", "arguments": {"to": "Halden"}, "result": {"ok": True}},
                        {"name": "book", "arguments": {"fare": "adult"}, "result": "ticket 42"}]},
        {"role": "user", "content": "And a bike?"},
        {"role": "assistant", "content": "Bikes travel free.", "expected_tools": [], "reference": "Bikes are free."}]},
    {"id": "conv-miss", "turns": [
        {"role": "user", "content": "Cancel it."},
        {"role": "assistant", "content": "Done.", "expected_tools": ["cancel"],
         "tool_calls": [{"name": "search", "arguments": {}}]}]},
]


def _eval(db_url: str, data: str, *args: str) -> tuple[int, str]:
    code, out, err = run_main("eval", data, *args, "--db", db_url, "--no-progress", "--json")
    assert code in (0, 1, 3), out + err
    return code, json.loads(out)["run_id"]


def _export(db_url: str, run_id: str, fmt: str, path: Path) -> Path:
    code, out, err = run_main("export", run_id, "-f", fmt, "-o", str(path), "--db", db_url)
    assert code == 0, out + err
    return path


def _same_run(db_url: str, a: str, b: str) -> None:
    """Every score of run ``b`` is run ``a``'s (value within 1e-9, reason), and so are the summary's
    n, no-value count and reasons."""
    store = Store(db_url)
    ta, tb = store.score_table(a), store.score_table(b)
    assert set(ta) == set(tb) and ta
    for metric, by_id in ta.items():
        assert set(by_id) == set(tb[metric]), metric
        for sid, sa in by_id.items():
            sb = tb[metric][sid]
            if sa.value is None:
                assert sb.value is None and sb.reason == sa.reason, (metric, sid, sa, sb)
            else:
                assert sb.value is not None and math.isclose(sa.value, sb.value, rel_tol=0, abs_tol=1e-9), (
                    metric, sid, sa.value, sb.value)
    sa, sb = store.get_run(a).summary, store.get_run(b).summary
    for metric in ta:
        for field in ("n", "n_missing", "missing_reasons"):
            assert sa[metric].get(field) == sb[metric].get(field), (metric, field)


def _round_trip(db_url: str, tmp_path: Path, source: str, fmts: tuple[str, ...], *args: str) -> None:
    code, first = _eval(db_url, source, *args)
    original = load(source)
    for fmt in fmts:
        path = _export(db_url, first, fmt, tmp_path / f"run.{fmt}")
        assert load(path).fingerprint == original.fingerprint, fmt  # the very same samples
        again_code, again = _eval(db_url, str(path), *args)
        assert again_code == code, fmt
        _same_run(db_url, first, again)


def test_example_lexical_retrieval_semantic_round_trip(tmp_path, db_url):
    _round_trip(db_url, tmp_path, "example", ("jsonl", "csv", "parquet"), "-m", RAG_METRICS,
                "--threshold", "token_f1>=0.3")


def test_edge_cases_round_trip(tmp_path, db_url):
    src = tmp_path / "edge.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in EDGE_ROWS), encoding="utf-8")
    _round_trip(db_url, tmp_path, str(src), ("jsonl", "csv", "parquet"), "-m", RAG_METRICS)
    rows = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()]
    by_id = {r["id"]: r for r in rows}
    # the relevant ids and grades, the spans and the retrieved ids are in the export, under the
    # names eval reads; a chunk that is only a text is that text
    assert by_id["many-refs"]["relevant"] == [{"id": "d1", "grade": 3.0}, {"id": "d9", "grade": 1.0}]
    assert by_id["many-refs"]["contexts"][0] == {"text": "Paris is the capital of France.", "id": "d1",
                                                 "source": "geo.md", "start": 0, "end": 31, "score": 0.91}
    assert by_id["empty-retrieval"]["contexts"] == [] and by_id["no-answer"]["contexts"] is None
    assert by_id["json-texts"]["contexts"] == ["[see the table]", "{\"note\": \"x\"}"]
    assert "context_ids" not in by_id["spans"]


def test_empty_text_survives_jsonl_and_parquet(tmp_path, db_url):
    """An empty answer is scored (a missing one is not): JSONL and Parquet keep the difference; a CSV
    cell cannot (an empty cell is a missing value), as docs/ci.md says."""
    src = tmp_path / "empty.jsonl"
    src.write_text(json.dumps({"id": "e", "answer": "", "reference": "x"}) + "\n"
                   + json.dumps({"id": "m", "reference": "x"}) + "\n", encoding="utf-8")
    code, run = _eval(db_url, str(src), "-m", "token_f1")
    for fmt in ("jsonl", "parquet"):
        path = _export(db_url, run, fmt, tmp_path / f"e.{fmt}")
        assert [s.answer for s in load(path)] == ["", None]
        _same_run(db_url, run, _eval(db_url, str(path), "-m", "token_f1")[1])
    assert [s.answer for s in load(_export(db_url, run, "csv", tmp_path / "e.csv"))] == [None, None]


def test_result_columns_are_not_read_as_inputs(tmp_path, db_url):
    """A metric column named like an input alias (a grader called ``output``, a ``label``-like
    name) is a result of the exported run: not an answer, not metadata."""
    rows = [{"id": "a", "question": "q", "references": ["Paris"], "output": 1.0, "correctness": 0.0, "token_f1": 0.5,
             "token_f1__pass": True, "no_value_reasons": {"answer_metric": "missing field: answer"}, "judge": {}}]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    ds = load(path)
    s = ds.samples[0]
    assert s.answer is None and s.label is None and s.metadata == {} and s.references == ["Paris"]
    assert ds.unused_columns == []
    # the same columns without the result markers are a plain dataset: aliases apply
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({k: v for k, v in rows[0].items() if k not in ("no_value_reasons", "judge")}) + "\n",
                     encoding="utf-8")
    assert load(plain).samples[0].answer == "1.0"


def test_rows_exported_before_every_field_still_read(tmp_path):
    """An export written before the rows carried every field (``reference``, ``contexts`` as texts,
    ``context_ids``) reads its reference and the retrieved ids."""
    row = {"id": "a", "question": "q", "answer": "Paris", "reference": "Paris", "contexts": ["t1", "t2"],
           "context_ids": ["d1", "d2"], "token_f1": 1.0, "no_value_reasons": {}, "judge": {}}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "b", "context_ids": [None, None]}) + "\n",
                    encoding="utf-8")
    ds = load(path)
    a, b = ds.samples
    assert a.references == ["Paris"] and [(c.id, c.text) for c in a.contexts] == [("d1", "t1"), ("d2", "t2")]
    assert [(c.id, c.text) for c in b.contexts] == [(None, "t1"), (None, "t2")] and b.metadata == {}
    assert ds.unused_columns == []


def test_conversations_round_trip(tmp_path, db_url):
    _round_trip(db_url, tmp_path, "example-chat", ("jsonl", "csv", "parquet"),
                "-m", "turn_tool_correctness,token_f1,bleu,semantic_similarity,context_similarity")
    src = tmp_path / "convs.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS), encoding="utf-8")
    metrics = "turn_tool_correctness,token_f1"
    code, run = _eval(db_url, str(src), "-m", metrics)
    values = Store(db_url).score_table(run)["turn_tool_correctness"]
    assert values["conv-tools"].value == 1.0 and values["conv-miss"].value == 0.0
    path = _export(db_url, run, "jsonl", tmp_path / "convs-run.jsonl")
    again = _eval(db_url, str(path), "-m", metrics)[1]
    _same_run(db_url, run, again)


@pytest.mark.parametrize(("traces", "config"), [("traces.jsonl", "expectations.yaml"),
                                                ("openai_traces.jsonl", "openai_expectations.yaml")])
def test_agent_example_round_trip(tmp_path, db_url, traces, config):
    _round_trip(db_url, tmp_path, str(AGENT / traces), ("jsonl", "csv", "parquet"), "--config", str(AGENT / config))


def test_to_pandas_and_out_rows_read_back(tmp_path, db_url):
    """``eval --out`` rows and ``to_pandas()`` hold the same inputs: they evaluate to the same values."""
    import ragmeter

    res = ragmeter.evaluate("example", ["token_f1", "ndcg@10", "span_iou"], db=db_url)
    out = res.write_jsonl(tmp_path / "out.jsonl")
    for data in (str(out), res.to_pandas()):
        again = ragmeter.evaluate(data, ["token_f1", "ndcg@10", "span_iou"], db=db_url)
        _same_run(db_url, res.run_id, again.run_id)
