"""OpenAI Evals graders as ragmeter metrics: one metric per grader type, one result column per grader.

A grader runs as the metric of its type (``openai_string_check``, ``openai_text_similarity``,
``openai_score_model``, ``openai_label_model``, ``openai_python``, ``openai_multi``) with the grader
object as its ``grader`` parameter, stored under the grader's name. Each sample's namespaces come
from the item it was read from (``metadata["openai_item"]`` / ``["openai_sample"]``, see
:mod:`ragmeter.io.openai_evals.items`); a sample read by ragmeter's usual reader is seen as
``item`` = its fields and metadata, ``sample.output_text`` = its answer.

A grader that cannot grade an item (a template variable that does not resolve, a judge or python
failure, a formula without a value) records no value for it, with the reason; never a 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.core.context import ScoringContext, declare_service, register_service
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Sample, Score
from ragmeter.metrics.openai_evals import definition as d
from ragmeter.metrics.openai_evals.formula import FormulaError, evaluate_formula, parse_formula
from ragmeter.metrics.openai_evals.model import GraderJudges
from ragmeter.metrics.openai_evals.templates import TemplateError, render
from ragmeter.metrics.registry import MetricSpec, register_metric

FAMILY = "openai_evals"
#: python graders run in the sandbox service (child processes), never in the metric's process
SANDBOX = "python_sandbox"
declare_service(SANDBOX, "ragmeter.sandbox")


def namespaces(s: Sample) -> dict[str, Any]:
    """The ``item`` and ``sample`` namespaces of one sample."""
    meta = s.metadata or {}
    if "openai_item" in meta:
        return {"item": meta["openai_item"], "sample": meta.get("openai_sample")}
    item = {k: v for k, v in meta.items()}
    item.update({k: v for k, v in (("id", s.id), ("question", s.question), ("answer", s.answer),
                                    ("reference", s.reference), ("references", s.references or None))
                 if v is not None})
    return {"item": item, "sample": {"output_text": s.answer} if s.answer is not None else None}


def _rendered(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], keys: Sequence[str]
              ) -> list[tuple[str, ...] | str]:
    """Per item: the rendered texts, or why a template failed."""
    out: list[tuple[str, ...] | str] = []
    for n in ns:
        try:
            out.append(tuple(render(grader[k], n) for k in keys))
        except TemplateError as exc:
            out.append(f"{grader['name']}: template {exc}")
    return out


def string_check(op: str, text: str, reference: str) -> float:
    """OpenAI's string check: ``eq`` input == reference, ``ne`` input != reference, ``like``
    reference in input, ``ilike`` the same ignoring case (Unicode case folding, ``str.casefold``:
    the same as lower-casing for ASCII, and "Straße" contains "STRASSE"); 1 or 0."""
    if op == "eq":
        return float(text == reference)
    if op == "ne":
        return float(text != reference)
    if op == "like":
        return float(reference in text)
    return float(reference.casefold() in text.casefold())


def _grade_string_check(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any) -> list[Score]:
    out = []
    for r in _rendered(grader, ns, ("input", "reference")):
        out.append(Score.missing(r) if isinstance(r, str) else Score(string_check(grader["operation"], *r)))
    return out


def _grade_text_similarity(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any) -> list[Score]:
    from ragmeter.metrics.openai_evals.similarity import similarity

    rendered = _rendered(grader, ns, ("input", "reference"))
    ok = [i for i, r in enumerate(rendered) if not isinstance(r, str)]
    pairs = [rendered[i] for i in ok]
    values = similarity(grader["evaluation_metric"], [p[0] for p in pairs], [p[1] for p in pairs], ctx)
    out: list[Score] = [Score.missing(r) if isinstance(r, str) else Score(None) for r in rendered]
    for i, v in zip(ok, values, strict=True):
        out[i] = Score(float(v))
    return out


def _grade_python(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any) -> list[Score]:
    if ctx is None or _permission(ctx.options) is None:
        raise ConfigError(_python_refusal(grader["name"]))
    results = ctx.service(SANDBOX).grade(grader["name"], grader["source"],
                                         [(n.get("sample"), n["item"]) for n in ns])
    low, high = d.grader_range(grader)
    out = []
    for r in results:
        if r.value is None:
            out.append(Score.missing(r.reason or "no value", r.details))
        elif not low <= r.value <= high:
            out.append(Score.missing(f"python grader {grader['name']!r} returned {r.value:g}, outside its "
                                     f"declared range [{low:g}, {high:g}]", {"result": r.value}))
        else:
            out.append(Score(r.value))
    return out


def _model_requests(grader: Mapping[str, Any], ids: Sequence[str], ns: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[Any | None], list[str | None]]:
    from ragmeter.metrics.openai_evals.model import requests_for

    return requests_for(grader, ids, ns)


def _grade_model(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any,
                 ids: Sequence[str]) -> list[Score]:
    from ragmeter.metrics.openai_evals.model import judge_for, outcome

    reqs, why = _model_requests(grader, ids, ns)
    todo = [r for r in reqs if r is not None]
    results = iter(judge_for(ctx, grader["model"]).submit(todo) if todo else [])
    out = []
    for r, w in zip(reqs, why, strict=True):
        if r is None:
            out.append(Score.missing(w or "no request"))
            continue
        res = next(results)
        if not res.ok:
            out.append(res.missing({"grader": grader["name"], "model": grader["model"]}))
            continue
        value, details = outcome(grader, res)
        out.append(Score(value, details=details))
    return out


def _grade_multi(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any,
                 ids: Sequence[str]) -> list[Score]:
    tree = parse_formula(grader["calculate_output"], set(grader["graders"]))
    low, high = d.grader_range(grader)
    columns = {k: grade(sub, ns, ctx, ids) for k, sub in grader["graders"].items()}
    out = []
    for i in range(len(ns)):
        values: dict[str, float] = {}
        lacking = []
        for k, col in columns.items():
            if col[i].value is None:
                lacking.append(f"{k}: {col[i].reason}")
            else:
                values[k] = float(col[i].value)
        if lacking:
            out.append(Score.missing(f"{grader['name']}: sub-grader without a value ({'; '.join(lacking)})",
                                     {"graders": values}))
            continue
        try:
            # the formula's range holds every value it can take; clipping only absorbs the last
            # bit of floating-point rounding between the two computations
            value = min(max(evaluate_formula(tree, values), low), high)
            out.append(Score(value, details={"graders": values}))
        except FormulaError as exc:
            out.append(Score.missing(f"{grader['name']}: {exc}", {"graders": values}))
    return out


def grade(grader: Mapping[str, Any], ns: Sequence[Mapping[str, Any]], ctx: Any, ids: Sequence[str]) -> list[Score]:
    """One Score per item for a (normalised) grader."""
    kind = grader["type"]
    if kind == "string_check":
        return _grade_string_check(grader, ns, ctx)
    if kind == "text_similarity":
        return _grade_text_similarity(grader, ns, ctx)
    if kind == "python":
        return _grade_python(grader, ns, ctx)
    if kind in d.MODEL_TYPES:
        return _grade_model(grader, ns, ctx, ids)
    return _grade_multi(grader, ns, ctx, ids)


# ---- metric registration ---------------------------------------------------------------------------
def _grader(params: Mapping[str, Any]) -> dict[str, Any]:
    g = params.get("grader")
    if g is None:
        raise ConfigError("an OpenAI grader metric needs its grader object: params {grader: {...}} "
                          "(`ragmeter eval DATA --openai-eval EVAL.json` builds them)")
    return d.validate_grader(g, f"grader {g.get('name', '?') if isinstance(g, Mapping) else '?'}")


def _batch(samples: Sequence[Sample], ctx: ScoringContext | None = None, *, grader: Any = None,
           allow_python_graders: bool = False) -> list[Score]:
    # ``allow_python_graders`` is read from runs stored before the permission became a run option
    # that is never stored (PYTHON_GRADERS_OPTION) and ignored: it grants nothing
    g = _grader({"grader": grader})
    if d.uses_python(g) and _permission(ctx.options if ctx is not None else {}) is None:
        raise ConfigError(_python_refusal(g["name"]))
    return grade(g, [namespaces(s) for s in samples], ctx, [s.id for s in samples])


def _permission(options: Mapping[str, Any]) -> str | None:
    """How this process may run python graders (``isolated``, ``unisolated``), ``None`` when it may not.

    Raises:
        ConfigError: a value of the ``python_graders`` option that is neither.
    """
    from ragmeter.sandbox import permission

    return permission(options)


def _python_refusal(name: str) -> str:
    return (f"grader {name!r} runs Python code: ragmeter runs python graders only when this command is given "
            "--allow-python-graders (each call in an isolated sandbox with a time, memory and process limit; "
            "docs/openai-evals.md). The permission is not stored with a run: `ragmeter eval --resume RUN` "
            "needs it again")


def _check(ctx: ScoringContext | None = None, *, grader: Any = None, allow_python_graders: bool = False) -> str | None:
    try:
        g = _grader({"grader": grader})
        mode = _permission(ctx.options if ctx is not None else {}) if d.uses_python(g) else None
    except ConfigError as exc:
        return str(exc)
    if d.uses_python(g):
        if mode is None:
            return _python_refusal(g["name"])
        if ctx is not None and (problem := ctx.service(SANDBOX).problem()):
            return f"grader {g['name']!r}: {problem}"
    if any(x["type"] == "text_similarity" and x["evaluation_metric"] == "meteor" for x in d.walk(g)):
        from ragmeter.metrics.openai_evals.similarity import wordnet_problem

        problem = wordnet_problem()
        if problem:
            return problem
    if d.uses_model(g) and ctx is not None:
        from ragmeter.llm import problem as judge_problem

        return judge_problem(ctx.options)
    return None


def _prepare(samples: Sequence[Sample], ctx: ScoringContext, *, grader: Any = None,
             allow_python_graders: bool = False) -> None:
    """Queue the judge requests of model graders (sent with every other metric's at the flush) and
    the texts of cosine graders (embedded in one batch)."""
    try:
        g = _grader({"grader": grader})
    except ConfigError:
        return
    ns: list[dict[str, Any]] | None = None
    for sub in d.walk(g):
        if sub["type"] in d.MODEL_TYPES:
            from ragmeter.metrics.openai_evals.model import judge_for

            ns = ns if ns is not None else [namespaces(s) for s in samples]
            reqs, _ = _model_requests(sub, [s.id for s in samples], ns)
            judge_for(ctx, sub["model"]).prefetch([r for r in reqs if r is not None])
        elif sub["type"] == "text_similarity" and sub["evaluation_metric"] == "cosine":
            ns = ns if ns is not None else [namespaces(s) for s in samples]
            texts = [t for r in _rendered(sub, ns, ("input", "reference")) if not isinstance(r, str) for t in r]
            ctx.service("embeddings").request(texts)


_DESCRIPTIONS = {
    "string_check": "OpenAI Evals string_check grader: 1 or 0. eq: input == reference; ne: input != reference; "
                    "like: reference occurs in input; ilike: the same ignoring case (casefold) (OpenAI's graders "
                    "guide). Input and reference are templates over the item and the sample.",
    "text_similarity": "OpenAI Evals text_similarity grader: the evaluation_metric of input against reference: "
                       "fuzzy_match (rapidfuzz WRatio / 100), bleu (sacrebleu sentence BLEU / 100), gleu (nltk "
                       "sentence_gleu), meteor (nltk meteor_score), rouge_1..rouge_5 and rouge_l (rouge-score "
                       "F-measure, no stemming), cosine (embedding cosine); passes when value >= pass_threshold.",
    "score_model": "OpenAI Evals score_model grader: an LLM judge reads the grader's own messages (templates filled) "
                   "and returns a number, clipped to the grader's range (default [0, 1]); passes when value >= "
                   "pass_threshold.",
    "label_model": "OpenAI Evals label_model grader: an LLM judge picks one of the grader's labels; 1 when it is "
                   "one of passing_labels, else 0 (the label is in the score's details).",
    "python": "OpenAI Evals python grader: grade(sample, item) -> float, run in an isolated sandbox (bubblewrap: "
              "no network, no view of other processes or files, no API keys) with a time, memory and process limit "
              "(only with --allow-python-graders); passes when value >= pass_threshold. Its "
              "range is the grader's range when the definition gives one (a value outside it is no value), "
              "else not bounded in advance.",
    "multi": "OpenAI Evals multi grader: its calculate_output formula (+ - * / ^, min, max, abs, floor, ceil, exp, "
             "sqrt, log) over its sub-graders' values, evaluated without eval(); no value when a sub-grader has none. "
             "Its range is the formula's over the sub-graders' ranges (interval arithmetic).",
}
#: the range of a grader metric before its grader is known: the union over every definition of the type
_RANGES = {"string_check": (0.0, 1.0), "text_similarity": (-1.0, 1.0), "label_model": (0.0, 1.0)}


def _range_for(kind: str) -> Any:
    """``range_for`` of the metric of grader type ``kind``: the range its grader's definition sets
    (:func:`ragmeter.metrics.openai_evals.definition.grader_range`); without a valid grader, the
    type's (the metric's ``check`` says what is wrong with the grader)."""
    def range_for(params: Mapping[str, Any]) -> tuple[float, float]:
        try:
            g = _grader(params)
        except ConfigError:
            return _RANGES.get(kind, d.UNBOUNDED)
        return d.grader_range(g)

    return range_for


for _kind in d.GRADER_TYPES:
    register_metric(MetricSpec(
        name=f"openai_{_kind}", family=FAMILY, fn=_batch, range=_RANGES.get(_kind, d.UNBOUNDED),
        range_for=_range_for(_kind),
        needs_llm=_kind in d.MODEL_TYPES, defaults={"grader": None, "allow_python_graders": False},
        prepare=_prepare, check=_check, batch_size=500 if _kind in d.MODEL_TYPES else 2000,
        description=_DESCRIPTIONS[_kind]))

register_service("openai_evals_judges", GraderJudges)


def metric_entry(grader: Mapping[str, Any]) -> dict[str, Any]:
    """The metric entry (``{name, params, key}``) that runs ``grader`` under its own name (the
    permission to run python graders is a run option, :data:`~ragmeter.core.config.PYTHON_GRADERS_OPTION`, never a
    parameter: parameters are stored with the run)."""
    return {"name": f"openai_{grader['type']}", "params": {"grader": json.loads(json.dumps(grader))},
            "key": grader["name"]}


def pass_threshold(grader: Mapping[str, Any]) -> float:
    """The value a sample needs to pass the grader (docs/openai-evals.md):

    ``pass_threshold`` when the grader has one; 1 for string_check and label_model (their 1 = pass);
    otherwise the middle of a score_model's range, and 0.5 for python and multi graders.
    """
    if grader.get("pass_threshold") is not None:
        return float(grader["pass_threshold"])
    kind = grader["type"]
    if kind in {"string_check", "label_model"}:
        return 1.0
    if kind == "score_model":
        lo, hi = grader["range"]
        return (lo + hi) / 2
    return 0.5
