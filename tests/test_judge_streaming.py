"""Paid work is kept: the instant lexical scores are stored before the first judge call, judge scores
are stored as their verdicts arrive, a resumed run re-sends at most the calls that were in flight,
and a fully cached re-run sends the judge nothing (no pre-flight either)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_server import JudgeServer
from ragmeter.store import open_store

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _prompt(body: dict) -> str:
    return json.dumps(body["body"]["messages"], sort_keys=True)


def _rows(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "question": f"When does ferry {i} leave?",
                                 "answer": f"Ferry {i} leaves at nine. It docks at noon.",
                                 "reference": f"Ferry {i} leaves at nine.",
                                 "contexts": [f"Ferry {i} leaves at nine and docks at noon."]}) + "\n")


def _eval(args: list[str], server: JudgeServer, db: Path) -> list[str]:
    return [sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "eval", *args,
            "--judge", "openai:test-model", "--judge-base-url", server.url + "/v1",
            "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY", "--db", str(db), "--no-progress", "--json"]


def _counts(db: Path, run_id: str) -> dict[str, int]:
    store = open_store(f"sqlite:///{db}")
    try:
        return {k: sum(1 for s in col.values() if s.value is not None)
                for k, col in store.score_table(run_id).items()}
    finally:
        store.close()


@pytest.mark.slow
def test_killed_judge_run_keeps_its_scores_and_resume_resends_only_what_was_in_flight(tmp_path):
    server = JudgeServer(delay=1.0).start()
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "RAGMETER_TEST_JUDGE_KEY": "k"}
    data, db = tmp_path / "rows.jsonl", tmp_path / "store.db"
    _rows(data, 400)  # 400 calls at 16 in flight and 1 s each: 25 s, killed after 10 s
    try:
        proc = subprocess.Popen(_eval([str(data), "-m", "token_f1,faithfulness"], server, db), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started = time.monotonic()
        while time.monotonic() - started < 10 or len(server.answered) < 40:  # a slow machine starts late
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - started < 300
            time.sleep(0.05)
        # from now on the judge holds every new call for a minute: those are in flight when the run is
        # killed; every call answered before must have its score in the store by then
        server.delay = 60.0
        waited = time.monotonic()
        while True:
            with server.lock:
                answered = len(server.answered)
            store = open_store(f"sqlite:///{db}")
            run_id = store.list_runs()[0].id
            store.close()
            if _counts(db, run_id).get("faithfulness", 0) >= answered and time.monotonic() - waited > 1.5:
                break
            assert time.monotonic() - waited < 60, (answered, _counts(db, run_id))
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        with server.lock:
            sent_before = {_prompt(b) for b in server.requests}
            in_flight = len(server.requests) - answered  # sent and not answered when it was killed
        assert answered < 400, "the run finished before it was killed: nothing to check"

        stored = _counts(db, run_id)
        assert stored.get("token_f1") == 400  # every instant score, before the judge stage ended
        assert stored.get("faithfulness") == answered > 0  # and every judge score finished so far

        server.delay = 1.0
        server.requests.clear()
        resumed = subprocess.run(_eval(["--resume", run_id], server, db), env=env, capture_output=True,
                                 text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        resent = [b for b in server.requests if _prompt(b) in sent_before]
        assert len(resent) <= in_flight <= 16
        assert _counts(db, run_id) == {"token_f1": 400, "faithfulness": 400}

        # a re-run of the finished evaluation: every verdict is cached, nothing is sent, not even
        # a pre-flight request (it could run offline)
        server.requests.clear()
        server.pings.clear()
        again = subprocess.run(_eval([str(data), "-m", "token_f1,faithfulness"], server, db), env=env,
                               capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert server.requests == [] and server.pings == []
        store = open_store(f"sqlite:///{db}")
        try:
            rerun = store.get_run(json.loads(again.stdout)["run_id"])
            assert rerun.extra["judge"]["calls"] == 0 and rerun.extra["judge"]["cached"] == 400
        finally:
            store.close()
    finally:
        server.stop()


@pytest.mark.slow
def test_a_run_killed_at_any_moment_resends_at_most_the_calls_in_flight(tmp_path):
    """A judged run killed with SIGKILL the moment the judge has answered a number of calls (no
    waiting for the store to catch up), resumed and killed again, then resumed to the end: each
    resume re-sends only calls that were in flight at the kill -- at most the concurrency (16) --
    because a call holds its slot until its verdict is in the judge cache (ragmeter.llm.keeper).
    Before, replies that had arrived but waited for the scoring thread were re-sent too (18-21)."""
    server = JudgeServer(delay=0.2).start()
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "RAGMETER_TEST_JUDGE_KEY": "k"}
    data, db = tmp_path / "rows.jsonl", tmp_path / "store.db"
    _rows(data, 300)  # 600 calls (two metrics) at 16 in flight and 0.2 s each: 7.5 s
    # separate requests (no joint one per sample: tests/test_judge_joint.py), so 600 calls
    metrics = ["-m", "token_f1,faithfulness,answer_relevancy", "--concurrency", "16", "--option", "judge_joint=false"]
    try:
        run_id, sent = None, set()
        for kill_at in (60, 250, None):  # answered calls (this session) at the kill; None: to the end
            with server.lock:
                server.requests.clear()
                server.answered.clear()
            args = [*metrics, str(data)] if run_id is None else ["--resume", run_id, "--concurrency", "16"]
            proc = subprocess.Popen(_eval(args, server, db), env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            started = time.monotonic()
            while kill_at is not None and len(server.answered) < kill_at and proc.poll() is None:
                assert time.monotonic() - started < 300
                time.sleep(0.005)
            if kill_at is not None:
                assert proc.poll() is None, proc.communicate()  # still running: killed mid-way
                os.kill(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=600)
            with server.lock:
                prompts = [_prompt(b) for b in server.requests]
            resent = [p for p in prompts if p in sent]
            assert len(resent) <= 16, (kill_at, len(resent))
            assert len(set(resent)) == len(resent)  # nothing asked twice in a session
            sent |= set(prompts)
            if run_id is None:
                store = open_store(f"sqlite:///{db}")
                run_id = store.list_runs()[0].id
                store.close()
        assert proc.returncode == 0, err
        assert _counts(db, run_id) == {"token_f1": 300, "faithfulness": 300, "answer_relevancy": 300}
        assert len(sent) == 600  # every call was made once, and at most 16 of them twice
    finally:
        server.stop()
