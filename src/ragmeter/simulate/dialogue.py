"""Drive a system under test with simulated users and store the conversations as a dataset.

The scenarios' conversations advance together, a turn at a time (:func:`simulate`). For each
scenario, up to ``max_turns`` times: the simulated user (the judge client, with the
``simulated_user`` prompt and the persona, goal, expected outcome and conversation so far fenced
as data) writes the next user message, or says the goal is reached (the conversation ends); the
message goes to the target with the conversation so far; the conversation ends early when the
reply contains the scenario's ``stop`` phrase. The conversations are stored as the dataset
``name`` (the samples of :func:`ragmeter.conversations.model.to_samples`), which ``ragmeter eval
dataset:NAME`` scores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict

from ragmeter.conversations.model import Conversation, Turn
from ragmeter.simulate.scenarios import Scenario
from ragmeter.simulate.targets import Target, TargetError

DEFAULT_ROLE = "You are a helpful assistant."


class SimulatedUserTurn(BaseModel):
    """The simulated user's reply."""

    model_config = ConfigDict(extra="ignore")

    message: str
    goal_reached: bool


@lru_cache(maxsize=1)
def _template() -> Any:
    from ragmeter.metrics.judge._common import PromptTemplate

    text = (resources.files("ragmeter.simulate") / "prompts" / "simulated_user.txt").read_text(encoding="utf-8")
    return PromptTemplate("simulate/simulated_user", text)


@dataclass
class Outcome:
    conversation: Conversation | None
    ended: str
    error: str | None = None
    calls: dict[str, int] = field(default_factory=dict)


def _numbered(turns: list[Turn]) -> str:
    return "\n".join(f"Turn {i} ({t.role}): {t.content}" for i, t in enumerate(turns, 1)) or "(no turns yet)"


class _Talk:
    """One scenario's conversation as it goes: what was said, and how it ended."""

    def __init__(self, sc: Scenario, conversation_id: str, chatbot_role: str | None, turns: int) -> None:
        self.sc, self.cid = sc, conversation_id
        self.role = sc.chatbot_role or chatbot_role or DEFAULT_ROLE
        self.left = sc.max_turns or turns
        self.said: list[Turn] = []
        self.ended: str | None = None
        self.error: str | None = None

    def request(self) -> Any:
        """The simulated user's next request (persona, goal, expected outcome, conversation so far)."""
        from ragmeter.llm.request import JudgeRequest
        from ragmeter.metrics.judge._common import fence_blocks

        tpl = _template()
        sc = self.sc
        return JudgeRequest(metric="simulated_user", sample_id=self.cid, system=tpl.system(),
                            user=fence_blocks([("PERSONA", sc.persona), ("GOAL", sc.goal),
                                               ("EXPECTED OUTCOME", sc.expected_outcome),
                                               ("CONVERSATION SO FAR", _numbered(self.said))]),
                            schema=SimulatedUserTurn, template_version=tpl.version, expected_output_tokens=80)

    def heard(self, res: Any) -> list[dict[str, str]] | None:
        """Take the simulated user's reply: the messages to send to the target, or ``None`` when
        the conversation ended (goal reached, a judge failure, an empty message)."""
        self.left -= 1
        if not res.ok:
            self.ended, self.error = "error", f"simulated user: {res.missing().reason}"
            return None
        reply: SimulatedUserTurn = res.value
        if reply.goal_reached and self.said:
            self.ended = "goal_reached"
            return None
        if not reply.message.strip():
            self.ended, self.error = "error", "simulated user: an empty message"
            return None
        self.said.append(Turn(role="user", content=reply.message))
        return [{"role": "system", "content": self.role}] + [{"role": t.role, "content": t.content} for t in self.said]

    def answered(self, answer: str | TargetError) -> None:
        """Take the target's reply (or its failure, which ends the conversation)."""
        if isinstance(answer, TargetError):
            self.said.pop()
            self.ended, self.error = "error", f"target: {answer}"
            return
        self.said.append(Turn(role="assistant", content=answer))
        if self.sc.stop and self.sc.stop.lower() in answer.lower():
            self.ended = "stop"
        elif self.left <= 0:
            self.ended = "max_turns"

    def outcome(self) -> Outcome:
        ended = self.ended or "max_turns"
        if not any(t.role == "assistant" for t in self.said):
            return Outcome(None, ended, self.error or "no reply")
        sc = self.sc
        meta = {"scenario_id": sc.id, "ended": ended, "simulated": True}
        if self.error:
            meta["simulation_error"] = self.error
        conv = Conversation(id=self.cid, turns=self.said, chatbot_role=self.role, scenario=sc.goal,
                            user_description=sc.persona, expected_outcome=sc.expected_outcome, metadata=meta)
        return Outcome(conv, ended, self.error)


