"""The judge service: concurrent, rate-limited, retried, cached and accounted structured LLM calls.

Metrics hand it :class:`JudgeRequest` lists and get :class:`JudgeResult` lists back, in order. The
calls run on one asyncio event loop in a background thread (so the SDKs' connection pools live for
the whole run) under a concurrency limit and a requests-per-minute limit. A reply is cached in the
store under sha256(provider, endpoint, model, prompt, schema, parameters, template version): a re-run or a
resumed run makes no repeated call. Every request is recorded in ``judge_calls`` with its tokens
and cost. ``max_cost`` stops judging when the budget is reached; ``dry_run`` records what would
be called and calls nothing.

Metrics may also ``prefetch`` their requests from ``prepare``: the runner's ``flush`` then runs the
requests of every LLM metric of the run at once, so a run with several metrics keeps the judge as
busy as the concurrency limit allows instead of draining and refilling per metric.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from ragmeter.core.reasons import detailed
from ragmeter.core.redact import endpoint_id, redact, redact_url
from ragmeter.llm import joint
from ragmeter.llm.batch import batch_figures, batch_stream
from ragmeter.llm.config import JudgeConfig, JudgeConfigError, config_from_options
from ragmeter.llm.keeper import VerdictKeeper
from ragmeter.llm.limits import OVERLOAD_STATUSES, AdaptiveLimit
from ragmeter.llm.prices import Price, PriceTable
from ragmeter.llm.replies import capped_wait
from ragmeter.llm.request import BUDGET, DRY_RUN, FAILED, OK, JudgeRequest, JudgeResult
from ragmeter.llm.runtime import _Runtime
from ragmeter.llm.structured import ReplyParseError, parse_reply, refusal, schema_json
from ragmeter.llm.tokens import TOKEN_CALIBRATION, _tiktoken_encoding, estimate_tokens, script_estimate
from ragmeter.llm.transport import CONNECT, INVALID_REPLY, TIMEOUT, Problem, classify

_MEMORY_LIMIT = 20_000
#: seconds after the first reply of a burst that the scoring thread takes the replies received
_NUDGE = 0.015
_UNPRICED = object()  # JudgeService.price not looked up yet
#: seconds a pre-flight request may take (capped by the judge's own timeout)
PREFLIGHT_TIMEOUT = 10.0
#: a failed pre-flight is remembered this long (a server being started is tried again after it)
_PREFLIGHT_FAILURE_TTL = 30.0
_PREFLIGHT: dict[tuple[Any, ...], tuple[str | None, float]] = {}
_PREFLIGHT_LOCK = threading.Lock()


@functools.cache
def _cache_query() -> Any:
    """The judge cache's replies for a list of keys (``:keys``): the two columns a hit needs, as
    plain SQL with typed result columns (the ORM's entity query costs about 15 ms to compile in a
    fresh process and 5 ms per lookup after; this 5 ms, then 0.4 ms)."""
    from sqlalchemy import bindparam, text

    from ragmeter.store.models import JudgeCacheRow

    return (text(f'SELECT "key", response FROM {JudgeCacheRow.__tablename__} WHERE "key" IN :keys')
            .bindparams(bindparam("keys", expanding=True))
            .columns(JudgeCacheRow.key, JudgeCacheRow.response))


async def _sleep(seconds: float) -> None:
    # one indirection so tests can observe the backoff without waiting for it
    await asyncio.sleep(seconds)


class RateLimiter:
    """Spaces request starts evenly at ``rpm`` per minute; a 429's ``Retry-After`` pauses everyone
    (for :data:`~ragmeter.llm.replies.MAX_SERVER_WAIT` at most)."""

    def __init__(self, rpm: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = 60.0 / rpm if rpm else 0.0
        self.clock = clock
        self._next = 0.0
        self._pause_until = 0.0

    def pause(self, seconds: float) -> None:
        self._pause_until = max(self._pause_until, self.clock() + capped_wait(seconds))

    async def acquire(self) -> None:
        while True:
            now = self.clock()
            if self._pause_until > now:
                await _sleep(self._pause_until - now)
                continue
            if not self.interval:
                return
            slot = max(now, self._next)
            self._next = slot + self.interval
            if slot > now:
                await _sleep(slot - now)
            return


class JudgeService:
    """Structured LLM judging for metrics; obtain it with ``ctx.service("judge")``.

    Args:
        cfg: the judge configuration.
        store: the results store (cache and accounting), or ``None`` for memory only.
        run_id: the run the calls are accounted to.
        progress: ``progress(description, total) -> advance(n)``.
    """

    def __init__(self, cfg: JudgeConfig, store: Any = None, run_id: str | None = None,
                 progress: Callable[[str, int], Callable[[int], None]] | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.run_id = run_id
        self.progress = progress or (lambda desc, total: (lambda n: None))
        self.prices = PriceTable.load(cfg.prices_file)
        self._price: Price | None | object = _UNPRICED
        self._price_lock = threading.Lock()
        if cfg.max_cost is not None:
            if self.price is None:
                raise JudgeConfigError(f"--max-cost needs a price for {cfg.label}: add it to a price file "
                                       "and pass --option judge_prices=FILE (see `ragmeter judge-prices`)")
        self._memory: OrderedDict[str, JudgeResult] = OrderedDict()
        self._failed: dict[str, JudgeResult] = {}
        self._claims: dict[tuple[str, str | None, str], JudgeResult] = {}
        self._pending: list[JudgeRequest] = []
        self._plan: dict[str, dict[str, Any]] = {}
        self._call_rows: list[dict[str, Any]] = []
        self._cache_rows: list[dict[str, Any]] = []
        self._counts: Counter[str] = Counter()
        self._unscored: Counter[str] = Counter()
        self._spent = 0.0
        self._reserved = 0.0
        self._holders = 0  # calls holding a reservation (a count: float sums drift)
        self._exhausted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._lock = threading.Lock()
        # estimated vs real prompt tokens of this run's single-attempt calls (token calibration)
        self._calibration = [0, 0, 0]  # estimated, real, calls
        self._ratio: tuple[float, int] | None = None
        #: set by the runner when every verdict the run needs is cached: no pre-flight request
        self.nothing_to_send = False

    @property
    def price(self) -> Price | None:
        """The judge model's price (a price file's entry, else genai-prices'), looked up once."""
        if self._price is _UNPRICED:
            with self._price_lock:
                if self._price is _UNPRICED:
                    self._price = self.prices.get(self.cfg.provider, self.cfg.model, self.cfg.base_url)
        return self._price  # type: ignore[return-value]

    @classmethod
    def from_context(cls, ctx: Any) -> JudgeService:
        return (ctx.remote_judge(ctx) if getattr(ctx, "remote_judge", None) is not None  # Ray: engines/ray_judge.py
                else cls(config_from_options(ctx.options), store=ctx.store, run_id=ctx.run_id, progress=ctx.progress))

    # ---- keys ---------------------------------------------------------------------------------
    def key(self, req: JudgeRequest) -> str:
        """sha256 of provider, endpoint (normalised base URL without credentials), model, prompt,
        schema, sampling parameters and template version: the same model name served by another
        endpoint (another server, quantisation or deployment) never shares verdicts."""
        payload = json.dumps([self.cfg.provider, endpoint_id(self.cfg.base_url), self.cfg.model, req.system, req.user,
                              schema_json(req.schema), self.cfg.temperature,
                              req.max_tokens or self.cfg.max_tokens, req.template_version]
                             # a repeat draw asks again; draw 0 keeps the keys of existing caches
                             + ([self.cfg.draw] if self.cfg.draw else [])
                             # a request's own conversation and sampling (empty: the keys stay as they were)
                             + ([list(req.messages), list(req.sampling)] if req.messages or req.sampling else [])
                             # a request for token log-probabilities is another request
                             + ([f"logprobs={req.logprobs}"] if req.logprobs else []),
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    # ---- public API -----------------------------------------------------------------------------
    def prefetch(self, requests: Sequence[JudgeRequest]) -> None:
        """Queue requests to run at the next :meth:`flush` (called by the runner after ``prepare``)."""
        self._pending.extend(requests)

    def flush(self) -> None:
        """Run every queued request concurrently; results wait for the metrics that asked."""
        for _ in self.flush_stream():
            pass

    def flush_stream(self) -> Iterator[set[tuple[str, str | None]]]:
        """:meth:`flush`, reporting as it goes: yields the ``(metric, sample_id)`` pairs whose queued
        requests have all been answered since the last yield (cache hits at once, then calls as
        their replies arrive, every 0.1 s at most). Their results wait for the metrics that asked,
        so the runner can score and store those samples while the other calls are still running.
        Verdicts are in the store's judge cache before their pair is yielded."""
        if not self._pending:
            return
        reqs, self._pending = self._pending, []
        waiting = Counter((r.metric, r.sample_id) for r in reqs)
        # one request per sample for the metrics that read its contexts (ragmeter.llm.joint)
        sent, members = joint.plan(self, reqs)
        results: list[JudgeResult | None] = [None] * len(sent)
        for finished in self._submit_stream(sent, "judge", results):
            ready: set[tuple[str, str | None]] = set()
            for i in finished:
                res = results[i]
                assert res is not None
                answered = (joint.split(self, sent[i], res, members[i]) if i in members else [(sent[i], res)])
                for r, res in answered:
                    self._claims[(r.metric, r.sample_id, res.key)] = res
                    waiting[(r.metric, r.sample_id)] -= 1
                    if not waiting[(r.metric, r.sample_id)]:
                        ready.add((r.metric, r.sample_id))
            if ready:
                self._write_rows()  # the parts' verdicts are stored before their samples are scored
                yield ready

    def all_cached(self, requests: Sequence[JudgeRequest]) -> bool:
        """Whether every request's verdict is already known (this service's memory or the store's
        judge cache): a run of them would send nothing."""
        wanted: dict[str, JudgeRequest] = {}
        for r in requests:
            k = self.key(r)
            if k not in self._memory:
                wanted[k] = r
            if len(wanted) == 500:  # a first run misses at once: stop at the first slice with a miss
                if len(self._store_lookup(wanted)) < len(wanted):
                    return False
                wanted = {}
        return not wanted or len(self._store_lookup(wanted)) == len(wanted)

    def submit(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Resolve requests (cache, then concurrent calls); one result per request, in order."""
        results: list[JudgeResult | None] = [None] * len(requests)
        for _ in self._submit_stream(list(requests), None, results):
            pass
        return results  # type: ignore[return-value]  # every slot is filled by the stream

    def _submit_stream(self, requests: list[JudgeRequest], progress_desc: str | None,
                       results: list[JudgeResult | None]) -> Iterator[list[int]]:
        """Fill ``results`` (one per request): claims and caches first, then concurrent calls;
        yields the indices filled since the last yield, after their accounting rows are written."""
        keys = [self.key(r) for r in requests]
        lookup: list[int] = []
        claimed_at: set[int] = set()
        now: list[int] = []
        for i, (r, k) in enumerate(zip(requests, keys, strict=True)):
            claimed = self._claims.pop((r.metric, r.sample_id, k), None)
            if claimed is not None:
                results[i] = claimed  # accounted when it was prefetched
                claimed_at.add(i)
            elif k in self._memory:
                self._memory.move_to_end(k)
                results[i] = self._served(r, self._memory[k].as_cached())
            elif k in self._failed:
                results[i] = self._served(r, self._failed[k].as_cached())
            else:
                lookup.append(i)
                continue
            now.append(i)
        found = self._store_lookup({keys[i]: requests[i] for i in lookup})
        first: dict[str, int] = {}
        dups: dict[int, list[int]] = {}
        for i in lookup:
            hit = found.get(keys[i])
            if hit is not None:
                self._remember(hit)
                results[i] = self._served(requests[i], hit)
                now.append(i)
            elif keys[i] in first:
                dups.setdefault(first[keys[i]], []).append(i)
            else:
                first[keys[i]] = i
        unique = list(first.values())

        def with_dups(done: list[int]) -> list[int]:
            out = list(done)
            for i in done:
                base = results[i]
                assert base is not None
                for d in dups.get(i, ()):
                    results[d] = base if base.status in {DRY_RUN, BUDGET} else self._served(requests[d], base.as_cached())
                    out.append(d)
            for i in out:
                if results[i].status == BUDGET and i not in claimed_at:  # type: ignore[union-attr]
                    self._unscored[requests[i].metric] += 1
            self._write_rows()
            return out

        if self.cfg.dry_run:
            for i in unique:
                results[i] = self._plan_call(requests[i], keys[i])
            now += unique
            unique = []
        if now:
            yield with_dups(now)
        if unique:
            calls = (batch_stream(self, requests, keys, unique, results) if self.cfg.batch  # same bodies, half price
                     else self._call_stream(requests, keys, unique, results, progress_desc))
            for done in calls:
                yield with_dups(done)

    def stats(self) -> dict[str, Any]:
        """Figures for the run summary: calls, cache hits, failures, tokens, cost (and the plan in
        a dry run, the budget state with ``max_cost``)."""
        c = self._counts
        out: dict[str, Any] = {"judge": self.cfg.label, "calls": c["calls"], "cached": c["cached"],
                               "failed": c["failed"], "retries": c["retries"],
                               "input_tokens": c["input_tokens"], "output_tokens": c["output_tokens"],
                               "cached_input_tokens": c["cached_input_tokens"], "cache_write_tokens": c["cache_write_tokens"],
                               "cost_usd": round(self._spent, 6) if self.price is not None else None}
        if self.store is not None and self.run_id and not self.cfg.dry_run:
            # one truth: a run's figures are the sums of its judge_calls rows (what `show` and the
            # report read), which also cover the earlier sessions of a resumed run
            from ragmeter.llm.accounting import run_judge_usage

            self._write_rows()
            usage = run_judge_usage(self.store, self.run_id)
            if usage is not None:
                out.update({k: usage[k] for k in ("calls", "cached", "failed", "input_tokens", "output_tokens",
                                                  "cached_input_tokens", "cache_write_tokens")})
                out["cost_usd"] = usage["cost_usd"] if self.price is not None else None
        if self.cfg.batch and not self.cfg.dry_run:
            out.update(batch_figures(self.store, self.run_id))
        if self.price is None:
            out["price"] = f"unknown for {self.cfg.model} (add one: --option judge_prices=FILE)"
        adaptations = getattr(self._client, "adaptations", None)
        if adaptations:
            out["adapted"] = "; ".join(adaptations)
        slots = getattr(self, "_slots", None)
        if slots is not None and slots.summary():
            out["concurrency_adapted"] = slots.summary()
        if self.cfg.max_cost is not None:
            out["max_cost_usd"] = self.cfg.max_cost
            out["budget_exhausted"] = self._exhausted
            if self._unscored:
                out["left_unscored"] = dict(self._unscored)
                out["note"] = (f"max_cost ${self.cfg.max_cost:g} reached: "
                               + ", ".join(f"{m} {n}" for m, n in self._unscored.items())
                               + " sample(s) left unscored (no value: budget exhausted)")
        if self.cfg.dry_run:
            out.update(self.plan())
        return out

    def plan(self) -> dict[str, Any]:
        """The dry run's estimate: calls that would be made (cache hits excluded), tokens, cost."""
        tin = sum(p["input_tokens"] for p in self._plan.values())
        tout = sum(p["output_tokens"] for p in self._plan.values())
        per: dict[str, dict[str, int]] = {}
        for p in self._plan.values():
            m = per.setdefault(p["metric"], {"calls": 0, "input_tokens": 0, "output_tokens": 0})
            m["calls"] += 1
            m["input_tokens"] += p["input_tokens"]
            m["output_tokens"] += p["output_tokens"]
        price = self.price  # per call: a request whose input passes a tier's size pays that tier's rate
        cost = sum(price.cost(p["input_tokens"], p["output_tokens"]) for p in self._plan.values()) if price else None
        bprice = self.prices.get(self.cfg.provider, self.cfg.model, self.cfg.base_url, batch=True) if price else None
        bcost = sum(bprice.cost(p["input_tokens"], p["output_tokens"]) for p in self._plan.values()) if bprice else None
        ratio = self._ratio if self._ratio and self._ratio[1] else None
        method = ("tiktoken o200k_base" if _tiktoken_encoding() is not None else
                  f"script-aware estimate x{ratio[0]:.3f}, calibrated on {ratio[1]} real calls of this model"
                  if ratio else "script-aware estimate (no real calls of this model stored yet)")
        return {"dry_run": True, "planned_calls": len(self._plan), "est_input_tokens": tin,
                "est_output_tokens": tout, "token_estimate": method,
                "est_cost_usd": round(cost, 6) if cost is not None else None,
                # the same requests at the provider's batch price (--batch: ragmeter.llm.batch)
                "est_batch_cost_usd": round(bcost, 6) if bcost is not None else None,
                "per_metric": joint.attribute(per)}  # a joint call: its metrics share it equally

    def preflight(self) -> None:
        """Check, before a run starts, that the judge answers: one request (a 1-token completion;
        Gemini: a model lookup), one try, at most ``PREFLIGHT_TIMEOUT`` seconds. A dry run makes
        no call, nor does a run whose verdicts are all cached (``nothing_to_send``). The outcome is kept per configuration (and key) for the process, so calling it
        again is free; a failure is tried again after 30 seconds.

        Raises:
            JudgeConfigError: the endpoint cannot be reached, rejects the key, does not know the
                model, or answers with something that is not an API reply (an HTML page).
        """
        if self.cfg.dry_run or self.nothing_to_send:
            return
        ident = (self.cfg, hashlib.sha256((self.cfg.api_key() or "").encode()).hexdigest())
        with _PREFLIGHT_LOCK:
            known = _PREFLIGHT.get(ident)
        if known is None or (known[0] is not None and time.monotonic() - known[1] > _PREFLIGHT_FAILURE_TTL):
            known = (self._ping(), time.monotonic())
            with _PREFLIGHT_LOCK:
                _PREFLIGHT[ident] = known
        if known[0] is not None:
            raise JudgeConfigError(known[0])

    def _ping(self) -> str | None:
        """Why the pre-flight request failed, or ``None`` when the judge answered."""
        import concurrent.futures

        cfg = self.cfg
        timeout = min(cfg.timeout, PREFLIGHT_TIMEOUT)
        where = redact_url(cfg.base_url) or f"the {cfg.provider} API"
        runtime = _Runtime.get()

        async def ping() -> None:
            client = await runtime.client(cfg)
            await client.ping(timeout)

        fut = asyncio.run_coroutine_threadsafe(ping(), runtime.loop)
        try:
            fut.result(timeout + 5)
        except JudgeConfigError as exc:
            return str(exc)
        except (concurrent.futures.TimeoutError, TimeoutError):
            fut.cancel()
            return (f"judge {cfg.label} at {where} did not answer a pre-flight request within "
                    f"{timeout:g} s: is the server running, and is --judge-base-url right?")
        except Exception as exc:  # noqa: BLE001 - a TransportError, or a bug's exception
            p = classify(exc)
            if p.kind == "config":
                return f"judge {cfg.label}: the pre-flight request failed: {p.message}"
            if p.cause in {CONNECT, TIMEOUT}:
                return (f"judge {cfg.label} at {where}: {p.short} on a pre-flight request ({p.message}). "
                        "Is the server running, and is --judge-base-url right?")
            if p.cause == INVALID_REPLY:
                return f"judge {cfg.label} at {where}: {p.message}"
            # 400, 429, 5xx: the endpoint answered as an API does; the run's retries handle these
        return None

    def close(self) -> None:
        """Write pending accounting rows and the token calibration. The event loop and the
        provider client stay up for the next run in this process (see :class:`_Runtime`)."""
        self._write_rows()
        self._save_calibration()

    # ---- token calibration -----------------------------------------------------------------
    def _calibration_key(self) -> str:
        return f"{self.cfg.provider}:{self.cfg.model}"

    def _save_calibration(self) -> None:
        """Add this run's (estimated, real) prompt-token totals to the store's record for this
        provider and model, so later dry runs scale their estimate by the observed ratio."""
        est, real, calls = self._calibration
        if not calls or self.store is None or self.cfg.dry_run:
            return
        try:
            old = self.store.kv_get(TOKEN_CALIBRATION, self._calibration_key()) or {}
            self.store.kv_put(TOKEN_CALIBRATION, self._calibration_key(),
                              {"estimated": int(old.get("estimated", 0)) + est,
                               "real": int(old.get("real", 0)) + real,
                               "calls": int(old.get("calls", 0)) + calls})
        except Exception:  # noqa: BLE001 - a calibration record must never fail a finished run
            return
        self._calibration = [0, 0, 0]

    def token_ratio(self) -> tuple[float, int] | None:
        """``(real / estimated prompt tokens, calls)`` stored for this provider and model, when
        at least 5 real calls were measured; ``None`` otherwise (or with tiktoken, exact)."""
        if self.store is None or _tiktoken_encoding() is not None:
            return None
        try:
            rec = self.store.kv_get(TOKEN_CALIBRATION, self._calibration_key())
        except Exception:  # noqa: BLE001 - no store table yet: no calibration
            return None
        if not rec or int(rec.get("calls", 0)) < 5 or not rec.get("estimated"):
            return None
        return float(rec["real"]) / float(rec["estimated"]), int(rec["calls"])

    # ---- bookkeeping ----------------------------------------------------------------------------
    def _remember(self, res: JudgeResult) -> None:
        self._memory[res.key] = res
        if len(self._memory) > _MEMORY_LIMIT:
            self._memory.popitem(last=False)

    def _served(self, req: JudgeRequest, res: JudgeResult) -> JudgeResult:
        self._counts["cached"] += 1
        self._record(req, res)
        return res

    def _record(self, req: JudgeRequest, res: JudgeResult) -> None:
        if self.store is None or self.cfg.dry_run:  # a dry run leaves nothing in the store
            return
        self._call_rows.append({
            "run_id": self.run_id, "metric": req.metric, "sample_id": req.sample_id, "key": res.key,
            "provider": self.cfg.provider, "model": self.cfg.model, "cached": res.cached,
            "ok": res.ok, "error": redact(res.error[:1000]) if res.error else None,
            "input_tokens": res.input_tokens, "output_tokens": res.output_tokens,
            "cached_input_tokens": res.cached_tokens, "cache_write_tokens": res.cache_write_tokens,
            "cost_usd": res.cost_usd or 0.0, "latency_ms": res.latency_ms})
        if res.ok and not res.cached and res.value is not None:
            keeper = getattr(self, "_keeper", None)
            if keeper is not None and res.key in keeper.kept:
                keeper.kept.discard(res.key)  # stored on arrival; forgotten here so the set stays small
            else:
                self._cache_rows.append(self._cache_row(req, res))

    def _cache_row(self, req: JudgeRequest, res: JudgeResult) -> dict[str, Any]:
        assert res.value is not None
        return {"key": res.key, "provider": self.cfg.provider, "model": self.cfg.model,
                "response": {"data": res.value.model_dump(mode="json"), "raw": res.raw, "schema": req.schema.__name__,
                             **({"logprobs": res.logprobs} if res.logprobs is not None else {})},
                "input_tokens": res.input_tokens, "output_tokens": res.output_tokens, "cost_usd": res.cost_usd or 0.0}

    def _write_rows(self) -> None:
        if self.store is None or not (self._call_rows or self._cache_rows):
            return
        from ragmeter.store.models import JudgeCallRow

        calls, self._call_rows = self._call_rows, []
        cache, self._cache_rows = self._cache_rows, []
        with self.store.session() as s, s.begin():
            if cache:
                # insert-or-ignore: another run may store the same verdict at the same moment
                self.store.put_judge_cache(s, cache)
            if calls:
                s.execute(JudgeCallRow.__table__.insert(), calls)

    def _store_lookup(self, wanted: dict[str, JudgeRequest]) -> dict[str, JudgeResult]:
        if self.store is None or not wanted:
            return {}
        out: dict[str, JudgeResult] = {}
        keys = list(wanted)
        with self.store.session() as s:
            for i in range(0, len(keys), 500):
                for key, response in s.execute(_cache_query(), {"keys": keys[i:i + 500]}):
                    req = wanted[key]
                    response = response or {}
                    try:
                        value = parse_reply(None, req.schema, response.get("data"))
                    except ReplyParseError:
                        continue  # a reply the current schema rejects is not a hit
                    out[key] = JudgeResult(OK, key, value=value, raw=response.get("raw"), cached=True,
                                           cost_usd=0.0 if self.price else None, logprobs=response.get("logprobs"))
        return out

    def _plan_call(self, req: JudgeRequest, key: str) -> JudgeResult:
        tin = estimate_tokens(req.system) + estimate_tokens(req.user)
        if self._ratio is None:
            self._ratio = self.token_ratio() or (1.0, 0)
        tin = max(1, round(tin * self._ratio[0]))
        self._plan[key] = {"metric": req.metric, "input_tokens": tin,
                           "output_tokens": req.expected_output_tokens}
        return JudgeResult(DRY_RUN, key, reason="dry run: no judge call made")

    # ---- calls ------------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            runtime = _Runtime.get()
            asyncio.run_coroutine_threadsafe(self._start(runtime), runtime.loop).result()
            self._loop = runtime.loop
        return self._loop

    async def _start(self, runtime: _Runtime) -> None:
        self._client = await runtime.client(self.cfg)
        # requests in flight: judge_concurrency at most, lowered on the provider's 429s (AIMD)
        self._slots = AdaptiveLimit(self.cfg.concurrency)
        self._limiter = RateLimiter(self.cfg.rpm)
        self._budget = asyncio.Condition()
        # a new verdict is stored before its call gives back its slot (see ragmeter.llm.keeper)
        self._keeper = VerdictKeeper(self.store) if self.store is not None and not self.cfg.dry_run else None

    def _call_stream(self, requests: list[JudgeRequest], keys: list[str], todo: list[int],
                     results: list[JudgeResult | None], progress_desc: str | None) -> Iterator[list[int]]:
        """Make the calls ``todo`` (indices) concurrently on the event loop; fill ``results`` and
        yield the indices answered since the last yield (every 0.1 s at most), accounted."""
        loop = self._ensure_loop()
        done: list[tuple[int, JudgeResult]] = []
        wake = threading.Event()
        nudging = [False]  # a wake-up of this thread is scheduled (read and written on the loop only)

        def nudge() -> None:
            nudging[0] = False
            wake.set()

        async def run_all() -> None:
            async def one(i: int) -> None:
                done.append((i, await self._call(requests[i], keys[i])))
                if len(done) == len(todo):
                    wake.set()
                elif not nudging[0]:
                    # replies come in bursts (a round of calls sent together): this thread scores
                    # and stores them _NUDGE s after the burst's first, once the loop has read the
                    # rest and sent the next requests, so its work falls in the wait for the next
                    # replies instead of at a fixed tick that may meet them (the GIL it holds
                    # would delay the loop's reads and sends)
                    nudging[0] = True
                    loop.call_later(_NUDGE, nudge)

            tasks = [asyncio.ensure_future(one(i)) for i in todo]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            finally:
                wake.set()

        fut: Future[None] = asyncio.run_coroutine_threadsafe(run_all(), loop)
        advance = self.progress(progress_desc or "judge", len(todo)) if progress_desc else (lambda n: None)
        received = 0
        # collect in slices rather than per result: waking this thread for every reply would
        # fight the event loop thread for the GIL
        try:
            while received < len(todo):
                wake.wait(0.1 if self._price is not _UNPRICED else 0.03)
                wake.clear()  # set again by the next burst (or the last reply) after what is read below
                if self._price is _UNPRICED:
                    # without a budget the price is first needed when a reply is accounted:
                    # genai-prices' table (0.1 s of CPU in a fresh process, 0.3 s on a loaded
                    # machine, holding the GIL) is read once the first requests are out, 30 ms
                    # after they are queued: early in their wait, so it is done before their
                    # replies come (read 0.1 s in, it met a 200 ms judge's first replies, and the
                    # event loop waited for the GIL and the price lock to take them)
                    _ = self.price
                if fut.done() and fut.exception() is not None:
                    raise fut.exception()  # type: ignore[misc]
                new = done[received:]
                for i, res in new:
                    results[i] = res
                    self._account(requests[i], res)
                received += len(new)
                if new:
                    advance(len(new))
                    yield [i for i, _ in new]
            fut.result()
        except BaseException:
            # interrupted (Ctrl-C, the caller stopped reading) or a configuration error: stop the
            # calls still in flight, so nothing keeps spending in the background, and keep the
            # accounting and verdicts of those made
            fut.cancel()
            for i, res in done[received:]:
                self._account(requests[i], res)
            self._write_rows()
            raise

    def _account(self, req: JudgeRequest, res: JudgeResult) -> None:
        if res.status == BUDGET and not res.attempts:
            return  # never sent
        # a request stopped by the budget after a reply it had to re-ask for was a call that
        # cost money: counted and recorded like any failed call, so the run's figures and the
        # judge_calls rows (what `show` sums) hold the same cost
        self._counts["calls"] += 1
        self._counts["input_tokens"] += res.input_tokens
        self._counts["output_tokens"] += res.output_tokens
        self._counts["cached_input_tokens"] += res.cached_tokens
        self._counts["cache_write_tokens"] += res.cache_write_tokens
        self._counts["retries"] += max(0, res.attempts - 1)
        if res.ok and res.attempts == 1 and res.input_tokens > 0 and not res.cached:
            # the estimate the calibration scales (tiktoken's count is exact and never scaled):
            # no tokenizer is loaded while the judge answers
            self._calibration[0] += script_estimate(req.system) + script_estimate(req.user)
            self._calibration[1] += res.input_tokens
            self._calibration[2] += 1
        if res.ok:
            self._remember(res)
        else:
            self._counts["failed"] += 1
            if res.status != BUDGET:
                self._failed[res.key] = res
        self._record(req, res)

    async def _reserve(self, amount: float) -> bool:
        """Hold ``amount`` of the budget for a call about to be made; ``False`` once the budget
        cannot cover it (waiting first for calls in flight to report what they really cost)."""
        if self.cfg.max_cost is None:
            return True
        async with self._budget:
            while True:
                if self._exhausted:
                    return False
                if self._spent + self._reserved + amount <= self.cfg.max_cost:
                    self._reserved += amount
                    self._holders += 1
                    return True
                if self._holders == 0:
                    self._exhausted = True
                    self._budget.notify_all()
                    return False
                await self._budget.wait()

    async def _settle(self, reserved: float, actual: float) -> None:
        if self.cfg.max_cost is None:
            self._spent += actual
            return
        async with self._budget:
            self._holders -= 1
            self._reserved = max(0.0, self._reserved - reserved) if self._holders else 0.0
            self._spent += actual
            self._budget.notify_all()

    def _backoff(self, attempt: int, problem: Problem) -> float:
        if problem.retry_after is not None:  # the server's wait, never past MAX_SERVER_WAIT
            return capped_wait(problem.retry_after + random.uniform(0, 0.1 * max(problem.retry_after, 0.1)))
        cap = min(self.cfg.backoff_max, self.cfg.backoff_base * (2 ** attempt))
        return cap * random.uniform(0.5, 1.0)

    async def _call(self, req: JudgeRequest, key: str) -> JudgeResult:
        cfg = self.cfg
        max_tokens = req.max_tokens or cfg.max_tokens
        base = [dict(m) for m in req.messages] if req.messages else [{"role": "user", "content": req.user}]
        est_cost = 0.0
        if cfg.max_cost is not None and self.price:  # only a budget reserves ahead of the reply
            est_in = estimate_tokens(req.system) + sum(estimate_tokens(m["content"]) for m in base)
            est_cost = self.price.cost(est_in, req.expected_output_tokens)
        messages = list(base)
        sampling = {"sampling": dict(req.sampling)} if req.sampling else {}
        tin = tout = tcached = twritten = attempts = transient = parse_failures = 0
        cost = 0.0
        t0 = time.perf_counter()

        def result(status: str, **kw: Any) -> JudgeResult:
            return JudgeResult(status, key, input_tokens=tin, output_tokens=tout, cached_tokens=tcached,
                               cache_write_tokens=twritten, cost_usd=cost if self.price else None, attempts=attempts,
                               latency_ms=round((time.perf_counter() - t0) * 1000, 2), **kw)

        while True:
            if not await self._reserve(est_cost):
                return result(BUDGET, reason=f"budget exhausted (max_cost={cfg.max_cost:g})")
            await self._limiter.acquire()
            ticket = await self._slots.acquire()
            try:
                attempts += 1
                extra = {"logprobs": req.logprobs} if req.logprobs else {}
                reply = await self._client.complete(req.system, messages, req.schema, max_tokens, **sampling, **extra)
            except asyncio.CancelledError:
                self._slots.release()
                await self._settle(est_cost, 0.0)
                raise
            except Exception as exc:  # noqa: BLE001 - a TransportError, or a bug's exception (final)
                self._slots.release()
                await self._settle(est_cost, 0.0)
                problem = classify(exc)
                if problem.status in OVERLOAD_STATUSES or problem.cause == TIMEOUT:
                    self._slots.overload(ticket)
                if problem.kind == "config":
                    raise JudgeConfigError(f"judge {cfg.label}: {problem.message}") from None
                if problem.kind == "transient" and transient < cfg.max_retries:
                    if problem.retry_after is not None:
                        self._limiter.pause(problem.retry_after)
                    await _sleep(self._backoff(transient, problem))
                    transient += 1
                    continue
                tries = f" after {transient + 1} attempts" if transient else ""
                said = (f"no complete reply within judge_timeout={cfg.timeout:g} s"
                        if problem.cause == TIMEOUT else problem.detail)
                return result(FAILED, reason=detailed(f"judge failure: {problem.short}{tries}", said),
                              error=problem.message)
            self._slots.success(reply.remaining)
            held = True  # the slot is given back once the verdict is stored (see ragmeter.llm.keeper)
            try:
                call_cost = (self.price.cost(reply.input_tokens, reply.output_tokens, reply.cached_tokens,
                                             reply.cache_write_tokens) if self.price else 0.0)
                tin += reply.input_tokens
                tout += reply.output_tokens
                tcached += reply.cached_tokens
                twritten += reply.cache_write_tokens
                cost += call_cost
                await self._settle(est_cost, call_cost)
                try:
                    value = parse_reply(reply.text, req.schema, reply.data)
                    if req.validate is not None:
                        req.validate(value)
                except (ReplyParseError, ValueError) as exc:
                    held = False
                    self._slots.release()
                    refused = refusal(reply.text, reply.finish_reason)
                    why = refused or str(exc)
                    if reply.finish_reason in {"length", "max_tokens", "MAX_TOKENS", "FinishReason.MAX_TOKENS"}:
                        why += f" (reply cut at max_tokens={max_tokens})"
                    if parse_failures < cfg.parse_retries:
                        parse_failures += 1
                        messages = [*base, {"role": "assistant", "content": reply.raw or "(empty)"},
                                    {"role": "user", "content": _CORRECTION.format(error=why)}]
                        continue
                    kind = "refused" if refused else "invalid reply"
                    return result(FAILED, reason=detailed(f"judge failure: {kind}", why), error=why, raw=reply.raw)
                res = result(OK, value=value, raw=reply.raw, logprobs=reply.logprobs if req.logprobs else None)
                keeper = getattr(self, "_keeper", None)  # none on a Ray worker: the driver stores
                if keeper is not None:
                    await keeper.keep(self._cache_row(req, res))
                return res
            finally:
                if held:
                    self._slots.release()

_CORRECTION = ("That reply cannot be used: {error}. Reply again with only the JSON object in the "
               "required format, judging the same data.")
