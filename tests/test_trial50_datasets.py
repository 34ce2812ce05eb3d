"""The dataset-to-decision workflow as a new user meets it at 80 columns: a long dataset path in
``runs`` is shortened from the left, never wrapped or cut mid-name."""

from __future__ import annotations

import ragmeter
from cli_runner import run_main
from ragmeter.core.terminal import shorten_path


def test_shorten_path_drops_whole_directories_first():
    assert shorten_path("data/rows.jsonl", 40) == "data/rows.jsonl"
    assert shorten_path("very/long/directory/name/for/datasets/rows-200000.jsonl", 20) == "…/rows-200000.jsonl"
    assert shorten_path("a/b/c/rows-200000.jsonl", 22) == "…/c/rows-200000.jsonl"
    assert shorten_path("rows-200000.jsonl", 10) == "…000.jsonl"  # the end of a name: its digits, extension
    assert shorten_path(r"C:\data\sets\rows.csv", 10) == "…\\rows.csv"
    for width in range(0, 30):
        assert len(shorten_path("very/long/directory/rows-200000.jsonl", width)) <= width


def test_runs_shortens_a_long_dataset_path_from_the_left_at_80_columns(db_url, tmp_path, monkeypatch):
    deep = tmp_path / "very" / "long" / "directory" / "name" / "for" / "datasets"
    deep.mkdir(parents=True)
    data = deep / "rows-200000.jsonl"
    data.write_text('{"question": "q", "answer": "a b", "reference": "a b"}\n')
    ragmeter.evaluate(str(data), ["token_f1", "exact_match"], db=db_url, progress=False)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("runs", "--db", db_url)
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out  # nothing cropped at the terminal's edge
    row = next(line for line in lines if "completed" in line)
    assert row.rstrip().endswith("…/rows-200000.jsonl"), out
    # a named run beside it: the name wraps, the path keeps its end on the run's line
    ragmeter.evaluate(str(data), ["token_f1"], db=db_url, progress=False,
                      name="my-long-experiment-name-with-suffix")
    code, out, _ = run_main("runs", "--db", db_url)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    rows = [line for line in lines if "completed" in line]
    assert len(rows) == 2 and all(r.rstrip().endswith("200000.jsonl") and "…" in r for r in rows), out
    assert "jsonl" not in out.replace(rows[0], "").replace(rows[1], "")  # no path continued on a line
    monkeypatch.setenv("COLUMNS", "200")
    _, wide, _ = run_main("runs", "--db", db_url)
    assert "…/very/long/directory/name/for/datasets/rows-200000.jsonl" in wide  # more when there is room
