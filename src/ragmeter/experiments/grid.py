"""Grid search over RAG configurations (seed 003): run the user's pipeline for every combination
of parameters, score each with the chosen correctness method and metrics, rank with confidence
intervals, say when the winner is within noise, re-rank the top N with an LLM judge after a cost
estimate, and store everything (one run per configuration, the ranking in the ``grid`` kv
namespace). Optional successive halving spends the budget on the promising configurations.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.config import load_config
from ragmeter.correctness.methods import METHODS, metric_for_method
from ragmeter.errors import ConfigError, RagmeterError
from ragmeter.experiments.statistics import holm, paired_permutation_test
from ragmeter.schema import Chunk, Sample

KV_GRID = "grid"
KV_PIPELINE = "pipeline"
CORRECTNESS_KEY = "correctness"
JUDGE_KEY = "judge_correctness"
#: bump when the bundled pipeline's behaviour changes, so cached outputs are not reused
BUNDLED_PIPELINE_VERSION = "1"

Log = Callable[[str], None]
Confirm = Callable[[dict[str, Any]], bool]


# ---- configuration -------------------------------------------------------------------------------

@dataclass
class HalvingConfig:
    """Successive halving: ``eta`` (keep the best 1/eta each round) and the smallest subset."""

    eta: int = 3
    min_questions: int = 8
    seed: int = 0


@dataclass
class GridConfig:
    """A grid search, usually read from a YAML/JSON file (see docs/experiments.md).

    Attributes:
        name: the grid's name (prefix of its runs' names).
        dataset: the questions and ground truth (path or ``example``).
        pipeline: ``module:function`` (default: the bundled ``ragmeter.pipeline:rag``).
        grid: list of ``{param: [values]}`` blocks; the configurations are the union of each
            block's cartesian product.
        fixed: pipeline parameters shared by every configuration.
        method / method_params: the correctness method (``semantic_guarded`` by default).
        metrics: more metrics for every configuration (retrieval, lexical ...).
        top_n: configurations re-evaluated with the LLM judge (0: none).
        alpha: significance level of the noise statements.
        workers: threads running the pipeline.
        cache: reuse stored pipeline outputs keyed by (pipeline, parameters, question).
        halving: successive halving settings, or ``None``.
        options: run options (``judge``, ``embedding_model`` ...).
    """

    name: str = "grid"
    dataset: str = "example"
    pipeline: str = "ragmeter.pipeline:rag"
    grid: list[dict[str, list[Any]]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    method: str = "semantic_guarded"
    method_params: dict[str, Any] = field(default_factory=dict)
    metrics: list[Any] = field(default_factory=list)
    top_n: int = 5
    alpha: float = 0.05
    workers: int = 2
    cache: bool = True
    halving: HalvingConfig | None = None
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "<config>"

    def configurations(self) -> list[dict[str, Any]]:
        """Every parameter combination, in file order, duplicates removed."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for block in self.grid:
            keys = list(block)
            for combo in itertools.product(*(block[k] for k in keys)):
                params = dict(zip(keys, combo, strict=True))
                sig = json.dumps(params, sort_keys=True, default=str)
                if sig not in seen:
                    seen.add(sig)
                    out.append(params)
        return out

    @property
    def varying(self) -> list[str]:
        keys: list[str] = []
        for block in self.grid:
            keys.extend(k for k in block if k not in keys)
        return keys


