"""Agent expectations as data: task types, expected tools and trajectories, intent / plan / answer
rubrics, from the run options (``agent``, ``agent_preset``) or a sample's metadata; bundled presets."""

from __future__ import annotations

import copy
import difflib
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.metrics.agent.lookup import _check_source, _get_path, lookup  # noqa: F401
from ragmeter.metrics.agent.matching import Step, reference_calls


def _num(v: Any, where: str, *, low: float | None = 0.0) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise ConfigError(f"{where} must be a number, got {v!r}")
    if low is not None and v < low:
        raise ConfigError(f"{where} must be >= {low}, got {v}")
    return float(v)


def _str_list(v: Any, where: str) -> list[str]:
    if isinstance(v, str):
        return [v]
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{where} must be a list of names, got {v!r}")
    return list(v)


def _keys_ok(d: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    allowed = list(allowed)
    for k in d:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), allowed, n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"{where}: unknown key {k!r}.{hint} Valid: {', '.join(allowed)}")


@dataclass(frozen=True)
class IntentRubric:
    """Points for intent_correctness (defaults: the agent-evaluation guide's 0.4 / 0.3 / 0.3)."""

    entity_points: float = 0.4
    entity_match: str = "contains"
    entity_key: str = "entity"
    type_points: float = 0.3
    type_check: str = "present"
    type_key: str = "type"
    expected_type: tuple[str, ...] = ("metadata.expected_type", "metadata.task_type")
    confidence_key: str = "confidence"
    confidence_points: tuple[tuple[float, float], ...] = ((0.7, 0.3), (0.5, 0.2), (0.3, 0.1))

    @property
    def total(self) -> float:
        return self.entity_points + self.type_points + max((p for _, p in self.confidence_points), default=0.0)


@dataclass(frozen=True)
class KeywordGroup:
    name: str
    any: tuple[str, ...]
    points: float


@dataclass(frozen=True)
class PlanRubric:
    """Points for plan_quality: a size window and keyword groups (substring, case-insensitive)."""

    min_steps: int | None = None
    max_steps: int | None = None
    size_points: float = 0.0
    keywords: tuple[KeywordGroup, ...] = ()

    @property
    def total(self) -> float:
        return self.size_points + sum(g.points for g in self.keywords)


@dataclass(frozen=True)
class Validator:
    field: str
    checks: tuple[tuple[str, Any], ...]
    points: float


@dataclass(frozen=True)
class AnswerRubric:
    """Points for final_answer_quality: field completeness and per-field validity checks."""

    required_fields: tuple[str, ...] = ()
    completeness_points: float = 0.0
    validators: tuple[Validator, ...] = ()

    @property
    def total(self) -> float:
        return self.completeness_points + sum(v.points for v in self.validators)


@dataclass(frozen=True)
class AgentConfig:
    """Agent expectations resolved from run options (preset + overrides). See :func:`agent_config`."""

    task_type: tuple[str, ...] = ("metadata.task_type", "intent.type")
    entity: tuple[str, ...] = ("metadata.expected_entity", "metadata.entity")
    tool_aliases: dict[str, str] = field(default_factory=dict)
    expected_tools: dict[str, frozenset[str]] | frozenset[str] | None = None
    expected_trajectory: dict[str, tuple[str, ...]] | tuple[str, ...] | None = None
    expected_tool_calls: dict[str, tuple[Any, ...]] | tuple[Any, ...] | None = None
    jaccard_weight: float = 0.6
    order_weight: float = 0.4
    intent: IntentRubric = IntentRubric()
    plan: PlanRubric | None = None
    final_answer: AnswerRubric | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def canon(self, name: str) -> str:
        return self.tool_aliases.get(name, name) if self.tool_aliases else name


_TOP_KEYS = ("preset", "task_type", "entity", "tool_aliases", "expected_tools", "expected_trajectory",
             "expected_tool_calls", "trajectory", "intent", "plan", "final_answer")
_CHECKS = ("one_of", "case_insensitive", "min", "max", "min_length", "max_length", "pattern", "type")
_TYPES = {"string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,),
          "list": (list,), "object": (dict,)}


