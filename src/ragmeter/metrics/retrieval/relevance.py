"""The relevance matrix: at which rank each query first retrieved each of its judged items.

Every retrieval measure in ragmeter is a numpy reduction of one :class:`RelevanceMatrix`. The
matrix is stored sparse (one entry per judged item: query, rank, grade), because that is all a
ranking measure needs: unjudged retrieved items only count through ``n_ret``. Building it is the
costly step (matching retrieved items against the judgements); it is done once per dataset and
matching rule, and then P@k, recall, MAP, nDCG ... each cost one pass over the entries.

Builders here take ranked lists already matched (``from_first_ranks``), prebuilt numpy arrays
(``from_arrays``), columns of a run and qrels (``from_columns``: TREC files, DataFrames) and
pytrec_eval-style dicts (``from_dicts``). Samples are matched in :mod:`ragmeter.metrics.retrieval.matching`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, repeat
from typing import Any

import numpy as np

from ragmeter.core.errors import DatasetError, MetricError

#: rank of a judged item that was not retrieved (sorts after every real rank)
NOT_RETRIEVED = np.iinfo(np.int64).max

#: elements compared per block when ranking matched documents inside their query's results
_BLOCK = 1 << 22


@dataclass(eq=False)
class RelevanceMatrix:
    """Judged items of a batch of queries and the rank at which each was first retrieved.

    Entries are sorted by (query, rank, grade descending); an item not retrieved has rank
    :data:`NOT_RETRIEVED`.

    Attributes:
        qids: query ids, one per row.
        n_ret: number of retrieved items per query (list length, after any cut).
        q: query index of every entry.
        rank: 1-based rank at which the entry was first retrieved.
        grade: graded relevance of the entry (gain of nDCG, linear).
        relevant: whether the entry counts as relevant (grade at or above the relevance level).
        multi_match: ``True`` when one retrieved item may account for several judged items (span
            and similarity matching); ``False`` for exact matching, where ranks are distinct.
    """

    qids: list[str]
    n_ret: np.ndarray
    q: np.ndarray
    rank: np.ndarray
    grade: np.ndarray
    relevant: np.ndarray
    multi_match: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_queries(self) -> int:
        return len(self.qids)

    @cached_property
    def retrieved(self) -> np.ndarray:
        return self.rank != NOT_RETRIEVED

    @cached_property
    def n_rel(self) -> np.ndarray:
        """Relevant items per query (``R``)."""
        return np.bincount(self.q[self.relevant], minlength=self.n_queries)

    @cached_property
    def rel_ret(self) -> np.ndarray:
        """Entry mask: relevant and retrieved."""
        return self.relevant & self.retrieved

    @cached_property
    def novel(self) -> np.ndarray:
        """Entry mask: the first relevant retrieved entry at its (query, rank).

        A rank is a relevant position when some relevant item was first retrieved there; with
        span or similarity matching several items can share one position, which counts once.
        """
        m = self.rel_ret.copy()
        if self.multi_match:
            idx = np.flatnonzero(m)
            same = (self.q[idx[1:]] == self.q[idx[:-1]]) & (self.rank[idx[1:]] == self.rank[idx[:-1]])
            m[idx[1:][same]] = False
        return m

    @cached_property
    def _group_start(self) -> np.ndarray:
        starts = np.zeros(self.n_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.q, minlength=self.n_queries), out=starts[1:])
        return starts

    def cumulative_in_query(self, mask: np.ndarray) -> np.ndarray:
        """For every entry, how many ``mask`` entries of its query come at or before it."""
        cs = np.cumsum(mask, dtype=np.int64)
        before = np.concatenate(([0], cs))[self._group_start[:-1]]
        return cs - before[self.q]

    @cached_property
    def ideal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positive grades per query in decreasing order: (query, 1-based ideal rank, grade)."""
        pos = self.grade > 0
        q, g = self.q[pos], self.grade[pos]
        order = np.lexsort((-g, q))
        q, g = q[order], g[order]
        starts = np.zeros(self.n_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(q, minlength=self.n_queries), out=starts[1:])
        irank = np.arange(1, len(q) + 1, dtype=np.int64) - starts[q]
        return q, irank, g

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_first_ranks(cls, n_ret: Sequence[int], items: Sequence[Sequence[tuple[int | None, float]]],
                         qids: Sequence[str] | None = None, *, multi_match: bool = False) -> RelevanceMatrix:
        """Build from, per query, the relevant items as ``(first rank or None, grade)`` pairs.

        Args:
            n_ret: length of each retrieved list.
            items: per query, one ``(rank, grade)`` per relevant item: the 1-based rank at which it
                was first retrieved (``None``: not retrieved) and its grade (> 0).
            qids: query ids (default ``"0"``, ``"1"`` ...).
            multi_match: several items may share a rank (span / similarity matching).
        """
        n = len(n_ret)
        if len(items) != n:
            raise MetricError(f"got {len(items)} item lists for {n} queries")
        counts = np.fromiter((len(x) for x in items), dtype=np.int64, count=n)
        flat = list(chain.from_iterable(items))
        q = np.repeat(np.arange(n, dtype=np.int64), counts)
        rank = np.fromiter((NOT_RETRIEVED if r is None else r for r, _ in flat), dtype=np.int64,
                           count=len(flat))
        grade = np.fromiter((g for _, g in flat), dtype=np.float64, count=len(flat))
        ids = [str(i) for i in range(n)] if qids is None else [str(x) for x in qids]
        return _finalize(ids, np.asarray(n_ret, dtype=np.int64), q, rank, grade, grade > 0,
                         multi_match)

    @classmethod
    def from_arrays(cls, ranked: np.ndarray, qrels_query: np.ndarray, qrels_doc: np.ndarray,
                    qrels_grade: np.ndarray, *, n_ret: np.ndarray | None = None,
                    relevance_level: float = 1, pad: int = -1,
                    qids: Sequence[str] | None = None) -> RelevanceMatrix:
        """Build from prebuilt arrays: ranked integer doc ids and flat integer qrels.

        Args:
            ranked: ``(n_queries, depth)`` integer doc ids in rank order, right-padded with ``pad``.
                A doc id must not repeat within a row (dedupe first).
            qrels_query / qrels_doc / qrels_grade: one judgement per element: query row, doc id,
                grade.
            n_ret: list lengths (default: non-pad cells per row).
            relevance_level: grades at or above it are relevant.
        """
        ranked = np.asarray(ranked)
        if ranked.ndim != 2:
            raise MetricError(f"ranked must be 2-D (queries x depth), got shape {ranked.shape}")
        nq, depth = ranked.shape
        qq = np.asarray(qrels_query, dtype=np.int64)
        qd = np.asarray(qrels_doc)
        qg = np.asarray(qrels_grade, dtype=np.float64)
        if n_ret is None:
            n_ret = (ranked != pad).sum(axis=1)
        rank = np.full(len(qq), NOT_RETRIEVED, dtype=np.int64)
        step = max(1, _BLOCK // max(depth, 1))
        for lo in range(0, len(qq), step):
            hi = min(len(qq), lo + step)
            row, col = np.nonzero(ranked[qq[lo:hi]] == qd[lo:hi, None])
            rank[lo + row[::-1]] = col[::-1] + 1  # reversed: the first occurrence wins
        keep = qg >= 0
        ids = [str(i) for i in range(nq)] if qids is None else [str(x) for x in qids]
        return _finalize(ids, np.asarray(n_ret, dtype=np.int64), qq[keep], rank[keep], qg[keep],
                         qg[keep] >= relevance_level, False)

    @classmethod
    def from_dicts(cls, qrels: Mapping[str, Mapping[str, float]], run: Mapping[str, Mapping[str, float]],
                   *, relevance_level: float = 1, max_docs: int | None = None) -> RelevanceMatrix:
        """Build from pytrec_eval-style dicts ``{qid: {docid: grade}}`` and ``{qid: {docid: score}}``.

        Follows trec_eval: documents are ranked by score descending, ties broken by docid
        descending; only queries present in both (with at least one judgement) are rows, in qid
        order; ``max_docs`` keeps the top documents of each query (``-M``).
        """
        qids = sorted(filter(qrels.__getitem__, run.keys() & qrels.keys()))  # judged at least once
        runs = list(map(run.__getitem__, qids))
        judged = list(map(qrels.__getitem__, qids))
        lens = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        # everything below iterates the dicts at C level (chain/map), never entry by entry in Python
        scores = np.fromiter(chain.from_iterable(map(dict.values, runs)), dtype=np.float64,
                             count=int(lens.sum()))
        if np.isnan(scores).any():
            raise DatasetError("a score in the run is not a number", file="<run dict>")
        starts = np.zeros(len(qids) + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])
        n_judged = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
        n = int(n_judged.sum())
        q = np.repeat(np.arange(len(qids), dtype=np.int64), n_judged)
        grade = np.fromiter(chain.from_iterable(map(dict.values, judged)), dtype=np.float64, count=n)
        # the run score of every judged doc (NaN: not retrieved): dict.get(run_q, doc, nan)
        owners = chain.from_iterable(map(repeat, runs, n_judged.tolist()))
        got = np.fromiter(map(dict.get, owners, chain.from_iterable(judged), repeat(float("nan"))),
                          dtype=np.float64, count=n)
        mi = np.flatnonzero(~np.isnan(got))
        jstart = np.zeros(len(qids) + 1, dtype=np.int64)
        np.cumsum(n_judged, out=jstart[1:])

        def tie_count(k: int, s: float) -> int:
            e = int(mi[k])
            qi = int(q[e])
            d = list(judged[qi])[e - int(jstart[qi])]
            return sum(1 for dd, v in runs[qi].items() if v == s and dd > d)

        rank = np.full(n, NOT_RETRIEVED, dtype=np.int64)
        rank[mi] = _ranks_in_segments(scores, starts, q[mi], got[mi], tie_count)
        return _trec_matrix(qids, lens, q, rank, grade, relevance_level, max_docs)

    @classmethod
    def from_columns(cls, run_qid: Any, run_doc: Any, run_score: Any, qrels_qid: Any, qrels_doc: Any,
                     qrels_grade: Any, *, relevance_level: float = 1, max_docs: int | None = None,
                     run_name: str = "run", qrels_name: str = "qrels") -> RelevanceMatrix:
        """Build from columns (arrays, lists or pyarrow arrays) of a run and of qrels, as trec_eval.

        Duplicate (query, doc) pairs in the run or in the qrels are an error, as in trec_eval.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        def strings(col: Any) -> Any:
            arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            if not isinstance(arr, pa.Array):
                arr = pa.array(np.asarray(arr, dtype=object) if not isinstance(arr, list) else arr)
            if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
                arr = pc.cast(arr, pa.string())
            return arr

        rq, rd = strings(run_qid), strings(run_doc)
        qq, qd = strings(qrels_qid), strings(qrels_doc)
        rs = np.asarray(run_score.to_numpy(zero_copy_only=False) if hasattr(run_score, "to_numpy")
                        else run_score, dtype=np.float64)
        qg = np.asarray(qrels_grade.to_numpy(zero_copy_only=False) if hasattr(qrels_grade, "to_numpy")
                        else qrels_grade, dtype=np.float64)
        if not (len(rq) == len(rd) == len(rs)):
            raise DatasetError("run columns have different lengths", file=run_name)
        if not (len(qq) == len(qd) == len(qg)):
            raise DatasetError("qrels columns have different lengths", file=qrels_name)

        # queries evaluated: in both, in qid (byte) order, as trec_eval sorts them
        rq_enc = pc.dictionary_encode(rq)
        qq_enc = pc.dictionary_encode(qq)
        rq_dict = rq_enc.dictionary.to_pylist()
        qq_dict = set(qq_enc.dictionary.to_pylist())
        qids = sorted(x for x in rq_dict if x in qq_dict)
        index = {x: i for i, x in enumerate(qids)}
        rmap = np.fromiter((index.get(x, -1) for x in rq_dict), dtype=np.int64, count=len(rq_dict))
        qmap = np.fromiter((index.get(x, -1) for x in qq_enc.dictionary.to_pylist()), dtype=np.int64,
                           count=len(qq_enc.dictionary))
        rqi = rmap[rq_enc.indices.to_numpy(zero_copy_only=False)] if len(rq) else np.zeros(0, np.int64)
        qqi = qmap[qq_enc.indices.to_numpy(zero_copy_only=False)] if len(qq) else np.zeros(0, np.int64)
        nq = len(qids)

        # run rows of evaluated queries, grouped by query (stable: keeps file order inside a query)
        rows = np.flatnonzero(rqi >= 0)
        rqi = rqi[rows]
        if len(rqi) and np.any(rqi[1:] < rqi[:-1]):
            order = np.argsort(rqi, kind="stable")
            rows, rqi = rows[order], rqi[order]
        lens = np.bincount(rqi, minlength=nq).astype(np.int64)
        starts = np.zeros(nq + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])
        scores = rs[rows]
        if np.isnan(scores).any():
            raise DatasetError("a score is not a number", file=run_name)

        # docs of the evaluated rows, grouped by query; duplicate (query, doc) pairs are refused,
        # as trec_eval does. Codes come from dictionaries built per block of whole queries: small
        # hash tables are much faster than one over every distinct docid of the run.
        identity = len(rows) == len(rd) and (len(rows) == 0 or (rows[0] == 0 and rows[-1] == len(rows) - 1
                                                                and bool(np.all(np.diff(rows) == 1))))
        rdg = rd if identity else rd.take(pa.array(rows, type=pa.int64()))
        rdc = np.empty(len(rows), dtype=np.int64)
        base = 0
        for a, b in _blocks(starts, 1 << 18):
            enc = pc.dictionary_encode(rdg.slice(a, b - a))
            rdc[a:b] = enc.indices.to_numpy(zero_copy_only=False) + base
            base += len(enc.dictionary)
        if len(rows) and not _unique(rqi * max(base, 1) + rdc):
            dup = _first_duplicate(rqi * max(base, 1) + rdc)
            raise DatasetError(f"query {qids[rqi[dup]]!r} retrieves document {rdg[int(dup)].as_py()!r} "
                               "more than once (trec_eval refuses duplicate documents)", file=run_name)
        keep = np.flatnonzero(qqi >= 0)
        qqi, qg = qqi[keep], qg[keep]
        qd_keep = qd.take(pa.array(keep, type=pa.int64()))
        qd_enc = pc.dictionary_encode(qd_keep)
        nqd = len(qd_enc.dictionary)
        qdc = qd_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        qkeys = qqi * (nqd + 1) + qdc
        if len(qkeys) and not _unique(qkeys):
            dup = _first_duplicate(qkeys)
            raise DatasetError(f"query {qids[qqi[dup]]!r} judges document "
                               f"{qd_keep[int(dup)].as_py()!r} more than once", file=qrels_name)
        # each run row's doc among the judged docs (nqd: never judged), then its judgement, if any
        to_judged = pc.index_in(rdg, value_set=qd_enc.dictionary)
        to_judged = np.asarray(to_judged.fill_null(nqd).to_numpy(zero_copy_only=False), dtype=np.int64)
        run_jkeys = rqi * (nqd + 1) + to_judged

        import pandas as pd

        judged_row = pd.Index(qkeys).get_indexer(run_jkeys) if len(qkeys) else np.full(len(rows), -1)
        mrow = np.flatnonzero(judged_row >= 0)
        mi = judged_row[mrow]
        doc_strings: dict[int, list[Any]] = {}

        def tie_count(k: int, s: float) -> int:
            qi = int(qqi[mi[k]])
            lo, hi = int(starts[qi]), int(starts[qi + 1])
            if qi not in doc_strings:
                doc_strings[qi] = rdg.slice(lo, hi - lo).to_pylist()
            names = doc_strings[qi]
            d = names[int(mrow[k]) - lo]
            tied = np.flatnonzero(scores[lo:hi] == s)
            return sum(1 for t in tied if names[t] > d)

        rank = np.full(len(qkeys), NOT_RETRIEVED, dtype=np.int64)
        rank[mi] = _ranks_in_segments(scores, starts, qqi[mi], scores[mrow], tie_count)
        return _trec_matrix(qids, lens, qqi, rank, qg, relevance_level, max_docs)


def _blocks(starts: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Row ranges of about ``size`` rows that never split a query's segment."""
    out: list[tuple[int, int]] = []
    a, total = 0, int(starts[-1])
    while a < total:
        b = int(starts[min(np.searchsorted(starts, a + size, side="left"), len(starts) - 1)])
        b = max(b, int(starts[np.searchsorted(starts, a, side="right")]))
        out.append((a, b))
        a = b
    return out


