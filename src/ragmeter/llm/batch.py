"""Provider batch APIs for a judged run (``--batch``): the same requests, half the price.

The judge service hands this module the requests a round would send online
(:meth:`JudgeService._submit_stream`); they are written as the provider's batch input with the
exact bodies the online path sends (``custom_id`` = the request's judge cache key):

- OpenAI and compatible servers: a JSONL uploaded to ``/files`` (``purpose=batch``), then
  ``POST /batches`` (``endpoint=/v1/chat/completions``, ``completion_window=24h``, ``metadata``
  naming the run and ragmeter's batch id); polled at ``GET /batches/{id}``, its ``output_file_id``
  and ``error_file_id`` read from ``/files/{id}/content``;
- Anthropic: ``POST /v1/messages/batches``, polled, its ``results_url`` read.

Every batch is stored (kv namespace :data:`NAMESPACE`) *before* anything is sent, in state
``to submit``; once the provider returns its id, ``submitted``; once its results fill the judge
cache, ``collected``. A resumed run first adopts its stored batches: one still ``to submit`` (the
process died between the request and storing the answer) is looked up at the provider -- OpenAI by
its ``metadata.ragmeter_batch``, Anthropic by its creation time and request count -- and sent only
when it is not there. So a killed process never submits the same batch twice.

Replies are turned into verdicts by the same parser as online replies (``Client.parse``,
``parse_reply``, the request's own check); a reply that does not parse, a per-request error and an
expired request are "no value" with the provider's reason, or re-sent online with
``judge_batch_fallback=online``. Batched requests are priced at the provider's batch price
(:meth:`PriceTable.get` with ``batch=True``: genai-prices' batch price where it has one, else
:data:`~ragmeter.llm.prices.BATCH_DISCOUNT` of the online price); the prompt-cache tokens a batch
reply reports (OpenAI ``usage.prompt_tokens_details.cached_tokens``, Anthropic
``cache_read_input_tokens`` / ``cache_creation_input_tokens``) are recorded per request and priced
at that batch price's cache rates.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ragmeter.core.errors import EXIT_INCOMPLETE, RagmeterError
from ragmeter.core.reasons import detailed
from ragmeter.core.redact import endpoint_id, redact
from ragmeter.llm.config import JudgeConfigError
from ragmeter.llm.request import FAILED, OK, JudgeRequest, JudgeResult
from ragmeter.llm.structured import ReplyParseError, parse_reply, refusal
from ragmeter.llm.transport import HTTP_STATUS, Transport, TransportError, choose_package

#: kv namespace of the stored batches (one record per batch, keyed by ragmeter's batch id)
NAMESPACE = "judge_batches"
#: the largest results file read (MB)
_MAX_RESULTS_MB = 1024
#: stored states of a batch that are not finished
OPEN = ("to submit", "submitted")


class BatchPending(RagmeterError):
    """``--no-wait``: the run's batch is submitted and stored; the run is ``pending`` (exit 3)."""

    exit_code = EXIT_INCOMPLETE
    run_status = "pending"

    def __init__(self, message: str, batch_ids: list[str] | None = None, run_id: str | None = None) -> None:
        super().__init__(message)
        self.batch_ids, self.run_id = list(batch_ids or ()), run_id


def poll_cap(cfg: Any) -> float:
    """The longest wait between two polls (s): ``$RAGMETER_BATCH_POLL``, else ``judge_batch_poll``."""
    env = os.environ.get("RAGMETER_BATCH_POLL")
    try:
        return max(0.01, float(env)) if env else cfg.batch_poll
    except ValueError:
        raise JudgeConfigError(f"RAGMETER_BATCH_POLL={env!r} must be a number of seconds") from None


# ---- the providers' batch endpoints ------------------------------------------------------------------
class _Batches:
    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.t: Transport | None = None

    def _transport(self, base: str, headers: dict[str, str]) -> Transport:
        return Transport(base, headers, timeout=self.cfg.timeout, package=choose_package(self.cfg.http_client),
                         max_reply=_MAX_RESULTS_MB * 1024 * 1024)

    async def start(self) -> None:
        self.t = self._transport(self.base, self.headers)
        await self.t.start()

    async def close(self) -> None:
        if self.t is not None:
            await self.t.close()

    async def lines(self, path: str) -> list[dict[str, Any]]:
        assert self.t is not None
        data, _ = await self.t.get(path)
        if isinstance(data, dict):
            return [data]
        return [json.loads(ln) for ln in str(data or "").splitlines() if ln.strip()]


