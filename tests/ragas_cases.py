"""Samples for tests/test_common_metrics.py's cases of ragmeter's ragas metrics that read ragas
fields the family builders do not have: per-sample ``rubrics`` (``ragas:instance_specific_rubrics``)
and conversations with ``reference_tool_calls`` and a reference outcome (``ragas:tool_call_*``,
``ragas:agent_goal_accuracy_with_reference``), read from ragas ``MultiTurnSample`` rows."""

from __future__ import annotations

import functools

from ragmeter.core.schema import Sample

RUBRICS = {f"score{i}_description": f"level {i}: {'the answer ' + ('misses the question' if i < 3 else 'answers it')}"
           for i in range(1, 6)}


@functools.lru_cache(maxsize=1)
def rubric_samples() -> tuple[Sample, ...]:
    """Eight question-answer samples, six with their own rubric, one with none, one with an empty one."""
    rows = [("What is the capital of France?", "Paris is the capital of France.", "Paris."),
            ("Who wrote Hamlet?", "Shakespeare wrote it.", "William Shakespeare."),
            ("How far is the Moon?", "About 384,000 km.", "384,400 km on average."),
            ("What is H2O?", "Water.", "Water, two hydrogen atoms and one oxygen."),
            ("Quelle est la capitale du Japon ?", "Tōkyō (東京).", "Tokyo."),
            ("Largest planet?", "Saturn.", "Jupiter."),
            ("Boiling point of water?", "100 °C at sea level.", "100 degrees Celsius."),
            ("Speed of light?", "", "299,792 km/s.")]
    out = []
    for i, (q, a, r) in enumerate(rows):
        meta = {"rubrics": RUBRICS} if i < 6 else {"rubrics": {}} if i == 6 else {}
        out.append(Sample(id=f"rubric-{i}", question=q, answer=a, references=[r], metadata=meta))
    return tuple(out)


_ROWS = [
    {"id": "rc-1", "reference": "The weather in Paris is reported.", "reference_topics": ["weather"],
     "user_input": [{"type": "human", "content": "Weather in Paris?"},
                    {"type": "ai", "content": "", "tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
                    {"type": "tool", "content": "sunny"}, {"type": "ai", "content": "Sunny in Paris."}],
     "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}]},
    {"id": "rc-2", "reference": "A flight to Rome is booked.", "reference_topics": ["travel"],
     "user_input": [{"type": "human", "content": "Book a flight to Rome"},
                    {"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {"to": "Rome"}},
                                                                  {"name": "book", "args": {"id": 2}}]},
                    {"type": "ai", "content": "Booked flight 2."}],
     "reference_tool_calls": [{"name": "search", "args": {"to": "Rome"}}, {"name": "book", "args": {"id": 1}}]},
    {"id": "rc-3", "reference": "Nothing to do.", "reference_topics": ["weather"],
     "user_input": [{"type": "human", "content": "Hi"}, {"type": "ai", "content": "Hello!"}],
     "reference_tool_calls": []},
    {"id": "rc-4", "reference": "Tōkyō's weather and a hotel.", "reference_topics": ["weather", "hotels"],
     "user_input": [{"type": "human", "content": "東京の天気は？ And book a hotel."},
                    {"type": "ai", "content": "", "tool_calls": [{"name": "hotel", "args": {"city": "東京"}},
                                                                  {"name": "weather", "args": {"city": "東京"}}]},
                    {"type": "ai", "content": "晴れ. Hotel booked."}],
     "reference_tool_calls": [{"name": "weather", "args": {"city": "東京"}}, {"name": "hotel", "args": {"city": "東京"}}]},
    {"id": "rc-5", "reference_topics": ["weather"],
     "user_input": [{"type": "human", "content": "Weather?"}, {"type": "ai", "content": "Which city?"},
                    {"type": "human", "content": "Oslo"},
                    {"type": "ai", "content": "", "tool_calls": [{"name": "weather", "args": {"city": "Oslo", "unit": "C"}}]},
                    {"type": "ai", "content": "Rain in Oslo."}],
     "reference_tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]},
]


@functools.lru_cache(maxsize=1)
def ragas_conversations() -> tuple[Sample, ...]:
    """Five ragas MultiTurnSample rows read as conversations (the conversation samples only)."""
    from ragmeter.conversations.model import to_samples
    from ragmeter.conversations.readers import parse_conversation

    return tuple(to_samples(parse_conversation(row))[0] for row in _ROWS)
