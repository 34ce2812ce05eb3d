"""The judge service and its clients against a local scripted server: structured output, retries,
rate limits, cache, accounting, budget, dry run. No key, no network."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from judge_server import Forced, judge_options, server_fixtures
from ragmeter.core.context import ScoringContext
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.llm import (
    HOW_TO_CONFIGURE,
    JudgeConfigError,
    JudgeService,
    PriceTable,
    ReplyParseError,
    config_from_options,
    parse_judge,
    parse_reply,
    problem,
    strict_schema,
)
from ragmeter.llm import service as service_mod
from ragmeter.llm.replies import retry_after_seconds
from ragmeter.llm.service import RateLimiter
from ragmeter.llm.transport import classify
from ragmeter.metrics.judge.generation import ClaimVerdicts, faithfulness
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


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


def make_ctx(server, store=None, provider="openai", run_id=None, **extra):
    return ScoringContext(judge_options(server, provider, **extra), store=store, run_id=run_id)


def sample(i, answer="Paris is the capital of France. The moon is made of cheese.", **kw):
    return Sample(id=f"s{i}", question="What is the capital of France?", answer=answer,
                  contexts=[Chunk(text="Paris is the capital of France.")], **kw)


def requests_for(samples):
    return faithfulness.requests(samples, {})


# ---- structured output ---------------------------------------------------------------------------


class Tiny(BaseModel):
    label: str
    score: float


def test_parse_reply_accepts_json_and_one_code_fence():
    assert parse_reply('{"label": "a", "score": 1}', Tiny).score == 1.0
    assert parse_reply('```json\n{"label": "a", "score": 0.5}\n```', Tiny).label == "a"
    assert parse_reply(None, Tiny, {"label": "b", "score": 0}).label == "b"


@pytest.mark.parametrize("text, why", [
    ("", "empty"), ("   ", "empty"), ("The score is 1.0", "not valid JSON"),
    ('Sure! {"label": "a", "score": 1}', "not valid JSON"), ('[{"label": "a", "score": 1}]', "JSON object"),
    ('{"label": "a"}', "score"), ('{"label": "a", "score": "high"}', "score"),
    ('{"label": "a", "score": 1} {"label": "b", "score": 2}', "not valid JSON"),
])
def test_parse_reply_rejects_anything_else(text, why):
    with pytest.raises(ReplyParseError, match=why):
        parse_reply(text, Tiny)


def test_strict_schema_is_closed_and_inlined():
    schema = strict_schema(ClaimVerdicts)
    assert schema["title"] == "ClaimVerdicts"
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for v in node.values():
                yield from objects(v)
        elif isinstance(node, list):
            for v in node:
                yield from objects(v)

    objs = list(objects(schema))
    assert len(objs) == 2
    for o in objs:
        assert o["additionalProperties"] is False and sorted(o["required"]) == sorted(o["properties"])
    item = schema["properties"]["claims"]["items"]
    assert item["properties"]["verdict"]["enum"] == ["supported", "contradicted", "not_found"]


# ---- configuration -------------------------------------------------------------------------------


def test_parse_judge_variants():
    assert parse_judge("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini", None)
    assert parse_judge("ollama:llama3.1:8b") == ("openai", "llama3.1:8b", "http://127.0.0.1:11434/v1")
    assert parse_judge("Gemini:gemini-2.0-flash")[0] == "google"
    assert parse_judge("claude:claude-3-5-haiku-latest")[0] == "anthropic"
    for bad in ("gpt-4o-mini", "openai:", ":model", "acme:model"):
        with pytest.raises(JudgeConfigError):
            parse_judge(bad)


def test_config_from_options_reads_every_setting():
    cfg = config_from_options({"judge": "openai:m", "judge_base_url": "http://x/v1", "judge_concurrency": "4",
                               "judge_rpm": 120, "judge_timeout": 5, "judge_max_retries": 2,
                               "judge_max_cost": 1.5, "judge_dry_run": "true", "judge_temperature": 0.2})
    assert (cfg.provider, cfg.model, cfg.base_url, cfg.concurrency, cfg.rpm, cfg.timeout) == \
        ("openai", "m", "http://x/v1", 4, 120.0, 5.0)
    assert cfg.max_retries == 2 and cfg.max_cost == 1.5 and cfg.dry_run and cfg.temperature == 0.2
    assert config_from_options({"judge": "openai:m"}).temperature == 0.0
    mapped = config_from_options({"judge": {"model": "anthropic:claude-x", "concurrency": 3}})
    assert (mapped.provider, mapped.model, mapped.concurrency) == ("anthropic", "claude-x", 3)
    assert "key" not in json.dumps(cfg.public()).replace("api_key_env", "")
    for bad in ({"judge_concurrency": 0}, {"judge_rpm": -1}, {"judge_max_cost": -1}, {"judge_timeout": 0},
                {"judge_concurrency": "many"}, {"judge_response_format": "xml"}):
        with pytest.raises(JudgeConfigError):
            config_from_options({"judge": "openai:m", **bad})
    with pytest.raises(JudgeConfigError, match="azure"):
        config_from_options({"judge": "azure:deployment"})


def test_problem_says_how_to_configure(monkeypatch, prices):
    assert problem({}) == HOW_TO_CONFIGURE
    assert "--judge openai:gpt-4o-mini" in HOW_TO_CONFIGURE and "--judge-base-url" in HOW_TO_CONFIGURE
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    msg = problem({"judge": "openai:gpt-4o-mini"})
    assert msg is not None and "OPENAI_API_KEY" in msg
    # a dry run and a local server need no key
    assert problem({"judge": "openai:gpt-4o-mini", "judge_dry_run": True}) is None
    assert problem({"judge": "ollama:llama3.1"}) is None
    monkeypatch.setenv("MY_KEY", "k")
    assert problem({"judge": "openai:gpt-4o-mini", "judge_api_key_env": "MY_KEY"}) is None
    budget = problem({"judge": "ollama:llama3.1", "judge_max_cost": 1})
    assert budget is not None and "price" in budget
    assert problem({"judge": "ollama:test-model", "judge_max_cost": 1, "judge_prices": prices}) is None


# ---- prices ----------------------------------------------------------------------------------------


KNOWN = [("openai", "gpt-4o-mini"), ("openai", "gpt-4o-mini-2024-07-18"), ("openai", "gpt-4o-2024-08-06"),
         ("openai", "o1-mini"), ("openai", "o3"), ("azure", "gpt-4o"), ("anthropic", "claude-3-5-haiku-latest"),
         ("anthropic", "claude-sonnet-4-0"), ("google", "gemini-2.0-flash"), ("google", "gemini-2.5-pro")]


def _genai_cost(provider, model, tin, tout):
    import genai_prices

    calc = genai_prices.calc_price(genai_prices.Usage(input_tokens=tin, output_tokens=tout), model, provider_id=provider)
    return float(calc.total_price)


@pytest.mark.parametrize("provider, model", KNOWN)
def test_known_models_are_priced_as_genai_prices_says(provider, model):
    p = PriceTable.load().get(provider, model)
    assert p is not None
    for tin, tout in [(1_000_000, 0), (0, 1_000_000), (1234, 56), (250_000, 900)]:  # 250k: past a tier
        assert p.cost(tin, tout) == pytest.approx(_genai_cost(provider, model, tin, tout), rel=1e-12, abs=1e-15)


def test_price_table_matches_snapshots_not_siblings():
    t = PriceTable.load()
    assert t.get("openai", "gpt-4o-mini-2024-07-18") == t.get("openai", "gpt-4o-mini")
    assert t.get("openai", "gpt-4o-2024-08-06") == t.get("openai", "gpt-4o")
    assert t.get("openai", "gpt-4o-mini") != t.get("openai", "gpt-4o")
    assert t.get("openai", "o1-mini") != t.get("openai", "o1")  # a sibling, not a snapshot of o1
    assert t.get("openai", "gpt-4o-mini").cost(1_000_000, 1_000_000) == pytest.approx(0.75)
    tiered = t.get("google", "gemini-2.5-pro")  # a long prompt pays the higher rate on all its tokens
    assert tiered.input_tiers and tiered.cost(300_000, 0) > 300_000 / 1_000 ** 2 * tiered.input


def test_unknown_model_has_no_price():
    t = PriceTable.load()
    assert t.get("openai", "llama3") is None and t.get("openai", "test-model") is None
    assert t.get("mystery-provider", "gpt-4o") is None
    # a local OpenAI-compatible server: only a price file prices its models
    assert t.get("openai", "llama3.1:8b", "http://127.0.0.1:11434/v1") is None


def test_a_known_api_host_prices_its_own_models():
    import genai_prices

    url = "https://api.groq.com/openai/v1"
    groq = PriceTable.load().get("openai", "llama-3.1-8b-instant", url)
    assert groq is not None
    usage = genai_prices.Usage(input_tokens=1000, output_tokens=100)
    expected = genai_prices.calc_price(usage, "llama-3.1-8b-instant", provider_api_url=url).total_price
    assert groq.cost(1000, 100) == pytest.approx(float(expected))


def test_price_file_extends_and_wins(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("openai:llama3.1: {input: 0, output: 0}\ngpt-4o-mini: [1, 2]\ngemini-2.5-pro: [9, 9]\n")
    t2 = PriceTable.load(f)
    assert t2.get("openai", "llama3.1:8b").cost(10, 10) == 0
    assert t2.get("anthropic", "llama3.1") is None
    assert t2.get("openai", "gpt-4o-mini").input == 1.0  # the file wins over genai-prices
    assert t2.get("openai", "gpt-4o-mini-2024-07-18").output == 2.0  # ... for its snapshots too
    assert t2.get("openai", "gpt-4o") == PriceTable.load().get("openai", "gpt-4o")  # not its siblings
    assert t2.get("google", "gemini-2.5-pro").cost(300_000, 0) == pytest.approx(2.7)  # no library tier
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": {"input": "cheap"}}')
    with pytest.raises(ConfigError, match="'m'"):
        PriceTable.load(bad)
    with pytest.raises(ConfigError, match="not found"):
        PriceTable.load(tmp_path / "missing.json")


def test_prices_never_touch_the_network(monkeypatch):
    """genai-prices' bundled data only: no price update is started, no socket opened."""
    import socket

    import genai_prices
    from genai_prices import data_snapshot

    def refuse(*a, **k):
        raise AssertionError("a price lookup tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(genai_prices.UpdatePrices, "start", refuse)
    t = PriceTable.load()
    assert t.get("openai", "gpt-4o-mini") is not None and t.rows()
    assert data_snapshot._custom_snapshot is None


# ---- providers against the local server ----------------------------------------------------------------


@pytest.mark.parametrize("provider, transport", [("openai", "auto"), ("openai", "httpx"),
                                                 ("anthropic", "auto"), ("anthropic", "httpx"),
                                                 ("google", "auto")])
def test_each_provider_returns_structured_verdicts(server, provider, transport, store):
    ctx = make_ctx(server, store, provider, judge_http_client=transport)
    try:
        scores = faithfulness([sample(1), sample(2, answer="Paris is the capital of France.")], ctx)
        client = ctx.service("judge")._client
    finally:
        ctx.close()
    if provider != "google":
        import importlib.util

        want = "httpx" if transport == "httpx" or importlib.util.find_spec("aiohttp") is None else "aiohttp"
        assert client.transport == want
    assert [s.value for s in scores] == [0.5, 1.0]
    claims = scores[0].details["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "not_found"]
    assert claims[1]["claim"] == "The moon is made of cheese." and claims[1]["reason"]
    body = server.requests[0]["body"]
    if provider == "openai":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "ClaimVerdicts"
        assert body["temperature"] == 0 and body["messages"][0]["role"] == "system"
    elif provider == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "ClaimVerdicts"}
        assert body["tools"][0]["input_schema"]["title"] == "ClaimVerdicts"
        assert body["temperature"] == 0 and "fence" in body["system"]
    else:
        gen = body["generationConfig"]
        assert gen["responseMimeType"] == "application/json" and gen["temperature"] == 0
        assert gen["responseJsonSchema"]["title"] == "ClaimVerdicts"
        assert "fence" in body["systemInstruction"]["parts"][0]["text"]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_malformed_reply_is_retried_then_a_judge_failure_with_the_raw_reply(server, provider):
    ctx = make_ctx(server, None, provider, judge_parse_retries=2)
    try:
        out = faithfulness([sample(1, answer="GARBLE this answer.")], ctx)
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    s = out[0]
    # the reason says what was wrong with the reply, not only that it was invalid
    assert s.value is None and s.reason.startswith("judge failure: invalid reply — not valid JSON (Expecting ")
    assert "not json" in s.details["judge_raw_reply"] and "not valid JSON" in s.details["judge_error"]
    assert s.details["judge_attempts"] == 3 and server.n_requests == 3
    assert stats["failed"] == 1 and stats["retries"] == 2
    if provider == "openai":  # the retry shows the judge its reply and what was wrong
        msgs = server.requests[1]["body"]["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
        assert "not valid JSON" in msgs[3]["content"]


def test_a_reply_fixed_on_retry_is_kept(server):
    server.force(Forced(text="I think the claims are fine"))
    ctx = make_ctx(server)
    try:
        out = faithfulness([sample(1)], ctx)
    finally:
        ctx.close()
    assert out[0].value == 0.5 and server.n_requests == 2


def test_429_with_retry_after_is_honoured(server, monkeypatch):
    slept = []

    async def fake_sleep(seconds):
        slept.append(seconds)
        await asyncio.sleep(0)

    async def short_sleep(seconds):
        slept.append(seconds)
        await asyncio.sleep(min(seconds, 0.01))

    monkeypatch.setattr(service_mod, "_sleep", short_sleep)
    server.force(Forced(status=429, headers={"Retry-After": "0.4"}))
    ctx = make_ctx(server)
    try:
        out = faithfulness([sample(1)], ctx)
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    assert out[0].value == 0.5 and server.n_requests == 2 and stats["retries"] == 1
    assert any(s >= 0.4 for s in slept)  # the backoff waited at least Retry-After
    assert all(s <= 0.4 * 1.1 + 1e-9 for s in slept)


def test_5xx_are_retried_with_exponential_backoff_then_fail(server, monkeypatch):
    slept = []

    async def fake_sleep(seconds):
        slept.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(service_mod, "_sleep", fake_sleep)
    server.force(Forced(status=500), Forced(status=503))
    ctx = make_ctx(server, judge_backoff_base=1.0, judge_backoff_max=60)
    try:
        assert faithfulness([sample(1)], ctx)[0].value == 0.5
    finally:
        ctx.close()
    assert server.n_requests == 3
    assert 0.5 <= slept[0] <= 1.0 and 1.0 <= slept[1] <= 2.0  # base * 2**attempt, jittered

    server.reset()
    server.force(*[Forced(status=500)] * 3)
    ctx = make_ctx(server, judge_max_retries=2)
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.value is None and s.reason == "judge failure: HTTP 500 after 3 attempts — scripted 500"
    assert server.n_requests == 3


def test_timeouts_are_retried(server):
    server.force(Forced(delay=3.0))
    ctx = make_ctx(server, judge_timeout=0.5)
    try:
        out = faithfulness([sample(1)], ctx)
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    assert out[0].value == 0.5 and stats["retries"] == 1


def test_timeouts_and_connection_errors_end_as_judge_failures(server):
    server.force(Forced(delay=3.0), Forced(delay=3.0))
    ctx = make_ctx(server, judge_timeout=0.3, judge_max_retries=1)
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.reason == "judge failure: timeout after 2 attempts — no complete reply within judge_timeout=0.3 s"
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    ctx = ScoringContext({"judge": "openai:m", "judge_base_url": f"http://127.0.0.1:{port}/v1",
                          "judge_max_retries": 1, "judge_backoff_base": 0.01})
    try:
        s = faithfulness([sample(1)], ctx)[0]
    finally:
        ctx.close()
    assert s.value is None and s.reason.startswith("judge failure: connection error after 2 attempts — ")
    assert f"127.0.0.1', {port})" in s.reason  # what the transport said


def test_rejected_credentials_stop_the_run(server):
    server.force(Forced(status=401))
    ctx = make_ctx(server)
    try:
        with pytest.raises(JudgeConfigError, match="credentials"):
            faithfulness([sample(1)], ctx)
    finally:
        ctx.close()
    assert issubclass(JudgeConfigError, ConfigError)  # the runner re-raises ConfigError


def test_server_without_json_schema_support_falls_back(server):
    server.force(Forced(status=400, message="response_format json_schema is not supported"),
                 Forced(status=400, message="unknown field response_format"))
    ctx = make_ctx(server)
    try:
        assert faithfulness([sample(1)], ctx)[0].value == 0.5
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    last = server.requests[-1]["body"]
    assert "response_format" not in last
    assert '"title":"ClaimVerdicts"' in last["messages"][0]["content"]  # schema moved into the prompt
    assert stats["adapted"] == "response_format -> json_object; response_format -> text"


def test_classify_and_retry_after():
    class Resp:
        headers = {"retry-after": "2.5"}

    class RateLimit(Exception):
        status_code = 429
        response = Resp()

    p = classify(RateLimit())
    assert (p.kind, p.retry_after) == ("transient", 2.5)
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({}) is None and retry_after_seconds({"retry-after": "soon"}) is None

    class NotFound(Exception):
        code = 404

    assert classify(NotFound()).kind == "config"
    assert classify(ValueError("x")).kind == "final"


# ---- throughput controls ----------------------------------------------------------------------------


def test_concurrency_limit_is_respected(server):
    server.wait_idle()
    server.delay = 0.15
    ctx = make_ctx(server, judge_concurrency=3)
    samples = [sample(i, answer=f"Paris is the capital of France number {i}.") for i in range(9)]
    try:
        out = faithfulness(samples, ctx)
    finally:
        ctx.close()
    assert all(s.value is not None for s in out)
    assert server.max_inflight == 3


def test_rate_limiter_spaces_requests():
    now = [100.0]
    slept = []

    async def run():
        lim = RateLimiter(rpm=60, clock=lambda: now[0])
        orig = service_mod._sleep

        async def fake(seconds):
            slept.append(seconds)

        service_mod._sleep = fake
        try:
            for _ in range(4):
                await lim.acquire()
        finally:
            service_mod._sleep = orig

    asyncio.run(run())
    assert slept == [1.0, 2.0, 3.0]  # 60 rpm: one start per second


# ---- cache and accounting ---------------------------------------------------------------------------------


def test_cache_makes_reruns_free_and_prompt_upgrades_miss(server, store, prices):
    samples = [sample(1), sample(2, answer="Paris is the capital of France.")]
    ctx = make_ctx(server, store, run_id="run1", judge_prices=prices)
    first = faithfulness(samples, ctx)
    stats1 = ctx.stats()["judge"]
    ctx.close()
    assert server.n_requests == 2 and stats1["calls"] == 2 and stats1["cost_usd"] > 0
    ctx = make_ctx(server, store, run_id="run2", judge_prices=prices)
    second = faithfulness(samples, ctx)
    stats2 = ctx.stats()["judge"]
    ctx.close()
    assert server.n_requests == 2  # nothing new was asked
    assert [s.value for s in second] == [s.value for s in first]
    assert second[0].details == first[0].details
    assert stats2["calls"] == 0 and stats2["cached"] == 2 and stats2["cost_usd"] == 0

    from ragmeter.llm.accounting import run_judge_usage

    u1, u2 = run_judge_usage(store, "run1"), run_judge_usage(store, "run2")
    assert (u1["calls"], u1["cached"], u2["calls"], u2["cached"]) == (2, 0, 0, 2)
    assert u1["input_tokens"] > 0 and u1["cost_usd"] == pytest.approx(stats1["cost_usd"], rel=1e-6)

    # another template version (an upgraded prompt) is a different key: a new call
    judge = JudgeService(config_from_options(judge_options(server)), store=store)
    req = requests_for(samples[:1])[0]
    from dataclasses import replace

    assert judge.key(req) != judge.key(replace(req, template_version="other"))
    assert judge.key(req) != JudgeService(config_from_options({**judge_options(server), "judge": "openai:other"})).key(req)
    assert judge.key(req) != JudgeService(config_from_options({**judge_options(server), "judge_temperature": 0.5})).key(req)
    judge.submit([replace(req, template_version="other")])
    judge.close()
    assert server.n_requests == 3


def test_duplicate_requests_in_one_batch_make_one_call(server):
    ctx = make_ctx(server)
    try:
        out = faithfulness([sample(1), sample(2), sample(3)], ctx)  # same texts
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    assert [s.value for s in out] == [0.5] * 3
    assert server.n_requests == 1 and stats["calls"] == 1 and stats["cached"] == 2


def test_failures_are_not_cached_across_runs(server, store):
    ctx = make_ctx(server, store)
    faithfulness([sample(1, answer="GARBLE.")], ctx)
    ctx.close()
    n = server.n_requests
    ctx = make_ctx(server, store)
    faithfulness([sample(1, answer="GARBLE.")], ctx)
    ctx.close()
    assert server.n_requests == 2 * n  # a later run asks again


# ---- budget and dry run ----------------------------------------------------------------------------------


def test_max_cost_stops_judging_and_says_what_is_left(server, prices):
    samples = [sample(i, answer=f"Paris is the capital of France, fact {i}.") for i in range(20)]
    one = requests_for(samples[:1])[0]
    from ragmeter.llm import estimate_tokens

    per_call = (estimate_tokens(one.system) + estimate_tokens(one.user)) * 1.0 / 1e6 + 300 * 2.0 / 1e6
    budget = per_call * 5.5
    ctx = make_ctx(server, None, judge_prices=prices, judge_max_cost=budget, judge_concurrency=4)
    try:
        out = faithfulness(samples, ctx)
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    scored = [s for s in out if s.value is not None]
    left = [s for s in out if s.value is None]
    assert scored and left and len(scored) + len(left) == 20
    assert all(s.reason == f"budget exhausted (max_cost={budget:g})" for s in left)
    assert server.n_requests == len(scored) == stats["calls"]
    assert stats["cost_usd"] <= budget and stats["budget_exhausted"] is True
    assert stats["left_unscored"] == {"faithfulness": len(left)}
    assert "left unscored" in stats["note"]


def test_max_cost_without_a_price_is_refused(server):
    with pytest.raises(JudgeConfigError, match="price"):
        JudgeService(config_from_options(judge_options(server, judge_max_cost=1.0)))


def test_dry_run_calls_nothing_and_estimates(server, store, prices):
    samples = [sample(i, answer=f"Paris is the capital of France, fact {i}.") for i in range(6)]
    # one verdict already cached: not counted
    ctx = make_ctx(server, store)
    faithfulness(samples[:1], ctx)
    ctx.close()
    before = server.n_requests
    ctx = make_ctx(server, store, judge_dry_run=True, judge_prices=prices)
    try:
        out = faithfulness(samples, ctx)
        stats = ctx.stats()["judge"]
    finally:
        ctx.close()
    assert server.n_requests == before
    assert out[0].value is not None  # served from the cache
    assert all(s.value is None and s.reason == "dry run: no judge call made" for s in out[1:])
    assert stats["dry_run"] and stats["planned_calls"] == 5 and stats["calls"] == 0
    reqs = requests_for(samples[1:])
    from ragmeter.llm import estimate_tokens

    tin = sum(estimate_tokens(r.system) + estimate_tokens(r.user) for r in reqs)
    tout = sum(r.expected_output_tokens for r in reqs)
    assert (stats["est_input_tokens"], stats["est_output_tokens"]) == (tin, tout)
    assert stats["est_cost_usd"] == pytest.approx(tin / 1e6 + 2 * tout / 1e6, rel=1e-6)
    assert stats["per_metric"]["faithfulness"]["calls"] == 5


def test_requests_are_validated_against_the_sample(server):
    # context_precision needs one verdict per context: a reply judging too few contexts is retried
    from ragmeter.metrics.judge.contexts import context_precision

    s = Sample(id="x", question="capital of France?", references=["Paris"],
               contexts=[Chunk(text="Paris is the capital."), Chunk(text="Rome is in Italy.")])
    server.force(Forced(text='{"verdicts": [{"context": 1, "reason": "r", "verdict": "yes"}]}'))
    ctx = make_ctx(server)
    try:
        out = context_precision([s], ctx)
    finally:
        ctx.close()
    assert server.n_requests == 2 and out[0].value == 1.0
    assert "exactly one verdict for each context 1..2" in server.requests[1]["body"]["messages"][-1]["content"]


def test_an_interrupted_submit_stops_the_calls_in_flight(server, store, monkeypatch):
    server.delay = 0.5
    ctx = make_ctx(server, store, run_id="r", judge_concurrency=2)
    judge = ctx.service("judge")
    import threading

    calls = {"n": 0}
    orig_account = judge._account

    def account(req, res):
        orig_account(req, res)
        calls["n"] += 1
        raise KeyboardInterrupt  # the user presses Ctrl-C after the first reply

    monkeypatch.setattr(judge, "_account", account)
    samples = [sample(i, answer=f"Paris is the capital of France, fact {i}.") for i in range(12)]
    with pytest.raises(KeyboardInterrupt):
        faithfulness(samples, ctx)
    seen = server.n_requests
    threading.Event().wait(1.2)  # long enough for two more rounds if the calls were still running
    assert server.n_requests == seen < 12
    ctx.close()
