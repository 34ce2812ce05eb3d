"""Read the items of an OpenAI eval as ragmeter samples.

Accepted rows (JSONL, JSON, CSV/TSV or Parquet, one item per row):

- ``{"item": {...}, "sample": {...}}``: OpenAI's JSONL data source (``file_content``);
- an output item of a run (``{"datasource_item": {...}, "sample": {"output": [{"role",
  "content"}], ...}, ...}``, as ``GET /v1/evals/{eval_id}/runs/{run_id}/output_items`` lists
  them): the item is ``datasource_item``, ``sample.output_text`` the output messages' text;
- a flat row: the row is the item, and its ``sample`` field (if any) the sample;
- with ``sample_column`` (``--map sample=COLUMN``): the sample is that column.

A sample given as text is ``{"output_text": text}``; when ``output_text`` is a JSON object or list
and there is no ``output_json``, ``output_json`` is the parsed value (OpenAI fills it when the
model's output is valid JSON). Each sample keeps its namespaces in ``metadata["openai_item"]`` and
``metadata["openai_sample"]``; its ``question``, ``answer`` and ``references`` are filled from the
usual item fields (for tables and exports only: graders read the namespaces).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import Sample
from ragmeter.io.readers import Dataset

_QUESTION_KEYS = ("question", "input", "prompt", "query")
_REFERENCE_KEYS = ("ideal", "reference", "reference_answer", "expected", "expected_output", "ground_truth",
                   "correct_answer", "answer", "label")
_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "integer": (int,),
                                            "boolean": (bool,), "object": (dict,), "array": (list,),
                                            "null": (type(None),)}


def as_sample(value: Any) -> dict[str, Any] | None:
    """The ``sample`` namespace made from a cell: text -> ``{"output_text": ...}``, an object as is;
    ``output_json`` parsed from ``output_text`` when that is a JSON object or list."""
    if value is None:
        return None
    if isinstance(value, str):
        sample: dict[str, Any] = {"output_text": value}
    elif isinstance(value, Mapping):
        sample = dict(value)
    else:
        raise ValueError(f"a sample is text or an object, got {type(value).__name__}")
    text = sample.get("output_text")
    if "output_json" not in sample and isinstance(text, str) and text.lstrip()[:1] in {"{", "["}:
        try:
            sample["output_json"] = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            pass
    if "output_text" not in sample and "output_json" in sample:
        sample["output_text"] = json.dumps(sample["output_json"], ensure_ascii=False)
    return sample


def _question(item: Mapping[str, Any]) -> str | None:
    for k in _QUESTION_KEYS:
        v = item.get(k)
        if isinstance(v, str):
            return v
        if isinstance(v, list):  # chat messages (openai/evals registry rows): the last user turn
            users = [m.get("content") for m in v if isinstance(m, Mapping) and m.get("role") == "user"]
            if users and isinstance(users[-1], str):
                return users[-1]
    return None


def _references(item: Mapping[str, Any]) -> list[str]:
    for k in _REFERENCE_KEYS:
        v = item.get(k)
        if isinstance(v, str):
            return [v]
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return list(v)
    return []


def _is_type(v: Any, name: str) -> bool:
    if name in {"boolean", "null"}:
        return isinstance(v, _JSON_TYPES[name])
    if isinstance(v, bool):
        return False
    return isinstance(v, _JSON_TYPES.get(name, (object,)))


def _schema_problem(item: Mapping[str, Any], schema: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(field, why) when ``item`` lacks a field the item schema requires, or a field has another
    JSON type than its ``properties`` entry says (the two checks OpenAI's item schemas rely on)."""
    if not schema:
        return None
    for k in schema.get("required") or []:
        if isinstance(k, str) and k not in item:
            return k, "required by the eval's item_schema, missing"
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    for k, spec in props.items():
        if k not in item or not isinstance(spec, Mapping):
            continue
        types = spec.get("type")
        names = [t for t in ([types] if isinstance(types, str) else types if isinstance(types, list) else [])
                 if isinstance(t, str) and t in _JSON_TYPES]
        if names and not any(_is_type(item[k], t) for t in names):
            return k, f"the item_schema says {'/'.join(names)}, got {type(item[k]).__name__}"
    return None


