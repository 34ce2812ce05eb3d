"""trec_eval's evaluation of a run, block by block of whole queries, on all cores.

A run file is read in blocks of whole queries (:func:`ragmeter.io.trec.run_blocks`);
each block is parsed and evaluated on its own in a thread pool (pyarrow and numpy release the
GIL), so memory holds a few blocks, never the file. Per block:

* queries are runs of equal query ids (no hashing of the run's ids); each is looked up among
  the qrels queries by binary search over their ids as fixed-width bytes;
* every doc id gets a 64-bit fingerprint read straight from the Arrow string buffers
  (:func:`fingerprints`). Duplicate documents inside a query (trec_eval refuses them): the
  fingerprints are sorted query by query (rows of a matrix when queries have the same length, as
  in most runs), and a query whose fingerprints repeat has its doc ids compared as strings, so a
  collision is never reported as a duplicate;
* run documents are matched against the judged documents of the block's queries: a bitmap of
  the judged fingerprints, then (query, fingerprint) by binary search, then the doc ids compared;
  a judged document's rank is 1 + the documents of its query scored higher + those tied with a
  larger doc id (trec_eval's tie-break; strings are compared only where scores tie).

Queries must not reappear further down the file (run files list each query's lines together);
when one does, :class:`Fallback` is raised and the caller evaluates the whole file instead.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import DatasetError
from ragmeter.io.trec import (
    BufferPool,
    _last_run_id,
    from_numpy,
    has_empty,
    parse_run_block,
    run_blocks,
    to_numpy,
)
from ragmeter.metrics.retrieval.relevance import (
    NOT_RETRIEVED,
    RelevanceMatrix,
    _blocks,
    _ranks_in_segments,
    _trec_matrix,
)

Values = dict[str, np.ndarray]
Measure = Callable[[RelevanceMatrix], Values]

#: rows per block when evaluating columns already in memory
_COLUMN_BLOCK = 1 << 20
_MIX = tuple(np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                    0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD))
#: zero bytes around a string buffer, to read 8-byte words anywhere
_PAD = 8
#: strings fingerprinted at a time
_FP_ROWS = 1 << 19


class Fallback(Exception):
    """The run cannot be evaluated block by block: a line only the whole-file reader takes
    (tabs, comments, short lines, errors to report by line), or a query whose lines are not
    together in the file."""


# ---------------------------------------------------------------------------- strings
def strings(col: Any) -> Any:
    """A column (pyarrow array, list, numpy array) as one pyarrow string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    else:
        arr = col
    if not isinstance(arr, pa.Array):
        arr = pa.array(np.asarray(arr, dtype=object) if not isinstance(arr, list) else arr)
    if not pa.types.is_string(arr.type):
        arr = pc.cast(arr, pa.string())
    return arr


