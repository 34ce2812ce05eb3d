"""Batch kernels of the lexical string metrics and the SQuAD-style answer metrics.

Every kernel takes two aligned lists of strings (``a[i]`` is compared with ``b[i]``) and returns a
``float64`` array with one value per pair. Kernels trust their inputs: validation happens once, in
:mod:`ragmeter.metrics.lexical`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import Hamming, JaroWinkler, LCSseq, Levenshtein

Kernel = Callable[[Sequence[str], Sequence[str]], np.ndarray]

#: rapidfuzz ``fuzz`` scorers selectable for ``fuzzy_score`` (rag-experiment-accelerator offers the first eight).
FUZZ_SCORERS = ("token_set_ratio", "ratio", "token_sort_ratio", "partial_ratio",
                "partial_token_sort_ratio", "partial_token_set_ratio", "WRatio", "QRatio",
                "token_ratio", "partial_token_ratio")


# --- rapidfuzz-backed kernels ------------------------------------------------------------------

def _cpdist(scorer: Any, a: Sequence[str], b: Sequence[str], **kwargs: Any) -> np.ndarray:
    if len(a) == 0:
        return np.empty(0, dtype=np.float64)
    # cpdist runs the pairs in C; float64 keeps the values bit-identical to per-pair calls
    return process.cpdist(a, b, scorer=scorer, dtype=np.float64, workers=1,
                          scorer_kwargs=kwargs or None)


def levenshtein_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    return _cpdist(Levenshtein.normalized_similarity, a, b)


def jaro_winkler_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    return _cpdist(JaroWinkler.normalized_similarity, a, b)


def lcsseq_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    return _cpdist(LCSseq.normalized_similarity, a, b)


def hamming_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    return _cpdist(Hamming.normalized_similarity, a, b, pad=True)


def fuzzy_kernel(a: Sequence[str], b: Sequence[str], scorer: str = "token_set_ratio") -> np.ndarray:
    return _cpdist(getattr(fuzz, scorer), a, b) / 100.0


# --- character multisets (textdistance Jaccard / Cosine, qval=1) --------------------------------

_MAX_CELLS = 1 << 22  # bound on the dense (strings x alphabet) count matrix of one chunk


def _codepoints(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """All code points of ``texts`` concatenated, and the length of each text."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    # surrogatepass: lone surrogates are valid Python str content and must not crash a run
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(joined, dtype=np.uint32), lengths


