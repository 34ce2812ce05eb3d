"""The tables of ``show``, ``eval`` and ``agent-stats`` read at 80 columns: no line is wider, no figure
column is squeezed to nothing (``│ │ │ │``) and no name or number is cut with an ellipsis."""

from __future__ import annotations

from pathlib import Path

import ragmeter
from cli_runner import run_main

EXAMPLE = Path(ragmeter.__file__).parent / "data" / "agent_example"
LONG = "semantic_similarity@sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"


def test_show_with_a_long_metric_key_at_80_columns(db_url, monkeypatch):
    rows = [{"id": f"s{i}", "answer": f"the ferry leaves at {i}", "reference": f"the ferry leaves at {i % 3}"}
            for i in range(12)]
    rid = ragmeter.evaluate(rows, ["token_f1", LONG], db=db_url, progress=False).run_id  # the model is absent
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("show", rid, "--db", db_url)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if line.lstrip().startswith("metric"))
    assert all(h in header for h in ("mean", "95% CI", "n", "no value", "dir")), header
    row = next(line for line in lines if line.startswith("token_f1"))
    assert len(row.split()) >= 6 and "…" not in row, row  # name, mean, CI (two cells), n, no value, dir
    assert "│ │" not in out and "││" not in out
    table = out.split("why no value")[0]
    assert "…" not in table and "semantic_similarity@" in table  # the long key folds, it is not cut


def test_agent_stats_at_80_columns_shows_whole_names_and_numbers(db_url, monkeypatch):
    rid = ragmeter.evaluate(str(EXAMPLE / "openai_traces.jsonl"), ["tool_completeness"], db=db_url,
                            progress=False).run_id
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("agent-stats", rid, "--db", db_url)
    assert code == 0 and "…" not in out, out
    assert max(len(line) for line in out.splitlines()) <= 80
    for name in ("step_count", "tool_calls", "latency_ms", "tool_latency_ms"):
        row = next(line for line in out.splitlines() if line.split() and line.split()[0] == name)
        assert len(row.split()) == 8, row  # name, n, mean, p50, p95, p99, min, max


def test_an_error_keeps_a_long_path_whole_at_80_columns(tmp_path, monkeypatch):
    """An error line names its file; at 80 columns the path is not folded inside a word (a user
    copies it), and text in brackets is shown as written, not read as markup."""
    deep = tmp_path / ("a-directory-with-a-rather-long-name-" * 3) / "labels"
    deep.mkdir(parents=True)
    f = deep / "scale.csv"
    f.write_text("item,r1,r2\n" + "".join(f"i{i},low,low\n" for i in range(9)) + "i9,[very high],low\n")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_main("agreement", str(f), "--level", "ordinal", "--value-domain", "very low,low,high")
    assert code == 2
    assert f"{f}, line 11, field 'r1': label '[very high]' is not in the value domain" in out + err
