"""Parsers and prompts shared by the CLI's options: every numeric option is checked when the command
line is parsed (a usage error naming the option, exit 2), and a confirmation without a terminal asks
for ``--yes`` instead of aborting."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def number(low: float | None = None, high: float | None = None, *, integer: bool = False,
           low_open: bool = False, high_open: bool = False) -> Callable[[Any], Any]:
    """A ``parser=`` for a numeric option: a finite number (an integer with ``integer``) within
    ``[low, high]`` (open ends with ``low_open``/``high_open``). Anything else is a usage error
    that names the option, e.g. ``Invalid value for '--bootstrap': expected an integer >= 0, got
    '-1'`` (exit status 2), before the command does any work."""
    kind = "an integer" if integer else "a number"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {_bound(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {_bound(high)}")
    wanted = f"{kind} {' and '.join(parts)}".strip()

    def parse(value: Any) -> Any:
        from pydantic_core import PydanticCustomError  # typer reports it as the option's error

        def bad() -> PydanticCustomError:
            return PydanticCustomError("ragmeter_number", "expected {wanted}, got {got}",
                                       {"wanted": wanted, "got": repr(str(value))})

        if isinstance(value, bool):
            raise bad()
        try:
            if integer:
                text = str(value).strip()
                if len(text) > 30:  # int() of a 5,000-digit string is slow; no count needs that
                    raise bad()
                v: float = int(text) if isinstance(value, str) else int(value)
            else:
                v = float(value)
        except (TypeError, ValueError):
            raise bad() from None
        if not math.isfinite(v) or (low is not None and (v <= low if low_open else v < low)) \
                or (high is not None and (v >= high if high_open else v > high)):
            raise bad()
        return v

    return parse


def confirm(question: str, *, default: bool = False, err: bool = False) -> bool:
    """Ask a yes/no question on the terminal. Without a terminal to answer it (standard input at its
    end: a script, CI, a closed pipe) this is a usage error saying to pass ``--yes`` (exit 2), not an
    abort (exit 130)."""
    import sys

    import typer

    try:
        return typer.confirm(question, default=default, err=err)
    except typer.Abort:
        if sys.stdin is not None and sys.stdin.isatty():
            raise  # Ctrl-C at the prompt
        from ragmeter.core.errors import ConfigError

        raise ConfigError(f"{question} -- no answer on standard input; pass --yes to go ahead "
                          "without asking") from None


def _bound(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"
