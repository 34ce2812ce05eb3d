"""Judge-based conversation metrics: knowledge retention, role adherence, conversation relevancy
(sliding window), conversation completeness (DeepEval's conversational metrics) and topic
adherence (ragas). One value per conversation; formulas and sources in docs/conversations.md."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ragmeter.conversations.model import Conversation
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Score
from ragmeter.metrics.conversation._base import ConversationJudge, Item, dialogue, numbered, register
from ragmeter.metrics.judge._common import count_summary


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RetentionVerdict(_Reply):
    reason: str
    verdict: Literal["yes", "no"]


class OutOfCharacter(_Reply):
    turn: int
    reason: str


class RoleVerdicts(_Reply):
    verdicts: list[OutOfCharacter]


class TurnRelevanceVerdict(_Reply):
    reason: str
    verdict: Literal["yes", "no"]


class Intention(_Reply):
    intention: str
    reason: str
    verdict: Literal["yes", "no"]


class CompletenessVerdicts(_Reply):
    intentions: list[Intention]


class TopicVerdict(_Reply):
    topic: str
    answered: bool
    on_reference_topic: bool
    reason: str = ""


class TopicVerdicts(_Reply):
    topics: list[TopicVerdict]


def _no_assistant(conv: Conversation) -> Score | None:
    if not conv.assistant_positions():
        return Score.missing("no assistant turn in the conversation")
    return None


# ---- knowledge retention ----------------------------------------------------------------------
def _retention_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    if (miss := _no_assistant(conv)) is not None:
        return miss
    turns = dialogue(conv)
    items = []
    for k, (pos, t) in enumerate(turns):
        before = turns[:k]
        if t.role != "assistant" or not any(x.role == "user" for _, x in before):
            continue
        items.append(Item(f"turn {pos + 1}", [("CONVERSATION", numbered(before)),
                                             ("ASSISTANT MESSAGE", f"Turn {pos + 1} (assistant): {t.content}")],
                          data=pos + 1))
    return items or Score.missing("no assistant turn follows a user message: nothing to retain")


def _retention_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    kept = sum(1 for v in verdicts if v.verdict == "no")
    n = len(verdicts)
    forgot = [{"turn": it.data, "reason": v.reason} for it, v in zip(items, verdicts, strict=True) if v.verdict == "yes"]
    return Score(kept / n, details={"verdicts": [{"turn": it.data, "verdict": v.verdict, "reason": v.reason}
                                                 for it, v in zip(items, verdicts, strict=True)],
                                    "forgetting": forgot,
                                    "summary": count_summary(kept, n, "assistant turns", "retain what the user said")})


register(ConversationJudge("knowledge_retention", "knowledge_retention", RetentionVerdict,
                           _retention_items, _retention_score, output_tokens=60),
         description="""Knowledge retention (DeepEval's KnowledgeRetentionMetric): does the assistant remember
         what the user told it? For every assistant turn that follows a user message, the judge reads
         the turns before it and says whether the turn shows knowledge attrition (asks again for,
         contradicts or ignores facts the user gave). Score = assistant turns without attrition /
         assistant turns judged, one value per conversation. Needs a judge.""",
         parity="DeepEval's KnowledgeRetentionMetric formula (turns without attrition / verdicts); "
                "DeepEval first extracts the user's facts per turn and judges against them, ragmeter "
                "asks one question per assistant turn with the earlier turns fenced as data.")


# ---- role adherence ---------------------------------------------------------------------------
def _role_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    if (miss := _no_assistant(conv)) is not None:
        return miss
    role = conv.chatbot_role or params.get("chatbot_role")
    if not role:
        return Score.missing("no chatbot role: give the conversation a chatbot_role (a system message) "
                             "or the metric the parameter chatbot_role")
    turns = dialogue(conv)
    allowed = {pos + 1 for pos, t in turns if t.role == "assistant"}

    def check(reply: Any) -> None:
        wrong = sorted({v.turn for v in reply.verdicts} - allowed)
        if wrong:
            raise ValueError(f"turn(s) {wrong} are not assistant turns (assistant turns: {sorted(allowed)})")

    return [Item("the conversation", [("CHATBOT ROLE", role), ("CONVERSATION", numbered(turns))], check, allowed)]


def _role_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    n = len(items[0].data)
    out = {v.turn: v.reason for v in verdicts[0].verdicts}
    k = min(len(out), n)
    return Score((n - k) / n, details={"out_of_character": [{"turn": t, "reason": r} for t, r in sorted(out.items())],
                                       "summary": count_summary(n - k, n, "assistant turns", "keep the role")})


register(ConversationJudge("role_adherence", "role_adherence", RoleVerdicts, _role_items, _role_score,
                           output_tokens=120),
         description="""Role adherence (DeepEval's RoleAdherenceMetric): does the assistant stay in the role
         it was given (the conversation's chatbot_role, e.g. its system message)? The judge lists the
         assistant turns that are out of character. Score = (assistant turns - out-of-character
         turns) / assistant turns, one value per conversation; no role is no value. Needs a judge.""",
         defaults={"chatbot_role": None},
         parity="DeepEval's RoleAdherenceMetric formula ((turns - min(out of character, turns)) / turns) "
                "from one verdict list per conversation, as DeepEval asks for it.")


# ---- conversation relevancy -------------------------------------------------------------------
def _relevancy_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    w = params.get("window_size")
    if not isinstance(w, int) or isinstance(w, bool) or w < 1:
        raise MetricError(f"conversation_relevancy: window_size must be a whole number >= 1, got {w!r}")
    if (miss := _no_assistant(conv)) is not None:
        return miss
    items = [Item(f"turn {win[-1][0] + 1}", [("CONVERSATION WINDOW", numbered(win))], data=win[-1][0] + 1)
             for win in sliding_windows(dialogue(conv), w)]
    return items or Score.missing("no user message answered by the assistant: no window to judge")


def unit_interactions(turns: list[tuple[int, Any]]) -> list[list[tuple[int, Any]]]:
    """DeepEval's ``get_unit_interactions`` (deepeval/metrics/utils/turns.py): a new unit starts at
    a user turn that follows an assistant turn once a user turn has been seen; the last unit is
    kept only when it ends with an assistant turn and holds a user turn."""
    units: list[list[tuple[int, Any]]] = []
    current: list[tuple[int, Any]] = []
    has_user = False
    for pt in turns:
        role = pt[1].role
        if current and current[-1][1].role == "assistant" and role == "user" and has_user:
            units.append(current)
            current = [pt]
            has_user = True
            continue
        current.append(pt)
        if role == "user":
            has_user = True
    if current and len(current) > 1 and current[-1][1].role == "assistant" and has_user:
        units.append(current)
    return units


def sliding_windows(turns: list[tuple[int, Any]], window_size: int) -> list[list[tuple[int, Any]]]:
    """DeepEval's turn-relevancy windows: for each unit interaction, the turns of it and of the
    ``window_size - 1`` units before it."""
    units = unit_interactions(turns)
    return [[pt for u in units[max(0, i - window_size + 1):i + 1] for pt in u] for i in range(len(units))]


def _relevancy_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    k = sum(1 for v in verdicts if v.verdict == "yes")
    n = len(verdicts)
    return Score(k / n, details={"verdicts": [{"turn": it.data, "verdict": v.verdict, "reason": v.reason}
                                              for it, v in zip(items, verdicts, strict=True)],
                                 "window_size": params["window_size"],
                                 "summary": count_summary(k, n, "assistant turns", "relevant to their window")})


register(ConversationJudge("conversation_relevancy", "conversation_relevancy", TurnRelevanceVerdict,
                           _relevancy_items, _relevancy_score, output_tokens=60,
                           subs=lambda p: {}),
         description="""Conversation relevancy over a sliding window (DeepEval's TurnRelevancyMetric): for
         each assistant reply, the judge reads the last window_size user/assistant exchanges ending
         with it and says whether the reply is relevant to them. Score = relevant replies / replies,
         one value per conversation. Parameter window_size (default 10, DeepEval's). Needs a judge.""",
         defaults={"window_size": 10}, param="window_size",
         parity="DeepEval's TurnRelevancyMetric: the same sliding windows of unit interactions and the "
                "same formula (relevant windows / windows).")


# ---- conversation completeness ----------------------------------------------------------------
def _completeness_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    if (miss := _no_assistant(conv)) is not None:
        return miss
    return [Item("the conversation", [("CONVERSATION", numbered(dialogue(conv)))])]


def _completeness_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    ints = verdicts[0].intentions
    details: dict[str, Any] = {"intentions": [i.model_dump() for i in ints]}
    if not ints:
        return Score.missing("the judge found no user intention in the conversation", details)
    k = sum(1 for i in ints if i.verdict == "yes")
    details["summary"] = count_summary(k, len(ints), "user intentions", "satisfied")
    return Score(k / len(ints), details=details)


register(ConversationJudge("conversation_completeness", "conversation_completeness", CompletenessVerdicts,
                           _completeness_items, _completeness_score, output_tokens=200),
         description="""Conversation completeness (DeepEval's ConversationCompletenessMetric): were the user's
         intentions met? The judge lists the user's intentions across the conversation and says for
         each whether the assistant satisfied it. Score = satisfied intentions / intentions, one value
         per conversation; no intention found is no value. Needs a judge.""",
         parity="DeepEval's ConversationCompletenessMetric formula (satisfied intentions / intentions); "
                "DeepEval extracts the intentions and judges them in separate calls, ragmeter in one.")


# ---- topic adherence --------------------------------------------------------------------------
_EPS = 1e-10  # ragas' smoothing


def _topic_items(conv: Conversation, params: dict[str, Any]) -> list[Item] | Score:
    if params.get("mode") not in ("precision", "recall", "f1"):
        raise MetricError(f"topic_adherence: mode must be precision, recall or f1, got {params.get('mode')!r}")
    if (miss := _no_assistant(conv)) is not None:
        return miss
    topics = conv.reference_topics or params.get("reference_topics")
    if not topics:
        return Score.missing("no reference topics: give the conversation reference_topics (ragas "
                             "MultiTurnSample.reference_topics)")
    return [Item("the conversation", [("REFERENCE TOPICS", "\n".join(f"- {t}" for t in topics)),
                                      ("CONVERSATION", numbered(dialogue(conv)))])]


def _topic_score(conv: Conversation, items: list[Item], verdicts: list[Any], params: dict[str, Any]) -> Score:
    tv = verdicts[0].topics
    details: dict[str, Any] = {"topics": [t.model_dump() for t in tv], "mode": params["mode"]}
    if not tv:
        return Score.missing("the judge found no topic in the conversation", details)
    tp = sum(1 for t in tv if t.answered and t.on_reference_topic)
    fp = sum(1 for t in tv if t.answered and not t.on_reference_topic)
    fn = sum(1 for t in tv if not t.answered and t.on_reference_topic)
    precision = tp / (tp + fp + _EPS)
    recall = tp / (tp + fn + _EPS)
    value = {"precision": precision, "recall": recall,
             "f1": 2 * precision * recall / (precision + recall + _EPS)}[params["mode"]]
    details.update(true_positives=tp, false_positives=fp, false_negatives=fn,
                   summary=f"{tp} on-topic answered, {fp} off-topic answered, {fn} on-topic refused")
    return Score(min(1.0, max(0.0, value)), details=details)


register(ConversationJudge("topic_adherence", "topic_adherence", TopicVerdicts, _topic_items, _topic_score,
                           output_tokens=200),
         description="""Topic adherence (ragas' TopicAdherenceScore): does the assistant answer questions on
         its reference topics and decline the others? The judge lists the topics the user raised,
         whether each was answered, and whether it falls under a reference topic. TP = answered and
         on-topic, FP = answered and off-topic, FN = refused and on-topic; precision = TP/(TP+FP),
         recall = TP/(TP+FN), f1 (default) their harmonic mean (ragas' 1e-10 smoothing). One value
         per conversation; no reference topics is no value. Needs a judge.""",
         defaults={"mode": "f1", "reference_topics": None},
         parity="ragas' TopicAdherenceScore formula (precision / recall / f1 with 1e-10 smoothing); ragas "
                "extracts topics, refusals and classifications in three calls, ragmeter in one.")


__all__ = ["CompletenessVerdicts", "RetentionVerdict", "RoleVerdicts", "TopicVerdicts", "TurnRelevanceVerdict"]
