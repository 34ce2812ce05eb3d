"""``ragmeter compare`` names each run by its position: a run compared with itself is A and B."""

from __future__ import annotations

import re


def test_a_run_compared_with_itself_is_a_and_b(tmp_path):
    from cli_runner import run_main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"id": "s{i}", "question": "q", "answer": "a b {i}", "reference": "a c {i % 3}"}}\n'
                            for i in range(6)), encoding="utf-8")
    db = str(tmp_path / "r.db")
    code, _, err = run_main("eval", str(data), "-m", "token_f1", "--name", "base", "--db", db)
    assert code == 0, err
    code, out, err = run_main("compare", "base", "base", "--db", db)
    text = out + err
    assert code == 0, text
    assert re.search(r"^A = base \(\w+\)$", text, re.M) and re.search(r"^B = base \(\w+\) \(the same run as A\)$",
                                                                     text, re.M), text
    assert "A vs B" in text and "B vs B" not in text and "A → B" in text, text
