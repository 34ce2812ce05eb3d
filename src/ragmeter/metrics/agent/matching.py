"""Trajectory matching modes in the style of LangChain's agentevals (strict, unordered, subset,
superset) with argument modes (exact, ignore, subset, superset)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import ToolCall
from ragmeter.io.traces import _tool_call, parse_trace
from ragmeter.metrics.agent.lookup import _get_path


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
