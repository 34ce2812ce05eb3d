"""Counts shown to users agree with their noun: ``1 sample``, not ``1 samples``."""

from __future__ import annotations

import re

from ragmeter.core.counts import count


def test_count_is_singular_only_for_one():
    assert [count(n, "sample") for n in (0, 1, 2)] == ["0 samples", "1 sample", "2 samples"]
    assert count(1, "assistant turn") == "1 assistant turn" and count(1200, "sample", sep=",") == "1,200 samples"


def test_a_one_sample_run_says_1_sample(tmp_path):
    from cli_runner import run_main

    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a b", "reference": "a c"}\n', encoding="utf-8")
    db = str(tmp_path / "r.db")
    code, out, err = run_main("eval", str(data), "-m", "token_f1", "--db", db)
    assert code == 0, err
    assert re.search(r"— 1 sample\b(?!s)", out + err) and "1 samples" not in out + err, out + err
    code, out, err = run_main("show", "latest", "--db", db)
    assert code == 0 and "1 sample," in out and "1 samples" not in out, out + err
