"""ragas' multi-turn metrics under ragas' names: ``ragas:tool_call_accuracy``, ``ragas:tool_call_f1``
(no judge), ``ragas:agent_goal_accuracy_with_reference``, ``ragas:agent_goal_accuracy_without_reference``
and ``ragas:topic_adherence`` (judged).

A ragas ``MultiTurnSample`` (``user_input`` of human / ai / tool messages, ``reference``,
``reference_topics``, ``reference_tool_calls``) is read as a conversation
(:mod:`ragmeter.conversations.readers`); its tool calls are the assistant turns' tool calls in order,
its ``reference_tool_calls`` are kept in the conversation's metadata. Each metric equals ragas 0.4.3
(``ragas.metrics.collections``): the tool-call metrics on every input, the judged ones given the same
verdicts (tests/test_parity_ragas_conversation.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ragmeter.conversations.model import Conversation, from_sample
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.conversation._base import FAMILY, ConversationJudge, Item
from ragmeter.metrics.conversation.judged import TopicVerdicts, _topic_items, _topic_score
from ragmeter.metrics.judge._common import Verdict, judge_check, tool_equals
from ragmeter.metrics.registry import MetricSpec, register_metric

REFUSED = "ragas refuses the sample"


def _equals(spec: MetricSpec, cls: str) -> MetricSpec:
    spec.equals = tool_equals("ragas", cls)
    return spec


def _register_judged(jm: ConversationJudge, cls: str, aliases: tuple[str, ...], description: str, parity: str,
                     defaults: dict[str, Any] | None = None) -> MetricSpec:
    """A judged conversation metric with ragas' class as its ``equals`` and ragas' names as aliases."""
    return register_metric(MetricSpec(
        name=jm.name, family=FAMILY, fn=jm, requires=("conversation",), needs_llm=True, defaults=dict(defaults or {}),
        prepare=jm.prepare, check=judge_check, batch_size=64, description=description, parity=parity,
        aliases=aliases, equals=tool_equals("ragas", cls)))


def tool_calls_of(conv: Conversation) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` of every tool call of the conversation's assistant turns, in order (ragas:
    the ``tool_calls`` of its AI messages)."""
    return [(c.name, dict(c.arguments)) for t in conv.turns if t.role == "assistant" for c in t.tool_calls]


def reference_calls(sample: Sample) -> list[tuple[str, dict[str, Any]]] | None:
    """The sample's ``reference_tool_calls`` as ``(name, args)`` pairs (``None`` when it has none)."""
    conv = from_sample(sample)
    raw = conv.metadata.get("reference_tool_calls", sample.metadata.get("reference_tool_calls"))
    if raw is None:
        return None
    return [(str(c["name"]), dict(c.get("args") or c.get("arguments") or {})) for c in raw]


# ---- tool call accuracy and F1 --------------------------------------------------------------------------


def _sort_key(call: tuple[str, dict[str, Any]]) -> tuple[str, ...]:
    name, args = call
    return (name, *(x for k in sorted(args) for x in (k, str(args[k]))))


def _args_match(pred: dict[str, Any], ref: dict[str, Any]) -> float:
    if not ref and not pred:
        return 1.0
    if not ref:
        return 0.0
    return sum(1.0 for k in ref if k in pred and str(pred[k]) == str(ref[k])) / len(ref)


def tool_call_accuracy(pred: Sequence[tuple[str, dict[str, Any]]], ref: Sequence[tuple[str, dict[str, Any]]],
                       strict_order: bool = True) -> float:
    """ragas' ``ToolCallAccuracy``: the mean, over the reference calls, of the argument match of the
    call at the same position when it names the same tool (arguments compared as text), times the
    share of reference calls that have a counterpart, times 1 if the name sequences agree (in order,
    or as sorted lists without ``strict_order``) else 0. Both empty: 1; one empty: 0."""
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    if not strict_order:
        pred, ref = sorted(pred, key=_sort_key), sorted(ref, key=_sort_key)
    p_names, r_names = [n for n, _ in pred], [n for n, _ in ref]
    aligned = p_names == r_names if strict_order else sorted(p_names) == sorted(r_names)
    score = sum(_args_match(pa, ra) for (rn, ra), (pn, pa) in zip(ref, pred, strict=False) if rn == pn) / len(ref)
    compared = min(len(pred), len(ref))
    if compared < len(ref):
        score *= compared / len(ref)
    return score * int(aligned)


