"""LLM-judged retrieval-context metrics: context precision, context recall, contextual relevancy.

One judge call per sample judges all of its contexts at once (ragas makes one call per context for
precision), each verdict with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import (
    JudgedMetric,
    Verdict,
    context_blocks,
    count_summary,
    estimate_items,
    register_judged,
    share_score,
)


class ContextVerdict(Verdict):
    context: int
    reason: str
    verdict: Literal["yes", "no"]


class ContextVerdicts(Verdict):
    verdicts: list[ContextVerdict]


class Attribution(Verdict):
    statement: str
    reason: str
    verdict: Literal["yes", "no"]


class ReferenceAttribution(Verdict):
    statements: list[Attribution]


def one_verdict_per_context(n: int) -> Callable[[ContextVerdicts], None]:
    """Reject a reply that does not judge contexts 1..n exactly once each."""

    def check(v: ContextVerdicts) -> None:
        got = sorted(x.context for x in v.verdicts)
        if got != list(range(1, n + 1)):
            raise ValueError(f"expected exactly one verdict for each context 1..{n}, got contexts {got}")

    return check


def _ordered(v: ContextVerdicts) -> list[ContextVerdict]:
    return sorted(v.verdicts, key=lambda x: x.context)


def average_precision_of_verdicts(useful: list[bool]) -> float:
    """Rank-weighted precision of a ranked list of useful/not-useful verdicts (ragas context precision).

        AP = sum_k precision@k * v_k / sum_k v_k,   precision@k = (sum_{i<=k} v_i) / k

    0.0 when no context is useful.

    >>> average_precision_of_verdicts([True, False, True])
    0.8333333333333333
    """
    hits = 0
    total = 0.0
    for k, v in enumerate(useful, 1):
        if v:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


# ---- context precision ----------------------------------------------------------------------------


def _precision_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.context_texts:
        return Score.missing("no contexts retrieved")
    if s.reference is not None:
        target = [("REFERENCE", s.reference)]
    elif s.answer is not None:
        target = [("ANSWER", s.answer)]
    else:
        return Score.missing("missing field: reference (or answer)")
    return [("QUESTION", s.question or ""), *target, *context_blocks(s.context_texts)]


def precision_summary(useful: list[bool], value: float) -> str:
    """The verdict summary of a rank-weighted precision: the score and the ranks it comes from."""
    ranks = [k for k, u in enumerate(useful, 1) if u]
    if not ranks:
        return f"no context judged useful ({len(useful)} retrieved): {value:g}"
    where = ", ".join(map(str, ranks))
    return (f"rank-weighted precision {value:.3f}: useful context(s) at rank {where} "
            f"({len(ranks)} useful, {len(useful)} retrieved)")


def _precision_score(_s: Sample, v: ContextVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    useful = [x.verdict == "yes" for x in ordered]
    value = average_precision_of_verdicts(useful)
    return Score(value, details={"verdicts": [x.model_dump() for x in ordered], "useful": sum(useful),
                                 "total": len(useful), "summary": precision_summary(useful, value)})


context_precision = JudgedMetric(
    "context_precision", "context_precision", ContextVerdicts, _precision_blocks, _precision_score,
    output_tokens=lambda s: 20 + 45 * len(s.contexts or []),
    validate=lambda s, p: one_verdict_per_context(len(s.contexts or [])))
register_judged(context_precision, requires=("question", "context_texts"),
                aliases=("ragas_context_precision",), description="""
