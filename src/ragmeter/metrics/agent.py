"""Agent metrics (seed 001 made general): intent, plan, tool precision/recall, trajectory, final
answer; the agent-trace reader (our JSONL traces and OpenAI chat-completions message logs) and
per-run execution statistics.

Every expectation — expected tools per task type, expected trajectory, plan keywords, required
output fields and their validators — is data: the run options (``options.agent`` and/or
``options.agent_preset``, e.g. the bundled ``credit_risk`` preset of seed 001) or a sample's
metadata (``expected_tools``, ``expected_trajectory``, ``expected_tool_calls`` ...). See
``docs/agent.md``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragmeter.errors import ConfigError
from ragmeter.metrics.base import MetricSpec, metric, register_metric
from ragmeter.schema import AgentTrace, Sample, Score, ToolCall

# =============================================================================================
# Reading traces
# =============================================================================================

#: canonical AgentTrace field -> accepted keys of a JSONL trace object (first present wins).
TRACE_ALIASES: dict[str, tuple[str, ...]] = {
    "intent": ("intent", "parsed_intent"),
    "plan": ("plan", "task_plan"),
    "tool_calls": ("tool_calls", "tools_used", "tools"),
    "trajectory": ("trajectory", "executed_nodes", "steps"),
    "final_output": ("final_output", "final_answer", "assessment", "output"),
    "step_count": ("step_count", "n_steps"),
    "latency_ms": ("latency_ms", "total_latency_ms"),
    "input_text": ("input_text",),
    "final_text": ("final_text",),
}
_ALL_TRACE_KEYS = {k for names in TRACE_ALIASES.values() for k in names} | {"messages"}
_PLAN_ITEM_KEYS = ("action", "step", "description", "name", "task", "agent")
_STEP_ITEM_KEYS = ("name", "node", "step")
_ROLES = {"human": "user", "ai": "assistant", "model": "assistant"}


def parse_trace(value: Any) -> AgentTrace:
    """Read an agent trace from any of the supported shapes.

    Accepted:

    - an :class:`~ragmeter.schema.AgentTrace` (returned as is);
    - our JSONL object: ``intent`` (``entity``, ``type``, ``confidence``), ``plan`` (strings, or
      objects with ``action``/``step``/``description``), ``tool_calls`` (objects with ``name``,
      ``arguments``, ``result``, ``latency_ms``, ``error``; or plain tool names; or OpenAI
      ``{"function": {"name", "arguments"}}`` items), ``trajectory`` (step names),
      ``final_output`` (an object; a JSON string is parsed), ``step_count``, ``latency_ms``;
      a few aliases are accepted (:data:`TRACE_ALIASES`);
    - an OpenAI chat-completions message list — assistant ``tool_calls`` (and the legacy
      ``function_call``), ``tool`` / ``function`` result messages matched by ``tool_call_id``;
      Anthropic-style ``tool_use`` / ``tool_result`` content blocks are read too — or an object
      with such a list under ``messages`` (its other keys are read as above and win);
    - a JSON string of any of these.

    From a message list: ``tool_calls`` in order, each with the ``turn`` (index of the assistant
    message) that issued it; ``step_count`` = number of assistant messages; ``input_text`` = the
    first user message; ``final_text`` = the last assistant message when it calls no tool;
    ``final_output`` = that text parsed as a JSON object, when it is one (a fenced ```json block
    is accepted). Tool arguments that are not valid JSON are kept in ``arguments_raw`` (the call
    then matches no expected arguments except under ``tool_args="ignore"``).

    Raises:
        ValueError, TypeError: the value has none of these shapes (the dataset reader turns this
            into a ``DatasetError`` naming the file, line and field).

    Example:
        >>> t = parse_trace([{"role": "user", "content": "Weather in SF?"},
        ...                  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        ...                   "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"SF\\"}"}}]},
        ...                  {"role": "tool", "tool_call_id": "c1", "content": "80F, sunny"},
        ...                  {"role": "assistant", "content": "It is 80F and sunny."}])
        >>> [(c.name, c.arguments, c.result) for c in t.tool_calls], t.final_text
        ([('get_weather', {'city': 'SF'}, '80F, sunny')], 'It is 80F and sunny.')
    """
    if isinstance(value, AgentTrace):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a trace given as text must be JSON ({exc.msg})") from exc
    if isinstance(value, list):
        fields = _from_messages(value)
    elif isinstance(value, Mapping):
        fields = _from_messages(value["messages"]) if value.get("messages") is not None else {}
        fields.update(_from_object(value))
    else:
        raise TypeError(f"expected a trace object or a list of chat messages, got {type(value).__name__}")
    try:
        return AgentTrace.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _first(d: Mapping[str, Any], names: Sequence[str]) -> tuple[str | None, Any]:
    for n in names:
        if n in d and d[n] is not None:
            return n, d[n]
    return None, None


def _from_object(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for canon, names in TRACE_ALIASES.items():
        key, v = _first(d, names)
        if key is None:
            continue
        if canon == "intent":
            if not isinstance(v, Mapping):
                raise ValueError(f"'{key}' must be an object (entity, type, confidence), got {type(v).__name__}")
            out["intent"] = dict(v)
        elif canon == "plan":
            out["plan"] = [_item_text(x, _PLAN_ITEM_KEYS, key, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "tool_calls":
            out["tool_calls"] = [_tool_call(x, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "trajectory":
            out["trajectory"] = [_item_text(x, _STEP_ITEM_KEYS, key, i) for i, x in enumerate(_as_list(v, key))]
        elif canon == "final_output":
            if isinstance(v, str):
                obj = _json_object(v)
                if obj is not None:
                    out["final_output"] = obj
                else:
                    out.setdefault("final_text", v)
            elif isinstance(v, Mapping):
                out["final_output"] = dict(v)
            else:
                raise ValueError(f"'{key}' must be an object or JSON text, got {type(v).__name__}")
        else:
            out[canon] = v
    for k, v in d.items():  # anything else is kept on the trace (AgentTrace allows extras)
        if k not in _ALL_TRACE_KEYS:
            out[k] = v
    return out


def _as_list(v: Any, key: str) -> list[Any]:
    if not isinstance(v, list | tuple):
        raise ValueError(f"'{key}' must be a list, got {type(v).__name__}")
    return list(v)


def _item_text(x: Any, keys: Sequence[str], where: str, i: int) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        _, v = _first(x, keys)
        if isinstance(v, str):
            return v
        raise ValueError(f"'{where}' item {i} has none of the keys {list(keys)}")
    if isinstance(x, int | float) and not isinstance(x, bool):
        return str(x)
    raise ValueError(f"'{where}' item {i} should be text or an object, got {type(x).__name__}")


def _parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool arguments as a dict, plus the raw text when it is not a JSON object."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if isinstance(raw, str):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            return {}, raw
        return (dict(obj), None) if isinstance(obj, dict) else ({}, raw)
    return {}, json.dumps(raw, default=str)


def _tool_call(item: Any, i: int, turn: int | None = None) -> dict[str, Any]:
    if isinstance(item, str):
        return {"name": item, "turn": turn}
    if not isinstance(item, Mapping):
        raise ValueError(f"tool call {i} should be an object or a tool name, got {type(item).__name__}")
    if isinstance(item.get("function"), Mapping):  # OpenAI {"id", "type": "function", "function": {...}}
        fn = item["function"]
        out: dict[str, Any] = {"name": fn.get("name"), "id": item.get("id")}
        args = fn.get("arguments")
    elif item.get("type") == "tool_use":  # Anthropic content block
        out = {"name": item.get("name"), "id": item.get("id")}
        args = item.get("input")
    else:
        _, name = _first(item, ("name", "tool", "tool_name"))
        _, args = _first(item, ("arguments", "args", "input", "parameters"))
        _, result = _first(item, ("result", "output", "response"))
        out = {"name": name, "id": item.get("id"), "result": result,
               "latency_ms": item.get("latency_ms"), "error": item.get("error"),
               "turn": item.get("turn")}
    if not isinstance(out.get("name"), str) or not out["name"]:
        raise ValueError(f"tool call {i} has no name")
    out["arguments"], raw = _parse_arguments(args)
    if raw is not None:
        out["arguments_raw"] = raw
    if turn is not None:
        out["turn"] = turn
    if out.get("error") is not None and not isinstance(out["error"], str):
        out["error"] = json.dumps(out["error"], default=str)
    return {k: v for k, v in out.items() if v is not None}


def _text(content: Any) -> str | None:
    """The text of a message's content (a string or a list of content parts)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content
                 if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type", "text") == "text")]
        parts = [p for p in parts if isinstance(p, str)]
        return "".join(parts) if parts else None
    return str(content)


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def _json_object(text: str) -> dict[str, Any] | None:
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _result_value(content: Any) -> Any:
    text = _text(content) if isinstance(content, list) else content
    if isinstance(text, str) and text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _from_messages(msgs: Any) -> dict[str, Any]:
    if not isinstance(msgs, list):
        raise ValueError(f"'messages' must be a list of chat messages, got {type(msgs).__name__}")
    calls: list[dict[str, Any]] = []
    answered: set[int] = set()
    input_text: str | None = None
    final_text: str | None = None
    turn = -1

    def attach(call_id: Any, content: Any, *, name: Any = None, error: Any = None,
               latency: Any = None) -> None:
        idx = next((j for j, c in enumerate(calls) if call_id and c.get("id") == call_id), None)
        if idx is None:  # no usable id: the earliest unanswered call (of that name, if given)
            idx = next((j for j, c in enumerate(calls)
                        if j not in answered and (name is None or c["name"] == name)), None)
        if idx is None:
            return
        answered.add(idx)
        calls[idx]["result"] = _result_value(content)
        if error:
            calls[idx]["error"] = error if isinstance(error, str) else (_text(content) or "error")
        if isinstance(latency, int | float) and not isinstance(latency, bool):
            calls[idx]["latency_ms"] = float(latency)

    for i, m in enumerate(msgs):
        if not isinstance(m, Mapping):
            raise ValueError(f"message {i} should be an object, got {type(m).__name__}")
        role = m.get("role") or m.get("type")
        if not isinstance(role, str):
            raise ValueError(f"message {i} has no role (expected chat messages with 'role': user, "
                             "assistant, tool ...)")
        role = _ROLES.get(role, role)
        content = m.get("content")
        if role == "user":
            blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"] \
                if isinstance(content, list) else []
            for b in blocks:
                attach(b.get("tool_use_id"), b.get("content"), error=b.get("is_error"))
            text = _text(content)
            if input_text is None and text:
                input_text = text
        elif role == "assistant":
            turn += 1
            new = [_tool_call(tc, len(calls) + j, turn) for j, tc in enumerate(m.get("tool_calls") or [])]
            if isinstance(m.get("function_call"), Mapping):
                new.append(_tool_call({"function": m["function_call"]}, len(calls) + len(new), turn))
            if isinstance(content, list):
                new.extend(_tool_call(b, len(calls) + len(new), turn) for b in content
                           if isinstance(b, Mapping) and b.get("type") == "tool_use")
            calls.extend(new)
            final_text = None if new else _text(content)
        elif role in ("tool", "function"):
            attach(m.get("tool_call_id"), content, name=m.get("name") if role == "function" else None,
                   error=m.get("error") or m.get("is_error"), latency=m.get("latency_ms"))
    out: dict[str, Any] = {"tool_calls": calls, "step_count": turn + 1}
    if input_text is not None:
        out["input_text"] = input_text
    if final_text is not None:
        out["final_text"] = final_text
        obj = _json_object(final_text)
        if obj is not None:
            out["final_output"] = obj
    return out


# =============================================================================================
# Expectations (config)
# =============================================================================================

_SOURCE_ROOTS = ("metadata", "intent", "final_output", "trace")
_SAMPLE_FIELDS = ("question", "answer", "reference", "id")


def _check_source(src: Any, where: str) -> str:
    if not isinstance(src, str) or not src:
        raise ConfigError(f"{where}: a source must be a text like 'metadata.company', got {src!r}")
    root = src.split(".", 1)[0]
    if src in _SAMPLE_FIELDS or (root in _SOURCE_ROOTS and "." in src):
        return src
    raise ConfigError(f"{where}: unknown source {src!r}; use metadata.KEY, intent.KEY, "
                      f"final_output.KEY, trace.KEY, question, answer or reference")


def _get_path(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if isinstance(cur, Mapping):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
        if cur is None:
            return None
    return cur


def lookup(sample: Sample, source: str) -> Any:
    """The value a source names for a sample (``None`` when absent).

    Sources: ``metadata.KEY``, ``intent.KEY``, ``final_output.KEY``, ``trace.FIELD`` (dotted
    paths go deeper), ``question``, ``answer``, ``reference``, ``id``.
    """
    if source in _SAMPLE_FIELDS:
        return getattr(sample, source)
    root, _, rest = source.partition(".")
    trace = sample.trace
    if root == "metadata":
        return _get_path(sample.metadata, rest)
    if trace is None:
        return None
    if root == "intent":
        return _get_path(trace.intent or {}, rest)
    if root == "final_output":
        return _get_path(trace.final_output or {}, rest)
    if root == "trace":
        return _get_path(trace.model_dump(mode="json"), rest)
    return None


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
    """Points for intent_correctness (defaults: seed 001's 0.4 / 0.3 / 0.3)."""

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
        text = path.read_text(encoding="utf-8")
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
        raise ConfigError(f"options.agent must be a mapping, got {type(agent).__name__}")
    key = json.dumps([agent, options.get("agent_preset")], sort_keys=True, default=str)
    return _agent_config_cached(key)


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


def _check_config(ctx: Any, **_: Any) -> str | None:
    agent_config(ctx.options)  # raises ConfigError before any work when the expectations are invalid
    return None


# =============================================================================================
# The formulas, as plain functions
# =============================================================================================

def tool_precision(selected: Iterable[str], expected: Iterable[str]) -> float:
    """Tool choice correctness: the share of the distinct tools the agent called that were expected.

    ``|expected ∩ selected| / |selected|`` over sets of tool names (a tool called twice counts
    once, as in seed 001). Range [0, 1].

    Edge cases: no tool selected -> 0.0 when tools were expected (seed 001), 1.0 when none were.

    Example (seed 001, Apple): ``tool_precision({"SEC", "Market", "Web", "Legal"},
    {"SEC", "Market", "Web"})`` -> 0.75.
    """
    sel, exp = set(selected), set(expected)
    if not sel:
        return 1.0 if not exp else 0.0
    return len(sel & exp) / len(sel)


def tool_recall(selected: Iterable[str], expected: Iterable[str]) -> float:
    """Tool completeness: the share of the expected tools the agent called.

    ``|expected ∩ selected| / |expected|`` over sets of tool names. Range [0, 1].

    Edge case: nothing expected -> 1.0 (nothing was missed; seed 001's ``else 0.0`` never applies
    to its own table, where every task type expects tools).

    Example (seed 001, private company): ``tool_recall({"Web", "SEC"}, {"Web", "Legal"})`` -> 0.5.
    """
    sel, exp = set(selected), set(expected)
    if not exp:
        return 1.0
    return len(sel & exp) / len(exp)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """``|A ∩ B| / |A ∪ B|`` of two sets of names; 1.0 when both are empty."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def order_pairs(actual: Sequence[str], expected: Sequence[str]) -> tuple[int, int]:
    """``(correct, total)`` consecutive-step pairs of ``actual`` judged against ``expected``.

    A pair is two consecutive steps ``(actual[i], actual[i+1])`` that both occur in ``expected``
    (pairs touching a step the expected trajectory lacks are not judged, and do not bridge over
    it); it is correct when the second step comes strictly later in ``expected`` than the first
    (position = first occurrence). A repeated step ``(a, a)`` is therefore out of order. This is
    seed 001's "consecutive steps maintain expected order", as its implementation computes it.
    """
    pos: dict[str, int] = {}
    for i, s in enumerate(expected):
        pos.setdefault(s, i)
    correct = total = 0
    for a, b in zip(actual, actual[1:], strict=False):
        if a in pos and b in pos:
            total += 1
            correct += pos[b] > pos[a]
    return correct, total


def order_score(actual: Sequence[str], expected: Sequence[str]) -> float:
    """``correct_order_pairs / total_pairs`` (see :func:`order_pairs`), in [0, 1].

    When no pair can be judged: 1.0 if the expected trajectory has fewer than two distinct steps
    and the agent ran it (there is no order to keep), else 0.0 (no evidence of the expected order;
    seed 001 gives 0.0).
    """
    return _order_value(*order_pairs(actual, expected), actual, expected)


def _order_value(correct: int, total: int, actual: Sequence[str], expected: Sequence[str]) -> float:
    if total:
        return correct / total
    return 1.0 if len(set(expected)) < 2 and set(actual) & set(expected) else 0.0


def trajectory_score(actual: Sequence[str], expected: Sequence[str], *, jaccard_weight: float = 0.6,
                     order_weight: float = 0.4) -> float:
    """Seed 001's trajectory match: ``jaccard_weight * J + order_weight * O``, divided by the
    sum of the weights (1.0 for the seed's 0.6 + 0.4).

    ``J`` = :func:`jaccard` of the step-name sets; ``O`` = :func:`order_score`. Range [0, 1].

    Example:
        >>> exp = ["parse", "plan", "fetch", "synthesize"]
        >>> trajectory_score(["parse", "fetch", "plan", "synthesize"], exp)  # J = 1, O = 2/3
        0.8666666666666667
    """
    j = jaccard(actual, expected)
    o = order_score(actual, expected)
    return (jaccard_weight * j + order_weight * o) / (jaccard_weight + order_weight)


def intent_score(intent: Mapping[str, Any], expected_entity: str | None, rubric: IntentRubric = IntentRubric(),
                 expected_type: str | None = None) -> tuple[float, dict[str, Any]]:
    """Intent correctness: did the agent understand the request? Returns ``(score, details)``.

    Points (seed 001 defaults), divided by their total (1.0 for the defaults):

    - entity (0.4): the expected entity is found in the parsed one, case-insensitively
      (``entity_match``: ``contains`` = expected in parsed, as seed 001; ``exact``; ``either``
      = one contains the other);
    - type (0.3): a type was identified (``type_check: present``, seed 001) or equals the
      expected type (``match``);
    - confidence (up to 0.3): the points of the first threshold the parse confidence exceeds
      strictly (> 0.7: 0.3, > 0.5: 0.2, > 0.3: 0.1).

    A missing or non-numeric confidence earns no confidence points.
    """
    earned = 0.0
    parsed = intent.get(rubric.entity_key)
    ok_entity = False
    if isinstance(parsed, str) and isinstance(expected_entity, str):
        p, e = parsed.casefold().strip(), expected_entity.casefold().strip()
        ok_entity = {"contains": e in p, "exact": e == p, "either": e in p or p in e}[rubric.entity_match]
    earned += rubric.entity_points * ok_entity
    t = intent.get(rubric.type_key)
    if rubric.type_check == "present":
        ok_type = t is not None and t != ""
    else:
        ok_type = t is not None and expected_type is not None and str(t).casefold() == str(expected_type).casefold()
    earned += rubric.type_points * ok_type
    conf = intent.get(rubric.confidence_key)
    conf_pts = 0.0
    if isinstance(conf, int | float) and not isinstance(conf, bool):
        conf_pts = next((p for thr, p in rubric.confidence_points if conf > thr), 0.0)
    earned += conf_pts
    details = {"entity": parsed, "expected_entity": expected_entity, "entity_ok": ok_entity,
               "type": t, "type_ok": ok_type, "confidence": conf, "confidence_points": conf_pts}
    if rubric.type_check == "match":
        details["expected_type"] = expected_type
    return _clean(earned / rubric.total), details


def plan_score(plan: Sequence[str], rubric: PlanRubric) -> tuple[float, dict[str, Any]]:
    """Plan quality: ``(size points + keyword-group points) / total points``.

    Size points when ``min <= len(plan) <= max``; a keyword group's points when any plan step
    contains any of its keywords (substring, case-insensitive; seed 001 checks "data", "fetch",
    "search" for data gathering and "analy", "synthe" for analysis). An empty plan scores 0.
    """
    n = len(plan)
    earned = 0.0
    size_ok = None
    if rubric.size_points or rubric.min_steps is not None or rubric.max_steps is not None:
        size_ok = (rubric.min_steps is None or n >= rubric.min_steps) and \
                  (rubric.max_steps is None or n <= rubric.max_steps)
        earned += rubric.size_points * size_ok
    steps = [s.casefold() for s in plan]
    groups = {}
    for g in rubric.keywords:
        hit = any(w in s for s in steps for w in g.any)
        groups[g.name] = hit
        earned += g.points * hit
    return _clean(earned / rubric.total), {"steps": n, "size_ok": size_ok, "groups": groups}


def _check_value(value: Any, checks: Sequence[tuple[str, Any]]) -> tuple[bool, str | None]:
    if value is None:
        return False, "missing"
    ci = dict(checks).get("case_insensitive", False)
    for k, v in checks:
        if k == "one_of":
            if ci and isinstance(value, str):
                ok = value.casefold() in {str(x).casefold() for x in v}
            else:
                # True == 1 in Python; a boolean only equals a boolean here
                ok = any(value == x and isinstance(value, bool) == isinstance(x, bool) for x in v)
            if not ok:
                return False, f"not one of {v}"
        elif k in ("min", "max"):
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                return False, "not a number"
            if (k == "min" and value < v) or (k == "max" and value > v):
                return False, f"{value} {'<' if k == 'min' else '>'} {v}"
        elif k in ("min_length", "max_length"):
            if not isinstance(value, str | list | dict):
                return False, "has no length"
            if (k == "min_length" and len(value) < v) or (k == "max_length" and len(value) > v):
                return False, f"length {len(value)} outside the limit {v}"
        elif k == "pattern":
            if not isinstance(value, str) or re.fullmatch(v, value) is None:
                return False, f"does not match {v}"
        elif k == "type":
            ok = isinstance(value, _TYPES[v]) and not (v in ("number", "integer") and isinstance(value, bool))
            if not ok:
                return False, f"not of type {v}"
    return True, None


def final_answer_score(output: Mapping[str, Any], rubric: AnswerRubric) -> tuple[float, dict[str, Any]]:
    """Final answer quality: ``(completeness * completeness_points + points of passed validators)
    / total points``.

    ``completeness`` = share of the required fields present (key present with a non-null value;
    dotted names reach into nested objects). A validator's points are earned when its field is
    present and passes every check: ``one_of`` (with ``case_insensitive``), ``min`` / ``max``
    (numbers, inclusive), ``min_length`` / ``max_length`` (text or list), ``pattern`` (regex, full
    match), ``type`` (string, number, integer, boolean, list, object).

    Seed 001: 0.5 completeness over five fields; risk level in {low, moderate, high, critical}
    0.15; credit score in [0, 100] 0.15; confidence in [0, 1] 0.10; reasoning longer than 50
    characters 0.10.
    """
    present = [f for f in rubric.required_fields if _get_path(output, f) is not None]
    completeness = len(present) / len(rubric.required_fields) if rubric.required_fields else 0.0
    earned = completeness * rubric.completeness_points
    checks: dict[str, Any] = {}
    for v in rubric.validators:
        ok, why = _check_value(_get_path(output, v.field), v.checks)
        checks[v.field] = True if ok else why
        earned += v.points * ok
    missing = [f for f in rubric.required_fields if f not in present]
    return _clean(earned / rubric.total), {"completeness": completeness, "missing_fields": missing,
                                           "checks": checks}


def _clean(x: float) -> float:
    # drop binary floating-point noise (0.30000000000000004 -> 0.3); sums of points are decimals
    return round(x, 12)


# ---- trajectory matching modes (agentevals-style) -------------------------------------------

@dataclass(frozen=True)
class Step:
    """A tool call (or trajectory step) to match: name, arguments (``None`` = any), turn."""

    name: str
    arguments: dict[str, Any] | None = None
    turn: int | None = None
    invalid_arguments: bool = False


def reference_calls(value: Any, where: str = "expected_tool_calls") -> list[Step]:
    """Expected tool calls from ``[{name, arguments}]``, tool names, or an OpenAI message list.

    An item without ``arguments`` matches any arguments; ``{"arguments": {}}`` means none.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of tool calls, got {type(value).__name__}")
    if value and all(isinstance(m, Mapping) and ("role" in m or m.get("type") in ("ai", "human", "tool"))
                     for m in value):
        try:
            trace = parse_trace(value)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        return [Step(c.name, dict(c.arguments), c.turn, bool((c.model_extra or {}).get("arguments_raw")))
                for c in trace.tool_calls]
    out = []
    for i, item in enumerate(value):
        try:
            d = _tool_call(item, i)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        has_args = isinstance(item, Mapping) and (
            any(k in item for k in ("arguments", "args", "input", "parameters"))
            or isinstance(item.get("function"), Mapping) and "arguments" in item["function"])
        out.append(Step(d["name"], d["arguments"] if has_args else None, d.get("turn"),
                        "arguments_raw" in d))
    return out


def _steps_of(calls: Sequence[ToolCall], canon: Any = None) -> list[Step]:
    canon = canon or (lambda n: n)
    return [Step(canon(c.name), dict(c.arguments), c.turn, bool((c.model_extra or {}).get("arguments_raw")))
            for c in calls]


ARG_MODES = ("exact", "ignore", "subset", "superset")
MATCH_MODES = ("jaccard_order", "strict", "unordered", "subset", "superset")


def _args_match(out: Step, ref: Step, mode: str | list[str]) -> bool:
    if ref.arguments is None or mode == "ignore":
        return True
    if out.invalid_arguments or ref.invalid_arguments:
        return False
    a, r = out.arguments or {}, ref.arguments
    if isinstance(mode, list):
        return all(_get_path(a, k) == _get_path(r, k) for k in mode)
    if mode == "exact":
        return a == r
    if mode == "subset":  # the call's arguments are a subset of the expected ones
        return all(k in r and r[k] == v for k, v in a.items())
    return all(k in a and a[k] == v for k, v in r.items())  # superset


def _matcher(tool_args: str, overrides: Mapping[str, Any] | None) -> Any:
    def match(out: Step, ref: Step) -> bool:
        mode = (overrides or {}).get(ref.name, tool_args)
        return out.name == ref.name and _args_match(out, ref, mode)
    return match


def _max_matching(left: Sequence[Step], right: Sequence[Step], match: Any) -> int:
    """Size of a maximum bipartite matching (augmenting paths; traces are small)."""
    adj = [[j for j, r in enumerate(right) if match(l_, r)] for l_ in left]
    owner: list[int | None] = [None] * len(right)

    def augment(i: int, seen: set[int]) -> bool:
        for j in adj[i]:
            if j in seen:
                continue
            seen.add(j)
            if owner[j] is None or augment(owner[j], seen):  # type: ignore[arg-type]
                owner[j] = i
                return True
        return False

    return sum(augment(i, set()) for i in range(len(left)))


def match_trajectory(actual: Sequence[Step], expected: Sequence[Step], mode: str = "strict",
                     tool_args: str = "exact",
                     tool_args_overrides: Mapping[str, str | list[str]] | None = None) -> tuple[bool, str | None]:
    """Does the agent's tool-call trajectory match the expected one? Returns ``(matched, why_not)``.

    Modes (as agentevals' trajectory match evaluators):

    - ``strict``: the same calls in the same order, one for one. Calls issued in parallel (the
      same ``turn`` on either side) may come in any order among themselves.
    - ``unordered``: the same calls, in any order (a one-to-one pairing exists).
    - ``subset``: every call the agent made is an expected call (distinct ones); it may skip some.
    - ``superset``: every expected call was made (by distinct calls); extra calls are allowed.

    Two calls pair when their names are equal and their arguments match under ``tool_args``:
    ``exact`` (equal), ``ignore``, ``subset`` (the call's arguments are a subset of the expected
    ones), ``superset`` (a superset); ``tool_args_overrides`` sets the mode per tool name, or a
    list of argument keys (dotted paths) that must be equal. An expected call without arguments
    matches any. Pairings use a maximum matching, so a valid pairing is never missed (agentevals
    scans greedily, which can miss one under ``ignore``/``subset``/``superset`` arguments).
    """
    if mode not in MATCH_MODES[1:]:
        raise ConfigError(f"trajectory match mode must be one of {', '.join(MATCH_MODES)}, got {mode!r}")
    if tool_args not in ARG_MODES:
        raise ConfigError(f"tool_args must be one of {', '.join(ARG_MODES)}, got {tool_args!r}")
    match = _matcher(tool_args, tool_args_overrides)
    na, ne = len(actual), len(expected)
    if mode == "strict":
        if na != ne:
            return False, f"expected {ne} tool calls, got {na}"
        start = 0
        for p in range(1, na + 1):
            cont = p < na and ((actual[p].turn is not None and actual[p].turn == actual[p - 1].turn)
                               or (expected[p].turn is not None and expected[p].turn == expected[p - 1].turn))
            if cont:
                continue
            a, e = actual[start:p], expected[start:p]
            if _max_matching(a, e, match) < len(a):
                names = [s.name for s in a]
                return False, f"calls {start + 1}-{p} {names} do not match the expected {[s.name for s in e]}"
            start = p
        return True, None
    m = _max_matching(actual, expected, match)
    if mode == "unordered":
        ok = m == na == ne
    elif mode == "subset":
        ok = m == na
    else:
        ok = m == ne
    if ok:
        return True, None
    if mode in ("unordered", "superset") and m < ne:
        return False, f"{ne - m} expected call(s) not made (or with other arguments)"
    return False, f"{na - m} call(s) not in the expected trajectory (or with other arguments)"


# =============================================================================================
# Metrics
# =============================================================================================

def _task_type(sample: Sample, cfg: AgentConfig) -> str | None:
    for src in cfg.task_type:
        v = lookup(sample, src)
        if v is not None and v != "":
            return str(v)
    return None


def _expected_tools(sample: Sample, cfg: AgentConfig) -> tuple[frozenset[str] | None, dict[str, Any], str | None]:
    meta = sample.metadata.get("expected_tools")
    if meta is not None:
        if not isinstance(meta, list) or not all(isinstance(x, str) for x in meta):
            return None, {}, "metadata.expected_tools must be a list of tool names"
        return frozenset(cfg.canon(n) for n in meta), {"source": "metadata.expected_tools"}, None
    if cfg.expected_tools is None:
        return None, {}, ("no expected tools: set options.agent.expected_tools (per task type), "
                          "an agent_preset, or metadata.expected_tools")
    if isinstance(cfg.expected_tools, frozenset):
        return cfg.expected_tools, {"source": "agent.expected_tools"}, None
    t = _task_type(sample, cfg)
    if t is None:
        return None, {}, f"no task type for this sample (looked at {', '.join(cfg.task_type)})"
    if t not in cfg.expected_tools:
        return None, {"task_type": t}, (f"no expected tools for task type {t!r} "
                                        f"(known: {', '.join(sorted(cfg.expected_tools))})")
    return cfg.expected_tools[t], {"source": "agent.expected_tools", "task_type": t}, None


def _tool_scores(samples: Sequence[Sample], ctx: Any, which: str) -> list[Score]:
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        expected, info, why = _expected_tools(s, cfg)
        if expected is None:
            out.append(Score.missing(why or "no expected tools", details=info or None))
            continue
        selected = {cfg.canon(c.name) for c in s.trace.tool_calls}
        details = {**info, "expected": sorted(expected), "selected": sorted(selected),
                   "correct": sorted(selected & expected)}
        if which == "precision":
            details["unexpected"] = sorted(selected - expected)
            out.append(Score(tool_precision(selected, expected), details=details))
        else:
            details["missing"] = sorted(expected - selected)
            out.append(Score(tool_recall(selected, expected), details=details))
    return out


@metric("tool_choice_correctness", family="agent", requires=("trace",), check=_check_config,
        aliases=("tool_precision",))
def tool_choice_correctness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Tool choice correctness (precision): the share of the distinct tools the agent called that
    the task needed, ``|expected ∩ selected| / |selected|`` (seed 001; see :func:`tool_precision`).

    Expected tools come from ``metadata.expected_tools``, else ``options.agent.expected_tools``
    for the sample's task type (``agent.task_type`` sources: ground truth first, then the type the
    agent parsed). No expectation for a sample -> no value, with the reason. Tool names are mapped
    through ``agent.tool_aliases``.
    """
    return _tool_scores(samples, ctx, "precision")


@metric("tool_completeness", family="agent", requires=("trace",), check=_check_config,
        aliases=("tool_recall",))
def tool_completeness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Tool completeness (recall): the share of the expected tools the agent called,
    ``|expected ∩ selected| / |expected|`` (seed 001; see :func:`tool_recall`).

    Expected tools are resolved as for ``tool_choice_correctness``.
    """
    return _tool_scores(samples, ctx, "recall")


def _reference(sample: Sample, cfg: AgentConfig) -> tuple[list[Step] | None, str, str | None]:
    """The expected trajectory: ``(steps, kind, why_missing)``; kind is ``calls`` or ``steps``."""
    meta = sample.metadata
    t = None
    try:
        if meta.get("expected_tool_calls") is not None:
            return [Step(cfg.canon(s.name), s.arguments, s.turn, s.invalid_arguments)
                    for s in reference_calls(meta["expected_tool_calls"], "metadata.expected_tool_calls")], \
                "calls", None
    except ConfigError as exc:
        return None, "calls", str(exc)
    if meta.get("expected_trajectory") is not None:
        tr = meta["expected_trajectory"]
        if not isinstance(tr, list) or not all(isinstance(x, str) for x in tr):
            return None, "steps", "metadata.expected_trajectory must be a list of step names"
        return [Step(cfg.canon(n)) for n in tr], "steps", None
    for attr, kind in (("expected_tool_calls", "calls"), ("expected_trajectory", "steps")):
        val = getattr(cfg, attr)
        if val is None:
            continue
        if isinstance(val, dict):
            t = _task_type(sample, cfg)
            if t is None or t not in val:
                continue
            val = val[t]
        return _config_steps(val), kind, None
    why = "no expected trajectory: set options.agent.expected_trajectory (or expected_tool_calls), " \
          "an agent_preset, or metadata.expected_trajectory"
    if t is not None:
        why += f" (none for task type {t!r})"
    return None, "steps", why


def _config_steps(val: tuple[Any, ...]) -> list[Step]:
    # config expectations are canonical already (tool aliases applied in _build_config)
    return [v if isinstance(v, Step) else Step(v) for v in val]


def _actual(trace: AgentTrace, kind: str, cfg: AgentConfig) -> list[Step]:
    if kind == "steps" and trace.trajectory is not None:
        return [Step(cfg.canon(n)) for n in trace.trajectory]
    return _steps_of(trace.tool_calls, cfg.canon)


def _check_trajectory(ctx: Any, mode: str = "jaccard_order", tool_args: str = "exact",
                      tool_args_overrides: Any = None, **_: Any) -> str | None:
    agent_config(ctx.options)
    if mode not in MATCH_MODES:
        raise ConfigError(f"trajectory_match mode must be one of {', '.join(MATCH_MODES)}, got {mode!r}")
    if tool_args not in ARG_MODES:
        raise ConfigError(f"trajectory_match tool_args must be one of {', '.join(ARG_MODES)}, got {tool_args!r}")
    if tool_args_overrides is not None:
        if not isinstance(tool_args_overrides, Mapping) or not all(
                v in ARG_MODES or (isinstance(v, list) and all(isinstance(k, str) for k in v))
                for v in tool_args_overrides.values()):
            raise ConfigError("trajectory_match tool_args_overrides must map tool names to an argument "
                              f"mode ({', '.join(ARG_MODES)}) or a list of argument keys")
    return None


@metric("trajectory_match", family="agent", requires=("trace",), check=_check_trajectory, param="mode",
        defaults={"mode": "jaccard_order", "tool_args": "exact", "tool_args_overrides": None})
def trajectory_match(samples: Sequence[Sample], ctx: Any, mode: str = "jaccard_order", tool_args: str = "exact",
                     tool_args_overrides: Mapping[str, Any] | None = None) -> list[Score]:
    """Trajectory match: did the agent follow the expected path?

    ``mode="jaccard_order"`` (default, seed 001): ``0.6 * J + 0.4 * O`` (weights from
    ``agent.trajectory``), where ``J`` is the Jaccard similarity of the sets of step names and
    ``O`` = correct_order_pairs / total_pairs: over consecutive steps ``(a, b)`` of the agent's
    trajectory that both occur in the expected trajectory, the share where ``b`` comes strictly
    later than ``a`` in the expected trajectory (see :func:`order_pairs`, :func:`order_score`).

    ``mode`` = ``strict`` | ``unordered`` | ``subset`` | ``superset`` (``trajectory_match@strict``):
    1.0 when the agent's tool calls match the expected ones in that sense, else 0.0, with
    tool-argument matching ``tool_args`` = ``exact`` | ``ignore`` | ``subset`` | ``superset`` and
    per-tool ``tool_args_overrides`` (see :func:`match_trajectory`).

    The expected trajectory: ``metadata.expected_tool_calls`` (calls with arguments) or
    ``metadata.expected_trajectory`` (step names), else ``agent.expected_tool_calls`` /
    ``agent.expected_trajectory`` (one list, or per task type). The agent's side: the trace's
    ``trajectory`` when the expectation is step names and the trace has one, else its tool calls.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        ref, kind, why = _reference(s, cfg)
        if ref is None:
            out.append(Score.missing(why or "no expected trajectory"))
            continue
        act = _actual(s.trace, kind, cfg)
        if mode == "jaccard_order":
            a, e = [x.name for x in act], [x.name for x in ref]
            if not e:
                out.append(Score.missing("the expected trajectory is empty"))
                continue
            correct, total = order_pairs(a, e)
            j, o = jaccard(a, e), _order_value(correct, total, a, e)
            value = _clean((cfg.jaccard_weight * j + cfg.order_weight * o) / (cfg.jaccard_weight + cfg.order_weight))
            out.append(Score(value, details={
                "jaccard": j, "order_score": o, "correct_pairs": correct, "total_pairs": total,
                "expected": e, "actual": a, "missing": sorted(set(e) - set(a)),
                "unexpected": sorted(set(a) - set(e))}))
        else:
            ok, reason = match_trajectory(act, ref, mode, tool_args, tool_args_overrides)
            details: dict[str, Any] = {"mode": mode, "tool_args": tool_args,
                                       "expected": [x.name for x in ref], "actual": [x.name for x in act]}
            if reason:
                details["reason"] = reason
            out.append(Score(1.0 if ok else 0.0, details=details))
    return out


@metric("intent_correctness", family="agent", requires=("trace",), check=_check_config)
def intent_correctness(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Intent correctness: did the agent parse the request right? Points for the entity (0.4),
    the type (0.3) and the parse confidence (0.3 / 0.2 / 0.1 above 0.7 / 0.5 / 0.3), divided by
    their total — seed 001's rubric, configurable under ``agent.intent`` (see :func:`intent_score`).

    The expected entity comes from ``agent.entity`` sources (default ``metadata.expected_entity``,
    ``metadata.entity``; the credit_risk preset reads ``metadata.company``). No intent in the
    trace, or no expected entity -> no value, with the reason.
    """
    cfg = agent_config(ctx.options)
    rub = cfg.intent
    out = []
    for s in samples:
        assert s.trace is not None
        if s.trace.intent is None:
            out.append(Score.missing("the trace has no intent"))
            continue
        entity = next((v for v in (lookup(s, src) for src in cfg.entity) if v is not None), None)
        if entity is None:
            out.append(Score.missing(f"no expected entity (looked at {', '.join(cfg.entity)})"))
            continue
        etype = None
        if rub.type_check == "match":
            etype = next((v for v in (lookup(s, src) for src in rub.expected_type) if v is not None), None)
            if etype is None:
                out.append(Score.missing(f"no expected type (looked at {', '.join(rub.expected_type)})"))
                continue
        value, details = intent_score(s.trace.intent, str(entity), rub, None if etype is None else str(etype))
        out.append(Score(value, details=details))
    return out


@metric("plan_quality", family="agent", requires=("trace",), check=_check_config)
def plan_quality(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Plan quality: points for a plan of a sensible size and for steps that mention each
    keyword group, divided by their total (see :func:`plan_score`; seed 001: 3-10 steps 0.3, a
    data-gathering step 0.35, an analysis step 0.35). The rubric is ``agent.plan``; without one,
    or without a plan in the trace, no value.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        if cfg.plan is None:
            out.append(Score.missing("no plan rubric: set options.agent.plan or an agent_preset"))
        elif s.trace.plan is None:
            out.append(Score.missing("the trace has no plan"))
        else:
            v, d = plan_score(s.trace.plan, cfg.plan)
            out.append(Score(v, details=d))
    return out


@metric("final_answer_quality", family="agent", requires=("trace",), check=_check_config)
def final_answer_quality(samples: Sequence[Sample], ctx: Any) -> list[Score]:
    """Final answer quality: required-field completeness plus validity checks of the agent's
    structured output, divided by the total points (see :func:`final_answer_score`; seed 001:
    0.5 completeness, 0.15 risk level, 0.15 credit score, 0.10 confidence, 0.10 reasoning). The
    rubric is ``agent.final_answer``; without one, or without ``final_output`` (a JSON object),
    no value.
    """
    cfg = agent_config(ctx.options)
    out = []
    for s in samples:
        assert s.trace is not None
        if cfg.final_answer is None:
            out.append(Score.missing("no final-answer rubric: set options.agent.final_answer or an agent_preset"))
        elif s.trace.final_output is None:
            out.append(Score.missing("the trace has no final_output (a JSON object)"))
        else:
            v, d = final_answer_score(s.trace.final_output, cfg.final_answer)
            out.append(Score(v, details=d))
    return out


# =============================================================================================
# LLM trajectory judge
# =============================================================================================

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

    text = (resources.files("ragmeter.metrics") / "agent_prompts" / "trajectory_judge.txt").read_text(encoding="utf-8")
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
                           description=trajectory_judge.__doc__ or ""))


# =============================================================================================
# Execution statistics
# =============================================================================================

STAT_FIGURES = ("step_count", "tool_calls", "latency_ms", "tool_latency_ms")


def describe(values: Sequence[float]) -> dict[str, Any]:
    """``n, mean, p50, p95, p99, min, max`` of some values (percentiles by linear interpolation,
    numpy's default); all ``None`` but ``n`` when there is none."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "p99": None, "min": None, "max": None}
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    return {"n": int(x.size), "mean": float(x.mean()), "p50": float(p50), "p95": float(p95),
            "p99": float(p99), "min": float(x.min()), "max": float(x.max())}


def _num_or_none(v: Any) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def execution_stats(samples: Iterable[Sample]) -> dict[str, Any]:
    """Execution statistics of a run's agent traces (seed 001's step count, tool calls, latency).

    Per figure (``step_count``, ``tool_calls``, ``latency_ms`` per sample; ``tool_latency_ms`` per
    tool call): :func:`describe` — n, mean, p50, p95, p99, min, max. Where each comes from:

    - step_count: the trace's ``step_count``, else the length of its ``trajectory``, else (chat
      logs) the number of assistant messages, recorded at parse time;
    - tool_calls: the number of tool calls of the trace;
    - latency_ms: the trace's ``latency_ms``, else the sample's ``metadata.latency_ms``.

    Also ``n_traces`` (samples with a trace), ``tool_errors`` (calls with an error) and
    ``tool_error_rate`` (errors / calls; ``None`` without calls). Samples without a trace are
    left out.
    """
    steps: list[float] = []
    calls: list[float] = []
    latency: list[float] = []
    tool_lat: list[float] = []
    errors = n_calls = n = 0
    for s in samples:
        t = s.trace
        if t is None:
            continue
        n += 1
        sc = t.step_count if t.step_count is not None else (len(t.trajectory) if t.trajectory is not None else None)
        if sc is not None:
            steps.append(float(sc))
        calls.append(float(len(t.tool_calls)))
        lat = _num_or_none(t.latency_ms)
        if lat is None:
            lat = _num_or_none(s.metadata.get("latency_ms"))
        if lat is not None:
            latency.append(lat)
        for c in t.tool_calls:
            n_calls += 1
            errors += c.error is not None
            cl = _num_or_none(c.latency_ms)
            if cl is not None:
                tool_lat.append(cl)
    return {"n_traces": n, "step_count": describe(steps), "tool_calls": describe(calls),
            "latency_ms": describe(latency), "tool_latency_ms": describe(tool_lat),
            "tool_errors": errors, "tool_error_rate": (errors / n_calls) if n_calls else None}


def run_execution_stats(store: Any, run_id: str) -> dict[str, Any]:
    """:func:`execution_stats` of a stored run (its samples as evaluated)."""
    return execution_stats(store.run_samples(store.resolve_run(run_id)))


def stats_table_text(stats: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`execution_stats` (used by ``ragmeter show``)."""
    head = f"{'figure':<16}{'n':>6}{'mean':>12}{'p50':>12}{'p95':>12}{'p99':>12}"
    lines = [f"{stats.get('n_traces', 0)} traces", head]
    for name in STAT_FIGURES:
        d = stats.get(name) or {}
        cells = "".join(f"{'—' if d.get(k) is None else format(d[k], '.2f'):>12}"
                        for k in ("mean", "p50", "p95", "p99"))
        lines.append(f"{name:<16}{d.get('n', 0):>6}{cells}")
    rate = stats.get("tool_error_rate")
    lines.append(f"tool errors: {stats.get('tool_errors', 0)}"
                 + (f" ({rate:.1%} of calls)" if rate is not None else ""))
    return "\n".join(lines)


def show_section(store: Any, run: Any) -> dict[str, Any]:
    """``ragmeter show`` hook: execution stats when the run scored agent metrics."""
    summary = run.summary or {}
    if not any(isinstance(v, Mapping) and v.get("family") == "agent" for v in summary.values()):
        return {}
    stats = execution_stats(store.run_samples(run.id))
    if not stats["n_traces"]:
        return {}
    return {"agent execution stats": stats_table_text(stats)}