def _string_parts(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of a pyarrow string array with 8 zero bytes before and after (so that an 8-byte word
    can be read at any offset, and 8 bytes before any end), and each string's offsets into them
    (``n + 1`` int64)."""
    n = len(arr)
    if n == 0:
        return np.full(1, _PAD, dtype=np.int64), np.zeros(2 * _PAD, dtype=np.uint8)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    lo, hi = int(off[0]), int(off[-1])
    data = np.zeros(hi - lo + 2 * _PAD, dtype=np.uint8)
    if hi > lo:
        data[_PAD:_PAD + hi - lo] = np.frombuffer(bufs[2], dtype=np.uint8, count=hi - lo, offset=lo)
    off += _PAD - lo
    return off, data


def fixed_bytes(arr: Any) -> np.ndarray:
    """A pyarrow string array as a numpy fixed-width bytes array (``S<n>``): sorts and compares
    in byte order, as trec_eval's strcmp (and Python's str order) do."""
    off, data = _string_parts(arr)
    n = len(off) - 1
    start, lens = off[:-1], np.diff(off)
    width = max(1, int(lens.max()) if n else 1)
    out = np.zeros((n, width), dtype=np.uint8)
    shortest = int(lens.min()) if n else 0
    for c in range(width):  # one column of bytes at a time: no index array per byte
        rows = None if shortest > c else np.flatnonzero(lens > c)
        if rows is None:
            out[:, c] = data[start + c]
        else:
            out[rows, c] = data[start[rows] + c]
    return out.reshape(-1).view(f"S{width}")


def fingerprints(arr: Any) -> np.ndarray:
    """A 64-bit fingerprint of every string of a pyarrow string array, equal for equal strings:
    its last 8 bytes (all of it when shorter), mixed with its first 8 bytes when longer than 8,
    and with the words at bytes 8 and ``len - 16`` when longer than 16 (so strings of up to 32
    bytes are covered entirely). Read as unaligned words straight from the bytes."""
    if len(arr) > _FP_ROWS:  # bounded temporaries
        return np.concatenate([fingerprints(arr.slice(i, _FP_ROWS)) for i in range(0, len(arr), _FP_ROWS)])
    off, data = _string_parts(arr)
    if len(off) == 1:
        return np.zeros(0, dtype=np.uint64)
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    start, stop = off[:-1], off[1:]
    lens = stop - start
    h = words[stop - 8]
    shortest = int(lens.min())
    if shortest < 8:  # keep the string's own bytes: the high ones of the little-endian word
        h >>= ((8 - np.minimum(lens, 8)) * 8).astype(np.uint64)
        if shortest == 0:
            h[lens == 0] = 0
    longest = int(lens.max())
    for cut, parts in ((8, ((start, 0, _MIX[0]),)), (16, ((start, 8, _MIX[1]), (stop, -16, _MIX[2])))):
        if longest <= cut:
            break
        rows = None if shortest > cut else np.flatnonzero(lens > cut)
        for base, shift, k in parts:
            if rows is None:
                h ^= words[base + shift] * k
            else:
                h[rows] ^= words[base[rows] + shift] * k
    return h


# ---------------------------------------------------------------------------- qrels
@dataclass
class QrelsIndex:
    """The qrels grouped by query, queries in byte order of their ids (trec_eval's order).

    Attributes:
        names: query ids (pyarrow strings), in byte order.
        keys: the same as fixed-width bytes, for binary search.
        start: judgements of query ``i`` are rows ``start[i]:start[i + 1]`` of ``doc``/``grade``.
        first_dup: per query, the file row of its first judgement of a document judged before
            (-1: none); trec_eval refuses those when the query is evaluated.
        dup_doc: that document, per query that has one.
        fp: fingerprints of ``doc`` (:func:`fingerprints`).
    """

    names: Any
    keys: np.ndarray
    start: np.ndarray
    doc: Any
    grade: np.ndarray
    first_dup: np.ndarray
    dup_doc: dict[int, str]
    name: str
    fp: np.ndarray

    @classmethod
    def build(cls, qid: Any, doc: Any, grade: Any, name: str) -> QrelsIndex:
        import pyarrow.compute as pc

        q, d = strings(qid), strings(doc)
        g = np.asarray(to_numpy(grade), dtype=np.float64)
        if not (len(q) == len(d) == len(g)):
            raise DatasetError("qrels columns have different lengths", file=name)
        # queries: runs of equal ids (qrels list each query's lines together, usually), then the
        # distinct ids in byte order; no hashing of every row
        n = len(q)
        change = np.flatnonzero(to_numpy(pc.not_equal(q.slice(1), q.slice(0, n - 1)))) + 1 if n > 1 \
            else np.zeros(0, dtype=np.int64)
        seg = np.concatenate(([0], change)).astype(np.int64)
        keys, first, inverse = np.unique(fixed_bytes(q.take(from_numpy(seg))), return_index=True,
                                         return_inverse=True)
        qi = np.repeat(inverse.reshape(-1).astype(np.int64), np.diff(np.append(seg, n)))
        nq = len(keys)
        start = np.zeros(nq + 1, dtype=np.int64)
        np.cumsum(np.bincount(qi, minlength=nq), out=start[1:])
        if n and np.any(qi[1:] < qi[:-1]):
            rows = np.argsort(qi, kind="stable")
            d, g, qi = d.take(from_numpy(rows)), g[rows], qi[rows]
        else:  # already grouped in qid order
            rows = np.arange(n, dtype=np.int64)
        fp = fingerprints(d)
        first_dup, dup_doc = _first_repeats(qi, fp, d, rows, nq)
        return cls(q.take(from_numpy(seg[first])), keys, start, d, g, first_dup, dup_doc, name, fp)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The index of each query id (fixed-width bytes) among the qrels queries, -1 if absent."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.searchsorted(self.keys, keys)
        pos_c = np.minimum(pos, len(self.keys) - 1)
        return np.where(self.keys[pos_c] == keys, pos_c, -1).astype(np.int64)

    def check_duplicates(self, evaluated: np.ndarray) -> None:
        """Refuse, as trec_eval does, a document judged twice for an evaluated query."""
        rows = self.first_dup[evaluated]
        rows = rows[rows >= 0]
        if len(rows):
            row = int(rows.min())
            qi = int(evaluated[self.first_dup[evaluated] == row][0])
            raise DatasetError(f"query {self.names[qi].as_py()!r} judges document "
                               f"{self.dup_doc[qi]!r} more than once", file=self.name)


def _first_repeats(qi: np.ndarray, fp: np.ndarray, docs: Any, rows: np.ndarray,
                   nq: int) -> tuple[np.ndarray, dict[int, str]]:
    """Per query, the file row of its first judgement of a document it judged before (-1: none),
    and that document. ``qi``/``fp``/``docs`` are grouped by query, ``rows`` their file rows
    (ascending within a query). Equal fingerprints in a query are checked string by string."""
    out = np.full(nq, -1, dtype=np.int64)
    names: dict[int, str] = {}
    key = fp ^ (qi.astype(np.uint64) * _MIX[4])  # equal (query, fingerprint): equal key
    ordered = np.sort(key)
    if not np.any(ordered[1:] == ordered[:-1]):
        return out, names
    order = np.argsort(key)
    same = np.flatnonzero(key[order[1:]] == key[order[:-1]])
    for q in np.unique(np.concatenate([qi[order[same]], qi[order[same + 1]]])).tolist():
        lo = int(np.searchsorted(qi, q, side="left"))
        hi = int(np.searchsorted(qi, q, side="right"))
        seen: set[str] = set()
        for k, doc in enumerate(docs.slice(lo, hi - lo).to_pylist()):
            if doc in seen:
                out[q] = int(rows[lo + k])
                names[q] = doc
                break
            seen.add(doc)
    return out, names


# ---------------------------------------------------------------------------- one block
@dataclass
class Options:
    relevance_level: float
    max_docs: int | None
    run_name: str
    measure: Measure


def evaluate_block(ix: QrelsIndex, seg_qi: np.ndarray, starts: np.ndarray, docs: Any, scores: np.ndarray,
                   opts: Options) -> tuple[np.ndarray, Values]:
    """Values of the queries of one block: rows ``starts[i]:starts[i + 1]`` of ``docs`` /
    ``scores`` are the results of qrels query ``seg_qi[i]``."""
    nseg = len(seg_qi)
    if nseg == 0:
        return seg_qi, {}
    if np.isnan(scores).any():
        raise DatasetError("a score is not a number", file=opts.run_name)
    h = fingerprints(docs)
    _refuse_duplicates(ix, seg_qi, starts, docs, h, opts.run_name)

    # the judgements of the block's queries, and the run rows that retrieved them
    jcount = ix.start[seg_qi + 1] - ix.start[seg_qi]
    jq = np.repeat(np.arange(nseg, dtype=np.int64), jcount)
    jfirst = np.zeros(nseg + 1, dtype=np.int64)
    np.cumsum(jcount, out=jfirst[1:])
    jrows = np.repeat(ix.start[seg_qi] - jfirst[:-1], jcount) + np.arange(int(jfirst[-1]), dtype=np.int64)
    mrow, mj = _match(h, starts, jq, ix.fp[jrows], docs, ix.doc, jrows)
    rank = np.full(len(jq), NOT_RETRIEVED, dtype=np.int64)
    if len(mrow):
        names_of: dict[int, list[str]] = {}

        def tie_count(k: int, s: float) -> int:
            i = int(jq[mj[k]])
            lo, hi = int(starts[i]), int(starts[i + 1])
            if i not in names_of:
                names_of[i] = docs.slice(lo, hi - lo).to_pylist()
            names = names_of[i]
            d = names[int(mrow[k]) - lo]
            return sum(1 for t in np.flatnonzero(scores[lo:hi] == s) if names[t] > d)

        rank[mj] = _ranks_in_segments(scores, starts, jq[mj], scores[mrow], tie_count)
    qids = ix.names.take(from_numpy(seg_qi)).to_pylist()
    m = _trec_matrix(qids, np.diff(starts), jq, rank, ix.grade[jrows], opts.relevance_level, opts.max_docs)
    return seg_qi, opts.measure(m)


def _match(h: np.ndarray, starts: np.ndarray, jq: np.ndarray, jh: np.ndarray, docs: Any, judged: Any,
           jrows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (run row, judgement) of the same query and the same doc id: rows whose fingerprint
    is among the judged ones' (a bitmap of their hashes first), then the same query and
    fingerprint (binary search), then the doc ids themselves compared."""
    import pyarrow.compute as pc

    none = np.zeros(0, dtype=np.int64)
    if len(jh) == 0 or len(h) == 0:
        return none, none
    bits = min(22, max(16, int(len(jh) * 64).bit_length()))  # a few % of false candidates
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, dtype=bool)
    table[(jh * _MIX[3]) >> shift] = True
    cand = np.flatnonzero(table[(h * _MIX[3]) >> shift])
    if len(cand) == 0:
        return none, none
    seg = np.searchsorted(starts, cand, side="right") - 1
    rkey = h[cand] ^ (seg.astype(np.uint64) * _MIX[4])
    jkey = jh ^ (jq.astype(np.uint64) * _MIX[4])
    jorder = np.argsort(jkey)
    sorted_keys = jkey[jorder]
    lo = np.searchsorted(sorted_keys, rkey, side="left")
    if np.any(sorted_keys[1:] == sorted_keys[:-1]):  # a key judged twice: take every one
        n = np.searchsorted(sorted_keys, rkey, side="right") - lo
        r = np.repeat(np.arange(len(cand)), n)
        first = np.zeros(len(n) + 1, dtype=np.int64)
        np.cumsum(n, out=first[1:])
        j = jorder[np.repeat(lo, n) + np.arange(len(r)) - np.repeat(first[:-1], n)]
    else:
        lo = np.minimum(lo, len(jkey) - 1)
        r = np.flatnonzero(sorted_keys[lo] == rkey)
        j = jorder[lo[r]]
    ok = jq[j] == seg[r]
    r, j = r[ok], j[ok]
    same = to_numpy(pc.equal(docs.take(from_numpy(cand[r])), judged.take(from_numpy(jrows[j]))))
    return cand[r[same]], j[same]