def row_to_sample(row: Any, n: int, *, sample_column: str | None = None,
                  item_schema: Mapping[str, Any] | None = None, file: str = "<list>",
                  line: int | None = None) -> Sample:
    """One data row -> a Sample carrying its ``item`` and ``sample`` namespaces.

    Raises:
        DatasetError: naming the file, line and field.
    """
    if not isinstance(row, Mapping):
        raise DatasetError(f"expected an object (an item), got {type(row).__name__}", file=file, line=line)
    row = {str(k): v for k, v in row.items()}
    if isinstance(row.get("datasource_item"), Mapping) and isinstance(row.get("sample"), Mapping):
        # an output item of a run (GET /v1/evals/{eval_id}/runs/{run_id}/output_items)
        item = dict(row["datasource_item"])
        out = row["sample"].get("output")
        texts = [o.get("content") for o in out if isinstance(o, Mapping)] if isinstance(out, list) else []
        raw_sample = {**{k: v for k, v in row["sample"].items() if k in {"output", "model", "finish_reason"}},
                      "output_text": "".join(t for t in texts if isinstance(t, str))}
        where = "sample.output"
    elif isinstance(row.get("item"), Mapping) and set(row) <= {"item", "sample", "id"}:
        item = dict(row["item"])
        raw_sample = row.get("sample")
        where = "sample"
    else:
        item = {k: v for k, v in row.items() if k != "sample"}
        raw_sample, where = row.get("sample"), "sample"
    if sample_column is not None:
        if sample_column not in row and sample_column not in item:
            raise DatasetError(f"--map sample={sample_column}: no such column (columns: {', '.join(row)})",
                               file=file, line=line)
        raw_sample, where = row.get(sample_column, item.get(sample_column)), sample_column
    try:
        sample = as_sample(raw_sample)
    except ValueError as exc:
        raise DatasetError(str(exc), file=file, line=line, field=where) from None
    bad = _schema_problem(item, item_schema)
    if bad:
        raise DatasetError(bad[1], file=file, line=line, field=bad[0])
    ident = item.get("id", row.get("id"))
    sid = str(ident) if isinstance(ident, str | int) and not isinstance(ident, bool) else f"row-{n}"
    answer = sample.get("output_text") if sample else None
    try:
        json.dumps([item, sample], ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise DatasetError(f"cannot be stored as JSON text: {exc}", file=file, line=line) from None
    return Sample(id=sid, question=_question(item), answer=answer if isinstance(answer, str) else None,
                  references=_references(item),
                  metadata={"openai_item": item, "openai_sample": sample})


def load_items(path: str | Path, *, sample_column: str | None = None,
               item_schema: Mapping[str, Any] | None = None, on_error: str = "raise") -> Dataset:
    """Read an eval's items (see the module docstring).

    Raises:
        DatasetError: the file is missing or unreadable, or a row is bad (``on_error="raise"``).
    """
    from ragmeter.io.formats import _rows_from_file

    p = Path(path)
    if not p.is_file():
        raise DatasetError("file not found" if not p.exists() else "not a file", file=str(p))
    rows, _mode = _rows_from_file(p, None)
    samples: list[Sample] = []
    lines: list[int] = []
    skipped: list[DatasetError] = []
    seen: dict[str, int] = {}
    columns: dict[str, None] = {}
    n = 0
    for lineno, row in rows:
        n += 1
        try:
            if isinstance(row, DatasetError):
                raise row
            if isinstance(row, Mapping):
                columns.update(dict.fromkeys(map(str, row)))
            s = row_to_sample(row, n, sample_column=sample_column, item_schema=item_schema, file=str(p), line=lineno)
            if s.id in seen:
                raise DatasetError(f"duplicate id {s.id!r} (first seen on line {seen[s.id]})", file=str(p),
                                   line=lineno, field="id")
            seen[s.id] = lineno
            samples.append(s)
            lines.append(lineno)
        except DatasetError as exc:
            if on_error != "skip":
                raise
            skipped.append(exc)
    return Dataset(samples, source=str(p), skipped=skipped, columns=list(columns), lines=lines)
