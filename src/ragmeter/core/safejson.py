"""JSON from untrusted senders (HTTP bodies, attribute values of imported spans), checked in one place.

:func:`loads` parses with the standard library and refuses, naming the JSON path of the offending
value (``calls[0].metadata.k``), what would later fail deep inside the program or the database:
nesting deeper than ``max_depth``, numbers with more than :data:`MAX_DIGITS` digits (Python
refuses to convert integers over 4,300 digits; a float of 400 digits overflows), numbers out of
the float range and the non-standard ``NaN``/``Infinity`` tokens, lone UTF-16 surrogates (valid
JSON escapes that no UTF-8 database can store) and NUL characters (PostgreSQL text cannot hold
them). Every error is a :class:`JSONInputError` with a ``path`` and a message.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64
MAX_DIGITS = 100


class JSONInputError(ValueError):
    """Malformed JSON input; ``path`` names the value (``""`` for the whole document)."""

    def __init__(self, path: str, message: str, *, syntax: bool = False) -> None:
        if len(path) > 120:  # a value nested 500 levels deep: its path is not worth 2,000 characters
            path = path[:100] + "..." + path[-17:]
        super().__init__(f"{path}: {message}" if path else message)
        self.path, self.message, self.syntax = path, message, syntax


class _Bad:
    """A number the parser refused to convert; reported with its path by the walk."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int | _Bad:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_DIGITS:
        return _Bad(f"a number with {digits} digits (at most {MAX_DIGITS})")
    return int(text)


def _float(text: str) -> float | _Bad:
    mantissa = text.lstrip("-").split("e")[0].split("E")[0]
    if len(mantissa) - ("." in mantissa) > MAX_DIGITS:
        return _Bad(f"a number with {len(mantissa)} digits (at most {MAX_DIGITS})")
    value = float(text)
    if not math.isfinite(value):
        return _Bad(f"{text[:40]} is outside the range of a number (about ±1.8e308)")
    return value


def _constant(text: str) -> _Bad:
    return _Bad(f"{text} is not a JSON number")


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` (UTF-8 bytes or text) and check every value (see the module docstring).

    Raises:
        JSONInputError: ``syntax`` is set when the text is not JSON at all (not UTF-8, a syntax
            error, nesting too deep for the parser); otherwise ``path`` names the bad value.
    """
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JSONInputError("", f"not UTF-8 text (byte {exc.start} cannot be decoded)", syntax=True) from None
    try:
        obj = json.loads(data, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise JSONInputError("", f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                             syntax=True) from None
    except RecursionError:
        raise JSONInputError("", f"nested deeper than {max_depth} levels", syntax=True) from None
    check(obj, max_depth=max_depth)
    return obj


def _text_problem(text: str) -> str | None:
    if text.isascii():
        return "a NUL character (\\u0000) cannot be stored" if "\x00" in text else None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate (\\u{ord(text[exc.start]):04x} at character {exc.start})"
    return "a NUL character (\\u0000) cannot be stored" if "\x00" in text else None


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    shown = key if key.isidentifier() and key.isascii() else json.dumps(key[:60])
    return f"{path}.{shown}" if path else shown


def check(obj: Any, *, max_depth: int = MAX_DEPTH, path: str = "") -> None:
    """Check an already parsed JSON value (the walk of :func:`loads`): nesting, numbers, texts.
    Iterative, so a deep value cannot overflow the stack."""
    stack: list[tuple[Any, str, int]] = [(obj, path, 1)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            why = _text_problem(value)
            if why:
                raise JSONInputError(where, f"text {why}")
        elif isinstance(value, dict | list):
            if depth > max_depth:
                raise JSONInputError(where, f"nested deeper than {max_depth} levels")
            if isinstance(value, dict):
                for k, v in value.items():
                    why = _text_problem(k) if isinstance(k, str) else None
                    if why:
                        raise JSONInputError(_join(where, "?"), f"a key {why}")
                    stack.append((v, _join(where, k), depth + 1))
            else:
                stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
        elif isinstance(value, _Bad):
            raise JSONInputError(where, value.why)
        elif isinstance(value, float) and not math.isfinite(value):
            raise JSONInputError(where, f"{value} is not a JSON number")
