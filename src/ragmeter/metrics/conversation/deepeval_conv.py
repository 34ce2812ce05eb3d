"""DeepEval 4.3.1's conversational metrics with DeepEval's numbers: ``deepeval:knowledge_retention``,
``deepeval:turn_relevancy``, ``deepeval:role_adherence``, ``deepeval:conversation_completeness``,
``deepeval:goal_accuracy``, ``deepeval:topic_adherence``, ``deepeval:tool_use`` (one value per
conversation, scope ``conversation``).

A conversation is DeepEval's ``ConversationalTestCase`` (``turns`` of role/content,
``chatbot_role``, ``scenario``, ``expected_outcome``; read by :mod:`ragmeter.conversations`): its
user and assistant turns are DeepEval's turns, in order. The judge is asked DeepEval's questions in
ragmeter's structured-verdict form (one request where DeepEval makes one per turn or per item), and
the verdicts are combined by DeepEval's formula: the share of passing verdicts, 1 when there is no
verdict (DeepEval's empty score), 0 in ``strict_mode`` when not every verdict passes; DeepEval's
``threshold`` decides ``success`` (in the details). tests/test_parity_deepeval_conversational.py runs
DeepEval itself against a scripted judge to check each number.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragmeter.conversations.model import Conversation
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Score
from ragmeter.metrics.conversation._base import FAMILY, ConversationJudge, Item, dialogue, numbered
from ragmeter.metrics.conversation.judged import (
    CompletenessVerdicts,
    RoleVerdicts,
    TurnRelevanceVerdict,
    sliding_windows,
    unit_interactions,
)
from ragmeter.metrics.judge._common import judge_check, tool_equals
from ragmeter.metrics.judge.deepeval_metrics import deepeval_params, qag_score
from ragmeter.metrics.registry import MetricSpec, register_metric

DEFAULTS: dict[str, Any] = {"threshold": 0.5, "strict_mode": False}


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class UserFacts(_Reply):
    turn: int
    facts: dict[str, str | list[str]]


class RetentionCheck(_Reply):
    turn: int
    reason: str
    verdict: Literal["yes", "no"]


class RetentionReport(_Reply):
    user_turns: list[UserFacts]
    assistant_turns: list[RetentionCheck]


def _params(name: str, params: dict[str, Any]) -> None:
    deepeval_params(name)(params)


def _empty(params: dict[str, Any], what: str) -> Score:
    """DeepEval's number for a conversation that gives it nothing to judge: 1."""
    return qag_score(0, 0, params, {}, noun="", what="", empty_score=1.0, empty=what)


def register(jm: ConversationJudge, tool_class: str, *, description: str, parity: str,
             defaults: dict[str, Any] | None = None, param: str | None = None) -> MetricSpec:
    return register_metric(MetricSpec(
        name=jm.name, family=FAMILY, fn=jm, requires=("conversation",), needs_llm=True,
        defaults={**DEFAULTS, **(defaults or {})}, param=param, prepare=jm.prepare, check=judge_check,
        batch_size=64, description=description, parity=parity, equals=tool_equals("deepeval", tool_class),
        aliases=(tool_class, f"deepeval.metrics.{tool_class}"), scope="conversation"))


# ---- knowledge retention ----------------------------------------------------------------------------
def _retention_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:knowledge_retention", params)
    turns = dialogue(conv)
    users = {pos + 1 for pos, t in turns if t.role == "user"}
    judged = [pos + 1 for pos, t in turns if t.role == "assistant" and any(u < pos + 1 for u in users)]
    if not judged:
        return _empty(params, "no assistant turn follows a user turn")

    def check(reply: Any) -> None:
        wrong = sorted({u.turn for u in reply.user_turns} - users)
        if wrong:
            raise ValueError(f"turn(s) {wrong} under user_turns are not user turns (user turns: {sorted(users)})")
        got = [a.turn for a in reply.assistant_turns]
        if sorted(got) != judged:
            raise ValueError(f"assistant_turns must judge each of the turns {judged} once, got {sorted(got)}")

    return [Item("the conversation", [("CONVERSATION", numbered(turns))], check, judged)]


