"""LLM-judged correctness: ``match`` (datapizza), ``graded_correctness`` and ``rubric``
(user criteria; the agent-evaluation guide's five-dimension review as the default preset)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.judge._common import JudgedMetric, Verdict, context_blocks, register_judged


class MatchingResult(Verdict):
    """datapizza's verdict, with the reasoning asked for before the decision."""

    reasoning: str
    is_matching: bool


GRADES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


class GradedCorrectness(Verdict):
    reasoning: str
    score: float = Field(json_schema_extra={"enum": list(GRADES)})

    @field_validator("score")
    @classmethod
    def _on_scale(cls, v: float) -> float:
        for g in GRADES:
            if abs(v - g) < 1e-6:
                return g
        raise ValueError(f"score must be one of {', '.join(map(str, GRADES))}, got {v}")


class Dimension(Verdict):
    name: str
    reasoning: str
    suggestions: list[str]
    score: float = Field(ge=0.0, le=1.0)


class RubricVerdict(Verdict):
    dimensions: list[Dimension]


# ---- match --------------------------------------------------------------------------------------------


def _match_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    q = [("QUESTION", s.question)] if s.question else []
    return [*q, ("REFERENCE", s.reference or ""), ("PREDICTION", s.answer or "")]


match = JudgedMetric("match", "match", MatchingResult, _match_blocks,
                     lambda s, v, p, ctx: Score(1.0 if v.is_matching else 0.0, details=v.model_dump()),
                     output_tokens=lambda s: 80)
register_judged(match, requires=("answer", "reference"), description="""
Whether the answer matches the reference answer, as judged by an LLM (datapizza's
``MatchingResult``: ``is_matching`` plus the judge's ``reasoning``).

    match = 1 if the judge says the prediction accurately and satisfactorily answers the question
            given the reference, else 0

Range {0, 1}, higher is better; the mean over samples is the match rate. ``details`` holds the
reasoning. A reply that does not parse is retried and then has no value -- never "not matching".
""", parity="""
datapizza's judge metric (no ragas or DeepEval metric computes it); datapizza records "not
matching" when the judge fails, here that is no value.
""")

# ---- graded correctness ---------------------------------------------------------------------------------


def _graded_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    return [("QUESTION", s.question or ""), ("EXPECTED", s.reference or ""), ("GENERATED", s.answer or "")]


graded_correctness = JudgedMetric(
    "graded_correctness", "graded_correctness", GradedCorrectness, _graded_blocks,
    lambda s, v, p, ctx: Score(v.score, details=v.model_dump()), output_tokens=lambda s: 80)
register_judged(graded_correctness, requires=("question", "answer", "reference"), description="""
Factual correctness of the answer against the expected answer on a six-step scale (1.0, 0.8, ..., 0.0).

The judge reasons briefly, then grades: 1.0 completely correct, 0.8 mostly correct (minor details
missing), 0.6 partially correct, 0.4 somewhat correct (major gaps), 0.2 mostly incorrect, 0.0
completely incorrect or irrelevant. The grade is constrained to those values by the reply schema.

Range [0, 1], higher is better. Unlike the common snippet that returns 0.0 on any exception, a reply that
cannot be parsed is retried and then recorded as "no value: judge failure", never as 0.
""", parity="""
ragmeter's own six-step scale (no ragas or DeepEval metric computes it); DeepEval's closest is
``deepeval:g_eval`` with a correctness criterion.
""")

# ---- rubric ------------------------------------------------------------------------------------------------

#: the agent-evaluation guide's LLM-judge dimensions
PRESETS: dict[str, list[dict[str, Any]]] = {
    "assessment": [
        {"name": "accuracy", "weight": 1.0,
         "description": "Factual correctness of the assessment: claims, figures and conclusions are "
                        "right and consistent with the provided data."},
        {"name": "completeness", "weight": 1.0,
         "description": "Coverage of the required analysis areas: nothing important the question "
                        "calls for is missing."},
        {"name": "consistency", "weight": 1.0,
         "description": "Internal consistency: conclusions follow from the analysis and do not "
                        "contradict each other or the evidence."},
        {"name": "actionability", "weight": 1.0,
         "description": "Usefulness of the recommendations: specific, practical next steps a reader "
                        "can act on."},
        {"name": "data_utilization", "weight": 1.0,
         "description": "How well the available data sources (contexts, retrieved facts) were used "
                        "to support the answer."},
    ],
}