def _refuse_duplicates(ix: QrelsIndex, seg_qi: np.ndarray, starts: np.ndarray, docs: Any, h: np.ndarray,
                       run_name: str) -> None:
    """trec_eval refuses a query retrieving a document twice: fingerprints first, then the
    strings of the queries whose fingerprints repeat."""
    found: list[tuple[int, str]] = []
    for i in _repeated_fingerprints(h, starts):
        lo, hi = int(starts[i]), int(starts[i + 1])
        seen: set[str] = set()
        for d in docs.slice(lo, hi - lo).to_pylist():
            if d in seen:
                found.append((int(seg_qi[i]), d))
                break
            seen.add(d)
    if found:
        qi, doc = min(found)
        raise DatasetError(f"query {ix.names[qi].as_py()!r} retrieves document {doc!r} more than once "
                           "(trec_eval refuses duplicate documents)", file=run_name)


def _repeated_fingerprints(h: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Segments (queries) in which some fingerprint appears twice."""
    lens = np.diff(starts)
    if len(lens) == 0 or lens.max() < 2:
        return np.zeros(0, dtype=np.int64)
    width = int(np.bincount(lens).argmax())
    out = []
    if width >= 2:
        # the usual case: most queries have the same number of results; sort each as a row
        main = np.flatnonzero(lens == width)
        if len(main) == len(lens):
            mat = h.reshape(len(lens), width)
        else:
            mat = h[starts[main][:, None] + np.arange(width)]
        mat = np.sort(mat, axis=1)
        out.append(main[(mat[:, 1:] == mat[:, :-1]).any(axis=1)])
    rest = np.flatnonzero((lens != width) & (lens >= 2))
    if len(rest):
        seg = np.repeat(rest, lens[rest])
        first = np.zeros(len(rest) + 1, dtype=np.int64)
        np.cumsum(lens[rest], out=first[1:])
        rows = np.repeat(starts[rest] - first[:-1], lens[rest]) + np.arange(int(first[-1]))
        key = h[rows] ^ (seg.astype(np.uint64) * _MIX[1])
        order = np.argsort(key)
        same = np.flatnonzero(key[order[1:]] == key[order[:-1]])
        out.append(np.unique(np.concatenate([seg[order[same]], seg[order[same + 1]]])))
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def _file_block(ix: QrelsIndex, data: bytearray, end: int, opts: Options,
                pool: BufferPool | None = None) -> tuple[np.ndarray, Values]:
    import pyarrow.compute as pc

    try:
        cols = parse_run_block(data, end)  # new arrays: the block's bytes are free again
    finally:
        if pool is not None:
            pool.put(data)
    if cols is None:
        raise Fallback
    q, docs, score = cols
    n = len(q)
    change = np.flatnonzero(to_numpy(pc.not_equal(q.slice(1), q.slice(0, n - 1)))) + 1
    starts = np.concatenate(([0], change, [n])).astype(np.int64)
    names = q.take(from_numpy(starts[:-1]))
    # what a lenient single-space parse could misread (as ragmeter.io.trec._plausible): empty fields
    # (leading or doubled blanks) and comment lines; a query id is the same on all its rows
    if has_empty(names) or has_empty(docs) or pc.any(pc.starts_with(names, "#")).as_py():
        raise Fallback
    seg_qi = ix.lookup(fixed_bytes(names))
    scores = to_numpy(score)
    keep = seg_qi >= 0
    if not keep.all():
        lens = np.diff(starts)[keep]
        rows = np.repeat(keep, np.diff(starts))
        docs, scores, seg_qi = docs.take(from_numpy(np.flatnonzero(rows))), scores[rows], seg_qi[keep]
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])
    if len(np.unique(seg_qi)) != len(seg_qi):
        raise Fallback  # a query's lines are not together
    return evaluate_block(ix, seg_qi, starts, docs, scores, opts)


# ---------------------------------------------------------------------------- drivers
def evaluate_run_file(ix: QrelsIndex, path: Path, opts: Options, *, block_bytes: int | None = None,
                      workers: int | None = None) -> tuple[np.ndarray, Values, str | None]:
    """Evaluate a run file block by block: (qrels index of every evaluated query, in order; their
    values; the run's tag). Raises :class:`Fallback` (and OSError) when the whole-file reader
    must take over."""
    workers = workers_available() if workers is None else workers
    pool = BufferPool(workers + 2)  # one being read, workers + 1 handed out (see _in_pool)
    run_id: list[str | None] = []

    def tasks() -> Iterator[Callable[[], tuple[np.ndarray, Values]]]:
        for data, end in run_blocks(path, block_bytes, pool):
            run_id[:] = [_last_run_id(data, end)]  # trec_eval keeps the last line's tag
            yield partial(_file_block, ix, data, end, opts, pool)

    qi, values = _merge(_in_pool(tasks(), workers), len(ix.keys))
    if not run_id:
        raise Fallback  # an empty file: the whole-file reader says so
    return qi, values, run_id[0]


def evaluate_columns(ix: QrelsIndex, qid: Any, doc: Any, score: Any, opts: Options,
                     workers: int | None = None) -> tuple[np.ndarray, Values]:
    """Evaluate a run held as columns (any query order)."""
    import pyarrow.compute as pc

    q, d = strings(qid), strings(doc)
    s = np.asarray(to_numpy(score), dtype=np.float64)
    if not (len(q) == len(d) == len(s)):
        raise DatasetError("run columns have different lengths", file=opts.run_name)
    enc = pc.dictionary_encode(q)
    rqi = ix.lookup(fixed_bytes(enc.dictionary))[to_numpy(enc.indices)] \
        if len(q) else np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(rqi >= 0)
    rqi = rqi[rows]
    if len(rqi) and np.any(rqi[1:] < rqi[:-1]):
        order = np.argsort(rqi, kind="stable")  # group by query, file order inside a query
        rows, rqi = rows[order], rqi[order]
        d, s = d.take(from_numpy(rows)), s[rows]
    elif len(rows) != len(d):
        d, s = d.take(from_numpy(rows)), s[rows]
    change = np.flatnonzero(rqi[1:] != rqi[:-1]) + 1
    starts = np.concatenate(([0], change, [len(rqi)])).astype(np.int64) if len(rqi) else np.zeros(1, np.int64)
    seg_qi = rqi[starts[:-1]]

    def tasks() -> Iterator[Callable[[], tuple[np.ndarray, Values]]]:
        for a, b in _blocks(starts, _COLUMN_BLOCK):
            i0, i1 = np.searchsorted(starts, [a, b])
            yield partial(evaluate_block, ix, seg_qi[i0:i1], starts[i0:i1 + 1] - a, d.slice(a, b - a),
                          s[a:b], opts)

    return _merge(_in_pool(tasks(), workers), len(ix.keys))


def _merge(results: Iterable[tuple[np.ndarray, Values]], nq: int) -> tuple[np.ndarray, Values]:
    """Blocks' values in qrels query order, written in place into one array per value name; a
    query in two blocks means the file is not grouped by query."""
    seen = np.zeros(nq, dtype=bool)
    out: Values = {}
    for qi, values in results:
        if not len(qi):
            continue
        if seen[qi].any():
            raise Fallback
        seen[qi] = True
        for name, v in values.items():
            if name not in out:
                out[name] = np.zeros(nq, dtype=v.dtype)
            out[name][qi] = v
    qi = np.flatnonzero(seen)
    if len(qi) < nq:
        out = {name: v[qi] for name, v in out.items()}
    return qi, out


def workers_available() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


def _in_pool(tasks: Iterator[Callable[[], Any]], workers: int | None) -> Iterator[Any]:
    """Results of ``tasks`` in order, run on ``workers`` threads, at most ``workers + 1``
    submitted at a time (so memory holds a few blocks)."""
    workers = workers_available() if workers is None else workers
    if workers <= 1:
        for task in tasks:
            yield task()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragmeter-trec") as pool:
        pending: deque[Future[Any]] = deque()
        try:
            for task in tasks:
                pending.append(pool.submit(task))
                while len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
