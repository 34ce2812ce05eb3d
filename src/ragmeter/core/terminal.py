"""Text for a terminal: the control characters of text ragmeter did not write (answers, replies,
reasons, dataset fields, run names) are shown as ``\\xNN``, so a reply cannot clear the screen,
retitle the window, ring the bell or overwrite earlier lines (``\\x1b[2J``, ``\\x1b]0;...\\x07``,
``\\r``).

By construction: every rich console ragmeter prints with is made by :func:`console`, whose output
escapes the control characters of all text (rich's own styles and cursor moves are not text), and
the few lines the command writes without rich go through :func:`escape_controls`.
tests/test_terminal.py checks that no other module makes a rich ``Console``.
"""

from __future__ import annotations

import re
from typing import Any

#: C0 controls but tab and newline, DEL, and the C1 controls (``\\x9b`` is a one-character CSI)
_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0))
_TABLE = {c: f"\\x{c:02x}" for c in _CONTROLS}
_FOUND = re.compile("[" + "".join(f"\\x{c:02x}" for c in _CONTROLS) + "]")
#: for JSON text: DEL and C1 as JSON escapes (json.dumps writes C0 as ``\\u00NN`` already)
_JSON_TABLE = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def escape_controls(text: str) -> str:
    """``text`` with its control characters (C0 but tab and newline, DEL, C1) written as ``\\xNN``.

    >>> escape_controls("ok\\x1b[2J\\x07")
    'ok\\\\x1b[2J\\\\x07'
    """
    return text.translate(_TABLE) if _FOUND.search(text) else text


def json_for_terminal(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with DEL and the C1 controls written as
    JSON escapes: the same JSON, and nothing a terminal acts on."""
    return text.translate(_JSON_TABLE)


def console(*, stderr: bool = False, **options: Any) -> Any:
    """A rich ``Console`` (the same options) whose output shows control characters of text as
    ``\\xNN``: strings are escaped before rich lays them out (so tables keep their columns), and
    everything else -- ``Text`` built by code, table cells -- when it is written."""
    return _console_class()(stderr=stderr, **options)


_CLASS: type | None = None


def _console_class() -> type:
    global _CLASS
    if _CLASS is None:
        from rich.console import Console
        from rich.segment import Segment

        class EscapingConsole(Console):
            def render_str(self, text: str, **kwargs: Any) -> Any:  # noqa: D102 - rich's
                return super().render_str(escape_controls(text), **kwargs)

            def _render_buffer(self, buffer: Any) -> str:
                # a segment rich marks as control (a progress bar's cursor moves) is rich's own
                return super()._render_buffer(
                    seg if seg.control else Segment(escape_controls(seg.text), seg.style, seg.control)
                    for seg in buffer)

        _CLASS = EscapingConsole
    return _CLASS


def shorten_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, shortened from the left: whole directories go first
    (``…/rows-200000.jsonl``), and a file name longer than the width keeps its end (``…0000.jsonl``),
    where the extension and the distinguishing digits are.

    >>> shorten_path("very/long/directory/rows-200000.jsonl", 20)
    '…/rows-200000.jsonl'
    >>> shorten_path("rows-200000.jsonl", 10)
    '…000.jsonl'
    """
    if len(path) <= width:
        return path
    if width <= 1:
        return "…"[:max(width, 0)]
    for i, ch in enumerate(path):
        if ch in "/\\" and len(path) - i + 1 <= width:
            return "…" + path[i:]
    return "…" + path[len(path) - width + 1:]


class PathCell:
    """A table cell holding a file path: whole when the column is wide enough, else shortened from
    the left by :func:`shorten_path` on one line, never wrapped mid-name ("rows-20" / "0000.jsonl").
    Its minimum width is ``min_width`` (or the path's length when shorter), so a table squeezes the
    path before it squeezes figures."""

    def __init__(self, path: str, min_width: int = 16) -> None:
        self.path = path
        self.min_width = min(len(path), min_width)

    def __str__(self) -> str:
        return self.path

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement(self.min_width, max(len(self.path), self.min_width)).with_maximum(options.max_width)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield Text(shorten_path(self.path, options.max_width), no_wrap=True, overflow="crop", end="")


def path_width(paths: list[str], cap: int) -> int:
    """The width of a table column of paths: the longest path's length, at most ``cap`` (the room
    the caller leaves it). A column given this fixed width is not squeezed by wrapping columns
    beside it; :class:`PathCell` shortens longer paths from the left to fit it."""
    return max(1, min(max((len(p) for p in paths), default=1), cap))
