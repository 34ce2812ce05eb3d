"""Clipped n-gram overlaps of a whole column of (hypothesis, references) pairs at once.

The quantity behind BLEU's modified precision, ROUGE-N and SQuAD's token F1 is, per pair,
``sum over n-grams g of min(count_hyp(g), max over references r of count_r(g))``. Counting it
with a ``Counter`` per sentence costs tens of microseconds a pair in Python; here every token of
the column is interned once (a C-level ``dict.setdefault`` pass), n-grams become integer keys
(the key of an n-gram is the rank of the pair (key of its first n-1 tokens, id of its last token),
so keys stay exact and small at every order), and counting, clipping and matching are sorts and
reductions over flat numpy arrays. The results are integers, identical to the ``Counter`` version.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NgramColumns:
    """Integer n-gram keys (orders 1..``max_order``) of many token sequences ("segments").

    Args:
        segments: token lists; n-grams never cross from one segment into the next.
        max_order: the largest n.
    """

    def __init__(self, segments: Sequence[Sequence[str]], max_order: int) -> None:
        vocab: dict[str, int] = {}
        flat = [t for seg in segments for t in seg]
        ids = np.fromiter(map(vocab.setdefault, flat, range(len(flat))), dtype=np.int64, count=len(flat))
        self._build(ids, np.fromiter(map(len, segments), dtype=np.int64, count=len(segments)), max_order)

    @classmethod
    def from_ids(cls, ids: np.ndarray, lens: np.ndarray, max_order: int) -> NgramColumns:
        """From token ids already interned (every segment's ids one after the other, ``lens`` tokens
        per segment; ids below the number of tokens, as dense ids are)."""
        self = cls.__new__(cls)
        self._build(np.asarray(ids, dtype=np.int64), np.asarray(lens, dtype=np.int64), max_order)
        return self

    def _build(self, ids: np.ndarray, lens: np.ndarray, max_order: int) -> None:
        self.lens = lens
        self.n_segments = len(lens)
        n = len(ids)
        self.seg = np.repeat(np.arange(self.n_segments, dtype=np.int64), self.lens)
        starts = np.zeros(self.n_segments + 1, dtype=np.int64)
        np.cumsum(self.lens, out=starts[1:])
        # tokens left in the segment from each position (the position included)
        self.left = starts[1:][self.seg] - np.arange(n, dtype=np.int64)
        self.keys: list[np.ndarray] = [ids]
        key = ids
        base = int(ids.max()) + 1 if n else 1
        width = base  # every key of the current order is below this
        # a key times the segment count must stay below 2**62 (clipped_matches adds the owner)
        limit = (1 << 62) // max(self.n_segments + 1, 1)
        for order in range(2, max_order + 1):
            if len(key) < 2:
                self.keys.append(np.zeros(0, dtype=np.int64))
                key = self.keys[-1]
                continue
            if width * base >= limit:  # rank the (n-1)-grams so the products stay small (a sort)
                _, inverse = np.unique(key, return_inverse=True)
                key = inverse.astype(np.int64).ravel()
                width = int(key.max()) + 1
            # an n-gram is (its first n-1 tokens, its last token): exact as long as it fits
            key = key[:-1] * base + ids[order - 1:]
            width *= base
            self.keys.append(key)

    def grams(self, order: int, segments: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(segment, key)`` of every n-gram of ``order`` (optionally only of ``segments``, a
        boolean mask over segments)."""
        key = self.keys[order - 1]
        m = len(key)
        ok = self.left[:m] >= order
        seg = self.seg[:m]
        if segments is not None:
            ok &= segments[seg]
        return seg[ok], key[ok]


