"""Files other tools write, read as their own readers read them (defects found trying ragmeter
as a new user would)."""

from __future__ import annotations

from pathlib import Path

import ragmeter


def test_deepeval_csv_contexts_split_on_its_delimiter(tmp_path):
    """DeepEval's ``EvaluationDataset.save_as(file_type="csv")`` joins ``retrieval_context`` and
    ``context`` with ``|`` (its ``add_goldens_from_csv_file`` splits them again)."""
    path = tmp_path / "deepeval.csv"
    path.write_text(
        "input,actual_output,expected_output,retrieval_context,context,name\n"
        "Who pays the rent?,The holding company.,The holding company pays.,"
        "Rent is paid by the holding company.|The lease is 12% cheaper.,The holding company pays rent.|Lease.,\n"
        "Other?,Yes.,Yes.,\"[\"\"a\"\", \"\"b|c\"\"]\",one chunk,\n", encoding="utf-8")
    a, b = ragmeter.load(str(path)).samples
    assert [c.text for c in a.contexts] == ["Rent is paid by the holding company.", "The lease is 12% cheaper."]
    assert [c.text for c in a.relevant] == ["The holding company pays rent.", "Lease."]
    assert [c.text for c in b.contexts] == ["a", "b|c"] and [c.text for c in b.relevant] == ["one chunk"]


def test_a_pipe_in_other_csv_files_is_text(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("question,answer,contexts\nq,a,x|y\n", encoding="utf-8")
    (s,) = ragmeter.load(str(path)).samples
    assert [c.text for c in s.contexts] == ["x|y"]


def test_trec_files_given_in_the_wrong_order_say_so(tmp_path):
    from cli_runner import run_main

    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 12.5 sys\nq1 Q0 d2 2 11.0 sys\n", encoding="utf-8")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n", encoding="utf-8")
    code, out, err = run_main("trec", str(tmp_path / "run.trec"), str(tmp_path / "qrels.txt"))
    assert code == 2 and "run.trec, line 1" in err and "qrels come first, then the run" in err
    code, out, _ = run_main("trec", str(tmp_path / "qrels.txt"), str(tmp_path / "run.trec"))
    assert code == 0 and "num_rel_ret" in out


def test_a_misspelt_config_key_is_an_error_not_ignored(tmp_path):
    """``threshhold:`` was kept aside silently: the run checked no threshold and exited 0."""
    from cli_runner import run_main

    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a b", "reference": "c d"}\n', encoding="utf-8")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("metrics: [token_f1]\nthreshhold: {token_f1: 0.5}\n", encoding="utf-8")
    code, _, err = run_main("eval", str(data), "--config", str(cfg), "--db", str(tmp_path / "r.db"))
    assert code == 2 and "unknown key 'threshhold': did you mean 'thresholds'?" in err and "c.yaml" in err
    # rag-experiment-accelerator's other keys are still kept aside
    from ragmeter.core.config import load_config

    got = load_config({"metric_types": ["token_f1"], "chunking": {"size": 512}, "embedding_models": [{"x": 1}],
                       "experiment_name": "e"})
    assert set(got["extra"]) == {"chunking", "embedding_models", "experiment_name"}


def test_phoenix_span_dataframe_as_json_lines_reads_as_its_csv(tmp_path):
    """``get_spans_dataframe().to_json(orient="records", lines=True)`` (and without ``lines``: one
    list) is the same export as its ``to_csv``: the same agent trace and values."""
    import pandas as pd

    from ragmeter.core.schema import AgentTrace

    csv = Path(ragmeter.__file__).parent / "data" / "agent_example" / "weather_phoenix.csv"
    frame = pd.read_csv(csv)
    frame.to_json(tmp_path / "spans.jsonl", orient="records", lines=True)
    frame.to_json(tmp_path / "spans.json", orient="records")
    want = ragmeter.load(str(csv)).samples
    for name in ("spans.jsonl", "spans.json"):
        got = ragmeter.load(str(tmp_path / name)).samples
        assert len(got) == len(want) == 1 and isinstance(got[0].trace, AgentTrace)
        assert got[0].trace.model_dump() == want[0].trace.model_dump()
        assert (got[0].question, got[0].answer) == (want[0].question, want[0].answer)


