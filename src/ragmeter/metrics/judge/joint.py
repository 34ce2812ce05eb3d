"""One judge request per sample for ragmeter's metrics that read the same retrieved contexts.

Faithfulness (and hallucination, which reads the same verdict) checks the answer's claims against
the contexts; context recall attributes the reference's statements to them; answer relevancy
judges the answer's statements against the question. Asked separately, faithfulness and context
recall each carry the sample's contexts, and faithfulness and answer relevancy its question and
answer. Asked jointly, one request carries the sample's texts once and every task: the system prompt holds each metric's own instructions, unchanged, as a numbered
task; the reply schema is an object with one key per task whose value is exactly that metric's
verdict object (:data:`JOINABLE`), so each metric scores its own verdicts with its own formula and
stores its own reasons. The service side (grouping, splitting, cache, accounting) is
:mod:`ragmeter.llm.joint`; ``judge_joint=false`` sends each metric its own request.

Only ragmeter's own metrics join: the ``ragas:*`` and ``deepeval:*`` metrics send the requests
their tools send.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from pydantic import BaseModel, create_model

from ragmeter.llm.request import JudgeRequest
from ragmeter.metrics.judge._common import DATA_NOTICE, FORMAT_VERSION, PromptTemplate, Verdict, fence_blocks
from ragmeter.metrics.judge.contexts import ReferenceAttribution
from ragmeter.metrics.judge.generation import ClaimVerdicts, StatementVerdicts

#: the joinable parts, in the order they appear in a joint prompt: part name -> its verdict object
JOINABLE: dict[str, type[BaseModel]] = {"faithfulness": ClaimVerdicts, "context_recall": ReferenceAttribution,
                                        "answer_relevancy": StatementVerdicts}

JOINT_HEAD = ("Do the {n} tasks below on the same data, each exactly as if it were the only one: no task's "
              "findings may change another's verdicts.")
JOINT_TASK = 'TASK {i} (its reply goes under the key "{name}"):\n{instructions}'
JOINT_REPLY = "Reply with ONE JSON object whose keys {keys} each hold the object its task asks for."
#: bump when the joint prompt's assembly changes (part of the joint template version)
JOINT_VERSION = "1"


def _schema(names: tuple[str, ...]) -> type[BaseModel]:
    title = "Joint" + "".join(JOINABLE[n].__name__ for n in names)
    model = create_model(title, __base__=Verdict, __module__=__name__,
                         **{n: (JOINABLE[n], ...) for n in names})  # type: ignore[call-overload]
    model.__qualname__ = title
    globals()[title] = model  # importable by name: a Ray worker unpickles it by reference
    return model


#: the joint reply schema of every combination of parts (built at import, so it pickles by name)
SCHEMAS: dict[tuple[str, ...], type[BaseModel]] = {
    names: _schema(names) for r in range(2, len(JOINABLE) + 1) for names in combinations(JOINABLE, r)}


@dataclass(frozen=True)
class JointPart:
    """What a joinable request brings to a joint one.

    Attributes:
        name: the part (:data:`JOINABLE` key): its key in the joint reply.
        instructions: the metric's template with its placeholders filled (no data notice).
        blocks: the request's fenced ``(label, text)`` blocks.
        group: requests of one group may be joined: the sample (and a conversation turn's history);
            parts giving one block label different texts are never joined.
        version: the metric's template version.
    """

    name: str
    instructions: str
    blocks: tuple[tuple[str, str], ...]
    group: tuple[Any, ...]
    version: str

    def combine(self, requests: Sequence[JudgeRequest]) -> JudgeRequest | None:
        return joint_request(requests)


@dataclass(frozen=True)
class PartRequest(JudgeRequest):
    """A :class:`JudgeRequest` that may be joined: sent alone it is exactly the metric's own request."""

    joint: JointPart | None = field(default=None, compare=False)


def joinable(req: JudgeRequest, part: str | None, tpl: PromptTemplate, subs: dict[str, Any],
             blocks: Sequence[tuple[str, str]]) -> JudgeRequest:
    """``req`` marked as the joint part ``part`` (``None``, a part not in :data:`JOINABLE`, or a
    request without a sample id: ``req`` as it is)."""
    if part not in JOINABLE or req.sample_id is None:  # a request of no known sample is sent alone
        return req
    history = tuple(b for b in blocks if b[0] == "CONVERSATION HISTORY")
    body = string.Template(tpl.text).substitute({k: str(v) for k, v in subs.items()}).strip()
    jp = JointPart(part, body, tuple(blocks), (req.sample_id, history), tpl.version)
    return PartRequest(**{f: getattr(req, f) for f in req.__dataclass_fields__}, joint=jp)


class _Checks:
    """A joint reply's checks: each part's own (``validate``) on its part of the reply."""

    def __init__(self, checks: list[tuple[str, Callable[[Any], None]]]) -> None:
        self.checks = checks

    def __call__(self, value: Any) -> None:
        for name, check in self.checks:
            try:
                check(getattr(value, name))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None


def joint_request(requests: Sequence[JudgeRequest]) -> JudgeRequest | None:
    """One request asking every part of ``requests`` (one sample's joinable requests), or
    ``None`` when they cannot share one (two parts give one label different texts)."""
    first: dict[str, JudgeRequest] = {}
    for r in requests:
        first.setdefault(r.joint.name, r)  # type: ignore[attr-defined]
    names = tuple(n for n in JOINABLE if n in first)
    schema = SCHEMAS.get(names)
    if schema is None:
        return None
    parts = [first[n].joint for n in names]  # type: ignore[attr-defined]
    merged: dict[str, str] = {}
    for p in parts:
        for label, text in p.blocks:
            if merged.setdefault(label, text) != text:
                return None
    # what a part reads first (history, question, answer, reference), then the contexts, once
    ordered = sorted(merged.items(), key=lambda b: (b[0] != "CONVERSATION HISTORY", b[0].startswith("CONTEXT ")))
    tasks = [JOINT_TASK.format(i=i, name=p.name, instructions=p.instructions) for i, p in enumerate(parts, 1)]
    system = "\n\n".join([JOINT_HEAD.format(n=len(parts)), *tasks,
                          JOINT_REPLY.format(keys=", ".join(f'"{n}"' for n in names)), DATA_NOTICE])
    version = hashlib.sha256("\x00".join(["joint", JOINT_VERSION, JOINT_HEAD, JOINT_TASK, JOINT_REPLY,
                                          FORMAT_VERSION, *(p.version for p in parts)]).encode()).hexdigest()[:16]
    checks = [(n, first[n].validate) for n in names if first[n].validate is not None]
    caps = [first[n].max_tokens for n in names]
    return JudgeRequest(metric="+".join(dict.fromkeys(r.metric for r in sorted(
                            requests, key=lambda r: names.index(r.joint.name)))),  # type: ignore[attr-defined]
                        sample_id=first[names[0]].sample_id, system=system, user=fence_blocks(ordered),
                        schema=schema, template_version=version,
                        expected_output_tokens=sum(first[n].expected_output_tokens for n in names),
                        max_tokens=None if None in caps else sum(caps),  # type: ignore[arg-type]
                        validate=_Checks(checks) if checks else None)
