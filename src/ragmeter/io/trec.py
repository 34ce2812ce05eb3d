"""The TREC file formats: run and qrels files (and DataFrames, dicts) read into columns.

Whole files are parsed by pyarrow when their lines are single-space separated (the usual case);
anything else (tabs, runs of blanks, comments) is normalised first, and files pyarrow still
refuses are read line by line to name the bad line. Large run files are also read in blocks of
whole queries (:func:`run_blocks`), so that a run is evaluated without holding it in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import DatasetError

#: bytes of a run file read at a time when it is evaluated block by block
BLOCK_BYTES = 4 << 20
#: run files larger than this are parsed on several threads when read whole
_THREADED_READ = 32 << 20
_NUMPY_TYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
                "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32,
                "double": np.float64}


# ---------------------------------------------------------------------------- arrow <-> numpy
# pyarrow's own conversions (Array.to_numpy, pa.array, pa.scalar) check for pandas objects and so
# import pandas (0.2 s) the first time: a CLI command that never needs pandas avoids them.
def to_numpy(col: Any) -> np.ndarray:
    """A numeric or boolean column (pyarrow array, numpy array, list) as numpy; a pyarrow array
    is read from its buffers (a view when it can be; nulls of floats are NaN)."""
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if not isinstance(col, pa.Array):
        return np.asarray(col)
    n, bufs = len(col), col.buffers()
    if pa.types.is_boolean(col.type):
        out = _bits(bufs[1], col.offset, n)
    else:
        dtype = _NUMPY_TYPES.get(str(col.type))
        if dtype is None or n == 0:
            return col.to_numpy(zero_copy_only=False)
        out = np.frombuffer(bufs[1], dtype=dtype, count=n, offset=col.offset * np.dtype(dtype).itemsize)
    if col.null_count:
        if out.dtype.kind != "f":
            return col.to_numpy(zero_copy_only=False)
        out = np.where(_bits(bufs[0], col.offset, n), out, np.nan)
    return out


def _bits(buf: Any, offset: int, n: int) -> np.ndarray:
    if n == 0:
        return np.zeros(0, dtype=bool)
    packed = np.frombuffer(buf, dtype=np.uint8)
    return np.unpackbits(packed, count=offset + n, bitorder="little")[offset:].astype(bool)


def from_numpy(x: np.ndarray) -> Any:
    """An integer numpy array as a pyarrow int64 array (shares the memory)."""
    import pyarrow as pa

    x = np.ascontiguousarray(x, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(x), [None, pa.py_buffer(x)])


def has_empty(col: Any) -> bool:
    """Whether a pyarrow string column holds an empty string (read from its offsets)."""
    import pyarrow as pa

    for c in col.chunks if isinstance(col, pa.ChunkedArray) else [col]:
        if len(c):
            off = np.frombuffer(c.buffers()[1], dtype=np.int32, count=len(c) + 1, offset=c.offset * 4)
            if not np.all(off[1:] > off[:-1]):
                return True
    return False


@dataclass
class Columns:
    """A run or qrels as columns: query ids, doc ids, and scores (run) or grades (qrels)."""

    qid: Any
    doc: Any
    value: Any
    name: str
    run_id: str | None = None

    def __len__(self) -> int:
        return len(self.qid)


def read_run(path: str | Path) -> Columns:
    """Read a TREC run file (``qid Q0 docid rank score tag``; fields after the tag are ignored)."""
    return _read(Path(path), kind="run")


def read_qrels(path: str | Path) -> Columns:
    """Read a TREC qrels file (``qid iter docid rel``)."""
    return _read(Path(path), kind="qrels")


def _read(path: Path, kind: str) -> Columns:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read {kind} file: {exc.strerror or exc}", file=str(path)) from None
    if not data or data.isspace():
        raise DatasetError(f"the {kind} file is empty", file=str(path))
    # fast path: single-space separated lines; anything else (tabs, runs of blanks, comments,
    # short lines) fails the parse or the checks below and is normalised first
    # several threads for a large run read whole; qrels are small, and one thread leaves one
    # chunk per column (no copy to combine them)
    threads = kind == "run" and len(data) > _THREADED_READ
    table = _parse(data, kind, threads)
    if table is None or not _plausible(table, data, kind):
        data = _normalise(data)
        table = _parse(data, kind, threads)
        if table is None or not _plausible(table, data, kind):
            return _read_slow(data, path, kind)
    run_id = _last_run_id(data) if kind == "run" else None
    return Columns(table.column(0), table.column(1), table.column(2), str(path), run_id)


def _parse(data: Any, kind: str, threads: bool = True) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    want = (0, 2, 4) if kind == "run" else (0, 2, 3)
    try:
        return pcsv.read_csv(
            data if isinstance(data, pa.Buffer) else pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=["f0", "f1", "f2", "f3"] if kind == "qrels" else None,
                                          autogenerate_column_names=kind == "run", use_threads=threads,
                                          # one block: a single chunk per column
                                          block_size=None if threads else max(1 << 20, min(len(data) + 1, 1 << 30))),
            parse_options=pcsv.ParseOptions(delimiter=" ", quote_char=False, ignore_empty_lines=True),
            convert_options=pcsv.ConvertOptions(
                include_columns=[f"f{i}" for i in want],
                column_types={f"f{want[0]}": pa.string(), f"f{want[1]}": pa.string(),
                              f"f{want[2]}": pa.float64()},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowKeyError, KeyError):
        return None


def _plausible(table: Any, data: bytes, kind: str, end: int | None = None) -> bool:
    """Rules out what a lenient single-space parse could misread: empty fields (leading or
    doubled blanks), comment lines, run lines without a tag (every line has the field count of
    the first one, or the parse failed). ``end``: the data's length, when only a prefix of
    ``data`` was parsed."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return False
    end = len(data) if end is None else end
    nl = data.find(b"\n", 0, end)
    first = data[:nl if nl >= 0 else end]
    if kind == "run" and len(first.split()) < 6:
        return False
    q, d = table.column(0), table.column(1)
    if has_empty(q) or has_empty(d):
        return False
    return not pc.any(pc.starts_with(q, "#")).as_py()


