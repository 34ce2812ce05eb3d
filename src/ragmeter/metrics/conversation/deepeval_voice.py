"""DeepEval 4.3.1's agent responsiveness (``deepeval:agent_responsiveness``, AgentResponsivenessMetric,
one of its voice metrics): deterministic, equal to DeepEval on every conversation.

A voice turn's audio is the turn's ``metadata.audio`` (any value: DeepEval tests only whether a
turn has audio); a conversation's ``metadata.end_reason`` (or ``endReason``) is the call's end reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.conversations.model import from_sample
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.conversation._base import FAMILY
from ragmeter.metrics.registry import metric

#: a user message ending with one of these owes no response (DeepEval's list)
NON_RESPONSE_ENDINGS = ("bye", "goodbye", "thank you", "thanks", "that's all", "that is all")
#: end reasons of a call that are a critical failure
FAILED_ENDINGS = {"AGENT_HANGUP", "ERROR", "IDLE_TIMEOUT"}


def _owed(text: str) -> bool:
    return not text.strip().lower().rstrip(".!").endswith(NON_RESPONSE_ENDINGS)


@metric("deepeval:agent_responsiveness", family=FAMILY, requires=("conversation",),
        defaults={"threshold": 0.5, "strict_mode": False},
        equals={"tool": "deepeval", "version": "4.3.1", "metric": "AgentResponsivenessMetric"},
        aliases=("AgentResponsivenessMetric", "deepeval.metrics.AgentResponsivenessMetric"),
        parity="Equals DeepEval 4.3.1 AgentResponsivenessMetric on every conversation (deterministic in "
               "DeepEval too); a turn's audio is its metadata.audio, so a text conversation whose assistant "
               "answers an owed user message scores 0, as DeepEval scores a test case without audio.")
def deepeval_agent_responsiveness(samples: Sequence[Sample], ctx: Any, threshold: float = 0.5,
                                  strict_mode: bool = False) -> list[Score]:
    """DeepEval's agent responsiveness (AgentResponsivenessMetric, a voice metric): every user
    message that owes a response (one not ending with bye, goodbye, thank you, thanks, that's all)
    must be followed by an assistant turn with audio. A user message followed by another user
    message is a reprompt (-0.25 each); one left unanswered at the end, an answer without audio, or
    a call ended by AGENT_HANGUP, ERROR or IDLE_TIMEOUT is a critical failure (0). Score =
    max(0, 1 - 0.25 x reprompts), 0 on a critical failure; strict_mode: 0 below 1."""
    if not isinstance(strict_mode, bool):
        raise MetricError(f"deepeval:agent_responsiveness: strict_mode must be true or false, got {strict_mode!r}")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise MetricError(f"deepeval:agent_responsiveness: threshold must be a number in [0, 1], got {threshold!r}")
    thr = 1.0 if strict_mode else float(threshold)
    out = []
    for s in samples:
        conv = from_sample(s)
        turns = [t for t in conv.turns if t.role in ("user", "assistant")]
        events: list[dict[str, Any]] = []
        critical, reprompts = False, 0
        for i, t in enumerate(turns):
            if t.role != "user" or not _owed(t.content):
                continue
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            if nxt is None:
                critical = True
                events.append({"type": "agent_failed_to_respond", "turn": i, "critical": True})
            elif nxt.role == "user":
                reprompts += 1
                events.append({"type": "user_reprompted", "turn": i + 1, "critical": False})
            elif nxt.metadata.get("audio") is None:
                critical = True
                events.append({"type": "assistant_audio_missing", "turn": i + 1, "critical": True})
        end = conv.metadata.get("end_reason") or conv.metadata.get("endReason")
        if isinstance(end, str) and end.upper() in FAILED_ENDINGS:
            critical = True
            events.append({"type": "unexpected_end", "end_reason": end, "critical": True})
        value = 0.0 if critical else max(0.0, min(1.0, 1.0 - reprompts * 0.25))
        if strict_mode and value < thr:
            value = 0.0
        summary = ("no reprompt" if not events else
                   "critical: " + ", ".join(e["type"] for e in events if e["critical"]) if critical
                   else f"{reprompts} reprompt(s)")
        out.append(Score(value, details={"events": events, "critical_failure": critical, "summary": summary,
                                         "threshold": thr, "strict_mode": strict_mode, "success": value >= thr}))
    return out