def preset_names() -> list[str]:
    """Names of the bundled agent presets (``ragmeter/data/presets/*.yaml``)."""
    root = resources.files("ragmeter") / "data" / "presets"
    try:
        return sorted(p.name.rsplit(".", 1)[0] for p in root.iterdir() if p.name.endswith((".yaml", ".yml")))
    except FileNotFoundError:
        return []


def load_preset(name_or_path: str) -> dict[str, Any]:
    """A bundled preset by name (``credit_risk``) or a YAML/JSON file of agent expectations."""
    path = Path(name_or_path)
    if path.suffix.lower() in {".yaml", ".yml", ".json"} or path.exists():
        if not path.exists():
            raise ConfigError(f"agent preset file not found: {path}")
        from ragmeter.core.files import read_text

        text = read_text(path, "agent preset")
        where = str(path)
    else:
        res = resources.files("ragmeter") / "data" / "presets" / f"{name_or_path}.yaml"
        if not res.is_file():
            raise ConfigError(f"unknown agent preset {name_or_path!r}; bundled presets: "
                              f"{', '.join(preset_names()) or 'none'} (or give a YAML file)")
        text = res.read_text(encoding="utf-8")
        where = f"preset {name_or_path}"
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: cannot parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: an agent preset must be a mapping")
    return data


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def agent_config(options: Mapping[str, Any] | None) -> AgentConfig:
    """Resolve the agent expectations of a run.

    ``options["agent"]`` (a mapping; its ``preset`` key, or ``options["agent_preset"]``, names a
    bundled preset or a YAML file it is merged over — mappings merge key by key, lists replace).
    Keys: ``task_type`` and ``entity`` (sources, first found wins), ``tool_aliases``,
    ``expected_tools`` (per task type, or one list), ``expected_trajectory`` (one list, or per
    task type), ``expected_tool_calls`` (``[{name, arguments}]``, one list or per task type),
    ``trajectory`` (``jaccard_weight``, ``order_weight``), ``intent``, ``plan``, ``final_answer``
    (rubrics; see ``docs/agent.md``).

    Raises:
        ConfigError: an unknown key (with the closest valid ones), a bad value or an unknown preset.
    """
    options = options or {}
    agent = options.get("agent") or {}
    if not isinstance(agent, Mapping):
        raise ConfigError(f"options.agent must be a mapping, got {type(agent).__name__}{_why_text(agent)}")
    key = json.dumps([agent, options.get("agent_preset")], sort_keys=True, default=str)
    return _agent_config_cached(key)


def _why_text(value: Any) -> str:
    """For text given where a mapping belongs (``--option agent={...}`` that did not parse as
    JSON, so it stayed text): the text and where its JSON goes wrong."""
    if not isinstance(value, str):
        return ""
    shown = value if len(value) <= 60 else value[:57] + "..."
    try:
        json.loads(value)
    except ValueError as exc:
        if value.lstrip().startswith("{"):
            return f" {shown!r}, not JSON: {exc.msg} at character {exc.pos} (quote every name and text)"
    return f" {shown!r}"


@functools.lru_cache(maxsize=64)
def _agent_config_cached(key: str) -> AgentConfig:
    agent, preset_opt = json.loads(key)
    _keys_ok(agent, _TOP_KEYS, "options.agent")
    preset = agent.get("preset") or preset_opt
    raw = _deep_merge(load_preset(preset), agent) if preset else dict(agent)
    raw.pop("preset", None)
    _keys_ok(raw, _TOP_KEYS, f"agent preset {preset}" if preset else "options.agent")
    return _build_config(raw)