class OpenAIBatches(_Batches):
    """OpenAI's files and batches endpoints (and compatible servers')."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        from ragmeter.llm.providers import OPENAI_URL

        self.base = (cfg.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")
        self.headers = {"Authorization": f"Bearer {cfg.api_key() or 'not-needed'}"}

    def line(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body}

    async def find(self, bid: str, rec: dict[str, Any]) -> str | None:
        assert self.t is not None
        data, _ = await self.t.get("/batches?limit=100")
        for b in (data or {}).get("data") or []:
            if (b.get("metadata") or {}).get("ragmeter_batch") == bid:
                return str(b["id"])
        return None

    async def submit(self, bid: str, rec: dict[str, Any], lines: list[dict[str, Any]]) -> str:
        assert self.t is not None
        boundary = "ragmeter" + uuid.uuid4().hex
        jsonl = "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines)
        form = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="ragmeter-{bid}.jsonl"\r\n'
                f"Content-Type: application/jsonl\r\n\r\n{jsonl}\r\n--{boundary}--\r\n").encode()
        upload = self._transport(self.base, {**self.headers, "Content-Type": f"multipart/form-data; boundary={boundary}"})
        await upload.start()
        try:
            f, _ = await upload.post("/files", form)
        finally:
            await upload.close()
        b, _ = await self.t.post("/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "metadata": {"ragmeter_run": str(rec.get("run_id") or ""), "ragmeter_batch": bid}})
        return str(b["id"])

    async def status(self, pid: str) -> dict[str, Any]:
        assert self.t is not None
        b, _ = await self.t.get(f"/batches/{pid}")
        counts = b.get("request_counts") or {}
        state = b.get("status") or "unknown"
        return {"status": state, "done": state in {"completed", "failed", "expired", "cancelled"},
                "total": int(counts.get("total") or 0),
                "finished": int(counts.get("completed") or 0) + int(counts.get("failed") or 0), "raw": b}

    async def results(self, st: dict[str, Any]) -> dict[str, tuple[dict[str, Any] | None, str | None]]:
        """``{custom_id: (reply body, None) or (None, the provider's reason)}``."""
        b = st["raw"]
        out: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        for fid in (b.get("output_file_id"), b.get("error_file_id")):
            if not fid:
                continue
            for ln in await self.lines(f"/files/{fid}/content"):
                resp, err = ln.get("response") or {}, ln.get("error")
                body = resp.get("body")
                if not err and resp.get("status_code") == 200 and isinstance(body, dict):
                    out[str(ln.get("custom_id"))] = (body, None)
                    continue
                if not err and isinstance(body, dict):
                    err = body.get("error")
                msg = (err or {}).get("message") if isinstance(err, dict) else None
                code = (err or {}).get("code") if isinstance(err, dict) else None
                said = f"{code}: {msg}" if code and msg else msg or code or f"HTTP {resp.get('status_code')}"
                out[str(ln.get("custom_id"))] = (None, str(said))
        return out

    async def cancel(self, pid: str) -> None:
        assert self.t is not None
        await self.t.post(f"/batches/{pid}/cancel", {})


class AnthropicBatches(_Batches):
    """Anthropic's Message Batches API."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        from ragmeter.llm.providers import ANTHROPIC_URL, ANTHROPIC_VERSION

        self.base = (cfg.base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL).rstrip("/")
        self.headers = {"x-api-key": cfg.api_key() or "", "anthropic-version": ANTHROPIC_VERSION}

    def line(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": key, "params": body}

    async def find(self, bid: str, rec: dict[str, Any]) -> str | None:
        # Message Batches carry no metadata: a batch created since the record was stored with
        # its number of requests, not adopted by another record, is the one sent
        assert self.t is not None
        data, _ = await self.t.get("/v1/messages/batches?limit=100")
        taken = set(rec.get("_taken") or ())
        for b in (data or {}).get("data") or []:
            counts = b.get("request_counts") or {}
            if b.get("id") in taken or sum(int(v or 0) for v in counts.values()) != len(rec["keys"]):
                continue
            if _epoch(b.get("created_at")) >= float(rec["stored_at"]) - 5:
                return str(b["id"])
        return None

    async def submit(self, bid: str, rec: dict[str, Any], lines: list[dict[str, Any]]) -> str:
        assert self.t is not None
        b, _ = await self.t.post("/v1/messages/batches", {"requests": lines})
        return str(b["id"])

    async def status(self, pid: str) -> dict[str, Any]:
        assert self.t is not None
        b, _ = await self.t.get(f"/v1/messages/batches/{pid}")
        counts = {k: int(v or 0) for k, v in (b.get("request_counts") or {}).items()}
        state = b.get("processing_status") or "unknown"
        return {"status": state, "done": state == "ended", "total": sum(counts.values()),
                "finished": sum(v for k, v in counts.items() if k != "processing"), "raw": b}

    async def results(self, st: dict[str, Any]) -> dict[str, tuple[dict[str, Any] | None, str | None]]:
        url = st["raw"].get("results_url") or f"{self.base}/v1/messages/batches/{st['raw']['id']}/results"
        path = url[len(self.base):] if url.startswith(self.base) else url
        out: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        for ln in await self.lines(path):
            r = ln.get("result") or {}
            if r.get("type") == "succeeded" and isinstance(r.get("message"), dict):
                out[str(ln.get("custom_id"))] = (r["message"], None)
                continue
            err = (r.get("error") or {}).get("error") or r.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else None
            kind = str(r.get("type"))
            msg = msg or {"expired": "the request was not processed before the batch's 24-hour window ended",
                          "canceled": "the batch was cancelled before this request was processed"}.get(kind)
            out[str(ln.get("custom_id"))] = (None, f"{kind}: {msg}" if msg else kind)
        return out

    async def cancel(self, pid: str) -> None:
        assert self.t is not None
        await self.t.post(f"/v1/messages/batches/{pid}/cancel", {})


def _epoch(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def batches_api(cfg: Any) -> OpenAIBatches | AnthropicBatches:
    if cfg.provider == "openai":
        return OpenAIBatches(cfg)
    if cfg.provider == "anthropic":
        return AnthropicBatches(cfg)
    raise JudgeConfigError(f"--batch needs an OpenAI-compatible or Anthropic judge; {cfg.label} has no "
                           "batch endpoint ragmeter uses")


# ---- the stored records -------------------------------------------------------------------------------
def stored_batches(store: Any, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """The stored batches (of one run), ``{ragmeter batch id: record}``."""
    if store is None:
        return {}
    recs = store.kv_list(NAMESPACE)
    return {k: v for k, v in recs.items() if run_id is None or v.get("run_id") == run_id}


def batch_figures(store: Any, run_id: str | None) -> dict[str, int]:
    """What a run sent through batch APIs (for ``show`` and the summary): ``batches``, and
    ``batched`` requests (their cost is in ``cost_usd``, at the batch price)."""
    recs = [r for r in stored_batches(store, run_id).values() if r.get("provider_id")]
    return {"batches": len(recs), "batched": sum(len(r.get("keys") or ()) for r in recs)}


def _save(store: Any, bid: str, rec: dict[str, Any]) -> None:
    if store is not None:
        store.kv_put(NAMESPACE, bid, {k: v for k, v in rec.items() if not k.startswith("_")})


def _sync(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _api_call(loop: asyncio.AbstractEventLoop, coro: Any, what: str, cfg: Any) -> Any:
    try:
        return _sync(loop, coro)
    except TransportError as err:
        if err.kind == HTTP_STATUS and err.status in {404, 405}:
            raise JudgeConfigError(f"judge {cfg.label}: the endpoint has no batch API ({what}: HTTP {err.status}); "
                                   "run without --batch") from None
        raise JudgeConfigError(f"judge {cfg.label}: {what} failed: {redact(str(err))}") from None


# ---- the service's batch round ----------------------------------------------------------------------
def batch_stream(service: Any, requests: list[JudgeRequest], keys: list[str], todo: list[int],
                 results: list[JudgeResult | None]) -> Iterator[list[int]]:
    """Send the requests ``todo`` (indices) as provider batches, or adopt this run's stored ones;
    wait, fill ``results`` and yield the indices answered, accounted (as ``_call_stream`` does).

    Raises:
        BatchPending: ``judge_batch_wait`` is off: the batches are submitted and stored.
    """
    cfg, store = service.cfg, service.store
    loop = service._ensure_loop()
    client = service._client
    api = batches_api(cfg)
    where = endpoint_id(cfg.base_url)
    by_key: dict[str, int] = {keys[i]: i for i in todo}
    jobs: list[tuple[str, dict[str, Any]]] = []
    covered: set[str] = set()
    # any run's batch still open with these requests is collected, not sent again: a resumed run's
    # own, and one a killed or --no-wait `meta-eval` / `golden generate` left (a re-run is a new run)
    for bid, rec in stored_batches(store).items():
        if rec.get("state") in OPEN and rec.get("endpoint") == where and rec.get("model") == cfg.model:
            mine = [k for k in rec.get("keys", ()) if k in by_key and k not in covered]
            if mine:
                jobs.append((bid, rec))
                covered.update(mine)
    rest = [keys[i] for i in todo if keys[i] not in covered]
    if rest:
        bid = uuid.uuid4().hex[:12]
        rec = {"run_id": service.run_id, "provider": cfg.provider, "model": cfg.model, "judge": cfg.label,
               "endpoint": where, "state": "to submit", "provider_id": None, "keys": rest,
               "stored_at": time.time(), "status": None}
        _save(store, bid, rec)  # before anything is sent
        jobs.append((bid, rec))
    _sync(loop, api.start())
    try:
        yield from _run_jobs(service, api, loop, client, jobs, requests, keys, by_key, results)
    finally:
        _sync(loop, api.close())


def _body(client: Any, req: JudgeRequest, max_tokens: int) -> dict[str, Any]:
    base = [dict(m) for m in req.messages] if req.messages else [{"role": "user", "content": req.user}]
    sampling = dict(req.sampling) if req.sampling else None
    if getattr(client, "provider", "") == "openai":
        return client.build(req.system, base, req.schema, max_tokens, sampling, req.logprobs)
    return client.build(req.system, base, req.schema, max_tokens, sampling)


def _run_jobs(service: Any, api: Any, loop: Any, client: Any, jobs: list[tuple[str, dict[str, Any]]],
              requests: list[JudgeRequest], keys: list[str], by_key: dict[str, int],
              results: list[JudgeResult | None]) -> Iterator[list[int]]:
    cfg, store = service.cfg, service.store
    taken = {r.get("provider_id") for _, r in stored_batches(store).items() if r.get("provider_id")}
    for bid, rec in jobs:
        if rec["state"] != "to submit":
            continue
        found = _api_call(loop, api.find(bid, {**rec, "_taken": taken}), "listing the batches", cfg)
        if found is None:
            lines = [api.line(k, _body(client, requests[by_key[k]], requests[by_key[k]].max_tokens or cfg.max_tokens))
                     for k in rec["keys"] if k in by_key]
            found = _api_call(loop, api.submit(bid, rec, lines), "submitting the batch", cfg)
        rec.update(provider_id=found, state="submitted")
        taken.add(found)
        _save(store, bid, rec)
    if not cfg.batch_wait:
        ids = [str(r["provider_id"]) for _, r in jobs if r["state"] != "collected"]
        then = (f"`ragmeter eval --resume {service.run_id}` collects it" if service.run_id else
                "the same command run again collects it")
        raise BatchPending(f"judge batch {', '.join(ids)} submitted"
                           + (f" for run {service.run_id}; the run is pending" if service.run_id else "")
                           + f": `ragmeter batches` shows it, {then}", ids, service.run_id)
    fallback: list[int] = []
    cap = poll_cap(cfg)
    price = batch_price(service)
    for bid, rec in jobs:
        advance = service.progress(f"judge batch {rec['provider_id']}", len(rec["keys"]))
        wait, shown = min(1.0, cap), 0
        while True:
            try:
                st = _sync(loop, api.status(rec["provider_id"]))
            except TransportError as err:
                if err.kind == HTTP_STATUS and err.status in {401, 403, 404}:
                    raise JudgeConfigError(f"judge {cfg.label}: batch {rec['provider_id']}: {redact(str(err))}") from None
                st = None  # a transient failure: asked again at the next poll
            if st is not None:
                if st["finished"] > shown:
                    advance(st["finished"] - shown)
                    shown = st["finished"]
                if rec.get("status") != st["status"]:
                    rec["status"] = st["status"]
                    _save(store, bid, rec)
                if st["done"]:
                    break
            time.sleep(wait)
            wait = min(cap, wait * 1.5)
        got = _api_call(loop, api.results(st), "reading the batch results", cfg)
        done: list[int] = []
        for k in rec["keys"]:
            i = by_key.get(k)
            if i is None or results[i] is not None:
                continue
            body, said = got.get(k, (None, None))
            if body is None:
                said = said or f"the batch ended '{st['status']}' before this request was answered"
                head = said.split(":", 1)[0]
                kind = ("batch expired" if "expired" in head or st["status"] == "expired" else
                        "batch cancelled" if "cancel" in head or st["status"] in {"cancelled", "canceled"} else
                        "batch request failed")
                res = JudgeResult(FAILED, k, reason=detailed(f"judge failure: {kind}", said), error=said, attempts=1)
            else:
                res = _verdict(service, client, requests[i], k, body, price)
            if not res.ok and cfg.batch_fallback == "online":
                fallback.append(i)
                continue
            results[i] = res
            service._account(requests[i], res)
            done.append(i)
        if done:
            yield done  # the service stores these verdicts before the generator resumes
        rec["state"] = "collected"
        _save(store, bid, rec)
    if fallback:
        yield from service._call_stream(requests, keys, fallback, results, None)


def batch_price(service: Any) -> Any:
    """The judge model's price through its provider's batch API (``None``: no price known)."""
    if service.price is None:
        return None
    cfg = service.cfg
    return service.prices.get(cfg.provider, cfg.model, cfg.base_url, batch=True)


def _verdict(service: Any, client: Any, req: JudgeRequest, key: str, body: dict[str, Any],
             price: Any) -> JudgeResult:
    """A batch reply -> the request's result, parsed and checked as an online reply is, priced at
    the batch ``price`` with the prompt-cache tokens it reports."""
    reply = client.parse(body)
    cached, written = getattr(reply, "cached_tokens", 0) or 0, getattr(reply, "cache_write_tokens", 0) or 0
    cost = price.cost(reply.input_tokens, reply.output_tokens, cached, written) if price else 0.0
    service._spent += cost
    common = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens, "cached_tokens": cached,
              "cache_write_tokens": written, "cost_usd": cost if price else None, "attempts": 1, "latency_ms": 0.0}
    try:
        value = parse_reply(reply.text, req.schema, reply.data)
        if req.validate is not None:
            req.validate(value)
    except (ReplyParseError, ValueError) as exc:
        refused = refusal(reply.text, reply.finish_reason)
        why = refused or str(exc)
        kind = "refused" if refused else "invalid reply"
        return JudgeResult(FAILED, key, reason=detailed(f"judge failure: {kind}", why), error=why, raw=reply.raw, **common)
    return JudgeResult(OK, key, value=value, raw=reply.raw,
                       logprobs=reply.logprobs if req.logprobs else None, **common)


def cancel_batch(store: Any, bid: str, cfg: Any) -> dict[str, Any]:
    """Cancel a stored batch at its provider (by ragmeter's or the provider's id); the record is
    kept with state ``cancelled``."""
    from ragmeter.llm.runtime import _Runtime

    recs = stored_batches(store)
    hit = [(k, r) for k, r in recs.items() if bid in {k, r.get("provider_id")}]
    if not hit:
        raise JudgeConfigError(f"no stored batch {bid!r}: `ragmeter batches` lists them")
    key, rec = hit[0]
    if rec.get("provider_id"):
        api = batches_api(cfg)
        loop = _Runtime.get().loop

        async def go() -> None:
            await api.start()
            try:
                await api.cancel(rec["provider_id"])
            finally:
                await api.close()

        _api_call(loop, go(), "cancelling the batch", cfg)
    rec["state"] = "cancelled"
    _save(store, key, rec)
    return {"batch": key, **rec}
