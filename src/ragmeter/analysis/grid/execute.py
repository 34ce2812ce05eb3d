"""Running the user's pipeline for one configuration over the questions, with the output cache
(kv namespace ``pipeline``, keyed by sha256 of target, version, params and question)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ragmeter.analysis.grid.plan import BUNDLED_PIPELINE_VERSION, KV_PIPELINE, Question
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Chunk, Sample

# ---- pipeline execution ----------------------------------------------------------------------------

def pipeline_version(fn: Callable[..., Any], target: str) -> str:
    if target.startswith("ragmeter.pipeline:"):
        from ragmeter._version import __version__

        return f"ragmeter-{__version__}-{BUNDLED_PIPELINE_VERSION}"
    import sys

    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    return str(getattr(fn, "__version__", None) or getattr(mod, "__version__", None) or "")


def cache_key(target: str, version: str, params: dict[str, Any], question: str) -> str:
    payload = json.dumps([target, version, params, question], sort_keys=True, default=str,
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _to_chunk(c: Any, where: str) -> Chunk:
    if isinstance(c, Chunk):
        return c
    if isinstance(c, str):
        return Chunk(text=c)
    if isinstance(c, Mapping):
        keep = {k: c[k] for k in ("text", "id", "source", "start", "end", "score", "grade") if k in c}
        if "page_content" in c and "text" not in keep:
            keep["text"] = c["page_content"]
        try:
            return Chunk.model_validate(keep)
        except Exception as exc:  # noqa: BLE001 - pydantic detail goes into the message
            raise ConfigError(f"{where}: invalid context {dict(c)!r}: {exc}") from exc
    raise ConfigError(f"{where}: a context must be text or a mapping, got {type(c).__name__}")


def _normalise_output(out: Any, where: str) -> dict[str, Any]:
    if not isinstance(out, Mapping):
        raise ConfigError(f"{where}: the pipeline must return {{'answer': ..., 'contexts': [...]}}, "
                          f"got {type(out).__name__}")
    answer = out.get("answer")
    if answer is not None and not isinstance(answer, str):
        answer = str(answer)
    ctx = out.get("contexts")
    if ctx is None:
        contexts = None
    elif isinstance(ctx, list | tuple):
        contexts = [_to_chunk(c, where).model_dump(exclude_none=True) for c in ctx]
    else:
        raise ConfigError(f"{where}: 'contexts' must be a list, got {type(ctx).__name__}")
    return {"answer": answer, "contexts": contexts}


@dataclass
class PipelineStats:
    """Pipeline work of a grid: calls made, outputs served from the cache, failures, and the
    distinct (configuration, question) pairs asked for."""

    calls: int = 0
    cached: int = 0
    errors: int = 0
    seconds: float = 0.0
    pairs: set[tuple[str, str]] = field(default_factory=set)


def run_pipeline(fn: Callable[..., Any], target: str, params: dict[str, Any], questions: Sequence[Question],
                 *, store: Any, use_cache: bool, workers: int,
                 stats: PipelineStats) -> list[dict[str, Any]]:
    """The pipeline's output for every question (cached in the store's ``pipeline`` kv namespace).

    A question whose call raises gets ``{"answer": None, "contexts": None, "error": "..."}`` (its
    metrics then have no value, with the reason); errors are not cached. A pipeline with a
    ``batch`` attribute is called once for all uncached questions; otherwise up to ``workers``
    threads call it question by question.
    """
    version = pipeline_version(fn, target)
    keys = [cache_key(target, version, params, q.text) for q in questions]
    sig = json.dumps(params, sort_keys=True, default=str)
    stats.pairs.update((sig, q.id) for q in questions)
    got: dict[int, dict[str, Any]] = {}
    if use_cache and store is not None:
        hits = store.kv_get_many(KV_PIPELINE, keys)
        for i, k in enumerate(keys):
            if k in hits:
                got[i] = hits[k]
        stats.cached += len(got)
    todo = [i for i in range(len(questions)) if i not in got]
    t0 = time.perf_counter()
    if todo:
        batch = getattr(fn, "batch", None)
        if callable(batch):
            try:
                outs = batch([questions[i].text for i in todo], **params)
                if len(outs) != len(todo):
                    raise ConfigError(f"pipeline {target}.batch returned {len(outs)} results for {len(todo)} questions")
                results = [(i, _normalise_output(o, f"pipeline {target} on {questions[i].id!r}"))
                           for i, o in zip(todo, outs, strict=True)]
            except ConfigError:
                raise
            except Exception:  # noqa: BLE001 - fall back to one call per question to isolate the failure
                results = _one_by_one(fn, target, params, questions, todo, workers)
        else:
            results = _one_by_one(fn, target, params, questions, todo, workers)
        stats.calls += len(todo)
        fresh = {}
        for i, out in results:
            got[i] = out
            if "error" in out:
                stats.errors += 1
            else:
                fresh[keys[i]] = out
        if use_cache and store is not None:
            for k, v in fresh.items():
                store.kv_put(KV_PIPELINE, k, v)
    stats.seconds += time.perf_counter() - t0
    return [got[i] for i in range(len(questions))]


def _one_by_one(fn: Callable[..., Any], target: str, params: dict[str, Any], questions: Sequence[Question],
                todo: list[int], workers: int) -> list[tuple[int, dict[str, Any]]]:
    def call(i: int) -> tuple[int, dict[str, Any]]:
        where = f"pipeline {target} on question {questions[i].id!r}"
        try:
            out = fn(questions[i].text, **params)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: record and go on
            return i, {"answer": None, "contexts": None, "error": f"{type(exc).__name__}: {exc}"}
        return i, _normalise_output(out, where)

    if workers <= 1 or len(todo) <= 1:
        return [call(i) for i in todo]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, todo))


def build_samples(questions: Sequence[Question], outputs: Sequence[dict[str, Any]],
                  params: dict[str, Any]) -> list[Sample]:
    """Samples to score: the dataset's question and ground truth with the pipeline's answer and contexts.

    When the relevant chunks and the pipeline's contexts all carry spans (source/start/end), the
    relevant chunks' ids are dropped: they name the dataset's own chunking, which a pipeline with
    another chunk size cannot share, so retrieval metrics (``match: auto``) then match by
    character span, the chunking-independent ground truth.
    """
    out = []
    for q, o in zip(questions, outputs, strict=True):
        meta = {**q.metadata, "config": params}
        if "error" in o:
            meta["pipeline_error"] = o["error"]
        contexts = [Chunk.model_validate(c) for c in o["contexts"]] if o.get("contexts") is not None else None
        relevant = q.relevant
        if relevant and contexts and all(c.has_span for c in relevant) and all(c.has_span for c in contexts):
            relevant = [c.model_copy(update={"id": None}) for c in relevant]
        out.append(Sample(id=q.id, question=q.text, answer=o.get("answer"), references=q.references,
                          negative_references=q.negative_references, contexts=contexts,
                          relevant=relevant, metadata=meta))
    return out
