"""A judge metric's prompt tuned to people (``ragmeter align``): its instructions (the metric's
own, or rewritten by the judge model) followed by few-shot examples that people scored.

Each example is the data of a request, fenced as a request fences it, with its label prefixed
``EXAMPLE i`` (``EXAMPLE 1 ANSWER``, ``EXAMPLE 1 CONTEXT 1`` ...), then ``EXAMPLE i HUMAN SCORE``: the
score people gave it on the metric's scale. The examples sit in the system prompt, after the
instructions and before the data notice: the fixed part of every request of a run (prompt caching
applies), and the version hash of the template covers them, so a tuned template never shares a
cached verdict with another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

EXAMPLES_HEADING = (
    "Examples scored by people. Each example shows the data of a request in fenced blocks labelled "
    "EXAMPLE <n> ..., then EXAMPLE <n> HUMAN SCORE: the score people gave it on this metric's scale "
    "(from {low:g} to {high:g}). Judge the data you are given the way these examples were scored."
)
_TICKS = re.compile(r"`+")


def _fenced(label: str, text: str) -> str:
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{label}:\n{fence}\n{text}\n{fence}"


def examples_text(examples: Sequence[Mapping[str, Any]], bounds: tuple[float, float] = (0.0, 1.0)) -> str:
    """The few-shot section: every example's blocks (``[[label, text], ...]``) and human score."""
    parts = [EXAMPLES_HEADING.format(low=bounds[0], high=bounds[1])]
    for i, ex in enumerate(examples, 1):
        parts += [_fenced(f"EXAMPLE {i} {label}", str(text)) for label, text in ex["blocks"]]
        parts.append(_fenced(f"EXAMPLE {i} HUMAN SCORE", f"{float(ex['human']):g}"))
    return "\n\n".join(parts)


def tuned_text(base: str, version: Mapping[str, Any]) -> str:
    """The instructions of a stored version (:mod:`ragmeter.llm.templates`): the rewritten rubric,
    else ``base`` (the metric's template), then the examples; ``$`` in the examples is escaped so
    the template's placeholders stay the only ones."""
    text = str(version.get("rubric") or base).rstrip()
    examples = version.get("examples") or []
    if examples:
        low, high = (float(x) for x in (version.get("range") or (0.0, 1.0)))
        text += "\n\n" + examples_text(examples, (low, high)).replace("$", "$$")
    return text
