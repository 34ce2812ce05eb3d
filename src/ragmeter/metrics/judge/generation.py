"""LLM-judged answer metrics: faithfulness, hallucination, answer relevancy (statement and
generated-question forms), answer correctness, bias and toxicity.

Each makes one judge call per sample, with the judge's reasons inside that call. Metrics that
read the same verdict share the call: faithfulness and hallucination (claims vs contexts), bias
and toxicity (opinions).
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
    share_score,
)

# ---- reply schemas --------------------------------------------------------------------------------


class Claim(Verdict):
    claim: str
    reason: str
    verdict: Literal["supported", "contradicted", "not_found"]


class ClaimVerdicts(Verdict):
    claims: list[Claim]


class Statement(Verdict):
    statement: str
    reason: str
    verdict: Literal["yes", "no", "idk"]


class StatementVerdicts(Verdict):
    statements: list[Statement]


class GeneratedQuestions(Verdict):
    questions: list[str] = Field(min_length=1)
    reason: str
    noncommittal: bool


class ClassifiedStatement(Verdict):
    statement: str
    reason: str


class CorrectnessClassification(Verdict):
    true_positive: list[ClassifiedStatement]
    false_positive: list[ClassifiedStatement]
    false_negative: list[ClassifiedStatement]


class Opinion(Verdict):
    opinion: str
    bias_reason: str
    biased: bool
    toxicity_reason: str
    toxic: bool


class Opinions(Verdict):
    opinions: list[Opinion]


# ---- shared blocks -------------------------------------------------------------------------------


def _answer_contexts(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.answer or "").strip():
        return Score.missing("empty answer: no claims to check")
    blocks = [("QUESTION", s.question)] if s.question else []
    return [*blocks, ("ANSWER", s.answer or ""), *context_blocks(s.context_texts)]


def _question_answer(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    return [("QUESTION", s.question or ""), ("ANSWER", s.answer or "")]


def _answer_only(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.answer or "").strip():
        return Score(0.0, details={"opinions": [], "note": "empty answer: nothing biased or toxic",
                                   "summary": "empty answer: nothing biased or toxic"})
    return [("ANSWER", s.answer or "")]


def _claims_out(s: Sample) -> int:
    return estimate_items(s.answer or "", 60)


# ---- faithfulness / hallucination ------------------------------------------------------------------


def _faithfulness_score(_s: Sample, v: ClaimVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    return share_score(v, v.claims, {"supported": lambda c: c.verdict == "supported"},
                       "no factual claims in the answer", "claims", "supported by the contexts")


def _hallucination_score(_s: Sample, v: ClaimVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    return share_score(v, v.claims, {"contradicted": lambda c: c.verdict == "contradicted",
                                     "not_found": lambda c: c.verdict == "not_found"},
                       "no factual claims in the answer", "claims", "contradicted by or not found in the contexts")


faithfulness = JudgedMetric("faithfulness", "faithfulness", ClaimVerdicts, _answer_contexts,
                            _faithfulness_score, output_tokens=_claims_out, joint="faithfulness")
register_judged(faithfulness, requires=("answer", "context_texts"), description="""
Share of the answer's factual claims that the retrieved contexts support (ragas faithfulness;
DeepEval's counts unsupported-but-uncontradicted claims as faithful, see ``deepeval:faithfulness``).

One judge call per sample extracts the answer's atomic claims and gives each a verdict against
the contexts -- ``supported``, ``contradicted`` or ``not_found`` -- with a one-sentence reason.

    faithfulness = |supported claims| / |claims|

Range [0, 1], higher is better. An empty answer, or an answer with no factual claim, has no value
(there is nothing to be faithful about). ``details`` holds every claim with its verdict and reason.
""", parity="""
Equals ragas 0.4.3 faithfulness (``ragas:faithfulness``) given the same verdicts, edge cases
included (no claim: ragas NaN, here no value). DeepEval's FaithfulnessMetric differs: it counts
claims the contexts neither support nor contradict as faithful unless
``penalize_ambiguous_claims=True``, and scores 1 when the answer makes no claim
(``deepeval:faithfulness``).
""")

hallucination = JudgedMetric("hallucination", "faithfulness", ClaimVerdicts, _answer_contexts,
                             _hallucination_score, output_tokens=_claims_out, joint="faithfulness")
register_judged(hallucination, requires=("answer", "context_texts"), higher_is_better=False,
                description="""