def parse_grid_config(source: str | Path | dict[str, Any], *, overrides: Mapping[str, Any] | None = None) -> GridConfig:
    """Read a grid config (YAML/JSON file or mapping).

    Keys: ``name``, ``dataset``, ``pipeline``, ``grid`` (a mapping ``param: [values]`` or a list of
    such mappings), ``method`` (a name, or ``{"name": ..., "params": {...}}``), ``metrics``,
    ``options`` and ``experiment`` (``top_n``, ``alpha``, ``workers``, ``cache``, ``fixed``,
    ``halving``: ``true`` or ``{"eta": 3, "min_questions": 8}``). ``overrides`` (e.g. from the
    command line) replace values in ``experiment``/top level.

    Raises:
        ConfigError: missing or malformed keys, naming the key.
    """
    cfg = load_config(source)
    where = cfg.get("source", "<config>")
    exp = dict(cfg.get("experiment") or {})
    if not isinstance(exp, dict):
        raise ConfigError(f"{where}: 'experiment' must be a mapping")
    raw_grid = cfg.get("grid")
    if raw_grid is None:
        raise ConfigError(f"{where}: a grid search needs 'grid' (param: [values], ...)")
    blocks = raw_grid if isinstance(raw_grid, list) else [raw_grid]
    grid: list[dict[str, list[Any]]] = []
    for b in blocks:
        if not isinstance(b, dict) or not b:
            raise ConfigError(f"{where}: 'grid' must be a mapping param -> list of values (or a list of them)")
        block = {}
        for k, v in b.items():
            vals = v if isinstance(v, list) else [v]
            if not vals:
                raise ConfigError(f"{where}: grid parameter {k!r} has no value")
            block[str(k)] = vals
        grid.append(block)
    method_raw = cfg.get("method", exp.get("method", "semantic_guarded"))
    method_params: dict[str, Any] = {}
    if isinstance(method_raw, dict):
        method_params = dict(method_raw.get("params") or {})
        method_raw = method_raw.get("name")
    method = str(method_raw or "semantic_guarded")
    metric_for_method(method)  # validates
    halving_raw = exp.get("halving")
    halving = None
    if halving_raw:
        h = halving_raw if isinstance(halving_raw, dict) else {}
        halving = HalvingConfig(eta=int(h.get("eta", 3)), min_questions=int(h.get("min_questions", 8)),
                                seed=int(h.get("seed", 0)))
        if halving.eta < 2 or halving.min_questions < 2:
            raise ConfigError(f"{where}: halving needs eta >= 2 and min_questions >= 2")
    g = GridConfig(
        name=str(cfg.get("name") or Path(str(where)).stem or "grid"),
        dataset=str(cfg.get("dataset") or "example"),
        pipeline=str(cfg.get("pipeline") or "ragmeter.pipeline:rag"),
        grid=grid, fixed=dict(exp.get("fixed") or {}), method=method.replace("correct_", ""),
        method_params=method_params, metrics=list(cfg.get("metrics") or []),
        top_n=int(exp.get("top_n", 5)), alpha=float(exp.get("alpha", 0.05)),
        workers=int(exp.get("workers", 2)), cache=bool(exp.get("cache", True)), halving=halving,
        options=dict(cfg.get("options") or {}), source=str(where))
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k == "judge":
            g.options["judge"] = v
        elif k == "set":
            for pk, pv in dict(v).items():
                g.fixed[pk] = pv
                for block in g.grid:
                    block.pop(pk, None)
            g.grid = [b for b in g.grid if b] or [{}]
        elif hasattr(g, k):
            setattr(g, k, v)
        else:
            raise ConfigError(f"unknown grid setting {k!r}")
    if g.top_n < 0:
        raise ConfigError(f"{where}: top_n must be >= 0")
    if not 0 < g.alpha < 1:
        raise ConfigError(f"{where}: alpha must be in (0, 1)")
    if g.workers < 1:
        raise ConfigError(f"{where}: workers must be >= 1")
    if g.dataset != "example" and not Path(g.dataset).is_absolute() and where not in ("<config>",):
        candidate = Path(str(where)).parent / g.dataset
        if candidate.exists() and not Path(g.dataset).exists():
            g.dataset = str(candidate)
    return g


# ---- questions -----------------------------------------------------------------------------------

@dataclass
class Question:
    """One distinct question of the dataset with its ground truth (answers are the pipeline's)."""

    id: str
    text: str
    references: list[str]
    negative_references: list[str]
    relevant: list[Chunk] | None
    metadata: dict[str, Any]


def questions_of(samples: Sequence[Sample]) -> list[Question]:
    """The dataset's distinct questions, in order of first appearance.

    Several samples asking the same question (e.g. different answers with human labels) become
    one question; its id is ``metadata.question_id`` when all of them agree, else the first
    sample's id. Human labels are *not* carried over: they judge the dataset's answers, not the
    pipeline's.

    Raises:
        ConfigError: a sample without a question.
    """
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        if not s.question:
            raise ConfigError(f"sample {s.id!r} has no question: a grid search runs the pipeline on questions")
        groups.setdefault(s.question, []).append(s)
    out: list[Question] = []
    used: set[str] = set()
    for text, group in groups.items():
        first = group[0]
        qids = {str(s.metadata.get("question_id")) for s in group if s.metadata.get("question_id") is not None}
        qid = qids.pop() if len(qids) == 1 and len(group) == sum(
            1 for s in group if s.metadata.get("question_id") is not None) else first.id
        if qid in used:
            qid = first.id
        used.add(qid)
        refs = list(dict.fromkeys(r for s in group for r in s.references))
        negs = list(dict.fromkeys(r for s in group for r in s.negative_references))
        relevant = next((s.relevant for s in group if s.relevant is not None), None)
        meta = {k: v for k, v in first.metadata.items()
                if k not in {"answer_kind", "label_reason", "question_id"}}
        out.append(Question(qid, text, refs, negs, relevant, meta))
    return out


# ---- pipeline execution ----------------------------------------------------------------------------

