"""Judge prices: USD per million input/output tokens, from genai-prices, overridden by a user file.

The figures come from `genai-prices <https://github.com/pydantic/genai-prices>`_ (Pydantic's
maintained price data: list prices per provider, dated price changes, long-context tiers), read
from the snapshot the installed package ships: nothing is fetched, so pricing and the
``--dry-run`` estimate work offline (upgrade the package for newer prices). A model is looked up
as genai-prices matches names (``gpt-4o-mini-2024-07-18`` is gpt-4o-mini, ``o1-mini`` is not
``o1``); a judge behind a known API host (``--judge-base-url https://api.groq.com/openai/v1``)
is priced as that host's model, an Azure deployment as its OpenAI model.

A user file (JSON or YAML) adds or overrides entries, and wins over genai-prices::

    {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
     "openai:llama3.1": {"input": 0, "output": 0}}

A key is ``model`` or ``provider:model``; a model matches its exact key, or the longest key its
name extends with a date/version suffix (``gpt-4o`` prices ``gpt-4o-2024-08-06``, not
``gpt-4o-mini``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError

#: ragmeter's judge providers -> genai-prices provider ids (an Azure deployment falls back to
#: OpenAI's models in genai-prices itself); the listing shows these providers' models
PROVIDER_IDS = {"openai": "openai", "azure": "azure", "anthropic": "anthropic", "google": "google"}
_LISTED = ("openai", "anthropic", "google")

#: a suffix after a user key that still names the same model: a date, ``-latest``, a version, a tag
_SAME_MODEL_SUFFIX = ("-20", "-latest", "-0", "-1", "@", ":")
#: the share of the online price a batched request costs where genai-prices has no batch price for
#: the model (a user's price file, an OpenAI-compatible server): OpenAI's Batch API and Anthropic's
#: Message Batches both bill 50% of the online rates (docs/judge.md#batch cites their pages)
BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million tokens; ``*_tiers`` are ``(input tokens above, USD per 1M)`` steps: a request
    whose input crosses a step pays that step's rate on all its tokens (genai-prices' tiers).
    ``cache_read`` / ``cache_write`` price the input tokens a provider served from / wrote to its
    prompt cache (``None``: at the input price)."""

    input: float
    output: float
    input_tiers: tuple[tuple[int, float], ...] = ()
    output_tiers: tuple[tuple[int, float], ...] = ()
    cache_read: float | None = None
    cache_write: float | None = None
    cache_read_tiers: tuple[tuple[int, float], ...] = ()
    cache_write_tiers: tuple[tuple[int, float], ...] = ()

    def batched(self) -> Price:
        """This price through a provider's batch API where no batch price is published:
        :data:`BATCH_DISCOUNT` of every rate (input, output, cache read and write, their tiers)."""
        def half(tiers: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
            return tuple((start, rate * BATCH_DISCOUNT) for start, rate in tiers)

        return replace(self, input=self.input * BATCH_DISCOUNT, output=self.output * BATCH_DISCOUNT,
                       input_tiers=half(self.input_tiers), output_tiers=half(self.output_tiers),
                       cache_read=None if self.cache_read is None else self.cache_read * BATCH_DISCOUNT,
                       cache_write=None if self.cache_write is None else self.cache_write * BATCH_DISCOUNT,
                       cache_read_tiers=half(self.cache_read_tiers), cache_write_tiers=half(self.cache_write_tiers))

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0) -> float:
        """USD for one request of ``input_tokens`` in (all of them: ``cached_tokens`` read from and
        ``cache_write_tokens`` written to the provider's prompt cache included) and ``output_tokens`` out."""
        cached = min(max(0, cached_tokens), input_tokens)
        written = min(max(0, cache_write_tokens), input_tokens - cached)
        rate = _rate(self.input, self.input_tiers, input_tokens)
        read_rate = rate if self.cache_read is None else _rate(self.cache_read, self.cache_read_tiers, input_tokens)
        write_rate = rate if self.cache_write is None else _rate(self.cache_write, self.cache_write_tiers, input_tokens)
        return ((input_tokens - cached - written) * rate + cached * read_rate + written * write_rate
                + output_tokens * _rate(self.output, self.output_tiers, input_tokens)) / 1_000_000


def _rate(base: float, tiers: tuple[tuple[int, float], ...], input_tokens: int) -> float:
    for start, rate in reversed(tiers):
        if input_tokens > start:
            return rate
    return base


