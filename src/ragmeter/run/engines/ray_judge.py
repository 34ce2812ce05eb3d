"""Judge calls sent from Ray workers under one cluster-wide limit, budget and cache.

With ``--engine ray`` the run's judge service is a :class:`RayJudgeService`. It is the ordinary
:class:`~ragmeter.llm.service.JudgeService` on the driver for everything but the calls themselves:
it builds the requests' cache keys, serves every verdict the store's judge cache already holds
(a re-run sends nothing), deduplicates, records every call in ``judge_calls`` and writes new
verdicts to the cache before their samples are scored. Only the requests that must really be sent
go to the cluster:

- one :class:`JudgeLimits` actor holds what must be shared by every worker: the in-flight slots
  (``--concurrency``, lowered on the provider's 429s as :class:`~ragmeter.llm.limits.AdaptiveLimit`
  does locally), the request-rate spacing (``--rpm``, paused by ``Retry-After``), and the budget
  (``--max-cost``: the cost so far and what calls in flight have reserved). A worker asks it for a
  slot before each request and gives the slot back when the reply is in, so the provider never
  sees more than ``--concurrency`` requests at once from the whole cluster;
- :class:`JudgeCaller` actors (one per CPU of the cluster, at most ``--concurrency``, spread over
  its nodes) make the calls with the provider's SDK, retried and parsed exactly as on the driver
  (:meth:`JudgeService._call`); they run many requests at once on their event loop, each waiting
  for its slot;
- replies come back as each chunk of requests finishes; a worker lost on the way makes its
  requests "no value" with the reason, never a score.

The API key. Ray writes every ``runtime_env`` in plain text to ``runtime_env_agent.log`` on every
node (tests/test_engine_ray_commands.py greps the session logs for secrets), so the key is not put
there. It is put once in Ray's object store (which Ray does not log), and each caller actor sets
the provider's own environment variable (``OPENAI_API_KEY``, ``--judge-api-key-env``) in its
process from it before the SDK client starts: the SDK reads the key from that variable, as on the
driver.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ragmeter.core.reasons import detailed
from ragmeter.llm.config import JudgeConfig, JudgeConfigError, config_from_options
from ragmeter.llm.request import FAILED, JudgeRequest, JudgeResult
from ragmeter.llm.service import JudgeService

#: requests per chunk sent to a caller at most (a chunk's verdicts come back together)
MAX_CHUNK = 32
#: chunks per caller at least, so verdicts stream back while the others run
CHUNKS_PER_CALLER = 4


class JudgeLimits:
    """The cluster-wide limits of one run's judge (a Ray actor): in-flight slots, request spacing,
    budget. Its methods are coroutines on the actor's event loop, so waiting callers queue here."""

    def __init__(self, concurrency: int, rpm: float | None, max_cost: float | None, spent: float = 0.0,
                 exhausted: bool = False) -> None:
        from ragmeter.llm.limits import AdaptiveLimit
        from ragmeter.llm.service import RateLimiter

        self.slots = AdaptiveLimit(concurrency)
        self.rate = RateLimiter(rpm)
        self.max_cost = max_cost
        self.spent = spent  # what the run spent before (an earlier flush of the same service)
        self.reserved = 0.0
        self.holders = 0
        self.exhausted = exhausted
        self.peak = 0
        self.requests = 0
        self._budget: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._budget is None:
            self._budget = asyncio.Condition()
        return self._budget

    async def reserve(self, amount: float) -> bool:
        """Hold ``amount`` of the budget for a call about to be made (as ``JudgeService._reserve``)."""
        if self.max_cost is None:
            return True
        cond = self._cond()
        async with cond:
            while True:
                if self.exhausted:
                    return False
                if self.spent + self.reserved + amount <= self.max_cost:
                    self.reserved += amount
                    self.holders += 1
                    return True
                if self.holders == 0:
                    self.exhausted = True
                    cond.notify_all()
                    return False
                await cond.wait()

    async def settle(self, reserved: float, actual: float) -> None:
        if self.max_cost is None:
            self.spent += actual
            return
        cond = self._cond()
        async with cond:
            self.holders -= 1
            self.reserved = max(0.0, self.reserved - reserved) if self.holders else 0.0
            self.spent += actual
            cond.notify_all()

    async def acquire(self) -> int:
        """Wait for the request rate and a free slot; returns the slot's ticket."""
        await self.rate.acquire()
        ticket = await self.slots.acquire()
        self.requests += 1
        self.peak = max(self.peak, self.slots.in_flight)
        return ticket

    async def release(self) -> None:
        self.slots.release()

    async def success(self, remaining: int | None) -> None:
        self.slots.success(remaining)

    async def overload(self, ticket: int) -> None:
        self.slots.overload(ticket)

    async def pause(self, seconds: float) -> None:
        self.rate.pause(seconds)

    async def state(self) -> dict[str, Any]:
        return {"spent": self.spent, "exhausted": self.exhausted, "peak_in_flight": self.peak,
                "requests": self.requests, "summary": self.slots.summary()}