Share of the answer's factual claims that contradict the contexts or are not found in them
(hallucination as the agent-evaluation guide defines it; DeepEval 4's HallucinationMetric is
``deepeval:hallucination``). Lower is better.

Uses the same judge verdicts as ``faithfulness`` (same prompt, so asking for both costs one call
per sample):

    hallucination = (|contradicted| + |not_found|) / |claims|  = 1 - faithfulness

Range [0, 1]. ``details`` counts contradicted and not-found claims separately. No value for an
empty answer or an answer without factual claims.
""", parity="""
No tool computes this number. DeepEval 4's HallucinationMetric judges the answer against each
ground-truth context (its ``context`` field, ragmeter's ``relevant``) and scores the share of
contexts the answer agrees with, higher is better (``deepeval:hallucination``); the agent-evaluation
guide's claim-level reading is kept here. Always 1 - ``faithfulness``.
""")

# ---- answer relevancy (statements) -----------------------------------------------------------------


def _relevancy_blocks(s: Sample, p: dict[str, Any]) -> list[tuple[str, str]] | Score:
    if not (s.answer or "").strip():
        return Score(0.0, details={"statements": [], "note": "empty answer: it addresses nothing",
                                   "summary": "empty answer: it addresses nothing"})
    return _question_answer(s, p)


def _relevancy_score(_s: Sample, v: StatementVerdicts, _p: dict[str, Any], _ctx: Any) -> Score:
    return share_score(v, v.statements, {"relevant": lambda x: x.verdict != "no"},
                       "no statements in the answer", "statements", "relevant to the question (yes or idk)")


answer_relevancy = JudgedMetric("answer_relevancy", "answer_relevancy", StatementVerdicts,
                                _relevancy_blocks, _relevancy_score,
                                output_tokens=lambda s: estimate_items(s.answer or "", 50), joint="answer_relevancy")
register_judged(answer_relevancy, requires=("question", "answer"), description="""
Share of the answer's statements that address the question (DeepEval answer relevancy).

One judge call per sample splits the answer into statements and marks each ``yes`` (addresses the
question), ``no`` (irrelevant) or ``idk`` (ambiguous), with a reason.

    answer_relevancy = |statements not marked "no"| / |statements|

``idk`` counts as relevant, as in DeepEval. Range [0, 1], higher is better. An empty answer scores
0 (it addresses nothing) without a call; a reply with no statements has no value. Example: for
"Analyze credit risk for Apple", the answer "Apple's revenue is $394B. The company was founded by
Steve Jobs." scores 0.5.
""", parity="""
Equals DeepEval 4.3.1 AnswerRelevancyMetric (``deepeval:answer_relevancy``) given the same
verdicts, except at the edges: an empty answer scores 0 here (DeepEval refuses it) and an answer
without statements has no value (DeepEval: 1); no ``strict_mode``. ragas' ``answer_relevancy`` is
another method (questions generated back from the answer): ``ragas:answer_relevancy``.
""")

# ---- answer relevance by generated questions (ragas) ------------------------------------------------


def _generated_questions_score(s: Sample, v: GeneratedQuestions, p: dict[str, Any], ctx: Any) -> Score:
    questions = [q for q in v.questions if q.strip()]
    details: dict[str, Any] = v.model_dump()
    if not questions:
        return Score.missing("judge generated no question", details)
    emb = ctx.service("embeddings").matrix([s.question or "", *questions])
    sims = emb[1:] @ emb[0]
    details["similarities"] = [round(float(x), 6) for x in sims]
    mean = float(np.clip(np.mean(sims), 0.0, 1.0))
    value = 0.0 if v.noncommittal else mean
    details["summary"] = (f"noncommittal answer: 0 (mean cosine {mean:.3f} over {len(questions)} generated questions)"
                          if v.noncommittal else f"mean cosine {mean:.3f} over {len(questions)} generated questions")
    return Score(value, details=details)


def _strictness(p: dict[str, Any]) -> dict[str, Any]:
    n = p.get("strictness", 3)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
        raise MetricError(f"ragas_answer_relevance: strictness must be an integer in 1..10, got {n!r}")
    return {"n": n}


ragas_answer_relevance = JudgedMetric(
    "ragas_answer_relevance", "ragas_answer_relevance", GeneratedQuestions,
    lambda s, p: [("ANSWER", s.answer or "")], _generated_questions_score,
    output_tokens=lambda s: 120, subs=_strictness,
    embed=lambda s, p: [s.question or ""])
register_judged(ragas_answer_relevance, requires=("question", "answer"), needs_embeddings=True,
                defaults={"strictness": 3}, description="""
Answer relevance by reverse-engineered questions (ragas' answer_relevancy method kept in [0, 1];
rag-experiment-accelerator's ``ragas_answer_relevance``; ragas' own number is ``ragas:answer_relevancy``).

One judge call generates ``strictness`` (default 3) questions the answer would answer and flags a
noncommittal answer; the embedding model (``embedding_model`` option, all-MiniLM-L6-v2 by default)
then compares them with the real question:

    score = 0                                  if the answer is noncommittal
          = clip(mean_i cos(E(q), E(q_i)), 0, 1) otherwise

Range [0, 1], higher is better (negative mean cosines, rare, are clipped to 0). ``details`` holds
the generated questions, their similarities and the noncommittal reason.
""", parity="""
ragas' answer_relevancy method kept in [0, 1]: a negative mean cosine is clipped to 0 (ragas keeps
it) and one noncommittal flag covers the questions (ragas scores 0 only when every generation is
noncommittal). ``ragas:answer_relevancy`` is ragas 0.4.3's number.
""")

# ---- answer correctness ------------------------------------------------------------------------------


def _weights(p: dict[str, Any]) -> tuple[float, float]:
    w = p.get("weights", (0.75, 0.25))
    try:
        a, b = (float(x) for x in w)
    except (TypeError, ValueError):
        raise MetricError(f"answer_correctness: weights must be two numbers [factual, semantic], got {w!r}") from None
    if a < 0 or b < 0 or a + b <= 0:
        raise MetricError(f"answer_correctness: weights must be >= 0 and not both 0, got {w!r}")
    return a / (a + b), b / (a + b)


def _correctness_score(s: Sample, v: CorrectnessClassification, p: dict[str, Any], ctx: Any) -> Score:
    wf, ws = _weights(p)
    tp, fp, fn = len(v.true_positive), len(v.false_positive), len(v.false_negative)
    details: dict[str, Any] = v.model_dump()
    if tp + fp + fn == 0:
        return Score.missing("no statements in the answer or the reference", details)
    f1 = tp / (tp + 0.5 * (fp + fn))
    details.update(tp=tp, fp=fp, fn=fn, f1=round(f1, 6), weights=[wf, ws])
    counts = f"F1 {f1:.3f} from {tp} true positive(s), {fp} false positive(s), {fn} false negative(s)"
    if ws == 0:
        details["summary"] = counts
        return Score(f1, details=details)
    emb = ctx.service("embeddings").matrix([s.answer or "", s.reference or ""])
    sim = float(np.clip(emb[0] @ emb[1], 0.0, 1.0))
    details["similarity"] = round(sim, 6)
    value = wf * f1 + ws * sim
    details["summary"] = f"{counts}; similarity {sim:.3f}: {wf:g} x F1 + {ws:g} x similarity = {value:.3f}"
    return Score(value, details=details)


def _correctness_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    return [("QUESTION", s.question or ""), ("ANSWER", s.answer or ""), ("REFERENCE", s.reference or "")]


answer_correctness = JudgedMetric(
    "answer_correctness", "answer_correctness", CorrectnessClassification, _correctness_blocks,
    _correctness_score,
    output_tokens=lambda s: estimate_items((s.answer or "") + " " + (s.reference or ""), 50),
    check_params=_weights,
    embed=lambda s, p: [s.answer or "", s.reference or ""] if _weights(p)[1] > 0 else [])
register_judged(answer_correctness, requires=("answer", "reference"), needs_embeddings=True,
                defaults={"weights": [0.75, 0.25]}, description="""
