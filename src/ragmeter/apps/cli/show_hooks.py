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

    for mod in ("ragmeter.llm", "ragmeter.analysis.composite", "ragmeter.metrics.agent"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass
    # the judge's tokens/cost section; registered here so the llm package never imports the CLI
    from ragmeter.llm.accounting import show_section as judge_section

    if judge_section not in _HOOKS:
        _HOOKS.insert(0, judge_section)
    from ragmeter.run.panel_record import show_section as panel_section

    if panel_section not in _HOOKS:
        _HOOKS.append(panel_section)
    from ragmeter.conversations.view import show_section as conversation_section

    if conversation_section not in _HOOKS:
        _HOOKS.append(conversation_section)
    out: dict[str, Any] = {}
    for h in _HOOKS:
        out.update(h(store, run) or {})
    return out


def render(title: str, body: Any) -> Any:
    """A rich renderable for a section ``ragmeter show`` prints as text, or ``None`` for the
    default (the body as indented JSON). The conversations section is a table: one row per
    conversation with its conversation metrics and, per per-turn metric, the mean over its
    assistant turns, and how many values are missing."""
    if title != "conversations" or not isinstance(body, dict) or not body:
        return None
    from rich.table import Table

    conv_keys = list(dict.fromkeys(k for c in body.values() for k in c.get("metrics", {})))
    turn_keys = list(dict.fromkeys(k for c in body.values() for t in c.get("turns", {}).values() for k in t))
    table = Table(title="conversations (per-turn metrics: mean over the assistant turns)",
                  title_justify="left")
    table.add_column("conversation", overflow="fold")
    for k in conv_keys:
        table.add_column(k, justify="right", overflow="fold")
    table.add_column("turns", justify="right")
    for k in turn_keys:
        table.add_column(f"{k} (turn mean)", justify="right", overflow="fold")
    table.add_column("no value", justify="right")

    def cell(v: Any) -> str:
        return "—" if v is None else f"{v:.3f}"

    for cid, c in body.items():
        turns = list(c.get("turns", {}).values())
        means = []
        for k in turn_keys:
            vals = [t[k] for t in turns if t.get(k) is not None]
            means.append(cell(sum(vals) / len(vals)) if vals else "—")
        table.add_row(str(cid), *(cell(c.get("metrics", {}).get(k)) for k in conv_keys), str(len(turns)),
                      *means, str(len(c.get("missing", {}))))
    return table
