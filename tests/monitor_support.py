"""A `ragmeter serve` subprocess on 127.0.0.1 for the monitoring tests and the ingest and fuzz
benchmarks. The server dies with the process that started it (a test runner or benchmark killed
with ``kill -9`` leaves no server behind): it reads its stdin, a pipe from the parent, and exits
when that pipe closes, which the kernel does when the parent dies, on every platform."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: runs `ragmeter serve` (argv) with a thread that ends the process when stdin reaches EOF, i.e.
#: when the parent holding the pipe's other end exits or is killed
TIED_SERVE = """
import os, sys, threading
def _watch():
    try:
        while sys.stdin.buffer.read(1):
            pass
    finally:
        os._exit(0)
threading.Thread(target=_watch, daemon=True, name="parent-watch").start()
from ragmeter.apps.cli import main
main()
"""


def serve_command(*args: str) -> list[str]:
    """The command line of a `ragmeter serve` that exits when its parent dies (start it with
    ``stdin=subprocess.PIPE`` and keep the pipe open)."""
    return [sys.executable, "-c", TIED_SERVE, "serve", *args]


class Served:
    """``ragmeter serve`` over ``db`` with an ingest token; stops on ``close()`` (or ``kill()``)."""

    def __init__(self, db: str, token: str = "test-token", extra_env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAGMETER_INGEST_TOKEN": token, **(extra_env or {})}
        self.proc = subprocess.Popen(
            serve_command("--port", str(self.port), "--db", db, *args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(self.url + "/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"serve did not start: {self.output}") from None
                time.sleep(0.2)
        self.output = ""

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def peak_rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def kill(self) -> None:
        """``kill -9`` the server (no shutdown, no flush)."""
        self.proc.kill()
        self.proc.wait(timeout=20)
        if self.proc.stdin:
            self.proc.stdin.close()
        self.output = self.proc.stdout.read() if self.proc.stdout else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        if self.proc.stdin:
            self.proc.stdin.close()
        self.output = self.proc.stdout.read() if self.proc.stdout else ""
