"""Filters for generated samples. Each one reports how many samples it checked and removed, and
why each was removed; the counts are stored with the dataset.

Cheap offline filters run first, the judge checks last (on what is left), so no call is spent on
a sample that a string rule already threw away:

1. ``generation`` — the model gave no parseable reply (after retries): no sample.
2. ``format`` — question 10-400 characters, an answer, at most 2,000 characters.
3. ``evidence`` — every quote the model gave is found in its passages (exactly, ignoring
   whitespace, or fuzzily with rapidfuzz >= 90), and an answerable question has at least one.
4. ``answer_in_span`` — offline: at least half of the answer's content words occur in the
   supporting spans (a third for summaries).
5. ``leakage`` — the question copies the passage: 8 consecutive words (or the whole question,
   when shorter) occur verbatim in it.
6. ``near_duplicate`` — a question whose embedding has cosine >= 0.95 with an earlier kept one
   (all-MiniLM-L6-v2; without sentence-transformers, rapidfuzz token-set ratio >= 92).
7. ``judge_support`` — the judge confirms the spans support the answer.
8. ``answerability`` — the judge, given only the spans, can answer the question (for
   ``unanswerable`` questions: cannot answer it from the passages).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ragmeter.golden.generation import UNANSWERABLE_REFERENCE, Candidate

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = {"the", "a", "an", "of", "is", "are", "was", "were", "in", "on", "to", "and", "or", "it",
         "its", "for", "by", "with", "as", "at", "that", "this", "be", "from", "de", "la", "le",
         "o", "os", "da", "do", "e", "em", "um", "uma"}


@dataclass
class FilterReport:
    name: str
    checked: int = 0
    removed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"filter": self.name, "checked": self.checked, "removed": len(self.removed),
                "reasons": dict(self.removed)}


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _apply(name: str, cands: list[Candidate], check: Callable[[Candidate], str | None],
           reports: list[FilterReport]) -> list[Candidate]:
    rep = FilterReport(name, checked=len(cands))
    kept = []
    for c in cands:
        why = check(c)
        if why:
            rep.removed[c.sample_id] = why
        else:
            kept.append(c)
    reports.append(rep)
    return kept


def _format(c: Candidate) -> str | None:
    item = c.item
    assert item is not None
    q, a = item.question.strip(), item.answer.strip()
    if not 10 <= len(q) <= 400:
        return f"question has {len(q)} characters (10-400 allowed)"
    if not a:
        return "empty answer"
    if len(a) > 2000:
        return f"answer has {len(a)} characters (at most 2000)"
    return None


def _evidence(c: Candidate) -> str | None:
    if c.task.type == "unanswerable":
        c.spans = []
        return None
    if c.missing_quotes:
        q = c.missing_quotes[0]
        return f"quote not found in the passages: {q[:80]!r}" + ("…" if len(q) > 80 else "")
    if not c.spans:
        return "no supporting quote given"
    return None


def _answer_in_span(c: Candidate) -> str | None:
    if c.task.type == "unanswerable":
        return None
    assert c.item is not None
    answer = content_words(c.item.answer)
    if not answer:
        return None
    span_words = set(content_words(" ".join(s["text"] for s in c.spans)))
    covered = sum(1 for w in answer if w in span_words) / len(answer)
    need = 1 / 3 if c.task.type == "summary" else 0.5
    if covered < need:
        return f"only {covered:.0%} of the answer's words are in the supporting spans (need {need:.0%})"
    return None


def _leakage(c: Candidate) -> str | None:
    assert c.item is not None
    q = [w.lower() for w in _WORD.findall(c.item.question)]
    passage = " " + " ".join(w.lower() for w in _WORD.findall(" ".join(ch.text for ch in c.task.chunks))) + " "
    n = min(8, len(q))
    if n < 5:
        return None
    for i in range(len(q) - n + 1):
        if " " + " ".join(q[i:i + n]) + " " in passage:
            return f"question copies the passage verbatim: {' '.join(q[i:i + n])!r}"
    return None


def near_duplicates(questions: Sequence[str], threshold: float = 0.95) -> dict[int, tuple[int, float]]:
    """``{i: (j, similarity)}`` for each question ``i`` too close to an earlier kept ``j``."""
    out: dict[int, tuple[int, float]] = {}
    if len(questions) < 2:
        return out
    try:
        from ragmeter.embed import get_encoder

        emb = get_encoder().encode(list(questions))
        sims = emb @ emb.T
        kept: list[int] = []
        for i in range(len(questions)):
            best = max(((float(sims[i, j]), j) for j in kept), default=(-1.0, -1))
            if best[0] >= threshold:
                out[i] = (best[1], best[0])
            else:
                kept.append(i)
        return out
    except Exception:  # noqa: BLE001 - no sentence-transformers here: fall back to rapidfuzz
        from rapidfuzz import fuzz

        kept = []
        for i, q in enumerate(questions):
            best = max(((fuzz.token_set_ratio(q, questions[j]) / 100, j) for j in kept), default=(-1.0, -1))
            if best[0] >= 0.92:
                out[i] = (best[1], best[0])
            else:
                kept.append(i)
        return out


class SupportVerdict(BaseModel):
    reason: str = Field(description="One sentence.")
    supported: bool = Field(description="True if the evidence states the answer.")


class SpanAnswer(BaseModel):
    reason: str = Field(description="One sentence.")
    answerable: bool = Field(description="True if the question can be answered from the evidence alone.")
    answer: str = Field(description="The answer from the evidence, or empty.")


_SUPPORT_SYSTEM = ("You check evaluation data. Decide whether the EVIDENCE states the ANSWER to the "
                   "QUESTION (paraphrase is fine; an answer that adds facts not in the evidence is not "
                   "supported). Reply in JSON with `reason` and `supported`.\n")
_ANSWER_SYSTEM = ("You check evaluation data. Using ONLY the EVIDENCE, answer the QUESTION. If the "
                  "evidence does not contain the answer, set `answerable` to false and `answer` to an "
                  "empty string. Reply in JSON with `reason`, `answerable` and `answer`.\n")


def _judge_requests(cands: list[Candidate], kind: str) -> list[Any]:
    from ragmeter.llm import JudgeRequest
    from ragmeter.metrics.judge import fence_blocks
    from ragmeter.metrics.judge._common import DATA_NOTICE

    out = []
    for c in cands:
        assert c.item is not None
        evidence = "\n".join(s["text"] for s in c.spans) if c.spans else "\n\n".join(ch.text for ch in c.task.chunks)
        if kind == "support":
            blocks = [("QUESTION", c.item.question), ("ANSWER", c.item.answer), ("EVIDENCE", evidence)]
            out.append(JudgeRequest(metric="golden:filter_support", sample_id=c.sample_id,
                                    system=_SUPPORT_SYSTEM + DATA_NOTICE, user=fence_blocks(blocks),
                                    schema=SupportVerdict, template_version="golden-support-1",
                                    expected_output_tokens=60))
        else:
            blocks = [("QUESTION", c.item.question), ("EVIDENCE", evidence)]
            out.append(JudgeRequest(metric="golden:filter_answerability", sample_id=c.sample_id,
                                    system=_ANSWER_SYSTEM + DATA_NOTICE, user=fence_blocks(blocks),
                                    schema=SpanAnswer, template_version="golden-answerability-1",
                                    expected_output_tokens=80))
    return out


def run_filters(cands: list[Candidate], *, judge: Any = None, verify: bool = True,
                duplicate_threshold: float = 0.95) -> tuple[list[Candidate], list[FilterReport]]:
    """Apply every filter in order; returns the kept candidates and one report per filter."""
    reports: list[FilterReport] = []
    gen = FilterReport("generation", checked=len(cands),
                       removed={c.sample_id: c.failure for c in cands if c.failure})
    reports.append(gen)
    kept = [c for c in cands if not c.failure]
    for name, check in (("format", _format), ("evidence", _evidence),
                        ("answer_in_span", _answer_in_span), ("leakage", _leakage)):
        kept = _apply(name, kept, check, reports)
    dups = near_duplicates([c.item.question for c in kept if c.item], duplicate_threshold)
    rep = FilterReport("near_duplicate", checked=len(kept))
    for i, (j, sim) in dups.items():
        rep.removed[kept[i].sample_id] = f"near-duplicate of {kept[j].sample_id} (similarity {sim:.3f})"
    reports.append(rep)
    kept = [c for i, c in enumerate(kept) if i not in dups]
    if judge is None or not verify:
        return kept, reports
    answerable = [c for c in kept if c.task.type != "unanswerable"]
    results = judge.submit(_judge_requests(answerable, "support"))
    rep = FilterReport("judge_support", checked=len(answerable))
    for c, r in zip(answerable, results, strict=True):
        if not r.ok:
            rep.removed[c.sample_id] = f"support check failed: {r.reason or r.error or r.status}"
        elif not r.value.supported:
            rep.removed[c.sample_id] = f"judge: spans do not support the answer ({r.value.reason})"
    reports.append(rep)
    kept = [c for c in kept if c.sample_id not in rep.removed]
    results = judge.submit(_judge_requests(kept, "answer"))
    rep = FilterReport("answerability", checked=len(kept))
    for c, r in zip(kept, results, strict=True):
        if not r.ok:
            rep.removed[c.sample_id] = f"answerability check failed: {r.reason or r.error or r.status}"
        elif c.task.type == "unanswerable" and r.value.answerable:
            rep.removed[c.sample_id] = f"meant to be unanswerable, but the passages answer it: {r.value.answer!r}"
        elif c.task.type != "unanswerable" and not r.value.answerable:
            rep.removed[c.sample_id] = f"not answerable from the supporting spans alone ({r.value.reason})"
    reports.append(rep)
    kept = [c for c in kept if c.sample_id not in rep.removed]
    for c in kept:
        if c.task.type == "unanswerable" and c.item is not None:
            c.item.answer = UNANSWERABLE_REFERENCE
    return kept, reports
