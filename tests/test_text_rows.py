"""JSON rows whose values are all text take a per-shape plan in the reader (io/readers.py
``io/text_rows.py``): the samples, metadata, columns read and errors must be those of
``sample_from_dict``, row by row."""

from __future__ import annotations

import json

import pytest

from ragmeter.io import readers as R

ROWS = [
    {"id": "a", "question": "q?", "answer": "x", "reference": "y", "extra_col": "kept"},
    {"question": "q?", "answer": "x", "reference": "y"},  # no id: row-2
    {"id": "c", "question": "q?", "answer": None, "reference": "y"},
    {"id": "d", "query": "q?", "response": "é ’", "ground_truth": "ü", "note": "n"},
    {"id": "e", "question": "q?", "answer": "x", "contexts": "[\"c1\"]"},
    {"id": "f", "question": "q?", "answer": "x", "reference": "y", "Unnamed: 0": "1"},
    {"id": "g", "input": "q", "actual_output": "a", "expected_output": "b"},
    {"id": "h", "question": "q?", "answer": "x", "references": "y", "label": "1"},
    {"id": "i", "question": "q?", "answer": "x", "reference": "y", "metadata": "m"},
    {"id": "j", "question": "q?", "answer": "x\ud800", "reference": "y"},  # a lone surrogate
    {"id": "k", "run_id": "r", "metric": "m", "question": "q", "answer": "x"},
    {"id": "l", "colour": "red"},  # no known field
    {"id": "a", "question": "q?", "answer": "dup", "reference": "y"},  # a duplicate id
    {"id": "m", "question": "q?", "answer": "x", "reference": "y", "tools_called": "[]"},
]


def _load(path, monkeypatch, plan: bool, **kw):
    if not plan:
        monkeypatch.setattr(R, "text_row", lambda *args: None)
    ds = R.load(str(path), on_error="skip", **kw)
    monkeypatch.undo()
    return ([s.model_dump() for s in ds.samples], ds.columns, ds.unused_columns, [str(e) for e in ds.skipped],
            ds.lines)


@pytest.mark.parametrize("mapping", [None, {"answer": "response"}])
def test_text_row_plan_reads_as_sample_from_dict(tmp_path, monkeypatch, mapping) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    fast = _load(path, monkeypatch, True, mapping=mapping)
    slow = _load(path, monkeypatch, False, mapping=mapping)
    assert fast == slow
    assert fast[0] and fast[3]  # rows read, and rows refused (surrogate, duplicate, no field, --map)
    if mapping is None:
        assert len(fast[0]) > 5


def test_text_rows_of_one_shape(tmp_path, monkeypatch) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"a {i} café", "reference": "r",
                                        "source": "s"}) + "\n" for i in range(50)), encoding="utf-8")
    fast = _load(path, monkeypatch, True)
    assert fast == _load(path, monkeypatch, False)
    assert fast[0][7]["id"] == "row-8" and fast[0][7]["metadata"] == {"source": "s"}


def test_fingerprint_is_the_sha256_of_each_samples_json_and_a_newline(tmp_path) -> None:
    import hashlib

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:9]), encoding="utf-8")
    ds = R.load(str(path), on_error="skip")
    h = hashlib.sha256()
    for s in ds.samples:
        h.update(s.model_dump_json(exclude_none=True).encode())
        h.update(b"\n")
    assert ds.fingerprint == h.hexdigest()