class _Slots:
    """``JudgeService._slots`` for a worker: every call goes to the :class:`JudgeLimits` actor.
    Releases are sent without waiting (the actor handles one caller's messages in order)."""

    def __init__(self, limits: Any) -> None:
        self.limits = limits

    async def acquire(self) -> int:
        return await self.limits.acquire.remote()

    def release(self) -> None:
        self.limits.release.remote()

    def success(self, remaining: int | None = None) -> None:
        self.limits.success.remote(remaining)

    def overload(self, ticket: int) -> None:
        self.limits.overload.remote(ticket)


class _Rate:
    """``JudgeService._limiter`` for a worker: the spacing is applied by :meth:`JudgeLimits.acquire`."""

    def __init__(self, limits: Any) -> None:
        self.limits = limits

    async def acquire(self) -> None:
        return None

    def pause(self, seconds: float) -> None:
        self.limits.pause.remote(seconds)


class _WorkerJudge(JudgeService):
    """What :meth:`JudgeService._call` needs on a worker: the configuration, the price, a started
    client and the shared limits. No store, cache or accounting: the driver keeps those."""

    def __init__(self, cfg: JudgeConfig, price: Any, limits: Any, client: Any) -> None:  # noqa: D107
        self.cfg = cfg
        self._price = price  # JudgeService.price reads it
        self._client = client
        self._limits = limits
        self._slots = _Slots(limits)  # type: ignore[assignment]
        self._limiter = _Rate(limits)  # type: ignore[assignment]

    async def _reserve(self, amount: float) -> bool:
        if self.cfg.max_cost is None:  # no budget: no round trip (the driver sums the costs)
            return True
        return await self._limits.reserve.remote(amount)

    async def _settle(self, reserved: float, actual: float) -> None:
        if self.cfg.max_cost is not None:
            await self._limits.settle.remote(reserved, actual)


class JudgeCaller:
    """A Ray actor that sends judge requests (many at once, each under the shared limits)."""

    def __init__(self, cfg: JudgeConfig, price: Any, limits: Any, key: str | None) -> None:
        if key and cfg.api_key_env:
            os.environ[cfg.api_key_env] = key  # the provider's own variable, in this process only
        self.cfg, self.price, self.limits = cfg, price, limits
        self.judge: _WorkerJudge | None = None
        # requests of this caller waiting for a slot at once, at most: each waits in the limits
        # actor as one of its concurrent tasks, which must leave room for the releases
        self._waiting: asyncio.Semaphore | None = None

    async def _ready(self) -> _WorkerJudge:
        if self.judge is None:
            from ragmeter.llm.providers import make_client

            client = make_client(self.cfg)
            await client.start()
            self.judge = _WorkerJudge(self.cfg, self.price, self.limits, client)
        return self.judge

    async def call(self, chunk: list[tuple[int, JudgeRequest, str]]) -> tuple[list[tuple[int, JudgeResult]], int]:
        """Send a chunk of ``(index, request, cache key)``; returns ``[(index, result)]`` and this pid."""
        judge = await self._ready()
        if self._waiting is None:
            self._waiting = asyncio.Semaphore(max(1, self.cfg.concurrency))
        waiting = self._waiting

        async def one(req: JudgeRequest, key: str) -> JudgeResult:
            async with waiting:
                return await judge._call(req, key)

        results = await asyncio.gather(*(one(req, key) for _, req, key in chunk))
        return [(i, res) for (i, _, _), res in zip(chunk, results, strict=True)], os.getpid()

    async def close(self) -> None:
        if self.judge is not None:
            try:
                await self.judge._client.close()
            except Exception:  # noqa: BLE001 - closing: nothing left to report to
                pass


class _Done:
    """The figures of the shared limits, for :meth:`JudgeService.stats` (its ``_slots``)."""

    def __init__(self, summary: str | None) -> None:
        self._summary = summary

    def summary(self) -> str | None:
        return self._summary


