"""A JSON Lines file read a chunk of samples at a time, as :func:`ragmeter.io.readers.load` reads it
whole: what a streamed run reads (:mod:`ragmeter.run.stream`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import Sample
from ragmeter.io.formats import iter_rows
from ragmeter.io.readers import _SHARED_CHUNKS, OnError, _RowReader, parse_mapping


class IdIndex:
    """The ids of a file read chunk by chunk, each with the line it was first seen on, kept in a
    temporary SQLite file instead of memory (a dict of ten million ids is a gigabyte): what
    :class:`~ragmeter.io.readers._RowReader` asks of its ``seen`` mapping. Ids of the current chunk
    wait in a dict and are written together."""

    def __init__(self) -> None:
        import sqlite3
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="ragmeter-ids-")
        self._db = sqlite3.connect(str(Path(self._dir.name) / "ids.db"))
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-16000;"
                               "CREATE TABLE ids (id TEXT PRIMARY KEY, line INTEGER) WITHOUT ROWID;")
        self._pending: dict[str, int] = {}

    def _stored(self, key: str) -> int | None:
        got = self._db.execute("SELECT line FROM ids WHERE id = ?", (key,)).fetchone()
        return None if got is None else got[0]

    def __contains__(self, key: object) -> bool:
        return key in self._pending or self._stored(str(key)) is not None

    def __getitem__(self, key: str) -> int:
        line = self._pending.get(key)
        if line is None:
            line = self._stored(key)
        if line is None:
            raise KeyError(key)
        return line

    def __setitem__(self, key: str, line: int) -> None:
        self._pending[key] = line
        if len(self._pending) >= 20_000:
            self.flush()

    def flush(self) -> None:
        self._db.executemany("INSERT INTO ids (id, line) VALUES (?, ?)", self._pending.items())
        self._db.commit()
        self._pending.clear()

    def close(self) -> None:
        self._db.close()
        self._dir.cleanup()


def sample_chunks(path: str | Path, *, mapping: Mapping[str, str] | Iterable[str] | None = None,
                  on_error: OnError = "raise", chunk_rows: int = 20_000,
                  skipped: Mapping[int, DatasetError] | None = None
                  ) -> tuple[Iterator[tuple[list[Sample], list[int]]], _RowReader]:
    """A JSON Lines file of plain rows read as :func:`load` reads it, ``chunk_rows`` samples at a
    time: ``(chunks of (samples, lines), reader)``; once the chunks are consumed, ``reader.dataset([],
    [], any_samples)`` holds what was skipped and the columns (as :func:`load`'s :class:`Dataset`
    would, without its samples). Only one chunk's samples are held at a time; the ids seen, to
    refuse a duplicate, are kept on disk (:class:`IdIndex`, removed when the chunks are consumed).

    ``skipped``: the rows a first pass over the same file skipped, by line (with ``on_error="skip"``):
    this pass skips exactly them, and checks no id (the first pass did). A file of conversations or
    spans is not plain rows: see :func:`plain_rows_file`."""
    path = Path(path)
    rows, mode = iter_rows(path, None, text_cells=True)
    reader = _RowReader(str(path), parse_mapping(mapping), on_error, mode)
    if skipped is not None:
        reader.seen = _NoIds()
        rows = ((n, skipped[n] if n in skipped else row) for n, row in rows)
    else:
        reader.seen = IdIndex()

    def chunks() -> Iterator[tuple[list[Sample], list[int]]]:
        samples: list[Sample] = []
        lines: list[int] = []
        try:
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
        finally:
            if isinstance(reader.seen, IdIndex):
                reader.seen.close()
            reader.seen = {}

    return chunks(), reader


class _NoIds:
    """The ``seen`` mapping of a second pass: no id is checked again."""

    def __contains__(self, key: object) -> bool:
        return False

    def __setitem__(self, key: str, line: int) -> None:
        pass


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
