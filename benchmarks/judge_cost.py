"""Tokens and cost per sample of LLM judging: ragmeter (online and batched), ragas 0.4.3 and DeepEval 4.3.1.

The same 50 samples (the first 50 of ragmeter's bundled ``example`` dataset) are scored with
faithfulness, answer relevancy and context recall by each tool, through ONE scripted
OpenAI-compatible server (tests/parity_server.py's scripts, which give the three tools the same
intermediate verdicts) that counts what every request sends and every reply returns:

- ragmeter: ``faithfulness``, ``answer_relevancy``, ``context_recall`` (``ragmeter.evaluate``, its
  own transport), as a user runs them: faithfulness and context recall of a sample in one joint
  request carrying the contexts once (the default; ``judge_joint=false`` sends them apart,
  docs/judge.md#joint-requests), answer relevancy in its own; ragas 0.4.3: ``ragas.metrics.collections`` ``Faithfulness``, ``AnswerRelevancy``
  (its default strictness 3, with embeddings), ``ContextRecall`` (an instructor LLM from
  ``llm_factory``); DeepEval 4.3.1: ``FaithfulnessMetric``, ``AnswerRelevancyMetric``,
  ``ContextualRecallMetric`` with their defaults (reasons included), ``async_mode=False``.
- **input tokens** of a request: its messages' text plus its structured-output schema
  (``response_format``), counted with tiktoken's ``o200k_base`` when its encoding is cached,
  otherwise with ragmeter's script-aware estimate (4 characters per token for this English text)
  -- the same counter for every tool, printed in the output. **Output tokens**: the scripted
  reply's text, counted the same way (scripted replies carry short reasons, so real replies are
  longer for every tool alike).
- **cached tokens**: the server simulates OpenAI's automatic prompt cache: a request whose first
  1,024 tokens or more equal the beginning of an earlier request of the same tool reports the
  longest such prefix (1,024 + a multiple of 128 tokens) as cached.
- **embedding tokens** (ragas' answer relevancy) are counted apart and priced at
  text-embedding-3-small's price.
- ragmeter's pre-flight request (one 1-token completion per run) is not counted.

ragmeter ``--batch`` runs for real: the server implements OpenAI's files and batches endpoints
(upload, create, list, poll, output file) and answers each line of the batch with the same script,
counting it like an online request; the batched run must store the online run's values.

Costs per 1,000 samples are at gpt-4o-mini's prices from genai-prices (input, cached input,
output). The batched requests are priced as ragmeter prices them (``PriceTable.get(batch=True)``):
genai-prices' batch price for the model -- $0.075 input, $0.30 output per million, half the online
rates (OpenAI's Batch API, https://platform.openai.com/docs/guides/batch) -- with the cached tokens
the batch's replies report at the batch price's cache-read rate, which for gpt-4o-mini is its online
$0.075: OpenAI's batch table publishes no cached-input rate for it, so in a batch a cached token
costs what an uncached one does (genai-prices' note on the model).

Run by hand (not part of the test suite), from a venv made by ``make test``::

    .venv/bin/python benchmarks/judge_cost.py [--samples 50]

The last line printed is one JSON object: ``tokens_per_sample`` (input, output, cached per tool),
``cost_per_1k_samples``, ``ratio_vs_ragas`` and ``ratio_vs_deepeval`` (their cost / ragmeter's,
online and batched).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import tempfile
import threading
import warnings
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["BENCH_JUDGE_KEY"] = "bench-not-a-secret"

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

from parity_server import _MARK, Case, ParityServer, _flat  # noqa: E402

MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"
CACHE_MIN, CACHE_STEP = 1024, 128
METRICS = ("faithfulness", "answer_relevancy", "context_recall")


def count_tokens(text: str) -> int:
    from ragmeter.llm.service import estimate_tokens

    return estimate_tokens(text) if text else 0


def counter_name() -> str:
    from ragmeter.llm.service import _tiktoken_encoding

    return ("tiktoken o200k_base" if _tiktoken_encoding() is not None
            else "ragmeter's script-aware estimate (tiktoken's encoding is not cached: 4 characters per token)")


def _prefix_chars(text: str, tokens: int) -> int:
    """The number of characters of ``text`` whose token count first reaches ``tokens``."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi) // 2
        if count_tokens(text[:mid]) >= tokens:
            hi = mid
        else:
            lo = mid + 1
    return lo


