"""Export a stored run's per-sample rows (inputs, values, pass/fail, reasons, judge verdicts) to
CSV, Parquet, JSONL or Excel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.run.rows import result_rows, select_columns
from ragmeter.store import Store


def run_rows(store: Store, run_id: str) -> tuple[list[str], list[dict[str, Any]]]:
    """``(metric keys, rows)``: one row per sample as :func:`ragmeter.run.rows.result_rows` builds it
    (inputs, one value per metric with ``None`` = no value, ``METRIC__pass``, ``no_value_reasons``, ``judge``)."""
    run = store.get_run(run_id)
    keys = [m["key"] for m in run.metrics]
    table = store.score_table(run_id)
    samples = store.run_samples(run_id)
    scores = {k: [table.get(k, {}).get(s.id) for s in samples] for k in keys}
    summary = store.run_summary(run)
    higher = {k: summary[k].direction == "higher" if k in summary else True for k in keys}
    return keys, result_rows(samples, scores, higher, (run.extra or {}).get("thresholds"))


#: the file formats ``export_run`` writes (``excel`` writes an .xlsx workbook with openpyxl)
EXPORT_FORMATS = ("csv", "parquet", "jsonl", "excel")


#: other names of the formats (``-f xlsx`` is ``-f excel``)
FORMAT_ALIASES = {"xlsx": "excel"}


def check_format(fmt: str) -> str:
    """The format ``fmt`` names (an alias such as ``xlsx`` gives ``excel``) when ragmeter can export
    to it.

    Raises:
        ConfigError: an unknown format, listing the ones there are.
    """
    fmt = FORMAT_ALIASES.get(fmt.lower(), fmt.lower())
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"cannot export to {fmt!r}: use one of {', '.join(EXPORT_FORMATS)} (xlsx = excel)")
    return fmt


#: the format an output file's suffix names (``-o rows.parquet`` without ``--format``)
SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
                  ".ndjson": "jsonl", ".xlsx": "excel"}


def format_for(fmt: str | None, path: Path | None) -> str:
    """The export format: ``fmt`` when given, else the one the output's suffix names, else csv.

    Raises:
        ConfigError: an unknown ``fmt``, or one that contradicts the output's suffix (``-f csv -o
            rows.parquet`` would write CSV text into a file every reader takes for Parquet).
    """
    named = SUFFIX_FORMATS.get(path.suffix.lower()) if path is not None else None
    if fmt is None:
        return named or "csv"
    fmt = check_format(fmt)
    if named is not None and named != fmt:
        raise ConfigError(f"--format {fmt} does not match the output file {path} (a {named} file name): "
                          f"drop --format, or name the file .{'xlsx' if fmt == 'excel' else fmt}")
    return fmt


def _flat(v: Any) -> Any:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v


def export_run(store: Store, run_id: str, fmt: str, path: Path, columns: Sequence[str] | None = None) -> Path:
    """Write the run's rows to ``path`` in ``fmt`` (csv, parquet, jsonl, excel); ``columns`` chooses
    and orders the columns (lists and mappings become JSON text in the tabular formats)."""
    fmt = check_format(fmt)
    from ragmeter.apps.export.table import run_table, select

    _, table = run_table(store, run_id, flat=fmt != "jsonl")
    if table["id"]:  # built from the stored columns in bulk; an empty run keeps the row path
        return _write_table(select(table, columns), fmt, path)
    _, rows = run_rows(store, run_id)
    rows = select_columns(rows, columns)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path
    import pandas as pd

    return _write_frame(pd.DataFrame([{k: _flat(v) for k, v in r.items()} for r in rows]), fmt, path)


def _write_table(table: dict[str, list[Any]], fmt: str, path: Path) -> Path:
    """Write columns (lists and mappings already JSON text, except for ``jsonl``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        names = list(table)
        dumps = json.dumps
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(dumps(dict(zip(names, row, strict=True)), ensure_ascii=False) + "\n"
                          for row in zip(*table.values(), strict=True))
        return path
    if fmt == "csv":
        return _write_csv(table, path)
    import pandas as pd

    return _write_frame(pd.DataFrame(table), fmt, path)


def _csv_cell(v: Any) -> Any:
    """A cell as pandas' ``to_csv`` writes it: no value (``None``, NaN) as an empty field, a float
    as its shortest round-trip text (numpy's ``astype(str)`` is Python's ``repr``), the rest as
    ``str``."""
    if v is None or v != v:
        return ""
    return repr(v) if type(v) is float else v


def _write_csv(table: dict[str, list[Any]], path: Path) -> Path:
    """The CSV file ``pandas.DataFrame(table).to_csv(path, index=False)`` writes, byte for byte, with
    the csv module pandas itself writes through (same dialect: ``,``, ``"``, minimal quoting,
    ``\n``), without importing pandas (0.4 s of a command's start) or building a frame."""
    import csv

    cols = [[_csv_cell(v) for v in col] for col in table.values()]
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        w.writerow(list(table))
        w.writerows(zip(*cols, strict=True))
    return path


def _write_frame(df: Any, fmt: str, path: Path) -> Path:
    """Write a DataFrame as csv, parquet or xlsx."""
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        try:
            import openpyxl  # noqa: F401
        except ImportError:
            raise ConfigError("xlsx export needs openpyxl: pip install 'ragmeter-eval[excel]'") from None
        df.to_excel(path, index=False, engine="openpyxl")
    return path
