"""DeepEval's deterministic metrics with DeepEval's numbers: ``deepeval:exact_match``,
``deepeval:pattern_match`` and ``deepeval:json_correctness`` (DeepEval 4.3.1 ``ExactMatchMetric``,
``PatternMatchMetric``, ``JsonCorrectnessMetric``).

No judge is asked: each value is a pure function of the sample and equals DeepEval's on every input
(tests/test_parity_deepeval_single.py compares them on generated inputs). DeepEval refuses a test
case whose ``actual_output`` is empty, or whose ``input`` (or, for exact match, ``expected_output``)
is missing: those samples have no value saying so. ``details`` holds DeepEval's ``threshold`` and
``success`` (score >= threshold).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.lexical.json_schema_model import SchemaError, model_from_json_schema
from ragmeter.metrics.registry import MetricSpec, register_metric

VERSION = {"tool": "deepeval", "version": "4.3.1"}
REFUSED = "empty answer: DeepEval refuses the test case ('actual_output' cannot be empty)"


def _threshold(name: str, p: dict[str, Any], default: float) -> float:
    thr = p.get("threshold", default)
    if not isinstance(thr, int | float) or isinstance(thr, bool) or not 0 <= thr <= 1:
        raise MetricError(f"{name}: threshold must be a number in [0, 1], got {thr!r}")
    return float(thr)


def _unnamed(message: str, name: str) -> str:
    """A ``check`` message without the metric's name in front (the run names the metric)."""
    return message.removeprefix(f"{name}: ").removeprefix(f"{name} ")


def _scored(value: float, threshold: float, summary: str, **details: Any) -> Score:
    return Score(value, details={**details, "summary": summary, "threshold": threshold,
                                 "success": value >= threshold})