def _counts(owner: np.ndarray, key: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``owner * width + key`` values (sorted) and how often each occurs."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.unique(owner * width + key, return_counts=True)


def clipped_matches(grams: NgramColumns, hyp_segment: np.ndarray, ref_pair: np.ndarray,
                    order: int) -> np.ndarray:
    """Per pair: ``sum_g min(count of g in its hypothesis, max count of g in one of its references)``.

    Args:
        grams: n-gram keys of every segment (hypotheses and references).
        hyp_segment: ``hyp_segment[p]`` is the segment index of pair ``p``'s hypothesis.
        ref_pair: per segment, the pair it is a reference of, or -1 (hypotheses, unused segments).
        order: the n-gram order.
    """
    n_pairs = len(hyp_segment)
    is_hyp = np.zeros(grams.n_segments, dtype=bool)
    is_hyp[hyp_segment] = True
    hyp_pair = np.full(grams.n_segments, -1, dtype=np.int64)
    hyp_pair[hyp_segment] = np.arange(n_pairs, dtype=np.int64)
    keys = grams.keys[order - 1]
    width = int(keys.max()) + 1 if keys.size else 1
    if width * max(grams.n_segments, 1) >= 1 << 62:  # owner * width + key must fit in 64 bits
        keys = np.unique(keys, return_inverse=True)[1].astype(np.int64).ravel()
        grams.keys[order - 1] = keys
        width = int(keys.max()) + 1
    if width * (n_pairs + 2) < 1 << 62 and _one_reference_each(hyp_segment, ref_pair, n_pairs):
        return _clipped_one_reference(grams, hyp_pair, ref_pair, keys, width, order, n_pairs)
    seg, key = grams.grams(order, is_hyp)
    hyp_keys, hyp_counts = _counts(hyp_pair[seg], key, width)
    seg, key = grams.grams(order, ref_pair >= 0)
    ref_keys, ref_counts = _counts(seg, key, width)  # per reference segment first
    if ref_keys.size:
        owner = ref_pair[ref_keys // width]
        pair_keys = owner * width + ref_keys % width
        if np.any(pair_keys[1:] <= pair_keys[:-1]):  # several references: clip by the largest count
            order_ = np.argsort(pair_keys, kind="stable")
            pair_keys, counts = pair_keys[order_], ref_counts[order_]
            first = np.flatnonzero(np.r_[True, pair_keys[1:] != pair_keys[:-1]])
            ref_keys, ref_counts = pair_keys[first], np.maximum.reduceat(counts, first)
        else:
            ref_keys = pair_keys
    if not ref_keys.size or not hyp_keys.size:
        return np.zeros(n_pairs, dtype=np.int64)
    # both key arrays are sorted and distinct: a binary search finds each hypothesis key among the
    # references' (no third sort, as intersect1d would make)
    at = np.searchsorted(ref_keys, hyp_keys)
    np.minimum(at, ref_keys.size - 1, out=at)
    hit = ref_keys[at] == hyp_keys
    return np.bincount(hyp_keys[hit] // width, weights=np.minimum(hyp_counts[hit], ref_counts[at[hit]]),
                       minlength=n_pairs).astype(np.int64)


def _one_reference_each(hyp_segment: np.ndarray, ref_pair: np.ndarray, n_pairs: int) -> bool:
    """Whether every pair has at most one reference segment and no segment is both a pair's
    hypothesis and a reference (the layouts of sentence BLEU, ROUGE and token F1 with one reference)."""
    refs = ref_pair[ref_pair >= 0]
    if refs.size and np.bincount(refs, minlength=n_pairs).max() > 1:
        return False
    return not (ref_pair[hyp_segment] >= 0).any()


def _clipped_one_reference(grams: NgramColumns, hyp_pair: np.ndarray, ref_pair: np.ndarray, keys: np.ndarray,
                           width: int, order: int, n_pairs: int) -> np.ndarray:
    """:func:`clipped_matches` when each pair has at most one reference: every n-gram of a pair's
    hypothesis and reference becomes one integer ``((pair * width + key) << 1) | side`` (side 1: the
    reference), all of them sorted at once. An n-gram of both sides then shows as a hypothesis
    value followed by its reference value (they differ in the last bit only); the run of that
    n-gram's hypothesis values starts at ``value - 1`` and its reference values end before
    ``value + 1``, so both counts come from two binary searches, and their minimum is the clipped
    match. Positions that are no n-gram of this order (past their segment's end) or belong to no
    pair go to an extra pair, whose figure is dropped. One sort instead of two plus a binary search
    of every hypothesis n-gram; the same integers."""
    m = len(keys)
    if m == 0:
        return np.zeros(n_pairs, dtype=np.int64)
    owner = np.where(hyp_pair >= 0, hyp_pair, ref_pair)  # the pair of each segment (-1: neither)
    seg = grams.seg[:m]
    v = owner[seg]
    v[(grams.left[:m] < order) | (v < 0)] = n_pairs
    v *= 2 * width
    v += keys << 1
    v += (ref_pair >= 0)[seg]
    v.sort()
    at = np.flatnonzero((v[:-1] ^ v[1:]) == 1)  # a hypothesis value, then the same n-gram's reference value
    if not at.size:
        return np.zeros(n_pairs, dtype=np.int64)
    at += 1
    ref = v[at]
    hyps = at - np.searchsorted(v, ref - 1)
    refs = np.searchsorted(v, ref + 1) - at
    return np.bincount(ref // (2 * width), weights=np.minimum(hyps, refs),
                       minlength=n_pairs + 1)[:n_pairs].astype(np.int64)


def pair_layout(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[Sequence[str]]]
                ) -> tuple[list[Sequence[str]], np.ndarray, np.ndarray]:
    """Segments ``[hyp 0, refs of 0 ..., hyp 1, refs of 1 ...]`` with the hypothesis segment of each
    pair and, per segment, the pair it is a reference of (-1 for hypotheses)."""
    segments: list[Sequence[str]] = []
    hyp_segment = np.empty(len(hyps), dtype=np.int64)
    ref_pair: list[int] = []
    for p, (h, rs) in enumerate(zip(hyps, refs, strict=True)):
        hyp_segment[p] = len(segments)
        segments.append(h)
        ref_pair.append(-1)
        segments.extend(rs)
        ref_pair.extend([p] * len(rs))
    return segments, hyp_segment, np.asarray(ref_pair, dtype=np.int64)
