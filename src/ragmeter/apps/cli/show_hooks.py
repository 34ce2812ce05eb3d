"""Extra sections for ``ragmeter show``: features register a function ``(store, run) -> {title: body}``.

Used for judge tokens/cost, composite scores and hints, execution stats ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_HOOKS: list[Callable[[Any, Any], dict[str, Any]]] = []


def add(hook: Callable[[Any, Any], dict[str, Any]]) -> None:
    _HOOKS.append(hook)


def collect(store: Any, run: Any) -> dict[str, Any]:
    import importlib

    for mod in ("ragmeter.llm", "ragmeter.metrics.composite", "ragmeter.metrics.agent"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass
    # the judge's tokens/cost section; registered here so the llm package never imports the CLI
    from ragmeter.llm.accounting import show_section as judge_section

    if judge_section not in _HOOKS:
        _HOOKS.insert(0, judge_section)
    from ragmeter.conversations.view import show_section as conversation_section

    if conversation_section not in _HOOKS:
        _HOOKS.append(conversation_section)
    out: dict[str, Any] = {}
    for h in _HOOKS:
        out.update(h(store, run) or {})
    return out
