"""ROUGE-1, ROUGE-2 and ROUGE-L with the exact semantics of Google's ``rouge-score`` package.

Tokenisation reproduces ``rouge_score.tokenize.tokenize``: lower-case, every run of characters
outside ``[a-z0-9]`` becomes a space, split, Porter-stem (nltk, as rouge-score) the tokens longer
than 3 characters. Each distinct word is stemmed once and interned as a small integer, so:

* the n-gram overlap ``sum_g min(count_pred(g), count_ref(g))`` is counted for a whole column at
  once with numpy (:mod:`ragmeter.metrics.lexical.ngrams`);
* ROUGE-L's LCS is rapidfuzz's bit-parallel LCS over the token id lists.

Token ids are small integers, where ``hash(int) == int``: rapidfuzz compares hashes, so equal
hashes mean equal tokens and the LCS is exact, not approximate.

Other languages (``language`` other than English) depart from rouge-score, which drops every
character outside ``[a-z0-9]`` (two identical Greek texts score 0 there): the text is NFC-normalised
and case-folded, tokens are letter/digit runs of any script with each CJK character a token
(:func:`ragmeter.core.language.words`), and tokens longer than 3 characters get the language's Snowball
stemmer (none when it has no stemmer).
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from rapidfuzz.distance import LCSseq

from ragmeter.core.context import ScoringContext, register_service
from ragmeter.core.errors import MetricError
from ragmeter.core.schema import Sample, ScoreColumn
from ragmeter.metrics.lexical.texts import References, _as_answer, _as_columns, _as_refs, sample_texts

#: column order of the arrays this module returns
ROUGE_KEYS = tuple(f"{t}_{m}" for t in ("rouge1", "rouge2", "rougeL")
                   for m in ("precision", "recall", "fmeasure"))

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_NON_ALNUM_NL = re.compile(r"[^a-z0-9\n]+")  # the same, sparing the newlines that join texts
_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789\n ")
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
_MAX_WORDS = 1 << 20  # vocabulary size after which the caches start afresh (bounded memory)


class RougeTokenizer:
    """rouge-score's ``DefaultTokenizer`` producing interned token ids, with a stem cache.

    Safe to share between threads (two runs scoring at once): a new token gets its id under a
    lock, so two tokens never share an id; the caches are never cleared in place (see
    :func:`tokenizer`), so the ids a batch holds stay valid while it is scored.

    Args:
        use_stemmer: Porter-stem tokens longer than 3 characters, as rouge-score does.
    """

    def __init__(self, use_stemmer: bool, language: str = "en") -> None:
        self.use_stemmer = use_stemmer
        self.language = language
        self._word_ids: dict[str, int] = {}   # raw word -> token id, -1 when the token is dropped
        self._token_ids: dict[str, int] = {}  # final (stemmed) token -> id
        self._stemmer: Any = None
        self._lock = threading.Lock()
        _ALL.add(self)

    @property
    def large(self) -> bool:
        """Whether the caches grew past their bound (:func:`tokenizer` then starts a new one)."""
        return len(self._word_ids) > _MAX_WORDS or len(self._token_ids) > _MAX_WORDS

    def _stem(self, word: str) -> str:
        if self.language != "en":
            from ragmeter.core.language import stem

            return stem(word, self.language) if self.use_stemmer and len(word) > 3 else word
        if self.use_stemmer and len(word) > 3:
            if self._stemmer is None:
                import ragmeter.core.language as lang

                self._stemmer = lang.porter_stemmer()
            return self._stemmer.stem(word)
        return word

    def _intern(self, word: str) -> int:
        token = self._stem(word)  # outside the lock: the slow part, and the same in every thread
        if self.language == "en" and not _VALID_TOKEN.match(token):
            tid = -1
        else:
            with self._lock:  # the id is the count of tokens so far: read and add in one step
                tid = self._token_ids.get(token)
                if tid is None:
                    tid = self._token_ids[token] = len(self._token_ids)
        self._word_ids[word] = tid
        return tid

    def _id(self, word: str) -> int:
        tid = self._word_ids.get(word)
        return self._intern(word) if tid is None else tid

    def tokens(self, text: str) -> list[str]:
        """The tokens rouge-score would produce for ``text`` (for inspection and tests)."""
        ids = self.ids(text)
        by_id = {v: k for k, v in self._token_ids.items()}
        return [by_id[i] for i in ids]

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        if self.language != "en":
            from ragmeter.core.language import words as unicode_words

            words = unicode_words(text)
        else:
            words = _NON_ALNUM.sub(" ", text.lower()).split()
        return self._word_list_ids(words)

    def _word_list_ids(self, words: list[str]) -> list[int]:
        out = list(map(self._word_ids.get, words))  # C-level loop: most words are cached
        if None in out:
            out = [i if i is not None else self._id(w) for w, i in zip(words, out, strict=True)]
        if -1 in out:  # a stem outside [a-z0-9]+ is dropped, as rouge-score does
            out = [i for i in out if i >= 0]
        return out  # type: ignore[return-value]

    def ids_many(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`ids` of many texts (English: the words of :func:`words_many`)."""
        if self.language != "en":
            return [self.ids(t) for t in texts]
        return [self._word_list_ids(w) for w in words_many(texts)]