def _options(p: dict[str, Any], ctx: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The metric's parameters, a parameter left unset taken from the run option of the same name
    (``--option pattern=...``)."""
    opts = getattr(ctx, "options", None) or {}
    return {**p, **{k: opts[k] for k in keys if p.get(k) is None and k in opts}}


# ---- deepeval:exact_match -----------------------------------------------------------------------


def exact_match_score(actual: str, expected: str) -> float:
    """DeepEval's ``ExactMatchMetric``: 1.0 when the outputs are equal after ``str.strip()``."""
    return 1.0 if actual.strip() == expected.strip() else 0.0


def _exact_match(samples: Sequence[Sample], ctx: Any, **p: Any) -> list[Score]:
    thr = _threshold("deepeval:exact_match", p, 1.0)
    out = []
    for s in samples:
        if s.answer == "":
            out.append(Score.missing(REFUSED))
            continue
        v = exact_match_score(s.answer or "", s.reference or "")
        out.append(_scored(v, thr, "the actual and expected outputs are equal (stripped)" if v else
                           "the actual and expected outputs differ (stripped)"))
    return out


register_metric(MetricSpec(
    name="deepeval:exact_match", family="lexical", fn=_exact_match, requires=("question", "answer", "reference"),
    defaults={"threshold": 1.0}, batch_size=5000, equals={**VERSION, "metric": "ExactMatchMetric"},
    aliases=("ExactMatchMetric", "deepeval.metrics.ExactMatchMetric"), description="""
DeepEval's exact match: 1 when the answer equals the expected output after stripping leading and
trailing whitespace (Python's ``str.strip``), else 0 (DeepEval 4.3.1 ``ExactMatchMetric``).

    deepeval:exact_match = [actual_output.strip() == expected_output.strip()]

Case and inner whitespace count. DeepEval requires ``input`` and refuses an empty answer: no value.
``details`` holds its ``threshold`` (default 1) and ``success``. Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``ExactMatchMetric`` on every input. ragmeter's ``exact_match`` is SQuAD's
(normalised: lower case, no punctuation or articles) and takes the best of several references;
this one reads the first reference only, as DeepEval's single ``expected_output``.
"""))


# ---- deepeval:pattern_match ---------------------------------------------------------------------


def compile_pattern(pattern: Any, ignore_case: Any = False) -> re.Pattern[str]:
    """DeepEval's pattern: the ``pattern`` stripped, compiled with ``re.IGNORECASE`` when asked.

    Raises:
        MetricError: no pattern, a pattern that is not a text, or an invalid regular expression.
    """
    if not isinstance(pattern, str):
        raise MetricError("deepeval:pattern_match needs a regular expression: deepeval:pattern_match@REGEX, "
                          f"--option pattern=REGEX or the parameter pattern (got {pattern!r})")
    if not isinstance(ignore_case, bool):
        raise MetricError(f"deepeval:pattern_match: ignore_case must be true or false, got {ignore_case!r}")
    try:
        return re.compile(pattern.strip(), re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise MetricError(f"deepeval:pattern_match: invalid regular expression {pattern!r}: {exc}") from None


def _pattern_match(samples: Sequence[Sample], ctx: Any, **p: Any) -> list[Score]:
    p = _options(p, ctx, ("pattern", "ignore_case"))
    rx = compile_pattern(p.get("pattern"), p.get("ignore_case", False))
    thr = _threshold("deepeval:pattern_match", p, 1.0)
    out = []
    for s in samples:
        if s.answer == "":
            out.append(Score.missing(REFUSED))
            continue
        v = 1.0 if rx.fullmatch((s.answer or "").strip()) else 0.0
        out.append(_scored(v, thr, f"the stripped answer {'fully matches' if v else 'does not fully match'} "
                                   f"the pattern {rx.pattern!r}", pattern=rx.pattern))
    return out


def _pattern_check(ctx: Any, **p: Any) -> str | None:
    try:
        p = _options(p, ctx, ("pattern", "ignore_case"))
        compile_pattern(p.get("pattern"), p.get("ignore_case", False))
        _threshold("deepeval:pattern_match", p, 1.0)
    except MetricError as exc:
        return _unnamed(str(exc), "deepeval:pattern_match")
    return None


register_metric(MetricSpec(
    name="deepeval:pattern_match", family="lexical", fn=_pattern_match, requires=("question", "answer"),
    defaults={"pattern": None, "ignore_case": False, "threshold": 1.0}, param="pattern", check=_pattern_check,
    batch_size=5000, equals={**VERSION, "metric": "PatternMatchMetric"},
    aliases=("PatternMatchMetric", "deepeval.metrics.PatternMatchMetric"), description="""
DeepEval's pattern match: 1 when the whole answer (stripped) matches a regular expression, else 0
(DeepEval 4.3.1 ``PatternMatchMetric``).

    deepeval:pattern_match = [re.fullmatch(pattern.strip(), actual_output.strip())]

The pattern is a parameter (``deepeval:pattern_match@REGEX``) or the run option ``pattern``;
``ignore_case`` compiles it with ``re.IGNORECASE``. DeepEval requires ``input`` and refuses an
empty answer: no value. ``details`` holds its ``threshold`` (default 1) and ``success``. Range
[0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``PatternMatchMetric`` on every input (Python's ``re``, as DeepEval).
"""))


# ---- deepeval:json_correctness ------------------------------------------------------------------


def _schema(p: dict[str, Any]) -> Any:
    schema = p.get("expected_schema")
    if schema is None:
        raise MetricError("deepeval:json_correctness needs expected_schema: the JSON schema of the expected "
                          "output, as pydantic writes it (Model.model_json_schema()): --option "
                          "expected_schema=schema.json, or the parameter expected_schema")
    if not isinstance(schema, dict):
        raise MetricError(f"deepeval:json_correctness: expected_schema must be a JSON schema object (a file "
                          f"path is read by `ragmeter eval --option expected_schema=FILE`), got {schema!r:.80}")
    try:
        return model_from_json_schema(schema)
    except SchemaError as exc:
        raise MetricError(f"deepeval:json_correctness: expected_schema: {exc}") from None


def _json_threshold(p: dict[str, Any]) -> tuple[float, bool]:
    strict = p.get("strict_mode", True)
    if not isinstance(strict, bool):
        raise MetricError(f"deepeval:json_correctness: strict_mode must be true or false, got {strict!r}")
    thr = _threshold("deepeval:json_correctness", p, 0.5)
    return (1.0 if strict else thr), strict


def _json_correctness(samples: Sequence[Sample], ctx: Any, **p: Any) -> list[Score]:
    from pydantic import ValidationError

    p = _options(p, ctx, ("expected_schema",))
    model = _schema(p)
    thr, strict = _json_threshold(p)
    out = []
    for s in samples:
        if s.answer == "":
            out.append(Score.missing(REFUSED))
            continue
        try:
            model.model_validate_json(s.answer or "")
        except ValidationError as exc:
            out.append(_scored(0.0, thr, "the answer is not valid JSON of the expected schema",
                               validation_error=str(exc)[:2000], strict_mode=strict))
            continue
        out.append(_scored(1.0, thr, "the answer is valid JSON of the expected schema", strict_mode=strict))
    return out


def _json_check(ctx: Any, **p: Any) -> str | None:
    try:
        p = _options(p, ctx, ("expected_schema",))
        _schema(p)
        _json_threshold(p)
    except MetricError as exc:
        return _unnamed(str(exc), "deepeval:json_correctness")
    return None


register_metric(MetricSpec(
    name="deepeval:json_correctness", family="lexical", fn=_json_correctness, requires=("question", "answer"),
    defaults={"expected_schema": None, "threshold": 0.5, "strict_mode": True}, check=_json_check,
    batch_size=5000, equals={**VERSION, "metric": "JsonCorrectnessMetric"},
    aliases=("JsonCorrectnessMetric", "deepeval.metrics.JsonCorrectnessMetric"), description="""
DeepEval's JSON correctness: 1 when the answer is JSON that validates against the expected schema,
else 0 (DeepEval 4.3.1 ``JsonCorrectnessMetric``).

DeepEval takes a pydantic model and calls ``Model.model_validate_json(actual_output)``. Here the
model is rebuilt with pydantic from its JSON schema (``Model.model_json_schema()``, given as
``--option expected_schema=schema.json`` or the parameter ``expected_schema``) and validated the
same way, with pydantic's own coercion rules:

    deepeval:json_correctness = [Model.model_validate_json(actual_output) succeeds]

``details["validation_error"]`` holds pydantic's message. DeepEval's defaults: ``strict_mode`` on,
so its ``threshold`` is 1. DeepEval refuses an empty answer: no value. Range [0, 1], higher is better.
""", parity="""
Equals DeepEval 4.3.1 ``JsonCorrectnessMetric`` on every input for models whose JSON schema
rebuilds them (scalar, list, dict, nested model, optional, enum/Literal fields and pydantic's
constraints; a schema keyword the rebuild does not know is refused, never ignored). DeepEval asks
its judge to explain a failure (include_reason); ragmeter gives pydantic's validation error
without a call.
"""))
