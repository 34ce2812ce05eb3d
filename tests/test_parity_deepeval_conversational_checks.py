"""DeepEval 4.3.1's deterministic conversational metric against DeepEval itself on 200 generated
conversations: ``deepeval:agent_responsiveness`` (AgentResponsivenessMetric: owed responses,
reprompts, missing audio, the call's end reason, strict_mode)."""

from __future__ import annotations

import os
import random
import warnings

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from references import require_reference  # noqa: E402

deepeval = require_reference("deepeval")
pytestmark = pytest.mark.contract

from ragmeter.conversations import parse_conversation  # noqa: E402
from ragmeter.conversations.model import to_samples  # noqa: E402
from ragmeter.core.context import ScoringContext  # noqa: E402
from ragmeter.metrics.registry import resolve  # noqa: E402

ENDINGS = ["Where is the ferry?", "Thanks!", "ok bye.", "That's all", "hmm", "Thank you", "goodbye", "  THANKS.  ", "and then?"]


def _row(rng: random.Random, i: int) -> dict:
    turns = []
    for _ in range(rng.randint(1, 7)):
        role = rng.choice(["user", "assistant"])
        t = {"role": role, "content": rng.choice(ENDINGS) if role == "user" else "Here you are."}
        if role == "assistant" and rng.random() < 0.6:
            t["metadata"] = {"audio": "clip.wav"}
        turns.append(t)
    row = {"id": f"c{i}", "turns": turns}
    end = rng.choice([None, None, "AGENT_HANGUP", "customer_ended", "idle_timeout", "ERROR"])
    if end is not None:
        row["metadata"] = {"end_reason": end}
    return row


@pytest.mark.parametrize("params", [{}, {"strict_mode": True}, {"threshold": 0.75}])
def test_agent_responsiveness_equals_deepeval(params):
    from deepeval.metrics import AgentResponsivenessMetric
    from deepeval.test_case import Audio, ConversationalTestCase, Turn

    rng = random.Random(5 + len(params))
    rows = [_row(rng, i) for i in range(200)]
    samples = [to_samples(parse_conversation(r))[0] for r in rows]
    req = resolve({"name": "deepeval:agent_responsiveness", "params": params})
    got = req.spec.fn(samples, ScoringContext({}), **req.params)
    seen = set()
    for row, sc in zip(rows, got, strict=True):
        tc = ConversationalTestCase(
            turns=[Turn(role=t["role"], content=t["content"],
                        audio=Audio.from_bytes(b"RIFF", "audio/wav") if t.get("metadata") else None)
                   for t in row["turns"]], metadata=row.get("metadata"))
        metric = AgentResponsivenessMetric(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = metric.measure(tc, _show_indicator=False)
        assert sc.value == want, (row, sc, want)
        assert sc.details["success"] is metric.success
        seen.add(want)
    assert len(seen) >= (2 if params.get("strict_mode") else 3), seen
