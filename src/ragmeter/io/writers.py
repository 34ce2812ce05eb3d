"""Dataset writers (the inverse of the readers, canonical field names): a sample's inputs in the
shape :mod:`ragmeter.core.records` gives them, the shape of ``ragmeter export``'s rows too."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ragmeter.core.records import sample_columns, sample_record
from ragmeter.core.schema import Sample


def save(samples: Iterable[Sample], path: str | Path, fmt: str | None = None) -> Path:
    """Write samples to ``.jsonl``, ``.csv`` (list fields as JSON cells) or ``.parquet``, in the
    shape :func:`ragmeter.io.load` reads back as the same samples."""
    path = Path(path)
    kind = (fmt or path.suffix.lstrip(".")).lower()
    if kind not in {"jsonl", "ndjson", "csv", "parquet"}:
        raise ValueError(f"unknown format {kind!r}")
    records = [sample_record(s.model_dump(mode="json", exclude_defaults=True)) for s in samples]
    cols = sample_columns(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind in {"jsonl", "ndjson"}:
        with path.open("w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps({c: r[c] for c in cols if r[c] is not None}, ensure_ascii=False) + "\n")
        return path
    import pandas as pd

    flat = [{c: (json.dumps(r[c], ensure_ascii=False) if isinstance(r[c], list | dict) else r[c]) for c in cols}
            for r in records]
    df = pd.DataFrame(flat, columns=cols)
    if kind == "csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path
