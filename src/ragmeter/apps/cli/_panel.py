"""The judge-panel options of ``eval`` and ``meta-eval``: ``--judge`` given more than once,
``--panel FILE`` and ``--panel-combine`` made into the run options ``panel`` / ``panel_combine``
(:mod:`ragmeter.run.panel`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError

PANEL_HELP = ("A YAML/JSON list of judges for a panel: provider:model, or mappings with model, and base_url, "
              "label, temperature ... (never a key: keys come from the environment, api_key_env names the "
              "variable). Every judge metric is computed by each judge and combined (docs/panels.md).")
COMBINE_HELP = ("How a panel's values of a sample become the metric's value: mean (default), median, min, or "
                "majority (each judge votes high when its value is at least the middle of the range; "
                "the top, the bottom, or the middle on a split; docs/panels.md).")


def read_panel(path: Path) -> list[Any]:
    """The judges of a panel file (a list, or a mapping with ``judges``), secrets refused.

    Raises:
        ConfigError: unreadable or unparsable, not a list, or holding a secret (naming the file).
    """
    from ragmeter.core.files import read_text
    from ragmeter.core.redact import SECRET_HELP, find_secrets

    text = read_text(path, "panel file")
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            raw = yaml.safe_load(text)
        else:
            raw = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - yaml's errors vary
        raise ConfigError(f"{path}{_where(exc)}: cannot parse the panel: {str(exc).splitlines()[0][:200]}") from None
    if isinstance(raw, dict) and "judges" in raw:
        raw = raw["judges"]
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: a panel file is a list of judges (provider:model, or mappings with 'model')")
    if not raw:
        raise ConfigError(f"{path}: the panel lists no judges; a panel needs at least two (provider:model, "
                          "or mappings with 'model')")
    secrets = list(find_secrets(raw, "panel"))
    if secrets:
        raise ConfigError(f"{path}: {', '.join(secrets)} holds a secret, and a panel file never may. {SECRET_HELP}")
    return raw


def _where(exc: Exception) -> str:
    """``, line N, column M`` of a YAML or JSON parse error, when it says where."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f", line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(exc, json.JSONDecodeError):
        return f", line {exc.lineno}, column {exc.colno}"
    return ""


def panel_options(judges: list[str] | None, panel: Path | None, combine: str | None,
                  engine: str = "local") -> dict[str, Any]:
    """The run options of ``--judge`` (once: the judge; more than once: a panel), ``--panel`` and
    ``--panel-combine`` (a panel runs on the local ``engine`` only: refused before any engine starts)."""
    from ragmeter.stats.panel import COMBINES

    judges = [j for j in judges or [] if j is not None]
    if combine is not None and combine not in COMBINES:
        raise ConfigError(f"--panel-combine {combine!r}: use one of {', '.join(COMBINES)}")
    if panel is not None and judges:
        raise ConfigError("give the panel's judges either as --judge (repeated) or in --panel FILE, not both")
    members: list[Any] = read_panel(panel) if panel is not None else list(judges) if len(judges) > 1 else []
    if not members:
        if combine is not None:
            raise ConfigError("--panel-combine needs a panel: --judge given more than once, or --panel FILE")
        return {"judge": judges[0]} if judges else {}
    if engine != "local":
        raise ConfigError("a judge panel runs on the local engine: run it without --engine ray")
    return {"panel": members, **({"panel_combine": combine} if combine else {})}
