"""Run configuration files (JSON or YAML), including seed 002's ``{"metric_types": [...]}``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmeter.errors import ConfigError
from ragmeter.redact import SECRET_HELP, find_secrets

#: keys a config file may hold; anything else is an error naming the closest key.
KNOWN_KEYS = {
    "metrics", "metric_types", "options", "dataset", "map", "on_error", "name", "judge",
    "embedding_model", "method", "grid", "pipeline", "experiment", "composite", "agent",
}


def load_config(source: str | Path | dict[str, Any] | None) -> dict[str, Any]:
    """Read a config file or mapping and normalise it to ``{"metrics": [...], "options": {...}, ...}``.

    ``metric_types`` (seed 002, rag-experiment-accelerator) is accepted as a synonym of ``metrics``.
    Unknown top-level keys of seed 002's search_config (``chunking``, ``embedding_models`` ...) are
    kept under ``"extra"`` rather than rejected, so such a file works as is.
    """
    if source is None:
        return {"metrics": [], "options": {}}
    if isinstance(source, dict):
        raw = dict(source)
        where = "<config>"
    else:
        path = Path(source)
        where = str(path)
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        text = path.read_text(encoding="utf-8")
        try:
            if path.suffix.lower() in {".yaml", ".yml"}:
                import yaml

                raw = yaml.safe_load(text) or {}
            else:
                raw = json.loads(text)
        except (json.JSONDecodeError, Exception) as exc:  # noqa: BLE001 - yaml errors vary
            raise ConfigError(f"{where}: cannot parse config: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a config must be a mapping at the top level")
    secrets = list(find_secrets(raw))
    if secrets:
        # a key in a config file ends up committed, copied and stored with runs
        raise ConfigError(f"{where}: {', '.join(secrets)} holds a secret, and a config never may. "
                          f"Remove it: {SECRET_HELP}")
    metrics = raw.get("metrics")
    if metrics is None:
        metrics = raw.get("metric_types", [])
    elif "metric_types" in raw:
        raise ConfigError(f"{where}: give either 'metrics' or 'metric_types', not both")
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if not isinstance(metrics, list):
        raise ConfigError(f"{where}: 'metrics' must be a list")
    options = dict(raw.get("options") or {})
    for k in ("judge", "embedding_model", "agent", "composite"):
        if k in raw:
            options.setdefault(k, raw[k])
    out = {k: v for k, v in raw.items() if k in KNOWN_KEYS and k not in {"metric_types"}}
    out["metrics"] = metrics
    out["options"] = options
    out["extra"] = {k: v for k, v in raw.items() if k not in KNOWN_KEYS}
    out["source"] = where
    return out
