"""Run a ``python`` grader's ``grade(sample, item) -> float`` in a separate process.

The grader's code never runs in ragmeter's process. A child Python (``-I``: no user site, no
``PYTHONPATH``, no current directory on the path) runs in a bubblewrap sandbox
(:mod:`ragmeter.sandbox.isolation`: its own PID, network, mount, IPC and UTS namespaces, a read-only view of the
interpreter and nothing else of the file system, a private ``/tmp``, an empty environment, a
process limit), or, only when the user asks for it (``unisolated``), as a plain child process in its
own session with a filtered environment. Either way it has an address space limit (``RLIMIT_AS``,
default 2048 MB, OpenAI's 2 GB), receives the grader's source and then one JSON line per item (the
item and the sample: its only input) on its stdin, and answers one JSON line per item on a private
pipe (the grader's own prints go to stderr). Each call has a wall-clock time limit (default 10 s):
a call that has not answered by then is stopped (the child's whole process group is killed, and in
the sandbox every process of its PID namespace with it), the item gets no value with the reason,
and a fresh child grades the items after it.

The child dies with ragmeter: Linux's ``PR_SET_PDEATHSIG`` sends it (or bwrap, which passes it on
with ``--die-with-parent``) SIGKILL when its parent exits, and a watchdog thread in the child exits
when its parent changes or its stdin closes; a grader stuck in a C call cannot outlive the parent
either, as the signal needs no cooperation.
"""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.sandbox import DEFAULT_MEMORY_MB, DEFAULT_PROCESSES, DEFAULT_TIMEOUT_S, DEFAULT_WORKERS

_STDERR_KEEP = 4000

#: the child's program: read the grader, then grade one JSON line at a time
_CHILD = r'''
import json, os, sys, threading, time, traceback
out = os.fdopen(int(sys.argv[1]), "w", buffering=1, encoding="utf-8")
nproc, uid = int(sys.argv[2]), int(sys.argv[3])
if uid >= 0:  # a root ragmeter: a uid of the grader's own, which RLIMIT_NPROC counts (root is exempt)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
if nproc > 0:
    import resource
    if os.getuid() == 0 or (uid < 0 and open("/proc/self/uid_map").read().split() == ["0", "0", "4294967295"]):
        out.write(json.dumps({"load_error": "the sandbox has no user of its own to count its processes "
                              "(uid %d, uid_map %r)" % (os.getuid(), open("/proc/self/uid_map").read().strip())}) + "\n")
        sys.exit(0)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
parent = os.getppid()
def _watch():
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)
threading.Thread(target=_watch, daemon=True).start()
sys.stdout = sys.stderr
spec = json.loads(sys.stdin.readline())
ns = {"__name__": "grader"}
try:
    exec(compile(spec["source"], "<grader " + spec["name"] + ">", "exec"), ns)
    grade = ns.get("grade")
    if not callable(grade):
        raise NameError("the source defines no function grade(sample, item)")
except BaseException as exc:
    out.write(json.dumps({"load_error": type(exc).__name__ + ": " + str(exc)[:500]}) + "\n")
    sys.exit(0)
out.write(json.dumps({"ready": True}) + "\n")
for line in sys.stdin:
    job = json.loads(line)
    try:
        v = grade(job["sample"], job["item"])
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            msg = {"returned": "grade returned " + type(v).__name__ + ", not a number"}
        else:
            msg = {"value": float(v)}
    except MemoryError:
        msg = {"error": "MemoryError: the grader went over its memory limit"}
    except BaseException as exc:
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        msg = {"error": type(exc).__name__ + ": " + str(exc)[:500], "traceback": "".join(tb[-6:])[-2000:]}
    out.write(json.dumps(msg, default=str) + "\n")
'''


@dataclass(frozen=True)
class Outcome:
    """One item's result: a value, or no value and why (``details`` for the score)."""

    value: float | None
    reason: str | None = None
    details: dict[str, Any] | None = None