def words_many(texts: Sequence[str]) -> list[list[str]]:
    """rouge-score's words (before stemming) of many texts; lower-casing and the character filter
    run once over the texts joined by newlines (kept by the filter, so each text comes out as on its
    own)."""
    if not texts:
        return []
    joined = "\n".join(t.replace("\n", " ") for t in texts).lower()
    other = set(joined) - _KEPT
    if len(other) <= 256:  # one str.replace per other character: far fewer steps than a match per word
        for ch in other:
            joined = joined.replace(ch, " ")
    else:
        joined = _NON_ALNUM_NL.sub(" ", joined)
    return [part.split() for part in joined.split("\n")]


_TOKENIZERS: dict[tuple[bool, str], RougeTokenizer] = {}


def tokenizer(use_stemmer: bool, language: str = "en") -> RougeTokenizer:
    """The process-wide tokenizer for this stemming mode and language (its stem cache is shared by
    all runs). Once its caches grew past their bound a new one takes its place; a batch keeps the
    one it started with, so its ids stay comparable (never cleared under a running batch)."""
    tok = _TOKENIZERS.get((use_stemmer, language))
    if tok is None or tok.large:
        tok = _TOKENIZERS[(use_stemmer, language)] = RougeTokenizer(use_stemmer, language)
    return tok


#: every tokenizer, so a forked worker can give each a fresh lock (another thread of the parent may
#: have held one at the moment of the fork)
_ALL: weakref.WeakSet[RougeTokenizer] = weakref.WeakSet()


def _after_fork() -> None:
    for tok in list(_ALL):
        tok._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _overlap_counts(pred: list[list[int]], target: list[list[int]], bigrams: bool = True) -> np.ndarray:
    """Per pair: [len_pred, len_target, unigram overlap, bigram overlap, LCS length]. The clipped
    uni- and bigram overlaps are counted for the whole column at once
    (:mod:`ragmeter.metrics.lexical.ngrams`); the LCS by rapidfuzz's bit-parallel algorithm.
    Without ``bigrams`` the bigram overlap is NaN (not counted)."""
    from ragmeter.metrics.lexical.ngrams import NgramColumns, clipped_matches

    n = len(pred)
    out = np.zeros((n, 5), dtype=np.float64)
    if n == 0:
        return out
    grams = NgramColumns([x for pair in zip(pred, target, strict=True) for x in pair], 2 if bigrams else 1)
    hyp = np.arange(0, 2 * n, 2, dtype=np.int64)
    ref = np.full(2 * n, -1, dtype=np.int64)
    ref[1::2] = np.arange(n, dtype=np.int64)
    out[:, 0] = grams.lens[0::2]
    out[:, 1] = grams.lens[1::2]
    out[:, 2] = uni = clipped_matches(grams, hyp, ref, 1)
    out[:, 3] = clipped_matches(grams, hyp, ref, 2) if bigrams else np.nan
    lcs = LCSseq.similarity
    out[:, 4] = [lcs(p, t) if u else 0 for p, t, u in zip(pred, target, uni.tolist(), strict=True)]
    return out


