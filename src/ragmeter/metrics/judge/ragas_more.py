"""The rest of ragas' single-turn judge metrics under ragas' names: ``ragas:answer_accuracy``,
``ragas:context_relevance``, ``ragas:response_groundedness``, ``ragas:context_precision_without_reference``
(``context_utilization``), ``ragas:context_entity_recall``, ``ragas:factual_correctness``,
``ragas:noise_sensitivity``, ``ragas:summary_score``, ``ragas:sql_semantic_equivalence``,
``ragas:domain_specific_rubrics``, ``ragas:instance_specific_rubrics``.

Each asks the judge the questions ragas 0.4.3 (``ragas.metrics.collections``) asks, in one call per
sample (ragas makes one per step), and computes ragas' formula from the verdicts with its
parameters, defaults and edge cases: a sample ragas refuses (it raises) has no value saying so,
ragas' NaN is no value, ragas' shortcuts (a blank text scoring 0 without a call) are kept.
tests/test_parity_ragas_judged.py runs ragas itself against the scripted parity server.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import (
    JudgedMetric,
    Verdict,
    context_blocks,
    count_summary,
    estimate_items,
    register_judged,
    tool_equals,
)
from ragmeter.metrics.judge.contexts import (
    ContextVerdicts,
    _ordered,
    one_verdict_per_context,
    precision_summary,
)
from ragmeter.metrics.judge.ragas_metrics import REFUSED, ragas_average_precision

_SAME = "Equals ragas 0.4.3 ``{cls}`` given the same verdicts (tests/test_parity_ragas_judged.py); "


def _refused(field: str, ragas_field: str) -> Score:
    return Score.missing(f"empty {field}: {REFUSED} ({ragas_field} is missing)")


def _contexts(s: Sample) -> list[str]:
    return [c.text or "" for c in s.contexts or []]


def _reference_contexts(s: Sample) -> list[str]:
    return [c.text or "" for c in s.relevant or []]


# ---- two judges: answer accuracy, context relevance, response groundedness ------------------------------


class AccuracyRatings(Verdict):
    rating_1: Literal[0, 2, 4]
    rating_2: Literal[0, 2, 4]


class ThreeLevelRatings(Verdict):
    rating_1: Literal[0, 1, 2]
    rating_2: Literal[0, 1, 2]


def _two_judges(top: int) -> Any:
    def score(_s: Sample, v: Any, _p: dict[str, Any], _ctx: Any) -> Score:
        value = (v.rating_1 / top + v.rating_2 / top) / 2.0
        return Score(value, details={**v.model_dump(), "summary": f"ratings {v.rating_1} and {v.rating_2} of {top}, "
                                                               f"mean {value:.3f}"})
    return score


def _accuracy_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.question:
        return _refused("question", "user_input")
    if not s.answer:
        return _refused("answer", "response")
    if not s.reference:
        return _refused("reference", "reference")
    return [("QUESTION", s.question), ("ANSWER", s.answer), ("REFERENCE", s.reference)]


def _relevance_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.question:
        return _refused("question", "user_input")
    if not s.contexts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts is missing)")
    joined = "\n".join(_contexts(s))
    q, c = s.question.strip(), joined.strip()
    if not q or not c or q == c or c in q:  # ragas scores these 0 without asking
        return Score(0.0, details={"summary": "blank question or contexts, or the contexts repeat the question: 0 (ragas)"})
    return [("QUESTION", s.question), ("CONTEXT", joined)]


def _groundedness_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.answer:
        return _refused("answer", "response")
    if not s.contexts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts is missing)")
    joined = "\n".join(_contexts(s))
    if not s.answer.strip() or not joined.strip():
        return Score(0.0, details={"summary": "blank answer or contexts: 0 (ragas)"})
    return [("ANSWER", s.answer), ("CONTEXT", joined)]


_TWO = """

ragas asks two judges with two wordings, one call each; here one call gives both ratings. ragas
retries a judge whose rating is off the scale and keeps the other judge's rating when one never
answers; here a rating off the scale is an invalid reply (retried, then no value)."""

for _name, _cls, _tpl, _schema, _top, _blocks, _req, _desc in (
    ("ragas:answer_accuracy", "AnswerAccuracy", "ragas_answer_accuracy", AccuracyRatings, 4, _accuracy_blocks,
     ("question", "answer", "reference"), """
