"""Check an exported OpenAI Evals definition (``data_source_config`` + ``testing_criteria``), as read
from its file by :mod:`ragmeter.io.openai_evals.registry_file`.

Every grader is checked once, here, with errors that name the path of the offending field
(``testing_criteria[2].evaluation_metric``), and normalised to a plain JSON object that the grader
metrics receive as their ``grader`` parameter. Field names are OpenAI's (openai-python's
``StringCheckGrader``, ``TextSimilarityGrader``, ``ScoreModelGrader``, ``LabelModelGrader``,
``PythonGrader``, ``MultiGrader`` and the ``pass_threshold`` of ``EvalCreateParams``'s testing
criteria). Unknown keys (``id``, ``image_tag`` ...) are ignored, as OpenAI adds fields over time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.metrics.openai_evals.formula import parse_formula
from ragmeter.metrics.openai_evals.templates import check_template

GRADER_TYPES = ("string_check", "text_similarity", "score_model", "label_model", "python", "multi")
STRING_OPERATIONS = ("eq", "ne", "like", "ilike")
SIMILARITY_METRICS = ("fuzzy_match", "bleu", "gleu", "meteor", "rouge_1", "rouge_2", "rouge_3", "rouge_4",
                      "rouge_5", "rouge_l", "cosine")
MODEL_TYPES = ("score_model", "label_model")
ROLES = ("user", "assistant", "system", "developer")
#: ``sampling_params`` of a score_model grader and the type each must have
SAMPLING_PARAMS: dict[str, tuple[type, ...]] = {
    "temperature": (int, float), "top_p": (int, float), "seed": (int,),
    "max_completions_tokens": (int,), "reasoning_effort": (str,),
}
_CONTENT_TYPES = ("input_text", "output_text", "input_image", "input_audio")


def _fail(path: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {message}")


def _kind(v: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", str: "text", dict: "an object",
            list: "a list", type(None): "null"}.get(type(v), type(v).__name__)


def _text(g: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> str | None:
    v = g.get(key)
    if v is None:
        if required:
            raise _fail(f"{path}.{key}", "missing (text expected)")
        return None
    if not isinstance(v, str):
        raise _fail(f"{path}.{key}", f"expected text, got {_kind(v)}")
    return v


def _number(g: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> float | None:
    v = g.get(key)
    if v is None:
        if required:
            raise _fail(f"{path}.{key}", "missing (a number expected)")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _fail(f"{path}.{key}", f"expected a finite number, got {_kind(v) if not isinstance(v, float) else v}")
    return float(v)


def _template(text: str, path: str) -> None:
    problem = check_template(text)
    if problem:
        raise _fail(path, problem)


def _content(c: Any, path: str) -> Any:
    """A message's content: text, one content part or a list of parts (``input_text``,
    ``output_text``, ``input_image``, ``input_audio``)."""
    if isinstance(c, str):
        _template(c, path)
        return c
    if isinstance(c, list):
        return [_content(p, f"{path}[{i}]") for i, p in enumerate(c)]
    if not isinstance(c, Mapping):
        raise _fail(path, f"expected text, a content part or a list of parts, got {_kind(c)}")
    kind = c.get("type")
    if kind not in _CONTENT_TYPES:
        raise _fail(f"{path}.type", f"{kind!r} is not a content type; use one of {', '.join(_CONTENT_TYPES)}")
    if kind in {"input_text", "output_text"}:
        _template(_text(c, "text", path) or "", f"{path}.text")
    return dict(c)


def _messages(g: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    msgs = g.get("input")
    if not isinstance(msgs, list) or not msgs:
        raise _fail(f"{path}.input", f"expected a non-empty list of messages, got {_kind(msgs)}")
    out = []
    for i, m in enumerate(msgs):
        p = f"{path}.input[{i}]"
        if not isinstance(m, Mapping):
            raise _fail(p, f"expected a message object {{role, content}}, got {_kind(m)}")
        role = m.get("role")
        if role not in ROLES:
            raise _fail(f"{p}.role", f"{role!r} is not a role; use one of {', '.join(ROLES)}")
        if "content" not in m:
            raise _fail(f"{p}.content", "missing")
        out.append({"role": role, "content": _content(m["content"], f"{p}.content")})
    return out


def _labels(g: Mapping[str, Any], key: str, path: str) -> list[str]:
    v = g.get(key)
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise _fail(f"{path}.{key}", f"expected a non-empty list of labels (text), got {_kind(v)}")
    if len(set(v)) != len(v):
        raise _fail(f"{path}.{key}", f"labels repeat: {v}")
    return list(v)


def validate_grader(g: Any, path: str, *, in_multi: bool = False, default_name: str | None = None) -> dict[str, Any]:
    """Check one grader and return its normalised form.

    Args:
        g: the grader object as read from JSON.
        path: where it is, for error messages (``testing_criteria[0]``).
        in_multi: a sub-grader of a ``multi`` (no nested multi; ``pass_threshold`` optional).
        default_name: the name when the object has none (a multi's sub-grader key).

    Raises:
        ConfigError: naming the path of the first bad field.
    """
    if not isinstance(g, Mapping):
        raise _fail(path, f"expected a grader object, got {_kind(g)}")
    kind = g.get("type")
    if kind not in GRADER_TYPES:
        raise _fail(f"{path}.type", f"{kind!r} is not a grader type; use one of {', '.join(GRADER_TYPES)}")
    name = g.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise _fail(f"{path}.name", f"expected the grader's name (non-empty text), got {_kind(name)}")
    out: dict[str, Any] = {"type": kind, "name": name}
    if kind in {"string_check", "text_similarity"}:
        for key in ("input", "reference"):
            out[key] = _text(g, key, path)
            _template(out[key], f"{path}.{key}")
    if kind == "string_check":
        op = g.get("operation")
        if op not in STRING_OPERATIONS:
            raise _fail(f"{path}.operation", f"{op!r} is not an operation; use one of {', '.join(STRING_OPERATIONS)}")
        out["operation"] = op
    elif kind == "text_similarity":
        metric = g.get("evaluation_metric")
        if metric not in SIMILARITY_METRICS:
            raise _fail(f"{path}.evaluation_metric",
                        f"{metric!r} is not a metric; use one of {', '.join(SIMILARITY_METRICS)}")
        out["evaluation_metric"] = metric
    elif kind in MODEL_TYPES:
        out["input"] = _messages(g, path)
        out["model"] = _text(g, "model", path)
        if kind == "score_model":
            out["range"] = _range(g, path) or [0.0, 1.0]
            sp = g.get("sampling_params") or {}
            if not isinstance(sp, Mapping):
                raise _fail(f"{path}.sampling_params", f"expected an object, got {_kind(sp)}")
            for k, v in sp.items():
                if v is None:
                    continue
                want = SAMPLING_PARAMS.get(k)
                if want is None:
                    raise _fail(f"{path}.sampling_params.{k}",
                                f"unknown sampling parameter; use {', '.join(SAMPLING_PARAMS)}")
                if isinstance(v, bool) or not isinstance(v, want):
                    raise _fail(f"{path}.sampling_params.{k}", f"expected {'text' if want == (str,) else 'a number'}, "
                                                              f"got {_kind(v)}")
            out["sampling_params"] = {k: v for k, v in sp.items() if v is not None}
        else:
            out["labels"] = _labels(g, "labels", path)
            out["passing_labels"] = _labels(g, "passing_labels", path)
            extra = [x for x in out["passing_labels"] if x not in out["labels"]]
            if extra:
                raise _fail(f"{path}.passing_labels", f"{extra} are not among the labels {out['labels']}")
    elif kind == "python":
        src = _text(g, "source", path)
        if not src or not src.strip():
            raise _fail(f"{path}.source", "empty: a python grader's source defines grade(sample, item)")
        try:
            compile(src, f"<{name}>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            raise _fail(f"{path}.source", f"does not compile: {exc}") from None
        out["source"] = src
        rng = _range(g, path)
        if rng is not None:
            out["range"] = rng
    elif kind == "multi":
        if in_multi:
            raise _fail(path, "a multi grader cannot hold another multi grader")
        out["graders"] = _sub_graders(g, path)
        formula = _text(g, "calculate_output", path)
        try:
            parse_formula(formula or "", set(out["graders"]))
        except ValueError as exc:
            raise _fail(f"{path}.calculate_output", str(exc)) from None
        out["calculate_output"] = formula
    threshold = _number(g, "pass_threshold", path, required=kind == "text_similarity" and not in_multi)
    if threshold is not None:
        out["pass_threshold"] = threshold
    return out


def _range(g: Mapping[str, Any], path: str) -> list[float] | None:
    """A grader's ``range``: ``[low, high]``, finite, ``low < high``; ``None`` when absent."""
    rng = g.get("range")
    if rng is None:
        return None
    if (not isinstance(rng, list) or len(rng) != 2
            or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in rng)
            or rng[0] >= rng[1]):
        raise _fail(f"{path}.range", f"expected [low, high] with low < high, got {json.dumps(rng)}")
    return [float(rng[0]), float(rng[1])]


