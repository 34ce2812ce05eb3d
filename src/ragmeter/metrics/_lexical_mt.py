"""Sentence-level BLEU and chrF with sacrebleu's exact semantics, computed for a whole batch.

The integer statistics (n-gram matches, totals, lengths) are counted here, for a whole column and
faster than sacrebleu's per-sentence objects (chrF packs each character n-gram into one integer and
matches them with numpy); the BLEU score is then computed by sacrebleu's own
``BLEU.compute_bleu`` from those statistics, and the chrF F-score by a transcription of
``CHRF._compute_f_score`` (same operations in the same order, so the floats are identical; the
tests compare both with sacrebleu). Several references follow sacrebleu: BLEU clips n-gram counts by
their maximum over the references and uses the closest reference length; chrF keeps the statistics
of the reference with the best F-score.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ragmeter.errors import MetricError

# --- sacrebleu's 13a tokenizer -----------------------------------------------------------------
# sacrebleu.tokenizers.tokenizer_re.TokenizerRegexp applies four substitutions. The first one pads
# every character of a class with spaces; its matches are single characters, so a translation table
# does the same in C without re's per-match template expansion. The space sacrebleu also pads is left
# out: the final whitespace collapse undoes that padding and no later expression can tell one space
# from three. The three other expressions are sacrebleu's.
_PAD_13A = {c: f" {chr(c)} " for lo, hi in ((0x7B, 0x7E), (0x5B, 0x60), (0x21, 0x26), (0x28, 0x2B),
                                             (0x3A, 0x40), (0x2F, 0x2F)) for c in range(lo, hi + 1)}
_RE_13A = (
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
)


def tokenize_13a(line: str) -> str:
    """sacrebleu's ``13a`` tokenizer (mteval-v13a), output identical to ``Tokenizer13a()(line)``."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                .replace("&gt;", ">"))
    line = f" {line} ".translate(_PAD_13A)
    for regex, repl in _RE_13A:
        line = regex.sub(repl, line)
    return " ".join(line.split())


def _bleu_tokenizer(name: str) -> Callable[[str], str]:
    if name == "13a":
        return tokenize_13a
    from sacrebleu.metrics.bleu import BLEU

    if name not in BLEU.TOKENIZERS:
        raise MetricError(f"unknown BLEU tokenizer {name!r}; valid: {sorted(BLEU.TOKENIZERS)}")
    return BLEU(tokenize=name).tokenizer  # type: ignore[no-any-return]


# --- shared n-gram helpers ---------------------------------------------------------------------

def _matches(hyp: Counter, ref: Counter) -> int:
    """sum over n-grams of min(count in hyp, count in ref): the clipped match count."""
    common = hyp.keys() & ref.keys()
    return sum(map(min, map(hyp.__getitem__, common), map(ref.__getitem__, common)))


def _word_ngrams(tokens: list[str], max_order: int) -> list[Counter]:
    out: list[Counter] = [Counter(tokens)]
    for n in range(2, max_order + 1):
        out.append(Counter(zip(*[tokens[i:] for i in range(n)], strict=False)))
    return out


