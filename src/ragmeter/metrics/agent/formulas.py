"""The agent formulas as plain functions: tool precision / recall, Jaccard, pairwise order,
trajectory, intent, plan and final-answer scores."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter.metrics.agent.config import _TYPES, AnswerRubric, IntentRubric, PlanRubric
from ragmeter.metrics.agent.lookup import _get_path

_DEFAULT_INTENT = IntentRubric()


def tool_precision(selected: Iterable[str], expected: Iterable[str]) -> float:
    """Tool choice correctness: the share of the distinct tools the agent called that were expected.

    ``|expected ∩ selected| / |selected|`` over sets of tool names (a tool called twice counts
    once, as in the agent-evaluation guide). Range [0, 1].

    Edge cases: no tool selected -> 0.0 when tools were expected (agent-evaluation guide), 1.0 when none were.

    Example (the agent-evaluation guide, Apple): ``tool_precision({"SEC", "Market", "Web", "Legal"},
    {"SEC", "Market", "Web"})`` -> 0.75.
    """
    sel, exp = set(selected), set(expected)
    if not sel:
        return 1.0 if not exp else 0.0
    return len(sel & exp) / len(sel)


def tool_recall(selected: Iterable[str], expected: Iterable[str]) -> float:
    """Tool completeness: the share of the expected tools the agent called.

    ``|expected ∩ selected| / |expected|`` over sets of tool names. Range [0, 1].

    Edge case: nothing expected -> 1.0 (nothing was missed; the agent-evaluation guide's ``else 0.0`` never applies
    to its own table, where every task type expects tools).

    Example (the agent-evaluation guide, private company): ``tool_recall({"Web", "SEC"}, {"Web", "Legal"})`` -> 0.5.
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
    the agent-evaluation guide's "consecutive steps maintain expected order", as its implementation computes it.
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
    the agent-evaluation guide gives 0.0).
    """
    return _order_value(*order_pairs(actual, expected), actual, expected)


def _order_value(correct: int, total: int, actual: Sequence[str], expected: Sequence[str]) -> float:
    if total:
        return correct / total
    return 1.0 if len(set(expected)) < 2 and set(actual) & set(expected) else 0.0


def trajectory_score(actual: Sequence[str], expected: Sequence[str], *, jaccard_weight: float = 0.6,
                     order_weight: float = 0.4) -> float:
    """The agent-evaluation guide's trajectory match: ``jaccard_weight * J + order_weight * O``, divided by the
    sum of the weights (1.0 for the guide's 0.6 + 0.4).

    ``J`` = :func:`jaccard` of the step-name sets; ``O`` = :func:`order_score`. Range [0, 1].

    Example:
        >>> exp = ["parse", "plan", "fetch", "synthesize"]
        >>> trajectory_score(["parse", "fetch", "plan", "synthesize"], exp)  # J = 1, O = 2/3
        0.8666666666666667
    """
    j = jaccard(actual, expected)
    o = order_score(actual, expected)
    return (jaccard_weight * j + order_weight * o) / (jaccard_weight + order_weight)


def intent_score(intent: Mapping[str, Any], expected_entity: str | None, rubric: IntentRubric = _DEFAULT_INTENT,
                 expected_type: str | None = None) -> tuple[float, dict[str, Any]]:
    """Intent correctness: did the agent understand the request? Returns ``(score, details)``.

    Points (the agent-evaluation guide defaults), divided by their total (1.0 for the defaults):

    - entity (0.4): the expected entity is found in the parsed one, case-insensitively
      (``entity_match``: ``contains`` = expected in parsed, as the agent-evaluation guide; ``exact``; ``either``
      = one contains the other);
    - type (0.3): a type was identified (``type_check: present``, the agent-evaluation guide) or equals the
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
    contains any of its keywords (substring, case-insensitive; the agent-evaluation guide checks "data", "fetch",
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

    the agent-evaluation guide: 0.5 completeness over five fields; risk level in {low, moderate, high, critical}
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
