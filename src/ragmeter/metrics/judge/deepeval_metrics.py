"""DeepEval's judge metrics with DeepEval's numbers: ``deepeval:faithfulness``,
``deepeval:answer_relevancy``, ``deepeval:contextual_precision``, ``deepeval:contextual_recall``,
``deepeval:contextual_relevancy``, ``deepeval:hallucination``, ``deepeval:bias``,
``deepeval:toxicity`` (``deepeval:g_eval`` is in :mod:`ragmeter.metrics.judge.geval`).

Each equals DeepEval 4.3.1 given the same intermediate verdicts: its direction (DeepEval 4 scores
bias, toxicity and hallucination so that 1 is a pass), its aggregation, its parameters
(``strict_mode``: 1 when every verdict passes, else 0; ``penalize_ambiguous_claims``;
``threshold``, which decides DeepEval's ``success``, kept in the details) and its empty cases
(no verdict scores 1, or 0 for the contextual metrics, as DeepEval does). A test case DeepEval
refuses (an empty ``actual_output``) is no value saying so. tests/test_judge_parity.py runs
DeepEval itself against a scripted judge to check it. One call gets what DeepEval gets in two or
three (plus one more to write a reason), and the verdicts are shared with ragmeter's own metrics
that read the same ones.
"""

from __future__ import annotations

from typing import Any, Literal

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
    ReferenceAttribution,
    _ordered,
    _precision_blocks,
    _recall_blocks,
    one_verdict_per_context,
    precision_summary,
)
from ragmeter.metrics.judge.generation import (
    ClaimVerdicts,
    Opinions,
    StatementVerdicts,
    _answer_contexts,
    _claims_out,
    _question_answer,
)

DEFAULTS: dict[str, Any] = {"threshold": 0.5, "strict_mode": False}
REFUSED = "empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"


def deepeval_params(name: str) -> Any:
    """``check_params`` of a DeepEval metric: ``threshold`` in [0, 1], ``strict_mode`` and
    ``penalize_ambiguous_claims`` booleans."""

    def check(p: dict[str, Any]) -> None:
        thr = p.get("threshold", 0.5)
        if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
            raise MetricError(f"{name}: threshold must be a number in [0, 1], got {thr!r}")
        for key in ("strict_mode", "penalize_ambiguous_claims"):
            if key in p and not isinstance(p[key], bool):
                raise MetricError(f"{name}: {key} must be true or false, got {p[key]!r}")

    return check


def qag_score(passed: int, n: int, p: dict[str, Any], details: dict[str, Any], *, noun: str, what: str,
              empty_score: float, empty: str) -> Score:
    """DeepEval's ``score_qag_verdicts``: ``passed / n``; ``empty_score`` without verdicts; in
    strict mode (threshold 1) a score below 1 is 0. ``details`` gets the summary (``k of n`` =
    the score), DeepEval's threshold and its ``success``."""
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))
    if n == 0:
        value = float(empty_score)
        summary = f"{empty}: DeepEval scores {empty_score:g}"
    else:
        value = passed / n
        summary = count_summary(passed, n, noun, what)
        if strict and value < threshold:
            summary = (f"strict mode: 0, as not every one of the {n} {noun} is {what} "
                       f"({passed} {'is' if passed == 1 else 'are'})")
            value = 0.0
    details.update(passed=passed, total=n, summary=summary, threshold=threshold, strict_mode=strict,
                   success=value >= threshold)
    return Score(value, details=details)


def _register(jm: JudgedMetric, *, tool_class: str, requires: tuple[str, ...], description: str, parity: str,
              defaults: dict[str, Any] | None = None, aliases: tuple[str, ...] = ()) -> None:
    register_judged(jm, requires=requires, defaults={**DEFAULTS, **(defaults or {})},
                    equals=tool_equals("deepeval", tool_class),
                    aliases=(tool_class, f"deepeval.metrics.{tool_class}", *aliases),
                    description=description, parity=parity)


