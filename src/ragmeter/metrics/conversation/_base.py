"""What the judged conversation metrics share: rendering a conversation for the judge, and the
request/score loop of a metric that sends one or more judge requests per conversation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel

from ragmeter.conversations.model import Conversation, Turn, from_sample
from ragmeter.core.reasons import SEP, detailed
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import PromptTemplate, fence_blocks, judge_check
from ragmeter.metrics.registry import MetricSpec, register_metric

FAMILY = "conversation"


@lru_cache(maxsize=16)
def template(name: str) -> PromptTemplate:
    path = resources.files("ragmeter.metrics.conversation") / "prompts" / f"{name}.txt"
    return PromptTemplate(f"conversation/{name}", path.read_text(encoding="utf-8"))


def numbered(turns: Sequence[tuple[int, Turn]]) -> str:
    """``Turn N (speaker): text`` lines, N the 1-based position in the conversation."""
    return "\n".join(f"Turn {i + 1} ({t.role}): {t.content}" for i, t in turns)


def dialogue(conv: Conversation) -> list[tuple[int, Turn]]:
    """The user and assistant turns with their positions."""
    return [(i, t) for i, t in enumerate(conv.turns) if t.role in ("user", "assistant")]


@dataclass
class Item:
    """One judge request of a conversation: what it is about (``label``, e.g. ``turn 4``), the
    fenced blocks, and an optional check of the parsed reply."""

    label: str
    blocks: list[tuple[str, str]]
    validate: Callable[[Any], None] | None = None
    data: Any = None


ItemsFn = Callable[[Conversation, dict[str, Any]], "list[Item] | Score"]
CombineFn = Callable[[Conversation, list[Item], list[Any], dict[str, Any]], Score]


@dataclass
class ConversationJudge:
    """A conversation metric judged through the judge client: ``items`` gives the conversation's
    requests (or a no-value :class:`Score` when it cannot be judged), ``combine`` the score from
    their parsed verdicts. When any request of a conversation fails (unparsable reply after the
    retries, refusal, budget), the conversation has no value with the judge's reason, naming the
    failing request when there were several (``judge failure: invalid reply — on turn 4: ...``)."""

    name: str
    template: str | PromptTemplate
    schema: type[BaseModel]
    items: ItemsFn
    combine: CombineFn
    output_tokens: int = 150
    subs: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda p: {})

    def _requests(self, samples: Sequence[Sample], params: dict[str, Any]) -> list[tuple[list[Item], list[Any]] | Score]:
        from ragmeter.llm.request import JudgeRequest

        # a template of this family by name, or another family's (a judge prompt) as a PromptTemplate
        tpl = self.template if isinstance(self.template, PromptTemplate) else template(self.template)
        system = tpl.system(**self.subs(params))
        out: list[tuple[list[Item], list[Any]] | Score] = []
        for s in samples:
            conv = from_sample(s)
            items = self.items(conv, params)
            if isinstance(items, Score):
                out.append(items)
                continue
            reqs = [JudgeRequest(metric=self.name, sample_id=s.id, system=system, user=fence_blocks(it.blocks),
                                 schema=self.schema, template_version=tpl.version,
                                 expected_output_tokens=self.output_tokens, validate=it.validate)
                    for it in items]
            out.append((items, reqs))
        return out

    def prepare(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> None:
        reqs = [r for x in self._requests(samples, params) if not isinstance(x, Score) for r in x[1]]
        if reqs:
            ctx.service("judge").prefetch(reqs)

    def __call__(self, samples: Sequence[Sample], ctx: Any, **params: Any) -> list[Score]:
        planned = self._requests(samples, params)
        flat = [r for x in planned if not isinstance(x, Score) for r in x[1]]
        results = iter(ctx.service("judge").submit(flat) if flat else [])
        out: list[Score] = []
        for s, x in zip(samples, planned, strict=True):
            if isinstance(x, Score):
                out.append(x)
                continue
            items, reqs = x
            got = [next(results) for _ in reqs]
            bad = next(((it, res) for it, res in zip(items, got, strict=True) if not res.ok), None)
            if bad is not None:
                it, res = bad
                miss = res.missing({"failed_request": it.label, "requests": len(reqs)})
                # the judge's reason ("judge failure: invalid reply — what was wrong"), naming the
                # request that failed when the conversation needed several
                head, _, precise = (miss.reason or "").partition(SEP)
                if len(reqs) > 1:
                    precise = f"on {it.label}: {precise}" if precise else f"on {it.label}"
                out.append(Score.missing(detailed(head, precise), miss.details))
                continue
            out.append(self.combine(from_sample(s), items, [r.value for r in got], params))
        return out


def register(jm: ConversationJudge, *, description: str, parity: str, defaults: dict[str, Any] | None = None,
             param: str | None = None) -> MetricSpec:
    return register_metric(MetricSpec(
        name=jm.name, family=FAMILY, fn=jm, requires=("conversation",), needs_llm=True,
        defaults=dict(defaults or {}), param=param, prepare=jm.prepare, check=judge_check, batch_size=64,
        description=description, parity=parity))
