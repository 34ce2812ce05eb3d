"""A JSON Lines file read a chunk of samples at a time, as :func:`ragmeter.io.readers.load` reads it
whole: what a streamed run reads (:mod:`ragmeter.run.stream`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ragmeter.core.schema import Sample
from ragmeter.io.formats import iter_rows
from ragmeter.io.readers import _SHARED_CHUNKS, OnError, _RowReader, parse_mapping


def sample_chunks(path: str | Path, *, mapping: Mapping[str, str] | Iterable[str] | None = None,
                  on_error: OnError = "raise", chunk_rows: int = 20_000
                  ) -> tuple[Iterator[tuple[list[Sample], list[int]]], _RowReader]:
    """A JSON Lines file of plain rows read as :func:`load` reads it, ``chunk_rows`` samples at a
    time: ``(chunks of (samples, lines), reader)``; once the chunks are consumed, ``reader.dataset([],
    [], any_samples)`` holds what was skipped and the columns (as :func:`load`'s :class:`Dataset`
    would, without its samples). Only one chunk's samples are held at a time (the ids seen, to
    refuse a duplicate, are kept for the whole file). A file of conversations or spans is not
    plain rows: see :func:`plain_rows_file`."""
    path = Path(path)
    rows, mode = iter_rows(path, None, text_cells=True)
    reader = _RowReader(str(path), parse_mapping(mapping), on_error, mode)

    def chunks() -> Iterator[tuple[list[Sample], list[int]]]:
        samples: list[Sample] = []
        lines: list[int] = []
        for sample, lineno in reader.samples(rows):
            samples.append(sample)
            lines.append(lineno)
            if len(samples) >= chunk_rows:
                yield samples, lines
                samples, lines = [], []
                # the context chunks shared between samples (_chunks) are shared within a chunk of rows
                # only: the samples they served are gone, and the cache would otherwise grow to its cap
                _SHARED_CHUNKS.clear()
        if samples:
            yield samples, lines

    return chunks(), reader


def plain_rows_file(path: Path) -> bool:
    """Whether ``path`` is a JSON Lines file (not gzipped) of plain rows, one sample per line: not a
    file of spans and not a conversation (its first row decides, as in :func:`load`)."""
    from ragmeter.conversations.readers import looks_like_conversation
    from ragmeter.io.spans import detect_span_format

    if path.suffix.lower() not in {".jsonl", ".ndjson"} or not path.is_file() or detect_span_format(path) is not None:
        return False
    rows, _ = iter_rows(path, None, text_cells=True)
    first = next(rows, None)
    if first is None or not isinstance(first[1], dict):
        return False
    row = first[1]
    if isinstance(row.get("role"), str) and ("content" in row or "tool_calls" in row):
        return False
    return not looks_like_conversation(row)
