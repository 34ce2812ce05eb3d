"""Dataset readers with field aliases and errors that name file, line and field."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from ragmeter.errors import DatasetError
from ragmeter.schema import Chunk, Sample

#: canonical field -> accepted column names (first match wins, in this order).
#: ``retrieved_ids`` / ``relevant_ids`` are id-valued forms of ``contexts`` / ``relevant``.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "sample_id", "query_id", "qid", "example_id", "eval_id", "question_id"),
    "question": ("question", "query", "user_input", "input", "prompt"),
    "answer": ("answer", "actual", "prediction", "response", "output", "generated_answer",
               "predicted_answer", "actual_output"),
    "references": ("references", "reference", "expected", "ground_truth", "ground_truths",
                   "ground_truth_answer", "expected_answer", "expected_output", "reference_answer",
                   "answers", "gold_answer", "target"),
    "negative_references": ("negative_references", "negative_reference", "negative_answers",
                            "wrong_answers"),
    "contexts": ("contexts", "context", "retrieved_contexts", "retrieval_context",
                 "retrieved_chunks", "retrieved", "passages"),
    "retrieved_ids": ("retrieved_ids", "retrieved_doc_ids", "retrieved_context_ids"),
    "relevant": ("relevant", "relevant_chunks", "ground_truth_chunks", "reference_contexts",
                 "golden_chunks", "ground_truth_contexts", "relevant_contexts"),
    "relevant_ids": ("relevant_ids", "relevant_doc_ids", "ground_truth_ids", "qrels"),
    "label": ("label", "human_label", "is_correct", "correct", "human_correct", "correctness"),
    "metadata": ("metadata", "meta"),
    "trace": ("trace", "agent_trace", "messages"),
}
_TARGETS = set(FIELD_ALIASES)
_CHUNK_KEYS = {
    "text": ("text", "content", "page_content", "chunk", "passage"),
    "id": ("id", "doc_id", "chunk_id", "docid"),
    "source": ("source", "file", "filename", "document", "doc"),
    "start": ("start", "start_char", "start_offset", "begin"),
    "end": ("end", "end_char", "end_offset"),
    "score": ("score",),
    "grade": ("grade", "relevance", "rel"),
}
_TRUE = {"1", "true", "yes", "y", "correct", "right", "t"}
_FALSE = {"0", "false", "no", "n", "incorrect", "wrong", "f"}

OnError = Literal["raise", "skip"]


@dataclass
class Dataset:
    """Samples read from one source, with what was skipped and a content fingerprint."""

    samples: list[Sample]
    source: str = "<list>"
    skipped: list[DatasetError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def __getitem__(self, i: int) -> Sample:
        return self.samples[i]

    @property
    def fingerprint(self) -> str:
        """sha256 of the samples' canonical JSON (order matters)."""
        h = hashlib.sha256()
        for s in self.samples:
            h.update(s.model_dump_json(exclude_none=True).encode())
            h.update(b"\n")
        return h.hexdigest()

    def skipped_summary(self) -> dict[str, Any]:
        return {"count": len(self.skipped), "errors": [str(e) for e in self.skipped]}