class PriceTable:
    """Looks up a :class:`Price` for a (provider, model): the user's entries, then genai-prices."""

    def __init__(self, entries: dict[str, tuple[float, float]] | None = None, source: str | None = None) -> None:
        self.entries = {k.lower(): Price(*v) for k, v in (entries or {}).items()}
        self.source = source

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """genai-prices, extended/overridden by the user file ``path`` (JSON or YAML).

        Raises:
            ConfigError: the file is missing, unreadable, or an entry is malformed.
        """
        return cls(read_price_file(path) if path else None, str(path) if path else None)

    def get(self, provider: str, model: str, base_url: str | None = None, *, batch: bool = False) -> Price | None:
        """The price for ``model``: a user entry (exact ``provider:model`` or ``model`` key, else
        the longest key the name extends with a date/version suffix), else genai-prices' price
        for the provider at ``base_url`` (when genai-prices knows that host) or ``provider``;
        ``None`` when neither knows the model.

        ``batch``: the price of a request sent through the provider's batch API -- genai-prices'
        batch price where it has one (its ``processing=batch`` variant: OpenAI's and Anthropic's
        published batch tables, which say how a cached input token is billed in a batch), else
        :data:`BATCH_DISCOUNT` of every online rate."""
        user = self._user_price(provider, model)
        if user is not None:
            return user.batched() if batch else user
        return _library_price(provider, model, base_url, batch=batch)

    def _user_price(self, provider: str, model: str) -> Price | None:
        m, prov = model.lower(), provider.lower()
        for key in (f"{prov}:{m}", m):
            if key in self.entries:
                return self.entries[key]
        best: tuple[str, str] | None = None
        for key in self.entries:
            scope, _, rest = key.partition(":")
            bare = rest if rest and scope == prov else key
            if ":" in bare:  # another provider's entry, or a tagged name (exact match only)
                continue
            if m.startswith(bare) and (best is None or len(bare) > len(best[0])):
                best = (bare, key)
        # dated snapshots (gpt-4o-2024-08-06) and "-latest" names share their family's price,
        # but "gpt-4o" must not price "gpt-4o-mini": the rest of the name must start a suffix
        if best is not None:
            rest = m[len(best[0]):]
            if rest == "" or rest.startswith(_SAME_MODEL_SUFFIX):
                return self.entries[best[1]]
        return None

    def rows(self) -> list[tuple[str, Price]]:
        """Every price by key: genai-prices' models of the OpenAI, Anthropic and Google APIs (today's
        price), then the user's entries over them."""
        out = dict(_library_rows())
        out.update(self.entries)
        return sorted(out.items())


def _snapshot() -> Any:
    """genai-prices' data: the snapshot bundled with the package (or one the application itself
    installed with ``genai_prices.UpdatePrices``); ragmeter never starts an update."""
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


def _library_price(provider: str, model: str, base_url: str | None, *, batch: bool = False) -> Price | None:
    snapshot = _snapshot()
    tries: list[tuple[str | None, str | None]] = []
    if base_url and re.match(r"https?://", base_url):
        tries.append((None, base_url))
    if provider.lower() in PROVIDER_IDS:
        tries.append((PROVIDER_IDS[provider.lower()], None))
    for provider_id, api_url in tries:
        try:
            _, info = snapshot.find_provider_model(model, None, provider_id, api_url)
        except LookupError:
            continue
        if not batch:
            return _price(info)
        if _has_batch_price(info):
            return _price(info, {"processing": "batch"})
        price = _price(info)
        return price.batched() if price is not None else None
    return None


def _has_batch_price(info: Any) -> bool:
    """Whether genai-prices publishes a batch price for the model today."""
    now = datetime.now(tz=UTC)
    return any(v.when == {"processing": "batch"} and (v.constraint is None or v.constraint.active(now))
               for v in getattr(info, "price_variants", None) or ())


def _library_rows() -> Iterator[tuple[str, Price]]:
    seen: set[str] = set()
    for prov in _snapshot().providers:
        if prov.id not in _LISTED:
            continue
        for info in prov.models:
            price = _price(info)
            if price is not None and info.id not in seen:
                seen.add(info.id)
                yield info.id, price


def _price(info: Any, context: dict[str, str] | None = None) -> Price | None:
    """Today's input/output (and prompt-cache read/write) price of a genai-prices model (``None``:
    it has no token prices, e.g. an embedding or speech model); ``context`` selects a variant
    (``{"processing": "batch"}``: the batch price, whose cached input keeps the online cache-read
    rate where the provider publishes no batch one -- gpt-4o-mini -- and is halved where it does)."""
    mp = info.get_prices(datetime.now(tz=UTC), context) if context else info.get_prices(datetime.now(tz=UTC))
    inp, out = getattr(mp, "input_mtok", None), getattr(mp, "output_mtok", None)
    if inp is None or out is None:
        return None
    (i, i_tiers), (o, o_tiers) = _split(inp), _split(out)
    read, write = getattr(mp, "cache_read_mtok", None), getattr(mp, "cache_write_mtok", None)
    (r, r_tiers), (w, w_tiers) = (_split(read) if read is not None else (None, ()),
                                  _split(write) if write is not None else (None, ()))
    return Price(i, o, i_tiers, o_tiers, r, w, r_tiers, w_tiers)


def _split(value: Any) -> tuple[float, tuple[tuple[int, float], ...]]:
    tiers = getattr(value, "tiers", None)
    if tiers is None:
        return float(value), ()
    return float(value.base), tuple((int(t.start), float(t.price)) for t in tiers)


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
        from ragmeter.core.config import parse_error_text

        raise ConfigError(f"{p}: cannot parse price file: {parse_error_text(exc)}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a price file maps model -> {{input: USD/1M, output: USD/1M}}")
    out: dict[str, tuple[float, float]] = {}
    for model, v in data.items():
        out[str(model)] = _price_entry(p, str(model), v)
    return out


def _price_entry(p: Path, model: str, v: Any) -> tuple[float, float]:
    if isinstance(v, dict):
        unknown = sorted(str(k) for k in v if k not in ("input", "output"))
        if unknown:
            # a misspelt or unsupported key (``cached``, ``inptu``) would otherwise be ignored silently
            raise ConfigError(f"{p}: entry {model!r}: unknown key {unknown[0]!r} (a price entry has input and "
                              "output, USD per 1M tokens)")
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
