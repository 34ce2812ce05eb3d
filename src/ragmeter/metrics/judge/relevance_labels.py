"""LLM relevance labels (qrels): graded relevance 0-3 of retrieved chunks to a question, judged once
and reused across runs and configurations.

Labels are kept under ``sha256(question) : sha256(chunk text) : judge model``
(:func:`qrel_key`), so the same chunk is never judged twice for the same question, whichever run or
retrieval configuration retrieved it; where they are kept is a service of the scoring context,
``ctx.service("relevance_labels")`` (:mod:`ragmeter.store.relevance_labels`: the store's key-value
table), which these functions take as ``labels`` (``None``: nothing kept). They turn into ranking
ground truth with :func:`fill_relevant`: ``Sample.relevant`` becomes the graded chunks, and any
retrieval metric (nDCG, MAP, MRR) can run on them. Outside a run, with a store:
:mod:`ragmeter.analysis.qrels`.

Entry points inside a metric::

    filled, labels, reasons = fill_relevant_from_llm(samples, ctx)   # label, then fill `relevant`
    labels, reasons = resolve_labels(samples, judge, ctx.service("relevance_labels"))
    filled = fill_relevant(samples, labels, min_grade=1)              # Samples with graded `relevant`
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ragmeter.core.context import declare_service
from ragmeter.core.schema import Chunk, Sample

METRIC = "context_relevance_labels"
MAX_CHUNKS_PER_CALL = 20
#: the scoring context's service that keeps the labels
LABELS = "relevance_labels"
declare_service(LABELS, "ragmeter.store.relevance_labels")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def qrel_key(question: str, chunk_text: str, judge_model: str) -> str:
    """The store key of one (question, chunk, judge model) label."""
    return f"{_sha(question)}:{_sha(chunk_text)}:{judge_model}"[:300]


@dataclass(frozen=True)
class Label:
    """A judged relevance: ``grade`` 0 (not relevant) .. 3 (highly relevant) and the judge's reason."""

    grade: int
    reason: str
    cached: bool = False


def _schema() -> Any:
    from ragmeter.metrics.judge._common import Verdict

    class ChunkLabel(Verdict):
        chunk: int
        reason: str
        grade: int = Field(ge=0, le=3)

    class RelevanceLabels(Verdict):
        labels: list[ChunkLabel]

    return RelevanceLabels


_SCHEMA: Any = None