def pipeline_version(fn: Callable[..., Any], target: str) -> str:
    if target.startswith("ragmeter.pipeline:"):
        from ragmeter import __version__

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


# ---- ranking -----------------------------------------------------------------------------------------

@dataclass
class ConfigResult:
    params: dict[str, Any]
    name: str
    run_id: str | None = None
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    values: dict[str, float | None] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    eliminated_round: int | None = None
    judge_run_id: str | None = None
    judge_mean: float | None = None
    judge_ci: tuple[float | None, float | None] = (None, None)
    judge_values: dict[str, float | None] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "params": self.params, "mean": self.mean,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n, "metrics": self.metrics,
                "error": self.error, "eliminated_round": self.eliminated_round,
                "judge_run_id": self.judge_run_id, "judge_mean": self.judge_mean,
                "judge_ci_low": self.judge_ci[0], "judge_ci_high": self.judge_ci[1]}


def rank(results: Sequence[ConfigResult], *, alpha: float, judge: bool = False) -> dict[str, Any]:
    """Order configurations by mean (best first; ties broken by the other metrics in the order
    listed) and test them against the winner.

    Each configuration is compared with the winner by a two-sided paired permutation test on the
    per-question scores; the p-values are Holm-adjusted over those comparisons. ``within_noise``
    lists the configurations *not* significantly different from the winner; ``runner_up_p`` is
    the winner-vs-runner-up p-value (unadjusted) and ``winner_within_noise`` whether it is >= alpha.
    """
    def mean_of(r: ConfigResult) -> float | None:
        return r.judge_mean if judge else r.mean

    def values_of(r: ConfigResult) -> dict[str, float | None]:
        return r.judge_values if judge else r.values

    def key(r: ConfigResult) -> tuple[float, ...]:
        # ties are broken by the other metrics, in the order the config lists them
        rest = []
        for k, v in r.metrics.items():
            if k in (CORRECTNESS_KEY, JUDGE_KEY):
                continue
            sign = 1.0 if r.directions.get(k, "higher") != "lower" else -1.0
            rest.append(-sign * v if v is not None else math.inf)
        return (-float(mean_of(r)), *rest)  # type: ignore[arg-type]

    ok = [r for r in results if mean_of(r) is not None]
    ordered = sorted(ok, key=key)
    out: dict[str, Any] = {"order": [r.name for r in ordered], "rows": [], "alpha": alpha}
    if not ordered:
        return out
    win = ordered[0]
    pvals: list[float] = []
    for r in ordered[1:]:
        a, b = values_of(win), values_of(r)
        ids = [i for i, v in a.items() if v is not None and b.get(i) is not None]
        if len(ids) == 0:
            pvals.append(1.0)
            continue
        pvals.append(paired_permutation_test([a[i] for i in ids], [b[i] for i in ids]).pvalue)  # type: ignore[misc]
    adj = holm(pvals).tolist() if pvals else []
    for pos, r in enumerate(ordered):
        ci = r.judge_ci if judge else (r.ci_low, r.ci_high)
        row = {"rank": pos + 1, "name": r.name, "params": r.params, "run_id": r.judge_run_id if judge else r.run_id,
               "mean": mean_of(r), "ci_low": ci[0], "ci_high": ci[1],
               "metrics": {k: v for k, v in r.metrics.items() if k != CORRECTNESS_KEY},
               "p_vs_winner": None if pos == 0 else pvals[pos - 1],
               "p_vs_winner_holm": None if pos == 0 else adj[pos - 1]}
        row["within_noise_of_winner"] = pos == 0 or row["p_vs_winner_holm"] >= alpha
        out["rows"].append(row)
    if len(ordered) > 1:
        out["runner_up_p"] = pvals[0]
        out["winner_within_noise"] = pvals[0] >= alpha
    else:
        out["runner_up_p"] = None
        out["winner_within_noise"] = False
    out["within_noise"] = [row["name"] for row in out["rows"] if row["within_noise_of_winner"]]
    return out


# ---- judge cost --------------------------------------------------------------------------------------

