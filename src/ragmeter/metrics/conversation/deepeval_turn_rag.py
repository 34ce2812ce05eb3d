"""DeepEval 4.3.1's per-window RAG metrics of a conversation with DeepEval's numbers:
``deepeval:turn_contextual_precision``, ``deepeval:turn_contextual_recall``,
``deepeval:turn_contextual_relevancy``, ``deepeval:turn_faithfulness`` (one value per conversation).

DeepEval cuts a conversation into its sliding windows of unit interactions (as turn relevancy
does, ``window_size`` 10) and, for each window, joins the user messages, the assistant messages
and the retrieval contexts of its assistant turns (each turn's ``retrieval_context``, in order). A
window is scored like the single-turn metric of the same name, with the conversation's
``expected_outcome`` as the expected output; the conversation's value is the mean over windows (1
without a window), and a window without anything to judge scores 1. ``strict_mode`` sets a window's
score to 0 below 1 (DeepEval clamps each window, not the mean); ``threshold`` decides ``success``.

The judge sees each window in the requests of ragmeter's single-turn metrics (the same prompts and
reply schemas as ``deepeval:contextual_precision``, ``deepeval:contextual_recall``,
``deepeval:contextual_relevancy`` and ``deepeval:faithfulness``), so identical windows are asked once.
tests/test_parity_deepeval_conversational_rag.py runs DeepEval itself against a scripted judge.
"""

from __future__ import annotations

from typing import Any

from ragmeter.conversations.model import Conversation
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Score
from ragmeter.metrics.conversation._base import ConversationJudge, Item, dialogue
from ragmeter.metrics.conversation.deepeval_conv import register
from ragmeter.metrics.conversation.judged import sliding_windows
from ragmeter.metrics.judge._common import context_blocks, load_template
from ragmeter.metrics.judge.contexts import ContextVerdicts, ReferenceAttribution, one_verdict_per_context
from ragmeter.metrics.judge.deepeval_metrics import ContextStatementVerdicts, deepeval_params
from ragmeter.metrics.judge.generation import ClaimVerdicts

DEFAULTS: dict[str, Any] = {"window_size": 10}
_REFUSED = "no expected_outcome: DeepEval refuses the test case ('expected_outcome' cannot be empty)"


