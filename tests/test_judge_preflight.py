"""The judge's pre-flight request, its cache key per endpoint, and its bookkeeping (non-JSON
replies, dropped connections, budget-stopped calls, dry runs), against local scripted servers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from judge_server import Forced, JudgeServer, judge_options, server_fixtures
from ragmeter import evaluate
from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.llm import JudgeConfigError, get_judge
from ragmeter.llm import service as service_mod
from ragmeter.llm.accounting import run_judge_usage
from ragmeter.metrics.judge._common import judge_check
from ragmeter.metrics.judge.generation import faithfulness
from ragmeter.run.estimate import estimate_run_cost
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")
    service_mod._PREFLIGHT.clear()
    yield
    service_mod._PREFLIGHT.clear()


@pytest.fixture
def store(tmp_path):
    st = open_store(f"sqlite:///{tmp_path / 'judge.db'}")
    yield st
    st.close()


@pytest.fixture
def prices(tmp_path):
    p = tmp_path / "prices.json"
    p.write_text(json.dumps({"test-model": {"input": 1.0, "output": 2.0}}))
    return str(p)


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    return port


def sample(i: int, answer: str = "Paris is the capital of France.") -> Sample:
    return Sample(id=f"s{i}", question="What is the capital of France?", answer=answer,
                  contexts=[Chunk(text="Paris is the capital of France.")])


def n_runs(store) -> int:
    return len(store.list_runs())


def n_call_rows(store) -> int:
    from sqlalchemy import func, select

    from ragmeter.store.models import JudgeCallRow

    with store.session() as s:
        return s.scalar(select(func.count()).select_from(JudgeCallRow))


# ---- pre-flight ---------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_preflight_passes_once_per_config(server, provider):
    ctx = ScoringContext(judge_options(server, provider))
    try:
        assert judge_check(ctx) is None
        assert judge_check(ctx) is None
        ctx.service("judge").preflight()
    finally:
        ctx.close()
    assert len(server.pings) == 1 and server.n_requests == 0


@pytest.mark.parametrize("forced, words", [
    (Forced(status=401, message="invalid api key"), "credentials"),
    (Forced(status=404, message="model 'test-model' not found"), "not found"),
    (Forced(content_type="text/html", text="<!DOCTYPE html><html><body>Sign in</body></html>"), "HTML page"),
])
def test_preflight_failure_stops_the_run_before_it_is_created(server, store, forced, words):
    server.force_ping(forced)
    with pytest.raises(ConfigError, match=words):
        evaluate([sample(1)], ["faithfulness"], db=store, options=judge_options(server), progress=False)
    assert n_runs(store) == 0 and server.n_requests == 0 and len(server.pings) == 1


def test_preflight_at_a_closed_port_says_connection_error(store):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ConfigError) as e:
        evaluate([sample(1)], ["faithfulness"], db=store,
                 options={"judge": "openai:m", "judge_base_url": url}, progress=False)
    assert "connection error" in str(e.value) and "--judge-base-url" in str(e.value)
    assert n_runs(store) == 0


def test_preflight_failure_is_cached_briefly(server):
    svc = get_judge("openai:test-model", base_url=server.url + "/v1", api_key_env="RAGMETER_TEST_JUDGE_KEY")
    server.force_ping(Forced(status=401))
    for _ in range(2):
        with pytest.raises(JudgeConfigError, match="401"):
            svc.preflight()
    assert len(server.pings) == 1
    svc.close()


def test_dry_run_makes_no_preflight_and_leaves_nothing(server, store, prices):
    opts = judge_options(server, judge_prices=prices)
    evaluate([sample(1)], ["faithfulness"], db=store, options=opts, progress=False)  # one cached verdict
    runs, rows, pings, reqs = n_runs(store), n_call_rows(store), len(server.pings), server.n_requests
    plan = estimate_run_cost([sample(1), sample(2, "Rome is in Italy.")], ["faithfulness"], db=store, options=opts)
    assert plan["planned_calls"] == 1
    assert (n_runs(store), n_call_rows(store)) == (runs, rows)
    assert (len(server.pings), server.n_requests) == (pings, reqs)


@pytest.mark.slow
def test_cli_closed_port_exits_2_and_stores_nothing(tmp_path):
    db = tmp_path / "cli.db"
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "ragmeter.apps.cli", "eval", "example", "--metrics", "faithfulness",
                        "--judge", "openai:m", "--judge-base-url", f"http://127.0.0.1:{closed_port()}/v1",
                        "--db", str(db), "--no-progress"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "connection error" in r.stderr and "Traceback" not in r.stderr
    assert not db.exists() or open_store(str(db)).list_runs() == []


# ---- cache keyed by endpoint ----------------------------------------------------------------------


def test_cache_is_keyed_by_the_endpoint(store):
    a, b = JudgeServer().start(), JudgeServer().start()
    try:
        def run(url):
            ctx = ScoringContext({**judge_options(a), "judge_base_url": url}, store=store, run_id="r")
            try:
                return faithfulness([sample(1)], ctx)[0]
            finally:
                ctx.close()

        assert run(a.url + "/v1").value == 1.0 and a.n_requests == 1
        assert run(a.url + "/v1").value == 1.0 and a.n_requests == 1  # same URL: a hit
        assert run(a.url.replace("127.0.0.1", "127.0.0.1") + "/v1/").value == 1.0 and a.n_requests == 1
        assert run(b.url + "/v1").value == 1.0 and b.n_requests == 1  # another endpoint: a miss
        assert a.n_requests == 1
    finally:
        a.stop()
        b.stop()


# ---- bookkeeping ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["httpx", "aiohttp", "sdk"])
def test_html_200_is_retried_then_a_judge_failure(server, transport):
    page = "<!DOCTYPE html><html><body>Proxy login</body></html>"
    server.force(*[Forced(content_type="text/html", text=page)] * 2)
    ctx = ScoringContext(judge_options(server, judge_max_retries=1, judge_http_client=transport))
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.value is None and s.reason == ("judge failure: non-JSON reply after 2 attempts — the judge answered "
                                            "HTTP 200 with an HTML page, not a JSON reply (check --judge-base-url): "
                                            f"{page!r}")
    assert "HTML page" in s.details["judge_error"] and server.n_requests == 2


@pytest.mark.parametrize("transport", ["httpx", "aiohttp", "sdk"])
def test_dropped_connections_are_connection_errors(server, transport):
    server.force(*[Forced(drop=True)] * 2)
    ctx = ScoringContext(judge_options(server, judge_max_retries=1, judge_http_client=transport))
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.value is None and s.reason.startswith("judge failure: connection error after 2 attempts — ")


def test_judge_error_bodies_are_redacted(server, store):
    server.force(Forced(status=400, message="Incorrect API key provided: sk-proj-ECHOEDKEY0123456789"))
    ctx = ScoringContext(judge_options(server), store=store, run_id="r")
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.value is None and "ECHOEDKEY" not in json.dumps(s.details) + (s.reason or "")
    from sqlalchemy import select

    from ragmeter.store.models import JudgeCallRow

    with store.session() as sess:
        errors = [r.error for r in sess.scalars(select(JudgeCallRow))]
    assert errors and all("ECHOEDKEY" not in (e or "") for e in errors)


def test_budget_stopped_call_is_accounted_once(server, store, prices):
    # the garbled reply must be re-asked, but the budget only covers one call: the call that was
    # made (and paid) ends as "budget exhausted"; the run's figures and judge_calls agree on it
    one = faithfulness.requests([sample(1, "GARBLE Paris.")], {})[0]
    from ragmeter.llm import estimate_tokens

    per_call = (estimate_tokens(one.system) + estimate_tokens(one.user)) / 1e6 + one.expected_output_tokens * 2 / 1e6
    ctx = ScoringContext(judge_options(server, judge_prices=prices, judge_max_cost=per_call * 1.3),
                         store=store, run_id="r")
    try:
        s = faithfulness([sample(1, "GARBLE Paris.")], ctx)[0]
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    assert s.value is None and s.reason.startswith("budget exhausted") and server.n_requests == 1
    usage = run_judge_usage(store, "r")
    assert usage is not None and stats["cost_usd"] > 0
    assert usage["cost_usd"] == pytest.approx(stats["cost_usd"], abs=1e-6)
    assert (usage["calls"], usage["failed"]) == (stats["calls"], stats["failed"]) == (1, 1)


def test_no_private_sdk_internals():
    hits = [str(p) for p in SRC.rglob("*.py") if "_base_client" in p.read_text(encoding="utf-8")]
    assert hits == []


def test_max_cost_run_shows_one_cost(server, store, prices):
    from ragmeter.llm.accounting import show_section

    samples = [sample(i, f"Paris is the capital of France, fact {i}.") for i in range(8)]
    samples[2] = sample(2, "GARBLE Paris is the capital of France.")
    one = faithfulness.requests(samples[:1], {})[0]
    from ragmeter.llm import estimate_tokens

    per_call = (estimate_tokens(one.system) + estimate_tokens(one.user)) / 1e6 + one.expected_output_tokens * 2 / 1e6
    res = evaluate(samples, ["faithfulness"], db=store, progress=False, skip_unavailable=False,
                   options=judge_options(server, judge_prices=prices, judge_max_cost=per_call * 3.5,
                                         judge_concurrency=1))
    run = store.get_run(res.run_id)
    extra = run.extra["judge"]
    usage = run_judge_usage(store, run.id)
    assert extra["budget_exhausted"] is True
    assert (extra["calls"], extra["cost_usd"]) == (usage["calls"], usage["cost_usd"])
    assert f"${extra['cost_usd']:.6f}" in show_section(store, run)["judge tokens and cost"]


def test_preflight_of_a_silent_server_is_a_timeout(server):
    server.force_ping(Forced(delay=3.0))
    svc = get_judge("openai:test-model", base_url=server.url + "/v1", api_key_env="RAGMETER_TEST_JUDGE_KEY",
                    timeout=0.5)
    try:
        with pytest.raises(JudgeConfigError, match="timeout on a pre-flight request"):
            svc.preflight()
    finally:
        svc.close()
    server.wait_idle()
