"""``trajectory_judge``: an LLM grades the whole agent trajectory (OpenEvals-style trajectory
accuracy prompt), with or without a reference trajectory."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragmeter.core.schema import AgentTrace, Sample, Score
from ragmeter.metrics.agent import _reference
from ragmeter.metrics.agent.config import agent_config
from ragmeter.metrics.registry import MetricSpec, register_metric


class TrajectoryVerdict(BaseModel):
    """The judge's reply for ``trajectory_judge``."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str
    score: float = Field(ge=0.0, le=1.0)


_RESULT_CHARS = 1500  # a tool result longer than this is cut in the prompt


def _cut(text: str, n: int = _RESULT_CHARS) -> str:
    return text if len(text) <= n else text[:n] + f" ... [{len(text) - n} more characters]"


def trajectory_text(trace: AgentTrace) -> str:
    """The agent's trajectory as the judge reads it: steps, then numbered tool calls with their
    arguments, errors and (cut) results."""
    lines = []
    if trace.trajectory:
        lines.append("Steps: " + " -> ".join(trace.trajectory))
    for i, c in enumerate(trace.tool_calls, 1):
        raw = (c.model_extra or {}).get("arguments_raw")
        args = raw if raw is not None else json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)
        lines.append(f"{i}. {c.name}({args})" + (f"  [turn {c.turn}]" if c.turn is not None else ""))
        if c.error is not None:
            lines.append(f"   error: {_cut(c.error)}")
        if c.result is not None:
            res = c.result if isinstance(c.result, str) else json.dumps(c.result, ensure_ascii=False, default=str)
            lines.append(f"   result: {_cut(res)}")
    if not trace.tool_calls:
        lines.append("(no tool calls)")
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def _judge_template() -> Any:
    from ragmeter.metrics.judge._common import PromptTemplate

    text = (resources.files("ragmeter.metrics.judge") / "prompts" / "trajectory_judge.txt").read_text(encoding="utf-8")
    return PromptTemplate("trajectory_judge", text)


def _judge_items(samples: Sequence[Sample], ctx: Any) -> list[Any]:
    """One judge request per sample, or the sample's no-value :class:`Score`."""
    from ragmeter.llm.request import JudgeRequest
    from ragmeter.metrics.judge._common import fence_blocks

    cfg = agent_config(ctx.options)
    tpl = _judge_template()
    system = tpl.system()
    out: list[Any] = []
    for s in samples:
        t = s.trace
        assert t is not None
        task = s.question if s.question is not None else t.input_text
        if not task:
            out.append(Score.missing("no task text: the sample has no question and the trace no user message"))
            continue
        final = t.final_text if t.final_text is not None else (
            json.dumps(t.final_output, ensure_ascii=False, default=str) if t.final_output is not None else s.answer)
        blocks = [("TASK", task), ("AGENT TRAJECTORY", trajectory_text(t)), ("FINAL ANSWER", final or "(none)")]
        ref, _, _ = _reference(s, cfg)
        if ref:
            blocks.append(("REFERENCE TRAJECTORY", "\n".join(
                f"{i}. {x.name}" + ("" if x.arguments is None else f"({json.dumps(x.arguments, sort_keys=True)})")
                for i, x in enumerate(ref, 1))))
        out.append(JudgeRequest(metric="trajectory_judge", sample_id=s.id, system=system,
                                user=fence_blocks(blocks), schema=TrajectoryVerdict,
                                template_version=tpl.version,
                                expected_output_tokens=120 + 10 * len(t.tool_calls)))
    return out


def _judge_prepare(samples: Sequence[Sample], ctx: Any, **_: Any) -> None:
    reqs = [r for r in _judge_items(samples, ctx) if not isinstance(r, Score)]
    if reqs:
        ctx.service("judge").prefetch(reqs)


def _judge_check(ctx: Any, **_: Any) -> str | None:
    agent_config(ctx.options)
    from ragmeter.metrics.judge._common import judge_check

    return judge_check(ctx)


def trajectory_judge(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """LLM trajectory judge: an LLM grades the agent's trajectory from 0 to 1 — do the steps make
    sense, progress towards the task, use fitting tools with sensible arguments, stay reasonably
    efficient, and support the final answer; when an expected trajectory is known (as for
    ``trajectory_match``) the judge also weighs equivalence to it (agentevals' trajectory
    accuracy rubric, with or without reference).

    The judge reads the task (question, else the first user message), the tool calls with
    arguments and results (results cut at 1,500 characters), and the final answer, all fenced as
    data. Its reasoning is stored in the score details. Needs a judge (``--judge``); a judge
    failure is no value with the reason, never 0.
    """
    items = _judge_items(samples, ctx)
    pending = [(i, r) for i, r in enumerate(items) if not isinstance(r, Score)]
    out = [r if isinstance(r, Score) else Score.missing("not judged") for r in items]
    if pending:
        results = ctx.service("judge").submit([r for _, r in pending])
        for (i, req), res in zip(pending, results, strict=True):
            if res.ok:
                v = res.value
                out[i] = Score(float(v.score), details={"reasoning": v.reasoning,
                                                        "with_reference": "REFERENCE TRAJECTORY:" in req.user})
            else:
                out[i] = res.missing()
    return out


register_metric(MetricSpec(name="trajectory_judge", family="agent", fn=trajectory_judge, requires=("trace",),
                           needs_llm=True, prepare=_judge_prepare, check=_judge_check, batch_size=64,
                           description=trajectory_judge.__doc__ or "",
                           parity="agentevals' trajectory accuracy rubric; no ragas or DeepEval metric "
                                  "computes this number."))
