"""Replies from servers are bounded in size and in the waits they ask for: a judge's or a simulated
target's reply is read as it arrives and abandoned past the limit (the sample or the conversation
says "reply larger than N MB"), and a ``Retry-After`` is obeyed for 60 s at most, on every judge
transport and by the target client."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from judge_server import Forced, JudgeServer, judge_options, server_fixtures
from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Chunk, Sample
from ragmeter.llm import service as service_mod
from ragmeter.llm.replies import MAX_SERVER_WAIT, retry_after_seconds
from ragmeter.llm.service import RateLimiter
from ragmeter.metrics.judge.generation import faithfulness
from ragmeter.simulate import targets as targets_mod
from ragmeter.simulate.targets import TargetError, make_target

judge_server_module, server = server_fixtures()

SRC = str(Path(__file__).resolve().parents[1] / "src")
SAMPLE = Sample(id="s1", question="What is the capital of France?",
                answer="Paris is the capital of France. The moon is made of cheese.",
                contexts=[Chunk(text="Paris is the capital of France.")])
#: (provider, judge_http_client): every way a judge reply reaches ragmeter
WAYS = [("openai", "sdk"), ("openai", "aiohttp"), ("openai", "httpx"),
        ("anthropic", "auto"), ("anthropic", "httpx"), ("google", "auto")]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "sk-test-replies-0001")


def score(server, provider, transport, **extra):
    ctx = ScoringContext(judge_options(server, provider, judge_http_client=transport, **extra))
    try:
        return faithfulness([SAMPLE], ctx)[0]
    finally:
        ctx.close()


# ---- judges: size ---------------------------------------------------------------------------------
@pytest.mark.parametrize("chunked", [False, True], ids=["with-length", "chunked"])
@pytest.mark.parametrize("provider, transport", WAYS)
def test_a_judge_reply_over_the_limit_gets_no_value_with_the_reason(server, provider, transport, chunked):
    headers = {"transfer-encoding": "chunked"} if chunked else {}
    server.force(Forced(text="x" * 300_000, headers=headers))
    s = score(server, provider, transport, judge_max_reply_mb=0.1)
    assert s.value is None
    assert s.reason.startswith("judge failure: reply larger than 0.1 MB"), s.reason
    assert "judge_max_reply_mb" in s.details["judge_error"]
    assert server.n_requests == 1  # final: a retry would get the same body
    # a reply within the limit is read as before
    server.reset()
    assert score(server, provider, transport, judge_max_reply_mb=0.1).value == 0.5


def test_the_judge_reply_limit_is_checked_as_an_option():
    from ragmeter.llm import JudgeConfigError

    for bad in ("0", "-1", "inf", "many"):
        with pytest.raises(JudgeConfigError, match="max_reply_mb"):
            ScoringContext({"judge": "openai:m", "judge_max_reply_mb": bad}).service("judge")


# ---- judges: Retry-After --------------------------------------------------------------------------
def test_server_waits_are_capped():
    assert retry_after_seconds({"retry-after": "100000"}) == MAX_SERVER_WAIT == 60.0
    assert retry_after_seconds({"retry-after-ms": "100000000"}) == MAX_SERVER_WAIT
    assert retry_after_seconds({"retry-after": "inf"}) == MAX_SERVER_WAIT
    far = email.utils.format_datetime(email.utils.localtime().replace(year=2999), usegmt=False)
    assert retry_after_seconds({"retry-after": far}) == MAX_SERVER_WAIT
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after": "nan"}) is None
    assert retry_after_seconds({"retry-after-ms": "soon"}) is None
    limiter = RateLimiter(None, clock=lambda: 0.0)
    limiter.pause(1e9)
    assert limiter._pause_until == MAX_SERVER_WAIT


@pytest.fixture
def waits(monkeypatch):
    """The judge's waits as computed (its ``_sleep`` seam), on a clock they advance: nothing waits."""
    clock = [1000.0]
    slept: list[float] = []

    async def fake_sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds
        await asyncio.sleep(0)

    monkeypatch.setattr(service_mod, "_sleep", fake_sleep)
    monkeypatch.setattr(service_mod, "RateLimiter", functools.partial(RateLimiter, clock=lambda: clock[0]))
    return slept


@pytest.mark.parametrize("header", [{"Retry-After": "100000"}, {"retry-after-ms": "100000000"}],
                         ids=["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("provider, transport", WAYS[:5])
def test_a_huge_retry_after_waits_the_cap_on_every_transport(server, waits, provider, transport, header):
    server.force(Forced(status=429, headers=header))
    s = score(server, provider, transport)
    assert s.value == 0.5 and server.n_requests == 2, s.reason
    assert waits == [MAX_SERVER_WAIT]  # the backoff took the cap; the run-wide pause ended with it


# ---- simulate: the target -------------------------------------------------------------------------
class _Target(ThreadingHTTPServer):
    """A system under test answering each POST with the next scripted handler (then a plain reply)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: deque[Callable[[BaseHTTPRequestHandler], None]] = deque()
        self.posts = 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # a body without a length ends when the connection closes

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.posts += 1
        step = self.server.script.popleft() if self.server.script else _answer("ok")
        try:
            step(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded reader does


def _answer(text: str, status: int = 200, headers: dict | None = None):
    def step(h):
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return step


def _huge(total: int, declare: bool = False, pause: float = 0.0):
    """A 200 reply of ``total`` bytes streamed in 1 MB pieces (never held whole here)."""
    def step(h):
        h.send_response(200)
        h.send_header("content-type", "application/json")
        if declare:
            h.send_header("content-length", str(total))
        h.end_headers()
        head = b'{"choices": [{"message": {"role": "assistant", "content": "'
        h.wfile.write(head)
        piece = b"A" * (1 << 20)
        sent = len(head)
        while sent < total:
            n = min(len(piece), total - sent)
            h.wfile.write(piece[:n])
            sent += n
            if pause:
                time.sleep(pause)
    return step


@pytest.fixture
def target():
    srv = _Target()
    yield srv
    srv.shutdown()
    srv.server_close()


def _peak_rss_kb_until_exit(proc: subprocess.Popen) -> int:
    """The child's peak resident memory in KB: its ``VmHWM`` (the high-water mark of its own address
    space, which starts anew at exec) read every 10 ms until it exits; the exit status is set on
    ``proc``. Not ``wait4``'s ``ru_maxrss``: Linux carries the parent's peak across fork and exec
    into it, so in a test worker that has loaded a model it is the worker's figure, not the child's."""
    peak = 0
    while True:
        try:
            with open(f"/proc/{proc.pid}/status") as fh:
                hwm = re.search(r"VmHWM:\s+(\d+)", fh.read())
            if hwm:
                peak = max(peak, int(hwm.group(1)))
        except OSError:
            pass
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return peak
        time.sleep(0.01)


def test_a_300_mb_target_reply_exits_2_with_the_reason_in_bounded_memory(tmp_path, target):
    """``ragmeter simulate`` against a target whose reply is 300 MB: the conversation fails with
    "reply larger than 8 MB", nothing is stored, exit 2, and ragmeter's peak RSS stays under 500 MB
    (the kernel's high-water mark of the child's own memory, :func:`_peak_rss_kb_until_exit`)."""
    target.script.append(_huge(300_000_000))
    judge = JudgeServer().start()
    (tmp_path / "s.yaml").write_text("scenarios:\n  - id: big\n    persona: p\n    goal: Ask about fares.\n"
                                     "    expected_outcome: fares explained\n")
    db = tmp_path / "store.db"
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "RAGMETER_TEST_JUDGE_KEY": "k"}
    out_file, err_file = tmp_path / "out.txt", tmp_path / "err.txt"
    try:
        with out_file.open("wb") as out_fh, err_file.open("wb") as err_fh:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", "simulate",
                 "--target", target.url, "--target-model", "m", "--scenarios", str(tmp_path / "s.yaml"),
                 "--name", "big", "--turns", "1", "--judge", "openai:sim-user", "--judge-base-url",
                 judge.url + "/v1", "--judge-api-key-env", "RAGMETER_TEST_JUDGE_KEY", "--db", str(db),
                 "--no-progress"], env=env, stdout=out_fh, stderr=err_fh)
            peak_kb = _peak_rss_kb_until_exit(proc)
    finally:
        judge.stop()
    out, err = out_file.read_text(), err_file.read_text()
    assert proc.returncode == 2, (out, err)
    assert "big: target: reply larger than 8 MB" in err and "Traceback" not in err, err
    peak_mb = peak_kb / 1024
    assert 20 < peak_mb < 500, f"ragmeter's peak RSS was {peak_mb:.0f} MB"
    assert target.posts == 1


def test_a_declared_length_over_the_limit_is_refused_before_reading(target):
    target.script.append(_huge(50_000_000, declare=True, pause=0.05))  # 2.5 s to send it all
    send, close = make_target(target.url, model="m", max_reply_mb=1)
    try:
        started = time.monotonic()
        with pytest.raises(TargetError, match=r"reply larger than 1 MB \(the target's reply limit; --max-reply-mb"):
            send([{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < 2.5  # never waited for the body
    finally:
        close()


def test_a_target_reply_trickling_past_the_timeout_ends_the_conversation(target):
    target.script.append(_huge(60 << 20, pause=0.2))  # 1 MB every 0.2 s: 12 s in all
    send, close = make_target(target.url, model="m", timeout=0.5, max_reply_mb=100)
    try:
        with pytest.raises(TargetError, match=r"no complete reply within --timeout 0.5 s"):
            send([{"role": "user", "content": "hi"}])
    finally:
        close()


def test_a_target_429_waits_what_it_asks_for_at_most_the_cap(target, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(targets_mod, "_sleep", slept.append)
    target.script.extend([_answer("busy", 429, {"Retry-After": "100000"}),
                          _answer("busy", 503, {"retry-after-ms": "1500"}),
                          _answer("busy", 503), _answer("fine")])
    send, close = make_target(target.url, model="m")
    try:
        assert send([{"role": "user", "content": "hi"}]) == "fine"
    finally:
        close()
    assert slept == [MAX_SERVER_WAIT, 1.5, 4.0]  # capped, as asked, backoff (third try: 2**2)
    assert target.posts == 4

    slept.clear()
    target.script.extend([_answer("busy", 429)] * 5)
    send, close = make_target(target.url, model="m")
    try:
        with pytest.raises(TargetError, match="HTTP 429"):
            send([{"role": "user", "content": "hi"}])
    finally:
        close()
    assert slept == [1.0, 2.0, 4.0]  # RETRIES asks again, then the conversation ends