def _normalise(data: bytes) -> bytes:
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    data = re.sub(rb"(?m)^[ \t]*#[^\n]*(\n|$)", b"", data)
    data = re.sub(rb"[ \t\f\v]+", b" ", data)
    return re.sub(rb"(?m)^ | $", b"", data)


def _last_run_id(data: bytes, end: int | None = None) -> str | None:
    """The tag of the last data line (trec_eval keeps the last one)."""
    end = len(data) if end is None else end
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        parts = data[start:end].split()
        if len(parts) >= 6 and not parts[0].startswith(b"#"):
            return parts[5].decode("utf-8", "replace")
        end = start - 1 if start > 0 else 0
        if start == 0:
            break
    return None


#: what a run line where qrels are expected (or the reverse) most likely means
_SWAPPED = "; the files look swapped: qrels come first, then the run (as trec_eval takes them)"


def _read_slow(data: bytes, path: Path, kind: str) -> Columns:
    """Line-by-line reader: used for files pyarrow refuses, to name the bad line."""
    qids: list[str] = []
    docs: list[str] = []
    vals: list[float] = []
    run_id = None
    for lineno, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        parts = raw.split()
        if not parts or parts[0].startswith("#"):
            continue
        if kind == "run":
            if len(parts) < 6:
                raise DatasetError(f"malformed run line (expected 'qid Q0 docid rank score tag'): {raw!r}"
                                   + (_SWAPPED if len(parts) == 4 else ""), file=str(path), line=lineno)
            try:
                vals.append(float(parts[4]))
            except ValueError:
                raise DatasetError(f"score {parts[4]!r} is not a number", file=str(path), line=lineno,
                                   field="score") from None
            run_id = parts[5]
        else:
            if len(parts) != 4:
                raise DatasetError(f"malformed qrels line (expected 'qid iter docid rel'): {raw!r}"
                                   + (_SWAPPED if len(parts) == 6 else ""), file=str(path), line=lineno)
            try:
                vals.append(float(parts[3]))
            except ValueError:
                raise DatasetError(f"relevance {parts[3]!r} is not a number", file=str(path),
                                   line=lineno, field="rel") from None
        qids.append(parts[0])
        docs.append(parts[2])
    if not qids:
        raise DatasetError(f"the {kind} file has no data lines", file=str(path))
    return Columns(qids, docs, np.asarray(vals, dtype=np.float64), str(path), run_id)


_QID = ("qid", "query_id", "q_id", "query", "topic")
_DOC = ("docid", "doc_id", "docno", "doc", "document_id", "pid", "passage_id")
_GRADE = ("rel", "relevance", "grade", "label", "judgment", "score")
_SCORE = ("score", "sim", "similarity", "rank_score")


def _frame_columns(df: Any, kind: str) -> Columns:
    cols = {str(c).lower(): c for c in df.columns}

    def pick(options: tuple[str, ...], what: str) -> Any:
        for o in options:
            if o in cols:
                return df[cols[o]]
        raise DatasetError(f"{kind} DataFrame has no {what} column (expected one of {', '.join(options)}; "
                           f"got {', '.join(map(str, df.columns))})", file=f"<{kind} DataFrame>")

    value = pick(_SCORE if kind == "run" else _GRADE, "score" if kind == "run" else "relevance")
    run_id = None
    for tag in ("tag", "run_id", "runid", "run"):
        if kind == "run" and tag in cols and len(df):
            run_id = str(df[cols[tag]].iloc[-1])
    return Columns(pick(_QID, "query id").astype(str).to_numpy(), pick(_DOC, "doc id").astype(str).to_numpy(),
                   value.to_numpy(dtype=np.float64), f"<{kind} DataFrame>", run_id)


