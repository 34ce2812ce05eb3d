"""The scripted judge's rule-based replies (tests/judge_server.py) for the reply schemas of DeepEval's
conversational metrics that ragmeter's own conversation metrics do not share: knowledge retention's
report (a user turn states a fact when it holds a digit or a capitalised word after its first; an
assistant turn that asks something back forgot it), goal accuracy's scores (the goal is met, 1, when
the assistant's steps share a word of four letters or more with it, else 0.25; the plan scores 0.75
with a tool call, else 0.5), topic adherence's pairs (each user turn of the exchange with the next
assistant turn; relevant when it shares a word with a topic, answered unless the reply says
"cannot"), and of DeepEval's judged agent metrics: task completion 1 when the trace or answer has a
number, else 0.5; step efficiency 1 with at most two tool spans, 0.5 with more; a plan of the LLM
spans' outputs, scored 0.75; an argument correct when it is not empty; tool use: selection 1 when every
tool called is available, else 0.25, arguments 0.75; MCP: the primitives score 1 when some tool was
called, else 0.5, the arguments 0.75, a task 1 when its steps share a word with it, else 0.25."""

from __future__ import annotations

import re
from typing import Any

SCHEMAS = ("RetentionReport", "GoalPlanScores", "QAPairVerdicts", "TaskCompletion", "StepEfficiency", "PlanScore",
           "CallVerdicts", "ToolUseScores", "PrimitiveScores", "TaskScore")
_TURN_LINE = re.compile(r"^Turn (\d+) \((user|assistant)\): (.*)$", re.M)


def reply(schema: str, b: dict[str, str]) -> dict[str, Any]:
    conv = [(int(n), role, body) for n, role, body in _TURN_LINE.findall(b.get("CONVERSATION", ""))]
    if schema == "RetentionReport":
        users = [(n, body) for n, role, body in conv if role == "user"]
        facts = [{"turn": n, "facts": {"stated": body} if re.search(r"\d|\s[A-Z]", body) else {}} for n, body in users]
        checks = [{"turn": n, "reason": "asks back" if "?" in body else "consistent",
                   "verdict": "yes" if "?" in body else "no"}
                  for n, role, body in conv if role == "assistant" and any(u < n for u, _ in users)]
        return {"user_turns": facts, "assistant_turns": checks}
    if schema == "GoalPlanScores":
        goal = {w.lower() for w in re.findall(r"\w{4,}", b.get("USER GOAL", ""))}
        steps = b.get("ASSISTANT STEPS", "")
        met = bool(goal & {w.lower() for w in re.findall(r"\w{4,}", steps)})
        return {"goal_reason": "rule", "goal_score": 1.0 if met else 0.25, "plan_reason": "rule",
                "plan_score": 0.75 if "tool called" in steps else 0.5}
    if schema == "QAPairVerdicts":
        ex = [(int(n), role, body) for n, role, body in _TURN_LINE.findall(b.get("EXCHANGE", ""))]
        topics = {w.lower() for w in re.findall(r"\w{4,}", b.get("RELEVANT TOPICS", ""))}
        pairs = []
        for k, (_, role, body) in enumerate(ex):
            reply_ = next((x[2] for x in ex[k + 1:] if x[1] == "assistant"), None)
            if role != "user" or reply_ is None:
                continue
            relevant = bool(topics & {w.lower() for w in re.findall(r"\w{4,}", body)})
            answered = "cannot" not in reply_.lower()
            verdict = {(True, True): "TP", (True, False): "FN", (False, True): "FP", (False, False): "TN"}[(relevant, answered)]
            pairs.append({"question": body, "response": reply_, "reason": "rule", "verdict": verdict})
        return {"qa_pairs": pairs}
    if schema == "TaskCompletion":
        text = b.get("TRACE", "") + b.get("ACTUAL OUTPUT", "")
        return {"task": "rule", "outcome": "rule", "reason": "rule", "verdict": 1.0 if re.search(r"\d", text) else 0.5}
    if schema == "StepEfficiency":
        tools = b.get("TRACE", "").count('"type": "tool"')
        return {"task": "rule", "reason": f"{tools} tool spans", "score": 1.0 if tools <= 2 else 0.5}
    if schema == "PlanScore":
        plan = re.findall(r'"type": "llm"', b.get("TRACE", ""))
        return {"task": "rule", "plan": [f"step {i}" for i in range(len(plan))], "reason": "rule", "score": 0.75}
    if schema == "CallVerdicts":
        calls = sorted(int(k.split()[-1]) for k in b if k.startswith("TOOL CALL "))
        return {"verdicts": [{"call": i, "reason": "rule",
                              "verdict": "no" if '"input_parameters": null' in b[f"TOOL CALL {i}"] else "yes"}
                             for i in calls]}
    if schema == "ToolUseScores":
        import json

        available = {t["name"] for t in json.loads(b.get("AVAILABLE TOOLS", "[]"))}
        called = b.get("TOOLS CALLED", "(none)")
        names = {c["name"] for c in json.loads(called)} if called != "(none)" else set()
        return {"selection_reason": "rule", "selection_score": 1.0 if names <= available else 0.25,
                "argument_reason": "rule", "argument_score": 0.75 if names else None}
    if schema == "PrimitiveScores":
        used = b.get("PRIMITIVES USED", b.get("AGENT STEPS", ""))
        return {"primitives_reason": "rule", "primitives_score": 1.0 if '"name"' in used else 0.5,
                "arguments_reason": "rule", "arguments_score": 0.75}
    if schema == "TaskScore":
        task = {w.lower() for w in re.findall(r"\w{4,}", b.get("USER TASK", ""))}
        steps = {w.lower() for w in re.findall(r"\w{4,}", b.get("AGENT STEPS", ""))}
        return {"reason": "rule", "score": 1.0 if task & steps else 0.25}
    raise ValueError(f"scripted judge: unknown schema {schema!r}")
