"""The judge's adaptive in-flight limit (AIMD): halved on the provider's 429s, lowered to what its
rate-limit headers say remains, raised again after successes. Against the scripted local server;
no assertion on time."""

from __future__ import annotations

import asyncio

import pytest

from judge_server import Forced, judge_options, server_fixtures
from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Chunk, Sample
from ragmeter.llm.limits import AdaptiveLimit, remaining_requests
from ragmeter.metrics.judge.generation import faithfulness

judge_server_module, server = server_fixtures()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGMETER_TEST_JUDGE_KEY", "test-key")


def samples(n, tag="s"):
    return [Sample(id=f"{tag}{i}", question="What is the capital of France?",
                   answer=f"Paris is the capital of France number {tag}{i}.",
                   contexts=[Chunk(text="Paris is the capital of France.")]) for i in range(n)]


# ---- the limit on its own ---------------------------------------------------------------------------


def test_halves_once_per_window_and_grows_back_one_per_window():
    lim = AdaptiveLimit(16)
    lim.overload(0)
    assert lim.limit == 8
    lim.overload(0)  # a request started before the decrease: same window, no second halving
    assert lim.limit == 8
    lim.overload(1)
    assert (lim.limit, lim.lowest, lim.decreases) == (4, 4, 2)
    for _ in range(4):
        lim.success()
    assert lim.limit == 5  # +1 after `limit` successes
    for _ in range(5):
        lim.success()
    assert lim.limit == 6
    for _ in range(200):
        lim.success()
    assert lim.limit == 16  # never above the configured maximum
    for ticket in range(2, 20):
        lim.overload(ticket)
    assert lim.limit == 1  # never below one
    assert "lowered from 16 to 1" in lim.summary()
    assert AdaptiveLimit(8).summary() is None


def test_remaining_requests_header_lowers_the_limit():
    lim = AdaptiveLimit(16)
    lim.success(remaining=100)
    assert lim.limit == 16
    lim.success(remaining=3)
    assert lim.limit == 3
    lim.success(remaining=0)
    assert lim.limit == 1
    assert remaining_requests({"x-ratelimit-remaining-requests": "7"}) == 7
    assert remaining_requests({"anthropic-ratelimit-requests-remaining": "2"}) == 2
    assert remaining_requests({"x-ratelimit-remaining-requests": "n/a"}) is None
    assert remaining_requests({}) is None and remaining_requests(None) is None


def test_slots_are_handed_over_in_order_and_follow_the_limit():
    async def settle():
        for _ in range(5):
            await asyncio.sleep(0)

    async def run():
        lim = AdaptiveLimit(2)
        await lim.acquire()
        await lim.acquire()
        waiting = [asyncio.ensure_future(lim.acquire()) for _ in range(3)]
        await settle()
        assert lim.in_flight == 2 and not any(w.done() for w in waiting)
        waiting[1].cancel()  # a cancelled waiter never takes a slot
        await settle()
        lim.release()
        await settle()
        assert waiting[0].done() and not waiting[2].done() and lim.in_flight == 2
        lim.overload(0)  # limit 1: the next release frees no slot
        lim.release()
        await settle()
        assert lim.in_flight == 1 and not waiting[2].done()
        lim.release()
        await settle()
        assert waiting[2].done() and lim.in_flight == 1
        assert waiting[0].result() == 0 and waiting[2].result() == 1  # the window each slot was granted in

    asyncio.run(run())


def test_a_slot_granted_before_a_decrease_keeps_its_window():
    async def run():
        lim = AdaptiveLimit(2)
        first = await lim.acquire()
        await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        lim.release()  # the slot goes to the waiter ...
        lim.overload(first)  # ... and a 429 halves the limit before the waiter runs
        ticket = await waiter
        lim.overload(ticket)  # the waiter's own 429 is part of the same window
        assert (ticket, lim.limit, lim.decreases) == (0, 1, 1)

    asyncio.run(run())


# ---- against the scripted server ------------------------------------------------------------------------


def _run(server, n, **options):
    ctx = ScoringContext(judge_options(server, **options))
    try:
        out = faithfulness(samples(n, tag=str(len(server.requests))), ctx)
        judge = ctx.service("judge")
        return out, judge._slots, ctx.stats()["judge"]
    finally:
        ctx.close()


def test_a_server_at_capacity_answering_429_lowers_the_limit(server):
    server.wait_idle()
    server.delay = 0.05
    server.capacity = 2  # like a provider's concurrency limit: 429 beyond 2 in flight
    out, slots, stats = _run(server, 12, judge_concurrency=8, judge_max_retries=20)
    assert all(s.value is not None for s in out)  # every sample judged in the end
    assert server.rejected >= 1 and stats["retries"] >= 1
    assert slots.decreases >= 1 and slots.lowest <= 4 and slots.maximum == 8
    assert "lowered from 8 to" in stats["concurrency_adapted"]


def test_forced_429_halves_the_limit_and_a_clean_run_keeps_it(server):
    server.force(Forced(status=429, headers={"retry-after-ms": "10"}))
    out, slots, stats = _run(server, 1, judge_concurrency=8)
    assert out[0].value is not None and slots.lowest == 4 and slots.decreases == 1
    server.reset()
    out, slots, stats = _run(server, 6, judge_concurrency=8)
    assert all(s.value is not None for s in out)
    assert slots.decreases == 0 and "concurrency_adapted" not in stats


@pytest.mark.parametrize("provider, header", [("openai", "x-ratelimit-remaining-requests"),
                                              ("anthropic", "anthropic-ratelimit-requests-remaining")])
def test_rate_limit_headers_of_a_success_lower_the_limit(server, provider, header):
    server.force(Forced(headers={header: "1"}))
    ctx = ScoringContext(judge_options(server, provider, judge_concurrency=4))
    try:
        out = faithfulness(samples(3), ctx)
        slots = ctx.service("judge")._slots
    finally:
        ctx.close()
    assert all(s.value is not None for s in out)
    assert slots.lowest == 1 and slots.decreases == 1