def _hashable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return frozenset((k, _hashable(v)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return tuple(_hashable(x) for x in obj)
    if isinstance(obj, set):
        return frozenset(_hashable(x) for x in obj)
    return obj


def tool_call_f1(pred: Sequence[tuple[str, dict[str, Any]]], ref: Sequence[tuple[str, dict[str, Any]]]) -> float:
    """ragas' ``ToolCallF1``: F1 of the sets of (name, arguments) calls, rounded to 4 places (0 when
    either set is empty)."""
    actual = {(n, _hashable(a)) for n, a in pred}
    expected = {(n, _hashable(a)) for n, a in ref}
    tp, fp, fn = len(actual & expected), len(actual - expected), len(expected - actual)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return round(f1, 4)


def _tool_metric(kind: str) -> Any:
    def fn(samples: Sequence[Sample], ctx: Any = None, strict_order: bool = True) -> list[Score]:
        if kind == "accuracy" and not isinstance(strict_order, bool):
            raise MetricError(f"ragas:tool_call_accuracy: strict_order must be true or false, got {strict_order!r}")
        out = []
        for s in samples:
            ref = reference_calls(s)
            if ref is None:
                out.append(Score.missing("no reference_tool_calls: give the conversation its expected tool calls "
                                         "(ragas MultiTurnSample.reference_tool_calls)"))
                continue
            pred = tool_calls_of(from_sample(s))
            value = tool_call_accuracy(pred, ref, strict_order) if kind == "accuracy" else tool_call_f1(pred, ref)
            out.append(Score(float(value), details={"called": [n for n, _ in pred], "expected": [n for n, _ in ref],
                                                    "summary": f"{len(pred)} call(s) made, {len(ref)} expected"}))
        return out

    return fn


_TOOLS_NOTE = ("\n\nThe conversation's tool calls are its assistant turns' calls in order; ``reference_tool_calls`` "
               "is a list of ``{name, args}``. A conversation without it has no value.")

register_metric(_equals(MetricSpec(
    name="ragas:tool_call_accuracy", family="conversation", fn=_tool_metric("accuracy"), requires=("conversation",),
    defaults={"strict_order": True}, aliases=("ToolCallAccuracy", "tool_call_accuracy"),
    description="""
ragas' tool call accuracy (``ToolCallAccuracy``): the calls the agent made against the reference
calls, position by position. With ``a_i`` the share of the i-th reference call's arguments the call
at position i matches (as text) when it names the same tool, ``m`` = min(|made|, |reference|):

    ragas:tool_call_accuracy = (sum_i a_i / |reference|) x (m / |reference|) x [names in the same order]

``strict_order=false`` sorts both lists first and compares the names as sorted lists. 1 when both
lists are empty, 0 when one is. Range [0, 1].""" + _TOOLS_NOTE,
    parity="Equals ragas 0.4.3 ``ToolCallAccuracy`` on every input (tests/test_parity_ragas_conversation.py)."),
    "ToolCallAccuracy"))

register_metric(_equals(MetricSpec(
    name="ragas:tool_call_f1", family="conversation", fn=_tool_metric("f1"), requires=("conversation",),
    aliases=("ToolCallF1", "tool_call_f1"),
    description="""
ragas' tool call F1 (``ToolCallF1``): the calls made and the reference calls as sets of (name,
arguments); precision = |both| / |made|, recall = |both| / |reference|:

    ragas:tool_call_f1 = round(2 P R / (P + R), 4)       (0 when P + R = 0)

Order and repeats do not count. Range [0, 1].""" + _TOOLS_NOTE,
    parity="Equals ragas 0.4.3 ``ToolCallF1`` on every input, its rounding to 4 places included "
           "(tests/test_parity_ragas_conversation.py)."),
    "ToolCallF1"))


# ---- agent goal accuracy ---------------------------------------------------------------------------------


class GoalVerdict(Verdict):
    user_goal: str
    end_state: str
    reason: str = ""
    verdict: Literal[0, 1]


def workflow(conv: Conversation) -> str:
    """The conversation as the judge reads it: numbered turns, each tool call with its result."""
    lines = []
    for i, t in enumerate(conv.turns, 1):
        lines.append(f"Turn {i} ({t.role}): {t.content}")
        for c in t.tool_calls:
            lines.append(f"  tool call: {c.name}({c.arguments})" + ("" if c.result is None else f" -> {c.result}"))
    return "\n".join(lines)


def _goal_items(with_reference: bool) -> Any:
    def items(conv: Conversation, _p: dict[str, Any]) -> list[Item] | Score:
        blocks = [("CONVERSATION", workflow(conv))]
        if with_reference:
            if not conv.reference:
                return Score.missing(f"no reference: {REFUSED} (AgentGoalAccuracyWithReference needs the desired "
                                     "outcome as the conversation's reference)")
            blocks.append(("DESIRED OUTCOME", conv.reference))
        return [Item("the conversation", blocks)]

    return items


def _goal_score(_conv: Conversation, _items: list[Item], verdicts: list[Any], _p: dict[str, Any]) -> Score:
    v: GoalVerdict = verdicts[0]
    return Score(float(v.verdict), details={**v.model_dump(), "summary": "goal achieved" if v.verdict else "goal not achieved"})


_GOAL_PARITY = ("Equals ragas 0.4.3 ``{cls}`` given the same verdict (tests/test_parity_ragas_conversation.py); "
                "one call infers the goal and end state and compares them where ragas makes two.")

for _ref, _cls, _desired, _desc in (
    (True, "AgentGoalAccuracyWithReference",
     "The desired outcome is the DESIRED OUTCOME block, not the user_goal.", """
ragas' agent goal accuracy with a reference (``AgentGoalAccuracyWithReference``): the judge reads the
agent's workflow, states the end state it reached and says whether it is the desired outcome (the
conversation's ``reference``): 1 if the same, else 0. A conversation without a reference is refused
by ragas: no value."""),
    (False, "AgentGoalAccuracyWithoutReference", "The desired outcome is the user_goal you identified.", """
ragas' agent goal accuracy without a reference (``AgentGoalAccuracyWithoutReference``): the judge
reads the agent's workflow, identifies the user's goal and the end state, and says whether the end
state achieves the goal: 1 if so, else 0."""),
):
    _name = "ragas:agent_goal_accuracy_with" + ("_reference" if _ref else "out_reference")
    _register_judged(ConversationJudge(_name, "ragas_agent_goal", GoalVerdict, _goal_items(_ref), _goal_score,
                                       subs=lambda p, d=_desired: {"desired": d}), _cls,
                     (_cls, "agent_goal_accuracy", "AgentGoalAccuracy", "ragas:agent_goal_accuracy") if _ref
                     else (_cls, "agent_goal_accuracy_without_reference"),
                     description=_desc, parity=_GOAL_PARITY.format(cls=_cls))


# ---- topic adherence -------------------------------------------------------------------------------------

_register_judged(
    ConversationJudge("ragas:topic_adherence", "topic_adherence", TopicVerdicts, _topic_items, _topic_score,
                      output_tokens=200),
    "TopicAdherence", ("TopicAdherence", "TopicAdherenceScore", "topic_adherence_score"),
    defaults={"mode": "f1", "reference_topics": None},
    description="""
ragas' topic adherence (``TopicAdherence``): the judge lists the topics the user raised, whether the
assistant answered each, and whether each falls under the conversation's ``reference_topics``. TP =
answered and on a reference topic, FP = answered and off them, FN = refused and on them:

    precision = TP / (TP + FP + 1e-10)      recall = TP / (TP + FN + 1e-10)
    f1 = 2 P R / (P + R + 1e-10)            ragas:topic_adherence = <mode>   (mode = f1 default)

No topic found: no value (ragas: NaN); no reference topics: refused by ragas, no value. Range [0, 1].""",
    parity="Equals ragas 0.4.3 ``TopicAdherence`` given the same verdicts (tests/test_parity_ragas_conversation.py), "
           "and ragmeter's ``topic_adherence``, whose verdicts it shares; one call where ragas makes 2 + topics. A "
           "conversation without an assistant turn has no value here.")
