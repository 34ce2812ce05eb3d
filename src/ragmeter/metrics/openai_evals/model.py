"""``score_model`` and ``label_model`` graders through ragmeter's judge client (any provider).

The grader's own messages are sent as they are (templates filled in): ``system`` and ``developer``
messages form the system prompt, ``user`` and ``assistant`` messages the conversation, and the
grader's ``sampling_params`` go with the request (``temperature``, ``top_p``, ``seed``,
``reasoning_effort``; ``max_completions_tokens`` caps the reply). As OpenAI's hosted grader does,
the model is asked for a structured reply ``{"steps": [{"description", "conclusion"}], "result"}``
(OpenAI's graders guide); one sentence saying what ``result`` must be (a number in ``range``, or one
of ``labels``) is appended to the system prompt. ``score_model``: the result clipped to ``range``;
``label_model``: 1 when the label is one of ``passing_labels``, else 0 (the label is kept in the
score's details). A reply that does not parse is asked for again and then recorded as no value
(OpenAI scored it 0).

Which model answers: with ``--judge provider:model`` that judge answers every model grader;
without it, each grader's own ``model`` at OpenAI (``openai:MODEL``, or the OpenAI-compatible server
of ``--judge-base-url``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, create_model

from ragmeter.metrics.judge._common import Verdict
from ragmeter.metrics.openai_evals.templates import TemplateError, render

#: bump when the way grader requests are built changes (part of every request's cache key)
FORMAT_VERSION = "openai-grader-1"
#: run option set when the judge was taken from the graders' own models (no --judge given)
FROM_GRADERS = "openai_evals_judge_from_graders"


class ReasoningStep(Verdict):
    description: str
    conclusion: str


class ScoreModelOutput(Verdict):
    """The reply of a score_model grader."""

    steps: list[ReasoningStep] = Field(default_factory=list)
    result: float


@lru_cache(maxsize=256)
def label_schema(labels: tuple[str, ...]) -> type[Verdict]:
    """The reply of a label_model grader: ``result`` is one of ``labels``."""
    return create_model("LabelModelOutput", __base__=Verdict,
                        steps=(list[ReasoningStep], Field(default_factory=list)),
                        result=(Literal[labels], ...))  # type: ignore[valid-type]


class UnsupportedInput(ValueError):
    """A message part the judge client cannot send (an image or audio input)."""


def _part_text(part: Any, ns: Mapping[str, Any]) -> str:
    if isinstance(part, str):
        return render(part, ns)
    if isinstance(part, list):
        return "\n".join(t for t in (_part_text(p, ns) for p in part) if t)
    kind = part.get("type")
    if kind in {"input_text", "output_text"}:
        return render(part.get("text") or "", ns)
    raise UnsupportedInput(f"{kind} content is not supported: ragmeter's judge client sends text")


def instruction(grader: Mapping[str, Any]) -> str:
    """The sentence appended to the system prompt that says what the structured reply holds."""
    if grader["type"] == "score_model":
        lo, hi = grader["range"]
        return (f"Reply with a JSON object: `result` is your score, a number from {lo:g} to {hi:g}; "
                "`steps` lists your reasoning steps, each with a `description` and a `conclusion`.")
    return ("Reply with a JSON object: `result` is exactly one of these labels: "
            f"{json.dumps(grader['labels'], ensure_ascii=False)}; `steps` lists your reasoning steps, "
            "each with a `description` and a `conclusion`.")


def build_request(grader: Mapping[str, Any], sample_id: str, ns: Mapping[str, Any]) -> Any:
    """The judge request of one item.

    Raises:
        TemplateError: a variable of the messages does not resolve for this item.
        UnsupportedInput: an image or audio part.
    """
    from ragmeter.llm import JudgeRequest

    system: list[str] = []
    convo: list[dict[str, str]] = []
    for m in grader["input"]:
        text = _part_text(m["content"], ns)
        if m["role"] in {"system", "developer"}:
            system.append(text)
        else:
            convo.append({"role": m["role"], "content": text})
    system.append(instruction(grader))
    if not convo or convo[0]["role"] != "user":
        convo.insert(0, {"role": "user", "content": "Grade according to the instructions."})
    sp = dict(grader.get("sampling_params") or {})
    schema = ScoreModelOutput if grader["type"] == "score_model" else label_schema(tuple(grader["labels"]))
    version = hashlib.sha256(json.dumps([FORMAT_VERSION, grader["type"], grader.get("labels"), grader.get("range")],
                                        sort_keys=True).encode()).hexdigest()[:16]
    return JudgeRequest(
        metric=grader["name"], sample_id=sample_id, system="\n\n".join(t for t in system if t),
        user="\n\n".join(m["content"] for m in convo), schema=schema, template_version=version,
        max_tokens=sp.get("max_completions_tokens"), messages=tuple(convo),
        sampling=tuple(sorted((k, v) for k, v in sp.items()
                              if k in {"temperature", "top_p", "seed", "reasoning_effort"})))


class GraderJudges:
    """The judges of the graders' own models, one per model (used when no ``--judge`` is given)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.judges: dict[str, Any] = {}

    def get(self, model: str) -> Any:
        if model not in self.judges:
            from ragmeter.llm import JudgeService
            from ragmeter.llm.config import config_from_options

            cfg = config_from_options({**self.ctx.options, "judge": f"openai:{model}"})
            self.judges[model] = JudgeService(cfg, store=self.ctx.store, run_id=self.ctx.run_id,
                                              progress=self.ctx.progress)
        return self.judges[model]

    def flush(self) -> None:
        for j in self.judges.values():
            j.flush()

    def stats(self) -> dict[str, Any]:
        return {m: j.stats() for m, j in self.judges.items()}

    def close(self) -> None:
        for j in self.judges.values():
            j.close()


def judge_for(ctx: Any, model: str) -> Any:
    """The judge that answers a grader naming ``model`` (see the module docstring)."""
    judge = ctx.service("judge")
    if not ctx.options.get(FROM_GRADERS) or getattr(getattr(judge, "cfg", None), "model", model) == model:
        return judge
    return ctx.service("openai_evals_judges").get(model)


def requests_for(grader: Mapping[str, Any], ids: Sequence[str], namespaces: Sequence[Mapping[str, Any]]
                 ) -> tuple[list[Any | None], list[str | None]]:
    """Per item: the request, or ``None`` and why it cannot be made."""
    reqs: list[Any | None] = []
    why: list[str | None] = []
    for sid, ns in zip(ids, namespaces, strict=True):
        try:
            reqs.append(build_request(grader, sid, ns))
            why.append(None)
        except (TemplateError, UnsupportedInput) as exc:
            reqs.append(None)
            why.append(f"{grader['name']}: {exc}")
    return reqs, why


def outcome(grader: Mapping[str, Any], result: Any) -> tuple[float, dict[str, Any]]:
    """Value and details of a parsed verdict."""
    v = result.value
    steps = [s.model_dump() for s in v.steps][:20]
    if grader["type"] == "score_model":
        lo, hi = grader["range"]
        raw = float(v.result)
        return min(max(raw, lo), hi), {"result": raw, "steps": steps}
    return (1.0 if v.result in grader["passing_labels"] else 0.0), {"label": v.result, "steps": steps}
