"""Judge price table: USD per million input/output tokens, built in and extensible by a user file.

Prices change; the built-in figures are list prices at the time of writing. A user file (JSON or
YAML) adds or overrides entries::

    {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
     "openai:llama3.1": {"input": 0, "output": 0}}

A key is ``model`` or ``provider:model``; a model matches the longest key that is a prefix of its
name, so ``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError

#: USD per 1M tokens (input, output)
BUILTIN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "gemini-1.5-flash": (0.075, 0.30),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.0-flash-lite": (0.075, 0.30),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-2.5-pro": (1.25, 10.00),
}


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


class PriceTable:
    """Looks up a :class:`Price` for a (provider, model)."""

    def __init__(self, entries: dict[str, tuple[float, float]], source: str | None = None) -> None:
        self.entries = {k.lower(): Price(*v) for k, v in entries.items()}
        self.source = source

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The built-in table, extended/overridden by the user file ``path`` (JSON or YAML).

        Raises:
            ConfigError: the file is missing, unreadable, or an entry is malformed.
        """
        entries = dict(BUILTIN_PRICES)
        if path:
            entries.update(read_price_file(path))
        return cls(entries, str(path) if path else None)

    def get(self, provider: str, model: str) -> Price | None:
        """The price for ``model``: exact ``provider:model`` or ``model`` key, else the longest
        key that prefixes the name; ``None`` when unknown."""
        m = model.lower()
        for key in (f"{provider.lower()}:{m}", m):
            if key in self.entries:
                return self.entries[key]
        best = None
        for key in self.entries:
            bare = key.split(":", 1)[1] if ":" in key and key.split(":", 1)[0] == provider.lower() else key
            if ":" in bare:
                continue
            if m.startswith(bare) and (best is None or len(bare) > len(best[0])):
                best = (bare, key)
        # dated snapshots (gpt-4o-2024-08-06) and "-latest" names share their family's price,
        # but "gpt-4o" must not price "gpt-4o-mini": the rest of the name must start a suffix
        if best is not None:
            rest = m[len(best[0]):]
            if rest == "" or rest.startswith(("-20", "-latest", "-0", "-1", "@", ":")):
                return self.entries[best[1]]
        return None

    def rows(self) -> list[tuple[str, float, float]]:
        return sorted((k, p.input, p.output) for k, p in self.entries.items())


def read_price_file(path: str | Path) -> dict[str, tuple[float, float]]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"judge price file not found: {p}")
    from ragmeter.core.files import read_text

    text = read_text(p, "price file")
    try:
        if p.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - json and yaml raise different errors
        raise ConfigError(f"{p}: cannot parse price file: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a price file maps model -> {{input: USD/1M, output: USD/1M}}")
    out: dict[str, tuple[float, float]] = {}
    for model, v in data.items():
        out[str(model)] = _price_entry(p, str(model), v)
    return out


def _price_entry(p: Path, model: str, v: Any) -> tuple[float, float]:
    try:
        if isinstance(v, dict):
            pair = (float(v["input"]), float(v["output"]))
        else:
            a, b = v
            pair = (float(a), float(b))
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{p}: entry {model!r} must be {{input: USD per 1M tokens, output: USD "
                          f"per 1M tokens}}, got {v!r}") from None
    if pair[0] < 0 or pair[1] < 0:
        raise ConfigError(f"{p}: entry {model!r} has a negative price")
    return pair