ragas' answer accuracy (``AnswerAccuracy``, NVIDIA's metric): two judges rate the answer against the
reference 0, 2 or 4 (the second with the roles of answer and reference swapped):

    ragas:answer_accuracy = (rating_1 / 4 + rating_2 / 4) / 2

Range [0, 1]. An empty question, answer or reference is refused by ragas: no value."""),
    ("ragas:context_relevance", "ContextRelevance", "ragas_context_relevance", ThreeLevelRatings, 2,
     _relevance_blocks, ("question", "context_texts"), """
ragas' context relevance (``ContextRelevance``, NVIDIA's metric): two judges rate 0, 1 or 2 whether
the retrieved contexts (joined by newlines) hold the information to answer the question:

    ragas:context_relevance = (rating_1 / 2 + rating_2 / 2) / 2

0 without a call when the question or the contexts are blank, equal, or the contexts are inside the
question (ragas' rules). Range [0, 1]. An empty question or no context is refused by ragas."""),
    ("ragas:response_groundedness", "ResponseGroundedness", "ragas_response_groundedness", ThreeLevelRatings, 2,
     _groundedness_blocks, ("answer", "context_texts"), """
ragas' response groundedness (``ResponseGroundedness``, NVIDIA's metric): two judges rate 0, 1 or 2
whether the answer is supported by the retrieved contexts (joined by newlines):

    ragas:response_groundedness = (rating_1 / 2 + rating_2 / 2) / 2

0 without a call when the answer or the contexts are blank (ragas). Range [0, 1]. An empty answer
or no context is refused by ragas: no value."""),
):
    _snake = _name.split(":", 1)[1]
    register_judged(
        JudgedMetric(_name, _tpl, _schema, _blocks, _two_judges(_top), output_tokens=lambda s: 20),
        requires=_req, equals=tool_equals("ragas", _cls), aliases=(_cls, _snake), description=_desc + _TWO,
        parity=_SAME.format(cls=_cls) + "ragmeter asks for both judges' ratings in one call where ragas makes two.")


# ---- context precision without a reference (context utilization) -----------------------------------------


def _utilization_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.question:
        return _refused("question", "user_input")
    if not s.answer:
        return _refused("answer", "response")
    if not s.contexts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts cannot be empty)")
    return [("QUESTION", s.question), ("ANSWER", s.answer), *context_blocks(_contexts(s))]


