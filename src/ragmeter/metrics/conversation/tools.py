"""Per-turn tool correctness of an agent in a conversation (deterministic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.conversations.model import from_sample
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.registry import metric


@metric("turn_tool_correctness", family="conversation", requires=("conversation",),
        defaults={"ordered": False},
        parity="DeepEval 4.3.1 ToolCorrectnessMetric per turn (names only; should_consider_ordering = "
               "ordered), except that DeepEval keeps matched calls in a set of value-equal ToolCall objects, "
               "so two calls of one tool match one expected call there and two here.")
def turn_tool_correctness(samples: Sequence[Sample], ctx: Any, ordered: bool = False) -> list[Score]:
    """Per-turn tool correctness of an agent (DeepEval's ToolCorrectnessMetric, per assistant
    turn): for each assistant turn with ``expected_tools``, the share of the expected tool names the
    turn called (each expected name matched by at most one call; ``ordered``: as a subsequence
    of the calls in order, DeepEval's ``should_consider_ordering``); a turn that expects no tool
    scores 1 when it called none, else 0. The conversation's value is the mean over those turns;
    a conversation without any turn that states ``expected_tools`` has no value."""
    out: list[Score] = []
    for s in samples:
        conv = from_sample(s)
        per_turn = []
        for pos in conv.assistant_positions():
            t = conv.turns[pos]
            if t.expected_tools is None:
                continue
            called = [c.name for c in t.tool_calls]
            per_turn.append({"turn": pos + 1, "expected": list(t.expected_tools), "called": called,
                             "score": _turn_score(list(t.expected_tools), called, ordered)})
        if not per_turn:
            out.append(Score.missing("no assistant turn states expected_tools"))
            continue
        value = sum(p["score"] for p in per_turn) / len(per_turn)
        out.append(Score(value, details={"turns": per_turn,
                                         "summary": f"mean over {len(per_turn)} assistant turn(s) with expected tools"}))
    return out


def _turn_score(expected: list[str], called: list[str], ordered: bool) -> float:
    if not expected:
        return 1.0 if not called else 0.0
    if ordered:  # longest common subsequence of names, over the expected count
        prev = [0] * (len(called) + 1)
        for e in expected:
            cur = [0]
            for j, c in enumerate(called):
                cur.append(prev[j] + 1 if e == c else max(prev[j + 1], cur[j]))
            prev = cur
        return prev[-1] / len(expected)
    pool = list(called)
    hit = 0
    for e in expected:
        if e in pool:
            pool.remove(e)
            hit += 1
    return hit / len(expected)