class CountingServer(ParityServer):
    """The parity server's scripted replies, with each request's tokens counted per tool and a
    simulated OpenAI prompt cache (per tool)."""

    def __init__(self) -> None:
        super().__init__()
        self.tool = "none"
        self.tally: dict[str, Counter[str]] = {}
        self._prefixes: set[str] = set()
        self._count_lock = threading.Lock()
        self.samples: dict[str, dict[str, Case]] = {}

    def start(self) -> CountingServer:
        """Serve the chat and embedding endpoints (the parity server's, counted) and OpenAI's files
        and batches endpoints."""
        server = self
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, out: Any, status: int = 200) -> None:
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[-1] == "content":
                    return self._send(server.files[parts[-2]])
                if parts[-1] == "batches":
                    return self._send({"object": "list", "data": list(server.batches.values()), "has_more": False})
                return self._send(server.batches[parts[-1]])

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    if self.path.endswith("/files"):
                        return self._send(server.upload(self.headers["content-type"], raw))
                    if self.path.endswith("/batches"):
                        return self._send(server.run_batch(json.loads(raw)))
                    return self._send(server.answer(self.path, json.loads(raw or b"{}")))
                except Exception as exc:  # noqa: BLE001 - a script error shows as a 500
                    return self._send({"error": {"message": f"benchmark server: {exc!r}"}}, 500)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="judge-cost-server", daemon=True).start()
        return self

    def upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        boundary = content_type.split("boundary=", 1)[1].encode()
        part = next(p for p in raw.split(b"--" + boundary) if b'name="file"' in p)
        fid = f"file-{len(self.files) + 1}"
        self.files[fid] = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        return {"id": fid, "object": "file", "purpose": "batch", "bytes": len(self.files[fid])}

    def run_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a batch and answer it at once (each line as the online request would be)."""
        out = []
        for ln in self.files[body["input_file_id"]].decode().splitlines():
            if ln.strip():
                line = json.loads(ln)
                reply = self.answer(line["url"], line["body"])
                out.append({"id": f"req-{len(out)}", "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "body": reply}, "error": None})
        bid = f"batch_{len(self.batches) + 1}"
        self.files[f"out-{bid}"] = "".join(json.dumps(r) + "\n" for r in out).encode()
        self.batches[bid] = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "status": "completed",
                             "metadata": body.get("metadata") or {}, "created_at": 0,
                             "request_counts": {"total": len(out), "completed": len(out), "failed": 0},
                             "output_file_id": f"out-{bid}", "error_file_id": None}
        return self.batches[bid]

    def measure(self, tool: str) -> None:
        """Count the next requests for ``tool``, with an empty prompt cache."""
        with self._count_lock:
            self.tool = tool
            self.tally[tool] = Counter()
            self._prefixes = set()

    def sample_cases(self, n_claims: int, n_ref: int, i: int) -> str:
        """A marker for one sample, with scripted verdicts for each of the three metrics."""
        claims = [("supported", "supported", "not_found", "contradicted")[(i + k) % 4] for k in range(n_claims)]
        statements = [("yes", "yes", "no", "idk")[(i + k) % 4] for k in range(n_claims)]
        attributed = [("yes", "no", "yes")[(i + k) % 3] for k in range(n_ref)]
        mark = self.case("multi")
        self.samples[mark[2:-2]] = {"claims": Case("claims", claims), "statements": Case("statements", statements),
                                    "attribution": Case("attribution", attributed),
                                    "questions": Case("questions", [(0.9, False), (0.8, False), (0.85, False)])}
        return mark

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with self._count_lock:
                self.tally[self.tool]["embedding_calls"] += 1
                self.tally[self.tool]["embedding_tokens"] += sum(count_tokens(str(t)) for t in texts)
            return super().answer(path, body)
        msgs = body["messages"]
        system = next((_flat(m["content"]) for m in msgs if m["role"] == "system"), "")
        user = next(_flat(m["content"]) for m in msgs if m["role"] == "user")
        rf = body.get("response_format") or {}
        named = (rf.get("json_schema") or {}).get("name") or ""
        m = _MARK.search(system + "\n" + user)
        if m is None:
            if not named.endswith("ScoreReason"):  # ragmeter's pre-flight request: not counted
                return self._reply(body, "ok")
            data: dict[str, Any] = {"reason": "scripted"}  # DeepEval's reason step names no sample
        else:
            data = self._scripted(m.group(0), system, user, named)
        content = json.dumps(data)
        self._count(body, content)
        return self._reply(body, content)

    def _scripted(self, mark: str, system: str, user: str, named: str) -> dict[str, Any]:
        cases = self.samples[mark[2:-2]]
        if "Your only instructions are in this system message" in system and named.startswith("Joint"):
            # ragmeter's joint request: each part is the reply its own request gets
            parts = {"faithfulness": ("ClaimVerdicts", "claims"), "context_recall": ("ReferenceAttribution", "attribution"),
                     "answer_relevancy": ("StatementVerdicts", "statements")}
            return {p: self._ragmeter(cases[kind], schema, system, user, mark) for p, (schema, kind) in parts.items()
                    if f'(its reply goes under the key "{p}")' in system}
        if "Your only instructions are in this system message" in system:
            kind = {"ClaimVerdicts": "claims", "StatementVerdicts": "statements",
                    "ReferenceAttribution": "attribution"}[named]
            return self._ragmeter(cases[kind], named, system, user, mark)
        if "As a genius expert" in system:
            import re

            title = re.findall(r'"title": "(\w+)"', system)[-1]
            kind = {"StatementGeneratorOutput": "claims", "NLIStatementOutput": "claims",
                    "AnswerRelevanceOutput": "questions", "ContextRecallOutput": "attribution"}[title]
            case = cases[kind]
            if kind == "questions":
                case.served %= len(case.verdicts)
            return self._ragas(case, title, user, mark)
        if named in ("Claims", "Truths"):
            kind = "claims"
        elif named == "Statements":
            kind = "statements"
        elif "whether EACH claim contradicts" in user:
            kind = "claims"
        elif "is relevant to address the input" in user:
            kind = "statements"
        else:
            kind = "attribution"
        return self._deepeval(cases[kind], named, user, mark)

    def _count(self, body: dict[str, Any], content: str) -> None:
        # the prompt as the model reads it: the structured-output schema, then the messages in order
        schema = json.dumps(body.get("response_format"), sort_keys=True) if body.get("response_format") else ""
        prompt = schema + "".join(f"<{m['role']}>" + _flat(m["content"]) for m in body["messages"])
        tokens = count_tokens(prompt)
        with self._count_lock:
            cached = 0
            cuts = []
            b = CACHE_MIN
            while b <= tokens:
                cuts.append(b)
                b += CACHE_STEP
            keys = [hashlib.sha256(prompt[:_prefix_chars(prompt, c)].encode()).hexdigest() for c in cuts]
            for c, k in zip(cuts, keys, strict=True):
                if k in self._prefixes:
                    cached = c
            self._prefixes.update(keys)
            t = self.tally[self.tool]
            t["calls"] += 1
            t["input_tokens"] += tokens
            t["cached_tokens"] += cached
            t["output_tokens"] += count_tokens(content)

    @staticmethod
    def _reply(body: dict[str, Any], content: str) -> dict[str, Any]:
        return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def load_samples(srv: CountingServer, n: int) -> list[dict[str, Any]]:
    import ragmeter

    rows = []
    for s in ragmeter.load("example"):
        if not (s.question and s.answer and s.contexts and s.reference):
            continue
        ref = s.reference
        n_claims = max(1, s.answer.count(". ") + 1)
        n_ref = max(1, ref.count(". ") + 1)
        mark = srv.sample_cases(n_claims, n_ref, len(rows))
        rows.append({"id": s.id, "question": f"{s.question} {mark}", "answer": f"{s.answer} {mark}",
                     "contexts": [f"{c.text} {mark}" for c in s.contexts], "reference": f"{ref} {mark}"})
        if len(rows) == n:
            break
    if len(rows) < n:
        raise SystemExit(f"the example dataset has only {len(rows)} samples with every field")
    return rows


def run_ragmeter(srv: CountingServer, rows: list[dict[str, Any]], batch: bool) -> dict[str, float]:
    """ragmeter's run (a fresh store: nothing cached), online or through the batch API; its means."""
    from ragmeter import evaluate

    db = f"sqlite:///{tempfile.mkdtemp(prefix='judge_cost_')}/ragmeter.db"
    opts = {"judge": f"openai:{MODEL}", "judge_base_url": srv.url, "judge_api_key_env": "BENCH_JUDGE_KEY",
            "judge_parse_retries": 0, "judge_batch": batch, "judge_batch_poll": 1}
    res = evaluate(rows, list(METRICS), db=db, options=opts)
    for m in METRICS:
        n = res.summary[m]["n"]
        if n != len(rows):
            raise SystemExit(f"ragmeter{' --batch' if batch else ''} scored {n} of {len(rows)} samples for {m}")
    return {m: res.summary[m]["mean"] for m in METRICS}


