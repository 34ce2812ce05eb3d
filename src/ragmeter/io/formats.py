"""Raw rows of each dataset file format (JSONL, JSON, CSV/TSV, Parquet; ``.gz`` gunzipped), with
errors that name the file and line. Field aliases and ``Sample`` building live in ``readers``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, Literal

from ragmeter.core.errors import DatasetError

#: how a source's string cells are read: CSV text, DataFrame values, or JSON values
CellMode = Literal["csv", "frame", "json"]


def iter_rows(path: str | Path, fmt: str | None = None, *, text_cells: bool = False,
              fields: Collection[str] = ()) -> tuple[Iterator[tuple[int, Any]], CellMode]:
    """A dataset file's raw ``(line, row | DatasetError)`` pairs and how its string cells are read.

    ``text_cells``: a Parquet file's text cells stay text (mode ``csv``: the reader parses the
    JSON of the fields that hold lists or objects, so an answer that is JSON text stays an answer);
    otherwise every cell that looks like JSON is parsed (mode ``json``). ``fields``: the column names
    of sample fields; a JSON object with none of them holding one list of objects is that list."""
    path = Path(path)
    if not path.exists():
        raise DatasetError("file not found", file=str(path))
    if path.is_dir():
        raise DatasetError("is a directory, expected a dataset file", file=str(path))
    return _rows_from_file(path, fmt, text_cells=text_cells, fields=fields)


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped for ``.gz`` files."""
    if path.suffix.lower() != ".gz":
        return path.read_bytes()
    import gzip
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:
        raise DatasetError(f"not a readable gzip file ({exc})", file=str(path)) from None


def is_parquet(path: str | Path, fmt: str | None = None) -> bool:
    path = Path(path)
    suffix = Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix
    return (fmt or suffix.lstrip(".")).lower() in {"parquet", "pq"}


def _rows_from_file(path: Path, fmt: str | None, *, text_cells: bool = False, fields: Collection[str] = ()
                    ) -> tuple[Iterator[tuple[int, Any]], CellMode]:
    suffix = Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix
    kind = (fmt or suffix.lstrip(".")).lower()
    if kind in {"jsonl", "ndjson"}:
        return _jsonl_rows(path), "json"
    if kind == "json":
        return _json_rows(path, fields), "json"
    if kind in {"csv", "tsv"}:
        return _csv_rows(path, "\t" if kind == "tsv" else ","), "csv"
    if kind in {"parquet", "pq"}:
        return (_parquet_rows(path, parse=False), "csv") if text_cells else (_parquet_rows(path), "json")
    if kind == "xlsx":
        return _xlsx_rows(path), "frame"
    raise DatasetError(f"unknown dataset format {kind!r} (use .jsonl, .json, .csv, .tsv, .parquet or .xlsx)",
                       file=str(path))


def _xlsx_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """The first sheet of an Excel workbook (``ragmeter export -f xlsx``, a spreadsheet saved as
    .xlsx): its first row is the header, each later row a sample, numbered by its sheet row."""
    try:
        import openpyxl
    except ImportError:
        raise DatasetError("reading .xlsx needs openpyxl: pip install 'ragmeter-eval[excel]'",
                           file=str(path)) from None
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - zipfile, XML and openpyxl errors for a file that is not a workbook
        raise DatasetError(f"not a readable .xlsx workbook ({type(exc).__name__}: {str(exc)[:120]})",
                           file=str(path)) from None
    try:
        rows = book.worksheets[0].iter_rows(values_only=True) if book.worksheets else iter(())
        header = next(rows, None)
        if header is None:
            return
        names = ["" if c is None else str(c).strip() for c in header]
        dup = sorted({c for c in names if names.count(c) > 1 and c})
        if dup:
            raise DatasetError(f"duplicate column name(s) {dup} in the header", file=str(path), line=1)
        for line, cells in enumerate(rows, start=2):
            if all(c is None or c == "" for c in cells):
                continue  # an empty sheet row
            yield line, {k: (v.isoformat() if hasattr(v, "isoformat") else v)  # a date cell as ISO text
                         for k, v in zip(names, cells, strict=False) if k}
    finally:
        book.close()


def _decode(raw: bytes, path: Path, first_line: int = 1) -> str:
    try:
        return raw.decode("utf-8-sig" if first_line == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + raw[:exc.start].count(b"\n")
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DatasetError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {col}); "
                           "re-save the file as UTF-8", file=str(path), line=line) from None


