"""Provider prompt caching: the fixed part of every judge prompt first, Anthropic's ``cache_control``
on it when it is long enough, and the cached / cache-write tokens of every reply priced as such
(genai-prices' cache prices) in the run's cost and shown by ``show``."""

from __future__ import annotations

import pytest

from judge_server import Forced, judge_options, server_fixtures
from ragmeter import evaluate
from ragmeter.llm.accounting import run_judge_usage, show_section
from ragmeter.llm.prices import PriceTable
from ragmeter.llm.providers import AnthropicClient, OpenAIClient, cache_minimum, cacheable
from ragmeter.store import open_store

judge_server_module, server = server_fixtures()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite:///{tmp_path / 'cache.db'}"


def rows(n, marker="CACHEHIT"):
    return [{"id": f"{marker}{i}", "question": "What is the capital of France?",
             "answer": f"Paris is the capital of France. {marker} {i}.",
             "contexts": ["Paris is the capital of France."], "reference": "Paris is the capital of France."}
            for i in range(n)]


def genai_cost(provider, model, **usage):
    """The reference figure: genai-prices' own calculation for this usage."""
    from genai_prices import Usage, calc_price

    return float(calc_price(Usage(**usage), model_ref=model, provider_id=provider).total_price)


#: a rubric whose criteria are long enough (about 10,000 characters) to be cached on Claude 3.5 Haiku
LONG_RUBRIC = [{"name": "accuracy", "description": "The answer states only facts the question asks about. "
                + " ".join(f"Guideline {i}: check that statement {i} of the answer is precise, sourced and "
                           "free of invented detail." for i in range(110))}]


def test_anthropic_marks_a_long_fixed_prefix_for_caching_and_prices_cache_reads_and_writes(server, db_url):
    model = "claude-3-5-haiku-latest"
    assert cache_minimum(model) == 2048
    server.by_marker["CACHEHIT"] = Forced(usage={"input_tokens": 200, "cache_read_input_tokens": 3000,
                                                 "cache_creation_input_tokens": 0})
    server.by_marker["CACHEWRITE"] = Forced(usage={"input_tokens": 200, "cache_read_input_tokens": 0,
                                                   "cache_creation_input_tokens": 3000})
    opts = {**judge_options(server, "anthropic"), "judge": f"anthropic:{model}"}
    data = rows(3) + rows(1, "CACHEWRITE")
    res = evaluate(data, [{"name": "rubric", "params": {"criteria": LONG_RUBRIC}}, "faithfulness"],
                   db=db_url, options=opts)
    bodies = {r["body"]["tools"][0]["name"]: [] for r in server.requests}
    for r in server.requests:
        bodies[r["body"]["tools"][0]["name"]].append(r["body"])
    assert len(bodies["RubricVerdict"]) == 4 and len(bodies["ClaimVerdicts"]) == 4
    for body in bodies["RubricVerdict"]:
        # the fixed part (instructions and rubric) is one system block with the breakpoint; the
        # sample comes after it, in the user message
        [block] = body["system"]
        assert block["cache_control"] == {"type": "ephemeral"} and "Guideline 109" in block["text"]
        assert "Paris" not in block["text"] and "Paris" in body["messages"][-1]["content"]
    assert len({b["system"][0]["text"] for b in bodies["RubricVerdict"]}) == 1  # one prefix for every sample
    for body in bodies["ClaimVerdicts"]:  # a short instruction: below the minimum, nothing marked
        assert isinstance(body["system"], str) and "cache_control" not in str(body)

    judge = res.extra["judge"]
    out = judge["output_tokens"]
    # every reply said 200 uncached tokens plus 3,000 read from (3 x 2 calls) or written to (1 x 2) the cache
    assert judge["input_tokens"] == 8 * 3200
    assert judge["cached_input_tokens"] == 6 * 3000 and judge["cache_write_tokens"] == 2 * 3000
    expected = genai_cost("anthropic", model, input_tokens=8 * 3200, cache_read_tokens=18000,
                          cache_write_tokens=6000, output_tokens=out)
    assert judge["cost_usd"] == pytest.approx(expected, abs=1e-6)
    # $0.80 / 1M input, $0.08 read, $1.00 write, $4 output (genai-prices' Claude 3.5 Haiku)
    assert expected == pytest.approx((8 * 200 * 0.8 + 18000 * 0.08 + 6000 * 1.0 + out * 4) / 1e6)
    store = open_store(db_url)
    assert run_judge_usage(store, res.run_id)["cached_input_tokens"] == 18000
    text = show_section(store, store.get_run(res.run_id))["judge tokens and cost"]
    assert "25,600 in (18,000 = 70% read from the provider's prompt cache, 6,000 written to it)" in text