def _utilization_score(_s: Sample, v: ContextVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    useful = [1 if x.verdict == "yes" else 0 for x in ordered]
    value = ragas_average_precision(useful)
    return Score(value, details={"verdicts": [x.model_dump() for x in ordered], "useful": sum(useful),
                                 "total": len(useful), "summary": precision_summary([bool(u) for u in useful], value)})


register_judged(
    JudgedMetric("ragas:context_precision_without_reference", "context_precision", ContextVerdicts,
                 _utilization_blocks, _utilization_score, output_tokens=lambda s: 20 + 45 * len(s.contexts or []),
                 validate=lambda s, p: one_verdict_per_context(len(s.contexts or []))),
    requires=("question", "answer", "context_texts"), equals=tool_equals("ragas", "ContextPrecisionWithoutReference"),
    aliases=("ContextPrecisionWithoutReference", "ContextUtilization", "LLMContextPrecisionWithoutReference",
             "ragas:context_utilization", "context_utilization", "ragas:llm_context_precision_without_reference",
             "llm_context_precision_without_reference", "context_precision_without_reference"),
    description="""
ragas' context precision without a reference (``ContextPrecisionWithoutReference``, also
``ContextUtilization``): rank-weighted precision of the retrieved contexts judged useful for
arriving at the answer (the response stands in for the reference). With v_k = 1 when the context at
rank k is useful:

    ragas:context_precision_without_reference = sum_k (precision@k x v_k) / (sum_k v_k + 1e-10)

Range [0, 1]. An empty question, answer or context list is refused by ragas: no value.""",
    parity=_SAME.format(cls="ContextPrecisionWithoutReference") + "ragas' ContextUtilization is the same class "
    "under another name. One call judges every context where ragas makes one per context.")


# ---- context entity recall -----------------------------------------------------------------------------


class EntityLists(Verdict):
    reference_entities: list[str]
    context_entities: list[str]


def _entity_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    return [("REFERENCE", s.reference or ""), *context_blocks(_contexts(s))]


def _entity_score(_s: Sample, v: EntityLists, _p: dict[str, Any], _ctx: Any) -> Score:
    ref, found = set(v.reference_entities), set(v.context_entities)
    both = len(ref & found)
    value = both / (len(ref) + 1e-8)
    return Score(value, details={**v.model_dump(), "in_both": both, "reference_total": len(ref),
                                 "summary": count_summary(both, len(ref), "reference entities", "found in the contexts")
                                 + " (ragas divides by n + 1e-8)"})


register_judged(
    JudgedMetric("ragas:context_entity_recall", "ragas_context_entity_recall", EntityLists, _entity_blocks,
                 _entity_score, output_tokens=lambda s: estimate_items(s.reference or "", 20, 60)),
    requires=("reference", "context_texts"), equals=tool_equals("ragas", "ContextEntityRecall"),
    aliases=("ContextEntityRecall", "context_entity_recall"),
    description="""
ragas' context entity recall (``ContextEntityRecall``): the share of the reference's entities
(persons, places, organisations, dates, amounts, other proper nouns) that the retrieved contexts
mention:

    ragas:context_entity_recall = |E(reference) ∩ E(contexts)| / (|E(reference)| + 1e-8)

0 when the reference has no entity. Range [0, 1].""",
    parity=_SAME.format(cls="ContextEntityRecall") + "one call lists both texts' entities where ragas makes two.")


# ---- factual correctness -------------------------------------------------------------------------------


class JudgedClaim(Verdict):
    claim: str
    reason: str = ""
    verdict: Literal[0, 1]


class FactualClaims(Verdict):
    answer_claims: list[JudgedClaim]
    reference_claims: list[JudgedClaim]


_ATOMICITY = {"low": "Keep each claim close to its sentence: split a sentence only where it states clearly separate facts.",
              "high": "Break every sentence into atomic claims, each stating a single fact."}
_COVERAGE = {"low": "Cover the main facts only; details may be left out.",
             "high": "Cover every piece of information, details included."}


def _factual_params(p: dict[str, Any]) -> tuple[str, float, str, str]:
    mode, beta = p.get("mode", "f1"), p.get("beta", 1.0)
    if mode not in ("precision", "recall", "f1"):
        raise MetricError(f"ragas:factual_correctness: mode must be precision, recall or f1, got {mode!r}")
    if not isinstance(beta, int | float) or isinstance(beta, bool):
        raise MetricError(f"ragas:factual_correctness: beta must be a number, got {beta!r}")
    for k, table in (("atomicity", _ATOMICITY), ("coverage", _COVERAGE)):
        if p.get(k, "low") not in table:
            raise MetricError(f"ragas:factual_correctness: {k} must be low or high, got {p.get(k)!r}")
    return mode, float(beta), p.get("atomicity", "low"), p.get("coverage", "low")


def ragas_fbeta_score(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """ragas' ``fbeta_score`` (``ragas.metrics.utils``): precision and recall 0 for an empty class."""
    precision = 0.0 if tp + fp == 0 else tp / (tp + fp)
    recall = 0.0 if tp + fn == 0 else tp / (tp + fn)
    if precision == 0 and recall == 0:
        return 0.0
    b2 = beta ** 2
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def _factual_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.answer:
        return _refused("answer", "response")
    if not s.reference:
        return _refused("reference", "reference")
    return [("ANSWER", s.answer), ("REFERENCE", s.reference)]


def _factual_score(_s: Sample, v: FactualClaims, p: dict[str, Any], _ctx: Any) -> Score:
    mode, beta, _, _ = _factual_params(p)
    tp = sum(c.verdict for c in v.answer_claims)
    fp = len(v.answer_claims) - tp
    fn = 0 if mode == "precision" else sum(1 for c in v.reference_claims if c.verdict == 0)
    if mode == "precision":
        raw = tp / (tp + fp + 1e-8)
    elif mode == "recall":
        raw = tp / (tp + fn + 1e-8)
    else:
        raw = ragas_fbeta_score(tp, fp, fn, beta)
    value = float(np.round(raw, 2))
    details: dict[str, Any] = {**v.model_dump(), "tp": tp, "fp": fp, "fn": fn, "mode": mode,
                               "summary": f"{tp} of {tp + fp} answer claims in the reference, {fn} reference claims "
                                          f"missing from the answer: {mode} {value:.2f} (rounded to 2 places, as ragas)"}
    return Score(value, details=details)


register_judged(
    JudgedMetric("ragas:factual_correctness", "ragas_factual_correctness", FactualClaims, _factual_blocks,
                 _factual_score, check_params=_factual_params,
                 subs=lambda p: {"atomicity": _ATOMICITY[_factual_params(p)[2]], "coverage": _COVERAGE[_factual_params(p)[3]]},
                 output_tokens=lambda s: estimate_items((s.answer or "") + " " + (s.reference or ""), 45)),
    requires=("answer", "reference"), equals=tool_equals("ragas", "FactualCorrectness"),
    defaults={"mode": "f1", "beta": 1.0, "atomicity": "low", "coverage": "low"},
    aliases=("FactualCorrectness", "factual_correctness"),
    description="""
ragas' factual correctness (``FactualCorrectness``): the answer's claims checked against the
reference (TP: inferable, FP: not) and the reference's claims against the answer (FN: not
inferable); claims are split at ``atomicity`` and ``coverage`` low (default) or high:

    precision = TP / (TP + FP + 1e-8)     recall = TP / (TP + FN + 1e-8)
    f1 = ragas' F-beta of TP, FP, FN (``beta`` = 1; 0 when precision and recall are 0)
    ragas:factual_correctness = round(<mode>, 2)        mode = f1 (default), precision or recall

Range [0, 1]. An empty answer or reference is refused by ragas: no value.""",
    parity=_SAME.format(cls="FactualCorrectness") + "one call decomposes and verifies both directions where ragas "
    "makes up to four; the rounding to two places is ragas'.")


# ---- noise sensitivity ---------------------------------------------------------------------------------


class ReferenceStatement(Verdict):
    statement: str
    in_contexts: list[Literal[0, 1]]


class AnswerStatement(ReferenceStatement):
    in_reference: Literal[0, 1]


class NoiseVerdicts(Verdict):
    reference_statements: list[ReferenceStatement]
    answer_statements: list[AnswerStatement]


def _noise_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    for value, ours, theirs in ((s.reference, "reference", "reference"), (s.question, "question", "user_input"),
                                (s.answer, "answer", "response")):
        if not value:
            return _refused(ours, theirs)
    if not s.contexts:
        return Score.missing(f"no retrieved contexts: {REFUSED} (retrieved_contexts is missing)")
    return [("QUESTION", s.question or ""), ("REFERENCE", s.reference or ""), ("ANSWER", s.answer or ""),
            *context_blocks(_contexts(s))]


def _noise_validate(s: Sample, _p: dict[str, Any]) -> Any:
    n = len(s.contexts or [])

    def check(v: NoiseVerdicts) -> None:
        for st in [*v.reference_statements, *v.answer_statements]:
            if len(st.in_contexts) != n:
                raise ValueError(f"every statement needs one in_contexts verdict per context ({n}), "
                                 f"got {len(st.in_contexts)}")
    return check


def noise_sensitivity(gt_in_ctx: np.ndarray, ans_in_ctx: np.ndarray, ans_in_ref: np.ndarray,
                      mode: str = "relevant") -> float:
    """ragas' noise sensitivity from its three verdict tables: ``gt_in_ctx`` (reference statements x
    contexts), ``ans_in_ctx`` (answer statements x contexts), ``ans_in_ref`` (answer statements).

    A context is relevant when it supports some reference statement; an answer statement is
    incorrect when the reference does not support it. ``relevant``: the share of answer statements
    that are incorrect and supported by a relevant context; ``irrelevant``: incorrect, supported by an
    irrelevant context and by no relevant one. NaN without answer statements; ``ValueError`` (ragas
    raises it) without reference statements.
    """
    incorrect = ~ans_in_ref.astype(bool)[None, :]
    relevant = np.max(gt_in_ctx.astype(bool), axis=0, keepdims=True)
    supported = ans_in_ctx.astype(bool)
    relevant_faithful = np.max(relevant & supported, axis=1)
    if mode == "irrelevant":
        irrelevant_faithful = np.max(~relevant & supported, axis=1) & ~relevant_faithful
        return float(np.mean(irrelevant_faithful & incorrect))
    return float(np.mean(relevant_faithful & incorrect))


def _noise_score(s: Sample, v: NoiseVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    mode = p.get("mode", "relevant")
    n = len(s.contexts or [])
    gt = np.array([x.in_contexts for x in v.reference_statements], dtype=float).reshape(-1, n)
    ans = np.array([x.in_contexts for x in v.answer_statements], dtype=float).reshape(-1, n)
    ref = np.array([x.in_reference for x in v.answer_statements], dtype=float)
    details: dict[str, Any] = {**v.model_dump(), "mode": mode}
    try:
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                value = noise_sensitivity(gt, ans, ref, mode)
    except ValueError:
        return Score.missing(f"no statements in the reference: {REFUSED} (its verdict table is empty)", details)
    if np.isnan(value):
        return Score.missing("no statements in the answer (ragas: NaN)", details)
    k = round(value * len(v.answer_statements))
    details["summary"] = count_summary(k, len(v.answer_statements), "answer statements",
                                       f"incorrect and supported by a{'n ir' if mode == 'irrelevant' else ' '}relevant context")
    return Score(value, details=details)


def _noise_mode(p: dict[str, Any]) -> None:
    if p.get("mode", "relevant") not in ("relevant", "irrelevant"):
        raise MetricError(f"ragas:noise_sensitivity: mode must be relevant or irrelevant, got {p.get('mode')!r}")


register_judged(
    JudgedMetric("ragas:noise_sensitivity", "ragas_noise_sensitivity", NoiseVerdicts, _noise_blocks, _noise_score,
                 check_params=_noise_mode, validate=_noise_validate,
                 output_tokens=lambda s: estimate_items((s.answer or "") + " " + (s.reference or ""), 30 + 5 * len(s.contexts or []))),
    requires=("question", "answer", "reference", "context_texts"), higher_is_better=False,
    equals=tool_equals("ragas", "NoiseSensitivity"), defaults={"mode": "relevant"},
    aliases=("NoiseSensitivity", "noise_sensitivity", "ragas:noise_sensitivity_relevant"),
    description="""
ragas' noise sensitivity (``NoiseSensitivity``): how often the answer states something wrong that
a retrieved context supports. The reference's and the answer's statements are checked against each
context, the answer's also against the reference; a context is relevant when it supports a reference
statement:

    relevant (default):  mean over answer statements of [not in the reference and supported by a relevant context]
    irrelevant:          ... supported by an irrelevant context and by no relevant one

Range [0, 1], lower is better. No answer statement: no value (ragas: NaN); no reference statement,
or an empty question, answer, reference or context list: refused by ragas, no value.""",
    parity=_SAME.format(cls="NoiseSensitivity") + "one call gives every verdict where ragas makes "
    "2 + 2 x contexts + 1 calls.")


# ---- summary score -------------------------------------------------------------------------------------


class SummaryQuestion(Verdict):
    question: str
    answer: Literal["1", "0"]


class RagasSummaryVerdicts(Verdict):
    keyphrases: list[str]
    questions: list[SummaryQuestion]


def _summary_params(p: dict[str, Any]) -> tuple[bool, float]:
    coeff = p.get("coeff", 0.5)
    if not isinstance(coeff, int | float) or isinstance(coeff, bool) or not 0.0 <= coeff <= 1.0:
        raise MetricError(f"ragas:summary_score: coeff must be between 0.0 and 1.0, got {coeff!r}")
    return bool(p.get("length_penalty", True)), float(coeff)


def _summary_text(s: Sample) -> str:
    return "\n".join(_reference_contexts(s))


def _summary_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not any(t.strip() for t in _reference_contexts(s)):
        return Score.missing(f"blank reference contexts: {REFUSED} (reference_contexts cannot be empty)")
    if not (s.answer or "").strip():
        return _refused("answer", "response")
    return [("TEXT", _summary_text(s)), ("SUMMARY", s.answer or "")]


def _summary_score(s: Sample, v: RagasSummaryVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    penalty, coeff = _summary_params(p)
    details: dict[str, Any] = v.model_dump()
    n = len(v.questions)
    if n == 0:
        return Score.missing(f"no question generated from the text: {REFUSED} (division by zero)", details)
    k = sum(1 for q in v.questions if q.answer == "1")
    qa = k / n
    text, summary = _summary_text(s), s.answer or ""
    value = qa
    if penalty:
        conciseness = 1 - min(len(summary), len(text)) / (len(text) + 1e-10)
        value = qa * (1 - coeff) + conciseness * coeff
        details["conciseness"] = conciseness
    details.update(qa_score=qa, summary=count_summary(k, n, "questions on the text", "answered by the summary")
                   + (f"; with the length penalty (coeff {coeff:g}) {value:.3f}" if penalty else ""))
    return Score(value, details=details)


register_judged(
    JudgedMetric("ragas:summary_score", "ragas_summary_score", RagasSummaryVerdicts, _summary_blocks, _summary_score,
                 check_params=_summary_params, output_tokens=lambda s: estimate_items(_summary_text(s), 40)),
    requires=("answer", "relevant"), equals=tool_equals("ragas", "SummaryScore"),
    defaults={"length_penalty": True, "coeff": 0.5}, aliases=("SummaryScore", "summary_score", "summarization_score"),
    description="""
ragas' summary score (``SummaryScore``): the answer is a summary of the reference contexts (ragas'
``reference_contexts``, ragmeter's ``relevant`` chunks, joined by newlines). The judge extracts the
text's keyphrases, writes yes/no questions the text answers, and says which ones the summary
answers:

    qa = |questions the summary answers| / |questions|
    conciseness = 1 - min(len(summary), len(text)) / (len(text) + 1e-10)      (characters)
    ragas:summary_score = qa x (1 - coeff) + conciseness x coeff      (coeff = 0.5; qa alone with length_penalty=false)

Range [0, 1]. No question: no value (ragas divides by zero); blank contexts or summary are refused
by ragas.""",
    parity=_SAME.format(cls="SummaryScore") + "one call where ragas makes three.")


# ---- SQL semantic equivalence --------------------------------------------------------------------------


class SQLEquivalence(Verdict):
    response_explanation: str
    reference_explanation: str
    equivalent: bool


def _sql_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.answer or "").strip():
        return Score.missing(f"empty answer: {REFUSED} (response must be a non-empty SQL query)")
    if not (s.reference or "").strip():
        return Score.missing(f"empty reference: {REFUSED} (reference must be a non-empty SQL query)")
    return [("ANSWER", s.answer or ""), ("REFERENCE", s.reference or ""),
            ("DATABASE SCHEMA", "\n".join(_reference_contexts(s)))]


def _sql_score(_s: Sample, v: SQLEquivalence, _p: dict[str, Any], _ctx: Any) -> Score:
    return Score(1.0 if v.equivalent else 0.0, details={
        **v.model_dump(), "summary": "the queries are equivalent" if v.equivalent else "the queries differ"})


register_judged(
    JudgedMetric("ragas:sql_semantic_equivalence", "ragas_sql_equivalence", SQLEquivalence, _sql_blocks, _sql_score,
                 output_tokens=lambda s: 150),
    requires=("answer", "reference"), equals=tool_equals("ragas", "SQLSemanticEquivalence"),
    aliases=("SQLSemanticEquivalence", "sql_semantic_equivalence", "LLMSQLEquivalence", "llm_sql_equivalence_with_reference"),
    description="""
ragas' SQL equivalence (``SQLSemanticEquivalence``): the answer and the reference are SQL queries;
the judge explains both against the database schema (the sample's reference contexts, ragas'
``reference_contexts``, joined by newlines; none is an empty schema) and says whether they return
the same results on the same database. 1 if equivalent, else 0. A blank query is refused by ragas.""",
    parity=_SAME.format(cls="SQLSemanticEquivalence").rstrip("; ") + ".")


# ---- rubrics -----------------------------------------------------------------------------------------------

REFERENCE_FREE_RUBRICS = {
    "score1_description": "The response is entirely incorrect and fails to address any aspect of the user input.",
    "score2_description": "The response contains partial accuracy but includes major errors or significant "
                          "omissions that affect its relevance to the user input.",
    "score3_description": "The response is mostly accurate but lacks clarity, thoroughness, or minor details "
                          "needed to fully address the user input.",
    "score4_description": "The response is accurate and clear, with only minor omissions or slight inaccuracies "
                          "in addressing the user input.",
    "score5_description": "The response is completely accurate, clear, and thoroughly addresses the user input "
                          "without any errors or omissions.",
}
WITH_REFERENCE_RUBRICS = {
    "score1_description": "The response is entirely incorrect, irrelevant, or does not align with the reference "
                          "in any meaningful way.",
    "score2_description": "The response partially matches the reference but contains major errors, significant "
                          "omissions, or irrelevant information.",
    "score3_description": "The response aligns with the reference overall but lacks sufficient detail, clarity, "
                          "or contains minor inaccuracies.",
    "score4_description": "The response is mostly accurate, aligns closely with the reference, and contains only "
                          "minor issues or omissions.",
    "score5_description": "The response is fully accurate, completely aligns with the reference, and is clear, "
                          "thorough, and detailed.",
}


class RubricScore(Verdict):
    feedback: str
    score: int = Field(ge=1, le=5)


def _rubric_text(rubrics: Any, where: str) -> str:
    if not isinstance(rubrics, dict) or not rubrics or not all(isinstance(v, str) for v in rubrics.values()):
        raise MetricError(f"{where}: rubrics must be a mapping of score level to description, e.g. "
                          '{"score1_description": "...", ..., "score5_description": "..."}')
    return "\n".join(f"{k}: {v}" for k, v in rubrics.items())


def _domain_rubrics(p: dict[str, Any]) -> dict[str, str]:
    r = p.get("rubrics")
    if r is None:
        return WITH_REFERENCE_RUBRICS if p.get("with_reference") else REFERENCE_FREE_RUBRICS
    _rubric_text(r, "ragas:domain_specific_rubrics")
    return r


def _rubric_inputs(s: Sample) -> list[tuple[str, str]]:
    """What ragas' rubric prompt shows of a sample: the fields it has."""
    out = []
    if s.question is not None:
        out.append(("QUESTION", s.question))
    if s.answer is not None:
        out.append(("ANSWER", s.answer))
    out += context_blocks(_contexts(s)) if s.contexts is not None else []
    out += context_blocks(_reference_contexts(s), "REFERENCE CONTEXT") if s.relevant is not None else []
    if s.reference is not None:
        out.append(("REFERENCE", s.reference))
    return out


def _rubric_score(_s: Sample, v: RubricScore, _p: dict[str, Any], _ctx: Any) -> Score:
    return Score(float(v.score), details={**v.model_dump(), "summary": f"rubric level {v.score} of 5"})


_RUBRIC_RANGE = (1.0, 5.0)

register_judged(
    JudgedMetric("ragas:domain_specific_rubrics", "ragas_rubric_score", RubricScore,
                 lambda s, p: _rubric_inputs(s), _rubric_score, output_tokens=lambda s: 120,
                 subs=lambda p: {"rubrics": _rubric_text(_domain_rubrics(p), "ragas:domain_specific_rubrics")},
                 check_params=_domain_rubrics),
    requires=("answer",), equals=tool_equals("ragas", "DomainSpecificRubrics"), value_range=_RUBRIC_RANGE,
    defaults={"rubrics": None, "with_reference": False},
    aliases=("DomainSpecificRubrics", "domain_specific_rubrics", "RubricsScore", "rubrics_score",
             "RubricsScoreWithoutReference", "rubrics_score_without_reference"),
    description="""
ragas' rubric score (``DomainSpecificRubrics``): the judge gives the sample a level 1-5 by the
rubric of the run (``rubrics``: a mapping ``score1_description`` ... ``score5_description``; by
default ragas' reference-free rubric, or its with-reference rubric with ``with_reference=true``),
seeing the sample's question, answer, retrieved contexts, reference contexts and reference (those it
has). The value is the level: range [1, 5], higher is better.""",
    parity=_SAME.format(cls="DomainSpecificRubrics") + "ragas' default rubrics word for word.")


def _instance_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    rubrics = s.metadata.get("rubrics")
    if not rubrics:
        return Score.missing(f"no rubrics for this sample: {REFUSED} (give the row a 'rubrics' mapping)")
    try:
        text = _rubric_text(rubrics, "rubrics")
    except MetricError as exc:
        return Score.missing(f"invalid rubrics: {exc}")
    return [*_rubric_inputs(s), ("RUBRIC", text)]


register_judged(
    JudgedMetric("ragas:instance_specific_rubrics", "ragas_instance_rubric_score", RubricScore, _instance_blocks,
                 _rubric_score, output_tokens=lambda s: 120),
    requires=("answer",), equals=tool_equals("ragas", "InstanceSpecificRubrics"), value_range=_RUBRIC_RANGE,
    aliases=("InstanceSpecificRubrics", "instance_specific_rubrics", "InstanceRubrics", "labelled_rubrics_score"),
    description="""
ragas' per-sample rubric score (``InstanceSpecificRubrics``): like ``ragas:domain_specific_rubrics``
with each sample's own rubric (its ``rubrics`` column: ``score1_description`` ...
``score5_description``). The value is the level: range [1, 5], higher is better. A sample without
rubrics is refused by ragas: no value.""",
    parity=_SAME.format(cls="InstanceSpecificRubrics").rstrip("; ") + ".")