def _json_loads(text: str, path: Path, line: int | None, line_offset: int = 0) -> Any:
    if line is not None:  # one JSON Lines row: its line ending is not part of it (a column on "line 2")
        text = text.rstrip("\r\n")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at_line = (line if line is not None else exc.lineno + line_offset)
        msg = exc.msg.removesuffix(" at")  # "Unterminated string starting at" + " at column N"
        cut = line is not None and (exc.pos >= len(text.rstrip()) or msg.startswith("Unterminated string"))
        where = f"at column {exc.colno}" + (": the row is cut short (or holds a raw line break)"
                                             if cut else "")
        raise DatasetError(f"invalid JSON: {msg} {where}", file=str(path), line=at_line) from None
    except RecursionError:
        raise DatasetError("invalid JSON: nested too deeply", file=str(path), line=line) from None
    except ValueError as exc:  # a number of more than 4,300 digits (int() refuses to parse it)
        raise DatasetError(f"invalid JSON: {str(exc).split(';')[0]}", file=str(path), line=line) from None


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with (path.open("rb") if path.suffix.lower() != ".gz" else io.BytesIO(_read_bytes(path))) as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = _decode(raw, path, lineno)
                if lineno == 1:
                    line = line.lstrip("\ufeff")
                if not line.strip():
                    continue
                yield lineno, _json_loads(line, path, lineno)
            except DatasetError as exc:
                yield lineno, exc


def _json_rows(path: Path, fields: Collection[str] = ()) -> Iterator[tuple[int, Any]]:
    obj = _json_loads(_decode(_read_bytes(path), path), path, None)
    from ragmeter.io import promptfoo

    found = promptfoo.results(obj)
    if found is not None:
        obj = [promptfoo.row(r) for r in found]
    elif isinstance(obj, dict):
        for key in ("samples", "data", "test_cases", "examples", "records", "results"):
            if isinstance(obj.get(key), list):
                obj = obj[key]
                break
        else:
            # an object holding its rows under another name ({"items": [...]}, {"rows": [...]}): the
            # one value that is a list of objects, when the object itself has no field (else one row)
            lists = [v for v in obj.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
            obj = lists[0] if len(lists) == 1 and fields and not set(fields) & set(obj) else [obj]
    if not isinstance(obj, list):
        raise DatasetError(f"expected a list of objects, got {type(obj).__name__}", file=str(path))
    return ((i + 1, r) for i, r in enumerate(obj))


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, Any]]:
    text = _decode(_read_bytes(path), path).lstrip("\ufeff")
    from ragmeter.core.files import csv_delimiter

    delimiter = csv_delimiter(text, delimiter)  # Excel's semicolon CSV (decimal-comma locales)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    # a cell may hold a long document or many contexts (pandas writes any length): the csv module's
    # 131,072-character limit is lifted while this file is read, then put back
    limit = csv.field_size_limit(2**31 - 1)
    try:
        yield from _csv_cells(reader, path)
    finally:
        csv.field_size_limit(limit)


def _csv_cells(reader: Any, path: Path) -> Iterator[tuple[int, Any]]:
    header: list[str] | None = None
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            msg = str(exc)
            if "end of data" in msg or "EOF" in msg:
                msg = ("unbalanced quote: the quoted cell that starts here never closes, so the rest "
                       "of the file would be read as one cell")
            raise DatasetError(f"CSV parse error: {msg}", file=str(path), line=start) from None
        line, start = start, reader.line_num + 1
        if header is None:
            header = [c.strip() for c in cells]
            dup = sorted({c for c in header if header.count(c) > 1 and c})
            if dup:
                raise DatasetError(f"duplicate column name(s) {dup} in the header", file=str(path), line=line)
            continue
        if not cells or all(c == "" for c in cells) and len(cells) <= 1:
            continue  # blank line
        if len(cells) != len(header):
            yield line, DatasetError(f"row has {len(cells)} cells, the header has {len(header)}; check the "
                                     "quoting and the delimiter", file=str(path), line=line)
            continue
        yield line, {k: (None if v == "" else v) for k, v in zip(header, cells, strict=True)}
    # an empty file has no samples, as an empty JSONL file: an incomplete run (exit 3), not an input error


def _parquet_rows(path: Path, parse: bool = True) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError ... for a bad file
        raise DatasetError(f"not a readable Parquet file ({type(exc).__name__}: {str(exc)[:120]})",
                           file=str(path)) from None
    for i, row in enumerate(table.to_pylist(), start=1):
        # list/dict fields may be stored as JSON text (as ragmeter's writer does)
        yield i, json_cells(row) if parse else row


def json_cells(row: Any) -> Any:
    """A row with its text cells that hold JSON lists or objects parsed (other values as they are)."""
    if not isinstance(row, dict):
        return row
    return {k: (_json_cell(v) if isinstance(v, str) else v) for k, v in row.items()}


def _json_cell(v: str) -> Any:
    s = v.strip()
    if s[:1] in "[{":
        try:
            return json.loads(s)
        except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, nested too deeply
            return v
    return v