#: the range of each ``evaluation_metric`` of a text_similarity grader: every one is a share in
#: [0, 1] but the cosine of two embeddings, which can be negative
SIMILARITY_RANGES: dict[str, tuple[float, float]] = {m: (0.0, 1.0) for m in SIMILARITY_METRICS} | {
    "cosine": (-1.0, 1.0)}
#: the range of a grader whose values are not bounded before they are seen (a python grader
#: without ``range``; a formula over one)
UNBOUNDED = (-math.inf, math.inf)


def grader_range(grader: Mapping[str, Any]) -> tuple[float, float]:
    """The range of a (normalised) grader's values, the one place that decides it:

    - ``string_check``, ``label_model``: [0, 1] (1 = the check holds / a passing label);
    - ``text_similarity``: [0, 1] for every ``evaluation_metric`` but ``cosine``, [-1, 1];
    - ``score_model``: its ``range`` (default [0, 1], OpenAI's; the reply is clipped to it);
    - ``python``: its ``range`` when the definition gives one (ragmeter reads it; a value outside
      it is no value, with the reason), else :data:`UNBOUNDED`: nothing bounds ``grade``'s return
      before it is seen, and the run's interval follows the rule for no declared range (0/1
      values in [0, 1], others within the smallest and largest value: docs/statistics.md);
    - ``multi``: the range of ``calculate_output`` over its sub-graders' ranges, by interval
      arithmetic (:func:`ragmeter.metrics.openai_evals.formula.formula_range`); unbounded when
      a sub-grader or the formula is (a division by a range holding 0 ...).
    """
    kind = grader["type"]
    if kind in {"string_check", "label_model"}:
        return 0.0, 1.0
    if kind == "text_similarity":
        return SIMILARITY_RANGES[grader["evaluation_metric"]]
    if kind in {"score_model", "python"}:
        rng = grader.get("range")
        return (float(rng[0]), float(rng[1])) if rng is not None else UNBOUNDED
    from ragmeter.metrics.openai_evals.formula import formula_range

    tree = parse_formula(grader["calculate_output"], set(grader["graders"]))
    low, high = formula_range(tree, {k: grader_range(sub) for k, sub in grader["graders"].items()})
    # a formula that cannot vary (a constant) has no range to bound an interval with
    return (low, high) if low < high else UNBOUNDED