def _limits(memory_mb: int) -> Any:
    """The function the child runs between fork and exec: its memory limit, no core files, and
    death with the parent (Linux). Everything it calls is looked up here, before the fork, so the
    forked child imports nothing (an import there could wait on a lock another thread held)."""
    import resource

    limit = int(memory_mb) * 1024 * 1024
    setrlimit, rlimit_as, rlimit_core = resource.setrlimit, resource.RLIMIT_AS, resource.RLIMIT_CORE
    prctl = None
    if sys.platform.startswith("linux"):
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl

    def apply() -> None:
        setrlimit(rlimit_as, (limit, limit))
        setrlimit(rlimit_core, (0, 0))
        if prctl is not None:
            prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    return apply


class _Child:
    """One grader process."""

    def __init__(self, name: str, source: str, memory_mb: int, *, isolated: bool = True,
                 processes: int = DEFAULT_PROCESSES) -> None:
        read_fd, write_fd = os.pipe()
        try:
            if isolated:  # the sandbox of .isolation: bwrap clears the environment of what it runs
                from ragmeter.sandbox import isolation

                bwrap = isolation.bwrap_path()
                if bwrap is None:
                    raise OSError(f"bwrap is not installed ({isolation.INSTALL})")
                root = os.geteuid() == 0
                command = [sys.executable, "-I", "-c", _CHILD, str(write_fd), str(int(processes)),
                           str(isolation.drop_uid(root))]
                argv = isolation.sandbox_argv(bwrap, command, root=root)
                env = {"PATH": os.environ.get("PATH", os.defpath)}
            else:
                argv = [sys.executable, "-I", "-c", _CHILD, str(write_fd), "0", "-1"]
                env = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR"}}
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(write_fd,),
                start_new_session=True, preexec_fn=_limits(memory_mb), text=True, encoding="utf-8", env=env)
        finally:
            os.close(write_fd)
        self.replies: queue.Queue[str | None] = queue.Queue()
        self.closed = False
        self.stderr: list[str] = []
        reader = os.fdopen(read_fd, encoding="utf-8")
        threading.Thread(target=self._pump, args=(reader, self.replies), daemon=True).start()
        self.drained = threading.Thread(target=self._drain, daemon=True)
        self.drained.start()
        self.send({"name": name, "source": source})

    @staticmethod
    def _pump(reader: Any, q: queue.Queue[str | None]) -> None:
        with reader:
            for line in reader:
                q.put(line)
        q.put(None)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        size = 0
        try:
            for line in self.proc.stderr:
                if size < _STDERR_KEEP:
                    self.stderr.append(line)
                    size += len(line)
        except (OSError, ValueError):  # closed by kill()
            pass

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float) -> dict[str, Any] | None:
        """The next reply, or ``None`` when the child ended or ``timeout`` passed."""
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            self.closed = True
            return None
        return json.loads(line)

    def alive(self) -> bool:
        """Whether the child still runs: it has not closed its reply pipe (a child whose pipe closed is
        ending, even when it is not reaped yet) and has not exited."""
        return not self.closed and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin, self.proc.stderr):
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass

    def ended_because(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # it closed its reply pipe and runs on
            self.kill()
            code = self.proc.returncode
        self.drained.join(timeout=2)  # its last words (bwrap's own errors among them)
        tail = "".join(self.stderr)[-500:].strip()
        why = f"the grader process ended (exit status {code})"
        if code is not None and code < 0:
            why = f"the grader process was killed by signal {-code}"
        if "MemoryError" in tail or code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            why += "; over its memory limit?"
        return why + (f": {tail}" if tail else "")


def run_python_grader(name: str, source: str, jobs: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any]]], *,
                      timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
                      workers: int = DEFAULT_WORKERS, isolated: bool = True,
                      processes: int = DEFAULT_PROCESSES) -> list[Outcome]:
    """Grade ``(sample, item)`` pairs with a python grader's ``grade`` function, in child processes.

    Args:
        name: the grader's name (for messages).
        source: its source code, defining ``grade(sample, item) -> float``.
        jobs: the pairs to grade; ``sample`` ``None`` is passed as ``{}``.
        timeout_s: wall-clock seconds one call may take (loading the source has the same limit).
        memory_mb: each child's address-space limit.
        workers: children grading at once (each takes the next item when it is done; a child
            stopped at the time limit is replaced by a fresh one).
        isolated: run each child in the bubblewrap sandbox (:mod:`.isolation`); ``False`` runs it
            as a plain child process, which sees what the user sees (files, network, processes).
        processes: processes and threads a sandboxed child may have at once.

    Returns:
        One :class:`Outcome` per pair, in order.
    """
    out: list[Outcome | None] = [None] * len(jobs)
    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(jobs)):
        todo.put(i)
    load_failure: list[str] = []
    children: list[_Child] = []
    lock = threading.Lock()

    def start() -> _Child | None:
        try:
            child = _Child(name, source, memory_mb, isolated=isolated, processes=processes)
        except (OSError, subprocess.SubprocessError) as exc:
            with lock:
                load_failure.append(f"python grader {name!r}: cannot start a Python process: {exc}")
            return None
        with lock:
            children.append(child)
        first = child.reply(timeout_s)
        if first is not None and "ready" in first:
            return child
        why = (first or {}).get("load_error") or (
            f"loading the grader took longer than its time limit ({timeout_s:g} s)" if child.alive()
            else child.ended_because())
        child.kill()
        with lock:
            load_failure.append(f"python grader {name!r} could not load: {why}")
        return None

    def work() -> None:
        child: _Child | None = None
        try:
            while not load_failure:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                if child is None and (child := start()) is None:
                    todo.put(i)
                    return
                sample, item = jobs[i]
                t0 = time.monotonic()
                child.send({"sample": dict(sample or {}), "item": dict(item)})
                msg = child.reply(timeout_s)
                if msg is not None:
                    out[i] = _outcome(name, msg)
                    continue
                if child.alive():
                    out[i] = Outcome(None, f"python grader {name!r} stopped at its time limit ({timeout_s:g} s) "
                                           "without returning a grade",
                                     {"time_limit_s": timeout_s, "elapsed_s": round(time.monotonic() - t0, 3)})
                else:
                    out[i] = Outcome(None, f"python grader {name!r} failed: {child.ended_because()}",
                                     {"memory_limit_mb": memory_mb})
                child.kill()
                child = None
        finally:
            if child is not None:
                child.kill()

    threads = [threading.Thread(target=work, name=f"python-grader-{k}", daemon=True)
               for k in range(max(1, min(int(workers), len(jobs))))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        with lock:
            for c in children:
                c.kill()
    reason = load_failure[0] if load_failure else "python grader: not graded"
    return [o if o is not None else Outcome(None, reason) for o in out]


def _outcome(name: str, msg: Mapping[str, Any]) -> Outcome:
    if "value" in msg:
        v = float(msg["value"])
        if not math.isfinite(v):
            return Outcome(None, f"python grader {name!r} returned {v}, not a finite number")
        return Outcome(v)
    if "returned" in msg:
        return Outcome(None, f"python grader {name!r}: {msg['returned']}")
    details = {"traceback": msg["traceback"]} if msg.get("traceback") else None
    return Outcome(None, f"python grader {name!r} raised {msg.get('error')}", details)


_probe_lock = threading.Lock()
_probed: dict[tuple[int, str | None], str | None] = {}


def isolation_problem() -> str | None:
    """Why python graders cannot run isolated here (``None``: they can). Checked once per process
    (and user, and bwrap): :func:`.isolation.unavailable`, then a sandbox started to grade one item."""
    from ragmeter.sandbox import isolation

    key = (os.geteuid() if hasattr(os, "geteuid") else -1, isolation.bwrap_path())
    with _probe_lock:
        if key not in _probed:
            problem = isolation.unavailable()
            if problem is None and key[1] is not None:
                (out,) = run_python_grader("isolation check", "def grade(sample, item):\n    return 1.0\n", [({}, {})],
                                           timeout_s=30, memory_mb=1024, workers=1, isolated=True)
                if out.value != 1.0:
                    problem = isolation.failed(key[1], (out.reason or "").removeprefix("python grader 'isolation check' "))
            _probed[key] = problem
        return _probed[key]