def test_openai_cached_tokens_are_priced_at_the_cache_read_price(server, db_url):
    server.by_marker["CACHEHIT"] = Forced(usage={"prompt_tokens": 2048,
                                                 "prompt_tokens_details": {"cached_tokens": 1024}})
    opts = {**judge_options(server), "judge": "openai:gpt-4o-mini"}
    res = evaluate(rows(5), ["faithfulness"], db=db_url, options=opts)
    judge = res.extra["judge"]
    assert judge["calls"] == 5 and judge["input_tokens"] == 5 * 2048 and judge["cached_input_tokens"] == 5 * 1024
    out = judge["output_tokens"]
    expected = genai_cost("openai", "gpt-4o-mini", input_tokens=5 * 2048, cache_read_tokens=5 * 1024,
                          output_tokens=out)
    assert judge["cost_usd"] == pytest.approx(expected, abs=1e-6)
    # $0.15 / 1M input, $0.075 cached, $0.60 output: half the price on the cached half
    assert expected == pytest.approx((5 * 1024 * 0.15 + 5 * 1024 * 0.075 + out * 0.6) / 1e6)
    store = open_store(db_url)
    text = show_section(store, store.get_run(res.run_id))["judge tokens and cost"]
    assert "10,240 in (5,120 = 50% read from the provider's prompt cache)" in text
    # no cache hit: no cache figures in the text
    server.by_marker.clear()
    res2 = evaluate(rows(2, "OTHER"), ["faithfulness"], db=db_url, options=opts)
    assert res2.extra["judge"]["cached_input_tokens"] == 0
    assert "prompt cache" not in show_section(store, store.get_run(res2.run_id))["judge tokens and cost"]


def test_reply_usage_parsing():
    a = AnthropicClient.parse({"content": [], "usage": {"input_tokens": 10, "output_tokens": 5,
                                                        "cache_read_input_tokens": 100,
                                                        "cache_creation_input_tokens": 50}})
    assert (a.input_tokens, a.cached_tokens, a.cache_write_tokens, a.output_tokens) == (160, 100, 50, 5)
    o = OpenAIClient.parse({"choices": [], "usage": {"prompt_tokens": 1500, "completion_tokens": 7,
                                                     "prompt_tokens_details": {"cached_tokens": 1280}}})
    assert (o.input_tokens, o.cached_tokens, o.cache_write_tokens) == (1500, 1280, 0)
    bare = OpenAIClient.parse({"choices": [], "usage": {"prompt_tokens": 10, "prompt_tokens_details": None}})
    assert (bare.input_tokens, bare.cached_tokens) == (10, 0)


def test_cache_minimum_per_model_and_conservative_estimate():
    # Anthropic's "Cache limitations" (Sonnet 4.6 lowered from 2,048 to 1,024; Opus 4.7 2,048)
    assert [cache_minimum(m) for m in ("claude-sonnet-4-5-20250929", "claude-3-7-sonnet-latest",
                                       "claude-3-5-haiku-20241022", "claude-opus-4-5", "claude-haiku-4-5",
                                       "claude-sonnet-4-6", "claude-opus-4-7", "claude-opus-4-8",
                                       "claude-opus-4-1-20250805", "some-new-model")] == [
        1024, 1024, 2048, 4096, 4096, 1024, 2048, 1024, 1024, 4096]
    assert not cacheable("claude-sonnet-4-5", "x" * 4095) and cacheable("claude-sonnet-4-5", "x" * 4096)


def test_price_cost_splits_cached_and_written_input():
    price = PriceTable().get("anthropic", "claude-3-5-haiku-latest")
    assert (price.input, price.cache_read, price.cache_write) == (0.8, 0.08, 1.0)
    assert price.cost(1000, 0, cached_tokens=600, cache_write_tokens=300) == pytest.approx(
        (100 * 0.8 + 600 * 0.08 + 300 * 1.0) / 1e6)
    assert price.cost(1000, 10) == pytest.approx((1000 * 0.8 + 10 * 4) / 1e6)
    # a price without cache prices (a user's file) charges cached tokens at the input price
    plain = PriceTable({"m": (1.0, 2.0)}).get("openai", "m")
    assert plain.cost(1000, 0, cached_tokens=500) == pytest.approx(1000 / 1e6)