def estimate_judge_cost(samples: Sequence[Sample], options: dict[str, Any], store: Any,
                        judge_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What judging ``samples`` with ``graded_correctness`` would cost, without calling the judge:
    the judge service's dry run (cache hits excluded; ~4 characters per token; the price table).
    Seed 003's rule of thumb (200 tokens per evaluation at $0.002 / 1K tokens) is reported too."""
    from ragmeter.llm import JudgeService, config_from_options
    from ragmeter.metrics.base import get_spec, missing_fields

    spec = get_spec("graded_correctness")
    params = {**spec.defaults, **(judge_params or {})}
    ok = [s for s in samples if not missing_fields(s, spec.requires)]
    from ragmeter.schema import Score

    reqs = [r for r in spec.fn.requests(ok, params) if not isinstance(r, Score)] if ok else []
    svc = JudgeService(config_from_options({**options, "judge_dry_run": True}), store=store)
    try:
        svc.submit(reqs)
        plan = svc.plan()
    finally:
        svc.close()
    plan["samples"] = len(samples)
    plan["judge"] = svc.cfg.label
    plan["seed003_estimate_usd"] = round(len(reqs) * 200 / 1000 * 0.002, 6)
    plan["requests"] = len(reqs)
    plan["reused"] = len(reqs) - plan.get("planned_calls", 0)  # cache hits and duplicate prompts
    return plan


# ---- the search ----------------------------------------------------------------------------------------

@dataclass
class GridResult:
    grid_id: str
    config: GridConfig
    results: list[ConfigResult]
    ranking: dict[str, Any]
    judge_ranking: dict[str, Any] | None = None
    judge_estimate: dict[str, Any] | None = None
    judge_note: str | None = None
    calibration: dict[str, Any] | None = None
    halving: dict[str, Any] | None = None
    pipeline: dict[str, Any] = field(default_factory=dict)
    n_questions: int = 0

    def record(self) -> dict[str, Any]:
        c = self.config
        return {"name": c.name, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "dataset": c.dataset, "pipeline": c.pipeline, "method": c.method,
                "method_params": c.method_params, "metrics": [str(m) for m in c.metrics],
                "params": {"grid": c.grid, "fixed": c.fixed}, "n_questions": self.n_questions,
                "runs": [r.record() for r in self.results], "ranking": self.ranking["rows"],
                "noise": _noise(self.ranking),
                "judge_ranking": self.judge_ranking["rows"] if self.judge_ranking else None,
                "judge_noise": _noise(self.judge_ranking) if self.judge_ranking else None,
                "judge_estimate": self.judge_estimate,
                "judge_note": self.judge_note, "calibration": self.calibration, "halving": self.halving,
                "pipeline_stats": self.pipeline}


def _noise(ranking: dict[str, Any]) -> dict[str, Any]:
    return {k: ranking.get(k) for k in ("alpha", "runner_up_p", "winner_within_noise", "within_noise")}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "grid"


def _fmt_params(params: dict[str, Any], keys: Sequence[str]) -> str:
    shown = [k for k in keys if k in params] or list(params)
    return " ".join(f"{k}={params[k]}" for k in shown)


def _correctness_entry(cfg: GridConfig, threshold: float | None = None) -> dict[str, Any]:
    params = dict(cfg.method_params)
    if threshold is not None:
        params["threshold"] = threshold
    return {"name": metric_for_method(cfg.method), "params": params, "key": CORRECTNESS_KEY}


def _score(samples: list[Sample], cfg: GridConfig, *, db: Any, name: str, threshold: float | None,
           options: dict[str, Any]) -> Any:
    from ragmeter.runner import evaluate

    metrics = [_correctness_entry(cfg, threshold), *cfg.metrics]
    return evaluate(samples, metrics, db=db, name=name, options=options)


def _calibrate(cfg: GridConfig, dataset: Any, store: Any, log: Log) -> tuple[float | None, dict[str, Any] | None, str | None]:
    """semantic_dynamic: calibrate once on the dataset's labelled answers (seed 003's workflow:
    validation set -> threshold -> grid search). Returns (threshold, calibration, run id)."""
    from ragmeter.runner import evaluate

    if cfg.method != "semantic_dynamic" or cfg.method_params.get("threshold") is not None:
        return None, None, None
    labelled = [s for s in dataset.samples if s.label is not None and s.answer is not None and s.references]
    if not labelled:
        log("[yellow]semantic_dynamic: the dataset has no labelled answers; calibrating each "
            "configuration on seed 003's similarity proxy (circular)[/yellow]")
        return None, None, None
    params = {k: v for k, v in cfg.method_params.items() if k != "threshold"}
    res = evaluate(labelled, [{"name": "correct_semantic_dynamic", "params": params, "key": CORRECTNESS_KEY}],
                   db=store, name=f"{cfg.name} calibration", options=cfg.options)
    cal = res.extra.get("calibration") or {}
    t = cal.get("chosen")
    held = (cal.get("held_out") or {}).get("chosen") or {}
    log(f"calibrated threshold {t} on {cal.get('n_validation')} labelled answers "
        f"({cal.get('objective')}); held-out accuracy {held.get('accuracy', float('nan')):.3f} "
        f"(run {res.run_id})")
    return t, cal, res.run_id


def run_grid(config: str | Path | dict[str, Any] | GridConfig, *, db: str | Any = None, yes: bool = False,
             confirm: Confirm | None = None, log: Log | None = None,
             overrides: Mapping[str, Any] | None = None, log_rankings: bool = True) -> GridResult:
    """Run a grid search end to end (see the module docstring and docs/experiments.md).

    Args:
        config: a grid config file, mapping or :class:`GridConfig`.
        db: the store (URL or :class:`~ragmeter.store.Store`).
        yes: skip the cost confirmation of the judge phase.
        confirm: ``confirm(estimate) -> bool`` asked before judge calls are spent (default: refuse
            unless ``yes``, so nothing is spent without consent).
        log: where progress lines go (rich markup allowed); default: nowhere.
        overrides: ``top_n``, ``judge``, ``workers``, ``cache``, ``set`` (fixed parameters) ...
        log_rankings: also log the head of each ranking (the CLI prints full tables instead).

    Returns:
        A :class:`GridResult`; the record is also stored under kv ``grid``/``grid_id``.
    """
    from ragmeter.io import load
    from ragmeter.pipeline import accepts, load_pipeline
    from ragmeter.store import Store, open_store

    cfg = config if isinstance(config, GridConfig) else parse_grid_config(config, overrides=overrides)
    if isinstance(config, GridConfig) and overrides:
        raise ConfigError("pass overrides with a config file or mapping, not a GridConfig")
    log = log or (lambda msg: None)
    store = db if isinstance(db, Store) else open_store(db)
    fn = load_pipeline(cfg.pipeline)
    dataset = load(cfg.dataset)
    questions = questions_of(dataset.samples)
    configs = cfg.configurations()
    if not configs:
        raise ConfigError("the grid has no configuration")
    for p in configs:
        accepts(fn, {**cfg.fixed, **p})
    grid_id = f"{_slug(cfg.name)}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{hashlib.sha1(str(time.time_ns()).encode()).hexdigest()[:4]}"
    log(f"grid [bold]{grid_id}[/bold]: {len(configs)} configurations x {len(questions)} questions, "
        f"method {cfg.method}, pipeline {cfg.pipeline}")

    if any(m in ("llm_judge", "hybrid") for m in [cfg.method]):
        _confirm_judge(cfg, questions, configs, store, yes, confirm, log, phase="scoring every configuration")

    threshold, calibration, cal_run = _calibrate(cfg, dataset, store, log)
    pstats = PipelineStats()
    results = [ConfigResult(params=p, name=f"{cfg.name} {_fmt_params(p, cfg.varying)}") for p in configs]
    halving_info = None
    if cfg.halving is not None and len(configs) > 1:
        halving_info = _successive_halving(cfg, fn, questions, results, store, threshold, pstats, log)

    survivors = [r for r in results if r.eliminated_round is None]
    _run_configs(cfg, fn, survivors, questions, store, threshold, calibration, pstats, log)
    if all(r.error for r in survivors):
        raise ConfigError(f"every configuration failed; the first: {survivors[0].error}")
    if halving_info is not None:
        # distinct (configuration, question) pairs the pipeline had to answer, vs the full grid
        halving_info["pipeline_pairs"] = len(pstats.pairs)
        halving_info["pipeline_calls_saved"] = halving_info["pipeline_calls_full_grid"] - len(pstats.pairs)
        log(f"  successive halving saved {halving_info['pipeline_calls_saved']} of "
            f"{halving_info['pipeline_calls_full_grid']} pipeline calls and "
            f"{halving_info['scored_samples_saved']} scored samples")
    # configurations dropped by successive halving were scored on a subset only: not ranked with the rest
    ranking = rank(survivors, alpha=cfg.alpha)
    if log_rankings:
        _log_ranking(ranking, log, title="ranking by " + cfg.method)

    judge_ranking = estimate = note = None
    if cfg.top_n > 0 and cfg.options.get("judge"):
        top_names = ranking["order"][:cfg.top_n]
        top = [r for name in top_names for r in results if r.name == name]
        estimate = _confirm_judge(cfg, questions, [r.params for r in top], store, yes, confirm, log,
                                  phase=f"re-ranking the top {len(top)}", samples_by_config=[
                                      _samples_of(store, r.run_id) for r in top])
        if estimate.get("declined"):
            note = "judge phase declined: the final ranking is the " + cfg.method + " ranking"
        else:
            from ragmeter.runner import evaluate

            for r in top:
                samples = _samples_of(store, r.run_id)
                res = evaluate(samples, [{"name": "correct_llm_judge", "key": JUDGE_KEY}], db=store,
                               name=f"{r.name} [judge]", options=cfg.options)
                s = res.summary[JUDGE_KEY]
                r.judge_run_id, r.judge_mean = res.run_id, s["mean"]
                r.judge_ci = (s.get("ci_low"), s.get("ci_high"))
                r.judge_values = {x.id: sc.value for x, sc in zip(res.samples, res.scores[JUDGE_KEY], strict=True)}
                log(f"  judged {r.name}: {_f(s['mean'])} [{_f(s.get('ci_low'))}, {_f(s.get('ci_high'))}] "
                    f"(n={s['n']}, no value {s['n_missing']})")
            judge_ranking = rank(top, alpha=cfg.alpha, judge=True)
            if log_rankings:
                _log_ranking(judge_ranking, log, title=f"final ranking of the top {len(top)} by the LLM judge")
    elif cfg.top_n > 0:
        note = ("no judge configured: the final ranking is the " + cfg.method + " ranking "
                "(--judge provider:model re-ranks the top N)")
    if note:
        log(note)
    out = GridResult(grid_id, cfg, results, ranking, judge_ranking, estimate, note,
                     calibration={**calibration, "run_id": cal_run} if calibration else None,
                     halving=halving_info, n_questions=len(questions),
                     pipeline={"calls": pstats.calls, "cached": pstats.cached, "errors": pstats.errors,
                               "seconds": round(pstats.seconds, 3)})
    store.kv_put(KV_GRID, grid_id, json.loads(json.dumps(out.record(), default=str)))
    log(f"stored grid {grid_id} (kv namespace '{KV_GRID}'); pipeline calls {pstats.calls}, "
        f"cached {pstats.cached}, errors {pstats.errors}")
    return out


def _f(v: Any) -> str:
    return "—" if v is None else f"{v:.4f}"


def _log_ranking(ranking: dict[str, Any], log: Log, *, title: str, show: int = 5) -> None:
    log(f"[bold]{title}[/bold] (95% bootstrap CI; p = paired permutation vs #1, Holm-adjusted)")
    for row in ranking["rows"][:show]:
        p = "" if row["p_vs_winner_holm"] is None else f"  p={row['p_vs_winner_holm']:.3g}"
        log(f"  {row['rank']:>3}. {_f(row['mean'])} [{_f(row['ci_low'])}, {_f(row['ci_high'])}]  {row['name']}{p}")
    if len(ranking["rows"]) > show:
        log(f"  ... {len(ranking['rows']) - show} more")
    if ranking.get("runner_up_p") is not None:
        n_tied = len(ranking["within_noise"]) - 1
        if ranking["winner_within_noise"]:
            log(f"  the winner is within noise of the runner-up (paired permutation p = "
                f"{ranking['runner_up_p']:.3g} >= {ranking['alpha']}); {n_tied} configuration(s) are not "
                "significantly different from #1")
        else:
            log(f"  the winner beats the runner-up significantly (p = {ranking['runner_up_p']:.3g}); "
                f"{n_tied} configuration(s) are not significantly different from #1")


def _samples_of(store: Any, run_id: str | None) -> list[Sample]:
    if run_id is None:
        raise RagmeterError("configuration has no stored run")
    return store.run_samples(run_id)


def _confirm_judge(cfg: GridConfig, questions: Sequence[Question], configs: Sequence[dict[str, Any]], store: Any,
                   yes: bool, confirm: Confirm | None, log: Log, *, phase: str,
                   samples_by_config: Sequence[Sequence[Sample]] | None = None) -> dict[str, Any]:
    """Estimate the judge's cost for ``phase`` and ask for consent (``yes`` skips the question).

    Raises:
        RagmeterError: consent refused for the scoring phase (nothing can be ranked without it).
    """
    from ragmeter.llm import problem

    why = problem(cfg.options)
    if why:
        raise ConfigError(f"{phase} needs an LLM judge: {why}")
    if samples_by_config is None:
        # answers do not exist yet: a 200-character placeholder per (configuration, question), so the
        # estimate counts one call each (an upper bound: identical answers would share a call, and
        # hybrid only judges its uncertainty band)
        samples = [Sample(id=q.id, question=q.text, answer=f"{'x' * 190} {i:>8}", references=q.references)
                   for i in range(len(configs)) for q in questions]
    else:
        samples = [s for group in samples_by_config for s in group]
    est = estimate_judge_cost(samples, cfg.options, store,
                              judge_params=cfg.method_params.get("judge_params") if cfg.method != "hybrid" else None)
    cost = est.get("est_cost_usd")
    cost_text = f"${cost:.4f}" if cost is not None else "unknown (no price for this model)"
    log(f"judge estimate for {phase}: {est.get('planned_calls')} calls for {est.get('requests')} "
        f"answers ({est.get('reused')} cached or duplicate), ~{est.get('est_input_tokens')} input + "
        f"{est.get('est_output_tokens')} output tokens, "
        f"cost {cost_text} "
        f"with {est.get('judge')}; seed 003's rule of thumb: ${est['seed003_estimate_usd']:.4f}")
    if yes:
        return est
    ok = confirm(est) if confirm is not None else False
    if not ok:
        est["declined"] = True
        if samples_by_config is None:
            raise RagmeterError(f"judge cost not confirmed for {phase} (pass --yes to accept)")
    return est


def _run_configs(cfg: GridConfig, fn: Callable[..., Any], results: Sequence[ConfigResult],
                 questions: Sequence[Question], store: Any, threshold: float | None,
                 calibration: dict[str, Any] | None, pstats: PipelineStats, log: Log) -> None:
    """Run the pipeline and score every configuration on every question (one stored run each)."""
    for i, r in enumerate(results, 1):
        params = {**cfg.fixed, **r.params}
        try:
            outputs = run_pipeline(fn, cfg.pipeline, params, questions, store=store, use_cache=cfg.cache,
                                   workers=cfg.workers, stats=pstats)
        except ConfigError as exc:
            r.error = str(exc)
            log(f"  [{i}/{len(results)}] {r.name}: [red]skipped[/red] ({exc})")
            continue
        samples = build_samples(questions, outputs, params)
        res = _score(samples, cfg, db=store, name=r.name, threshold=threshold, options=cfg.options)
        _fill(r, res)
        extra = {"grid": {"params": r.params, "fixed": cfg.fixed, "pipeline": cfg.pipeline}}
        if calibration:
            extra["calibration"] = calibration
        run = store.get_run(res.run_id)
        store.update_run(res.run_id, extra={**(run.extra or {}), **extra})
        errors = sum(1 for o in outputs if "error" in o)
        log(f"  [{i}/{len(results)}] {r.name}: {cfg.method} {_f(r.mean)} [{_f(r.ci_low)}, {_f(r.ci_high)}]"
            + (f", {errors} pipeline error(s)" if errors else "") + f"  (run {res.run_id})")


def _fill(r: ConfigResult, res: Any) -> None:
    s = res.summary[CORRECTNESS_KEY]
    r.run_id, r.mean, r.ci_low, r.ci_high, r.n = res.run_id, s["mean"], s.get("ci_low"), s.get("ci_high"), s["n"]
    r.values = {x.id: sc.value for x, sc in zip(res.samples, res.scores[CORRECTNESS_KEY], strict=True)}
    r.metrics = {k: v.get("mean") for k, v in res.summary.items()}
    r.directions = {k: str(v.get("direction", "higher")) for k, v in res.summary.items()}


def _successive_halving(cfg: GridConfig, fn: Callable[..., Any], questions: Sequence[Question],
                        results: list[ConfigResult], store: Any, threshold: float | None,
                        pstats: PipelineStats, log: Log) -> dict[str, Any]:
    """Score every configuration on a small random subset of questions, keep the best 1/eta,
    grow the subset eta-fold, repeat until the survivors would run on every question (that last
    round is the normal full evaluation). Intermediate scores go to a scratch store, so only full
    evaluations become runs. Returns the rounds and the pipeline calls saved."""
    assert cfg.halving is not None
    h = cfg.halving
    n_all = len(questions)
    order = np.random.default_rng(h.seed).permutation(n_all).tolist()
    rounds = max(1, 1 + int(math.floor(math.log(max(1.0, n_all / h.min_questions), h.eta))))
    sizes = [max(h.min_questions, math.ceil(n_all / h.eta ** (rounds - 1 - r))) for r in range(rounds)]
    sizes = [min(n_all, s) for s in sizes]
    alive = list(results)
    info: dict[str, Any] = {"eta": h.eta, "min_questions": h.min_questions, "rounds": []}
    scratch_dir = tempfile.mkdtemp(prefix="ragmeter-halving-")
    scratch = f"sqlite:///{Path(scratch_dir) / 'rounds.db'}"
    try:
        for r_i, size in enumerate(sizes[:-1]):
            if len(alive) <= 1:
                break
            subset = [questions[j] for j in order[:size]]
            scores: dict[str, tuple[float, dict[str, float | None]]] = {}
            for r in alive:
                params = {**cfg.fixed, **r.params}
                try:
                    outs = run_pipeline(fn, cfg.pipeline, params, subset, store=store, use_cache=cfg.cache,
                                        workers=cfg.workers, stats=pstats)
                except ConfigError as exc:
                    r.error = str(exc)
                    r.eliminated_round = r_i
                    continue
                res = _score(build_samples(subset, outs, params), cfg, db=scratch,
                             name=f"{r.name} [round {r_i}]", threshold=threshold, options=cfg.options)
                m = res.summary[CORRECTNESS_KEY]["mean"]
                scores[r.name] = (m if m is not None else -math.inf, {})
            ranked = sorted((r for r in alive if r.name in scores), key=lambda r: -scores[r.name][0])
            keep_n = max(1, math.ceil(len(ranked) / h.eta))
            cutoff = scores[ranked[keep_n - 1].name][0] if ranked else -math.inf
            kept = [r for r in ranked if scores[r.name][0] >= cutoff]  # ties with the cut-off stay
            for r in ranked:
                if r not in kept:
                    r.eliminated_round = r_i
                    r.mean = scores[r.name][0] if math.isfinite(scores[r.name][0]) else None
            info["rounds"].append({"round": r_i, "questions": size, "configs": len(ranked), "kept": len(kept),
                                   "scores": {r.name: scores[r.name][0] for r in ranked}})
            log(f"  halving round {r_i}: {len(ranked)} configurations on {size} questions -> keep {len(kept)}")
            alive = kept
    finally:
        import shutil

        shutil.rmtree(scratch_dir, ignore_errors=True)
    full = len(results) * n_all
    info["survivors"] = [r.name for r in alive]
    info["scored_samples_full_grid"] = full
    info["scored_samples"] = sum(rd["configs"] * rd["questions"] for rd in info["rounds"]) + len(alive) * n_all
    info["scored_samples_saved"] = full - info["scored_samples"]
    info["pipeline_calls_full_grid"] = full
    log(f"  successive halving: {len(alive)} of {len(results)} configurations survive; samples scored "
        f"{info['scored_samples']} instead of {full} (saved {info['scored_samples_saved']})")
    return info


def evaluate_pipeline(dataset: str = "example", pipeline: str = "ragmeter.pipeline:rag",
                      params: Mapping[str, Any] | None = None, *, method: str | None = "semantic_guarded",
                      method_params: Mapping[str, Any] | None = None, metrics: Sequence[Any] = (),
                      name: str | None = None, db: str | Any = None, options: Mapping[str, Any] | None = None,
                      workers: int = 2, cache: bool = True, log: Log | None = None) -> Any:
    """Run a pipeline once over a dataset's questions and evaluate it as one stored run (what a
    grid does for one configuration): e.g. a deliberately worse ``top_k=1`` run for the gate.

    Returns:
        The :class:`~ragmeter.runner.EvaluationResult`; the correctness metric's key is
        ``correctness`` (with ``method=None`` only ``metrics`` are computed).
    """
    from ragmeter.io import load
    from ragmeter.pipeline import accepts, load_pipeline
    from ragmeter.runner import evaluate
    from ragmeter.store import Store, open_store

    log = log or (lambda msg: None)
    store = db if isinstance(db, Store) else open_store(db)
    p = dict(params or {})
    fn = load_pipeline(pipeline)
    accepts(fn, p)
    data = load(dataset)
    questions = questions_of(data.samples)
    cfg = GridConfig(name=name or "pipeline", dataset=dataset, pipeline=pipeline, grid=[{}], fixed=p,
                     method=(method or "semantic_guarded").replace("correct_", ""),
                     method_params=dict(method_params or {}), metrics=list(metrics),
                     options=dict(options or {}), workers=workers, cache=cache)
    if method is None and not metrics:
        raise ConfigError("give a correctness method or at least one metric")
    threshold, calibration, _cal_run = _calibrate(cfg, data, store, log) if method else (None, None, None)
    stats = PipelineStats()
    outputs = run_pipeline(fn, pipeline, p, questions, store=store, use_cache=cache, workers=workers, stats=stats)
    samples = build_samples(questions, outputs, p)
    entries = ([_correctness_entry(cfg, threshold)] if method else []) + list(metrics)
    res = evaluate(samples, entries, db=store, name=name or f"{pipeline} {_fmt_params(p, list(p))}".strip(),
                   options=dict(options or {}))
    extra = {"pipeline": {"target": pipeline, "params": p, "calls": stats.calls, "cached": stats.cached,
                          "errors": stats.errors}}
    if calibration:
        extra["calibration"] = calibration
    run = store.get_run(res.run_id)
    store.update_run(res.run_id, extra={**(run.extra or {}), **extra})
    res.extra.update(extra)
    return res


__all__ = ["CORRECTNESS_KEY", "JUDGE_KEY", "KV_GRID", "ConfigResult", "GridConfig", "GridResult",
           "HalvingConfig", "METHODS", "Question", "build_samples", "estimate_judge_cost", "evaluate_pipeline",
           "parse_grid_config", "questions_of", "rank", "run_grid", "run_pipeline"]