def label_schema() -> Any:
    """The reply schema (built lazily so importing this module stays cheap)."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _schema()
    return _SCHEMA


def _judge_model(judge: Any) -> str:
    return f"{judge.cfg.provider}:{judge.cfg.model}"


def _one_label_per_chunk(n: int) -> Any:
    def check(v: Any) -> None:
        got = sorted(x.chunk for x in v.labels)
        if got != list(range(1, n + 1)):
            raise ValueError(f"expected exactly one label for each chunk 1..{n}, got chunks {got}")

    return check


@dataclass
class _Plan:
    keys: list[list[str]]                   # per sample, per context: qrel key
    known: dict[str, dict[str, Any]]        # stored labels
    requests: list[Any]                     # judge requests
    chunks: list[list[tuple[str, str]]]     # per request: (qrel key, chunk text) in prompt order
    samples: list[int]                      # per request: sample index


def plan_labels(samples: Sequence[Sample], judge: Any, labels: Any = None, *, use_reference: bool = True,
                metric: str = METRIC) -> _Plan:
    """Which (question, chunk) pairs still need a label (``labels``: the labels kept, a
    :class:`~ragmeter.store.relevance_labels.RelevanceLabelStore`), and the judge requests that ask
    for them."""
    from ragmeter.llm.request import JudgeRequest
    from ragmeter.metrics.judge._common import fence_blocks, load_template

    model = _judge_model(judge)
    keys = [[qrel_key(s.question or "", t, model) for t in s.context_texts] for s in samples]
    flat = sorted({k for ks in keys for k in ks})
    known = labels.get_many(flat) if labels is not None and flat else {}
    tpl = load_template("context_relevance_labels")
    schema = label_schema()
    systems = {ref: tpl.system(ref_note=" (the REFERENCE block shows what a good answer contains)" if ref else "")
               for ref in (True, False)}
    reqs, chunks, owners = [], [], []
    for i, s in enumerate(samples):
        todo: dict[str, str] = {}
        for k, t in zip(keys[i], s.context_texts, strict=True):
            if k not in known and k not in todo:
                todo[k] = t
        items = list(todo.items())
        with_ref = use_reference and bool(s.reference)
        for j in range(0, len(items), MAX_CHUNKS_PER_CALL):
            part = items[j:j + MAX_CHUNKS_PER_CALL]
            blocks = [("QUESTION", s.question or "")]
            if with_ref:
                blocks.append(("REFERENCE", s.reference or ""))
            blocks += [(f"CHUNK {n}", t) for n, (_, t) in enumerate(part, 1)]
            reqs.append(JudgeRequest(metric=metric, sample_id=s.id, system=systems[with_ref],
                                     user=fence_blocks(blocks), schema=schema,
                                     template_version=tpl.version,
                                     expected_output_tokens=20 + 40 * len(part),
                                     validate=_one_label_per_chunk(len(part))))
            chunks.append(part)
            owners.append(i)
    return _Plan(keys, known, reqs, chunks, owners)


def prefetch_labels(samples: Sequence[Sample], judge: Any, labels: Any = None, *,
                    use_reference: bool = True) -> None:
    """Queue the label requests of ``samples`` on the judge (for a metric's ``prepare``)."""
    judge.prefetch(plan_labels(samples, judge, labels, use_reference=use_reference).requests)


def resolve_labels(samples: Sequence[Sample], judge: Any, labels: Any = None, *,
                   use_reference: bool = True) -> tuple[list[list[Label | None]], list[str | None]]:
    """Graded relevance (0-3) of every retrieved chunk of every sample, judged by an LLM, and per
    sample why a label is missing (``None`` if complete).

    Labels already kept in ``labels`` are reused; missing ones are asked for in one judge call per
    sample (up to 20 chunks per call), then kept. A chunk whose label could not be obtained (judge
    failure, budget, dry run) is ``None``.

    Args:
        samples: samples with ``question`` and ``contexts`` (chunk texts).
        judge: a :class:`~ragmeter.llm.JudgeService` (``ctx.service("judge")``).
        labels: where labels are kept (``ctx.service("relevance_labels")``; ``None``: judge
            everything, keep nothing).
        use_reference: show the reference answer to the judge when the sample has one.

    Returns:
        Per sample, one :class:`Label` (or ``None``) per context, in retrieval order; and the reasons.
    """
    plan = plan_labels(samples, judge, labels, use_reference=use_reference)
    results = judge.submit(plan.requests) if plan.requests else []
    fresh: dict[str, Label] = {}
    to_store: dict[str, dict[str, Any]] = {}
    why: dict[int, str] = {}
    for req, part, res, owner in zip(plan.requests, plan.chunks, results, plan.samples, strict=True):
        if not res.ok:
            why.setdefault(owner, res.reason or f"judge {res.status}")
            continue
        by_n = {x.chunk: x for x in res.value.labels}
        s = samples[owner]
        ids = {c.text or "": c.id for c in s.contexts or []}
        for n, (key, text) in enumerate(part, 1):
            lab = by_n[n]
            fresh[key] = Label(lab.grade, lab.reason, cached=res.cached)
            to_store[key] = {"grade": lab.grade, "reason": lab.reason, "judge": _judge_model(judge),
                             "question": s.question or "", "chunk": text, "chunk_id": ids.get(text),
                             "reference_used": use_reference and bool(s.reference),
                             "template_version": req.template_version}
    if labels is not None and to_store:
        labels.put_many(to_store)
    out: list[list[Label | None]] = []
    for ks in plan.keys:
        row: list[Label | None] = []
        for k in ks:
            if k in plan.known:
                v = plan.known[k]
                row.append(Label(int(v["grade"]), str(v.get("reason", "")), cached=True))
            else:
                row.append(fresh.get(k))
        out.append(row)
    reasons = [None if all(x is not None for x in row) else why.get(i, "judge failure on chunk labels")
               for i, row in enumerate(out)]
    return out, reasons


def fill_relevant(samples: Sequence[Sample], labels: Sequence[Sequence[Label | None]], *,
                  min_grade: int = 1, pooled: Sequence[Sequence[Chunk]] | None = None) -> list[Sample | None]:
    """Copies of ``samples`` whose ``relevant`` holds the retrieved chunks graded >= ``min_grade``
    (with ``Chunk.grade`` set to the label), ready for any retrieval metric.

    A sample with a missing label gives ``None``. ``pooled`` adds, per sample, chunks labelled
    for the same question in other runs (see :func:`pooled_relevant`).
    """
    out: list[Sample | None] = []
    for i, (s, row) in enumerate(zip(samples, labels, strict=True)):
        if any(lab is None for lab in row):
            out.append(None)
            continue
        rel: list[Chunk] = []
        seen: set[str] = set()
        for c, lab in zip(s.contexts or [], row, strict=True):
            assert lab is not None
            if lab.grade >= min_grade and (c.text or "") not in seen:
                seen.add(c.text or "")
                rel.append(Chunk(text=c.text, id=c.id, source=c.source, start=c.start, end=c.end,
                                 grade=float(lab.grade)))
        for c in (pooled[i] if pooled is not None else []):
            if (c.grade or 0) >= min_grade and (c.text or "") not in seen:
                seen.add(c.text or "")
                rel.append(c)
        out.append(s.model_copy(update={"relevant": rel}))
    return out


def pooled_relevant(samples: Sequence[Sample], judge: Any, labels: Any) -> list[list[Chunk]]:
    """Per sample, every chunk labelled for its question by this judge in any run (TREC-style
    pooling), as graded chunks (``labels``: where labels are kept). Makes nDCG comparable across
    configurations, at the price of depending on which runs were made before."""
    model = _judge_model(judge)
    out: list[list[Chunk]] = []
    for s in samples:
        rows = labels.with_prefix(_sha(s.question or "") + ":")
        out.append([Chunk(text=v["chunk"], grade=float(v["grade"])) for k, v in rows.items()
                    if k.endswith(":" + model)])
    return out


def fill_relevant_from_llm(samples: Sequence[Sample], ctx: Any, *, min_grade: int = 1,
                           use_reference: bool = True, pool: bool = False
                           ) -> tuple[list[Sample | None], list[list[Label | None]], list[str | None]]:
    """Label ``samples``' chunks with the run's judge and fill ``relevant`` from the labels.

    Returns ``(filled samples, labels, reasons)``: a sample is ``None`` where a label is missing,
    and its reason says why.
    """
    judge = ctx.service("judge")
    kept = ctx.service(LABELS)
    labels, reasons = resolve_labels(samples, judge, kept, use_reference=use_reference)
    pooled = pooled_relevant(samples, judge, kept) if pool and kept.keeps else None
    return fill_relevant(samples, labels, min_grade=min_grade, pooled=pooled), labels, reasons

