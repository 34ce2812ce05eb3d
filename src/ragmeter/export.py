"""Export a stored run's per-sample values to CSV, Parquet or JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmeter.errors import ConfigError
from ragmeter.store import Store


def run_rows(store: Store, run_id: str) -> tuple[list[str], list[dict[str, Any]]]:
    """``(metric keys, rows)``: one row per sample with ``id``, one value per metric (``None`` =
    no value) and ``no_value_reasons``."""
    run = store.get_run(run_id)
    keys = [m["key"] for m in run.metrics]
    table = store.score_table(run_id)
    rows = []
    for s in store.run_samples(run_id):
        row: dict[str, Any] = {"id": s.id}
        reasons = {}
        for k in keys:
            sc = table.get(k, {}).get(s.id)
            row[k] = sc.value if sc else None
            if sc is None or sc.value is None:
                reasons[k] = sc.reason if sc else "not scored"
        row["no_value_reasons"] = reasons
        rows.append(row)
    return keys, rows


#: the file formats ``export_run`` writes
EXPORT_FORMATS = ("csv", "parquet", "jsonl")


def check_format(fmt: str) -> str:
    """``fmt`` when ragmeter can export to it.

    Raises:
        ConfigError: an unknown format, listing the ones there are.
    """
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"cannot export to {fmt!r}: use one of {', '.join(EXPORT_FORMATS)} "
                          "(e.g. -f csv; spreadsheets open the CSV)")
    return fmt


def export_run(store: Store, run_id: str, fmt: str, path: Path) -> Path:
    check_format(fmt)
    keys, rows = run_rows(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path
    import pandas as pd

    df = pd.DataFrame([{**{k: v for k, v in r.items() if k != "no_value_reasons"},
                        "no_value_reasons": json.dumps(r["no_value_reasons"])} for r in rows],
                      columns=["id", *keys, "no_value_reasons"])
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        raise ConfigError(f"unknown export format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    return path
