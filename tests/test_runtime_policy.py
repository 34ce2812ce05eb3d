"""One runtime policy, owned by the ``ragmeter`` command (ragmeter/apps/cli/runtime.py): the collector,
the allocator and the fast exit are set there and nowhere else; the library leaves them alone."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
RUNTIME = Path("ragmeter/apps/cli/runtime.py")
#: ``os._exit`` in a child process that must end at once (not the interpreter policy of a caller)
CHILD_EXITS = {Path("ragmeter/run/engines/forked.py"), Path("ragmeter/sandbox/python_grader.py")}
POLICY_CALLS = {("gc", "disable"), ("gc", "freeze"), ("gc", "set_threshold"), ("gc", "enable")}


def _calls(path: Path) -> set[tuple[str, str]]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            out.add((name, node.func.attr))
        elif isinstance(node, ast.Name) and node.id == "mallopt":
            out.add(("libc", "mallopt"))
        elif isinstance(node, ast.Attribute) and node.attr == "mallopt":
            out.add(("libc", "mallopt"))
    return out


def test_the_policy_is_set_in_one_module():
    found = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel == RUNTIME:
            continue
        calls = _calls(path)
        bad = calls & (POLICY_CALLS | {("libc", "mallopt")})
        if rel not in CHILD_EXITS and ("os", "_exit") in calls:
            bad.add(("os", "_exit"))
        if bad:
            found[str(rel)] = sorted(bad)
    assert not found, f"runtime policy outside {RUNTIME}: {found}"
    assert {("gc", "disable"), ("libc", "mallopt"), ("os", "_exit")} <= _calls(SRC / RUNTIME)


def _child(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_batch_commands_run_without_the_collector_and_servers_with_it():
    proc = _child("import gc\nfrom ragmeter.apps.cli import runtime\n"
                  "runtime.server_started(); assert gc.isenabled()\n"  # nothing paused: nothing to do
                  "runtime.apply(['serve']); assert not gc.isenabled()\n"  # paused while it starts
                  "runtime.server_started(); assert gc.isenabled()\n"
                  "runtime.server_started(); assert gc.isenabled()\n"
                  "runtime.apply([]); assert gc.isenabled()\n"
                  "runtime.apply(['compare']); assert not gc.isenabled()\n"
                  "gc.enable(); runtime.apply(['report']); assert not gc.isenabled()\n"
                  "gc.enable(); runtime.apply(['eval']); assert not gc.isenabled()\n"
                  "print('ok')")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_server_collects_again_after_its_start_even_without_a_first_page():
    proc = _child("import gc, time\nfrom ragmeter.apps.cli import runtime\n"
                  "runtime.pause_collector_while_starting(limit_s=0.2); assert not gc.isenabled()\n"
                  "time.sleep(1.0); assert gc.isenabled()\n"
                  "runtime.server_started(); assert gc.isenabled()\n"
                  "print('ok')")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_fast_exit_runs_the_exit_handlers_and_keeps_the_status():
    proc = _child("import atexit\nfrom ragmeter.apps.cli import runtime\n"
                  "atexit.register(lambda: print('handler ran', flush=True))\n"
                  "runtime.fast_exit(3)")
    assert proc.returncode == 3 and proc.stdout.strip() == "handler ran", proc.stderr