Rank-weighted precision of the retrieved contexts judged useful for the answer (ragas context
precision; rag-experiment-accelerator's ``ragas_context_precision``).

One judge call marks each context useful or not for reaching the reference answer (the answer
itself when the sample has no reference, as ragas' reference-free variant), with reasons. With
``v_k`` = 1 when the context at rank k is useful:

    context_precision = sum_k (precision@k * v_k) / sum_k v_k,  precision@k = sum_{i<=k} v_i / k

0 when no context is useful. Range [0, 1], higher is better; useful contexts ranked first score
higher. No value without contexts. rag-experiment-accelerator's prose describes the plain share of relevant
contexts: that is ``contextual_relevancy``; the ragas key follows the ragas implementation.
""", parity="""
Equals ragas 0.4.3 context_precision (``ragas:context_precision``; ragas divides by
sum_k v_k + 1e-10, so its 1.0 is 0.9999999999) and DeepEval 4.3.1 ContextualPrecisionMetric
(``deepeval:contextual_precision``) given the same verdicts when the sample has a reference.
Differs at the edges: without a reference it judges against the answer (ragas'
context_utilization); without contexts it has no value (DeepEval: 0; ragas refuses the sample).
""")

# ---- context recall ---------------------------------------------------------------------------------


def _recall_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.reference or "").strip():
        return Score.missing("empty reference: no statements to attribute")
    if not s.context_texts:
        return Score(0.0, details={"statements": [], "note": "no contexts retrieved: nothing is attributable",
                                   "summary": "no contexts retrieved: nothing is attributable"})
    q = [("QUESTION", s.question)] if s.question else []
    return [*q, ("REFERENCE", s.reference or ""), *context_blocks(s.context_texts)]


def _recall_score(_s: Sample, v: ReferenceAttribution, _p: dict[str, Any], _ctx: Any) -> Score:
    return share_score(v, v.statements, {"attributed": lambda x: x.verdict == "yes"},
                       "no statements in the reference", "reference statements", "attributable to the contexts")


context_recall = JudgedMetric(
    "context_recall", "context_recall", ReferenceAttribution, _recall_blocks, _recall_score,
    output_tokens=lambda s: estimate_items(s.reference or "", 60), joint="context_recall")
register_judged(context_recall, requires=("reference", "context_texts"),
                aliases=("ragas_context_recall",), description="""
Share of the reference answer's statements that can be attributed to the retrieved contexts
(ragas context recall; rag-experiment-accelerator's ``ragas_context_recall``).

One judge call splits the reference into statements and marks each attributable or not, with the
supporting context or what is missing as the reason.

    context_recall = |attributable statements| / |reference statements|

Range [0, 1], higher is better. No contexts retrieved scores 0 without a call; an empty reference,
or one without statements, has no value.
""", parity="""
Equals ragas 0.4.3 context_recall (``ragas:context_recall``) and DeepEval 4.3.1
ContextualRecallMetric (``deepeval:contextual_recall``) given the same verdicts, except at the
edges: no contexts scores 0 here (ragas refuses the sample); a reference without statements has
no value (ragas: NaN; DeepEval: 0).
""")

# ---- contextual relevancy ------------------------------------------------------------------------------


def _relevancy_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.context_texts:
        return Score.missing("no contexts retrieved")
    return [("QUESTION", s.question or ""), *context_blocks(s.context_texts)]


def _relevancy_score(_s: Sample, v: ContextVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    rel = sum(x.verdict == "yes" for x in ordered)
    return Score(rel / len(ordered), details={"verdicts": [x.model_dump() for x in ordered],
                                              "relevant": rel, "total": len(ordered),
                                              "summary": count_summary(rel, len(ordered), "contexts",
                                                                       "relevant to the question")})


contextual_relevancy = JudgedMetric(
    "contextual_relevancy", "contextual_relevancy", ContextVerdicts, _relevancy_blocks,
    _relevancy_score, output_tokens=lambda s: 20 + 45 * len(s.contexts or []),
    validate=lambda s, p: one_verdict_per_context(len(s.contexts or [])))
register_judged(contextual_relevancy, requires=("question", "context_texts"), description="""
Share of the retrieved contexts relevant to the question (judged per context; DeepEval's
contextual relevancy counts statements inside the contexts: ``deepeval:contextual_relevancy``).

One judge call marks each context relevant or not to the question, with reasons.

    contextual_relevancy = |relevant contexts| / |contexts|

Range [0, 1], higher is better. No value without contexts.
""", parity="""
Counts whole contexts. DeepEval 4.3.1 ContextualRelevancyMetric counts the relevant statements
inside the contexts (``deepeval:contextual_relevancy``), so the two differ whenever contexts hold
different numbers of statements, and DeepEval scores 0 without contexts (here: no value).
""")