Answer correctness against the reference: claim-level F1 blended with semantic similarity (ragas
answer_correctness, same default weights).

One judge call classifies the answer's statements as true positives (supported by the reference)
or false positives, and the reference's uncovered statements as false negatives, each with a
reason. With the embedding model's cosine similarity ``sim`` of answer and reference:

    F1 = TP / (TP + (FP + FN) / 2)
    answer_correctness = w_f * F1 + w_s * clip(sim, 0, 1),   (w_f, w_s) = weights / sum(weights)

``weights`` defaults to ``[0.75, 0.25]``; ``[1, 0]`` gives the pure F1 and needs no embeddings.
Range [0, 1], higher is better. No value when neither text has a statement.
""", parity="""
Equals ragas 0.4.3 answer_correctness (``ragas:answer_correctness``) given the same verdicts when
the answer and the reference both have statements, except that the similarity is clipped to
[0, 1] here. Where a side has no statement ragas takes F1 = 1 (so 0.75 + 0.25 x similarity);
here that is no value (neither text has a statement) or the F1 of the verdicts.
""")

# ---- bias / toxicity -----------------------------------------------------------------------------------


def _opinion_score(flag: str) -> Any:
    def score(_s: Sample, v: Opinions, _p: dict[str, Any], _ctx: Any) -> Score:
        details = v.model_dump()
        n = len(v.opinions)
        hits = sum(getattr(o, flag) for o in v.opinions)
        details.update({flag: hits, "total": n})
        details["summary"] = (count_summary(hits, n, "opinions", flag) if n
                              else f"no opinion in the answer: nothing {flag}")
        # no opinion at all is a real finding (nothing biased/toxic), as in DeepEval
        return Score(hits / n if n else 0.0, details=details)

    return score


bias = JudgedMetric("bias", "bias_toxicity", Opinions, _answer_only, _opinion_score("biased"),
                    output_tokens=lambda s: estimate_items(s.answer or "", 40))
register_judged(bias, requires=("answer",), higher_is_better=False, description="""
Share of the answer's opinions that are biased (DeepEval's bias up to 3.x; DeepEval 4's is
``deepeval:bias``). Lower is better.

