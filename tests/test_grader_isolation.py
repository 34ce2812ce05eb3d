"""A python grader of an OpenAI Evals definition is untrusted code: run through the real command with
an API key in ragmeter's environment, a grader that reads every environment it can reach, connects to
127.0.0.1, starts a process in a session of its own, writes outside its folder and SIGKILLs its parent
gets nothing out (sandbox/isolation.py: the bubblewrap sandbox), leaves no process behind,
and its samples are "no value" with the reason. The permission to run python graders is never stored
with a run: ``eval --resume`` needs it again.

These tests need bubblewrap (``scripts/ensure-test-system-deps.sh`` installs it); they fail, not skip,
without it, since the guarantee they check is the one users are given."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
CANARY = "sk-canary-XYZ"

#: the grader: everything it can find, its attempts and their outcome, raised as its error (so the
#: stored reason shows what it got); the keys it found come first, before the reason's length limit
SPY = r'''
import json, os, re, signal, socket

PORT, OUTSIDE, NONCE = {port}, {outside!r}, {nonce!r}

def grade(sample, item):
    seen = ["\n".join(k + "=" + v for k, v in os.environ.items())]
    for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid())]:
        for what in ("environ", "cmdline"):
            try:
                seen.append(open("/proc/" + pid + "/" + what, "rb").read().decode("latin-1"))
            except OSError:
                pass
    keys = sorted(set(re.findall(r"sk-[A-Za-z0-9-]+", "\n".join(seen))))
    found = {{"keys": keys, "pids": sorted(p for p in os.listdir("/proc") if p.isdigit())}}
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
            s.sendall(json.dumps(keys).encode())
        found["connect"] = "connected"
    except OSError as exc:
        found["connect"] = type(exc).__name__
    try:
        os.setsid()
        found["setsid"] = "ok"
    except OSError as exc:
        found["setsid"] = type(exc).__name__
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
        finally:
            os.execvp("sleep", ["sleep", "60", NONCE])
    found["forked"] = child
    for path in ("../escape.txt", OUTSIDE, "/tmp/inside.txt"):
        try:
            with open(path, "w") as fh:
                fh.write("written by the grader")
            found["wrote " + path] = "yes"
        except OSError as exc:
            found["wrote " + path] = type(exc).__name__
    try:
        os.kill(os.getppid(), signal.SIGKILL)
        found["killed"] = os.getppid()
    except OSError as exc:
        found["killed"] = type(exc).__name__
    raise RuntimeError("FOUND " + json.dumps(found))
'''

#: runs ragmeter as a child subreaper: every process of the run that outlives its parent becomes a
#: child of this wrapper, which lists the ones still alive 5 s after ragmeter ended
WRAPPER = r'''
import ctypes, json, os, subprocess, sys, time
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
time.sleep(5)
left = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        state, ppid = open("/proc/" + pid + "/stat").read().rsplit(")", 1)[1].split()[:2]
        cmd = open("/proc/" + pid + "/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        continue
    if int(ppid) == os.getpid() and state != "Z":
        left.append([int(pid), cmd])
print(json.dumps({"code": proc.returncode, "out": proc.stdout, "err": proc.stderr, "left": left}))
'''


@pytest.fixture(scope="module")
def sandbox():
    """The sandbox works here: bwrap is installed and may create namespaces."""
    from ragmeter.sandbox.python_grader import isolation_problem

    problem = isolation_problem()
    assert problem is None, problem


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": CANARY}
    env.pop("RAGMETER_DB", None)
    return env


def _ragmeter(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *args]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_ragmeter(*args), cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=300)


def _files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def _with_nonce(nonce: str) -> list[int]:
    """Live processes whose command line carries ``nonce`` (the grader's ``sleep``)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if nonce in cmd and state != "Z":
            out.append(int(pid))
    return out


def _definition(tmp_path: Path, source: str) -> tuple[Path, Path]:
    items = [{"item": {"answer": a}, "sample": {"output_text": o}}
             for a, o in (("Paris", "Paris"), ("Rome", "Madrid"), ("Oslo", "Oslo"))]
    data, defn = tmp_path / "items.jsonl", tmp_path / "eval.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in items))
    defn.write_text(json.dumps({"name": "isolation", "testing_criteria": [
        {"type": "python", "name": "spy", "source": source},
        {"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
         "reference": "{{item.answer}}", "operation": "eq"}]}))
    return data, defn


def test_a_hostile_grader_gets_nothing_out_and_leaves_nothing_behind(tmp_path, sandbox):
    work = tmp_path / "work"
    work.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    nonce = f"0.00{secrets.randbelow(10**9):09d}"
    outside = tmp_path / "outside.txt"
    data, defn = _definition(work, SPY.format(port=port, outside=str(outside), nonce=nonce))
    db = work / "store.db"
    before = _files(tmp_path)
    try:
        wrapped = subprocess.run(
            [sys.executable, "-c", WRAPPER, *_ragmeter("eval", str(data), "--openai-eval", str(defn), "--db", str(db),
                                                      "--no-progress", "--allow-python-graders")],
            cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
        assert wrapped.returncode == 0, wrapped.stderr
        result = json.loads(wrapped.stdout)
        # ragmeter was not killed, finished, and reports the grader without values (exit 3: incomplete)
        assert result["code"] == 3, result["out"] + result["err"]
        assert "Traceback" not in result["err"]
        # no process of the run is alive 5 s after it ended: none reparented to the wrapper, no sleep
        assert result["left"] == [], result["left"]
        assert _with_nonce(nonce) == []

        show = _run("show", "latest", "--json", "--db", str(db), cwd=work)
        assert show.returncode == 0, show.stderr
        metrics = json.loads(show.stdout)["metrics"]
        assert metrics["exact"]["mean"] == pytest.approx(2 / 3)  # the rest of the run is untouched
        spy = metrics["spy"]
        assert spy["n"] == 0 and spy["n_missing"] == 3
        (reason,) = spy["missing_reasons"]
        assert reason.startswith("python grader 'spy' raised RuntimeError: FOUND "), reason
        found = json.loads(reason.split("FOUND ", 1)[1])  # its own report (the reason keeps 500 characters)
        assert found["keys"] == []  # no API key in its environment or in any /proc it can read
        assert found["pids"] == ["1", "2"]  # its own PID namespace: bwrap's init and itself
        assert found["connect"] == "ConnectionRefusedError"  # its own network: nobody listens on its loopback

        export_jsonl, export_csv, report = work / "rows.jsonl", work / "rows.csv", work / "report.html"
        outputs = [result["out"], result["err"], show.stdout, show.stderr]
        for args in (("export", "latest", "-f", "jsonl", "-o", str(export_jsonl)),
                     ("export", "latest", "-f", "csv", "-o", str(export_csv)),
                     ("report", "latest", "-o", str(report))):
            done = _run(*args, "--db", str(db), cwd=work)
            assert done.returncode == 0, done.stderr
            outputs += [done.stdout, done.stderr]
        rows = [json.loads(x) for x in export_jsonl.read_text().splitlines()]
        assert [r["spy"] for r in rows] == [None, None, None]
        assert "FOUND" in report.read_text()  # the report shows the reason ...
        stored = []
        with sqlite3.connect(db) as con:
            for table in ("scores", "runs", "run_samples"):
                stored += [repr(row) for row in con.execute(f"SELECT * FROM {table}")]  # noqa: S608
        # ... and the key is nowhere: not in a stored value, reason or detail, export, report or output
        for text in [*outputs, *stored, export_jsonl.read_text(), export_csv.read_text(), report.read_text()]:
            assert CANARY not in text
        for f in work.iterdir():
            assert CANARY.encode() not in f.read_bytes(), f

        # no file was written outside the grader's own /tmp; the listening socket got no connection
        assert not (tmp_path / "escape.txt").exists() and not outside.exists() and not Path("/escape.txt").exists()
        new = set(_files(tmp_path)) - set(before)
        ours = {"store.db", "store.db-wal", "store.db-shm", "store.db.lock", "rows.jsonl", "rows.csv", "report.html"}
        assert new <= {f"work/{name}" for name in ours}, new  # what ragmeter writes, nothing else
        assert not (Path("/tmp") / "inside.txt").exists()
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()

        # the permission is not stored with the run: a resume without it is refused (exit 2)
        resumed = _run("eval", "--resume", "latest", "--db", str(db), "--no-progress", cwd=work)
        assert resumed.returncode == 2, resumed.stdout + resumed.stderr
        assert "--allow-python-graders" in resumed.stderr and "Traceback" not in resumed.stderr
        assert CANARY not in resumed.stdout + resumed.stderr
    finally:
        listener.close()
        for pid in _with_nonce(nonce):  # only if the test failed: the grader's sleep
            os.kill(pid, signal.SIGKILL)


def test_unisolated_graders_are_what_the_docs_say(tmp_path):
    """The control: without the sandbox (``--unisolated-python-graders``) the same reading of the
    parent's /proc finds the key; that is what the opt-in means and why it is named."""
    source = textwrap.dedent("""
        import os, re
        def grade(sample, item):
            text = open(f"/proc/{os.getppid()}/environ", "rb").read().decode("latin-1")
            raise RuntimeError("FOUND " + " ".join(re.findall(r"sk-[A-Za-z0-9-]+", text)))
    """)
    data, defn = _definition(tmp_path, source)
    db = tmp_path / "store.db"
    done = _run("eval", str(data), "--openai-eval", str(defn), "--db", str(db), "--no-progress",
                "--unisolated-python-graders", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    show = json.loads(_run("show", "latest", "--json", "--db", str(db), cwd=tmp_path).stdout)
    assert any(CANARY in r for r in show["metrics"]["spy"]["missing_reasons"])


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path, sandbox):
    from ragmeter.sandbox.python_grader import run_python_grader

    nonce = f"0.00{secrets.randbelow(10**9):09d}"
    source = textwrap.dedent(f"""
        import os
        def grade(sample, item):
            n = 0
            for _ in range(500):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    os.execvp("sleep", ["sleep", "60", {nonce!r}])
                n += 1
            return float(n)
    """)
    try:
        (out,) = run_python_grader("bomb", source, [({}, {})], processes=16)
        # 16 tasks: bwrap's init (counted when the sandbox has its own user namespace), the grader,
        # its watchdog thread, and the children it could start
        assert out.value is not None and 10 <= out.value <= 14, out
        assert _with_nonce(nonce) == []  # every child ended with the sandbox
    finally:
        for pid in _with_nonce(nonce):
            os.kill(pid, signal.SIGKILL)


def test_a_sandboxed_grader_sees_only_the_interpreter_and_its_tmp(tmp_path, sandbox):
    from ragmeter.sandbox.python_grader import run_python_grader

    (tmp_path / "secret.txt").write_text("not for graders")
    source = textwrap.dedent(f"""
        import os, sys
        def grade(sample, item):
            seen = {{"cwd": os.getcwd(), "home": os.path.exists(os.path.expanduser("~/.bashrc")),
                     "secret": os.path.exists({str(tmp_path / "secret.txt")!r}),
                     "project": os.path.exists({str(Path(SRC) / "ragmeter")!r}),
                     "store": os.path.exists(".ragmeter"), "uid0": os.getuid() == 0,
                     "python": os.path.exists(sys.executable)}}
            open("/tmp/scratch", "w").write("ok")
            raise RuntimeError(repr(seen) + " " + repr(item))
    """)
    (out,) = run_python_grader("look", source, [({"output_text": "x"}, {"answer": "y"})])
    assert out.value is None and out.reason is not None
    text = out.reason
    assert "'cwd': '/tmp'" in text and "'secret': False" in text and "'project': False" in text
    assert "'home': False" in text and "'store': False" in text
    assert "'uid0': False" in text and "'python': True" in text and "{'answer': 'y'}" in text


@pytest.mark.parametrize("root", [True, False])
def test_a_python_environment_under_tmp_is_mounted_over_the_private_tmp(monkeypatch, root):
    """A checkout (and its .venv) under /tmp, as a CI clone may be: the grader's private /tmp is
    mounted first and the environment bound on top of it, so the interpreter is still there."""
    from ragmeter.sandbox import isolation

    monkeypatch.setattr(isolation, "python_roots", lambda: ["/tmp/ci/main/.venv"])
    argv = isolation.sandbox_argv("/usr/bin/bwrap", ["python"], root=root)
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/tmp"
    bind = max(i for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 2] == "/tmp/ci/main/.venv")
    assert tmpfs < bind
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert "/tmp" not in dirs and "/tmp/ci" in dirs and "/tmp/ci/main" in dirs