def char_overlap(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multiset intersection size of the characters of each pair, and both lengths.

    Returns ``(inter, len_a, len_b)`` as int64 arrays, with ``inter[i] = sum_c min(#c in a[i],
    #c in b[i])``. Characters are mapped to a compact alphabet once for the whole batch; counts are
    taken chunk by chunk so the dense count matrix stays small whatever the alphabet.
    """
    n = len(a)
    codes_a, len_a = _codepoints(a)
    codes_b, len_b = _codepoints(b)
    inter = np.zeros(n, dtype=np.int64)
    if n == 0 or (codes_a.size == 0 and codes_b.size == 0):
        return inter, len_a, len_b
    top = int(max(codes_a.max(initial=0), codes_b.max(initial=0))) + 1
    present = np.zeros(top, dtype=bool)
    present[codes_a] = True
    present[codes_b] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    ids_a, ids_b = rank[codes_a], rank[codes_b]
    vocab = int(present.sum())
    starts_a = np.concatenate(([0], np.cumsum(len_a)))
    starts_b = np.concatenate(([0], np.cumsum(len_b)))
    step = max(1, _MAX_CELLS // vocab)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        rows = hi - lo
        counts = []
        for ids, starts, lens in ((ids_a, starts_a, len_a), (ids_b, starts_b, len_b)):
            seg = ids[starts[lo]:starts[hi]]
            owner = np.repeat(np.arange(rows, dtype=np.int64), lens[lo:hi])
            counts.append(np.bincount(owner * vocab + seg, minlength=rows * vocab).reshape(rows, vocab))
        inter[lo:hi] = np.minimum(counts[0], counts[1]).sum(axis=1)
    return inter, len_a, len_b


def _equal_mask(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    return np.fromiter((x == y for x, y in zip(a, b, strict=True)), dtype=bool, count=len(a))


def jaccard_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    inter, la, lb = char_overlap(a, b)
    union = la + lb - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = inter / union
    # textdistance: normalized_similarity = 1 - (maximum - similarity) / maximum, maximum = 1
    out = 1 - (1 - sim)
    out[(la == 0) | (lb == 0)] = 0.0
    out[_equal_mask(a, b)] = 1.0  # identical strings (both empty included) are 1
    return out


def cosine_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    inter, la, lb = char_overlap(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = inter / np.sqrt(la.astype(np.float64) * lb.astype(np.float64))
    out = 1 - (1 - sim)
    out[(la == 0) | (lb == 0)] = 0.0
    out[_equal_mask(a, b)] = 1.0
    return out


# --- longest common substring ------------------------------------------------------------------

def longest_common_substring(a: str, b: str) -> int:
    """Length of the longest string that is a substring of both ``a`` and ``b``.

    Scans the start positions of the shorter string, keeping the best length found so far: a start
    can only improve on it if its next ``best + 1`` characters occur in the other string, which
    ``str.__contains__`` checks in C. Any start in ``[i, i + k]`` (``k <= best``) that improves
    covers the window ``[i + k, i + best + 1)``, so when that window is absent all ``k + 1`` starts
    are skipped at once. Improvements are found by galloping then bisection, so long shared
    passages cost O(log length) searches instead of one per character.
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    if b in a:
        return len(b)
    best, m, i = 0, len(b), 0
    while i + best < m:
        k = best >> 1
        if k and b[i + k:i + best + 1] not in a:
            i += k + 1
            continue
        if b[i:i + best + 1] in a:
            lo, step = best + 1, 1
            while i + lo + step <= m and b[i:i + lo + step] in a:
                lo += step
                step *= 2
            hi = min(lo + step, m - i + 1)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if b[i:i + mid] in a:
                    lo = mid
                else:
                    hi = mid
            best = lo
        i += 1
    return best


def lcsstr_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    out = np.empty(len(a), dtype=np.float64)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        top = max(len(x), len(y))
        if top == 0:
            out[k] = 1.0
        else:
            # textdistance: 1 - (maximum - similarity) / maximum
            out[k] = 1 - (top - longest_common_substring(x, y)) / top
    return out


# --- SQuAD-style answer normalisation, exact match, token F1 ------------------------------------

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop ASCII punctuation and the articles a/an/the,
    collapse whitespace (the official SQuAD v1.1/v2.0 evaluation script's ``normalize_answer``)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT_TABLE)).split())


_NORMALIZED: dict[str, str] = {}  # text -> normalize_answer(text), shared by exact_match and token_f1
_NORMALIZED_MAX = 1 << 18


def normalize_answers(texts: Sequence[str]) -> list[str]:
    """:func:`normalize_answer` of many texts. Lower-casing, punctuation removal (one
    ``str.replace`` per punctuation mark present: ``str.translate`` is slow on non-ASCII text) and
    the article expression run once over the texts joined by newlines (a newline is a word boundary
    and whitespace, as the ends of a text are, so each text comes out as on its own). Results are
    remembered (bounded), so exact_match and token_f1 of one run normalise each text once."""
    memo = _NORMALIZED
    # looked up once into a local mapping: another thread (a second run) may clear the shared memo
    found = {t: memo.get(t) for t in dict.fromkeys(texts)}
    todo = [t for t, v in found.items() if v is None]
    if todo:
        joined = normalized_joined(todo)
        new = dict(zip(todo, [" ".join(part.split()) for part in joined.split("\n")], strict=True))
        if len(memo) + len(todo) > _NORMALIZED_MAX:
            memo.clear()
        memo.update(new)
        found.update(new)
    return [found[t] for t in texts]  # type: ignore[misc]


def normalized_joined(texts: Sequence[str]) -> str:
    """The texts joined by newlines, normalised as :func:`normalize_answer` but for the final
    collapse of whitespace: the words of each line are ``normalize_answer(text).split()``."""
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:  # a newline inside a text: it is a space there
        joined = "\n".join(t.replace("\n", " ") for t in texts)
    joined = joined.lower()
    for ch in string.punctuation:
        if ch in joined:
            joined = joined.replace(ch, "")
    return _ARTICLES.sub(" ", joined)


_SQUAD_IDS: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}  # the last columns' token ids


def squad_token_ids(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the tokens of ``normalize_answer(text).split()`` for every text (one after the
    other) and tokens per text: on bytes for plain-ASCII texts (:mod:`.byte_tokens`), by
    :func:`normalize_answer` for the others. The last few columns are remembered, so exact_match
    and token_f1 of one batch tokenise it once."""
    from ragmeter.metrics.lexical import byte_tokens as B

    key = tuple(texts)
    got = _SQUAD_IDS.get(key)
    if got is None:
        got = B.column_ids(texts, B.squad_words, B.covered_squad, normalized_joined)
        while len(_SQUAD_IDS) >= 4:  # another thread may drop the same entry: tolerate it
            _SQUAD_IDS.pop(next(iter(_SQUAD_IDS.copy()), None), None)
        _SQUAD_IDS[key] = got
    return got


def _pair_ids(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids of the texts ``[*a, *b]``, tokens per text and where each text's tokens start."""
    ids, lens = squad_token_ids([*a, *b])
    starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    return ids, lens, starts


def _exact_from_ids(ids: np.ndarray, lens: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """1.0 where text ``i`` and text ``n + i`` have the same tokens in the same order."""
    from ragmeter.metrics.lexical.byte_tokens import gather_index

    la, lb = lens[:n], lens[n:]
    same = la == lb
    cand = np.flatnonzero(same & (la > 0))
    if cand.size:
        ga = gather_index(starts[cand], la[cand])
        gb = gather_index(starts[n + cand], la[cand])
        owner = np.repeat(np.arange(cand.size), la[cand])
        differ = np.bincount(owner[ids[ga] != ids[gb]], minlength=cand.size) > 0
        same[cand[differ]] = False
    return same.astype(np.float64)


def _pairs_digest(a: Sequence[str], b: Sequence[str]) -> bytes:
    """A digest of the column pair (BLAKE2b of the texts and their lengths): the key under which
    token F1 leaves its by-product, exact match, without holding the texts."""
    import hashlib

    h = hashlib.blake2b(digest_size=32)
    texts = [*a, *b]
    h.update(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)).tobytes())
    h.update("".join(texts).encode("utf-8", "surrogatepass"))
    return h.digest()


#: exact match of the column pairs whose token F1 was just computed (its token ids give it for a few
#: milliseconds): a run scores token_f1 and then exact_match batch by batch, more batches than the
#: token-id memo keeps. Bounded; an entry is a byte per pair.
_EXACT_BY_F1: dict[bytes, np.ndarray] = {}
_EXACT_BY_F1_MAX = 256


def exact_match_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """1.0 where the SQuAD-normalised texts are equal (the same tokens in the same order)."""
    n = len(a)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if _EXACT_BY_F1:
        got = _EXACT_BY_F1.pop(_pairs_digest(a, b), None)
        if got is not None:
            return got.astype(np.float64)
    ids, lens, starts = _pair_ids(a, b)
    return _exact_from_ids(ids, lens, starts, n)


def token_f1_kernel(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """SQuAD token F1 of each pair: ``2PR / (P + R)`` over the shared normalised tokens (multiset
    intersection), 1 when both sides are empty, 0 when one is."""
    from ragmeter.metrics.lexical.byte_tokens import gather_index
    from ragmeter.metrics.lexical.ngrams import NgramColumns, clipped_matches

    n = len(a)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    ids, lens, starts = _pair_ids(a, b)
    if len(_EXACT_BY_F1) >= _EXACT_BY_F1_MAX:  # another thread may drop the same entry: tolerate it
        _EXACT_BY_F1.pop(next(iter(_EXACT_BY_F1.copy()), b""), None)
    _EXACT_BY_F1[_pairs_digest(a, b)] = _exact_from_ids(ids, lens, starts, n).astype(bool)
    seg = np.empty(2 * n, dtype=np.int64)  # segments [a0, b0, a1, b1 ...]
    seg[0::2] = np.arange(n)
    seg[1::2] = np.arange(n, 2 * n)
    seg_lens = lens[seg]
    grams = NgramColumns.from_ids(ids[gather_index(starts[seg], seg_lens)], seg_lens, 1)
    same = clipped_matches(grams, np.arange(0, 2 * n, 2, dtype=np.int64),
                           np.repeat(np.arange(n, dtype=np.int64), 2) * np.tile([0, 1], n) - np.tile([1, 0], n),
                           1).astype(np.float64)
    lp = grams.lens[0::2].astype(np.float64)
    lg = grams.lens[1::2].astype(np.float64)
    out = np.zeros(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = 1.0 * same / lp
        recall = 1.0 * same / lg
        f1 = (2 * precision * recall) / (precision + recall)
    ok = same > 0
    out[ok] = f1[ok]
    empty = (lp == 0) | (lg == 0)
    out[empty] = (lp[empty] == lg[empty]).astype(np.float64)  # SQuAD v2.0: both empty agree
    return out


# --- keyword containment ------------------------------------------------------------------------

_NON_WORD = re.compile(r"[^\w\s]|_")


def normalize_keyword_text(text: str) -> str:
    """Case-fold, turn punctuation and symbols into spaces, collapse whitespace."""
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def keyword_kernel(a: Sequence[str], b: Sequence[str], whole_words: bool = False) -> np.ndarray:
    """1.0 where the normalised keyword ``b[i]`` occurs in the normalised answer ``a[i]``, 0.0 where
    it does not, NaN where the keyword is empty after normalisation (no keyword to look for)."""
    out = np.empty(len(a), dtype=np.float64)
    for k, (answer, keyword) in enumerate(zip(a, b, strict=True)):
        kw = normalize_keyword_text(keyword)
        if not kw:
            out[k] = np.nan
            continue
        text = normalize_keyword_text(answer)
        found = f" {kw} " in f" {text} " if whole_words else kw in text
        out[k] = 1.0 if found else 0.0
    return out
