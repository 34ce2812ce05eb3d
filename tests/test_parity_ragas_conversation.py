"""``ragas:tool_call_accuracy`` and ``ragas:tool_call_f1`` against ragas 0.4.3's ``ToolCallAccuracy``
and ``ToolCallF1`` on 200 generated ragas ``MultiTurnSample`` rows each (seeded): the row is read as
ragmeter reads a file's row (a conversation, its ``reference_tool_calls`` kept), ragas gets the same
messages. Equal within 1e-6 (relative); the judged multi-turn metrics are in
tests/test_parity_ragas_judged.py."""

from __future__ import annotations

import random
import warnings

import pytest

from references import require_reference

ragas = require_reference("ragas")
pytestmark = pytest.mark.contract

from ragas_parity_support import close, ours, ragas_value  # noqa: E402

N = 200
TOOLS = ["search", "book", "weather", "pay"]
VALUES = [1, 2, "1", "Paris", "paris", 2.5, True, None, [1, 2], {"k": 1}, {"k": [1, {"x": 2}]}]


def call(rng: random.Random) -> dict:
    keys = rng.sample(["a", "b", "city", "n"], rng.randint(0, 3))
    return {"name": rng.choice(TOOLS), "args": {k: rng.choice(VALUES) for k in keys}}


def row(rng: random.Random, i: int) -> dict:
    """A conversation: a few human turns, AI turns with 0-3 tool calls and their tool results; the
    reference calls are the made ones changed (an argument, the order, one dropped or added) or new."""
    msgs, made = [], []
    for _ in range(rng.randint(1, 3)):
        msgs.append({"type": "human", "content": f"do something {rng.random():.3f}"})
        calls = [call(rng) for _ in range(rng.choice([0, 0, 1, 2, 3]))]
        made += calls
        msgs.append({"type": "ai", "content": "", "tool_calls": calls} if calls else {"type": "ai", "content": "ok"})
        msgs += [{"type": "tool", "content": "result"} for _ in calls]
        if calls:
            msgs.append({"type": "ai", "content": "done"})
    ref = [dict(c, args=dict(c["args"])) for c in made]
    r = rng.random()
    if r < 0.2 and ref:
        c = rng.choice(ref)
        c["args"][rng.choice(["a", "city"])] = rng.choice(VALUES)
    elif r < 0.35:
        rng.shuffle(ref)
    elif r < 0.5 and ref:
        ref.pop(rng.randrange(len(ref)))
    elif r < 0.6:
        ref.append(call(rng))
    elif r < 0.7:
        ref = [call(rng) for _ in range(rng.randint(0, 3))]
    return {"id": f"r{i}", "user_input": msgs, "reference_tool_calls": ref}


def ragas_inputs(r: dict) -> tuple[list, list]:
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

    msgs = []
    for m in r["user_input"]:
        if m["type"] == "human":
            msgs.append(HumanMessage(content=m["content"]))
        elif m["type"] == "tool":
            msgs.append(ToolMessage(content=m["content"]))
        else:
            calls = [ToolCall(name=c["name"], args=c["args"]) for c in m.get("tool_calls", [])]
            msgs.append(AIMessage(content=m["content"], tool_calls=calls or None))
    return msgs, [ToolCall(name=c["name"], args=c["args"]) for c in r["reference_tool_calls"]]


def samples_of(rows: list[dict]):
    from ragmeter.conversations.model import to_samples
    from ragmeter.conversations.readers import parse_conversation

    return [to_samples(parse_conversation(r))[0] for r in rows]


@pytest.mark.parametrize("strict_order", [True, False])
def test_tool_call_accuracy(strict_order):
    from ragas.metrics.collections import ToolCallAccuracy

    rng = random.Random(11)
    rows = [row(rng, i) for i in range(N)]
    got = ours(None, {"name": "ragas:tool_call_accuracy", "params": {"strict_order": strict_order}}, samples_of(rows))
    metric = ToolCallAccuracy(strict_order=strict_order)
    bad = []
    for r, (value, _) in zip(rows, got, strict=True):
        msgs, ref = ragas_inputs(r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ragas_value(metric, user_input=msgs, reference_tool_calls=ref)
        if not close(value, want):
            bad.append((r, value, want))
    assert not bad, (len(bad), bad[:2])
    values = {v for v, _ in got}
    assert {0.0, 1.0} <= values and len(values) > 3


def test_tool_call_f1():
    from ragas.metrics.collections import ToolCallF1

    rng = random.Random(12)
    rows = [row(rng, i) for i in range(N)]
    got = ours(None, "ragas:tool_call_f1", samples_of(rows))
    bad = []
    for r, (value, _) in zip(rows, got, strict=True):
        msgs, ref = ragas_inputs(r)
        want = ragas_value(ToolCallF1(), user_input=msgs, reference_tool_calls=ref)
        if not close(value, want):
            bad.append((r, value, want))
    assert not bad, (len(bad), bad[:2])
    assert len({v for v, _ in got}) > 3


def test_a_conversation_without_reference_tool_calls_has_no_value():
    from ragmeter.conversations.model import to_samples
    from ragmeter.conversations.readers import parse_conversation

    s = to_samples(parse_conversation({"user_input": [{"type": "human", "content": "hi"},
                                                      {"type": "ai", "content": "hello"}]}))[0]
    for name in ("ragas:tool_call_accuracy", "ragas:tool_call_f1"):
        (value, score), = ours(None, name, [s])
        assert value is None and "reference_tool_calls" in score.reason