class _Packer:
    """Exact integer keys for all character n-grams (n = 1..order) of code-point sequences.

    The characters of one sample (its answer and references) are renumbered 0..V-1; an n-gram becomes
    its ids in ``bits`` bits each, shifted left by ``tag_bits``, or-ed with n. Distinct n-grams of
    any orders get distinct keys, so counting and matching them is sorting integers.
    ``Packer.fit`` returns None when the keys would not fit in 64 bits (very large alphabets).
    """

    def __init__(self, bits: int, order: int) -> None:
        self.order = order
        self.shift = np.uint64(bits)
        self.tag_bits = order.bit_length()
        self.tag_shift = np.uint64(self.tag_bits)
        self.tag_mask = np.uint64((1 << self.tag_bits) - 1)

    @classmethod
    def fit(cls, symbols: np.ndarray, order: int) -> tuple[_Packer, np.ndarray] | None:
        alphabet, ids = np.unique(symbols, return_inverse=True)
        bits = max(1, (len(alphabet) - 1).bit_length())
        if bits * order + order.bit_length() > 64:
            return None
        return cls(bits, order), ids.astype(np.uint64).ravel()

    def counts(self, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct n-gram keys of ``seq`` and their counts."""
        parts, g = [], seq
        for n in range(1, self.order + 1):
            if n > 1:
                g = (g[:-1] << self.shift) | seq[n - 1:]
            if g.size == 0:
                break
            parts.append((g << self.tag_shift) | np.uint64(n))
        if not parts:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(parts), return_counts=True)

    def matches(self, hyp: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray]) -> list[int]:
        """Per order 1..order: sum over n-grams of min(count in hyp, count in ref)."""
        common, ih, ir = np.intersect1d(hyp[0], ref[0], assume_unique=True, return_indices=True)
        per_order = np.bincount((common & self.tag_mask).astype(np.int64),
                                weights=np.minimum(hyp[1][ih], ref[1][ir]), minlength=self.order + 1)
        return [int(x) for x in per_order[1:]]


# --- BLEU --------------------------------------------------------------------------------------

def _closest_ref_len(hyp_len: int, ref_lens: list[int]) -> int:
    # sacrebleu BLEU._get_closest_ref_len: smallest difference, then the shorter reference
    best_diff, best_len = -1, -1
    for ref_len in ref_lens:
        diff = abs(hyp_len - ref_len)
        if best_diff == -1 or diff < best_diff:
            best_diff, best_len = diff, ref_len
        elif diff == best_diff and ref_len < best_len:
            best_len = ref_len
    return best_len


def check_bleu_params(max_ngram_order: int, smooth_method: str, tokenize: str) -> None:
    from sacrebleu.metrics.bleu import BLEU

    if not isinstance(max_ngram_order, int) or max_ngram_order < 1:
        raise MetricError(f"max_ngram_order must be a positive integer, got {max_ngram_order!r}")
    if smooth_method not in BLEU.SMOOTH_DEFAULTS:
        raise MetricError(f"unknown smooth_method {smooth_method!r}; valid: {sorted(BLEU.SMOOTH_DEFAULTS)}")
    if tokenize not in BLEU.TOKENIZERS:
        raise MetricError(f"unknown BLEU tokenizer {tokenize!r}; valid: {sorted(BLEU.TOKENIZERS)}")


def bleu_batch(answers: Sequence[str], references: Sequence[Sequence[str]], *,
               max_ngram_order: int = 4, smooth_method: str = "exp", smooth_value: float | None = None,
               lowercase: bool = False, tokenize: str = "13a", effective_order: bool = True) -> np.ndarray:
    """Sentence BLEU of each answer against its references, on sacrebleu's 0-100 scale.

    Equal to ``sacrebleu.BLEU(max_ngram_order=..., smooth_method=..., smooth_value=...,
    lowercase=..., tokenize=..., effective_order=...).sentence_score(answer, refs).score``.
    """
    from sacrebleu.metrics.bleu import BLEU

    check_bleu_params(max_ngram_order, smooth_method, tokenize)
    tok = _bleu_tokenizer(tokenize)
    seen: dict[str, list[str]] = {}

    def tokens(text: str) -> list[str]:
        got = seen.get(text)
        if got is None:
            # BLEU._preprocess_segment: optional lower-casing, strip the right end, tokenize
            got = seen[text] = tok((text.lower() if lowercase else text).rstrip()).split()
        return got

    out = np.empty(len(answers), dtype=np.float64)
    n_max = max_ngram_order
    for k, (answer, refs) in enumerate(zip(answers, references, strict=True)):
        ref_toks = [tokens(r) for r in refs]
        ref_ngrams = _word_ngrams(ref_toks[0], n_max)
        for extra in ref_toks[1:]:
            # several references: each n-gram is clipped by its largest count in any of them
            for merged, counts in zip(ref_ngrams, _word_ngrams(extra, n_max), strict=True):
                for gram, c in counts.items():
                    if merged[gram] < c:
                        merged[gram] = c
        hyp = tokens(answer)
        hyp_len = len(hyp)
        correct = [_matches(h, r) for h, r in zip(_word_ngrams(hyp, n_max), ref_ngrams, strict=True)]
        total = [max(hyp_len - n + 1, 0) for n in range(1, n_max + 1)]
        ref_len = _closest_ref_len(hyp_len, [len(t) for t in ref_toks])
        out[k] = BLEU.compute_bleu(correct, total, hyp_len, ref_len, smooth_method=smooth_method,
                                   smooth_value=smooth_value, effective_order=effective_order,
                                   max_ngram_order=n_max).score
    return out


# --- chrF --------------------------------------------------------------------------------------

_CHRF_PUNCTS = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _chrf_words(sent: str) -> list[str]:
    # sacrebleu CHRF._remove_punctuation: split one leading or trailing punctuation mark off words
    out: list[str] = []
    for w in sent.split():
        if len(w) == 1:
            out.append(w)
        elif w[-1] in _CHRF_PUNCTS:
            out += [w[:-1], w[-1]]
        elif w[0] in _CHRF_PUNCTS:
            out += [w[0], w[1:]]
        else:
            out.append(w)
    return out


def _char_line(text: str, whitespace: bool) -> str:
    return text if whitespace else "".join(text.split())


def _counter_char_stats(hyp: str, refs: list[str], order: int) -> list[list[int]]:
    """[n_hyp, n_ref, n_match] per character order and reference, with Counters of substrings
    (sacrebleu's way; used when the alphabet is too large to pack n-grams into 64 bits)."""
    def grams(line: str) -> list[Counter]:
        return [Counter([line[i:i + n] for i in range(len(line) - n + 1)]) for n in range(1, order + 1)]

    hyp_grams = grams(hyp)
    out = []
    for ref in refs:
        stats: list[int] = []
        for h, r in zip(hyp_grams, grams(ref), strict=True):
            stats += [sum(h.values()) if r else 0, sum(r.values()), _matches(h, r)]
        out.append(stats)
    return out


def _char_stats(hyp: str, refs: list[str], order: int) -> list[list[int]]:
    """[n_hyp, n_ref, n_match] for character orders 1..order, per reference (n-grams packed into
    integers by :class:`_Packer`; Counters of substrings for alphabets too large to pack)."""
    if order == 0:
        return [[] for _ in refs]
    texts = [hyp, *refs]
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    fitted = _Packer.fit(np.frombuffer(joined, dtype=np.uint32), order)
    if fitted is None:
        return _counter_char_stats(hyp, refs, order)
    packer, ids = fitted
    ends = np.cumsum([len(t) for t in texts])
    hyp_counts = packer.counts(ids[:ends[0]])
    out = []
    for j, ref in enumerate(refs):
        matched = packer.matches(hyp_counts, packer.counts(ids[ends[j]:ends[j + 1]]))
        stats: list[int] = []
        for n in range(1, order + 1):
            n_ref = max(len(ref) - n + 1, 0)
            # sacrebleu CHRF._get_match_statistics: no hyp count without a reference n-gram
            stats += [max(len(hyp) - n + 1, 0) if n_ref else 0, n_ref, matched[n - 1]]
        out.append(stats)
    return out


def _word_grams(text: str, word_order: int) -> list[Counter]:
    words = _chrf_words(text)
    return [Counter([" ".join(words[i:i + n]) for i in range(len(words) - n + 1)])
            for n in range(1, word_order + 1)]


def chrf_f_score(stats: Sequence[int], order: int, beta: float, eps_smoothing: bool) -> float:
    """chrF on the 0-100 scale from ``[hyp, ref, match]`` counts per order (sacrebleu's
    ``CHRF._compute_f_score``, transcribed operation by operation)."""
    eps = 1e-16
    score = 0.0
    effective_order = 0
    factor = beta ** 2
    avg_prec, avg_rec = 0.0, 0.0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i: 3 * i + 3]
        prec = n_match / n_hyp if n_hyp > 0 else eps
        rec = n_match / n_ref if n_ref > 0 else eps
        denom = factor * prec + rec
        score += ((1 + factor) * prec * rec / denom) if denom > 0 else eps
        if n_hyp > 0 and n_ref > 0:
            avg_prec += prec
            avg_rec += rec
            effective_order += 1
    if eps_smoothing:
        return 100 * score / order
    if effective_order == 0:
        avg_prec = avg_rec = 0.0
    else:
        avg_prec /= effective_order
        avg_rec /= effective_order
    if avg_prec + avg_rec:
        score = (1 + factor) * avg_prec * avg_rec
        score /= ((factor * avg_prec) + avg_rec)
        return 100 * score
    return 0.0


def check_chrf_params(char_order: int, word_order: int, beta: Any) -> None:
    if not isinstance(char_order, int) or char_order < 0:
        raise MetricError(f"char_order must be a non-negative integer, got {char_order!r}")
    if not isinstance(word_order, int) or word_order < 0:
        raise MetricError(f"word_order must be a non-negative integer, got {word_order!r}")
    if char_order + word_order == 0:
        raise MetricError("char_order + word_order must be at least 1")
    if not isinstance(beta, int | float) or beta <= 0:
        raise MetricError(f"beta must be positive, got {beta!r}")


def chrf_batch(answers: Sequence[str], references: Sequence[Sequence[str]], *, char_order: int = 6,
               word_order: int = 0, beta: float = 2, lowercase: bool = False, whitespace: bool = False,
               eps_smoothing: bool = False) -> np.ndarray:
    """Sentence chrF (chrF++ with ``word_order=2``) of each answer against its references, on
    sacrebleu's 0-100 scale: equal to ``sacrebleu.CHRF(...).sentence_score(answer, refs).score``."""
    check_chrf_params(char_order, word_order, beta)
    order = char_order + word_order
    words: dict[str, list[Counter]] = {}

    def prep(text: str) -> str:
        return text.lower() if lowercase else text

    def word_grams(text: str) -> list[Counter]:
        got = words.get(text)
        if got is None:
            got = words[text] = _word_grams(text, word_order)
        return got

    out = np.empty(len(answers), dtype=np.float64)
    for k, (answer, refs) in enumerate(zip(answers, references, strict=True)):
        hyp = prep(answer)
        ref_texts = [prep(r) for r in refs]
        per_ref = _char_stats(_char_line(hyp, whitespace), [_char_line(r, whitespace) for r in ref_texts],
                              char_order)
        best: list[int] = []
        best_f = -1.0
        for ref, stats in zip(ref_texts, per_ref, strict=True):
            if word_order:
                for h, r in zip(word_grams(hyp), word_grams(ref), strict=True):
                    stats += [sum(h.values()) if r else 0, sum(r.values()), _matches(h, r)]
            f = chrf_f_score(stats, order, beta, eps_smoothing)
            if f > best_f:  # sacrebleu keeps the first reference with the best F-score
                best_f, best = f, stats
        out[k] = chrf_f_score(best, order, beta, eps_smoothing)
    return out