class RayJudgeService(JudgeService):
    """The judge service of a run on Ray: cache, accounting and scoring on the driver, calls on
    the cluster (see the module docstring)."""

    address: str | None = None
    ray_stats: dict[str, Any]

    @classmethod
    def for_ray(cls, ctx: Any, address: str | None) -> RayJudgeService:
        svc = cls(config_from_options(ctx.options), store=ctx.store, run_id=ctx.run_id, progress=ctx.progress)
        svc.address = address
        svc.ray_stats = {}
        return svc

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self.ray_stats:
            out["ray"] = dict(self.ray_stats)
        return out

    def _call_stream(self, requests: list[JudgeRequest], keys: list[str], todo: list[int],
                     results: list[JudgeResult | None], progress_desc: str | None) -> Iterator[list[int]]:
        from ragmeter.run.engines.ray_runtime import init

        ray = init(self.address)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # no more callers than CPUs, than slots (a caller waits on the network), or than chunks of 8
        n_callers = max(1, min(cpus, self.cfg.concurrency, math.ceil(len(todo) / 8)))
        size = max(1, min(MAX_CHUNK, math.ceil(len(todo) / (n_callers * CHUNKS_PER_CALLER))))
        # room for every caller's waiting requests (at most --concurrency each) and their releases:
        # an async actor runs at most max_concurrency tasks, and a release queued behind waiting
        # acquires would never run
        room = 2 * n_callers * max(1, self.cfg.concurrency) + 64
        limits = ray.remote(num_cpus=0, max_concurrency=room)(JudgeLimits).remote(
            self.cfg.concurrency, self.cfg.rpm, self.cfg.max_cost, self._spent, self._exhausted)
        key_ref = ray.put(self.cfg.api_key())  # in the object store, never in a runtime_env (logged)
        caller = ray.remote(num_cpus=0.1, scheduling_strategy="SPREAD")(JudgeCaller)
        callers = [caller.remote(self.cfg, self.price, limits, key_ref) for _ in range(n_callers)]
        advance = self.progress(progress_desc or "judge", len(todo)) if progress_desc else (lambda n: None)
        pending: dict[Any, list[int]] = {}
        t0 = time.perf_counter()
        pids: set[int] = set()
        try:
            for n, start in enumerate(range(0, len(todo), size)):
                idx = todo[start:start + size]
                chunk = [(i, requests[i], keys[i]) for i in idx]
                pending[callers[n % n_callers].call.remote(chunk)] = idx
            while pending:
                done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.1)
                finished: list[int] = []
                for ref in done:
                    idx = pending.pop(ref)
                    for i, res in self._chunk_results(ray, ref, idx, keys, pids):
                        results[i] = res
                        self._account(requests[i], res)
                        if self.cfg.max_cost is None:  # else the limits actor keeps the cost so far
                            self._spent += res.cost_usd or 0.0
                        finished.append(i)
                if finished:
                    advance(len(finished))
                    yield finished
            state = ray.get(limits.state.remote())
            if self.cfg.max_cost is not None:
                self._spent = state["spent"]
            self._exhausted = self._exhausted or state["exhausted"]
            self._slots = _Done(state["summary"])  # type: ignore[assignment]
            self.ray_stats = {"callers": len(pids), "requests": int(state["requests"]) + self.ray_stats.get(
                "requests", 0), "peak_in_flight": max(state["peak_in_flight"], self.ray_stats.get("peak_in_flight", 0)),
                "calls_s": round(time.perf_counter() - t0 + self.ray_stats.get("calls_s", 0.0), 4)}
        finally:
            for ref in pending:  # interrupted: stop the calls still running
                ray.cancel(ref, force=False)
            for c in callers:
                ray.kill(c)
            ray.kill(limits)

    def _chunk_results(self, ray: Any, ref: Any, idx: list[int], keys: list[str],
                       pids: set[int]) -> list[tuple[int, JudgeResult]]:
        """A chunk's results; a chunk whose worker failed gives each of its requests a failed
        result with the reason (a configuration error stops the run, as on the driver)."""
        try:
            out, pid = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - RayTaskError, RayActorError ...
            cause = getattr(exc, "cause", None)
            if isinstance(cause, JudgeConfigError):
                raise cause from None
            first = str(cause or exc).strip().splitlines()
            why = f"{type(cause or exc).__name__}: {first[-1] if first else ''}"
            return [(i, JudgeResult(FAILED, keys[i], reason=detailed("judge failure: Ray worker failed", why),
                                    error=why)) for i in idx]
        pids.add(pid)
        return out


def service_for(address: str | None) -> Any:
    """The judge-service factory of a Ray run's context (see :meth:`ragmeter.run.engines.ray_engine.RayEngine.attach`)."""
    def make(ctx: Any) -> RayJudgeService:
        return RayJudgeService.for_ray(ctx, address)

    return make


__all__: Sequence[str] = ("JudgeCaller", "JudgeLimits", "RayJudgeService", "service_for")
