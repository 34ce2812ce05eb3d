"""Fresh ``ragmeter`` processes for the benchmarks: the command a user types, timed from launch.

A user's ``ragmeter`` is an installed copy: pip compiles its bytecode at install, so its modules
load from ``.pyc`` files. A machine with ``PYTHONDONTWRITEBYTECODE=1`` would instead compile every
module from source in every process (about 0.3 s of CPU), which no installed copy does; the child
environment (:func:`installed_env`) drops that variable and points ``PYTHONPYCACHEPREFIX`` at a
temporary folder that an unmeasured warm-up run fills, so the source tree stays clean.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def ragmeter_command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m ragmeter``."""
    script = Path(sys.executable).with_name("ragmeter")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("ragmeter")
    return [found] if found else [sys.executable, "-m", "ragmeter"]


def installed_env(pycache: str | Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh user process, loading ragmeter from bytecode under ``pycache``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(extra)
    return env


def run_timed(args: list[str], env: dict[str, str], check: bool = True) -> tuple[float, str]:
    """Seconds from launch to exit of ``ragmeter ARGS``, and its stdout."""
    t = time.perf_counter()
    done = subprocess.run([*ragmeter_command(), *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if check and done.returncode:
        raise RuntimeError(f"ragmeter {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall, done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_byte_after_launch(args: list[str], env: dict[str, str], port: int, path: str,
                            timeout: float = 120.0) -> dict[str, Any]:
    """Launch ``ragmeter ARGS`` (a server on 127.0.0.1:PORT), ask for ``path`` as soon as the port
    accepts a connection, and time the first byte of the answer from the launch. Returns
    ``{"first_byte_s", "listening_s", "status", "bytes", "total_s"}``; the server is stopped."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*ragmeter_command(), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                break
            except OSError:
                if time.perf_counter() - t0 > timeout:
                    raise
                time.sleep(0.01)
        listening = time.perf_counter() - t0
        with sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            first = sock.recv(1)
            first_byte = time.perf_counter() - t0
            chunks = [first]
            while chunk := sock.recv(1 << 16):
                chunks.append(chunk)
        total = time.perf_counter() - t0
        data = b"".join(chunks)
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        return {"first_byte_s": first_byte, "listening_s": listening, "status": status,
                "bytes": len(data), "total_s": total}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def median(xs: list[float], digits: int = 3) -> float:
    return round(statistics.median(xs), digits)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