def _windows(name: str, conv: Conversation, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each window's user text, assistant text and retrieval contexts, as DeepEval joins them."""
    deepeval_params(name)(params)
    w = params.get("window_size")
    if not isinstance(w, int) or isinstance(w, bool) or w < 1:
        raise MetricError(f"{name}: window_size must be a whole number >= 1, got {w!r}")
    out = []
    for win in sliding_windows(dialogue(conv), w):
        user = "".join(f"\n{t.content} " for _, t in win if t.role == "user")
        assistant = "".join(f"\n{t.content}" for _, t in win if t.role != "user")
        contexts = [c.text or "" for _, t in win if t.role != "user" for c in (t.contexts or [])]
        out.append({"turn": win[-1][0] + 1, "user": user, "assistant": assistant, "contexts": contexts})
    return out


def _mean(name: str, windows: list[dict[str, Any]], params: dict[str, Any]) -> Score:
    """DeepEval's conversation value: the mean of the window scores, 1 without a window."""
    strict = bool(params.get("strict_mode", False))
    threshold = 1.0 if strict else float(params.get("threshold", 0.5))
    value = sum(w["score"] for w in windows) / len(windows) if windows else 1.0
    summary = (f"mean over {len(windows)} window(s)" if windows else "no window: DeepEval scores 1")
    return Score(value, details={"windows": windows, "summary": summary, "threshold": threshold,
                                 "strict_mode": strict, "success": value >= threshold,
                                 "window_size": params.get("window_size")})


def _clamp(score: float, params: dict[str, Any]) -> float:
    return 0.0 if params.get("strict_mode") and score < 1.0 else score


def _windowed(name: str, needs: str | None, build: Any, judge: Any) -> tuple[Any, Any]:
    """``items``/``combine`` of a windowed metric: ``build(window, conv)`` gives a window's blocks
    and reply check, or ``None`` when it has nothing to judge (score 1); ``judge(window, verdict,
    params)`` gives the window's score (before strict mode) and its verdict details. ``needs``:
    the conversation field without which DeepEval refuses the test case."""

    def items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
        if needs == "expected_outcome" and conv.expected_outcome is None:
            deepeval_params(name)(params)
            return Score.missing(_REFUSED)
        wins = _windows(name, conv, params)
        out = []
        for win in wins:
            built = build(win, conv)
            if built is not None:
                blocks, check = built
                out.append(Item(f"the window ending at turn {win['turn']}", blocks, check, win))
        return out or _mean(name, [{"turn": w["turn"], "score": 1.0, "note": "nothing to judge"} for w in wins],
                            params)

    def combine(conv: Conversation, its: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
        judged = {it.data["turn"]: v for it, v in zip(its, verdicts, strict=True)}
        rows = []
        for win in _windows(name, conv, params):
            if win["turn"] not in judged:
                rows.append({"turn": win["turn"], "score": 1.0, "note": "nothing to judge"})
                continue
            score, details = judge(win, judged[win["turn"]], params)
            rows.append({"turn": win["turn"], "score": _clamp(score, params), **details})
        return _mean(name, rows, params)

    return items, combine


# ---- turn contextual precision ----------------------------------------------------------------------
def _precision_build(win: dict[str, Any], conv: Conversation) -> Any:
    if not win["contexts"]:
        return None
    return ([("QUESTION", win["user"]), ("REFERENCE", conv.expected_outcome or ""), *context_blocks(win["contexts"])],
            one_verdict_per_context(len(win["contexts"])))


def _precision_judge(win: dict[str, Any], v: Any, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    useful = [x.verdict == "yes" for x in sorted(v.verdicts, key=lambda x: x.context)]
    hits, total = 0, 0.0
    for k, u in enumerate(useful, 1):
        if u:
            hits += 1
            total += hits / k
    return (total / hits if hits else 0.0), {"useful": useful}


_items, _combine = _windowed("deepeval:turn_contextual_precision", "expected_outcome", _precision_build, _precision_judge)
register(ConversationJudge("deepeval:turn_contextual_precision", load_template("context_precision"), ContextVerdicts,
                           _items, _combine, output_tokens=200),
         "TurnContextualPrecisionMetric", defaults=DEFAULTS, param="window_size",
         description="""DeepEval's turn contextual precision (TurnContextualPrecisionMetric): for each sliding window
         of the conversation, the judge says whether each retrieval context of its assistant turns was
         useful for the conversation's expected_outcome given the window's user messages; the window's
         score is the rank-weighted precision sum_k precision@k x useful_k / useful (0 with none useful,
         1 without a context). Score = mean over windows (1 without a window). Needs expected_outcome
         (DeepEval refuses without it) and a judge.""",
         parity="DeepEval 4.3.1 TurnContextualPrecisionMetric given the same per-context verdicts: its windows, "
                "its per-window rank-weighted precision and strict clamp, its mean and empty scores; the "
                "request is deepeval:contextual_precision's on the window.")


# ---- turn contextual recall ---------------------------------------------------------------------------
def _recall_build(win: dict[str, Any], conv: Conversation) -> Any:
    if not win["contexts"]:
        return None
    return [("REFERENCE", conv.expected_outcome or ""), *context_blocks(win["contexts"])], None


def _recall_judge(win: dict[str, Any], v: Any, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    n = len(v.statements)
    if n == 0:  # no verdict: DeepEval's window scores 1
        return 1.0, {"statements": []}
    return sum(1 for x in v.statements if x.verdict == "yes") / n, {"statements": [x.model_dump() for x in v.statements]}


_items, _combine = _windowed("deepeval:turn_contextual_recall", "expected_outcome", _recall_build, _recall_judge)
register(ConversationJudge("deepeval:turn_contextual_recall", load_template("context_recall"), ReferenceAttribution,
                           _items, _combine, output_tokens=200),
         "TurnContextualRecallMetric", defaults=DEFAULTS, param="window_size",
         description="""DeepEval's turn contextual recall (TurnContextualRecallMetric): for each sliding window of
         the conversation, the judge says whether each statement of the conversation's expected_outcome
         can be attributed to the retrieval contexts of the window's assistant turns; the window's score
         is attributed / statements (1 without a context or a statement). Score = mean over windows (1
         without a window). Needs expected_outcome (DeepEval refuses without it) and a judge.""",
         parity="DeepEval 4.3.1 TurnContextualRecallMetric given the same per-statement verdicts: its windows, "
                "its per-window share and strict clamp, its mean and empty scores; the request is "
                "deepeval:contextual_recall's on the window.")


# ---- turn contextual relevancy ------------------------------------------------------------------------
def _relevancy_build(win: dict[str, Any], conv: Conversation) -> Any:
    if not win["contexts"]:
        return None
    n = len(win["contexts"])

    def check(v: Any) -> None:
        got = sorted(x.context for x in v.contexts)
        if got != list(range(1, n + 1)):
            raise ValueError(f"expected exactly one entry for each context 1..{n}, got contexts {got}")

    return [("QUESTION", win["user"]), *context_blocks(win["contexts"])], check


def _relevancy_judge(win: dict[str, Any], v: Any, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    items = [x for c in sorted(v.contexts, key=lambda c: c.context) for x in c.statements]
    if not items:
        return 1.0, {"contexts": []}
    return sum(1 for x in items if x.verdict == "yes") / len(items), {"contexts": [c.model_dump() for c in v.contexts]}


_items, _combine = _windowed("deepeval:turn_contextual_relevancy", None, _relevancy_build, _relevancy_judge)
register(ConversationJudge("deepeval:turn_contextual_relevancy", load_template("deepeval_contextual_relevancy"),
                           ContextStatementVerdicts, _items, _combine, output_tokens=300),
         "TurnContextualRelevancyMetric", defaults=DEFAULTS, param="window_size",
         description="""DeepEval's turn contextual relevancy (TurnContextualRelevancyMetric): for each sliding window
         of the conversation, the judge splits each retrieval context of its assistant turns into
         statements and says whether each is relevant to the window's user messages; the window's score is
         relevant / statements (1 without a context). Score = mean over windows (1 without a window). Needs
         a judge.""",
         parity="DeepEval 4.3.1 TurnContextualRelevancyMetric given the same statement verdicts: its windows, "
                "its per-window share and strict clamp, its mean and empty scores; DeepEval asks once per "
                "context, ragmeter once per window (deepeval:contextual_relevancy's request).")


# ---- turn faithfulness --------------------------------------------------------------------------------
def _faith_build(win: dict[str, Any], conv: Conversation) -> Any:
    return [("QUESTION", win["user"]), ("ANSWER", win["assistant"]), *context_blocks(win["contexts"])], None


def _faith_judge(win: dict[str, Any], v: Any, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    if not v.claims:
        return 1.0, {"claims": []}
    ok = ("supported",) if params.get("penalize_ambiguous_claims") else ("supported", "not_found")
    return (sum(1 for c in v.claims if c.verdict in ok) / len(v.claims),
            {"claims": [c.model_dump() for c in v.claims]})


_items, _combine = _windowed("deepeval:turn_faithfulness", None, _faith_build, _faith_judge)
register(ConversationJudge("deepeval:turn_faithfulness", load_template("faithfulness"), ClaimVerdicts,
                           _items, _combine, output_tokens=300),
         "TurnFaithfulnessMetric", defaults={**DEFAULTS, "penalize_ambiguous_claims": False}, param="window_size",
         description="""DeepEval's turn faithfulness (TurnFaithfulnessMetric): for each sliding window of the
         conversation, the judge extracts the claims of its assistant messages (the user messages as
         context) and says whether the window's retrieval contexts support, contradict or do not mention
         each (DeepEval's yes / no / idk); the window's score is the share of claims not contradicted
         (supported only, with penalize_ambiguous_claims), 1 without a claim. Score = mean over windows
         (1 without a window). Needs a judge.""",
         parity="DeepEval 4.3.1 TurnFaithfulnessMetric given the same claim verdicts (supported = yes, "
                "contradicted = no, not found = idk): its windows (a window without a context is judged too), "
                "per-window share and strict clamp, penalize_ambiguous_claims, its mean and empty scores; "
                "DeepEval extracts truths and claims, then judges them (three calls per window), ragmeter "
                "asks deepeval:faithfulness's one request on the window.")
