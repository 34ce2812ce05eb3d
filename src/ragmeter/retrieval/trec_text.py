"""trec_eval's per-query output lines for many queries at once, built as bytes with numpy.

``name<TAB>qid<TAB>value`` with the name left-aligned in 22 characters and the value printed as
printf's ``%6.4f`` (``%d`` for counts): every piece is a column of byte strings, and the lines
are their row-wise concatenation, made with a few vectorised gathers instead of one Python
format call per line.
"""

from __future__ import annotations

import math

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)
_ZERO, _DOT, _NL = ord("0"), ord("."), ord("\n")


def format_lines(names: list[str], qids: list[str], mat: np.ndarray, counts: set[str]) -> str:
    """The lines of every query (rows of ``mat``) and value name (columns), query by query,
    each ending with a newline; names in ``counts`` print as integers."""
    nq, nn = mat.shape
    if nq == 0 or nn == 0:
        return ""
    name_part = _take(*_pack([f"{n:<22}\t".encode() for n in names]), np.tile(np.arange(nn), nq))
    qid_part = _take(*_pack([q.encode() + b"\t" for q in qids]), np.repeat(np.arange(nq), nn))
    is_count = np.tile(np.array([n in counts for n in names]), nq)
    return _join([name_part, qid_part, _values(mat.reshape(-1), is_count)]).decode("utf-8")


def _pack(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as (bytes, offsets)."""
    off = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=len(items)), out=off[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), off


def _take(blob: np.ndarray, off: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Items ``idx`` of (bytes, offsets), as (bytes, offsets)."""
    lens = np.diff(off)[idx]
    new = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lens, out=new[1:])
    src = np.repeat(off[:-1][idx] - new[:-1], lens) + np.arange(int(new[-1]), dtype=np.int64)
    return blob[src], new


def _join(parts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """Row-wise concatenation of columns of byte strings (each column: bytes, offsets)."""
    lens = [np.diff(off) for _, off in parts]
    total = np.zeros(len(lens[0]) + 1, dtype=np.int64)
    np.cumsum(sum(lens), out=total[1:])
    out = np.empty(int(total[-1]), dtype=np.uint8)
    pos = total[:-1].copy()
    for (blob, off), ln in zip(parts, lens, strict=True):
        out[np.repeat(pos - off[:-1], ln) + np.arange(int(off[0]), int(off[-1]), dtype=np.int64)] = \
            blob[int(off[0]):int(off[-1])]
        pos += ln
    return out.tobytes()


def _values(v: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``"%d\\n" % v`` where ``counts``, else ``"%6.4f\\n" % v``, as (bytes, offsets).

    The digits come from ``rint(v * 10000)``, which is printf's correctly rounded value unless
    the exact product is within 1e-6 of a half: its rounding error is far smaller below
    ``v = 2**33 / 10**4``. Those values, and negative, huge and non-finite ones (none in
    trec_eval's per-query values), are formatted by Python.
    """
    n = len(v)
    finite = np.isfinite(v)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.where(finite, v, 0.0) * 10000.0
        odd = ~finite | (v < 0) | np.where(counts, v >= 2.0 ** 62, (scaled >= 2.0 ** 33)
                                           | (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6))
        x = np.where(odd, 0, np.where(counts, np.trunc(np.where(finite, v, 0.0)), np.rint(scaled))).astype(np.int64)
    whole = np.where(counts, x, x // 10000)
    nd = 1 + np.searchsorted(_POW10[1:], whole, side="right")
    width = int(nd.max())
    digits = (whole[:, None] // _POW10[width - 1::-1][None, :]) % 10 + _ZERO
    frac = x % 10000
    tail = np.empty((n, 6), dtype=np.int64)
    tail[:, 0] = _DOT
    for k, p in enumerate((1000, 100, 10, 1), start=1):
        tail[:, k] = (frac // p) % 10 + _ZERO
    tail[:, 5] = _NL
    tail[counts, 0] = _NL
    mat = np.concatenate([digits, tail], axis=1).astype(np.uint8)
    start = width - nd
    end = width + np.where(counts, 1, 6)
    rows = np.flatnonzero(odd)
    if len(rows):
        texts = [(f"{int(x)}" if c else "  -nan" if math.isnan(x) else f"{x:6.4f}").encode() + b"\n"
                 for x, c in zip(v[rows].tolist(), counts[rows].tolist(), strict=True)]
        wide = max(map(len, texts))
        if wide > mat.shape[1]:
            mat = np.concatenate([mat, np.zeros((n, wide - mat.shape[1]), dtype=np.uint8)], axis=1)
        for r, t in zip(rows.tolist(), texts, strict=True):
            mat[r, :len(t)] = np.frombuffer(t, dtype=np.uint8)
        start[rows] = 0
        end[rows] = [len(t) for t in texts]
    cols = np.arange(mat.shape[1])
    blob = mat[(cols >= start[:, None]) & (cols < end[:, None])]
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(end - start, out=off[1:])
    return blob, off
