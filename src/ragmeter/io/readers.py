"""Dataset readers with field aliases and errors that name file, line and field."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from ragmeter.core.errors import DatasetError
from ragmeter.core.records import RESULT_MARKERS as _RESULT_MARKERS
from ragmeter.core.records import SAMPLE_COLUMNS
from ragmeter.core.schema import Chunk, Sample
from ragmeter.io._cells import _check_text, _is_missing, _plain
from ragmeter.io.formats import (  # noqa: F401
    CellMode,
    _json_cell,
    _json_loads,
    _rows_from_file,
    is_parquet,
    iter_rows,
    json_cells,
)
from ragmeter.io.ragas_fields import RAGAS_METADATA
from ragmeter.io.text_rows import _SIMPLE_TARGETS, Plan, _is_index, _plain_keys, text_row

#: canonical field -> accepted column names (first match wins, in this order).
#: ``retrieved_ids`` / ``relevant_ids`` are id-valued forms of ``contexts`` / ``relevant``.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "sample_id", "query_id", "qid", "example_id", "eval_id", "question_id"),
    "question": ("question", "query", "user_input", "input", "prompt", "inputs"),
    "answer": ("answer", "actual", "prediction", "response", "output", "generated_answer",
               "predicted_answer", "actual_output", "predictions", "outputs"),
    "references": ("references", "reference", "expected", "ground_truth", "ground_truths",
                   "ground_truth_answer", "expected_answer", "expected_output", "reference_answer",
                   "answers", "gold_answer", "gt_answer", "target", "targets", "expected_response", "ideal"),
    "negative_references": ("negative_references", "negative_reference", "negative_answers",
                            "wrong_answers"),
    "contexts": ("contexts", "context", "retrieved_contexts", "retrieval_context",
                 "retrieved_context", "retrieved_chunks", "retrieved", "passages"),
    "retrieved_ids": ("retrieved_ids", "retrieved_doc_ids", "retrieved_context_ids"),
    "relevant": ("relevant", "relevant_chunks", "ground_truth_chunks", "reference_contexts",
                 "golden_chunks", "ground_truth_contexts", "relevant_contexts", "expected_chunks"),
    "relevant_ids": ("relevant_ids", "relevant_doc_ids", "ground_truth_ids", "qrels",
                     "reference_context_ids"),
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

#: a DeepEval test case names its ground-truth chunks ``context`` and the retrieved ones
#: ``retrieval_context``; these keys mark a row as DeepEval-shaped.
_DEEPEVAL_KEYS = ("retrieval_context", "actual_output", "expected_output", "tools_called",
                  "expected_tools")
#: metadata columns read by name (never reported as "not read"): agent expectations, ``keywords``
#: (correct_keyword), ``split`` (semantic_dynamic), ``latency_ms`` (agent-stats), DeepEval's extras
_KNOWN_METADATA = {"expected_tools", "expected_trajectory", "expected_tool_calls", "tools_called",
                   "task_type", "name", "tags", "comments", "additional_metadata", "keywords", "split",
                   "latency_ms", "mcp_servers", "mcp_tools_called", "mcp_resources_called",
                   "mcp_prompts_called", *RAGAS_METADATA}
#: common abbreviations -> field, to suggest a ``--map`` when no known column is found.
_MAP_HINTS: dict[str, tuple[str, ...]] = {
    "question": ("q", "ques", "query_text", "user", "ask", "instruction", "text_in"),
    "answer": ("a", "pred", "preds", "ans", "hyp", "hypothesis", "generation", "generated",
               "completion", "model_answer", "model_output", "llm_output", "reply", "bot"),
    "references": ("gold", "gt", "ref", "refs", "truth", "label_text", "golden", "correct_answer",
                   "true_answer", "expected_text", "y"),
    "contexts": ("ctx", "ctxs", "docs", "documents", "chunks", "retrieval", "hits", "sources"),
    "relevant": ("gold_docs", "gold_ctx", "gt_docs", "positive", "positives", "evidence"),
}
#: metric requirement names (``ragmeter.core.schema.FIELD_PRESENT``) -> the ``--map`` target.
REQUIREMENT_TARGET = {"question": "question", "answer": "answer", "reference": "reference",
                      "negative_reference": "negative_references", "contexts": "contexts",
                      "context_texts": "contexts", "relevant": "relevant", "label": "label",
                      "trace": "trace"}
_LOG = logging.getLogger("ragmeter.io")

OnError = Literal["raise", "skip"]
#: how string cells are read: ``csv`` (text file: list cells must parse), ``frame`` (a pandas
#: DataFrame: list-looking strings are parsed when they parse), ``json`` (strings stay strings).


@dataclass
class Dataset:
    """Samples read from one source, with what was skipped and a content fingerprint.

    Attributes:
        samples: the samples, in source order.
        source: file path, ``"example"`` or ``"<list>"``/``"<DataFrame>"`` for in-memory data.
        skipped: errors of rows skipped with ``on_error="skip"``.
        columns: every column name seen, in first-seen order.
        unused_columns: columns no sample field reads (kept in ``metadata``).
        lines: the line (or row number) each sample came from, aligned with ``samples``.
    """

    samples: list[Sample]
    source: str = "<list>"
    skipped: list[DatasetError] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    unused_columns: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def __getitem__(self, i: int) -> Sample:
        return self.samples[i]

    @property
    def fingerprint(self) -> str:
        """sha256 of each sample's ``model_dump_json(exclude_none=True)`` and a newline, in order
        (pydantic-core's serializer writes the same bytes directly)."""
        return hashlib.sha256(b"".join([type(s).__pydantic_serializer__.to_json(s, exclude_none=True) + b"\n"
                                        for s in self.samples])).hexdigest()

    def skipped_summary(self) -> dict[str, Any]:
        return {"count": len(self.skipped), "errors": [str(e) for e in self.skipped]}

    def map_hint(self, targets: Iterable[str]) -> str:
        """A ``--map field=column`` suggestion for ``targets``, guessed from the unused columns."""
        free = [c for c in (self.unused_columns or self.columns)]
        parts = []
        for t in targets:
            guess = _guess_column(t, free)
            if guess is not None:
                free.remove(guess)
            parts.append(f"--map {t}={guess if guess is not None else '<column>'}")
        return " ".join(parts)


def _guess_column(target: str, columns: list[str]) -> str | None:
    canon = _canonical_target(target) or target
    hints = _MAP_HINTS.get(canon, ())
    for c in columns:
        low = c.lower().strip()
        if low in hints or any(low.startswith(h + "_") or low.endswith("_" + h) for h in hints if len(h) > 1):
            return c
    return None


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

#: bundled datasets: the handbook example, its Portuguese twin, SQuALITY's human-rated answers
BUNDLED = {"example": "example", "example-pt": "example_pt", "example-human": "example_human",
           "example-chat": "example_chat"}


def bundled_path(name: str) -> Path:
    """Path of a bundled dataset's ``samples.jsonl`` (or ``.jsonl.gz``): a name of :data:`BUNDLED`."""
    folder = resources.files("ragmeter") / "data" / BUNDLED[name]
    plain = Path(str(folder / "samples.jsonl"))
    return plain if plain.exists() else Path(str(folder / "samples.jsonl.gz"))


def load(data: Any, *, mapping: Mapping[str, str] | Iterable[str] | None = None,
         on_error: OnError = "raise", fmt: str | None = None) -> Dataset:
    """Load a dataset.

    Args:
        data: a path (``.jsonl``/``.json``/``.csv``/``.tsv``/``.parquet``), the word ``"example"``
            for the bundled dataset (``"example-pt"``: its Portuguese twin), a pandas ``DataFrame``, a Hugging Face ``datasets.Dataset``,
            any iterable of mappings (e.g. ``df.to_dict("records")``), a dict of equal-length
            columns, a list of ``Sample``, or a ``Dataset``.
        mapping: ``{field: column}`` overrides for column names the aliases do not cover.
        on_error: ``"raise"`` stops at the first bad row; ``"skip"`` keeps going and records the
            errors in ``Dataset.skipped``.
        fmt: force a format (``jsonl``, ``json``, ``csv``, ``tsv``, ``parquet``) instead of
            guessing from the suffix; or a span format of :data:`ragmeter.io.spans.SPAN_FORMATS`
            (``otlp``, ``otlp-proto``, ``phoenix``, ``agents-sdk``, ``langsmith``, ``mlflow``,
            ``langfuse``). Without it, a file of spans is recognised from its content and read
            as one sample per agent trace (:func:`ragmeter.io.spans.read_span_file`).

    Missing values the pandas way (``None``, ``NaN``, ``pandas.NA``, an empty CSV cell) are "no
    value" in every field. Columns no field reads are kept in ``metadata`` and reported once as a
    warning on the ``ragmeter.io`` logger.

    Raises:
        DatasetError: naming the file, line and field of the first bad row (``on_error="raise"``).
    """
    if isinstance(data, Dataset):
        return data
    mp = parse_mapping(mapping)
    mode: CellMode = "json"
    if isinstance(data, str | Path):
        bundled = str(data) in BUNDLED and not Path(data).exists()
        path = bundled_path(str(data)) if bundled else Path(data)
        spans = None if bundled else _span_rows(path, fmt)
        if spans is not None:  # an agent's spans (OTLP, OpenInference, an agent SDK's export)
            rows = ((i + 1, r) for i, r in enumerate(spans))
            if spans and isinstance(spans[0], conv_model_type()):  # traces of several user turns each
                return _conversations(rows, str(path), on_error)[1]  # type: ignore[return-value]
            return _build(rows, str(path), mp, on_error, "json")
        # a Parquet file's text cells stay text: only the fields holding lists parse their JSON
        rows, mode = iter_rows(path, fmt, text_cells=True, fields=[a for names in FIELD_ALIASES.values() for a in names])
        source = str(data) if bundled else str(path)
        parsed = is_parquet(path, fmt)
    else:
        records, source, mode = _records_in_memory(data)
        if records and all(isinstance(x, Sample) for x in records):
            return Dataset(list(records), lines=list(range(1, len(records) + 1)))
        rows = ((i + 1, r) for i, r in enumerate(records))
        parsed = False
    if mode == "json" or parsed:  # conversations (ragmeter, DeepEval, ragas, OpenAI/Anthropic messages)
        rows, conv = _conversations(rows, source, on_error, text_cells=parsed)
        if conv is not None:
            return conv
    return _build(rows, source, mp, on_error, mode)


def conv_model_type() -> type:
    from ragmeter.conversations.model import Conversation

    return Conversation


def _span_rows(path: Path, fmt: str | None) -> list[Any] | None:
    """One row per agent trace when ``path`` holds spans (``fmt`` a span format, or detected from
    the content: :func:`ragmeter.io.spans.detect_span_format`); ``None`` for any other dataset.
    When a trace holds several user turns, or traces share a session id (a trace per user message),
    every trace is in a conversation (:func:`ragmeter.io.spans.conversation.conversations_of`)."""
    from ragmeter.io.spans import SPAN_FORMATS, detect_span_format, read_span_file, span_rows
    from ragmeter.io.spans.conversation import conversations_of

    span_fmt = fmt if fmt in SPAN_FORMATS else None if fmt else detect_span_format(path)
    if span_fmt is None:
        return None
    traces = read_span_file(path, span_fmt)
    convs = conversations_of(traces)
    if convs is not None:
        return convs
    return span_rows(traces, span_fmt)


def _conversations(rows: Iterator[tuple[int, Any]] | Any, source: str, on_error: OnError, *,
                   text_cells: bool = False) -> tuple[Iterator[tuple[int, Any]], Dataset | None]:
    """A dataset of conversation samples when the first row is a conversation
    (:mod:`ragmeter.conversations.readers`); else the rows, untouched. ``text_cells``: the rows'
    JSON is still text (Parquet), parsed to recognise and read conversations."""
    import itertools

    from ragmeter.conversations import model as conv_model
    from ragmeter.conversations.readers import conversation_samples, looks_like_conversation

    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return iter(()), None
    rows = itertools.chain([first], rows)
    row = first[1]
    if text_cells:
        if not looks_like_conversation(json_cells(row)):
            return rows, None
        rows = ((n, json_cells(r)) for n, r in rows)
        row = json_cells(row)
    if isinstance(row, Mapping) and isinstance(row.get("role"), str) and ("content" in row or "tool_calls" in row):
        # a .json file holding one message list: the whole file is one conversation
        rows = iter([(first[0], [r for _, r in rows])])
    elif isinstance(row, conv_model.Conversation):
        rows = ((n, r.model_dump(mode="json") if isinstance(r, conv_model.Conversation) else r) for n, r in rows)
    elif not looks_like_conversation(row):
        return rows, None
    samples, lines, skipped, columns = conversation_samples(rows, source, on_error)
    return iter(()), Dataset(samples, source=source, skipped=skipped, columns=columns, lines=lines)


def _records_in_memory(data: Any) -> tuple[list[Any], str, CellMode]:
    """Rows of an in-memory dataset: DataFrame, HF Dataset, dict of columns or any iterable."""
    if hasattr(data, "to_dict") and hasattr(data, "columns") and hasattr(data, "iloc"):  # pandas
        cols = [str(c) for c in data.columns]
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise DatasetError(f"duplicate column name(s) {dup}", file="<DataFrame>")
        return data.to_dict("records"), "<DataFrame>", "frame"
    if type(data).__module__.startswith("datasets.") and hasattr(data, "to_pandas"):  # Hugging Face
        return [dict(r) for r in data], "<datasets.Dataset>", "json"
    if isinstance(data, Mapping):
        vals = list(data.values())
        if vals and all(isinstance(v, list | tuple) for v in vals) and len({len(v) for v in vals}) == 1:
            keys = list(data)
            return [dict(zip(keys, row, strict=True)) for row in zip(*vals, strict=True)], "<dict>", "json"
        return [data], "<list>", "json"
    if isinstance(data, str | bytes):
        raise DatasetError("expected a file path, a DataFrame or a list of rows")
    try:
        return list(data), "<list>", "json"
    except TypeError:
        raise DatasetError(f"cannot read a dataset from {type(data).__name__}: pass a file path, a "
                           "DataFrame, a datasets.Dataset or a list of dicts") from None


def _list_cell(v: str, mode: CellMode, err: Any) -> Any:
    """A list written into a text cell: JSON (``["a", "b"]``) or a Python literal (``['a', 'b']``,
    as ``pandas.DataFrame.to_csv`` writes), parsed safely with ``ast.literal_eval``."""
    s = v.strip()
    if mode == "json" or not _LISTLIKE.match(s):
        return v
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        if mode == "frame":
            return v
        raise err(f"looks like a list but is neither JSON nor a Python literal ({type(exc).__name__}: "
                  f"{_short(str(exc))}): {_short(s)}") from None


#: a cell that looks like a list or an object: ``[`` or ``{`` then a quote, a bracket or a brace,
#: or a bracketed list of numbers (``[1] see below`` is text)
_LISTLIKE = re.compile(r"""^(\[\s*["'{\[\]]|\{\s*["'}]|\[[\d\s,.+-]*\]$)""")


def _short(s: str, n: int = 60) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[:n - 3] + "..."


class _RowReader:
    """Rows to samples, one at a time, recording the rows skipped, the columns seen and read, each id's
    first line: for :func:`_build` (a whole dataset) and :func:`ragmeter.io.chunks.sample_chunks`."""

    def __init__(self, source: str, mapping: Mapping[str, str], on_error: OnError, mode: CellMode = "json") -> None:
        self.source, self.mapping, self.on_error, self.mode = source, mapping, on_error, mode
        self.skipped: list[DatasetError] = []
        self.seen: Any = {}  # id -> its line (io/chunks.py: kept on disk)
        self.columns: dict[str, None] = {}
        self.used: set[str] = set()
        self.n = 0
        self._plans: dict[tuple[Any, ...], Plan | None] = {}  # per row shape: io/text_rows.py

    def samples(self, rows: Iterable[tuple[int, Any]]) -> Iterator[tuple[Sample, int]]:
        """``(sample, line)`` of every good row (a bad one raises, or is recorded under ``skipped``)."""
        file, mapping, mode, used, seen, columns = self.source, self.mapping, self.mode, self.used, self.seen, self.columns
        plans = self._plans if mode == "json" and not mapping else None
        for lineno, row in rows:
            self.n += 1
            try:
                sample = None
                if type(row) is dict:  # a JSON object (the common row): skip the ABC checks
                    if len(row) != len(columns) or not columns.keys() >= row.keys():
                        columns.update(dict.fromkeys(map(str, row)))
                    if plans is not None:  # text in every column: the shape's plan (io/text_rows.py)
                        sample = text_row(row, plans, f"row-{self.n}", used, _resolve_columns)
                elif isinstance(row, DatasetError):
                    raise row
                elif isinstance(row, Mapping):
                    columns.update(dict.fromkeys(map(str, row)))
                if sample is None:
                    sample = sample_from_dict(row, mapping=mapping, default_id=f"row-{self.n}", file=file,
                                              line=lineno, cells=mode, _used=used)
                if sample.id in seen:
                    raise DatasetError(f"duplicate id {sample.id!r} (first seen on line {seen[sample.id]})",
                                       file=file, line=lineno, field="id")
                seen[sample.id] = lineno
                yield sample, lineno
            except DatasetError as exc:
                if self.on_error == "raise":
                    raise
                self.skipped.append(exc)

    def dataset(self, samples: list[Sample], lines: list[int], any_samples: bool) -> Dataset:
        """The :class:`Dataset` of ``samples`` (a warning names the columns no field reads)."""
        unused = [c for c in self.columns if c not in self.used and c not in _KNOWN_METADATA and not _is_index(c)]
        if unused and any_samples:
            _LOG.warning("%s: column(s) not read by any field, kept in metadata: %s (use --map field=column "
                         "to read one)", self.source, ", ".join(unused))
        return Dataset(samples, source=self.source, skipped=self.skipped, columns=list(self.columns),
                       unused_columns=unused, lines=lines)


def _build(rows: Iterable[tuple[int, Any]], source: str, mapping: Mapping[str, str],
           on_error: OnError, mode: CellMode = "json") -> Dataset:
    reader = _RowReader(source, mapping, on_error, mode)
    pairs = list(reader.samples(rows))
    return reader.dataset([s for s, _ in pairs], [n for _, n in pairs], bool(pairs))


#: the list columns DeepEval's CSV export joins with "|" (a row with ``retrieval_context``)
_DEEPEVAL_CSV_LISTS = ("retrieval_context", "context")
_LIST_TARGETS = {"references", "negative_references", "contexts", "retrieved_ids", "relevant",
                 "relevant_ids", "metadata", "trace"}


@functools.lru_cache(maxsize=4096)
def _resolve_columns(keys: tuple[str, ...], none: tuple[bool, ...],
                     mapping: tuple[tuple[str, str], ...]) -> tuple[dict[str, str], frozenset[str]]:
    """Which column gives each field (the first alias with a value; ``--map`` wins) and the columns
    read by some field. Rows of one file share their columns, so this runs once per file shape."""
    row = dict(zip(keys, none, strict=True))  # column -> value is None
    # a spreadsheet's header ("Question", "Expected Answer", "ground-truth") names the same fields:
    # an alias matches a column equal to it up to case, spaces and hyphens when none matches exactly
    folded: dict[str, str] = {}
    for k in keys:
        folded.setdefault(k.strip().lower().replace(" ", "_").replace("-", "_"), k)
    maps = dict(mapping)
    deepeval = any(k in row for k in _DEEPEVAL_KEYS)
    mapped = set(maps.values())
    used: set[str] = set()
    canon: dict[str, str] = {}
    for target, aliases in FIELD_ALIASES.items():
        if target in maps:
            names: tuple[str, ...] = (maps[target],)
        else:
            names = aliases
            if deepeval and target == "contexts":
                names = tuple(a for a in aliases if a != "context")
            elif deepeval and target == "relevant":
                names = ("context", *aliases)
        for alias in names:
            name = alias if alias in row or target in maps else folded.get(alias, alias)
            if name in row and (name not in mapped or maps.get(target) == name):
                used.add(name)
                if not row[name] and target not in canon:
                    canon[target] = name
    return canon, frozenset(used)


def sample_from_dict(row: Any, *, mapping: Mapping[str, str] | None = None, default_id: str = "row-1",
                     file: str = "<list>", line: int | None = None, cells: CellMode = "json",
                     _used: set[str] | None = None) -> Sample:
    """Normalise one raw row (any supported column names) into a ``Sample``.

    Args:
        row: a mapping of column -> value.
        mapping: ``{field: column}`` overrides.
        default_id: the id when the row has none.
        file: source named in errors.
        line: line or row number named in errors.
        cells: ``"csv"`` when string cells come from a text file (list cells must parse),
            ``"frame"`` for a DataFrame (list-looking strings parsed when they parse), ``"json"``.

    Raises:
        DatasetError: naming file, line and field.
    """
    if type(row) is not dict and not isinstance(row, Mapping):
        raise DatasetError(f"expected an object with fields, got {type(row).__name__}",
                           file=file, line=line)
    if _RESULT_MARKERS[0] in row and _RESULT_MARKERS[1] in row:
        row = _result_row_inputs(row, mapping, _used)
    if _plain_keys(tuple(row)):  # text keys, no pandas index column: only the values may need work
        row = {k: (v if type(v) is str else _plain(v)) for k, v in row.items()}
    else:
        row = {str(k): (v if type(v) is str else _plain(v)) for k, v in row.items() if not _is_index(str(k))}
    if cells != "json":
        row = {k: (None if isinstance(v, str) and v.strip() == "" and cells == "frame" else v)
               for k, v in row.items()}
    mapping = mapping or {}
    for target, col in mapping.items():
        if target in FIELD_ALIASES and col not in row:
            raise DatasetError(f"--map {target}={col}: no such column "
                               f"(columns: {', '.join(row)})", file=file, line=line)
    names_of, used = _resolve_columns(tuple(row), tuple(v is None for v in row.values()),
                                      tuple(mapping.items()))
    canon: dict[str, Any] = {t: (n, row[n]) for t, n in names_of.items()}
    if _used is not None:
        _used.update(used)
    extra = {k: v for k, v in row.items() if k not in used}
    if not canon and "tools_called" not in row:
        cols = list(row)
        guesses = []
        for t in ("question", "answer", "reference", "contexts", "relevant"):
            g = _guess_column(t, cols)
            if g is not None:
                cols.remove(g)
                guesses.append(f"--map {t}={g}")
        hint = " ".join(guesses) or ("--map field=column (fields: question, answer, reference, contexts, "
                                     "relevant, label, trace)")
        raise DatasetError(f"no known field in this row (columns: {', '.join(row) or 'none'}); "
                           f"try {hint}", file=file, line=line)

    if (cells == "json" and _SIMPLE_TARGETS.issuperset(canon) and "tools_called" not in row
            and all(type(v) is str for _, v in canon.values())):
        # the common row (id, question, answer, reference as text): the checks below reduce to these
        fast: dict[str, Any] = {f: v for f, (_, v) in canon.items()}
        if "references" in fast:
            fast["references"] = [fast["references"]]
        fast.setdefault("id", default_id)
        fast["metadata"] = extra
        for k, v in row.items():
            if type(v) is str and not v.isascii():
                _check_text(v, k, lambda f, m: DatasetError(m, file=file, line=line, field=f))
            elif v is not None and type(v) is not str and not isinstance(v, int | float):
                _check_text(v, k, lambda f, m: DatasetError(m, file=file, line=line, field=f))
        return Sample.model_validate(fast)

    def err(field: str, msg: str) -> DatasetError:
        return DatasetError(msg, file=file, line=line, field=field)

    def value(target: str) -> tuple[str, Any]:
        name, v = canon[target]
        if isinstance(v, str) and target in _LIST_TARGETS:
            v = _list_cell(v, cells, lambda m, name=name: err(name, m))
            if isinstance(v, str) and cells == "csv" and name in _DEEPEVAL_CSV_LISTS and "retrieval_context" in row:
                v = v.split("|")  # DeepEval's save_as(file_type="csv") joins these lists with "|"
        return name, v

    out: dict[str, Any] = {}
    if "id" in canon:
        name, v = canon["id"]
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # a pandas int column with a missing value turns into floats
        if not isinstance(v, str | int | float) or isinstance(v, bool):
            raise err(name, f"expected text or a number, got {type(v).__name__}")
        out["id"] = str(v)
    else:
        out["id"] = default_id
    for f in ("question", "answer"):
        if f in canon:
            name, v = canon[f]
            if f == "question" and cells != "json" and isinstance(v, str) and v.lstrip()[:1] == "[":
                msgs = _json_cell(v)  # chat messages written as JSON text (CSV, Parquet)
                v = msgs if _last_user_turn(msgs) is not None else v
            if f == "question" and (turn := _last_user_turn(v)) is not None:
                extra[name] = v  # an openai/evals registry ``input``: chat messages (kept whole in metadata)
                v = turn
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise err(name, f"expected text, got {_kind(v)}")
            out[f] = str(v)
    for f in ("references", "negative_references"):
        if f in canon:
            name, v = value(f)
            refs = _str_list(v, lambda m, name=name: err(name, m))
            if refs:
                out[f] = refs
    for f, ids in (("contexts", "retrieved_ids"), ("relevant", "relevant_ids")):
        chunks = None
        if f in canon:
            name, v = value(f)
            chunks = _chunks(v, "text", lambda m, name=name: err(name, m))
        if ids in canon:
            name, v = value(ids)
            by_id = _chunks(v, "id", lambda m, name=name: err(name, m))
            if chunks is None:
                chunks = by_id
            elif len(by_id) == len(chunks) and all(c.id is None for c in chunks):
                # ragas 0.2+: retrieved_contexts + retrieved_context_ids, aligned by position
                chunks = [c.model_copy(update={"id": b.id}) for c, b in zip(chunks, by_id, strict=True)]
            else:
                extra[name] = v
        if chunks is not None:
            out[f] = chunks
    if "label" in canon:
        name, v = canon["label"]
        out["label"] = _label(v, lambda m, name=name: err(name, m))
    meta: dict[str, Any] = {}
    if "metadata" in canon:
        name, v = value("metadata")
        if not isinstance(v, Mapping):
            raise err(name, f"expected an object, got {_kind(v)}")
        meta.update(v)
    for k, v in extra.items():
        meta[k] = _json_cell(v) if isinstance(v, str) and cells != "json" else v
    out["metadata"] = meta
    trace_src: tuple[str, Any] | None = value("trace") if "trace" in canon else None
    if trace_src is None and row.get("tools_called") is not None:
        # DeepEval: tools_called is a list of ToolCall(name, input_parameters, output)
        v = row["tools_called"]
        if isinstance(v, str):
            v = _list_cell(v, cells, lambda m: err("tools_called", m))
        if isinstance(v, list):
            v = {"tool_calls": [{("arguments" if k == "input_parameters" else k): x for k, x in c.items()}
                                if isinstance(c, Mapping) else c for c in v]}
        trace_src = ("tools_called", v)
    if trace_src is not None:
        out["trace"] = _trace(trace_src[1], lambda m, name=trace_src[0]: err(name, m))
        # a chat log carries the question and the final answer too
        for f, attr in (("question", "input_text"), ("answer", "final_text")):
            if f not in out and getattr(out["trace"], attr, None) is not None:
                out[f] = getattr(out["trace"], attr)
    for k, v in row.items():  # every string must encode; the common case costs one C call
        if type(v) is str:
            if not v.isascii():
                _check_text(v, k, err)
        elif v is not None and not isinstance(v, int | float):
            _check_text(v, k, err)
    try:
        return Sample.model_validate(out)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise DatasetError(first["msg"], file=file, line=line, field=loc) from exc


def _result_row_inputs(row: Mapping[str, Any], mapping: Mapping[str, str] | None,
                       used: set[str] | None) -> dict[str, Any]:
    """The inputs of a per-sample result row of ragmeter (``export``, ``eval --out``, ``to_pandas()``;
    it has the columns ``no_value_reasons`` and ``judge``): the sample's fields under their own
    names (:data:`ragmeter.core.records.SAMPLE_COLUMNS`) and the columns ``--map`` names. The other
    columns are the run's results (metric values, ``METRIC__pass``, reasons, verdicts): they are
    not read as inputs (a grader named ``output`` is not an answer) nor kept in ``metadata``.

    Files exported before the rows carried every field have ``reference`` (the first reference) and
    ``context_ids`` (the retrieved chunks' ids, aligned with ``contexts``): both are read."""
    keep = set(SAMPLE_COLUMNS) | set((mapping or {}).values())
    if used is not None:
        used.update(str(k) for k in row if k not in keep)
    out = {k: v for k, v in row.items() if k in keep}
    for old, new in _LEGACY_RESULT_INPUTS.items():
        v = row.get(old)
        if new not in row and v is not None and not (isinstance(v, list) and all(x is None for x in v)):
            out[new] = v
    return out


#: input columns of the result rows ragmeter wrote before they carried every field -> their field
_LEGACY_RESULT_INPUTS = {"reference": "references", "context_ids": "retrieved_ids"}


def _last_user_turn(v: Any) -> str | None:
    """The last user message's text of a chat-message list (``[{"role", "content"}, ...]``)."""
    if not isinstance(v, list) or not v or not all(isinstance(m, Mapping) and "role" in m for m in v):
        return None
    users = [m.get("content") for m in v if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else None


def _kind(v: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", dict: "an object",
            list: "a list"}.get(type(v), type(v).__name__)


def _trace(v: Any, err: Any) -> Any:
    # the agent module may provide richer readers (e.g. OpenAI tool-call messages)
    try:
        from ragmeter.io.traces import parse_trace
    except ImportError:
        return v
    from ragmeter.io.span_fields import with_span_fields

    try:
        # a trace written as spans: what its fields do not say, its spans do
        return with_span_fields(parse_trace(v))
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
            if x is None:
                continue  # a missing item is no item
            if not isinstance(x, str | int | float) or isinstance(x, bool):
                raise err(f"item {i} should be text, got {_kind(x)}")
            out.append(str(x))
        return out
    raise err(f"expected text or a list of texts, got {_kind(v)}")


_SHARED_CHUNKS: dict[tuple[str, str], Chunk] = {}
_SHARED_CHUNKS_MAX = 1 << 20


@functools.lru_cache(maxsize=1)
def _chunk_list() -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(list[Chunk])


def _chunks(v: Any, default: str, err: Any) -> list[Chunk]:
    if isinstance(v, str) or (default == "id" and isinstance(v, int) and not isinstance(v, bool)):
        v = [v]
    if isinstance(v, Mapping) and default == "id" and all(isinstance(x, int | float) for x in v.values()):
        # {"doc1": 2, "doc2": 1} -> graded relevance by id (qrels style)
        return [Chunk(id=str(k), grade=float(g)) for k, g in v.items()]
    if isinstance(v, Mapping):
        v = [v]
    if not isinstance(v, list | tuple):
        what = "chunk ids" if default == "id" else "texts (or chunk objects)"
        raise err(f"expected a list of {what}, got {_kind(v)}: {_short(repr(v), 30)}")
    if all(type(x) is str or (default == "id" and type(x) is int) for x in v):
        # plain texts or ids: chunks are frozen values, so one instance per (kind, value) is shared
        # by every sample that has it; the new ones are validated in one call (pydantic-core)
        keys = [(default, str(x)) for x in v]
        cache = _SHARED_CHUNKS
        new = [k for k in dict.fromkeys(keys) if k not in cache]
        if new:
            if len(cache) + len(new) > _SHARED_CHUNKS_MAX:
                cache.clear()
            cache.update(zip(new, _chunk_list().validate_python([{d: x} for d, x in new]), strict=True))
        return [cache[k] for k in keys]
    out = []
    for i, x in enumerate(v):
        if x is None:
            continue  # a missing item is no item
        if isinstance(x, str) or (default == "id" and isinstance(x, int) and not isinstance(x, bool)):
            out.append(Chunk(**{default: str(x)}))
        elif isinstance(x, Mapping):
            d: dict[str, Any] = {}
            for key, names in _CHUNK_KEYS.items():
                for n in names:
                    if n in x and not _is_missing(x[n]):
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
            raise err(f"item {i} should be text or an object, got {_kind(x)}")
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