def parse_mapping(items: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``["answer=my_col", ...]`` -> ``{"answer": "my_col"}``, validating the target names."""
    if not items:
        return {}
    pairs = items.items() if isinstance(items, Mapping) else (_split_map(i) for i in items)
    out = {}
    for target, column in pairs:
        canon = _canonical_target(target)
        if canon is None:
            raise DatasetError(f"--map target {target!r} is not a sample field; "
                               f"valid: {', '.join(sorted(_TARGETS))}")
        out[canon] = column
    return out


def _split_map(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise DatasetError(f"--map expects field=column, got {item!r}")
    a, b = item.split("=", 1)
    return a.strip(), b.strip()


def _canonical_target(name: str) -> str | None:
    if name in _TARGETS:
        return name
    for canon, aliases in FIELD_ALIASES.items():
        if name in aliases:
            return canon
    return None


def example_path() -> Path:
    """Path of the bundled example dataset (``ragmeter/data/example/samples.jsonl``)."""
    return Path(str(resources.files("ragmeter") / "data" / "example" / "samples.jsonl"))


#: bundled datasets by name: the English handbook example and its Portuguese twin
BUNDLED = {"example": "example", "example-pt": "example_pt"}


def bundled_path(name: str) -> Path:
    """Path of a bundled dataset's ``samples.jsonl`` (``"example"``, ``"example-pt"``)."""
    return Path(str(resources.files("ragmeter") / "data" / BUNDLED[name] / "samples.jsonl"))


def load(data: str | Path | Sequence[Mapping[str, Any]] | Sequence[Sample] | Dataset, *,
         mapping: Mapping[str, str] | Iterable[str] | None = None,
         on_error: OnError = "raise", fmt: str | None = None) -> Dataset:
    """Load a dataset.

    Args:
        data: a path (``.jsonl``/``.json``/``.csv``/``.parquet``), the word ``"example"`` for the
            bundled dataset (``"example-pt"``: its Portuguese twin), a list of dicts, a list of ``Sample``, or a ``Dataset``.
        mapping: ``{field: column}`` overrides for column names the aliases do not cover.
        on_error: ``"raise"`` stops at the first bad row; ``"skip"`` keeps going and records the
            errors in ``Dataset.skipped``.
        fmt: force a format (``jsonl``, ``csv``, ``parquet``) instead of guessing from the suffix.

    Raises:
        DatasetError: naming the file, line and field of the first bad row (``on_error="raise"``).
    """
    if isinstance(data, Dataset):
        return data
    mp = parse_mapping(mapping)
    if isinstance(data, str | Path):
        bundled = str(data) in BUNDLED and not Path(data).exists()
        path = bundled_path(str(data)) if bundled else Path(data)
        if not path.exists():
            raise DatasetError("file not found", file=str(path))
        rows = _rows_from_file(path, fmt)
        source = str(data) if bundled else str(path)
    else:
        if data and all(isinstance(x, Sample) for x in data):
            return Dataset(list(data))  # type: ignore[arg-type]
        rows = ((i + 1, r) for i, r in enumerate(data))
        source = "<list>"
    return _build(rows, source, mp, on_error)


def _rows_from_file(path: Path, fmt: str | None) -> Iterator[tuple[int, Any]]:
    kind = (fmt or path.suffix.lstrip(".")).lower()
    if kind in {"jsonl", "ndjson"}:
        return _jsonl_rows(path)
    if kind == "json":
        return _json_rows(path)
    if kind in {"csv", "tsv"}:
        return _csv_rows(path, "\t" if kind == "tsv" else ",")
    if kind in {"parquet", "pq"}:
        return _parquet_rows(path)
    raise DatasetError(f"unknown dataset format {kind!r} (use .jsonl, .json, .csv or .parquet)",
                       file=str(path))


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, DatasetError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                                           file=str(path), line=lineno)


def _json_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"invalid JSON ({exc.msg})", file=str(path), line=exc.lineno) from exc
    if isinstance(obj, dict):
        obj = obj.get("samples") or obj.get("data") or [obj]
    return ((i + 1, r) for i, r in enumerate(obj))


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter=delimiter)
        start = 2
        for row in reader:
            yield start, {k: _csv_cell(v) for k, v in row.items() if k is not None}
            start = reader.line_num + 1


def _csv_cell(v: str | None) -> Any:
    # list/dict-valued cells are written as JSON; an empty cell is a missing value
    if v is None or v == "":
        return None
    return _json_cell(v)


def _json_cell(v: str) -> Any:
    s = v.strip()
    if s[:1] in "[{":
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            return v
    return v


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for i, row in enumerate(table.to_pylist(), start=1):
        # list/dict fields may be stored as JSON text (as ragmeter's writer does)
        yield i, {k: (_json_cell(v) if isinstance(v, str) else v) for k, v in row.items()}


def _build(rows: Iterable[tuple[int, Any]], source: str, mapping: Mapping[str, str],
           on_error: OnError) -> Dataset:
    samples: list[Sample] = []
    skipped: list[DatasetError] = []
    seen: dict[str, int] = {}
    file = source if source != "<list>" else "<list>"
    for n, (lineno, row) in enumerate(rows, start=1):
        try:
            if isinstance(row, DatasetError):
                raise row
            sample = sample_from_dict(row, mapping=mapping, default_id=f"row-{n}",
                                      file=file, line=lineno)
            if sample.id in seen:
                raise DatasetError(f"duplicate id {sample.id!r} (first seen on line {seen[sample.id]})",
                                   file=file, line=lineno, field="id")
            seen[sample.id] = lineno
            samples.append(sample)
        except DatasetError as exc:
            if on_error == "raise":
                raise
            skipped.append(exc)
    return Dataset(samples, source=source, skipped=skipped)


