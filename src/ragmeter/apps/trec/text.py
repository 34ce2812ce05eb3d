"""trec_eval's per-query output lines for many queries at once, built as bytes with numpy.

``name<TAB>qid<TAB>value`` with the name left-aligned in 22 characters and the value printed as
printf's ``%6.4f`` (``%d`` for counts), built for all lines at once with a few numpy passes
instead of one Python format call per line.
"""

from __future__ import annotations

import math

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)
_ZERO, _DOT, _NL = ord("0"), ord("."), ord("\n")


def format_lines(names: list[str], qids: list[str], mat: np.ndarray, counts: set[str]) -> str:
    """The lines of every query (rows of ``mat``) and value name (columns), query by query,
    each ending with a newline; names in ``counts`` print as integers.

    Each line is a row of a byte matrix (name, query id, value, each left in its own columns
    with a mask of the bytes in use); the text is the masked bytes, row after row."""
    nq, nn = mat.shape
    if nq == 0 or nn == 0:
        return ""
    name_mat, name_len = _rows([f"{n:<22}\t".encode() for n in names])
    qid_mat, qid_len = _rows([q.encode() + b"\t" for q in qids])
    is_count = np.tile(np.array([n in counts for n in names]), nq)
    val_mat, start, end = _values(mat.reshape(-1), is_count)
    wn, wq = name_mat.shape[1], qid_mat.shape[1]
    out = np.empty((nq * nn, wn + wq + val_mat.shape[1]), dtype=np.uint8)
    keep = np.empty(out.shape, dtype=bool)
    out[:, :wn] = np.tile(name_mat, (nq, 1))
    keep[:, :wn] = np.tile(np.arange(wn) < name_len[:, None], (nq, 1))
    out[:, wn:wn + wq] = np.repeat(qid_mat, nn, axis=0)
    keep[:, wn:wn + wq] = np.repeat(np.arange(wq) < qid_len[:, None], nn, axis=0)
    out[:, wn + wq:] = val_mat
    cols = np.arange(val_mat.shape[1])
    keep[:, wn + wq:] = (cols >= start[:, None]) & (cols < end[:, None])
    return out[keep].tobytes().decode("utf-8")


def _rows(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as the rows of a matrix (left-aligned, zero-padded) and their lengths."""
    lens = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    width = max(1, int(lens.max()))
    out = np.zeros(len(items) * width, dtype=np.uint8)
    starts = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    dest = np.repeat(np.arange(len(items), dtype=np.int64) * width - starts[:-1], lens) + \
        np.arange(int(starts[-1]), dtype=np.int64)
    out[dest] = np.frombuffer(b"".join(items), dtype=np.uint8)
    return out.reshape(len(items), width), lens


def _values(v: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``"%d\\n" % v`` where ``counts``, else ``"%6.4f\\n" % v``: a byte matrix and, per row,
    the columns its text starts and ends at.

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
    return mat, start, end
