"""Files written the way DeepEval, ragas, pandas, MLflow and TruLens write them are read right;
everything else is refused with file, line and field."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

import ragmeter
from ragmeter.core.errors import DatasetError
from ragmeter.io import load
from references import require_extra

ROWS = [
    dict(q="Where is the Eiffel Tower?", a="The Eiffel Tower is in Paris.", ref="It is in Paris, France.",
         ret=["The Eiffel Tower is in Paris.", "Berlin is in Germany.", "Paris is the capital of France."],
         rel=["The Eiffel Tower is in Paris.", "Paris is the capital of France."]),
    dict(q="Who wrote Hamlet?", a="Hamlet was written by Marlowe.", ref="William Shakespeare wrote Hamlet.",
         ret=["Marlowe wrote Faustus.", "Shakespeare wrote Hamlet around 1600.", "Hamlet is a play."],
         rel=["Shakespeare wrote Hamlet around 1600."]),
    dict(q="What is 2+2?", a="It is 4, I think.", ref="4",
         ret=["Two plus two is four.", "Arithmetic basics.", "Numbers can be added."],
         rel=["Two plus two is four."]),
]


def deepeval_rows():
    # deepeval LLMTestCase fields: context = ideal (ground-truth) chunks, retrieval_context = retrieved
    return [dict(input=r["q"], actual_output=r["a"], expected_output=r["ref"], context=r["rel"],
                 retrieval_context=r["ret"]) for r in ROWS]


def ragas_rows():
    # ragas 0.2+ SingleTurnSample names
    return [dict(user_input=r["q"], response=r["a"], reference=r["ref"], retrieved_contexts=r["ret"],
                 reference_contexts=r["rel"]) for r in ROWS]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _values(res, metrics):
    return {m: [s.value for s in res.scores[m]] for m in metrics}


# ---- must show: the same data in four shapes gives the same values ------------------------------

def test_deepeval_ragas_csv_and_dataframe_give_identical_values(tmp_path, db_url):
    metrics = ["context_similarity", "token_f1", "precision@3"]
    deep = _jsonl(tmp_path / "deepeval.jsonl", deepeval_rows())
    rag = _jsonl(tmp_path / "ragas.jsonl", ragas_rows())
    df = pd.DataFrame(ragas_rows())
    csv_path = tmp_path / "ragas.csv"
    df.to_csv(csv_path, index=False)  # lists become Python literals: "['a', 'b']"
    assert "\"['The Eiffel Tower is in Paris.'" in csv_path.read_text()
    results = {name: _values(ragmeter.evaluate(data, metrics, db=db_url), metrics)
               for name, data in [("deepeval", deep), ("ragas", rag), ("csv", csv_path), ("df", df)]}
    want = results["ragas"]
    for name, got in results.items():
        assert got == want, name
    # the values are real: precision@3 counts the ground-truth chunks among the 3 retrieved
    assert want["precision@3"] == pytest.approx([2 / 3, 1 / 3, 1 / 3])
    assert all(v is not None for vs in want.values() for v in vs)


def test_deepeval_context_is_ground_truth_and_retrieval_context_is_retrieved():
    s = load(deepeval_rows())[0]
    assert [c.text for c in s.contexts] == ROWS[0]["ret"]
    assert [c.text for c in s.relevant] == ROWS[0]["rel"]
    assert "retrieval_context" not in s.metadata and "context" not in s.metadata
    # outside a DeepEval-shaped row, "context" still means the retrieved context
    s = load([{"query": "q", "answer": "a", "context": ["c1"]}])[0]
    assert [c.text for c in s.contexts] == ["c1"] and s.relevant is None


def test_deepeval_tools_called_becomes_the_trace():
    row = {"input": "weather in Paris?", "actual_output": "Sunny.",
           "tools_called": [{"name": "get_weather", "input_parameters": {"city": "Paris"}, "output": "sun",
                             "description": None, "reasoning": None}],
           "expected_tools": [{"name": "get_weather"}]}
    s = load([row])[0]
    assert [(c.name, c.arguments) for c in s.trace.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert s.metadata["expected_tools"] == [{"name": "get_weather"}]


def test_ragas_01_names_and_02_ids():
    s = load([{"question": "q", "answer": "a", "contexts": ["x", "y"], "ground_truths": ["g1", "g2"]}])[0]
    assert s.references == ["g1", "g2"] and [c.text for c in s.contexts] == ["x", "y"]
    s = load([{"user_input": "q", "retrieved_contexts": ["x", "y"], "retrieved_context_ids": ["d1", "d2"],
               "reference_context_ids": ["d2"]}])[0]
    assert [(c.text, c.id) for c in s.contexts] == [("x", "d1"), ("y", "d2")]
    assert [c.id for c in s.relevant] == ["d2"]


def test_mlflow_and_trulens_columns():
    s = load([{"inputs": "q", "predictions": "a", "ground_truth": "g", "retrieved_context": ["c"]}])[0]
    assert (s.question, s.answer, s.references, [c.text for c in s.contexts]) == ("q", "a", ["g"], ["c"])
    s = load([{"query": "q", "expected_response": "g", "expected_chunks": ["e"], "query_id": "7"}])[0]
    assert (s.id, s.references, [c.text for c in s.relevant]) == ("7", ["g"], ["e"])


def test_openai_chat_log_gives_question_and_answer():
    msgs = [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": "hello"}]
    s = load([{"messages": msgs}])[0]
    assert (s.question, s.answer) == ("hi?", "hello")


# ---- in-memory inputs ----------------------------------------------------------------------------

def test_evaluate_accepts_dataframe_records_generator_and_column_dict(db_url):
    df = pd.DataFrame(ragas_rows())
    want = _values(ragmeter.evaluate(df, ["token_f1"], db=db_url), ["token_f1"])
    for data in (df.to_dict("records"), (r for r in ragas_rows()), df.to_dict("list")):
        assert _values(ragmeter.evaluate(data, ["token_f1"], db=db_url), ["token_f1"]) == want


def test_hugging_face_dataset():
    datasets = require_extra("datasets")
    hf = datasets.Dataset.from_list(ragas_rows())
    ds = load(hf)
    assert ds.source == "<datasets.Dataset>"
    assert [c.text for c in ds[1].contexts] == ROWS[1]["ret"]
    assert [s.model_dump() for s in ds] == [s.model_dump() for s in load(ragas_rows())]


def test_dataframe_with_numpy_list_cells_from_parquet(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame(ragas_rows()).to_parquet(path)
    df = pd.read_parquet(path)  # list cells come back as numpy arrays
    assert type(df.iloc[0]["retrieved_contexts"]).__module__ == "numpy"
    s = load(df)[0]
    assert [c.text for c in s.contexts] == ROWS[0]["ret"]
    assert load(path)[0].model_dump() == s.model_dump()


# ---- list cells in CSV ---------------------------------------------------------------------------

def test_csv_list_cells_json_and_python_literal(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('question,contexts,reference\n'
                 'q1,"[""a"", ""b""]",r\n'
                 "q2,\"['c', \"\"d's\"\"]\",\"['r1', 'r2']\"\n"
                 "q3,plain chunk [1] text,r\n", encoding="utf-8")
    ds = load(p)
    assert [c.text for c in ds[0].contexts] == ["a", "b"]
    assert [c.text for c in ds[1].contexts] == ["c", "d's"] and ds[1].references == ["r1", "r2"]
    assert [c.text for c in ds[2].contexts] == ["plain chunk [1] text"]


def test_csv_list_cell_that_does_not_parse_is_an_error(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('question,contexts\nq1,"[""a"", ""b""]"\nq2,"[""a"", ""b"""\n', encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        load(p)
    assert (e.value.line, e.value.field) == (3, "contexts")
    assert "looks like a list" in str(e.value) and str(p) in str(e.value)