def sample_from_dict(row: Any, *, mapping: Mapping[str, str] | None = None,
                     default_id: str = "row-1", file: str = "<list>", line: int | None = None) -> Sample:
    """Normalise one raw row (any supported column names) into a ``Sample``."""
    if not isinstance(row, Mapping):
        raise DatasetError(f"expected an object with fields, got {type(row).__name__}",
                           file=file, line=line)
    mapping = mapping or {}
    used: set[str] = set()
    canon: dict[str, Any] = {}
    for target, aliases in FIELD_ALIASES.items():
        names = (mapping[target],) if target in mapping else aliases
        for name in names:
            if name in row:
                used.add(name)
                if row[name] is not None:
                    canon[target] = (name, row[name])
                break
        if target in mapping and mapping[target] not in row:
            raise DatasetError(f"--map {target}={mapping[target]}: no such column "
                               f"(columns: {', '.join(map(str, row))})", file=file, line=line)
    extra = {k: v for k, v in row.items() if k not in used}

    def err(field: str, msg: str) -> DatasetError:
        return DatasetError(msg, file=file, line=line, field=field)

    out: dict[str, Any] = {}
    if "id" in canon:
        out["id"] = str(canon["id"][1])
    else:
        out["id"] = default_id
    for f in ("question", "answer"):
        if f in canon:
            name, v = canon[f]
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise err(name, f"expected text, got {type(v).__name__}")
            out[f] = str(v)
    for f in ("references", "negative_references"):
        if f in canon:
            name, v = canon[f]
            out[f] = _str_list(v, lambda m, name=name: err(name, m))
    if "contexts" in canon:
        name, v = canon["contexts"]
        out["contexts"] = _chunks(v, "text", lambda m, name=name: err(name, m))
    elif "retrieved_ids" in canon:
        name, v = canon["retrieved_ids"]
        out["contexts"] = _chunks(v, "id", lambda m, name=name: err(name, m))
    if "relevant" in canon:
        name, v = canon["relevant"]
        out["relevant"] = _chunks(v, "text", lambda m, name=name: err(name, m))
    elif "relevant_ids" in canon:
        name, v = canon["relevant_ids"]
        out["relevant"] = _chunks(v, "id", lambda m, name=name: err(name, m))
    if "label" in canon:
        name, v = canon["label"]
        out["label"] = _label(v, lambda m, name=name: err(name, m))
    meta = {}
    if "metadata" in canon:
        name, v = canon["metadata"]
        if not isinstance(v, Mapping):
            raise err(name, f"expected an object, got {type(v).__name__}")
        meta.update(v)
    meta.update(extra)
    out["metadata"] = meta
    if "trace" in canon:
        out["trace"] = _trace(canon["trace"][1], lambda m, name=canon["trace"][0]: err(name, m))
        # a chat log carries the question and the final answer too
        for f, attr in (("question", "input_text"), ("answer", "final_text")):
            if f not in out and getattr(out["trace"], attr, None) is not None:
                out[f] = getattr(out["trace"], attr)
    try:
        return Sample.model_validate(out)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise DatasetError(first["msg"], file=file, line=line, field=loc) from exc


def _trace(v: Any, err: Any) -> Any:
    # the agent module may provide richer readers (e.g. OpenAI tool-call messages)
    try:
        from ragmeter.io.traces import parse_trace
    except ImportError:
        return v
    try:
        return parse_trace(v)
    except (ValueError, TypeError, KeyError) as exc:
        raise err(f"invalid agent trace: {exc}") from exc


def _str_list(v: Any, err: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, int | float) and not isinstance(v, bool):
        return [str(v)]
    if isinstance(v, list | tuple):
        out = []
        for i, x in enumerate(v):
            if not isinstance(x, str | int | float) or isinstance(x, bool):
                raise err(f"item {i} should be text, got {type(x).__name__}")
            out.append(str(x))
        return out
    raise err(f"expected text or a list of texts, got {type(v).__name__}")


def _chunks(v: Any, default: str, err: Any) -> list[Chunk]:
    if isinstance(v, str | int):
        v = [v]
    if isinstance(v, Mapping) and default == "id" and all(isinstance(x, int | float) for x in v.values()):
        # {"doc1": 2, "doc2": 1} -> graded relevance by id (qrels style)
        return [Chunk(id=str(k), grade=float(g)) for k, g in v.items()]
    if isinstance(v, Mapping):
        v = [v]
    if not isinstance(v, list | tuple):
        raise err(f"expected a list of chunks, got {type(v).__name__}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, str | int) and not isinstance(x, bool):
            out.append(Chunk(**{default: str(x)}))
        elif isinstance(x, Mapping):
            d: dict[str, Any] = {}
            for key, names in _CHUNK_KEYS.items():
                for n in names:
                    if n in x and x[n] is not None:
                        d[key] = x[n]
                        break
            unknown = set(x) - {n for names in _CHUNK_KEYS.values() for n in names}
            if unknown:
                raise err(f"item {i} has unknown key(s) {sorted(unknown)}; "
                          f"chunks take text, id, source, start, end, score, grade")
            try:
                out.append(Chunk.model_validate(d))
            except ValidationError as exc:
                first = exc.errors()[0]
                raise err(f"item {i}, {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc
        else:
            raise err(f"item {i} should be text or an object, got {type(x).__name__}")
    return out


def _label(v: Any, err: Any) -> float:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float):
        if not 0 <= v <= 1:
            raise err(f"label must be in [0, 1], got {v}")
        return float(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return 1.0
        if s in _FALSE:
            return 0.0
        try:
            return _label(float(s), err)
        except ValueError:
            pass
    raise err(f"label must be a number in [0, 1] or true/false, got {v!r}")