def simulate(scenarios: list[Scenario], send: Target, judge: Any, *, turns: int,
             chatbot_role: str | None = None, prefix: str = "sim", concurrency: int = 8,
             progress: Callable[[int], None] | None = None) -> list[Outcome]:
    """Every scenario's outcome, in order; conversation ids ``PREFIX-SCENARIO_ID``.

    The conversations advance together, a turn at a time: the simulated users' next messages go
    to the judge as one batch (the judge client sends them concurrently, up to its own limit),
    then their messages go to the target on up to ``concurrency`` threads (1: one at a time, for a
    target that cannot take parallel calls). Each conversation sees exactly what it would alone,
    so the outcomes do not depend on ``concurrency``. A judge or target failure ends only its
    conversation: what was said so far is kept when there is at least one reply, else the outcome
    has no conversation and the error. ``progress(n)`` is told of every finished conversation.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    talks = [_Talk(sc, f"{prefix}-{sc.id}", chatbot_role, turns) for sc in scenarios]
    _hold(talks, send, judge, concurrency, progress)
    return [t.outcome() for t in talks]


def simulate_one(sc: Scenario, send: Target, judge: Any, *, turns: int, chatbot_role: str | None,
                 conversation_id: str) -> Outcome:
    """One conversation (:func:`simulate` of one scenario, its id given)."""
    talk = _Talk(sc, conversation_id, chatbot_role, turns)
    _hold([talk], send, judge, 1, None)
    return talk.outcome()


def _hold(talks: list[_Talk], send: Target, judge: Any, concurrency: int,
          progress: Callable[[int], None] | None) -> None:
    """Advance ``talks`` a turn at a time until each has ended (see :func:`simulate`)."""
    from concurrent.futures import ThreadPoolExecutor

    def reply(messages: list[dict[str, str]]) -> str | TargetError:
        try:
            return send(messages)
        except TargetError as exc:
            return exc

    for t in talks:
        if t.left <= 0:
            t.ended = "max_turns"
    active = [t for t in talks if t.ended is None]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ragmeter-target") as pool:
        while active:
            results = judge.submit([t.request() for t in active])
            sending = [(t, msgs) for t, res in zip(active, results, strict=True) if (msgs := t.heard(res)) is not None]
            answers = (list(pool.map(reply, [m for _, m in sending])) if concurrency > 1 and len(sending) > 1
                       else [reply(m) for _, m in sending])
            for (t, _), answer in zip(sending, answers, strict=True):
                t.answered(answer)
            still = [t for t in active if t.ended is None]
            if progress is not None and len(still) < len(active):
                progress(len(active) - len(still))
            active = still


def store_conversations(store: Any, name: str, conversations: list[Conversation], info: dict[str, Any]) -> Any:
    """Store conversations as the next version of dataset ``name``."""
    from ragmeter.conversations.model import to_samples
    from ragmeter.golden.datasets import save_dataset

    samples = [s.model_dump(mode="json", exclude_none=True) for c in conversations for s in to_samples(c)]
    return save_dataset(store, name, samples, info=info)
