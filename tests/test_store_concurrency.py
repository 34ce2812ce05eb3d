"""Writers that cannot collide: several `ragmeter eval` processes on one new SQLite file or one
PostgreSQL database, two judge runs sharing verdicts, and the run lease that guards --resume."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from judge_server import server_fixtures
from ragmeter.run.runner import evaluate
from ragmeter.store import open_store
from ragmeter.store.models import Run, utcnow
from test_store_postgres import pg_url  # noqa: F401 - the PostgreSQL server fixture

judge_server_module, server = server_fixtures()

LEXICAL = "token_f1,rouge1_fmeasure,exact_match"


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "HF_HUB_OFFLINE": "1", "RAGMETER_TEST_JUDGE_KEY": "unused"}


def _evals(n: int, *args: str) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen([sys.executable, "-m", "ragmeter.apps.cli", "eval", *args, "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(n)]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=600)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    return out


def _assert_every_pair_once(url: str, n_runs: int, n_metrics: int) -> None:
    store = open_store(url)
    runs = store.list_runs()
    assert len(runs) == n_runs
    for run in runs:
        assert run.status == "completed"
        pairs = store.scores(run.id)
        assert len(pairs) == len({(p.sample_id, p.metric) for p in pairs}) == run.n_samples * n_metrics
    store.close()


@pytest.mark.slow
def test_four_evals_start_on_one_new_sqlite_file_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    done = _evals(4, "example", "--metrics", LEXICAL, "--db", url)
    assert [d.returncode for d in done] == [0] * 4, [d.stderr[-2000:] for d in done]
    _assert_every_pair_once(url, 4, 3)


@pytest.mark.slow
def test_two_judge_runs_sharing_verdicts_at_once(tmp_path, server):
    url = f"sqlite:///{tmp_path / 'judge.db'}"
    server.delay = 0.01  # replies overlap, so both runs write the same cache keys
    done = _evals(2, "example", "--metrics", "faithfulness", "--judge", "openai:test-model",
                  "--judge-base-url", f"{server.url}/v1", "--db", url, "--concurrency", "8")
    assert [d.returncode for d in done] == [0] * 2, [d.stderr[-2000:] for d in done]
    _assert_every_pair_once(url, 2, 1)
    store = open_store(url)
    for run in store.list_runs():
        assert run.summary["faithfulness"]["n"] > 0
    store.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_four_evals_write_one_postgres_database_at_once(pg_url):  # noqa: F811
    done = _evals(4, "example", "--metrics", LEXICAL, "--db", pg_url)
    assert [d.returncode for d in done] == [0] * 4, [d.stderr[-2000:] for d in done]
    _assert_every_pair_once(pg_url, 4, 3)
    store = open_store(pg_url)
    long_id = "x" * 300  # ids over 200 characters are stored on PostgreSQL too
    res = evaluate([{"id": long_id, "answer": "a b", "reference": "a b"}], ["token_f1"], db=store)
    assert store.score_table(res.run_id)["token_f1"][long_id].value == 1.0
    store.close()


def test_resume_refuses_a_live_run_and_finishes_a_dead_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'lease.db'}"
    res = evaluate("example", ["token_f1"], db=url)
    store = open_store(url)
    with store.engine.begin() as conn:  # another process is writing it right now
        conn.execute(update(Run).where(Run.id == res.run_id)
                     .values(status="running", owner="elsewhere:1", heartbeat_at=utcnow()))
    r = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "eval", "--resume", res.run_id,
                        "--db", url, "--no-progress"], capture_output=True, text=True, env=_env())
    assert r.returncode == 2, r.stderr
    assert "still running" in r.stderr and "Traceback" not in r.stderr
    assert store.get_run(res.run_id).status == "running"  # not marked failed by the refused resume
    with store.engine.begin() as conn:  # its writer died a while ago
        conn.execute(update(Run).where(Run.id == res.run_id)
                     .values(heartbeat_at=utcnow() - timedelta(minutes=5)))
    again = evaluate(None, db=store, resume=res.run_id)
    assert again.run_id == res.run_id
    assert store.get_run(res.run_id).status == "completed"
    assert store.count_scores(res.run_id) == len(res.samples)
    store.close()


def test_a_local_lease_holder_is_dead_once_its_process_is_gone(tmp_path):
    """The liveness check asks psutil (``os.kill(pid, 0)`` would stop the process on Windows): a
    process of this machine that exited holds no lease, even with a fresh heartbeat; a live one
    or one of another host does."""
    import socket
    import time

    import psutil

    from ragmeter.store.store import _dead_local_owner

    host = socket.gethostname()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert not _dead_local_owner(f"{host}:{os.getpid()}")
    child.wait()  # exited and reaped: the pid names no process
    assert _dead_local_owner(f"{host}:{child.pid}")
    assert not _dead_local_owner(f"another-host:{child.pid}")
    assert not _dead_local_owner(f"{host}:not-a-pid")
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:  # exited but not yet reaped by its parent (this process): dead too
        proc = psutil.Process(zombie.pid)
        for _ in range(1500):
            if proc.status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.02)
        assert _dead_local_owner(f"{host}:{zombie.pid}")
    finally:
        zombie.wait()

    url = f"sqlite:///{tmp_path / 'lease.db'}"
    res = evaluate("example", ["token_f1"], db=url)
    store = open_store(url)
    with store.engine.begin() as conn:  # a writer of this machine that died seconds ago
        conn.execute(update(Run).where(Run.id == res.run_id)
                     .values(status="running", owner=f"{host}:{child.pid}", heartbeat_at=utcnow()))
    assert store.acquire_lease(res.run_id)
    store.close()
