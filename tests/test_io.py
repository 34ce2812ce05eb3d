"""Dataset readers: aliases, formats, --map, line-numbered errors, skipping bad rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ragmeter
from ragmeter.core.errors import DatasetError
from ragmeter.io import load, save


def _write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


@pytest.mark.parametrize("q,a,r,c", [
    ("question", "answer", "reference", "contexts"),
    ("query", "actual", "expected", "context"),
    ("user_input", "response", "ground_truth", "retrieved_contexts"),
    ("query", "prediction", "ground_truth_answer", "contexts"),
])
def test_aliases(q, a, r, c):
    ds = load([{q: "Q?", a: "A.", r: "R.", c: ["c1", "c2"]}])
    s = ds[0]
    assert (s.question, s.answer, s.references) == ("Q?", "A.", ["R."])
    assert [ch.text for ch in s.contexts] == ["c1", "c2"]


def test_id_lists_and_graded_qrels():
    s = load([{"query": "q", "retrieved_doc_ids": ["d1", "d2"], "relevant_doc_ids": {"d2": 2, "d9": 1}}])[0]
    assert [c.id for c in s.contexts] == ["d1", "d2"]
    assert [(c.id, c.grade) for c in s.relevant] == [("d2", 2.0), ("d9", 1.0)]
    s = load([{"query": "q", "relevant_doc_ids": ["doc_123", 456]}])[0]
    assert [c.id for c in s.relevant] == ["doc_123", "456"]


def test_span_chunks_and_extra_columns_to_metadata():
    s = load([{"question": "q", "ground_truth_chunks": [{"file": "a.md", "start_char": 3, "end_char": 9}],
               "domain": "how-to"}])[0]
    assert s.relevant[0].source == "a.md" and (s.relevant[0].start, s.relevant[0].end) == (3, 9)
    assert s.metadata == {"domain": "how-to"}


def test_several_references_and_labels():
    s = load([{"question": "q", "answer": "a", "references": ["x", "y"], "is_correct": "yes"}])[0]
    assert s.references == ["x", "y"] and s.label == 1.0
    assert load([{"answer": "a", "label": False}])[0].label == 0.0


def test_map_option(tmp_path):
    p = _write_jsonl(tmp_path / "d.jsonl", [{"my_q": "q", "my_out": "a", "gold": "g"}])
    s = load(p, mapping=["question=my_q", "answer=my_out", "reference=gold"])[0]
    assert (s.question, s.answer, s.references) == ("q", "a", ["g"])
    with pytest.raises(DatasetError, match="no such column"):
        load(p, mapping={"answer": "nope"})
    with pytest.raises(DatasetError, match="not a sample field"):
        load(p, mapping=["colour=my_q"])


def test_broken_line_names_file_and_line(tmp_path):
    rows = [{"id": f"s{i}", "question": "q", "answer": "a"} for i in range(10)]
    rows[6] = '{"id": "s6", "question": "q", "answer": '  # 7th line truncated
    p = _write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DatasetError) as ei:
        load(p)
    assert ei.value.line == 7 and "bad.jsonl" in str(ei.value) and "line 7" in str(ei.value)
    ds = load(p, on_error="skip")
    assert len(ds) == 9 and len(ds.skipped) == 1 and ds.skipped[0].line == 7


def test_bad_field_is_named(tmp_path):
    p = _write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "a"},
                                             {"question": "q", "answer": "a", "label": 7}])
    with pytest.raises(DatasetError) as ei:
        load(p)
    assert ei.value.line == 2 and ei.value.field == "label" and "[0, 1]" in str(ei.value)
    p = _write_jsonl(tmp_path / "e.jsonl", [{"question": "q", "contexts": [{"txt": "x"}]}])
    with pytest.raises(DatasetError) as ei:
        load(p)
    assert ei.value.field == "contexts" and "txt" in str(ei.value)
    p = _write_jsonl(tmp_path / "f.jsonl", [{"question": "q", "relevant": [{"source": "a", "start": 9, "end": 3}]}])
    with pytest.raises(DatasetError, match="before start"):
        load(p)


def test_duplicate_ids_rejected(tmp_path):
    p = _write_jsonl(tmp_path / "d.jsonl", [{"id": 1, "answer": "a"}, {"id": "1", "answer": "b"}])
    with pytest.raises(DatasetError, match="duplicate id") as ei:
        load(p)
    assert ei.value.line == 2


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_round_trip(tmp_path, fmt):
    rows = [{"id": "a", "question": "Qué?", "answer": "ünïcödé ✓", "references": ["r1", "r2"],
             "contexts": [{"id": "c1", "text": "t", "source": "s.md", "start": 0, "end": 1}],
             "relevant": [{"id": "c1", "grade": 2}], "label": 1, "metadata": {"k": "v"}},
            {"id": "b", "question": "q2", "answer": ""}]
    ds = load(rows)
    p = save(ds, tmp_path / f"d.{fmt}")
    back = load(p)
    expected = [s.model_dump() for s in ds]
    if fmt == "csv":
        # CSV cannot tell an empty cell from a missing one: an empty answer reads back as missing
        expected[1]["answer"] = None
    assert [s.model_dump() for s in back] == expected
    if fmt != "csv":
        assert back.fingerprint == ds.fingerprint


def test_csv_line_numbers(tmp_path):
    df = pd.DataFrame({"question": ["q1", "q2", "q3"], "answer": ["a", "b", "c"], "label": ["1", "0", "maybe"]})
    p = tmp_path / "d.csv"
    df.to_csv(p, index=False)
    with pytest.raises(DatasetError) as ei:
        load(p)
    assert ei.value.line == 4 and ei.value.field == "label"


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="file not found"):
        load(tmp_path / "nope.jsonl")
    (tmp_path / "x.xml").write_text("<a/>")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load(tmp_path / "x.xml")


def test_public_api_exports():
    assert ragmeter.load is load and callable(ragmeter.evaluate)
