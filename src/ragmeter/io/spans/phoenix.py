"""Phoenix's span export: ``px.Client().get_spans_dataframe()`` saved with ``to_parquet``,
``to_csv`` or ``to_json(orient="records")`` (JSON lines or one list). One row per span: ``context.trace_id``, ``context.span_id``, ``parent_id``, ``name``,
``span_kind``, ``start_time``, ``end_time``, ``status_code``, ``status_message``, ``events`` and the
OpenInference attributes as ``attributes.*`` columns (``attributes.llm.input_messages`` a list of
``{"message.role", "message.content", ...}``, ``attributes.retrieval.documents`` a list of
``{"document.content", "document.id", "document.score"}``). In a CSV those lists are text: JSON, or
the Python repr pandas writes.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace
from ragmeter.io.spans.messages import loads_maybe
from ragmeter.io.spans.otlp import SpanRecord

#: the suffixes of ``to_json(orient="records")``, with or without ``lines=True``
_JSON = (".json", ".jsonl", ".ndjson")
#: the columns that make a table a Phoenix span dataframe
KEY_COLUMNS = ("context.trace_id", "context.span_id")


def columns(path: Path) -> list[str]:
    """The column names of a Parquet or CSV file (empty when it is neither)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        if suffix in (".csv", ".tsv"):
            import csv

            with path.open(encoding="utf-8-sig", newline="") as fh:
                return next(csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ","), [])
        if suffix in _JSON:
            return list(next((row for _, row in _rows(path)), {}))
    except Exception:  # noqa: BLE001 - not a readable table: not a span file; the dataset reader says why
        return []
    return []


def is_phoenix(path: Path) -> bool:
    cols = set(columns(path))
    return all(c in cols for c in KEY_COLUMNS)


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a bad file
            raise DatasetError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {str(exc)[:120]})") from None
        yield from enumerate(table.to_pylist(), start=1)
        return
    if suffix in _JSON:
        from ragmeter.io.spans.otlp import objects_in_text, read_text

        for line, obj in objects_in_text(read_text(path), str(path)):
            for row in obj if isinstance(obj, list) else [obj]:
                if not isinstance(row, dict):
                    raise DatasetError(f"expected a span object, got {type(row).__name__}", file=str(path), line=line)
                yield line, row
        return
    import csv

    with path.open(encoding="utf-8-sig", newline="") as fh:
        # strict: a quoted cell left open at the end (a file cut while it was written) is an error,
        # not a cell that swallows the rest of the file
        reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",", strict=True)
        line = 1
        while True:
            start = line + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DatasetError(f"not a readable CSV row ({exc}; is the file cut short?)",
                                   file=str(path), line=start) from None
            line = reader.line_num
            fields = reader.fieldnames or []
            extra, short = row.pop(None, None) or [], sum(v is None for v in row.values())  # type: ignore[call-overload]
            if extra or short:
                n = len(fields) + len(extra) - short
                hint = " (is the file cut short?)" if short else ""
                raise DatasetError(f"a row of {n} cells under a header of {len(fields)} columns{hint}",
                                   file=str(path), line=start)
            yield start, {k: (None if v == "" else v) for k, v in row.items()}


def _cell(v: Any) -> Any:
    """A cell as a value: NaN and NaT are missing; list/dict text (JSON or a Python repr) parsed;
    numpy arrays as lists."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if hasattr(v, "tolist") and not isinstance(v, str | bytes):
        v = v.tolist()
    if isinstance(v, str) and v.strip()[:1] in ("[", "{"):
        parsed = loads_maybe(v)
        if isinstance(parsed, str):
            try:
                parsed = ast.literal_eval(v.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return v
        return parsed
    return v


def nest(value: Any) -> Any:
    """Dotted keys inside list items made nested (``{"message.role": "user"}`` ->
    ``{"message": {"role": "user"}}``), as OpenInference's flattened attributes are."""
    if isinstance(value, list):
        return [nest(x) for x in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for k, v in value.items():
        node = out
        parts = str(k).split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else node
        node[parts[-1]] = nest(v)
    return out


def _ns(value: Any, where: str) -> int:
    from ragmeter.io.spans.tree import iso_ns

    if hasattr(value, "isoformat"):  # a datetime from Parquet (naive: UTC, as an ISO time is)
        value = value.isoformat()
    return iso_ns(value, where) or 0


def _record(row: dict[str, Any], where: str) -> SpanRecord:
    tid, sid = _cell(row.get("context.trace_id")), _cell(row.get("context.span_id"))
    if not tid or not sid:
        raise DatasetError(f"{where}: a span without {'context.trace_id' if not tid else 'context.span_id'}")
    attrs: dict[str, Any] = {}
    for k, v in row.items():
        if k.startswith("attributes.") and (c := _cell(v)) is not None:
            attrs[k.removeprefix("attributes.")] = nest(c) if isinstance(c, list) else c
    if "openinference.span.kind" not in attrs and _cell(row.get("span_kind")):
        attrs["openinference.span.kind"] = str(row["span_kind"])
    events = []
    for ev in _cell(row.get("events")) or []:
        if isinstance(ev, Mapping):
            events.append({"name": str(ev.get("name") or ""), "time_ns": 0,
                           "attributes": dict(ev.get("attributes") or {})})
    status = str(_cell(row.get("status_code")) or "")
    try:
        start, end = _ns(_cell(row.get("start_time")), "start_time"), _ns(_cell(row.get("end_time")), "end_time")
    except DatasetError as exc:
        raise DatasetError(f"{where}: trace {tid} span {sid}: {exc}") from None
    parent = _cell(row.get("parent_id"))
    return SpanRecord(trace_id=str(tid), span_id=str(sid), parent_id=str(parent) if parent else None,
                      name=str(_cell(row.get("name")) or ""), start_ns=start, end_ns=end, attributes=attrs,
                      error=(str(_cell(row.get("status_message")) or "error") if status.upper() == "ERROR" else None),
                      events=events)


def read(path: Path) -> list[AgentTrace]:
    from ragmeter.io.spans import agent_traces_from_spans

    cols = columns(path)
    missing = [c for c in KEY_COLUMNS if c not in cols]
    if missing:
        raise DatasetError(f"{path}: not a Phoenix span dataframe (no column {', '.join(missing)})")
    records = [_record(row, f"{path}:{line}") for line, row in _rows(path)]
    return agent_traces_from_spans(records, where=str(path))
