"""Dataset writers (the inverse of the readers, canonical field names)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ragmeter.core.schema import Sample


def save(samples: Iterable[Sample], path: str | Path, fmt: str | None = None) -> Path:
    """Write samples to ``.jsonl``, ``.csv`` (list fields as JSON cells) or ``.parquet``."""
    path = Path(path)
    kind = (fmt or path.suffix.lstrip(".")).lower()
    rows = [s.model_dump(mode="json", exclude_none=True) for s in samples]
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind in {"jsonl", "ndjson"}:
        with path.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    elif kind in {"csv", "parquet"}:
        import pandas as pd

        flat = [{k: (json.dumps(v, ensure_ascii=False) if isinstance(v, list | dict) else v)
                 for k, v in r.items()} for r in rows]
        df = pd.DataFrame(flat)
        if kind == "csv":
            df.to_csv(path, index=False)
        else:
            df.to_parquet(path, index=False)
    else:
        raise ValueError(f"unknown format {kind!r}")
    return path
