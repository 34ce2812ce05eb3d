"""OpenAI Evals templates: ``{{ item.field }}``, ``{{ sample.output_text }}``,
``{{ sample.output_json.answer }}``, ``{{ sample.output_tools[0].function.name }}``.

The namespaces are ``item`` (the data row) and ``sample`` (the model's output); nested values are
reached with dots and ``[index]`` / ``["key"]`` (OpenAI's graders guide: "JSON path like syntax").
A text value is inserted as it is, anything else as JSON. A path that leads nowhere is an error of
that item (the grader records no value and says which variable), never an empty string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

NAMESPACES = ("item", "sample")
_TAG = re.compile(r"\{\{(.*?)\}\}", re.S)
_FIRST = re.compile(r"\s*(?P<name>[A-Za-z_][\w-]*)")
_PART = re.compile(r"""\s*(?:\.\s*(?P<name>\w[\w-]*)|\[\s*(?:(?P<index>-?\d+)|"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*\])""")


class TemplateError(ValueError):
    """A template variable that cannot be resolved for one item."""


def parse_path(expr: str) -> list[str | int]:
    """``"item.a[0].b"`` -> ``["item", "a", 0, "b"]``.

    Raises:
        ValueError: the expression is not a path.
    """
    text = expr.strip()
    bad = ValueError(f"cannot read {{{{{expr}}}}} as a variable path (e.g. {{{{item.answer}}}})")
    if not text:
        raise ValueError("an empty {{ }} template")
    first = _FIRST.match(text)
    if not first:
        raise bad
    parts: list[str | int] = [first.group("name")]
    pos = first.end()
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.end() == pos:
            if not text[pos:].strip():
                break
            raise bad
        if m.group("name") is not None:
            parts.append(m.group("name"))
        elif m.group("index") is not None:
            parts.append(int(m.group("index")))
        else:
            parts.append(m.group("dq") if m.group("dq") is not None else m.group("sq"))
        pos = m.end()
    return parts


def variables(text: str) -> list[list[str | int]]:
    """The variable paths a template uses (``ValueError`` on a malformed one)."""
    return [parse_path(m.group(1)) for m in _TAG.finditer(text)]


def check_template(text: str) -> str | None:
    """Why ``text`` is not a valid template, or ``None``."""
    try:
        for path in variables(text):
            if path[0] not in NAMESPACES:
                return (f"template {{{{{'.'.join(str(p) for p in path)}}}}}: the namespace must be "
                        f"item or sample (e.g. {{{{item.answer}}}}, {{{{sample.output_text}}}})")
    except ValueError as exc:
        return f"template: {exc}"
    return None


def lookup(namespaces: Mapping[str, Any], path: list[str | int]) -> Any:
    """The value at ``path`` (its first element names the namespace).

    Raises:
        TemplateError: naming the variable and the step that failed.
    """
    shown = _show(path)
    if path[0] not in namespaces or namespaces[path[0]] is None:
        raise TemplateError(f"{{{{{shown}}}}}: this item has no {path[0]} (give a `{path[0]}` object"
                            + (" or --map sample=COLUMN)" if path[0] == "sample" else ")"))
    value = namespaces[path[0]]
    for i, step in enumerate(path[1:], start=1):
        where = _show(path[:i])
        if isinstance(step, int):
            if not isinstance(value, list):
                raise TemplateError(f"{{{{{shown}}}}}: {where} is not a list")
            if not -len(value) <= step < len(value):
                raise TemplateError(f"{{{{{shown}}}}}: {where} has {len(value)} element(s)")
            value = value[step]
        else:
            if isinstance(value, list) and step.isdigit():
                return lookup(namespaces, [*path[:i], int(step), *path[i + 1:]])
            if not isinstance(value, Mapping) or step not in value:
                keys = ", ".join(map(str, list(value)[:12])) if isinstance(value, Mapping) else "none"
                raise TemplateError(f"{{{{{shown}}}}}: {where} has no field {step!r} (fields: {keys})")
            value = value[step]
    return value


def as_text(value: Any) -> str:
    """How a value is written into a template: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def render(text: str, namespaces: Mapping[str, Any]) -> str:
    """``text`` with every ``{{ namespace.path }}`` replaced.

    Raises:
        TemplateError: a variable that does not resolve.
    """
    if "{{" not in text:
        return text
    return _TAG.sub(lambda m: as_text(lookup(namespaces, parse_path(m.group(1)))), text)


def _show(path: list[str | int]) -> str:
    out = str(path[0])
    for p in path[1:]:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out