def _retention_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    report = verdicts[0]
    known = {u.turn for u in report.user_turns if u.facts}
    # DeepEval judges an assistant turn only against facts already extracted from earlier user turns
    counted = [a for a in sorted(report.assistant_turns, key=lambda a: a.turn) if any(k < a.turn for k in known)]
    kept = sum(1 for a in counted if a.verdict == "no")
    details = {"facts": [u.model_dump() for u in report.user_turns],
               "verdicts": [a.model_dump() for a in counted]}
    return qag_score(kept, len(counted), params, details, noun="assistant turns", what="retain the user's facts",
                     empty_score=1.0, empty="no user fact before any assistant turn")


register(ConversationJudge("deepeval:knowledge_retention", "deepeval_knowledge_retention", RetentionReport,
                           _retention_items, _retention_score, output_tokens=300),
         "KnowledgeRetentionMetric",
         description="""DeepEval's knowledge retention (KnowledgeRetentionMetric): the judge lists the facts each
         user turn states and says for each assistant turn whether it forgets or contradicts facts the
         user stated before it. Assistant turns with no stated fact before them are not judged (as
         DeepEval does not). Score = assistant turns without attrition / assistant turns judged; 1
         when none is judged; strict_mode: 0 below 1. One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 KnowledgeRetentionMetric given the same verdicts: its per-user-turn fact "
                "extraction (a turn judged only after a non-empty extraction), its yes = attrition verdicts, "
                "score_qag_verdicts (1 without verdicts), strict_mode and threshold. DeepEval asks once per "
                "user turn and once per judged assistant turn; ragmeter asks once per conversation.")


# ---- turn relevancy ---------------------------------------------------------------------------------
def _relevancy_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:turn_relevancy", params)
    w = params.get("window_size")
    if not isinstance(w, int) or isinstance(w, bool) or w < 1:
        raise MetricError(f"deepeval:turn_relevancy: window_size must be a whole number >= 1, got {w!r}")
    items = [Item(f"turn {win[-1][0] + 1}", [("CONVERSATION WINDOW", numbered(win))], data=win[-1][0] + 1)
             for win in sliding_windows(dialogue(conv), w)]
    return items or _empty(params, "no user message answered by the assistant")


def _relevancy_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    k = sum(1 for v in verdicts if v.verdict == "yes")
    details = {"verdicts": [{"turn": it.data, "verdict": v.verdict, "reason": v.reason}
                            for it, v in zip(items, verdicts, strict=True)], "window_size": params["window_size"]}
    return qag_score(k, len(verdicts), params, details, noun="assistant turns", what="relevant to their window",
                     empty_score=1.0, empty="no window")


register(ConversationJudge("deepeval:turn_relevancy", "deepeval_turn_relevancy", TurnRelevanceVerdict,
                           _relevancy_items, _relevancy_score, output_tokens=60),
         "TurnRelevancyMetric",
         description="""DeepEval's turn relevancy (TurnRelevancyMetric): for each user-assistant exchange, the
         judge reads it with the window_size - 1 exchanges before it and says whether the last assistant
         message is relevant (only a completely irrelevant one is not). Score = relevant / windows; 1
         without a window; strict_mode: 0 below 1. Parameter window_size (default 10, DeepEval's). One
         value per conversation. Needs a judge.""",
         defaults={"window_size": 10}, param="window_size",
         parity="DeepEval 4.3.1 TurnRelevancyMetric given the same verdicts: its unit interactions and "
                "sliding windows, score_qag_verdicts (1 without a window), strict_mode and threshold.")


# ---- role adherence ---------------------------------------------------------------------------------
def _role_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:role_adherence", params)
    if conv.chatbot_role is None:
        return Score.missing("no chatbot_role: DeepEval refuses the test case ('chatbot_role' cannot be empty)")
    turns = dialogue(conv)
    n = sum(1 for _, t in turns if t.role == "assistant")
    if n == 0:
        return _empty(params, "no assistant turn")
    return [Item("the conversation", [("CHATBOT ROLE", conv.chatbot_role), ("CONVERSATION", numbered(turns))],
                 data=n)]


def _role_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    n = items[0].data
    out = verdicts[0].verdicts
    k = min(len(out), n)  # DeepEval counts the verdicts it is given, capped at the assistant turns
    return qag_score(n - k, n, params, {"out_of_character": [v.model_dump() for v in out]},
                     noun="assistant turns", what="in character", empty_score=1.0, empty="no assistant turn")


register(ConversationJudge("deepeval:role_adherence", "role_adherence", RoleVerdicts, _role_items, _role_score,
                           output_tokens=120),
         "RoleAdherenceMetric",
         description="""DeepEval's role adherence (RoleAdherenceMetric): the judge lists the assistant turns that
         break the conversation's chatbot_role. Score = (assistant turns - min(listed, assistant turns)) /
         assistant turns; 1 without an assistant turn; strict_mode: 0 below 1; no chatbot_role is no
         value (DeepEval refuses the test case). One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 RoleAdherenceMetric given the same verdict list (every listed verdict counts, "
                "as in DeepEval), its empty score, strict_mode and threshold; the request is ragmeter's "
                "role_adherence one, so the two metrics share it.")


# ---- conversation completeness ----------------------------------------------------------------------
def _completeness_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:conversation_completeness", params)
    return [Item("the conversation", [("CONVERSATION", numbered(dialogue(conv)))])]


def _completeness_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    ints = verdicts[0].intentions
    k = sum(1 for i in ints if i.verdict == "yes")
    return qag_score(k, len(ints), params, {"intentions": [i.model_dump() for i in ints]}, noun="user intentions",
                     what="satisfied", empty_score=1.0, empty="no user intention")


register(ConversationJudge("deepeval:conversation_completeness", "conversation_completeness", CompletenessVerdicts,
                           _completeness_items, _completeness_score, output_tokens=200),
         "ConversationCompletenessMetric",
         description="""DeepEval's conversation completeness (ConversationCompletenessMetric): the judge lists the
         user's intentions and says for each whether the assistant satisfied it. Score = satisfied /
         intentions; 1 without an intention (DeepEval's empty score); strict_mode: 0 below 1. One value
         per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 ConversationCompletenessMetric given the same intentions and verdicts: "
                "score_qag_verdicts (1 without an intention), strict_mode and threshold; DeepEval extracts "
                "the intentions, then asks once per intention; ragmeter's conversation_completeness request "
                "gets both at once and is shared with it.")


# ---- goal accuracy ----------------------------------------------------------------------------------
class GoalPlanScores(_Reply):
    goal_reason: str
    goal_score: float = Field(ge=0, le=1)
    plan_reason: str
    plan_score: float = Field(ge=0, le=1)


def _steps(turns: list[tuple[int, Any]]) -> str:
    out = []
    for pos, t in turns:
        line = f"Turn {pos + 1} (assistant): {t.content}"
        for c in t.tool_calls:
            line += f"\n  tool called: {c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
            if c.result is not None:
                line += f" -> {json.dumps(c.result, ensure_ascii=False, default=str)}"
        out.append(line)
    return "\n".join(out)


def _goal_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:goal_accuracy", params)
    items = []
    for unit in unit_interactions(dialogue(conv)):
        goal = []
        for pt in unit:  # the user turns that open the exchange
            if pt[1].role != "user":
                break
            goal.append(pt)
        steps = [pt for pt in unit[1:] if pt[1].role == "assistant"]
        items.append(Item(f"turn {unit[-1][0] + 1}", [("USER GOAL", numbered(goal)), ("ASSISTANT STEPS", _steps(steps))],
                          data=unit[-1][0] + 1))
    if not items:  # DeepEval averages nothing as 0 for both parts
        return _goal_value(0.0, [], params)
    return items


def _goal_value(value: float, exchanges: list[dict[str, Any]], params: dict[str, Any],
                what: str = "mean of the goal and plan scores") -> Score:
    strict = bool(params.get("strict_mode", False))
    threshold = 1.0 if strict else float(params.get("threshold", 0.5))
    if strict and value < threshold:
        value = 0.0
    summary = (f"{what} over {len(exchanges)} exchange(s)" if exchanges
               else "no user-assistant exchange: DeepEval scores 0")
    return Score(value, details={"exchanges": exchanges, "summary": summary, "threshold": threshold,
                                 "strict_mode": strict, "success": value >= threshold})


def _goal_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    goal = sum(v.goal_score for v in verdicts) / len(verdicts)
    plan = sum(v.plan_score for v in verdicts) / len(verdicts)
    return _goal_value((goal + plan) / 2, [{"turn": it.data, **v.model_dump()} for it, v in zip(items, verdicts, strict=True)],
                       params)


register(ConversationJudge("deepeval:goal_accuracy", "deepeval_goal_accuracy", GoalPlanScores,
                           _goal_items, _goal_score, output_tokens=160),
         "GoalAccuracyMetric",
         description="""DeepEval's goal accuracy (GoalAccuracyMetric): for each user-assistant exchange (DeepEval's
         unit interactions) the judge scores, on DeepEval's 0 / 0.25 / 0.5 / 0.75 / 1 guide, whether what
         the user saw achieved the user's goal and how good and how followed the assistant's plan was.
         Score = (mean goal score + mean plan score) / 2; 0 without an exchange (as DeepEval);
         strict_mode: 0 below 1. One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 GoalAccuracyMetric given the same goal and plan scores: its unit interactions, "
                "its mean of the two means (0 without an exchange), strict_mode and threshold. DeepEval asks "
                "two questions per exchange and always writes a reason (one more call); ragmeter asks both "
                "in one request per exchange.")


# ---- topic adherence --------------------------------------------------------------------------------
class QAPairVerdict(_Reply):
    question: str
    response: str
    reason: str
    verdict: Literal["TP", "TN", "FP", "FN"]


class QAPairVerdicts(_Reply):
    qa_pairs: list[QAPairVerdict]


def _topics(conv: Conversation, params: dict[str, Any]) -> list[str] | None:
    topics = params.get("relevant_topics")
    if topics is not None and not (isinstance(topics, list | tuple) and all(isinstance(t, str) for t in topics)):
        raise MetricError(f"deepeval:topic_adherence: relevant_topics must be a list of topics, got {topics!r}")
    return list(topics) if topics is not None else conv.reference_topics


def _topic_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:topic_adherence", params)
    topics = _topics(conv, params)
    if topics is None:
        return Score.missing("no relevant topics: give the metric relevant_topics (DeepEval's parameter) or the "
                             "conversation reference_topics")
    listed = "\n".join(f"- {t}" for t in topics)
    return [Item(f"turn {unit[-1][0] + 1}", [("RELEVANT TOPICS", listed), ("EXCHANGE", numbered(unit))],
                 data=unit[-1][0] + 1) for unit in unit_interactions(dialogue(conv))] or _topic_value([], params)


def _topic_value(pairs: list[dict[str, Any]], params: dict[str, Any]) -> Score:
    counts = {k: sum(1 for p in pairs if p["verdict"] == k) for k in ("TP", "TN", "FP", "FN")}
    total = sum(counts.values())
    strict = bool(params.get("strict_mode", False))
    threshold = 1.0 if strict else float(params.get("threshold", 0.5))
    value = (counts["TP"] + counts["TN"]) / total if total else 0.0
    if strict and value < threshold:
        value = 0.0
    summary = (f"{counts['TP'] + counts['TN']} of {total} question-answer pairs on policy "
               f"(TP {counts['TP']}, TN {counts['TN']}, FP {counts['FP']}, FN {counts['FN']})" if total
               else "no question-answer pair: DeepEval scores 0")
    return Score(value, details={"qa_pairs": pairs, **counts, "summary": summary, "threshold": threshold,
                                 "strict_mode": strict, "success": value >= threshold})


def _topic_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    return _topic_value([{"turn": it.data, **p.model_dump()} for it, v in zip(items, verdicts, strict=True)
                         for p in v.qa_pairs], params)


register(ConversationJudge("deepeval:topic_adherence", "deepeval_topic_adherence", QAPairVerdicts,
                           _topic_items, _topic_score, output_tokens=250),
         "TopicAdherenceMetric",
         description="""DeepEval's topic adherence (TopicAdherenceMetric): for each user-assistant exchange the
         judge extracts the question-answer pairs and classes each against the relevant_topics: TP
         (relevant, answered), FN (relevant, refused), FP (off-topic, answered), TN (off-topic, refused).
         Score = (TP + TN) / pairs; 0 without a pair (as DeepEval); strict_mode: 0 below 1. Parameter
         relevant_topics (DeepEval's; default: the conversation's reference_topics). One value per
         conversation. Needs a judge.""",
         defaults={"relevant_topics": None},
         parity="DeepEval 4.3.1 TopicAdherenceMetric given the same question-answer pairs and verdicts: its "
                "unit interactions, (TP + TN) / pairs (0 without a pair), strict_mode and threshold. DeepEval "
                "extracts the pairs, then asks once per pair; ragmeter asks once per exchange. ragas' "
                "TopicAdherenceScore is the different number of topic_adherence.")


# ---- tool use -----------------------------------------------------------------------------------------
class ToolUseScores(_Reply):
    selection_reason: str
    selection_score: float = Field(ge=0, le=1)
    argument_reason: str = ""
    argument_score: float | None = Field(default=None, ge=0, le=1)


def _available(params: dict[str, Any]) -> list[dict[str, Any]]:
    tools = params.get("available_tools")
    if not isinstance(tools, list | tuple) or not tools:
        raise MetricError("deepeval:tool_use needs available_tools (DeepEval's required parameter): a list of tool "
                          "names or objects with a 'name' (and a 'description')")
    out = []
    for t in tools:
        if isinstance(t, str):
            out.append({"name": t})
        elif isinstance(t, dict) and isinstance(t.get("name"), str):
            out.append({k: t[k] for k in ("name", "description") if t.get(k) is not None})
        else:
            raise MetricError(f"deepeval:tool_use: each of available_tools is a tool name or an object with a 'name', got {t!r}")
    return out


def _tool_use_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    _params("deepeval:tool_use", params)
    tools = json.dumps(_available(params), ensure_ascii=False, indent=2)
    items = []
    for unit in unit_interactions(dialogue(conv)):
        if len(unit) < 2:
            continue
        users = []
        for pt in unit:
            if pt[1].role != "user":
                break
            users.append(pt)
        replies = [pt for pt in unit[1:] if pt[1].role == "assistant"]
        calls = [{"name": c.name, "arguments": c.arguments} for _, t in replies for c in t.tool_calls]
        items.append(Item(f"turn {unit[-1][0] + 1}", [
            ("AVAILABLE TOOLS", tools), ("USER MESSAGES", numbered(users)), ("ASSISTANT MESSAGES", numbered(replies)),
            ("TOOLS CALLED", json.dumps(calls, ensure_ascii=False, indent=2, default=str) if calls else "(none)")],
            data={"turn": unit[-1][0] + 1, "tools_used": bool(calls)}))
    return items or _tool_use_value([], params)


def _tool_use_value(rows: list[dict[str, Any]], params: dict[str, Any]) -> Score:
    sel = [r["selection_score"] for r in rows]
    arg = [r["argument_score"] for r in rows if r["tools_used"]]
    # DeepEval divides an empty sum by 1: no exchange, or no tool used anywhere, scores 0
    value = min(sum(sel) / (len(sel) or 1), sum(arg) / (len(arg) or 1))
    what = ("the lower of the mean selection and mean argument scores" if arg
            else "no tool called: DeepEval's empty argument mean, 0,")
    return _goal_value(value, rows, params, what)


def _tool_use_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    rows = [{**it.data, "selection_score": v.selection_score, "selection_reason": v.selection_reason,
             "argument_score": v.argument_score if it.data["tools_used"] else None,
             "argument_reason": v.argument_reason} for it, v in zip(items, verdicts, strict=True)]
    return _tool_use_value(rows, params)


def _argument_given(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    items = _tool_use_items(conv, params)
    if isinstance(items, Score):
        return items
    for it in items:
        if it.data["tools_used"]:
            def check(reply: Any, turn: int = it.data["turn"]) -> None:
                if reply.argument_score is None:
                    raise ValueError(f"the exchange ending at turn {turn} called tools: argument_score is required")
            it.validate = check
    return items


register(ConversationJudge("deepeval:tool_use", "deepeval_tool_use", ToolUseScores, _argument_given,
                           _tool_use_score, output_tokens=200),
         "ToolUseMetric", defaults={"available_tools": None},
         description="""DeepEval's tool use (ToolUseMetric): for each user-assistant exchange (of two turns or more)
         the judge scores, on DeepEval's 0 / 0.25 / 0.5 / 0.75 / 1 guide, the agent's choice of tools among
         available_tools and, when it called any, the arguments it passed. Score = min(mean selection
         score, mean argument score over the exchanges that called tools); as in DeepEval an empty mean is
         0, so a conversation without any tool call scores 0; strict_mode: 0 below 1. Parameter
         available_tools (required, as in DeepEval). One value per conversation. Needs a judge.""",
         parity="DeepEval 4.3.1 ToolUseMetric given the same selection and argument scores: its unit "
                "interactions (those of two turns or more), min of the two means with an empty mean of 0, "
                "strict_mode and threshold. DeepEval asks two questions per exchange (and writes two reasons); "
                "ragmeter asks both in one request per exchange.")
