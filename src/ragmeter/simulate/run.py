"""Drive a system under test with simulated users and store the conversations as a dataset.

For each scenario, up to ``max_turns`` times: the simulated user (the judge client, with the
``simulated_user`` prompt and the persona, goal, expected outcome and conversation so far fenced
as data) writes the next user message, or says the goal is reached (the conversation ends); the
message goes to the target with the conversation so far; the conversation ends early when the
reply contains the scenario's ``stop`` phrase. The conversations are stored as the dataset
``name`` (the samples of :func:`ragmeter.conversations.model.to_samples`), which ``ragmeter eval
dataset:NAME`` scores.
"""

from __future__ import annotations

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


def simulate_one(sc: Scenario, send: Target, judge: Any, *, turns: int, chatbot_role: str | None,
                 conversation_id: str) -> Outcome:
    """One conversation. A judge or target failure ends it: what was said so far is kept when
    there is at least one reply, else the outcome has no conversation and the error."""
    from ragmeter.llm.request import JudgeRequest
    from ragmeter.metrics.judge._common import fence_blocks

    tpl = _template()
    role = sc.chatbot_role or chatbot_role or DEFAULT_ROLE
    limit = sc.max_turns or turns
    said: list[Turn] = []
    ended, error = "max_turns", None
    for _ in range(limit):
        req = JudgeRequest(metric="simulated_user", sample_id=conversation_id, system=tpl.system(),
                           user=fence_blocks([("PERSONA", sc.persona), ("GOAL", sc.goal),
                                              ("EXPECTED OUTCOME", sc.expected_outcome),
                                              ("CONVERSATION SO FAR", _numbered(said))]),
                           schema=SimulatedUserTurn, template_version=tpl.version, expected_output_tokens=80)
        res = judge.submit([req])[0]
        if not res.ok:
            ended, error = "error", f"simulated user: {res.missing().reason}"
            break
        reply: SimulatedUserTurn = res.value
        if reply.goal_reached and said:
            ended = "goal_reached"
            break
        if not reply.message.strip():
            ended, error = "error", "simulated user: an empty message"
            break
        said.append(Turn(role="user", content=reply.message))
        messages = [{"role": "system", "content": role}] + [{"role": t.role, "content": t.content} for t in said]
        try:
            answer = send(messages)
        except TargetError as exc:
            said.pop()
            ended, error = "error", f"target: {exc}"
            break
        said.append(Turn(role="assistant", content=answer))
        if sc.stop and sc.stop.lower() in answer.lower():
            ended = "stop"
            break
    if not any(t.role == "assistant" for t in said):
        return Outcome(None, ended, error or "no reply")
    meta = {"scenario_id": sc.id, "ended": ended, "simulated": True}
    if error:
        meta["simulation_error"] = error
    conv = Conversation(id=conversation_id, turns=said, chatbot_role=role, scenario=sc.goal,
                        user_description=sc.persona, expected_outcome=sc.expected_outcome, metadata=meta)
    return Outcome(conv, ended, error)


def simulate(scenarios: list[Scenario], send: Target, judge: Any, *, turns: int,
             chatbot_role: str | None = None, prefix: str = "sim") -> list[Outcome]:
    """Every scenario's outcome, in order; conversation ids ``PREFIX-SCENARIO_ID``."""
    return [simulate_one(sc, send, judge, turns=turns, chatbot_role=chatbot_role,
                         conversation_id=f"{prefix}-{sc.id}") for sc in scenarios]


def store_conversations(store: Any, name: str, conversations: list[Conversation], info: dict[str, Any]) -> Any:
    """Store conversations as the next version of dataset ``name``."""
    from ragmeter.conversations.model import to_samples
    from ragmeter.golden.datasets import save_dataset

    samples = [s.model_dump(mode="json", exclude_none=True) for c in conversations for s in to_samples(c)]
    return save_dataset(store, name, samples, info=info)
