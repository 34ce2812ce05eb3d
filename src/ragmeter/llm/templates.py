"""Judge templates tuned to people (``ragmeter align``): named, versioned, kept in the store.

A name holds the versions ``ragmeter align --name NAME`` made (each: the metric, the instructions,
rewritten or the metric's own, the few-shot examples, and the held-out figures that decided it) and
a default: the last version whose held-out change had an interval above 0, or 0 -- the metric's
built-in template -- when no tuning helped. ``faithfulness@NAME`` scores with the default,
``faithfulness@NAME:2`` with version 2. Metrics reach it as ``ctx.service("judge_templates")``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ragmeter.core.context import register_service
from ragmeter.core.errors import ConfigError

#: the store's key-value namespace of the tuned templates
NAMESPACE = "judge_templates"
_REF = re.compile(r"^(?P<name>[A-Za-z0-9][\w.-]*?)(?::v?(?P<version>\d+))?$")
NAME_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit"


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``NAME`` -> (NAME, None: its default); ``NAME:2`` or ``NAME:v2`` -> (NAME, 2).

    Raises:
        ConfigError: a malformed reference.
    """
    m = _REF.match(str(ref).strip())
    if not m:
        raise ConfigError(f"template {ref!r}: a name of {NAME_RULE}, optionally :VERSION (e.g. strict:2)")
    return m.group("name"), int(m.group("version")) if m.group("version") else None


class TemplateBook:
    """The tuned templates of a store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    @classmethod
    def from_context(cls, ctx: Any) -> TemplateBook:
        if ctx.store is None:
            raise ConfigError("tuned judge templates live in the results store: run with a store (--db)")
        return cls(ctx.store)

    def record(self, name: str) -> dict[str, Any] | None:
        """Everything stored under ``name`` (``None``: nothing)."""
        return self.store.kv_get(NAMESPACE, name)

    def names(self) -> dict[str, dict[str, Any]]:
        return self.store.kv_list(NAMESPACE)

    def version(self, metric: str | None, ref: str) -> dict[str, Any]:
        """The version ``ref`` names (``NAME``: the default), ``{"version": 0, ...}`` for the
        metric's built-in template.

        Raises:
            ConfigError: no such name or version, or a template tuned for another metric.
        """
        name, number = parse_ref(ref)
        rec = self.record(name)
        if rec is None:
            known = ", ".join(sorted(self.names())) or "none yet"
            raise ConfigError(f"no tuned judge template {name!r} in this store (known: {known}); make one with "
                              f"`ragmeter align METRIC --labels FILE --judge ... --name {name}`")
        if metric is not None and rec.get("metric") != metric:
            raise ConfigError(f"judge template {name!r} was tuned for {rec.get('metric')}, not {metric}")
        number = rec.get("default", 0) if number is None else number
        if number == 0:
            return {"name": name, "version": 0, "metric": rec.get("metric")}
        for v in rec.get("versions", []):
            if v.get("version") == number:
                return {"name": name, "metric": rec.get("metric"), **v}
        raise ConfigError(f"judge template {name!r} has no version {number} "
                          f"(versions: {', '.join(str(v['version']) for v in rec.get('versions', [])) or 'none'})")

    def add(self, name: str, metric: str, version: dict[str, Any]) -> int:
        """Store a new version of ``name`` (not the default yet); returns its number."""
        parse_ref(name)
        rec = self.record(name) or {"name": name, "metric": metric, "default": 0, "versions": []}
        if rec.get("metric") != metric:
            raise ConfigError(f"judge template {name!r} was tuned for {rec.get('metric')}: choose another --name "
                              f"for {metric}")
        number = 1 + max((v["version"] for v in rec["versions"]), default=0)
        rec["versions"].append({"version": number, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                                **version})
        self.store.kv_put(NAMESPACE, name, rec)
        return number

    def update(self, name: str, number: int, *, default: bool, **fields: Any) -> None:
        """Record a version's figures and, with ``default``, make it the name's default."""
        rec = self.record(name)
        if rec is None:
            raise ConfigError(f"no tuned judge template {name!r}")
        for v in rec["versions"]:
            if v["version"] == number:
                v.update(fields)
        if default:
            rec["default"] = number
        self.store.kv_put(NAMESPACE, name, rec)


register_service("judge_templates", TemplateBook.from_context)