def _overlap_counts_en(tok: RougeTokenizer, uniq: list[str], predictions: Sequence[str], targets: Sequence[str],
                       bigrams: bool) -> np.ndarray:
    """:func:`_overlap_counts` of English pairs from token ids of the distinct texts: rouge-score's
    tokenizer runs on the column's UTF-8 bytes (:mod:`.byte_tokens`), each distinct word
    is stemmed once (the tokenizer's cache)."""
    from ragmeter.metrics.lexical import byte_tokens as B
    from ragmeter.metrics.lexical.ngrams import NgramColumns, clipped_matches

    n = len(predictions)
    out = np.zeros((n, 5), dtype=np.float64)
    if n == 0:
        return out
    ids, lens = B.column_ids(uniq, B.rouge_words, B.covered_rouge, words_many,
                             tok._id)
    index = {t: i for i, t in enumerate(uniq)}
    pt = np.fromiter(map(index.__getitem__, predictions), dtype=np.int64, count=n)
    tt = np.fromiter(map(index.__getitem__, targets), dtype=np.int64, count=n)
    starts = np.zeros(len(uniq), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    seg = np.empty(2 * n, dtype=np.int64)  # segments [pred 0, target 0, pred 1, target 1 ...]
    seg[0::2], seg[1::2] = pt, tt
    seg_lens = lens[seg]
    grams = NgramColumns.from_ids(ids[B.gather_index(starts[seg], seg_lens)], seg_lens, 2 if bigrams else 1)
    hyp = np.arange(0, 2 * n, 2, dtype=np.int64)
    ref = np.full(2 * n, -1, dtype=np.int64)
    ref[1::2] = np.arange(n, dtype=np.int64)
    out[:, 0] = lens[pt]
    out[:, 1] = lens[tt]
    out[:, 2] = uni = clipped_matches(grams, hyp, ref, 1)
    out[:, 3] = clipped_matches(grams, hyp, ref, 2) if bigrams else np.nan
    flat = ids.tolist()
    lcs = LCSseq.similarity
    ps, pl, ts, tl = starts[pt].tolist(), lens[pt].tolist(), starts[tt].tolist(), lens[tt].tolist()
    out[:, 4] = [lcs(flat[a:a + la], flat[b:b + lb]) if u else 0
                 for a, la, b, lb, u in zip(ps, pl, ts, tl, uni.tolist(), strict=True)]
    return out


def _fmeasure(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    # rouge_score.scoring.fmeasure, evaluated in the same order so the floats are identical
    den = p + r
    return np.divide(2 * p * r, den, out=np.zeros_like(den), where=den > 0)


def rouge_pairs(predictions: Sequence[str], targets: Sequence[str], use_stemmer: bool = True,
                language: str = "en", bigrams: bool = True) -> np.ndarray:
    """ROUGE of aligned (prediction, target) pairs (``language``: see the module docstring).
    ``bigrams=False`` leaves ROUGE-2 out (NaN): a run without rouge2 keys skips its counting.

    Returns:
        ``(n, 9)`` float64 array, columns in :data:`ROUGE_KEYS` order.
    """
    tok = tokenizer(use_stemmer, language)
    uniq = list(dict.fromkeys([*predictions, *targets]))
    if language == "en":
        c = _overlap_counts_en(tok, uniq, predictions, targets, bigrams)
    else:
        cache = dict(zip(uniq, tok.ids_many(uniq), strict=True))
        c = _overlap_counts([cache[x] for x in predictions], [cache[x] for x in targets], bigrams)
    lp, lt, uni, bi, lcs = c.T
    out = np.empty((len(c), 9), dtype=np.float64)
    # ROUGE-N (rouge_score._score_ngrams): overlap / max(count, 1)
    for col, overlap, n in ((0, uni, 1), (3, bi, 2)):
        prec = overlap / np.maximum(np.maximum(lp - n + 1, 0), 1)
        rec = overlap / np.maximum(np.maximum(lt - n + 1, 0), 1)
        out[:, col], out[:, col + 1], out[:, col + 2] = prec, rec, _fmeasure(prec, rec)
    # ROUGE-L (rouge_score._score_lcs): 0 when either side has no token
    empty = (lp == 0) | (lt == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(empty, 0.0, lcs / lp)
        rec = np.where(empty, 0.0, lcs / lt)
    out[:, 6], out[:, 7], out[:, 8] = prec, rec, _fmeasure(prec, rec)
    if not bigrams:
        out[:, 3:6] = np.nan
    return out


def rouge_multi(answers: Sequence[str], references: Sequence[Sequence[str]],
                use_stemmer: bool = True, language: str = "en",
                bigrams: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """ROUGE of each answer against its references, ``rouge_score.RougeScorer.score_multi`` style:
    per ROUGE type, the reference with the highest F-measure (the first one on ties) gives P, R, F.

    Returns:
        ``(values, best)``: values ``(n, 9)`` in :data:`ROUGE_KEYS` order, and ``best`` ``(n, 3)``
        the index of the chosen reference for rouge1, rouge2, rougeL.
    """
    counts = np.fromiter((len(r) for r in references), dtype=np.int64, count=len(references))
    flat_a = [a for a, n in zip(answers, counts, strict=True) for _ in range(n)]
    flat_r = [r for refs in references for r in refs]
    flat = rouge_pairs(flat_a, flat_r, use_stemmer, language, bigrams)
    n = len(answers)
    best = np.zeros((n, 3), dtype=np.int64)
    if n == 0 or bool((counts == 1).all()):
        return flat, best
    values = np.full((n, 9), np.nan)
    start = 0
    for i, cnt in enumerate(counts):
        block = flat[start:start + cnt]
        for t in range(3) if bigrams else (0, 2):
            j = int(np.argmax(block[:, 3 * t + 2]))
            best[i, t] = j
            values[i, 3 * t:3 * t + 3] = block[j, 3 * t:3 * t + 3]
        start += cnt
    return values, best


# ---- the public functions and the run's memo ---------------------------------------------------

class RougeScore(NamedTuple):
    """Precision, recall and F-measure of one ROUGE type (as ``rouge_score.scoring.Score``)."""

    precision: float
    recall: float
    fmeasure: float


def rouge_scores(answers: Sequence[str], references: Sequence[References], *,
                 use_stemmer: bool = True) -> dict[str, np.ndarray]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of a column of (answer, references) pairs.

    Values equal ``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"],
    use_stemmer=use_stemmer).score_multi(references, answer)``: for ROUGE-N, precision =
    overlap / (answer n-grams), recall = overlap / (reference n-grams), overlap counting each n-gram
    at most as often as it occurs on both sides; for ROUGE-L the same with the longest common token
    subsequence; F = 2PR / (P + R). Tokens: lower-case ``[a-z0-9]+`` runs, Porter-stemmed when
    longer than 3 characters if ``use_stemmer``. With several references, per ROUGE type the
    reference with the highest F-measure gives all three values.

    Returns:
        ``{"rouge1_precision": array, ..., "rougeL_fmeasure": array}`` (nine float64 arrays).

    Example:
        >>> rouge_scores(["the cats sat"], ["a cat sat"])["rouge1_recall"].tolist()
        [0.6666666666666666]
    """
    if not isinstance(use_stemmer, bool):
        raise MetricError(f"use_stemmer must be true or false, got {use_stemmer!r}")
    a, r = _as_columns(answers, references)
    values, _ = rouge_multi(a, r, use_stemmer)
    return {k: values[:, i] for i, k in enumerate(ROUGE_KEYS)}


def rouge(answer: str, reference: References, *, use_stemmer: bool = True) -> dict[str, RougeScore]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of one answer (rag-experiment-accelerator ``rouge{1,2,L}_{precision,recall,fmeasure}``).

    Same values as ``rouge_score.rouge_scorer.RougeScorer([...], use_stemmer=True).score(reference,
    answer)`` (``score_multi`` with several references); see :func:`rouge_scores`. Precision is
    relative to the answer and recall to the reference (rag-experiment-accelerator's prose has them swapped).
    Range [0, 1]; every value is 0 when either side has no token.

    Example:
        >>> s = rouge("The cat sat.", "A cat sat down.")
        >>> s["rouge1"]
        RougeScore(precision=0.6666666666666666, recall=0.5, fmeasure=0.5714285714285715)
    """
    cols = rouge_scores([_as_answer(answer)], [_as_refs(reference)], use_stemmer=use_stemmer)
    return {t: RougeScore(*(float(cols[f"{t}_{m}"][0]) for m in ("precision", "recall", "fmeasure")))
            for t in ("rouge1", "rouge2", "rougeL")}


class _LexicalMemo:
    """Per-run memo of ROUGE rows, so the nine ROUGE keys of a sample are computed once."""

    def __init__(self) -> None:
        self.rouge: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}

    def stats(self) -> dict[str, int]:
        return {"rouge_pairs": len(self.rouge)}

    def close(self) -> None:
        self.rouge.clear()


register_service("lexical_memo", lambda ctx: _LexicalMemo())


def _rouge_rows(samples: Sequence[Sample], ctx: ScoringContext | None, use_stemmer: bool,
                bigrams: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """ROUGE rows of the samples, remembered for the run's other ROUGE keys; ``bigrams=False``
    (a rouge1/rougeL key) skips ROUGE-2's counting, which a rouge2 key then adds."""
    import ragmeter.core.language as lang

    memo = ctx.service("lexical_memo").rouge if ctx is not None else {}
    options = ctx.options if ctx is not None else None
    answers, refs = sample_texts(samples, ctx)
    keys = [(use_stemmer, a, tuple(r), code)
            for a, r, code in zip(answers, refs, lang.of_many(samples, options), strict=True)]
    todo = [k for k in dict.fromkeys(keys) if k not in memo or (bigrams and np.isnan(memo[k][0][3]))]
    for code in dict.fromkeys(k[3] for k in todo):
        group = [k for k in todo if k[3] == code]
        values, best = rouge_multi([k[1] for k in group], [k[2] for k in group], use_stemmer, code, bigrams)
        for k, v, b in zip(group, values, best, strict=True):
            memo[k] = (v, b)
    return [memo[k] for k in keys]


def _rouge_batch_fn(key: str) -> Callable[..., ScoreColumn]:
    col = ROUGE_KEYS.index(key)

    def fn(samples: Sequence[Sample], ctx: ScoringContext | None = None, *,
           use_stemmer: bool = True) -> ScoreColumn:
        if not isinstance(use_stemmer, bool):
            raise MetricError(f"use_stemmer must be true or false, got {use_stemmer!r}")
        rows = _rouge_rows(samples, ctx, use_stemmer, bigrams=key.startswith("rouge2"))
        values = np.fromiter((v[col] for v, _ in rows), dtype=np.float64, count=len(rows))
        details = None
        if any(len(s.references) > 1 for s in samples):
            details = [{"best_reference": int(b[col // 3])} if len(s.references) > 1 else None
                       for s, (_, b) in zip(samples, rows, strict=True)]
        return ScoreColumn(values, None, details)

    fn.__name__ = f"{key}_batch"
    return fn


def _rouge_check(ctx: ScoringContext | None = None, **params: Any) -> str | None:
    if not isinstance(params.get("use_stemmer", True), bool):
        return f"use_stemmer must be true or false, got {params['use_stemmer']!r}"
    return None
