"""A `ragmeter serve` subprocess on 127.0.0.1 for the monitoring tests and the ingest benchmark."""

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


class Served:
    """``ragmeter serve`` over ``db`` with an ingest token; stops on ``close()``."""

    def __init__(self, db: str, token: str = "test-token", extra_env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAGMETER_INGEST_TOKEN": token, **(extra_env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from ragmeter.cli import main; main()", "serve",
             "--port", str(self.port), "--db", db],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
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

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.output = self.proc.stdout.read() if self.proc.stdout else ""