def _unique(keys: np.ndarray) -> bool:
    s = np.sort(keys)
    return not bool(np.any(s[1:] == s[:-1]))


def _first_duplicate(keys: np.ndarray) -> int:
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    same = np.flatnonzero(s[1:] == s[:-1])
    return int(order[same + 1].min())


def _ranks_in_segments(scores: np.ndarray, starts: np.ndarray, q: np.ndarray, s: np.ndarray,
                       tie_count: Any) -> np.ndarray:
    """1-based trec_eval rank of matched documents: 1 + #higher scores + #equal scores whose docid
    sorts after (trec_eval breaks ties by docid, descending). ``tie_count(k, s)`` counts the
    latter for matched document ``k`` and is called only when its score is tied."""
    n = len(q)
    greater = np.zeros(n, dtype=np.int64)
    tied = np.zeros(n, dtype=bool)
    seg_len = starts[1:] - starts[:-1]
    lens = seg_len[q]
    width = int(lens.max()) if n else 0
    if width and _descending_within(scores, starts):
        # results already in score order (the usual case): binary search, O(log width) per doc
        lo, hi = starts[q], starts[q + 1]
        first = _bisect_desc(scores, lo, hi, s, strict=True)
        greater = first - lo
        # equal scores sit together from `first` on: a tie needs a second one right after it
        nxt = np.minimum(first + 1, len(scores) - 1)
        tied = (first + 1 < hi) & (scores[nxt] == s)
    elif width:
        step = max(1, _BLOCK // width)
        if np.all(seg_len == width) and starts[-1] == width * len(seg_len):
            # every query has the same number of results: rows of a matrix view, gathered whole
            rows = scores.reshape(len(seg_len), width)
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                seg = rows[q[lo:hi]]
                sv = s[lo:hi, None]
                greater[lo:hi] = np.count_nonzero(seg > sv, axis=1)
                tied[lo:hi] = np.count_nonzero(seg == sv, axis=1) > 1
        else:
            cols = np.arange(width, dtype=np.int64)
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                idx = starts[q[lo:hi], None] + cols
                inside = cols < lens[lo:hi, None]
                seg = np.where(inside, scores[np.minimum(idx, len(scores) - 1)], -np.inf)
                sv = s[lo:hi, None]
                greater[lo:hi] = np.count_nonzero(seg > sv, axis=1)
                tied[lo:hi] = np.count_nonzero((seg == sv) & inside, axis=1) > 1
    rank = greater + 1
    for k in np.flatnonzero(tied):
        rank[k] += tie_count(int(k), float(s[k]))
    return rank


def _descending_within(scores: np.ndarray, starts: np.ndarray) -> bool:
    """Whether every segment ``scores[starts[i]:starts[i+1]]`` is in non-increasing order."""
    if len(scores) < 2:
        return True
    bad = scores[1:] > scores[:-1]
    inner = starts[1:-1]
    inner = inner[(inner > 0) & (inner < len(scores))]
    bad[inner - 1] = False  # a new segment may start higher
    return not bad.any()


def _bisect_desc(scores: np.ndarray, lo: np.ndarray, hi: np.ndarray, s: np.ndarray, strict: bool) -> np.ndarray:
    """Per element, the first index in ``[lo, hi)`` of a non-increasing segment whose value is not
    ``> s`` (``strict``) or not ``>= s``: vectorised bisection over every segment at once."""
    lo = lo.copy()
    hi = hi.copy()
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        v = scores[np.minimum(mid, len(scores) - 1)]
        go_right = active & ((v > s) if strict else (v >= s))
        stay = active & ~go_right
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(stay, mid, hi)


def _trec_matrix(qids: list[str], lens: np.ndarray, q: np.ndarray, rank: np.ndarray, grade: np.ndarray,
                 relevance_level: float, max_docs: int | None) -> RelevanceMatrix:
    grade = np.trunc(grade)  # trec_eval reads relevance with atol
    n_ret = lens.astype(np.int64)
    if max_docs is not None:
        if max_docs < 0:
            raise MetricError(f"max_docs must be >= 0, got {max_docs}")
        rank = np.where(rank > max_docs, NOT_RETRIEVED, rank)
        n_ret = np.minimum(n_ret, max_docs)
    keep = grade >= 0  # negative relevance: unjudged, never relevant, no gain
    return _finalize(qids, n_ret, q[keep], rank[keep], grade[keep], grade[keep] >= relevance_level,
                     False, {"relevance_level": relevance_level})


def _finalize(qids: list[str], n_ret: np.ndarray, q: np.ndarray, rank: np.ndarray, grade: np.ndarray,
              relevant: np.ndarray, multi_match: bool, meta: dict[str, Any] | None = None) -> RelevanceMatrix:
    q = np.asarray(q, dtype=np.int64)
    rank = np.asarray(rank, dtype=np.int64)
    grade = np.asarray(grade, dtype=np.float64)
    relevant = np.asarray(relevant, dtype=bool)
    if len(q) > 1 and not _is_sorted(q, rank, grade):
        if multi_match:
            order = np.lexsort((-grade, rank, q))
        else:
            # ranks are distinct within a query: one integer key sorts (query, rank)
            top = int(rank[rank != NOT_RETRIEVED].max(initial=0)) + 1
            order = np.argsort(q * (top + 1) + np.minimum(rank, top), kind="stable")
        q, rank, grade, relevant = q[order], rank[order], grade[order], relevant[order]
    return RelevanceMatrix(list(qids), np.asarray(n_ret, dtype=np.int64), q, rank, grade, relevant,
                           multi_match, dict(meta or {}))


def _is_sorted(q: np.ndarray, rank: np.ndarray, grade: np.ndarray) -> bool:
    dq = q[1:] - q[:-1]
    if np.any(dq < 0):
        return False
    same = dq == 0
    dr = rank[1:] > rank[:-1]
    er = rank[1:] == rank[:-1]
    ok = ~same | dr | (er & (grade[1:] <= grade[:-1]))
    return bool(ok.all())