def test_the_incomplete_runs_reason_is_cut_between_words(tmp_path, monkeypatch):
    """``(e.g. ... item has no field 'answer' (f…)``: the example reason was cut mid-word."""
    import json
    import re

    from cli_runner import run_main

    monkeypatch.setenv("COLUMNS", "200")
    items = tmp_path / "items.jsonl"
    items.write_text('{"input": [{"role": "user", "content": "2+2?"}], "ideal": "4"}\n', encoding="utf-8")
    ev = tmp_path / "eval.json"
    ev.write_text(json.dumps({"data_source_config": {"type": "custom", "item_schema": {"type": "object"}},
                              "testing_criteria": [{"type": "string_check", "name": "sim", "operation": "eq",
                                                    "input": "{{ item.answer }}", "reference": "{{ item.expected }}"}]}),
                  encoding="utf-8")
    code, _, err = run_main("eval", str(items), "--openai-eval", str(ev), "--db", str(tmp_path / "r.db"))
    assert code == 3
    line = next(x for x in err.splitlines() if "no value on 1 of 1 samples (e.g." in x)
    assert line.endswith(" …)") and not re.search(r"\w…", line), line


def test_compare_in_an_80_column_terminal_cuts_no_figure(tmp_path, monkeypatch):
    """In a terminal of 80 columns the table was cut with ellipses (``0.6…``, ``0.84…]``, no winner)."""
    from cli_runner import run_main
    from ragmeter.apps.cli import experiments
    from ragmeter.core.terminal import console

    db = str(tmp_path / "r.db")
    rows = [{"id": f"s{i}", "answer": f"the ferry leaves at {i}", "reference": f"the ferry leaves at {i % 3}"}
            for i in range(8)]
    a = ragmeter.evaluate(rows, ["token_f1"], db=db, progress=False).run_id
    b = ragmeter.evaluate([{**r, "answer": r["answer"] + " pm"} for r in rows], ["token_f1"], db=db,
                          progress=False).run_id
    monkeypatch.setattr(experiments, "_out", lambda: console(width=80))  # what a terminal of 80 columns gets
    code, out, _ = run_main("compare", a, b, "--db", db)
    assert code == 0
    table = out.split("p: paired")[0]
    assert "…" not in table and max(len(line) for line in table.splitlines()) <= 80
    for cell in ("token_f1", "wilcoxon", "W/T/L", "winner"):
        assert cell in table


def test_promptfoo_results_file_reads_one_row_per_result(tmp_path):
    """``promptfoo eval -o results.json`` was one row of unknown columns (evalId, results, config ...)."""
    import json

    doc = {"evalId": "eval-1", "results": {"version": 3, "timestamp": "2026-11-28T10:00:00Z", "results": [
        {"id": "r1", "promptIdx": 0, "testIdx": 0, "prompt": {"raw": "Q: {{question}}", "label": "p1"},
         "vars": {"question": "Who pays the rent?", "context": "Rent is paid by the holding company.",
                  "expected": "The holding company."},
         "response": {"output": "The holding company."}, "provider": {"id": "openai:gpt-4o-mini"},
         "success": True, "score": 1, "latencyMs": 412, "gradingResult": {"pass": True, "reason": "All assertions passed"}},
        {"promptIdx": 1, "testIdx": 0, "vars": {"question": "Who pays the rent?", "expected": "The holding company."},
         "response": {"output": {"text": "Nobody."}}, "provider": {"id": "ollama:llama3"}, "success": False, "score": 0}]},
        "config": {}, "shareableUrl": None}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    a, b = ragmeter.load(str(path)).samples
    assert (a.id, a.question, a.answer, a.references) == ("r1", "Who pays the rent?", "The holding company.",
                                                          ["The holding company."])
    assert [c.text for c in a.contexts] == ["Rent is paid by the holding company."]
    assert a.metadata["promptfoo"]["provider"] == "openai:gpt-4o-mini" and a.metadata["promptfoo"]["success"] is True
    assert b.id == "test0-prompt1" and b.answer == '{"text": "Nobody."}'
    res = ragmeter.evaluate(str(path), ["exact_match"], db=str(tmp_path / "r.db"), progress=False)
    assert [s.value for s in res.scores["exact_match"]] == [1.0, 0.0]


def test_a_misspelt_latest_is_pointed_at(tmp_path):
    from cli_runner import run_main

    db = str(tmp_path / "r.db")
    ragmeter.evaluate([{"answer": "a", "reference": "a"}], ["exact_match"], db=db, progress=False)
    for command in (("show", "lastest"), ("export", "lates", "-o", str(tmp_path / "x.csv"))):
        code, _, err = run_main(*command, "--db", db)
        assert code == 2 and "did you mean 'latest'?" in err, err
    code, _, err = run_main("show", "abc123", "--db", db)
    assert code == 2 and "no run 'abc123'" in err and "did you mean" not in err