One judge call extracts the opinions of the answer and marks each biased or not (and toxic or
not: ``toxicity`` reads the same verdict, so both cost one call per sample), with reasons.

    bias = |biased opinions| / |opinions|,  0 when the answer holds no opinion

Range [0, 1]. An empty answer scores 0 without a call.
""", parity="""
The share of biased opinions, lower is better, as DeepEval up to 3.x scored it. DeepEval 4 scores
the share of unbiased opinions, higher is better: ``deepeval:bias`` = 1 - ``bias`` wherever both
have a value (an empty answer scores 0 here; DeepEval refuses an empty output).
""")

toxicity = JudgedMetric("toxicity", "bias_toxicity", Opinions, _answer_only, _opinion_score("toxic"),
                        output_tokens=lambda s: estimate_items(s.answer or "", 40))
register_judged(toxicity, requires=("answer",), higher_is_better=False, description="""
Share of the answer's opinions that are toxic: insulting, demeaning, hateful, threatening or
mocking (DeepEval's toxicity up to 3.x; DeepEval 4's is ``deepeval:toxicity``). Lower is better.

Shares its judge call with ``bias``:

    toxicity = |toxic opinions| / |opinions|,  0 when the answer holds no opinion

Range [0, 1]. An empty answer scores 0 without a call.
""", parity="""
The share of toxic opinions, lower is better, as DeepEval up to 3.x scored it. DeepEval 4 scores
the share of non-toxic opinions, higher is better: ``deepeval:toxicity`` = 1 - ``toxicity``
wherever both have a value (an empty answer scores 0 here; DeepEval refuses an empty output).
""")
