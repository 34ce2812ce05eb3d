"""Prompt-cache tokens inside batch replies: each batched request's cached (and cache-write) tokens
are recorded and priced at the provider's batch price -- genai-prices' batch price where it has
one (OpenAI gpt-4o-mini: no batch cached-input rate, so cached input stays at $0.075; Anthropic:
the cache multipliers stack with the 50% batch discount), else 50% of every online rate."""

from __future__ import annotations

import pytest

from batch_server import BatchServer
from judge_server import Forced, judge_options
from ragmeter import evaluate
from ragmeter.llm.accounting import run_judge_usage
from ragmeter.llm.prices import PriceTable
from ragmeter.store import open_store


@pytest.fixture(scope="module")
def module_server():
    srv = BatchServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(module_server, monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")
    monkeypatch.setenv("RAGMETER_BATCH_POLL", "0.05")
    module_server.reset()
    yield module_server
    module_server.reset()


def rows(n, marker="CACHEHIT"):
    return [{"id": f"{marker}{i}", "question": "What is the capital of France?",
             "answer": f"Paris is the capital of France. {marker} {i}.",
             "contexts": ["Paris is the capital of France."], "reference": "Paris is the capital of France."}
            for i in range(n)]


def batch_cost(provider, model, **usage):
    """The reference figure: genai-prices' own calculation at its batch price."""
    from genai_prices import Usage, calc_price

    return float(calc_price(Usage(**usage), model_ref=model, provider_id=provider,
                            price_context={"processing": "batch"}).total_price)


def test_openai_batch_reply_cached_tokens_are_recorded_and_priced_at_the_batch_price(server, tmp_path):
    server.by_marker["CACHEHIT"] = Forced(usage={"prompt_tokens": 2048, "prompt_tokens_details": {"cached_tokens": 1024}})
    db = f"sqlite:///{tmp_path / 'o.db'}"
    opts = {**judge_options(server, judge_batch=True), "judge": "openai:gpt-4o-mini"}
    res = evaluate(rows(5), ["faithfulness"], db=db, options=opts)
    judge = res.extra["judge"]
    assert (len(server.batches), len(server.batched), server.n_requests) == (1, 5, 5)
    assert judge["calls"] == 5 and judge["input_tokens"] == 5 * 2048 and judge["cached_input_tokens"] == 5 * 1024
    out = judge["output_tokens"]
    expected = batch_cost("openai", "gpt-4o-mini", input_tokens=5 * 2048, cache_read_tokens=5 * 1024, output_tokens=out)
    assert judge["cost_usd"] == pytest.approx(expected, abs=1e-6)
    # OpenAI's batch table gives gpt-4o-mini no cached-input rate: cached input keeps its online
    # $0.075, which is the batch input price, so the cache saves nothing on top of the batch
    assert expected == pytest.approx((5 * 2048 * 0.075 + out * 0.30) / 1e6)
    store = open_store(db)
    try:  # recorded per request
        assert run_judge_usage(store, res.run_id)["cached_input_tokens"] == 5 * 1024
        from sqlalchemy import select

        from ragmeter.store.models import JudgeCallRow

        with store.session() as s:
            cached = [r.cached_input_tokens for r in s.scalars(select(JudgeCallRow).where(JudgeCallRow.run_id == res.run_id))]
        assert cached == [1024] * 5
    finally:
        store.close()


@pytest.mark.parametrize(("model", "rates"), [
    # genai-prices' batch price: 50% of input, output, cache read and cache write (they stack)
    ("claude-haiku-4-5", (0.5, 0.05, 0.625, 2.5)),
    # a retired model without a batch price in genai-prices: 50% of each online rate
    ("claude-3-5-haiku-latest", (0.4, 0.04, 0.5, 2.0)),
])
def test_anthropic_batch_reply_cache_reads_and_writes_are_priced_at_the_stacked_batch_rates(server, tmp_path, model, rates):
    server.by_marker["CACHEHIT"] = Forced(usage={"input_tokens": 200, "cache_read_input_tokens": 3000,
                                                 "cache_creation_input_tokens": 0})
    server.by_marker["CACHEWRITE"] = Forced(usage={"input_tokens": 200, "cache_read_input_tokens": 0,
                                                   "cache_creation_input_tokens": 3000})
    opts = {**judge_options(server, "anthropic", judge_batch=True), "judge": f"anthropic:{model}"}
    res = evaluate(rows(3) + rows(1, "CACHEWRITE"), ["faithfulness"], db=f"sqlite:///{tmp_path / 'a.db'}",
                   options=opts)
    judge = res.extra["judge"]
    assert len(server.batches) == 1 and server.n_requests == 4
    assert judge["input_tokens"] == 4 * 3200
    assert (judge["cached_input_tokens"], judge["cache_write_tokens"]) == (9000, 3000)
    out = judge["output_tokens"]
    inp, read, write, output = rates
    assert judge["cost_usd"] == pytest.approx((4 * 200 * inp + 9000 * read + 3000 * write + out * output) / 1e6, abs=1e-6)
    if model == "claude-haiku-4-5":
        assert judge["cost_usd"] == pytest.approx(batch_cost("anthropic", model, input_tokens=4 * 3200,
                                                             cache_read_tokens=9000, cache_write_tokens=3000,
                                                             output_tokens=out), abs=1e-6)
    assert PriceTable().get("anthropic", model, batch=True).cache_read == pytest.approx(read)


def test_batch_price_of_a_price_file_entry_is_half_of_each_rate():
    price = PriceTable({"m": (1.0, 3.0)}).get("openai", "m", batch=True)
    assert (price.input, price.output) == (0.5, 1.5)
    assert price.cost(1000, 100, cached_tokens=400) == pytest.approx((1000 * 0.5 + 100 * 1.5) / 1e6)


def test_the_dry_run_gives_the_batch_price_beside_the_online_one(server):
    from ragmeter.core.schema import Chunk, Sample
    from ragmeter.llm import get_judge
    from ragmeter.metrics.judge.generation import faithfulness

    samples = [Sample(id=f"s{i}", question="q", answer=f"Ferry {i} leaves at nine.",
                      contexts=[Chunk(text=f"Ferry {i} leaves at nine.")]) for i in range(3)]
    for model in ("gpt-4o-mini", "gpt-5-mini"):  # both: batch input and output at half the online rates
        judge = get_judge(f"openai:{model}", base_url=server.url + "/v1", api_key_env="RAGMETER_TEST_JUDGE_KEY",
                          dry_run=True)
        judge.submit(faithfulness.requests(samples, {}))
        plan = judge.plan()
        judge.close()
        batch = PriceTable().get("openai", model, batch=True)
        assert plan["est_batch_cost_usd"] == pytest.approx(
            (plan["est_input_tokens"] * batch.input + plan["est_output_tokens"] * batch.output) / 1e6, abs=1e-6)
        assert plan["est_batch_cost_usd"] == pytest.approx(plan["est_cost_usd"] / 2, abs=1e-6)
        assert plan["est_cost_usd"] > 0
    assert server.n_requests == 0