def _sub_graders(g: Mapping[str, Any], path: str) -> dict[str, dict[str, Any]]:
    """A multi's sub-graders: ``{key: grader}`` (the graders guide) or a list whose names are
    the keys (the API reference's example)."""
    raw = g.get("graders")
    items: list[tuple[str, Any, str | None]]
    if isinstance(raw, Mapping):
        items = [(f"{path}.graders.{k}", v, str(k)) for k, v in raw.items()]
    elif isinstance(raw, list):
        items = [(f"{path}.graders[{i}]", v, None) for i, v in enumerate(raw)]
    else:
        raise _fail(f"{path}.graders", f"expected an object {{name: grader}} or a list, got {_kind(raw)}")
    if not items:
        raise _fail(f"{path}.graders", "empty: a multi grader combines at least one grader")
    out: dict[str, dict[str, Any]] = {}
    for p, v, key in items:
        sub = validate_grader(v, p, in_multi=True, default_name=key)
        k = key if key is not None else sub["name"]
        if k in out:
            raise _fail(p, f"a second sub-grader named {k!r}")
        out[k] = sub
    return out


def walk(grader: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The grader and, for a multi, its sub-graders."""
    return [grader, *grader.get("graders", {}).values()]


def uses_model(grader: Mapping[str, Any]) -> bool:
    return any(g["type"] in MODEL_TYPES for g in walk(grader))


def uses_python(grader: Mapping[str, Any]) -> bool:
    return any(g["type"] == "python" for g in walk(grader))


@dataclass
class EvalDefinition:
    """An exported eval: its name, item schema and graders (normalised).

    Attributes:
        name: the eval's name (``""`` when it has none).
        source: the file it was read from.
        data_source_type: ``custom``, ``logs`` or ``stored_completions``.
        item_schema: the JSON schema of the ``item`` namespace, or ``None``.
        graders: the testing criteria, in order.
    """

    name: str
    source: str
    data_source_type: str
    item_schema: dict[str, Any] | None
    graders: list[dict[str, Any]] = field(default_factory=list)


def _item_schema(dsc: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """``item_schema`` (the create request) or ``schema.properties.item`` (a retrieved eval)."""
    if "item_schema" in dsc:
        s = dsc["item_schema"]
        if not isinstance(s, Mapping):
            raise _fail(f"{path}.item_schema", f"expected a JSON schema object, got {_kind(s)}")
        return dict(s)
    s = dsc.get("schema")
    if s is None:
        return None
    if not isinstance(s, Mapping):
        raise _fail(f"{path}.schema", f"expected a JSON schema object, got {_kind(s)}")
    item = (s.get("properties") or {}).get("item") if isinstance(s.get("properties"), Mapping) else None
    return dict(item) if isinstance(item, Mapping) else None


def parse_definition(raw: Any, source: str = "<definition>") -> EvalDefinition:
    """Check an eval definition object (as ``json.load`` gives it).

    Raises:
        ConfigError: naming ``source`` and the path of the first bad field.
    """
    try:
        if not isinstance(raw, Mapping):
            raise _fail("(top level)", f"expected an object with data_source_config and testing_criteria, "
                                       f"got {_kind(raw)}")
        dsc = raw.get("data_source_config")
        if dsc is None:
            dsc = {"type": "custom"}
        if not isinstance(dsc, Mapping):
            raise _fail("data_source_config", f"expected an object, got {_kind(dsc)}")
        dtype = dsc.get("type", "custom")
        if dtype not in {"custom", "logs", "stored_completions"}:
            raise _fail("data_source_config.type", f"{dtype!r}: use custom, logs or stored_completions")
        schema = _item_schema(dsc, "data_source_config")
        crit = raw.get("testing_criteria")
        if not isinstance(crit, list) or not crit:
            raise _fail("testing_criteria", f"expected a non-empty list of graders, got {_kind(crit)}")
        graders = [validate_grader(g, f"testing_criteria[{i}]") for i, g in enumerate(crit)]
        seen: dict[str, int] = {}
        for i, g in enumerate(graders):
            if g["name"] in seen:
                raise _fail(f"testing_criteria[{i}].name", f"{g['name']!r} is also the name of "
                                                           f"testing_criteria[{seen[g['name']]}]: each grader's "
                                                           "results are stored under its name")
            seen[g["name"]] = i
        name = raw.get("name") or ""
        if not isinstance(name, str):
            raise _fail("name", f"expected text, got {_kind(name)}")
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return EvalDefinition(name=name, source=source, data_source_type=str(dtype), item_schema=schema,
                          graders=graders)

