"""Child processes never outlive their parent: ``kill -9`` of a running ``ragmeter eval`` leaves no
process of the run behind (its forked scoring worker ends with it, engines/forked.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
WORDS = ("ferry harbour ticket island morning evening timetable fare route captain passenger deck "
         "weather storm calm season summer winter crossing port north south").split()


def _rows(path: Path, n: int) -> None:
    rng = random.Random(7)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + "."

    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"s{i}", "question": text(8), "answer": text(40),
                                 "reference": text(40)}) + "\n")


def _stored_scores(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM scores").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:  # the table is not created yet, or the file is being set up
        return 0


def _alive(pid: int) -> bool:
    """Whether ``ps`` still lists ``pid`` as a live process (a zombie waiting to be reaped is dead)."""
    out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    return out.returncode == 0 and bool(out.stdout.strip()) and not out.stdout.strip().startswith("Z")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="the second process runs on Linux with two CPUs or more")
@pytest.mark.parametrize("method", ["auto", "spawn"])
def test_kill_9_of_eval_leaves_no_worker_behind(tmp_path, method):
    data, db = tmp_path / "rows.jsonl", tmp_path / "store.db"
    _rows(data, 40_000)
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "RAGMETER_START_METHOD": method}
    env.pop("RAGMETER_WORKERS", None)
    proc = subprocess.Popen([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "eval", str(data),
                             "-m", "token_f1,rouge1_fmeasure,rougeL_fmeasure,bleu,chrf,exact_match",
                             "--db", str(db), "--no-progress", "--json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while _stored_scores(db) == 0:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "no score was stored in 10 minutes"
            time.sleep(0.05)
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert workers, "the run has no forked worker to check (it finished its share already)"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        gone_by = time.monotonic() + 5
        while any(_alive(w.pid) for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.05)
        left = [w.pid for w in workers if _alive(w.pid)]
        assert not left, f"processes of the killed run still alive 5 s later: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


SLOW_MODULE = """
import time
def slow(req, chunk, ctx):
    time.sleep(600)
"""


@pytest.mark.parametrize("method", [
    pytest.param("fork", marks=pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")), "spawn"])
def test_worker_ends_when_its_parent_is_killed(tmp_path, method):
    """The same guarantee in small: a process that starts a worker (SecondHalf, forked or spawned)
    and is killed with SIGKILL takes the worker with it within 5 s, on the pipe or PR_SET_PDEATHSIG.
    (The scoring function lives in a module: a spawned worker imports it by name.)"""
    (tmp_path / "slow_metric.py").write_text(SLOW_MODULE)
    code = """
import os, sys, time
from ragmeter.run.engines import forked
from slow_metric import slow
assert forked.claim()
half = forked.SecondHalf([(None, [[1]])], {}, slow, method=sys.argv[1])
for _ in range(400):
    tracker = "resource" + "_tracker"  # multiprocessing's helper of a spawning process is not the worker
    kids = [k for k in __import__("psutil").Process().children() if tracker not in " ".join(k.cmdline())]
    if kids:
        break
    time.sleep(0.05)
print(kids[0].pid, flush=True)
time.sleep(600)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(tmp_path)])}
    proc = subprocess.Popen([sys.executable, "-c", code, method], env=env, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(proc.stdout.readline())
        assert _alive(worker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        gone_by = time.monotonic() + 5
        while _alive(worker) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_benchmarks_judge_server_ends_when_the_benchmark_is_killed(tmp_path):
    """The scripted judge server the benchmarks start as a subprocess ends with them, even at kill -9."""
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    code = ("import sys, time; sys.path.insert(0, sys.argv[1])\n"
            "from judge import start_server\n"
            "proc, url = start_server(0.0)\n"
            "print(proc.pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(bench)], stdout=subprocess.PIPE, text=True)
    try:
        server = psutil.Process(int(parent.stdout.readline()))
        assert server.is_running()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        gone, alive = psutil.wait_procs([server], timeout=10)
        assert not alive, "the judge server outlived the benchmark that started it"
    finally:
        if parent.poll() is None:
            parent.kill()


SLOW_GRADER = """
import os, time
def grade(sample, item):
    if os.fork() == 0:  # a process in a session of its own, which a process-group kill would miss
        os.setsid()
        os.execvp("sleep", ["sleep", "600", {nonce!r}])
    time.sleep(600)
    return 1.0
"""


def test_kill_9_of_eval_during_a_sandboxed_python_grader_leaves_no_process(tmp_path):
    """``kill -9`` of ``ragmeter eval --openai-eval`` while its python graders run in their sandboxes
    (bwrap, its init, the grader's Python and the ``setsid`` child it started) leaves none of them alive."""
    nonce = f"0.00{random.SystemRandom().randrange(10**9):09d}"
    data, defn, db = tmp_path / "items.jsonl", tmp_path / "eval.json", tmp_path / "store.db"
    data.write_text("".join(json.dumps({"item": {"i": i}, "sample": {"output_text": "x"}}) + "\n" for i in range(4)))
    defn.write_text(json.dumps({"testing_criteria": [
        {"type": "python", "name": "slow", "source": SLOW_GRADER.format(nonce=nonce)}]}))
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "eval", str(data),
                             "--openai-eval", str(defn), "--allow-python-graders", "--option",
                             "python_grader_timeout=300", "--option", "python_grader_workers=2",
                             "--db", str(db), "--no-progress"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while sum(nonce in " ".join(_cmdline(p)) for p in run) < 2:  # both graders started their sleep
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the graders did not start"
            time.sleep(0.05)
            run = psutil.Process(proc.pid).children(recursive=True)
        assert any(p.name() == "bwrap" for p in run), [p.name() for p in run]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        gone_by = time.monotonic() + 5
        while any(_alive(p.pid) for p in run) and time.monotonic() < gone_by:
            time.sleep(0.05)
        left = [(p.pid, _cmdline(p)) for p in run if _alive(p.pid)]
        assert not left, f"processes of the killed run still alive 5 s later: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in run:
            if _alive(p.pid):
                p.kill()


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []
