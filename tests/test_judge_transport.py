"""OpenAI-compatible judge requests go out directly over aiohttp or httpx (the openai SDK's own two
transports) unless ``judge_http_client=sdk`` sends them through the SDK's client. Every way must be
the same request on the wire, and its failures must read the same: the retries, the adaptations,
the pre-flight and the reasons a sample gets all depend on it."""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from judge_server import Forced, judge_options, server_fixtures
from ragmeter.core.context import ScoringContext
from ragmeter.core.reasons import category
from ragmeter.core.schema import Chunk, Sample
from ragmeter.llm import JudgeConfigError
from ragmeter.metrics.judge.generation import faithfulness

judge_server_module, server = server_fixtures()

TRANSPORTS = ["sdk", "aiohttp", "httpx"]
SAMPLE = Sample(id="s1", question="What is the capital of France?",
                answer="Paris is the capital of France. The moon is made of cheese.",
                contexts=[Chunk(text="Paris is the capital of France.")])


def score(options):
    ctx = ScoringContext(options)
    try:
        s = faithfulness([SAMPLE], ctx)[0]
        return s, ctx.service("judge")._client
    finally:
        ctx.close()


def score_with(server, transport, **extra):
    return score(judge_options(server, judge_http_client=transport, judge_max_retries=0, **extra))


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "sk-test-transport-0001")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-transport")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-transport")


def test_every_transport_sends_the_same_request(server, key):
    seen = {}
    for t in TRANSPORTS:
        server.reset()
        s, client = score_with(server, t)
        assert s.value == 0.5, (t, s.reason)
        assert client.transport == ("aiohttp" if t in {"sdk", "aiohttp"} else "httpx")
        assert len(server.requests) == 1
        seen[t] = server.requests[0]
    for t in TRANSPORTS:
        req = seen[t]
        assert req["path"] == "/v1/chat/completions", t
        assert req["body"] == seen["sdk"]["body"], t
        h = req["headers"]
        assert h["authorization"] == "Bearer sk-test-transport-0001", t
        assert h["content-type"] == "application/json", t
        assert (h["openai-organization"], h["openai-project"]) == ("org-transport", "proj-transport"), t
    assert seen["aiohttp"]["headers"]["user-agent"].startswith("ragmeter/")


def test_the_direct_transports_do_not_import_the_sdk(server, key, tmp_path):
    """The point of sending directly: a fresh process that judges never pays for ``import openai``."""
    import subprocess

    code = (
        "import sys\n"
        "from judge_server import JudgeServer, judge_options\n"
        "from ragmeter import evaluate\n"
        "srv = JudgeServer().start()\n"
        "try:\n"
        "    res = evaluate([{'question': 'q?', 'answer': 'Paris is the capital of France.',\n"
        "                     'contexts': ['Paris is the capital of France.']}], ['faithfulness'],\n"
        f"                   db='sqlite:///{tmp_path}/t.db', options=judge_options(srv))\n"
        "finally:\n"
        "    srv.stop()\n"
        "assert res.summary['faithfulness']['mean'] == 1.0, res.summary\n"
        "print('openai' in sys.modules)\n")
    import os
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("status", [400, 408, 409, 422, 429, 500, 503])
def test_error_replies_read_the_same(server, key, status):
    got = {}
    for t in TRANSPORTS:
        server.reset()
        server.force(Forced(status=status, headers={"retry-after-ms": "5"}, message="scripted refusal"))
        s, _ = score_with(server, t)
        got[t] = (s.value, s.reason)
    # the provider's own message is part of the reason, whichever transport read the reply
    assert got["sdk"] == (None, f"judge failure: HTTP {status} — scripted refusal")
    assert len(set(got.values())) == 1, got


@pytest.mark.parametrize("status, words", [(401, "rejected the credentials"), (403, "rejected the credentials"),
                                           (404, "model or endpoint was not found")])
def test_configuration_errors_stop_the_run_the_same_way(server, key, status, words):
    said = {}
    for t in TRANSPORTS:
        server.reset()
        server.force(Forced(status=status, message="scripted"))
        with pytest.raises(JudgeConfigError) as err:
            score_with(server, t)
        said[t] = str(err.value).split(f"(HTTP {status})")[0]
        assert words in said[t] and "sk-test-transport" not in str(err.value)
    assert len(set(said.values())) == 1, said


def test_rate_limit_waits_as_the_server_asks_on_every_transport(server, key):
    for t in TRANSPORTS:
        server.reset()
        server.force(Forced(status=429, headers={"retry-after-ms": "30"}))
        s, _ = score(judge_options(server, judge_http_client=t, judge_max_retries=2))
        assert s.value == 0.5, (t, s.reason)
        assert len(server.requests) == 2, t


@pytest.mark.parametrize("message, adapted", [
    ("response_format json_schema is not supported", "response_format -> json_object"),
    ("Unsupported parameter: 'max_tokens'; use 'max_completion_tokens'", "max_tokens -> max_completion_tokens"),
    ("temperature does not support 0 with this model", "temperature not sent"),
])
def test_a_rejected_parameter_is_adapted_on_every_transport(server, key, message, adapted):
    for t in TRANSPORTS:
        server.reset()
        server.force(Forced(status=400, message=message))
        # a model of its own: adaptations last as long as the process keeps the client
        s, client = score_with(server, t, judge=f"openai:adapt-{t}-{adapted.split()[0]}")
        assert s.value == 0.5, (t, s.reason)
        assert client.adaptations == [adapted], t
        assert len(server.requests) == 2, t


def test_a_slow_reply_is_a_timeout_on_every_transport(server, key):
    for t in TRANSPORTS:
        server.reset()
        server.force(Forced(delay=1.0))
        s, _ = score_with(server, t, judge_timeout=0.2)
        assert (s.value, s.reason) == (None, "judge failure: timeout — no complete reply within judge_timeout=0.2 s"), t
    server.wait_idle()


def test_nobody_listening_is_a_connection_error_on_every_transport(key):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the requests: nothing listens there
    for t in TRANSPORTS:
        opts = {"judge": "openai:test-model", "judge_base_url": f"http://127.0.0.1:{port}/v1",
                "judge_api_key_env": "RAGMETER_TEST_JUDGE_KEY", "judge_max_retries": 0,
                "judge_http_client": t}
        s, _ = score(opts)
        # the same kind of failure; the precise part is what that transport said
        assert s.value is None and category(s.reason) == "judge failure: connection error", (t, s.reason)
        assert str(port) in s.reason.split(" — ", 1)[1], (t, s.reason)


def test_a_bad_transport_name_names_the_choices():
    with pytest.raises(JudgeConfigError, match="use auto, aiohttp, httpx or sdk"):
        ScoringContext({"judge": "openai:m", "judge_http_client": "curl"}).service("judge")


# ---- one behaviour on every transport: timeouts, redirects, no SDK ------------------------------------
#: every way a judge request leaves ragmeter: (provider, judge_http_client)
WAYS = [("openai", "sdk"), ("openai", "aiohttp"), ("openai", "httpx"),
        ("anthropic", "aiohttp"), ("anthropic", "httpx"), ("google", "aiohttp"), ("google", "httpx")]


class _Trickle(ThreadingHTTPServer):
    """Answers every POST with HTTP 200 at once, then its JSON body one byte every 0.05 s: each read
    comes quickly, the whole body only after about a second."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _TrickleHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _TrickleHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        try:
            for byte in b" " * 20 + b"{}":
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what a deadline does


@pytest.mark.parametrize("provider, transport", WAYS)
def test_judge_timeout_bounds_the_whole_reply_on_every_transport(key, provider, transport):
    """Each byte of the reply comes within the timeout, the whole reply does not: the request times
    out (a timeout per network read would wait for the body and fail to parse it instead)."""
    srv = _Trickle()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}" + ("/v1" if provider == "openai" else "")
        s, _ = score({"judge": f"{provider}:test-model", "judge_base_url": base,
                      "judge_api_key_env": "RAGMETER_TEST_JUDGE_KEY", "judge_max_retries": 0,
                      "judge_timeout": 0.4, "judge_http_client": transport})
    finally:
        srv.shutdown()
        srv.server_close()
    assert (s.value, s.reason) == (None, "judge failure: timeout — no complete reply within judge_timeout=0.4 s")


@pytest.mark.parametrize("status", [301, 307, 308])
@pytest.mark.parametrize("provider, transport", WAYS)
def test_a_redirect_is_not_followed_and_stops_the_run(server, key, provider, transport, status):
    """A redirected POST would be re-sent as a GET without its body (301) or carry the key headers to
    another host: no transport follows it, and the run stops naming where it points."""
    elsewhere = f"{server.url}/elsewhere/v1/chat/completions"
    server.force(Forced(status=status, headers={"location": elsewhere}))
    with pytest.raises(JudgeConfigError) as err:
        score(judge_options(server, provider, judge_http_client=transport, judge_max_retries=2))
    said = str(err.value)
    assert f"redirect (HTTP {status}), which ragmeter does not follow" in said, said
    assert f"redirected to {elsewhere}" in said and "--judge-base-url" in said, said
    assert server.n_requests == 1  # neither re-sent nor retried


def test_no_sdk_is_imported_by_the_default_judges(tmp_path):
    """OpenAI-compatible, Anthropic and Gemini judges all go through ragmeter's own transport: a
    fresh process that judges with each imports none of the SDKs."""
    import os
    import subprocess
    from pathlib import Path

    code = (
        "import sys\n"
        "from judge_server import JudgeServer, judge_options\n"
        "from ragmeter import evaluate\n"
        "srv = JudgeServer().start()\n"
        "try:\n"
        "    for provider in ('openai', 'anthropic', 'google'):\n"
        "        res = evaluate([{'question': 'q?', 'answer': 'Paris is the capital of France.',\n"
        "                         'contexts': ['Paris is the capital of France.']}], ['faithfulness'],\n"
        f"                       db='sqlite:///{tmp_path}/' + provider + '.db', options=judge_options(srv, provider))\n"
        "        assert res.summary['faithfulness']['mean'] == 1.0, (provider, res.summary)\n"
        "finally:\n"
        "    srv.stop()\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
           "RAGMETER_TEST_JUDGE_KEY": "sk-test-transport-0001"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
