"""ragas' judge metrics with ragas' numbers: ``ragas:faithfulness``, ``ragas:answer_relevancy``,
``ragas:context_precision``, ``ragas:context_recall``, ``ragas:answer_correctness``.

Each equals ragas 0.4.3 (``ragas.metrics.collections``) given the same intermediate verdicts: its
aggregation, its parameters (``strictness``, ``weights``, ``beta``), its range (a cosine may be
negative) and its edge cases (ragas' NaN is "no value" with the reason; a sample ragas refuses
with an error is "no value" saying so). tests/test_judge_parity.py runs ragas itself against a
scripted judge to check it. The verdicts come in fewer calls than ragas makes: one call judges all
claims, all contexts or all statements of a sample, and the verdicts are shared with ragmeter's
own metrics that read the same ones (``faithfulness``, ``context_precision``, ``context_recall``,
``answer_correctness``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import (
    JudgedMetric,
    Verdict,
    count_summary,
    estimate_items,
    register_judged,
    tool_equals,
)
from ragmeter.metrics.judge.contexts import (
    ContextVerdicts,
    ReferenceAttribution,
    _ordered,
    _precision_blocks,
    _recall_blocks,
    one_verdict_per_context,
    precision_summary,
)
from ragmeter.metrics.judge.generation import (
    ClaimVerdicts,
    CorrectnessClassification,
    _answer_contexts,
    _claims_out,
    _correctness_blocks,
)

REFUSED = "ragas refuses the sample"


def _blank(text: str | None) -> bool:
    return not (text or "")


# ---- ragas:faithfulness ------------------------------------------------------------------------------


def _faithfulness_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if _blank(s.question):
        return Score.missing(f"empty question: {REFUSED} (user_input is missing)")
    if _blank(s.answer):
        return Score.missing(f"empty answer: {REFUSED} (response is missing)")
    if not s.context_texts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts is missing)")
    return _answer_contexts(s, p)


def _faithfulness_score(_s: Sample, v: ClaimVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    details: dict[str, Any] = v.model_dump()
    n = len(v.claims)
    if n == 0:
        return Score.missing("no statements in the answer (ragas: NaN)", details)
    k = sum(c.verdict == "supported" for c in v.claims)
    details.update(supported=k, total=n,
                   summary=count_summary(k, n, "statements", "inferable from the contexts (verdict 1)"))
    return Score(k / n, details=details)


ragas_faithfulness = JudgedMetric("ragas:faithfulness", "faithfulness", ClaimVerdicts, _faithfulness_blocks,
                                  _faithfulness_score, output_tokens=_claims_out)
register_judged(
    ragas_faithfulness, requires=("question", "answer", "context_texts"),
    equals=tool_equals("ragas", "Faithfulness"),
    aliases=("ragas_faithfulness", "Faithfulness", "ragas.metrics.faithfulness", "ragas.metrics.Faithfulness",
             "ragas.metrics.collections.Faithfulness"),
    description="""
ragas' faithfulness: the share of the answer's statements that can be inferred from the retrieved
contexts (ragas 0.4.3 ``Faithfulness``).

ragas breaks the answer into statements (one call), then gives each a verdict 1 (can be directly
inferred from the contexts) or 0 (one more call). Here one call does both, and ``faithfulness``
and ``hallucination`` reuse it:

    ragas:faithfulness = |statements with verdict 1| / |statements|

