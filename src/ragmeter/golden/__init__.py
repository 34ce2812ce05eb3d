"""Golden datasets: a corpus with character offsets, LLM-generated samples whose ground truth
is exact spans, filters that say what they removed and why, human review, versions and diffs.

Typical use (the CLI wraps each step)::

    from ragmeter.golden import add_documents, generate
    add_documents(store, "handbook", ["docs/"])
    result = generate(store, corpus="handbook", n=100, name="gold", judge="openai:gpt-4o-mini")
    result.reports     # per filter: checked, removed, why
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragmeter.golden.corpus import add_documents, chunk_document, corpus_documents, list_corpora
from ragmeter.golden.datasets import diff, export_jsonl, review, save_dataset
from ragmeter.io.stored import list_datasets, load_samples, resolve, samples_of

__all__ = ["GenerationResult", "add_documents", "chunk_document", "corpus_documents", "diff",
           "export_jsonl", "generate", "list_corpora", "list_datasets", "load_samples", "resolve",
           "review", "samples_of", "save_dataset"]


@dataclass
class GenerationResult:
    """What :func:`generate` did: the stored version (``None`` in a dry run), the filter reports,
    the judge's accounting (calls, cache hits, tokens, cost) and, in a dry run, its plan."""

    dataset: Any
    generated: int
    kept: int
    reports: list[dict[str, Any]] = field(default_factory=list)
    judge: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None


#: a dry run plans at most this many questions and scales the estimate to the number asked
DRY_RUN_SAMPLE = 2000


def _scaled(plan: dict[str, Any], n: int, planned: int) -> dict[str, Any]:
    """A dry-run plan of ``planned`` questions scaled to ``n`` (counts, tokens and cost)."""
    if planned >= n:
        return plan
    f = n / planned
    out = dict(plan)
    for k in ("planned_calls", "est_input_tokens", "est_output_tokens"):
        out[k] = round(plan[k] * f)
    for k in ("est_cost_usd", "est_batch_cost_usd"):
        if plan.get(k) is not None:
            out[k] = round(plan[k] * f, 6)
    out["per_metric"] = {m: {k: round(v * f) for k, v in c.items()} for m, c in plan.get("per_metric", {}).items()}
    out["sampled"] = {"planned": planned, "asked": n}
    out["note"] = f"estimated from a plan of {planned:,} questions (the same mix), scaled to {n:,}; "
    return out


def generate(store: Any, *, corpus: str, n: int, name: str, judge: str, judge_options: dict[str, Any] | None = None,
             types: str | None = None, chunker: str = "paragraph", chunk_size: int = 800,
             complexity: str = "moderate", style: str = "natural", persona: str | None = None,
             language: str | None = None, examples: list[dict[str, str]] | None = None,
             n_alternatives: int = 1, n_negatives: int = 1, verify: bool = True, seed: int = 0,
             dry_run: bool = False, progress: Any = None, tag: str | None = None) -> GenerationResult:
    """Generate ``n`` candidate samples from ``corpus``, filter them and store what is kept as
    the next version of dataset ``name``.

    Args:
        judge: the generator model as ``provider:model`` (same providers as the LLM judges).
        judge_options: ``base_url``, ``api_key_env``, ``concurrency``, ``rpm``, ``max_cost`` ...
        types: the mix, e.g. ``"single_hop=0.6,multi_hop=0.2,unanswerable=0.2"``.
        verify: run the judge checks (support and answerability) after the offline filters.
        dry_run: plan the calls and estimate their cost; call nothing, store nothing.
    """
    from ragmeter.golden.filters import run_filters
    from ragmeter.golden.generation import (
        PROMPT_VERSION,
        build_request,
        candidate_sample,
        parse_mix,
        plan_tasks,
        to_candidate,
    )
    from ragmeter.llm import get_judge
    from ragmeter.llm.config import JudgeConfigError, problem

    opts = dict(judge_options or {})
    if dry_run:
        opts["dry_run"] = True
    # the same checks and client as a judge of `ragmeter eval` (llm.config.problem)
    why = problem({"judge": judge, **{f"judge_{k}": v for k, v in opts.items()}})
    if why is not None:
        raise JudgeConfigError(why)
    mix = parse_mix(types)
    docs = corpus_documents(store, corpus)
    # a dry run of many questions estimates from a sample of the plan, scaled (the plan of a
    # million questions would take a minute and gigabytes only to be counted)
    planned = min(n, DRY_RUN_SAMPLE) if dry_run else n
    tasks = plan_tasks(docs, planned, mix=mix, chunker=chunker, chunk_size=chunk_size, seed=seed)
    requests = [build_request(t, complexity=complexity, style=style, persona=persona, language=language,
                              examples=examples or (), n_alternatives=n_alternatives,
                              n_negatives=n_negatives) for t in tasks]
    svc = get_judge(judge, store=None if dry_run else store, **opts)
    if progress is not None:
        svc.progress = progress
    try:
        if not dry_run and not svc.all_cached(requests):
            svc.preflight()  # an unreachable model stops here, in seconds (exit 2), not after retries
        svc.prefetch(requests)  # flush() runs them concurrently with a progress bar
        svc.flush()
        results = svc.submit(requests)
        if dry_run:
            plan = _scaled(svc.plan(), n, planned)
            if verify:
                plan["note"] = ((plan.get("note") or "") + "plus up to 2 check calls per kept sample "
                                "(support, answerability); --no-verify skips them")
            return GenerationResult(None, n, 0, plan=plan, judge=svc.stats())
        texts = {d.path: d.text for d in docs}
        cands = [to_candidate(t, r, texts) for t, r in zip(tasks, results, strict=True)]
        kept, reports = run_filters(cands, judge=svc, verify=verify)
        stats = svc.stats()
    finally:
        svc.close()
    meta = {"difficulty": complexity, "style": style, "language": language or "en",
            "generator": {"model": svc.cfg.label, "prompt_version": PROMPT_VERSION}}
    if persona:
        meta["persona"] = persona
    samples = [candidate_sample(c, meta) for c in kept]
    info = {"corpus": corpus, "generated": len(cands), "kept": len(samples),
            "filters": [r.to_dict() for r in reports],
            "generator": {"model": svc.cfg.label, "prompt_version": PROMPT_VERSION},
            "params": {"n": n, "types": mix, "chunker": chunker, "chunk_size": chunk_size,
                       "complexity": complexity, "style": style, "persona": persona, "language": language,
                       "n_alternatives": n_alternatives, "n_negatives": n_negatives, "verify": verify,
                       "seed": seed, "examples": len(examples or [])},
            "judge": {k: v for k, v in stats.items() if k in ("calls", "cached", "failed", "input_tokens",
                                                               "output_tokens", "cost_usd")},
            "documents": {d.path: {"version": d.version, "content_hash": d.content_hash} for d in docs}}
    version = save_dataset(store, name, samples, info=info, tag=tag) if samples else None
    return GenerationResult(version, len(cands), len(samples), [r.to_dict() for r in reports], stats)