def normalise_criteria(criteria: Any, preset: str | None) -> list[tuple[str, str, float]]:
    """``[(name, description, weight), ...]`` from user criteria or a preset.

    ``criteria`` is a list of ``{"name", "description", "weight"}`` (weight defaults to 1), or a
    mapping ``name -> description`` / ``name -> {"description", "weight"}``.

    Raises:
        MetricError: no criteria, duplicate or empty names, negative weights, all-zero weights.
    """
    if criteria is None:
        if preset not in PRESETS:
            raise MetricError(f"rubric: unknown preset {preset!r}; presets: {', '.join(PRESETS)} "
                              "(or pass criteria=[{name, description, weight}, ...])")
        criteria = PRESETS[preset]
    items: list[tuple[str, str, float]] = []
    entries = (criteria.items() if isinstance(criteria, dict) else
               [(None, c) for c in criteria] if isinstance(criteria, list | tuple) else None)
    if entries is None:
        raise MetricError(f"rubric: criteria must be a list or a mapping, got {type(criteria).__name__}")
    for name, c in entries:
        if isinstance(c, str):
            desc, weight = c, 1.0
        elif isinstance(c, dict):
            name = c.get("name", name)
            desc, weight = c.get("description", ""), c.get("weight", 1.0)
        else:
            raise MetricError(f"rubric: a criterion must be a mapping or a description, got {c!r}")
        if not name or not str(name).strip():
            raise MetricError(f"rubric: criterion without a name: {c!r}")
        try:
            weight = float(weight)
        except (TypeError, ValueError):
            raise MetricError(f"rubric: weight of {name!r} must be a number, got {weight!r}") from None
        if weight < 0:
            raise MetricError(f"rubric: weight of {name!r} is negative")
        items.append((str(name).strip(), str(desc).strip(), weight))
    names = [n for n, _, _ in items]
    if not items or len(set(names)) != len(names):
        raise MetricError(f"rubric: criteria need distinct names, got {names}")
    if sum(w for _, _, w in items) <= 0:
        raise MetricError("rubric: at least one weight must be positive")
    return items


def _crit(p: dict[str, Any]) -> list[tuple[str, str, float]]:
    items = normalise_criteria(p.get("criteria"), p.get("preset"))
    dim = p.get("dimension")
    if dim is not None and dim not in {n for n, _, _ in items}:
        raise MetricError(f"rubric: dimension {dim!r} is not one of {[n for n, _, _ in items]}")
    return items


def _rubric_subs(p: dict[str, Any]) -> dict[str, Any]:
    lines = [f"- {n}: {d}" if d else f"- {n}" for n, d, _ in _crit(p)]
    return {"criteria": "\n".join(lines)}


def _rubric_blocks(s: Sample, _p: dict[str, Any]) -> list[tuple[str, str]]:
    blocks = [("QUESTION", s.question)] if s.question else []
    if s.contexts:
        blocks += context_blocks(s.context_texts)
    if s.reference:
        blocks.append(("REFERENCE", s.reference))
    return [*blocks, ("ANSWER", s.answer or "")]


def _rubric_validate(_s: Sample, p: dict[str, Any]) -> Any:
    want = sorted(n for n, _, _ in _crit(p))

    def check(v: RubricVerdict) -> None:
        got = sorted(d.name for d in v.dimensions)
        if got != want:
            raise ValueError(f"expected one entry per dimension {want}, got {got}")

    return check


def _rubric_score(_s: Sample, v: RubricVerdict, p: dict[str, Any], _ctx: Any) -> Score:
    items = _crit(p)
    by_name = {d.name: d for d in v.dimensions}
    total_w = sum(w for _, _, w in items)
    overall = sum(by_name[n].score * w for n, _, w in items) / total_w
    details = {"dimensions": [by_name[n].model_dump() for n, _, _ in items],
               "weights": {n: w for n, _, w in items}, "overall": overall}
    dim = p.get("dimension")
    return Score(by_name[dim].score if dim else overall, details=details)


rubric = JudgedMetric("rubric", "rubric", RubricVerdict, _rubric_blocks, _rubric_score,
                      output_tokens=lambda s: 400, subs=_rubric_subs, validate=_rubric_validate,
                      check_params=_crit)
register_judged(rubric, requires=("answer",), param="dimension",
                defaults={"criteria": None, "preset": "assessment", "dimension": None}, description="""
A multi-dimension review of the answer against user-defined criteria, each with a score, reasoning
and suggestions (the agent-evaluation guide's GPT-4 judge). The default preset ``assessment`` holds the agent-evaluation guide's five
dimensions -- accuracy, completeness, consistency, actionability, data_utilization -- equally
weighted.

One judge call scores every dimension in [0, 1]; with weights ``w_d``:

    rubric = sum_d w_d * score_d / sum_d w_d

``rubric@accuracy`` (parameter ``dimension``) reports one dimension instead; several dimension
keys of the same rubric share the one call. ``criteria`` is a list of ``{name, description,
weight}``. The question, contexts and reference are shown to the judge when the sample has them.
Range [0, 1], higher is better. ``details`` holds every dimension's score, reasoning and
suggestions.
""", parity="""
ragmeter's own rubric review (the agent-evaluation guide's judge). DeepEval's rubric metric is
G-Eval: ``deepeval:g_eval`` with ``criteria`` or ``evaluation_steps`` and a ``rubric``.
""")