def test_literal_eval_never_runs_code(tmp_path):
    p = tmp_path / "d.csv"
    marker = tmp_path / "ran"
    p.write_text(f'question,contexts\nq,"[\'a\', __import__(\'os\').system(\'touch {marker}\')]"\n',
                 encoding="utf-8")
    with pytest.raises(DatasetError, match="looks like a list"):
        load(p)
    assert not marker.exists()


# ---- missing values ------------------------------------------------------------------------------

def test_nan_answer_is_missing_not_the_text_nan(db_url):
    df = pd.DataFrame({"question": ["q1", "q2", "q3"], "answer": ["Paris", math.nan, "Rome"],
                       "reference": ["Paris", "Berlin", "Paris"]})
    res = ragmeter.evaluate(df.to_dict("records"), ["token_f1"], db=db_url)
    summ = res.summary["token_f1"]
    assert (summ["n"], summ["n_missing"]) == (2, 1)
    assert summ["mean"] == pytest.approx((1.0 + 0.0) / 2)
    assert res.scores["token_f1"][1].value is None


def test_nan_everywhere_is_no_value(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": NaN, "question": "q", "answer": NaN, "reference": NaN, '
                 '"contexts": ["a", NaN, {"text": "b", "score": NaN}], "extra": NaN}\n', encoding="utf-8")
    s = load(p)[0]
    assert (s.id, s.answer, s.references) == ("row-1", None, [])
    assert [(c.text, c.score) for c in s.contexts] == [("a", None), ("b", None)]
    assert s.metadata == {"extra": None}
    json.loads(s.model_dump_json(), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    # pandas NA and empty cells too
    s = load(pd.DataFrame({"question": ["q"], "answer": [pd.NA], "reference": [""]}))[0]
    assert (s.answer, s.references) == (None, [])


def test_parquet_nan_and_int_ids(tmp_path):
    p = tmp_path / "d.parquet"
    pd.DataFrame({"id": [1, 2], "question": ["q1", "q2"], "answer": ["a", None],
                  "score": [0.5, math.nan]}).to_parquet(p)
    ds = load(p)
    assert [s.id for s in ds] == ["1", "2"] and ds[1].answer is None
    assert ds[1].metadata["score"] is None


# ---- CSV pitfalls and decoding errors ------------------------------------------------------------

def test_bom_csv_keeps_ids(tmp_path):
    p = tmp_path / "excel.csv"
    p.write_bytes("\ufeffid,question,answer\nA7,q,a\nB9,q,b\n".encode())
    assert [s.id for s in load(p)] == ["A7", "B9"]
    j = tmp_path / "bom.jsonl"
    j.write_bytes('\ufeff{"id": "x", "question": "q"}\n'.encode())
    assert load(j)[0].id == "x"


def test_unbalanced_quote_names_the_line(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('id,question,answer\n1,q,a\n2,"unclosed,b\n3,q,c\n4,q,d\n', encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        load(p)
    assert e.value.line == 3 and "unbalanced quote" in str(e.value)


def test_row_with_wrong_cell_count(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("id,question\n1,q,extra\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="2 .*3 cells|3 cells, the header has 2") as e:
        load(p)
    assert e.value.line == 2


@pytest.mark.parametrize("row,field", [
    ({"question": "q", "contexts": 42}, "contexts"),
    ({"question": "q", "contexts": [42]}, "contexts"),
    ({"question": ["q"]}, "question"),
    ({"question": "q", "reference": {"a": 1}}, "reference"),
])
def test_type_errors_name_the_field(row, field):
    with pytest.raises(DatasetError) as e:
        load([row])
    assert e.value.field == field


def test_decoding_problems_are_one_line_errors(tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"question": "q"}\n{"question": "caf\xe9"}\n')
    with pytest.raises(DatasetError) as e:
        load(bad)
    assert e.value.line == 2 and "UTF-8" in str(e.value)
    bad_csv = tmp_path / "latin1.csv"
    bad_csv.write_bytes(b"question\nok\ncaf\xe9\n")
    with pytest.raises(DatasetError) as e:
        load(bad_csv)
    assert e.value.line == 3
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"question": "q", "metadata": ' + "[" * 100000 + "]" * 100000 + "}\n")
    with pytest.raises(DatasetError, match="nested too deeply"):
        load(deep)
    sur = tmp_path / "sur.jsonl"
    sur.write_text('{"question": "q\\ud800x"}\n')
    with pytest.raises(DatasetError) as e:
        load(sur)
    assert e.value.field == "question" and "surrogate" in str(e.value)
    fake = tmp_path / "fake.parquet"
    fake.write_text("id,question\n1,q\n")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        load(fake)
    for err in (e.value,):
        assert "\n" not in str(err)


def test_json_error_points_at_the_real_column(tmp_path):
    p = tmp_path / "d.jsonl"
    line = '{"question": "a", "answer": "b", "contexts": ["x", "y",]}'
    p.write_text('{"question": "ok"}\n' + line + "\n")
    with pytest.raises(DatasetError) as e:
        load(p)
    assert e.value.line == 2
    assert f"column {line.index(']') + 1}" in str(e.value)
    j = tmp_path / "d.json"
    j.write_text('[\n  {"question": "ok"},\n  {"question": "a",, "answer": "b"}\n]')
    with pytest.raises(DatasetError) as e:
        load(j)
    assert e.value.line == 3 and "column 20" in str(e.value)


# ---- rows that give nothing, unused columns ------------------------------------------------------

def test_row_without_any_known_field_lists_columns_and_map():
    with pytest.raises(DatasetError) as e:
        load([{"foo": "bar"}])
    assert "columns: foo" in str(e.value) and "--map" in str(e.value)
    with pytest.raises(DatasetError) as e:
        load([{"q": "Q?", "pred": "A", "gold": "A"}])
    assert "--map question=q --map answer=pred --map reference=gold" in str(e.value)


def test_metric_without_any_of_its_fields_is_an_error_with_a_map_hint(tmp_path, db_url, caplog):
    p = tmp_path / "d.csv"
    pd.DataFrame({"question": ["q1", "q2"], "pred": ["a", "b"], "gold": ["a", "c"]}).to_csv(p, index=False)
    with caplog.at_level(logging.WARNING, logger="ragmeter.io"), pytest.raises(DatasetError) as e:
        ragmeter.evaluate(p, ["token_f1"], db=db_url)
    msg = str(e.value)
    assert "columns: question, pred, gold" in msg and "--map answer=pred --map reference=gold" in msg
    assert e.value.line == 2
    warnings = [r for r in caplog.records if "not read by any field" in r.getMessage()]
    assert len(warnings) == 1 and "pred, gold" in warnings[0].getMessage()
    res = ragmeter.evaluate(p, ["token_f1"], mapping=["answer=pred", "reference=gold"], db=db_url)
    assert [s.value for s in res.scores["token_f1"]] == [1.0, 0.0]


def test_pandas_index_column_is_dropped(tmp_path):
    p = tmp_path / "d.csv"
    pd.DataFrame(ragas_rows()).to_csv(p)  # index=True writes an unnamed first column
    ds = load(p)
    assert ds.unused_columns == [] and ds[0].metadata == {}


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_cli_eval_input_errors_are_short(tmp_path, db_url):
    p = tmp_path / "d.csv"
    p.write_text("q,pred,gold\nWhat?,Paris,Paris\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    quote = tmp_path / "quote.csv"
    quote.write_text('id,question,answer,reference\n1,q,a,a\n2,"q,b,b\n3,q,c,c\n')
    for path, want in ((p, "--map question=q --map answer=pred --map reference=gold"),
                       (empty, "the dataset is empty"), (quote, "line 3")):
        r = _cli("eval", str(path), "--metrics", "token_f1", "--db", db_url)
        assert r.returncode == (3 if path == empty else 2), path  # an empty file has no samples, as JSONL
        assert want in r.stderr and "Traceback" not in r.stderr + r.stdout
        assert len(r.stderr.strip().splitlines()) <= 2