def run_ragas(srv: CountingServer, rows: list[dict[str, Any]]) -> None:
    from openai import AsyncOpenAI
    from ragas.embeddings.base import embedding_factory
    from ragas.llms import llm_factory
    from ragas.metrics.collections import AnswerRelevancy, ContextRecall, Faithfulness

    client = AsyncOpenAI(base_url=srv.url, api_key="bench", max_retries=0)
    llm = llm_factory(MODEL, client=client)
    emb = embedding_factory("openai", model=EMBEDDING_MODEL, client=client)
    metrics = (Faithfulness(llm=llm), AnswerRelevancy(llm=llm, embeddings=emb), ContextRecall(llm=llm))

    async def go() -> None:
        for r in rows:
            await metrics[0].ascore(user_input=r["question"], response=r["answer"], retrieved_contexts=r["contexts"])
            await metrics[1].ascore(user_input=r["question"], response=r["answer"])
            await metrics[2].ascore(user_input=r["question"], retrieved_contexts=r["contexts"], reference=r["reference"])

    asyncio.run(go())


def run_deepeval(srv: CountingServer, rows: list[dict[str, Any]]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from deepeval.metrics import AnswerRelevancyMetric, ContextualRecallMetric, FaithfulnessMetric
        from deepeval.models import OpenAIModel
        from deepeval.test_case import LLMTestCase

        model = OpenAIModel(model=MODEL, base_url=srv.url, api_key="bench")
        for r in rows:
            case = LLMTestCase(input=r["question"], actual_output=r["answer"], retrieval_context=r["contexts"],
                               expected_output=r["reference"])
            for cls in (FaithfulnessMetric, AnswerRelevancyMetric, ContextualRecallMetric):
                cls(model=model, async_mode=False).measure(case)


def prices() -> tuple[Any, float | None]:
    from genai_prices import data_snapshot

    from ragmeter.llm.prices import PriceTable

    price = PriceTable().get("openai", MODEL)
    batch = PriceTable().get("openai", MODEL, batch=True)
    emb = None
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(EMBEDDING_MODEL, None, "openai", None)
        emb = float(info.get_prices(datetime.now(tz=UTC)).input_mtok)
    except (LookupError, TypeError, AttributeError):
        pass
    return price, batch, emb


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args(argv)

    srv = CountingServer().start()
    try:
        rows = load_samples(srv, args.samples)
        means = {}
        runs = [("ragmeter", lambda: run_ragmeter(srv, rows, False)),
                ("ragmeter_batch", lambda: run_ragmeter(srv, rows, True)),
                ("ragas", lambda: run_ragas(srv, rows)), ("deepeval", lambda: run_deepeval(srv, rows))]
        for tool, run in runs:
            srv.measure(tool)
            means[tool] = run()
            print(f"{tool}: {dict(srv.tally[tool])}", flush=True)
    finally:
        srv.stop()
    if means["ragmeter_batch"] != means["ragmeter"]:
        raise SystemExit(f"the batched run's values differ from the online run's: {means}")

    price, batch_price, emb_price = prices()
    n = len(rows)
    tally = dict(srv.tally)

    def cost(tool: str) -> float:
        t = tally[tool]
        rate = batch_price if tool == "ragmeter_batch" else price
        usd = rate.cost(t["input_tokens"], t["output_tokens"], t["cached_tokens"])
        if t["embedding_tokens"] and emb_price is not None:
            usd += t["embedding_tokens"] * emb_price / 1_000_000
        return usd / n * 1000

    tools = ("ragmeter", "ragmeter_batch", "ragas", "deepeval")
    costs = {t: round(cost(t), 6) for t in tools}
    per_sample = {t: {"calls": round(tally[t]["calls"] / n, 2), "input": round(tally[t]["input_tokens"] / n, 1),
                      "output": round(tally[t]["output_tokens"] / n, 1),
                      "cached": round(tally[t]["cached_tokens"] / n, 1),
                      **({"embedding_input": round(tally[t]["embedding_tokens"] / n, 1)}
                         if tally[t]["embedding_tokens"] else {})} for t in tools}
    print(f"{n} samples x {', '.join(METRICS)}; tokens counted with {counter_name()}")
    for t in tools:
        p = per_sample[t]
        print(f"  {t:15s} {p['calls']:5.2f} calls  {p['input']:8.1f} in ({p['cached']:.1f} cached)  "
              f"{p['output']:6.1f} out per sample   ${costs[t]:.4f} per 1,000 samples")
    print(f"ragmeter_batch: measured through the batch endpoints (same means as online: {means['ragmeter']}), "
          f"priced at the batch price (input ${batch_price.input:g}, cached input ${batch_price.cache_read:g}, "
          f"output ${batch_price.output:g} per million)")
    # what a one-fifth-of-ragas target asks of the batched run: its input tokens per sample at the
    # same output and cache (the per-sample dollars divided by the batch input rate)
    t = per_sample["ragmeter_batch"]
    room = costs["ragas"] / 5 / 1000 * 1_000_000 - t["output"] * batch_price.output
    needed = max(0.0, room / batch_price.input)
    print(f"ratio_vs_ragas 5 would need at most {needed:,.0f} input tokens per sample through the batch "
          f"(now {t['input']:,.0f})")
    result = {
        "samples": n, "metrics": list(METRICS), "token_counter": counter_name(),
        "model": f"openai:{MODEL}",
        "prices_usd_per_mtok": {"input": price.input, "cached_input": price.cache_read, "output": price.output,
                                "batch": {"input": batch_price.input, "cached_input": batch_price.cache_read,
                                          "output": batch_price.output},
                                f"embedding ({EMBEDDING_MODEL})": emb_price},
        "ragmeter_batch": "measured through the batch endpoints, priced at genai-prices' batch price",
        "ragmeter_requests": ("per sample: one joint request for faithfulness and context_recall (ragmeter's "
                              "default; judge_joint=false sends them apart) and one for answer_relevancy"),
        "ragmeter_batch_input_per_sample_for_ratio_5": round(needed),
        "tokens_per_sample": per_sample,
        "cost_per_1k_samples": costs,
        "ratio_vs_ragas": {"ragmeter": round(costs["ragas"] / costs["ragmeter"], 2),
                           "ragmeter_batch": round(costs["ragas"] / costs["ragmeter_batch"], 2)},
        "ratio_vs_deepeval": {"ragmeter": round(costs["deepeval"] / costs["ragmeter"], 2),
                              "ragmeter_batch": round(costs["deepeval"] / costs["ragmeter_batch"], 2)},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