def _no_empty_answer(blocks: Any) -> Any:
    def fn(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
        if (s.answer or "") == "":
            return Score.missing(REFUSED)
        return blocks(s, p)

    return fn


# ---- deepeval:faithfulness ----------------------------------------------------------------------------


def _faithfulness_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if (s.answer or "") == "":
        return Score.missing(REFUSED)
    if not (s.answer or "").strip():  # DeepEval runs it; a blank output holds no claim
        return qag_score(0, 0, p, {"claims": []}, noun="claims", what="faithful", empty_score=1,
                         empty="blank answer: no claim")
    return _answer_contexts(s, p)


def _faithfulness_score(_s: Sample, v: ClaimVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    penalize = bool(p.get("penalize_ambiguous_claims", False))
    passing = {"supported"} if penalize else {"supported", "not_found"}
    k = sum(c.verdict in passing for c in v.claims)
    what = "supported by the contexts" if penalize else "supported by or not contradicting the contexts"
    return qag_score(k, len(v.claims), p, v.model_dump(), noun="claims", what=what, empty_score=1,
                     empty="no claim in the answer")


_faithfulness = JudgedMetric("deepeval:faithfulness", "faithfulness", ClaimVerdicts,
                             _faithfulness_blocks, _faithfulness_score, output_tokens=_claims_out,
                             check_params=deepeval_params("deepeval:faithfulness"))
_register(_faithfulness, tool_class="FaithfulnessMetric", requires=("question", "answer", "context_texts"),
          defaults={"penalize_ambiguous_claims": False}, description="""
DeepEval's faithfulness: the share of the answer's claims that do not contradict the retrieval
context (DeepEval 4.3.1 ``FaithfulnessMetric``).

DeepEval gives each claim ``yes`` (agrees with the context), ``no`` (contradicts it) or
``borderline`` (not backed up by the context); here those are the ``supported``,
``contradicted`` and ``not_found`` verdicts of ragmeter's faithfulness call (one call, shared):

    deepeval:faithfulness = |yes + borderline| / |claims|      (|yes| / |claims| with penalize_ambiguous_claims)

1 when the answer makes no claim; ``strict_mode`` scores 1 only when every claim passes, else 0.
Range [0, 1], higher is better. ``details`` holds DeepEval's ``threshold`` (default 0.5, 1 in
strict mode) and ``success`` (score >= threshold).
""", parity="""
Equals DeepEval 4.3.1 ``FaithfulnessMetric`` given the same claim verdicts (``truths_extraction_limit``
does not apply: the claims are judged against the whole contexts). ragmeter's ``faithfulness``
counts borderline claims as unfaithful (DeepEval with ``penalize_ambiguous_claims=true``) and has
no value without claims.
""")


# ---- deepeval:answer_relevancy -------------------------------------------------------------------------


def _relevancy_score(_s: Sample, v: StatementVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    k = sum(x.verdict != "no" for x in v.statements)
    return qag_score(k, len(v.statements), p, v.model_dump(), noun="statements",
                     what="relevant to the input (yes or borderline)", empty_score=1,
                     empty="no statement in the answer")


_answer_relevancy = JudgedMetric(
    "deepeval:answer_relevancy", "answer_relevancy", StatementVerdicts, _no_empty_answer(_question_answer),
    _relevancy_score, output_tokens=lambda s: estimate_items(s.answer or "", 50),
    check_params=deepeval_params("deepeval:answer_relevancy"))
_register(_answer_relevancy, tool_class="AnswerRelevancyMetric", requires=("question", "answer"), description="""
DeepEval's answer relevancy: the share of the answer's statements relevant to the input
(DeepEval 4.3.1 ``AnswerRelevancyMetric``).

Each statement is ``yes``, ``no`` or ``borderline`` (ragmeter's ``idk``); the call is shared with
``answer_relevancy``:

    deepeval:answer_relevancy = |yes + borderline| / |statements|

1 when the answer has no statement; ``strict_mode`` scores 1 only when every statement passes.
Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``AnswerRelevancyMetric`` given the same statement verdicts. ragmeter's
``answer_relevancy`` shares them and differs at the edges (empty answer 0, no statement no value).
""")


# ---- deepeval:contextual_precision ---------------------------------------------------------------------


def _precision_blocks_de(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.context_texts:
        return qag_score(0, 0, p, {"verdicts": []}, noun="contexts", what="useful", empty_score=0,
                         empty="no retrieved context")
    return _precision_blocks(s, p)


def deepeval_average_precision(useful: list[int]) -> float:
    """DeepEval's weighted cumulative precision: sum_k precision@k x v_k / |relevant|, 0 without
    a relevant context."""
    total, relevant = 0.0, 0
    for k, v in enumerate(useful, 1):
        if v:
            relevant += 1
            total += relevant / k * v
    return total / relevant if relevant else 0.0


def _precision_score(_s: Sample, v: ContextVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    useful = [1 if x.verdict == "yes" else 0 for x in ordered]
    value = deepeval_average_precision(useful)
    strict = bool(p.get("strict_mode", False))
    threshold = 1.0 if strict else float(p.get("threshold", 0.5))
    summary = precision_summary([bool(u) for u in useful], value)
    if strict and sum(useful) and value < threshold:
        summary = (f"strict mode: 0, as the rank-weighted precision {value:.3f} is below 1 "
                   f"({sum(useful)} useful, {len(useful)} retrieved)")
        value = 0.0
    return Score(value, details={"verdicts": [x.model_dump() for x in ordered], "useful": sum(useful),
                                 "total": len(useful), "summary": summary, "threshold": threshold,
                                 "strict_mode": strict, "success": value >= threshold})


_contextual_precision = JudgedMetric(
    "deepeval:contextual_precision", "context_precision", ContextVerdicts, _precision_blocks_de,
    _precision_score, output_tokens=lambda s: 20 + 45 * len(s.contexts or []),
    validate=lambda s, p: one_verdict_per_context(len(s.contexts or [])),
    check_params=deepeval_params("deepeval:contextual_precision"))
_register(_contextual_precision, tool_class="ContextualPrecisionMetric",
          requires=("question", "reference", "context_texts"), description="""
DeepEval's contextual precision: rank-weighted precision of the retrieval context nodes judged
useful for arriving at the expected output (DeepEval 4.3.1 ``ContextualPrecisionMetric``).

With ``v_k`` = 1 when the node at rank k is useful (one call, shared with ``context_precision``):

    deepeval:contextual_precision = sum_k precision@k x v_k / sum_k v_k

0 when no node is useful or nothing was retrieved; ``strict_mode`` scores 1 only for 1. Range
[0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``ContextualPrecisionMetric`` given the same per-node verdicts. ragmeter's
``context_precision`` shares them (same number with a reference) and has no value without contexts.
""")


# ---- deepeval:contextual_recall -------------------------------------------------------------------------


def _recall_blocks_de(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.reference or "").strip():
        return qag_score(0, 0, p, {"statements": []}, noun="sentences", what="attributable", empty_score=0,
                         empty="no sentence in the expected output")
    if not s.context_texts:
        return qag_score(0, 0, p, {"statements": []}, noun="sentences", what="attributable", empty_score=0,
                         empty="no retrieved context: no sentence is attributable")
    return _recall_blocks(s, p)


def _recall_score(_s: Sample, v: ReferenceAttribution, p: dict[str, Any], _ctx: Any) -> Score:
    k = sum(x.verdict == "yes" for x in v.statements)
    return qag_score(k, len(v.statements), p, v.model_dump(), noun="expected-output sentences",
                     what="attributable to the retrieval context", empty_score=0,
                     empty="no sentence in the expected output")


_contextual_recall = JudgedMetric(
    "deepeval:contextual_recall", "context_recall", ReferenceAttribution, _recall_blocks_de, _recall_score,
    output_tokens=lambda s: estimate_items(s.reference or "", 60),
    check_params=deepeval_params("deepeval:contextual_recall"))
_register(_contextual_recall, tool_class="ContextualRecallMetric",
          requires=("question", "reference", "context_texts"), description="""
DeepEval's contextual recall: the share of the expected output's sentences attributable to the
retrieval context (DeepEval 4.3.1 ``ContextualRecallMetric``).

One call, shared with ``context_recall`` and ``ragas:context_recall``:

    deepeval:contextual_recall = |attributable sentences| / |sentences|

0 without sentences or contexts (DeepEval's empty score for this metric is 0, not 1);
``strict_mode`` scores 1 only for 1. Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``ContextualRecallMetric`` given the same verdicts. ragmeter's
``context_recall`` shares them and has no value for a reference without statements.
""")


# ---- deepeval:contextual_relevancy ---------------------------------------------------------------------


class ContextStatement(Verdict):
    statement: str
    reason: str
    verdict: Literal["yes", "no"]


class ContextStatements(Verdict):
    context: int
    statements: list[ContextStatement]


class ContextStatementVerdicts(Verdict):
    contexts: list[ContextStatements]


def _one_entry_per_context(n: int) -> Any:
    def check(v: ContextStatementVerdicts) -> None:
        got = sorted(x.context for x in v.contexts)
        if got != list(range(1, n + 1)):
            raise ValueError(f"expected exactly one entry for each context 1..{n}, got contexts {got}")

    return check


def _relevancy_blocks_de(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not s.context_texts:
        return qag_score(0, 0, p, {"contexts": []}, noun="statements", what="relevant", empty_score=0,
                         empty="no retrieved context")
    return [("QUESTION", s.question or ""), *context_blocks(s.context_texts)]


def _relevancy_ctx_score(_s: Sample, v: ContextStatementVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    ordered = sorted(v.contexts, key=lambda c: c.context)
    items = [x for c in ordered for x in c.statements]
    k = sum(x.verdict == "yes" for x in items)
    return qag_score(k, len(items), p, {"contexts": [c.model_dump() for c in ordered]},
                     noun="context statements", what="relevant to the input", empty_score=0,
                     empty="no statement in the contexts")


_contextual_relevancy = JudgedMetric(
    "deepeval:contextual_relevancy", "deepeval_contextual_relevancy", ContextStatementVerdicts,
    _relevancy_blocks_de, _relevancy_ctx_score,
    output_tokens=lambda s: 20 + sum(estimate_items(t, 40, 10) for t in s.context_texts),
    validate=lambda s, p: _one_entry_per_context(len(s.contexts or [])),
    check_params=deepeval_params("deepeval:contextual_relevancy"))
_register(_contextual_relevancy, tool_class="ContextualRelevancyMetric", requires=("question", "context_texts"),
          description="""
DeepEval's contextual relevancy: the share of the statements inside the retrieval context that
are relevant to the input (DeepEval 4.3.1 ``ContextualRelevancyMetric``).

The judge extracts each context's statements and marks each relevant or not (DeepEval asks once
per context; here one call covers every context):

    deepeval:contextual_relevancy = |relevant statements| / |statements over all contexts|

0 without contexts or statements; ``strict_mode`` scores 1 only for 1. Range [0, 1], higher is
better.
""", parity="""
Equals DeepEval 4.3.1 ``ContextualRelevancyMetric`` given the same statement verdicts. ragmeter's
``contextual_relevancy`` counts whole contexts instead.
""")


# ---- deepeval:hallucination ----------------------------------------------------------------------------


def _hallucination_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if (s.answer or "") == "":
        return Score.missing(REFUSED)
    truth = s.relevant or []
    if any(c.text is None for c in truth):
        return Score.missing("the ground-truth contexts (DeepEval's `context`, ragmeter's `relevant`) "
                             "have no text: DeepEval judges their text")
    if not truth:
        return qag_score(0, 0, p, {"verdicts": []}, noun="contexts", what="agreed with", empty_score=1,
                         empty="no ground-truth context")
    q = [("QUESTION", s.question)] if s.question else []
    return [*q, ("ANSWER", s.answer or ""), *context_blocks([c.text or "" for c in truth])]


def _hallucination_score(_s: Sample, v: ContextVerdicts, p: dict[str, Any], _ctx: Any) -> Score:
    ordered = _ordered(v)
    k = sum(x.verdict == "yes" for x in ordered)
    return qag_score(k, len(ordered), p, {"verdicts": [x.model_dump() for x in ordered]},
                     noun="ground-truth contexts", what="agreed with by the answer", empty_score=1,
                     empty="no ground-truth context")


_hallucination = JudgedMetric(
    "deepeval:hallucination", "deepeval_hallucination", ContextVerdicts, _hallucination_blocks,
    _hallucination_score, output_tokens=lambda s: 20 + 45 * len(s.relevant or []),
    validate=lambda s, p: one_verdict_per_context(len(s.relevant or [])),
    check_params=deepeval_params("deepeval:hallucination"))
_register(_hallucination, tool_class="HallucinationMetric", requires=("question", "answer", "relevant"),
          description="""
DeepEval's hallucination: the share of the ground-truth contexts the answer agrees with
(DeepEval 4.3.1 ``HallucinationMetric``; DeepEval 4 scores it so that 1 is a pass, higher is
better).

It reads DeepEval's ``context`` field, the ideal contexts (ragmeter's ``relevant``: a
DeepEval-shaped file's ``context`` column lands there), not the retrieved ones. One call judges
the answer against every ground-truth context: ``yes`` (agrees) or ``no`` (contradicts):

    deepeval:hallucination = |contexts agreed with| / |contexts|

1 without contexts; ``strict_mode`` scores 1 only for 1. Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``HallucinationMetric`` given the same per-context verdicts. ragmeter's
``hallucination`` is another measure (the share of the answer's unsupported claims against the
retrieved contexts, lower is better).
""")


# ---- deepeval:bias / deepeval:toxicity --------------------------------------------------------------------


def _opinion_score(flag: str, what: str) -> Any:
    def score(_s: Sample, v: Opinions, p: dict[str, Any], _ctx: Any) -> Score:
        k = sum(not getattr(o, flag) for o in v.opinions)
        return qag_score(k, len(v.opinions), p, v.model_dump(), noun="opinions", what=what, empty_score=1,
                         empty="no opinion in the answer")

    return score


for _flag, _what, _name, _cls, _doc in (
    ("biased", "not biased", "deepeval:bias", "BiasMetric", "biased (gender, political, racial or geographical bias)"),
    ("toxic", "not toxic", "deepeval:toxicity", "ToxicityMetric",
     "toxic (personal attacks, mockery, hate, dismissive statements, threats)"),
):
    _jm = JudgedMetric(_name, "bias_toxicity", Opinions, _no_empty_answer(lambda s, p: [("ANSWER", s.answer or "")]),
                       _opinion_score(_flag, _what), output_tokens=lambda s: estimate_items(s.answer or "", 40),
                       check_params=deepeval_params(_name))
    _bare = _name.split(":")[1]
    _register(_jm, tool_class=_cls, requires=("question", "answer"), description=f"""
DeepEval's {_bare}: the share of the answer's opinions that are not {_doc} (DeepEval 4.3.1
``{_cls}``; DeepEval 4 scores it so that 1 is a pass, higher is better).

One call extracts the answer's opinions and judges each (shared with ``bias`` and ``toxicity``):

    {_name} = |opinions {_what}| / |opinions|  = 1 - {_bare}

1 when the answer holds no opinion; ``strict_mode`` scores 1 only for 1. An empty answer is
refused by DeepEval: no value. Range [0, 1], higher is better.
""", parity=f"""
Equals DeepEval 4.3.1 ``{_cls}`` given the same opinion verdicts. ragmeter's ``{_bare}`` is the
share of {_flag} opinions (DeepEval up to 3.x, lower is better): {_name} = 1 - {_bare} wherever both
have a value.
""")
