"""How the second scoring process starts (engines/forked.py, ``RAGMETER_START_METHOD``): forked
only on Linux before any thread has started, spawned otherwise; the values never depend on it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import ragmeter
from ragmeter import ConfigError
from ragmeter.run.engines import forked
from ragmeter.store import open_store

SRC = str(Path(__file__).resolve().parents[1] / "src")
METRICS = ["rouge1_fmeasure", "rougeL_fmeasure", "bleu", "token_f1", "exact_match", "ndcg@10", "mrr"]
WORDS = "refund policy days customer order shipping return warranty the a of and to in is".split()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", **(env or {})}
    full.pop("RAGMETER_WORKERS", None)
    if env is None:
        full.pop("RAGMETER_START_METHOD", None)  # the default
    return subprocess.run([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *args],
                          env=full, capture_output=True, text=True, timeout=600)


def _stored(db: Path) -> tuple[dict, dict]:
    store = open_store(f"sqlite:///{db}")
    (run,) = store.list_runs()
    return store.score_table(run.id), run.summary


def test_spawn_eval_stores_the_values_of_the_default(tmp_path):
    """``RAGMETER_START_METHOD=spawn ragmeter eval example --metrics token_f1,rouge1_fmeasure,ndcg@10``
    stores the same values as the default."""
    args = ("eval", "example", "--metrics", "token_f1,rouge1_fmeasure,ndcg@10", "--no-progress", "--json")
    default = _cli(*args, "--db", f"sqlite:///{tmp_path / 'default.db'}")
    spawned = _cli(*args, "--db", f"sqlite:///{tmp_path / 'spawn.db'}", env={"RAGMETER_START_METHOD": "spawn"})
    assert default.returncode == 0, default.stderr
    assert spawned.returncode == 0, spawned.stderr
    scores, summary = _stored(tmp_path / "default.db")
    assert set(scores) == {"token_f1", "rouge1_fmeasure", "ndcg@10"} and len(scores["token_f1"]) == 145
    assert _stored(tmp_path / "spawn.db") == (scores, summary)


def _pairs(path: Path, n: int) -> None:
    rnd = random.Random(11)

    def text() -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 14)))

    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"s{i}", "question": "q", "answer": text(), "reference": text(),
                                 "retrieved_ids": rnd.sample(range(30), 5),
                                 "relevant_ids": rnd.sample(range(30), 2)}) + "\n")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a second process needs a second CPU")
def test_spawn_starts_every_worker_without_fork(tmp_path, monkeypatch):
    """With ``spawn`` the second process is a fresh interpreter (no ``os.fork`` anywhere), it does
    score its share, and the values are those of one process."""
    data = tmp_path / "pairs.jsonl"
    _pairs(data, 300)
    monkeypatch.setattr(forked, "MIN_SAMPLES", 50)
    monkeypatch.delenv("RAGMETER_WORKERS", raising=False)
    monkeypatch.setenv("RAGMETER_START_METHOD", "spawn")

    def no_fork() -> int:
        raise AssertionError("os.fork called with RAGMETER_START_METHOD=spawn")

    monkeypatch.setattr(os, "fork", no_fork)
    started = []
    real = forked.SecondHalf.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        real(self, *args, **kwargs)
        started.append(self.method)

    monkeypatch.setattr(forked.SecondHalf, "__init__", spy)
    two = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'a.db'}")
    assert started == ["spawn"]
    assert "worker_wait_s" in open_store(f"sqlite:///{tmp_path / 'a.db'}").get_run(two.run_id).timings
    monkeypatch.setenv("RAGMETER_START_METHOD", "single")
    one = ragmeter.evaluate(str(data), METRICS, db=f"sqlite:///{tmp_path / 'b.db'}")
    assert started == ["spawn"]  # single: no second process
    assert open_store(f"sqlite:///{tmp_path / 'a.db'}").score_table(two.run_id) == \
        open_store(f"sqlite:///{tmp_path / 'b.db'}").score_table(one.run_id)
    assert two.summary == one.summary


def test_auto_forks_only_on_linux_before_any_thread(monkeypatch):
    monkeypatch.delenv("RAGMETER_START_METHOD", raising=False)
    if threading.active_count() == 1:
        expected = "fork" if sys.platform.startswith("linux") and hasattr(os, "fork") else "spawn"
        assert forked.start_method() == expected
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert forked.start_method() == "spawn"  # a thread runs: forking now could copy a held lock
    finally:
        stop.set()
        t.join()
    monkeypatch.setattr(sys, "platform", "darwin")
    assert forked.start_method() == "spawn"
    for value in ("fork", "spawn", "single", " Spawn "):
        monkeypatch.setenv("RAGMETER_START_METHOD", value)
        assert forked.start_method() == value.strip().lower()


def test_a_bad_start_method_is_a_usage_error_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_START_METHOD", "threads")
    with pytest.raises(ConfigError, match="RAGMETER_START_METHOD"):
        ragmeter.evaluate("example", ["token_f1"], db="sqlite:///:memory:")
    proc = _cli("eval", "example", "--metrics", "token_f1", "--db", f"sqlite:///{tmp_path / 'x.db'}",
                env={"RAGMETER_START_METHOD": "threads"})
    assert proc.returncode == 2
    assert "RAGMETER_START_METHOD" in proc.stderr and "Traceback" not in proc.stderr
    assert not open_store(f"sqlite:///{tmp_path / 'x.db'}").list_runs()  # nothing stored