def _build_config(raw: dict[str, Any]) -> AgentConfig:
    kw: dict[str, Any] = {"raw": raw}
    for k in ("task_type", "entity"):
        if k in raw:
            kw[k] = tuple(_check_source(s, f"agent.{k}") for s in _str_list(raw[k], f"agent.{k}"))
    aliases = raw.get("tool_aliases") or {}
    if not isinstance(aliases, Mapping) or not all(isinstance(a, str) and isinstance(b, str)
                                                   for a, b in aliases.items()):
        raise ConfigError("agent.tool_aliases must map tool names to tool names")
    kw["tool_aliases"] = dict(aliases)
    canon = lambda n: aliases.get(n, n)  # noqa: E731
    if raw.get("expected_tools") is not None:
        et = raw["expected_tools"]
        if isinstance(et, Mapping):
            kw["expected_tools"] = {str(t): frozenset(canon(n) for n in _str_list(v, f"agent.expected_tools.{t}"))
                                    for t, v in et.items()}
        else:
            kw["expected_tools"] = frozenset(canon(n) for n in _str_list(et, "agent.expected_tools"))
    if raw.get("expected_trajectory") is not None:
        tr = raw["expected_trajectory"]
        if isinstance(tr, Mapping):
            kw["expected_trajectory"] = {str(t): tuple(canon(n) for n in _str_list(v, f"agent.expected_trajectory.{t}"))
                                         for t, v in tr.items()}
        else:
            kw["expected_trajectory"] = tuple(canon(n) for n in _str_list(tr, "agent.expected_trajectory"))
    if raw.get("expected_tool_calls") is not None:
        tc = raw["expected_tool_calls"]

        def calls(v: Any, where: str) -> tuple[Step, ...]:
            return tuple(Step(canon(x.name), x.arguments, x.turn, x.invalid_arguments)
                         for x in reference_calls(v, where))

        if isinstance(tc, Mapping):
            kw["expected_tool_calls"] = {str(t): calls(v, f"agent.expected_tool_calls.{t}") for t, v in tc.items()}
        else:
            kw["expected_tool_calls"] = calls(tc, "agent.expected_tool_calls")
    tj = raw.get("trajectory") or {}
    if not isinstance(tj, Mapping):
        raise ConfigError("agent.trajectory must be a mapping (jaccard_weight, order_weight)")
    _keys_ok(tj, ("jaccard_weight", "order_weight"), "agent.trajectory")
    kw["jaccard_weight"] = _num(tj.get("jaccard_weight", 0.6), "agent.trajectory.jaccard_weight")
    kw["order_weight"] = _num(tj.get("order_weight", 0.4), "agent.trajectory.order_weight")
    if kw["jaccard_weight"] + kw["order_weight"] <= 0:
        raise ConfigError("agent.trajectory: jaccard_weight + order_weight must be > 0")
    kw["intent"] = _intent_rubric(raw.get("intent") or {})
    if raw.get("plan") is not None:
        kw["plan"] = _plan_rubric(raw["plan"])
    if raw.get("final_answer") is not None:
        kw["final_answer"] = _answer_rubric(raw["final_answer"])
    return AgentConfig(**kw)


def _intent_rubric(d: Any) -> IntentRubric:
    if not isinstance(d, Mapping):
        raise ConfigError("agent.intent must be a mapping")
    allowed = [f for f in IntentRubric.__dataclass_fields__]
    _keys_ok(d, allowed, "agent.intent")
    kw: dict[str, Any] = {}
    for k in ("entity_points", "type_points"):
        if k in d:
            kw[k] = _num(d[k], f"agent.intent.{k}")
    for k in ("entity_key", "type_key", "confidence_key"):
        if k in d:
            if not isinstance(d[k], str):
                raise ConfigError(f"agent.intent.{k} must be a key name")
            kw[k] = d[k]
    if "entity_match" in d:
        if d["entity_match"] not in ("contains", "exact", "either"):
            raise ConfigError("agent.intent.entity_match must be contains, exact or either")
        kw["entity_match"] = d["entity_match"]
    if "type_check" in d:
        if d["type_check"] not in ("present", "match"):
            raise ConfigError("agent.intent.type_check must be present or match")
        kw["type_check"] = d["type_check"]
    if "expected_type" in d:
        kw["expected_type"] = tuple(_check_source(s, "agent.intent.expected_type")
                                    for s in _str_list(d["expected_type"], "agent.intent.expected_type"))
    if "confidence_points" in d:
        cp = d["confidence_points"]
        if not isinstance(cp, list) or not all(isinstance(x, list | tuple) and len(x) == 2 for x in cp):
            raise ConfigError("agent.intent.confidence_points must be a list of [threshold, points]")
        pairs = [(_num(t, "confidence threshold", low=None), _num(p, "confidence points")) for t, p in cp]
        kw["confidence_points"] = tuple(sorted(pairs, key=lambda x: -x[0]))
    rub = IntentRubric(**kw)
    if rub.total <= 0:
        raise ConfigError("agent.intent: the points must add up to more than 0")
    return rub