def _dict_columns(d: Mapping[str, Mapping[str, float]], kind: str) -> Columns:
    qids, docs, vals = [], [], []
    for q, items in d.items():
        for doc, v in items.items():
            qids.append(str(q))
            docs.append(str(doc))
            vals.append(v)
    return Columns(qids, docs, np.asarray(vals, dtype=np.float64), f"<{kind} dict>")


def as_columns(obj: Any, kind: str) -> Columns:
    """A run or qrels given as a path, a DataFrame, a ``{qid: {docid: value}}`` dict or Columns."""
    if isinstance(obj, Columns):
        return obj
    if isinstance(obj, str | Path):
        return _read(Path(obj), kind)
    if isinstance(obj, Mapping):
        return _dict_columns(obj, kind)
    if hasattr(obj, "columns") and hasattr(obj, "iloc"):
        return _frame_columns(obj, kind)
    raise DatasetError(f"cannot read a {kind} from {type(obj).__name__}: give a TREC file path, a "
                       "pandas DataFrame or a {qid: {docid: value}} dict")


# ---------------------------------------------------------------------------- run files in blocks
class BufferPool:
    """Block buffers used again once their block is parsed: reading a run then allocates (and
    faults in) no new memory after the first blocks, and at most ``n`` blocks are held (a reader
    needing one more waits for a parser to give one back)."""

    def __init__(self, n: int) -> None:
        import queue

        self._free: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
        for _ in range(n):
            self._free.put(None)

    def get(self, size: int) -> bytearray:
        buf = self._free.get()
        return buf if buf is not None and len(buf) >= size else bytearray(size)

    def put(self, buf: bytearray) -> None:
        self._free.put(buf)


def run_blocks(path: Path, block_bytes: int | None = None,
               pool: BufferPool | None = None) -> Iterator[tuple[bytearray, int]]:
    """A run file as blocks of whole lines, ``(data, end)``: the block is ``data[:end]``.

    A block never splits a query whose lines are together in the file (how run files are
    written): the lines of the last query read so far are carried over to the next block. A
    query longer than a block makes the block grow. ``block_bytes``: bytes read at a time
    (default :data:`BLOCK_BYTES`). With a ``pool``, buffers come from it and the consumer gives
    each one back (``pool.put``) once done with its block. Raises OSError.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    with open(path, "rb", buffering=0) as fh:
        carry, floor = b"", 0
        while True:
            # the carried lines, then the next bytes of the file read right after them (at least
            # as many as carried: a very long query costs linear time, not quadratic)
            size = len(carry) + max(block_bytes, len(carry))
            data = pool.get(size) if pool else bytearray(size)
            data[:len(carry)] = carry
            n = len(carry)
            while n < size:
                got = fh.readinto(memoryview(data)[n:size])
                if not got:
                    break
                n += got
            if n == len(carry):  # the end of the file
                if carry:
                    yield data, n
                elif pool:
                    pool.put(data)
                return
            cut, floor = _last_query_start(data, floor, n)
            if cut == 0:  # one query so far: read on
                carry = bytes(data[:n])
                if pool:
                    pool.put(data)
                continue
            carry, floor = bytes(data[cut:n]), 0
            yield data, cut


def _last_query_start(data: bytearray, floor: int, size: int) -> tuple[int, int]:
    """Where the lines of the last query of ``data[:size]`` start (its unfinished last line
    included), or 0 when every complete line belongs to that query; and the start of the last
    complete line. ``data[:floor]`` is already known to hold lines of one query only."""
    end = data.rfind(b"\n", 0, size)
    if end < 0:
        return 0, 0
    last = data.rfind(b"\n", 0, end) + 1
    pos, key = end + 1, None
    while pos > floor:
        start = data.rfind(b"\n", 0, pos - 1) + 1
        stop = pos - 1
        if stop - start <= 1 and data[start:stop].strip() == b"":  # a blank line
            pos = start
            continue
        space = data.find(b" ", start, stop)
        qid = data[start:space if space >= 0 else stop]
        if key is None:
            key = qid
        elif qid != key:
            return pos, last
        pos = start
    return 0, last


def parse_run_block(data: bytes, end: int) -> tuple[Any, Any, Any] | None:
    """Query ids, doc ids and scores of the single-space separated run lines ``data[:end]`` (one
    thread), or None when the block needs the whole-file reader (other separators, short lines,
    anything unparsable). The caller still refuses empty ids and comment lines (see
    :func:`_plausible`): it checks them on each query's first row, where they cost nothing."""
    import pyarrow as pa

    nl = data.find(b"\n", 0, end)
    if len(data[:nl if nl >= 0 else end].split()) < 6:
        return None
    buf = pa.py_buffer(data)
    table = _parse(buf if end == len(data) else buf.slice(0, end), "run", threads=False)
    if table is None or table.num_rows == 0:
        return None
    return tuple(c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns)
