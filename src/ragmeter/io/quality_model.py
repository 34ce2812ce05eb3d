"""The file of a ``quality_offline`` model (what ``ragmeter fit-quality`` writes and
``--option quality_model=FILE`` reads): JSON, checked for its shape here and for its features by
the metric (:func:`ragmeter.metrics.quality_model.check_model`) before the run starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.files import read_text

WHAT = "quality model file"


def read_quality_model(path: str | Path) -> dict[str, Any]:
    """The model in ``path``, with ``file`` set to the path (errors then name it).

    Raises:
        ConfigError: the file is missing, not JSON (line and column named) or not an object.
    """
    p = Path(path)
    try:
        text = read_text(p, WHAT)
    except DatasetError as exc:
        raise ConfigError(str(exc)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not a JSON {WHAT} (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: a {WHAT} is a JSON object, got {type(doc).__name__}")
    return {**doc, "file": str(p)}


def write_quality_model(model: dict[str, Any], path: str | Path) -> Path:
    """Write ``model`` as indented JSON (the parent folder must exist)."""
    p = Path(path)
    if not p.parent.is_dir():
        raise ConfigError(f"{p}: folder {p.parent} does not exist")
    body = {k: v for k, v in model.items() if k != "file"}
    p.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return p
