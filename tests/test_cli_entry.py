"""The `ragmeter` console script as users run it (a subprocess): its quick exit keeps the exit codes,
the output and a closed, checkpointed SQLite store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

CODE = "import sys; from ragmeter.apps.cli import entry; sys.argv = ['ragmeter', *sys.argv[1:]]; entry()"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.parametrize("slow", [False, True])
def test_eval_quick_exit_keeps_codes_output_and_store(tmp_path: Path, slow: bool) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "answer": f"the answer {i}",
                                        "reference": "the answer 1"}) + "\n" for i in range(50)))
    db = tmp_path / "r.db"
    env = {"RAGMETER_SLOW_EXIT": "1"} if slow else None
    ok = _run("eval", str(data), "-m", "bleu,exact_match", "--db", f"sqlite:///{db}", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout.strip().splitlines()[-1])
    assert summary["metrics"]["exact_match"]["mean"] == pytest.approx(1 / 50)
    # every score is in the database file itself: the write-ahead log was checkpointed and removed
    assert not Path(str(db) + "-wal").exists()
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM scores").fetchone()[0] == 100
    con.close()
    missing = _run("eval", str(tmp_path / "nope.jsonl"), "-m", "bleu", "--db", f"sqlite:///{db}", env=env)
    assert missing.returncode == 2 and "file not found" in missing.stderr
    noref = tmp_path / "noref.jsonl"
    noref.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    incomplete = _run("eval", str(noref), "-m", "bleu", "--db", f"sqlite:///{db}", "--no-progress", env=env)
    assert incomplete.returncode == 3 and "incomplete" in incomplete.stderr


def test_usage_error_exit_code() -> None:
    res = _run("eval", "--metrics")
    assert res.returncode == 2 and "Try 'ragmeter" in res.stderr