def _plan_rubric(d: Any) -> PlanRubric:
    if not isinstance(d, Mapping):
        raise ConfigError("agent.plan must be a mapping (size, keywords)")
    _keys_ok(d, ("size", "keywords"), "agent.plan")
    kw: dict[str, Any] = {}
    size = d.get("size")
    if size is not None:
        if not isinstance(size, Mapping):
            raise ConfigError("agent.plan.size must be a mapping (min, max, points)")
        _keys_ok(size, ("min", "max", "points"), "agent.plan.size")
        for k, name in (("min", "min_steps"), ("max", "max_steps")):
            if size.get(k) is not None:
                if isinstance(size[k], bool) or not isinstance(size[k], int) or size[k] < 0:
                    raise ConfigError(f"agent.plan.size.{k} must be a non-negative integer")
                kw[name] = size[k]
        kw["size_points"] = _num(size.get("points", 0.0), "agent.plan.size.points")
    groups = []
    for i, g in enumerate(d.get("keywords") or []):
        if not isinstance(g, Mapping):
            raise ConfigError(f"agent.plan.keywords[{i}] must be a mapping (name, any, points)")
        _keys_ok(g, ("name", "any", "points"), f"agent.plan.keywords[{i}]")
        words = _str_list(g.get("any"), f"agent.plan.keywords[{i}].any")
        if not words:
            raise ConfigError(f"agent.plan.keywords[{i}].any is empty")
        groups.append(KeywordGroup(str(g.get("name", f"group{i}")), tuple(w.casefold() for w in words),
                                   _num(g.get("points", 0.0), f"agent.plan.keywords[{i}].points")))
    kw["keywords"] = tuple(groups)
    rub = PlanRubric(**kw)
    if rub.total <= 0:
        raise ConfigError("agent.plan: the points must add up to more than 0")
    return rub


def _answer_rubric(d: Any) -> AnswerRubric:
    if not isinstance(d, Mapping):
        raise ConfigError("agent.final_answer must be a mapping (required_fields, completeness_points, validators)")
    _keys_ok(d, ("required_fields", "completeness_points", "validators"), "agent.final_answer")
    fields = tuple(_str_list(d.get("required_fields") or [], "agent.final_answer.required_fields"))
    cpts = _num(d.get("completeness_points", 0.5 if fields else 0.0), "agent.final_answer.completeness_points")
    if cpts > 0 and not fields:
        raise ConfigError("agent.final_answer: completeness_points needs required_fields")
    vals = d.get("validators") or {}
    items: list[tuple[str, Any]]
    if isinstance(vals, Mapping):
        items = list(vals.items())
    elif isinstance(vals, list):
        items = []
        for i, v in enumerate(vals):
            if not isinstance(v, Mapping) or not isinstance(v.get("field"), str):
                raise ConfigError(f"agent.final_answer.validators[{i}] needs a 'field'")
            items.append((v["field"], {k: x for k, x in v.items() if k != "field"}))
    else:
        raise ConfigError("agent.final_answer.validators must be a mapping field -> checks, or a list")
    validators = []
    for fname, spec in items:
        where = f"agent.final_answer.validators.{fname}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where} must be a mapping of checks and points")
        _keys_ok(spec, (*_CHECKS, "points"), where)
        checks = []
        for k, v in spec.items():
            if k == "points":
                continue
            if k == "one_of" and not isinstance(v, list):
                raise ConfigError(f"{where}.one_of must be a list")
            if k in ("min", "max"):
                _num(v, f"{where}.{k}", low=None)
            if k in ("min_length", "max_length") and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"{where}.{k} must be a non-negative integer")
            if k == "pattern":
                try:
                    re.compile(v)
                except (re.error, TypeError) as exc:
                    raise ConfigError(f"{where}.pattern is not a regular expression: {exc}") from exc
            if k == "type" and v not in _TYPES:
                raise ConfigError(f"{where}.type must be one of {', '.join(_TYPES)}")
            checks.append((k, v))
        if not any(k != "case_insensitive" for k, _ in checks):
            raise ConfigError(f"{where} has no check")
        validators.append(Validator(str(fname), tuple(checks), _num(spec.get("points", 0.0), f"{where}.points")))
    rub = AnswerRubric(fields, cpts, tuple(validators))
    if rub.total <= 0:
        raise ConfigError("agent.final_answer: the points must add up to more than 0")
    return rub