Range [0, 1], higher is better. No statement: no value (ragas: NaN). An empty question, answer or
context list is refused by ragas (an error): no value.
""", parity="""
Equals ragas 0.4.3 ``Faithfulness`` given the same verdicts; ragmeter makes one call per sample
where ragas makes two. Same number as ragmeter's ``faithfulness``, whose verdicts it shares.
""")


# ---- ragas:answer_relevancy ---------------------------------------------------------------------------


class GeneratedQuestion(Verdict):
    question: str
    noncommittal: bool


class RagasQuestions(Verdict):
    questions: list[GeneratedQuestion] = Field(min_length=1)


def _strictness(p: dict[str, Any]) -> int:
    n = p.get("strictness", 3)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
        raise MetricError(f"ragas:answer_relevancy: strictness must be an integer in 1..10, got {n!r}")
    return n


def _questions_validate(_s: Sample, p: dict[str, Any]) -> Any:
    n = _strictness(p)

    def check(v: RagasQuestions) -> None:
        if len(v.questions) != n:
            raise ValueError(f"expected exactly {n} questions (strictness), got {len(v.questions)}")

    return check


def _relevancy_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if _blank(s.question):
        return Score.missing(f"empty question: {REFUSED} (user_input cannot be empty)")
    if _blank(s.answer):
        return Score.missing(f"empty answer: {REFUSED} (response cannot be empty)")
    return [("ANSWER", s.answer or "")]


def cosines(emb: np.ndarray) -> np.ndarray:
    """Cosine of rows 1.. with row 0, in float64 as ragas computes it (a zero row gives NaN, as
    ragas' division does)."""
    e = np.asarray(emb, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (e[1:] @ e[0]) / (np.linalg.norm(e[1:], axis=1) * np.linalg.norm(e[0]))


def _relevancy_score(s: Sample, v: RagasQuestions, _p: dict[str, Any], ctx: Any) -> Score:
    details: dict[str, Any] = v.model_dump()
    kept = [q for q in v.questions if q.question]  # ragas keeps a generation with a non-empty question
    if not kept:
        details["summary"] = "no question generated: ragas scores 0"
        return Score(0.0, details=details)
    emb = ctx.service("embeddings").matrix([s.question or "", *(q.question for q in kept)])
    sims = cosines(emb)
    all_noncommittal = all(q.noncommittal for q in kept)
    value = float(sims.mean()) * int(not all_noncommittal)
    if np.isnan(value):
        return Score.missing("a generated question or the question embeds to a zero vector (ragas: NaN)", details)
    details["similarities"] = [round(float(x), 6) for x in sims]
    details["summary"] = (f"every one of the {len(kept)} generated questions found the answer noncommittal: 0"
                          if all_noncommittal else
                          f"mean cosine {value:.3f} of the question with {len(kept)} generated question(s)")
    return Score(value, details=details)


ragas_answer_relevancy = JudgedMetric(
    "ragas:answer_relevancy", "ragas_answer_relevancy", RagasQuestions, _relevancy_blocks, _relevancy_score,
    output_tokens=lambda s: 40 + 30 * 3, subs=lambda p: {"n": _strictness(p)}, validate=_questions_validate,
    embed=lambda s, p: [s.question or ""], check_params=_strictness)
register_judged(
    ragas_answer_relevancy, requires=("question", "answer"), needs_embeddings=True,
    defaults={"strictness": 3}, value_range=(-1.0, 1.0),
    equals=tool_equals("ragas", "AnswerRelevancy"),
    aliases=("ragas_answer_relevancy", "AnswerRelevancy", "ResponseRelevancy", "ragas:response_relevancy",
             "response_relevancy", "ragas.metrics.answer_relevancy",
             "ragas.metrics.AnswerRelevancy", "ragas.metrics.ResponseRelevancy",
             "ragas.metrics.collections.AnswerRelevancy"),
    description="""
ragas' answer relevancy: how well questions generated back from the answer match the real
question (ragas 0.4.3 ``AnswerRelevancy``).

The judge writes ``strictness`` (default 3) questions the answer would answer, each with a
noncommittal flag (ragas makes one call per question; here one call makes all of them); the
embedding model (``embedding_model`` option) compares each with the question:

    ragas:answer_relevancy = mean_i cos(E(question), E(q_i)) x (0 if every q_i is noncommittal else 1)

Range [-1, 1] (a negative mean cosine is kept, as ragas keeps it), higher is better. A generation
with an empty question is dropped; none left scores 0, as in ragas. An empty question or answer is
refused by ragas: no value.
""", parity="""
Equals ragas 0.4.3 ``AnswerRelevancy`` (``ragas.metrics.collections``) given the same generated
questions and the same embeddings (to float32 precision of the embedding rows, about 1e-7). ragas'
deprecated ``ragas.metrics.answer_relevancy`` with an instructor LLM from ``llm_factory`` gets one
generation whatever ``strictness`` says: ``strictness=1`` equals it. ragmeter's
``ragas_answer_relevance`` differs (clipped to [0, 1], one noncommittal flag).
""")


# ---- ragas:context_precision ---------------------------------------------------------------------------


def _precision_checks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if _blank(s.question):
        return Score.missing(f"empty question: {REFUSED} (user_input cannot be empty)")
    if _blank(s.reference):
        return Score.missing(f"empty reference: {REFUSED} (reference cannot be empty); "
                             "context_precision judges against the answer instead")
    if not s.context_texts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts cannot be empty)")
    return _precision_blocks(s, p)


def ragas_average_precision(verdicts: list[int]) -> float:
    """ragas' ``_calculate_average_precision``: sum_k precision@k * v_k / (sum_k v_k + 1e-10).

    >>> ragas_average_precision([1, 0, 1])
    0.8333333332916666
    """
    denominator = sum(verdicts) + 1e-10
    numerator = sum(sum(verdicts[:i + 1]) / (i + 1) * verdicts[i] for i in range(len(verdicts)))
    return numerator / denominator


def _precision_score(_s: Sample, v: ContextVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    useful = [1 if x.verdict == "yes" else 0 for x in ordered]
    value = ragas_average_precision(useful)
    return Score(value, details={"verdicts": [x.model_dump() for x in ordered], "useful": sum(useful),
                                 "total": len(useful), "summary": precision_summary([bool(u) for u in useful], value)})


ragas_context_precision = JudgedMetric(
    "ragas:context_precision", "context_precision", ContextVerdicts, _precision_checks, _precision_score,
    output_tokens=lambda s: 20 + 45 * len(s.contexts or []),
    validate=lambda s, p: one_verdict_per_context(len(s.contexts or [])))
register_judged(
    ragas_context_precision, requires=("question", "reference", "context_texts"),
    equals=tool_equals("ragas", "ContextPrecisionWithReference"),
    aliases=("ContextPrecision", "ContextPrecisionWithReference", "LLMContextPrecisionWithReference",
             "ragas:context_precision_with_reference", "ragas:llm_context_precision_with_reference",
             "llm_context_precision_with_reference", "context_precision_with_reference",
             "ragas.metrics.context_precision", "ragas.metrics.ContextPrecision",
             "ragas.metrics.LLMContextPrecisionWithReference", "ragas.metrics.collections.ContextPrecision",
             "ragas.metrics.collections.ContextPrecisionWithReference"),
    description="""
ragas' context precision: rank-weighted precision of the contexts judged useful for reaching the
reference answer (ragas 0.4.3 ``ContextPrecision`` / ``ContextPrecisionWithReference``).

With ``v_k`` = 1 when the context at rank k is useful (ragas asks once per context; here one call
judges them all, shared with ``context_precision``):

    ragas:context_precision = sum_k (precision@k x v_k) / (sum_k v_k + 1e-10)

ragas' 1e-10 is kept, so all-useful contexts score 0.9999999999. 0 when no context is useful.
Range [0, 1], higher is better. An empty question, reference or context list is refused by ragas:
no value.
""", parity="""
Equals ragas 0.4.3 ``ContextPrecision`` given the same per-context verdicts. ragmeter's
``context_precision`` shares the verdicts and differs by ragas' 1e-10 and at the edges.
""")


# ---- ragas:context_recall --------------------------------------------------------------------------------


def _recall_checks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if _blank(s.question):
        return Score.missing(f"empty question: {REFUSED} (user_input cannot be empty)")
    if _blank(s.reference):
        return Score.missing(f"empty reference: {REFUSED} (reference cannot be empty)")
    if not s.context_texts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts cannot be empty)")
    return _recall_blocks(s, p)


def _recall_score(_s: Sample, v: ReferenceAttribution, _p: dict[str, Any], _ctx: Any) -> Score:
    details: dict[str, Any] = v.model_dump()
    n = len(v.statements)
    if n == 0:
        return Score.missing("no statements in the reference (ragas: NaN)", details)
    k = sum(x.verdict == "yes" for x in v.statements)
    details.update(attributed=k, total=n,
                   summary=count_summary(k, n, "reference statements", "attributed to the contexts"))
    return Score(k / n, details=details)


ragas_context_recall = JudgedMetric(
    "ragas:context_recall", "context_recall", ReferenceAttribution, _recall_checks, _recall_score,
    output_tokens=lambda s: estimate_items(s.reference or "", 60))
register_judged(
    ragas_context_recall, requires=("question", "reference", "context_texts"),
    equals=tool_equals("ragas", "ContextRecall"),
    aliases=("ContextRecall", "LLMContextRecall", "ragas:llm_context_recall", "llm_context_recall", "ragas.metrics.context_recall", "ragas.metrics.ContextRecall",
             "ragas.metrics.LLMContextRecall", "ragas.metrics.collections.ContextRecall"),
    description="""
ragas' context recall: the share of the reference answer's statements attributable to the
retrieved contexts (ragas 0.4.3 ``ContextRecall``).

One judge call classifies every reference statement as attributed or not (shared with
``context_recall`` and ``deepeval:contextual_recall``):

    ragas:context_recall = |attributed statements| / |reference statements|

Range [0, 1], higher is better. No statement: no value (ragas: NaN). An empty question, reference
or context list is refused by ragas: no value.
""", parity="""
Equals ragas 0.4.3 ``ContextRecall`` given the same verdicts. ragmeter's ``context_recall`` shares
the verdicts and differs only without contexts (0 there).
""")


# ---- ragas:answer_correctness -------------------------------------------------------------------------------


def _correctness_params(p: dict[str, Any]) -> tuple[list[float], float]:
    w = p.get("weights", [0.75, 0.25])
    try:
        weights = [float(x) for x in w]
    except (TypeError, ValueError):
        raise MetricError(f"ragas:answer_correctness: weights must be two numbers [factuality, similarity], got {w!r}") from None
    if len(weights) != 2:
        raise MetricError("ragas:answer_correctness: expects a list of two weights, first for factuality, "
                          f"second for semantic similarity; got {w!r}")
    if all(x == 0 for x in weights):
        raise MetricError("ragas:answer_correctness: at least one weight must be non-zero")
    if any(x < 0 for x in weights):
        raise MetricError(f"ragas:answer_correctness: weights must be non-negative, got {w!r}")
    beta = p.get("beta", 1.0)
    if not isinstance(beta, float | int) or isinstance(beta, bool) or beta <= 0:
        raise MetricError(f"ragas:answer_correctness: beta must be a positive number, got {beta!r}")
    return weights, float(beta)


def ragas_fbeta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """ragas 0.4.3 ``AnswerCorrectness._compute_f1_score`` (its precision/recall conventions for
    empty classes included)."""
    precision = (1.0 if fn == 0 else 0.0) if tp + fp == 0 else tp / (tp + fp)
    recall = (1.0 if fp == 0 else 0.0) if tp + fn == 0 else tp / (tp + fn)
    if precision + recall == 0:
        return 0.0
    b2 = beta ** 2
    return float((1 + b2) * (precision * recall) / (b2 * precision + recall))


def _correctness_score(s: Sample, v: CorrectnessClassification, p: dict[str, Any], ctx: Any) -> Score:
    weights, beta = _correctness_params(p)
    tp, fp, fn = len(v.true_positive), len(v.false_positive), len(v.false_negative)
    details: dict[str, Any] = v.model_dump()
    details.update(tp=tp, fp=fp, fn=fn, weights=weights, beta=beta)
    # ragas classifies only when both texts have statements, else takes factuality 1.0; the answer's
    # statements are TP + FP, and a reference statement is either covered (a TP) or a FN
    if tp + fp == 0 or tp + fn == 0:
        factuality = 1.0
        how = "a side without statements: factuality 1 (ragas)"
    else:
        factuality = ragas_fbeta(tp, fp, fn, beta)
        how = f"F{beta:g} {factuality:.3f} from {tp} TP, {fp} FP, {fn} FN"
    similarity = 0.0
    if weights[1] != 0:
        emb = ctx.service("embeddings").matrix([s.answer or "", s.reference or ""])
        e = np.asarray(emb, dtype=np.float64)
        na, nr = np.linalg.norm(e[0]), np.linalg.norm(e[1])
        similarity = 0.0 if na == 0 or nr == 0 else float(e[0] @ e[1] / (na * nr))
        details["similarity"] = round(similarity, 6)
    value = float(np.average([factuality, similarity], weights=weights))
    details["factuality"] = round(factuality, 6)
    details["summary"] = (f"{how}; similarity {similarity:.3f}; weighted "
                          f"{weights[0]:g}:{weights[1]:g} = {value:.3f}")
    return Score(value, details=details)


ragas_answer_correctness = JudgedMetric(
    "ragas:answer_correctness", "answer_correctness", CorrectnessClassification, _correctness_blocks,
    _correctness_score, check_params=_correctness_params,
    output_tokens=lambda s: estimate_items((s.answer or "") + " " + (s.reference or ""), 50),
    embed=lambda s, p: [s.answer or "", s.reference or ""] if _correctness_params(p)[0][1] != 0 else [])
register_judged(
    ragas_answer_correctness, requires=("answer", "reference"), needs_embeddings=True,
    defaults={"weights": [0.75, 0.25], "beta": 1.0}, value_range=(-1.0, 1.0),
    equals=tool_equals("ragas", "AnswerCorrectness"),
    aliases=("ragas_answer_correctness", "AnswerCorrectness", "ragas.metrics.answer_correctness",
             "ragas.metrics.AnswerCorrectness", "ragas.metrics.collections.AnswerCorrectness"),
    description="""
ragas' answer correctness: statement-level F-beta against the reference blended with the semantic
similarity of answer and reference (ragas 0.4.3 ``AnswerCorrectness``).

One judge call classifies the answer's statements as true positives (supported by the reference)
or false positives and the reference's uncovered statements as false negatives (ragas makes three
calls; the verdicts are shared with ``answer_correctness``). With P = TP/(TP+FP), R = TP/(TP+FN)
(ragas' conventions for empty classes) and the embedding cosine ``sim``:

    F = (1 + beta^2) P R / (beta^2 P + R)       (factuality 1 when the answer or the reference has no statement)
    ragas:answer_correctness = (w_f F + w_s sim) / (w_f + w_s),   weights = [0.75, 0.25], beta = 1

``weights=[1, 0]`` needs no embeddings. Range [-1, 1] (the cosine is not clipped, as in ragas),
higher is better.
""", parity="""
Equals ragas 0.4.3 ``AnswerCorrectness`` given the same classification and the same embeddings (to
float32 precision, about 1e-7); an empty text embeds to a zero vector here (similarity 0).
ragmeter's ``answer_correctness`` shares the verdicts and differs where a side has no statement
and in clipping the similarity.
""")
